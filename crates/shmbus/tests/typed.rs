//! Typed payloads on every kind that carries messages: round trips of a `#[repr(C)]` struct
//! (send, loan, owned and in-place receives), the type recorded in the header and checked at
//! open, bytes openers of typed channels, and wrong-length messages from byte senders.
#![cfg(not(loom))]

mod common;

use std::time::Duration;

use common::Scratch;
use shmbus::pool::{Pool, PoolConfig};
use shmbus::queue::{Queue, QueueConfig, QueueTryRecvError};
use shmbus::stream::{Stream, StreamConfig, StreamTryRecvError};
use shmbus::topic::{Topic, TopicConfig, TopicTryRecvError};
use shmbus::{admin, Domain, OpenError, PayloadType, Pod};

/// A sensor reading as a C struct: 8 + 4 * 4 + 4 + 4 = 32 bytes, no padding.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C)]
struct Reading {
    t_ns: u64,
    xyzw: [f32; 4],
    id: u32,
    flags: u32,
}
// SAFETY: repr(C), integers and floats only, no padding (32 = 8 + 16 + 4 + 4), no pointers.
unsafe impl Pod for Reading {}

/// Another type of the same size, to tell types apart by name.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C)]
struct Other {
    words: [u64; 4],
}
// SAFETY: an array of u64.
unsafe impl Pod for Other {}

/// More than any kind but the queue lends at: 128-byte alignment.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C, align(128))]
struct Wide {
    bytes: [u8; 128],
}
// SAFETY: repr(C), bytes only, size 128 = its alignment: no padding.
unsafe impl Pod for Wide {}

/// 16-byte alignment: more than a stream's 8.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C, align(16))]
struct Aligned16 {
    v: [u64; 2],
}
// SAFETY: repr(C), two u64, size 16 = its alignment.
unsafe impl Pod for Aligned16 {}

fn reading(i: u32) -> Reading {
    Reading { t_ns: 1000 + i as u64, xyzw: [i as f32, 0.5, -1.0, 2.0], id: i, flags: 0xA5 }
}

fn domain(tag: &str) -> (Domain, Scratch) {
    let s = Scratch::new(tag);
    (s.domain("t"), s)
}

/// A typed worker's receive, past the `Orphaned` a dispatcher takeover may report first.
fn recv_past_orphaned(
    rx: &mut shmbus::TypedWorker<Reading>,
) -> Result<shmbus::pool::TypedJob<Reading>, shmbus::pool::PoolRecvTimeoutError> {
    loop {
        match rx.recv_timeout(Duration::from_secs(5)) {
            Err(shmbus::pool::PoolRecvTimeoutError::Orphaned) => continue,
            r => return r,
        }
    }
}

fn assert_mismatch(e: OpenError, expected: &str, found: &str) {
    let msg = e.to_string();
    assert!(matches!(e, OpenError::TypeMismatch { .. }), "{msg}");
    assert!(msg.contains(expected) && msg.contains(found), "{msg}");
    assert!(msg.contains("open it with the same type or as bytes"), "{msg}");
}

#[test]
fn payload_type_names_the_type() {
    let t = PayloadType::of::<Reading>();
    assert_eq!((t.size, t.align), (32, 8));
    assert!(t.name.ends_with("Reading"), "{}", t.name);
    assert_eq!(t.to_string(), format!("{} (32 bytes, align 8)", t.name));
}

#[test]
fn the_header_records_the_type_and_untyped_channels_record_none() {
    let (d, _s) = domain("typed-header");
    let typed = Topic::create_or_open(&d, "typed", &TopicConfig::for_type::<Reading>()).unwrap();
    assert_eq!(typed.max_message_len(), 32);
    Topic::create_or_open(&d, "bytes", &TopicConfig::default()).unwrap();
    let h = admin::inspect(&d.channel_path("typed").unwrap()).unwrap().header;
    let p = h.payload.expect("a typed topic records its type");
    assert!(p.matches(&PayloadType::of::<Reading>()));
    assert_eq!((p.name(), p.size(), p.align()), (std::any::type_name::<Reading>(), 32, 8));
    assert_eq!(admin::inspect(&d.channel_path("bytes").unwrap()).unwrap().header.payload, None);
}

