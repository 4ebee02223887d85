//! SIGKILL, then restart, for every role of the pool: the first participant started after
//! the crash waits or works; none fails on what the dead one left.
//!
//! The victims are this test binary run again (`child_entry`), killed with SIGKILL.
#![cfg(not(loom))]

mod common;

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::restart::{domain_at, kill, spawn};
use common::{child_role, eventually, Scratch};
use shmbus::pool::{Dispatcher, Pool, PoolConfig, PoolRecvTimeoutError, PoolTrySendError};

fn pool_config() -> PoolConfig {
    PoolConfig::default().max_workers(1).max_job_len(64)
}

#[test]
fn child_entry() {
    let Some(role) = child_role() else {
        return;
    };
    let d = domain_at(&PathBuf::from(std::env::var("SHMBUS_ROOT").unwrap()));
    match role.as_str() {
        // Holds the pool as its dispatcher until killed.
        "dispatcher" => {
            let _d = Pool::create_or_open(&d, "p", &pool_config()).and_then(|p| p.dispatcher()).unwrap();
            std::thread::sleep(Duration::from_secs(60));
        }
        // Holds the pool, dispatches one job when a worker is idle, then waits to be killed.
        "dispatch-one" => {
            let mut disp = Pool::create_or_open(&d, "p", &pool_config()).and_then(|p| p.dispatcher()).unwrap();
            dispatch_when_idle(&mut disp, b"held when killed");
            std::thread::sleep(Duration::from_secs(60));
        }
        // Waits for work until killed (idle in recv).
        "idle-worker" => {
            let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
            let _ = w.recv_timeout(Duration::from_secs(60));
        }
        // Takes one job and is killed holding it.
        "busy-worker" => {
            let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
            let _job = w.recv_timeout(Duration::from_secs(60)).unwrap();
            std::thread::sleep(Duration::from_secs(60));
        }
        other => panic!("unknown child role {other}"),
    }
}

