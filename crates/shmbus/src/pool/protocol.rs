//! The pool's lock-free mailbox protocol, over plain references.
//!
//! This file knows nothing about files, mappings or processes: it operates on a
//! [`PoolHeader`] and `max_workers` [`Mailbox`]es, which the segment glue (`pool/mod.rs`)
//! finds in the shared mapping and the loom model (`tests/loom_pool.rs`) builds on the heap.
//!
//! # The mailbox state machine
//!
//! Each worker owns one mailbox; its `state` word is the single source of truth:
//!
//! ```text
//!            join            recv/done             claim_idle (CAS)        publish
//!  VACANT ─────────▶ BUSY ─────────────▶ IDLE ───────────────────▶ FILLING ─────────▶ FULL
//!    ▲                ▲  ◀── withdraw (CAS) ─┘   (dispatcher)        (dispatcher)      │
//!    │                │                                                                │ try_take
//!    │                └──────────────── TAKEN ◀────────────────────────────────────────┘ (worker)
//!    │                                    │ recv/done: TAKEN → IDLE
//!    │ drain_lost (dispatcher)            │
//!    └──────────── LOST ◀─────────────────┘ worker died (reclaim_worker) or left (leave) holding
//!                                           a job that was FULL or TAKEN
//! ```
//!
//! Invariants:
//!
//! 1. **Only the dispatcher leaves IDLE forwards** (CAS `IDLE → FILLING`), and only the
//!    worker leaves IDLE backwards (CAS `IDLE → BUSY`/`VACANT`). Both are compare-and-swaps,
//!    so exactly one wins: a job is never placed in a mailbox whose worker has withdrawn.
//! 2. **Only the dispatcher moves FILLING → FULL**, and it writes the payload, `job_id` and
//!    `len` only between the two (the Release CAS to FULL publishes them). The one other
//!    exit from FILLING is a worker abandoning it (`FILLING → BUSY`/`VACANT`) because its
//!    dispatcher died mid-write; if the dispatcher was in fact alive, its CAS to FULL fails
//!    and the job stays with the dispatcher. A FILLING is never overwritten by a store.
//! 3. **Only the owning worker writes BUSY, TAKEN → IDLE and FULL → TAKEN**; nobody else
//!    touches a mailbox in those states except the reclaimer once the owner is dead.
//! 4. A worker is IDLE only while it is waiting for work (inside `recv`, or after `done()`
//!    which promises an imminent `recv`): that is return-to-sender.
//! 5. **A job leaves the dispatcher's hands exactly once**: it is either taken by the worker
//!    (`FULL → TAKEN`) or turned into LOST (the worker died, or left without taking it), and
//!    a LOST mailbox is only recycled (`LOST → VACANT`) by `drain_lost`, which reports its
//!    job id, or adopted by a joining worker (`LOST → ADOPTING → BUSY`, see `adopt_lost`),
//!    which first moves the report aside for `drain_pending`. So every dispatched job is
//!    received or reported lost, never both, never neither.
//!
//! The `idle_bits` and `present_bits` words in the header are *hints* mirroring the
//! states (bit `i` for mailbox `i`), so the dispatcher finds an idle worker with one load
//! instead of scanning `max_workers` cache lines. A stale idle bit costs one failed CAS; the
//! state word decides.

use crate::event::EventWord;
use crate::sync::{AtomicU32, AtomicU64, CachePadded, Load, Ordering};

/// No worker owns the mailbox.
pub const VACANT: u32 = 0;
/// A worker owns it but is not waiting for work.
pub const BUSY: u32 = 1;
/// The worker is waiting for work: the dispatcher may claim it.
pub const IDLE: u32 = 2;
/// The dispatcher is writing a job into it.
pub const FILLING: u32 = 3;
/// A job is in it, not yet taken.
pub const FULL: u32 = 4;
/// The worker took the job and is processing it.
pub const TAKEN: u32 = 5;
/// The worker died or left holding a job; `job_id` says which, until `drain_lost`.
pub const LOST: u32 = 6;
/// A joining worker is taking over a LOST mailbox, moving its loss report aside (see
/// [`PoolRef::adopt_lost`]).
pub const ADOPTING: u32 = 7;

/// The most workers one pool can have (one bit each in `idle_bits`).
pub const MAX_WORKERS: usize = 64;

/// Pool-wide words written by workers.
#[repr(C)]
#[derive(Debug)]
pub struct WorkerLine {
    /// Bit `i`: mailbox `i` is (probably) IDLE. A hint; the state word decides.
    idle_bits: AtomicU64,
    /// Bit `i`: mailbox `i` has an owner.
    present_bits: AtomicU64,
    /// Notified whenever a worker becomes idle (the dispatcher's readiness).
    idle_event: EventWord,
}

/// Pool-wide words written by the dispatcher.
#[repr(C)]
#[derive(Debug)]
pub struct DispatcherLine {
    /// `epoch << 1 | attached`: bumped by every dispatcher that attaches, bit 0 cleared by a
    /// dispatcher that detaches cleanly (a SIGKILLed one leaves it set).
    dispatcher_state: AtomicU64,
    /// The next job id the pool assigns.
    next_job_id: AtomicU64,
    /// Jobs dispatched over the pool's life.
    dispatched: AtomicU64,
    /// Jobs reported lost over the pool's life.
    lost: AtomicU64,
}

