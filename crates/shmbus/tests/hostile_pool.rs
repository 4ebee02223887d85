//! A pool under a hostile peer: while a dispatcher and two workers run in their own
//! processes, this process writes extreme and random values (0, 1, max, max-1, random,
//! valid-looking states) into every control word of the segment (hint bits, dispatcher
//! state, counters, mailbox states, job ids and lengths, participant entries) many thousands
//! of times. Every call of the children must return within its timeout plus a generous
//! slack, none may die by a signal, and their output stays bounded. Once the words are
//! restored, honest parties work again. Also replays the `pool_state` fuzz corpus.
//!
//! The test binary re-executes itself as the children (`child_entry`).
#![cfg(not(loom))]

mod common;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use common::hostile::{self, spawn, SharedMap as Mapping};
use common::{child_role, eventually, Rng, Scratch};
use shmbus::pool::{Pool, PoolConfig, PoolRecvTimeoutError, PoolTryRecvError};
use shmbus::segment::{KIND_OFFSET, PARTICIPANTS_OFFSET};
use shmbus::waitset::Waitable;
use shmbus::{Domain, WaitSet};

mod fuzz_body {
    include!("../../../fuzz/fuzz_targets/pool_state_body.rs");
}

const WORKERS: usize = 4;
const MAX_JOB: usize = 64;
fn cfg() -> PoolConfig {
    PoolConfig::default().max_workers(WORKERS).max_job_len(MAX_JOB)
}
/// Each receive's timeout, and the slack a call may take beyond it before it counts as hung
/// (a worker waits up to a second for a live dispatcher it believes mid-copy).
const TIMEOUT: Duration = Duration::from_millis(20);
const SLACK: Duration = Duration::from_secs(3);
/// How long the scribbling lasts.
const SCRIBBLE: Duration = Duration::from_secs(3);
/// Most bytes a child may print (it prints one summary line, or one line on failure).
const OUTPUT_LIMIT: usize = 16 * 1024;

fn domain_at(root: &Path) -> Domain {
    Domain::with_root("h", root).unwrap()
}

/// `(file offset, width)` of every control word of the pool.
fn control_words() -> Vec<(usize, usize)> {
    let k = KIND_OFFSET;
    // Header (see pool/protocol.rs): idle bits, present bits, idle event; then dispatcher
    // state, next job id, dispatched, lost on the next 128-byte line pair.
    let mut w = vec![(k, 8), (k + 8, 8), (k + 16, 4), (k + 128, 8), (k + 136, 8), (k + 144, 8), (k + 152, 8)];
    let stride = 64 + MAX_JOB.div_ceil(64) * 64;
    for i in 0..WORKERS {
        // Mailbox: state, event, owner pid, job id, length.
        let mb = k + 256 + i * stride;
        w.extend([(mb, 4), (mb + 4, 4), (mb + 8, 4), (mb + 16, 8), (mb + 24, 8)]);
    }
    // Participant entries: the dispatcher's (0) and the workers' (1..): owner word, start
    // time, role.
    for e in 0..=WORKERS {
        let entry = PARTICIPANTS_OFFSET + e * 64;
        w.extend([(entry, 8), (entry + 8, 8), (entry + 16, 4)]);
    }
    // Each mailbox's loss report moved aside by an adopting worker: flag, pid, job id.
    for i in 0..WORKERS {
        let mb = k + 256 + i * stride;
        w.extend([(mb + 32, 4), (mb + 36, 4), (mb + 40, 8)]);
    }
    w
}

/// A hostile value for a word of `width` bytes.
fn hostile_value(rng: &mut Rng, width: usize) -> u64 {
    let max = if width == 8 { u64::MAX } else { u32::MAX as u64 };
    match rng.below(8) {
        0 => 0,
        1 => 1,
        2 => max,
        3 => max - 1,
        // A valid-looking mailbox state, bit pattern or small count.
        4 | 5 => rng.below(8),
        6 => rng.below(1 << WORKERS),
        _ => rng.next() & max,
    }
}

