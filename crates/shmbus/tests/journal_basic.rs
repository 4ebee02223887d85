//! Single-process journal tests: API behaviour, rolling, retention, compression, recovery
//! from truncation and zeroing, bad input, and the parser over the fuzz corpus.

#![cfg(not(loom))]

mod common;

use std::path::Path;
use std::time::Duration;

use common::{fresh_dir, Rng};
use shmbus::journal::format::{self, data_file_name, index_file_name};
use shmbus::journal::{
    Durability, Journal, JournalConfig, JournalRecvTimeoutError, JournalTryRecvError, Retention, RollCycle,
};
use shmbus::{OpenError, WaitSet};

fn small() -> JournalConfig {
    JournalConfig::default().cycle_bytes(1 << 20).chunk_bytes(64 << 10).max_entry_len(64 << 10).roll(RollCycle::Never)
}

fn payload(i: u64, len: usize) -> Vec<u8> {
    (0..len).map(|k| (i as usize * 31 + k * 7) as u8).collect()
}

#[test]
fn append_and_tail_in_order() {
    let (dir, _c) = fresh_dir("jt-order");
    let j = Journal::create_or_open(&dir, &small()).unwrap();
    let mut a = j.appender().unwrap();
    let mut t = j.tailer().unwrap();
    assert!(matches!(t.try_recv_ref(), Err(JournalTryRecvError::Empty)));
    for i in 0..1000u64 {
        assert_eq!(a.send(&payload(i, (i % 300) as usize)).unwrap(), i);
    }
    {
        let mut r = a.loan(5).unwrap();
        assert_eq!(r.index(), 1000);
        r.copy_from_slice(b"hello");
        assert_eq!(r.send().unwrap(), 1000);
    }
    // A dropped reservation is abandoned and skipped; the index stays dense.
    drop(a.loan(10).unwrap());
    assert_eq!(a.send(b"after").unwrap(), 1002);
    for i in 0..1000u64 {
        let e = t.try_recv_ref().unwrap();
        assert_eq!(e.index(), i);
        assert_eq!(e.data(), &payload(i, (i % 300) as usize)[..]);
        assert!(e.ts_ns() > 0);
    }
    assert_eq!(t.try_recv_ref().unwrap().data(), b"hello");
    let e = t.try_recv_ref().unwrap();
    assert_eq!((e.index(), e.data()), (1002, &b"after"[..]));
    assert!(matches!(t.try_recv_ref(), Err(JournalTryRecvError::Empty)));
    assert!(matches!(t.recv_ref_timeout(Duration::from_millis(20)), Err(JournalRecvTimeoutError::Timeout)));

    let mut t = j.tailer_at(500).unwrap();
    assert_eq!(t.try_recv_ref().unwrap().index(), 500);
    let info = Journal::status(j.dir()).unwrap();
    assert_eq!(info.next_index, 1003);
    assert_eq!(info.first_index, 0);
    assert_eq!(info.appenders, 1);
}

/// Large entries take the non-temporal copy (16 KiB and more); every byte arrives, whatever
/// the alignment the entry lands on, and a second journal handle reads the same.
#[test]
fn a_journal_keeps_its_identity_and_a_remade_one_has_another() {
    let (dir, _c) = fresh_dir("jt-id");
    let id = Journal::create_or_open(&dir, &small()).unwrap().id();
    assert_ne!(id, [0; 16]);
    assert_eq!(Journal::open(&dir).unwrap().id(), id, "reopened: the same journal");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_ne!(Journal::create_or_open(&dir, &small()).unwrap().id(), id, "made again: another journal");
}

#[test]
fn large_entries_arrive_whole_at_every_length_around_the_streaming_copy() {
    let (dir, _c) = fresh_dir("jt-large");
    let j = Journal::create_or_open(&dir, &small()).unwrap();
    let mut a = j.appender().unwrap();
    let mut t = j.tailer().unwrap();
    let lens = [16 * 1024 - 1, 16 * 1024, 16 * 1024 + 1, 16 * 1024 + 63, 3, 40_000, 64 * 1024, 17, 32 * 1024 + 9];
    for (i, &len) in lens.iter().enumerate() {
        assert_eq!(a.send(&payload(i as u64, len)).unwrap(), i as u64);
        let e = t.try_recv_ref().unwrap();
        assert_eq!((e.index(), e.data().len()), (i as u64, len));
        assert!(e.data() == &payload(i as u64, len)[..], "entry {i} ({len} B) differs");
    }
    drop((t, a, j));
    let j = Journal::create_or_open(&dir, &small()).unwrap();
    let mut t = j.tailer().unwrap();
    for (i, &len) in lens.iter().enumerate() {
        assert!(t.try_recv_ref().unwrap().data() == &payload(i as u64, len)[..], "reopened: entry {i}");
    }
}

#[test]
fn rolls_by_size_and_by_time_and_seeks_by_timestamp() {
    let (dir, _c) = fresh_dir("jt-roll");
    let opts =
        JournalConfig::default().cycle_bytes(64 << 10).chunk_bytes(16 << 10).max_entry_len(4096).roll(RollCycle::Never);
    let j = Journal::create_or_open(&dir, &opts).unwrap();
    let mut a = j.appender().unwrap();
    let mut stamps = Vec::new();
    for i in 0..2000u64 {
        a.send(&payload(i, 200)).unwrap();
        if i % 100 == 0 {
            stamps.push((i, shmbus::journal::realtime_ns()));
        }
    }
    let info = Journal::status(j.dir()).unwrap();
    assert!(info.cycles.len() > 4, "{info:?}");
    assert_eq!(info.next_index, 2000);
    let mut t = j.tailer().unwrap();
    for i in 0..2000u64 {
        assert_eq!(t.try_recv_ref().unwrap().index(), i);
    }
    for &(i, ts) in &stamps {
        let mut t = j.tailer_at_time(ts).unwrap();
        let e = t.try_recv_ref().unwrap();
        // Entry timestamps come from the appender's counter-based clock, which may run ahead
        // of `clock_gettime` by its documented error (a µs or so under load): the entry
        // appended just before the stamp may carry a timestamp at or past it.
        assert!(e.index() >= i && e.index() <= i + 100, "ts of {i} found {}", e.index());
    }
    for i in [0u64, 1, 333, 1999] {
        assert_eq!(j.tailer_at(i).unwrap().try_recv_ref().unwrap().index(), i);
    }

    let (dir2, _c2) = fresh_dir("jt-rolltime");
    let j = Journal::create_or_open(&dir2, &small().roll(RollCycle::Every(Duration::from_secs(1)))).unwrap();
    let mut a = j.appender().unwrap();
    a.send(b"one").unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    a.send(b"two").unwrap();
    let info = Journal::status(j.dir()).unwrap();
    assert_eq!(info.cycles.len(), 2);
    assert!(info.cycles[0].sealed && info.cycles[1].first_index == 1);
    let mut t = j.tailer().unwrap();
    assert_eq!(t.try_recv_ref().unwrap().data(), b"one");
    assert_eq!(t.try_recv_ref().unwrap().data(), b"two");
}

