//! Receiving into a caller's fixed buffer (`try_recv_into_slice`, `recv_into_slice`,
//! `recv_into_slice_timeout`) on every kind: an exact, a larger and a too-small buffer, the
//! message that did not fit received intact by the next call (of any form), and the topic
//! and queue forms between real processes.
#![cfg(not(loom))]

mod common;

use std::time::Duration;

use common::{child_role, env_str, env_u64, fresh_dir, spawn_child, topic, wait_with_deadline, Scratch};
use shmbus::journal::{Journal, JournalConfig, JournalRecvTimeoutError, JournalTryRecvError, RollCycle};
use shmbus::pool::{Pool, PoolConfig, PoolRecvTimeoutError, PoolTryRecvError, PoolTrySendError};
use shmbus::queue::{Queue, QueueConfig, QueueRecvTimeoutError, QueueTryRecvError};
use shmbus::stream::{Stream, StreamConfig, StreamRecvTimeoutError, StreamTryRecvError};
use shmbus::topic::{Topic, TopicConfig, TopicGetError, TopicRecvTimeoutError, TopicTryRecvError};
use shmbus::{Domain, RecvIntoSliceError, Waitable};

const SHORT: Duration = Duration::from_millis(20);
const LONG: Duration = Duration::from_secs(20);
/// What the buffers are filled with before a receive: bytes past the message stay so.
const FILL: u8 = 0xEE;

fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// Message `id` of `len >= 16` bytes: `[id][pattern][fnv of the rest]`.
fn message(id: u64, len: usize) -> Vec<u8> {
    assert!(len >= 16);
    let mut m = id.to_le_bytes().to_vec();
    m.extend((0..len - 16).map(|i| (id as u8).wrapping_mul(31).wrapping_add(i as u8)));
    let h = fnv(&m);
    m.extend_from_slice(&h.to_le_bytes());
    m
}

/// The id of an intact message; panics on a torn or foreign one.
fn check(m: &[u8]) -> u64 {
    assert!(m.len() >= 16, "short message: {} bytes", m.len());
    let (body, sum) = m.split_at(m.len() - 8);
    assert_eq!(fnv(body), u64::from_le_bytes(sum.try_into().unwrap()), "checksum mismatch: torn message");
    u64::from_le_bytes(m[..8].try_into().unwrap())
}

