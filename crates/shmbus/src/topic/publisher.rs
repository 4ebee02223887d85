//! Publishing: the publisher endpoint and its in-place loans.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::channel::Inner;
use super::error::PublishError;
use crate::sys::monotonic_ns;

/// Largest copy-publish that claims its sequence number before writing (see `publish`).
const CLAIM_FIRST_MAX: usize = 4096;

/// Publishes to a topic. `Send`, not `Sync`: one thread at a time; make one per thread.
#[derive(Debug)]
pub struct Publisher {
    inner: Arc<Inner>,
    id: usize,
}

impl Publisher {
    /// The publisher registered as participant `id` of the topic `inner`.
    pub(super) fn new(inner: Arc<Inner>, id: usize) -> Publisher {
        Publisher { inner, id }
    }

    fn acquire(&self) -> Result<usize, PublishError> {
        match self.inner.shared().acquire_slot(self.id) {
            Ok(s) => Ok(s),
            Err(_) => self.acquire_slow(),
        }
    }

    /// Every slot looked busy. Out of line, so the publish path stays small.
    #[cold]
    #[inline(never)]
    fn acquire_slow(&self) -> Result<usize, PublishError> {
        let sh = self.inner.shared();
        // Maybe the dead hold slots: reclaim, then try once more; then once more
        // honouring only the pins and writer marks a live participant can own
        // (garbage a corrupt or hostile peer wrote is cleared).
        self.inner.reclaim_dead();
        sh.acquire_slot(self.id).or_else(|_| sh.acquire_slot_audited(self.id)).map_err(|_| {
            // Failing anyway: the slow path may say why the slots look taken.
            if self.inner.seg.was_truncated() {
                PublishError::Truncated
            } else {
                PublishError::AllPinned { slots: self.inner.layout.slots as usize }
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
        inner.event().notify();
        k
    }

    /// Copies `data` into the topic as the next message. Returns its sequence number.
    pub fn publish(&mut self, data: &[u8]) -> Result<u64, PublishError> {
        let max = self.inner.layout.slot_size as usize;
        if data.len() > max {
            return Err(PublishError::TooLarge { len: data.len(), max });
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
        inner.event().notify();
        Ok(k)
    }

    /// Loans a slot to write a message in place (zero copy). Write into the loan, then
    /// [`Loan::send`] it; dropping it unsent publishes nothing.
    pub fn loan(&mut self) -> Result<Loan<'_>, PublishError> {
        let s = self.acquire()?;
        self.inner.shared().begin_write(s);
        Ok(Loan { publisher: self, slot: s, sent: false })
    }

    /// Test hook: acquires a slot, writes `junk` into it and claims a sequence number, then
    /// returns *without committing*, as a publisher killed at that instant would leave it.
    /// Only for crash tests; the slot stays held until this process dies and is reclaimed.
    #[doc(hidden)]
    pub fn debug_claim_without_commit(&mut self, junk: &[u8]) -> Result<u64, PublishError> {
        let s = self.acquire()?;
        let n = junk.len().min(self.slot_size());
        self.inner.shared().begin_write(s);
        // SAFETY: as in `publish`: we hold slot `s` and `n <= slot_size`.
        unsafe { self.inner.shared().data.write(s, &junk[..n]) };
        let sh = self.inner.shared();
        Ok(sh.claim_seq(sh.participants.entry(self.id)))
    }

    /// Largest message in bytes.
    pub fn slot_size(&self) -> usize {
        self.inner.layout.slot_size as usize
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        // No slot can be held here: loans borrow the publisher mutably.
        self.inner.seg.participants().release(self.id);
    }
}

/// A slot loaned for writing in place. Derefs to the whole slot (`slot_size` bytes, with
/// whatever an earlier message left there). Not visible to anyone until sent.
#[derive(Debug)]
pub struct Loan<'a> {
    publisher: &'a mut Publisher,
    slot: usize,
    sent: bool,
}

impl Loan<'_> {
    /// Publishes the first `len` bytes of the loan. Returns the sequence number.
    pub fn send(mut self, len: usize) -> Result<u64, PublishError> {
        let max = self.publisher.slot_size();
        if len > max {
            return Err(PublishError::TooLarge { len, max }); // drop releases the slot
        }
        self.sent = true;
        Ok(self.publisher.finish(self.slot, len))
    }
}

impl Deref for Loan<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let sh = self.publisher.inner.shared();
        // SAFETY: we hold the slot's writer bits, so no one else writes it, and it is
        // `slot_size` bytes inside the mapping which the publisher keeps alive.
        unsafe { std::slice::from_raw_parts(sh.data.slot_ptr(self.slot), sh.data.slot_size) }
    }
}

impl DerefMut for Loan<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        let sh = self.publisher.inner.shared();
        // SAFETY: as in `deref`; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(sh.data.slot_ptr(self.slot), sh.data.slot_size) }
    }
}

impl Drop for Loan<'_> {
    fn drop(&mut self) {
        if !self.sent {
            self.publisher.inner.shared().abandon_slot(self.slot);
        }
    }
}
