//! A stream's shared words are untrusted: a live reader in its own process keeps calling
//! every read verb with a short timeout, and a live writer every write verb, while this
//! process writes 0, 1, max, max - 1, random and near-honest values into every control word
//! (both positions and event words, the endpoints' participant entries) and record headers
//! in the ring, tens of thousands of times. Checked: every call returns within its timeout
//! plus a generous slack, no process dies by a signal, output stays bounded; once the words
//! are restored and the endpoints re-attached, records flow again, in order, intact.
//! Seed: SHMBUS_SEED.

#![cfg(not(loom))]

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::hostile;
use common::{child_command, child_role, wait_with_deadline, Rng, Scratch};
use shmbus::stream::{
    Stream, StreamConfig, StreamRecvTimeoutError, StreamSendTimeoutError, StreamTryRecvError, StreamTrySendError,
};
use shmbus::{Domain, WaitSet};

mod fuzz_body {
    include!("../../../fuzz/fuzz_targets/stream_state_body.rs");
}

const NAME: &str = "hostile";
/// segment.rs: header page, then 128 × 64-byte participant entries, then the kind area.
const PARTICIPANTS: u64 = 4096;
const KIND: u64 = 4096 + 128 * 64 + 128 * 512;
/// stream/protocol.rs: `head` and its event word on one 128-byte line, `tail` on the next.
const HEAD: u64 = KIND;
const TAIL: u64 = KIND + 128;
const TIMEOUT: Duration = Duration::from_millis(20);
const SLACK: Duration = Duration::from_secs(2);
/// Records the re-attached writer sends after the restore, and the reader must get.
const AFTER: u64 = 100;

fn page() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as u64 }
}

/// The ring data's file offset: the first page boundary after the control block.
fn ring_off() -> u64 {
    (KIND + 256).div_ceil(page()) * page()
}

fn write_u64(f: &std::fs::File, off: u64, v: u64) {
    f.write_all_at(&v.to_le_bytes(), off).unwrap();
}

fn read_u64(f: &std::fs::File, off: u64) -> u64 {
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, off).unwrap();
    u64::from_le_bytes(b)
}

fn hostile_value(rng: &mut Rng, now: u64) -> u64 {
    match rng.below(9) {
        0 => 0,
        1 => 1,
        2 => u64::MAX,
        3 => u64::MAX - 1,
        4 => rng.next(),
        5 => rng.below(8192),
        6 => now.wrapping_add(8 * rng.below(64)),
        7 => now.wrapping_sub(8 * rng.below(64)),
        _ => 1 << rng.below(64),
    }
}

fn marker(root: &Path, name: &str) -> PathBuf {
    root.join(name)
}

fn wait_for(path: &Path) {
    let end = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(Instant::now() < end, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let r = f();
    let took = start.elapsed();
    if took > TIMEOUT + SLACK {
        println!("SLOW {what} took {took:?}");
        std::process::exit(4);
    }
    r
}

// ---------------------------------------------------------------------------------------
// Children

#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    let root = PathBuf::from(std::env::var("SHMBUS_ROOT").unwrap());
    let d = Domain::with_root("h", &root).unwrap();
    match role.as_str() {
        "reader" => reader(&d, &root),
        "writer" => writer(&d, &root),
        other => panic!("unknown child role {other}"),
    }
}