/// Dispatches `job` as soon as a worker is idle (within 10 s).
fn dispatch_when_idle(disp: &mut Dispatcher, job: &[u8]) -> u64 {
    let t0 = Instant::now();
    loop {
        match disp.try_send(job) {
            Ok(sent) => return sent.job_id,
            Err(PoolTrySendError::AllBusy | PoolTrySendError::NoWorkers) => {
                assert!(t0.elapsed() < Duration::from_secs(10), "no worker became idle");
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn pool_dispatcher_killed_then_a_worker_first_then_a_new_dispatcher() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("restart-dispatcher");
    let d = domain_at(s.path());
    let victim = spawn("dispatcher", s.path());
    eventually("the dispatcher attached", 20, || Pool::status(&d, "p").is_ok_and(|st| st.dispatcher_alive));
    kill(victim);

    // The first worker started after the crash waits for a dispatcher (it never had one).
    let (tx, rx) = mpsc::channel();
    let d2 = d.clone();
    let worker = std::thread::spawn(move || {
        let mut w = Pool::open(&d2, "p").and_then(|p| p.worker()).unwrap();
        w.set_orphan_check(Duration::from_millis(5));
        tx.send(()).unwrap();
        let r = w.recv_timeout(Duration::from_secs(20)).map(|j| j.data().to_vec());
        tx.send(()).unwrap();
        r
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "the worker returned without a dispatcher");

    // A new dispatcher takes over from the dead one; the waiting worker serves it.
    let mut disp = Pool::open(&d, "p").and_then(|p| p.dispatcher()).unwrap();
    dispatch_when_idle(&mut disp, b"after the crash");
    assert_eq!(worker.join().unwrap().unwrap(), b"after the crash");
}

#[test]
fn pool_dispatcher_killed_while_served_is_reported_once_then_the_next_is_served() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("restart-served");
    let d = domain_at(s.path());
    let victim = spawn("dispatcher", s.path());
    eventually("the dispatcher attached", 20, || Pool::status(&d, "p").is_ok_and(|st| st.dispatcher_alive));
    let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
    w.set_orphan_check(Duration::from_millis(5));
    kill(victim);
    // The worker served the dead dispatcher: told once, then it waits for the next.
    assert_eq!(w.recv_timeout(Duration::from_secs(10)).map(|j| j.id()), Err(PoolRecvTimeoutError::Orphaned));
    assert_eq!(w.recv_timeout(Duration::from_millis(50)).map(|j| j.id()), Err(PoolRecvTimeoutError::Timeout));
    let mut disp = Pool::open(&d, "p").and_then(|p| p.dispatcher()).unwrap();
    w.done();
    dispatch_when_idle(&mut disp, b"next");
    assert_eq!(w.recv_timeout(Duration::from_secs(10)).unwrap().data(), b"next");
}

/// The same in a `WaitSet`: `is_ready` does not read `/proc`, the set's `recheck` does, and
/// wakes the waiter once the dispatcher is found dead.
#[test]
fn pool_dispatcher_killed_wakes_a_worker_in_a_waitset() {
    use shmbus::{WaitSet, Waitable};
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("restart-waitset");
    let d = domain_at(s.path());
    let victim = spawn("dispatcher", s.path());
    eventually("the dispatcher attached", 20, || Pool::status(&d, "p").is_ok_and(|st| st.dispatcher_alive));
    let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
    w.set_orphan_check(Duration::from_millis(5));
    assert!(w.try_recv().is_err()); // idle
    kill(victim);
    assert!(!w.is_ready(), "is_ready does not probe /proc");
    let mut ws = WaitSet::new();
    assert_eq!(ws.wait_timeout(&[&w], Duration::from_secs(10)).unwrap(), &[0]);
    assert_eq!(w.try_recv().map(|j| j.id()), Err(shmbus::pool::PoolTryRecvError::Orphaned));
}

#[test]
fn pool_worker_killed_then_a_new_worker_joins_at_once() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("restart-worker");
    let d = domain_at(s.path());
    // One mailbox: the new worker needs the dead one's.
    let mut disp = Pool::create_or_open(&d, "p", &pool_config()).and_then(|p| p.dispatcher()).unwrap();
    let victim = spawn("idle-worker", s.path());
    eventually("the worker waits", 20, || disp.status().idle == 1);
    kill(victim);
    // No reap in between: the joining worker frees the dead one's mailbox itself.
    let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
    w.done();
    dispatch_when_idle(&mut disp, b"to the new worker");
    assert_eq!(w.recv_timeout(Duration::from_secs(10)).unwrap().data(), b"to the new worker");
    assert!(disp.reap().is_empty(), "the dead worker held no job");
}

#[test]
fn pool_worker_killed_holding_a_job_is_reported_and_replaced() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("restart-busy-worker");
    let d = domain_at(s.path());
    // One mailbox: the new worker must take over the one the dead worker left LOST.
    let mut disp = Pool::create_or_open(&d, "p", &pool_config()).and_then(|p| p.dispatcher()).unwrap();
    let victim = spawn("busy-worker", s.path());
    eventually("the worker waits", 20, || disp.status().idle == 1);
    let id = dispatch_when_idle(&mut disp, b"dies with it");
    eventually("the job is taken", 20, || disp.status().idle == 0 && disp.try_send(b"x").is_err());
    kill(victim);
    // No reap in between: the new worker joins at once, and the job is still reported, once.
    let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
    w.done();
    dispatch_when_idle(&mut disp, b"to the new worker");
    assert_eq!(w.recv_timeout(Duration::from_secs(10)).unwrap().data(), b"to the new worker");
    let lost: Vec<u64> = disp.reap().iter().map(|l| l.job_id).collect();
    assert_eq!(lost, [id]);
    assert!(disp.reap().is_empty());
}

#[test]
fn pool_whole_system_killed_then_worker_first_then_dispatcher() {
    if child_role().is_some() {
        return;
    }
    // The dispatcher and the only worker (holding a job) are both killed; the restart starts
    // the worker first, then the dispatcher: both work, and the job is reported lost once.
    let s = Scratch::new("restart-system");
    let d = domain_at(s.path());
    let dispatcher = spawn("dispatch-one", s.path());
    eventually("the dispatcher attached", 20, || Pool::status(&d, "p").is_ok_and(|st| st.dispatcher_alive));
    let worker = spawn("busy-worker", s.path());
    eventually("the job is dispatched and taken", 20, || {
        Pool::status(&d, "p").is_ok_and(|st| st.dispatched == 1 && st.workers == 1 && st.idle == 0)
    });
    // Taken: the mailbox is TAKEN, not FULL (give the worker a moment past the take).
    std::thread::sleep(Duration::from_millis(50));
    kill(dispatcher);
    kill(worker);

    let (tx, rx) = mpsc::channel();
    let d2 = d.clone();
    let restarted = std::thread::spawn(move || {
        let mut w = Pool::open(&d2, "p").and_then(|p| p.worker()).unwrap();
        tx.send(()).unwrap();
        let r = w.recv_timeout(Duration::from_secs(20)).map(|j| j.data().to_vec());
        tx.send(()).unwrap();
        r
    });
    rx.recv_timeout(Duration::from_secs(10)).expect("the restarted worker joined");
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err(), "the worker returned without a dispatcher");
    let mut disp = Pool::open(&d, "p").and_then(|p| p.dispatcher()).unwrap_or_else(|e| panic!("{e}"));
    dispatch_when_idle(&mut disp, b"after the restart");
    assert_eq!(restarted.join().unwrap().unwrap(), b"after the restart");
    let lost: Vec<u64> = disp.reap().iter().map(|l| l.job_id).collect();
    assert_eq!(lost, [1]);
}
