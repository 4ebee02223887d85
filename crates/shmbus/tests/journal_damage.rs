//! Journal damage that must not hide healthy data: zeroed pages, junk headers, unreadable
//! cycle files and missing index files, in sealed and in current cycles. Every healthy
//! entry before and after the damage is delivered, in order; the damage is reported
//! (`JournalRecvError::Damaged`: which cycle, which indices, which bytes) once, and skipped.
//! Also: a journal whose first data file cannot be created leaves nothing half made.

#![cfg(not(loom))]

mod common;

use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{child_role, fresh_dir, spawn_child, wait_with_deadline};
use shmbus::journal::format::{data_file_name, index_file_name, CYCLE_HEADER_PAGE, META_FILE};
use shmbus::journal::{Journal, JournalConfig, JournalRecvTimeoutError, JournalTryRecvError, RollCycle, Tailer};

/// 64 KiB cycles, 100-byte payloads (136 bytes an entry): about 480 entries a cycle.
fn opts() -> JournalConfig {
    JournalConfig::default().cycle_bytes(64 << 10).chunk_bytes(16 << 10).max_entry_len(1024).roll(RollCycle::Never)
}

fn payload(i: u64) -> Vec<u8> {
    let mut v = i.to_le_bytes().to_vec();
    v.extend((0..92).map(|k| (i as u8).wrapping_add(k)));
    v
}

/// A journal of `count` entries (about `count / 480` sealed cycles and a current one).
fn journal_with(dir: &Path, count: u64) -> Journal {
    let j = Journal::create_or_open(dir, &opts()).unwrap();
    let mut a = j.appender().unwrap();
    for i in 0..count {
        assert_eq!(a.send(&payload(i)).unwrap(), i);
    }
    j
}

/// What a full read delivered: entries (checked against their payload) and damage reports.
#[derive(Default)]
struct Read {
    indices: Vec<u64>,
    damaged: Vec<(u64, u64, u64)>,
    corrupt: Vec<u64>,
}

/// Delivered indices as ranges, so a failure message stays short.
impl std::fmt::Debug for Read {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for &i in &self.indices {
            match ranges.last_mut() {
                Some(r) if r.1 == i => r.1 = i + 1,
                _ => ranges.push((i, i + 1)),
            }
        }
        write!(f, "delivered {ranges:?}, damaged (cycle, from, to) {:?}, corrupt {:?}", self.damaged, self.corrupt)
    }
}

