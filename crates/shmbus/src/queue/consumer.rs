//! The receiving end: [`Consumer`].

use std::sync::Arc;
use std::time::Duration;

use super::error::{QueueRecvError, QueueRecvTimeoutError, QueueTryRecvError};
use super::layout::MappedCells;
use super::protocol::{as_uninit, Pop, Ring};
use super::shared::{status_of, Endpoint, QueueStatus};
use crate::endpoint::forms::wait_forms;
use crate::endpoint::receive::{impl_receive, Waited};
use crate::error::{too_small, RecvIntoSliceError};
use crate::sync::spin_hint;
use crate::wait::{Wait, WaitPolicy};
use crate::waitset::{WaitHandle, Waitable};

/// How often `try_recv` re-reads a cell whose producer is mid-copy before reporting empty.
const PENDING_SPINS: u32 = 64;

/// Pops the next message into `buf`, replacing its contents: the copy goes into `buf`'s spare
/// capacity (reserved once to the max message length), with no memset and no allocation once
/// `buf` has that capacity.
#[inline]
fn pop_into(ring: &Ring<'_, MappedCells>, me: usize, buf: &mut Vec<u8>) -> Pop {
    let max = ring.max();
    buf.clear();
    buf.reserve(max);
    let pop = ring.try_pop_into(me, &mut buf.spare_capacity_mut()[..max]);
    if let Pop::Got(n) = pop {
        // SAFETY: the ring initialized the first `n <= max` bytes of the spare capacity.
        unsafe { buf.set_len(n) };
    }
    pop
}

/// Pops the next message into the start of `out` if it fits there, else into `spill`'s
/// spare capacity (reserved to the max message length): [`Ring::try_pop_fit`]. On
/// `Got(n)` with `n <= out.len()` the message is `out[..n]`; a longer one is in `spill`'s
/// spare capacity, not yet in its length.
#[inline]
fn pop_fit(ring: &Ring<'_, MappedCells>, me: usize, out: &mut [u8], spill: &mut Vec<u8>) -> Pop {
    let max = ring.max();
    spill.clear();
    // Allocates only the first time a consumer's buffer is too small for a message (when
    // the caller's buffer holds `max` bytes, never).
    if out.len() < max {
        spill.reserve(max);
    }
    let spare = spill.spare_capacity_mut();
    let spare_len = if out.len() < max { max } else { 0 };
    ring.try_pop_fit(me, as_uninit(out), &mut spare[..spare_len])
}

/// The receiving end. `Send`, not `Sync`: one thread at a time; make one per thread.
#[derive(Debug)]
pub struct Consumer {
    pub(super) ep: Endpoint,
    /// Receive buffer for the allocating variants (its capacity grown to `max` on first use;
    /// handed out with a large message, then made again: [`Consumer::owned`]).
    pub(super) scratch: Vec<u8>,
    /// A message taken off the queue by a receive into a buffer too small for it
    /// ([`Consumer::try_recv_into_slice`]): every receive returns it before popping again.
    /// Never empty (an empty message fits any buffer).
    pub(super) held: Option<Vec<u8>>,
}

impl Consumer {
    /// The next message, owned, waiting as `wait` says: [`try_recv`](Self::try_recv),
    /// [`recv`](Self::recv), [`recv_timeout`](Self::recv_timeout) and
    /// [`recv_deadline`](Self::recv_deadline) are this with each [`Wait`].
    #[inline]
    pub fn recv_with(&mut self, wait: Wait) -> Result<Vec<u8>, Waited<QueueRecvError>> {
        if let Some(m) = self.held.take() {
            return Ok(m);
        }
        let mut buf = std::mem::take(&mut self.scratch);
        let r = self.pop_with(wait, |ring, me| pop_into(ring, me, &mut buf));
        self.owned(buf, r)
    }

    /// What a receive into the scratch buffer `buf` got, as an owned message. A message that
    /// fills at least half of `buf` is `buf` itself (a large message is copied once, out of
    /// the ring; the next receive reserves a new scratch buffer); a smaller one is copied out
    /// of it, so that it does not hold a buffer of `max_message_len` bytes.
    fn owned<E>(&mut self, mut buf: Vec<u8>, got: Result<usize, E>) -> Result<Vec<u8>, E> {
        match got {
            Ok(n) if n >= buf.capacity() / 2 => {
                buf.truncate(n);
                Ok(buf)
            }
            got => {
                let r = got.map(|n| buf[..n].to_vec());
                self.scratch = buf;
                r
            }
        }
    }

    wait_forms! {
        /// Receives the next message if there is one now.
        fn try_recv, recv, recv_timeout, recv_deadline (&mut self) = recv_with -> Vec<u8>;
        errors (QueueTryRecvError, QueueRecvError, QueueRecvTimeoutError)
    }

