//! Loom models of the queue's claim / publish / consume protocol, including crashes.
//!
//! Run with:
//! `RUSTFLAGS="--cfg loom" cargo test -p shmbus --test loom_queue --release`
//! (`LOOM_MAX_PREEMPTIONS=3` is the default bound here.)
//!
//! The models run the production ring code on a heap buffer. A "crash" is a participant
//! that stops at a chosen point of an operation; its death is the join of its thread (the
//! kernel orders a dead process's stores before anyone can see it is dead), after which a
//! reclaimer releases its claim while the others keep going.
#![cfg(loom)]

use std::mem::MaybeUninit;

use loom::cell::UnsafeCell;
use loom::sync::atomic::Ordering;
use loom::sync::Arc;
use loom::thread;
use shmbus::participants::{Participant, ParticipantTable};
use shmbus::queue::protocol::{as_uninit, CellHeader, Cells, Control, Crash, Pop, Push, Ring};
use shmbus::ProcessId;

// The queue on a heap buffer: only the cell memory (loom's checked `UnsafeCell`) and the
// participant table (heap entries) differ from production.

/// Where a crashing participant stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CrashPoint {
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
enum PushResult {
    /// Sent.
    Done,
    /// No room.
    Full,
    /// Impossible state (a model failure).
    Corrupt,
}

/// Result of a model pop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PopResult {
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
struct HeapQueue {
    ctl: Control,
    cells: Vec<ModelCell>,
    parts: Vec<Participant>,
    cap: u64,
    max: usize,
}

impl HeapQueue {
    /// `capacity` cells of `max` bytes, `participants` table entries.
    fn new(capacity: usize, max: usize, participants: usize) -> HeapQueue {
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
    fn register(&self, pid: u32, role: u32, index: usize) {
        let got = self.ring().table.register(ProcessId { pid, start_time: 1 }, role, index..index + 1);
        assert_eq!(got, Some(index), "entry {index} is taken");
    }

    /// One push attempt by participant `me`.
    fn push(&self, me: usize, data: &[u8]) -> PushResult {
        match self.ring().try_push(me, data, true) {
            Push::Done => PushResult::Done,
            Push::Full(_) => PushResult::Full,
            Push::Corrupt(_) => PushResult::Corrupt,
        }
    }

    /// A push by `me` that stops ("dies") at `at`, if it gets that far.
    fn push_crashing(&self, me: usize, data: &[u8], at: CrashPoint) -> PushResult {
        match self.ring().push_impl(me, data, false, at.into()) {
            Push::Done => PushResult::Done,
            Push::Full(_) => PushResult::Full,
            Push::Corrupt(_) => PushResult::Corrupt,
        }
    }

    /// One pop attempt by participant `me` into `out` (at least `max` bytes).
    fn pop(&self, me: usize, out: &mut [u8]) -> PopResult {
        match self.ring().try_pop(me, out) {
            Pop::Got(n) => PopResult::Got(n),
            Pop::Empty(_) => PopResult::Empty,
            Pop::Corrupt(_) => PopResult::Corrupt,
        }
    }

    /// A pop by `me` that stops ("dies") at `at`, if it gets that far.
    fn pop_crashing(&self, me: usize, out: &mut [u8], at: CrashPoint) -> PopResult {
        match self.ring().pop_impl(me, as_uninit(out), at.into()) {
            Pop::Got(n) => PopResult::Got(n),
            Pop::Empty(_) => PopResult::Empty,
            Pop::Corrupt(_) => PopResult::Corrupt,
        }
    }

    /// Process `me_pid` reclaims the entries of process `dead_pid`. Returns entries reclaimed.
    fn reclaim(&self, me_pid: u32, dead_pid: u32) -> usize {
        self.ring().reclaim_dead(ProcessId { pid: me_pid, start_time: 1 }, |p| p.pid != dead_pid)
    }

    /// Cells abandoned by dead producers.
    fn abandoned(&self) -> u64 {
        self.ctl.abandoned.load(Ordering::Relaxed)
    }

    /// Messages lost with dead consumers.
    fn lost(&self) -> u64 {
        self.ctl.lost.load(Ordering::Relaxed)
    }
}

const PRODUCER: u32 = 1;
const CONSUMER: u32 = 2;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(f);
}

