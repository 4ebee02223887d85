//! The sending end: [`Producer`].

use std::sync::Arc;
use std::time::Duration;

use super::error::{QueueSendError, QueueSendTimeoutError, QueueTrySendError};
use super::protocol::Push;
use super::shared::{status_of, Endpoint, QueueStatus};
use crate::endpoint::forms::wait_forms;
use crate::endpoint::send::{impl_transmit, Refused};
use crate::wait::{Deadline, Wait, WaitPolicy};
use crate::waitset::{WaitHandle, Waitable};

/// How a blocking send ended, before it is put in the caller's error type.
enum Sent {
    Failed(QueueSendError),
    TimedOut,
}

/// The sending end. `Send`, not `Sync`: one thread at a time; make one per thread.
#[derive(Debug)]
pub struct Producer {
    pub(super) ep: Endpoint,
}

impl Producer {
    /// Sends `msg`, waiting for room as `wait` says. Refused with no room now
    /// ([`Wait::Now`]) or at the deadline, nothing was sent: the message is still the
    /// caller's to retry.
    pub fn send_with(&mut self, msg: &[u8], wait: Wait) -> Result<(), Refused<QueueSendError, QueueTrySendError>> {
        match wait {
            Wait::Now => self.try_send_now(msg).map_err(Refused::from),
            wait => self.send_until(msg, wait.deadline()).map_err(|e| match e {
                Sent::Failed(e) => Refused::Failed(e),
                // An untimed wait ends without room only on a truncated file (checked first).
                Sent::TimedOut if wait == Wait::Forever => Refused::Failed(QueueSendError::Truncated),
                Sent::TimedOut => Refused::TimedOut,
            }),
        }
    }

    wait_forms! {
        /// Sends `msg` if there is room now. On [`QueueTrySendError::Full`] nothing was sent;
        /// the message is still the caller's to retry.
        fn try_send, send, send_timeout, send_deadline (&mut self, msg: &[u8]) = send_with now try_send_now -> ();
        errors (QueueTrySendError, QueueSendError, QueueSendTimeoutError)
    }

    /// [`try_send`](Self::try_send): what [`send_with`](Self::send_with) does for
    /// [`Wait::Now`].
    fn try_send_now(&mut self, msg: &[u8]) -> Result<(), QueueTrySendError> {
        let max = self.ep.shared.layout().max;
        if msg.len() > max {
            return Err(QueueTrySendError::TooLarge { len: msg.len(), max });
        }
        match self.ep.ring().try_push(self.ep.index, msg, self.ep.had_room.get()) {
            Push::Done => {
                self.ep.watch.set(None);
                self.ep.had_room.set(true);
                self.ep.counter.message(msg.len());
                Ok(())
            }
            Push::Full(stall) => {
                self.ep.counter.full();
                self.ep.observe(stall);
                self.ep.had_room.set(false);
                if self.ep.truncated() {
                    return Err(QueueTrySendError::Truncated);
                }
                Err(QueueTrySendError::Full)
            }
            Push::Corrupt(_) if self.ep.truncated() => Err(QueueTrySendError::Truncated),
            Push::Corrupt(c) => Err(QueueTrySendError::Corrupt(c)),
        }
    }

    fn send_until(&mut self, msg: &[u8], deadline: Deadline) -> Result<(), Sent> {
        let max = self.ep.shared.layout().max;
        if msg.len() > max {
            return Err(Sent::Failed(QueueSendError::TooLarge { len: msg.len(), max }));
        }
        let shared = Arc::clone(&self.ep.shared);
        let ring = shared.ring().counted(self.ep.counter);
        let mut found_full = false;
        let r = self.ep.block(&ring.ctl.not_full.0, deadline, |ep| {
            match ring.try_push(ep.index, msg, ep.had_room.get()) {
                Push::Done => {
                    ep.had_room.set(true);
                    Some(Ok(()))
                }
                Push::Full(stall) => {
                    found_full = true;
                    ep.observe(stall);
                    ep.had_room.set(false);
                    // About to sleep: a truncated file never makes room.
                    ep.truncated().then_some(Err(None))
                }
                Push::Corrupt(c) => Some(Err(Some(c))),
            }
        });
        self.ep.watch.set(None);
        if found_full {
            self.ep.counter.full();
        }
        match r {
            Some(Ok(())) => {
                self.ep.counter.message(msg.len());
                Ok(())
            }
            Some(Err(_)) | None if self.ep.truncated() => Err(Sent::Failed(QueueSendError::Truncated)),
            Some(Err(Some(c))) => Err(Sent::Failed(QueueSendError::Corrupt(c))),
            Some(Err(None)) | None => Err(Sent::TimedOut),
        }
    }

    /// Whether a message could be sent now (the queue is not full).
    pub fn has_room(&self) -> bool {
        self.ep.shared.ring().push_ready().is_ok()
    }

    /// How blocking calls wait (default: spin about 20 µs, then sleep).
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.ep.policy = policy;
    }

    /// Largest message, in bytes.
    pub fn max_message_len(&self) -> usize {
        self.ep.shared.layout().max
    }

    /// Messages the queue holds.
    pub fn capacity(&self) -> u64 {
        self.ep.shared.layout().capacity
    }

    /// A status snapshot (see [`Queue::status`](super::Queue::status)).
    pub fn status(&self) -> QueueStatus {
        status_of(&self.ep.shared)
    }
}

/// Producers are ready when there is room for a message.
impl Waitable for Producer {
    fn wait_handle(&self) -> WaitHandle<'_> {
        let ctl = self.ep.shared.ctl();
        WaitHandle { event: &ctl.not_full.0 }
    }

    fn is_ready(&self) -> bool {
        self.ep.ready(self.ep.shared.ring().push_ready())
    }

    fn recheck_interval(&self) -> Option<Duration> {
        self.ep.wait_interval(self.ep.shared.ring().push_ready().err().flatten())
    }

    fn recheck(&self) -> bool {
        self.ep.recheck_way(self.ep.shared.ring().push_ready())
    }
}

impl_transmit!(Producer: (), QueueSendError);