#[test]
fn topic_round_trip_send_loan_owned_and_ref() {
    let (d, _s) = domain("typed-topic");
    let topic = Topic::create_or_open(&d, "r", &TopicConfig::for_type::<Reading>().history(8)).unwrap();
    let mut tx = topic.publisher_of::<Reading>().unwrap();
    let rx = topic.subscriber_of::<Reading>().unwrap();

    let seq = tx.send(&reading(1)).unwrap();
    assert_eq!(rx.try_recv().unwrap(), reading(1));
    let mut loan = tx.loan().unwrap();
    *loan = reading(2);
    loan.id = 22;
    let seq2 = loan.send().unwrap();
    assert_eq!(seq2, seq + 1);
    {
        let sample = rx.recv_ref_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(sample.seq(), seq2);
        assert!(sample.ts_ns() > 0);
        assert_eq!(*sample, Reading { id: 22, ..reading(2) });
    }
    // Every send form says the sequence number it published.
    let seq3 = tx.send_timeout(&reading(9), Duration::from_secs(1)).unwrap();
    assert_eq!(seq3, seq2 + 1);
    assert_eq!(rx.recv().unwrap(), reading(9));
    tx.send(&reading(3)).unwrap();
    assert_eq!(rx.recv().unwrap(), reading(3));
    assert!(matches!(rx.try_recv(), Err(TopicTryRecvError::Empty)));
    assert!(matches!(rx.try_recv_ref(), Err(TopicTryRecvError::Empty)));

    // The byte endpoints of the typed topic still work, and see the bytes.
    let bytes = topic.subscriber().unwrap();
    tx.send(&reading(4)).unwrap();
    assert_eq!(bytes.try_recv().unwrap().len(), 32);
    assert_eq!(rx.try_recv().unwrap(), reading(4));
}

#[test]
fn topic_type_checks_at_open() {
    let (d, _s) = domain("typed-topic-open");
    Topic::create_or_open(&d, "r", &TopicConfig::for_type::<Reading>()).unwrap();
    let name_r = std::any::type_name::<Reading>();
    let name_o = std::any::type_name::<Other>();
    // Same size and alignment, another name: refused, naming both.
    let e = Topic::create_or_open(&d, "r", &TopicConfig::for_type::<Other>()).unwrap_err();
    assert_mismatch(e, name_o, name_r);
    let topic = Topic::open(&d, "r").unwrap();
    assert_mismatch(topic.subscriber_of::<Other>().unwrap_err(), name_o, name_r);
    assert_mismatch(topic.publisher_of::<u64>().unwrap_err(), "u64", name_r);
    // The same type opens; so do bytes.
    Topic::create_or_open(&d, "r", &TopicConfig::for_type::<Reading>()).unwrap();
    topic.publisher().unwrap().send(b"raw").unwrap();

    // A bytes topic: a typed opener fits if the slots hold the type and are aligned for it.
    let small = Topic::create_or_open(&d, "small", &TopicConfig::default().max_message_len(16)).unwrap();
    let e = small.subscriber_of::<Reading>().unwrap_err();
    assert_mismatch(e, name_r, "bytes (at most 16 per message)");
    let e = Topic::create_or_open(&d, "small", &TopicConfig::for_type::<Reading>()).unwrap_err();
    assert!(matches!(e, OpenError::TypeMismatch { .. }), "{e}");
    assert!(small.subscriber_of::<[u8; 16]>().is_ok());
    let big = Topic::create_or_open(&d, "big", &TopicConfig::default().max_message_len(4096)).unwrap();
    let mut tx = big.publisher_of::<Reading>().unwrap();
    let rx = big.subscriber_of::<Reading>().unwrap();
    tx.send(&reading(7)).unwrap();
    assert_eq!(rx.try_recv().unwrap(), reading(7));
    // Over-aligned: topic slots are at most 64-byte aligned.
    let e = big.subscriber_of::<Wide>().unwrap_err();
    assert_mismatch(e, "Wide", "bytes (placed at 64-byte aligned addresses)");
    let e = Topic::create_or_open(&d, "wide", &TopicConfig::for_type::<Wide>()).unwrap_err();
    assert!(matches!(e, OpenError::InvalidConfig { .. }), "{e}");
    assert!(e.to_string().contains("128-byte alignment"), "{e}");
    assert!(!d.channel_path("wide").unwrap().exists(), "nothing created");
    // A 16-byte type aligned to 16 gets out-of-line (64-byte aligned) slots.
    let t16 = Topic::create_or_open(&d, "a16", &TopicConfig::for_type::<Aligned16>()).unwrap();
    let mut tx = t16.publisher_of::<Aligned16>().unwrap();
    let rx = t16.subscriber_of::<Aligned16>().unwrap();
    let mut loan = tx.loan().unwrap();
    loan.v = [1, 2];
    loan.send().unwrap();
    assert_eq!(rx.try_recv_ref().unwrap().v, [1, 2]);
}