/// Reads everything with `try_next` (what `dump` does), with a bound on the calls.
fn read_all(t: &mut Tailer) -> Read {
    let mut r = Read::default();
    for _ in 0..100_000 {
        match t.try_recv_ref() {
            Ok(e) => {
                assert_eq!(e.data(), payload(e.index()), "entry {} delivered intact", e.index());
                r.indices.push(e.index());
            }
            Err(JournalTryRecvError::Empty) => return r,
            Err(JournalTryRecvError::Damaged { cycle, from, to, .. }) => r.damaged.push((cycle, from, to)),
            Err(JournalTryRecvError::Corrupt(c)) => r.corrupt.push(c.value("index").unwrap()),
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    panic!("try_next never reached the end: {r:?}");
}

/// The same with `recv_ref_timeout` (what a live tailer does): must reach the end too.
fn read_all_waiting(t: &mut Tailer, total: u64) -> Read {
    let mut r = Read::default();
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < Duration::from_secs(20), "tailer stuck: {r:?}");
        match t.recv_ref_timeout(Duration::from_millis(300)) {
            Ok(e) => {
                assert_eq!(e.data(), payload(e.index()));
                r.indices.push(e.index());
                if e.index() + 1 == total {
                    return r;
                }
            }
            Err(JournalRecvTimeoutError::Timeout) => return r,
            Err(JournalRecvTimeoutError::Damaged { cycle, from, to, .. }) => r.damaged.push((cycle, from, to)),
            Err(JournalRecvTimeoutError::Corrupt(c)) => r.corrupt.push(c.value("index").unwrap()),
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
}

/// Every index of `0..total` is delivered, in order, or inside a reported damaged range
/// (or reported corrupt); at least one range is reported.
fn check(r: &Read, total: u64, what: &str) {
    check_lost(r, total, 40, what)
}

fn check_lost(r: &Read, total: u64, most: usize, what: &str) {
    assert!(r.indices.windows(2).all(|w| w[0] < w[1]), "{what}: in order: {r:?}");
    assert!(!r.damaged.is_empty() || !r.corrupt.is_empty(), "{what}: the damage is reported: {r:?}");
    let lost = |i: u64| r.damaged.iter().any(|&(_, f, t)| f <= i && i < t) || r.corrupt.contains(&i);
    let mut got = r.indices.iter().peekable();
    for i in 0..total {
        if got.peek() == Some(&&i) {
            got.next();
            assert!(!lost(i), "{what}: {i} delivered and reported lost: {r:?}");
        } else {
            assert!(lost(i), "{what}: healthy entry {i} not delivered and not reported: {r:?}");
        }
    }
    assert!(got.next().is_none(), "{what}: no extra entries");
    let lost_count = (0..total).filter(|&i| lost(i)).count();
    assert!(lost_count < most, "{what}: only the damaged entries are lost ({lost_count}): {r:?}");
}

fn zero(path: &Path, at: u64, len: usize) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(&vec![0u8; len], at).unwrap();
}

fn cycles(j: &Journal) -> usize {
    Journal::status(j.dir()).unwrap().cycles.len()
}

#[test]
fn zeroed_page_in_a_sealed_cycle_is_reported_and_skipped() {
    let (dir, _s) = fresh_dir("jd-zero-sealed");
    let total = 1500;
    let j = journal_with(&dir, total);
    assert!(cycles(&j) >= 3);
    // A live tailer opened before the damage, and fresh ones after.
    let mut live = j.tailer().unwrap();
    // Page 2 of cycle 0's data area.
    zero(&dir.join(data_file_name(0)), CYCLE_HEADER_PAGE as u64 + 8192, 4096);
    check(&read_all(&mut live), total, "live tailer");
    check(&read_all(&mut j.tailer().unwrap()), total, "fresh tailer");
    check(&read_all_waiting(&mut j.tailer().unwrap(), total), total, "waiting tailer");
    drop(j);
    // A new process view: open alone (recovery runs on the current cycle only).
    let j = Journal::create_or_open(&dir, &opts()).unwrap();
    let r = read_all(&mut j.tailer().unwrap());
    check(&r, total, "after reopen");
    assert_eq!(r.damaged.len(), 1, "one range: {r:?}");
    assert_eq!(r.damaged[0].0, 0, "in cycle 0");
}

#[test]
fn zeroed_first_data_page_of_a_sealed_cycle() {
    let (dir, _s) = fresh_dir("jd-zero-first");
    let total = 1200;
    let j = journal_with(&dir, total);
    zero(&dir.join(data_file_name(1)), CYCLE_HEADER_PAGE as u64, 4096);
    check(&read_all(&mut j.tailer().unwrap()), total, "zeroed first page of cycle 1");
}

#[test]
fn zeroed_page_in_the_current_cycle_is_reported_and_skipped() {
    let (dir, _s) = fresh_dir("jd-zero-current");
    let total = 1200;
    let j = journal_with(&dir, total);
    let current = Journal::status(j.dir()).unwrap().cycles.last().unwrap().cycle;
    zero(&dir.join(data_file_name(current)), CYCLE_HEADER_PAGE as u64 + 4096, 4096);
    check(&read_all(&mut j.tailer().unwrap()), total, "open handle");
    check(&read_all_waiting(&mut j.tailer().unwrap(), total), total, "waiting tailer");
    drop(j);
    // Alone: recovery must keep what follows the damage, and appends continue after it.
    let j = Journal::create_or_open(&dir, &opts()).unwrap();
    assert!(j.recovery().iter().all(|r| r.dropped_entries == 0), "{:?}", j.recovery());
    check(&read_all(&mut j.tailer().unwrap()), total, "after recovery");
    let mut a = j.appender().unwrap();
    assert_eq!(a.send(&payload(total)).unwrap(), total);
    check(&read_all(&mut j.tailer().unwrap()), total + 1, "appended after the damage");
}

#[test]
fn junk_entry_headers_are_reported_and_skipped() {
    let (dir, _s) = fresh_dir("jd-junk");
    let total = 1200;
    let j = journal_with(&dir, total);
    // Entry 10 of cycle 0 (136 bytes each): junk in word 0 (unknown state, huge size).
    let f = std::fs::OpenOptions::new().write(true).open(dir.join(data_file_name(0))).unwrap();
    f.write_all_at(&[0xEE; 8], CYCLE_HEADER_PAGE as u64 + 10 * 136).unwrap();
    // Entry 20 of cycle 0: a wrong stored index (a header that lies).
    f.write_all_at(&[0x77; 4], CYCLE_HEADER_PAGE as u64 + 20 * 136 + 20).unwrap();
    // Entry 30: a flipped payload byte (a CRC mismatch: only that entry).
    f.write_all_at(&[0x55], CYCLE_HEADER_PAGE as u64 + 30 * 136 + 40).unwrap();
    let r = read_all(&mut j.tailer().unwrap());
    check(&r, total, "junk headers");
    assert!(r.corrupt.contains(&30), "{r:?}");
    assert_eq!(r.indices.iter().filter(|&&i| i < 40).count(), 37, "{r:?}");
}

#[test]
fn unreadable_sealed_cycle_file_is_reported_and_skipped() {
    let (dir, _s) = fresh_dir("jd-bad-cycle-header");
    let total = 1500;
    let j = journal_with(&dir, total);
    let info = Journal::status(j.dir()).unwrap();
    let (first1, first2) = (info.cycles[1].first_index, info.cycles[2].first_index);
    // Cycle 1's header: a broken checksum.
    let f = std::fs::OpenOptions::new().write(true).open(dir.join(data_file_name(1))).unwrap();
    f.write_all_at(&[0xAB; 8], 24).unwrap();
    drop(f);
    assert_eq!(Journal::status(j.dir()).unwrap().unreadable_cycles.len(), 1);
    let r = read_all(&mut j.tailer().unwrap());
    assert_eq!(r.damaged, vec![(1, first1, first2)], "{r:?}");
    check_lost(&r, total, 600, "unreadable cycle 1");
    check_lost(&read_all_waiting(&mut j.tailer().unwrap(), total), total, 600, "waiting tailer");
}

#[test]
fn missing_index_of_a_sealed_cycle_is_rebuilt() {
    let (dir, _s) = fresh_dir("jd-index-sealed");
    let total = 1500;
    let j = journal_with(&dir, total);
    std::fs::remove_file(dir.join(index_file_name(1))).unwrap();
    let mut t = j.tailer().unwrap();
    let r = read_all(&mut t);
    assert_eq!(r.indices, (0..total).collect::<Vec<_>>(), "the whole cycle is read");
    let meta = std::fs::symlink_metadata(dir.join(index_file_name(1))).expect("index rebuilt");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // The rebuilt index serves random access.
    let k = Journal::status(j.dir()).unwrap().cycles[1].first_index + 77;
    let e = j.tailer_at(k).unwrap().try_recv_ref().unwrap().index();
    assert_eq!(e, k);
}

#[test]
fn missing_index_of_the_current_cycle_is_rebuilt_and_appends_continue() {
    let (dir, _s) = fresh_dir("jd-index-current");
    let total = 1200;
    let j = journal_with(&dir, total);
    let current = Journal::status(j.dir()).unwrap().cycles.last().unwrap().cycle;
    drop(j);
    std::fs::remove_file(dir.join(index_file_name(current))).unwrap();
    let j = Journal::create_or_open(&dir, &opts()).expect("a lost index does not make the journal unopenable");
    let mut a = j.appender().unwrap();
    assert_eq!(a.send(&payload(total)).unwrap(), total);
    let r = read_all(&mut j.tailer().unwrap());
    assert_eq!(r.indices, (0..=total).collect::<Vec<_>>());
    let k = total - 5;
    assert_eq!(j.tailer_at(k).unwrap().try_recv_ref().unwrap().index(), k);
}

#[test]
fn damaged_index_pages_do_not_hide_entries() {
    let (dir, _s) = fresh_dir("jd-index-zero");
    let total = 1500;
    let j = journal_with(&dir, total);
    for c in 0..3 {
        let p = dir.join(index_file_name(c));
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.write_all_at(&vec![0xFF; 1024], 0).unwrap();
    }
    assert_eq!(read_all(&mut j.tailer().unwrap()).indices, (0..total).collect::<Vec<_>>());
    for k in [3, 250, 700, 1400] {
        assert_eq!(j.tailer_at(k).unwrap().try_recv_ref().unwrap().index(), k, "tailer_at({k})");
    }
    // Both an index and a data page damaged in one cycle.
    zero(&dir.join(data_file_name(1)), CYCLE_HEADER_PAGE as u64 + 4096, 4096);
    check(&read_all(&mut j.tailer().unwrap()), total, "index and data damaged");
}

#[test]
fn missing_middle_cycle_is_reported() {
    let (dir, _s) = fresh_dir("jd-cycle-gone");
    let total = 1500;
    let j = journal_with(&dir, total);
    std::fs::remove_file(dir.join(data_file_name(1))).unwrap();
    std::fs::remove_file(dir.join(index_file_name(1))).unwrap();
    let r = read_all(&mut j.tailer().unwrap());
    assert_eq!(r.damaged.len(), 1, "{r:?}");
    check_lost(&r, total, 600, "cycle 1 deleted by hand");
}

/// The metadata's `current` word lowered, while the journal is open, to a cycle whose file
/// is gone (deleted by retention, or never there): a new appender continues in the newest
/// cycle present, with indices that keep rising, and a tailer reads the new entries.
/// Following the word would create a cycle with no predecessor (appending fails) or a
/// second cycle 0 (indices restart).
#[test]
fn a_lowered_current_cycle_word_does_not_stop_or_restart_appending() {
    use shmbus::journal::format::META_SHARED_OFFSET;
    let (dir, _s) = fresh_dir("jd-current-low");
    let total = 1500;
    let j = journal_with(&dir, total);
    std::fs::remove_file(dir.join(data_file_name(0))).unwrap();
    std::fs::remove_file(dir.join(index_file_name(0))).unwrap();
    let newest = Journal::status(j.dir()).unwrap().cycles.last().unwrap().cycle;
    assert!(newest >= 2, "the journal spans several cycles ({newest})");
    let meta = std::fs::OpenOptions::new().read(true).write(true).open(dir.join(META_FILE)).unwrap();
    let mut last = total - 1;
    for lowered in [0u64, 1] {
        meta.write_all_at(&lowered.to_le_bytes(), META_SHARED_OFFSET as u64).unwrap();
        let index = j.appender().expect("an appender despite the lowered word").send(b"after").unwrap();
        assert_eq!(index, last + 1, "indices keep rising");
        let mut t = j.tailer_at(index).unwrap();
        let e = t.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!((e.index(), e.data()), (index, &b"after"[..]));
        last = index;
    }
    assert!(!dir.join(data_file_name(0)).exists(), "no second cycle 0");
}

/// Runs with a file-size limit that lets `journal.meta` be written but not the first
/// cycle's data file.
#[test]
fn first_cycle_uncreatable_child() {
    if child_role().as_deref() != Some("nospace") {
        return;
    }
    let dir = std::path::PathBuf::from(std::env::var("JDIR").unwrap());
    // SAFETY: setrlimit/signal on this process only; SIGXFSZ ignored so the write fails
    // with EFBIG instead of killing the process.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let lim = libc::rlimit { rlim_cur: 200 << 10, rlim_max: 200 << 10 };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
    }
    let o = opts().cycle_bytes(8 << 20).chunk_bytes(1 << 20);
    let e = Journal::create_or_open(&dir, &o).expect_err("the first cycle cannot be created");
    println!("\n@@{e}");
}

