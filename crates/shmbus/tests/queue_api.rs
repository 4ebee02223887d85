//! The queue's API in one process: round trips, FIFO, full/empty, blocking with timeouts,
//! bad input, status, participant accounting.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::Scratch;
use shmbus::queue::{Queue, QueueConfig, RecvError, SendError, TryRecvError, TrySendError};
use shmbus::{CreateOptions, Domain, OpenError};

fn domain() -> (Domain, Scratch) {
    let s = Scratch::new("queue-api");
    (s.domain("t"), s)
}

fn cfg(capacity: u64, max_element_size: usize) -> QueueConfig {
    QueueConfig { capacity, max_element_size }
}

#[test]
fn round_trip_in_fifo_order_with_variable_lengths() {
    let (d, _root) = domain();
    let q = Queue::create(&d, "q", cfg(8, 100), &CreateOptions::default()).unwrap();
    let mut tx = q.producer().unwrap();
    let mut rx = Queue::open(&d, "q").unwrap().consumer().unwrap();
    for round in 0..5u8 {
        for len in [0usize, 1, 7, 64, 100] {
            let msg: Vec<u8> = (0..len).map(|i| i as u8 ^ round).collect();
            tx.try_send(&msg).unwrap();
            assert_eq!(rx.try_recv().unwrap(), msg);
        }
    }
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
}

#[test]
fn full_queue_hands_the_value_back() {
    let (d, _root) = domain();
    let q = Queue::create(&d, "q", cfg(3, 16), &CreateOptions::default()).unwrap();
    let mut tx = q.producer().unwrap();
    let mut rx = q.consumer().unwrap();
    assert!(tx.has_room());
    for i in 0..3u8 {
        tx.try_send(vec![i]).unwrap();
    }
    assert!(!tx.has_room());
    let e = tx.try_send(vec![42u8, 43]).unwrap_err();
    assert!(e.is_full(), "{e}");
    assert!(e.to_string().contains("full"));
    assert_eq!(e.into_inner(), vec![42, 43]);
    assert_eq!(q.status().depth, 3);
    let mut buf = [0u8; 16];
    assert_eq!(rx.try_recv_into(&mut buf), Ok(1));
    assert_eq!(buf[0], 0);
    tx.try_send(vec![3u8]).unwrap();
    for i in 1..4u8 {
        assert_eq!(rx.try_recv().unwrap(), vec![i]);
    }
}

#[test]
fn too_large_is_a_clear_error_and_hands_the_value_back() {
    let (d, _root) = domain();
    let q = Queue::create(&d, "q", cfg(4, 10), &CreateOptions::default()).unwrap();
    let mut tx = q.producer().unwrap();
    let big = vec![7u8; 11];
    match tx.try_send(big.clone()) {
        Err(e @ TrySendError::TooLarge { len: 11, max: 10, .. }) => {
            assert!(e.to_string().contains("max element size of 10"), "{e}");
            assert_eq!(e.into_inner(), big);
        }
        other => panic!("{other:?}"),
    }
    match tx.send_timeout(big.clone(), Duration::from_millis(1)) {
        Err(SendError::TooLarge { msg, .. }) => assert_eq!(msg, big),
        other => panic!("{other:?}"),
    }
    assert_eq!(q.status().depth, 0, "nothing was sent");
}

#[test]
fn bad_configs_are_refused() {
    let (d, _root) = domain();
    for (c, word) in [
        (cfg(0, 10), "capacity"),
        (cfg(10, 0), "max_element_size"),
        (cfg(1 << 40, 10), "capacity"),
        (cfg(1 << 31, 1 << 29), "need more"),
    ] {
        match Queue::create(&d, "q", c, &CreateOptions::default()) {
            Err(e @ OpenError::InvalidConfig { .. }) => assert!(e.to_string().contains(word), "{e}"),
            other => panic!("{c:?}: {other:?}"),
        }
    }
    assert!(matches!(Queue::open(&d, "q"), Err(OpenError::NotFound { .. })));
    assert!(matches!(Queue::open(&d, "../q"), Err(OpenError::InvalidName(_))));
}

