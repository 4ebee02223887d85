//! Untrusted segments: garbage parameters (with a valid checksum, so they reach the queue's
//! own validation), truncated files, foreign files, other kinds, and scribbled cells. Each
//! must be a typed error: no panic, no hang, no out-of-bounds access.
#![cfg(not(loom))]

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::Scratch;
use shmbus::queue::{Queue, QueueConfig, QueueRecvError, QueueRecvTimeoutError, QueueTryRecvError, QueueTrySendError};
use shmbus::{Domain, Kind, OpenError, RecvIntoSliceError};

fn domain() -> (Domain, Scratch) {
    let s = Scratch::new("queue-corrupt");
    (s.domain("t"), s)
}

// Header layout (see `segment.rs`): magic 0, version 8, kind 12, ready 16, crc 20,
// total_size 24, params 32..96, then creator fields; 120 bytes in all.
const KIND: u64 = 12;
const CRC: u64 = 20;
const PARAMS: u64 = 32;
const HEADER_LEN: usize = 208; // the checksummed header, with the payload type
/// Start of the queue's kind area, and of its first cell after the 1 KiB control block.
const KIND_AREA: u64 = 4096 + 128 * 64 + 128 * 512;
const FIRST_CELL: u64 = KIND_AREA + 1024;

fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

/// Writes `bytes` at `offset` of the header and fixes the checksum, as a hostile writer would.
fn patch_header(path: &Path, offset: u64, bytes: &[u8]) {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
    let mut h = [0u8; HEADER_LEN];
    f.read_exact_at(&mut h, 0).unwrap();
    h[16..24].fill(0); // ready and crc count as zero
    f.write_all_at(&crc32c(&h).to_le_bytes(), CRC).unwrap();
}

fn make(d: &Domain, name: &str) -> PathBuf {
    let q = Queue::create_or_open(d, name, &QueueConfig::default().capacity(4).max_message_len(48)).unwrap();
    q.path().to_owned()
}

#[test]
fn checksum_of_the_test_matches_the_library() {
    // Patching a field with its own value must leave a segment that still opens.
    let (d, _root) = domain();
    let path = make(&d, "q");
    patch_header(&path, PARAMS, &4u64.to_le_bytes());
    Queue::open(&d, "q").unwrap();
}

#[test]
fn garbage_parameters_are_typed_errors() {
    let (d, _root) = domain();
    let cases: [(&str, [u64; 3]); 6] = [
        ("zero capacity", [0, 48, 64]),
        ("zero element size", [4, 0, 64]),
        ("absurd capacity", [u64::MAX, 48, 64]),
        ("absurd element size", [4, u64::MAX, 64]),
        ("stride that does not match", [4, 48, 8]),
        ("absurd product", [1 << 32, 1 << 30, (1 << 30) + 64]),
    ];
    for (what, params) in cases {
        let path = make(&d, "q");
        let bytes: Vec<u8> = params.iter().flat_map(|p| p.to_le_bytes()).collect();
        patch_header(&path, PARAMS, &bytes);
        match Queue::open(&d, "q") {
            Err(e @ OpenError::Corrupt { .. }) => assert!(e.to_string().contains("corrupt"), "{what}: {e}"),
            other => panic!("{what}: {other:?}"),
        }
        // Creating over it fails the same way rather than trusting it.
        assert!(Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(4).max_message_len(48)).is_err());
        std::fs::remove_file(&path).unwrap();
    }
    // An unknown extra parameter.
    let path = make(&d, "q");
    patch_header(&path, PARAMS + 8 * 5, &9u64.to_le_bytes());
    assert!(matches!(Queue::open(&d, "q"), Err(OpenError::Corrupt { .. })));
}

#[test]
fn params_changed_without_fixing_the_checksum_are_caught() {
    let (d, _root) = domain();
    let path = make(&d, "q");
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&u64::MAX.to_le_bytes(), PARAMS).unwrap();
    assert!(matches!(Queue::open(&d, "q"), Err(OpenError::Corrupt { .. })));
}

#[test]
fn truncated_and_foreign_files_are_typed_errors() {
    let (d, _root) = domain();
    let path = make(&d, "q");
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len - 64).unwrap();
    match Queue::open(&d, "q") {
        Err(OpenError::Truncated { size, expected, .. }) => assert_eq!((size, expected), (len - 64, len)),
        other => panic!("{other:?}"),
    }
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(100).unwrap();
    assert!(matches!(Queue::open(&d, "q"), Err(OpenError::Truncated { .. })));
    std::fs::write(&path, vec![0xA5u8; 64 * 1024]).unwrap();
    assert!(matches!(Queue::open(&d, "q"), Err(OpenError::NotASegment { .. })));
    std::fs::write(&path, b"").unwrap();
    assert!(matches!(Queue::open(&d, "q"), Err(OpenError::NotASegment { .. })));
}

