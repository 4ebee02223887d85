//! In-process tests of the pool API: dispatch and receive across threads, errors that hand
//! the job back, dispatcher exclusivity and takeover, WaitSet, status, corrupt segments.

#![cfg(not(loom))]

mod common;

use std::time::Duration;

use common::{eventually, Scratch};
use shmbus::pool::{
    self, Pool, PoolConfig, PoolRecvError, PoolRecvTimeoutError, PoolTryRecvError, PoolTrySendError, Worker,
};
use shmbus::{OpenError, WaitSet};

fn cfg() -> PoolConfig {
    PoolConfig::default().max_workers(4).max_job_len(256)
}

#[test]
fn dispatch_to_a_waiting_worker_and_hand_back_when_busy() {
    let root = Scratch::in_temp_dir("pool-basic");
    let d = root.domain("t");
    let mut disp = Pool::create_or_open(&d, "p", &cfg()).and_then(|p| p.dispatcher()).unwrap();
    assert_eq!(disp.try_send(b"x"), Err(PoolTrySendError::NoWorkers));
    let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
    // Joined but not waiting: return to sender.
    assert!(matches!(disp.try_send(b"y".as_slice()), Err(PoolTrySendError::AllBusy)));
    assert_eq!(w.try_recv().unwrap_err(), PoolTryRecvError::Empty); // now idle
    let sent = disp.try_send(b"hello".as_slice()).unwrap();
    assert_eq!(sent.worker, w.index());
    assert_eq!(sent.job_id, 1);
    // The worker holds it until its next recv: busy.
    let job = w.recv_ref().unwrap();
    assert_eq!((job.id(), job.data(), &job[..]), (1, &b"hello"[..], &b"hello"[..]));
    assert!(matches!(disp.try_send(b"z".as_slice()), Err(PoolTrySendError::AllBusy)));
    let too_big = vec![0u8; 257];
    assert_eq!(disp.try_send(&too_big), Err(PoolTrySendError::TooLarge { len: 257, max: 256, index: None }));
    w.done();
    let sent = disp.try_send_with_id(99, &[7u8; 256]).unwrap();
    assert_eq!(sent.job_id, 99);
    let job = w.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!((job.id(), job.data().len()), (99, 256));
    let st = disp.status();
    assert_eq!((st.workers, st.dispatched, st.lost), (1, 2, 0));
    assert!(st.dispatcher_alive);
    // Display says what to do.
    let msg = PoolTrySendError::AllBusy.to_string();
    assert!(msg.contains("busy"), "{msg}");
}

