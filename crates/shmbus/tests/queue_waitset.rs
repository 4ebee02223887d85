//! Queue endpoints in a WaitSet (consumer: non-empty, producer: non-full), and the bound on
//! how long a claim left by a dead participant can hold up a blocked endpoint.
#![cfg(not(loom))]

mod common;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::Scratch;
use shmbus::queue::{Queue, QueueConfig};
use shmbus::{Domain, WaitSet, WaitTimeoutError, Waitable};

/// How long a claim may stand before a waiter checks its owner (docs/queue.md, "Crash
/// semantics": 5 ms); a blocked endpoint gets past a dead one's claim within about twice it.
const LIVENESS_RECHECK: Duration = Duration::from_millis(5);

fn domain() -> (Domain, Scratch) {
    let s = Scratch::new("queue-ws");
    (s.domain("t"), s)
}

fn queue(d: &Domain, name: &str, capacity: u64) -> Queue {
    Queue::create_or_open(d, name, &QueueConfig::default().capacity(capacity).max_message_len(64)).unwrap()
}

#[test]
fn consumer_is_ready_when_non_empty() {
    let (d, _root) = domain();
    let q = queue(&d, "q", 4);
    let mut rx = q.consumer().unwrap();
    let mut ws = WaitSet::new();
    assert!(ws.poll(&[&rx]).is_empty());
    assert_eq!(ws.wait_timeout(&[&rx], Duration::from_millis(20)), Err(WaitTimeoutError::Timeout));
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            q.producer().unwrap().send(b"hi").unwrap();
        });
        let t = Instant::now();
        assert_eq!(ws.wait_timeout(&[&rx], Duration::from_secs(5)).unwrap(), &[0]);
        assert!(t.elapsed() < Duration::from_secs(5));
    });
    assert_eq!(rx.try_recv().unwrap(), b"hi");
    assert!(!rx.is_ready());
}

#[test]
fn producer_is_ready_when_non_full() {
    let (d, _root) = domain();
    let q = queue(&d, "q", 2);
    let mut tx = q.producer().unwrap();
    let mut ws = WaitSet::new();
    assert_eq!(ws.poll(&[&tx]), &[0]);
    tx.send(b"1").unwrap();
    tx.send(b"2").unwrap();
    assert!(!tx.is_ready());
    assert_eq!(ws.wait_timeout(&[&tx], Duration::from_millis(20)), Err(WaitTimeoutError::Timeout));
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            q.consumer().unwrap().recv().unwrap();
        });
        assert_eq!(ws.wait_timeout(&[&tx], Duration::from_secs(5)).unwrap(), &[0]);
    });
    tx.try_send(b"3").unwrap();
}

#[test]
fn mixed_set_reports_exactly_the_ready_endpoints() {
    let (d, _root) = domain();
    let (a, b) = (queue(&d, "a", 1), queue(&d, "b", 1));
    let mut rx_a = a.consumer().unwrap();
    let rx_b = b.consumer().unwrap();
    let mut tx_a = a.producer().unwrap();
    let mut tx_b = b.producer().unwrap();
    let mut ws = WaitSet::new();
    // Both queues empty: only the producers are ready.
    assert_eq!(ws.wait_timeout(&[&rx_a, &rx_b, &tx_a, &tx_b], Duration::ZERO).unwrap(), &[2, 3]);
    tx_a.send(b"x").unwrap();
    // a is full: its consumer is ready, its producer is not.
    assert_eq!(ws.wait(&[&rx_a, &rx_b, &tx_a, &tx_b]).unwrap(), &[0, 3]);
    rx_a.recv().unwrap();
    tx_b.send(b"y").unwrap();
    assert_eq!(ws.wait(&[&rx_a, &rx_b, &tx_a]).unwrap(), &[1, 2]);
}

// Raw layout, to leave behind exactly what a SIGKILLed participant leaves: see `segment.rs`
// and `participants.rs`. Entry i at 4096 + 64 i: word (pid << 8 | state) at 0, start time
// at 8, role at 16, aux[0] at 24. Queue area at 77824: tail at +0, head at +128; cells
// from +1024, stride 128 for 64-byte messages, stamp at +0 (`pos << 10 | state << 7 | owner`).
const ENTRY: u64 = 100;
const CELLS: u64 = 77824 + 1024;
const STRIDE: u64 = 128;

fn dead_pid() -> u32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

