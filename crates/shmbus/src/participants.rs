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
//!
//! The table comes in two types over the same entries ([`Entry`] is generic over its
//! words): [`ParticipantTable`], the read-write one endpoints register in and reclaim
//! through, and [`ParticipantView`], whose words are load-only ([`Ro`]): all a read-only
//! segment gives (`Segment::participant_view`), for status and tools. What only loads
//! (`owner`, `state`, `list`, `raw_word`) is written once, for both.
//!
//! Exposed to the loom models: under `--cfg loom` this module is public, and what a model
//! builds a heap-backed table with ([`Participant`], [`ParticipantTable`] and their `new`,
//! `from_slice`, `entry`, `register`) is `pub`; everything else stays crate-private.

use crate::sync::{AtomicU32, AtomicU64, Load, Ordering, Ro};
use crate::sys::ProcessId;

/// Entries per segment.
pub const PARTICIPANTS: usize = 128;
/// Bytes per entry.
pub const PARTICIPANT_SIZE: usize = 64;

const FREE: u64 = 0;
const CLAIMING: u64 = 1;
const ACTIVE: u64 = 2;
const RECLAIMING: u64 = 3;

/// One participant entry, with words of type `W64` and `W32`: the atomics themselves
/// ([`Participant`]) or load-only ones (in a [`ParticipantView`]); the layout is the same.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct Entry<W64, W32> {
    /// `pid << 8 | state`.
    word: W64,
    start_time: W64,
    role: W32,
    _reserved: W32,
    /// Kind-specific recovery state (what this endpoint holds right now).
    pub aux: [W64; 5],
}

/// A read-write participant entry.
pub type Participant = Entry<AtomicU64, AtomicU32>;

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Participant>() == PARTICIPANT_SIZE);
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Entry<Ro<AtomicU64>, Ro<AtomicU32>>>() == PARTICIPANT_SIZE);

