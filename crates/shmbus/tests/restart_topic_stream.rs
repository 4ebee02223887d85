//! Restart after a crash, for every role of a topic and a stream: a child process in the
//! role is SIGKILLed at a random moment of its work, then a replacement is started, and the
//! *first* replacement must work (no `Busy`, "gone" or "corrupt" from the corpse): a
//! publisher publishes, a subscriber receives, a stream writer takes over the exclusive
//! writer role and writes, a stream reader takes over the reader role and reads.
//! Kills per role: SHMBUS_RESTARTS (default 8). Seed: SHMBUS_SEED.

#![cfg(not(loom))]

mod common;

use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use common::{child_command, child_role, sigkill, wait_with_deadline, Rng, Scratch};
use shmbus::stream::{ReadError, ReserveError, StreamConfig, StreamReader, StreamWriter};
use shmbus::topic::{RecvError, Topic, TopicConfig};
use shmbus::Domain;

const NAME: &str = "restart";

fn restarts() -> u64 {
    std::env::var("SHMBUS_RESTARTS").ok().and_then(|v| v.parse().ok()).unwrap_or(8)
}

fn topic_config() -> TopicConfig {
    // Three slots, so a subscriber that dies holding pins pins all of them.
    TopicConfig::new(64, 2).spare_slots(1)
}

fn fail(what: String) -> ! {
    eprintln!("{what}");
    std::process::exit(3)
}

// ---------------------------------------------------------------------------------------
// Children: MODE=work loops until killed; MODE=restart does a bounded job and exits 0.

#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    let root = PathBuf::from(std::env::var("SHMBUS_ROOT").unwrap());
    let d = Domain::with_root("r", &root).unwrap();
    let forever = std::env::var("MODE").unwrap() == "work";
    match role.as_str() {
        "publisher" => publisher(&d, forever),
        "subscriber" => subscriber(&d, forever),
        "writer" => writer(&d, forever),
        "reader" => reader(&d, forever),
        other => panic!("unknown child role {other}"),
    }
}

fn publisher(d: &Domain, forever: bool) {
    let t = Topic::open(d, NAME).unwrap_or_else(|e| fail(format!("publisher open: {e}")));
    let mut p = t.publisher().unwrap_or_else(|e| fail(format!("publisher: {e}")));
    for i in 0u64.. {
        if !forever && i == 50 {
            return;
        }
        // Loans and copies, so that a kill lands in either.
        let r = if i % 2 == 0 {
            p.publish(format!("p{i}").as_bytes())
        } else {
            p.loan().and_then(|mut l| {
                l[..4].copy_from_slice(b"loan");
                l.send(4)
            })
        };
        if let Err(e) = r {
            fail(format!("publish {i}: {e}"));
        }
    }
}

fn subscriber(d: &Domain, forever: bool) {
    let t = Topic::open(d, NAME).unwrap_or_else(|e| fail(format!("subscriber open: {e}")));
    let s = t.subscriber().unwrap_or_else(|e| fail(format!("subscriber: {e}")));
    s.set_pin_budget(3);
    let mut held = Vec::new();
    let mut got = 0;
    let end = Instant::now() + Duration::from_secs(10);
    while forever || got < 20 {
        if Instant::now() > end {
            fail(format!("subscriber: {got} messages in 10 s"));
        }
        match s.recv_pinned_timeout(Some(Duration::from_millis(100))) {
            Ok(sample) => {
                got += 1;
                // Hold up to three pins (every slot), so a kill often leaves them all set.
                held.push(sample);
                if held.len() == 3 {
                    held.clear();
                }
            }
            Err(RecvError::Lagged { .. } | RecvError::Timeout) => {}
            Err(RecvError::PinLimit { .. }) => held.clear(),
            Err(e) => fail(format!("subscriber receive: {e}")),
        }
    }
}

fn writer(d: &Domain, forever: bool) {
    let mut w = StreamWriter::open(d, NAME).unwrap_or_else(|e| fail(format!("writer open: {e}")));
    for i in 0u64.. {
        if !forever && i == 50 {
            return;
        }
        match w.write_timeout(format!("w{i}").as_bytes(), Duration::from_secs(5)) {
            Ok(()) => {}
            Err(ReserveError::Disconnected) if forever => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => fail(format!("write {i}: {e}")),
        }
    }
}