#[test]
fn compression_round_trip() {
    let (dir, _c) = fresh_dir("jt-lz4");
    let j = Journal::create_or_open(&dir, &small()).unwrap();
    let mut a = j.appender().unwrap();
    a.set_compression(true);
    let big: Vec<u8> = b"compressible ".iter().copied().cycle().take(20000).collect();
    let random: Vec<u8> = payload(7, 5000).iter().enumerate().map(|(k, b)| b ^ (k as u8).wrapping_mul(97)).collect();
    a.send(&big).unwrap();
    a.send(&random).unwrap();
    a.send(b"tiny").unwrap();
    let info = Journal::status(j.dir()).unwrap();
    assert!(info.bytes < 20000, "compression did not shrink: {}", info.bytes);
    let mut t = j.tailer().unwrap();
    assert_eq!(t.try_recv_ref().unwrap().data(), &big[..]);
    assert_eq!(t.try_recv_ref().unwrap().data(), &random[..]);
    assert_eq!(t.try_recv_ref().unwrap().data(), b"tiny");
}

#[test]
fn retention_while_tailing() {
    let (dir, _c) = fresh_dir("jt-retain");
    let opts = JournalConfig::default()
        .cycle_bytes(64 << 10)
        .chunk_bytes(16 << 10)
        .max_entry_len(4096)
        .roll(RollCycle::Never)
        .retention(Retention { max_cycles: Some(3), max_age: None });
    let j = Journal::create_or_open(&dir, &opts).unwrap();
    let mut a = j.appender().unwrap();
    let mut slow = j.tailer().unwrap();
    let mut fast = j.tailer().unwrap();
    for i in 0..200u64 {
        a.send(&payload(i, 500)).unwrap();
    }
    // The slow tailer reads a little: it holds the first cycle mapped.
    for i in 0..10u64 {
        assert_eq!(slow.try_recv_ref().unwrap().index(), i);
    }
    let mut next = 0;
    for i in 200..3000u64 {
        a.send(&payload(i, 500)).unwrap();
        for e in fast.try_iter() {
            let e = e.unwrap();
            assert_eq!(e.index(), next);
            next += 1;
        }
    }
    assert_eq!(next, 3000);
    let info = Journal::status(j.dir()).unwrap();
    assert!(info.cycles.len() <= 3, "{:?}", info.cycles);
    assert!(info.first_index > 0);
    // The slow tailer finishes its mapped cycle, then reports the gap and continues.
    let mut seen = 10;
    let mut gap = None;
    loop {
        match slow.try_recv_ref() {
            Ok(e) => {
                assert_eq!(e.data(), &payload(e.index(), 500)[..]);
                assert!(e.index() >= seen);
                seen = e.index() + 1;
            }
            Err(JournalTryRecvError::Empty) => break,
            Err(JournalTryRecvError::Gap { from, to }) => gap = Some((from, to)),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(seen, 3000);
    let (from, to) = gap.expect("a gap was reported");
    assert!(from < to && to <= info.first_index);
    let rep = j.gc_with(Retention { max_cycles: Some(1), max_age: None }).unwrap();
    assert!(!rep.removed_cycles.is_empty());
    assert_eq!(Journal::status(j.dir()).unwrap().cycles.len(), 1);
}

#[test]
fn waitset_wakes_on_append() {
    let (dir, _c) = fresh_dir("jt-ws");
    let j = Journal::create_or_open(&dir, &small()).unwrap();
    let mut t = j.tailer().unwrap();
    let j2 = j.clone();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        j2.appender().unwrap().send(b"wake").unwrap();
    });
    let mut ws = WaitSet::with_policy(shmbus::WaitPolicy::BLOCK);
    let ready = ws.wait_timeout(&[&t], Duration::from_secs(10)).unwrap().to_vec();
    assert_eq!(ready, vec![0]);
    assert_eq!(t.try_recv_ref().unwrap().data(), b"wake");
    h.join().unwrap();
    // Blocking next wakes too.
    let j3 = j.clone();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        j3.appender().unwrap().send(b"again").unwrap();
    });
    t.set_wait_policy(shmbus::WaitPolicy::BLOCK);
    assert_eq!(t.recv_ref_timeout(Duration::from_secs(10)).unwrap().data(), b"again");
    h.join().unwrap();
}

#[test]
fn named_reader_resumes_and_validates_names() {
    let (dir, _c) = fresh_dir("jt-named");
    let j = Journal::create_or_open(&dir, &small()).unwrap();
    let mut a = j.appender().unwrap();
    for i in 0..10u64 {
        a.send(&i.to_le_bytes()).unwrap();
    }
    {
        let mut r = j.reader("billing").unwrap();
        assert!(matches!(j.reader("billing"), Err(OpenError::Busy { .. })));
        for i in 0..4u64 {
            assert_eq!(r.try_recv_ref().unwrap().index(), i);
        }
        r.ack();
    }
    {
        let mut r = j.reader("billing").unwrap();
        assert_eq!(r.try_recv_ref().unwrap().index(), 4);
        // No ack: entry 5 is delivered again after a restart (the duplicate window).
        assert_eq!(r.try_recv_ref().unwrap().index(), 5);
    }
    let mut r = j.reader("billing").unwrap();
    assert_eq!(r.try_recv_ref().unwrap().index(), 5);
    let readers = j.readers();
    assert_eq!(readers.len(), 1);
    assert_eq!(readers[0].name, "billing");
    assert_eq!(readers[0].holder_pid, Some(std::process::id()));
    for bad in ["../x", "a/b", "", ".hidden", "x y"] {
        assert!(matches!(j.reader(bad), Err(OpenError::InvalidName(_))), "{bad}");
    }
}