/// The shared harness, with this suite's slack, value generator and output limit.
fn timed<T>(what: &str, timeout: Duration, f: impl FnOnce() -> T) -> T {
    hostile::timed(what, timeout, SLACK, f)
}

fn scribble(map: &Mapping, words: &[(usize, usize)], rng: &mut Rng, until: Instant) -> u64 {
    hostile::scribble(map, words, rng, until, hostile_value)
}

fn finish(child: Child, role: &str) -> String {
    hostile::finish(child, role, OUTPUT_LIMIT)
}

#[test]
fn child_entry() {
    let Some(role) = child_role() else {
        return;
    };
    let root = PathBuf::from(std::env::var("SHMBUS_ROOT").unwrap());
    let stop = root.join("stop");
    let d = domain_at(&root);
    let end = Instant::now() + Duration::from_secs(30);
    let (mut ok, mut empty, mut corrupt, mut other) = (0u64, 0u64, 0u64, 0u64);
    match role.as_str() {
        "worker" => {
            let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
            w.set_orphan_check(Duration::from_millis(5));
            let mut ws = WaitSet::new();
            let mut i = 0u64;
            while !stop.exists() && Instant::now() < end {
                i += 1;
                let r = if i % 2 == 0 {
                    timed("recv_timeout", TIMEOUT, || w.recv_ref_timeout(TIMEOUT).map(|j| j.len()))
                } else {
                    timed("try_recv", Duration::ZERO, || {
                        w.try_recv_ref().map(|j| j.len()).map_err(|e| match e {
                            PoolTryRecvError::Empty => PoolRecvTimeoutError::Timeout,
                            PoolTryRecvError::Orphaned => PoolRecvTimeoutError::Orphaned,
                            PoolTryRecvError::Corrupt(c) => PoolRecvTimeoutError::Corrupt(c),
                            PoolTryRecvError::Truncated => PoolRecvTimeoutError::Truncated,
                            e => panic!("unknown error {e}"),
                        })
                    })
                };
                match r {
                    Ok(n) => {
                        assert!(n <= MAX_JOB, "a job of {n} bytes from a pool of max {MAX_JOB}");
                        ok += 1;
                    }
                    Err(PoolRecvTimeoutError::Timeout) => empty += 1,
                    Err(PoolRecvTimeoutError::Corrupt(_)) => corrupt += 1,
                    Err(PoolRecvTimeoutError::Orphaned) => other += 1,
                    Err(PoolRecvTimeoutError::Truncated) => {
                        panic!("reported truncated, but nothing truncated the file")
                    }
                    Err(e) => panic!("unknown error {e}"),
                }
                let _ = timed("is_ready", Duration::ZERO, || w.is_ready());
                let _ = timed("recheck", Duration::ZERO, || w.recheck());
                if i % 3 == 0 {
                    timed("done", Duration::ZERO, || w.done());
                }
                if i % 8 == 0 {
                    // Idle (done), then wait for a job in a WaitSet.
                    timed("done", Duration::ZERO, || w.done());
                    let _ = timed("WaitSet::wait", TIMEOUT, || ws.wait_timeout(&[&w], TIMEOUT).map(|r| r.len()));
                }
            }
            timed("drop", Duration::ZERO, || drop(w));
        }
        "dispatcher" => {
            let mut disp = Pool::open(&d, "p").and_then(|p| p.dispatcher()).unwrap();
            let mut ws = WaitSet::new();
            let mut sent = Vec::new();
            let mut i = 0u64;
            let mut last_reap = Instant::now();
            while !stop.exists() && Instant::now() < end {
                i += 1;
                let r = timed("try_send", Duration::ZERO, || disp.try_send(&i.to_le_bytes()).map(|_| 1));
                match r {
                    Ok(_) => ok += 1,
                    Err(_) => empty += 1,
                }
                if i % 4 == 0 {
                    sent.clear();
                    let jobs = [b"a".as_slice(), b"bb".as_slice(), b"ccc".as_slice()];
                    match timed("try_send_batch", Duration::ZERO, || disp.try_send_batch(&jobs, &mut sent)) {
                        Ok(n) => ok += n as u64,
                        Err(_) => empty += 1,
                    }
                }
                // Waiting for an idle worker, in a WaitSet.
                let _ = timed("is_ready", Duration::ZERO, || disp.is_ready());
                if i % 8 == 0 {
                    let _ = timed("WaitSet::wait", TIMEOUT, || ws.wait_timeout(&[&disp], TIMEOUT).map(|r| r.len()));
                }
                if last_reap.elapsed() > Duration::from_millis(5) {
                    corrupt += timed("reap", Duration::ZERO, || disp.reap()).len() as u64;
                    last_reap = Instant::now();
                }
                let st = timed("status", Duration::ZERO, || disp.status());
                assert!(st.idle <= st.workers && st.workers <= WORKERS, "{st:?}");
                std::thread::sleep(Duration::from_micros(200));
            }
            timed("drop", Duration::ZERO, || drop(disp));
        }
        other => panic!("unknown child role {other}"),
    }
    println!("{role}: ok {ok}, empty/busy {empty}, corrupt/lost {corrupt}, orphaned {other}");
}