fn reader(d: &Domain, root: &Path) {
    let mut r = Stream::open(d, NAME).unwrap().reader().unwrap();
    std::fs::write(marker(root, "reader-ready"), b"").unwrap();
    let mut ws = WaitSet::new();
    let mut buf = Vec::new();
    let (mut calls, mut ok, mut corrupt, mut disconnected) = (0u64, 0u64, 0u64, 0u64);
    while !marker(root, "quiesce").exists() {
        for i in 0..32 {
            calls += 1;
            let res: Result<usize, StreamTryRecvError> = match i % 4 {
                0 => timed("recv_ref_timeout", || {
                    r.recv_ref_timeout(TIMEOUT)
                        .map(|rec| {
                            let n = rec.len();
                            rec.consume();
                            n
                        })
                        .map_err(|e| match e {
                            StreamRecvTimeoutError::Corrupt(c) => StreamTryRecvError::Corrupt(c),
                            StreamRecvTimeoutError::Disconnected => StreamTryRecvError::Disconnected,
                            _ => StreamTryRecvError::Empty,
                        })
                }),
                1 => timed("try_recv_ref", || r.try_recv_ref().map(|rec| rec.len())),
                2 => timed("recv_into_timeout", || {
                    r.recv_into_timeout(&mut buf, TIMEOUT).map_err(|e| match e {
                        StreamRecvTimeoutError::Corrupt(c) => StreamTryRecvError::Corrupt(c),
                        StreamRecvTimeoutError::Disconnected => StreamTryRecvError::Disconnected,
                        _ => StreamTryRecvError::Empty,
                    })
                }),
                _ => timed("wait set", || {
                    ws.wait_timeout(&[&r], TIMEOUT).map(|_| 0).map_err(|_| StreamTryRecvError::Empty)
                }),
            };
            match res {
                Ok(_) => ok += 1,
                Err(StreamTryRecvError::Corrupt(_)) => corrupt += 1,
                Err(StreamTryRecvError::Disconnected) => {
                    disconnected += 1;
                    // Empty with the writer's entry scribbled: do not spin on it.
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(_) => {}
            }
        }
    }
    drop(r);
    std::fs::write(marker(root, "reader-closed"), b"").unwrap();
    wait_for(&marker(root, "restored"));
    let mut r = Stream::open(d, NAME).unwrap().reader().expect("the first re-attach works");
    let mut after = 0u64;
    let end = Instant::now() + Duration::from_secs(20);
    while after < AFTER && Instant::now() < end {
        match timed("recv_into_timeout", || r.recv_into_timeout(&mut buf, Duration::from_millis(100))) {
            Ok(_) => {
                assert_eq!(buf, format!("ok-{after}").as_bytes(), "record {after} after the restore");
                after += 1;
            }
            Err(StreamRecvTimeoutError::Timeout | StreamRecvTimeoutError::Disconnected) => {}
            Err(e) => panic!("after the restore: {e}"),
        }
    }
    println!("reader calls={calls} ok={ok} corrupt={corrupt} disconnected={disconnected} after={after}");
}

fn writer(d: &Domain, root: &Path) {
    let mut w = Stream::open(d, NAME).unwrap().writer().unwrap();
    std::fs::write(marker(root, "writer-ready"), b"").unwrap();
    let (mut calls, mut ok, mut corrupt) = (0u64, 0u64, 0u64);
    let mut n = 0u64;
    while !marker(root, "quiesce").exists() {
        for i in 0..32 {
            calls += 1;
            n += 1;
            let data = format!("w{n}");
            let res = match i % 3 {
                0 => timed("try_send", || w.try_send(data.as_bytes())),
                1 => timed("send_timeout", || {
                    w.send_timeout(data.as_bytes(), TIMEOUT).map_err(|e| match e {
                        StreamSendTimeoutError::Corrupt(c) => StreamTrySendError::Corrupt(c),
                        _ => StreamTrySendError::Disconnected,
                    })
                }),
                _ => timed("try_loan", || {
                    w.try_loan(1000).map(|mut l| {
                        l.fill(7);
                        l.truncate(10);
                        l.send()
                    })
                }),
            };
            match res {
                Ok(()) => ok += 1,
                Err(StreamTrySendError::Corrupt(_)) => corrupt += 1,
                Err(_) => std::thread::sleep(Duration::from_micros(100)),
            }
        }
    }
    drop(w);
    std::fs::write(marker(root, "writer-closed"), b"").unwrap();
    wait_for(&marker(root, "restored"));
    let mut w = Stream::open(d, NAME).unwrap().writer().expect("the first re-attach works");
    for i in 0..AFTER {
        timed("send_timeout", || w.send_timeout(format!("ok-{i}").as_bytes(), Duration::from_secs(1)))
            .unwrap_or_else(|e| panic!("after the restore, record {i}: {e}"));
    }
    println!("writer calls={calls} ok={ok} corrupt={corrupt}");
    wait_for(&marker(root, "done"));
}

fn summary(out: &str, tag: &str) -> String {
    let at = out.find(tag).unwrap_or_else(|| panic!("no {tag:?} summary in {out:?}"));
    out[at..].lines().next().unwrap().to_owned()
}

fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {name} in {line:?}"))
        .parse()
        .unwrap()
}

