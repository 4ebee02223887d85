//! The one receive contract (`shmbus::Receive`, `ReceiveInto`, `ReceiveRef`): every receiver
//! of every kind, and the typed receivers, answer the same `*_with(wait)` calls the same way,
//! code generic over the contract works with any of them, and the inherent `try_` /
//! blocking / `_timeout` / `_deadline` forms are those calls with each `Wait`.

#![cfg(not(loom))]

mod common;

use std::time::{Duration, Instant};

use common::Scratch;
use shmbus::journal::{JournalConfig, RollCycle};
use shmbus::{
    ErrorKind, Failure, Journal, Pool, PoolConfig, Queue, QueueConfig, Receive, ReceiveInto, ReceiveRef,
    RecvIntoSliceError, Stream, StreamConfig, Wait, Waited,
};

/// A short wait that passes: the contract's timed outcome, with no claim about how long.
fn soon() -> Wait {
    Wait::Until(Instant::now() + Duration::from_millis(20))
}

/// What every receiver does on an empty channel, then with `sent` messages waiting, through
/// the contract alone: nothing now, a deadline that passes, then each message in order by
/// each kind of wait, and nothing again.
fn contract<R: Receive>(mut rx: R, send: &mut dyn FnMut(&[u8]), bytes: impl Fn(&R::Item) -> Vec<u8>)
where
    R::Error: std::fmt::Debug,
{
    assert!(matches!(rx.recv_with(Wait::Now), Err(Waited::Empty)), "nothing now");
    assert!(matches!(rx.recv_with(soon()), Err(Waited::TimedOut)), "the deadline passes");
    for m in [&b"one"[..], b"two", b"three"] {
        send(m);
    }
    let got: Vec<Vec<u8>> = [Wait::Now, Wait::Forever, soon()]
        .into_iter()
        .map(|w| bytes(&rx.recv_with(w).expect("a message is waiting")))
        .collect();
    assert_eq!(got, [b"one".to_vec(), b"two".to_vec(), b"three".to_vec()]);
    assert!(matches!(rx.recv_with(Wait::Now), Err(Waited::Empty)), "nothing again");
}

/// Receiving into buffers through the contract: a message into a `Vec`, then one too long
/// for a slice (`TooSmall`) that the next receive returns whole.
fn into_contract<R: ReceiveInto>(mut rx: R, send: &mut dyn FnMut(&[u8]))
where
    R::Error: std::fmt::Debug,
    R::Info: std::fmt::Debug,
{
    send(b"hello");
    let mut buf = Vec::new();
    rx.recv_into_with(&mut buf, Wait::Forever).expect("a message");
    assert_eq!(buf, b"hello");
    let mut small = [0u8; 4];
    assert!(matches!(rx.recv_into_slice_with(&mut small, Wait::Now), Err(RecvIntoSliceError::Recv(Waited::Empty))));
    send(b"too long");
    match rx.recv_into_slice_with(&mut small, Wait::Now) {
        Err(RecvIntoSliceError::TooSmall { needed, capacity }) => assert_eq!((needed, capacity), (8, 4)),
        other => panic!("expected TooSmall, got {other:?}"),
    }
    let mut big = [0u8; 16];
    rx.recv_into_slice_with(&mut big, soon()).expect("the same message again");
    assert_eq!(&big[..8], b"too long");
    let mut buf = Vec::new();
    assert!(matches!(rx.recv_into_with(&mut buf, soon()), Err(Waited::TimedOut)));
}

/// Receiving in place through the contract.
fn ref_contract<R: ReceiveRef>(mut rx: R, send: &mut dyn FnMut(&[u8]))
where
    R::Error: std::fmt::Debug,
{
    assert!(matches!(rx.recv_ref_with(Wait::Now), Err(Waited::Empty)));
    send(b"in place");
    let r = rx.recv_ref_with(Wait::Forever).expect("a message");
    assert_eq!(&*r, b"in place");
}

