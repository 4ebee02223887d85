//! SIGKILL, then restart, for every role of the queue: the first participant started after
//! the crash waits or works; none fails on what the dead one left.
//!
//! The victims are this test binary run again (`child_entry`), killed with SIGKILL.
#![cfg(not(loom))]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::restart::{domain_at, kill, spawn};
use common::{child_role, eventually, Scratch};
use shmbus::queue::{Queue, QueueConfig, QueueRecvTimeoutError};

const CAPACITY: u64 = 4;

fn queue() -> QueueConfig {
    QueueConfig::default().capacity(CAPACITY).max_message_len(64)
}

#[test]
fn child_entry() {
    let Some(role) = child_role() else {
        return;
    };
    let d = domain_at(&PathBuf::from(std::env::var("SHMBUS_ROOT").unwrap()));
    match role.as_str() {
        // Sends until killed (the queue fills up, then it blocks in send).
        "producer" => {
            let mut tx = Queue::open(&d, "q").unwrap().producer().unwrap();
            for i in 0u64.. {
                tx.send(&i.to_le_bytes()).unwrap();
            }
        }
        // Receives until killed, slowly.
        "consumer" => {
            let mut rx = Queue::open(&d, "q").unwrap().consumer().unwrap();
            loop {
                let _ = rx.recv_timeout(Duration::from_secs(60));
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        other => panic!("unknown child role {other}"),
    }
}

#[test]
fn queue_producer_killed_then_a_new_producer_and_consumer_work() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("restart-producer");
    let d = domain_at(s.path());
    let _q = Queue::create_or_open(&d, "q", &queue()).unwrap();
    let victim = spawn("producer", s.path());
    eventually("the queue is full", 20, || Queue::status(&d, "q").unwrap().depth == CAPACITY);
    kill(victim);
    // The first producer and consumer after the crash: every message the dead one sent, in
    // order, then the new one's.
    let mut tx = Queue::open(&d, "q").unwrap().producer().unwrap();
    let mut rx = Queue::open(&d, "q").unwrap().consumer().unwrap();
    for i in 0..CAPACITY {
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), i.to_le_bytes());
    }
    tx.send_timeout(b"new", Duration::from_secs(5)).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), b"new");
    assert_eq!(rx.recv_timeout(Duration::from_millis(20)), Err(QueueRecvTimeoutError::Timeout));
}

#[test]
fn queue_consumer_killed_then_a_new_consumer_gets_the_rest() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("restart-consumer");
    let d = domain_at(s.path());
    let q = Queue::create_or_open(&d, "q", &queue()).unwrap();
    let mut tx = q.producer().unwrap();
    let victim = spawn("consumer", s.path());
    eventually("the consumer is there", 20, || Queue::status(&d, "q").unwrap().consumers == 1);
    let mut sent = 0u64;
    while sent < 50 {
        tx.send_timeout(&sent.to_le_bytes(), Duration::from_secs(10)).unwrap();
        sent += 1;
    }
    kill(victim);
    // The first consumer after the crash gets everything still queued and everything sent
    // after it; a producer blocked behind a claim the dead one held gets past it.
    let q2 = q.clone();
    let consumer = std::thread::spawn(move || {
        let mut rx = q2.consumer().unwrap();
        let mut got = Vec::new();
        while let Ok(m) = rx.recv_timeout(Duration::from_millis(500)) {
            got.push(u64::from_le_bytes(m.try_into().unwrap()));
        }
        got
    });
    let t0 = Instant::now();
    for i in 0..3 * CAPACITY {
        tx.send_timeout(&(1000 + i).to_le_bytes(), Duration::from_secs(10)).unwrap();
    }
    assert!(t0.elapsed() < Duration::from_secs(10));
    let got = consumer.join().unwrap();
    let tail: Vec<u64> = (1000..1000 + 3 * CAPACITY).collect();
    assert!(got.ends_with(&tail), "the new consumer got {got:?}");
    assert!(got.windows(2).all(|w| w[0] < w[1]), "out of order: {got:?}");
    let st = Queue::status(&d, "q").unwrap();
    assert!(st.lost <= 1, "{st:?}");
}
