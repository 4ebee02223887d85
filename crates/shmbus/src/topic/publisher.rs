//! Sending: the publisher endpoint and its in-place loans.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::channel::Inner;
use super::error::TopicSendError;
use crate::stats::Counter;
use crate::sys::monotonic_ns;

/// Largest copy-send that claims its sequence number before writing (see `send`).
const CLAIM_FIRST_MAX: usize = 4096;

/// Publishes to a topic. `Send`, not `Sync`: one thread at a time; make one per thread.
#[derive(Debug)]
pub struct Publisher {
    inner: Arc<Inner>,
    id: usize,
    counter: Counter,
}

impl Publisher {
    /// The publisher registered as participant `id` of the topic `inner`.
    pub(super) fn new(inner: Arc<Inner>, id: usize) -> Publisher {
        let counter = inner.own_counter(id);
        Publisher { inner, id, counter }
    }

    /// Wakes the sleepers and counts the message.
    #[inline(always)]
    fn announce(&self, len: usize) {
        if self.inner.event().notify() {
            self.counter.futex_wake();
        }
        self.counter.message(len);
    }

    fn acquire(&self) -> Result<usize, TopicSendError> {
        match self.inner.shared().acquire_slot(self.id) {
            Ok(s) => Ok(s),
            Err(_) => self.acquire_slow(),
        }
    }

    /// Every slot looked busy. Out of line, so the send path stays small.
    #[cold]
    #[inline(never)]
    fn acquire_slow(&self) -> Result<usize, TopicSendError> {
        let sh = self.inner.shared();
        // Maybe the dead hold slots: reclaim, then try once more; then once more
        // honouring only the pins and writer marks a live participant can own
        // (garbage a corrupt or hostile peer wrote is cleared).
        self.inner.reclaim_dead();
        sh.acquire_slot(self.id).or_else(|_| sh.acquire_slot_audited(self.id)).map_err(|_| {
            self.counter.full();
            // Failing anyway: the slow path may say why the slots look taken.
            if self.inner.was_truncated() {
                TopicSendError::Truncated
            } else {
                TopicSendError::AllPinned { slots: self.inner.layout().slots as usize }
            }
        })
    }

    /// Claims, commits and announces slot `s`, whose `len` bytes are written.
    fn finish(&self, s: usize, len: usize) -> u64 {
        let inner = &*self.inner;
        let sh = inner.shared();
        let me = sh.participants.entry(self.id);
        let k = sh.claim_seq(me);
        sh.commit(me, s, k, len, monotonic_ns());
        self.announce(len);
        k
    }

    /// Copies `data` into the topic as the next message. Returns its sequence number. Never
    /// waits: the oldest unpinned slot is overwritten.
    pub fn send(&mut self, data: &[u8]) -> Result<u64, TopicSendError> {
        let max = self.inner.layout().slot_size as usize;
        if data.len() > max {
            return Err(TopicSendError::TooLarge { len: data.len(), max });
        }
        let s = self.acquire()?;
        let inner = &*self.inner;
        let sh = inner.shared();
        if data.len() > CLAIM_FIRST_MAX {
            sh.begin_write(s);
            // SAFETY: `s` came from acquire_slot (so `s < slots` and we hold its writer bits)
            // and `data.len() <= slot_size` was checked above.
            unsafe { sh.data.write(s, data) };
            return Ok(self.finish(s, data.len()));
        }
        // Small: claim and stamp first, so that the reader's line of the slot is written in
        // one burst (`seq = 0`, payload, `len`, `ts`, `seq = k`) with no locked instruction in
        // between, which would let a polling reader take the line back half-way.
        let me = sh.participants.entry(self.id);
        let k = sh.claim_seq(me);
        let ts = monotonic_ns();
        sh.begin_write(s);
        // SAFETY: as above.
        unsafe { sh.data.write(s, data) };
        sh.commit(me, s, k, data.len(), ts);
        self.announce(data.len());
        Ok(k)
    }

    /// Loans a slot to write a message in place (zero copy). The loan is the whole slot
    /// ([`max_message_len`](Self::max_message_len) bytes); write into it,
    /// [`truncate`](Loan::truncate) it to the message's length, then [`Loan::send`] it.
    /// Dropping it unsent publishes nothing.
    pub fn loan(&mut self) -> Result<Loan<'_>, TopicSendError> {
        let s = self.acquire()?;
        self.inner.shared().begin_write(s);
        let len = self.max_message_len();
        Ok(Loan { publisher: self, slot: s, len, sent: false })
    }

    /// Test hook: acquires a slot, writes `junk` into it and claims a sequence number, then
    /// returns *without committing*, as a publisher killed at that instant would leave it.
    /// Only for crash tests; the slot stays held until this process dies and is reclaimed.
    /// Not part of the API.
    #[cfg(any(test, feature = "internals"))]
    #[doc(hidden)]
    pub fn debug_claim_without_commit(&mut self, junk: &[u8]) -> Result<u64, TopicSendError> {
        let s = self.acquire()?;
        let n = junk.len().min(self.max_message_len());
        self.inner.shared().begin_write(s);
        // SAFETY: as in `send`: we hold slot `s` and `n <= slot_size`.
        unsafe { self.inner.shared().data.write(s, &junk[..n]) };
        let sh = self.inner.shared();
        Ok(sh.claim_seq(sh.participants.entry(self.id)))
    }

    /// Largest message in bytes.
    pub fn max_message_len(&self) -> usize {
        self.inner.layout().slot_size as usize
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        // No slot can be held here: loans borrow the publisher mutably.
        self.inner.participants().release(self.id);
    }
}

/// A slot loaned for writing in place, from [`Publisher::loan`]. Derefs to the whole slot
/// (`max_message_len` bytes, with whatever an earlier message left there) until
/// [`truncate`](Loan::truncate)d. Not visible to anyone until sent; dropping it unsent
/// publishes nothing.
#[derive(Debug)]
pub struct Loan<'a> {
    publisher: &'a mut Publisher,
    slot: usize,
    len: usize,
    sent: bool,
}

impl Loan<'_> {
    /// Shortens the message to its first `len` bytes. Like [`Vec::truncate`], a `len` at
    /// least the current length does nothing.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Publishes the loan (its `len()` bytes). Returns the sequence number.
    pub fn send(mut self) -> Result<u64, TopicSendError> {
        self.sent = true;
        Ok(self.publisher.finish(self.slot, self.len))
    }
}

impl Deref for Loan<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let sh = self.publisher.inner.shared();
        // SAFETY: we hold the slot's writer bits, so no one else writes it, and it is
        // `slot_size` bytes (at least `len`) inside the mapping which the publisher keeps
        // alive.
        unsafe { std::slice::from_raw_parts(sh.data.slot_ptr(self.slot), self.len) }
    }
}

impl DerefMut for Loan<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        let sh = self.publisher.inner.shared();
        // SAFETY: as in `deref`; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(sh.data.slot_ptr(self.slot), self.len) }
    }
}

impl Drop for Loan<'_> {
    fn drop(&mut self) {
        if !self.sent {
            self.publisher.inner.shared().abandon_slot(self.slot);
        }
    }
}