#[test]
fn a_queue_consumer_keeps_the_contract() {
    let s = Scratch::new("contract-queue");
    let q =
        Queue::create_or_open(&s.domain("q"), "q", &QueueConfig::default().capacity(8).max_message_len(64)).unwrap();
    let mut p = q.producer().unwrap();
    let mut send = |m: &[u8]| p.send(m).unwrap();
    contract(q.consumer().unwrap(), &mut send, |v| v.clone());
    into_contract(&mut q.consumer().unwrap(), &mut send);
}

#[test]
fn a_topic_subscriber_keeps_the_contract_through_a_shared_reference() {
    let s = Scratch::new("contract-topic");
    let topic = common::topic(&s, "t", 256, 8);
    let mut p = topic.publisher().unwrap();
    let mut send = |m: &[u8]| {
        p.send(m).unwrap();
    };
    let sub = topic.subscriber().unwrap();
    contract(&sub, &mut send, |m| m.data().to_vec());
    into_contract(&sub, &mut send);
    ref_contract(&sub, &mut send);
    // A sample lives as long as the subscriber, not as the call's borrow: two held at once.
    send(b"a");
    send(b"b");
    let (mut r1, mut r2) = (&sub, &sub);
    let (a, b) = (
        ReceiveRef::recv_ref_with(&mut r1, Wait::Now).unwrap(),
        ReceiveRef::recv_ref_with(&mut r2, Wait::Now).unwrap(),
    );
    assert_eq!((&*a, &*b), (&b"a"[..], &b"b"[..]));
}

#[test]
fn a_stream_reader_keeps_the_contract_and_ends_when_its_writer_is_gone() {
    let s = Scratch::new("contract-stream");
    let stream = Stream::create_or_open(&s.domain("s"), "s", &StreamConfig::default().capacity(1 << 16)).unwrap();
    let mut w = stream.writer().unwrap();
    let mut r = stream.reader().unwrap();
    {
        let mut send = |m: &[u8]| w.send(m).unwrap();
        contract(&mut r, &mut send, |v| v.clone());
        into_contract(&mut r, &mut send);
        ref_contract(&mut r, &mut send);
    }
    r.recv_ref_with(Wait::Now).unwrap().consume();
    drop(w);
    match r.recv_with(Wait::Forever) {
        Err(Waited::Failed(e)) => {
            assert_eq!(e.kind(), ErrorKind::Disconnected);
            assert!(<shmbus::StreamReader as Receive>::ends(&e), "nothing follows a writer gone");
        }
        other => panic!("expected Disconnected, got {other:?}"),
    }
}

#[test]
fn a_pool_worker_keeps_the_contract() {
    let s = Scratch::new("contract-pool");
    let pool = Pool::create_or_open(&s.domain("p"), "p", &PoolConfig::default().max_job_len(64)).unwrap();
    let mut d = pool.dispatcher().unwrap();
    let mut w = pool.worker().unwrap();
    let mut send = |m: &[u8]| {
        d.try_send(m).unwrap();
    };
    // A worker holds one job at a time, and the dispatcher gives one only to an idle worker
    // (one whose last receive found nothing): each job follows an empty receive.
    assert!(matches!(w.recv_with(soon()), Err(Waited::TimedOut)), "the deadline passes");
    for (m, wait) in [(&b"one"[..], Wait::Now), (b"two", Wait::Forever), (b"three", soon())] {
        assert!(matches!(w.recv_with(Wait::Now), Err(Waited::Empty)), "idle, nothing now");
        send(m);
        assert_eq!(w.recv_with(wait).unwrap().data(), m);
    }
    assert!(matches!(w.recv_with(Wait::Now), Err(Waited::Empty)));
    into_contract(&mut w, &mut send);
    ref_contract(&mut w, &mut send);
}

#[test]
fn a_journal_tailer_keeps_the_contract() {
    let s = Scratch::new("contract-journal");
    let config = JournalConfig::default().cycle_bytes(1 << 20).max_entry_len(1 << 10).roll(RollCycle::Never);
    let journal = Journal::create_or_open(s.path().join("j"), &config).unwrap();
    let mut a = journal.appender().unwrap();
    let mut t = journal.tailer().unwrap();
    let mut send = |m: &[u8]| {
        a.send(m).unwrap();
    };
    contract(&mut t, &mut send, |e| e.data().to_vec());
    into_contract(&mut t, &mut send);
    ref_contract(&mut t, &mut send);
}