#[test]
fn create_twice_opens_and_checks_the_layout() {
    let (d, _root) = domain();
    let a = Queue::create(&d, "q", cfg(4, 32), &CreateOptions::default()).unwrap();
    let b = Queue::create(&d, "q", cfg(4, 32), &CreateOptions::default()).unwrap();
    a.producer().unwrap().try_send(b"x").unwrap();
    assert_eq!(b.consumer().unwrap().try_recv().unwrap(), b"x");
    match Queue::create(&d, "q", cfg(8, 32), &CreateOptions::default()) {
        Err(OpenError::LayoutMismatch { field: "capacity", existing: 4, requested: 8, .. }) => {}
        other => panic!("{other:?}"),
    }
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(a.path()).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn receive_buffer_must_hold_the_max_element() {
    let (d, _root) = domain();
    let q = Queue::create(&d, "q", cfg(4, 32), &CreateOptions::default()).unwrap();
    let mut rx = q.consumer().unwrap();
    let mut small = [0u8; 31];
    let e = rx.try_recv_into(&mut small).unwrap_err();
    assert_eq!(e, TryRecvError::BufferTooSmall { len: 31, needed: 32 });
    assert!(e.to_string().contains("at least"));
    assert_eq!(
        rx.recv_into_timeout(&mut small, Duration::ZERO),
        Err(RecvError::BufferTooSmall { len: 31, needed: 32 })
    );
}

#[test]
fn timeouts_end_blocking_calls() {
    let (d, _root) = domain();
    let q = Queue::create(&d, "q", cfg(1, 8), &CreateOptions::default()).unwrap();
    let mut rx = q.consumer().unwrap();
    let mut tx = q.producer().unwrap();
    let t = Instant::now();
    assert_eq!(rx.recv_timeout(Duration::from_millis(30)), Err(RecvError::Timeout));
    let waited = t.elapsed();
    assert!(waited >= Duration::from_millis(30) && waited < Duration::from_secs(2), "{waited:?}");
    tx.send(b"a").unwrap();
    let t = Instant::now();
    match tx.send_timeout(b"b", Duration::from_millis(30)) {
        Err(SendError::Timeout(m)) => assert_eq!(m, b"b"),
        other => panic!("{other:?}"),
    }
    assert!(t.elapsed() >= Duration::from_millis(30));
}

#[test]
fn blocking_send_and_recv_wake_each_other() {
    let (d, _root) = domain();
    let q = Queue::create(&d, "q", cfg(2, 8), &CreateOptions::default()).unwrap();
    let n = 20_000u64;
    std::thread::scope(|s| {
        let q2 = q.clone();
        s.spawn(move || {
            let mut tx = q2.producer().unwrap();
            tx.set_wait_policy(shmbus::WaitPolicy::BLOCK);
            for i in 0..n {
                tx.send(i.to_le_bytes()).unwrap();
            }
        });
        let mut rx = q.consumer().unwrap();
        rx.set_wait_policy(shmbus::WaitPolicy::BLOCK);
        let mut buf = [0u8; 8];
        for i in 0..n {
            assert_eq!(rx.recv_into(&mut buf), Ok(8));
            assert_eq!(u64::from_le_bytes(buf), i);
        }
    });
    let st = q.status();
    assert_eq!((st.sent, st.received, st.depth), (n, n, 0));
}

#[test]
fn many_threads_compete_and_each_message_arrives_once() {
    let (d, _root) = domain();
    let q = Queue::create(&d, "q", cfg(16, 16), &CreateOptions::default()).unwrap();
    let (producers, consumers, per) = (3u64, 3usize, 20_000u64);
    let seen: Vec<std::sync::atomic::AtomicU8> =
        (0..producers * per).map(|_| std::sync::atomic::AtomicU8::new(0)).collect();
    let done = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for p in 0..producers {
            let q = q.clone();
            s.spawn(move || {
                let mut tx = q.producer().unwrap();
                for i in 0..per {
                    let id = p * per + i;
                    let mut m = [0u8; 16];
                    m[..8].copy_from_slice(&id.to_le_bytes());
                    m[8..].copy_from_slice(&(!id).to_le_bytes());
                    tx.send(m).unwrap();
                }
            });
        }
        for _ in 0..consumers {
            let (q, seen, done) = (q.clone(), &seen, &done);
            s.spawn(move || {
                let mut rx = q.consumer().unwrap();
                let mut buf = [0u8; 16];
                while done.load(Ordering::Relaxed) < (producers * per) as usize {
                    match rx.recv_into_timeout(&mut buf, Duration::from_millis(10)) {
                        Ok(16) => {
                            let id = u64::from_le_bytes(buf[..8].try_into().unwrap());
                            assert_eq!(u64::from_le_bytes(buf[8..].try_into().unwrap()), !id, "torn");
                            assert_eq!(seen[id as usize].fetch_add(1, Ordering::Relaxed), 0, "duplicate {id}");
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(RecvError::Timeout) => {}
                        other => panic!("{other:?}"),
                    }
                }
            });
        }
    });
    assert!(seen.iter().all(|s| s.load(Ordering::Relaxed) == 1));
}

#[test]
fn status_counts_live_endpoints_by_role() {
    let (d, _root) = domain();
    let q = Queue::create(&d, "q", cfg(4, 8), &CreateOptions::default()).unwrap();
    let st = q.status();
    assert_eq!((st.capacity, st.max_element_size, st.depth, st.producers, st.consumers), (4, 8, 0, 0, 0));
    let p1 = q.producer().unwrap();
    let _p2 = q.producer().unwrap();
    let mut c = q.consumer().unwrap();
    let st = q.status();
    assert_eq!((st.producers, st.consumers), (2, 1));
    drop(p1);
    assert_eq!(q.status().producers, 1);
    assert_eq!(c.try_recv(), Err(TryRecvError::Empty));
    assert_eq!((st.abandoned, st.lost), (0, 0));
}

#[test]
fn participant_table_runs_out_with_a_clear_error_and_frees_on_drop() {
    let (d, _root) = domain();
    let q = Queue::create(&d, "q", cfg(4, 8), &CreateOptions::default()).unwrap();
    let mut held = Vec::new();
    loop {
        match q.producer() {
            Ok(p) => held.push(p),
            Err(e @ OpenError::TooManyParticipants { .. }) => {
                assert!(e.to_string().contains("close some endpoints"));
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(held.len(), 128);
    held.pop();
    q.consumer().unwrap();
}

#[test]
fn capacity_one_and_non_power_of_two_capacities_wrap_correctly() {
    let (d, _root) = domain();
    for cap in [1u64, 3, 5, 7] {
        let q = Queue::create(&d, &format!("q{cap}"), cfg(cap, 8), &CreateOptions::default()).unwrap();
        let mut tx = q.producer().unwrap();
        let mut rx = q.consumer().unwrap();
        let mut next_in = 0u64;
        let mut next_out = 0u64;
        for _ in 0..100 {
            while tx.try_send(next_in.to_le_bytes()).is_ok() {
                next_in += 1;
            }
            assert_eq!(next_in - next_out, cap);
            for _ in 0..(next_in - next_out).min(2) {
                assert_eq!(rx.try_recv().unwrap(), next_out.to_le_bytes());
                next_out += 1;
            }
        }
    }
}