/// Pops until empty, asserting every message is one byte and not seen before.
fn drain(q: &HeapQueue, me: usize, seen: &mut Vec<u8>) {
    let mut out = [0u8; 4];
    loop {
        match q.pop(me, &mut out) {
            PopResult::Got(n) => {
                assert_eq!(n, 2, "torn or foreign length");
                assert_eq!(out[0], !out[1], "torn message");
                assert!(!seen.contains(&out[0]), "delivered twice: {}", out[0]);
                seen.push(out[0]);
            }
            PopResult::Empty => return,
            PopResult::Corrupt => panic!("corrupt"),
        }
    }
}

fn msg(v: u8) -> [u8; 2] {
    [v, !v]
}

#[test]
fn two_producers_two_consumers_exactly_once() {
    model(|| {
        let q = Arc::new(HeapQueue::new(2, 4, 4));
        q.register(10, PRODUCER, 0);
        q.register(11, PRODUCER, 1);
        q.register(12, CONSUMER, 2);
        q.register(13, CONSUMER, 3);
        let producers: Vec<_> = (0..2u8)
            .map(|p| {
                let q = q.clone();
                thread::spawn(move || {
                    let mut sent = 0;
                    if q.push(p as usize, &msg(p)) == PushResult::Done {
                        sent += 1;
                    }
                    sent
                })
            })
            .collect();
        let c = {
            let q = q.clone();
            thread::spawn(move || {
                let mut seen = Vec::new();
                let mut out = [0u8; 4];
                if let PopResult::Got(n) = q.pop(3, &mut out) {
                    assert_eq!(n, 2);
                    assert_eq!(out[0], !out[1]);
                    seen.push(out[0]);
                }
                seen
            })
        };
        let sent: u32 = producers.into_iter().map(|h| h.join().unwrap()).sum();
        let mut seen = c.join().unwrap();
        drain(&q, 2, &mut seen);
        assert_eq!(sent, 2, "capacity 2 holds both");
        seen.sort();
        assert_eq!(seen, vec![0, 1]);
    });
}

#[test]
fn wraps_around_a_one_cell_ring() {
    model(|| {
        let q = Arc::new(HeapQueue::new(1, 4, 2));
        q.register(10, PRODUCER, 0);
        q.register(11, CONSUMER, 1);
        let p = {
            let q = q.clone();
            thread::spawn(move || {
                let mut sent = Vec::new();
                for v in 0..3u8 {
                    if q.push(0, &msg(v)) == PushResult::Done {
                        sent.push(v);
                    }
                }
                sent
            })
        };
        let mut seen = Vec::new();
        let mut out = [0u8; 4];
        for _ in 0..2 {
            if let PopResult::Got(_) = q.pop(1, &mut out) {
                assert_eq!(out[0], !out[1]);
                seen.push(out[0]);
            }
        }
        let sent = p.join().unwrap();
        drain(&q, 1, &mut seen);
        assert_eq!(seen, sent, "FIFO, exactly once");
    });
}

