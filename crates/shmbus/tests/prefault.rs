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

/// The faults of `first_pass` over a channel opened without a prefault and over one opened
/// with it, and the second one. Both are made with `make` and let go of first, so that
/// `open` maps each file afresh.
fn first_passes<H>(
    make: impl Fn(&str) -> H,
    open: impl Fn(&str) -> H,
    prefault: impl Fn(&H),
    first_pass: impl Fn(&H) -> u64,
) -> (u64, u64, H) {
    drop((make("cold"), make("warm")));
    let cold = first_pass(&open("cold"));
    let warm = open("warm");
    prefault(&warm);
    (cold, first_pass(&warm), warm)
}

#[test]
fn a_prefaulted_topic_takes_no_faults_on_its_first_pass() {
    let s = Scratch::new("prefault-topic");
    let (slot, history) = (64 << 10, 16);
    let config = TopicConfig::default().max_message_len(slot).history(history);
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
    let (cold, warm, warm_topic) = first_passes(
        |n| Topic::create_or_open(&s.domain("t"), n, &config).unwrap(),
        |n| Topic::open(&s.domain("t"), n).unwrap(),
        Topic::prefault,
        first_pass,
    );
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
    let msg = vec![0x5a; len];
    // Every slot written once: the queue full.
    let first_pass = |q: &Queue| {
        let mut tx = q.producer().unwrap();
        faults_of(|| (0..capacity).for_each(|_| tx.try_send(&msg).unwrap()))
    };
    let (cold, warm, warm_queue) = first_passes(
        |n| Queue::create_or_open(&s.domain("q"), n, &config).unwrap(),
        |n| Queue::open(&s.domain("q"), n).unwrap(),
        Queue::prefault,
        first_pass,
    );
    check("queue", (len * capacity as usize / PAGE) as u64, cold, warm);
    assert_eq!(warm_queue.consumer().unwrap().try_recv().unwrap(), msg);
}

#[test]
fn a_prefaulted_stream_takes_no_faults_on_its_first_pass() {
    let s = Scratch::new("prefault-stream");
    let capacity = 1 << 20;
    let config = StreamConfig::default().capacity(capacity);
    let record = vec![0x5a; 32 << 10];
    // Records until the ring is full: every page of it written once.
    let first_pass = |st: &Stream| {
        let mut w = st.writer().unwrap();
        faults_of(|| while w.try_send(&record).is_ok() {})
    };
    let (cold, warm, warm_stream) = first_passes(
        |n| Stream::create_or_open(&s.domain("s"), n, &config).unwrap(),
        |n| Stream::open(&s.domain("s"), n).unwrap(),
        Stream::prefault,
        first_pass,
    );
    check("stream", (capacity / PAGE) as u64, cold, warm);
    assert_eq!(warm_stream.reader().unwrap().try_recv().unwrap(), record);
}

#[test]
fn a_prefaulted_pool_takes_no_faults_on_its_first_pass() {
    let s = Scratch::new("prefault-pool");
    let (len, workers) = (64 << 10, 8);
    let config = PoolConfig::default().max_workers(workers).max_job_len(len);
    let job = vec![0x5a; len];
    // A whole job into every worker's mailbox; the workers are idle before the count starts
    // (a receive that found nothing).
    let first_pass = |p: &Pool| {
        let mut disp = p.dispatcher().unwrap();
        let mut ws: Vec<_> = (0..workers).map(|_| p.worker().unwrap()).collect();
        ws.iter_mut().for_each(|w| assert!(w.try_recv().is_err()));
        faults_of(|| {
            (0..workers).for_each(|_| {
                disp.try_send(&job).unwrap();
            })
        })
    };
    let (cold, warm, warm_pool) = first_passes(
        |n| Pool::create_or_open(&s.domain("p"), n, &config).unwrap(),
        |n| Pool::open(&s.domain("p"), n).unwrap(),
        Pool::prefault,
        first_pass,
    );
    check("pool", (len * workers / PAGE) as u64, cold, warm);
    // Jobs are whole after it (it changes no byte).
    let mut disp = warm_pool.dispatcher().unwrap();
    let mut w = warm_pool.worker().unwrap();
    assert!(w.try_recv().is_err());
    disp.try_send(&job).unwrap();
    assert_eq!(w.recv_timeout(Duration::from_secs(5)).unwrap().data(), job.as_slice());
}

#[test]
fn a_prefault_over_a_file_cut_short_returns_and_the_cut_is_still_reported() {
    let s = Scratch::new("prefault-cut");
    let d = s.domain("t");
    let topic = Topic::create_or_open(&d, "t", &TopicConfig::default().max_message_len(64 << 10).history(16)).unwrap();
    let stream = Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(1 << 20)).unwrap();
    let sub = topic.subscriber().unwrap();
    let mut reader = stream.reader().unwrap();
    // Another process cuts both files to nothing while they are mapped here.
    for name in ["t", "s"] {
        std::fs::OpenOptions::new().write(true).open(d.channel_path(name).unwrap()).unwrap().set_len(0).unwrap();
    }
    // No SIGBUS: the pages past the end are left alone.
    topic.prefault();
    stream.prefault();
    assert_eq!(sub.try_recv().unwrap_err(), shmbus::topic::TopicTryRecvError::Truncated);
    assert!(reader.try_recv().is_err());
}
