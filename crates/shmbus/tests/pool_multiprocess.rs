//! Multi-process pool tests with real processes: every job received exactly once across
//! worker processes, AllBusy when all are busy, workers SIGKILLed at random points (the
//! dispatcher learns the lost job ids and reclaims the slots), and the dispatcher SIGKILLed
//! (workers see Orphaned; a successor takes over).
//!
//! The test binary re-executes itself as the child: `child_entry` does nothing unless
//! `SHMBUS_TEST_CHILD` names a role.

#![cfg(not(loom))]

mod common;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{child_command, child_role, eventually, wait_with_deadline, Rng, Scratch};
use shmbus::pool::{Pool, PoolConfig, PoolRecvError, PoolTrySendError};
use shmbus::{Domain, OpenError};

const POOL: &str = "work";
const MAX_JOB: usize = 1024;

fn cfg() -> PoolConfig {
    PoolConfig::default().max_workers(4).max_job_len(MAX_JOB)
}

// ------------------------------------------------------------------ helpers

fn spawn(role: &str, root: &Path) -> Child {
    child_command("child_entry", role, &[("SHMBUS_ROOT", root.display().to_string())])
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn child")
}

/// A job: its id, a spin time for the worker (µs), then pseudo-random bytes.
fn make_job(id: u64, rng: &mut Rng, max_spin_us: u64) -> Vec<u8> {
    let len = 16 + rng.below(MAX_JOB as u64 - 16) as usize;
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&id.to_le_bytes());
    v.extend_from_slice(&rng.below(max_spin_us + 1).to_le_bytes());
    while v.len() < len {
        v.push(rng.next() as u8);
    }
    v
}

/// Every `(job id, crc)` acknowledged by workers, from all their ack files.
fn read_acks(root: &Path) -> Vec<(u64, u32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(root).unwrap().flatten() {
        if !e.file_name().to_string_lossy().starts_with("ack.") {
            continue;
        }
        for line in std::fs::read_to_string(e.path()).unwrap().lines() {
            let mut f = line.split(' ');
            let (Some(id), Some(crc)) = (f.next(), f.next()) else { panic!("bad ack line {line:?}") };
            out.push((id.parse().unwrap(), crc.parse().unwrap()));
        }
    }
    out
}

// ------------------------------------------------------------------ child roles

#[test]
fn child_entry() {
    let Some(role) = child_role() else {
        return;
    };
    let root = PathBuf::from(std::env::var("SHMBUS_ROOT").unwrap());
    let d = Domain::new("t").unwrap();
    match role.as_str() {
        "worker" => child_worker(&d, &root),
        "dispatcher" => child_dispatcher(&d),
        other => panic!("unknown child role {other}"),
    }
}

