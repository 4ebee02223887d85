//! SIGKILL a stream's writer and reader processes at random moments, over and over, and
//! check what the reader delivered.
//!
//! Writer incarnation `w` writes records `(w, 0), (w, 1), …` (random length, content a
//! function of `(w, seq)`) and appends `seq` to `w<w>.log` *after* each commit. Reader
//! incarnation `r` verifies each record's content, appends `wid seq` to `r<r>.log`, and only
//! *then* consumes it. A final reader drains the ring once the last writer is dead.
//!
//! Checked: no torn record (content verified); records of each writer arrive in order,
//! without gaps, and a new writer's first record follows the previous one's last; a record
//! is delivered twice only when a reader was killed between delivering and consuming it
//! (then it is the successor's first record); every record a writer logged as committed is
//! delivered; every replacement endpoint takes over (no `Busy` from a dead holder); nothing
//! hangs (the drain finishes). `SHMBUS_STREAM_KILLS` sets the number of kills (default 200).

#![cfg(not(loom))]

mod common;

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{child_command, child_role, sigkill, wait_with_deadline, Rng, Scratch};
use shmbus::stream::{Stream, StreamConfig, StreamRecvError, StreamSendError};
use shmbus::Domain;

const NAME: &str = "crash";

fn pattern(wid: u64, seq: u64, i: usize) -> u8 {
    (wid.wrapping_mul(131).wrapping_add(seq.wrapping_mul(7)) as usize).wrapping_add(i) as u8
}

fn log_file(path: &Path) -> std::fs::File {
    OpenOptions::new().create(true).append(true).open(path).unwrap()
}

// ---------------------------------------------------------------------------------------
// Children

#[test]
fn child_entry() {
    let Some(role) = child_role() else {
        return;
    };
    let d = Domain::new("test").unwrap();
    let root = PathBuf::from(std::env::var("SHMBUS_ROOT").unwrap());
    let id: u64 = std::env::var("SHMBUS_TEST_ID").unwrap().parse().unwrap();
    match role.as_str() {
        "writer" => writer(&d, &root, id),
        "reader" => reader(&d, &root, id, false),
        "drain" => reader(&d, &root, id, true),
        other => panic!("unknown child role {other}"),
    }
}