fn write_some(dir: &Path, n: u64) -> Journal {
    let j = Journal::create_or_open(dir, &small()).unwrap();
    let mut a = j.appender().unwrap();
    for i in 0..n {
        a.send(&payload(i, 100)).unwrap();
    }
    j
}

fn read_all(j: &Journal) -> Vec<u64> {
    let mut t = j.tailer().unwrap();
    let mut v = Vec::new();
    for e in t.try_iter() {
        let e = e.unwrap();
        assert_eq!(e.data(), &payload(e.index(), 100)[..]);
        v.push(e.index());
    }
    v
}

#[test]
fn recovers_from_truncation_and_zeroed_tail() {
    // Truncation: cut the data file in the middle of entry 50.
    let (dir, _c) = fresh_dir("jt-trunc");
    drop(write_some(&dir, 100));
    let entry = format::entry_units(100) * 8;
    let f = std::fs::OpenOptions::new().write(true).open(dir.join(data_file_name(0))).unwrap();
    f.set_len(4096 + 50 * entry + 20).unwrap();
    drop(f);
    let j = Journal::create_or_open(&dir, &small()).unwrap();
    let rep = j.recovery().to_vec();
    assert_eq!(rep.len(), 1, "{rep:?}");
    assert_eq!((rep[0].kept_entries, rep[0].dropped_entries), (50, 50));
    assert_eq!(read_all(&j), (0..50).collect::<Vec<_>>());
    // Appending continues at the dense index after the last good entry.
    assert_eq!(j.appender().unwrap().send(&payload(50, 100)).unwrap(), 50);
    assert_eq!(read_all(&j), (0..51).collect::<Vec<_>>());
    // What recovery cut off is recorded: this open, a later one (which recovers nothing)
    // and the read-only status all report entries 50..100 of cycle 0 as lost.
    let lost = rep[0].lost().expect("recovery lost entries");
    assert_eq!((lost.cycle, lost.from, lost.to, lost.count()), (0, 50, 100, 50));
    assert!(lost.to_string().contains("journal entries 50..100 of cycle 0 were lost (50 entries"), "{lost}");
    let recorded: Vec<_> = j.lost_entries().unwrap().iter().map(|l| (l.cycle, l.from, l.to, l.bytes)).collect();
    assert_eq!(recorded, [(0, 50, 100, lost.bytes)]);
    assert!(lost.bytes > 0);
    drop(j);
    let j = Journal::open(&dir).unwrap();
    assert!(j.recovery().is_empty(), "a clean reopen recovers nothing");
    assert_eq!(j.lost_entries().unwrap().iter().map(|l| (l.from, l.to)).collect::<Vec<_>>(), [(50, 100)]);
    drop(j);
    let st = Journal::status(&dir).unwrap();
    assert_eq!(st.lost_entries.iter().map(|l| (l.cycle, l.from, l.to)).collect::<Vec<_>>(), [(0, 50, 100)]);
    assert_eq!(st.recovery_log_error, None);
    // A recovery log that is not one is an error, not silence.
    std::fs::write(dir.join(shmbus::journal::RECOVERY_LOG), "junk\n").unwrap();
    assert!(Journal::open(&dir).unwrap().lost_entries().is_err());
    assert!(Journal::status(&dir).unwrap().recovery_log_error.is_some_and(|e| e.contains("not a recovery record")));

    // Zeroed tail (a lost page cache): zero from the middle of entry 70 on.
    let (dir, _c2) = fresh_dir("jt-zero");
    drop(write_some(&dir, 100));
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(dir.join(data_file_name(0))).unwrap();
        f.write_all_at(&vec![0u8; (30 * entry) as usize], 4096 + 70 * entry + 8).unwrap();
    }
    let j = Journal::create_or_open(&dir, &small()).unwrap();
    assert_eq!(j.recovery()[0].kept_entries, 70);
    assert_eq!(read_all(&j), (0..70).collect::<Vec<_>>());
    drop(j);

    // A CRC mismatch in the middle: recovery keeps the entries before it and after it
    // (the bad one is reported to readers and skipped; nothing healthy is cut).
    let (dir, _c3) = fresh_dir("jt-crc");
    drop(write_some(&dir, 100));
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(dir.join(data_file_name(0))).unwrap();
        f.write_all_at(b"X", 4096 + 40 * entry + 40).unwrap();
    }
    let j = Journal::create_or_open(&dir, &small()).unwrap();
    assert_eq!((j.recovery()[0].kept_entries, j.recovery()[0].dropped_entries), (100, 0));
    assert_eq!(j.recovery()[0].damaged_ranges, 1);
    let mut t = j.tailer().unwrap();
    let mut got = Vec::new();
    loop {
        match t.try_recv_ref() {
            Ok(e) => got.push(e.index()),
            Err(JournalTryRecvError::Empty) => break,
            Err(JournalTryRecvError::Corrupt(c)) => assert_eq!(c.value("index"), Some(40)),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(got, (0..40).chain(41..100).collect::<Vec<_>>());
    drop(t);
    drop(j);

    // A stale position word (flush mode after power loss: entry pages synced, the header
    // page not): recovery scans on past it and keeps the committed entries.
    let (dir, _c5) = fresh_dir("jt-stalepos");
    drop(write_some(&dir, 100));
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(dir.join(data_file_name(0))).unwrap();
        let stale = format::pos_word(false, 60, 60 * entry / 8);
        f.write_all_at(&stale.to_le_bytes(), format::CYCLE_POS_OFFSET as u64).unwrap();
        // The alloc word is in the same unsynced page: stale too.
        f.write_all_at(&(60 * entry).to_le_bytes(), format::CYCLE_ALLOC_OFFSET as u64).unwrap();
    }
    let j = Journal::create_or_open(&dir, &small()).unwrap();
    assert_eq!(read_all(&j), (0..100).collect::<Vec<_>>());
    assert_eq!(j.appender().unwrap().send(&payload(100, 100)).unwrap(), 100);
    drop(j);

    // The data file cut inside its header page: moved aside, the cycle restarts.
    let (dir, _c4) = fresh_dir("jt-hdr");
    drop(write_some(&dir, 10));
    std::fs::OpenOptions::new().write(true).open(dir.join(data_file_name(0))).unwrap().set_len(100).unwrap();
    let j = Journal::create_or_open(&dir, &small()).unwrap();
    assert_eq!(j.recovery().len(), 1);
    assert!(read_all(&j).is_empty());
    let _ = index_file_name(0);
}