#[test]
fn journal_whose_first_cycle_cannot_be_created_leaves_nothing_half_made() {
    let (dir, _s) = fresh_dir("jd-nospace");
    let mut c = spawn_child("first_cycle_uncreatable_child", "nospace", &[("JDIR", dir.display().to_string())]);
    let st = wait_with_deadline(&mut c, 30, "nospace child");
    assert!(st.success(), "{st:?}");
    assert!(!dir.join(META_FILE).exists(), "no journal.meta pointing at nothing");
    assert!(!dir.exists() || std::fs::read_dir(&dir).unwrap().next().is_none(), "nothing left behind");
    // And the directory can then be made a journal normally.
    let j = journal_with(&dir, 3);
    assert_eq!(read_all(&mut j.tailer().unwrap()).indices, vec![0, 1, 2]);
}

#[test]
fn a_garbage_named_reader_position_is_reported_once_and_reset_to_the_oldest_entry() {
    use shmbus::journal::format::{MAX_READERS, META_READERS_OFFSET, READER_ENTRY_SIZE};
    let (dir, _s) = fresh_dir("jd-reader-pos");
    let total = 700;
    let j = journal_with(&dir, total);
    {
        let mut r = j.reader("billing").unwrap();
        for _ in 0..10 {
            r.try_recv_ref().unwrap();
        }
        r.ack();
    }
    let meta = std::fs::OpenOptions::new().read(true).write(true).open(dir.join(META_FILE)).unwrap();
    let k = (0..MAX_READERS)
        .find(|&k| {
            let mut w = [0u8; 8];
            meta.read_exact_at(&mut w, (META_READERS_OFFSET + k * READER_ENTRY_SIZE + 8) as u64).unwrap();
            u64::from_le_bytes(w) == 10
        })
        .expect("the reader's saved position");
    for garbage in [u64::MAX, u64::MAX - 1, total + 1, 1 << 40] {
        meta.write_all_at(&garbage.to_le_bytes(), (META_READERS_OFFSET + k * READER_ENTRY_SIZE + 8) as u64).unwrap();
        let mut r = j.reader("billing").unwrap();
        match r.try_recv_ref() {
            Err(JournalTryRecvError::PositionReset { saved, to }) => assert_eq!((saved, to), (garbage, 0)),
            other => panic!("expected PositionReset, got {:?}", other.map(|e| e.index())),
        }
        // Reported once; then every entry from the oldest, in order.
        let got = read_all(&mut r);
        assert_eq!(got.indices, (0..total).collect::<Vec<_>>(), "{got:?}");
        assert!(got.damaged.is_empty() && got.corrupt.is_empty());
    }
    // A plain tailer asked for an index far in the future starts at the end, and sees what
    // is appended next.
    let mut t = j.tailer_at(u64::MAX - 3).unwrap();
    assert!(matches!(t.try_recv_ref(), Err(JournalTryRecvError::Empty)));
    j.appender().unwrap().send(&payload(total)).unwrap();
    assert_eq!(t.try_recv_ref().unwrap().index(), total);
}