#[test]
fn another_kind_is_wrong_kind() {
    let (d, _root) = domain();
    for kind in [Kind::Topic, Kind::Stream, Kind::Pool] {
        let path = make(&d, "q");
        patch_header(&path, KIND, &(kind as u32).to_le_bytes());
        match Queue::open(&d, "q") {
            Err(e @ OpenError::WrongKind { found: Some(k), expected: Kind::Queue, .. }) => {
                assert_eq!(k, kind);
                assert!(e.to_string().contains(&format!("is a {kind}, not a queue")), "{e}");
            }
            other => panic!("{other:?}"),
        }
        std::fs::remove_file(&path).unwrap();
    }
}

fn read_at(f: &std::fs::File, offset: u64) -> [u8; 8] {
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, offset).unwrap();
    b
}

#[test]
fn a_scribbled_cell_is_corrupt_to_the_blocking_receives_too() {
    let (d, _root) = domain();
    let q = Queue::create_or_open(&d, "b", &QueueConfig::default().capacity(4).max_message_len(48)).unwrap();
    let mut tx = q.producer().unwrap();
    let mut rx = q.consumer().unwrap();
    let f = std::fs::OpenOptions::new().read(true).write(true).open(q.path()).unwrap();
    for (i, m) in [&b"one"[..], b"two"].into_iter().enumerate() {
        tx.try_send(m).unwrap();
        // A length beyond the max element size in the message's cell.
        f.write_all_at(&u32::MAX.to_le_bytes(), FIRST_CELL + i as u64 * 64 + 8).unwrap();
    }
    assert!(matches!(rx.recv(), Err(QueueRecvError::Corrupt(c)) if c.repaired()));
    let mut buf = [0u8; 48];
    assert!(matches!(rx.recv_into_slice(&mut buf), Err(RecvIntoSliceError::Recv(QueueRecvError::Corrupt(_)))));
    tx.try_send(b"three").unwrap();
    assert_eq!(rx.recv().unwrap(), b"three");
}

#[test]
fn scribbled_cells_make_calls_fail_not_panic_or_hang() {
    let (d, _root) = domain();
    let q = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(4).max_message_len(48)).unwrap();
    let mut tx = q.producer().unwrap();
    let mut rx = q.consumer().unwrap();
    let f = std::fs::OpenOptions::new().read(true).write(true).open(q.path()).unwrap();
    let stride = 64u64;

    // A length beyond the max element size: refused, and the cell is skipped.
    tx.try_send(b"hello").unwrap();
    tx.try_send(b"world").unwrap();
    f.write_all_at(&u32::MAX.to_le_bytes(), FIRST_CELL + 8).unwrap();
    match rx.try_recv() {
        Err(QueueTryRecvError::Corrupt(c)) => {
            assert_eq!((c.kind(), c.value("len"), c.value("max")), (Kind::Queue, Some(u32::MAX as u64), Some(48)));
            assert!(c.repaired(), "the cell is skipped: {c}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(rx.try_recv().unwrap(), b"world");

    // A garbage stamp at the head: reported once, the cell repaired (its message, if any, is
    // gone), and the queue goes on.
    f.write_all_at(&u64::MAX.to_le_bytes(), FIRST_CELL + 2 * stride).unwrap();
    let e = rx.try_recv().unwrap_err();
    assert!(matches!(e, QueueTryRecvError::Corrupt(ref c) if c.repaired()), "{e:?}");
    assert!(e.to_string().contains("corrupt") && e.to_string().contains("recreate the queue"), "{e}");
    assert!(matches!(rx.recv_timeout(Duration::from_millis(20)), Err(QueueRecvTimeoutError::Timeout)));
    tx.try_send(b"x").unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_millis(20)).unwrap(), b"x");
    // And at the tail.
    let tail = u64::from_le_bytes(read_at(&f, KIND_AREA));
    f.write_all_at(&u64::MAX.to_le_bytes(), FIRST_CELL + (tail % 4) * stride).unwrap();
    assert!(matches!(tx.try_send(b"y"), Err(QueueTrySendError::Corrupt(_))));
    tx.send_timeout(b"y", Duration::from_millis(20)).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_millis(20)).unwrap(), b"y");

    // Garbage counters: reported once each, then rebuilt from the cells.
    f.write_all_at(&u64::MAX.to_le_bytes(), KIND_AREA).unwrap(); // tail
    f.write_all_at(&(u64::MAX - 5).to_le_bytes(), KIND_AREA + 128).unwrap(); // head
    assert!(matches!(tx.try_send(b"x"), Err(QueueTrySendError::Corrupt(c)) if c.repaired()));
    assert!(matches!(rx.try_recv(), Err(QueueTryRecvError::Corrupt(c)) if c.repaired()));
    let st = Queue::status(&d, "q").unwrap();
    assert!(st.depth <= st.capacity);
    tx.try_send(b"z").unwrap();
    assert_eq!(rx.try_recv().unwrap(), b"z");

    // Random garbage over the whole kind area, many times: every call returns.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let len = std::fs::metadata(q.path()).unwrap().len();
    for _ in 0..200 {
        let mut junk = vec![0u8; (len - KIND_AREA) as usize];
        for b in junk.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        f.write_all_at(&junk, KIND_AREA).unwrap();
        let _ = tx.try_send(b"x");
        let _ = rx.try_recv();
        let _ = rx.recv_timeout(Duration::from_micros(50));
        let _ = Queue::status(&d, "q");
    }
}
