//! The queue's lock-free protocol, over an abstract cell memory.
//!
//! This is Vyukov's bounded MPMC ring with one change that makes it crash-safe: a position
//! is claimed by a compare-and-swap on the *cell's* stamp, which records the claimant's
//! participant index, instead of by a compare-and-swap on `tail`/`head`. The index counters
//! become hints that anyone may move past a claimed cell ("helping"), so a participant that
//! dies right after claiming never stops the counters, and the claimed cell itself names
//! who holds it.
//!
//! Everything here runs on the shared mapping in production and on a heap buffer under
//! loom (`tests/loom_queue.rs`): the memory is reached only through [`Control`], the
//! [`Cells`] trait and the participant table. Under `--cfg loom` this module is public, and
//! what the models use is `pub`; in a normal build the module is private to the queue.
//!
//! # Stamps
//!
//! Each cell starts with a 64-bit stamp: `pos << 10 | state << 7 | owner`.
//!
//! | state       | meaning for position `pos`                                         |
//! | ----------- | ------------------------------------------------------------------ |
//! | `EMPTY`     | free; the producer of `pos` may claim it                           |
//! | `WRITING`   | producer `owner` claimed `pos` and is copying the message in       |
//! | `FULL`      | the message of `pos` is complete; a consumer may claim it          |
//! | `ABANDONED` | the producer of `pos` died mid-copy; consumers retire it unread    |
//! | `READING`   | consumer `owner` claimed `pos` and is copying the message out      |
//!
//! Cell `i` starts as `EMPTY(i)`. A consumer that finishes `pos` stores `EMPTY(pos + cap)`,
//! handing the cell to the next lap. Because the position is part of every stamp, each
//! stamp value occurs at most once in the life of the queue: no ABA.
//!
//! # Invariants
//!
//! 1. A position is claimed by a producer exactly once (CAS `EMPTY(p)` → `WRITING(p, k)`) and
//!    by a consumer at most once (CAS `FULL(p)` → `READING(p, c)`): exactly-once delivery.
//! 2. `tail` moves from `p` to `p + 1` only once cell `p` is claimed for `p`; `head` only
//!    once cell `p` was claimed by a consumer or retired. Both are monotonic.
//! 3. A consumer reads the payload only while it holds `READING`, a producer writes it only
//!    while it holds `WRITING`; each stamp transition is a Release store or an AcqRel CAS
//!    whose reader acquires it, so payload accesses never overlap: no torn message.
//! 4. Before claiming `p`, a participant stores `p + 1` in its entry's `aux[0]` (its
//!    *intent*). After its death, a reclaimer looks only at cell `p`: if it still shows
//!    `WRITING(p, k)` or `READING(p, k)` with the dead entry's index `k`, that claim was the
//!    dead one's (a stamp names one claim ever), and the reclaimer CASes it to `ABANDONED(p)`
//!    or `EMPTY(p + cap)`. Any other stamp means the intent never became a claim, or the
//!    claim was completed: nothing to do. So the record is unambiguous at every instant.
//!
//! Positions are 54-bit: 1.8·10^16 messages, 5.7 years at 100 million messages per second.
//! A queue that reaches the limit reports `Corrupt` instead of wrapping.

use std::mem::MaybeUninit;

use crate::error::Corrupt;
use crate::event::EventWord;
use crate::kind::Kind;
use crate::participants::ParticipantTable;
use crate::stats::Counter;
use crate::sync::{AtomicU32, AtomicU64, CachePadded, Ordering};
use crate::sys::ProcessId;

const POS_SHIFT: u32 = 10;
const STATE_SHIFT: u32 = 7;
const OWNER_MASK: u64 = (1 << STATE_SHIFT) - 1;
/// Positions at or beyond this do not fit a stamp.
pub(crate) const MAX_POS: u64 = 1 << (64 - POS_SHIFT);
/// Retries one operation may take before it calls the ring corrupt. Each retry means some
/// other participant made progress (or left a claim to help past), so a legitimate
/// operation needs a handful; this only stops a hostile ring from spinning us for ever.
const MAX_STEPS: u32 = 1 << 20;
/// Largest ring whose counters `Ring::resync` rebuilds from the cells: a scan of this many
/// cell headers takes about a millisecond. Larger rings report a corrupt counter without
/// repairing it.
const RESYNC_MAX_CELLS: u64 = 1 << 16;

const EMPTY: u64 = 0;
const WRITING: u64 = 1;
const FULL: u64 = 2;
const ABANDONED: u64 = 3;
const READING: u64 = 4;

const _: () = assert!(crate::participants::PARTICIPANTS as u64 <= OWNER_MASK + 1);

/// `out` as bytes that may be overwritten with initialized ones (the ring never de-initializes
/// anything: it only copies message bytes in).
#[cfg_attr(not(any(test, loom)), allow(dead_code))]
pub fn as_uninit(out: &mut [u8]) -> &mut [MaybeUninit<u8>] {
    // SAFETY: `MaybeUninit<u8>` has the layout of `u8`; every write through the result (the
    // ring's `Cells::read`) stores initialized bytes, so `out` stays initialized.
    unsafe { &mut *(out as *mut [u8] as *mut [MaybeUninit<u8>]) }
}

/// A report of `what`, met at counter `name` = `pos`; `repaired` if the cells put it right.
#[cold]
fn report(what: &'static str, name: &'static str, pos: u64, repaired: bool) -> Corrupt {
    let c = Corrupt::new(Kind::Queue, what).with(name, pos);
    if repaired {
        c.and_repaired()
    } else {
        c
    }
}

#[inline]
pub(crate) const fn stamp(pos: u64, state: u64, owner: usize) -> u64 {
    (pos << POS_SHIFT) | (state << STATE_SHIFT) | (owner as u64 & OWNER_MASK)
}

#[inline]
const fn stamp_pos(s: u64) -> u64 {
    s >> POS_SHIFT
}

#[inline]
const fn stamp_state(s: u64) -> u64 {
    (s >> STATE_SHIFT) & 0x7
}

#[inline]
const fn stamp_owner(s: u64) -> usize {
    (s & OWNER_MASK) as usize
}

/// The queue's control block, at the start of the kind area.
#[repr(C)]
#[derive(Debug)]
pub struct Control {
    /// Next position to produce (a hint: may lag one claimed cell behind; see module docs).
    pub(crate) tail: CachePadded<AtomicU64>,
    /// Next position to consume (a hint, likewise).
    pub(crate) head: CachePadded<AtomicU64>,
    /// Notified when a message is published or a cell abandoned: consumers sleep here.
    pub(crate) not_empty: CachePadded<EventWord>,
    /// Notified when a cell is retired: producers sleep here.
    pub(crate) not_full: CachePadded<EventWord>,
    /// Cells given up because their producer died mid-copy.
    pub abandoned: AtomicU64,
    /// Messages lost because their consumer died mid-copy.
    pub lost: AtomicU64,
}

