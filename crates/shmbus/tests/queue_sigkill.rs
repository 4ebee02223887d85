//! SIGKILL at random points, 200+ times, while a surviving producer and consumer keep
//! going: no duplicate, no torn message, no hang; the only messages lost are those a killed
//! consumer had taken (at most one per kill), and they are counted.
//!
//! Victims are this test binary run again (`victim_main`). Each logs its progress into a
//! shared file mapping, which survives SIGKILL:
//!
//! * a producer victim stores how many sends *returned* (word 1): those are surely sent;
//!   the next one may or may not have been (killed mid-send: abandoned, or published);
//! * a consumer victim appends every id it received (words 2..): a message it had claimed
//!   or received but not yet logged is lost with it, at most one per kill.
//!
//! Set `SHMBUS_SIGKILL_ITERATIONS` to run more (or fewer) kills.
#![cfg(not(loom))]

mod common;

use std::collections::HashSet;
use std::os::unix::fs::FileExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{child_command, child_role, Rng, Scratch};
use shmbus::queue::{Queue, QueueConfig, QueueRecvTimeoutError, QueueSendTimeoutError};
use shmbus::Domain;

const ROOT: &str = "SHMBUS_QUEUE_TEST_ROOT";
const MAX: usize = 2048;
const STARTED: u64 = 0x5354_4152_5445_4421;

/// A word-wise hash: cheap, so victims spend their time inside queue operations.
fn hash(data: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ data.len() as u64;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        h = (h ^ u64::from_le_bytes(w.try_into().unwrap())).wrapping_mul(0x0100_0000_01b3).rotate_left(29);
    }
    for &b in words.remainder() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// `[id][filler of id-dependent length][hash of the rest]`.
