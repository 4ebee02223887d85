//! Two producer processes and two consumer processes share one queue: every message is
//! delivered exactly once, checked by ids and by a checksum over every payload.
//!
//! The children are this test binary run again with `child_main` as the only test and the
//! role in `SHMBUS_TEST_CHILD`.
#![cfg(not(loom))]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::{child_command, child_role, Scratch};
use shmbus::queue::{Queue, QueueConfig, QueueRecvTimeoutError};
use shmbus::Domain;

const ROOT: &str = "SHMBUS_QUEUE_TEST_ROOT";
const MAX: usize = 300;
const PER_PRODUCER: u64 = 30_000;
const STOP: u64 = u64::MAX;

fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// `[id][filler of id-dependent length][fnv of the rest]`, 16..=MAX bytes.
fn encode(id: u64, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(&id.to_le_bytes());
    let fill = (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % (MAX - 16 + 1);
    buf.extend((0..fill).map(|i| (id as u8).wrapping_add(i as u8)));
    let h = fnv(buf);
    buf.extend_from_slice(&h.to_le_bytes());
}

/// The id of a well-formed message; panics on a torn or foreign one.
fn decode(m: &[u8]) -> u64 {
    assert!(m.len() >= 16, "short message: {} bytes", m.len());
    let (body, sum) = m.split_at(m.len() - 8);
    assert_eq!(fnv(body), u64::from_le_bytes(sum.try_into().unwrap()), "checksum mismatch: torn message");
    u64::from_le_bytes(m[..8].try_into().unwrap())
}

fn domain_at(root: &Path) -> Domain {
    Domain::with_root("mp", root).unwrap()
}

/// Child entry point: does nothing unless run as a child.
#[test]
fn child_main() {
    let Some(role) = child_role() else { return };
    let root = PathBuf::from(std::env::var(ROOT).unwrap());
    let q = Queue::open(&domain_at(&root), "q").unwrap();
    let mut parts = role.split(':');
    match (parts.next(), parts.next()) {
        (Some("producer"), Some(n)) => {
            let n: u64 = n.parse().unwrap();
            let mut tx = q.producer().unwrap();
            let mut buf = Vec::with_capacity(MAX);
            for seq in 0..PER_PRODUCER {
                encode(n << 32 | seq, &mut buf);
                tx.send_timeout(&buf, Duration::from_secs(30)).unwrap();
            }
        }
        (Some("consumer"), Some(out)) => {
            let mut rx = q.consumer().unwrap();
            let mut buf = Vec::with_capacity(rx.max_message_len());
            let mut ids = Vec::new();
            loop {
                match rx.recv_into_timeout(&mut buf, Duration::from_secs(30)) {
                    Ok(n) => {
                        let id = decode(&buf[..n]);
                        if id == STOP {
                            break;
                        }
                        ids.push(id);
                    }
                    Err(QueueRecvTimeoutError::Timeout) => panic!("consumer starved for 30 s"),
                    Err(e) => panic!("{e}"),
                }
            }
            let bytes: Vec<u8> = ids.iter().flat_map(|i| i.to_le_bytes()).collect();
            std::fs::write(out, bytes).unwrap();
        }
        _ => panic!("bad role {role}"),
    }
}

fn spawn(root: &Path, role: &str) -> std::process::Child {
    child_command("child_main", role, &[(ROOT, root.display().to_string())]).stdout(Stdio::null()).spawn().unwrap()
}

#[test]
fn two_producer_and_two_consumer_processes_deliver_exactly_once() {
    let scratch = Scratch::new("queue-mp");
    let root = scratch.path();
    let d = domain_at(root);
    let q = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(64).max_message_len(MAX)).unwrap();

    let outs: Vec<PathBuf> = (0..2).map(|i| root.join(format!("consumer{i}.ids"))).collect();
    let mut consumers: Vec<_> = outs.iter().map(|o| spawn(root, &format!("consumer:{}", o.display()))).collect();
    let mut producers: Vec<_> = (1..=2).map(|n| spawn(root, &format!("producer:{n}"))).collect();
    for p in &mut producers {
        assert!(p.wait().unwrap().success(), "a producer failed");
    }
    // Everything is in or through the queue: one stop per consumer, behind all of it.
    let mut tx = q.producer().unwrap();
    let mut buf = Vec::new();
    for _ in 0..2 {
        encode(STOP, &mut buf);
        tx.send_timeout(&buf, Duration::from_secs(30)).unwrap();
    }
    for c in &mut consumers {
        assert!(c.wait().unwrap().success(), "a consumer failed (torn message or starvation)");
    }

    let mut all = Vec::new();
    let mut per_consumer = Vec::new();
    for o in &outs {
        let bytes = std::fs::read(o).unwrap();
        let ids: Vec<u64> = bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
        per_consumer.push(ids.len());
        all.extend(ids);
    }
    let expected: Vec<u64> = (1..=2u64).flat_map(|n| (0..PER_PRODUCER).map(move |s| n << 32 | s)).collect();
    let sum = |v: &[u64]| v.iter().fold(0u64, |a, &b| a.wrapping_add(b.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
    assert_eq!(all.len(), expected.len(), "message count");
    assert_eq!(sum(&all), sum(&expected), "id checksum");
    all.sort_unstable();
    assert!(all.windows(2).all(|w| w[0] != w[1]), "a message was delivered twice");
    assert_eq!(all, expected, "every message exactly once");
    // Per-producer FIFO as seen by each consumer is not guaranteed across consumers, but
    // both consumers competed.
    assert!(per_consumer.iter().all(|&n| n > 0), "both consumers got work: {per_consumer:?}");
    let st = Queue::status(&d, "q").unwrap();
    assert_eq!((st.depth, st.abandoned, st.lost), (0, 0, 0));
    drop((q, tx));
}
