//! Hostile shared state under live journal readers and writers: one process (the victim)
//! tails, reopens, reads as a named reader and appends, while another process writes
//! random and targeted values (0, 1, max, max-1, random, off-by-one of the real value)
//! into every control word of the journal's files tens of thousands of times: the
//! metadata's shared words and header fields, the appender and named-reader tables, each
//! cycle's position/alloc words and header, index slots and entry headers.
//!
//! A watchdog in the victim asserts that every call returns within its timeout (plus
//! slack); the parent asserts that the victim was not killed by a signal, that its output
//! stays bounded, and that once the hostile writer stops (and puts back the immutable
//! headers it scribbled on), an honest append is read back.

#![cfg(not(loom))]

mod common;

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{child_role, fresh_dir, spawn_child, wait_with_deadline, Rng};
use shmbus::journal::format::{pos_word, META_FILE};
use shmbus::journal::{Journal, JournalConfig, JournalRecvTimeoutError, JournalTryRecvError, Retention, RollCycle};

const HOSTILE_SECS: u64 = 6;
/// A call with a timeout may overrun it by at most this much.
const SLACK: Duration = Duration::from_secs(2);
/// A call without a timeout (open, positioning, append) must return within this.
const BOUNDED: Duration = Duration::from_secs(3);

fn opts() -> JournalConfig {
    JournalConfig::default()
        .cycle_bytes(64 << 10)
        .chunk_bytes(16 << 10)
        .max_entry_len(1024)
        .roll(RollCycle::Never)
        .retention(Retention { max_cycles: Some(8), max_age: None })
        .abandon_timeout(Duration::from_millis(200))
}

/// Runs `f`, failing the victim if it took longer than `limit`.
fn timed<T>(what: &str, limit: Duration, max: &mut Duration, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let r = f();
    let took = start.elapsed();
    *max = (*max).max(took);
    assert!(took <= limit, "{what} took {took:?}, more than {limit:?}");
    r
}

#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    let dir = PathBuf::from(std::env::var("JDIR").unwrap());
    match role.as_str() {
        "victim" => victim(&dir),
        "hostile" => hostile(&dir),
        r => panic!("unknown role {r}"),
    }
}

