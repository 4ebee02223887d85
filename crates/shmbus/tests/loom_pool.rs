//! Loom model of the pool's mailbox protocol (`src/pool/protocol.rs`): the dispatcher and
//! a worker racing over one mailbox, a worker withdrawing (timeout) or leaving while a job
//! is being placed, a worker dying at every point of its program and being reclaimed, a
//! successor dispatcher repairing a dead one's half-written mailbox, and a joining worker
//! adopting a dead one's LOST mailbox while the dispatcher reaps it.
//!
//! Run with:
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p shmbus --release --test loom_pool`
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

use shmbus::pool::protocol::{Claim, Idle, Leave, Mail, Mailbox, PoolHeader, PoolRef, Withdraw, BUSY, FULL, VACANT};

struct Shared {
    hdr: PoolHeader,
    mbs: Vec<Mailbox>,
}

impl Shared {
    fn new(n: usize) -> Arc<Shared> {
        Arc::new(Shared { hdr: PoolHeader::new(), mbs: (0..n).map(|_| Mailbox::new()).collect() })
    }
    fn pool(&self) -> PoolRef<'_> {
        PoolRef::new(&self.hdr, &self.mbs)
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = b.preemption_bound.or(Some(4));
    b.check(f);
}

/// Dispatcher: up to `tries` claims; publishes `id` on success.
fn dispatch(p: PoolRef<'_>, id: u64, tries: usize) -> Option<usize> {
    for _ in 0..tries {
        match p.claim_idle(0) {
            Claim::Claimed(i) => {
                if p.publish(i, id, 3, true) {
                    return Some(i);
                }
            }
            Claim::AllBusy | Claim::NoWorkers => thread::yield_now(),
        }
    }
    None
}

/// Worker side of a `recv_timeout`: wait a little, then withdraw; a job that raced the
/// withdrawal is taken.
fn recv_or_withdraw(p: PoolRef<'_>, polls: usize) -> Option<u64> {
    assert_eq!(p.make_idle(0), Idle::Waiting);
    for _ in 0..polls {
        if let Mail::Job { id, len } = p.try_take(0) {
            assert_eq!(len, 3, "len published with the job");
            return Some(id);
        }
        thread::yield_now();
    }
    loop {
        match p.withdraw(0) {
            Withdraw::Withdrawn => return None,
            Withdraw::Full => match p.try_take(0) {
                Mail::Job { id, .. } => return Some(id),
                other => panic!("FULL then {other:?}"),
            },
            Withdraw::Filling => thread::yield_now(),
            Withdraw::Corrupt(s) => panic!("state {s}"),
        }
    }
}

#[test]
fn dispatch_races_recv_and_withdraw() {
    model(|| {
        let s = Shared::new(1);
        assert!(s.pool().join(0, 1));
        let s2 = s.clone();
        let w = thread::spawn(move || recv_or_withdraw(s2.pool(), 1));
        let sent = dispatch(s.pool(), 42, 2);
        let got = w.join().unwrap();
        // Exactly once: a placed job is received; a job is placed only in a waiting mailbox.
        assert_eq!(sent.is_some(), got == Some(42), "sent {sent:?}, got {got:?}");
        assert_eq!(s.mbs[0].state(), if got.is_some() { shmbus::pool::protocol::TAKEN } else { BUSY });
        assert_eq!(s.pool().counts(), (1, 0), "not idle after withdrawing or taking");
    });
}

#[test]
fn two_workers_one_job_goes_to_exactly_one() {
    model(|| {
        let s = Shared::new(2);
        assert!(s.pool().join(0, 1));
        assert!(s.pool().join(1, 2));
        let got = Arc::new(AtomicU64::new(0));
        let ws: Vec<_> = (0..2)
            .map(|i| {
                let (s, got) = (s.clone(), got.clone());
                thread::spawn(move || {
                    let p = s.pool();
                    p.make_idle(i);
                    if let Mail::Job { id, .. } = p.try_take(i) {
                        got.fetch_add(id, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        let sent = dispatch(s.pool(), 1, 1);
        for w in ws {
            w.join().unwrap();
        }
        let received = got.load(Ordering::SeqCst);
        match sent {
            Some(i) => assert!(
                received == 1 || s.mbs[i].state() == FULL,
                "a placed job is taken, or still waits in the mailbox"
            ),
            None => assert_eq!(received, 0),
        }
    });
}

#[test]
fn leaving_worker_hands_a_racing_job_back_as_lost() {
    model(|| {
        let s = Shared::new(1);
        assert!(s.pool().join(0, 7));
        let s2 = s.clone();
        let w = thread::spawn(move || {
            let p = s2.pool();
            p.make_idle(0);
            loop {
                match p.leave(0) {
                    Leave::Left => return false,
                    Leave::LeftLost => return true,
                    Leave::Filling => thread::yield_now(),
                }
            }
        });
        let sent = dispatch(s.pool(), 9, 1);
        let left_lost = w.join().unwrap();
        let lost = s.pool().drain_lost(0);
        assert_eq!(sent.is_some(), left_lost);
        assert_eq!(lost, sent.map(|_| (9, 7)), "the job comes back exactly when it was sent");
        assert_eq!(s.mbs[0].state(), VACANT);
        assert_eq!(s.pool().counts(), (0, 0));
    });
}

/// The worker's program, cut short after `steps` steps (it "dies" there): become idle, take
/// the job, finish it (become idle again), leave.
fn worker_until(p: PoolRef<'_>, steps: usize, finished: &AtomicBool) {
    let mut took = false;
    for step in 0..steps {
        match step {
            0 => {
                p.make_idle(0);
            }
            1 | 2 if !took => took = matches!(p.try_take(0), Mail::Job { .. }),
            3 if took => {
                p.make_idle(0); // TAKEN → IDLE: the job is done
                finished.store(true, Ordering::SeqCst);
            }
            _ => {}
        }
    }
}

#[test]
fn worker_dies_at_every_step_and_is_reclaimed() {
    for steps in 0..=4 {
        model(move || {
            let s = Shared::new(1);
            assert!(s.pool().join(0, 5));
            let finished = Arc::new(AtomicBool::new(false));
            let (s2, f2) = (s.clone(), finished.clone());
            let w = thread::spawn(move || worker_until(s2.pool(), steps, &f2));
            let sent = dispatch(s.pool(), 77, 2);
            w.join().unwrap(); // the worker is dead: the dispatcher's reap notices
            let p = s.pool();
            p.reclaim_worker(0);
            let lost = p.drain_lost(0);
            let done = finished.load(Ordering::SeqCst);
            // Every dispatched job is finished or reported lost, never both, never neither.
            match sent {
                Some(_) => assert_eq!(lost.is_some(), !done, "steps {steps}: lost {lost:?}, done {done}"),
                None => assert_eq!(lost, None),
            }
            if let Some((id, pid)) = lost {
                assert_eq!((id, pid), (77, 5));
            }
            // The slot is reclaimed for a new worker.
            assert_eq!(p.counts(), (0, 0));
            assert!(p.join(0, 6));
        });
    }
}

#[test]
fn successor_repairs_a_dead_dispatchers_filling() {
    model(|| {
        let s = Shared::new(1);
        let p = s.pool();
        assert!(p.join(0, 1));
        p.make_idle(0);
        // The first dispatcher claims the mailbox and dies before publishing.
        assert_eq!(p.claim_idle(0), Claim::Claimed(0));
        let s2 = s.clone();
        // The worker, believing the dispatcher dead, gives up on the FILLING...
        let w = thread::spawn(move || {
            let p = s2.pool();
            loop {
                match p.withdraw(0) {
                    Withdraw::Withdrawn => return (None, "withdrawn"),
                    Withdraw::Full => {
                        if let Mail::Job { id, .. } = p.try_take(0) {
                            return (Some(id), "took");
                        }
                    }
                    Withdraw::Filling => {
                        if p.abandon_filling(0, BUSY) {
                            return (None, "abandoned");
                        }
                    }
                    Withdraw::Corrupt(st) => panic!("state {st}"),
                }
            }
        });
        // ...while a successor attaches, repairs, and dispatches.
        p.reset_filling();
        let sent = dispatch(p, 2, 1);
        let (got, how) = w.join().unwrap();
        // If the worker abandoned the successor's fill (wrongly believing it dead), the
        // successor's publish fails and it keeps the job: delivered exactly when published.
        assert_eq!(sent.is_some(), got == Some(2), "sent {sent:?}, got {got:?} via {how}");
        // Nothing is stranded in the mailbox. (Read with `leave`, a CAS loop: loom may hand
        // a final plain load a stale value after racing RMWs and stores, tokio-rs/loom#254.)
        let left = loop {
            match p.leave(0) {
                Leave::Filling => thread::yield_now(),
                other => break other,
            }
        };
        assert_eq!(left, Leave::Left);
    });
}

/// A worker joining adopts a mailbox left LOST by a dead worker while the dispatcher reaps
/// it: the loss is reported exactly once (from the mailbox or from aside), and the mailbox
/// ends up either the adopter's (BUSY) or free.
#[test]
fn adopting_a_lost_mailbox_races_the_dispatchers_reap() {
    model(|| {
        let s = Shared::new(1);
        let p = s.pool();
        assert!(p.join(0, 7));
        assert_eq!(p.make_idle(0), Idle::Waiting);
        assert_eq!(dispatch(p, 42, 1), Some(0));
        assert!(p.reclaim_worker(0)); // died holding job 42
        let s2 = Arc::clone(&s);
        let adopter = thread::spawn(move || s2.pool().adopt_lost(0, 8));
        let mut reports = Vec::new();
        let p = s.pool();
        reports.extend(p.drain_lost(0));
        reports.extend(p.drain_pending(0));
        let adopted = adopter.join().unwrap();
        // A later reap finds whatever is left.
        reports.extend(p.drain_lost(0));
        reports.extend(p.drain_pending(0));
        assert_eq!(reports, [(42, 7)]);
        assert_eq!(p.mailbox(0).state(), if adopted { BUSY } else { VACANT });
        assert_eq!(p.lost(), 1);
    });
}
