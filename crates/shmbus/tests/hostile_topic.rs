//! A topic's shared words are untrusted: a live subscriber in its own process keeps calling
//! every receive verb with a short timeout while this process writes 0, 1, max, max - 1,
//! random and near-honest values into every control word of the segment (positions, index,
//! slot guard and reader lines, participant roles and recovery words) many thousands of
//! times, with an honest publisher running. Checked: every call returns within its timeout
//! plus a generous slack, no process dies by a signal, output stays bounded; once the words
//! are restored, the same publisher and subscriber work again.
//!
//! Also: garbage pin bits and writer marks never block publishers for good, a real pin is
//! still honoured, and a cursor far beyond the end (or a corrupt `tail`) is reported once,
//! never as an endless run of gaps. Seed: SHMBUS_SEED.

#![cfg(not(loom))]

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::hostile;
use common::{child_command, child_role, wait_with_deadline, Rng, Scratch};
use shmbus::topic::{Topic, TopicConfig, TopicRecvTimeoutError, TopicSendError, TopicTryRecvError};
use shmbus::{Domain, WaitSet};

mod fuzz_body {
    include!("../../../fuzz/fuzz_targets/topic_state_body.rs");
}

const NAME: &str = "hostile";
/// Where the kind area starts in the file (segment.rs: header page, then 128 × 64-byte
/// participant entries).
const KIND: u64 = 4096 + 128 * 64 + 128 * 512;
const PARTICIPANTS: u64 = 4096;
/// The test topic: 32-byte slots (inline), history 8, 4 spare: 12 slots, 64 index words.
const SLOTS: u64 = 12;
const INDEX_LEN: u64 = 64;
/// topic/layout.rs: control block 512 bytes (four 128-byte line pairs), then the index, then
/// 128-byte slot headers.
const INDEX_OFF: u64 = KIND + 512;
const HEADERS_OFF: u64 = KIND + 1024;
/// The control words: tail, newest committed, next slot, event word.
const TAIL: u64 = KIND;
const COMMITTED: u64 = KIND + 128;
/// Receive timeout of the subscriber's calls, and the slack a call may take beyond it.
const TIMEOUT: Duration = Duration::from_millis(20);
const SLACK: Duration = Duration::from_secs(2);

fn config() -> TopicConfig {
    TopicConfig::default().max_message_len(32).history(8).spare_slots(4)
}

/// Every control word's file offset.
fn control_words() -> Vec<u64> {
    let mut w = vec![TAIL, COMMITTED, KIND + 256, KIND + 384];
    w.extend((0..INDEX_LEN).map(|i| INDEX_OFF + 8 * i));
    for s in 0..SLOTS {
        let h = HEADERS_OFF + 128 * s;
        w.extend([h, h + 8, h + 16, h + 64, h + 72, h + 80]);
    }
    // Participant entries: role and the five recovery words of the first eight (the two
    // endpoints of this test are among them), and the owner word of the unused ones.
    for i in 0..8 {
        let e = PARTICIPANTS + 64 * i;
        w.extend([e + 16, e + 24, e + 32, e + 40, e + 48, e + 56]);
    }
    w
}

fn owner_words_of_unused() -> Vec<u64> {
    (4..8).map(|i| PARTICIPANTS + 64 * i).collect()
}

fn read_u64(f: &std::fs::File, off: u64) -> u64 {
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, off).unwrap();
    u64::from_le_bytes(b)
}

fn write_u64(f: &std::fs::File, off: u64, v: u64) {
    f.write_all_at(&v.to_le_bytes(), off).unwrap();
}

/// A value for a control word: the classic edge values, random ones, and values near what
/// is there now (which get past the simple range checks).
fn hostile_value(rng: &mut Rng, now: u64) -> u64 {
    match rng.below(9) {
        0 => 0,
        1 => 1,
        2 => u64::MAX,
        3 => u64::MAX - 1,
        4 => rng.next(),
        5 => rng.below(256),
        6 => now.wrapping_add(rng.below(64)),
        7 => now.wrapping_sub(rng.below(64)),
        _ => 1 << rng.below(64),
    }
}

