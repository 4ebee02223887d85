//! One `WaitSet` over 128 channels of every kind at once — topics, queues, streams, pool
//! mailboxes and journal tailers — fed by another process in random order. Every item must
//! arrive, every wake-up must report a channel that really has something, and nothing may be
//! lost (with `futex_waitv` and with the fallback).

#![cfg(not(loom))]

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{child_role, env_str, env_u64, spawn_child, wait_with_deadline, Rng, Scratch};
use shmbus::journal::{Journal, JournalConfig, Tailer};
use shmbus::pool::{Pool, PoolConfig, Worker};
use shmbus::queue::{Consumer, Queue, QueueConfig};
use shmbus::stream::{Stream, StreamConfig};
use shmbus::topic::{Subscriber, Topic, TopicConfig};
use shmbus::{Domain, StreamReader, WaitSet, Waitable};

const TOPICS: usize = 40;
const QUEUES: usize = 40;
const STREAMS: usize = 30;
const POOLS: usize = 10;
const JOURNALS: usize = 8;
const TOTAL: usize = TOPICS + QUEUES + STREAMS + POOLS + JOURNALS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    Topic(usize),
    Queue(usize),
    Stream(usize),
    Pool(usize),
    Journal(usize),
}

fn all() -> Vec<Which> {
    let mut v = Vec::with_capacity(TOTAL);
    v.extend((0..TOPICS).map(Which::Topic));
    v.extend((0..QUEUES).map(Which::Queue));
    v.extend((0..STREAMS).map(Which::Stream));
    v.extend((0..POOLS).map(Which::Pool));
    v.extend((0..JOURNALS).map(Which::Journal));
    v
}

fn journal_dir(root: &str, i: usize) -> PathBuf {
    PathBuf::from(root).join(format!("journal{i}"))
}

#[allow(clippy::large_enum_variant)] // a test with one of each; the sizes do not matter
enum Chan {
    Topic(Subscriber),
    Queue(Consumer),
    Stream(StreamReader),
    Pool(Worker),
    Journal(Tailer),
}

impl Chan {
    fn waitable(&self) -> &dyn Waitable {
        match self {
            Chan::Topic(c) => c,
            Chan::Queue(c) => c,
            Chan::Stream(c) => c,
            Chan::Pool(c) => c,
            Chan::Journal(c) => c,
        }
    }

    /// Takes everything available; returns the payloads.
    fn drain(&mut self) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        match self {
            Chan::Topic(s) => {
                while let Ok(m) = s.try_recv() {
                    got.push(m.into_data());
                }
            }
            Chan::Queue(c) => {
                while let Ok(m) = c.try_recv() {
                    got.push(m);
                }
            }
            Chan::Stream(r) => {
                let mut buf = Vec::new();
                while r.try_recv_into(&mut buf).is_ok() {
                    got.push(buf.clone());
                }
            }
            Chan::Pool(w) => {
                if let Ok(job) = w.try_recv() {
                    got.push(job.data().to_vec());
                }
                w.done();
            }
            Chan::Journal(t) => {
                while let Ok(e) = t.try_recv() {
                    got.push(e.into_data());
                }
            }
        }
        got
    }
}

fn payload(which: Which, round: u64) -> Vec<u8> {
    format!("{which:?}/{round}").into_bytes()
}

#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    assert_eq!(role, "feeder");
    let root = env_str("ROOT");
    let d = Domain::with_root("w", &root).unwrap();
    let rounds = env_u64("ROUNDS");
    let mut rng = Rng(env_u64("SEED") | 1);
    let mut topics: Vec<_> =
        (0..TOPICS).map(|i| Topic::open(&d, &format!("t{i}")).unwrap().publisher().unwrap()).collect();
    let mut queues: Vec<_> =
        (0..QUEUES).map(|i| Queue::open(&d, &format!("q{i}")).unwrap().producer().unwrap()).collect();
    let mut streams: Vec<_> =
        (0..STREAMS).map(|i| Stream::open(&d, &format!("s{i}")).and_then(|s| s.writer()).unwrap()).collect();
    let mut pools: Vec<_> =
        (0..POOLS).map(|i| Pool::open(&d, &format!("p{i}")).unwrap().dispatcher().unwrap()).collect();
    let journals: Vec<_> = (0..JOURNALS).map(|i| Journal::open(journal_dir(&root, i)).unwrap()).collect();
    let mut appenders: Vec<_> = journals.iter().map(|j| j.appender().unwrap()).collect();
    for round in 0..rounds {
        let mut order = all();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        for which in order {
            let p = payload(which, round);
            match which {
                Which::Topic(i) => drop(topics[i].send(&p).unwrap()),
                Which::Queue(i) => queues[i].send(&p).unwrap(),
                Which::Stream(i) => streams[i].send(&p).unwrap(),
                Which::Pool(i) => {
                    // Return to sender: retry until the worker has taken the previous job.
                    let give_up = std::time::Instant::now() + Duration::from_secs(20);
                    loop {
                        assert!(std::time::Instant::now() < give_up, "pool {i}: the worker never became idle");
                        match pools[i].try_send(&p) {
                            Ok(_) => break,
                            Err(_) => {
                                std::thread::sleep(Duration::from_micros(200));
                            }
                        }
                    }
                }
                Which::Journal(i) => drop(appenders[i].send(&p).unwrap()),
            }
            if rng.below(16) == 0 {
                std::thread::sleep(Duration::from_micros(300));
            }
        }
    }
    // Keep the dispatchers alive until the waiter has seen the last jobs.
    std::thread::sleep(Duration::from_millis(env_u64("LINGER_MS")));
}

