//! The queue's API in one process: round trips, FIFO, full/empty, blocking with timeouts,
//! bad input, status, participant accounting.
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::Scratch;
use shmbus::queue::{
    Queue, QueueConfig, QueueRecvTimeoutError, QueueSendError, QueueSendTimeoutError, QueueTryRecvError,
    QueueTrySendError,
};
use shmbus::{Domain, OpenError};

fn domain() -> (Domain, Scratch) {
    let s = Scratch::new("queue-api");
    (s.domain("t"), s)
}

fn cfg(capacity: u64, max_message_len: usize) -> QueueConfig {
    QueueConfig::default().capacity(capacity).max_message_len(max_message_len)
}

#[test]
fn round_trip_in_fifo_order_with_variable_lengths() {
    let (d, _root) = domain();
    let q = Queue::create_or_open(&d, "q", &cfg(8, 100)).unwrap();
    let mut tx = q.producer().unwrap();
    let mut rx = Queue::open(&d, "q").unwrap().consumer().unwrap();
    for round in 0..5u8 {
        for len in [0usize, 1, 7, 64, 100] {
            let msg: Vec<u8> = (0..len).map(|i| i as u8 ^ round).collect();
            tx.try_send(&msg).unwrap();
            assert_eq!(rx.try_recv().unwrap(), msg);
        }
    }
    assert_eq!(rx.try_recv(), Err(QueueTryRecvError::Empty));
}

/// The owned receives, large and small messages in turn: each is whole, and a small one does
/// not keep a buffer of the queue's maximum length (a large one may: at most twice its size).
#[test]
fn owned_receives_of_large_and_small_messages() {
    let (d, _root) = domain();
    const MAX: usize = 1 << 20;
    let q = Queue::create_or_open(&d, "q", &cfg(4, MAX)).unwrap();
    let mut tx = q.producer().unwrap();
    let mut rx = q.consumer().unwrap();
    for round in 0..3u8 {
        for len in [MAX, 8, MAX / 2 + 1, 0, MAX / 2 - 1] {
            let msg: Vec<u8> = (0..len).map(|i| (i % 251) as u8 ^ round).collect();
            tx.try_send(&msg).unwrap();
            let got =
                if len % 2 == 0 { rx.try_recv().unwrap() } else { rx.recv_timeout(Duration::from_secs(5)).unwrap() };
            assert!(got == msg, "round {round}: a message of {len} bytes came back as {} other bytes", got.len());
            assert!(got.capacity() <= (2 * len).max(64), "{len} bytes hold {} bytes of memory", got.capacity());
        }
    }
}

#[test]
fn full_queue_says_full_and_sends_nothing() {
    let (d, _root) = domain();
    let q = Queue::create_or_open(&d, "q", &cfg(3, 16)).unwrap();
    let mut tx = q.producer().unwrap();
    let mut rx = q.consumer().unwrap();
    assert!(tx.has_room());
    for i in 0..3u8 {
        tx.try_send(&[i]).unwrap();
    }
    assert!(!tx.has_room());
    let e = tx.try_send(&[42u8, 43]).unwrap_err();
    assert!(matches!(e, QueueTrySendError::Full), "{e}");
    assert!(e.to_string().contains("full"));
    assert_eq!(Queue::status(&d, "q").unwrap().depth, 3);
    let mut buf = Vec::new();
    assert_eq!(rx.try_recv_into(&mut buf), Ok(1));
    assert_eq!(buf, [0]);
    tx.try_send(&[3u8]).unwrap();
    for i in 1..4u8 {
        assert_eq!(rx.try_recv().unwrap(), vec![i]);
    }
}