/// The length multi-process message `id` has: 16..=1500 bytes, many above 512.
fn mp_len(id: u64) -> usize {
    16 + (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize % 1485
}

fn too_small<E: std::fmt::Debug>(r: Result<impl std::fmt::Debug, RecvIntoSliceError<E>>) -> (usize, usize) {
    match r {
        Err(RecvIntoSliceError::TooSmall { needed, capacity }) => (needed, capacity),
        other => panic!("expected TooSmall, got {other:?}"),
    }
}

// ---- topic -------------------------------------------------------------------------------

#[test]
fn topic_exact_larger_and_too_small_buffers() {
    let s = Scratch::new("slice-topic");
    let t = topic(&s, "t", 4096, 8);
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    let mut buf = vec![FILL; 4096];

    assert!(matches!(sub.try_recv_into_slice(&mut buf), Err(RecvIntoSliceError::Recv(TopicTryRecvError::Empty))));
    assert!(matches!(
        sub.recv_into_slice_timeout(&mut buf, SHORT),
        Err(RecvIntoSliceError::Recv(TopicRecvTimeoutError::Timeout))
    ));

    let (m1, m2, m3) = (message(1, 1000), message(2, 1000), message(3, 500));
    for m in [&m1, &m2, &m3] {
        p.send(m).unwrap();
    }
    // Exact.
    let info = sub.try_recv_into_slice(&mut buf[..1000]).unwrap();
    assert_eq!((info.seq(), info.len()), (1, 1000));
    assert_eq!(&buf[..1000], &m1[..]);
    // Too small: kept, and the next receive of another form returns it.
    assert_eq!(too_small(sub.recv_into_slice(&mut buf[..999])), (1000, 999));
    assert_eq!(too_small(sub.recv_into_slice_timeout(&mut buf[..10], LONG)), (1000, 10));
    assert_eq!(sub.next_seq(), 2);
    let again = sub.try_recv().unwrap();
    assert_eq!((again.seq(), again.data()), (2, &m2[..]));
    // Larger: the bytes after the message are left alone.
    buf.fill(FILL);
    let info = sub.recv_into_slice_timeout(&mut buf, LONG).unwrap();
    assert_eq!((info.seq(), info.len()), (3, 500));
    assert_eq!(&buf[..500], &m3[..]);
    assert!(buf[500..].iter().all(|&b| b == FILL));

    // Too small, then the right size: the same message.
    let m4 = message(4, 4096);
    p.send(&m4).unwrap();
    let mut small = [0u8; 64];
    assert_eq!(too_small(sub.try_recv_into_slice(&mut small)), (4096, 64));
    assert!(sub.is_ready(), "the kept message is still there to receive");
    let info = sub.recv_into_slice_timeout(&mut buf, LONG).unwrap();
    assert_eq!((info.seq(), info.len()), (4, 4096));
    assert_eq!(buf, m4);
}

#[test]
fn topic_of_inline_slots_too() {
    let s = Scratch::new("slice-topic-inline");
    let t = topic(&s, "t", 40, 4);
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    let m = message(7, 40);
    p.send(&m).unwrap();
    let mut buf = [FILL; 64];
    assert_eq!(too_small(sub.try_recv_into_slice(&mut buf[..39])), (40, 39));
    let info = sub.try_recv_into_slice(&mut buf).unwrap();
    assert_eq!((info.seq(), info.len()), (1, 40));
    assert_eq!(&buf[..40], &m[..]);
    assert!(buf[40..].iter().all(|&b| b == FILL));
}

/// `get_into_slice` and `latest_into_slice` copy a message of the history once, without
/// moving the cursor; `latest_ref` pins the newest.
#[test]
fn topic_random_access_into_a_slice() {
    let s = Scratch::new("slice-topic-get");
    let t = topic(&s, "t", 4096, 4);
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    let mut buf = vec![FILL; 4096];
    assert!(matches!(sub.latest_into_slice(&mut buf), Err(RecvIntoSliceError::Recv(TopicGetError::NotYet { .. }))));
    assert!(matches!(sub.latest_ref(), Err(TopicGetError::NotYet { .. })));
    assert!(matches!(sub.get_into_slice(0, &mut buf), Err(RecvIntoSliceError::Recv(TopicGetError::InvalidSeq))));

    let msgs: Vec<Vec<u8>> = (1..=6).map(|i| message(i, 500 + i as usize * 100)).collect();
    for m in &msgs {
        p.send(m).unwrap();
    }
    // Exact, larger (the rest left alone), too small (nothing copied).
    let info = sub.get_into_slice(5, &mut buf[..1000]).unwrap();
    assert_eq!((info.seq(), info.len()), (5, 1000));
    assert_eq!(&buf[..1000], &msgs[4][..]);
    buf.fill(FILL);
    let info = sub.get_into_slice(3, &mut buf).unwrap();
    assert_eq!((info.seq(), info.len()), (3, 800));
    assert_eq!(&buf[..800], &msgs[2][..]);
    assert!(buf[800..].iter().all(|&b| b == FILL));
    buf.fill(FILL);
    assert_eq!(too_small(sub.get_into_slice(4, &mut buf[..899])), (900, 899));
    assert!(buf.iter().all(|&b| b == FILL), "nothing copied into a buffer too small");
    // Not yet.
    assert!(matches!(sub.get_into_slice(7, &mut buf), Err(RecvIntoSliceError::Recv(TopicGetError::NotYet { .. }))));
    // The newest, three ways.
    let info = sub.latest_into_slice(&mut buf).unwrap();
    assert_eq!((info.seq(), info.len(), check(&buf[..info.len()])), (6, 1100, 6));
    assert_eq!(too_small(sub.latest_into_slice(&mut buf[..10])), (1100, 10));
    let newest = sub.latest_ref().unwrap();
    assert_eq!((newest.seq(), &newest[..]), (6, &msgs[5][..]));
    drop(newest);
    // None of it moved the cursor.
    assert_eq!(sub.next_seq(), 1);
    // Overwritten.
    for i in 7..60 {
        p.send(&message(i, 600)).unwrap();
    }
    assert!(matches!(sub.get_into_slice(1, &mut buf), Err(RecvIntoSliceError::Recv(TopicGetError::Evicted { .. }))));
}

/// The copy's pin is one beyond the budget and given back at once: it works while samples
/// hold the whole budget.
#[test]
fn a_topic_copy_works_while_samples_hold_the_pin_budget() {
    let s = Scratch::new("slice-topic-pins");
    let t = topic(&s, "t", 256, 8);
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    for i in 1..=4 {
        p.send(&message(i, 256)).unwrap();
    }
    let (a, b) = (sub.try_recv_ref().unwrap(), sub.try_recv_ref().unwrap());
    assert!(matches!(sub.try_recv_ref(), Err(TopicTryRecvError::PinLimit { .. })));
    let mut buf = [0u8; 256];
    for seq in 3..=4 {
        let info = sub.try_recv_into_slice(&mut buf).unwrap();
        assert_eq!((info.seq(), check(&buf)), (seq, seq));
    }
    assert_eq!((check(&a), check(&b)), (1, 2));
}

/// The receive copies: once it returns, the buffer is the caller's, whatever the publisher
/// writes into the slot after.
#[test]
fn a_copied_message_stays_valid_after_its_slot_is_overwritten() {
    let s = Scratch::new("slice-topic-overwrite");
    let t = topic(&s, "t", 1024, 2);
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    let first = message(1, 1024);
    p.send(&first).unwrap();
    let mut buf = vec![0u8; 1024];
    let info = sub.try_recv_into_slice(&mut buf).unwrap();
    assert_eq!(info.seq(), 1);
    // Every slot written several times over with other bytes.
    for i in 2..40 {
        p.send(&message(i, 1024)).unwrap();
    }
    assert_eq!(sub.get(1).map(|m| m.seq()).ok(), None, "slot 1 was overwritten");
    assert_eq!(buf, first);
    assert_eq!(check(&buf), 1);
}

/// A lossy subscriber left on a message too large for its buffer can lose it to the
/// publisher meanwhile, as any unread message: the next receive reports the gap.
#[test]
fn a_lossy_subscriber_kept_on_a_message_sees_the_gap_if_it_is_overwritten() {
    let s = Scratch::new("slice-topic-gap");
    let t = topic(&s, "t", 256, 2);
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    p.send(&message(1, 256)).unwrap();
    assert_eq!(too_small(sub.try_recv_into_slice(&mut [0u8; 16])), (256, 16));
    for i in 2..20 {
        p.send(&message(i, 256)).unwrap();
    }
    let mut buf = [0u8; 256];
    match sub.try_recv_into_slice(&mut buf) {
        Err(RecvIntoSliceError::Recv(TopicTryRecvError::Lagged { missed })) => assert!(missed >= 1),
        other => panic!("expected a gap, got {other:?}"),
    }
    let info = sub.try_recv_into_slice(&mut buf).unwrap();
    assert_eq!(check(&buf[..info.len()]), info.seq());
}

/// A reliable subscriber's publishers keep the message it was left on: it is not lost even
/// when they publish far past the history meanwhile.
#[test]
fn a_reliable_subscriber_kept_on_a_message_gets_it() {
    let s = Scratch::new("slice-topic-reliable");
    let d = s.domain("t");
    let cfg = TopicConfig::default().history(2).max_message_len(256).policy(shmbus::DeliveryPolicy::Fail);
    let t = Topic::create_or_open(&d, "t", &cfg).unwrap();
    let mut p = t.publisher().unwrap();
    let sub = t.reliable_subscriber().unwrap();
    let m1 = message(1, 256);
    p.send(&m1).unwrap();
    assert_eq!(too_small(sub.try_recv_into_slice(&mut [0u8; 16])), (256, 16));
    // The publisher may not overwrite message 1 now: sends fail once the history is full.
    let mut sent = 1;
    for i in 2..20 {
        if p.try_send(&message(i, 256)).is_err() {
            break;
        }
        sent = i;
    }
    assert!(sent < 19, "the publisher went past the reliable subscriber's cursor");
    let mut buf = [0u8; 256];
    let info = sub.try_recv_into_slice(&mut buf).unwrap();
    assert_eq!((info.seq(), &buf[..]), (1, &m1[..]));
}

// ---- queue -------------------------------------------------------------------------------

#[test]
fn queue_exact_larger_and_too_small_buffers() {
    let s = Scratch::new("slice-queue");
    let d = s.domain("t");
    let q = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(8).max_message_len(4096)).unwrap();
    let mut tx = q.producer().unwrap();
    let mut rx = q.consumer().unwrap();
    let mut buf = vec![FILL; 4096];

    assert!(matches!(rx.try_recv_into_slice(&mut buf), Err(RecvIntoSliceError::Recv(QueueTryRecvError::Empty))));
    assert!(matches!(
        rx.recv_into_slice_timeout(&mut buf, SHORT),
        Err(RecvIntoSliceError::Recv(QueueRecvTimeoutError::Timeout))
    ));

    let ms: Vec<Vec<u8>> =
        [1000, 1000, 500, 4096, 100].iter().enumerate().map(|(i, &n)| message(i as u64, n)).collect();
    for m in &ms {
        tx.send(m).unwrap();
    }
    // Exact.
    assert_eq!(rx.try_recv_into_slice(&mut buf[..1000]).unwrap(), 1000);
    assert_eq!(&buf[..1000], &ms[0][..]);
    // Too small: taken off the queue but kept; asked again with too small a buffer, still
    // kept; the next receive of another form returns it before the messages behind it.
    assert_eq!(too_small(rx.recv_into_slice(&mut buf[..999])), (1000, 999));
    assert_eq!(too_small(rx.recv_into_slice_timeout(&mut buf[..1], LONG)), (1000, 1));
    assert!(rx.has_message() && rx.is_ready());
    assert_eq!(rx.try_recv().unwrap(), ms[1]);
    // Larger.
    buf.fill(FILL);
    assert_eq!(rx.recv_into_slice_timeout(&mut buf, LONG).unwrap(), 500);
    assert_eq!(&buf[..500], &ms[2][..]);
    assert!(buf[500..].iter().all(|&b| b == FILL));
    // Too small, then the right size.
    assert_eq!(too_small(rx.try_recv_into_slice(&mut buf[..4095])), (4096, 4095));
    assert_eq!(rx.recv_into_slice_timeout(&mut buf, LONG).unwrap(), 4096);
    assert_eq!(buf, ms[3]);
    // Too small into the Vec forms.
    assert_eq!(too_small(rx.try_recv_into_slice(&mut [])), (100, 0));
    let mut v = Vec::new();
    assert_eq!(rx.recv_into(&mut v).unwrap(), 100);
    assert_eq!(v, ms[4]);
    assert!(!rx.has_message());
    assert!(matches!(rx.try_recv_into_slice(&mut buf), Err(RecvIntoSliceError::Recv(QueueTryRecvError::Empty))));
}