#[test]
fn a_fifo_in_place_of_journal_meta_is_an_immediate_clear_error() {
    let (dir, _s) = fresh_dir("jd-fifo-meta");
    drop(journal_with(&dir, 3));
    let meta = dir.join(META_FILE);
    std::fs::remove_file(&meta).unwrap();
    let c = std::ffi::CString::new(meta.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let start = Instant::now();
    let e = Journal::create_or_open(&dir, &opts()).unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(5));
    let msg = shmbus::journal::open_error_message(&e);
    assert!(msg.contains("FIFO") && msg.contains("journal.meta"), "{msg}");
    assert!(!msg.contains("shmbus clean") && !msg.contains("channel"), "{msg}");
}

#[test]
fn a_large_damaged_range_is_scanned_in_steps_within_each_timeout() {
    let (dir, _s) = fresh_dir("jd-large");
    let o = opts().cycle_bytes(32 << 20).chunk_bytes(4 << 20);
    let j = Journal::create_or_open(&dir, &o).unwrap();
    let mut a = j.appender().unwrap();
    let total = 160_000; // 136 bytes each: about 21 MiB
    for i in 0..total {
        a.send(&payload(i)).unwrap();
    }
    drop(a);
    // 12 MiB of zeros in the middle.
    zero(&dir.join(data_file_name(0)), CYCLE_HEADER_PAGE as u64 + (4 << 20), 12 << 20);
    let r = read_all(&mut j.tailer().unwrap());
    check_lost(&r, total, 100_000, "12 MiB zeroed");
    assert_eq!(r.damaged.len(), 1, "{r:?}");
    // A waiting tailer: every call keeps to its timeout while the scan goes on.
    let mut t = j.tailer_at(30_000).unwrap();
    let mut last = None;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        let call = Instant::now();
        let res = t.recv_ref_timeout(Duration::from_millis(5)).map(|e| e.index());
        assert!(call.elapsed() < Duration::from_millis(5) + Duration::from_secs(1), "{:?}", call.elapsed());
        match res {
            Ok(i) => last = Some(i),
            Err(JournalRecvTimeoutError::Timeout) if last == Some(total - 1) => break,
            _ => {}
        }
    }
    assert_eq!(last, Some(total - 1));
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Waits `ms` on `t` and returns the CPU time it burned; asserts nothing new is reported.
fn wait_cpu(t: &mut Tailer, ms: u64) -> Duration {
    let (cpu, wall) = (thread_cpu(), Instant::now());
    let r = t.recv_ref_timeout(Duration::from_millis(ms)).map(|e| e.index());
    assert!(
        matches!(r, Err(JournalRecvTimeoutError::Timeout)),
        "nothing more, reported once: {:?}",
        r.map_err(|e| e.to_string())
    );
    assert!(wall.elapsed() < Duration::from_millis(ms) + Duration::from_secs(2));
    thread_cpu() - cpu
}

