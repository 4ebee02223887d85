//! Loom model of the stream's head/tail protocol (`shmbus::stream::protocol`).
//!
//! The ring bytes are a heap array of loom cells, indexed with `pos & (cap - 1)` byte by
//! byte (the double mapping is replaced by an explicit wrap; the protocol does not care).
//! Loom reports any access to a byte by the reader and the writer that is not ordered by the
//! protocol's Release/Acquire pairs, so these models check that a record is never read
//! before it is fully written and never overwritten before it is consumed.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p shmbus --release --test loom_stream`
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use shmbus::stream::protocol::{
    decode_header, encode_header, record_size, ClaimError, ReaderCore, RingShared, WriterCore, HEADER,
};

const CAP: u64 = 32;

struct Ring {
    shared: RingShared,
    bytes: Vec<UnsafeCell<u8>>,
}

impl Ring {
    fn new() -> Arc<Ring> {
        Arc::new(Ring { shared: RingShared::new(), bytes: (0..CAP).map(|_| UnsafeCell::new(0)).collect() })
    }

    fn put(&self, pos: u64, data: &[u8]) {
        for (i, &b) in data.iter().enumerate() {
            // SAFETY: loom checks that this access is ordered against every other one.
            self.bytes[((pos + i as u64) & (CAP - 1)) as usize].with_mut(|p| unsafe { *p = b });
        }
    }

    fn get(&self, pos: u64, out: &mut [u8]) {
        for (i, o) in out.iter_mut().enumerate() {
            // SAFETY: as in `put`.
            *o = self.bytes[((pos + i as u64) & (CAP - 1)) as usize].with(|p| unsafe { *p });
        }
    }

    /// Writes one record (spinning while full) and publishes it.
    fn send(&self, w: &mut WriterCore, payload: &[u8]) {
        let size = record_size(payload.len() as u64);
        let pos = loop {
            match w.try_claim(&self.shared, size) {
                Ok(pos) => break pos,
                Err(ClaimError::Full { .. }) => thread::yield_now(),
                Err(ClaimError::Corrupt(c)) => panic!("{c}"),
            }
        };
        self.put(pos + HEADER, payload);
        self.put(pos, &encode_header(payload.len() as u32).to_le_bytes());
        w.publish(&self.shared, size);
    }

    /// Reads the next record (spinning while empty) without consuming it.
    fn peek(&self, r: &mut ReaderCore) -> (Vec<u8>, u64) {
        loop {
            let avail = r.poll(&self.shared).expect("corrupt positions");
            if avail == 0 {
                thread::yield_now();
                continue;
            }
            let pos = r.position();
            let mut h = [0u8; 8];
            self.get(pos, &mut h);
            let (len, size) =
                decode_header(u64::from_le_bytes(h), avail, r.cached_head(), pos).expect("torn or garbage header");
            let mut out = vec![0u8; len as usize];
            self.get(pos + HEADER, &mut out);
            return (out, size);
        }
    }
}

fn payload(i: u8, len: usize) -> Vec<u8> {
    (0..len as u8).map(|j| i.wrapping_mul(16).wrapping_add(j)).collect()
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// Three records, 56 ring bytes through a 32-byte ring: the writer waits for the reader and
/// the records wrap. Every record arrives whole, in order, once.
#[test]
fn records_arrive_whole_and_in_order_across_the_wrap() {
    model(|| {
        let ring = Ring::new();
        let lens = [3usize, 10, 1];
        let w_ring = ring.clone();
        let writer = thread::spawn(move || {
            let mut w = WriterCore::attach(&w_ring.shared, CAP).unwrap();
            for (i, &len) in lens.iter().enumerate() {
                w_ring.send(&mut w, &payload(i as u8, len));
            }
        });
        let mut r = ReaderCore::attach(&ring.shared, CAP).unwrap();
        for (i, &len) in lens.iter().enumerate() {
            let (got, size) = ring.peek(&mut r);
            assert_eq!(got, payload(i as u8, len));
            r.release(&ring.shared, size);
        }
        writer.join().unwrap();
        assert_eq!(r.poll(&ring.shared).unwrap(), 0);
    });
}

/// A reader "killed" after reading a record but before consuming it: its successor gets
/// that record again, then the rest, while the writer keeps writing concurrently.
#[test]
fn successor_reader_gets_the_unconsumed_record_again() {
    model(|| {
        let ring = Ring::new();
        let w_ring = ring.clone();
        let writer = thread::spawn(move || {
            let mut w = WriterCore::attach(&w_ring.shared, CAP).unwrap();
            for i in 0..3u8 {
                w_ring.send(&mut w, &payload(i, 4));
            }
        });
        {
            let mut a = ReaderCore::attach(&ring.shared, CAP).unwrap();
            let (got, size) = ring.peek(&mut a);
            assert_eq!(got, payload(0, 4));
            a.release(&ring.shared, size);
            let (got, _) = ring.peek(&mut a);
            assert_eq!(got, payload(1, 4));
            // dies here: record 1 read, not consumed
        }
        let mut b = ReaderCore::attach(&ring.shared, CAP).unwrap();
        for i in 1..3u8 {
            let (got, size) = ring.peek(&mut b);
            assert_eq!(got, payload(i, 4));
            b.release(&ring.shared, size);
        }
        writer.join().unwrap();
    });
}

/// A writer "killed" after filling a reservation but before publishing it: the reader never
/// sees the partial record, and the next writer's record takes its place.
#[test]
fn unpublished_reservation_is_never_seen() {
    model(|| {
        let ring = Ring::new();
        let w_ring = ring.clone();
        let writers = thread::spawn(move || {
            let mut a = WriterCore::attach(&w_ring.shared, CAP).unwrap();
            w_ring.send(&mut a, &payload(0, 2));
            let pos = a.try_claim(&w_ring.shared, record_size(5)).unwrap();
            w_ring.put(pos + HEADER, &payload(9, 5));
            w_ring.put(pos, &encode_header(5).to_le_bytes());
            drop(a); // dies before publish
            let mut b = WriterCore::attach(&w_ring.shared, CAP).unwrap();
            w_ring.send(&mut b, &payload(1, 3));
        });
        let mut r = ReaderCore::attach(&ring.shared, CAP).unwrap();
        for i in 0..2u8 {
            let (got, size) = ring.peek(&mut r);
            assert_eq!(got, payload(i, 2 + i as usize));
            r.release(&ring.shared, size);
        }
        writers.join().unwrap();
        assert_eq!(r.poll(&ring.shared).unwrap(), 0);
    });
}