impl Control {
    /// A zeroed control block (for heap-backed models and tests).
    #[allow(dead_code)]
    pub fn new() -> Control {
        Control {
            tail: CachePadded(AtomicU64::new(0)),
            head: CachePadded(AtomicU64::new(0)),
            not_empty: CachePadded(EventWord::new()),
            not_full: CachePadded(EventWord::new()),
            abandoned: AtomicU64::new(0),
            lost: AtomicU64::new(0),
        }
    }
}

/// The first 16 bytes of every cell; the payload follows.
#[repr(C)]
#[derive(Debug)]
pub struct CellHeader {
    pub(crate) stamp: AtomicU64,
    /// Payload length, written by the producer before it publishes `FULL`. Untrusted.
    pub(crate) len: AtomicU32,
    _pad: AtomicU32,
}

impl CellHeader {
    /// The empty header of cell `index` (for heap-backed models and tests).
    #[allow(dead_code)]
    pub fn new(index: usize) -> CellHeader {
        CellHeader {
            stamp: AtomicU64::new(stamp(index as u64, EMPTY, 0)),
            len: AtomicU32::new(0),
            _pad: AtomicU32::new(0),
        }
    }
}

/// Bytes of a cell header.
pub(crate) const CELL_HEADER: usize = 16;
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<CellHeader>() == CELL_HEADER);

/// The memory of the cells: a shared mapping, or a heap buffer in models.
pub trait Cells {
    /// The header of cell `index` (`index < capacity`).
    fn header(&self, index: usize) -> &CellHeader;
    /// Copies `data` into the payload of cell `index`.
    ///
    /// # Safety
    /// The caller holds the `WRITING` claim on the cell and `data.len() <= max_element_size`.
    unsafe fn write(&self, index: usize, data: &[u8]);
    /// Copies the first `out.len()` payload bytes of cell `index` into `out`, initializing it.
    ///
    /// # Safety
    /// The caller holds the `READING` claim on the cell and `out.len() <= max_element_size`.
    unsafe fn read(&self, index: usize, out: &mut [MaybeUninit<u8>]);
    /// Hints that the first `bytes` bytes of cell `index` will be read now. Default: nothing.
    fn prefetch_read(&self, _index: usize, _bytes: usize) {}
}

/// Bytes of a cell that the prefetch hints cover at most.
pub(crate) const PREFETCH_LIMIT: usize = 1024;

/// Whether a pop at position `pos` could make progress, given the stamp `s` its cell holds
/// (`Ring::pop_ready`, and the queue's read-only status view, which loads the two itself).
#[inline]
pub(crate) fn pop_ready_at(pos: u64, s: u64, cap: u64) -> Result<(), Option<Stall>> {
    let (q, state) = (stamp_pos(s), stamp_state(s));
    if q == pos {
        return match state {
            FULL | ABANDONED | READING => Ok(()),
            WRITING => Err(Some(Stall { stamp: s, owner: stamp_owner(s) })),
            _ => Err(None),
        };
    }
    if q.wrapping_add(cap) == pos {
        return Err((state == READING).then(|| Stall { stamp: s, owner: stamp_owner(s) }));
    }
    // Stale head: a pop would help it along.
    Ok(())
}

/// Messages in a ring of `cap` cells whose counters read `head` and `tail`, clamped to
/// `0..=cap` (`Ring::depth`, and the queue's read-only status view).
#[inline]
pub(crate) fn depth_of(head: u64, tail: u64, cap: u64) -> u64 {
    tail.saturating_sub(head).min(cap)
}

/// A claim held by someone else that stands in our way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    /// The blocking cell's stamp when seen (`WRITING` or `READING`).
    pub(crate) stamp: u64,
    /// Participant index of the claimant.
    pub(crate) owner: usize,
}

impl Stall {
    /// Whether the claim is a producer's (mid-copy), rather than a consumer's.
    pub(crate) fn is_writing(&self) -> bool {
        stamp_state(self.stamp) == WRITING
    }
}

/// Outcome of one push attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Push {
    /// The message was copied in and published.
    Done,
    /// No free cell; `Some` if the cell in the way is held by a claimant (maybe dead).
    Full(Option<Stall>),
    /// The cell's stamp was impossible.
    Corrupt(Corrupt),
}

/// Outcome of one pop attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pop {
    /// A message of this many bytes was copied out.
    Got(usize),
    /// Nothing to pop; `Some` if a message is being written (or its writer died) at the head.
    Empty(Option<Stall>),
    /// The cell's length or stamp was impossible. The cell was retired if it could be.
    Corrupt(Corrupt),
}

/// Where a model makes a participant "die" (tests and loom only; production passes `Never`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crash {
    /// Never: the operation runs to its end.
    Never,
    /// After storing the intent, before claiming.
    AfterIntent,
    /// Right after claiming the cell, before the copy.
    AfterClaim,
    /// After the claim, during the copy (the counter moves only after the copy).
    MidCopy,
}

/// The ring: control block, cells, participant table and the fixed layout.
#[derive(Debug, Clone, Copy)]
pub struct Ring<'a, C> {
    pub(crate) ctl: &'a Control,
    pub(crate) cells: C,
    /// The participant table.
    pub table: ParticipantTable<'a>,
    cap: u64,
    mask: u64,
    pow2: bool,
    max: usize,
    /// The counters of the endpoint using this view (`None` in models and for handles):
    /// the wakes it issues and the abandoned cells it retires are counted there.
    counter: Option<Counter>,
}

#[cfg_attr(loom, allow(dead_code))]
impl<'a, C: Cells> Ring<'a, C> {
    /// A ring of `cap >= 1` cells of at most `max` payload bytes each. The caller guarantees
    /// `cells` has `cap` cells.
    pub fn new(ctl: &'a Control, cells: C, table: ParticipantTable<'a>, cap: u64, max: usize) -> Self {
        assert!(cap >= 1);
        Ring { ctl, cells, table, cap, mask: cap.wrapping_sub(1), pow2: cap.is_power_of_two(), max, counter: None }
    }

    /// This view, counting in `counter` (an endpoint's own block).
    #[inline]
    pub(crate) fn counted(self, counter: Counter) -> Self {
        Ring { counter: Some(counter), ..self }
    }