#[test]
fn bad_input_is_a_typed_error() {
    // Not a journal: a directory with other files.
    let (dir, _c) = fresh_dir("jt-notj");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), b"hello").unwrap();
    assert!(matches!(Journal::create_or_open(&dir, &small()), Err(OpenError::NotASegment { .. })));
    // A garbage metadata file.
    std::fs::write(dir.join(format::META_FILE), vec![0xabu8; 5000]).unwrap();
    assert!(matches!(Journal::create_or_open(&dir, &small()), Err(OpenError::NotASegment { .. })));
    // Missing, without create.
    let (missing, _c_missing) = fresh_dir("jt-missing");
    assert!(matches!(Journal::open(&missing), Err(OpenError::NotFound { .. })));
    // A newer format version.
    let (dir, _c2) = fresh_dir("jt-newer");
    drop(Journal::create_or_open(&dir, &small()).unwrap());
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(dir.join(format::META_FILE)).unwrap();
        f.write_all_at(&3u32.to_le_bytes(), 8).unwrap();
    }
    assert!(matches!(Journal::create_or_open(&dir, &small()), Err(OpenError::VersionMismatch { found: 3, .. })));
    // Invalid options.
    let (dir, _c_opts) = fresh_dir("jt-opts");
    assert!(matches!(Journal::create_or_open(&dir, &small().cycle_bytes(1000)), Err(OpenError::InvalidConfig { .. })));
    // Too large an entry.
    let (dir, _c3) = fresh_dir("jt-big");
    let j = Journal::create_or_open(&dir, &small()).unwrap();
    assert!(matches!(
        j.appender().unwrap().send(&vec![0u8; 65 << 10]),
        Err(shmbus::journal::JournalSendError::TooLarge { .. })
    ));
    // No permission (skipped as root, who bypasses file modes).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        use std::os::unix::fs::PermissionsExt;
        let m = dir.join(format::META_FILE);
        std::fs::set_permissions(&m, std::fs::Permissions::from_mode(0o000)).unwrap();
        assert!(matches!(Journal::create_or_open(&dir, &small()), Err(OpenError::PermissionDenied { .. })));
        std::fs::set_permissions(&m, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
}

#[test]
fn durability_modes_work() {
    for d in [Durability::Flush, Durability::Periodic(Duration::from_millis(5))] {
        let (dir, _c) = fresh_dir("jt-dur");
        let j = Journal::create_or_open(&dir, &small().durability(d)).unwrap();
        let mut a = j.appender().unwrap();
        for i in 0..50u64 {
            a.send(&payload(i, 100)).unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
        drop(a);
        assert_eq!(read_all(&j).len(), 50);
    }
}

/// The parser over the corpus and thousands of random and mutated inputs: no panic, no
/// out-of-bounds read (run under the normal test harness, so CI needs no nightly).
#[test]
fn parser_survives_corpus_and_mutations() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/journal_parse");
    let mut inputs: Vec<Vec<u8>> = std::fs::read_dir(&corpus)
        .map(|d| d.flatten().filter_map(|e| std::fs::read(e.path()).ok()).collect())
        .unwrap_or_default();
    // A real cycle file and metadata file as seeds too.
    let (dir, _c) = fresh_dir("jt-parse");
    let j = write_some(&dir, 20);
    drop(j);
    inputs.push(std::fs::read(dir.join(data_file_name(0))).unwrap()[..4096 + 20 * 136].to_vec());
    inputs.push(std::fs::read(dir.join(format::META_FILE)).unwrap());
    let mut rng = Rng::from_env_or_clock();
    for _ in 0..3000 {
        let mut b = if inputs.is_empty() || rng.next() % 4 == 0 {
            (0..rng.next() % 8192).map(|_| rng.next() as u8).collect::<Vec<u8>>()
        } else {
            inputs[(rng.next() % inputs.len() as u64) as usize].clone()
        };
        for _ in 0..(rng.next() % 16) {
            if b.is_empty() {
                break;
            }
            let k = (rng.next() % b.len() as u64) as usize;
            match rng.next() % 4 {
                0 => b[k] = rng.next() as u8,
                1 => b.truncate(k),
                2 => b[k..].iter_mut().take(64).for_each(|v| *v = 0),
                _ => b[k] ^= 1 << (rng.next() % 8),
            }
        }
        std::hint::black_box(format::fuzz_parse(&b));
    }
}

/// Regenerates the committed seed corpus: `SHMBUS_WRITE_CORPUS=1 cargo test -p shmbus
/// --test journal_basic write_fuzz_corpus -- --ignored`.
#[test]
#[ignore]
fn write_fuzz_corpus() {
    if std::env::var_os("SHMBUS_WRITE_CORPUS").is_none() {
        return;
    }
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/journal_parse");
    std::fs::create_dir_all(&out).unwrap();
    let (dir, _c) = fresh_dir("jt-corpus");
    let j = Journal::create_or_open(&dir, &small()).unwrap();
    let mut a = j.appender().unwrap();
    for i in 0..5u64 {
        a.send(&payload(i, 30 + i as usize)).unwrap();
    }
    drop(a.loan(12).unwrap());
    a.set_compression(true);
    a.send(&b"abcabcabc".repeat(30)).unwrap();
    let used = Journal::status(j.dir()).unwrap().bytes as usize;
    let data = std::fs::read(dir.join(data_file_name(0))).unwrap();
    std::fs::write(out.join("cycle_entries"), &data[..4096 + used]).unwrap();
    std::fs::write(out.join("cycle_truncated"), &data[..4096 + used / 2]).unwrap();
    std::fs::write(out.join("cycle_header_only"), &data[..4096]).unwrap();
    let meta = std::fs::read(dir.join(format::META_FILE)).unwrap();
    std::fs::write(out.join("meta_header"), &meta[..512]).unwrap();
    // Entries without the header page (a bare data area).
    std::fs::write(out.join("data_area"), &data[4096..4096 + used]).unwrap();
}