fn encode(id: u64, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(&id.to_le_bytes());
    let fill = (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize % (MAX - 16 + 1);
    buf.resize(8 + fill, id as u8 ^ 0x5a);
    let h = hash(buf);
    buf.extend_from_slice(&h.to_le_bytes());
}

fn decode(m: &[u8]) -> u64 {
    assert!(m.len() >= 16, "short message: {} bytes", m.len());
    let (body, sum) = m.split_at(m.len() - 8);
    assert_eq!(hash(body), u64::from_le_bytes(sum.try_into().unwrap()), "checksum mismatch: torn message");
    u64::from_le_bytes(m[..8].try_into().unwrap())
}

fn domain_at(root: &Path) -> Domain {
    Domain::with_root("kill", root).unwrap()
}

/// A victim's progress log: the log file mapped shared, so every store survives SIGKILL
/// without a system call. Word 0: `STARTED`; word 1: sends that returned; words 2..: ids
/// received.
struct Log {
    words: *const AtomicU64,
    len: usize,
}

const LOG_BYTES: usize = 1 << 20;

impl Log {
    fn map(path: &Path) -> Log {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
        f.set_len(LOG_BYTES as u64).unwrap();
        // SAFETY: a fresh shared mapping of a file we just sized; never unmapped (the
        // victim runs until killed).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LOG_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        Log { words: p as *const AtomicU64, len: LOG_BYTES / 8 }
    }
    fn set(&self, i: usize, v: u64) {
        assert!(i < self.len, "log full");
        // SAFETY: i is inside the mapping, which is 8-byte aligned and lives for ever.
        unsafe { &*self.words.add(i) }.store(v, Ordering::Release);
    }
}

/// The log's words up to (not including) the first zero after the header.
fn read_log(path: &Path) -> Vec<u64> {
    let f = std::fs::File::open(path).unwrap();
    let mut words = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut offset = 0;
    loop {
        let n = f.read_at(&mut chunk, offset).unwrap();
        for c in chunk[..n - n % 8].chunks_exact(8) {
            let w = u64::from_le_bytes(c.try_into().unwrap());
            if w == 0 && words.len() >= 2 {
                return words;
            }
            words.push(w);
        }
        if n < chunk.len() {
            return words;
        }
        offset += n as u64;
    }
}

/// Victim entry point: does nothing unless run as a victim. Runs until killed.
#[test]
fn victim_main() {
    let Some(role) = child_role() else { return };
    let root = PathBuf::from(std::env::var(ROOT).unwrap());
    let mut parts = role.split(':');
    let (kind, n, log) = (parts.next().unwrap(), parts.next().unwrap().parse::<u64>().unwrap(), parts.next().unwrap());
    let log = Log::map(Path::new(log));
    let q = Queue::open(&domain_at(&root), "q").unwrap();
    match kind {
        "producer" => {
            let mut tx = q.producer().unwrap();
            log.set(0, STARTED);
            let mut buf = Vec::with_capacity(MAX);
            for seq in 0.. {
                encode(n << 32 | seq, &mut buf);
                tx.send(&buf).unwrap();
                log.set(1, seq + 1);
            }
        }
        "consumer" => {
            let mut rx = q.consumer().unwrap();
            log.set(0, STARTED);
            let mut buf = Vec::with_capacity(MAX);
            for k in 2.. {
                let len = rx.recv_into(&mut buf).unwrap();
                log.set(k, decode(&buf[..len]));
            }
        }
        _ => unreachable!(),
    }
}

struct Victim {
    producer: bool,
    n: u64,
    log: PathBuf,
}

#[test]
fn sigkill_at_random_points_never_duplicates_tears_or_wedges() {
    let iterations: usize = std::env::var("SHMBUS_SIGKILL_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let scratch = Scratch::new("queue-kill");
    let root = scratch.path();
    let d = domain_at(root);
    let q = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(8).max_message_len(MAX)).unwrap();
    let mut rng = Rng::from_env_or_clock();

    let stop_producing = AtomicBool::new(false);
    let received = Mutex::new(Vec::<u64>::new());
    let max_gap = Mutex::new(Duration::ZERO);
    let mut victims = Vec::new();
    let started = Instant::now();

    std::thread::scope(|s| {
        // The surviving producer (ids 1 << 32 | seq), paced so the run stays small.
        let survivor_sent = s.spawn(|| {
            let mut tx = q.producer().unwrap();
            let mut buf = Vec::with_capacity(MAX);
            let mut seq = 0u64;
            while !stop_producing.load(Ordering::Relaxed) {
                encode(1 << 32 | seq, &mut buf);
                match tx.send_timeout(&buf, Duration::from_secs(5)) {
                    Ok(()) => seq += 1,
                    Err(QueueSendTimeoutError::Timeout) => panic!("surviving producer wedged for 5 s"),
                    Err(e) => panic!("{e}"),
                }
                if seq % 8 == 0 {
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
            seq
        });
        // Two surviving consumers: run until the queue stays empty after everyone stopped.
        let consumer = || {
            let mut rx = q.consumer().unwrap();
            let mut buf = Vec::with_capacity(MAX);
            let mut last = Instant::now();
            loop {
                match rx.recv_into_timeout(&mut buf, Duration::from_millis(500)) {
                    Ok(len) => {
                        let id = decode(&buf[..len]);
                        let now = Instant::now();
                        let mut g = max_gap.lock().unwrap();
                        *g = (*g).max(now - last);
                        last = now;
                        received.lock().unwrap().push(id);
                    }
                    Err(QueueRecvTimeoutError::Timeout) => {
                        if stop_producing.load(Ordering::Relaxed) {
                            return;
                        }
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        };
        let consumers = [s.spawn(consumer), s.spawn(consumer)];

        for i in 0..iterations {
            let producer = rng.below(2) == 0;
            let n = 2 + i as u64;
            let log = root.join(format!("victim{i}.log"));
            std::fs::write(&log, []).unwrap();
            let kind = if producer { "producer" } else { "consumer" };
            let mut child = child_command(
                "victim_main",
                &format!("{kind}:{n}:{}", log.display()),
                &[(ROOT, root.display().to_string())],
            )
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
            // Wait until it works, then let it run 0..3 ms and kill it mid-whatever.
            let f = std::fs::File::open(&log).unwrap();
            let wait_start = Instant::now();
            loop {
                let mut b = [0u8; 8];
                if f.read_at(&mut b, 0).unwrap_or(0) == 8 && u64::from_le_bytes(b) == STARTED {
                    break;
                }
                if let Some(st) = child.try_wait().unwrap() {
                    panic!("victim exited early: {st}");
                }
                assert!(wait_start.elapsed() < Duration::from_secs(20), "victim never started");
                std::thread::sleep(Duration::from_micros(200));
            }
            let spin_until = Instant::now() + Duration::from_micros(rng.below(3000));
            while Instant::now() < spin_until {
                std::hint::spin_loop();
            }
            child.kill().unwrap();
            let status = child.wait().unwrap();
            assert_eq!(status.signal(), Some(libc::SIGKILL), "victim died of something else: {status}");
            victims.push(Victim { producer, n, log });
        }
        stop_producing.store(true, Ordering::Relaxed);
        let sent = survivor_sent.join().unwrap();
        for c in consumers {
            c.join().unwrap();
        }

        // Collect what everyone received and what was surely / maybe sent.
        let mut got: Vec<u64> = received.lock().unwrap().clone();
        let mut sure: Vec<u64> = (0..sent).map(|s| 1 << 32 | s).collect();
        let mut maybe = HashSet::new();
        let (mut producer_kills, mut consumer_kills) = (0u64, 0u64);
        for v in &victims {
            let words = read_log(&v.log);
            if v.producer {
                producer_kills += 1;
                let done = words.get(1).copied().unwrap_or(0);
                sure.extend((0..done).map(|s| v.n << 32 | s));
                maybe.insert(v.n << 32 | done);
            } else {
                consumer_kills += 1;
                got.extend(words.iter().skip(2).copied().take_while(|&id| id != 0));
            }
            std::fs::remove_file(&v.log).unwrap();
        }
        let st = Queue::status(&d, "q").unwrap();
        let mut dup = got.clone();
        dup.sort_unstable();
        let dups: Vec<_> = dup.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
        assert!(dups.is_empty(), "delivered twice: {dups:x?}");
        let got: HashSet<u64> = got.into_iter().collect();
        let sure_set: HashSet<u64> = sure.iter().copied().collect();
        for id in &got {
            assert!(sure_set.contains(id) || maybe.contains(id), "received {id:#x}, which was never sent");
        }
        let missing: Vec<u64> = sure.iter().copied().filter(|id| !got.contains(id)).collect();
        println!(
            "{iterations} kills ({producer_kills} producers, {consumer_kills} consumers) in {:?}: {} messages received, {} lost with killed consumers ({} counted mid-receive), {} abandoned cells, max surviving-consumer gap {:?}",
            started.elapsed(),
            got.len(),
            missing.len(),
            st.lost,
            st.abandoned,
            *max_gap.lock().unwrap(),
        );
        assert!(
            missing.len() as u64 <= consumer_kills,
            "lost {} messages with only {consumer_kills} consumer kills",
            missing.len()
        );
        assert!(st.lost <= consumer_kills);
        assert!(st.lost <= missing.len() as u64, "every counted loss is a missing message");
        assert!(st.abandoned <= producer_kills);
        assert_eq!(st.depth, 0, "the queue drained");
        assert!(*max_gap.lock().unwrap() < Duration::from_secs(2), "the surviving consumer was wedged");
        // The survivors are gone, the victims dead: nobody is counted live, and every entry
        // left behind is reclaimable.
        assert_eq!((st.producers, st.consumers), (0, 0));
        q.reclaim_dead();
        assert_eq!(q.reclaim_dead(), 0);
    });
    drop(q);
}
