//! A queue under a hostile peer: while an honest producer and a consumer run in their own
//! processes, this process writes extreme and random values (0, 1, max, max-1, random,
//! plausible-looking stamps) into every control word of the segment (counters, event words,
//! cell stamps and lengths, participant entries) many thousands of times. Every call of the
//! children must return within its timeout plus a generous slack, neither may die by a
//! signal, and their output stays bounded. Once the words are restored, honest parties
//! work again. Also replays the `queue_state` fuzz corpus.
//!
//! The test binary re-executes itself as the children (`child_entry`).
#![cfg(not(loom))]

mod common;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use common::hostile::{self, spawn, SharedMap as Mapping};
use common::{child_role, eventually, Rng, Scratch};
use shmbus::queue::{Queue, QueueConfig, QueueRecvTimeoutError, QueueTryRecvError};
use shmbus::segment::{KIND_OFFSET, PARTICIPANTS_OFFSET};
use shmbus::{Domain, WaitSet};

mod fuzz_body {
    include!("../../../fuzz/fuzz_targets/queue_state_body.rs");
}

const CAP: u64 = 8;
const MAX: usize = 64;
/// Each receive's timeout, and the slack a call may take beyond it before it counts as hung.
const TIMEOUT: Duration = Duration::from_millis(20);
const SLACK: Duration = Duration::from_secs(3);
/// How long the scribbling lasts.
const SCRIBBLE: Duration = Duration::from_secs(3);
/// Most bytes a child may print (it prints one summary line, or one line on failure).
const OUTPUT_LIMIT: usize = 16 * 1024;

fn domain_at(root: &Path) -> Domain {
    Domain::with_root("h", root).unwrap()
}

// ------------------------------------------------------------------ the segment's words

/// `(file offset, width)` of every control word of a `CAP` x `MAX` queue.
fn control_words() -> Vec<(usize, usize)> {
    let k = KIND_OFFSET;
    // Control block (see queue/protocol.rs): tail, head, not_empty, not_full (each on its own
    // 128-byte line), then the abandoned and lost counters.
    let mut w = vec![(k, 8), (k + 128, 8), (k + 256, 4), (k + 384, 4), (k + 512, 8), (k + 520, 8)];
    let stride = (16 + MAX).div_ceil(64) * 64;
    for i in 0..CAP as usize {
        let cell = k + 1024 + i * stride;
        w.extend([(cell, 8), (cell + 8, 4)]);
    }
    // The entries the children take: owner word, start time, role, intent (aux[0]).
    for e in 0..4 {
        let entry = PARTICIPANTS_OFFSET + e * 64;
        w.extend([(entry, 8), (entry + 8, 8), (entry + 16, 4), (entry + 24, 8)]);
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
        4 => rng.below(64),
        // A plausible stamp: a position near the start, any state, a low owner.
        5 => (rng.below(4096) << 10 | rng.below(8) << 7 | rng.below(4)) & max,
        _ => rng.next() & max,
    }
}

// ------------------------------------------------------------------ children

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
    let q = Queue::open(&domain_at(&root), "q").unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    let (mut ok, mut empty, mut corrupt, mut other) = (0u64, 0u64, 0u64, 0u64);
    match role.as_str() {
        "consumer" => {
            let mut rx = q.consumer().unwrap();
            let mut ws = WaitSet::new();
            let mut buf = Vec::new();
            let mut i = 0u64;
            while !stop.exists() && Instant::now() < end {
                i += 1;
                let r = match i % 3 {
                    0 => timed("try_recv", Duration::ZERO, || rx.try_recv().map(|m| m.len())).map_err(|e| match e {
                        QueueTryRecvError::Empty => QueueRecvTimeoutError::Timeout,
                        QueueTryRecvError::Corrupt(c) => QueueRecvTimeoutError::Corrupt(c),
                        QueueTryRecvError::Truncated => QueueRecvTimeoutError::Truncated,
                        e => panic!("unexpected {e:?}"),
                    }),
                    1 => timed("recv_into_timeout", TIMEOUT, || rx.recv_into_timeout(&mut buf, TIMEOUT)),
                    _ => timed("recv_timeout", TIMEOUT, || rx.recv_timeout(TIMEOUT).map(|m| m.len())),
                };
                match r {
                    Ok(n) => {
                        assert!(n <= MAX, "a message of {n} bytes from a queue of max {MAX}");
                        ok += 1;
                    }
                    Err(QueueRecvTimeoutError::Timeout) => empty += 1,
                    Err(QueueRecvTimeoutError::Corrupt(_)) => corrupt += 1,
                    Err(_) => other += 1,
                }
                let _ = timed("has_message", Duration::ZERO, || rx.has_message());
                if i % 8 == 0 {
                    let _ = timed("WaitSet::wait", TIMEOUT, || ws.wait_timeout(&[&rx], TIMEOUT).map(|r| r.len()));
                }
            }
        }
        "producer" => {
            let mut tx = q.producer().unwrap();
            let mut i = 0u64;
            while !stop.exists() && Instant::now() < end {
                i += 1;
                let msg = i.to_le_bytes();
                let r = if i % 2 == 0 {
                    timed("send_timeout", TIMEOUT, || tx.send_timeout(&msg, TIMEOUT).map_err(|e| e.to_string()))
                } else {
                    timed("try_send", Duration::ZERO, || tx.try_send(&msg).map_err(|e| e.to_string()))
                };
                match r {
                    Ok(()) => ok += 1,
                    Err(e) if e.contains("corrupt") => corrupt += 1,
                    Err(e) if e.contains("full") || e.contains("timed out") => empty += 1,
                    Err(_) => other += 1,
                }
            }
        }
        other => panic!("unknown child role {other}"),
    }
    let st = Queue::status(&domain_at(&root), "q").unwrap();
    assert!(st.depth <= st.capacity);
    println!("{role}: ok {ok}, empty/full {empty}, corrupt {corrupt}, other {other}");
}