/// A live appender that stalls between reserve and commit longer than the abandon timeout
/// does not block tailers: its entry is abandoned, later entries are read, and its late
/// commit fails with `JournalSendError::Abandoned`.
#[test]
fn stalled_appender_is_abandoned_after_the_timeout() {
    let (dir, _c) = fresh_dir("jt-stall");
    let j = Journal::create_or_open(&dir, &small().abandon_timeout(Duration::from_millis(200))).unwrap();
    let mut stalled = j.appender().unwrap();
    let mut other = j.appender().unwrap();
    let mut r = stalled.loan(8).unwrap();
    r.copy_from_slice(b"too late");
    assert_eq!(other.send(b"on time").unwrap(), 1);
    let mut t = j.tailer().unwrap();
    let e = t.recv_ref_timeout(Duration::from_secs(20)).expect("tailer got past the stalled entry");
    assert_eq!((e.index(), e.data()), (1, &b"on time"[..]));
    assert!(matches!(r.send(), Err(shmbus::journal::JournalSendError::Abandoned { index: 0 })));
    // The appender keeps working.
    assert_eq!(stalled.send(b"next").unwrap(), 2);
    assert_eq!(t.try_recv_ref().unwrap().data(), b"next");
}

/// Garbage in the live shared words (no recovery runs: another handle is open) makes reads
/// fail or end, never crash or read out of bounds.
#[test]
fn garbage_shared_words_are_survived() {
    let (dir, _c) = fresh_dir("jt-garbage");
    let j = write_some(&dir, 50);
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(dir.join(data_file_name(0))).unwrap();
    for (pos, alloc) in [
        (u64::MAX, u64::MAX),
        (format::pos_word(false, 1 << 30, u32::MAX as u64), 1 << 40),
        (format::pos_word(true, 3, 7), 0),
    ] {
        f.write_all_at(&pos.to_le_bytes(), format::CYCLE_POS_OFFSET as u64).unwrap();
        f.write_all_at(&alloc.to_le_bytes(), format::CYCLE_ALLOC_OFFSET as u64).unwrap();
        f.write_all_at(&alloc.to_le_bytes(), format::CYCLE_IALLOC_OFFSET as u64).unwrap();
        let j2 = Journal::create_or_open(&dir, &small()).unwrap();
        assert!(j2.recovery().is_empty(), "not alone: no recovery");
        for start in [0u64, 10, 1 << 20] {
            let Ok(mut t) = j2.tailer_at(start) else {
                continue;
            };
            for _ in 0..200 {
                match t.try_recv_ref() {
                    Ok(e) => assert_eq!(e.data(), &payload(e.index(), 100)[..]),
                    Err(JournalTryRecvError::Empty) => break,
                    Err(_) => {}
                }
            }
        }
        let _ = Journal::status(j2.dir());
        let _ = j2.tailer_at_time(1);
    }
    drop(j);
}

/// A shared `alloc` word claiming more room than the data file has (corrupt or hostile)
/// must not make an appender write past the end of the file (a SIGBUS would kill this test
/// process): it checks the file's real size and grows it, and every entry reads back.
#[test]
fn a_hostile_alloc_word_does_not_make_the_appender_fault() {
    let (dir, _c) = fresh_dir("jt-alloc");
    let j = write_some(&dir, 10);
    let path = dir.join(data_file_name(0));
    let size_before = std::fs::metadata(&path).unwrap().len();
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    // The whole cycle (1 MiB), far beyond the one or two 64 KiB chunks the file has.
    f.write_all_at(&(1u64 << 20).to_le_bytes(), format::CYCLE_ALLOC_OFFSET as u64).unwrap();
    let j2 = Journal::create_or_open(&dir, &small()).unwrap();
    let mut a = j2.appender().unwrap();
    a.set_pretouch(false);
    // 3,000 entries of 200 B: ~650 KiB, well past the file's size before.
    for i in 10..3010u64 {
        a.send(&payload(i, 200)).unwrap();
    }
    assert!(std::fs::metadata(&path).unwrap().len() > size_before, "the appender grew the file");
    let mut t = j2.tailer().unwrap();
    let mut n = 0u64;
    for e in t.try_iter() {
        let e = e.unwrap();
        let len = if e.index() < 10 { 100 } else { 200 };
        assert_eq!(e.data(), &payload(e.index(), len)[..], "entry {}", e.index());
        n += 1;
    }
    assert_eq!(n, 3010);
    drop((a, j2, j));
}

/// Cycle files removed by hand, and a `current` word that lags the newest cycle file (its
/// creator died between linking and publishing it): both are recovered at open.
#[test]
fn missing_and_unpublished_cycles() {
    let (dir, _c) = fresh_dir("jt-cycles");
    let opts = small().cycle_bytes(64 << 10).chunk_bytes(16 << 10).max_entry_len(4096);
    {
        let j = Journal::create_or_open(&dir, &opts).unwrap();
        let mut a = j.appender().unwrap();
        for i in 0..1000u64 {
            a.send(&payload(i, 200)).unwrap();
        }
        assert!(Journal::status(j.dir()).unwrap().cycles.len() >= 4);
    }
    std::fs::remove_file(dir.join(data_file_name(0))).unwrap();
    std::fs::remove_file(dir.join(index_file_name(0))).unwrap();
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(dir.join(format::META_FILE)).unwrap();
        f.write_all_at(&1u64.to_le_bytes(), format::META_SHARED_OFFSET as u64).unwrap();
    }
    let j = Journal::create_or_open(&dir, &opts).unwrap();
    let info = Journal::status(j.dir()).unwrap();
    assert_eq!(info.next_index, 1000);
    let mut t = j.tailer().unwrap();
    let first = t.try_recv_ref().unwrap().index();
    assert_eq!(first, info.first_index);
    assert!(first > 0);
    let mut next = first + 1;
    for e in t.try_iter() {
        let e = e.unwrap();
        assert_eq!(e.index(), next);
        next += 1;
    }
    assert_eq!(next, 1000);
    assert_eq!(j.appender().unwrap().send(b"more").unwrap(), 1000);
}