/// Another consumer cannot get a message one consumer took into a too-small buffer: it is
/// that consumer's, and the queue's order goes on behind it.
#[test]
fn a_kept_queue_message_belongs_to_its_consumer() {
    let s = Scratch::new("slice-queue-two");
    let d = s.domain("t");
    let q = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(4).max_message_len(512)).unwrap();
    let mut tx = q.producer().unwrap();
    let mut a = q.consumer().unwrap();
    let mut b = q.consumer().unwrap();
    tx.send(&message(1, 512)).unwrap();
    tx.send(&message(2, 100)).unwrap();
    assert_eq!(too_small(a.try_recv_into_slice(&mut [0u8; 8])), (512, 8));
    let mut buf = [0u8; 512];
    let n = b.try_recv_into_slice(&mut buf).unwrap();
    assert_eq!(check(&buf[..n]), 2);
    let n = a.try_recv_into_slice(&mut buf).unwrap();
    assert_eq!(check(&buf[..n]), 1);
}

// ---- stream ------------------------------------------------------------------------------

#[test]
fn stream_exact_larger_and_too_small_buffers() {
    let s = Scratch::new("slice-stream");
    let d = s.domain("t");
    let st = Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(64 << 10)).unwrap();
    let mut w = st.writer().unwrap();
    let mut r = st.reader().unwrap();
    let mut buf = vec![FILL; 4096];

    assert!(matches!(r.try_recv_into_slice(&mut buf), Err(RecvIntoSliceError::Recv(StreamTryRecvError::Empty))));
    assert!(matches!(
        r.recv_into_slice_timeout(&mut buf, SHORT),
        Err(RecvIntoSliceError::Recv(StreamRecvTimeoutError::Timeout))
    ));
    let ms: Vec<Vec<u8>> = [1000, 1000, 500, 4096].iter().enumerate().map(|(i, &n)| message(i as u64, n)).collect();
    for m in &ms {
        w.send(m).unwrap();
    }
    assert_eq!(r.try_recv_into_slice(&mut buf[..1000]).unwrap(), 1000);
    assert_eq!(&buf[..1000], &ms[0][..]);
    let pending = r.pending();
    assert_eq!(too_small(r.recv_into_slice(&mut buf[..999])), (1000, 999));
    assert_eq!(too_small(r.recv_into_slice_timeout(&mut buf[..3], LONG)), (1000, 3));
    assert_eq!(r.pending(), pending, "a record that did not fit is not consumed");
    assert_eq!(r.try_recv().unwrap(), ms[1]);
    buf.fill(FILL);
    assert_eq!(r.recv_into_slice_timeout(&mut buf, LONG).unwrap(), 500);
    assert_eq!(&buf[..500], &ms[2][..]);
    assert!(buf[500..].iter().all(|&b| b == FILL));
    assert_eq!(too_small(r.try_recv_into_slice(&mut buf[..4000])), (4096, 4000));
    assert_eq!(r.recv_into_slice_timeout(&mut buf, LONG).unwrap(), 4096);
    assert_eq!(buf, ms[3]);
}