    /// Notifies `event`, counting the `FUTEX_WAKE` if it made one.
    #[inline(always)]
    fn wake(&self, event: &EventWord) {
        if event.notify() {
            if let Some(c) = self.counter {
                c.futex_wake();
            }
        }
    }

    /// The largest message, in bytes.
    #[inline]
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    #[inline]
    fn index(&self, pos: u64) -> usize {
        (if self.pow2 { pos & self.mask } else { pos % self.cap }) as usize
    }

    /// Copies `data` in as the next message, or reports why not. `me` is the producer's
    /// participant index. `optimistic`: try to claim the cell at `tail` without reading it
    /// first (saves a cache-line round trip when there is room; pass false after `Full`, so a
    /// producer waiting on a full queue only reads the cell the consumers are working on).
    #[inline]
    pub fn try_push(&self, me: usize, data: &[u8], optimistic: bool) -> Push {
        self.push_impl(me, data, optimistic, Crash::Never)
    }

    /// [`Ring::try_push`], stopping ("dying") at `crash` (models pass a point; `try_push`
    /// passes `Never`).
    #[inline(always)]
    pub fn push_impl(&self, me: usize, data: &[u8], optimistic: bool, crash: Crash) -> Push {
        debug_assert!(data.len() <= self.max);
        let intent = &self.table.entry(me).aux[0];
        // Acquire: pairs with the AcqRel CAS that moved `tail` here, after which the cell of
        // every position below is visibly claimed (see `Corrupt` reasoning below).
        let mut pos = self.ctl.tail.0.load(Ordering::Acquire);
        let mut steps = 0u32;
        loop {
            steps += 1;
            if steps > MAX_STEPS {
                let repaired = self.resync(&self.ctl.tail.0, pos, false);
                return Push::Corrupt(report("no progress after a million retries", "tail", pos, repaired));
            }
            if pos >= MAX_POS - self.cap {
                let repaired = self.resync(&self.ctl.tail.0, pos, false);
                let what = if repaired {
                    "tail position out of range"
                } else {
                    "queue position counter exhausted (or tail and cells corrupted)"
                };
                return Push::Corrupt(report(what, "tail", pos, repaired));
            }
            let idx = self.index(pos);
            let cell = self.cells.header(idx);
            let free = stamp(pos, EMPTY, 0);
            let s = if optimistic && steps == 1 {
                // Relaxed: read only by a reclaimer after our death, which it learns of through
                // the kernel (process exit), ordering everything we did before.
                intent.store(pos + 1, Ordering::Relaxed);
                if crash == Crash::AfterIntent {
                    return Push::Done;
                }
                // AcqRel: Acquire pairs with the Release store of EMPTY(pos) by the consumer
                // that retired the cell (its reads happen-before our writes); Release makes
                // our intent and claim visible to whoever helps past us.
                match cell.stamp.compare_exchange(free, stamp(pos, WRITING, me), Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => return self.fill(pos, idx, cell, data, crash),
                    Err(actual) => actual,
                }
            } else {
                // Acquire: pairs as above.
                cell.stamp.load(Ordering::Acquire)
            };
            let (q, state) = (stamp_pos(s), stamp_state(s));
            if s == free {
                // Relaxed: see above.
                intent.store(pos + 1, Ordering::Relaxed);
                if crash == Crash::AfterIntent {
                    return Push::Done;
                }
                // AcqRel: see above.
                if cell.stamp.compare_exchange(s, stamp(pos, WRITING, me), Ordering::AcqRel, Ordering::Acquire).is_err()
                {
                    continue; // another producer claimed `pos`: re-read and help
                }
                return self.fill(pos, idx, cell, data, crash);
            }
            if q == pos {
                // `pos` is claimed by another producer that has not moved `tail` yet (or died
                // before it could): help, then go on from wherever `tail` is.
                pos = match self.ctl.tail.0.compare_exchange(pos, pos + 1, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => pos + 1,
                    Err(now) => now,
                };
                continue;
            }
            if q.wrapping_add(self.cap) == pos && state != EMPTY {
                // The cell still holds the previous lap: the queue is full.
                let stall = (state == WRITING || state == READING).then(|| Stall { stamp: s, owner: stamp_owner(s) });
                return Push::Full(stall);
            }
            // Our `tail` is stale, or the cell is garbage.
            let now = self.ctl.tail.0.load(Ordering::Acquire);
            if now != pos {
                pos = now;
                continue;
            }
            // `tail` has not moved. `EMPTY(pos + cap)` means `pos` was claimed, sent and
            // received, but its producer died before moving `tail`: help. Any other later
            // stamp is impossible: a claim of q > pos was made while `tail == q`, and its
            // stamp was acquired above, so a fresh `tail` would be at least q.
            if state == EMPTY && q == pos + self.cap {
                pos = match self.ctl.tail.0.compare_exchange(pos, pos + 1, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => pos + 1,
                    Err(now) => now,
                };
                continue;
            }
            let repaired = self.resync(&self.ctl.tail.0, pos, false);
            return Push::Corrupt(
                report("cell stamp does not match the tail position", "tail", pos, repaired).with("stamp", s),
            );
        }
    }

    /// The rest of a push once we hold `WRITING(pos, me)` on cell `idx`.
    #[inline(always)]
    fn fill(&self, pos: u64, idx: usize, cell: &CellHeader, data: &[u8], crash: Crash) -> Push {
        if crash == Crash::AfterClaim {
            return Push::Done;
        }
        cell.len.store(data.len() as u32, Ordering::Relaxed);
        if crash == Crash::MidCopy {
            // SAFETY: we hold WRITING on `idx`; half the data is within bounds.
            unsafe { self.cells.write(idx, &data[..data.len() / 2]) };
            return Push::Done;
        }
        // SAFETY: we hold the WRITING claim on `idx` (our CAS succeeded and nobody else moves
        // a WRITING(_, me) stamp while we live); `data.len() <= max` (caller).
        unsafe { self.cells.write(idx, data) };
        // Release: pairs with the Acquire load/CAS in `pop_impl`: the payload and `len` are
        // visible to the consumer that sees FULL.
        cell.stamp.store(stamp(pos, FULL, 0), Ordering::Release);
        // Only now move `tail` (a locked instruction, kept off the path to the consumer).
        // Until then other producers see `pos` claimed and help; failure means one did.
        let _ = self.ctl.tail.0.compare_exchange(pos, pos + 1, Ordering::AcqRel, Ordering::Relaxed);
        self.wake(&self.ctl.not_empty.0);
        Push::Done
    }