fn victim(dir: &Path) {
    let stop = dir.join("stop");
    let j = Journal::create_or_open(dir, &opts()).unwrap();
    let stopping = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let appender = {
        let (j, stopping) = (j.clone(), stopping.clone());
        std::thread::spawn(move || {
            let (mut max, mut ok, mut failed) = (Duration::ZERO, 0u64, 0u64);
            let mut app = None;
            while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
                if app.is_none() {
                    app = timed("appender()", BOUNDED, &mut max, || j.appender()).ok();
                }
                if let Some(a) = app.as_mut() {
                    match timed("append", BOUNDED, &mut max, || a.send(b"honest entry from the victim")) {
                        Ok(_) => ok += 1,
                        Err(_) => {
                            failed += 1;
                            app = None;
                        }
                    }
                }
                std::thread::sleep(Duration::from_micros(300));
            }
            (max, ok, failed)
        })
    };
    let mut rng = Rng::from_var_or_clock("SHMBUS_SEED");
    let (mut max, mut calls, mut entries, mut errors) = (Duration::ZERO, 0u64, 0u64, 0u64);
    let mut kinds: HashMap<String, u64> = HashMap::new();
    let mut t = j.tailer().ok();
    let mut no_tailer = 0u64;
    while !stop.exists() {
        calls += 1;
        if let Some(tl) = t.as_mut() {
            let r = timed("recv_ref_timeout(20 ms)", Duration::from_millis(20) + SLACK, &mut max, || {
                tl.recv_ref_timeout(Duration::from_millis(20)).map(|e| e.index())
            });
            match r {
                Ok(_) => entries += 1,
                Err(JournalRecvTimeoutError::Timeout) => {}
                Err(e) => {
                    errors += 1;
                    let kind = match e {
                        JournalRecvTimeoutError::Gap { .. } => "gap",
                        JournalRecvTimeoutError::Damaged { .. } => "damaged",
                        JournalRecvTimeoutError::Corrupt(_) => "corrupt",
                        JournalRecvTimeoutError::PositionReset { .. } => "reset",
                        _ => "other",
                    };
                    if kinds.get(kind).is_none_or(|&k| k < 3) {
                        eprintln!("victim: {e}");
                    }
                    *kinds.entry(kind.into()).or_default() += 1;
                }
            }
        }
        if calls % 50 == 0 {
            // Reposition, reopen, look: every entry point under the same hostility.
            drop(t.take());
            t = match rng.below(6) {
                0 => timed("tailer()", BOUNDED, &mut max, || j.tailer()).ok(),
                1 => timed("tailer_at", BOUNDED, &mut max, || j.tailer_at(rng.next() >> rng.below(64))).ok(),
                2 => timed("tailer_at_end", BOUNDED, &mut max, || j.tailer_at_end()).ok(),
                3 => timed("tailer_at_time", BOUNDED, &mut max, || j.tailer_at_time(rng.next())).ok(),
                4 => timed("reader", BOUNDED, &mut max, || j.reader("hostile-r")).ok(),
                _ => {
                    let _ = timed("info", BOUNDED, &mut max, || Journal::status(j.dir()));
                    let _ = timed("readers", BOUNDED, &mut max, || j.readers());
                    let again = timed("Journal::open", BOUNDED, &mut max, || Journal::create_or_open(dir, &opts()));
                    let mut tl = again.ok().and_then(|j2| j2.tailer().ok());
                    if let Some(tl) = tl.as_mut() {
                        timed("try_recv_ref x100", BOUNDED, &mut max, || {
                            for _ in 0..100 {
                                if let Err(JournalTryRecvError::Empty) = tl.try_recv_ref() {
                                    break;
                                }
                            }
                        });
                    }
                    tl
                }
            };
            match t.as_ref() {
                Some(tl) => tl.ack(),
                None => no_tailer += 1,
            }
        }
        if t.is_none() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    stopping.store(true, std::sync::atomic::Ordering::Relaxed);
    let (amax, appended, append_failed) = appender.join().expect("the appender thread did not panic");
    drop(t);
    // The hostile writer has stopped and put the immutable headers back: the honest parties
    // work again. (Fresh handle: what a restarted process sees.)
    let j = Journal::create_or_open(dir, &opts()).expect("reopen after the hostility");
    let index = j.appender().unwrap().send(b"after").expect("append after the hostility");
    let mut t = j.tailer_at(index).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    // What the tailer returned instead, for the failure message.
    let mut seen: Vec<String> = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "the honest entry {index} was not read back; the tailer returned {seen:?}");
        let got = match t.recv_ref_timeout(Duration::from_millis(100)) {
            Ok(e) if e.index() == index => {
                assert_eq!(e.data(), b"after");
                break;
            }
            Ok(e) => format!("entry {}", e.index()),
            Err(e) => e.to_string(),
        };
        if seen.len() < 8 && seen.last() != Some(&got) {
            seen.push(got);
        }
    }
    let mut kinds: Vec<_> = kinds.into_iter().collect();
    kinds.sort();
    println!(
        "\n@@calls {calls} entries {entries} errors {errors} {kinds:?} no_tailer {no_tailer} max_call_ms {} \
         appended {appended} append_failed {append_failed} max_append_ms {}",
        max.as_millis(),
        amax.as_millis()
    );
}

/// One hostile value for a word whose honest value is `real`.
fn value(rng: &mut Rng, real: u64) -> u64 {
    match rng.below(9) {
        0 => 0,
        1 => 1,
        2 => u64::MAX,
        3 => u64::MAX - 1,
        4 => real.wrapping_add(1),
        5 => real.wrapping_sub(1),
        6 => real ^ (1 << rng.below(64)),
        7 => real.wrapping_add(1 << 32), // one more entry in a position word
        _ => rng.next(),
    }
}