#[test]
fn waiting_in_front_of_damage_does_not_spin() {
    let (dir, _s) = fresh_dir("jd-nospin");
    let total = 1500;
    let j = journal_with(&dir, total);
    let info = Journal::status(j.dir()).unwrap();
    let current = info.cycles.last().unwrap().cycle;
    let current_first = info.cycles.last().unwrap().first_index;
    // The current cycle's header damaged while the journal is open (no recovery runs).
    let f = std::fs::OpenOptions::new().read(true).write(true).open(dir.join(data_file_name(current))).unwrap();
    let mut head = [0u8; 8];
    f.read_exact_at(&mut head, 24).unwrap();
    f.write_all_at(&[0xAB; 8], 24).unwrap();
    let mut t = j.tailer().unwrap();
    let r = read_all(&mut t);
    assert_eq!(r.indices, (0..current_first).collect::<Vec<_>>());
    assert_eq!(r.damaged, vec![(current, current_first, current_first)], "{r:?}");
    let cpu = wait_cpu(&mut t, 400);
    assert!(cpu < Duration::from_millis(200), "waiting burned {cpu:?} of CPU in 400 ms");
    f.write_all_at(&head, 24).unwrap();
    drop(t);

    // The current cycle's position word claims more entries and bytes than the file holds.
    assert_eq!(read_all(&mut j.tailer().unwrap()).indices.len() as u64, total);
    let mut w = [0u8; 8];
    f.read_exact_at(&mut w, 256).unwrap();
    let n = (u64::from_le_bytes(w) >> 32) & 0x7fff_ffff;
    f.write_all_at(&(((n + 100) << 32) | ((64 << 10) / 8)).to_le_bytes(), 256).unwrap();
    let mut t = j.tailer_at(total).unwrap();
    let r = read_all(&mut t);
    assert!(r.indices.is_empty() && !r.damaged.is_empty(), "{r:?}");
    let cpu = wait_cpu(&mut t, 400);
    assert!(cpu < Duration::from_millis(200), "waiting burned {cpu:?} of CPU in 400 ms");
}