// ---- pool --------------------------------------------------------------------------------

#[test]
fn pool_exact_larger_and_too_small_buffers() {
    let s = Scratch::new("slice-pool");
    let d = s.domain("t");
    let pool = Pool::create_or_open(&d, "p", &PoolConfig::default().max_workers(2).max_job_len(4096)).unwrap();
    let mut disp = pool.dispatcher().unwrap();
    let mut w = pool.worker().unwrap();
    let mut buf = vec![FILL; 4096];

    // Idle from now on.
    assert!(matches!(w.try_recv_into_slice(&mut buf), Err(RecvIntoSliceError::Recv(PoolTryRecvError::Empty))));
    let m1 = message(1, 1000);
    let id1 = disp.try_send(&m1).unwrap().job_id;
    let info = w.try_recv_into_slice(&mut buf[..1000]).unwrap();
    assert_eq!((info.id(), info.len()), (id1, 1000));
    assert_eq!(&buf[..1000], &m1[..]);

    // Too small: the job stays this worker's, which stays busy with it.
    let m2 = message(2, 2000);
    w.done();
    let id2 = disp.try_send(&m2).unwrap().job_id;
    assert_eq!(too_small(w.recv_into_slice(&mut buf[..1999])), (2000, 1999));
    assert_eq!(too_small(w.recv_into_slice_timeout(&mut buf[..5], LONG)), (2000, 5));
    assert!(w.is_ready());
    assert!(matches!(disp.try_send(b"x".as_slice()), Err(PoolTrySendError::AllBusy)));
    let job = w.try_recv().unwrap();
    assert_eq!((job.id(), job.data()), (id2, &m2[..]));

    // Larger (waits, idle, for the job).
    assert!(matches!(
        w.recv_into_slice_timeout(&mut buf, SHORT),
        Err(RecvIntoSliceError::Recv(PoolRecvTimeoutError::Timeout))
    ));
    let m3 = message(3, 500);
    // The worker left idleness on its timeout; a receive makes it idle again.
    assert!(matches!(w.try_recv_into_slice(&mut buf), Err(RecvIntoSliceError::Recv(PoolTryRecvError::Empty))));
    let id3 = disp.try_send(&m3).unwrap().job_id;
    buf.fill(FILL);
    let info = w.recv_into_slice_timeout(&mut buf, LONG).unwrap();
    assert_eq!((info.id(), info.len()), (id3, 500));
    assert_eq!(&buf[..500], &m3[..]);
    assert!(buf[500..].iter().all(|&b| b == FILL));

    // Too small, then the right size.
    let m4 = message(4, 4096);
    w.done();
    let id4 = disp.try_send(&m4).unwrap().job_id;
    assert_eq!(too_small(w.try_recv_into_slice(&mut buf[..100])), (4096, 100));
    let info = w.recv_into_slice_timeout(&mut buf, LONG).unwrap();
    assert_eq!((info.id(), info.len()), (id4, 4096));
    assert_eq!(buf, m4);
}

