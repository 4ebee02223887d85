//! Owned lent items (`shmbus::lend`): each kind's loan, sample, record, job and entry made
//! from a lent endpoint, kept past the call (moved to another thread), refusing conflicting
//! calls while out, and giving the endpoint back when dropped, sent or consumed.

#![cfg(not(loom))]

mod common;

use std::time::Duration;

use common::Scratch;
use shmbus::journal::{JournalConfig, RollCycle};
use shmbus::lend::{LendError, LendOr, Lender};
use shmbus::{Appender, Tailer, Worker};
use shmbus::{Journal, Pool, PoolConfig, Publisher, Stream, StreamConfig, StreamReader, StreamWriter, Subscriber};

#[test]
fn an_owned_topic_loan_is_sent_from_another_thread_and_refuses_calls_meanwhile() {
    let s = Scratch::new("owned-topic-loan");
    let topic = common::topic(&s, "t", 4096, 4);
    let sub = topic.subscriber().unwrap();
    let lender = Lender::new(topic.publisher().unwrap());
    let mut loan = Publisher::loan_owned(&lender).unwrap();
    assert_eq!(lender.with(|p| p.send(b"x").is_ok()), Err(LendError::Busy));
    assert_eq!(lender.lend_mut().err(), Some(LendError::Busy));
    assert_eq!(Publisher::loan_owned(&lender).err(), Some(LendOr::Refused(LendError::Busy)));
    loan[..3].copy_from_slice(b"abc");
    loan.truncate(3);
    let seq = std::thread::spawn(move || loan.send().unwrap()).join().unwrap();
    assert_eq!(sub.recv().unwrap().data(), b"abc");
    assert_eq!(lender.with(|p| p.send(b"d").unwrap()), Ok(seq + 1), "given back once sent");
    // A loan dropped unsent publishes nothing and gives the publisher back.
    drop(Publisher::loan_owned(&lender).unwrap());
    assert_eq!(sub.recv().unwrap().data(), b"d");
    assert!(sub.try_recv().is_err());
    assert!(lender.with(|_| ()).is_ok());
}

#[test]
fn owned_samples_stay_pinned_until_dropped_and_the_subscriber_keeps_receiving() {
    let s = Scratch::new("owned-topic-sample");
    // History 1 and one spare slot: a pinned slot is the only thing that keeps a message.
    let topic = shmbus::Topic::create_or_open(
        &s.domain("t"),
        "t",
        &shmbus::TopicConfig::default().max_message_len(4096).history(1).spare_slots(1),
    )
    .unwrap();
    let mut publisher = topic.publisher().unwrap();
    let lender = Lender::new(topic.subscriber().unwrap());
    publisher.send(&[7u8; 1000]).unwrap();
    let sample = Subscriber::sample_owned(&lender, |s| s.try_recv_ref()).unwrap();
    // Shared lending: receiving goes on, mutable calls wait for the samples.
    publisher.send(&[8u8; 1000]).unwrap();
    assert_eq!(lender.with_ref(|s| s.try_recv().unwrap().data()[0]), Ok(8));
    assert_eq!(lender.with(|_| ()), Err(LendError::Busy));
    for i in 0..10u8 {
        publisher.send(&[i; 1000]).unwrap();
    }
    let sample = std::thread::spawn(move || {
        assert!(sample.iter().all(|&b| b == 7), "the pinned slot was overwritten");
        sample
    })
    .join()
    .unwrap();
    assert_eq!(sample.seq(), 1);
    let pinned = || shmbus::Topic::status(&s.domain("t"), "t").unwrap().pinned_slots;
    assert_eq!(pinned(), 1);
    drop(sample);
    assert_eq!(pinned(), 0);
    assert!(lender.with(|_| ()).is_ok());
}

#[test]
fn a_closed_lender_drops_its_subscriber_when_the_last_sample_goes() {
    let s = Scratch::new("owned-topic-close");
    let topic = common::topic(&s, "t", 4096, 4);
    let mut publisher = topic.publisher().unwrap();
    let lender = Lender::new(topic.subscriber().unwrap());
    publisher.send(&[1u8; 100]).unwrap();
    let sample = Subscriber::sample_owned(&lender, |s| s.try_recv_ref()).unwrap();
    lender.close();
    assert_eq!(lender.with_ref(|_| ()), Err(LendError::Closed));
    let subscribers = || shmbus::Topic::status(&s.domain("t"), "t").unwrap().subscribers;
    assert_eq!(subscribers(), 1, "dropped under a live sample");
    assert_eq!(&sample[..3], &[1, 1, 1]);
    drop(sample);
    assert_eq!(subscribers(), 0);
}