/// A producer dies at `at` while a live producer and a consumer keep going; then a
/// reclaimer releases the dead claim concurrently with them. The live message is delivered
/// exactly once, the dead one never (its cell is abandoned), and nothing stays wedged.
fn dead_producer(at: CrashPoint) {
    model(move || {
        let q = Arc::new(HeapQueue::new(2, 4, 4));
        q.register(10, PRODUCER, 0); // dies
        q.register(11, PRODUCER, 1);
        q.register(12, CONSUMER, 2);
        let dead = {
            let q = q.clone();
            thread::spawn(move || q.push_crashing(0, &msg(7), at))
        };
        let live = {
            let q = q.clone();
            thread::spawn(move || q.push(1, &msg(1)))
        };
        let consumer = {
            let q = q.clone();
            thread::spawn(move || {
                let mut out = [0u8; 4];
                match q.pop(2, &mut out) {
                    PopResult::Got(n) => {
                        assert_eq!(n, 2);
                        Some(out[0])
                    }
                    PopResult::Empty => None,
                    PopResult::Corrupt => panic!("corrupt"),
                }
            })
        };
        assert_ne!(dead.join().unwrap(), PushResult::Corrupt);
        // The producer's death is known now; reclaim while the others may still run.
        let reclaimer = {
            let q = q.clone();
            thread::spawn(move || q.reclaim(99, 10))
        };
        assert_eq!(live.join().unwrap(), PushResult::Done);
        let first = consumer.join().unwrap();
        assert_eq!(reclaimer.join().unwrap(), 1);
        let mut seen: Vec<u8> = first.into_iter().collect();
        drain(&q, 2, &mut seen);
        assert_eq!(seen, vec![1], "the live message exactly once, the dead one never");
        assert!(q.abandoned() <= 1);
        if at == CrashPoint::AfterIntent {
            assert_eq!(q.abandoned(), 0);
        }
        // Nothing wedged: both cells are usable again.
        assert_eq!(q.push(1, &msg(2)), PushResult::Done);
        assert_eq!(q.push(1, &msg(3)), PushResult::Done);
        let mut seen = Vec::new();
        drain(&q, 2, &mut seen);
        assert_eq!(seen, vec![2, 3]);
    });
}

#[test]
fn dead_producer_after_intent() {
    dead_producer(CrashPoint::AfterIntent);
}

#[test]
fn dead_producer_after_claim() {
    dead_producer(CrashPoint::AfterClaim);
}

#[test]
fn dead_producer_mid_copy() {
    dead_producer(CrashPoint::MidCopy);
}

/// A consumer dies at `at` holding (at most) one message while another consumer drains;
/// the reclaimer retires its cell. At most that one message is lost, none is duplicated,
/// and producers can use the cell again.
fn dead_consumer(at: CrashPoint) {
    model(move || {
        let q = Arc::new(HeapQueue::new(2, 4, 4));
        q.register(10, PRODUCER, 0);
        q.register(11, CONSUMER, 1); // dies
        q.register(12, CONSUMER, 2);
        assert_eq!(q.push(0, &msg(1)), PushResult::Done);
        assert_eq!(q.push(0, &msg(2)), PushResult::Done);
        let dead = {
            let q = q.clone();
            thread::spawn(move || {
                let mut out = [0u8; 4];
                q.pop_crashing(1, &mut out, at)
            })
        };
        let live = {
            let q = q.clone();
            thread::spawn(move || {
                let mut out = [0u8; 4];
                match q.pop(2, &mut out) {
                    PopResult::Got(_) => Some(out[0]),
                    PopResult::Empty => None,
                    PopResult::Corrupt => panic!("corrupt"),
                }
            })
        };
        assert_ne!(dead.join().unwrap(), PopResult::Corrupt);
        let reclaimer = {
            let q = q.clone();
            thread::spawn(move || q.reclaim(99, 11))
        };
        let first = live.join().unwrap();
        reclaimer.join().unwrap();
        let mut seen: Vec<u8> = first.into_iter().collect();
        drain(&q, 2, &mut seen);
        let lost = 2 - seen.len() as u64;
        assert_eq!(lost, q.lost(), "every loss is counted");
        assert!(lost <= 1, "only the message the dead consumer held is lost");
        if at == CrashPoint::AfterIntent {
            assert_eq!(lost, 0);
        }
        // The dead consumer's cell is free again.
        assert_eq!(q.push(0, &msg(3)), PushResult::Done);
        assert_eq!(q.push(0, &msg(4)), PushResult::Done);
        let mut seen = Vec::new();
        drain(&q, 2, &mut seen);
        assert_eq!(seen, vec![3, 4]);
    });
}

#[test]
fn dead_consumer_after_intent() {
    dead_consumer(CrashPoint::AfterIntent);
}

#[test]
fn dead_consumer_after_claim() {
    dead_consumer(CrashPoint::AfterClaim);
}

#[test]
fn dead_consumer_mid_copy() {
    dead_consumer(CrashPoint::MidCopy);
}