#[test]
fn topic_wrong_length_from_a_byte_publisher_is_an_error() {
    let (d, _s) = domain("typed-topic-len");
    let topic = Topic::create_or_open(&d, "r", &TopicConfig::for_type::<Reading>()).unwrap();
    let rx = topic.subscriber_of::<Reading>().unwrap();
    let mut bytes = topic.publisher().unwrap();
    let mut tx = topic.publisher_of::<Reading>().unwrap();
    bytes.send(b"short").unwrap();
    bytes.send(&[0u8; 31]).unwrap();
    tx.send(&reading(5)).unwrap();
    match rx.try_recv() {
        Err(TopicTryRecvError::Corrupt(c)) => {
            assert_eq!((c.value("len"), c.value("size")), (Some(5), Some(32)), "{c}");
        }
        other => panic!("{other:?}"),
    }
    match rx.try_recv_ref() {
        Err(TopicTryRecvError::Corrupt(c)) => assert_eq!(c.value("len"), Some(31), "{c}"),
        other => panic!("{other:?}"),
    }
    // Skipped: the next receive goes on.
    assert_eq!(*rx.try_recv_ref().unwrap(), reading(5));
}

#[test]
fn queue_round_trip_checks_and_wrong_length() {
    let (d, _s) = domain("typed-queue");
    let q = Queue::create_or_open(&d, "q", &QueueConfig::for_type::<Reading>().capacity(4)).unwrap();
    assert_eq!(q.max_message_len(), 32);
    let mut tx = q.producer_of::<Reading>().unwrap();
    let mut rx = q.consumer_of::<Reading>().unwrap();
    tx.try_send(&reading(1)).unwrap();
    tx.send(&reading(2)).unwrap();
    tx.send_timeout(&reading(3), Duration::from_secs(1)).unwrap();
    assert_eq!(rx.try_recv().unwrap(), reading(1));
    assert_eq!(rx.recv().unwrap(), reading(2));
    assert_eq!(rx.recv_timeout(Duration::from_secs(1)).unwrap(), reading(3));
    assert!(matches!(rx.try_recv(), Err(QueueTryRecvError::Empty)));

    let name_r = std::any::type_name::<Reading>();
    assert_mismatch(q.consumer_of::<Other>().unwrap_err(), std::any::type_name::<Other>(), name_r);
    let e = Queue::create_or_open(&d, "q", &QueueConfig::for_type::<Other>()).unwrap_err();
    assert!(matches!(e, OpenError::TypeMismatch { .. }), "{e}");
    // A byte producer on the typed queue: a wrong length is an error, then it goes on.
    let mut bytes = Queue::open(&d, "q").unwrap().producer().unwrap();
    bytes.send(b"nope").unwrap();
    tx.send(&reading(4)).unwrap();
    match rx.try_recv() {
        Err(QueueTryRecvError::Corrupt(c)) => assert_eq!((c.value("len"), c.value("size")), (Some(4), Some(32))),
        other => panic!("{other:?}"),
    }
    assert_eq!(rx.try_recv().unwrap(), reading(4));
    // And a byte consumer reads a typed message as its bytes.
    let mut raw = q.consumer().unwrap();
    tx.send(&reading(6)).unwrap();
    assert_eq!(raw.try_recv().unwrap().len(), 32);

    // An untyped queue: too small fails clearly; over-aligned types are fine (receives copy).
    let small = Queue::create_or_open(&d, "small", &QueueConfig::default().max_message_len(8)).unwrap();
    assert_mismatch(small.producer_of::<Reading>().unwrap_err(), name_r, "bytes (at most 8 per message)");
    let wide = Queue::create_or_open(&d, "wide", &QueueConfig::for_type::<Wide>()).unwrap();
    let mut tx = wide.producer_of::<Wide>().unwrap();
    let mut rx = wide.consumer_of::<Wide>().unwrap();
    tx.send(&Wide { bytes: [9; 128] }).unwrap();
    assert_eq!(rx.recv().unwrap(), Wide { bytes: [9; 128] });
}