fn mixed() {
    let s = Scratch::new("mixed");
    let root = s.path().display().to_string();
    let d = s.domain("w");
    let rounds = 3u64;
    let mut chans: Vec<(Which, Chan)> = Vec::new();
    for which in all() {
        let chan = match which {
            Which::Topic(i) => {
                let t =
                    Topic::create_or_open(&d, &format!("t{i}"), &TopicConfig::default().max_message_len(64).history(8))
                        .unwrap();
                Chan::Topic(t.subscriber().unwrap())
            }
            Which::Queue(i) => {
                let cfg = QueueConfig::default().capacity(8).max_message_len(64);
                Chan::Queue(Queue::create_or_open(&d, &format!("q{i}"), &cfg).unwrap().consumer().unwrap())
            }
            Which::Stream(i) => Chan::Stream(
                Stream::create_or_open(&d, &format!("s{i}"), &StreamConfig::default().capacity(4096))
                    .and_then(|s| s.reader())
                    .unwrap(),
            ),
            Which::Pool(i) => {
                let cfg = PoolConfig::default().max_workers(1).max_job_len(64);
                // The pool is created by its worker; the feeder attaches as the dispatcher.
                Chan::Pool(Pool::create_or_open(&d, &format!("p{i}"), &cfg).unwrap().worker().unwrap())
            }
            Which::Journal(i) => Chan::Journal(
                Journal::create_or_open(journal_dir(&root, i), &JournalConfig::default()).unwrap().tailer().unwrap(),
            ),
        };
        chans.push((which, chan));
    }
    assert_eq!(chans.len(), 128);
    let env =
        [("ROOT", root.clone()), ("ROUNDS", rounds.to_string()), ("SEED", "5".into()), ("LINGER_MS", "3000".into())];
    let mut feeder = spawn_child("child_entry", "feeder", &env);
    let mut counts = vec![0u64; chans.len()];
    let mut total = 0u64;
    // Takes what channel `i` holds, checking each item's order; returns how many.
    let absorb = |chans: &mut Vec<(Which, Chan)>, i: usize, counts: &mut Vec<u64>| {
        let (which, chan) = &mut chans[i];
        let got = chan.drain();
        for p in &got {
            assert_eq!(*p, payload(*which, counts[i]), "channel {which:?}: wrong or out-of-order item");
            counts[i] += 1;
        }
        got.len() as u64
    };
    // A pool worker becomes idle (dispatchable) by asking for work: a first `try_recv` does
    // that without blocking, so it can then sleep in the wait set. The feeder may already
    // have sent a few items on a fast machine; they count.
    for i in 0..chans.len() {
        total += absorb(&mut chans, i, &mut counts);
    }
    let mut ws = WaitSet::new();
    let want = rounds * chans.len() as u64;
    while total < want {
        let refs: Vec<&dyn Waitable> = chans.iter().map(|(_, c)| c.waitable()).collect();
        let ready = match ws.wait_timeout(&refs, Duration::from_secs(30)) {
            Ok(r) => r.to_vec(),
            Err(e) => {
                let missing: Vec<_> =
                    chans.iter().zip(&counts).filter(|(_, &c)| c < rounds).map(|((w, _), c)| (*w, *c)).collect();
                let fed = feeder.try_wait().unwrap();
                panic!("{e}: nothing became ready; feeder status {fed:?}; short channels {missing:?}");
            }
        };
        drop(refs);
        for i in ready {
            total += absorb(&mut chans, i, &mut counts);
        }
    }
    assert!(counts.iter().all(|&c| c == rounds), "{counts:?}");
    assert!(wait_with_deadline(&mut feeder, 60, "feeder").success());
}

#[test]
fn waitset_over_128_channels_of_every_kind() {
    mixed();
}

/// The same with the fallback: the waiting happens in a child process started with
/// `SHMBUS_NO_WAITV=1` (the choice is made once per process).
#[test]
fn waitset_over_128_channels_of_every_kind_fallback() {
    if std::env::var_os("SHMBUS_NO_WAITV").is_some() {
        mixed(); // we are that child: waitv is off here
        return;
    }
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["waitset_over_128_channels_of_every_kind_fallback", "--exact", "--nocapture"])
        .env("SHMBUS_NO_WAITV", "1")
        .spawn()
        .unwrap();
    assert!(wait_with_deadline(&mut child, 120, "fallback waiter").success());
}