    /// The next message into `buf`, replacing its contents (it is left empty when nothing is
    /// received), waiting as `wait` says; returns the message's length. Reuses `buf`'s
    /// allocation: allocates nothing once `buf` has a capacity of
    /// [`Consumer::max_message_len`] bytes (the first call reserves it).
    #[inline]
    pub fn recv_into_with(&mut self, buf: &mut Vec<u8>, wait: Wait) -> Result<usize, Waited<QueueRecvError>> {
        match wait {
            Wait::Now => Ok(self.try_recv_into_now(buf)?),
            wait => match self.give_held(buf) {
                Some(n) => Ok(n),
                None => self.block_pop(wait, |ring, me| pop_into(ring, me, buf)),
            },
        }
    }

    wait_forms! {
        /// Receives the next message into `buf` if there is one now (see
        /// [`recv_into_with`](Self::recv_into_with)); returns its length.
        fn try_recv_into, recv_into, recv_into_timeout, recv_into_deadline (&mut self, buf: &mut Vec<u8>)
            = recv_into_with now try_recv_into_now -> usize;
        errors (QueueTryRecvError, QueueRecvError, QueueRecvTimeoutError)
    }

    /// [`try_recv_into`](Self::try_recv_into): what [`recv_into_with`](Self::recv_into_with)
    /// does for [`Wait::Now`], without a `Waited` between (the form a spinning consumer
    /// polls).
    fn try_recv_into_now(&mut self, buf: &mut Vec<u8>) -> Result<usize, QueueTryRecvError> {
        if let Some(n) = self.give_held(buf) {
            return Ok(n);
        }
        self.try_pop(|ring, me| pop_into(ring, me, buf))
    }

    /// The next message into the start of `buf`, waiting as `wait` says: one copy, straight
    /// out of the queue's cell, and no allocation. Returns the message's length (`buf[..n]`
    /// holds it).
    ///
    /// A pop cannot be undone (other consumers move past a taken cell), so a message longer
    /// than `buf` is taken whole all the same, into this consumer's own buffer (allocated on
    /// first use, `max_message_len` bytes), and [`RecvIntoSliceError::TooSmall`] says its
    /// length: the next receive of any form on this consumer returns it before taking
    /// anything else from the queue. It leaves with the consumer: dropping the consumer
    /// drops it.
    #[inline]
    pub fn recv_into_slice_with(
        &mut self,
        buf: &mut [u8],
        wait: Wait,
    ) -> Result<usize, RecvIntoSliceError<Waited<QueueRecvError>>> {
        if let Some(n) = self.held_into_slice(buf) {
            return n;
        }
        let mut spill = std::mem::take(&mut self.scratch);
        let r = self.pop_with(wait, |ring, me| pop_fit(ring, me, buf, &mut spill));
        self.keep_spilled(spill, buf.len(), r)
    }

    wait_forms! {
        /// Receives the next message into the start of `buf` if there is one now (see
        /// [`recv_into_slice_with`](Self::recv_into_slice_with)).
        fn try_recv_into_slice, recv_into_slice, recv_into_slice_timeout, recv_into_slice_deadline
            (&mut self, buf: &mut [u8]) = recv_into_slice_with -> usize;
        errors (QueueTryRecvError, QueueRecvError, QueueRecvTimeoutError) slice
    }

    /// One receive with `pop` (a pop into the caller's buffer), waiting as `wait` says.
    #[inline]
    fn pop_with(
        &mut self,
        wait: Wait,
        pop: impl FnMut(&Ring<'_, MappedCells>, usize) -> Pop,
    ) -> Result<usize, Waited<QueueRecvError>> {
        match wait {
            Wait::Now => self.try_pop(pop).map_err(Waited::from),
            wait => self.block_pop(wait, pop),
        }
    }

    /// One non-blocking receive: `pop` until it takes a message, finds the queue empty, or
    /// finds it corrupt or truncated.
    #[inline]
    fn try_pop(
        &mut self,
        mut pop: impl FnMut(&Ring<'_, MappedCells>, usize) -> Pop,
    ) -> Result<usize, QueueTryRecvError> {
        let ring = self.ep.ring();
        let mut spins = 0;
        loop {
            match pop(&ring, self.ep.index) {
                Pop::Got(n) => {
                    self.ep.watch.set(None);
                    self.ep.counter.message(n);
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
                        return Err(QueueTryRecvError::Truncated);
                    }
                    return Err(QueueTryRecvError::Empty);
                }
                Pop::Corrupt(_) if self.ep.truncated() => return Err(QueueTryRecvError::Truncated),
                Pop::Corrupt(c) => return Err(QueueTryRecvError::Corrupt(c)),
            }
        }
    }

    /// One blocking receive with `pop`, until `wait`'s deadline.
    fn block_pop(
        &mut self,
        wait: Wait,
        mut pop: impl FnMut(&Ring<'_, MappedCells>, usize) -> Pop,
    ) -> Result<usize, Waited<QueueRecvError>> {
        let shared = Arc::clone(&self.ep.shared);
        let ring = shared.ring().counted(self.ep.counter);
        let r = self.ep.block(&ring.ctl.not_empty.0, wait.deadline(), |ep| loop {
            match pop(&ring, ep.index) {
                Pop::Got(n) => return Some(Ok(n)),
                Pop::Empty(stall) => {
                    if !ep.observe(stall) {
                        // About to sleep: a truncated file never delivers.
                        return ep.truncated().then_some(Err(None));
                    }
                }
                Pop::Corrupt(c) => return Some(Err(Some(c))),
            }
        });
        self.ep.watch.set(None);
        match r {
            Some(Ok(n)) => {
                self.ep.counter.message(n);
                Ok(n)
            }
            Some(Err(_)) | None if self.ep.truncated() => Err(Waited::Failed(QueueRecvError::Truncated)),
            Some(Err(Some(c))) => Err(Waited::Failed(QueueRecvError::Corrupt(c))),
            // A wait for ever ends without a message only on a truncated file (checked first).
            Some(Err(None)) | None if wait == Wait::Forever => Err(Waited::Failed(QueueRecvError::Truncated)),
            Some(Err(None)) | None => Err(Waited::TimedOut),
        }
    }

    /// A blocking iterator over received messages: each item is [`Consumer::recv`]'s result.
    /// It never ends (a queue has no end); an error is yielded and the iteration goes on.
    pub fn iter(&mut self) -> Iter<'_> {
        Iter::new(self)
    }

    /// An iterator over the messages there are now: it yields [`Consumer::try_recv`]'s
    /// messages until the queue is empty; an error other than `Empty` is yielded once, then
    /// it ends.
    pub fn try_iter(&mut self) -> TryIter<'_> {
        TryIter::new(self)
    }