#[test]
fn stream_round_trip_checks_and_wrong_length() {
    let (d, _s) = domain("typed-stream");
    let s = Stream::create_or_open(&d, "s", &StreamConfig::for_type::<Reading>()).unwrap();
    let mut tx = s.writer_of::<Reading>().unwrap();
    let mut rx = s.reader_of::<Reading>().unwrap();
    tx.try_send(&reading(1)).unwrap();
    tx.send(&reading(2)).unwrap();
    let mut loan = tx.loan_timeout(Duration::from_secs(1)).unwrap();
    *loan = reading(3);
    loan.send();
    let mut loan = tx.try_loan().unwrap();
    *loan = reading(4);
    loan.send();
    assert_eq!(rx.try_recv().unwrap(), reading(1));
    assert_eq!(rx.recv_timeout(Duration::from_secs(1)).unwrap(), reading(2));
    let r = rx.recv_ref().unwrap();
    assert_eq!(*r, reading(3));
    r.consume();
    let r = rx.try_recv_ref().unwrap();
    assert_eq!(r.id, 4);
    r.consume();
    assert!(matches!(rx.try_recv(), Err(StreamTryRecvError::Empty)));

    // A byte writer of the typed stream: wrong lengths are errors, consumed, then it goes on.
    drop(tx);
    let mut bytes = s.writer().unwrap();
    bytes.send(b"abc").unwrap();
    bytes.send(&[1u8; 40]).unwrap();
    bytes.send(&[0u8; 32]).unwrap();
    match rx.try_recv() {
        Err(StreamTryRecvError::Corrupt(c)) => assert_eq!((c.value("len"), c.value("size")), (Some(3), Some(32))),
        other => panic!("{other:?}"),
    }
    match rx.try_recv_ref() {
        Err(StreamTryRecvError::Corrupt(c)) => assert_eq!(c.value("len"), Some(40)),
        other => panic!("{other:?}"),
    }
    assert_eq!(rx.try_recv().unwrap(), Reading { t_ns: 0, xyzw: [0.0; 4], id: 0, flags: 0 });
    // A byte reader reads the typed records as bytes.
    drop(rx);
    let mut raw = s.reader().unwrap();
    bytes.send(&[7u8; 32]).unwrap();
    assert_eq!(raw.try_recv().unwrap(), vec![7u8; 32]);

    let name_r = std::any::type_name::<Reading>();
    let e = Stream::create_or_open(&d, "s", &StreamConfig::for_type::<Other>()).unwrap_err();
    assert_mismatch(e, std::any::type_name::<Other>(), name_r);
    // Records are 8-byte aligned: a 16-aligned type is refused, on bytes and at creation.
    let untyped = Stream::create_or_open(&d, "u", &StreamConfig::default().capacity(4096)).unwrap();
    assert_mismatch(untyped.reader_of::<Aligned16>().unwrap_err(), "Aligned16", "8-byte aligned");
    let e = Stream::create_or_open(&d, "a16", &StreamConfig::for_type::<Aligned16>()).unwrap_err();
    assert!(matches!(e, OpenError::InvalidConfig { .. }), "{e}");
    // Too large for the untyped stream's records (4096 - 8 bytes).
    assert_mismatch(untyped.writer_of::<[u64; 1024]>().unwrap_err(), "[u64; 1024]", "bytes (at most 4088 per message)");
    assert!(untyped.writer_of::<Reading>().is_ok());
}