/// The header at the start of the pool's kind area.
#[repr(C)]
#[derive(Debug)]
pub struct PoolHeader {
    w: CachePadded<WorkerLine>,
    d: CachePadded<DispatcherLine>,
}

/// Size of [`PoolHeader`] in the segment.
#[cfg(not(loom))]
pub(crate) const HEADER_SIZE: usize = 256;
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<PoolHeader>() == HEADER_SIZE);

impl PoolHeader {
    /// A fresh header (all zero, like a freshly created segment).
    pub fn new() -> PoolHeader {
        PoolHeader {
            w: CachePadded(WorkerLine {
                idle_bits: AtomicU64::new(0),
                present_bits: AtomicU64::new(0),
                idle_event: EventWord::new(),
            }),
            d: CachePadded(DispatcherLine {
                dispatcher_state: AtomicU64::new(0),
                next_job_id: AtomicU64::new(0),
                dispatched: AtomicU64::new(0),
                lost: AtomicU64::new(0),
            }),
        }
    }
}

impl Default for PoolHeader {
    fn default() -> Self {
        PoolHeader::new()
    }
}

/// One worker's mailbox head; the job payload follows it in the segment.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct Mailbox {
    state: AtomicU32,
    /// The worker sleeps here; the dispatcher notifies it alone.
    event: EventWord,
    /// The owning worker's pid (for lost-job reports).
    owner_pid: AtomicU32,
    _reserved: AtomicU32,
    job_id: AtomicU64,
    len: AtomicU64,
    /// A loss report moved aside by a worker that adopted a LOST mailbox: set (1) once
    /// `pending_id` / `pending_pid` hold it, cleared by the dispatcher's `drain_pending`.
    /// (In what used to be padding: zero, "none", in every segment.)
    pending_set: AtomicU32,
    pending_pid: AtomicU32,
    pending_id: AtomicU64,
}

/// Size of a [`Mailbox`] head in the segment (the payload starts this far in).
#[cfg(not(loom))]
pub(crate) const MAILBOX_HEAD: usize = 64;
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Mailbox>() == MAILBOX_HEAD);

impl Mailbox {
    /// A vacant mailbox.
    pub fn new() -> Mailbox {
        Mailbox {
            state: AtomicU32::new(VACANT),
            event: EventWord::new(),
            owner_pid: AtomicU32::new(0),
            _reserved: AtomicU32::new(0),
            job_id: AtomicU64::new(0),
            len: AtomicU64::new(0),
            pending_set: AtomicU32::new(0),
            pending_pid: AtomicU32::new(0),
            pending_id: AtomicU64::new(0),
        }
    }

    /// The raw state word (for tests and status).
    pub fn state(&self) -> u32 {
        self.state.load(Ordering::Acquire)
    }

    #[cfg(not(loom))]
    pub(crate) fn event(&self) -> &EventWord {
        &self.event
    }
}

impl Default for Mailbox {
    fn default() -> Self {
        Mailbox::new()
    }
}

/// What [`PoolRef::claim_idle`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Mailbox `i` is now FILLING and ours to write.
    Claimed(usize),
    /// Workers exist but none is idle.
    AllBusy,
    /// No worker is attached.
    NoWorkers,
}

/// What [`PoolRef::make_idle`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// The worker is IDLE: the dispatcher may claim it.
    Waiting,
    /// A job is already in the mailbox (after `done()`); take it.
    Full,
    /// The dispatcher is writing a job right now.
    Filling,
    /// Unexpected state (corruption, or the slot was reclaimed from under the worker).
    Corrupt(u32),
}

/// What a worker found when it asked to take a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mail {
    /// A job: its id and length (length not yet validated).
    Job {
        /// Job id.
        id: u64,
        /// Payload length as stored (untrusted).
        len: u64,
    },
    /// Nothing yet; the worker is IDLE.
    Empty,
    /// The dispatcher is writing a job right now.
    Filling,
    /// The state word holds something this worker cannot be in (corruption, or the slot was
    /// reclaimed from under it).
    Corrupt(u32),
}

/// What [`PoolRef::withdraw`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Withdraw {
    /// The worker is no longer idle (BUSY).
    Withdrawn,
    /// Too late: a job is in the mailbox; take it.
    Full,
    /// Too late: the dispatcher is writing a job; wait for it (or abandon it if the
    /// dispatcher is dead).
    Filling,
    /// Unexpected state.
    Corrupt(u32),
}

/// What [`PoolRef::leave`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leave {
    /// The mailbox is VACANT (or already LOST).
    Left,
    /// A job was waiting in the mailbox; it is now LOST for the dispatcher to report.
    LeftLost,
    /// The dispatcher is writing a job; retry when it is done (or abandon if it is dead).
    Filling,
}

/// A view of a pool: header plus `workers` mailboxes `stride` bytes apart.
#[derive(Debug, Clone, Copy)]
pub struct PoolRef<'a> {
    hdr: &'a PoolHeader,
    base: *const u8,
    stride: usize,
    workers: usize,
    _mailboxes: std::marker::PhantomData<&'a Mailbox>,
}

/// The bits of `workers` mailboxes in a worker bit set.
pub(crate) fn worker_mask(workers: usize) -> u64 {
    if workers >= MAX_WORKERS {
        u64::MAX
    } else {
        (1u64 << workers) - 1
    }
}