    /// Copies the next message into the start of `out` (`out.len() >= max`), or reports why
    /// not; on `Got(n)` the first `n` bytes of `out` are initialized. `me` is the consumer's
    /// participant index.
    #[inline]
    pub(crate) fn try_pop_into(&self, me: usize, out: &mut [MaybeUninit<u8>]) -> Pop {
        self.pop_impl(me, out, Crash::Never)
    }

    /// [`Ring::try_pop_into`] into initialized bytes.
    #[cfg_attr(not(any(test, loom)), allow(dead_code))]
    pub fn try_pop(&self, me: usize, out: &mut [u8]) -> Pop {
        self.pop_impl(me, as_uninit(out), Crash::Never)
    }

    /// Copies the next message into the start of `out` if it fits there, else into the start
    /// of `spill` (`spill.len() >= max`): `Got(n)` with `n <= out.len()` is in `out`, a longer
    /// one in `spill`. The length is read under the claim, so the message that does not fit
    /// is still taken whole (a pop cannot be undone: other consumers help `head` past a
    /// claimed cell) and kept by the caller for a later receive.
    #[inline]
    pub(crate) fn try_pop_fit(&self, me: usize, out: &mut [MaybeUninit<u8>], spill: &mut [MaybeUninit<u8>]) -> Pop {
        self.pop_fit_impl(me, out, spill, Crash::Never)
    }

    /// [`Ring::try_pop_into`], stopping ("dying") at `crash` (models pass a point;
    /// `try_pop_into` passes `Never`).
    #[inline(always)]
    pub fn pop_impl(&self, me: usize, out: &mut [MaybeUninit<u8>], crash: Crash) -> Pop {
        debug_assert!(out.len() >= self.max);
        // Every message fits `out`: the spill buffer is never chosen.
        self.pop_fit_impl(me, out, &mut [], crash)
    }

    /// The pop: [`Ring::try_pop_fit`], stopping ("dying") at `crash`.
    #[inline(always)]
    fn pop_fit_impl(&self, me: usize, out: &mut [MaybeUninit<u8>], spill: &mut [MaybeUninit<u8>], crash: Crash) -> Pop {
        debug_assert!(out.len() >= self.max || spill.len() >= self.max);
        let intent = &self.table.entry(me).aux[0];
        // Acquire: pairs with the AcqRel CAS that moved `head` here.
        let mut pos = self.ctl.head.0.load(Ordering::Acquire);
        let mut steps = 0u32;
        loop {
            steps += 1;
            if steps > MAX_STEPS {
                let repaired = self.resync(&self.ctl.head.0, pos, true);
                return Pop::Corrupt(report("no progress after a million retries", "head", pos, repaired));
            }
            if pos >= MAX_POS - self.cap {
                let repaired = self.resync(&self.ctl.head.0, pos, true);
                let what = if repaired {
                    "head position out of range"
                } else {
                    "queue position counter exhausted (or head and cells corrupted)"
                };
                return Pop::Corrupt(report(what, "head", pos, repaired));
            }
            let idx = self.index(pos);
            let cell = self.cells.header(idx);
            let s = if steps == 1 {
                // Claim optimistically: one locked instruction takes the line for writing at
                // once, where a load first would share it and the claim then upgrade it.
                // Relaxed intent: see `push_impl`.
                intent.store(pos + 1, Ordering::Relaxed);
                if crash == Crash::AfterIntent {
                    return Pop::Empty(None);
                }
                // AcqRel: as for the claim below.
                match cell.stamp.compare_exchange(
                    stamp(pos, FULL, 0),
                    stamp(pos, READING, me),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return self.take(pos, idx, cell, out, spill, crash),
                    Err(actual) => actual,
                }
            } else {
                // Acquire: pairs with the producer's Release store of FULL (payload visible).
                cell.stamp.load(Ordering::Acquire)
            };
            let (q, state) = (stamp_pos(s), stamp_state(s));
            if q == pos {
                match state {
                    FULL => {
                        // Start fetching the payload before the CAS, which (being a locked
                        // instruction) holds back every load after it. `len` is only a hint
                        // here; it is read again under the claim.
                        let hint = (cell.len.load(Ordering::Relaxed) as usize).min(self.max);
                        self.cells.prefetch_read(idx, (CELL_HEADER + hint).min(PREFETCH_LIMIT));
                        // Relaxed: see `push_impl`.
                        intent.store(pos + 1, Ordering::Relaxed);
                        if crash == Crash::AfterIntent {
                            return Pop::Empty(None);
                        }
                        // AcqRel: Acquire pairs with the producer's Release of FULL; Release
                        // publishes our claim to helpers.
                        if cell
                            .stamp
                            .compare_exchange(s, stamp(pos, READING, me), Ordering::AcqRel, Ordering::Acquire)
                            .is_err()
                        {
                            continue;
                        }
                        return self.take(pos, idx, cell, out, spill, crash);
                    }
                    ABANDONED => {
                        // Its producer died mid-copy: retire it unread (one of us wins the CAS).
                        if cell
                            .stamp
                            .compare_exchange(s, stamp(pos + self.cap, EMPTY, 0), Ordering::AcqRel, Ordering::Acquire)
                            .is_ok()
                        {
                            let _ = self.ctl.head.0.compare_exchange(pos, pos + 1, Ordering::AcqRel, Ordering::Relaxed);
                            if let Some(c) = self.counter {
                                c.drops(1);
                            }
                            self.wake(&self.ctl.not_full.0);
                        }
                        continue;
                    }
                    READING => {
                        // Another consumer has it and has not moved `head` yet: help.
                        pos = match self.ctl.head.0.compare_exchange(pos, pos + 1, Ordering::AcqRel, Ordering::Acquire)
                        {
                            Ok(_) => pos + 1,
                            Err(now) => now,
                        };
                        continue;
                    }
                    WRITING => return Pop::Empty(Some(Stall { stamp: s, owner: stamp_owner(s) })),
                    EMPTY => return Pop::Empty(None),
                    _ => {
                        // Garbage state: retire the cell so the queue goes on, and say so.
                        let retired = cell
                            .stamp
                            .compare_exchange(s, stamp(pos + self.cap, EMPTY, 0), Ordering::AcqRel, Ordering::Acquire)
                            .is_ok();
                        if retired {
                            let _ = self.ctl.head.0.compare_exchange(pos, pos + 1, Ordering::AcqRel, Ordering::Relaxed);
                            self.wake(&self.ctl.not_full.0);
                        }
                        return Pop::Corrupt(report("unknown cell state", "head", pos, retired).with("stamp", s));
                    }
                }
            }
            if q.wrapping_add(self.cap) == pos && state == READING {
                // The previous lap's consumer is still copying out; nothing at `pos` yet. If it
                // died, producers are blocked on this cell: report it so we can reclaim too.
                return Pop::Empty(Some(Stall { stamp: s, owner: stamp_owner(s) }));
            }
            // Our `head` is stale, or the cell is garbage.
            let now = self.ctl.head.0.load(Ordering::Acquire);
            if now != pos {
                pos = now;
                continue;
            }
            // `head` has not moved. A stamp of a later lap proves `pos` was consumed (its cell
            // was retired) by a consumer that died or stalled before moving `head`: help. It
            // can only be legitimate if that later position is within what `tail` allows.
            let tail = self.ctl.tail.0.load(Ordering::Acquire);
            let later = q > pos && (q - pos) % self.cap == 0;
            // Only evaluated for a later lap, where q >= pos + cap >= cap (no underflow on a
            // hostile stamp: found by the segment_open fuzz target).
            let plausible = later
                && match state {
                    EMPTY => q - self.cap < tail,
                    _ => q <= tail,
                };
            if !plausible {
                let repaired = self.resync(&self.ctl.head.0, pos, true);
                return Pop::Corrupt(
                    report("cell stamp does not match the head position", "head", pos, repaired).with("stamp", s),
                );
            }
            pos = match self.ctl.head.0.compare_exchange(pos, pos + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => pos + 1,
                Err(now) => now,
            };
        }
    }