#[test]
fn pool_round_trip_checks_and_wrong_length() {
    let (d, _s) = domain("typed-pool");
    let pool = Pool::create_or_open(&d, "p", &PoolConfig::for_type::<Reading>().max_workers(1)).unwrap();
    assert_eq!(pool.max_job_len(), 32);
    let mut tx = pool.dispatcher_of::<Reading>().unwrap();
    let mut rx = pool.worker_of::<Reading>().unwrap();
    let _ = rx.try_recv(); // idle now
    let sent = tx.try_send(&reading(1)).unwrap();
    let job = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!((job.id(), *job), (sent.job_id, reading(1)));
    rx.done();
    tx.try_send_with_id(77, &reading(2)).unwrap();
    let job = rx.recv_ref().unwrap();
    assert_eq!((job.id(), job.id), (77, 2));
    assert_eq!(job.xyzw, reading(2).xyzw);
    rx.done();

    // A byte dispatcher sends a job of another length: an error for the typed worker.
    drop(tx);
    let mut bytes = pool.dispatcher().unwrap();
    bytes.try_send(b"12345").unwrap();
    match recv_past_orphaned(&mut rx) {
        Err(shmbus::pool::PoolRecvTimeoutError::Corrupt(c)) => {
            assert_eq!((c.value("len"), c.value("size")), (Some(5), Some(32)), "{c}")
        }
        other => panic!("{other:?}"),
    }
    rx.done();
    bytes.try_send(&[3u8; 32]).unwrap();
    assert_eq!(rx.recv_ref_timeout(Duration::from_secs(5)).unwrap().id, 0x0303_0303);

    let name_r = std::any::type_name::<Reading>();
    assert_mismatch(pool.worker_of::<Other>().unwrap_err(), std::any::type_name::<Other>(), name_r);
    // Mailboxes are 64-byte aligned: 128 is refused on bytes and at creation.
    let untyped = Pool::create_or_open(&d, "u", &PoolConfig::default().max_job_len(4096)).unwrap();
    assert_mismatch(untyped.worker_of::<Wide>().unwrap_err(), "Wide", "64-byte aligned");
    let e = Pool::create_or_open(&d, "w", &PoolConfig::for_type::<Wide>()).unwrap_err();
    assert!(matches!(e, OpenError::InvalidConfig { .. }), "{e}");
    let small = Pool::create_or_open(&d, "small", &PoolConfig::default().max_job_len(8)).unwrap();
    assert_mismatch(small.dispatcher_of::<Reading>().unwrap_err(), name_r, "bytes (at most 8 per message)");
}

#[test]
fn a_zero_sized_type_is_refused() {
    let (d, _s) = domain("typed-zst");
    let e = Queue::create_or_open(&d, "z", &QueueConfig::for_type::<[u8; 0]>()).unwrap_err();
    assert!(matches!(e, OpenError::InvalidConfig { .. }), "{e}");
}

/// The journal's typed entries: the type in `journal.meta`, checked at open, typed
/// appenders and tailers, and a metadata file whose type record was scribbled on.
mod journal {
    use std::os::unix::fs::FileExt;
    use std::path::Path;
    use std::time::Duration;

    use super::common::fresh_dir;
    use super::{assert_mismatch, reading, Aligned16, Other, Reading};
    use shmbus::journal::format::{META_FILE, META_PAYLOAD_OFFSET, META_PAYLOAD_SIZE};
    use shmbus::journal::{Journal, JournalConfig, JournalTryRecvError, RollCycle};
    use shmbus::{OpenError, PayloadType};

    /// A small journal config (the default cycle is 1 GiB of address space).
    fn small(c: JournalConfig) -> JournalConfig {
        c.cycle_bytes(64 << 10).chunk_bytes(16 << 10).roll(RollCycle::Never)
    }

