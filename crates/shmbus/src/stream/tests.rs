//! Unit tests of the stream endpoints (layout, double mapping, records, roles, waking).

use std::path::PathBuf;
use std::time::Duration;

use super::error::{
    StreamRecvError, StreamRecvTimeoutError, StreamSendError, StreamSendTimeoutError, StreamTryRecvError,
    StreamTrySendError,
};
use super::handle::Stream;
use super::layout::{StreamConfig, StreamLayout, MAX_CAPACITY};
use crate::domain::Domain;
use crate::error::OpenError;
use crate::segment::{Layout, KIND_OFFSET};
use crate::sys::{monotonic_ns, page_size};
use crate::wait::WaitPolicy;
use crate::waitset::Waitable;

/// A domain in a fresh temporary root, removed on drop.
struct TempDomain(Domain, PathBuf);
impl TempDomain {
    fn new(tag: &str) -> TempDomain {
        let root =
            std::env::temp_dir().join(format!("shmbus-stream-unit-{tag}-{}-{}", std::process::id(), monotonic_ns()));
        std::fs::create_dir_all(&root).unwrap();
        TempDomain(Domain::with_root("t", &root).unwrap(), root)
    }
}
impl Drop for TempDomain {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

fn page() -> usize {
    page_size()
}

#[test]
fn capacity_rule_is_enforced_with_clear_errors() {
    let p = page() as u64;
    for (cap, needle) in [
        (0, "is 0 bytes"),
        (p + 1, "not a multiple of the page size"),
        (3 * p, "not a power of two"),
        (MAX_CAPACITY * 2, "exceeds"),
    ] {
        let e = StreamLayout::for_capacity(cap).unwrap_err();
        assert!(e.contains(needle), "{cap}: {e}");
    }
    let l = StreamLayout::for_capacity(p).unwrap();
    assert_eq!((KIND_OFFSET as u64 + l.data_offset) % p, 0);
    assert_eq!(StreamLayout::from_params(&l.params()), Ok(l));
}

#[test]
fn corrupt_params_are_rejected() {
    let good = StreamLayout::for_capacity(1 << 16).unwrap().params();
    let mut bad = Vec::new();
    for (i, v) in [(0, 0), (0, 12345), (0, 3 << 12), (1, 0), (1, 8), (1, 1 << 40), (1, good[1] + 1), (5, 1)] {
        let mut p = good;
        p[i] = v;
        bad.push(p);
    }
    for p in bad {
        assert!(StreamLayout::from_params(&p).is_err(), "{p:?} accepted");
    }
}

#[test]
fn double_mapping_aliases_the_two_halves() {
    let d = TempDomain::new("alias");
    let cap = page();
    let w = Stream::create_or_open(&d.0, "s", &StreamConfig::default().capacity(cap)).unwrap().writer().unwrap();
    let base = w.shared.at(0);
    // SAFETY: both offsets are inside the 2×cap mapping; no loan is live.
    unsafe {
        base.add(3).write_volatile(0xAB);
        assert_eq!(base.add(cap + 3).read_volatile(), 0xAB);
        base.add(cap + cap - 1).write_volatile(0xCD);
        assert_eq!(base.add(cap - 1).read_volatile(), 0xCD);
    }
}

#[test]
fn records_round_trip_across_the_wrap() {
    let d = TempDomain::new("wrap");
    let cap = page();
    let mut w = Stream::create_or_open(&d.0, "s", &StreamConfig::default().capacity(cap)).unwrap().writer().unwrap();
    let mut r = Stream::open(&d.0, "s").unwrap().reader().unwrap();
    let mut buf = Vec::new();
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..5000u64 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let len = (rng % (cap as u64 / 3)) as usize;
        let data: Vec<u8> = (0..len).map(|j| (i as usize * 31 + j) as u8).collect();
        w.try_send(&data).unwrap();
        assert_eq!(r.try_recv_into(&mut buf), Ok(len));
        assert_eq!(buf, data);
    }
    assert_eq!(r.try_recv_ref().unwrap_err(), StreamTryRecvError::Empty);
}

#[test]
fn full_ring_hands_back_and_max_record_fits_exactly() {
    let d = TempDomain::new("full");
    let cap = page();
    let mut w = Stream::create_or_open(&d.0, "s", &StreamConfig::default().capacity(cap)).unwrap().writer().unwrap();
    let mut r = Stream::open(&d.0, "s").unwrap().reader().unwrap();
    assert_eq!(w.max_record_len(), cap - 8);
    assert!(matches!(w.try_loan(cap - 7), Err(StreamTrySendError::TooLarge { .. })));
    assert!(matches!(w.loan(cap), Err(StreamSendError::TooLarge { .. })));
    w.try_send(&[1]).unwrap();
    assert!(
        matches!(w.try_loan(cap - 8), Err(StreamTrySendError::Full { needed, free }) if needed == cap && free == cap - 16)
    );
    assert_eq!(w.loan_timeout(cap - 8, Duration::from_millis(20)).unwrap_err(), StreamSendTimeoutError::Timeout);
    r.try_recv_ref().unwrap().consume();
    let big = vec![7u8; cap - 8];
    w.try_send(&big).unwrap();
    assert!(!w.is_ready());
    let rec = r.try_recv_ref().unwrap();
    assert_eq!(&*rec, &big[..]);
    rec.consume();
    assert!(w.is_ready());
}

