//! Bad input to a stream: impossible sizes, oversized records, and segment files whose
//! header parameters or contents are corrupt. Every case is a clear error, never a panic.

#![cfg(not(loom))]

mod common;

use std::os::unix::fs::FileExt;

use common::Scratch;
use shmbus::stream::{Stream, StreamConfig, StreamTryRecvError, StreamTrySendError, StreamWriter};
use shmbus::sys::page_size;
use shmbus::OpenError;

fn invalid_config(r: Result<StreamWriter, OpenError>) -> String {
    match r {
        Err(e @ OpenError::InvalidConfig { .. }) => e.to_string(),
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
}

#[test]
fn impossible_capacities_are_refused_with_the_rule() {
    let root = Scratch::in_temp_dir("stream-bad-cap");
    let d = root.domain("test");
    let p = page_size();
    assert!(invalid_config(
        Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(0)).and_then(|s| s.writer())
    )
    .contains("0 bytes"));
    let e = invalid_config(
        Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(p + 100)).and_then(|s| s.writer()),
    );
    assert!(e.contains("not a multiple of the page size"), "{e}");
    let e = invalid_config(
        Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(3 * p)).and_then(|s| s.writer()),
    );
    assert!(e.contains("not a power of two"), "{e}");
    assert!(d.channel_names().unwrap().is_empty(), "a refused stream left a file behind");
}

#[test]
fn record_larger_than_the_ring_is_refused() {
    let root = Scratch::in_temp_dir("stream-bad-rec");
    let d = root.domain("test");
    let mut w =
        Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(page_size())).unwrap().writer().unwrap();
    let e = w.try_send(&vec![0; page_size()]).unwrap_err();
    assert!(matches!(e, StreamTrySendError::TooLarge { len, max } if len == page_size() && max == page_size() - 8));
    assert!(e.to_string().contains("larger than this stream's maximum"));
    assert!(w.send(&vec![0; 10 * page_size()]).is_err());
}

/// Offsets in the segment header (see `segment.rs`).
const CRC_AT: u64 = 20;
const PARAMS_AT: u64 = 32;
const HEADER_LEN: usize = 208; // the checksummed header, with the payload type

/// Overwrites parameter `i` and fixes the header checksum, as a hostile or buggy creator
/// would produce.
fn rewrite_param(path: &std::path::Path, i: u64, value: u64) {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    f.write_all_at(&value.to_le_bytes(), PARAMS_AT + 8 * i).unwrap();
    let mut h = [0u8; HEADER_LEN];
    f.read_exact_at(&mut h, 0).unwrap();
    h[16..24].fill(0); // `ready` and the crc itself are taken as zero
    f.write_all_at(&crc32c::crc32c(&h).to_le_bytes(), CRC_AT).unwrap();
}

#[test]
fn corrupt_header_params_are_refused() {
    let root = Scratch::in_temp_dir("stream-bad-params");
    let d = root.domain("test");
    let p = page_size() as u64;
    for (i, v, what) in [
        (0, 0, "0 bytes"),
        (0, p + 8, "page size"),
        (0, 3 * p, "power of two"),
        (0, 1 << 50, "exceeds"),
        (1, 0, "data offset"),
        (1, 1 << 40, "data offset"),
        (1, 7, "data offset"),
        (4, 9, "unknown stream parameter"),
    ] {
        let name = format!("s{i}-{v}");
        drop(Stream::create_or_open(&d, &name, &StreamConfig::default().capacity(1 << 16)).unwrap().writer().unwrap());
        let path = d.channel_path(&name).unwrap();
        rewrite_param(&path, i, v);
        match Stream::open(&d, &name).and_then(|s| s.reader()) {
            Err(e @ OpenError::Corrupt { .. }) => {
                assert!(e.to_string().contains(what), "param {i} = {v}: {e}")
            }
            other => panic!("param {i} = {v}: expected Corrupt, got {other:?}"),
        }
    }
    // A valid but different capacity no longer matches the file size.
    drop(Stream::create_or_open(&d, "grown", &StreamConfig::default().capacity(1 << 16)).unwrap().writer().unwrap());
    rewrite_param(&d.channel_path("grown").unwrap(), 0, 1 << 17);
    assert!(matches!(Stream::open(&d, "grown").and_then(|s| s.writer()), Err(OpenError::Corrupt { .. })));
}

#[test]
fn corrupt_ring_contents_are_errors_not_panics() {
    let root = Scratch::in_temp_dir("stream-bad-ring");
    let d = root.domain("test");
    let mut w = Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(1 << 16)).unwrap().writer().unwrap();
    let mut r = Stream::open(&d, "s").unwrap().reader().unwrap();
    w.try_send(b"hello").unwrap();
    // Scribble over the record header (first bytes of the ring data) from outside.
    let f = std::fs::OpenOptions::new().read(true).write(true).open(w.path()).unwrap();
    let data_at = f.metadata().unwrap().len() - (1 << 16);
    f.write_all_at(&u64::MAX.to_le_bytes(), data_at).unwrap();
    assert!(matches!(r.try_recv_ref(), Err(StreamTryRecvError::Corrupt(_))));
    // A header claiming more bytes than were committed.
    f.write_all_at(&((1u64 << 20) | (((1u32 << 20) ^ 0x5354_524D) as u64) << 32).to_le_bytes(), data_at).unwrap();
    let e = r.try_recv_ref().unwrap_err();
    assert!(e.to_string().contains("more bytes than were committed"), "{e}");
    // Positions: read position beyond the write position (tail is 128 bytes after head).
    let kind_at = 77824u64;
    f.write_all_at(&(1u64 << 30).to_le_bytes(), kind_at + 128).unwrap();
    // (A maximal record does not fit the cached free space, so the writer re-reads it.)
    assert!(matches!(w.try_send(&vec![0; (1 << 16) - 8]), Err(StreamTrySendError::Corrupt(_))));
    assert!(matches!(Stream::open(&d, "s").and_then(|s| s.reader()), Err(OpenError::Busy { .. })));
    drop(r);
    assert!(matches!(Stream::open(&d, "s").and_then(|s| s.reader()), Err(OpenError::Corrupt { .. })));
}