impl Participant {
    /// A free entry (for heap-backed tables in models and tests).
    #[allow(dead_code)]
    pub fn new() -> Participant {
        Participant {
            word: AtomicU64::new(0),
            start_time: AtomicU64::new(0),
            role: AtomicU32::new(0),
            _reserved: AtomicU32::new(0),
            aux: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// What an entry's owner word says, checked (see [`ParticipantTable::state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryState {
    /// Nobody holds it.
    Free,
    /// Being claimed (the owner has not finished registering).
    Claiming,
    /// Held, with this role.
    Active {
        /// The kind's role number.
        role: u32,
    },
    /// A reclaimer is cleaning up after a dead owner.
    Reclaiming,
    /// Garbage (a corrupt or hostile peer wrote the word), or no such entry.
    Invalid,
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

/// A segment's participant table, with words of type `W64` and `W32` (see the
/// [module docs](self)).
#[derive(Debug)]
pub struct Table<'a, W64, W32> {
    entries: &'a [Entry<W64, W32>],
}

impl<W64, W32> Clone for Table<'_, W64, W32> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<W64, W32> Copy for Table<'_, W64, W32> {}

/// The read-write participant table: registration, release and reclaiming.
pub type ParticipantTable<'a> = Table<'a, AtomicU64, AtomicU32>;

/// The participant table through load-only words (a read-only segment's): who is there,
/// in which state and role, and nothing that stores.
pub(crate) type ParticipantView<'a> = Table<'a, Ro<AtomicU64>, Ro<AtomicU32>>;

// Under loom the models use none of these, and `Load` stays crate-private: the table is
// public there only for `from_slice`, `entry` and `register`.
#[cfg_attr(loom, allow(dead_code, private_bounds))]
impl<'a, W64: Load<Value = u64>, W32: Load<Value = u32>> Table<'a, W64, W32> {
    /// # Safety
    /// `base` points to `PARTICIPANTS` entries that stay mapped (readable, and writable for
    /// a read-write table) for `'a`.
    pub(crate) unsafe fn from_raw(base: *const u8) -> Table<'a, W64, W32> {
        // SAFETY: per the contract; entries are atomics, valid for every bit pattern.
        Table { entries: unsafe { std::slice::from_raw_parts(base as *const Entry<W64, W32>, PARTICIPANTS) } }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The owner and role of an entry in use. An entry whose state byte is none of the four
    /// states (garbage written by a corrupt or hostile peer) is reported with pid 0, which
    /// no liveness check calls alive, so it is reclaimed like a dead one.
    pub(crate) fn owner(&self, index: usize) -> Option<ParticipantInfo> {
        let e = &self.entries[index];
        let w = e.word.load(Ordering::Acquire);
        if w & 0xff == FREE {
            return None;
        }
        let start = if w & 0xff == ACTIVE { e.start_time.load(Ordering::Relaxed) } else { 0 };
        let pid = if w & 0xff > RECLAIMING { 0 } else { (w >> 8) as u32 };
        Some(ParticipantInfo {
            index,
            process: ProcessId { pid, start_time: start },
            role: e.role.load(Ordering::Relaxed),
        })
    }

    /// The state of entry `index` as one value, for checks against what shared words claim
    /// (a pin bit or a writer mark is only possible for an entry in a matching state).
    pub(crate) fn state(&self, index: usize) -> EntryState {
        let Some(e) = self.entries.get(index) else { return EntryState::Invalid };
        // Acquire: pairs with the Release store (CAS) of ACTIVE in `register`, so the role
        // read next is the registered one.
        let w = e.word.load(Ordering::Acquire);
        match w & 0xff {
            FREE => EntryState::Free,
            CLAIMING => EntryState::Claiming,
            ACTIVE => EntryState::Active { role: e.role.load(Ordering::Relaxed) },
            RECLAIMING => EntryState::Reclaiming,
            _ => EntryState::Invalid,
        }
    }

    /// The raw owner word of entry `index` (`pid << 8 | state`), for staleness checks.
    pub(crate) fn raw_word(&self, index: usize) -> u64 {
        self.entries.get(index).map_or(FREE, |e| e.word.load(Ordering::Acquire))
    }

    /// Aux word `i` of entry `index` (0 for an index out of range), for status views.
    pub(crate) fn aux(&self, index: usize, i: usize) -> u64 {
        self.entries.get(index).and_then(|e| e.aux.get(i)).map_or(0, |w| w.load(Ordering::Acquire))
    }

    /// Every entry in use.
    pub(crate) fn list(&self) -> Vec<ParticipantInfo> {
        (0..self.entries.len()).filter_map(|i| self.owner(i)).collect()
    }

    /// How many entries in use hold role `role` for an owner `is_alive` calls alive.
    pub(crate) fn live_in_role(&self, role: u32, is_alive: impl Fn(ProcessId) -> bool) -> usize {
        self.list().iter().filter(|p| p.role == role && is_alive(p.process)).count()
    }
}

impl<'a> ParticipantTable<'a> {
    /// A table over heap entries (models and unit tests).
    #[allow(dead_code)]
    pub fn from_slice(entries: &'a [Participant]) -> ParticipantTable<'a> {
        Table { entries }
    }

    /// Entry `index` (panics if out of range).
    pub fn entry(&self, index: usize) -> &'a Participant {
        &self.entries[index]
    }

    /// Claims a free entry for `me` with `role`; `None` if all are taken.
    /// `first` lets a kind reserve low indices (e.g. for pin bits) by searching from there.
    pub fn register(&self, me: ProcessId, role: u32, range: std::ops::Range<usize>) -> Option<usize> {
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
                // Pairs with the Acquire loads in `owner` and `reclaim_dead`. A CAS, not a
                // store: a peer may have taken over an entry left CLAIMING (see
                // `take_over_stale`); then it is not ours and we look further.
                let active = ((me.pid as u64) << 8) | ACTIVE;
                if e.word.compare_exchange(claimed, active, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Frees our own entry (the kind has already released what it held).
    pub(crate) fn release(&self, index: usize) {
        // Pairs with the Acquire loads of `word`: our aux clean-up happens-before reuse.
        self.entries[index].word.store(FREE, Ordering::Release);
    }

    /// Takes over entry `index` if its word still equals `seen`, a CLAIMING or RECLAIMING
    /// word the caller has watched stay unchanged far longer than an honest claim or
    /// reclaim takes (its owner died in that window, or a hostile peer wrote it). Runs
    /// `cleanup` and frees the entry. A registrant that was merely slow then fails its final
    /// CAS in `register` and looks further, so no entry ever has two owners.
    pub(crate) fn take_over_stale(
        &self,
        index: usize,
        seen: u64,
        me: ProcessId,
        cleanup: impl FnOnce(usize, &Participant),
    ) -> bool {
        let Some(e) = self.entries.get(index) else { return false };
        if !matches!(seen & 0xff, CLAIMING | RECLAIMING) {
            return false;
        }
        let mine = ((me.pid as u64) << 8) | RECLAIMING;
        if e.word.compare_exchange(seen, mine, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            return false;
        }
        cleanup(index, e);
        e.word.store(FREE, Ordering::Release);
        true
    }

    /// Leaves entry `index` in the CLAIMING state for `who`, as a claimer that died half-way
    /// leaves it (tests of the takeover).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn force_claiming(&self, index: usize, who: ProcessId) {
        self.entries[index].word.store(((who.pid as u64) << 8) | CLAIMING, Ordering::Release);
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
            // A state byte that is none of the four is garbage from a corrupt or hostile
            // peer: no process owns the entry, whatever pid the word names.
            let garbage = state > RECLAIMING;
            let pid = (w >> 8) as u32;
            let start = if state == ACTIVE { e.start_time.load(Ordering::Relaxed) } else { 0 };
            // Our own entries are never dead to us, but an ACTIVE entry with our pid and
            // another start time is a predecessor's that died (its pid reused, as when a
            // container restarts): `is_alive` below says so.
            let predecessor = state == ACTIVE && me.start_time != 0 && start != 0 && start != me.start_time;
            if !garbage && pid == me.pid && state != RECLAIMING && !predecessor {
                continue;
            }
            if !garbage && is_alive(ProcessId { pid, start_time: start }) {
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