/// `(workers attached, workers idle)` from the hint words `present` and `idle`, over the
/// mailboxes in `mask`: for [`PoolRef::counts`] and the load-only words of a status view.
pub(crate) fn counts_of<W: Load<Value = u64>>(present: &W, idle: &W, mask: u64) -> (u32, u32) {
    let present = present.load(Ordering::Relaxed) & mask;
    let idle = idle.load(Ordering::Relaxed) & present;
    (present.count_ones(), idle.count_ones())
}

/// Where the words the pool's load-only status view reads lie: in the header (from the kind
/// area's start) and in a mailbox head (from the mailbox's start).
#[cfg(not(loom))]
pub(crate) mod offsets {
    use super::{Mailbox, PoolHeader};
    use std::mem::offset_of;

    pub(crate) const PRESENT_BITS: usize = offset_of!(PoolHeader, w.0.present_bits);
    pub(crate) const IDLE_BITS: usize = offset_of!(PoolHeader, w.0.idle_bits);
    pub(crate) const DISPATCHED: usize = offset_of!(PoolHeader, d.0.dispatched);
    pub(crate) const LOST: usize = offset_of!(PoolHeader, d.0.lost);
    pub(crate) const MAILBOX_STATE: usize = offset_of!(Mailbox, state);
    pub(crate) const MAILBOX_PENDING_SET: usize = offset_of!(Mailbox, pending_set);
}

fn bit(i: usize) -> u64 {
    1u64 << (i % MAX_WORKERS)
}