fn writer(d: &Domain, root: &Path, wid: u64) {
    let mut log = log_file(&root.join(format!("w{wid}.log")));
    let mut w = match Stream::open(d, NAME).and_then(|s| s.writer()) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("writer {wid}: {e}");
            std::process::exit(3);
        }
    };
    let mut rng = Rng((wid + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    for seq in 0u64.. {
        let len = 16 + (rng.next() % 3000) as usize;
        let mut g = loop {
            match w.loan(len) {
                Ok(g) => break g,
                // The reader is being replaced.
                Err(StreamSendError::Disconnected) => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => {
                    eprintln!("writer {wid}: {e}");
                    std::process::exit(3);
                }
            }
        };
        g[..8].copy_from_slice(&wid.to_le_bytes());
        g[8..16].copy_from_slice(&seq.to_le_bytes());
        for (i, b) in g[16..].iter_mut().enumerate() {
            *b = pattern(wid, seq, i);
        }
        g.send();
        log.write_all(format!("{seq}\n").as_bytes()).unwrap();
    }
}

fn reader(d: &Domain, root: &Path, rid: u64, drain: bool) {
    let mut log = log_file(&root.join(format!("r{rid}.log")));
    let mut r = match Stream::open(d, NAME).and_then(|s| s.reader()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("reader {rid}: {e}");
            std::process::exit(3);
        }
    };
    loop {
        let rec = match r.recv_ref() {
            Ok(rec) => rec,
            Err(StreamRecvError::Disconnected) if drain => return,
            // The writer is being replaced.
            Err(StreamRecvError::Disconnected) => {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            Err(e) => {
                eprintln!("reader {rid}: {e}");
                std::process::exit(3);
            }
        };
        let ok = rec.len() >= 16 && {
            let wid = u64::from_le_bytes(rec[..8].try_into().unwrap());
            let seq = u64::from_le_bytes(rec[8..16].try_into().unwrap());
            rec[16..].iter().enumerate().all(|(i, &b)| b == pattern(wid, seq, i))
        };
        if !ok {
            log.write_all(format!("BAD record of {} bytes at position {}\n", rec.len(), rec.position()).as_bytes())
                .unwrap();
            std::process::exit(4);
        }
        let wid = u64::from_le_bytes(rec[..8].try_into().unwrap());
        let seq = u64::from_le_bytes(rec[8..16].try_into().unwrap());
        log.write_all(format!("{wid} {seq}\n").as_bytes()).unwrap();
        rec.consume();
    }
}

// ---------------------------------------------------------------------------------------
// Parent

fn spawn(role: &str, root: &Scratch, id: u64) -> Child {
    let env = [("SHMBUS_ROOT", root.path().display().to_string()), ("SHMBUS_TEST_ID", id.to_string())];
    child_command("child_entry", role, &env).stdout(Stdio::null()).spawn().unwrap()
}

/// SIGKILLs and reaps `child`; panics if it had already exited on its own (a failure).
fn kill(child: &mut Child, what: &str) {
    if let Some(st) = child.try_wait().unwrap() {
        panic!("{what} exited on its own with {st} (see its stderr above)");
    }
    sigkill(child);
    child.wait().unwrap();
}

/// Complete lines of a log file (a kill may cut the last one short; it is dropped).
fn lines(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    complete.lines().map(str::to_owned).collect()
}

#[test]
fn sigkill_writers_and_readers_at_random_moments() {
    let kills: u64 = std::env::var("SHMBUS_STREAM_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let root = Scratch::in_temp_dir("stream-crash").kept_on_failure();
    let d = root.domain("test");
    // 64 KiB: records of up to 3 KiB wrap the ring every few dozen records.
    drop(Stream::create_or_open(&d, NAME, &StreamConfig::default().capacity(1 << 16)).unwrap().writer().unwrap());
    let mut rng = Rng::from_env_or_clock();
    let (mut n_writers, mut n_readers) = (0u64, 0u64);
    let mut w = spawn("writer", &root, n_writers);
    let mut r = spawn("reader", &root, n_readers);
    let (mut w_kills, mut r_kills) = (0, 0);
    for _ in 0..kills {
        std::thread::sleep(Duration::from_micros(rng.next() % 40_000));
        if rng.next() & 1 == 0 {
            kill(&mut w, &format!("writer {n_writers}"));
            w_kills += 1;
            n_writers += 1;
            w = spawn("writer", &root, n_writers);
        } else {
            kill(&mut r, &format!("reader {n_readers}"));
            r_kills += 1;
            n_readers += 1;
            r = spawn("reader", &root, n_readers);
        }
    }
    // Let the last pair run a little, then kill both and drain what was committed.
    std::thread::sleep(Duration::from_millis(50));
    kill(&mut w, "last writer");
    kill(&mut r, "last reader");
    n_readers += 1;
    let mut drain = spawn("drain", &root, n_readers);
    let st = wait_with_deadline(&mut drain, 60, "the drain reader (no Disconnected after the writer died?)");
    assert!(st.success(), "drain reader failed: {st}");

    // Reader logs, in incarnation order.
    let mut last: Option<(u64, u64)> = None;
    let mut delivered: HashMap<u64, u64> = HashMap::new();
    let (mut records, mut redelivered) = (0u64, 0u64);
    for rid in 0..=n_readers {
        for (k, line) in lines(&root.0.join(format!("r{rid}.log"))).iter().enumerate() {
            assert!(!line.starts_with("BAD"), "reader {rid}: {line}");
            let mut f = line.split(' ').map(|x| x.parse::<u64>().unwrap());
            let (wid, seq) = (f.next().unwrap(), f.next().unwrap());
            if k == 0 && last == Some((wid, seq)) {
                redelivered += 1; // its predecessor died between delivering and consuming it
                continue;
            }
            match last {
                None => assert_eq!(seq, 0, "first record ever is ({wid}, {seq})"),
                Some((lw, ls)) => assert!(
                    (wid == lw && seq == ls + 1) || (wid > lw && seq == 0),
                    "reader {rid} line {k}: ({wid}, {seq}) after ({lw}, {ls}): lost, duplicated or reordered"
                ),
            }
            last = Some((wid, seq));
            delivered.insert(wid, seq);
            records += 1;
        }
    }
    // Writer logs: everything logged as committed was delivered (at most one more record,
    // committed but not yet logged when the writer was killed).
    for wid in 0..=n_writers {
        let committed = lines(&root.0.join(format!("w{wid}.log"))).last().map(|l| l.parse::<u64>().unwrap());
        let got = delivered.get(&wid).copied();
        match committed {
            Some(c) => assert!(
                got.is_some_and(|g| g == c || g == c + 1),
                "writer {wid} committed up to {c}, reader got {got:?}"
            ),
            None => assert!(got.is_none_or(|g| g == 0), "writer {wid} logged nothing, reader got up to {got:?}"),
        }
    }
    println!("{w_kills} writer kills, {r_kills} reader kills; {records} records delivered, {redelivered} redelivered after a reader died");
    assert!(records > 0, "no record ever went through");
}
