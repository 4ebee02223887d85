//! The queue protocol on a heap buffer, for loom models (`tests/loom_queue.rs`).
//!
//! Built only with `--cfg loom`. It runs exactly the production code of `protocol.rs`; only
//! the cell memory (loom's checked `UnsafeCell`) and the participant table (heap entries)
//! differ, and a "crash" is a participant that stops at a chosen point of an operation.

use std::mem::MaybeUninit;

use loom::cell::UnsafeCell;

use super::protocol::{as_uninit, CellHeader, Cells, Control, Crash, Pop, Push, Ring};
use crate::participants::{Participant, ParticipantTable};
use crate::sync::Ordering;
use crate::sys::ProcessId;

/// Where a crashing participant stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// After recording its intent, before claiming the cell.
    AfterIntent,
    /// After claiming the cell, before moving the counter.
    AfterClaim,
    /// After moving the counter, half-way through the copy.
    MidCopy,
}

impl From<CrashPoint> for Crash {
    fn from(c: CrashPoint) -> Crash {
        match c {
            CrashPoint::AfterIntent => Crash::AfterIntent,
            CrashPoint::AfterClaim => Crash::AfterClaim,
            CrashPoint::MidCopy => Crash::MidCopy,
        }
    }
}

/// Result of a model push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushResult {
    /// Sent.
    Done,
    /// No room.
    Full,
    /// Impossible state (a model failure).
    Corrupt,
}

/// Result of a model pop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PopResult {
    /// A message of this length.
    Got(usize),
    /// Nothing now.
    Empty,
    /// Impossible state (a model failure).
    Corrupt,
}

#[derive(Debug)]
struct ModelCell {
    header: CellHeader,
    data: UnsafeCell<Vec<u8>>,
}

#[derive(Debug, Clone, Copy)]
struct ModelCells<'a>(&'a [ModelCell]);

impl Cells for ModelCells<'_> {
    fn header(&self, index: usize) -> &CellHeader {
        &self.0[index].header
    }
    unsafe fn write(&self, index: usize, data: &[u8]) {
        // SAFETY: the caller holds the WRITING claim; loom checks that no access overlaps.
        self.0[index].data.with_mut(|p| unsafe { (&mut *p)[..data.len()].copy_from_slice(data) });
    }
    unsafe fn read(&self, index: usize, out: &mut [MaybeUninit<u8>]) {
        // SAFETY: the caller holds the READING claim; loom checks that no access overlaps;
        // `out.len() <= max`, the length of the cell's buffer.
        self.0[index].data.with(|p| unsafe {
            let src = &(&*p)[..out.len()];
            std::ptr::copy_nonoverlapping(src.as_ptr(), out.as_mut_ptr().cast::<u8>(), out.len());
        });
    }
}

/// A queue on the heap: control block, cells and a participant table.
#[derive(Debug)]
pub struct HeapQueue {
    ctl: Control,
    cells: Vec<ModelCell>,
    parts: Vec<Participant>,
    cap: u64,
    max: usize,
}

impl HeapQueue {
    /// `capacity` cells of `max` bytes, `participants` table entries.
    pub fn new(capacity: usize, max: usize, participants: usize) -> HeapQueue {
        HeapQueue {
            ctl: Control::new(),
            cells: (0..capacity)
                .map(|i| ModelCell { header: CellHeader::new(i), data: UnsafeCell::new(vec![0; max]) })
                .collect(),
            parts: (0..participants).map(|_| Participant::new()).collect(),
            cap: capacity as u64,
            max,
        }
    }

    fn ring(&self) -> Ring<'_, ModelCells<'_>> {
        Ring::new(&self.ctl, ModelCells(&self.cells), ParticipantTable::from_slice(&self.parts), self.cap, self.max)
    }

    /// Registers process `pid` in table entry `index` (role 1 producer, 2 consumer).
    pub fn register(&self, pid: u32, role: u32, index: usize) {
        let got = self.ring().table.register(ProcessId { pid, start_time: 1 }, role, index..index + 1);
        assert_eq!(got, Some(index), "entry {index} is taken");
    }

    /// One push attempt by participant `me`.
    pub fn push(&self, me: usize, data: &[u8]) -> PushResult {
        match self.ring().try_push(me, data, true) {
            Push::Done => PushResult::Done,
            Push::Full(_) => PushResult::Full,
            Push::Corrupt(_) => PushResult::Corrupt,
        }
    }

    /// A push by `me` that stops ("dies") at `at`, if it gets that far.
    pub fn push_crashing(&self, me: usize, data: &[u8], at: CrashPoint) -> PushResult {
        match self.ring().push_impl(me, data, false, at.into()) {
            Push::Done => PushResult::Done,
            Push::Full(_) => PushResult::Full,
            Push::Corrupt(_) => PushResult::Corrupt,
        }
    }

    /// One pop attempt by participant `me` into `out` (at least `max` bytes).
    pub fn pop(&self, me: usize, out: &mut [u8]) -> PopResult {
        match self.ring().try_pop(me, out) {
            Pop::Got(n) => PopResult::Got(n),
            Pop::Empty(_) => PopResult::Empty,
            Pop::Corrupt(_) => PopResult::Corrupt,
        }
    }

    /// A pop by `me` that stops ("dies") at `at`, if it gets that far.
    pub fn pop_crashing(&self, me: usize, out: &mut [u8], at: CrashPoint) -> PopResult {
        match self.ring().pop_impl(me, as_uninit(out), at.into()) {
            Pop::Got(n) => PopResult::Got(n),
            Pop::Empty(_) => PopResult::Empty,
            Pop::Corrupt(_) => PopResult::Corrupt,
        }
    }

    /// Process `me_pid` reclaims the entries of process `dead_pid`. Returns entries reclaimed.
    pub fn reclaim(&self, me_pid: u32, dead_pid: u32) -> usize {
        self.ring().reclaim_dead(ProcessId { pid: me_pid, start_time: 1 }, |p| p.pid != dead_pid)
    }

    /// Cells abandoned by dead producers.
    pub fn abandoned(&self) -> u64 {
        self.ctl.abandoned.load(Ordering::Relaxed)
    }

    /// Messages lost with dead consumers.
    pub fn lost(&self) -> u64 {
        self.ctl.lost.load(Ordering::Relaxed)
    }
}
