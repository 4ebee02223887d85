//! The receiving end: [`Consumer`].

use std::sync::Arc;
use std::time::Duration;

#[cfg(doc)] // for intra-doc links
use super::channel::Queue;
use super::channel::{status_of, Endpoint, QueueStatus};
use super::error::{RecvError, TryRecvError};
use super::ring::Pop;
use crate::sync::spin_hint;
use crate::wait::{Deadline, WaitPolicy};
use crate::waitset::{WaitHandle, Waitable};

/// How often `try_recv` re-reads a cell whose producer is mid-copy before reporting empty.
const PENDING_SPINS: u32 = 64;

/// The receiving end. `Send`, not `Sync`: one thread at a time; make one per thread.
#[derive(Debug)]
pub struct Consumer {
    pub(super) ep: Endpoint,
    /// Receive buffer for the allocating variants (grown to `max` on first use).
    pub(super) scratch: Vec<u8>,
}

impl Consumer {
    /// Receives the next message if there is one now.
    pub fn try_recv(&mut self) -> Result<Vec<u8>, TryRecvError> {
        let mut buf = std::mem::take(&mut self.scratch);
        buf.resize(self.ep.shared.layout.max, 0);
        let r = self.try_recv_into(&mut buf).map(|n| buf[..n].to_vec());
        self.scratch = buf;
        r
    }

    /// Receives the next message into `buf` if there is one now; returns its length.
    /// `buf` must hold [`Consumer::max_element_size`] bytes. Allocates nothing.
    pub fn try_recv_into(&mut self, buf: &mut [u8]) -> Result<usize, TryRecvError> {
        let max = self.ep.shared.layout.max;
        if buf.len() < max {
            return Err(TryRecvError::BufferTooSmall { len: buf.len(), needed: max });
        }
        let ring = self.ep.shared.ring();
        let mut spins = 0;
        loop {
            match ring.try_pop(self.ep.index, buf) {
                Pop::Got(n) => {
                    self.ep.watch.set(None);
                    return Ok(n);
                }
                Pop::Empty(Some(stall))
                    if spins < PENDING_SPINS && ring.still_stalled(&stall) && stall.is_writing() =>
                {
                    // A producer is mid-copy at the head: it is usually done in nanoseconds.
                    spins += 1;
                    spin_hint();
                }
                Pop::Empty(stall) => {
                    if self.ep.observe(stall) {
                        continue;
                    }
                    if self.ep.truncated() {
                        return Err(TryRecvError::Truncated);
                    }
                    return Err(TryRecvError::Empty);
                }
                Pop::Corrupt(_) if self.ep.truncated() => return Err(TryRecvError::Truncated),
                Pop::Corrupt(what) => return Err(TryRecvError::Corrupt { what }),
            }
        }
    }

    /// Receives the next message, waiting as long as it takes.
    pub fn recv(&mut self) -> Result<Vec<u8>, RecvError> {
        self.recv_vec(Deadline::NEVER)
    }

    /// Receives the next message, waiting at most `timeout`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Vec<u8>, RecvError> {
        self.recv_vec(Deadline::after(timeout))
    }

    /// Receives the next message into `buf` (at least [`Consumer::max_element_size`] bytes),
    /// waiting as long as it takes; returns its length. Allocates nothing.
    pub fn recv_into(&mut self, buf: &mut [u8]) -> Result<usize, RecvError> {
        self.recv_deadline(buf, Deadline::NEVER)
    }

    /// Like [`Consumer::recv_into`], waiting at most `timeout`.
    pub fn recv_into_timeout(&mut self, buf: &mut [u8], timeout: Duration) -> Result<usize, RecvError> {
        self.recv_deadline(buf, Deadline::after(timeout))
    }

    fn recv_vec(&mut self, deadline: Deadline) -> Result<Vec<u8>, RecvError> {
        let mut buf = std::mem::take(&mut self.scratch);
        buf.resize(self.ep.shared.layout.max, 0);
        let r = self.recv_deadline(&mut buf, deadline).map(|n| buf[..n].to_vec());
        self.scratch = buf;
        r
    }

    fn recv_deadline(&mut self, buf: &mut [u8], deadline: Deadline) -> Result<usize, RecvError> {
        let max = self.ep.shared.layout.max;
        if buf.len() < max {
            return Err(RecvError::BufferTooSmall { len: buf.len(), needed: max });
        }
        let shared = Arc::clone(&self.ep.shared);
        let ring = shared.ring();
        let r = self.ep.block(&ring.ctl.not_empty.0, deadline, |ep| loop {
            match ring.try_pop(ep.index, buf) {
                Pop::Got(n) => return Some(Ok(n)),
                Pop::Empty(stall) => {
                    if !ep.observe(stall) {
                        // About to sleep: a truncated file never delivers.
                        return ep.truncated().then_some(Err(None));
                    }
                }
                Pop::Corrupt(what) => return Some(Err(Some(what))),
            }
        });
        self.ep.watch.set(None);
        match r {
            Some(Ok(n)) => Ok(n),
            Some(Err(_)) | None if self.ep.truncated() => Err(RecvError::Truncated),
            Some(Err(Some(what))) => Err(RecvError::Corrupt { what }),
            Some(Err(None)) | None => Err(RecvError::Timeout),
        }
    }

    /// Whether a receive could make progress now (the queue is not empty).
    pub fn has_message(&self) -> bool {
        self.ep.shared.ring().pop_ready().is_ok()
    }

    /// How blocking calls wait (default: spin about 20 µs, then sleep).
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.ep.policy = policy;
    }

    /// Largest message, in bytes: the size `*_into` buffers need.
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

/// Consumers are ready when a message (or a dead producer's abandoned cell) is at the head.
impl Waitable for Consumer {
    fn wait_handle(&self) -> WaitHandle<'_> {
        // SAFETY: see `Shared::ring`; the control block lives as long as `self`.
        let ctl = unsafe { &*self.ep.shared.ctl };
        WaitHandle { event: &ctl.not_empty.0 }
    }

    fn is_ready(&self) -> bool {
        match self.ep.shared.ring().pop_ready() {
            Ok(()) => true,
            // Not ready, unless the file was truncated: the call reports that.
            Err(stall) => self.ep.observe(stall) || self.ep.truncated(),
        }
    }

    fn recheck_interval(&self) -> Option<Duration> {
        self.ep.wait_interval()
    }
}