#[test]
fn a_hostile_peer_never_hangs_kills_or_floods_pool_workers_or_dispatcher() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("hostile-pool").kept_on_failure();
    let d = domain_at(s.path());
    drop(Pool::create_or_open(&d, "p", &cfg()).and_then(|p| p.dispatcher()).unwrap());
    let path = d.channel_path("p").unwrap();
    let workers = [spawn("worker", s.path()), spawn("worker", s.path())];
    eventually("workers joined", 20, || Pool::status(&d, "p").unwrap().workers == 2);
    let dispatcher = spawn("dispatcher", s.path());
    eventually("dispatcher attached", 20, || Pool::status(&d, "p").unwrap().dispatcher_alive);
    let map = Mapping::new(&path);
    let mut rng = Rng::from_var_or_clock("SHMBUS_HOSTILE_SEED");
    let words = control_words();
    let writes = scribble(&map, &words, &mut rng, Instant::now() + SCRIBBLE);
    std::fs::write(s.path().join("stop"), b"").unwrap();
    assert!(writes >= 10_000, "only {writes} hostile writes");
    let mut summary = vec![finish(dispatcher, "dispatcher")];
    for w in workers {
        summary.push(finish(w, "worker"));
    }
    eprintln!("{writes} hostile writes");
    for line in summary.iter().flat_map(|s| s.lines()).filter(|l| l.contains(": ok ")) {
        eprintln!("{line}");
    }

    // Restored (all zero is a fresh pool), the pool works for honest parties again.
    map.zero(PARTICIPANTS_OFFSET, KIND_OFFSET - PARTICIPANTS_OFFSET);
    map.zero(KIND_OFFSET, map.len() - KIND_OFFSET);
    let mut disp = Pool::open(&d, "p").and_then(|p| p.dispatcher()).unwrap();
    let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
    for i in 0..50u64 {
        w.done();
        disp.try_send(&i.to_le_bytes()).unwrap();
        assert_eq!(w.recv_timeout(Duration::from_secs(5)).unwrap().data(), i.to_le_bytes());
    }
    assert!(disp.reap().is_empty());
}

/// Replays the `pool_state` fuzz corpus and random mutations of it.
#[test]
fn pool_state_fuzz_corpus_and_mutations_are_survived() {
    if child_role().is_some() {
        return;
    }
    // Few mutations: an input that leaves a mailbox FILLING under a live dispatcher costs the
    // worker its one-second patience.
    hostile::replay_corpus("pool_state", 4, 40, 0, |input| {
        let t0 = Instant::now();
        fuzz_body::exercise_pool_state(input);
        assert!(t0.elapsed() < Duration::from_secs(20), "input {input:?} took {:?}", t0.elapsed());
    });
}