/// Receives jobs until orphaned, acknowledging each (id and CRC32C of the payload) with one
/// O_APPEND write, which survives a SIGKILL once it has returned. A job starting with
/// `HOLD` blocks until the file `release` exists.
fn child_worker(d: &Domain, root: &Path) {
    let mut w = Pool::open(d, POOL).and_then(|p| p.worker()).unwrap_or_else(|e| {
        eprintln!("worker: {e}");
        std::process::exit(3)
    });
    let mut ack = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(root.join(format!("ack.{}", std::process::id())))
        .unwrap();
    loop {
        match w.recv_ref() {
            Ok(job) => {
                let data = job.data();
                if data.starts_with(b"HOLD") {
                    let end = Instant::now() + Duration::from_secs(20);
                    while !root.join("release").exists() && Instant::now() < end {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                } else if data.len() >= 16 {
                    let spin = Duration::from_micros(u64::from_le_bytes(data[8..16].try_into().unwrap()));
                    let t = Instant::now();
                    while t.elapsed() < spin {
                        std::hint::spin_loop();
                    }
                }
                let line = format!("{} {}\n", job.id(), crc32c::crc32c(data));
                ack.write_all(line.as_bytes()).unwrap();
            }
            Err(PoolRecvError::Orphaned) => std::process::exit(0),
            Err(e) => {
                eprintln!("worker: {e}");
                std::process::exit(2)
            }
        }
    }
}

/// Takes over the pool and dispatches as fast as it can until killed.
fn child_dispatcher(d: &Domain) {
    let mut disp = loop {
        match Pool::open(d, POOL).and_then(|p| p.dispatcher()) {
            Ok(disp) => break disp,
            Err(OpenError::Busy { .. }) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("dispatcher: {e}"),
        }
    };
    let job = [0x5au8; 1000];
    loop {
        match disp.try_send(&job[..]) {
            Ok(_) | Err(PoolTrySendError::AllBusy) | Err(PoolTrySendError::NoWorkers) => std::hint::spin_loop(),
            Err(e) => panic!("dispatcher: {e}"),
        }
    }
}

// ------------------------------------------------------------------ tests

#[test]
fn every_job_received_exactly_once_across_processes() {
    let root = Scratch::in_temp_dir("poolmp-once");
    let d = root.domain("t");
    let mut rng = Rng::from_var_or_clock("POOL_TEST_SEED");
    let mut disp = Pool::create_or_open(&d, POOL, &cfg()).and_then(|p| p.dispatcher()).unwrap();
    let mut children: Vec<Child> = (0..3).map(|_| spawn("worker", &root.0)).collect();
    eventually("3 workers to wait for work", 20, || disp.status().idle == 3);

    // Three jobs that hold their workers: now every worker is busy.
    let mut expected: HashMap<u64, u32> = HashMap::new();
    let mut busy_workers = HashSet::new();
    for _ in 0..3 {
        let hold = b"HOLD".to_vec();
        let s = disp.try_send(&hold).unwrap();
        assert!(busy_workers.insert(s.worker), "each job went to a different worker");
        expected.insert(s.job_id, crc32c::crc32c(&hold));
    }
    match disp.try_send(b"overflow") {
        Err(PoolTrySendError::AllBusy) => {}
        other => panic!("expected AllBusy with every worker holding a job, got {other:?}"),
    }
    std::fs::write(root.0.join("release"), b"").unwrap();

    let total = 3000u64;
    let mut all_busy = 0u64;
    for id in 4..4 + total {
        let job = make_job(id, &mut rng, 20);
        expected.insert(id, crc32c::crc32c(&job));
        loop {
            match disp.try_send_with_id(id, &job) {
                Ok(_) => break,
                Err(PoolTrySendError::AllBusy) => {
                    all_busy += 1;
                    std::thread::yield_now();
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
    drop(disp);
    for c in &mut children {
        assert!(wait_with_deadline(c, 20, "worker").success(), "worker exited with an error");
    }
    let acks = read_acks(&root.0);
    let mut seen = HashSet::new();
    for &(id, _) in &acks {
        assert!(seen.insert(id), "job {id} received twice");
    }
    assert_eq!(seen, (1..4 + total).collect::<HashSet<_>>(), "every job received");
    for (id, crc) in acks {
        assert_eq!(expected.get(&id), Some(&crc), "job {id} payload intact");
    }
    println!("{total} jobs over 3 worker processes, {all_busy} AllBusy returns");
}

#[test]
fn sigkilled_workers_lose_jobs_the_dispatcher_learns_and_slots_are_reclaimed() {
    let root = Scratch::in_temp_dir("poolmp-kill");
    let d = root.domain("t");
    let mut rng = Rng::from_var_or_clock("POOL_TEST_SEED");
    let mut disp = Pool::create_or_open(&d, POOL, &cfg()).and_then(|p| p.dispatcher()).unwrap();
    let mut live: Vec<Child> = (0..3).map(|_| spawn("worker", &root.0)).collect();
    let mut dispatched: HashMap<u64, u32> = HashMap::new();
    let mut lost: HashSet<u64> = HashSet::new();
    let mut next_id = 1u64;
    let kills = 200;
    for _ in 0..kills {
        // Dispatch a few jobs; workers spend 0..200 µs on each, so the kill below finds them
        // idle, filling, holding an untaken job, processing, or acknowledging.
        for _ in 0..rng.below(12) {
            let job = make_job(next_id, &mut rng, 200);
            let crc = crc32c::crc32c(&job);
            match disp.try_send_with_id(next_id, &job) {
                Ok(_) => {
                    dispatched.insert(next_id, crc);
                    next_id += 1;
                }
                Err(PoolTrySendError::AllBusy | PoolTrySendError::NoWorkers) => break,
                Err(e) => panic!("{e}"),
            }
        }
        if rng.below(2) == 0 {
            std::thread::sleep(Duration::from_micros(rng.below(400)));
        }
        let victim = rng.below(live.len() as u64) as usize;
        let mut child = live.swap_remove(victim);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        for l in disp.reap() {
            assert!(dispatched.contains_key(&l.job_id), "lost job {} was never dispatched", l.job_id);
            assert!(lost.insert(l.job_id), "job {} reported lost twice", l.job_id);
        }
        // The victim's mailbox is reclaimed: never more workers than live processes.
        let st = disp.status();
        assert!(st.workers <= live.len(), "{} workers attached but only {} processes live", st.workers, live.len());
        live.push(spawn("worker", &root.0));
    }
    // Let the survivors finish; jobs still in their mailboxes are delivered before Orphaned.
    eventually("replacement workers to join", 20, || disp.status().workers == live.len());
    for l in disp.reap() {
        assert!(lost.insert(l.job_id));
    }
    drop(disp);
    for c in &mut live {
        assert!(wait_with_deadline(c, 20, "worker").success());
    }
    let acks = read_acks(&root.0);
    let mut acked = HashSet::new();
    for (id, crc) in acks {
        assert!(acked.insert(id), "job {id} received twice");
        assert_eq!(dispatched.get(&id), Some(&crc), "job {id} payload intact");
    }
    // Every dispatched job is accounted for: received, or reported lost. Both only when the
    // worker died after acknowledging but before asking for more.
    for id in dispatched.keys() {
        assert!(acked.contains(id) || lost.contains(id), "job {id} vanished: neither received nor reported lost");
    }
    let both = acked.intersection(&lost).count();
    println!(
        "{kills} SIGKILLs: {} jobs dispatched, {} received, {} reported lost ({both} of them after processing)",
        dispatched.len(),
        acked.len(),
        lost.len()
    );
}

#[test]
fn sigkilled_dispatcher_orphans_workers_and_a_successor_takes_over() {
    let root = Scratch::in_temp_dir("poolmp-killdisp");
    let d = root.domain("t");
    let mut rng = Rng::from_var_or_clock("POOL_TEST_SEED");
    // The pool exists before any dispatcher; two worker threads wait in it.
    let stop = Arc::new(AtomicBool::new(false));
    let orphaned: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let received: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let threads: Vec<_> = (0..2)
        .map(|k| {
            let mut w = Pool::create_or_open(&d, POOL, &cfg()).and_then(|p| p.worker()).unwrap();
            let (stop, orphaned, received) = (stop.clone(), orphaned.clone(), received.clone());
            std::thread::spawn(move || loop {
                match w.recv_ref() {
                    Ok(job) => {
                        assert_eq!(job.data(), &[0x5a; 1000][..], "a job from a killed dispatcher is never torn");
                        received[k].fetch_add(1, Ordering::SeqCst);
                    }
                    Err(PoolRecvError::Orphaned) => {
                        // Every killed dispatcher died; the last one, dropped, finished.
                        let finished = stop.load(Ordering::SeqCst);
                        assert_eq!(w.dispatcher_finished(), finished, "dispatcher_finished after Orphaned");
                        orphaned[k].fetch_add(1, Ordering::SeqCst);
                        if finished {
                            return;
                        }
                    }
                    Err(e) => panic!("{e}"),
                }
            })
        })
        .collect();
    let rounds = 20;
    for round in 0..rounds {
        let before = [orphaned[0].load(Ordering::SeqCst), orphaned[1].load(Ordering::SeqCst)];
        let got = [received[0].load(Ordering::SeqCst), received[1].load(Ordering::SeqCst)];
        let mut child = spawn("dispatcher", &root.0);
        let pid = child.id();
        eventually("the child dispatcher to attach", 20, || {
            let st = shmbus::pool::Pool::status(&d, POOL).unwrap();
            st.dispatcher_pid == Some(pid) && st.dispatcher_alive
        });
        // Exclusive while it lives.
        match Pool::open(&d, POOL).and_then(|p| p.dispatcher()) {
            Err(OpenError::Busy { holder_pid, .. }) => assert_eq!(holder_pid, pid),
            other => panic!("expected Busy, got {:?}", other.map(|_| ())),
        }
        // Let it dispatch a while (both workers get work), then kill it at a random point,
        // often in the middle of writing a job.
        eventually("both workers to get jobs", 20, || {
            received[0].load(Ordering::SeqCst) > got[0] && received[1].load(Ordering::SeqCst) > got[1]
        });
        std::thread::sleep(Duration::from_micros(rng.below(3000)));
        child.kill().unwrap();
        child.wait().unwrap();
        // Both workers see Orphaned (within their 100 ms check interval; the bound here is
        // only against hangs).
        eventually(&format!("round {round}: both workers to see Orphaned"), 20, || {
            orphaned[0].load(Ordering::SeqCst) > before[0] && orphaned[1].load(Ordering::SeqCst) > before[1]
        });
    }
    // A successor in this process takes over, repairs what the last one left, and works.
    let mut disp = Pool::open(&d, POOL).and_then(|p| p.dispatcher()).unwrap();
    assert!(disp.reap().is_empty(), "nobody died holding a job");
    eventually("both workers idle under the new dispatcher", 20, || disp.status().idle == 2);
    let first = disp.status().dispatched;
    disp.try_send(&[0x5au8; 1000][..]).unwrap();
    assert_eq!(disp.status().dispatched, first + 1);
    stop.store(true, Ordering::SeqCst);
    drop(disp);
    for t in threads {
        t.join().unwrap();
    }
}
