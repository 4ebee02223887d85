//! WaitSet over stream endpoints: readers wake when a record is committed, a writer when
//! space is freed; nothing is ready spuriously.

#![cfg(not(loom))]

mod common;

use std::time::Duration;

use common::Scratch;
use shmbus::stream::{Stream, StreamConfig};
use shmbus::{WaitSet, WaitTimeoutError, Waitable};

#[test]
fn waitset_wakes_the_reader_of_the_stream_that_got_a_record() {
    let root = Scratch::in_temp_dir("stream-ws");
    let d = root.domain("test");
    let cfg = StreamConfig::default().capacity(1 << 16);
    let mut ra = Stream::create_or_open(&d, "a", &cfg).unwrap().reader().unwrap();
    let mut rb = Stream::create_or_open(&d, "b", &cfg).unwrap().reader().unwrap();
    let mut writers =
        [Stream::open(&d, "a").unwrap().writer().unwrap(), Stream::open(&d, "b").unwrap().writer().unwrap()];
    let mut ws = WaitSet::new();
    assert_eq!(ws.wait_timeout(&[&ra, &rb], Duration::from_millis(20)).unwrap_err(), WaitTimeoutError::Timeout);

    // A writer thread writes to the stream it is told to, a little after being told.
    let (tx, rx) = std::sync::mpsc::channel::<(usize, u32)>();
    let t = std::thread::spawn(move || {
        for (idx, round) in rx {
            std::thread::sleep(Duration::from_millis(2));
            writers[idx].send(&round.to_le_bytes()).unwrap();
        }
    });
    for round in 0..50u32 {
        let idx = (round % 2) as usize;
        tx.send((idx, round)).unwrap();
        let ready = ws.wait_timeout(&[&ra, &rb], Duration::from_secs(10)).unwrap().to_vec();
        assert_eq!(ready, vec![idx], "round {round}");
        let r = if idx == 0 { &mut ra } else { &mut rb };
        let rec = r.try_recv_ref().unwrap();
        assert_eq!(&*rec, &round.to_le_bytes());
        rec.consume();
        assert!(!ra.is_ready() && !rb.is_ready());
    }
    drop(tx);
    t.join().unwrap();
}

#[test]
fn waitset_wakes_a_writer_when_space_is_freed() {
    let root = Scratch::in_temp_dir("stream-ws-w");
    let d = root.domain("test");
    let cap = 1 << 16;
    let mut w = Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(cap)).unwrap().writer().unwrap();
    let mut r = Stream::open(&d, "s").unwrap().reader().unwrap();
    w.set_writable_len(1000);
    assert!(w.is_ready());
    while w.try_send(&[0u8; 1000]).is_ok() {}
    assert!(!w.is_ready());
    let mut ws = WaitSet::new();
    assert_eq!(ws.wait_timeout(&[&w], Duration::from_millis(20)).unwrap_err(), WaitTimeoutError::Timeout);
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(5));
        r.try_recv_ref().unwrap().consume();
        r
    });
    assert_eq!(ws.wait_timeout(&[&w], Duration::from_secs(10)).unwrap(), &[0]);
    w.try_send(&[1u8; 1000]).unwrap();
    drop(t.join().unwrap());
}