/// Puts the queue back in its freshly created state (no process uses it).
fn restore(map: &Mapping) {
    map.zero(PARTICIPANTS_OFFSET, KIND_OFFSET - PARTICIPANTS_OFFSET);
    map.zero(KIND_OFFSET, 1024);
    let stride = (16 + MAX).div_ceil(64) * 64;
    for i in 0..CAP as usize {
        let cell = KIND_OFFSET + 1024 + i * stride;
        map.store(cell, 8, (i as u64) << 10);
        map.store(cell + 8, 4, 0);
    }
}

#[test]
fn a_hostile_peer_never_hangs_kills_or_floods_a_queue_reader() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("hostile-queue").kept_on_failure();
    let d = domain_at(s.path());
    let q = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(CAP).max_message_len(MAX)).unwrap();
    let consumer = spawn("consumer", s.path());
    let producer = spawn("producer", s.path());
    eventually("both children registered", 20, || {
        let st = Queue::status(&d, "q").unwrap();
        st.consumers == 1 && st.producers == 1
    });
    let map = Mapping::new(q.path());
    let mut rng = Rng::from_var_or_clock("SHMBUS_HOSTILE_SEED");
    let words = control_words();
    let writes = scribble(&map, &words, &mut rng, Instant::now() + SCRIBBLE);
    std::fs::write(s.path().join("stop"), b"").unwrap();
    assert!(writes >= 10_000, "only {writes} hostile writes");
    let c = finish(consumer, "consumer");
    let p = finish(producer, "producer");
    eprintln!("{writes} hostile writes; {} {}", c.trim(), p.trim());

    // Restored, the queue works for honest parties again: every message, in order.
    restore(&map);
    let q = Queue::open(&d, "q").unwrap();
    let (mut tx, mut rx) = (q.producer().unwrap(), q.consumer().unwrap());
    for i in 0..100u64 {
        tx.send_timeout(&i.to_le_bytes(), Duration::from_secs(5)).unwrap();
        let m = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(m, i.to_le_bytes());
    }
    assert_eq!(rx.try_recv(), Err(QueueTryRecvError::Empty));
}

#[test]
fn counters_and_stamps_scribbled_then_left_are_repaired_by_the_honest_parties() {
    if child_role().is_some() {
        return;
    }
    // Without restoring anything: an operation that meets the damage (counters set to any
    // value, cell stamps no honest participant writes) reports it and repairs it from the
    // cells, and the queue goes on.
    let s = Scratch::new("hostile-queue-repair");
    let d = domain_at(s.path());
    let q = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(CAP).max_message_len(MAX)).unwrap();
    let (mut tx, mut rx) = (q.producer().unwrap(), q.consumer().unwrap());
    let map = Mapping::new(q.path());
    let mut rng = Rng::from_var_or_clock("SHMBUS_HOSTILE_SEED");
    // Only the counters and the stamps: the entries are ours, and a length is caught anyway.
    let stride = (16 + MAX).div_ceil(64) * 64;
    let mut words = vec![(KIND_OFFSET, 8), (KIND_OFFSET + 128, 8)];
    words.extend((0..CAP as usize).map(|i| (KIND_OFFSET + 1024 + i * stride, 8)));
    for round in 0..300u64 {
        for _ in 0..1 + rng.below(3) {
            let w = rng.below(words.len() as u64) as usize;
            let (off, width) = words[w];
            let v = if w < 2 {
                hostile_value(&mut rng, width)
            } else {
                // A stamp no honest participant writes: an unknown state, an owner on an
                // unclaimed cell, a position of another cell, or all ones.
                let cell = (w - 2) as u64;
                let pos = ((map.load(off) >> 10) % (1 << 40)) / CAP * CAP + cell + rng.below(3) * CAP;
                match rng.below(4) {
                    0 => u64::MAX,
                    1 => pos << 10 | (5 + rng.below(3)) << 7,
                    2 => pos << 10 | [0, 2, 3][rng.below(3) as usize] << 7 | (1 + rng.below(100)),
                    _ => (pos + 1 + rng.below(CAP - 1)) << 10 | rng.below(5) << 7,
                }
            };
            map.store(off, width, v);
        }
        // A handful of calls get the queue going again; each returns at once.
        let mut delivered = false;
        let mut seen = Vec::new();
        for _ in 0..64 {
            let t0 = Instant::now();
            let sent = tx.try_send(&round.to_le_bytes());
            let got = rx.recv_timeout(Duration::ZERO);
            assert!(t0.elapsed() < SLACK, "round {round}: a call hung");
            if sent.is_ok() && got.is_ok() {
                delivered = true;
                break;
            }
            if seen.len() < 6 {
                seen.push(format!("{:?} {:?}", sent.map_err(|e| e.to_string()), got));
            }
        }
        let state: Vec<String> = words
            .iter()
            .map(|&(off, _)| {
                let v = map.load(off);
                if off >= KIND_OFFSET + 1024 {
                    format!("{}/{}/{}", v >> 10, (v >> 7) & 7, v & 127)
                } else {
                    v.to_string()
                }
            })
            .collect();
        assert!(delivered, "round {round}: the queue did not recover: {seen:?}; tail, head, stamps: {state:?}");
        while rx.try_recv().is_ok() {}
    }
}

/// Replays the `queue_state` fuzz corpus and random mutations of it.
#[test]
fn queue_state_fuzz_corpus_and_mutations_are_survived() {
    if child_role().is_some() {
        return;
    }
    hostile::replay_corpus("queue_state", 4, 200, 0, fuzz_body::exercise_queue_state);
}