impl<'a> PoolRef<'a> {
    /// A pool over heap mailboxes (models and unit tests). At most [`MAX_WORKERS`] are used.
    #[cfg_attr(not(any(loom, test)), allow(dead_code))]
    pub fn new(hdr: &'a PoolHeader, mailboxes: &'a [Mailbox]) -> PoolRef<'a> {
        PoolRef {
            hdr,
            base: mailboxes.as_ptr().cast(),
            stride: std::mem::size_of::<Mailbox>(),
            workers: mailboxes.len().min(MAX_WORKERS),
            _mailboxes: std::marker::PhantomData,
        }
    }

    /// A pool whose mailbox `i` starts at `base + i * stride`.
    ///
    /// # Safety
    /// For every `i < workers`, `base + i * stride` is a 64-byte aligned [`Mailbox`] that
    /// stays mapped for `'a`; `workers <= MAX_WORKERS`.
    #[cfg(not(loom))]
    pub(crate) unsafe fn from_raw(hdr: &'a PoolHeader, base: *const u8, stride: usize, workers: usize) -> PoolRef<'a> {
        PoolRef { hdr, base, stride, workers: workers.min(MAX_WORKERS), _mailboxes: std::marker::PhantomData }
    }

    /// Number of mailboxes.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Mailbox `i`. Indices come from this module's own bit scans or from the caller's own
    /// slot, never from shared memory unchecked.
    pub fn mailbox(&self, i: usize) -> &'a Mailbox {
        assert!(i < self.workers, "mailbox index {i} out of range (pool has {})", self.workers);
        // SAFETY: i < workers, and the constructor guarantees a live, aligned Mailbox at
        // base + i * stride for 'a (a heap slice, or the validated segment layout).
        unsafe { &*(self.base.add(i * self.stride) as *const Mailbox) }
    }

    fn mask(&self) -> u64 {
        worker_mask(self.workers)
    }

    // ---------------------------------------------------------------- worker side

    /// Worker: takes ownership of vacant mailbox `i`. `false` if it is not vacant.
    pub fn join(&self, i: usize, pid: u32) -> bool {
        let mb = self.mailbox(i);
        // Acquire: pairs with the Release stores of VACANT in `leave`, `reclaim_worker` and
        // `drain_lost`, so the previous owner's use of the mailbox happens before ours.
        if mb.state.compare_exchange(VACANT, BUSY, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            return false;
        }
        mb.owner_pid.store(pid, Ordering::Relaxed);
        self.hdr.w.present_bits.fetch_or(bit(i), Ordering::Release);
        true
    }

    /// Worker joining (it holds mailbox `i`'s participant entry): takes over a mailbox left
    /// LOST by a worker that died or left holding a job, so a restart does not wait for the
    /// dispatcher's next `reap`. The loss report is moved aside first (`pending_*`, drained
    /// by `drain_pending`), so it is still reported exactly once. `false` if the mailbox is
    /// not LOST, or an earlier report moved aside has not been drained yet.
    ///
    /// `LOST → ADOPTING` by CAS (so `drain_lost` and other adopters keep off), then the
    /// report is copied aside and flagged (Release), then `ADOPTING → BUSY`. If the adopter
    /// dies in between, the reclaimer finds ADOPTING: the report is aside if flagged, else
    /// still in `job_id` (see `reclaim_worker`).
    pub fn adopt_lost(&self, i: usize, pid: u32) -> bool {
        let mb = self.mailbox(i);
        // Acquire: pairs with the Release swap in `drain_pending`.
        if mb.pending_set.load(Ordering::Acquire) != 0 {
            return false;
        }
        // AcqRel: Acquire pairs with the Release store of LOST (job_id written before it).
        if mb.state.compare_exchange(LOST, ADOPTING, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            return false;
        }
        mb.pending_id.store(mb.job_id.load(Ordering::Relaxed), Ordering::Relaxed);
        mb.pending_pid.store(mb.owner_pid.load(Ordering::Relaxed), Ordering::Relaxed);
        // Release: pairs with the Acquire swap in `drain_pending` (the report is complete).
        mb.pending_set.store(1, Ordering::Release);
        mb.owner_pid.store(pid, Ordering::Relaxed);
        // Release: as the store of BUSY in `join`.
        mb.state.store(BUSY, Ordering::Release);
        self.hdr.w.present_bits.fetch_or(bit(i), Ordering::Release);
        true
    }

    /// Dispatcher: reports a loss that `adopt_lost` moved aside: `(job_id, worker pid)`.
    /// Not while the adoption is in progress (ADOPTING): a dead adopter's mailbox goes
    /// through `reclaim_worker` first, which decides where the report is.
    pub fn drain_pending(&self, i: usize) -> Option<(u64, u32)> {
        let mb = self.mailbox(i);
        if mb.pending_set.load(Ordering::Acquire) == 0 || mb.state.load(Ordering::Acquire) == ADOPTING {
            return None;
        }
        let id = mb.pending_id.load(Ordering::Relaxed);
        let pid = mb.pending_pid.load(Ordering::Relaxed);
        // AcqRel: Acquire pairs with the Release store in `adopt_lost`; Release frees the
        // side record for the next adopter (its Acquire load).
        if mb.pending_set.swap(0, Ordering::AcqRel) == 0 {
            return None;
        }
        self.hdr.d.lost.fetch_add(1, Ordering::Relaxed);
        Some((id, pid))
    }

    /// Whether mailbox `i` holds a loss report moved aside (for `undelivered_jobs`).
    pub fn has_pending(&self, i: usize) -> bool {
        self.mailbox(i).pending_set.load(Ordering::Acquire) != 0
    }

    /// Worker: declares itself waiting for work (BUSY/TAKEN → IDLE), or reports that a job
    /// is already there or on its way.
    #[cfg_attr(not(any(test, loom)), allow(dead_code))]
    pub fn make_idle(&self, i: usize) -> Idle {
        self.make_idle_woke(i).0
    }

    /// [`make_idle`](Self::make_idle), also saying whether announcing the idle worker took a
    /// `FUTEX_WAKE` (a dispatcher slept on the idle event), for the worker's counters.
    pub fn make_idle_woke(&self, i: usize) -> (Idle, bool) {
        let mb = self.mailbox(i);
        let s = mb.state.load(Ordering::Acquire);
        match s {
            BUSY | TAKEN => {
                // Release: pairs with the Acquire CAS in `claim_idle`, so our reads of the
                // previous job's payload happen before the dispatcher overwrites it.
                mb.state.store(IDLE, Ordering::Release);
                self.hdr.w.idle_bits.fetch_or(bit(i), Ordering::Release);
                let woke = self.hdr.w.idle_event.notify();
                (Idle::Waiting, woke)
            }
            IDLE => (Idle::Waiting, false),
            FULL => (Idle::Full, false),
            FILLING => (Idle::Filling, false),
            other => (Idle::Corrupt(other), false),
        }
    }

    /// Worker: takes the job in its mailbox if there is one (FULL → TAKEN).
    pub fn try_take(&self, i: usize) -> Mail {
        let mb = self.mailbox(i);
        // Acquire: pairs with the Release store of FULL in `publish`, making the payload,
        // `job_id` and `len` written before it visible.
        let s = mb.state.load(Ordering::Acquire);
        match s {
            FULL => {
                let id = mb.job_id.load(Ordering::Relaxed);
                let len = mb.len.load(Ordering::Relaxed);
                mb.state.store(TAKEN, Ordering::Relaxed);
                Mail::Job { id, len }
            }
            IDLE | BUSY | TAKEN => Mail::Empty,
            FILLING => Mail::Filling,
            other => Mail::Corrupt(other),
        }
    }

    /// Whether mailbox `i` holds a job ready to take.
    pub fn is_full(&self, i: usize) -> bool {
        self.mailbox(i).state.load(Ordering::Relaxed) == FULL
    }

    /// Worker: stops being idle (IDLE → BUSY), unless the dispatcher got there first.
    pub fn withdraw(&self, i: usize) -> Withdraw {
        let mb = self.mailbox(i);
        match mb.state.compare_exchange(IDLE, BUSY, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                self.hdr.w.idle_bits.fetch_and(!bit(i), Ordering::Relaxed);
                Withdraw::Withdrawn
            }
            Err(BUSY | TAKEN) => Withdraw::Withdrawn,
            Err(FULL) => Withdraw::Full,
            Err(FILLING) => Withdraw::Filling,
            Err(other) => Withdraw::Corrupt(other),
        }
    }

    /// Worker: gives up on a FILLING that a *dead* dispatcher will never finish, moving the
    /// mailbox to `to` (BUSY or VACANT). `false` if the state was no longer FILLING.
    pub fn abandon_filling(&self, i: usize, to: u32) -> bool {
        debug_assert!(to == BUSY || to == VACANT);
        self.mailbox(i).state.compare_exchange(FILLING, to, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }

    /// Worker: leaves the pool. A job already in the mailbox becomes LOST (reported to the
    /// dispatcher by `drain_lost`); a job being taken (TAKEN) counts as handled.
    pub fn leave(&self, i: usize) -> Leave {
        let mb = self.mailbox(i);
        self.hdr.w.present_bits.fetch_and(!bit(i), Ordering::Relaxed);
        self.hdr.w.idle_bits.fetch_and(!bit(i), Ordering::Relaxed);
        // Each failed CAS means another process changed the word; an honest one changes it
        // at most twice here (the dispatcher's claim and publish), so a few tries suffice,
        // and a bound keeps a hostile peer rewriting the word from holding us for ever.
        for _ in 0..64 {
            let s = mb.state.load(Ordering::Acquire);
            let (to, result) = match s {
                FILLING => return Leave::Filling,
                VACANT | LOST => return Leave::Left,
                // Release: pairs with the Acquire load in `drain_lost`.
                FULL => (LOST, Leave::LeftLost),
                // Release: pairs with the Acquire CAS in `join` of the next owner.
                _ => (VACANT, Leave::Left),
            };
            if mb.state.compare_exchange(s, to, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                return result;
            }
        }
        Leave::Left
    }

    /// Worker: its own mailbox holds `seen`, a state its worker cannot be in (a peer wrote
    /// junk, or garbage from a corrupted segment). Puts it back to BUSY, as after `join`, so
    /// the worker goes on after reporting the corruption once. A CAS from `seen`: a state
    /// an honest dispatcher set meanwhile is left alone. Returns whether it was repaired.
    pub fn repair_own(&self, i: usize, seen: u32) -> bool {
        let mb = self.mailbox(i);
        if matches!(seen, BUSY | IDLE | FILLING | FULL | TAKEN) {
            return false;
        }
        self.hdr.w.idle_bits.fetch_and(!bit(i), Ordering::Relaxed);
        self.hdr.w.present_bits.fetch_or(bit(i), Ordering::Relaxed);
        // Release: as in `join`.
        mb.state.compare_exchange(seen, BUSY, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }

    /// Any process: releases mailbox `i` of a worker that is dead (the caller holds its
    /// participant entry in reclaiming state, so no new owner can join meanwhile), with
    /// compare-and-swaps only, so it is safe while a dispatcher runs: unlike
    /// [`reclaim_worker`](Self::reclaim_worker) it needs no dispatcher. A job the worker
    /// held (FULL or TAKEN) becomes LOST, to be reported by `drain_lost`; an IDLE mailbox is
    /// withdrawn by CAS (racing the dispatcher's claim exactly as the worker's own withdraw
    /// does); a FILLING is left to its dispatcher (the next `reap` recovers what it becomes).
    pub fn release_dead(&self, i: usize) {
        let mb = self.mailbox(i);
        self.hdr.w.idle_bits.fetch_and(!bit(i), Ordering::Relaxed);
        for _ in 0..64 {
            let s = mb.state.load(Ordering::Acquire);
            let to = match s {
                VACANT | LOST | FILLING => return,
                FULL | TAKEN => LOST,
                // A dead adopter: the report is aside if it got that far, else still here.
                ADOPTING if !self.has_pending(i) => LOST,
                _ => VACANT,
            };
            // Release: pairs with the Acquire load in `drain_lost` / the Acquire CAS in `join`.
            if mb.state.compare_exchange(s, to, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                if to == VACANT {
                    self.hdr.w.present_bits.fetch_and(!bit(i), Ordering::Relaxed);
                }
                return;
            }
        }
    }

    /// Dispatcher, in `reap`: repairs mailbox `i` whose participant entry is free (no owner),
    /// given the state `seen` read between two looks that found the entry free. An ownerless mailbox
    /// can honestly hold only VACANT or LOST, or FULL after a job was published to a worker
    /// that died meanwhile; anything else is left by a hostile or corrupted peer. FULL and
    /// TAKEN become LOST (reported by `drain_lost`), everything else VACANT, by CAS from
    /// `seen`: a worker that joins meanwhile first needs VACANT, so its state is hit only if
    /// one worker joined and left and another joined within these few loads (it then reports
    /// `Corrupt` once and resets its mailbox).
    /// Must run only in the attached dispatcher, between its dispatches.
    pub fn repair_ownerless(&self, i: usize, seen: u32) {
        let to = match seen {
            VACANT | LOST => return,
            FULL | TAKEN => LOST,
            ADOPTING if !self.has_pending(i) => LOST,
            _ => VACANT,
        };
        let mb = self.mailbox(i);
        // Release: as in `release_dead`.
        if mb.state.compare_exchange(seen, to, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            self.hdr.w.idle_bits.fetch_and(!bit(i), Ordering::Relaxed);
            self.hdr.w.present_bits.fetch_and(!bit(i), Ordering::Relaxed);
        }
    }

    /// Dispatcher, in `reap`: sets the hint bits a peer cleared from under an owned mailbox
    /// (an IDLE worker whose idle bit is gone would never be given work). Only sets bits: a
    /// stale set bit costs one failed claim, a lost one a worker.
    pub fn restore_hints(&self, i: usize) {
        let s = self.mailbox(i).state.load(Ordering::Acquire);
        if s == VACANT || s == LOST {
            return;
        }
        let (present, idle) =
            (self.hdr.w.present_bits.load(Ordering::Relaxed), self.hdr.w.idle_bits.load(Ordering::Relaxed));
        if present & bit(i) == 0 {
            self.hdr.w.present_bits.fetch_or(bit(i), Ordering::Relaxed);
        }
        if s == IDLE && idle & bit(i) == 0 {
            // Release: as in `make_idle`.
            self.hdr.w.idle_bits.fetch_or(bit(i), Ordering::Release);
            self.hdr.w.idle_event.notify();
        }
    }

    /// Worker: whether a dispatcher is attached (bit 0 of the dispatcher state) and its
    /// epoch word.
    pub fn dispatcher_state(&self) -> u64 {
        // Acquire: pairs with the Release stores in `attach` / `detach`.
        self.hdr.d.dispatcher_state.load(Ordering::Acquire)
    }

    // ---------------------------------------------------------------- dispatcher side

    /// Dispatcher: claims an idle worker's mailbox (IDLE → FILLING), searching the idle
    /// bits round-robin from `start`.
    pub fn claim_idle(&self, start: usize) -> Claim {
        let mask = self.mask();
        // Acquire: pairs with the Release fetch_or in `make_idle` (a hint only: the CAS below
        // is what synchronizes).
        let mut bits = self.hdr.w.idle_bits.load(Ordering::Acquire) & mask;
        let start = (start % MAX_WORKERS) as u32;
        while bits != 0 {
            let i = ((bits.rotate_right(start).trailing_zeros() + start) % MAX_WORKERS as u32) as usize;
            let mb = self.mailbox(i);
            // Acquire: pairs with the Release store of IDLE in `make_idle`: the worker is done
            // reading the previous payload before we overwrite it.
            if mb.state.compare_exchange(IDLE, FILLING, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                self.hdr.w.idle_bits.fetch_and(!bit(i), Ordering::Relaxed);
                return Claim::Claimed(i);
            }
            bits &= !bit(i); // stale hint: try the next one
        }
        if self.hdr.w.present_bits.load(Ordering::Relaxed) & mask == 0 {
            Claim::NoWorkers
        } else {
            Claim::AllBusy
        }
    }

    /// Dispatcher: publishes the job written into claimed mailbox `i` (FILLING → FULL), and
    /// wakes its worker if `wake`. `false` if the worker abandoned the FILLING (it believed
    /// the dispatcher dead, see `abandon_filling`): the job was not delivered, the caller
    /// still has it.
    pub fn publish(&self, i: usize, job_id: u64, len: u64, wake: bool) -> bool {
        let mb = self.mailbox(i);
        mb.job_id.store(job_id, Ordering::Relaxed);
        mb.len.store(len, Ordering::Relaxed);
        // Release: pairs with the Acquire load in `try_take`. A CAS rather than a store, so
        // an abandoned FILLING is never overwritten (and the job never stranded in a mailbox
        // nobody will read).
        if mb.state.compare_exchange(FILLING, FULL, Ordering::Release, Ordering::Relaxed).is_err() {
            return false;
        }
        if wake {
            mb.event.notify();
        }
        true
    }

    /// Wakes worker `i` (after a quiet `publish`, or on detach). One atomic; a system call
    /// only if the worker sleeps. Returns whether it made that call.
    pub fn wake(&self, i: usize) -> bool {
        self.mailbox(i).event.notify()
    }

    /// Dispatcher, on attach: undoes FILLING left by a dead predecessor (FILLING → IDLE; the
    /// worker is still waiting). Call before dispatching anything. Returns how many.
    pub fn reset_filling(&self) -> usize {
        let mut n = 0;
        for i in 0..self.workers {
            let mb = self.mailbox(i);
            if mb.state.compare_exchange(FILLING, IDLE, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                self.hdr.w.idle_bits.fetch_or(bit(i), Ordering::Release);
                n += 1;
            }
        }
        n
    }

    /// Reclaimer: cleans up mailbox `i` whose owner is dead (idempotent). A job it held
    /// (FULL or TAKEN) becomes LOST; anything else becomes VACANT. Returns whether a lost job
    /// is waiting for `drain_lost`.
    ///
    /// Must run only in the attached dispatcher (never concurrently with a FILLING it does).
    pub fn reclaim_worker(&self, i: usize) -> bool {
        let mb = self.mailbox(i);
        self.hdr.w.present_bits.fetch_and(!bit(i), Ordering::Relaxed);
        self.hdr.w.idle_bits.fetch_and(!bit(i), Ordering::Relaxed);
        match mb.state.load(Ordering::Acquire) {
            // A dead adopter (`adopt_lost`) whose report is still in `job_id` (not yet aside)
            // counts as LOST too.
            FULL | TAKEN | LOST => self.mark_lost(i),
            ADOPTING if !self.has_pending(i) => self.mark_lost(i),
            _ => {
                // Release: pairs with the Acquire CAS in `join`.
                mb.state.store(VACANT, Ordering::Release);
                false
            }
        }
    }

    fn mark_lost(&self, i: usize) -> bool {
        // Release: pairs with the Acquire load in `drain_lost`.
        self.mailbox(i).state.store(LOST, Ordering::Release);
        true
    }

    /// Dispatcher: reports and recycles a LOST mailbox: `(job_id, worker pid)`.
    pub fn drain_lost(&self, i: usize) -> Option<(u64, u32)> {
        let mb = self.mailbox(i);
        // Acquire: pairs with the Release store of LOST in `leave` / `reclaim_worker`.
        if mb.state.load(Ordering::Acquire) != LOST {
            return None;
        }
        let id = mb.job_id.load(Ordering::Relaxed);
        let pid = mb.owner_pid.load(Ordering::Relaxed);
        // Release: pairs with the Acquire CAS in `join` of the next owner.
        mb.state.compare_exchange(LOST, VACANT, Ordering::AcqRel, Ordering::Relaxed).ok()?;
        self.hdr.d.lost.fetch_add(1, Ordering::Relaxed);
        Some((id, pid))
    }

    /// Dispatcher: marks a dispatcher attached with a new epoch; returns the new state word.
    pub fn attach(&self) -> u64 {
        let old = self.hdr.d.dispatcher_state.load(Ordering::Relaxed);
        let new = (((old >> 1).wrapping_add(1)) << 1) | 1;
        // Release: pairs with the Acquire load in `dispatcher_state`.
        self.hdr.d.dispatcher_state.store(new, Ordering::Release);
        new
    }

    /// Dispatcher: marks the dispatcher detached (clean exit) and wakes every worker so they
    /// notice at once.
    pub fn detach(&self) {
        let old = self.hdr.d.dispatcher_state.load(Ordering::Relaxed);
        // Release: pairs with the Acquire load in `dispatcher_state`.
        self.hdr.d.dispatcher_state.store(old & !1, Ordering::Release);
        for i in 0..self.workers {
            self.wake(i);
        }
    }

    /// The next pool-assigned job id (the dispatcher keeps its own copy while attached).
    pub fn next_job_id(&self) -> u64 {
        self.hdr.d.next_job_id.load(Ordering::Relaxed)
    }

    /// Dispatcher: records counters for `status` (and for a successor's job ids).
    pub fn record(&self, next_job_id: u64, dispatched: u64) {
        self.hdr.d.next_job_id.store(next_job_id, Ordering::Relaxed);
        self.hdr.d.dispatched.store(dispatched, Ordering::Relaxed);
    }

    /// Jobs dispatched so far.
    pub fn dispatched(&self) -> u64 {
        self.hdr.d.dispatched.load(Ordering::Relaxed)
    }

    /// Jobs reported lost so far.
    #[cfg_attr(not(any(loom, test)), allow(dead_code))]
    pub fn lost(&self) -> u64 {
        self.hdr.d.lost.load(Ordering::Relaxed)
    }

    /// `(workers attached, workers idle)` from the hint bits.
    #[cfg_attr(not(any(loom, test)), allow(dead_code))]
    pub fn counts(&self) -> (u32, u32) {
        counts_of(&self.hdr.w.present_bits, &self.hdr.w.idle_bits, self.mask())
    }

    /// Whether some worker is (probably) idle.
    pub fn any_idle(&self) -> bool {
        self.hdr.w.idle_bits.load(Ordering::Relaxed) & self.mask() != 0
    }

    #[cfg(not(loom))]
    pub(crate) fn idle_event(&self) -> &'a EventWord {
        &self.hdr.w.idle_event
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn pool(n: usize) -> (PoolHeader, Vec<Mailbox>) {
        (PoolHeader::new(), (0..n).map(|_| Mailbox::new()).collect())
    }

    #[test]
    fn full_cycle_and_return_to_sender() {
        let (h, m) = pool(3);
        let p = PoolRef::new(&h, &m);
        assert_eq!(p.claim_idle(0), Claim::NoWorkers);
        assert!(p.join(1, 42));
        assert!(!p.join(1, 43), "a taken mailbox cannot be joined twice");
        assert_eq!(p.claim_idle(0), Claim::AllBusy, "a joined worker is busy until it waits");
        assert_eq!(p.make_idle(1), Idle::Waiting);
        assert_eq!(p.counts(), (1, 1));
        assert_eq!(p.claim_idle(0), Claim::Claimed(1));
        assert_eq!(p.try_take(1), Mail::Filling);
        assert_eq!(p.claim_idle(0), Claim::AllBusy);
        assert!(p.publish(1, 7, 5, true));
        assert_eq!(p.try_take(1), Mail::Job { id: 7, len: 5 });
        assert_eq!(p.try_take(1), Mail::Empty);
        assert_eq!(p.mailbox(1).state(), TAKEN);
        assert_eq!(p.make_idle(1), Idle::Waiting);
        assert_eq!(p.withdraw(1), Withdraw::Withdrawn);
        assert_eq!(p.claim_idle(0), Claim::AllBusy);
        assert_eq!(p.leave(1), Leave::Left);
        assert_eq!(p.claim_idle(0), Claim::NoWorkers);
        assert_eq!(p.mailbox(1).state(), VACANT);
    }

    #[test]
    fn round_robin_start() {
        let (h, m) = pool(4);
        let p = PoolRef::new(&h, &m);
        for i in 0..4 {
            assert!(p.join(i, 1));
            p.make_idle(i);
        }
        assert_eq!(p.claim_idle(2), Claim::Claimed(2));
        assert_eq!(p.claim_idle(2), Claim::Claimed(3));
        assert_eq!(p.claim_idle(2), Claim::Claimed(0));
        assert_eq!(p.claim_idle(0), Claim::Claimed(1));
        assert_eq!(p.claim_idle(0), Claim::AllBusy);
    }

    #[test]
    fn withdraw_loses_to_a_claim() {
        let (h, m) = pool(1);
        let p = PoolRef::new(&h, &m);
        p.join(0, 1);
        p.make_idle(0);
        assert_eq!(p.claim_idle(0), Claim::Claimed(0));
        assert_eq!(p.withdraw(0), Withdraw::Filling);
        assert!(p.publish(0, 9, 0, false));
        assert_eq!(p.withdraw(0), Withdraw::Full);
        assert_eq!(p.try_take(0), Mail::Job { id: 9, len: 0 });
    }

    #[test]
    fn dead_worker_loses_its_job_exactly_once() {
        let (h, m) = pool(2);
        let p = PoolRef::new(&h, &m);
        p.join(0, 77);
        p.make_idle(0);
        let Claim::Claimed(i) = p.claim_idle(0) else { panic!() };
        assert!(p.publish(i, 5, 1, true));
        assert!(p.reclaim_worker(0));
        assert!(p.reclaim_worker(0), "idempotent");
        assert_eq!(p.drain_lost(0), Some((5, 77)));
        assert_eq!(p.drain_lost(0), None);
        assert_eq!(p.lost(), 1);
        assert!(p.join(0, 78), "the slot is reusable");
    }

    #[test]
    fn leaving_with_a_job_in_the_mailbox_reports_it() {
        let (h, m) = pool(1);
        let p = PoolRef::new(&h, &m);
        p.join(0, 3);
        p.make_idle(0);
        p.claim_idle(0);
        assert_eq!(p.leave(0), Leave::Filling);
        assert!(p.publish(0, 11, 0, false));
        assert_eq!(p.leave(0), Leave::LeftLost);
        assert!(!p.join(0, 4), "a LOST slot is not reused before it is reported");
        assert_eq!(p.drain_lost(0), Some((11, 3)));
        assert!(p.join(0, 4));
    }

    #[test]
    fn a_lost_mailbox_is_adopted_and_its_loss_still_reported_once() {
        let (h, m) = pool(1);
        let p = PoolRef::new(&h, &m);
        p.join(0, 3);
        p.make_idle(0);
        p.claim_idle(0);
        assert!(p.publish(0, 11, 0, false));
        assert!(p.reclaim_worker(0)); // died holding job 11
        assert!(!p.join(0, 4), "LOST is not VACANT");
        assert!(p.adopt_lost(0, 4));
        assert_eq!(p.mailbox(0).state(), BUSY);
        assert_eq!(p.drain_lost(0), None);
        assert_eq!(p.counts(), (1, 0));
        // The adopter works like any worker, and dies holding a job too before the report
        // was drained: its own loss is reported from the mailbox, the first from aside.
        p.make_idle(0);
        p.claim_idle(0);
        assert!(p.publish(0, 12, 0, false));
        assert!(p.reclaim_worker(0));
        assert!(!p.adopt_lost(0, 5), "one report aside at a time");
        assert_eq!(p.drain_lost(0), Some((12, 4)));
        assert_eq!(p.drain_pending(0), Some((11, 3)));
        assert_eq!(p.drain_pending(0), None);
        assert_eq!(p.lost(), 2);
        assert!(p.join(0, 5));
    }

    #[test]
    fn an_adopter_dying_mid_way_loses_no_report_and_doubles_none() {
        for report_aside in [false, true] {
            let (h, m) = pool(1);
            let p = PoolRef::new(&h, &m);
            p.join(0, 3);
            p.make_idle(0);
            p.claim_idle(0);
            assert!(p.publish(0, 11, 0, false));
            assert!(p.reclaim_worker(0));
            // The adopter stops after its CAS to ADOPTING (and maybe after moving the report).
            assert!(m[0].state.compare_exchange(LOST, ADOPTING, Ordering::AcqRel, Ordering::Relaxed).is_ok());
            if report_aside {
                m[0].pending_id.store(11, Ordering::Relaxed);
                m[0].pending_pid.store(3, Ordering::Relaxed);
                m[0].pending_set.store(1, Ordering::Release);
            }
            assert_eq!(p.drain_pending(0), None, "not while ADOPTING");
            p.reclaim_worker(0);
            let reports: Vec<_> = [p.drain_lost(0), p.drain_pending(0)].into_iter().flatten().collect();
            assert_eq!(reports, [(11, 3)], "aside: {report_aside}");
            assert!(p.join(0, 6));
        }
    }

    #[test]
    fn takeover_resets_filling_and_corrupt_bits_are_masked() {
        let (h, m) = pool(2);
        let p = PoolRef::new(&h, &m);
        p.join(0, 1);
        p.make_idle(0);
        p.claim_idle(0); // the "dead dispatcher" stops here
        assert_eq!(p.reset_filling(), 1);
        assert_eq!(p.mailbox(0).state(), IDLE);
        assert_eq!(p.claim_idle(0), Claim::Claimed(0));
        assert!(p.abandon_filling(0, BUSY), "the worker gives up on a dead dispatcher");
        assert!(!p.publish(0, 1, 0, true), "a live one then keeps its job");
        assert_eq!(p.mailbox(0).state(), BUSY);
        // Bits beyond max_workers (corruption) are ignored.
        h.w.idle_bits.store(u64::MAX, Ordering::Relaxed);
        assert_eq!(p.claim_idle(0), Claim::AllBusy);
        let s1 = p.attach();
        assert_eq!(s1 & 1, 1);
        p.detach();
        assert_eq!(p.dispatcher_state() & 1, 0);
        assert!(p.attach() > s1);
    }

    #[test]
    fn garbage_states_are_reported_not_trusted() {
        let (h, m) = pool(1);
        let p = PoolRef::new(&h, &m);
        m[0].state.store(99, Ordering::Relaxed);
        assert_eq!(p.make_idle(0), Idle::Corrupt(99));
        assert_eq!(p.try_take(0), Mail::Corrupt(99));
        assert_eq!(p.withdraw(0), Withdraw::Corrupt(99));
        assert!(!p.reclaim_worker(0));
        assert_eq!(p.mailbox(0).state(), VACANT);
    }
}
