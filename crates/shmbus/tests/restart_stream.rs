//! Restart after a crash, for every role of a stream: a child process in the role is
//! SIGKILLed at a random moment of its work, then a replacement is started, and the *first*
//! replacement must work (no `Busy`, "gone" or "corrupt" from the corpse): a stream writer
//! takes over the exclusive writer role and writes, a stream reader takes over the reader
//! role and reads.
//! Kills per role: SHMBUS_RESTARTS (default 8). Seed: SHMBUS_SEED.

#![cfg(not(loom))]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::restart::{fail, kill_and_restart};
use common::{child_role, Scratch};
use shmbus::stream::{Stream, StreamConfig, StreamRecvTimeoutError, StreamSendTimeoutError};
use shmbus::Domain;

const NAME: &str = "restart";

// ---------------------------------------------------------------------------------------
// Children: MODE=work loops until killed; MODE=restart does a bounded job and exits 0.

#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    let root = PathBuf::from(std::env::var("SHMBUS_ROOT").unwrap());
    let d = Domain::with_root("r", &root).unwrap();
    let forever = std::env::var("MODE").unwrap() == "work";
    match role.as_str() {
        "writer" => writer(&d, forever),
        "reader" => reader(&d, forever),
        other => panic!("unknown child role {other}"),
    }
}

fn writer(d: &Domain, forever: bool) {
    let mut w = Stream::open(d, NAME).and_then(|s| s.writer()).unwrap_or_else(|e| fail(format!("writer open: {e}")));
    for i in 0u64.. {
        if !forever && i == 50 {
            return;
        }
        match w.send_timeout(format!("w{i}").as_bytes(), Duration::from_secs(5)) {
            Ok(()) => {}
            Err(StreamSendTimeoutError::Disconnected) if forever => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => fail(format!("write {i}: {e}")),
        }
    }
}

fn reader(d: &Domain, forever: bool) {
    let mut r = Stream::open(d, NAME).and_then(|s| s.reader()).unwrap_or_else(|e| fail(format!("reader open: {e}")));
    let mut buf = Vec::new();
    let mut got = 0;
    let end = Instant::now() + Duration::from_secs(10);
    while forever || got < 20 {
        if Instant::now() > end {
            fail(format!("reader: {got} records in 10 s"));
        }
        match r.recv_into_timeout(&mut buf, Duration::from_millis(100)) {
            Ok(_) => got += 1,
            Err(StreamRecvTimeoutError::Timeout | StreamRecvTimeoutError::Disconnected) => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(e) => fail(format!("read: {e}")),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Parents

#[test]
fn stream_writer_restarts() {
    if child_role().is_some() {
        return;
    }
    let mut buf = Vec::new();
    kill_and_restart(
        "restart-writer",
        "writer",
        |d| Stream::create_or_open(d, NAME, &StreamConfig::default().capacity(1 << 16)).unwrap().reader().unwrap(),
        |reader| match reader.recv_into_timeout(&mut buf, Duration::from_millis(1)) {
            Ok(_) | Err(StreamRecvTimeoutError::Timeout | StreamRecvTimeoutError::Disconnected) => {}
            Err(e) => panic!("reader: {e}"),
        },
    );
}

#[test]
fn stream_reader_restarts() {
    if child_role().is_some() {
        return;
    }
    let mut n = 0u64;
    kill_and_restart(
        "restart-reader",
        "reader",
        |d| Stream::create_or_open(d, NAME, &StreamConfig::default().capacity(1 << 16)).unwrap().writer().unwrap(),
        |writer| {
            n += 1;
            match writer.send_timeout(format!("r{n}").as_bytes(), Duration::from_millis(1)) {
                Ok(()) | Err(StreamSendTimeoutError::Timeout | StreamSendTimeoutError::Disconnected) => {}
                Err(e) => panic!("writer: {e}"),
            }
            std::thread::sleep(Duration::from_micros(200));
        },
    );
}

/// A role held by a dead process whose pid is ours now (pid reuse, as after a container
/// restart): the entry names our pid with another start time, and must be taken over, not
/// reported as `Busy` by ourselves.
#[test]
fn a_dead_predecessor_with_our_pid_is_taken_over() {
    if child_role().is_some() {
        return;
    }
    use std::os::unix::fs::FileExt;
    let s = Scratch::new("restart-same-pid");
    let d = s.domain("r");
    drop(Stream::create_or_open(&d, NAME, &StreamConfig::default().capacity(1 << 16)).unwrap().writer().unwrap());
    let f = std::fs::OpenOptions::new().write(true).open(d.channel_path(NAME).unwrap()).unwrap();
    let me = std::process::id() as u64;
    for (entry, role) in [(0u64, 1u32), (1, 2)] {
        // segment.rs: participant entries from offset 4096, 64 bytes each: `pid << 8 | ACTIVE`,
        // start time, role.
        let at = 4096 + 64 * entry;
        f.write_all_at(&((me << 8) | 2).to_le_bytes(), at).unwrap();
        f.write_all_at(&12345u64.to_le_bytes(), at + 8).unwrap();
        f.write_all_at(&role.to_le_bytes(), at + 16).unwrap();
    }
    let mut w = Stream::open(&d, NAME).unwrap().writer().expect("writer role taken over from our dead predecessor");
    let mut r = Stream::open(&d, NAME).unwrap().reader().expect("reader role taken over from our dead predecessor");
    w.try_send(b"hello").unwrap();
    let mut buf = Vec::new();
    r.try_recv_into(&mut buf).unwrap();
    assert_eq!(buf, b"hello");
}