#[test]
fn an_appender_never_writes_over_entries_a_lowered_position_word_hides() {
    let (dir, _s) = fresh_dir("jd-pos-behind");
    let total = 300; // one cycle
    let j = journal_with(&dir, total);
    let f = std::fs::OpenOptions::new().read(true).write(true).open(dir.join(data_file_name(0))).unwrap();
    let mut w = [0u8; 8];
    f.read_exact_at(&mut w, 256).unwrap();
    let (n, u) = ((u64::from_le_bytes(w) >> 32) & 0x7fff_ffff, u64::from_le_bytes(w) & 0xffff_ffff);
    assert_eq!(n, total);
    // Lowered to an entry boundary: the appender moves it back past the sound entries.
    f.write_all_at(&(((n - 10) << 32) | (u - 10 * 17)).to_le_bytes(), 256).unwrap();
    let mut a = j.appender().unwrap();
    assert_eq!(a.send(&payload(total)).unwrap(), total);
    // Lowered into the middle of an entry: the cycle is sealed, nothing written over.
    f.read_exact_at(&mut w, 256).unwrap();
    let u = u64::from_le_bytes(w) & 0xffff_ffff;
    f.write_all_at(&(((total + 1 - 5) << 32) | (u - 5 * 17 + 3)).to_le_bytes(), 256).unwrap();
    assert_eq!(a.send(&payload(total + 1)).unwrap(), total + 1);
    let r = read_all(&mut j.tailer().unwrap());
    assert_eq!(r.indices, (0..=total + 1).collect::<Vec<_>>(), "{r:?}");
    // Junk past the real end (free space that is not zero): sealed, the next cycle used.
    f.read_exact_at(&mut w, 256).unwrap();
    let u = u64::from_le_bytes(w) & 0xffff_ffff;
    f.write_all_at(&[0x99; 8], CYCLE_HEADER_PAGE as u64 + u * 8).unwrap();
    assert_eq!(a.send(&payload(total + 2)).unwrap(), total + 2);
    let r = read_all(&mut j.tailer().unwrap());
    assert_eq!(r.indices, (0..=total + 2).collect::<Vec<_>>(), "{r:?}");
    assert!(r.damaged.is_empty() && r.corrupt.is_empty(), "{r:?}");
    assert_eq!(Journal::status(j.dir()).unwrap().cycles.len(), 2);
}
