//! Multi-process journal tests with real processes: the test binary re-executes itself
//! (`child_entry`) in a role chosen by `SHMBUS_TEST_CHILD`.
//!
//! * two appender processes × 100,000 entries, three tailer processes: identical order,
//!   every entry exactly once;
//! * 200 SIGKILLs of appenders at random points (also between reserve and commit): no
//!   committed entry lost, the live tailer never stuck;
//! * SIGKILL of a named reader and resume, with the documented duplicate window;
//! * the `journal` example runs.

#![cfg(not(loom))]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use common::{child_role, example_command, fresh_dir, sigkill, spawn_child, Rng};
use shmbus::journal::{Journal, JournalConfig, JournalRecvTimeoutError, RollCycle};

fn opts() -> JournalConfig {
    JournalConfig::default()
        .cycle_bytes(2 << 20)
        .chunk_bytes(256 << 10)
        .max_entry_len(4096)
        .roll(RollCycle::Never)
        .abandon_timeout(Duration::from_secs(5))
}

fn spawn(role: &str, dir: &Path, extra: &[(&str, String)]) -> Child {
    let mut env = vec![("JDIR", dir.display().to_string())];
    env.extend_from_slice(extra);
    spawn_child("child_entry", role, &env)
}

fn wait_with_timeout(mut c: Child, limit: Duration) -> (bool, String) {
    let mut out = c.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            return (st.success(), reader.join().unwrap());
        }
        if start.elapsed() > limit {
            let _ = c.kill();
            let _ = c.wait();
            return (false, reader.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Lines the child marked with `@@` (the test harness prints around them).
fn marked(out: &str) -> Vec<String> {
    out.lines().filter_map(|l| l.strip_prefix("@@").map(str::to_owned)).collect()
}

/// Payload of appender `a`'s `seq`-th entry (16 to 40 bytes, self-checking).
fn entry_bytes(a: u64, seq: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(40);
    v.extend_from_slice(&a.to_le_bytes());
    v.extend_from_slice(&seq.to_le_bytes());
    let pad = (seq % 25) as usize;
    v.extend((0..pad).map(|k| (a as u8) ^ (seq as u8).wrapping_add(k as u8)));
    v
}

fn parse_entry(d: &[u8]) -> Option<(u64, u64)> {
    if d.len() < 16 {
        return None;
    }
    let a = u64::from_le_bytes(d[0..8].try_into().ok()?);
    let s = u64::from_le_bytes(d[8..16].try_into().ok()?);
    (entry_bytes(a, s) == d).then_some((a, s))
}

#[test]
fn child_entry() {
    let Some(role) = child_role() else {
        return;
    };
    let dir = PathBuf::from(std::env::var("JDIR").unwrap());
    let j = Journal::create_or_open(&dir, &opts()).unwrap();
    let var = |k: &str| std::env::var(k).unwrap().parse::<u64>().unwrap();
    let mut out = std::io::stdout().lock();
    match role.as_str() {
        "appender" => {
            let (id, count) = (var("APP_ID"), var("COUNT"));
            let mut a = j.appender().unwrap();
            for seq in 0..count {
                a.send(&entry_bytes(id, seq)).unwrap();
            }
        }
        "tailer" => {
            // Reads `COUNT` entries; checks density and per-appender order; prints a digest.
            let count = var("COUNT");
            let mut t = j.tailer().unwrap();
            let mut next_seq = [0u64; 2];
            let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
            let mut n = 0;
            while n < count {
                let e = t.recv_ref_timeout(Duration::from_secs(30)).expect("tailer timed out");
                assert_eq!(e.index(), n, "indices are dense and in order");
                let (a, s) = parse_entry(e.data()).expect("payload intact");
                assert_eq!(s, next_seq[a as usize], "appender {a}'s entries in order, none lost or repeated");
                next_seq[a as usize] += 1;
                digest = (digest ^ (a << 32 | s)).wrapping_mul(0x100_0000_01b3);
                n += 1;
            }
            writeln!(out, "\n@@digest {digest:016x}").unwrap();
        }
        "crashy" => {
            // Appends until killed; reports each committed index on stdout (unbuffered).
            let id = var("APP_ID");
            let mut rng = Rng(var("SEED") | 1);
            let mut a = j.appender().unwrap();
            for seq in 0.. {
                let d = entry_bytes(id, seq);
                let index = if rng.next() % 2 == 0 {
                    a.send(&d).unwrap()
                } else {
                    let mut r = a.loan(d.len()).unwrap();
                    r.copy_from_slice(&d);
                    for _ in 0..(rng.next() % 2000) {
                        std::hint::spin_loop();
                    }
                    r.send().unwrap()
                };
                out.write_all(format!("\n@@{index} {id} {seq}\n").as_bytes()).unwrap();
                out.flush().unwrap();
            }
        }
        "reader" => {
            let mut r = j.reader("billing").unwrap();
            while let Some(e) = match r.recv_ref_timeout(Duration::from_millis(200)) {
                Ok(e) => Some(e),
                Err(JournalRecvTimeoutError::Timeout) => None,
                Err(e) => panic!("{e}"),
            } {
                let i = e.index();
                out.write_all(format!("\n@@{i}\n").as_bytes()).unwrap();
                out.flush().unwrap();
                r.ack();
            }
            out.write_all(b"\n@@end\n").unwrap();
        }
        "follow" => {
            // Reads from the start until index TARGET is seen; every entry intact, in order.
            let target = var("TARGET");
            let mut t = j.tailer().unwrap();
            let mut last = None;
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                assert!(Instant::now() < deadline, "follow: stuck at {:?}", t.position());
                if let Some(e) = match t.recv_ref_timeout(Duration::from_millis(200)) {
                    Ok(e) => Some(e),
                    Err(JournalRecvTimeoutError::Timeout) => None,
                    Err(e) => panic!("{e}"),
                } {
                    parse_entry(e.data()).expect("payload intact");
                    assert!(last.is_none_or(|l| e.index() > l), "in order");
                    last = Some(e.index());
                    if e.index() >= target {
                        break;
                    }
                }
            }
            out.write_all(b"\n@@done\n").unwrap();
        }
        other => panic!("unknown child role {other}"),
    }
}

/// Runs two `crashy` appenders (ids `2 * round` and `2 * round + 1`) for `min_us` plus up to
/// 20 ms, SIGKILLs both and adds every `(index, appender, seq)` they reported as committed
/// to `committed`. Returns how many were killed.
fn crashy_round(dir: &Path, round: u64, min_us: u64, rng: &mut Rng, committed: &mut Vec<(u64, u64, u64)>) -> u64 {
    let kids: Vec<Child> = (0..2)
        .map(|k| spawn("crashy", dir, &[("APP_ID", (round * 2 + k).to_string()), ("SEED", rng.next().to_string())]))
        .collect();
    std::thread::sleep(Duration::from_micros(min_us + rng.next() % 20_000));
    let mut kills = 0;
    for mut k in kids {
        sigkill(&mut k);
        let _ = k.wait();
        kills += 1;
        let out = BufReader::new(k.stdout.take().unwrap());
        for line in out.lines().map_while(Result::ok).filter_map(|l| l.strip_prefix("@@").map(str::to_owned)) {
            let v: Vec<u64> = line.split(' ').filter_map(|x| x.parse().ok()).collect();
            if v.len() == 3 {
                committed.push((v[0], v[1], v[2]));
            }
        }
    }
    kills
}

#[test]
fn two_appender_processes_three_tailer_processes() {
    let (dir, _c) = fresh_dir("jp-mpmc");
    drop(Journal::create_or_open(&dir, &opts()).unwrap());
    const N: u64 = 100_000;
    let tailers: Vec<Child> = (0..3).map(|_| spawn("tailer", &dir, &[("COUNT", (2 * N).to_string())])).collect();
    let appenders: Vec<Child> =
        (0..2).map(|a| spawn("appender", &dir, &[("APP_ID", a.to_string()), ("COUNT", N.to_string())])).collect();
    for a in appenders {
        let (ok, _) = wait_with_timeout(a, Duration::from_secs(120));
        assert!(ok, "appender failed");
    }
    let digests: Vec<String> = tailers
        .into_iter()
        .map(|t| {
            let (ok, out) = wait_with_timeout(t, Duration::from_secs(120));
            assert!(ok, "tailer failed: {out}");
            marked(&out).into_iter().find(|l| l.starts_with("digest")).unwrap_or_else(|| panic!("no digest in {out}"))
        })
        .collect();
    assert!(digests.iter().all(|d| *d == digests[0]), "tailers disagree on the order: {digests:?}");
    let info = Journal::status(&dir).unwrap();
    assert_eq!(info.next_index, 2 * N);
    assert!(info.cycles.len() > 1, "the test should cross a roll: {:?}", info.cycles);
}

#[test]
fn sigkilled_appenders_lose_no_committed_entry_and_never_block_tailers() {
    let (dir, _c) = fresh_dir("jp-kill");
    // Small cycles, so that kills also land while cycles roll (an existing journal keeps
    // its configuration: the children open it with `opts()`).
    let j = Journal::create_or_open(&dir, &opts().cycle_bytes(256 << 10).chunk_bytes(64 << 10)).unwrap();
    let mut rng = Rng::from_env_or_clock();
    let mut tailer = j.tailer().unwrap();
    let mut seen = std::collections::HashMap::<u64, (u64, u64)>::new();
    let mut committed = Vec::<(u64, u64, u64)>::new();
    let mut kills = 0;
    let mut round = 0u64;
    while kills < 200 {
        kills += crashy_round(&dir, round, 2000, &mut rng, &mut committed);
        // Drain what is there: the tailer must get past every dead appender's entry.
        for e in tailer.try_iter() {
            let e = e.unwrap();
            let (a, s) = parse_entry(e.data()).expect("payload intact");
            assert!(seen.insert(e.index(), (a, s)).is_none());
        }
        round += 1;
    }
    // A final live append: the tailer must reach it (nothing blocks it).
    let end = j.appender().unwrap().send(&entry_bytes(u32::MAX as u64, 0)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !seen.contains_key(&end) {
        assert!(Instant::now() < deadline, "tailer stuck before index {end} (at {})", tailer.position());
        match tailer.recv_ref_timeout(Duration::from_secs(1)) {
            Ok(e) => {
                let (a, s) = parse_entry(e.data()).expect("payload intact");
                assert!(seen.insert(e.index(), (a, s)).is_none());
            }
            Err(JournalRecvTimeoutError::Timeout) => {}
            Err(JournalRecvTimeoutError::Corrupt(c)) => panic!("corrupt entry: {c}"),
            Err(e) => panic!("{e}"),
        }
    }
    assert!(!committed.is_empty());
    for (index, a, s) in &committed {
        assert_eq!(seen.get(index), Some(&(*a, *s)), "committed entry {index} lost");
    }
    eprintln!(
        "{kills} kills, {} committed reported, {} entries read, last index {end}, {} cycles",
        committed.len(),
        seen.len(),
        Journal::status(j.dir()).unwrap().cycles.len()
    );
}

/// Every process killed (no handle left open): the next opener is alone, recovers the
/// current cycle (dead appenders' holes become abandoned entries) and loses nothing
/// committed.
#[test]
fn open_after_everyone_was_killed_recovers() {
    let (dir, _c) = fresh_dir("jp-killall");
    drop(Journal::create_or_open(&dir, &opts().cycle_bytes(256 << 10).chunk_bytes(64 << 10)).unwrap());
    let mut rng = Rng::from_env_or_clock();
    let mut committed = Vec::<(u64, u64, u64)>::new();
    let mut holes = 0;
    for round in 0..20u64 {
        crashy_round(&dir, round, 3000, &mut rng, &mut committed);
        // Nobody has the journal open now: this open runs recovery.
        let j = Journal::create_or_open(&dir, &opts()).unwrap();
        holes += j.recovery().iter().map(|r| r.abandoned_holes).sum::<u64>();
        let mut t = j.tailer().unwrap();
        let mut seen = std::collections::HashMap::new();
        for e in t.try_iter() {
            let e = e.unwrap();
            seen.insert(e.index(), parse_entry(e.data()).expect("payload intact"));
        }
        for (index, a, s) in &committed {
            assert_eq!(seen.get(index), Some(&(*a, *s)), "committed entry {index} lost");
        }
        // Appending continues.
        j.appender().unwrap().send(&entry_bytes(u32::MAX as u64, round)).unwrap();
    }
    eprintln!("{} committed entries kept; {holes} holes repaired by the scan", committed.len());
}

#[test]
fn sigkilled_named_reader_resumes() {
    let (dir, _c) = fresh_dir("jp-reader");
    let j = Journal::create_or_open(&dir, &opts()).unwrap();
    let mut a = j.appender().unwrap();
    const N: u64 = 20_000;
    for i in 0..N {
        a.send(&i.to_le_bytes()).unwrap();
    }
    let mut rng = Rng::from_env_or_clock();
    let mut last: Option<u64> = None;
    let mut restarts = 0;
    loop {
        let mut c = spawn("reader", &dir, &[]);
        let killed = restarts < 5;
        if killed {
            std::thread::sleep(Duration::from_millis(20 + rng.next() % 30));
            sigkill(&mut c);
        }
        let _ = c.wait();
        let out = BufReader::new(c.stdout.take().unwrap());
        let lines: Vec<String> =
            out.lines().map_while(Result::ok).filter_map(|l| l.strip_prefix("@@").map(str::to_owned)).collect();
        let got: Vec<u64> = lines.iter().filter_map(|l| l.parse().ok()).collect();
        if let Some(&first) = got.first() {
            // Resume: no entry skipped; at most the last one before the kill repeated.
            let expect = last.map_or(0, |l| l + 1);
            assert!(first == expect || Some(first) == last, "resumed at {first}, last processed {last:?}");
        }
        for w in got.windows(2) {
            assert_eq!(w[1], w[0] + 1);
        }
        if let Some(&l) = got.last() {
            last = Some(l);
        }
        if !killed {
            assert_eq!(lines.last().map(String::as_str), Some("end"));
            break;
        }
        restarts += 1;
    }
    assert_eq!(last, Some(N - 1));
    assert_eq!(j.readers()[0].position, N);
}

/// The first restart after a SIGKILL works, for every role: an appender killed at a random
/// instant (mid-append, mid-reservation, while its pretoucher grows the file, while a cycle
/// rolls) is followed at once by a new appender process that appends; a tailer killed
/// mid-read by a new one that reads through; a named reader by one that is not refused as
/// busy and resumes (see `sigkilled_named_reader_resumes` for the exact resume point).
/// Nothing committed is lost.
#[test]
fn sigkill_then_restart_works_the_first_time_for_every_role() {
    let (dir, _c) = fresh_dir("jp-restart");
    let j = Journal::create_or_open(&dir, &opts().cycle_bytes(256 << 10).chunk_bytes(64 << 10)).unwrap();
    let mut rng = Rng::from_env_or_clock();
    let mut committed = Vec::<(u64, u64, u64)>::new();
    for round in 0..12u64 {
        // Appender: killed at a random instant, then the first restart must append.
        crashy_round(&dir, 100 + round, 1000, &mut rng, &mut committed);
        let id = 1000 + round;
        let (ok, out) = wait_with_timeout(
            spawn("appender", &dir, &[("APP_ID", id.to_string()), ("COUNT", "50".into())]),
            Duration::from_secs(20),
        );
        assert!(ok, "round {round}: the first appender started after the kill failed: {out}");
        // Tailer: killed mid-read, then the first restart reads through to the end.
        let target = Journal::status(j.dir()).unwrap().next_index - 1;
        let mut t = spawn("follow", &dir, &[("TARGET", target.to_string())]);
        std::thread::sleep(Duration::from_millis(rng.next() % 20));
        sigkill(&mut t);
        let _ = t.wait();
        let (ok, out) =
            wait_with_timeout(spawn("follow", &dir, &[("TARGET", target.to_string())]), Duration::from_secs(30));
        assert!(ok && marked(&out).contains(&"done".to_owned()), "round {round}: restarted tailer: {out}");
        // Named reader: killed while reading (and acknowledging), then restarted at once.
        let mut r = spawn("reader", &dir, &[]);
        std::thread::sleep(Duration::from_millis(rng.next() % 20));
        sigkill(&mut r);
        let _ = r.wait();
        let (ok, out) = wait_with_timeout(spawn("reader", &dir, &[]), Duration::from_secs(30));
        assert!(ok && marked(&out).last().map(String::as_str) == Some("end"), "round {round}: restarted reader: {out}");
    }
    let mut t = j.tailer().unwrap();
    let mut seen = std::collections::HashMap::new();
    for e in t.try_iter() {
        let e = e.unwrap();
        seen.insert(e.index(), parse_entry(e.data()).expect("payload intact"));
    }
    for (index, a, s) in &committed {
        assert_eq!(seen.get(index), Some(&(*a, *s)), "committed entry {index} lost");
    }
}

#[test]
fn journal_example_runs() {
    let (dir, _c) = fresh_dir("jp-example");
    let out = example_command("journal").arg(&dir).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("\nok"), "{text}");
}