fn marker(root: &Path, name: &str) -> PathBuf {
    root.join(name)
}

// ---------------------------------------------------------------------------------------
// Children

#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    let root = PathBuf::from(std::env::var("SHMBUS_ROOT").unwrap());
    let d = Domain::with_root("h", &root).unwrap();
    match role.as_str() {
        "subscriber" => subscriber(&d, &root),
        "publisher" => publisher(&d, &root),
        other => panic!("unknown child role {other}"),
    }
}

fn subscriber(d: &Domain, root: &Path) {
    let t = Topic::open(d, NAME).unwrap();
    let sub = t.subscriber().unwrap();
    std::fs::write(marker(root, "sub-ready"), b"").unwrap();
    let mut ws = WaitSet::new();
    let mut buf = Vec::new();
    let mut rng = Rng(0x5eed);
    let (mut calls, mut ok, mut lagged, mut corrupt, mut ok_after, mut max) =
        (0u64, 0u64, 0u64, 0u64, 0u64, Duration::ZERO);
    while !marker(root, "done").exists() {
        let restored = marker(root, "restored").exists();
        for i in 0..64u64 {
            let start = Instant::now();
            let got = match i % 8 {
                0 => sub.recv_into_timeout(&mut buf, TIMEOUT).map(|m| m.len()).map_err(Got::from),
                1 => sub.recv_ref_timeout(TIMEOUT).map(|s| s.len()).map_err(Got::from),
                2 => sub.try_recv().map(|m| m.data().len()).map_err(Got::from),
                3 => sub.try_recv_ref().map(|s| s.len()).map_err(Got::from),
                4 => sub.get(t.last_seq().wrapping_sub(rng.below(12))).map(|m| m.data().len()).map_err(|_| Got::Other),
                5 => sub.latest().map(|m| m.data().len()).map_err(|_| Got::Other),
                6 => sub.get_ref(rng.next() >> rng.below(64)).map(|s| s.len()).map_err(|_| Got::Other),
                _ => ws.wait_timeout(&[&sub], TIMEOUT).map(|_| 0).map_err(|_| Got::Other),
            };
            let took = start.elapsed();
            max = max.max(took);
            if took > TIMEOUT + SLACK {
                println!("SLOW verb {} took {took:?}", i % 8);
                std::process::exit(4);
            }
            calls += 1;
            match got {
                Ok(len) => {
                    assert!(len <= 32, "a message longer than the slot size");
                    if i % 8 < 4 {
                        ok += 1;
                        ok_after += restored as u64;
                    }
                }
                Err(Got::Lagged) => lagged += 1,
                Err(Got::Corrupt) => corrupt += 1,
                Err(Got::Other) => {}
            }
        }
    }
    println!(
        "subscriber calls={calls} ok={ok} corrupt={corrupt} lagged={lagged} ok_after={ok_after} max_ms={}",
        max.as_millis()
    );
}

/// What a receive that returned no message said.
enum Got {
    Lagged,
    Corrupt,
    Other,
}

impl From<TopicRecvTimeoutError> for Got {
    fn from(e: TopicRecvTimeoutError) -> Got {
        match e {
            TopicRecvTimeoutError::Lagged { .. } => Got::Lagged,
            TopicRecvTimeoutError::Corrupt(_) => Got::Corrupt,
            _ => Got::Other,
        }
    }
}

impl From<TopicTryRecvError> for Got {
    fn from(e: TopicTryRecvError) -> Got {
        match e {
            TopicTryRecvError::Lagged { .. } => Got::Lagged,
            TopicTryRecvError::Corrupt(_) => Got::Corrupt,
            _ => Got::Other,
        }
    }
}