#[test]
fn live_endpoints_survive_scribbled_control_words() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("hostile-stream");
    let root = s.path().to_owned();
    let d = Domain::with_root("h", &root).unwrap();
    drop(
        Stream::create_or_open(&d, NAME, &StreamConfig::default().capacity(page() as usize)).unwrap().writer().unwrap(),
    );
    let path = d.channel_path(NAME).unwrap();
    let env = [("SHMBUS_ROOT", root.display().to_string())];
    let mut reader = child_command("child_entry", "reader", &env).spawn().unwrap();
    let mut writer = child_command("child_entry", "writer", &env).spawn().unwrap();
    wait_for(&marker(&root, "reader-ready"));
    wait_for(&marker(&root, "writer-ready"));

    let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    // Positions, event words (as 8-byte writes over the word and its padding), the two
    // endpoint entries (owner word, start time, role, recovery words).
    let mut words = vec![HEAD, HEAD + 8, TAIL, TAIL + 8];
    for e in 0..2 {
        let base = PARTICIPANTS + 64 * e;
        words.extend((0..8).map(|w| base + 8 * w));
    }
    let ring = ring_off();
    let cap = page();
    let mut rng = Rng::from_env_or_clock();
    let scribbles = 30_000;
    let start = Instant::now();
    for n in 0..scribbles {
        let off = match n % 4 {
            // A record header (or payload word) somewhere in the ring.
            0 => ring + 8 * rng.below(cap / 8),
            // The positions most of the time: they are what the hot paths check.
            1 | 2 => [HEAD, TAIL][rng.below(2) as usize],
            _ => words[rng.below(words.len() as u64) as usize],
        };
        // The endpoint entries' owner words only rarely, so that both endpoints stay
        // registered most of the time (and are taken for dead some of the time).
        if off < KIND && off % 64 == 0 && rng.below(8) != 0 {
            continue;
        }
        let v = hostile_value(&mut rng, read_u64(&f, off));
        write_u64(&f, off, v);
        if n % 16 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    eprintln!("{scribbles} scribbles in {:?}", start.elapsed());
    std::fs::write(marker(&root, "quiesce"), b"").unwrap();
    wait_for(&marker(&root, "reader-closed"));
    wait_for(&marker(&root, "writer-closed"));
    // Restore: an empty ring and free endpoint entries.
    f.write_all_at(&[0u8; 256], KIND).unwrap();
    f.write_all_at(&[0u8; 128], PARTICIPANTS).unwrap();
    std::fs::write(marker(&root, "restored"), b"").unwrap();
    let st_reader = wait_with_deadline(&mut reader, 40, "reader");
    std::fs::write(marker(&root, "done"), b"").unwrap();
    let st_writer = wait_with_deadline(&mut writer, 40, "writer");
    let out_r = std::io::read_to_string(reader.stdout.take().unwrap()).unwrap();
    let out_w = std::io::read_to_string(writer.stdout.take().unwrap()).unwrap();
    eprintln!("{out_r}{out_w}");
    assert!(st_reader.success(), "reader: {st_reader:?} (a signal or a slow call)\n{out_r}");
    assert!(st_writer.success(), "writer: {st_writer:?}\n{out_w}");
    assert!(out_r.len() + out_w.len() < 64 << 10, "unbounded output");
    let r = summary(&out_r, "reader calls=");
    let w = summary(&out_w, "writer calls=");
    assert!(field(&r, "calls") > 200, "{r}");
    assert!(field(&w, "calls") > 200, "{w}");
    // Each corrupt state is reported once: at most one report per scribble (and its reader
    // tail updates), not one per call.
    assert!(field(&w, "corrupt") < 2 * scribbles, "{w}");
    assert!(field(&r, "corrupt") < 2 * scribbles, "{r}");
    assert_eq!(field(&r, "after"), AFTER, "records after the restore: {r}");
}

