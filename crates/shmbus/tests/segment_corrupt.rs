//! Shared memory is untrusted input: files that are not segments, cut short, of the wrong
//! kind or version, with garbage headers, or scribbled over while in use, give typed errors
//! (or garbage data from a hostile peer), never a panic, a hang or an out-of-bounds access.

#![cfg(not(loom))]

mod common;

use std::io::{Seek, SeekFrom, Write};
use std::time::{Duration, Instant};

use common::{Rng, Scratch};
use shmbus::stream::{Stream, StreamConfig};
use shmbus::topic::{Topic, TopicConfig};
use shmbus::{Kind, OpenError};

/// Header layout (see segment.rs): magic 0..8, version 8..12, kind 12..16, ready 16..20,
/// crc 20..24, size 24..32, params 32..96, creator 96..120, payload type 120..200, schema
/// record length 200..208.
const HEADER_LEN: usize = 208;

fn read_header(path: &std::path::Path) -> Vec<u8> {
    std::fs::read(path).unwrap()[..HEADER_LEN].to_vec()
}

/// Writes `header` back with a correct checksum (a well-formed lie).
fn write_header_with_crc(path: &std::path::Path, mut header: Vec<u8>) {
    let mut zeroed = header.clone();
    zeroed[16..24].fill(0);
    let crc = crc32c::crc32c(&zeroed);
    header[20..24].copy_from_slice(&crc.to_le_bytes());
    write_at(path, 0, &header);
}

fn write_at(path: &std::path::Path, offset: u64, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(bytes).unwrap();
}

fn fresh_topic(s: &Scratch, name: &str) -> std::path::PathBuf {
    let d = s.domain("c");
    Topic::create_or_open(&d, name, &TopicConfig::default().max_message_len(256).history(8)).unwrap();
    d.channel_path(name).unwrap()
}

#[test]
fn a_file_that_is_not_a_segment() {
    let s = Scratch::new("notseg");
    let d = s.domain("c");
    std::fs::create_dir_all(d.dir()).unwrap();
    let mut rng = Rng(99);
    for (name, len) in [("big", 40_000usize), ("small", 100), ("empty", 0)] {
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        std::fs::write(d.channel_path(name).unwrap(), bytes).unwrap();
        let e = Topic::open(&d, name).unwrap_err();
        assert!(matches!(e, OpenError::NotASegment { .. }), "{name}: {e}");
        assert!(e.to_string().contains("not a shmbus segment"), "{e}");
    }
    // A directory in the way.
    std::fs::create_dir(d.channel_path("dir").unwrap()).unwrap();
    assert!(Topic::open(&d, "dir").is_err());
}

#[test]
fn a_truncated_segment() {
    let s = Scratch::new("trunc");
    let path = fresh_topic(&s, "t");
    let full = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(full - 4096).unwrap();
    match Topic::open(&s.domain("c"), "t").unwrap_err() {
        OpenError::Truncated { size, expected, .. } => assert_eq!((size, expected), (full - 4096, full)),
        e => panic!("{e}"),
    }
    // Cut inside the header area, magic intact.
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(1000).unwrap();
    assert!(matches!(Topic::open(&s.domain("c"), "t").unwrap_err(), OpenError::Truncated { .. }));
}

#[test]
fn the_wrong_kind() {
    let s = Scratch::new("kind");
    let d = s.domain("c");
    let _w =
        Stream::create_or_open(&d, "st", &StreamConfig::default().capacity(1 << 16)).and_then(|s| s.writer()).unwrap();
    let e = Topic::open(&d, "st").unwrap_err();
    assert!(matches!(e, OpenError::WrongKind { found: Some(Kind::Stream), expected: Kind::Topic, .. }), "{e}");
    assert!(e.to_string().contains("is a stream, not a topic"), "{e}");
    // An unknown kind number, with a valid checksum.
    let path = fresh_topic(&s, "t");
    let mut h = read_header(&path);
    h[12..16].copy_from_slice(&77u32.to_le_bytes());
    write_header_with_crc(&path, h);
    assert!(matches!(Topic::open(&d, "t").unwrap_err(), OpenError::Corrupt { .. }));
}