/// Tiered storage: old cycles move to an archive directory while tailers read; every
/// reader finds them there; retention deletes from both tiers.
#[test]
fn tiered_storage_moves_old_cycles_transparently() {
    let (dir, _c) = fresh_dir("jt-tier");
    let opts = small().cycle_bytes(64 << 10).chunk_bytes(16 << 10).max_entry_len(4096);
    let j = Journal::create_or_open(&dir, &opts).unwrap();
    let mut a = j.appender().unwrap();
    for i in 0..1000u64 {
        a.send(&payload(i, 200)).unwrap();
    }
    let mut early = j.tailer().unwrap();
    for i in 0..10u64 {
        assert_eq!(early.try_recv_ref().unwrap().index(), i);
    }
    let total = Journal::status(j.dir()).unwrap().cycles.len();
    assert!(total >= 4);
    let rep = j.tier("cold", 2).unwrap();
    assert_eq!(rep.moved_cycles.len(), total - 2);
    assert_eq!(j.archive_dir(), Some(dir.join("cold")));
    assert!(dir.join("cold").join(data_file_name(0)).exists());
    assert!(!dir.join(data_file_name(0)).exists());
    assert_eq!(Journal::status(j.dir()).unwrap().cycles.len(), total);
    // A tailer that was reading keeps going; new tailers and other handles read the archive.
    for i in 10..1000u64 {
        assert_eq!(early.try_recv_ref().unwrap().index(), i);
    }
    let j2 = Journal::create_or_open(&dir, &opts).unwrap();
    let mut t = j2.tailer().unwrap();
    for i in 0..1000u64 {
        let e = t.try_recv_ref().unwrap();
        assert_eq!((e.index(), e.data()), (i, &payload(i, 200)[..]));
    }
    assert_eq!(j2.tailer_at(5).unwrap().try_recv_ref().unwrap().index(), 5);
    // Appending goes on in the hot tier; a second tier() call moves more.
    for i in 1000..1500u64 {
        a.send(&payload(i, 200)).unwrap();
    }
    assert!(!j.tier("cold", 1).unwrap().moved_cycles.is_empty());
    assert!(matches!(j.tier("elsewhere", 1), Err(shmbus::journal::JournalTierError::OtherArchive { .. })));
    // Retention deletes from the archive too.
    j.gc_with(Retention { max_cycles: Some(2), max_age: None }).unwrap();
    let info = Journal::status(j.dir()).unwrap();
    assert_eq!(info.cycles.len(), 2);
    assert_eq!(std::fs::read_dir(dir.join("cold")).unwrap().count(), 2, "only the hot cycle's files are left");
}

/// `status` splits the bytes on disk by tier, and gives each named reader's lag.
#[test]
fn status_counts_bytes_per_tier_and_reader_lag() {
    let (dir, _c) = fresh_dir("jt-tier-bytes");
    let opts = small().cycle_bytes(64 << 10).chunk_bytes(16 << 10).max_entry_len(4096);
    let j = Journal::create_or_open(&dir, &opts).unwrap();
    let mut a = j.appender().unwrap();
    for i in 0..1000u64 {
        a.send(&payload(i, 200)).unwrap();
    }
    let before = Journal::status(j.dir()).unwrap();
    assert!(before.cycles.iter().all(|c| !c.archived));
    assert_eq!((before.hot_file_bytes, before.archive_file_bytes), (before.file_bytes, 0));
    assert!(before.file_bytes > 0);

    let rep = j.tier("cold", 2).unwrap();
    assert!(!rep.moved_cycles.is_empty());
    let after = Journal::status(j.dir()).unwrap();
    for c in &after.cycles {
        assert_eq!(c.archived, rep.moved_cycles.contains(&c.cycle), "cycle {}", c.cycle);
        assert_eq!(c.archived, !dir.join(data_file_name(c.cycle)).exists(), "cycle {}", c.cycle);
    }
    assert_eq!(after.archive_file_bytes, rep.moved_bytes);
    assert_eq!(after.hot_file_bytes + after.archive_file_bytes, after.file_bytes);
    assert_eq!(after.file_bytes, before.file_bytes, "tiering moves bytes, it does not change them");
    let on_disk = |d: &Path| -> u64 {
        std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.ends_with(".sbjd") || n.ends_with(".sbji")
            })
            .map(|e| e.metadata().unwrap().len())
            .sum()
    };
    assert_eq!(after.archive_file_bytes, on_disk(&dir.join("cold")));
    assert_eq!(after.hot_file_bytes, on_disk(&dir));

    // A named reader 100 entries in lags by the rest; one never acked lags by everything.
    let mut r = j.reader("slow").unwrap();
    for _ in 0..100 {
        r.try_recv_ref().unwrap();
    }
    r.ack();
    drop(r);
    drop(j.reader("idle").unwrap());
    let st = Journal::status(j.dir()).unwrap();
    let lag = |name: &str| st.reader_lag(st.readers.iter().find(|r| r.name == name).unwrap());
    assert_eq!(st.next_index, 1000);
    assert_eq!(lag("slow"), 900);
    assert_eq!(lag("idle"), 1000);
    // What was appended between two snapshots, across a roll to new cycles.
    for i in 1000..1300u64 {
        a.send(&payload(i, 200)).unwrap();
    }
    let later = Journal::status(j.dir()).unwrap();
    assert!(later.cycles.len() > st.cycles.len());
    assert_eq!(later.appended_since(&st), (300, later.bytes - st.bytes));
    assert_eq!(st.appended_since(&later), (0, 0));
    let ahead = shmbus::journal::ReaderInfo { name: "x".into(), position: 5000, holder_pid: None };
    assert_eq!(st.reader_lag(&ahead), 0);
}

/// A toy cipher for the plumbing test (NOT cryptography): a keyed xorshift keystream and
/// an 8-byte keyed checksum as the tag. Real users plug in an AEAD.
struct ToyCipher(u64);

impl ToyCipher {
    fn stream(&self, nonce: &[u8; 24]) -> impl Iterator<Item = u8> {
        let mut x = self.0
            ^ u64::from_le_bytes(nonce[12..20].try_into().unwrap())
            ^ (u64::from_le_bytes(nonce[16..24].try_into().unwrap()) << 1)
            ^ u64::from_le_bytes(nonce[..8].try_into().unwrap())
            | 1;
        std::iter::from_fn(move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            Some(x as u8)
        })
    }

    fn tag(&self, nonce: &[u8; 24], aad: &[u8], ct: &[u8]) -> [u8; 8] {
        let mut h = self.0.to_le_bytes().to_vec();
        h.extend_from_slice(nonce);
        h.extend_from_slice(aad);
        h.extend_from_slice(ct);
        let a = crc32c::crc32c(&h) as u64;
        h.reverse();
        ((crc32c::crc32c(&h) as u64) << 32 | a).to_le_bytes()
    }
}

