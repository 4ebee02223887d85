//! In-process tests of the pool API: dispatch and receive across threads, errors that hand
//! the job back, dispatcher exclusivity and takeover, WaitSet, status, corrupt segments.

#![cfg(not(loom))]

mod common;

use std::time::Duration;

use common::{eventually, Scratch};
use shmbus::pool::{
    self, BatchDispatchError, Dispatcher, PoolConfig, RecvError, TryDispatchError, TryRecvError, Worker,
};
use shmbus::{OpenError, WaitSet};

const CFG: PoolConfig = PoolConfig { max_workers: 4, max_job_size: 256 };

#[test]
fn dispatch_to_a_waiting_worker_and_hand_back_when_busy() {
    let root = Scratch::in_temp_dir("pool-basic");
    let d = root.domain("t");
    let mut disp = Dispatcher::create(&d, "p", CFG).unwrap();
    match disp.try_dispatch(b"x".to_vec()) {
        Err(TryDispatchError::NoWorkers(job)) => assert_eq!(job, b"x"),
        other => panic!("expected NoWorkers, got {other:?}"),
    }
    let mut w = Worker::join(&d, "p").unwrap();
    // Joined but not waiting: return to sender.
    assert!(matches!(disp.try_dispatch(b"y".as_slice()), Err(TryDispatchError::AllBusy(b"y"))));
    assert_eq!(w.try_recv().unwrap_err(), TryRecvError::Empty); // now idle
    let sent = disp.try_dispatch(b"hello".as_slice()).unwrap();
    assert_eq!(sent.worker, w.index());
    assert_eq!(sent.job_id, 1);
    // The worker holds it until its next recv: busy.
    let job = w.recv().unwrap();
    assert_eq!((job.id(), job.data()), (1, &b"hello"[..]));
    assert!(matches!(disp.try_dispatch(b"z".as_slice()), Err(TryDispatchError::AllBusy(_))));
    let too_big = vec![0u8; 257];
    match disp.try_dispatch(too_big) {
        Err(TryDispatchError::TooLarge { job, len: 257, max: 256 }) => assert_eq!(job.len(), 257),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    w.done();
    let sent = disp.try_dispatch_with_id(99, [7u8; 256]).unwrap();
    assert_eq!(sent.job_id, 99);
    let job = w.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!((job.id(), job.data().len()), (99, 256));
    let st = disp.status();
    assert_eq!((st.workers, st.dispatched, st.lost), (1, 2, 0));
    assert!(st.dispatcher_alive);
    // Display says what to do.
    let msg = TryDispatchError::AllBusy(()).to_string();
    assert!(msg.contains("busy"), "{msg}");
}

#[test]
fn blocking_recv_across_threads_every_job_once() {
    let root = Scratch::in_temp_dir("pool-threads");
    let d = root.domain("t");
    let mut disp = Dispatcher::create(&d, "p", CFG).unwrap();
    let n_workers = 3;
    let handles: Vec<_> = (0..n_workers)
        .map(|_| {
            let mut w = Worker::join(&d, "p").unwrap();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                loop {
                    match w.recv() {
                        Ok(job) => {
                            let expect = payload(job.id());
                            assert_eq!(job.data(), &expect[..]);
                            got.push(job.id());
                        }
                        Err(RecvError::Orphaned) => return got,
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    let total = 2000u64;
    let mut all_busy = 0u64;
    let mut id = 1;
    while id <= total {
        match disp.try_dispatch(payload(id)) {
            Ok(s) => {
                assert_eq!(s.job_id, id);
                id += 1;
            }
            Err(TryDispatchError::AllBusy(_)) => {
                all_busy += 1;
                std::thread::yield_now();
            }
            Err(e) => panic!("{e}"),
        }
    }
    drop(disp); // workers see Orphaned once their mailbox is empty
    let mut got: Vec<u64> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    got.sort_unstable();
    assert_eq!(got, (1..=total).collect::<Vec<_>>(), "every job received exactly once");
    println!("{all_busy} AllBusy returns");
}

fn payload(id: u64) -> Vec<u8> {
    let len = (id * 37 % 200) as usize;
    (0..len).map(|i| (id as usize * 31 + i) as u8).collect()
}

#[test]
fn batch_fills_idle_workers_then_wakes_them() {
    let root = Scratch::in_temp_dir("pool-batch");
    let d = root.domain("t");
    let mut disp = Dispatcher::create(&d, "p", CFG).unwrap();
    let mut out = Vec::with_capacity(8);
    assert_eq!(disp.try_dispatch_batch(&[b"a"], &mut out), Err(BatchDispatchError::NoWorkers));
    let mut ws: Vec<Worker> = (0..3).map(|_| Worker::join(&d, "p").unwrap()).collect();
    for w in &mut ws[..2] {
        assert!(w.try_recv().is_err());
    }
    let big = [0u8; 300];
    assert_eq!(
        disp.try_dispatch_batch(&[b"a", &big], &mut out),
        Err(BatchDispatchError::TooLarge { index: 1, len: 300, max: 256 })
    );
    let jobs: [&[u8]; 4] = [b"j1", b"j2", b"j3", b"j4"];
    assert_eq!(disp.try_dispatch_batch(&jobs, &mut out), Ok(2), "two idle workers, two jobs sent");
    assert_eq!(out.len(), 2);
    let mut seen = Vec::new();
    for w in &mut ws[..2] {
        let j = w.recv_timeout(Duration::from_secs(5)).unwrap();
        seen.push(j.data().to_vec());
    }
    seen.sort();
    assert_eq!(seen, vec![b"j1".to_vec(), b"j2".to_vec()]);
}

#[test]
fn one_dispatcher_at_a_time_and_takeover_after_exit() {
    let root = Scratch::in_temp_dir("pool-excl");
    let d = root.domain("t");
    let first = Dispatcher::create(&d, "p", CFG).unwrap();
    match Dispatcher::open(&d, "p") {
        Err(OpenError::Busy { holder_pid, .. }) => assert_eq!(holder_pid, std::process::id()),
        other => panic!("expected Busy, got {other:?}"),
    }
    assert!(matches!(Dispatcher::create(&d, "p", CFG), Err(OpenError::Busy { .. })));
    let mut w = Worker::join(&d, "p").unwrap();
    assert!(w.try_recv().is_err());
    drop(first);
    // A clean exit is seen at once.
    assert_eq!(w.try_recv().unwrap_err(), TryRecvError::Orphaned);
    assert_eq!(w.try_recv().unwrap_err(), TryRecvError::Empty, "reported once, then waits for a successor");
    let mut second = Dispatcher::open(&d, "p").unwrap();
    let s = second.try_dispatch(b"after".as_slice()).unwrap();
    assert_eq!(s.job_id, 1, "ids continue across dispatchers");
    assert_eq!(w.recv_timeout(Duration::from_secs(5)).unwrap().data(), b"after");
    let s = second.try_dispatch(b"x".as_slice());
    assert!(matches!(s, Err(TryDispatchError::AllBusy(_))));
    w.done();
    assert_eq!(second.try_dispatch(b"x".as_slice()).unwrap().job_id, 2);
}

#[test]
fn blocked_worker_is_orphaned_when_the_dispatcher_exits() {
    let root = Scratch::in_temp_dir("pool-orphan");
    let d = root.domain("t");
    let disp = Dispatcher::create(&d, "p", CFG).unwrap();
    let mut w = Worker::join(&d, "p").unwrap();
    let h = std::thread::spawn(move || w.recv().map(|j| j.id()));
    eventually("the worker to wait", 10, || disp.status().idle == 1);
    drop(disp);
    assert_eq!(h.join().unwrap(), Err(RecvError::Orphaned));
}

#[test]
fn recv_timeout_withdraws() {
    let root = Scratch::in_temp_dir("pool-timeout");
    let d = root.domain("t");
    let mut disp = Dispatcher::create(&d, "p", CFG).unwrap();
    let mut w = Worker::join(&d, "p").unwrap();
    assert_eq!(w.recv_timeout(Duration::from_millis(5)).unwrap_err(), RecvError::Timeout);
    assert_eq!(disp.status().idle, 0, "a worker that timed out is not idle");
    assert!(matches!(disp.try_dispatch(b"x".as_slice()), Err(TryDispatchError::AllBusy(_))));
}

#[test]
fn leaving_worker_returns_its_undelivered_job_as_lost() {
    let root = Scratch::in_temp_dir("pool-leave");
    let d = root.domain("t");
    let mut disp = Dispatcher::create(&d, "p", CFG).unwrap();
    let mut w = Worker::join(&d, "p").unwrap();
    w.done();
    let s = disp.try_dispatch(b"never read".as_slice()).unwrap();
    drop(w);
    let lost = disp.reap();
    assert_eq!(lost.len(), 1);
    assert_eq!((lost[0].job_id, lost[0].worker, lost[0].pid), (s.job_id, s.worker, std::process::id()));
    assert!(disp.reap().is_empty(), "reported once");
    let st = disp.status();
    assert_eq!((st.workers, st.lost), (0, 1));
    // All mailboxes are reusable.
    let ws: Vec<Worker> = (0..4).map(|_| Worker::join(&d, "p").unwrap()).collect();
    assert!(matches!(Worker::join(&d, "p"), Err(OpenError::TooManyParticipants { max: 4, .. })));
    drop(ws);
}

#[test]
fn waitset_over_worker_mailboxes() {
    let root = Scratch::in_temp_dir("pool-waitset");
    let d = root.domain("t");
    let mut disp = Dispatcher::create(&d, "p", CFG).unwrap();
    let mut a = Worker::join(&d, "p").unwrap();
    let mut b = Worker::join(&d, "p").unwrap();
    // Become idle, then wait on both mailboxes.
    assert!(a.try_recv().is_err());
    assert!(b.try_recv().is_err());
    let mut ws = WaitSet::new();
    assert!(ws.wait_timeout(&[&a, &b], Duration::from_millis(5)).is_err(), "nothing dispatched yet");
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        let s = disp.try_dispatch(b"wake one".as_slice()).unwrap();
        (s.worker, disp)
    });
    let ready = ws.wait_timeout(&[&a, &b], Duration::from_secs(10)).unwrap().to_vec();
    let (worker, disp) = t.join().unwrap();
    let chosen = if worker == a.index() { 0 } else { 1 };
    assert_eq!(ready, vec![chosen], "exactly the chosen worker is ready");
    let w = if chosen == 0 { &mut a } else { &mut b };
    assert_eq!(w.try_recv().unwrap().data(), b"wake one");
    // The dispatcher side is waitable too: ready when some worker is idle.
    let mut ws2 = WaitSet::new();
    assert_eq!(ws2.wait_timeout(&[&disp], Duration::from_secs(10)).unwrap(), &[0]);
    // Orphaned is a readiness too.
    drop(disp);
    assert!(!ws.wait_timeout(&[&a, &b], Duration::from_secs(10)).unwrap().is_empty());
}

#[test]
fn status_without_joining_and_bad_configs() {
    let root = Scratch::in_temp_dir("pool-status");
    let d = root.domain("t");
    assert!(matches!(pool::status(&d, "p"), Err(OpenError::NotFound { .. })));
    let bad = |c: PoolConfig| matches!(Dispatcher::create(&d, "q", c), Err(OpenError::InvalidConfig { .. }));
    assert!(bad(PoolConfig { max_workers: 0, max_job_size: 1 }));
    assert!(bad(PoolConfig { max_workers: 65, max_job_size: 1 }));
    assert!(bad(PoolConfig { max_workers: 1, max_job_size: 0 }));
    assert!(bad(PoolConfig { max_workers: 1, max_job_size: pool::MAX_JOB_SIZE + 1 }));
    let disp = Dispatcher::create(&d, "p", CFG).unwrap();
    let _w = Worker::join(&d, "p").unwrap();
    let st = pool::status(&d, "p").unwrap();
    assert_eq!((st.max_workers, st.max_job_size, st.workers, st.idle, st.busy), (4, 256, 1, 0, 1));
    assert_eq!(st.dispatcher_pid, Some(std::process::id()));
    drop(disp);
    let st = pool::status(&d, "p").unwrap();
    assert_eq!((st.dispatcher_pid, st.dispatcher_alive), (None, false));
    match Worker::create_or_join(&d, "p", PoolConfig { max_workers: 8, max_job_size: 256 }) {
        Err(OpenError::LayoutMismatch { field: "max_workers", existing: 4, requested: 8, .. }) => {}
        other => panic!("expected LayoutMismatch, got {other:?}"),
    }
}

// ------------------------------------------------------------------ corrupt segments

/// Offsets in the segment file (see segment.rs): header fields, then the kind area.
const KIND_FIELD: u64 = 12;
const CRC_FIELD: u64 = 20;
const PARAMS_FIELD: u64 = 32;
const HEADER_LEN: usize = 120;
const KIND_AREA: u64 = 12288;
const POOL_HEADER: u64 = 256;

fn patch(path: &std::path::Path, offset: u64, bytes: &[u8], fix_crc: bool) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
    if fix_crc {
        let mut h = vec![0u8; HEADER_LEN];
        f.read_exact_at(&mut h, 0).unwrap();
        h[16..24].fill(0); // ready and crc count as zero
        f.write_all_at(&crc32c::crc32c(&h).to_le_bytes(), CRC_FIELD).unwrap();
    }
}

#[test]
fn corrupt_headers_are_typed_errors() {
    let root = Scratch::in_temp_dir("pool-corrupt");
    let d = root.domain("t");
    let path = d.channel_path("p").unwrap();
    let fresh = || {
        let _ = std::fs::remove_file(&path);
        drop(Dispatcher::create(&d, "p", CFG).unwrap());
    };
    // Another kind opened as a pool.
    fresh();
    patch(&path, KIND_FIELD, &1u32.to_le_bytes(), true);
    match Worker::join(&d, "p") {
        Err(e @ OpenError::WrongKind { .. }) => {
            assert!(e.to_string().contains("is a topic, not a pool"), "{e}")
        }
        other => panic!("expected WrongKind, got {other:?}"),
    }
    assert!(matches!(Dispatcher::open(&d, "p"), Err(OpenError::WrongKind { .. })));
    // Impossible parameters, with a valid checksum (a hostile creator).
    for (field, value) in [(0u64, 0u64), (0, 65), (0, u64::MAX), (1, 0), (1, 1 << 40), (2, 1), (7, 3)] {
        fresh();
        patch(&path, PARAMS_FIELD + 8 * field, &value.to_le_bytes(), true);
        match Worker::join(&d, "p") {
            Err(OpenError::Corrupt { what, .. }) => assert!(!what.is_empty()),
            other => panic!("param {field} = {value}: expected Corrupt, got {other:?}"),
        }
        assert!(matches!(pool::status(&d, "p"), Err(OpenError::Corrupt { .. })));
    }
    // A parameter changed without fixing the checksum.
    fresh();
    patch(&path, PARAMS_FIELD, &2u64.to_le_bytes(), false);
    assert!(matches!(Worker::join(&d, "p"), Err(OpenError::Corrupt { .. })));
    // Valid parameters that disagree with the file size.
    fresh();
    patch(&path, PARAMS_FIELD + 8, &512u64.to_le_bytes(), true);
    assert!(matches!(Worker::join(&d, "p"), Err(OpenError::Corrupt { .. })));
    // Truncated.
    fresh();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(KIND_AREA + 64).unwrap();
    assert!(matches!(Worker::join(&d, "p"), Err(OpenError::Truncated { .. })));
    // Garbage.
    std::fs::write(&path, vec![0xAB; 20000]).unwrap();
    assert!(matches!(Dispatcher::open(&d, "p"), Err(OpenError::NotASegment { .. })));
}

#[test]
fn corrupt_mailboxes_fail_calls_without_panics_or_hangs() {
    let root = Scratch::in_temp_dir("pool-mailbox");
    let d = root.domain("t");
    let path = d.channel_path("p").unwrap();
    let mut disp = Dispatcher::create(&d, "p", CFG).unwrap();
    let stride = 64 + 256;
    let mut w = Worker::join(&d, "p").unwrap();
    let mb = KIND_AREA + POOL_HEADER + (w.index() * stride) as u64;
    // A state no worker can be in: reported once, reset, and the worker goes on.
    patch(&path, mb, &99u32.to_le_bytes(), false);
    assert!(matches!(w.recv_timeout(Duration::from_millis(10)), Err(RecvError::Corrupt { .. })));
    assert!(matches!(w.try_recv(), Err(TryRecvError::Empty)));
    patch(&path, mb, &99u32.to_le_bytes(), false);
    assert!(matches!(w.try_recv(), Err(TryRecvError::Corrupt { .. })));
    assert!(matches!(w.recv_timeout(Duration::from_millis(10)), Err(RecvError::Timeout)));
    w.done();
    disp.try_dispatch(b"ok".as_slice()).unwrap();
    assert_eq!(w.recv_timeout(Duration::from_secs(5)).unwrap().data(), b"ok");
    // A FULL mailbox claiming more bytes than max_job_size.
    patch(&path, mb, &4u32.to_le_bytes(), false); // FULL
    patch(&path, mb + 24, &(1u64 << 40).to_le_bytes(), false); // len
    match w.recv_timeout(Duration::from_secs(5)) {
        Err(RecvError::Corrupt { what }) => assert!(what.contains("bytes"), "{what}"),
        other => panic!("expected Corrupt, got {:?}", other.map(|j| j.id())),
    }
    // Garbage idle bits (beyond max_workers, or for mailboxes that are not idle) only make
    // dispatch fail.
    patch(&path, KIND_AREA, &u64::MAX.to_le_bytes(), false);
    assert!(matches!(disp.try_dispatch(b"x".as_slice()), Err(TryDispatchError::AllBusy(_))));
    // Reaping garbage is harmless.
    patch(&path, mb, &77u32.to_le_bytes(), false);
    assert!(disp.reap().is_empty());
    drop(w); // leaves a garbage state behind without hanging
    assert!(disp.reap().is_empty());
    // The mailbox is usable again: a new worker joins and gets work.
    let mut w = Worker::join(&d, "p").unwrap();
    w.done();
    disp.try_dispatch(b"again".as_slice()).unwrap();
    assert_eq!(w.recv_timeout(Duration::from_secs(5)).unwrap().data(), b"again");
}
