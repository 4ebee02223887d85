//! `prefault()` on every channel kind: the first pass over a channel's memory takes no page
//! faults in a process that prefaulted it, and about one per page in one that did not.

#![cfg(not(loom))]

mod common;

use std::time::Duration;

use common::Scratch;
use shmbus::pool::{Pool, PoolConfig};
use shmbus::queue::{Queue, QueueConfig};
use shmbus::stream::{Stream, StreamConfig};
use shmbus::topic::{Topic, TopicConfig};

const PAGE: usize = 4096;

/// Page faults this thread has taken without I/O so far (`RUSAGE_THREAD`: the other tests'
/// threads do not count).
fn minor_faults() -> u64 {
    // SAFETY: getrusage writes the struct we pass and nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) }, 0);
    u.ru_minflt as u64
}

/// The faults `pass` takes.
fn faults_of(pass: impl FnOnce()) -> u64 {
    let before = minor_faults();
    pass();
    minor_faults() - before
}

/// Without a prefault, about one fault per page; with it, next to none.
fn check(what: &str, pages: u64, cold: u64, warm: u64) {
    assert!(cold >= pages / 2, "{what}: a first pass over {pages} pages took only {cold} faults without prefault");
    assert!(warm < pages / 16, "{what}: a first pass over {pages} prefaulted pages took {warm} faults");
}

#[test]
fn a_prefaulted_topic_takes_no_faults_on_its_first_pass() {
    let s = Scratch::new("prefault-topic");
    let (slot, history) = (64 << 10, 16);
    let config = TopicConfig::default().max_message_len(slot).history(history);
    // Made, then let go of: each `open` below maps the file afresh.
    for name in ["cold", "warm"] {
        drop(Topic::create_or_open(&s.domain("t"), name, &config).unwrap());
    }
    // Every byte of `history` slots written, once round the ring.
    let first_pass = |t: &Topic| {
        let mut p = t.publisher().unwrap();
        faults_of(|| {
            for _ in 0..history {
                let mut l = p.loan().unwrap();
                l.fill(0x5a);
                l.send().unwrap();
            }
        })
    };
    let cold = first_pass(&Topic::open(&s.domain("t"), "cold").unwrap());
    let warm_topic = Topic::open(&s.domain("t"), "warm").unwrap();
    warm_topic.prefault();
    let warm = first_pass(&warm_topic);
    check("topic", (slot * history / PAGE) as u64, cold, warm);
    // The messages are whole after it (it changes no byte).
    let sub = warm_topic.subscriber().unwrap();
    sub.seek_oldest();
    let m = sub.try_recv().unwrap();
    assert_eq!(m.len(), slot);
    assert!(m.data().iter().all(|&b| b == 0x5a));
}

#[test]
fn a_prefaulted_queue_takes_no_faults_on_its_first_pass() {
    let s = Scratch::new("prefault-queue");
    let (len, capacity) = (64 << 10, 16);
    let config = QueueConfig::default().capacity(capacity).max_message_len(len);
    for name in ["cold", "warm"] {
        drop(Queue::create_or_open(&s.domain("q"), name, &config).unwrap());
    }
    let msg = vec![0x5a; len];
    // Every slot written once: the queue full.
    let first_pass = |q: &Queue| {
        let mut tx = q.producer().unwrap();
        faults_of(|| (0..capacity).for_each(|_| tx.try_send(&msg).unwrap()))
    };
    let cold = first_pass(&Queue::open(&s.domain("q"), "cold").unwrap());
    let warm_queue = Queue::open(&s.domain("q"), "warm").unwrap();
    warm_queue.prefault();
    let warm = first_pass(&warm_queue);
    check("queue", (len * capacity as usize / PAGE) as u64, cold, warm);
    assert_eq!(warm_queue.consumer().unwrap().try_recv().unwrap(), msg);
}

#[test]
fn a_prefaulted_stream_takes_no_faults_on_its_first_pass() {
    let s = Scratch::new("prefault-stream");
    let capacity = 1 << 20;
    let config = StreamConfig::default().capacity(capacity);
    for name in ["cold", "warm"] {
        drop(Stream::create_or_open(&s.domain("s"), name, &config).unwrap());
    }
    let record = vec![0x5a; 32 << 10];
    // Records until the ring is full: every page of it written once.
    let first_pass = |st: &Stream| {
        let mut w = st.writer().unwrap();
        faults_of(|| while w.try_send(&record).is_ok() {})
    };
    let cold = first_pass(&Stream::open(&s.domain("s"), "cold").unwrap());
    let warm_stream = Stream::open(&s.domain("s"), "warm").unwrap();
    warm_stream.prefault();
    let warm = first_pass(&warm_stream);
    check("stream", (capacity / PAGE) as u64, cold, warm);
    assert_eq!(warm_stream.reader().unwrap().try_recv().unwrap(), record);
}

#[test]
fn a_prefaulted_pool_still_carries_jobs() {
    let s = Scratch::new("prefault-pool");
    let pool =
        Pool::create_or_open(&s.domain("p"), "p", &PoolConfig::default().max_workers(2).max_job_len(64 << 10)).unwrap();
    pool.prefault();
    let mut disp = pool.dispatcher().unwrap();
    let mut w = pool.worker().unwrap();
    let job = vec![0x5a; 64 << 10];
    assert!(w.try_recv().is_err()); // nothing yet: the worker is idle now
    disp.try_send(job.as_slice()).unwrap();
    assert_eq!(w.recv_timeout(Duration::from_secs(5)).unwrap().data(), job.as_slice());
}