#[test]
fn unsent_loan_is_invisible_and_unconsumed_record_is_redelivered() {
    let d = TempDomain::new("grant");
    let mut w = Stream::create_or_open(&d.0, "s", &StreamConfig::default().capacity(page())).unwrap().writer().unwrap();
    let mut r = Stream::open(&d.0, "s").unwrap().reader().unwrap();
    {
        let mut g = w.try_loan(10).unwrap();
        g.fill(9);
        assert!(!r.is_ready());
        // dropped: nothing committed
    }
    assert_eq!(r.try_recv_ref().unwrap_err(), StreamTryRecvError::Empty);
    let mut g = w.try_loan(100).unwrap();
    g[..3].copy_from_slice(b"abc");
    g.truncate(3);
    assert_eq!(g.len(), 3);
    g.truncate(50); // like Vec: a longer length does nothing
    assert_eq!(g.len(), 3);
    g.send();
    assert!(r.is_ready());
    assert_eq!(&*r.try_recv_ref().unwrap(), b"abc"); // dropped, not consumed
    drop(r);
    let mut r = Stream::open(&d.0, "s").unwrap().reader().unwrap();
    let rec = r.try_recv_ref().unwrap();
    assert_eq!(&*rec, b"abc");
    rec.consume();
    drop(r);
    let mut r = Stream::open(&d.0, "s").unwrap().reader().unwrap();
    assert_eq!(r.try_recv_ref().unwrap_err(), StreamTryRecvError::Empty);
}

#[test]
fn second_endpoint_of_a_role_is_busy_and_disconnects_are_reported() {
    let d = TempDomain::new("busy");
    let cfg = StreamConfig::default().capacity(page());
    let mut r = Stream::create_or_open(&d.0, "s", &cfg).unwrap().reader().unwrap();
    assert_eq!(r.try_recv_ref().unwrap_err(), StreamTryRecvError::Disconnected);
    assert!(
        matches!(Stream::open(&d.0, "s").and_then(|s| s.reader()), Err(OpenError::Busy { holder_pid, .. }) if holder_pid == std::process::id())
    );
    let mut w = Stream::create_or_open(&d.0, "s", &cfg).unwrap().writer().unwrap();
    assert!(matches!(Stream::open(&d.0, "s").and_then(|s| s.writer()), Err(OpenError::Busy { .. })));
    assert!(matches!(
        Stream::create_or_open(&d.0, "s", &StreamConfig::default().capacity(2 * page())).and_then(|s| s.writer()),
        Err(OpenError::LayoutMismatch { .. })
    ));
    w.try_send(b"last").unwrap();
    let st = w.status();
    assert_eq!((st.capacity, st.used), (page() as u64, 16));
    assert_eq!(st.writer.map(|e| e.alive), Some(true));
    assert_eq!(st.reader.map(|e| e.pid), Some(std::process::id()));
    drop(w);
    assert_eq!(Stream::status(&d.0, "s").unwrap().writer, None);
    // Committed data outlives the writer; then the reader learns it is gone.
    assert_eq!(&*r.recv_ref().unwrap(), b"last");
    r.recv_ref().unwrap().consume();
    assert_eq!(r.recv_ref().unwrap_err(), StreamRecvError::Disconnected);
    let mut w = Stream::open(&d.0, "s").unwrap().writer().unwrap();
    let fill = vec![0u8; page() - 8];
    w.try_send(&fill).unwrap();
    drop(r);
    assert_eq!(w.try_send(b"x").unwrap_err(), StreamTrySendError::Disconnected);
    assert_eq!(w.send(b"x").unwrap_err(), StreamSendError::Disconnected);
}

#[test]
fn blocking_calls_wake_across_threads() {
    let d = TempDomain::new("threads");
    let mut w = Stream::create_or_open(&d.0, "s", &StreamConfig::default().capacity(page())).unwrap().writer().unwrap();
    let mut r = Stream::open(&d.0, "s").unwrap().reader().unwrap();
    r.set_wait_policy(WaitPolicy::BLOCK);
    w.set_wait_policy(WaitPolicy::BLOCK);
    let n = 20_000u32;
    let t = std::thread::spawn(move || {
        let mut sum = 0u64;
        for i in 0..n {
            let rec = r.recv_ref().unwrap();
            assert_eq!(rec.len(), (i % 300) as usize);
            assert!(rec.iter().all(|&b| b == i as u8));
            sum += rec.len() as u64;
            rec.consume();
        }
        sum
    });
    let mut sum = 0u64;
    for i in 0..n {
        let len = (i % 300) as usize;
        let mut g = w.loan(len).unwrap();
        g.fill(i as u8);
        g.send();
        sum += len as u64;
    }
    assert_eq!(t.join().unwrap(), sum);
}