fn hostile(dir: &Path) {
    let mut rng = Rng::from_var_or_clock("SHMBUS_SEED");
    let end = Instant::now() + Duration::from_secs(HOSTILE_SECS);
    // Immutable headers are put back at the end: (file, offset) → original bytes.
    let mut saved: HashMap<(PathBuf, u64), [u8; 8]> = HashMap::new();
    let meta = dir.join(META_FILE);
    let mut writes = 0u64;
    let mut files: Vec<(u64, PathBuf, PathBuf)> = Vec::new();
    while Instant::now() < end {
        if writes % 256 == 0 {
            files = std::fs::read_dir(dir)
                .unwrap()
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    let c = shmbus::journal::format::parse_data_file_name(&name)?;
                    Some((c, dir.join(&name), dir.join(shmbus::journal::format::index_file_name(c))))
                })
                .collect();
            files.sort();
        }
        let (path, off, immutable) = match rng.below(12) {
            // The metadata's shared words: current, first, the event word, the archive length.
            0 | 1 => (meta.clone(), [512, 520, 576, 1024][rng.below(4) as usize], false),
            // The metadata's immutable header fields (cycle size, chunk, max entry, ...).
            2 => (meta.clone(), 8 * rng.below(16), true),
            // The appender table: state, pid, start time, role and the aux (claim) words.
            3 => (meta.clone(), 4096 + 64 * rng.below(4) + 8 * rng.below(8), false),
            // The named-reader table: state, position (the cursor), holder, name.
            4 | 5 => (meta.clone(), 12288 + 128 * rng.below(4) + 8 * rng.below(16), false),
            // A cycle's position, alloc and ialloc words (mostly the newest cycles).
            6..=8 if !files.is_empty() => {
                let k = files.len() - 1 - (rng.below(3) as usize).min(files.len() - 1);
                (files[k].1.clone(), [256, 320, 384][rng.below(3) as usize], false)
            }
            // A cycle header field.
            9 if !files.is_empty() => (files[rng.below(files.len() as u64) as usize].1.clone(), 8 * rng.below(8), true),
            // An index slot (two at once).
            10 if !files.is_empty() => {
                (files[rng.below(files.len() as u64) as usize].2.clone(), 8 * rng.below(512), false)
            }
            // An entry header word in the written part of a data file.
            _ if !files.is_empty() => {
                let p = files[files.len() - 1 - (rng.below(2) as usize).min(files.len() - 1)].1.clone();
                let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(4096).clamp(4096 + 8, 64 << 10);
                (p, 4096 + 8 * rng.below((len - 4096) / 8), false)
            }
            _ => continue,
        };
        let Ok(f) = std::fs::OpenOptions::new().read(true).write(true).open(&path) else { continue };
        let mut cur = [0u8; 8];
        if f.read_exact_at(&mut cur, off).is_err() {
            continue;
        }
        if immutable {
            saved.entry((path.clone(), off)).or_insert(cur);
        }
        let real = u64::from_le_bytes(cur);
        let v = if off == 256 && rng.below(2) == 0 {
            // A targeted position word: a plausible but wrong (sealed, n, units).
            let (n, u) = ((real >> 32) & 0x7fff_ffff, real & 0xffff_ffff);
            pos_word(rng.below(2) == 0, value(&mut rng, n) & 0x7fff_ffff, value(&mut rng, u) & 0xffff_ffff)
        } else {
            value(&mut rng, real)
        };
        let _ = f.write_all_at(&v.to_le_bytes(), off);
        writes += 1;
        if writes % 32 == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    for ((path, off), bytes) in saved {
        if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&path) {
            let _ = f.write_all_at(&bytes, off);
        }
    }
    println!("\n@@writes {writes}");
}

fn marked(out: &str) -> Vec<String> {
    out.lines().filter_map(|l| l.strip_prefix("@@").map(str::to_owned)).collect()
}