fn publisher(d: &Domain, root: &Path) {
    let t = Topic::open(d, NAME).unwrap();
    let mut p = t.publisher().unwrap();
    std::fs::write(marker(root, "pub-ready"), b"").unwrap();
    let (mut ok, mut all_pinned, mut ok_after) = (0u64, 0u64, 0u64);
    let mut n = 0u64;
    while !marker(root, "done").exists() {
        let restored = marker(root, "restored").exists();
        for _ in 0..16 {
            n += 1;
            match p.send(format!("m{n}").as_bytes()) {
                Ok(_) => {
                    ok += 1;
                    if restored {
                        ok_after += 1;
                    }
                }
                Err(TopicSendError::AllPinned { .. }) => all_pinned += 1,
                Err(e) => panic!("publish: {e}"),
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    println!("publisher ok={ok} all_pinned={all_pinned} ok_after={ok_after}");
}

fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {name} in {line:?}"))
        .parse()
        .unwrap()
}

fn wait_for(path: &Path) {
    let end = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(Instant::now() < end, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_live_subscriber_survives_scribbled_control_words() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("hostile-topic");
    let root = s.path().to_owned();
    let d = Domain::with_root("h", &root).unwrap();
    let topic = Topic::create_or_open(&d, NAME, &config()).unwrap();
    let path = d.channel_path(NAME).unwrap();
    let env = [("SHMBUS_ROOT", root.display().to_string())];
    let mut sub = child_command("child_entry", "subscriber", &env).spawn().unwrap();
    let mut publ = child_command("child_entry", "publisher", &env).spawn().unwrap();
    wait_for(&marker(&root, "sub-ready"));
    wait_for(&marker(&root, "pub-ready"));

    let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let words = control_words();
    let owners = owner_words_of_unused();
    let roles: Vec<(u64, u64)> = (0..8).map(|i| PARTICIPANTS + 64 * i + 16).map(|o| (o, read_u64(&f, o))).collect();
    let mut rng = Rng::from_env_or_clock();
    let scribbles = 40_000;
    let start = Instant::now();
    for n in 0..scribbles {
        let off = if n % 16 == 0 {
            owners[rng.below(owners.len() as u64) as usize]
        } else {
            words[rng.below(words.len() as u64) as usize]
        };
        let v = hostile_value(&mut rng, read_u64(&f, off));
        write_u64(&f, off, v);
        if n % 16 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Whole slots of junk now and then: every pin and writer bit set.
        if n % 5000 == 0 {
            for s in 0..SLOTS {
                let h = HEADERS_OFF + 128 * s;
                write_u64(&f, h, u64::MAX);
                write_u64(&f, h + 8, u64::MAX);
                write_u64(&f, h + 16, u64::MAX);
            }
        }
    }
    eprintln!("{scribbles} scribbles in {:?}", start.elapsed());
    // Every slot pinned by garbage, then the words restored: the initial all-zero state
    // for the kind area, zero recovery words and the original roles in the participant table.
    for s in 0..SLOTS {
        write_u64(&f, HEADERS_OFF + 128 * s + 8, u64::MAX);
    }
    std::thread::sleep(Duration::from_millis(50));
    f.write_all_at(&vec![0u8; (HEADERS_OFF - KIND + 128 * SLOTS) as usize], KIND).unwrap();
    for i in 0..8 {
        let e = PARTICIPANTS + 64 * i;
        f.write_all_at(&[0u8; 40], e + 24).unwrap();
    }
    for (o, v) in &roles {
        write_u64(&f, *o, *v);
    }
    for o in &owners {
        write_u64(&f, *o, 0);
    }
    std::fs::write(marker(&root, "restored"), b"").unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::write(marker(&root, "done"), b"").unwrap();

    let st_sub = wait_with_deadline(&mut sub, 30, "subscriber");
    let st_pub = wait_with_deadline(&mut publ, 30, "publisher");
    let out_sub = std::io::read_to_string(sub.stdout.take().unwrap()).unwrap();
    let out_pub = std::io::read_to_string(publ.stdout.take().unwrap()).unwrap();
    eprintln!("{out_sub}{out_pub}");
    assert!(st_sub.success(), "subscriber: {st_sub:?} (a signal or a slow call)\n{out_sub}");
    assert!(st_pub.success(), "publisher: {st_pub:?}\n{out_pub}");
    assert!(out_sub.len() + out_pub.len() < 64 << 10, "unbounded output");
    let summary = |out: &str, tag: &str| -> String {
        let at = out.find(tag).unwrap_or_else(|| panic!("no {tag:?} summary in {out:?}"));
        out[at..].lines().next().unwrap().to_owned()
    };
    let line_sub = &summary(&out_sub, "subscriber calls=");
    let line_pub = &summary(&out_pub, "publisher ok=");
    assert!(field(line_sub, "calls") > 1000, "{line_sub}");
    assert!(field(line_pub, "ok_after") > 0, "publisher never recovered: {line_pub}");
    assert!(field(line_sub, "ok_after") > 0, "subscriber never recovered: {line_sub}");
    // And a newcomer works too.
    let mut p = topic.publisher().unwrap();
    let s2 = topic.subscriber().unwrap();
    let k = p.send(b"after").unwrap();
    assert_eq!(s2.recv_timeout(Duration::from_secs(5)).unwrap().seq(), k);
}

// ---------------------------------------------------------------------------------------
// Targeted cases, in one process

#[test]
fn garbage_pins_and_writer_marks_do_not_block_publishers_and_real_pins_hold() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("hostile-pins");
    let d = s.domain("h");
    let t = Topic::create_or_open(&d, NAME, &config()).unwrap();
    let f = std::fs::OpenOptions::new().read(true).write(true).open(d.channel_path(NAME).unwrap()).unwrap();
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    p.send(b"keep me").unwrap();
    let held = sub.try_recv_ref().unwrap();
    // Every slot: all pin bits set, or a writer mark of an entry nobody holds, or garbage.
    for s in 0..SLOTS {
        let h = HEADERS_OFF + 128 * s;
        write_u64(&f, h + 8, u64::MAX);
        write_u64(&f, h + 16, u64::MAX);
        write_u64(&f, h, [0, 9, 0xdead_beef, u64::MAX][s as usize % 4]);
    }
    for i in 0..200u32 {
        p.send(format!("n{i}").as_bytes()).unwrap_or_else(|e| panic!("publish {i}: {e}"));
        assert_eq!(&*held, b"keep me", "a real pin was overrun");
    }
    drop(held);
    // Junk pin records of our own subscriber name slots: honoured while it lives, but only
    // the slots named (at most 4), so publishing goes on.
    for s in 0..SLOTS {
        write_u64(&f, HEADERS_OFF + 128 * s + 8, u64::MAX);
    }
    for r in 0..4 {
        write_u64(&f, PARTICIPANTS + 64 + 32 + 8 * r, r + 1);
    }
    for i in 0..50u32 {
        p.send(format!("r{i}").as_bytes()).unwrap_or_else(|e| panic!("publish with junk records {i}: {e}"));
    }
    // An untracked subscriber (budget above the records) keeps every pin it really holds.
    let wide = t.subscriber().unwrap();
    wide.set_pin_budget(8);
    wide.seek_latest();
    let a = wide.try_recv_ref().unwrap();
    let a_seq = a.seq();
    let a_bytes = a.to_vec();
    for _ in 0..50 {
        let _ = p.send(b"more");
        assert_eq!(&*a, &a_bytes[..], "pin of {a_seq} overrun");
    }
}

#[test]
fn a_cursor_far_past_the_end_waits_and_a_corrupt_tail_is_reported_once() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("hostile-seek");
    let d = s.domain("h");
    let t = Topic::create_or_open(&d, NAME, &config()).unwrap();
    let f = std::fs::OpenOptions::new().read(true).write(true).open(d.channel_path(NAME).unwrap()).unwrap();
    let mut p = t.publisher().unwrap();
    for _ in 0..3 {
        p.send(b"x").unwrap();
    }
    let sub = t.subscriber().unwrap();
    sub.seek(u64::MAX - 5);
    assert_eq!(sub.next_seq(), 4, "a seek past the end clamps to the next message");
    let start = Instant::now();
    assert_eq!(sub.recv_timeout(Duration::from_millis(50)).unwrap_err(), TopicRecvTimeoutError::Timeout);
    assert!(start.elapsed() < Duration::from_secs(2));
    assert_eq!(sub.recv_timeout(Duration::ZERO).unwrap_err(), TopicRecvTimeoutError::Timeout);
    p.send(b"four").unwrap();
    assert_eq!(sub.recv_timeout(Duration::from_secs(1)).unwrap().seq(), 4);

    // `tail` (and `committed_max`) overwritten with values near the end of the range: one
    // Corrupt, then timeouts; never a gap, let alone a huge one.
    for (tail, cm) in [(u64::MAX - 3, 5), (u64::MAX, u64::MAX), (1 << 62, 1 << 62), (2, 4), (0, 0)] {
        write_u64(&f, TAIL, tail);
        write_u64(&f, COMMITTED, cm);
        let mut corrupt = 0;
        let end = Instant::now() + Duration::from_millis(300);
        while Instant::now() < end {
            let start = Instant::now();
            match sub.recv_timeout(Duration::from_millis(10)) {
                Err(TopicRecvTimeoutError::Corrupt(c)) => {
                    assert_eq!(c.value("tail"), Some(tail));
                    assert!(c.repaired());
                    corrupt += 1;
                }
                Err(TopicRecvTimeoutError::Lagged { missed }) => {
                    assert!(missed <= 64, "gap of {missed} from ({tail}, {cm})")
                }
                Err(TopicRecvTimeoutError::Timeout) | Ok(_) => {}
                Err(e) => panic!("{e}"),
            }
            assert!(start.elapsed() < Duration::from_secs(2), "a 10 ms receive took {:?}", start.elapsed());
        }
        assert!(corrupt <= 1, "({tail}, {cm}) reported {corrupt} times");
        let _ = sub.latest();
        let _ = sub.get(tail);
    }
    // Restored to a consistent state: publishing and receiving go on.
    write_u64(&f, TAIL, 4);
    write_u64(&f, COMMITTED, 4);
    let k = p.send(b"five").unwrap();
    assert_eq!(k, 5);
    // The cursor was moved back with `tail`, so the old messages 1..=4 may come again first.
    let mut got = None;
    for _ in 0..8 {
        match sub.recv_timeout(Duration::from_secs(1)) {
            Ok(m) if m.seq() == 5 => {
                got = Some(m.into_data());
                break;
            }
            Ok(m) => assert!(m.seq() < 5),
            Err(TopicRecvTimeoutError::Corrupt(_) | TopicRecvTimeoutError::Lagged { .. }) => continue,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(got.as_deref(), Some(&b"five"[..]));
}

/// Replays the `topic_state` fuzz corpus and random mutations of it (bytes changed, or junk
/// appended so that later words are reached too). Seed: SHMBUS_FUZZ_SEED.
#[test]
fn topic_state_fuzz_corpus_and_mutations_are_survived() {
    if child_role().is_some() {
        return;
    }
    hostile::replay_corpus("topic_state", 5, 200, 15, fuzz_body::exercise_topic_state);
}

/// The offsets this file scribbles on are the topic's real words: were the layout to move,
/// the tests above would scribble on padding and pass without testing anything.
#[test]
fn the_scribbled_offsets_are_the_topics_words() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("hostile-topic-offsets");
    let d = Domain::with_root("h", s.path()).unwrap();
    let topic = Topic::create_or_open(&d, NAME, &config()).unwrap();
    let mut p = topic.publisher().unwrap();
    for m in [b"one".as_slice(), b"two", b"three"] {
        p.send(m).unwrap();
    }
    let f = std::fs::File::open(d.channel_path(NAME).unwrap()).unwrap();
    assert_eq!(read_u64(&f, TAIL), 3, "tail");
    assert_eq!(read_u64(&f, COMMITTED), 3, "newest committed");
    let seqs: Vec<u64> = (0..SLOTS).map(|s| read_u64(&f, HEADERS_OFF + 128 * s + 64)).collect();
    assert!([1, 2, 3].iter().all(|q| seqs.contains(q)), "slot headers hold seq 1..=3: {seqs:?}");
    assert!((0..INDEX_LEN).any(|i| read_u64(&f, INDEX_OFF + 8 * i) != 0), "the index is where the words say");
}