    /// The rest of a pop once we hold `READING(pos, me)` on cell `idx`: the message goes to
    /// `out` if it fits there, else to `spill`.
    #[inline(always)]
    fn take(
        &self,
        pos: u64,
        idx: usize,
        cell: &CellHeader,
        out: &mut [MaybeUninit<u8>],
        spill: &mut [MaybeUninit<u8>],
        crash: Crash,
    ) -> Pop {
        if crash == Crash::AfterClaim {
            return Pop::Empty(None);
        }
        let len = cell.len.load(Ordering::Relaxed) as usize;
        if crash == Crash::MidCopy {
            return Pop::Empty(None);
        }
        let result = if len > self.max {
            // The cell is retired below: the queue goes on without the message.
            Pop::Corrupt(
                Corrupt::new(Kind::Queue, "message length exceeds the queue's max message length")
                    .with("len", len as u64)
                    .with("max", self.max as u64)
                    .and_repaired(),
            )
        } else {
            // `len <= max`, and `out` or `spill` holds `max` bytes (checked by the callers):
            // the slicing cannot fail.
            let dst = if len <= out.len() { &mut out[..len] } else { &mut spill[..len] };
            // SAFETY: we hold READING on `idx`; `dst` is `len <= max` bytes.
            unsafe { self.cells.read(idx, dst) };
            Pop::Got(len)
        };
        // Release: pairs with the Acquire load in `push_impl`: our reads of the
        // payload happen-before the next producer's writes.
        cell.stamp.store(stamp(pos + self.cap, EMPTY, 0), Ordering::Release);
        // Only now move `head`, off the path to the message; until then other
        // consumers see `pos` claimed (or retired) and help.
        let _ = self.ctl.head.0.compare_exchange(pos, pos + 1, Ordering::AcqRel, Ordering::Relaxed);
        self.wake(&self.ctl.not_full.0);
        result
    }