// ---- journal -----------------------------------------------------------------------------

#[test]
fn journal_exact_larger_and_too_small_buffers() {
    let (dir, _c) = fresh_dir("slice-journal");
    let cfg =
        JournalConfig::default().cycle_bytes(1 << 20).chunk_bytes(64 << 10).max_entry_len(8192).roll(RollCycle::Never);
    let j = Journal::create_or_open(&dir, &cfg).unwrap();
    let mut a = j.appender().unwrap();
    let mut t = j.tailer().unwrap();
    let mut buf = vec![FILL; 4096];

    assert!(matches!(t.try_recv_into_slice(&mut buf), Err(RecvIntoSliceError::Recv(JournalTryRecvError::Empty))));
    assert!(matches!(
        t.recv_into_slice_timeout(&mut buf, SHORT),
        Err(RecvIntoSliceError::Recv(JournalRecvTimeoutError::Timeout))
    ));
    let ms: Vec<Vec<u8>> = [1000, 1000, 500, 4096].iter().enumerate().map(|(i, &n)| message(i as u64, n)).collect();
    let idx: Vec<u64> = ms.iter().map(|m| a.send(m).unwrap()).collect();

    let info = t.try_recv_into_slice(&mut buf[..1000]).unwrap();
    assert_eq!((info.index(), info.len()), (idx[0], 1000));
    assert_eq!(&buf[..1000], &ms[0][..]);
    assert_eq!(too_small(t.recv_into_slice(&mut buf[..999])), (1000, 999));
    assert_eq!(too_small(t.recv_into_slice_timeout(&mut buf[..7], LONG)), (1000, 7));
    assert_eq!(t.position(), idx[1], "the tailer stays on the entry that did not fit");
    let e = t.try_recv().unwrap();
    assert_eq!((e.index(), e.data()), (idx[1], &ms[1][..]));
    buf.fill(FILL);
    let info = t.recv_into_slice_timeout(&mut buf, LONG).unwrap();
    assert_eq!((info.index(), info.len()), (idx[2], 500));
    assert_eq!(&buf[..500], &ms[2][..]);
    assert!(buf[500..].iter().all(|&b| b == FILL));
    assert_eq!(too_small(t.try_recv_into_slice(&mut buf[..4095])), (4096, 4095));
    let info = t.recv_into_slice_timeout(&mut buf, LONG).unwrap();
    assert_eq!((info.index(), info.len()), (idx[3], 4096));
    assert_eq!(buf, ms[3]);
}