#[test]
fn owned_receives_and_iterators() {
    let d = TempDomain::new("owned");
    let s = Stream::create_or_open(&d.0, "s", &StreamConfig::default().capacity(page())).unwrap();
    let (mut w, mut r) = (s.writer().unwrap(), s.reader().unwrap());
    assert!(w.wait_for_reader_timeout(Duration::from_millis(1)));
    assert!(r.wait_for_writer_timeout(Duration::from_millis(1)));
    for m in [&b"a"[..], b"bb", b"ccc", b"dddd"] {
        w.try_send(m).unwrap();
    }
    assert_eq!(r.try_recv().unwrap(), b"a");
    assert_eq!(r.recv().unwrap(), b"bb");
    assert_eq!(r.recv_timeout(Duration::from_millis(5)).unwrap(), b"ccc");
    assert_eq!(r.try_iter().collect::<Result<Vec<_>, _>>().unwrap(), vec![b"dddd".to_vec()]);
    assert_eq!(r.try_iter().count(), 0);
    assert_eq!(r.recv_timeout(Duration::from_millis(5)).unwrap_err(), StreamRecvTimeoutError::Timeout);
    w.send(b"last").unwrap();
    drop(w);
    // The committed record first, then Disconnected once, then the iterator ends.
    let got: Vec<_> = r.iter().collect();
    assert_eq!(got, vec![Ok(b"last".to_vec()), Err(StreamRecvError::Disconnected)]);
    assert_eq!(r.try_iter().collect::<Vec<_>>(), vec![Err(StreamRecvError::Disconnected)]);
    assert!(!r.wait_for_writer_timeout(Duration::from_millis(1)));
}

#[test]
fn an_unset_capacity_accepts_the_existing_stream() {
    let d = TempDomain::new("inherit");
    let big = 4 * page();
    Stream::create_or_open(&d.0, "s", &StreamConfig::default().capacity(big)).unwrap();
    let s = Stream::create_or_open(&d.0, "s", &StreamConfig::default()).unwrap();
    assert_eq!((s.capacity(), s.max_record_len()), (big, big - 8));
    assert!(matches!(
        Stream::create_or_open(&d.0, "s", &StreamConfig::default().capacity(page())),
        Err(OpenError::LayoutMismatch { .. })
    ));
    let fresh = Stream::create_or_open(&d.0, "t", &StreamConfig::default().mode(0o640)).unwrap();
    assert_eq!(fresh.capacity(), StreamConfig::DEFAULT_CAPACITY);
    assert_eq!(Stream::status(&d.0, "t").unwrap().capacity, StreamConfig::DEFAULT_CAPACITY as u64);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(fresh.path()).unwrap().permissions().mode() & 0o777, 0o640);
    // One handle, one writer and one reader at a time.
    let _w = fresh.writer().unwrap();
    assert!(matches!(fresh.clone().writer(), Err(OpenError::Busy { .. })));
}

#[test]
fn a_record_over_the_ring_end_says_where_it_crosses_mappings() {
    let d = TempDomain::new("second-mapping");
    let cap = 4 * page();
    let s = Stream::create_or_open(&d.0, "s", &StreamConfig::default().capacity(cap)).unwrap();
    let (mut w, mut r) = (s.writer().unwrap(), s.reader().unwrap());
    // Header 8 bytes: the first record's bytes are 8..8+len, inside the first mapping.
    let first = cap - 1000;
    w.send(&vec![1; first]).unwrap();
    let rec = r.recv_ref().unwrap();
    assert_eq!(rec.second_mapping_at(), None);
    rec.consume();
    // The second starts at ring byte 8 + first (rounded to 8), its bytes 8 further on, and
    // runs 2,000 bytes: over the end of the ring.
    let start = (8 + first).div_ceil(8) * 8 + 8;
    w.send(&vec![2; 2000]).unwrap();
    let rec = r.recv_ref().unwrap();
    assert_eq!(rec.second_mapping_at(), Some(cap - start));
    assert!(rec.iter().all(|&b| b == 2));
    rec.consume();
    // The next one lies wholly in the first mapping again (its start wrapped).
    w.send(&[3; 100]).unwrap();
    let rec = r.recv_ref().unwrap();
    assert_eq!(rec.second_mapping_at(), None);
}

#[test]
fn a_record_starting_at_the_ring_end_or_empty_lies_in_one_mapping() {
    let d = TempDomain::new("second-mapping-edges");
    let cap = 4 * page();
    let s = Stream::create_or_open(&d.0, "s", &StreamConfig::default().capacity(cap)).unwrap();
    let (mut w, mut r) = (s.writer().unwrap(), s.reader().unwrap());
    // 8 + (cap - 16) bytes: the next header takes the ring's last 8 bytes, and the next
    // payload starts exactly where the second mapping does.
    w.send(&vec![1; cap - 16]).unwrap();
    r.recv_ref().unwrap().consume();
    w.send(&vec![2; 3000]).unwrap();
    let rec = r.recv_ref().unwrap();
    assert_eq!(rec.second_mapping_at(), None);
    assert!(rec.iter().all(|&b| b == 2));
    rec.consume();
    w.send(&[]).unwrap();
    let rec = r.recv_ref().unwrap();
    assert_eq!((rec.len(), rec.second_mapping_at()), (0, None));
}
