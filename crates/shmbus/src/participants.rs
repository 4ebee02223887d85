//! The participant table: who is using a segment, and reclaiming what the dead held.
//!
//! Every endpoint (publisher, subscriber, producer, worker, …) claims one 64-byte entry.
//! The entry's first word packs `pid << 8 | state`, so an entry is claimed *with* its owner's
//! pid in one compare-and-swap: there is no instant at which an entry is taken but its owner
//! unknown. The owner then stores its start time and becomes `ACTIVE`.
//!
//! An entry whose owner is dead (pid gone, start time changed, or zombie) is reclaimed by
//! whoever notices first: it CASes the state to `RECLAIMING` (with its own pid), runs the
//! kind's cleanup (which must be idempotent: a reclaimer may itself die and be redone), and
//! frees the entry. Kinds keep their per-endpoint recovery state in `aux`.

use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::sys::ProcessId;

/// Entries per segment.
pub const PARTICIPANTS: usize = 128;
/// Bytes per entry.
pub const PARTICIPANT_SIZE: usize = 64;

const FREE: u64 = 0;
const CLAIMING: u64 = 1;
const ACTIVE: u64 = 2;
const RECLAIMING: u64 = 3;

/// One participant entry.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct Participant {
    /// `pid << 8 | state`.
    word: AtomicU64,
    start_time: AtomicU64,
    role: AtomicU32,
    _reserved: AtomicU32,
    /// Kind-specific recovery state (what this endpoint holds right now).
    pub(crate) aux: [AtomicU64; 5],
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Participant>() == PARTICIPANT_SIZE);

impl Participant {
    /// A free entry (for heap-backed tables in models and tests).
    #[allow(dead_code)]
    pub(crate) fn new() -> Participant {
        Participant {
            word: AtomicU64::new(0),
            start_time: AtomicU64::new(0),
            role: AtomicU32::new(0),
            _reserved: AtomicU32::new(0),
            aux: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// A snapshot of one entry, for listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParticipantInfo {
    /// Entry index.
    pub index: usize,
    /// Owner process.
    pub process: ProcessId,
    /// Kind-specific role number.
    pub role: u32,
}

/// A view of a segment's participant table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ParticipantTable<'a> {
    entries: &'a [Participant],
}

impl<'a> ParticipantTable<'a> {
    /// # Safety
    /// `base` points to `PARTICIPANTS` entries that stay mapped for `'a`.
    pub(crate) unsafe fn from_raw(base: *mut u8) -> ParticipantTable<'a> {
        // SAFETY: per the contract; entries are atomics, valid for every bit pattern.
        ParticipantTable { entries: unsafe { std::slice::from_raw_parts(base as *const Participant, PARTICIPANTS) } }
    }

    /// A table over heap entries (models and unit tests).
    #[allow(dead_code)]
    pub(crate) fn from_slice(entries: &'a [Participant]) -> ParticipantTable<'a> {
        ParticipantTable { entries }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn entry(&self, index: usize) -> &'a Participant {
        &self.entries[index]
    }

    /// Claims a free entry for `me` with `role`; `None` if all are taken.
    /// `first` lets a kind reserve low indices (e.g. for pin bits) by searching from there.
    pub(crate) fn register(&self, me: ProcessId, role: u32, range: std::ops::Range<usize>) -> Option<usize> {
        let claimed = ((me.pid as u64) << 8) | CLAIMING;
        for i in range.start..range.end.min(self.entries.len()) {
            let e = &self.entries[i];
            if e.word.load(Ordering::Relaxed) != FREE {
                continue;
            }
            if e.word.compare_exchange(FREE, claimed, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                e.start_time.store(me.start_time, Ordering::Relaxed);
                e.role.store(role, Ordering::Relaxed);
                for a in &e.aux {
                    a.store(0, Ordering::Relaxed);
                }
                // Pairs with the Acquire loads in `owner` and `reclaim_dead`.
                e.word.store(((me.pid as u64) << 8) | ACTIVE, Ordering::Release);
                return Some(i);
            }
        }
        None
    }

    /// Frees our own entry (the kind has already released what it held).
    pub(crate) fn release(&self, index: usize) {
        // Pairs with the Acquire loads of `word`: our aux clean-up happens-before reuse.
        self.entries[index].word.store(FREE, Ordering::Release);
    }

    /// The owner and role of an entry in use.
    pub(crate) fn owner(&self, index: usize) -> Option<ParticipantInfo> {
        let e = &self.entries[index];
        let w = e.word.load(Ordering::Acquire);
        if w & 0xff == FREE {
            return None;
        }
        let start = if w & 0xff == ACTIVE { e.start_time.load(Ordering::Relaxed) } else { 0 };
        Some(ParticipantInfo {
            index,
            process: ProcessId { pid: (w >> 8) as u32, start_time: start },
            role: e.role.load(Ordering::Relaxed),
        })
    }

    /// Every entry in use.
    pub(crate) fn list(&self) -> Vec<ParticipantInfo> {
        (0..self.entries.len()).filter_map(|i| self.owner(i)).collect()
    }

    /// Reclaims every entry whose owner `is_alive` says is dead, calling `cleanup(index,
    /// entry)` before freeing it. Returns the number reclaimed.
    pub(crate) fn reclaim_dead(
        &self,
        me: ProcessId,
        is_alive: impl Fn(ProcessId) -> bool,
        cleanup: impl FnMut(usize, &Participant),
    ) -> usize {
        self.reclaim_dead_in(0..self.entries.len(), me, is_alive, cleanup)
    }

    /// [`reclaim_dead`](Self::reclaim_dead) restricted to the entries in `range`, for kinds
    /// that reserve index ranges by role (the pool's dispatcher entry 0 and worker entries).
    pub(crate) fn reclaim_dead_in(
        &self,
        range: std::ops::Range<usize>,
        me: ProcessId,
        is_alive: impl Fn(ProcessId) -> bool,
        mut cleanup: impl FnMut(usize, &Participant),
    ) -> usize {
        let mut n = 0;
        let end = range.end.min(self.entries.len());
        for (i, e) in self.entries.iter().enumerate().take(end).skip(range.start) {
            let w = e.word.load(Ordering::Acquire);
            let state = w & 0xff;
            if state == FREE {
                continue;
            }
            let pid = (w >> 8) as u32;
            let start = if state == ACTIVE { e.start_time.load(Ordering::Relaxed) } else { 0 };
            if pid == me.pid && state != RECLAIMING {
                continue; // our own entries are never dead to us
            }
            if is_alive(ProcessId { pid, start_time: start }) {
                continue;
            }
            let mine = ((me.pid as u64) << 8) | RECLAIMING;
            if e.word.compare_exchange(w, mine, Ordering::AcqRel, Ordering::Relaxed).is_err() {
                continue; // someone else got there first
            }
            cleanup(i, e);
            e.word.store(FREE, Ordering::Release);
            n += 1;
        }
        n
    }
}