impl shmbus::journal::EntryCipher for ToyCipher {
    fn overhead(&self) -> usize {
        8
    }
    fn seal(&self, nonce: &[u8; 24], aad: &[u8], plain: &[u8], out: &mut [u8]) {
        for ((o, p), k) in out.iter_mut().zip(plain).zip(self.stream(nonce)) {
            *o = p ^ k;
        }
        let tag = self.tag(nonce, aad, &out[..plain.len()]);
        out[plain.len()..].copy_from_slice(&tag);
    }
    fn open(&self, nonce: &[u8; 24], aad: &[u8], sealed: &[u8], out: &mut [u8]) -> bool {
        let (ct, tag) = sealed.split_at(sealed.len() - 8);
        if self.tag(nonce, aad, ct) != tag {
            return false;
        }
        for ((o, c), k) in out.iter_mut().zip(ct).zip(self.stream(nonce)) {
            *o = c ^ k;
        }
        true
    }
}

#[test]
fn encryption_round_trip_with_a_pluggable_cipher() {
    use std::sync::Arc;
    let (dir, _c) = fresh_dir("jt-crypt");
    let j = Journal::create_or_open(&dir, &small()).unwrap();
    let mut a = j.appender().unwrap();
    a.set_cipher(Some(Arc::new(ToyCipher(0x5eed))));
    let secret = b"the launch code is 0000 and the launch code is 0000 again".repeat(4);
    a.send(&secret).unwrap();
    a.set_compression(true);
    a.send(&secret).unwrap();
    a.send(b"short").unwrap();
    a.set_cipher(None);
    a.send(b"plain").unwrap();
    let bytes = std::fs::read(dir.join(data_file_name(0))).unwrap();
    assert!(!bytes.windows(15).any(|w| w == b"the launch code"), "plaintext on disk");
    let mut t = j.tailer().unwrap();
    t.set_cipher(Some(Arc::new(ToyCipher(0x5eed))));
    assert_eq!(t.try_recv_ref().unwrap().data(), &secret[..]);
    assert_eq!(t.try_recv_ref().unwrap().data(), &secret[..]);
    assert_eq!(t.try_recv_ref().unwrap().data(), b"short");
    assert_eq!(t.try_recv_ref().unwrap().data(), b"plain");
    // No cipher: reported and skipped. Wrong key: authentication fails.
    let mut t = j.tailer().unwrap();
    assert!(matches!(t.try_recv_ref(), Err(JournalTryRecvError::Encrypted { index: 0, key_id: None })));
    let mut t = j.tailer().unwrap();
    t.set_cipher(Some(Arc::new(ToyCipher(0xbad))));
    assert!(matches!(t.try_recv_ref(), Err(JournalTryRecvError::Unauthenticated { index: 0 })));
}

#[test]
fn built_in_cipher_rotates_keys_and_names_the_missing_one() {
    use shmbus::journal::{Keyring, XChaCha20Poly1305Cipher};
    use std::sync::Arc;
    let (dir, _c) = fresh_dir("jt-xchacha");
    let j = Journal::create_or_open(&dir, &small()).unwrap();
    let mut a = j.appender().unwrap();
    let mut keys = Keyring::new(1, [1; 32]);
    a.set_cipher(Some(Arc::new(XChaCha20Poly1305Cipher::new(&keys))));
    a.set_compression(true);
    let big = b"rotate me ".repeat(20);
    a.send(&big).unwrap();
    keys.rotate(2, [2; 32]);
    a.set_cipher(Some(Arc::new(XChaCha20Poly1305Cipher::new(&keys))));
    a.send(b"after rotation").unwrap();
    let bytes = std::fs::read(dir.join(data_file_name(0))).unwrap();
    assert!(!bytes.windows(9).any(|w| w == b"rotate me"), "plaintext on disk");

    let mut t = j.tailer().unwrap();
    t.set_cipher(Some(Arc::new(XChaCha20Poly1305Cipher::new(&keys))));
    assert_eq!(t.try_recv_ref().unwrap().data(), &big[..]);
    assert_eq!(t.try_recv_ref().unwrap().data(), b"after rotation");
    // No cipher: the key id is named. Only key 2: entry 0 needs key 1. Key 1 with other
    // bytes: authentication fails.
    let mut t = j.tailer().unwrap();
    assert!(matches!(t.try_recv_ref(), Err(JournalTryRecvError::Encrypted { index: 0, key_id: Some(1) })));
    assert!(matches!(t.try_recv_ref(), Err(JournalTryRecvError::Encrypted { index: 1, key_id: Some(2) })));
    let mut t = j.tailer().unwrap();
    t.set_cipher(Some(Arc::new(XChaCha20Poly1305Cipher::new(&Keyring::new(2, [2; 32])))));
    assert!(matches!(t.try_recv_ref(), Err(JournalTryRecvError::UnknownKey { index: 0, key_id: 1 })));
    assert_eq!(t.try_recv_ref().unwrap().data(), b"after rotation");
    let mut t = j.tailer().unwrap();
    t.set_cipher(Some(Arc::new(XChaCha20Poly1305Cipher::new(&Keyring::new(1, [9; 32])))));
    assert!(matches!(t.try_recv_ref(), Err(JournalTryRecvError::Unauthenticated { index: 0 })));
    assert_eq!(keys.ids().collect::<Vec<_>>(), [1, 2]);
}

/// Many threads creating the same journal at once: one creates it, all open it.
#[test]
fn concurrent_creation_is_race_free() {
    let (dir, _c) = fresh_dir("jt-race");
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let dir = dir.clone();
            std::thread::spawn(move || {
                let j = Journal::create_or_open(&dir, &small()).unwrap();
                j.appender().unwrap().send(b"x").unwrap()
            })
        })
        .collect();
    let mut idx: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    idx.sort_unstable();
    assert_eq!(idx, (0..8).collect::<Vec<_>>());
}