#[test]
fn blocking_recv_across_threads_every_job_once() {
    let root = Scratch::in_temp_dir("pool-threads");
    let d = root.domain("t");
    let mut disp = Pool::create_or_open(&d, "p", &cfg()).and_then(|p| p.dispatcher()).unwrap();
    let n_workers = 3;
    let handles: Vec<_> = (0..n_workers)
        .map(|_| {
            let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                loop {
                    match w.recv() {
                        Ok(job) => {
                            let expect = payload(job.id());
                            assert_eq!(job.data(), &expect[..]);
                            got.push(job.id());
                        }
                        Err(PoolRecvError::Orphaned) => return got,
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
        match disp.try_send(&payload(id)) {
            Ok(s) => {
                assert_eq!(s.job_id, id);
                id += 1;
            }
            Err(PoolTrySendError::AllBusy) => {
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
    let mut disp = Pool::create_or_open(&d, "p", &cfg()).and_then(|p| p.dispatcher()).unwrap();
    let mut out = Vec::with_capacity(8);
    assert_eq!(disp.try_send_batch(&[b"a"], &mut out), Err(PoolTrySendError::NoWorkers));
    let mut ws: Vec<Worker> = (0..3).map(|_| Pool::open(&d, "p").and_then(|p| p.worker()).unwrap()).collect();
    for w in &mut ws[..2] {
        assert!(w.try_recv().is_err());
    }
    let big = [0u8; 300];
    assert_eq!(
        disp.try_send_batch(&[b"a", &big], &mut out),
        Err(PoolTrySendError::TooLarge { len: 300, max: 256, index: Some(1) })
    );
    let jobs: [&[u8]; 4] = [b"j1", b"j2", b"j3", b"j4"];
    assert_eq!(disp.try_send_batch(&jobs, &mut out), Ok(2), "two idle workers, two jobs sent");
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
    let first = Pool::create_or_open(&d, "p", &cfg()).and_then(|p| p.dispatcher()).unwrap();
    match Pool::open(&d, "p").and_then(|p| p.dispatcher()) {
        Err(OpenError::Busy { holder_pid, .. }) => assert_eq!(holder_pid, std::process::id()),
        other => panic!("expected Busy, got {other:?}"),
    }
    assert!(matches!(Pool::create_or_open(&d, "p", &cfg()).and_then(|p| p.dispatcher()), Err(OpenError::Busy { .. })));
    let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
    assert!(w.try_recv().is_err());
    assert!(!w.dispatcher_finished(), "no dispatcher gone yet");
    drop(first);
    // A clean exit is seen at once, and told apart from a death.
    assert_eq!(w.try_recv().unwrap_err(), PoolTryRecvError::Orphaned);
    assert!(w.dispatcher_finished());
    assert_eq!(w.try_recv().unwrap_err(), PoolTryRecvError::Empty, "reported once, then waits for a successor");
    let mut second = Pool::open(&d, "p").and_then(|p| p.dispatcher()).unwrap();
    let s = second.try_send(b"after".as_slice()).unwrap();
    assert_eq!(s.job_id, 1, "ids continue across dispatchers");
    assert_eq!(w.recv_timeout(Duration::from_secs(5)).unwrap().data(), b"after");
    let s = second.try_send(b"x".as_slice());
    assert!(matches!(s, Err(PoolTrySendError::AllBusy)));
    w.done();
    assert_eq!(second.try_send(b"x".as_slice()).unwrap().job_id, 2);
}

#[test]
fn blocked_worker_is_orphaned_when_the_dispatcher_exits() {
    let root = Scratch::in_temp_dir("pool-orphan");
    let d = root.domain("t");
    let disp = Pool::create_or_open(&d, "p", &cfg()).and_then(|p| p.dispatcher()).unwrap();
    let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
    let h = std::thread::spawn(move || w.recv().map(|j| j.id()));
    eventually("the worker to wait", 10, || disp.status().idle == 1);
    drop(disp);
    assert_eq!(h.join().unwrap(), Err(PoolRecvError::Orphaned));
}

#[test]
fn recv_timeout_withdraws() {
    let root = Scratch::in_temp_dir("pool-timeout");
    let d = root.domain("t");
    let mut disp = Pool::create_or_open(&d, "p", &cfg()).and_then(|p| p.dispatcher()).unwrap();
    let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
    assert_eq!(w.recv_timeout(Duration::from_millis(5)).unwrap_err(), PoolRecvTimeoutError::Timeout);
    assert_eq!(disp.status().idle, 0, "a worker that timed out is not idle");
    assert!(matches!(disp.try_send(b"x".as_slice()), Err(PoolTrySendError::AllBusy)));
}

#[test]
fn leaving_worker_returns_its_undelivered_job_as_lost() {
    let root = Scratch::in_temp_dir("pool-leave");
    let d = root.domain("t");
    let mut disp = Pool::create_or_open(&d, "p", &cfg()).and_then(|p| p.dispatcher()).unwrap();
    let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
    w.done();
    let s = disp.try_send(b"never read".as_slice()).unwrap();
    drop(w);
    let lost = disp.reap();
    assert_eq!(lost.len(), 1);
    assert_eq!((lost[0].job_id, lost[0].worker, lost[0].pid), (s.job_id, s.worker, std::process::id()));
    assert!(disp.reap().is_empty(), "reported once");
    let st = disp.status();
    assert_eq!((st.workers, st.lost), (0, 1));
    // All mailboxes are reusable.
    let ws: Vec<Worker> = (0..4).map(|_| Pool::open(&d, "p").and_then(|p| p.worker()).unwrap()).collect();
    assert!(matches!(Pool::open(&d, "p").and_then(|p| p.worker()), Err(OpenError::TooManyParticipants { max: 4, .. })));
    drop(ws);
}

#[test]
fn waitset_over_worker_mailboxes() {
    let root = Scratch::in_temp_dir("pool-waitset");
    let d = root.domain("t");
    let mut disp = Pool::create_or_open(&d, "p", &cfg()).and_then(|p| p.dispatcher()).unwrap();
    let mut a = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
    let mut b = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
    // Become idle, then wait on both mailboxes.
    assert!(a.try_recv().is_err());
    assert!(b.try_recv().is_err());
    let mut ws = WaitSet::new();
    assert!(ws.wait_timeout(&[&a, &b], Duration::from_millis(5)).is_err(), "nothing dispatched yet");
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        let s = disp.try_send(b"wake one".as_slice()).unwrap();
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
    assert!(matches!(Pool::status(&d, "p"), Err(OpenError::NotFound { .. })));
    let bad = |c: PoolConfig| {
        matches!(Pool::create_or_open(&d, "q", &c).and_then(|p| p.dispatcher()), Err(OpenError::InvalidConfig { .. }))
    };
    assert!(bad(PoolConfig::default().max_workers(0).max_job_len(1)));
    assert!(bad(PoolConfig::default().max_workers(65).max_job_len(1)));
    assert!(bad(PoolConfig::default().max_workers(1).max_job_len(0)));
    assert!(bad(PoolConfig::default().max_workers(1).max_job_len(pool::MAX_JOB_LEN + 1)));
    let disp = Pool::create_or_open(&d, "p", &cfg()).and_then(|p| p.dispatcher()).unwrap();
    let _w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
    let st = Pool::status(&d, "p").unwrap();
    assert_eq!((st.max_workers, st.max_job_len, st.workers, st.idle, st.busy), (4, 256, 1, 0, 1));
    assert_eq!(st.dispatcher_pid, Some(std::process::id()));
    drop(disp);
    let st = Pool::status(&d, "p").unwrap();
    assert_eq!((st.dispatcher_pid, st.dispatcher_alive), (None, false));
    match Pool::create_or_open(&d, "p", &PoolConfig::default().max_workers(8).max_job_len(256)).and_then(|p| p.worker())
    {
        Err(OpenError::LayoutMismatch { field: "max_workers", existing: 4, requested: 8, .. }) => {}
        other => panic!("expected LayoutMismatch, got {other:?}"),
    }
}

// ------------------------------------------------------------------ corrupt segments

/// Offsets in the segment file (see segment.rs): header fields, then the kind area.
const KIND_FIELD: u64 = 12;
const CRC_FIELD: u64 = 20;
const PARAMS_FIELD: u64 = 32;
const HEADER_LEN: usize = 208; // the checksummed header, with the payload type
const KIND_AREA: u64 = 77824;
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
        drop(Pool::create_or_open(&d, "p", &cfg()).and_then(|p| p.dispatcher()).unwrap());
    };
    // Another kind opened as a pool.
    fresh();
    patch(&path, KIND_FIELD, &1u32.to_le_bytes(), true);
    match Pool::open(&d, "p").and_then(|p| p.worker()) {
        Err(e @ OpenError::WrongKind { .. }) => {
            assert!(e.to_string().contains("is a topic, not a pool"), "{e}")
        }
        other => panic!("expected WrongKind, got {other:?}"),
    }
    assert!(matches!(Pool::open(&d, "p").and_then(|p| p.dispatcher()), Err(OpenError::WrongKind { .. })));
    // Impossible parameters, with a valid checksum (a hostile creator).
    for (field, value) in [(0u64, 0u64), (0, 65), (0, u64::MAX), (1, 0), (1, 1 << 40), (2, 1), (7, 3)] {
        fresh();
        patch(&path, PARAMS_FIELD + 8 * field, &value.to_le_bytes(), true);
        match Pool::open(&d, "p").and_then(|p| p.worker()) {
            Err(OpenError::Corrupt { what, .. }) => assert!(!what.is_empty()),
            other => panic!("param {field} = {value}: expected Corrupt, got {other:?}"),
        }
        assert!(matches!(Pool::status(&d, "p"), Err(OpenError::Corrupt { .. })));
    }
    // A parameter changed without fixing the checksum.
    fresh();
    patch(&path, PARAMS_FIELD, &2u64.to_le_bytes(), false);
    assert!(matches!(Pool::open(&d, "p").and_then(|p| p.worker()), Err(OpenError::Corrupt { .. })));
    // Valid parameters that disagree with the file size.
    fresh();
    patch(&path, PARAMS_FIELD + 8, &512u64.to_le_bytes(), true);
    assert!(matches!(Pool::open(&d, "p").and_then(|p| p.worker()), Err(OpenError::Corrupt { .. })));
    // Truncated.
    fresh();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(KIND_AREA + 64).unwrap();
    assert!(matches!(Pool::open(&d, "p").and_then(|p| p.worker()), Err(OpenError::Truncated { .. })));
    // Garbage.
    std::fs::write(&path, vec![0xAB; 20000]).unwrap();
    assert!(matches!(Pool::open(&d, "p").and_then(|p| p.dispatcher()), Err(OpenError::NotASegment { .. })));
}

#[test]
fn corrupt_mailboxes_fail_calls_without_panics_or_hangs() {
    let root = Scratch::in_temp_dir("pool-mailbox");
    let d = root.domain("t");
    let path = d.channel_path("p").unwrap();
    let mut disp = Pool::create_or_open(&d, "p", &cfg()).and_then(|p| p.dispatcher()).unwrap();
    let stride = 64 + 256;
    let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
    let mb = KIND_AREA + POOL_HEADER + (w.index() * stride) as u64;
    // A state no worker can be in: reported once, reset, and the worker goes on.
    patch(&path, mb, &99u32.to_le_bytes(), false);
    match w.recv_timeout(Duration::from_millis(10)) {
        Err(PoolRecvTimeoutError::Corrupt(c)) => {
            assert!(c.repaired(), "{c}");
            assert_eq!((c.value("mailbox"), c.value("state")), (Some(w.index() as u64), Some(99)));
            assert!(c.to_string().contains("corrupt"), "{c}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(matches!(w.try_recv(), Err(PoolTryRecvError::Empty)));
    patch(&path, mb, &99u32.to_le_bytes(), false);
    assert!(matches!(w.try_recv(), Err(PoolTryRecvError::Corrupt(_))));
    assert!(matches!(w.recv_timeout(Duration::from_millis(10)), Err(PoolRecvTimeoutError::Timeout)));
    w.done();
    disp.try_send(b"ok".as_slice()).unwrap();
    assert_eq!(w.recv_timeout(Duration::from_secs(5)).unwrap().data(), b"ok");
    // A FULL mailbox claiming more bytes than max_job_len.
    patch(&path, mb, &4u32.to_le_bytes(), false); // FULL
    patch(&path, mb + 24, &(1u64 << 40).to_le_bytes(), false); // len
    match w.recv_timeout(Duration::from_secs(5)) {
        Err(PoolRecvTimeoutError::Corrupt(c)) => {
            assert!(c.what().contains("bytes"), "{c}");
            assert_eq!(c.value("len"), Some(1 << 40));
        }
        other => panic!("expected Corrupt, got {:?}", other.map(|j| j.id())),
    }
    // Garbage idle bits (beyond max_workers, or for mailboxes that are not idle) only make
    // dispatch fail.
    patch(&path, KIND_AREA, &u64::MAX.to_le_bytes(), false);
    assert!(matches!(disp.try_send(b"x".as_slice()), Err(PoolTrySendError::AllBusy)));
    // Reaping garbage is harmless.
    patch(&path, mb, &77u32.to_le_bytes(), false);
    assert!(disp.reap().is_empty());
    drop(w); // leaves a garbage state behind without hanging
    assert!(disp.reap().is_empty());
    // The mailbox is usable again: a new worker joins and gets work.
    let mut w = Pool::open(&d, "p").and_then(|p| p.worker()).unwrap();
    w.done();
    disp.try_send(b"again".as_slice()).unwrap();
    assert_eq!(w.recv_timeout(Duration::from_secs(5)).unwrap().data(), b"again");
}

// ------------------------------------------------------------------ handle, config, verbs

#[test]
fn config_setters_left_unset_accept_the_existing_pool() {
    let root = Scratch::in_temp_dir("pool-config");
    let d = root.domain("t");
    // Created with the defaults for what was not set.
    let pool = Pool::create_or_open(&d, "p", &PoolConfig::default().max_job_len(100)).unwrap();
    assert_eq!((pool.max_workers(), pool.max_job_len()), (PoolConfig::DEFAULT_MAX_WORKERS, 100));
    // Nothing set: opens whatever exists.
    let again = Pool::create_or_open(&d, "p", &PoolConfig::default()).unwrap();
    assert_eq!((again.max_workers(), again.max_job_len()), (8, 100));
    // A set value that agrees is fine; one that differs is a mismatch, named as in the header.
    assert!(Pool::create_or_open(&d, "p", &PoolConfig::default().max_workers(8)).is_ok());
    match Pool::create_or_open(&d, "p", &PoolConfig::default().max_job_len(64)) {
        Err(OpenError::LayoutMismatch { field: "max_job_size", existing: 100, requested: 64, .. }) => {}
        other => panic!("expected LayoutMismatch, got {other:?}"),
    }
    // Invalid values fail even when the pool exists.
    assert!(matches!(
        Pool::create_or_open(&d, "q", &PoolConfig::default().max_workers(0)),
        Err(OpenError::InvalidConfig { .. })
    ));
    // The handle's endpoints: one dispatcher, clones share the mapping.
    let d1 = pool.dispatcher().unwrap();
    assert!(matches!(again.clone().dispatcher(), Err(OpenError::Busy { .. })));
    drop(d1);
    assert!(again.dispatcher().is_ok());
    assert!(matches!(Pool::open(&d, "nope"), Err(OpenError::NotFound { .. })));
    // A mode set at creation is the file's.
    use std::os::unix::fs::PermissionsExt;
    drop(Pool::create_or_open(&d, "m", &PoolConfig::default().mode(0o640)).unwrap());
    let mode = std::fs::metadata(d.channel_path("m").unwrap()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o640);
}

#[test]
fn owned_into_and_ref_receives_and_the_iterators() {
    let root = Scratch::in_temp_dir("pool-verbs");
    let d = root.domain("t");
    let pool = Pool::create_or_open(&d, "p", &cfg()).unwrap();
    let mut disp = pool.dispatcher().unwrap();
    let mut w = pool.worker().unwrap();
    // try_iter on an empty mailbox ends at once and leaves the worker idle.
    assert_eq!(w.try_iter().count(), 0);
    disp.try_send(b"owned").unwrap();
    let job = w.recv().unwrap();
    assert_eq!((job.id(), job.data(), job.len()), (1, &b"owned"[..], 5));
    // Still busy with it (owned or not) until the next receive.
    assert_eq!(disp.try_send(b"x"), Err(PoolTrySendError::AllBusy));
    assert_eq!(job.into_data(), b"owned");
    let mut buf = Vec::with_capacity(256);
    let cap = buf.capacity();
    assert_eq!(w.try_recv_into(&mut buf).unwrap_err(), PoolTryRecvError::Empty);
    disp.try_send_with_id(42, b"into").unwrap();
    let info = w.recv_into_timeout(&mut buf, Duration::from_secs(5)).unwrap();
    assert_eq!((info.id(), info.len(), &buf[..]), (42, 4, &b"into"[..]));
    assert_eq!(buf.capacity(), cap, "no reallocation");
    w.done();
    disp.try_send(b"into again, replacing").unwrap();
    let info = w.recv_into(&mut buf).unwrap();
    assert_eq!((info.len(), &buf[..]), (21, &b"into again, replacing"[..]));
    w.done();
    disp.try_send(b"in place").unwrap();
    let r = w.try_recv_ref().unwrap();
    assert_eq!((&*r, r.len(), r.is_empty()), (&b"in place"[..], 8, false));
    w.done();
    disp.try_send(b"iter").unwrap();
    let got: Vec<_> = w.try_iter().map(|j| j.unwrap().into_data()).collect();
    assert_eq!(got, vec![b"iter".to_vec()]);
    // The blocking iterator: jobs, then the dispatcher's exit as an error, and it goes on.
    let h = std::thread::spawn(move || {
        let mut it = w.iter();
        let first = it.next().unwrap().map(|j| j.into_data());
        let second = it.next().unwrap().map(|j| j.id());
        (first, second)
    });
    eventually("the worker to wait", 10, || Pool::status(&d, "p").unwrap().idle == 1);
    disp.try_send(b"blocking").unwrap();
    eventually("the worker to wait again", 10, || Pool::status(&d, "p").unwrap().idle == 1);
    drop(disp);
    let (first, second) = h.join().unwrap();
    assert_eq!(first, Ok(b"blocking".to_vec()));
    assert_eq!(second, Err(PoolRecvError::Orphaned));
}

#[test]
fn worker_is_ready_has_no_side_effects() {
    use shmbus::Waitable;
    let root = Scratch::in_temp_dir("pool-ready");
    let d = root.domain("t");
    let pool = Pool::create_or_open(&d, "p", &cfg()).unwrap();
    let disp = pool.dispatcher().unwrap();
    let mut w = pool.worker().unwrap();
    assert_eq!(w.try_recv().unwrap_err(), PoolTryRecvError::Empty);
    assert!(!w.is_ready() && !w.recheck(), "a live dispatcher, no job");
    // A clean exit is seen by is_ready without /proc, and is_ready changes nothing: the
    // loss is reported once, by the receive.
    drop(disp);
    assert!(w.is_ready() && w.is_ready());
    assert_eq!(w.try_recv().unwrap_err(), PoolTryRecvError::Orphaned);
    assert!(!w.is_ready(), "reported: waits for the next dispatcher");
    assert_eq!(w.try_recv().unwrap_err(), PoolTryRecvError::Empty);
}