/// Makes entry `ENTRY` a participant of a dead process holding claim `state` on `pos`.
fn leave_dead_claim(path: &Path, pos: u64, state: u64, role: u32) {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let e = 4096 + 64 * ENTRY;
    f.write_all_at(&((dead_pid() as u64) << 8 | 2).to_le_bytes(), e).unwrap();
    f.write_all_at(&1u64.to_le_bytes(), e + 8).unwrap();
    f.write_all_at(&role.to_le_bytes(), e + 16).unwrap();
    f.write_all_at(&(pos + 1).to_le_bytes(), e + 24).unwrap();
    f.write_all_at(&(pos << 10 | state << 7 | ENTRY).to_le_bytes(), CELLS + (pos % 4) * STRIDE).unwrap();
}

#[test]
fn waitset_consumer_gets_past_a_dead_producers_claim_within_the_bound() {
    let (d, _root) = domain();
    let q = queue(&d, "q", 4);
    let mut rx = q.consumer().unwrap();
    let mut tx = q.producer().unwrap();
    // A producer claimed position 0 and was killed mid-copy; a live one sends behind it.
    leave_dead_claim(q.path(), 0, 1, 1);
    tx.send(b"after").unwrap();
    assert!(rx.try_recv().is_err(), "FIFO: the dead claim is in front");
    let mut ws = WaitSet::new();
    let t = Instant::now();
    assert_eq!(ws.wait_timeout(&[&rx], Duration::from_secs(5)).unwrap(), &[0]);
    let waited = t.elapsed();
    assert_eq!(rx.try_recv().unwrap(), b"after");
    assert!(waited < 4 * LIVENESS_RECHECK + Duration::from_millis(100), "{waited:?}");
    assert_eq!(Queue::status(&d, "q").unwrap().abandoned, 1);
}

#[test]
fn is_ready_looks_without_reclaiming_and_recheck_reclaims() {
    let (d, _root) = domain();
    let q = queue(&d, "q", 4);
    let rx = q.consumer().unwrap();
    let mut tx = q.producer().unwrap();
    leave_dead_claim(q.path(), 0, 1, 1);
    tx.send(b"after").unwrap();
    for _ in 0..3 {
        assert!(!rx.is_ready());
        std::thread::sleep(2 * LIVENESS_RECHECK);
    }
    assert_eq!(Queue::status(&d, "q").unwrap().abandoned, 0, "is_ready reclaimed");
    assert_eq!(rx.recheck_interval(), Some(LIVENESS_RECHECK), "a claim in the way is re-checked soon");
    let t = Instant::now();
    while !rx.recheck() {
        assert!(t.elapsed() < Duration::from_secs(5), "recheck never reclaimed the dead claim");
        std::thread::sleep(LIVENESS_RECHECK);
    }
    assert!(rx.is_ready());
    assert_eq!(Queue::status(&d, "q").unwrap().abandoned, 1);
}

#[test]
fn blocking_recv_gets_past_a_dead_producers_claim_within_the_bound() {
    let (d, _root) = domain();
    let q = queue(&d, "q", 4);
    let mut rx = q.consumer().unwrap();
    let mut tx = q.producer().unwrap();
    leave_dead_claim(q.path(), 0, 1, 1);
    tx.send(b"after").unwrap();
    let t = Instant::now();
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), b"after");
    let waited = t.elapsed();
    assert!(waited >= LIVENESS_RECHECK, "the claim was given a chance: {waited:?}");
    assert!(waited < 4 * LIVENESS_RECHECK + Duration::from_millis(100), "{waited:?}");
}

#[test]
fn blocked_producer_gets_past_a_dead_consumers_claim_within_the_bound() {
    let (d, _root) = domain();
    let q = queue(&d, "q", 4);
    let mut tx = q.producer().unwrap();
    let mut rx = q.consumer().unwrap();
    for i in 0..4u8 {
        tx.send(&[i]).unwrap();
    }
    // A consumer claimed message 0 and was killed mid-copy; position 0 is past `head` for
    // everyone else, and the ring is full.
    leave_dead_claim(q.path(), 0, 4, 2);
    assert!(tx.try_send(b"x").is_err());
    let mut ws = WaitSet::new();
    assert_eq!(ws.wait_timeout(&[&tx], Duration::from_secs(5)).unwrap(), &[0]);
    tx.send_timeout(&[9u8], Duration::from_secs(5)).unwrap();
    let got: Vec<Vec<u8>> = (0..4).map(|_| rx.try_recv().unwrap()).collect();
    assert_eq!(got, vec![vec![1], vec![2], vec![3], vec![9]], "only the dead consumer's message is lost");
    assert_eq!(Queue::status(&d, "q").unwrap().lost, 1);
}