/// Growth ahead of the appender (the pretoucher, in several steps on tmpfs, in one step
/// elsewhere, with its inherited CPU affinity or placed explicitly; or the appender itself) while a tailer in another thread reads along: every
/// entry arrives intact, on the temporary directory's filesystem and on tmpfs.
#[test]
fn growth_ahead_keeps_every_entry_on_disk_and_tmpfs() {
    let (disk, _c) = fresh_dir("jt-grow");
    let shm = Path::new("/dev/shm").join(format!("shmbus-test-jt-grow-{}", std::process::id()));
    struct Rm(std::path::PathBuf);
    impl Drop for Rm {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _rm = Rm(shm.clone());
    let mut dirs = vec![disk];
    if Path::new("/dev/shm").is_dir() {
        dirs.push(shm);
    }
    for (k, base) in dirs.iter().enumerate() {
        // The pretoucher with its inherited affinity, placed on CPU 0, or off.
        for (v, (pretouch, cpus)) in [(true, None), (true, Some(vec![0usize])), (false, None)].into_iter().enumerate() {
            let dir = base.join(format!("j{k}-{v}"));
            let opts = JournalConfig::default()
                .cycle_bytes(48 << 20)
                .chunk_bytes(4 << 20)
                .max_entry_len(64 << 10)
                .roll(RollCycle::Never);
            let j = Journal::create_or_open(&dir, &opts).unwrap();
            let mut t = j.tailer().unwrap();
            let n = 1200u64;
            let reader = std::thread::spawn(move || {
                for i in 0..n {
                    let e = t.recv_ref_timeout(Duration::from_secs(20)).expect("entry");
                    assert_eq!(e.index(), i);
                    assert_eq!(e.data(), &payload(i, 1000 + (i as usize * 97) % 40_000)[..]);
                }
            });
            let mut a = j.appender().unwrap();
            a.set_pretouch(pretouch);
            if let Some(cpus) = &cpus {
                a.set_pretouch_cpus(cpus);
            }
            for i in 0..n {
                assert_eq!(a.send(&payload(i, 1000 + (i as usize * 97) % 40_000)).unwrap(), i);
            }
            reader.join().unwrap();
            let info = Journal::status(j.dir()).unwrap();
            assert_eq!(info.next_index, n);
            drop(a);
            drop(j);
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}

/// The journal's own CRC32C (a `crc32` chain for short inputs, carry-less folding for long
/// ones) is the `crc32c` crate's function for every length around the switch-over, long
/// lengths on and off the folding's 16, 64 and 256-byte steps, every alignment and any
/// starting value.
#[test]
fn entry_crc_matches_the_crc32c_crate() {
    let mut rng = Rng::from_env_or_clock();
    let buf: Vec<u8> = (0..70_000).map(|_| rng.next() as u8).collect();
    for len in (0..700).chain([1023, 1024, 2000, 4095, 4096, 4097, 16_383, 32_768, 32_779, 65_536, 69_990]) {
        for start in 0..8 {
            let seed = rng.next() as u32;
            let data = &buf[start..start + len];
            assert_eq!(format::crc32c_append(seed, data), crc32c::crc32c_append(seed, data), "len {len} start {start}");
        }
    }
    assert_eq!(format::crc32c_append(0, b"123456789"), 0xE306_9283);
}

/// `Journal::status` only looks: it creates, repairs and writes nothing (a lost index file
/// is not rebuilt by it, the metadata file is not touched), and an appender's handle does.
#[test]
fn status_is_read_only() {
    let (dir, _c) = fresh_dir("jt-status-ro");
    {
        let j = Journal::create_or_open(&dir, &small()).unwrap();
        j.appender().unwrap().send(b"x").unwrap();
    }
    let names = |d: &std::path::Path| {
        let mut v: Vec<_> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name()).collect();
        v.sort();
        v
    };
    let before = names(&dir);
    let meta = std::fs::read(dir.join(format::META_FILE)).unwrap();
    let st = Journal::status(&dir).unwrap();
    assert_eq!((st.first_index, st.next_index, st.cycles.len(), st.appenders), (0, 1, 1, 0));
    assert_eq!(names(&dir), before);
    assert_eq!(std::fs::read(dir.join(format::META_FILE)).unwrap(), meta);
    std::fs::remove_file(dir.join(index_file_name(0))).unwrap();
    Journal::status(&dir).unwrap();
    assert!(!dir.join(index_file_name(0)).exists(), "status rebuilt the index");
    // Opening the journal does repair it.
    drop(Journal::open(&dir).unwrap().tailer().unwrap());
    assert!(dir.join(index_file_name(0)).exists());
    assert!(matches!(Journal::status(dir.join("missing")), Err(OpenError::NotFound { .. })));
}

/// A key file larger than the limit is refused whole with `TooLarge` naming it, even when the
/// cut would fall at a line boundary and leave a valid key file: the key past the limit (the
/// one sealing new entries) must never be ignored. A file of exactly the limit is read.
#[test]
fn a_key_file_over_the_limit_is_refused_not_cut() {
    use std::os::unix::fs::PermissionsExt;

    use shmbus::journal::{KeyFileError, Keyring};
    let (dir, _s) = fresh_dir("journal-keyfile-limit");
    std::fs::create_dir_all(&dir).unwrap();
    let limit = Keyring::MAX_FILE_LEN as usize;
    let first = format!("1 {}\n", "11".repeat(32));
    // Comment lines fill the file up to exactly the limit.
    let mut text = first.clone();
    while text.len() < limit {
        let room = limit - text.len();
        let line = if room > 200 { 100 } else { room };
        text.push_str(&"#".repeat(line - 1));
        text.push('\n');
    }
    assert_eq!(text.len(), limit);
    let path = dir.join("keys");
    let write = |text: &str| {
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    };
    write(&text);
    assert_eq!(Keyring::load(&path).unwrap().current_id(), 1, "a file of exactly the limit is read");
    // The rotation key past the limit.
    text.push_str(&format!("2 {}\n", "22".repeat(32)));
    write(&text);
    match Keyring::load(&path) {
        Err(KeyFileError::TooLarge { path: p, limit: l }) => {
            assert_eq!((p.as_path(), l), (path.as_path(), Keyring::MAX_FILE_LEN));
        }
        other => panic!("a key file over the limit must be refused, got {other:?}"),
    }
    let e = Keyring::load(&path).unwrap_err().to_string();
    assert!(e.contains(path.to_str().unwrap()) && e.contains(&limit.to_string()), "{e}");
}