#[test]
fn typed_receivers_keep_the_contract_and_report_a_payload_that_is_not_one_t() {
    let s = Scratch::new("contract-typed");
    let q = Queue::create_or_open(&s.domain("q"), "q", &QueueConfig::for_type::<u64>().capacity(8)).unwrap();
    let mut p = q.producer_of::<u64>().unwrap();
    let mut c = q.consumer_of::<u64>().unwrap();
    assert!(matches!(c.recv_with(Wait::Now), Err(Waited::Empty)));
    p.send(&7).unwrap();
    assert_eq!(Receive::recv_with(&mut c, Wait::Forever).unwrap(), 7);
    // Bytes that are not one u64, from an untyped producer of the same queue.
    q.producer().unwrap().send(b"abc").unwrap();
    match c.recv_with(Wait::Now) {
        Err(Waited::Failed(e)) => assert_eq!(e.kind(), ErrorKind::Corrupt),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(matches!(c.recv_timeout(Duration::from_millis(10)), Err(shmbus::QueueRecvTimeoutError::Timeout)));
}

#[test]
fn the_inherent_forms_are_the_contract_with_each_wait() {
    let s = Scratch::new("contract-forms");
    let q =
        Queue::create_or_open(&s.domain("q"), "q", &QueueConfig::default().capacity(8).max_message_len(64)).unwrap();
    let mut p = q.producer().unwrap();
    let mut c = q.consumer().unwrap();
    assert_eq!(c.try_recv(), Err(shmbus::QueueTryRecvError::Empty));
    assert_eq!(c.recv_timeout(Duration::ZERO), Err(shmbus::QueueRecvTimeoutError::Timeout));
    let past = Instant::now();
    assert_eq!(c.recv_deadline(past), Err(shmbus::QueueRecvTimeoutError::Timeout), "a deadline already passed");
    let mut slice = [0u8; 8];
    assert_eq!(
        c.recv_into_slice_deadline(&mut slice, Instant::now() + Duration::from_millis(5)),
        Err(RecvIntoSliceError::Recv(shmbus::QueueRecvTimeoutError::Timeout))
    );
    p.send(b"x").unwrap();
    assert_eq!(c.recv_deadline(Instant::now() + Duration::from_secs(60)).unwrap(), b"x");
    // A wait of a duration past the clock's range waits for ever, like `recv`: a message
    // sent later still arrives.
    let mut tx = q.producer().unwrap();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        tx.send(b"late").unwrap();
    });
    assert_eq!(c.recv_with(Wait::For(Duration::MAX)).unwrap(), b"late");
    sender.join().unwrap();
    // The errors of the three forms come from one `Waited`, with the kinds of the family.
    let empty: Waited<shmbus::QueueRecvError> = Waited::Empty;
    assert_eq!(shmbus::QueueTryRecvError::from(empty.clone()), shmbus::QueueTryRecvError::Empty);
    assert_eq!(empty.kind(), ErrorKind::Empty);
    assert_eq!(shmbus::QueueRecvTimeoutError::from(Waited::TimedOut), shmbus::QueueRecvTimeoutError::Timeout);
    assert_eq!(Waited::<shmbus::QueueRecvError>::TimedOut.kind(), ErrorKind::Timeout);
}

#[test]
fn the_iterators_are_made_from_the_contract() {
    let s = Scratch::new("contract-iter");
    let q =
        Queue::create_or_open(&s.domain("q"), "q", &QueueConfig::default().capacity(8).max_message_len(64)).unwrap();
    let mut p = q.producer().unwrap();
    let mut c = q.consumer().unwrap();
    for m in [&b"a"[..], b"b"] {
        p.send(m).unwrap();
    }
    let got: Vec<Vec<u8>> = c.try_iter().map(Result::unwrap).collect();
    assert_eq!(got, [b"a".to_vec(), b"b".to_vec()]);
    p.send(b"c").unwrap();
    assert_eq!(c.iter().next().unwrap().unwrap(), b"c");
}
