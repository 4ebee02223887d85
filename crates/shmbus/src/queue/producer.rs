//! The sending end: [`Producer`].

use std::sync::Arc;
use std::time::Duration;

#[cfg(doc)] // for intra-doc links
use super::channel::Queue;
use super::channel::{status_of, Endpoint, QueueStatus};
use super::error::{SendError, TrySendError};
use super::ring::Push;
use crate::wait::{Deadline, WaitPolicy};
use crate::waitset::{WaitHandle, Waitable};

/// The sending end. `Send`, not `Sync`: one thread at a time; make one per thread.
#[derive(Debug)]
pub struct Producer {
    pub(super) ep: Endpoint,
}

impl Producer {
    /// Sends `msg` if there is room now; otherwise hands it back in the error.
    pub fn try_send<T: AsRef<[u8]>>(&mut self, msg: T) -> Result<(), TrySendError<T>> {
        let bytes = msg.as_ref();
        let max = self.ep.shared.layout.max;
        if bytes.len() > max {
            return Err(TrySendError::TooLarge { len: bytes.len(), max, msg });
        }
        match self.ep.shared.ring().try_push(self.ep.index, bytes, self.ep.had_room.get()) {
            Push::Done => {
                self.ep.watch.set(None);
                self.ep.had_room.set(true);
                Ok(())
            }
            Push::Full(stall) => {
                self.ep.observe(stall);
                self.ep.had_room.set(false);
                if self.ep.truncated() {
                    return Err(TrySendError::Truncated(msg));
                }
                Err(TrySendError::Full(msg))
            }
            Push::Corrupt(_) if self.ep.truncated() => Err(TrySendError::Truncated(msg)),
            Push::Corrupt(what) => Err(TrySendError::Corrupt { what, msg }),
        }
    }

    /// Sends `msg`, waiting as long as it takes for room.
    pub fn send<T: AsRef<[u8]>>(&mut self, msg: T) -> Result<(), SendError<T>> {
        self.send_deadline(msg, Deadline::NEVER)
    }

    /// Sends `msg`, waiting at most `timeout` for room; hands it back on timeout.
    pub fn send_timeout<T: AsRef<[u8]>>(&mut self, msg: T, timeout: Duration) -> Result<(), SendError<T>> {
        self.send_deadline(msg, Deadline::after(timeout))
    }

    fn send_deadline<T: AsRef<[u8]>>(&mut self, msg: T, deadline: Deadline) -> Result<(), SendError<T>> {
        let bytes = msg.as_ref();
        let max = self.ep.shared.layout.max;
        if bytes.len() > max {
            return Err(SendError::TooLarge { len: bytes.len(), max, msg });
        }
        let shared = Arc::clone(&self.ep.shared);
        let ring = shared.ring();
        let r = self.ep.block(&ring.ctl.not_full.0, deadline, |ep| {
            match ring.try_push(ep.index, bytes, ep.had_room.get()) {
                Push::Done => {
                    ep.had_room.set(true);
                    Some(Ok(()))
                }
                Push::Full(stall) => {
                    ep.observe(stall);
                    ep.had_room.set(false);
                    // About to sleep: a truncated file never makes room.
                    ep.truncated().then_some(Err(None))
                }
                Push::Corrupt(what) => Some(Err(Some(what))),
            }
        });
        self.ep.watch.set(None);
        match r {
            Some(Ok(())) => Ok(()),
            Some(Err(_)) | None if self.ep.truncated() => Err(SendError::Truncated(msg)),
            Some(Err(Some(what))) => Err(SendError::Corrupt { what, msg }),
            Some(Err(None)) | None => Err(SendError::Timeout(msg)),
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
    pub fn max_element_size(&self) -> usize {
        self.ep.shared.layout.max
    }

    /// Messages the queue holds.
    pub fn capacity(&self) -> u64 {
        self.ep.shared.layout.capacity
    }

    /// A status snapshot (see [`Queue::status`]).
    pub fn status(&self) -> QueueStatus {
        status_of(&self.ep.shared)
    }
}

/// Producers are ready when there is room for a message.
impl Waitable for Producer {
    fn wait_handle(&self) -> WaitHandle<'_> {
        // SAFETY: see `Shared::ring`; the control block lives as long as `self`.
        let ctl = unsafe { &*self.ep.shared.ctl };
        WaitHandle { event: &ctl.not_full.0 }
    }

    fn is_ready(&self) -> bool {
        match self.ep.shared.ring().push_ready() {
            Ok(()) => true,
            // Not ready, unless the file was truncated: the call reports that.
            Err(stall) => self.ep.observe(stall) || self.ep.truncated(),
        }
    }

    fn recheck_interval(&self) -> Option<Duration> {
        self.ep.wait_interval()
    }
}