fn reader(d: &Domain, forever: bool) {
    let mut r = StreamReader::open(d, NAME).unwrap_or_else(|e| fail(format!("reader open: {e}")));
    let mut buf = Vec::new();
    let mut got = 0;
    let end = Instant::now() + Duration::from_secs(10);
    while forever || got < 20 {
        if Instant::now() > end {
            fail(format!("reader: {got} records in 10 s"));
        }
        match r.read_into_timeout(&mut buf, Duration::from_millis(100)) {
            Ok(_) => got += 1,
            Err(ReadError::Timeout | ReadError::Disconnected) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => fail(format!("read: {e}")),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Parents

fn spawn(role: &str, mode: &str, root: &std::path::Path) -> Child {
    child_command("child_entry", role, &[("SHMBUS_ROOT", root.display().to_string()), ("MODE", mode.to_owned())])
        .spawn()
        .unwrap()
}

/// Kills a working `role` child at a random moment, `restarts()` times; after each kill the
/// first replacement must finish its job. `drive` runs the peer's side while waiting (one
/// step per call).
fn kill_and_restart<T>(tag: &str, role: &str, setup: impl FnOnce(&Domain) -> T, mut drive: impl FnMut(&mut T)) {
    let s = Scratch::new(tag);
    let root = s.path().to_owned();
    let d = Domain::with_root("r", &root).unwrap();
    let mut peer = setup(&d);
    let mut rng = Rng::from_env_or_clock();
    for round in 0..restarts() {
        let mut child = spawn(role, "work", &root);
        let until = Instant::now() + Duration::from_millis(20 + rng.below(150));
        while Instant::now() < until {
            drive(&mut peer);
        }
        sigkill(&mut child);
        let st = child.wait().unwrap();
        assert!(st.code().is_none(), "{role} round {round}: exited on its own before the kill: {st:?}");
        let mut next = spawn(role, "restart", &root);
        let end = Instant::now() + Duration::from_secs(30);
        let st = loop {
            if let Some(st) = next.try_wait().unwrap() {
                break st;
            }
            assert!(Instant::now() < end, "{role} round {round}: the replacement hangs");
            drive(&mut peer);
        };
        assert!(st.success(), "{role} round {round}: the first restart after a SIGKILL failed: {st:?}");
        let _ = wait_with_deadline(&mut next, 1, role);
    }
}

#[test]
fn topic_publisher_restarts() {
    if child_role().is_some() {
        return;
    }
    kill_and_restart(
        "restart-pub",
        "publisher",
        |d| Topic::create_or_open(d, NAME, &topic_config()).unwrap().subscriber().unwrap(),
        |sub| {
            // Drain as a subscriber would; gaps from killed publishers are fine.
            match sub.recv_timeout(Duration::from_millis(1)) {
                Ok(_) | Err(RecvError::Timeout | RecvError::Lagged { .. }) => {}
                Err(e) => panic!("subscriber: {e}"),
            }
        },
    );
}

#[test]
fn topic_subscriber_restarts() {
    if child_role().is_some() {
        return;
    }
    let mut n = 0u64;
    kill_and_restart(
        "restart-sub",
        "subscriber",
        |d| Topic::create_or_open(d, NAME, &topic_config()).unwrap().publisher().unwrap(),
        |publ| {
            n += 1;
            // All slots pinned by a live subscriber is allowed; by a dead one, not for long.
            let _ = publ.publish(format!("m{n}").as_bytes());
            std::thread::sleep(Duration::from_micros(300));
        },
    );
}

#[test]
fn stream_writer_restarts() {
    if child_role().is_some() {
        return;
    }
    let mut buf = Vec::new();
    kill_and_restart(
        "restart-writer",
        "writer",
        |d| StreamReader::create(d, NAME, &StreamConfig::new(1 << 16)).unwrap(),
        |reader| match reader.read_into_timeout(&mut buf, Duration::from_millis(1)) {
            Ok(_) | Err(ReadError::Timeout | ReadError::Disconnected) => {}
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
        |d| StreamWriter::create(d, NAME, &StreamConfig::new(1 << 16)).unwrap(),
        |writer| {
            n += 1;
            match writer.write_timeout(format!("r{n}").as_bytes(), Duration::from_millis(1)) {
                Ok(()) | Err(ReserveError::Timeout | ReserveError::Disconnected) => {}
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
    drop(StreamWriter::create(&d, NAME, &StreamConfig::new(1 << 16)).unwrap());
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
    let mut w = StreamWriter::open(&d, NAME).expect("writer role taken over from our dead predecessor");
    let mut r = StreamReader::open(&d, NAME).expect("reader role taken over from our dead predecessor");
    w.try_write(b"hello").unwrap();
    let mut buf = Vec::new();
    r.try_read_into(&mut buf).unwrap();
    assert_eq!(buf, b"hello");
}