    /// Recovers from a counter (`head` if `for_head`, else `tail`) or cell stamps that a
    /// hostile or corrupted peer left where they contradict each other, from the cells
    /// themselves: in an intact ring every cell's stamp names the oldest position it has not
    /// finished with, so `head` is the smallest stamp position and `tail` the smallest
    /// position still `EMPTY` (or the oldest occupied one plus the capacity when the ring is
    /// full). Both values lag the real ones at worst, which the algorithm tolerates (it helps
    /// a stale counter along). A cell whose stamp is impossible (unknown state, or a position
    /// of another cell, an owner on an unclaimed cell) is given the stamp it should have:
    /// `ABANDONED` for a position below `tail` (consumers retire it unread), `EMPTY` above.
    /// A stamp that is possible on its own but of the wrong lap is not repaired (with peers
    /// running, telling it from honest progress would need a lock): it is reported by each
    /// operation that meets it, and the queue must be recreated.
    ///
    /// Runs only on a path that is about to report `Corrupt`, never on a healthy ring: one or
    /// two scans of the cell headers, no more often than corruption is met. Changes a word
    /// only by a CAS from the bad value, so whatever an honest participant moved meanwhile is
    /// left alone. Returns whether anything was repaired; `false` if the cells give no
    /// consistent picture (or the ring is too large to scan within a receive's time budget).
    #[cold]
    #[inline(never)]
    fn resync(&self, counter: &AtomicU64, seen: u64, for_head: bool) -> bool {
        if self.cap > RESYNC_MAX_CELLS {
            return false;
        }
        let limit = MAX_POS - 2 * self.cap;
        // A stamp no honest participant ever writes into cell `i`: an unknown state, a
        // position of another cell or beyond the limit, an owner on an unclaimed cell.
        let bad = |i: u64, s: u64| {
            let (q, state) = (stamp_pos(s), stamp_state(s));
            state > READING
                || q >= limit
                || self.index(q) as u64 != i
                || (stamp_owner(s) != 0 && state != WRITING && state != READING)
        };
        let (mut head, mut tail, mut bad_cells) = (u64::MAX, u64::MAX, 0u64);
        for i in 0..self.cap {
            // Acquire: pairs with the Release stores and CASes of the stamp (as in pop).
            let s = self.cells.header(i as usize).stamp.load(Ordering::Acquire);
            if bad(i, s) {
                bad_cells += 1;
                continue;
            }
            let q = stamp_pos(s);
            head = head.min(q);
            tail = tail.min(if stamp_state(s) == EMPTY { q } else { q + self.cap });
        }
        if bad_cells == self.cap {
            // No cell to go by: trust the counters if they are consistent with each other.
            let h = self.ctl.head.0.load(Ordering::Acquire);
            let t = self.ctl.tail.0.load(Ordering::Acquire);
            if h > t || t - h > self.cap || t >= limit {
                return false;
            }
            (head, tail) = (h, t);
        }
        let tail = tail.min(head + self.cap);
        let mut repaired = false;
        if bad_cells > 0 {
            for i in 0..self.cap {
                let cell = self.cells.header(i as usize);
                let s = cell.stamp.load(Ordering::Acquire);
                if !bad(i, s) {
                    continue;
                }
                let p = head + (i + self.cap - self.index(head) as u64) % self.cap;
                let state = if p < tail { ABANDONED } else { EMPTY };
                // AcqRel: as every stamp transition.
                if cell.stamp.compare_exchange(s, stamp(p, state, 0), Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                    repaired = true;
                    if state == ABANDONED {
                        self.ctl.abandoned.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            self.wake(&self.ctl.not_empty.0);
            self.wake(&self.ctl.not_full.0);
        }
        let fixed = if for_head { head } else { tail };
        // AcqRel: as every move of the counter; failure means an honest participant moved it.
        if fixed != seen && counter.compare_exchange(seen, fixed, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            repaired = true;
        }
        repaired
    }

    /// Whether a pop could make progress now, without taking anything.
    pub(crate) fn pop_ready(&self) -> Result<(), Option<Stall>> {
        let pos = self.ctl.head.0.load(Ordering::Acquire);
        let s = self.cells.header(self.index(pos)).stamp.load(Ordering::Acquire);
        pop_ready_at(pos, s, self.cap)
    }

    /// Whether a push could make progress now, without writing anything.
    pub(crate) fn push_ready(&self) -> Result<(), Option<Stall>> {
        let pos = self.ctl.tail.0.load(Ordering::Acquire);
        let s = self.cells.header(self.index(pos)).stamp.load(Ordering::Acquire);
        let (q, state) = (stamp_pos(s), stamp_state(s));
        if q.wrapping_add(self.cap) == pos && state != EMPTY {
            return Err((state == WRITING || state == READING).then(|| Stall { stamp: s, owner: stamp_owner(s) }));
        }
        Ok(())
    }

    /// Whether the cell of `stall` still shows the same claim.
    pub(crate) fn still_stalled(&self, stall: &Stall) -> bool {
        let idx = self.index(stamp_pos(stall.stamp));
        self.cells.header(idx).stamp.load(Ordering::Acquire) == stall.stamp
    }

    /// Messages in the queue (published or being written), clamped to `0..=capacity`.
    #[cfg_attr(not(any(loom, test)), allow(dead_code))]
    pub(crate) fn depth(&self) -> u64 {
        let head = self.ctl.head.0.load(Ordering::Acquire);
        let tail = self.ctl.tail.0.load(Ordering::Acquire);
        depth_of(head, tail, self.cap)
    }

    /// Releases the claim a dead participant `owner` may hold, given its recorded intent
    /// (`aux[0]`). Idempotent: only an exact `WRITING(p, owner)` / `READING(p, owner)` stamp
    /// is touched, by CAS.
    pub(crate) fn release_claim(&self, owner: usize, intent: u64) {
        if intent == 0 || intent > MAX_POS - self.cap {
            return;
        }
        let p = intent - 1;
        let cell = self.cells.header(self.index(p));
        let writing = stamp(p, WRITING, owner);
        let reading = stamp(p, READING, owner);
        // AcqRel: Acquire pairs with the dead claimant's CAS; Release hands the cell on.
        if cell.stamp.compare_exchange(writing, stamp(p, ABANDONED, 0), Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            self.ctl.abandoned.fetch_add(1, Ordering::Relaxed);
            self.wake(&self.ctl.not_empty.0);
        } else if cell
            .stamp
            .compare_exchange(reading, stamp(p + self.cap, EMPTY, 0), Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            self.ctl.lost.fetch_add(1, Ordering::Relaxed);
            self.wake(&self.ctl.not_full.0);
        }
    }

    /// Reclaims every participant entry whose owner `is_alive` says is dead, releasing the
    /// claims they held. Returns how many entries were reclaimed.
    pub fn reclaim_dead(&self, me: ProcessId, is_alive: impl Fn(ProcessId) -> bool) -> usize {
        self.table.reclaim_dead(me, is_alive, |index, entry| {
            // Acquire: pairs with nothing in a dead process (the kernel ordered its stores);
            // with a reclaimer that died before us, with its Release of the entry word.
            let intent = entry.aux[0].load(Ordering::Acquire);
            self.release_claim(index, intent);
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::participants::Participant;
    use std::cell::UnsafeCell;

    /// Heap cells for unit tests.
    struct HeapCells {
        headers: Vec<CellHeader>,
        data: Vec<UnsafeCell<Vec<u8>>>,
    }

    // SAFETY: the ring's claims serialize all access to each cell's buffer.
    unsafe impl Sync for HeapCells {}

    impl HeapCells {
        fn new(cap: usize, max: usize) -> Self {
            HeapCells {
                headers: (0..cap).map(CellHeader::new).collect(),
                data: (0..cap).map(|_| UnsafeCell::new(vec![0; max])).collect(),
            }
        }
    }

    impl Cells for &HeapCells {
        fn header(&self, index: usize) -> &CellHeader {
            &self.headers[index]
        }
        unsafe fn write(&self, index: usize, data: &[u8]) {
            // SAFETY: the caller holds the WRITING claim: no other access to this buffer.
            unsafe { (&mut *self.data[index].get())[..data.len()].copy_from_slice(data) };
        }
        unsafe fn read(&self, index: usize, out: &mut [MaybeUninit<u8>]) {
            // SAFETY: the caller holds the READING claim: no writer; `out.len() <= max`.
            unsafe {
                let src = &(&*self.data[index].get())[..out.len()];
                std::ptr::copy_nonoverlapping(src.as_ptr(), out.as_mut_ptr().cast::<u8>(), out.len());
            }
        }
    }

    struct Fixture {
        ctl: Control,
        cells: HeapCells,
        parts: Vec<Participant>,
        cap: u64,
        max: usize,
    }

    impl Fixture {
        fn new(cap: u64, max: usize) -> Self {
            Fixture {
                ctl: Control::new(),
                cells: HeapCells::new(cap as usize, max),
                parts: (0..8).map(|_| Participant::new()).collect(),
                cap,
                max,
            }
        }
        fn ring(&self) -> Ring<'_, &HeapCells> {
            Ring::new(&self.ctl, &self.cells, ParticipantTable::from_slice(&self.parts), self.cap, self.max)
        }
    }

    fn pid(n: u32) -> ProcessId {
        ProcessId { pid: n, start_time: 1 }
    }

    #[test]
    fn fifo_and_full_and_empty_for_every_capacity() {
        for cap in 1..=5u64 {
            let f = Fixture::new(cap, 8);
            let r = f.ring();
            let mut out = [0u8; 8];
            for lap in 0..3u8 {
                for i in 0..cap as u8 {
                    assert_eq!(r.try_push(0, &[lap, i], lap % 2 == 0), Push::Done);
                }
                assert_eq!(r.try_push(0, &[9], true), Push::Full(None), "cap {cap}");
                assert_eq!(r.push_ready(), Err(None));
                assert_eq!(r.depth(), cap);
                for i in 0..cap as u8 {
                    assert_eq!(r.pop_ready(), Ok(()));
                    assert_eq!(r.try_pop(1, &mut out), Pop::Got(2));
                    assert_eq!(&out[..2], &[lap, i]);
                }
                assert_eq!(r.try_pop(1, &mut out), Pop::Empty(None));
                assert_eq!(r.pop_ready(), Err(None));
            }
        }
    }

    #[test]
    fn dead_producer_mid_copy_is_abandoned_and_skipped() {
        let f = Fixture::new(4, 8);
        let r = f.ring();
        let mut out = [0u8; 8];
        r.table.register(pid(10), 1, 0..1).unwrap(); // dead producer: entry 0
        r.table.register(pid(11), 1, 1..2).unwrap(); // live producer: entry 1
        r.table.register(pid(12), 2, 2..3).unwrap(); // consumer: entry 2
        assert_eq!(r.push_impl(0, b"dead", true, Crash::MidCopy), Push::Done);
        assert_eq!(r.try_push(1, b"live", true), Push::Done);
        // The consumer is stuck behind the dead claim.
        let Pop::Empty(Some(stall)) = r.try_pop(2, &mut out) else { panic!() };
        assert_eq!(stall.owner, 0);
        assert!(r.still_stalled(&stall));
        assert_eq!(r.reclaim_dead(pid(12), |p| p.pid != 10), 1);
        assert!(!r.still_stalled(&stall));
        assert_eq!(f.ctl.abandoned.load(Ordering::Relaxed), 1);
        assert_eq!(r.try_pop(2, &mut out), Pop::Got(4));
        assert_eq!(&out[..4], b"live");
        assert_eq!(r.try_pop(2, &mut out), Pop::Empty(None));
        // Reclaiming again is a no-op.
        r.release_claim(0, 1);
        assert_eq!(f.ctl.abandoned.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn dead_producer_before_counter_is_helped_past() {
        let f = Fixture::new(2, 8);
        let r = f.ring();
        let mut out = [0u8; 8];
        r.table.register(pid(10), 1, 0..1).unwrap();
        r.table.register(pid(11), 1, 1..2).unwrap();
        r.table.register(pid(12), 2, 2..3).unwrap();
        assert_eq!(r.push_impl(0, b"x", false, Crash::AfterClaim), Push::Done);
        assert_eq!(f.ctl.tail.0.load(Ordering::Relaxed), 0);
        assert_eq!(r.try_push(1, b"y", true), Push::Done); // helps tail past the dead claim
        assert_eq!(r.try_push(1, b"z", true), Push::Full(Some(Stall { stamp: stamp(0, WRITING, 0), owner: 0 })));
        r.reclaim_dead(pid(12), |p| p.pid != 10);
        assert_eq!(r.try_pop(2, &mut out), Pop::Got(1));
        assert_eq!(out[0], b'y');
        assert_eq!(r.try_push(1, b"z", true), Push::Done);
        assert_eq!(r.try_pop(2, &mut out), Pop::Got(1));
        assert_eq!(out[0], b'z');
    }

    #[test]
    fn tail_left_behind_a_consumed_dead_claim_is_helped() {
        // Found by loom: a producer claims position 1 and dies before moving `tail`; the
        // cell is abandoned and retired (EMPTY(1 + cap)) while `tail` still says 1.
        let f = Fixture::new(2, 8);
        let r = f.ring();
        let mut out = [0u8; 8];
        r.table.register(pid(10), 1, 0..1).unwrap();
        r.table.register(pid(11), 1, 1..2).unwrap();
        r.table.register(pid(12), 2, 2..3).unwrap();
        assert_eq!(r.try_push(1, b"a", true), Push::Done);
        assert_eq!(r.push_impl(0, b"x", false, Crash::AfterClaim), Push::Done);
        assert_eq!(f.ctl.tail.0.load(Ordering::Relaxed), 1);
        assert_eq!(r.try_pop(2, &mut out), Pop::Got(1));
        r.reclaim_dead(pid(12), |p| p.pid != 10);
        assert_eq!(r.try_pop(2, &mut out), Pop::Empty(None));
        assert_eq!(r.try_push(1, b"b", true), Push::Done);
        assert_eq!(r.try_pop(2, &mut out), Pop::Got(1));
        assert_eq!(out[0], b'b');
    }

    #[test]
    fn dead_intent_without_claim_changes_nothing() {
        let f = Fixture::new(2, 8);
        let r = f.ring();
        let mut out = [0u8; 8];
        r.table.register(pid(10), 1, 0..1).unwrap();
        r.table.register(pid(11), 1, 1..2).unwrap();
        r.table.register(pid(12), 2, 2..3).unwrap();
        assert_eq!(r.push_impl(0, b"x", true, Crash::AfterIntent), Push::Done);
        assert_eq!(r.try_push(1, b"y", true), Push::Done); // claims position 0, which the dead one only intended
        r.reclaim_dead(pid(12), |p| p.pid != 10);
        assert_eq!(f.ctl.abandoned.load(Ordering::Relaxed), 0);
        assert_eq!(r.try_pop(2, &mut out), Pop::Got(1));
        assert_eq!(out[0], b'y');
    }

    #[test]
    fn dead_consumer_loses_only_what_it_held() {
        let f = Fixture::new(2, 8);
        let r = f.ring();
        let mut out = [0u8; 8];
        r.table.register(pid(10), 1, 0..1).unwrap();
        r.table.register(pid(11), 2, 1..2).unwrap(); // dies
        r.table.register(pid(12), 2, 2..3).unwrap();
        assert_eq!(r.try_push(0, b"a", true), Push::Done);
        assert_eq!(r.try_push(0, b"b", true), Push::Done);
        assert_eq!(r.pop_impl(1, as_uninit(&mut out), Crash::MidCopy), Pop::Empty(None));
        assert_eq!(r.try_pop(2, &mut out), Pop::Got(1));
        assert_eq!(out[0], b'b');
        // The ring is blocked for producers by the dead reader of "a".
        assert!(matches!(r.try_push(0, b"c", true), Push::Full(Some(Stall { owner: 1, .. }))));
        r.reclaim_dead(pid(12), |p| p.pid != 11);
        assert_eq!(f.ctl.lost.load(Ordering::Relaxed), 1);
        assert_eq!(r.try_push(0, b"c", true), Push::Done);
        assert_eq!(r.try_pop(2, &mut out), Pop::Got(1));
        assert_eq!(out[0], b'c');
    }

    #[test]
    fn garbage_stamps_and_lengths_are_reported_once_and_repaired() {
        let f = Fixture::new(4, 8);
        let r = f.ring();
        let mut out = [0u8; 8];
        r.table.register(pid(10), 1, 0..1).unwrap();
        r.table.register(pid(11), 2, 1..2).unwrap();
        // An impossible stamp at the tail: reported, and the cell given the stamp it should have.
        f.cells.headers[0].stamp.store(u64::MAX, Ordering::Relaxed);
        assert!(matches!(r.try_push(0, b"a", true), Push::Corrupt(_)));
        assert_eq!(r.try_push(0, b"a", true), Push::Done);
        assert_eq!(r.try_pop(1, &mut out), Pop::Got(1));
        assert_eq!(out[0], b'a');
        // A length beyond the max: reported, the cell retired, the queue goes on.
        assert_eq!(r.try_push(0, b"b", true), Push::Done);
        let idx = r.index(f.ctl.head.0.load(Ordering::Relaxed));
        f.cells.headers[idx].len.store(1 << 30, Ordering::Relaxed);
        assert!(matches!(r.try_pop(1, &mut out), Pop::Corrupt(_)));
        assert_eq!(r.try_push(0, b"c", true), Push::Done);
        assert_eq!(r.try_pop(1, &mut out), Pop::Got(1));
        assert_eq!(out[0], b'c');
        // Counters out of range or far from the cells: reported once, then rebuilt.
        for bad in [u64::MAX, MAX_POS, 12345, 0] {
            let (h, t) = (f.ctl.head.0.load(Ordering::Relaxed), f.ctl.tail.0.load(Ordering::Relaxed));
            f.ctl.tail.0.store(bad, Ordering::Relaxed);
            let first = r.try_push(0, b"d", true);
            if bad != 0 {
                assert!(matches!(first, Push::Corrupt(_)), "tail {bad}: {first:?}");
            }
            if first != Push::Done {
                assert!(matches!(first, Push::Corrupt(_)), "tail {bad}: {first:?}");
                assert_eq!(r.try_push(0, b"d", true), Push::Done, "tail {bad}");
            }
            f.ctl.head.0.store(bad, Ordering::Relaxed);
            let got = r.try_pop(1, &mut out);
            if bad != 0 {
                assert!(matches!(got, Pop::Corrupt(_)), "head {bad}: {got:?}");
            }
            if got != Pop::Got(1) {
                assert!(matches!(got, Pop::Corrupt(_)), "head {bad}: {got:?}");
                assert_eq!(r.try_pop(1, &mut out), Pop::Got(1), "head {bad}");
            }
            assert_eq!(out[0], b'd');
            assert_eq!(r.try_pop(1, &mut out), Pop::Empty(None));
            assert!(f.ctl.head.0.load(Ordering::Relaxed) >= h && f.ctl.tail.0.load(Ordering::Relaxed) >= t);
        }
    }

    #[test]
    fn hostile_ring_that_keeps_asking_for_help_is_cut_off() {
        let f = Fixture::new(4, 8);
        let r = f.ring();
        let mut out = [0u8; 8];
        r.table.register(pid(11), 2, 0..1).unwrap();
        f.ctl.tail.0.store(1 << 40, Ordering::Relaxed);
        for (i, h) in f.cells.headers.iter().enumerate() {
            h.stamp.store(stamp(i as u64 + (4 << 30), FULL, 0), Ordering::Relaxed);
        }
        let Pop::Corrupt(c) = r.try_pop(0, &mut out) else { panic!() };
        assert_eq!(c.what(), "no progress after a million retries", "{c}");
        assert!(c.repaired(), "{c}");
        // The cells were consistent: head was rebuilt from them and the messages are there.
        assert_eq!(f.ctl.head.0.load(Ordering::Relaxed), 4 << 30);
        assert_eq!(r.try_pop(0, &mut out), Pop::Got(0));
    }

    #[test]
    fn random_control_words_never_hang_or_panic() {
        // Cheap xorshift: every counter and stamp set to extreme and random values, then every
        // operation tried; each returns (bounded by MAX_STEPS), none panics.
        let f = Fixture::new(3, 8);
        let r = f.ring();
        let mut out = [0u8; 8];
        r.table.register(pid(10), 1, 0..1).unwrap();
        r.table.register(pid(11), 2, 1..2).unwrap();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let specials = [0, 1, u64::MAX, u64::MAX - 1, MAX_POS, MAX_POS - 1];
        for round in 0..2000u32 {
            let mut vals = [0u64; 3];
            for v in &mut vals {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *v = x;
            }
            let [v, n, m] = vals;
            let pick = if n % 3 == 0 { specials[(n / 3) as usize % specials.len()] } else { m % 64 };
            let cell = &f.cells.headers[(v >> 8) as usize % 3];
            match v % 5 {
                0 => f.ctl.head.0.store(pick, Ordering::Relaxed),
                1 => f.ctl.tail.0.store(pick, Ordering::Relaxed),
                2 => cell.stamp.store(if n % 2 == 0 { pick } else { m }, Ordering::Relaxed),
                3 => cell.len.store(pick as u32, Ordering::Relaxed),
                _ => {}
            }
            let _ = r.try_push(0, &[round as u8], round % 2 == 0);
            let _ = r.try_pop(1, &mut out);
            let _ = r.pop_ready();
            let _ = r.push_ready();
            assert!(r.depth() <= 3);
        }
    }

    #[test]
    fn threads_deliver_every_message_exactly_once() {
        let cap = 4;
        let f = Fixture::new(cap, 8);
        let per = if cfg!(miri) { 50 } else { 20_000u64 };
        let seen: Vec<std::sync::atomic::AtomicU8> =
            (0..2 * per).map(|_| std::sync::atomic::AtomicU8::new(0)).collect();
        let total = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            for p in 0..2usize {
                let f = &f;
                s.spawn(move || {
                    let r = f.ring();
                    for i in 0..per {
                        let v = (p as u64 * per + i).to_le_bytes();
                        while r.try_push(p, &v, i % 3 != 0) != Push::Done {
                            std::thread::yield_now();
                        }
                    }
                });
            }
            for c in 2..4usize {
                let (f, seen, total) = (&f, &seen, &total);
                s.spawn(move || {
                    let r = f.ring();
                    let mut out = [0u8; 8];
                    while total.load(std::sync::atomic::Ordering::Relaxed) < 2 * per {
                        match r.try_pop(c, &mut out) {
                            Pop::Got(8) => {
                                let v = u64::from_le_bytes(out);
                                assert_eq!(seen[v as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed), 0);
                                total.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                            Pop::Empty(_) => std::thread::yield_now(),
                            other => panic!("{other:?}"),
                        }
                    }
                });
            }
        });
        assert!(seen.iter().all(|s| s.load(std::sync::atomic::Ordering::Relaxed) == 1));
    }
}