    #[test]
    fn round_trip_send_loan_tailers_and_named_readers() {
        let (dir, _s) = fresh_dir("jtyped-rt");
        let j = Journal::create_or_open(&dir, &small(JournalConfig::for_type::<Reading>())).unwrap();
        let p = j.payload_type().expect("a typed journal records its type");
        assert!(p.matches(&PayloadType::of::<Reading>()), "{p}");
        let mut tx = j.appender_of::<Reading>().unwrap();
        assert_eq!(tx.as_bytes().max_entry_len(), 32, "for_type sets the max entry length");
        let mut rx = j.tailer_of::<Reading>().unwrap();

        assert_eq!(tx.send(&reading(1)).unwrap(), 0);
        let mut loan = tx.loan().unwrap();
        *loan = reading(2);
        loan.id = 22;
        assert_eq!(loan.send().unwrap(), 1);
        tx.send(&reading(3)).unwrap();
        assert_eq!(rx.try_recv().unwrap(), reading(1));
        assert_eq!(rx.recv().unwrap(), Reading { id: 22, ..reading(2) });
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), reading(3));
        assert!(matches!(rx.try_recv(), Err(JournalTryRecvError::Empty)));

        // A typed tailer from an index, one from the end, and a named reader that resumes.
        assert_eq!(j.tailer_at_of::<Reading>(2).unwrap().try_recv().unwrap(), reading(3));
        let mut end = j.tailer_at_end_of::<Reading>().unwrap();
        {
            let mut named = j.reader_of::<Reading>("r1").unwrap();
            assert_eq!(named.try_recv().unwrap(), reading(1));
            named.ack();
        }
        tx.send(&reading(4)).unwrap();
        assert_eq!(end.try_recv().unwrap(), reading(4));
        drop((tx, rx, end));
        drop(j);

        // Reopened: the type is still recorded, the named reader resumes after its ack.
        let j = Journal::open(&dir).unwrap();
        assert!(j.payload_type().unwrap().matches(&PayloadType::of::<Reading>()));
        let mut named = j.reader_of::<Reading>("r1").unwrap();
        assert_eq!(named.try_recv().unwrap(), Reading { id: 22, ..reading(2) });
        // A byte tailer reads the typed entries as their bytes.
        let mut bytes = j.tailer().unwrap();
        assert_eq!(bytes.try_recv().unwrap().len(), 32);
    }

    #[test]
    fn the_type_is_checked_at_open() {
        let (dir, _s) = fresh_dir("jtyped-open");
        let j = Journal::create_or_open(&dir, &small(JournalConfig::for_type::<Reading>())).unwrap();
        let name_r = std::any::type_name::<Reading>();
        let name_o = std::any::type_name::<Other>();
        // Same size and alignment, another name: refused, naming both, by every typed opener.
        let e = Journal::create_or_open(&dir, &small(JournalConfig::for_type::<Other>())).unwrap_err();
        assert_mismatch(e, name_o, name_r);
        assert_mismatch(j.appender_of::<Other>().unwrap_err(), name_o, name_r);
        assert_mismatch(j.tailer_of::<Other>().unwrap_err(), name_o, name_r);
        assert_mismatch(j.reader_of::<u64>("r").unwrap_err(), "u64", name_r);
        // The same type opens, and so does a byte opener (whose config is not checked).
        Journal::create_or_open(&dir, &small(JournalConfig::for_type::<Reading>())).unwrap();
        let bytes = Journal::create_or_open(&dir, &small(JournalConfig::default().max_entry_len(1024))).unwrap();
        assert_eq!(bytes.appender().unwrap().send(&[7u8; 32]).unwrap(), 0);
    }

    #[test]
    fn untyped_journals_take_a_typed_opener_whose_type_fits() {
        let (dir, _s) = fresh_dir("jtyped-untyped");
        let j = Journal::create_or_open(&dir, &small(JournalConfig::default().max_entry_len(16))).unwrap();
        assert_eq!(j.payload_type(), None);
        let name_r = std::any::type_name::<Reading>();
        assert_mismatch(j.appender_of::<Reading>().unwrap_err(), name_r, "bytes (at most 16 per message)");
        let e = Journal::create_or_open(&dir, &small(JournalConfig::for_type::<Reading>())).unwrap_err();
        assert_mismatch(e, name_r, "bytes (at most 16 per message)");
        // A 16-byte type fits, through a typed config too.
        let mut tx = j.appender_of::<[u64; 2]>().unwrap();
        Journal::create_or_open(&dir, &small(JournalConfig::for_type::<[u64; 2]>())).unwrap();
        let mut rx = j.tailer_of::<[u64; 2]>().unwrap();
        tx.send(&[5, 6]).unwrap();
        assert_eq!(rx.try_recv().unwrap(), [5, 6]);
        // Entries are 8-byte aligned: a 16-aligned type is refused on bytes and at creation,
        // where nothing is created.
        assert_mismatch(j.tailer_of::<Aligned16>().unwrap_err(), "Aligned16", "8-byte aligned");
        let (dir2, _s2) = fresh_dir("jtyped-a16");
        let e = Journal::create_or_open(&dir2, &small(JournalConfig::for_type::<Aligned16>())).unwrap_err();
        assert!(matches!(e, OpenError::InvalidConfig { .. }), "{e}");
        assert!(e.to_string().contains("16-byte alignment"), "{e}");
        assert!(!dir2.exists(), "nothing created");
        let e = Journal::create_or_open(&dir2, &JournalConfig::for_type::<[u8; 0]>()).unwrap_err();
        assert!(matches!(e, OpenError::InvalidConfig { .. }), "{e}");
    }

    #[test]
    fn a_wrong_length_entry_is_an_error_then_the_tailer_goes_on() {
        let (dir, _s) = fresh_dir("jtyped-len");
        let j = Journal::create_or_open(&dir, &small(JournalConfig::for_type::<Reading>())).unwrap();
        let mut bytes = j.appender().unwrap();
        let mut tx = j.appender_of::<Reading>().unwrap();
        let mut rx = j.tailer_of::<Reading>().unwrap();
        bytes.send(b"short").unwrap();
        tx.send(&reading(9)).unwrap();
        match rx.try_recv() {
            Err(JournalTryRecvError::Corrupt(c)) => {
                assert_eq!((c.value("index"), c.value("len"), c.value("size")), (Some(0), Some(5), Some(32)), "{c}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(rx.try_recv().unwrap(), reading(9));
    }

    /// Writes `bytes` at `off` of the journal's metadata file.
    fn scribble(dir: &Path, off: usize, bytes: &[u8]) {
        let f = std::fs::OpenOptions::new().write(true).open(dir.join(META_FILE)).unwrap();
        f.write_all_at(bytes, off as u64).unwrap();
    }

    /// Reads the metadata's payload type record.
    fn record(dir: &Path) -> Vec<u8> {
        let f = std::fs::File::open(dir.join(META_FILE)).unwrap();
        let mut r = vec![0u8; META_PAYLOAD_SIZE];
        f.read_exact_at(&mut r, META_PAYLOAD_OFFSET as u64).unwrap();
        r
    }

    /// The record with its checksum made right again, as a hostile writer would.
    fn with_crc(mut r: Vec<u8>) -> Vec<u8> {
        let n = r.len() - 4;
        let crc = shmbus::journal::format::crc32c_append(0, &r[..n]);
        r[n..].copy_from_slice(&crc.to_le_bytes());
        r
    }

    #[test]
    fn a_scribbled_type_record_is_a_typed_error() {
        let (dir, _s) = fresh_dir("jtyped-hostile");
        drop(Journal::create_or_open(&dir, &small(JournalConfig::for_type::<Reading>())).unwrap());
        let good = record(&dir);
        assert_eq!(&good[..8], &32u64.to_le_bytes());
        let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
        // Without fixing the checksum: any changed byte.
        for at in [0, 8, 12, 40, META_PAYLOAD_SIZE - 1] {
            let mut r = good.clone();
            r[at] ^= 0x5a;
            cases.push(("a flipped byte", r));
        }
        // With the checksum fixed: fields that cannot be.
        let mut r = good.clone();
        r[8..12].copy_from_slice(&3u32.to_le_bytes());
        cases.push(("alignment 3", with_crc(r)));
        let mut r = good.clone();
        r[0..8].copy_from_slice(&u64::MAX.to_le_bytes());
        cases.push(("size larger than the max entry", with_crc(r)));
        let mut r = good.clone();
        r[12] = 0xff;
        cases.push(("a name that is not UTF-8", with_crc(r)));
        let mut r = good.clone();
        r[12..76].fill(0);
        cases.push(("an empty name", with_crc(r)));
        let mut r = good.clone();
        r[12..76].fill(b'a');
        r[75] = 0;
        r[60] = 0;
        cases.push(("bytes after the name's end", with_crc(r)));
        let mut r = vec![0u8; META_PAYLOAD_SIZE];
        r[8] = 8;
        cases.push(("untyped but an alignment set", r));
        for (what, r) in cases {
            scribble(&dir, META_PAYLOAD_OFFSET, &r);
            match Journal::open(&dir) {
                Err(OpenError::Corrupt { what: w, .. }) => assert!(w.contains("payload type"), "{what}: {w}"),
                other => panic!("{what}: {:?}", other.map(|j| j.payload_type())),
            }
        }
        // Put back, it opens again; zeroed, it is an untyped journal (as before typed entries).
        scribble(&dir, META_PAYLOAD_OFFSET, &good);
        assert!(Journal::open(&dir).unwrap().payload_type().is_some());
        scribble(&dir, META_PAYLOAD_OFFSET, &[0u8; META_PAYLOAD_SIZE]);
        let j = Journal::open(&dir).unwrap();
        assert_eq!(j.payload_type(), None);
        assert!(j.tailer_of::<Reading>().is_ok(), "an untyped journal of 32-byte entries holds a Reading");
    }
}