#[test]
fn owned_stream_loans_and_records() {
    let s = Scratch::new("owned-stream");
    let stream = Stream::create_or_open(&s.domain("s"), "s", &StreamConfig::default().capacity(1 << 16)).unwrap();
    let writer = Lender::new(stream.writer().unwrap());
    let reader = Lender::new(stream.reader().unwrap());
    let mut loan = StreamWriter::loan_owned(&writer, |w| w.try_loan(16)).unwrap();
    loan[..5].copy_from_slice(b"hello");
    loan.truncate(5);
    assert_eq!(writer.with(|_| ()), Err(LendError::Busy));
    std::thread::spawn(move || loan.send()).join().unwrap();
    let record = StreamReader::record_owned(&reader, |r| r.try_recv_ref()).unwrap();
    assert_eq!(&record[..], b"hello");
    assert_eq!(reader.with(|_| ()), Err(LendError::Busy));
    // Dropped unconsumed: read again.
    drop(record);
    let record = StreamReader::record_owned(&reader, |r| r.recv_ref_timeout(Duration::from_secs(5))).unwrap();
    assert_eq!(&record[..], b"hello");
    std::thread::spawn(move || record.consume()).join().unwrap();
    assert!(reader.with(|r| r.try_recv().is_err()).unwrap(), "consumed: not read again");
}

#[test]
fn an_owned_job_keeps_the_worker_busy_until_dropped() {
    let s = Scratch::new("owned-pool");
    let pool = Pool::create_or_open(&s.domain("p"), "p", &PoolConfig::default().max_job_len(256)).unwrap();
    let mut dispatcher = pool.dispatcher().unwrap();
    let worker = Lender::new(pool.worker().unwrap());
    assert!(worker.with(|w| w.try_recv().is_err()).unwrap(), "now idle");
    dispatcher.try_send(b"job-1").unwrap();
    let job = Worker::job_owned(&worker, |w| w.recv_ref_timeout(Duration::from_secs(5))).unwrap();
    assert_eq!(&job[..], b"job-1");
    assert_eq!(worker.with(|w| w.done()).err(), Some(LendError::Busy));
    let job = std::thread::spawn(move || {
        assert_eq!(&job[..], b"job-1");
        job
    })
    .join()
    .unwrap();
    assert_eq!(job.info().len(), 5);
    drop(job);
    worker.with(|w| w.done()).unwrap();
}

#[test]
fn owned_journal_loans_and_entries() {
    let s = Scratch::new("owned-journal");
    let dir = s.path().join("j");
    let config = JournalConfig::default().cycle_bytes(1 << 20).max_entry_len(1 << 10).roll(RollCycle::Never);
    let journal = Journal::create_or_open(&dir, &config).unwrap();
    let appender = Lender::new(journal.appender().unwrap());
    let tailer = Lender::new(journal.tailer().unwrap());
    let mut loan = Appender::loan_owned(&appender, 4).unwrap();
    loan.copy_from_slice(b"abcd");
    assert_eq!(appender.with(|_| ()), Err(LendError::Busy));
    let index = std::thread::spawn(move || loan.send().unwrap()).join().unwrap();
    let entry = Tailer::entry_owned(&tailer, |t| t.try_recv_ref()).unwrap();
    assert_eq!((&entry[..], entry.info().index()), (&b"abcd"[..], index));
    assert_eq!(tailer.with(|_| ()), Err(LendError::Busy));
    drop(entry);
    assert!(tailer.with(|t| t.try_recv().is_err()).unwrap(), "an entry is read once");
    // An owned loan dropped unsent is abandoned: readers skip it.
    drop(Appender::loan_owned(&appender, 4).unwrap());
    appender.with(|a| a.send(b"next").unwrap()).unwrap();
    let next = Tailer::entry_owned(&tailer, |t| t.recv_ref_timeout(Duration::from_secs(5))).unwrap();
    assert_eq!(&next[..], b"next");
}

#[test]
fn a_call_waits_for_an_owned_receive_that_finds_nothing_instead_of_failing() {
    let s = Scratch::new("owned-wait");
    let stream = Stream::create_or_open(&s.domain("s"), "s", &StreamConfig::default().capacity(1 << 16)).unwrap();
    let _writer = stream.writer().unwrap();
    let reader = Lender::new(stream.reader().unwrap());
    let (started_tx, started) = std::sync::mpsc::channel();
    let r2 = reader.clone();
    let receiving = std::thread::spawn(move || {
        started_tx.send(()).unwrap();
        // Nothing comes: the receive times out, holding the lender meanwhile.
        StreamReader::record_owned(&r2, |r| r.recv_ref_timeout(Duration::from_millis(200))).err()
    });
    started.recv().unwrap();
    // Whether it runs before, during or after the receive, the call is never refused: the
    // receive lends the reader only when it returns a record.
    assert_eq!(reader.with(|r| r.pending()), Ok(0));
    let failed = receiving.join().unwrap();
    assert!(matches!(failed, Some(LendOr::Failed(_))), "{failed:?}");
}

#[test]
#[should_panic(expected = "another subscriber's")]
fn a_sample_of_another_subscriber_is_refused() {
    let s = Scratch::new("owned-foreign");
    let topic = common::topic(&s, "t", 4096, 4);
    let mut publisher = topic.publisher().unwrap();
    let other = Box::leak(Box::new(topic.subscriber().unwrap()));
    let lender = Lender::new(topic.subscriber().unwrap());
    publisher.send(&[1u8; 100]).unwrap();
    let _ = Subscriber::sample_owned(&lender, |_| other.try_recv_ref());
}
