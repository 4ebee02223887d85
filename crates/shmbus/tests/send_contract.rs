//! The sending twin of the receive contract (`shmbus::Transmit`, `Refused`): every sender
//! that waits for room answers `send_with(msg, wait)` the same way, code generic over the
//! contract works with any of them, and `try_send` / `send` / `send_timeout` /
//! `send_deadline` (and the stream's loans) are that call with each `Wait`.

#![cfg(not(loom))]

mod common;

use std::time::{Duration, Instant};

use common::Scratch;
use shmbus::topic::DeliveryPolicy;
use shmbus::{
    ErrorKind, Failure, Queue, QueueConfig, Refused, SendErrors, Stream, StreamConfig, Topic, TopicConfig, Transmit,
    Wait,
};

/// A short wait that passes: the contract's timed outcome, with no claim about how long.
fn soon() -> Wait {
    Wait::Until(Instant::now() + Duration::from_millis(20))
}

/// What every waiting sender does once full, through the contract alone: no room now (with
/// the try error saying so), a deadline that passes, and after `drain` makes room, a send of
/// each kind of wait.
fn contract<S: Transmit>(mut tx: S, drain: &mut dyn FnMut())
where
    S::Error: std::fmt::Debug + Failure,
    <S::Error as SendErrors>::Try: std::fmt::Debug + Failure,
    S::Sent: std::fmt::Debug,
{
    let mut sent = 0;
    let full = loop {
        match tx.send_with(b"12345678", Wait::Now) {
            Ok(_) => sent += 1,
            Err(Refused::Full(t)) => break t,
            Err(other) => panic!("expected Full, got {other:?}"),
        }
        assert!(sent < 10_000, "never full");
    };
    assert_eq!(full.kind(), ErrorKind::Full, "the try error says there is no room: {full:?}");
    assert!(matches!(tx.send_with(b"12345678", soon()), Err(Refused::TimedOut)), "the deadline passes");
    for wait in [Wait::Now, Wait::Forever, soon()] {
        drain();
        tx.send_with(b"12345678", wait).expect("room was made");
    }
}

#[test]
fn a_queue_producer_keeps_the_contract() {
    let s = Scratch::new("send-queue");
    let q =
        Queue::create_or_open(&s.domain("q"), "q", &QueueConfig::default().capacity(4).max_message_len(64)).unwrap();
    let mut c = q.consumer().unwrap();
    contract(q.producer().unwrap(), &mut || {
        c.try_recv().unwrap();
    });
}

#[test]
fn a_stream_writer_keeps_the_contract_and_says_how_much_room_there_was() {
    let s = Scratch::new("send-stream");
    let stream = Stream::create_or_open(&s.domain("s"), "s", &StreamConfig::default().capacity(4096)).unwrap();
    let mut r = stream.reader().unwrap();
    let mut w = stream.writer().unwrap();
    contract(&mut w, &mut || {
        r.try_recv().unwrap();
    });
    // Fill again: a loan of no room now carries the stream's own figures.
    while w.try_send(b"12345678").is_ok() {}
    match w.loan_with(64, Wait::Now) {
        Err(Refused::Full(shmbus::StreamTrySendError::Full { needed, free })) => assert!(needed > free),
        other => panic!("expected Full with the room, got {other:?}"),
    }
    assert!(matches!(w.loan_deadline(64, Instant::now()), Err(shmbus::StreamSendTimeoutError::Timeout)));
    assert!(matches!(w.send_deadline(b"x", Instant::now()), Err(shmbus::StreamSendTimeoutError::Timeout)));
    r.try_recv().unwrap();
    let mut loan = w.loan_deadline(8, Instant::now() + Duration::from_secs(60)).unwrap();
    loan.copy_from_slice(b"abcdefgh");
    loan.send();
}

#[test]
fn a_block_topic_publisher_keeps_the_contract_and_an_overwrite_one_never_refuses() {
    let s = Scratch::new("send-topic");
    let d = s.domain("t");
    let config = TopicConfig::default()
        .max_message_len(8)
        .history(8)
        .spare_slots(0)
        .policy(DeliveryPolicy::Block)
        .reliable_timeout(Duration::from_secs(600));
    let topic = Topic::create_or_open(&d, "t", &config).unwrap();
    // A reliable subscriber of this (live) process holds the publisher back until it reads.
    let sub = topic.reliable_subscriber().unwrap();
    contract(topic.publisher().unwrap(), &mut || {
        sub.try_recv().unwrap();
    });

    // Loans wait as sends do: full now, a deadline that passes, then a slot once there is room.
    let mut p = topic.publisher().unwrap();
    while p.try_send(b"x").is_ok() {}
    assert!(matches!(p.try_loan(), Err(shmbus::TopicTrySendError::Full { .. })));
    assert!(matches!(p.loan_with(Wait::Now), Err(Refused::Full(_))));
    assert!(matches!(p.loan_with(soon()), Err(Refused::TimedOut)));
    assert!(matches!(p.loan_deadline(Instant::now()), Err(shmbus::TopicSendTimeoutError::Timeout)));
    while sub.try_recv().is_ok() {}
    let mut loan = p.loan_deadline(Instant::now() + Duration::from_secs(60)).unwrap();
    loan[..5].copy_from_slice(b"loan!");
    loan.truncate(5);
    let seq = loan.send().unwrap();
    let m = sub.try_recv().unwrap();
    assert_eq!((m.seq(), m.data()), (seq, &b"loan!"[..]));

    let overwrite = Topic::create_or_open(&d, "o", &TopicConfig::default().max_message_len(8).history(2)).unwrap();
    let mut p = overwrite.publisher().unwrap();
    for _ in 0..20 {
        p.send_with(b"x", Wait::Now).unwrap();
    }
    assert_eq!(p.send_deadline(b"y", Instant::now()).unwrap(), 21, "an overwrite topic never waits");
}

#[test]
fn typed_senders_send_with_a_wait() {
    let s = Scratch::new("send-typed");
    let q = Queue::create_or_open(&s.domain("q"), "q", &QueueConfig::for_type::<u64>().capacity(2)).unwrap();
    let mut p = q.producer_of::<u64>().unwrap();
    let mut c = q.consumer_of::<u64>().unwrap();
    p.send_with(&1, Wait::Now).unwrap();
    p.send_with(&2, Wait::Forever).unwrap();
    assert!(matches!(p.send_with(&3, Wait::Now), Err(Refused::Full(shmbus::QueueTrySendError::Full))));
    assert_eq!(p.send_deadline(&3, Instant::now()), Err(shmbus::QueueSendTimeoutError::Timeout));
    assert_eq!(c.try_recv().unwrap(), 1);
    p.send_deadline(&3, Instant::now() + Duration::from_secs(60)).unwrap();
    assert_eq!((c.try_recv().unwrap(), c.try_recv().unwrap()), (2, 3));
}