#[test]
fn hostile_control_state_never_hangs_or_kills_journal_readers() {
    let (dir, _s) = fresh_dir("jh-hostile");
    {
        let j = Journal::create_or_open(&dir, &opts()).unwrap();
        let mut a = j.appender().unwrap();
        for i in 0..2000u64 {
            a.send(&i.to_le_bytes().repeat(8)).unwrap();
        }
        drop(j.reader("hostile-r").unwrap());
    }
    let env = [("JDIR", dir.display().to_string())];
    let mut victim = spawn_child("child_entry", "victim", &env);
    let victim_out = collect_stdout(&mut victim);
    std::thread::sleep(Duration::from_millis(300));
    let mut hostile = spawn_child("child_entry", "hostile", &env);
    let hostile_out = collect_stdout(&mut hostile);
    let st = wait_with_deadline(&mut hostile, HOSTILE_SECS + 20, "hostile writer");
    assert!(st.success(), "hostile writer: {st:?}");
    std::fs::write(dir.join("stop"), b"").unwrap();
    let st = wait_with_deadline(&mut victim, 30, "victim (a call hung)");
    assert_eq!(st.signal(), None, "the victim was killed by a signal: {st:?}");
    assert!(st.success(), "the victim failed (a call overran its timeout, or an honest append was lost): {st:?}");
    let out = victim_out.join().unwrap();
    assert!(out.len() < 64 << 10, "output stays bounded ({} bytes)", out.len());
    let hostile_report = marked(&hostile_out.join().unwrap());
    let report = marked(&out);
    eprintln!("hostile: {hostile_report:?}\nvictim: {report:?}");
    let writes: u64 = hostile_report[0].strip_prefix("writes ").unwrap().parse().unwrap();
    assert!(writes >= 5000, "many thousands of hostile writes ({writes})");
    assert_eq!(report.len(), 1, "{out}");
}

fn collect_stdout(c: &mut std::process::Child) -> std::thread::JoinHandle<String> {
    let mut out = c.stdout.take().unwrap();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    })
}

/// The `journal_state` fuzz target's harness (one copy, shared with the fuzz crate).
mod fuzz_harness {
    include!("../../../fuzz/fuzz_targets/journal_state_body.rs");
}

/// Replays the `journal_state` fuzz corpus (targeted values for every control word), then
/// random mutations of it, through the fuzz target's own harness: tailing, positioning,
/// named readers, appending and recovery must never panic (this build checks overflow),
/// fault or hang. Seed: SHMBUS_SEED.
#[test]
fn journal_state_fuzz_corpus_and_mutations_are_survived() {
    replay_journal_state(Rng::from_env_or_clock());
}

/// A mutation sequence that once pointed an index slot past the cycle's capacity while
/// `tailer_at_time` searched by timestamp (the entry header was read out of bounds).
#[test]
fn journal_state_regression_index_slot_past_the_capacity() {
    replay_journal_state(Rng(1795469877406982795));
}

fn replay_journal_state(mut rng: Rng) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/journal_state");
    let mut corpus: Vec<Vec<u8>> =
        std::fs::read_dir(&dir).unwrap().map(|e| std::fs::read(e.unwrap().path()).unwrap()).collect();
    corpus.sort();
    assert!(corpus.len() >= 10, "the corpus holds targeted inputs for every kind of word");
    let start = Instant::now();
    for input in &corpus {
        fuzz_harness::exercise_journal_state(input);
    }
    let mut runs = 0;
    while runs < 400 && start.elapsed() < Duration::from_secs(15) {
        let mut input = corpus[rng.below(corpus.len() as u64) as usize].clone();
        for _ in 0..1 + rng.below(12) {
            let mut rec = [0u8; 11];
            rec[0] = rng.below(6) as u8;
            rec[1..3].copy_from_slice(&(rng.next() as u16).to_le_bytes());
            let v = [0, 1, u64::MAX, u64::MAX - 1, rng.next(), rng.next() & 0xffff_ffff][rng.below(6) as usize];
            rec[3..].copy_from_slice(&v.to_le_bytes());
            input.extend_from_slice(&rec);
        }
        fuzz_harness::exercise_journal_state(&input);
        runs += 1;
    }
    assert!(runs >= 20, "only {runs} mutated inputs in the time given");
}