// ---- across processes --------------------------------------------------------------------

const MP_COUNT: u64 = 300;
/// The receiving side's first buffer: many messages are longer.
const MP_BUF: usize = 512;

/// Child entry point: does nothing in a normal test run.
#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    let d = Domain::with_root("mp", env_str("ROOT")).unwrap();
    let n = env_u64("COUNT");
    match role.as_str() {
        "publisher" => {
            let t = Topic::open(&d, "t").unwrap();
            let mut p = t.publisher().unwrap();
            for id in 1..=n {
                p.send(&message(id, mp_len(id))).unwrap();
            }
        }
        "producer" => {
            let q = Queue::open(&d, "q").unwrap();
            let mut tx = q.producer().unwrap();
            for id in 1..=n {
                tx.send(&message(id, mp_len(id))).unwrap();
            }
        }
        other => panic!("unknown child role {other}"),
    }
}

/// Receives `MP_COUNT` messages with `recv` (a receive into a slice), first into a buffer
/// of `MP_BUF` bytes and, when that is too small, into one of exactly the needed length:
/// each arrives intact, in order, none lost. Returns how many needed the second buffer.
fn receive_all<E: std::fmt::Debug>(
    mut recv: impl FnMut(&mut [u8]) -> Result<(usize, u64), RecvIntoSliceError<E>>,
) -> u64 {
    let mut buf = vec![0u8; MP_BUF];
    let mut resized = 0;
    for id in 1..=MP_COUNT {
        let (n, got) = match recv(&mut buf) {
            Ok((n, _)) => (n, check(&buf[..n])),
            Err(RecvIntoSliceError::TooSmall { needed, capacity }) => {
                assert_eq!((needed, capacity), (mp_len(id), MP_BUF));
                resized += 1;
                let mut exact = vec![0u8; needed];
                let (n, _) = recv(&mut exact).unwrap();
                assert_eq!(n, needed);
                (n, check(&exact))
            }
            Err(e) => panic!("message {id}: {e:?}"),
        };
        assert_eq!((got, n), (id, mp_len(id)), "message {id}");
    }
    resized
}