    /// The held message (see [`Consumer::held`]) put in `buf` in place of its contents,
    /// with its length; `None` if there is none.
    fn give_held(&mut self, buf: &mut Vec<u8>) -> Option<usize> {
        let held = self.held.take()?;
        buf.clear();
        buf.extend_from_slice(&held);
        // Its allocation (`max` bytes of capacity) serves as the scratch buffer again.
        self.scratch = held;
        Some(buf.len())
    }

    /// The held message into `buf`, if there is one: `Some(Ok(len))`, or `Some(TooSmall)`
    /// (still held) if it does not fit.
    fn held_into_slice<E>(&mut self, buf: &mut [u8]) -> Option<Result<usize, RecvIntoSliceError<E>>> {
        let held = self.held.as_ref()?;
        let n = held.len();
        let Some(dst) = buf.get_mut(..n) else {
            return Some(Err(too_small(n, buf.len())));
        };
        dst.copy_from_slice(held);
        self.scratch = self.held.take().unwrap_or_default();
        Some(Ok(n))
    }

    /// After a pop into the caller's buffer (`cap` bytes) with `spill` as the spill buffer:
    /// a message that went to `spill` is held, and reported as too small; `spill` is the
    /// scratch buffer again otherwise.
    fn keep_spilled<E>(
        &mut self,
        mut spill: Vec<u8>,
        cap: usize,
        r: Result<usize, E>,
    ) -> Result<usize, RecvIntoSliceError<E>> {
        match r {
            Ok(n) if n > cap => {
                // SAFETY: the ring initialized the first `n <= max` bytes of `spill`'s spare
                // capacity (`pop_fit` chose it as `n` did not fit the caller's buffer).
                unsafe { spill.set_len(n) };
                self.held = Some(spill);
                Err(too_small(n, cap))
            }
            r => {
                self.scratch = spill;
                Ok(r?)
            }
        }
    }

    /// Whether a receive could make progress now (the queue is not empty, or this consumer
    /// holds a message a too-small buffer did not take).
    pub fn has_message(&self) -> bool {
        self.held.is_some() || self.ep.shared.ring().pop_ready().is_ok()
    }

    /// How blocking calls wait (default: spin about 20 µs, then sleep).
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.ep.policy = policy;
    }

    /// Largest message, in bytes: the capacity `*_into` buffers are given.
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

/// Consumers are ready when a message (or a dead producer's abandoned cell) is at the head.
impl Waitable for Consumer {
    fn wait_handle(&self) -> WaitHandle<'_> {
        let ctl = self.ep.shared.ctl();
        WaitHandle { event: &ctl.not_empty.0 }
    }

    fn is_ready(&self) -> bool {
        self.held.is_some() || self.ep.ready(self.ep.shared.ring().pop_ready())
    }

    fn recheck_interval(&self) -> Option<Duration> {
        self.ep.wait_interval(self.ep.shared.ring().pop_ready().err().flatten())
    }

    fn recheck(&self) -> bool {
        self.ep.recheck_way(self.ep.shared.ring().pop_ready())
    }
}

/// [`Consumer::iter`]: blocking receives, for ever.
///
/// An `Iterator` whose items are `Result<Vec<u8>, QueueRecvError>`.
pub type Iter<'a> = crate::endpoint::iter::Iter<&'a mut Consumer>;

/// [`Consumer::try_iter`]: the messages there are now.
///
/// An `Iterator` whose items are `Result<Vec<u8>, QueueRecvError>`.
pub type TryIter<'a> = crate::endpoint::iter::TryIter<&'a mut Consumer>;

impl_receive!(Consumer: Vec<u8>, usize, QueueRecvError; Queue, "message length is not the size of the consumer's payload type");