#[test]
fn another_format_version() {
    let s = Scratch::new("version");
    let path = fresh_topic(&s, "t");
    let mut h = read_header(&path);
    let newer = shmbus::segment::FORMAT_VERSION + 1;
    h[8..12].copy_from_slice(&newer.to_le_bytes());
    write_header_with_crc(&path, h);
    match Topic::open(&s.domain("c"), "t").unwrap_err() {
        OpenError::VersionMismatch { found, supported, .. }
            if found == newer && supported == shmbus::segment::FORMAT_VERSION => {}
        e => panic!("{e}"),
    }
}

#[test]
fn header_fields_overwritten_with_garbage() {
    let s = Scratch::new("garbage");
    let d = s.domain("c");
    let path = fresh_topic(&s, "t");
    let pristine = read_header(&path);
    // Without fixing the checksum: always refused.
    let mut h = pristine.clone();
    h[33] ^= 0x40;
    write_at(&path, 0, &h);
    let e = Topic::open(&d, "t").unwrap_err();
    assert!(matches!(e, OpenError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("checksum"), "{e}");
    // With the checksum fixed but absurd parameters: refused by layout validation.
    for (at, value) in [(32usize, 0u64), (32, 1 << 50), (40, 0), (40, u64::MAX), (48, u64::MAX), (24, 12345)] {
        let mut h = pristine.clone();
        h[at..at + 8].copy_from_slice(&value.to_le_bytes());
        write_header_with_crc(&path, h);
        let e = Topic::open(&d, "t").unwrap_err();
        assert!(matches!(e, OpenError::Corrupt { .. } | OpenError::Truncated { .. }), "field at {at} = {value}: {e}");
    }
    // Random garbage over the header, thousands of times: an error or a valid open, no panic.
    let mut rng = Rng::from_env_or_clock();
    for _ in 0..3000 {
        let mut h = pristine.clone();
        for _ in 0..1 + rng.below(6) {
            let i = rng.below(HEADER_LEN as u64) as usize;
            h[i] = rng.next() as u8;
        }
        if rng.below(2) == 0 {
            write_header_with_crc(&path, h);
        } else {
            write_at(&path, 0, &h);
        }
        let _ = Topic::open(&d, "t");
    }
    write_at(&path, 0, &pristine);
    Topic::open(&d, "t").unwrap();
}

#[test]
fn scribbling_over_a_live_topic_never_panics_or_hangs() {
    let s = Scratch::new("scribble");
    let d = s.domain("c");
    let t = Topic::create_or_open(&d, "t", &TopicConfig::default().max_message_len(256).history(8)).unwrap();
    let path = d.channel_path("t").unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    sub.set_pin_budget(2);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // A hostile peer: random bytes over header, participants and the whole control area.
    let vandal = {
        let stop = stop.clone();
        let path = path.clone();
        std::thread::spawn(move || {
            let mut rng = Rng(7);
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            use std::os::unix::fs::FileExt;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let at = rng.below(len.min(64 * 1024));
                let bytes: Vec<u8> = (0..1 + rng.below(64)).map(|_| rng.next() as u8).collect();
                let _ = f.write_at(&bytes, at);
            }
        })
    };
    let until = Instant::now() + Duration::from_millis(500);
    let mut calls = 0u64;
    while Instant::now() < until {
        let _ = p.send(b"payload");
        if let Ok(mut loan) = p.loan() {
            loan[0] = 1;
            loan.truncate(1);
            let _ = loan.send();
        }
        let _ = sub.try_recv();
        let _ = sub.get(sub.next_seq().saturating_sub(3));
        let _ = sub.latest();
        if let Ok(sample) = sub.try_recv_ref() {
            assert!(sample.len() <= 256, "a sample longer than the slot");
        }
        let _ = sub.recv_timeout(Duration::from_micros(100));
        let _ = Topic::status(&d, "t");
        let _ = t.reclaim_dead();
        calls += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    vandal.join().unwrap();
    assert!(calls > 10, "calls stalled under a hostile peer");
    // Re-opening the scribbled file is an error or a valid topic, never a panic.
    let _ = Topic::open(&d, "t");
}

#[test]
fn no_permission_is_a_permission_error() {
    let s = Scratch::new("perm");
    let d = s.domain("c");
    Topic::create_or_open(&d, "secret", &TopicConfig::default().max_message_len(8).history(1)).unwrap();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // Root ignores file modes: try as `nobody` in a child process.
        use std::os::unix::process::CommandExt;
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["permission_child", "--exact", "--nocapture", "--include-ignored"])
            .env("SHMBUS_PERM_ROOT", s.path())
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("@@permission denied ok"), "{text}");
    } else {
        let path = d.channel_path("secret").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
        let e = Topic::open(&d, "secret").unwrap_err();
        assert!(matches!(e, OpenError::PermissionDenied { .. }), "{e}");
    }
}