#[test]
fn topic_between_processes() {
    let s = Scratch::new("slice-topic-mp");
    let d = s.domain("mp");
    let cfg = TopicConfig::default().history(MP_COUNT as usize).max_message_len(2048);
    let t = Topic::create_or_open(&d, "t", &cfg).unwrap();
    let sub = t.subscriber().unwrap();
    let env = [("ROOT", s.path().display().to_string()), ("COUNT", MP_COUNT.to_string())];
    let mut child = spawn_child("child_entry", "publisher", &env);
    let resized = receive_all(|b| sub.recv_into_slice_timeout(b, LONG).map(|i| (i.len(), i.seq())));
    assert!(resized > MP_COUNT / 4, "too few messages were larger than the first buffer: {resized}");
    assert!(wait_with_deadline(&mut child, 30, "publisher").success());
}

#[test]
fn queue_between_processes() {
    let s = Scratch::new("slice-queue-mp");
    let d = s.domain("mp");
    let q = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(16).max_message_len(2048)).unwrap();
    let mut rx = q.consumer().unwrap();
    let env = [("ROOT", s.path().display().to_string()), ("COUNT", MP_COUNT.to_string())];
    let mut child = spawn_child("child_entry", "producer", &env);
    let resized = receive_all(|b| rx.recv_into_slice_timeout(b, LONG).map(|n| (n, 0)));
    assert!(resized > MP_COUNT / 4, "too few messages were larger than the first buffer: {resized}");
    assert!(wait_with_deadline(&mut child, 30, "producer").success());
}