#[test]
fn too_large_is_a_clear_error_and_sends_nothing() {
    let (d, _root) = domain();
    let q = Queue::create_or_open(&d, "q", &cfg(4, 10)).unwrap();
    let mut tx = q.producer().unwrap();
    let big = vec![7u8; 11];
    match tx.try_send(&big) {
        Err(e @ QueueTrySendError::TooLarge { len: 11, max: 10 }) => {
            assert!(e.to_string().contains("max element size of 10"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        tx.send_timeout(&big, Duration::from_millis(1)),
        Err(QueueSendTimeoutError::TooLarge { len: 11, max: 10 })
    );
    assert_eq!(tx.send(&big), Err(QueueSendError::TooLarge { len: 11, max: 10 }));
    assert_eq!(Queue::status(&d, "q").unwrap().depth, 0, "nothing was sent");
}

#[test]
fn bad_configs_are_refused() {
    let (d, _root) = domain();
    for (c, word) in [
        (cfg(0, 10), "capacity"),
        (cfg(10, 0), "max_message_len"),
        (cfg(1 << 40, 10), "capacity"),
        (cfg(1 << 31, 1 << 29), "need more"),
    ] {
        match Queue::create_or_open(&d, "q", &c) {
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
    let a = Queue::create_or_open(&d, "q", &cfg(4, 32)).unwrap();
    let b = Queue::create_or_open(&d, "q", &cfg(4, 32)).unwrap();
    a.producer().unwrap().try_send(b"x").unwrap();
    assert_eq!(b.consumer().unwrap().try_recv().unwrap(), b"x");
    match Queue::create_or_open(&d, "q", &cfg(8, 32)) {
        Err(OpenError::LayoutMismatch { field: "capacity", existing: 4, requested: 8, .. }) => {}
        other => panic!("{other:?}"),
    }
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(a.path()).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn unset_config_values_accept_the_existing_queue() {
    let (d, _root) = domain();
    let a = Queue::create_or_open(&d, "q", &cfg(4, 32).mode(0o640)).unwrap();
    let b = Queue::create_or_open(&d, "q", &QueueConfig::default()).unwrap();
    assert_eq!((b.capacity(), b.max_message_len()), (4, 32));
    let c = Queue::create_or_open(&d, "q", &QueueConfig::default().max_message_len(32)).unwrap();
    assert_eq!(c.capacity(), 4);
    match Queue::create_or_open(&d, "q", &QueueConfig::default().max_message_len(64)) {
        Err(OpenError::LayoutMismatch { field: "max_element_size", existing: 32, requested: 64, .. }) => {}
        other => panic!("{other:?}"),
    }
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(a.path()).unwrap().permissions().mode() & 0o777, 0o640);
    // Created with nothing set: the defaults.
    let e = Queue::create_or_open(&d, "e", &QueueConfig::default()).unwrap();
    assert_eq!(
        (e.capacity(), e.max_message_len()),
        (QueueConfig::DEFAULT_CAPACITY, QueueConfig::DEFAULT_MAX_MESSAGE_LEN)
    );
}

#[test]
fn recv_into_replaces_the_contents_and_reuses_the_allocation() {
    let (d, _root) = domain();
    let q = Queue::create_or_open(&d, "q", &cfg(4, 32)).unwrap();
    let mut tx = q.producer().unwrap();
    let mut rx = q.consumer().unwrap();
    let mut buf = b"old contents".to_vec();
    tx.send(b"first").unwrap();
    assert_eq!(rx.try_recv_into(&mut buf), Ok(5));
    assert_eq!(buf, b"first");
    assert!(buf.capacity() >= 32);
    let at = buf.as_ptr();
    for m in [&b"a longer second message"[..], b"", b"x"] {
        tx.send(m).unwrap();
        assert_eq!(rx.recv_into_timeout(&mut buf, Duration::from_secs(5)), Ok(m.len()));
        assert_eq!(buf, m);
        assert_eq!(buf.as_ptr(), at, "no new allocation once the buffer has room");
    }
    tx.send(b"y").unwrap();
    assert_eq!(rx.recv_into(&mut buf), Ok(1));
    assert_eq!(buf, b"y");
    assert_eq!(rx.try_recv_into(&mut buf), Err(QueueTryRecvError::Empty));
    assert_eq!(rx.recv_into_timeout(&mut buf, Duration::ZERO), Err(QueueRecvTimeoutError::Timeout));
}

#[test]
fn iterators_yield_the_messages() {
    let (d, _root) = domain();
    let q = Queue::create_or_open(&d, "q", &cfg(8, 8)).unwrap();
    let mut tx = q.producer().unwrap();
    let mut rx = q.consumer().unwrap();
    for i in 0..5u8 {
        tx.send(&[i]).unwrap();
    }
    let got: Vec<Vec<u8>> = rx.try_iter().map(Result::unwrap).collect();
    assert_eq!(got, (0..5u8).map(|i| vec![i]).collect::<Vec<_>>());
    assert_eq!(rx.try_iter().count(), 0, "ends when the queue is empty");
    tx.send(b"a").unwrap();
    tx.send(b"b").unwrap();
    let got: Vec<Vec<u8>> = rx.iter().take(2).map(Result::unwrap).collect();
    assert_eq!(got, [b"a".to_vec(), b"b".to_vec()]);
}

#[test]
fn status_needs_read_permission_only() {
    let (d, _root) = domain();
    let q = Queue::create_or_open(&d, "q", &cfg(4, 8)).unwrap();
    q.producer().unwrap().send(b"x").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(q.path(), std::fs::Permissions::from_mode(0o400)).unwrap();
    let st = Queue::status(&d, "q").unwrap();
    assert_eq!((st.capacity, st.max_message_len, st.depth, st.sent), (4, 8, 1, 1));
    assert!(matches!(Queue::status(&d, "none"), Err(OpenError::NotFound { .. })));
}

#[test]
fn timeouts_end_blocking_calls() {
    let (d, _root) = domain();
    let q = Queue::create_or_open(&d, "q", &cfg(1, 8)).unwrap();
    let mut rx = q.consumer().unwrap();
    let mut tx = q.producer().unwrap();
    let t = Instant::now();
    assert_eq!(rx.recv_timeout(Duration::from_millis(30)), Err(QueueRecvTimeoutError::Timeout));
    let waited = t.elapsed();
    assert!(waited >= Duration::from_millis(30) && waited < Duration::from_secs(2), "{waited:?}");
    tx.send(b"a").unwrap();
    let t = Instant::now();
    assert_eq!(tx.send_timeout(b"b", Duration::from_millis(30)), Err(QueueSendTimeoutError::Timeout));
    assert!(t.elapsed() >= Duration::from_millis(30));
}

#[test]
fn blocking_send_and_recv_wake_each_other() {
    let (d, _root) = domain();
    let q = Queue::create_or_open(&d, "q", &cfg(2, 8)).unwrap();
    let n = 20_000u64;
    std::thread::scope(|s| {
        let q2 = q.clone();
        s.spawn(move || {
            let mut tx = q2.producer().unwrap();
            tx.set_wait_policy(shmbus::WaitPolicy::BLOCK);
            for i in 0..n {
                tx.send(&i.to_le_bytes()).unwrap();
            }
        });
        let mut rx = q.consumer().unwrap();
        rx.set_wait_policy(shmbus::WaitPolicy::BLOCK);
        let mut buf = Vec::new();
        for i in 0..n {
            assert_eq!(rx.recv_into(&mut buf), Ok(8));
            assert_eq!(u64::from_le_bytes(buf[..].try_into().unwrap()), i);
        }
    });
    let st = Queue::status(&d, "q").unwrap();
    assert_eq!((st.sent, st.received, st.depth), (n, n, 0));
}

#[test]
fn many_threads_compete_and_each_message_arrives_once() {
    let (d, _root) = domain();
    let q = Queue::create_or_open(&d, "q", &cfg(16, 16)).unwrap();
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
                    tx.send(&m).unwrap();
                }
            });
        }
        for _ in 0..consumers {
            let (q, seen, done) = (q.clone(), &seen, &done);
            s.spawn(move || {
                let mut rx = q.consumer().unwrap();
                let mut buf = Vec::new();
                while done.load(Ordering::Relaxed) < (producers * per) as usize {
                    match rx.recv_into_timeout(&mut buf, Duration::from_millis(10)) {
                        Ok(16) => {
                            let id = u64::from_le_bytes(buf[..8].try_into().unwrap());
                            assert_eq!(u64::from_le_bytes(buf[8..].try_into().unwrap()), !id, "torn");
                            assert_eq!(seen[id as usize].fetch_add(1, Ordering::Relaxed), 0, "duplicate {id}");
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(QueueRecvTimeoutError::Timeout) => {}
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
    let q = Queue::create_or_open(&d, "q", &cfg(4, 8)).unwrap();
    let st = Queue::status(&d, "q").unwrap();
    assert_eq!((st.capacity, st.max_message_len, st.depth, st.producers, st.consumers), (4, 8, 0, 0, 0));
    let p1 = q.producer().unwrap();
    let _p2 = q.producer().unwrap();
    let mut c = q.consumer().unwrap();
    let st = Queue::status(&d, "q").unwrap();
    assert_eq!((st.producers, st.consumers), (2, 1));
    assert_eq!(c.status(), st);
    drop(p1);
    assert_eq!(Queue::status(&d, "q").unwrap().producers, 1);
    assert_eq!(c.try_recv(), Err(QueueTryRecvError::Empty));
    assert_eq!((st.abandoned, st.lost), (0, 0));
}

#[test]
fn participant_table_runs_out_with_a_clear_error_and_frees_on_drop() {
    let (d, _root) = domain();
    let q = Queue::create_or_open(&d, "q", &cfg(4, 8)).unwrap();
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
        let q = Queue::create_or_open(&d, &format!("q{cap}"), &cfg(cap, 8)).unwrap();
        let mut tx = q.producer().unwrap();
        let mut rx = q.consumer().unwrap();
        let mut next_in = 0u64;
        let mut next_out = 0u64;
        for _ in 0..100 {
            while tx.try_send(&next_in.to_le_bytes()).is_ok() {
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