/// Runs as `nobody` (see above).
#[test]
fn permission_child() {
    let Ok(root) = std::env::var("SHMBUS_PERM_ROOT") else { return };
    let d = shmbus::Domain::with_root("c", root).unwrap();
    let e = Topic::open(&d, "secret").unwrap_err();
    assert!(matches!(e, OpenError::PermissionDenied { .. }), "{e}");
    assert!(e.to_string().contains("permission denied"), "{e}");
    println!("@@permission denied ok");
}

/// The `segment_open` fuzz target's harness (one copy, shared with the fuzz crate).
mod fuzz_harness {
    include!("../../../fuzz/fuzz_targets/segment_open_body.rs");
}

/// Replays the `segment_open` fuzz corpus (valid segments of every kind and the inputs that
/// once crashed it), then random mutations of those, through the fuzz target's own harness:
/// open, inspect and read as every kind must never panic (this build checks overflow) or
/// fault. Seed: SHMBUS_SEED.
#[test]
fn segment_fuzz_corpus_and_mutations_are_survived() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/segment_open");
    let mut corpus: Vec<Vec<u8>> =
        std::fs::read_dir(&dir).unwrap().map(|e| std::fs::read(e.unwrap().path()).unwrap()).collect();
    corpus.sort();
    assert!(corpus.len() >= 5, "the corpus holds a valid segment of every kind and the regressions");
    for input in &corpus {
        fuzz_harness::exercise_segment(input);
    }
    let mut rng = Rng::from_env_or_clock();
    for _ in 0..400 {
        let mut input = corpus[rng.below(corpus.len() as u64) as usize].clone();
        input[0] = rng.below(2) as u8; // fix the checksum up, or not
        let len = input.len() as u64;
        for _ in 0..1 + rng.below(8) {
            // Mostly the header, the control words and the participant table; sometimes anywhere.
            let at = if rng.below(4) == 0 { rng.below(len) } else { rng.below(len.min(16 << 10)) };
            input[at as usize] = rng.below(256) as u8;
        }
        fuzz_harness::exercise_segment(&input);
    }
}

#[test]
fn a_topic_policy_word_out_of_range_is_a_typed_error() {
    let s = Scratch::new("seg-policy");
    let path = fresh_topic(&s, "t");
    let d = s.domain("c");
    // params[3] is the delivery policy (0 overwrite, 1 block, 2 fail), params[4] the reliable
    // timeout in ms: out of range, with a correct checksum.
    for (param, value) in [(3, 3u64), (3, u64::MAX), (4, u64::MAX)] {
        let mut h = read_header(&path);
        let original = h.clone();
        h[32 + 8 * param..40 + 8 * param].copy_from_slice(&value.to_le_bytes());
        write_header_with_crc(&path, h);
        for e in [Topic::open(&d, "t").unwrap_err(), Topic::status(&d, "t").unwrap_err()] {
            assert!(matches!(e, OpenError::Corrupt { .. } | OpenError::LayoutMismatch { .. }), "{param}={value}: {e}");
        }
        write_header_with_crc(&path, original);
    }
    assert_eq!(Topic::open(&d, "t").unwrap().policy(), shmbus::topic::DeliveryPolicy::Overwrite);
}