/// Replays the `stream_state` fuzz corpus and random mutations of it (bytes changed, or junk
/// appended so that later words are reached too). Seed: SHMBUS_FUZZ_SEED.
#[test]
fn stream_state_fuzz_corpus_and_mutations_are_survived() {
    if child_role().is_some() {
        return;
    }
    hostile::replay_corpus("stream_state", 5, 100, 15, fuzz_body::exercise_stream_state);
}

/// Each control word set to 0, 1, max, max − 1 and a random value in turn, under a reader and
/// a writer in this process: every verb returns in time, each corrupt state is reported at
/// most once per endpoint, and once the word is restored (and the endpoints re-attached
/// when their own positions no longer match) records flow again.
#[test]
fn every_control_word_at_each_edge_value() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("hostile-stream-edges");
    let d = s.domain("h");
    let cap = page() as usize;
    let mut w = Stream::create_or_open(&d, NAME, &StreamConfig::default().capacity(cap)).unwrap().writer().unwrap();
    let mut r = Stream::open(&d, NAME).unwrap().reader().unwrap();
    let f = std::fs::OpenOptions::new().read(true).write(true).open(d.channel_path(NAME).unwrap()).unwrap();
    let mut rng = Rng::from_env_or_clock();
    let mut buf = Vec::new();
    let mut n = 0u64;
    for off in [HEAD, HEAD + 8, TAIL, TAIL + 8, ring_off(), ring_off() + 8] {
        for v in [0, 1, u64::MAX, u64::MAX - 1, rng.next(), 8 * rng.below(1 << 20)] {
            // Something in the ring, so that the reader has a record to look at.
            n += 1;
            let _ = w.try_send(format!("r{n}").as_bytes());
            let old = read_u64(&f, off);
            write_u64(&f, off, v);
            let (mut r_corrupt, mut w_corrupt) = (0, 0);
            for _ in 0..5 {
                let start = Instant::now();
                match r.recv_into_timeout(&mut buf, Duration::from_millis(5)) {
                    Err(StreamRecvTimeoutError::Corrupt(_)) => r_corrupt += 1,
                    Ok(_) | Err(StreamRecvTimeoutError::Timeout | StreamRecvTimeoutError::Disconnected) => {}
                    Err(e) => {
                        panic!("word {off} = {v}: reported {e}, but nothing truncated the file")
                    }
                }
                if let Err(StreamSendTimeoutError::Corrupt(_)) = w.send_timeout(b"x", Duration::from_millis(5)) {
                    w_corrupt += 1;
                }
                let _ = (r.try_recv_ref().map(|rec| rec.consume()), w.try_send(b"y"));
                assert!(start.elapsed() < SLACK, "word {off} = {v}: calls took {:?}", start.elapsed());
            }
            assert!(r_corrupt <= 1 && w_corrupt <= 1, "word {off} = {v}: reported {r_corrupt} / {w_corrupt} times");
            write_u64(&f, off, old);
            // Re-attach both ends to a ring whose positions are consistent again.
            drop((r, w));
            let (head, tail) = (read_u64(&f, HEAD), read_u64(&f, TAIL));
            if tail > head || head - tail > cap as u64 || (head | tail) % 8 != 0 {
                write_u64(&f, HEAD, 0);
                write_u64(&f, TAIL, 0);
            }
            w = Stream::open(&d, NAME).unwrap().writer().unwrap();
            r = Stream::open(&d, NAME).unwrap().reader().unwrap();
            // Drain what is there (records written before may be garbage now), then check
            // a fresh record arrives intact.
            loop {
                match r.try_recv_ref() {
                    Ok(rec) => rec.consume(),
                    Err(StreamTryRecvError::Corrupt(_)) => {
                        // A record header the scribble broke: skip the rest of the ring.
                        drop(r);
                        write_u64(&f, TAIL, read_u64(&f, HEAD));
                        r = Stream::open(&d, NAME).unwrap().reader().unwrap();
                        break;
                    }
                    Err(_) => break,
                }
            }
            w.send_timeout(b"fresh", Duration::from_secs(1)).unwrap();
            r.recv_into_timeout(&mut buf, Duration::from_secs(1)).unwrap();
            assert_eq!(buf, b"fresh", "word {off} = {v}: after the restore");
        }
    }
}
