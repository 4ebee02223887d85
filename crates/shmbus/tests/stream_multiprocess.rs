//! Stream between real processes: bulk transfer with verification, exclusive roles and
//! takeover after SIGKILL.
//!
//! The test binary re-executes itself (`--exact child_entry`) with `SHMBUS_TEST_CHILD`
//! naming the child's role. `SHMBUS_STREAM_BYTES` sets the bulk transfer size (default
//! 1 GiB).

#![cfg(not(loom))]

mod common;

use std::io::{BufRead, BufReader};
use std::process::Child;
use std::time::{Duration, Instant};

use common::{child_role, sigkill, spawn_child, wait_with_deadline, Rng, Scratch};
use shmbus::stream::{Stream, StreamConfig, StreamRecvError, StreamRecvTimeoutError, StreamSendError};
use shmbus::{Domain, OpenError};

const NAME: &str = "bulk";

// ---------------------------------------------------------------------------------------
// Helpers

/// Runs `child_entry` in `role` with the domain root of `root`.
fn spawn(role: &str, root: &Scratch, extra: &[(&str, String)]) -> Child {
    let mut env = vec![("SHMBUS_ROOT", root.path().display().to_string())];
    env.extend_from_slice(extra);
    spawn_child("child_entry", role, &env)
}

/// Reads the child's stdout up to a line containing `prefix` and returns the line from
/// there (libtest prints `test child_entry ... ` without a newline before it).
fn read_line_with(child: &mut Child, prefix: &str) -> String {
    let out = child.stdout.as_mut().unwrap();
    let mut lines = BufReader::new(out);
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).unwrap() == 0 {
            panic!("child exited before printing {prefix:?}");
        }
        if let Some(at) = line.find(prefix) {
            return line[at..].trim().to_owned();
        }
    }
}

/// The length of record `i` of the bulk sequence: half small (< 256), half up to 64 KiB.
fn bulk_len(rng: &mut Rng) -> usize {
    let x = rng.next();
    if x & 1 == 0 {
        (x >> 8) as usize % 256
    } else {
        (x >> 8) as usize % (64 << 10)
    }
}

/// Fills `buf` with the content of record `seq` (fast: one u64 per 8 bytes).
fn fill(seq: u64, buf: &mut [u8]) {
    let mut chunks = buf.chunks_exact_mut(8);
    let mut k = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for c in &mut chunks {
        k = k.wrapping_add(0xD1B5_4A32_D192_ED03);
        c.copy_from_slice(&k.to_le_bytes());
    }
    let rest = chunks.into_remainder();
    let tail = k.wrapping_add(1).to_le_bytes();
    rest.copy_from_slice(&tail[..rest.len()]);
}

/// Checks `buf` against the content of record `seq`.
fn verify(seq: u64, buf: &[u8]) -> bool {
    let mut chunks = buf.chunks_exact(8);
    let mut k = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for c in &mut chunks {
        k = k.wrapping_add(0xD1B5_4A32_D192_ED03);
        if c != k.to_le_bytes() {
            return false;
        }
    }
    let rest = chunks.remainder();
    rest == &k.wrapping_add(1).to_le_bytes()[..rest.len()]
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

// ---------------------------------------------------------------------------------------
// Child roles

#[test]
fn child_entry() {
    let Some(role) = child_role() else {
        return;
    };
    let d = Domain::new("test").unwrap();
    match role.as_str() {
        "bulk-writer" => bulk_writer(&d),
        "bulk-reader" => bulk_reader(&d),
        "hold-writer" | "hold-reader" => {
            let _w;
            let _r;
            if role == "hold-writer" {
                _w = Stream::open(&d, NAME).unwrap().writer().unwrap();
            } else {
                _r = Stream::open(&d, NAME).unwrap().reader().unwrap();
            }
            println!("HOLDING");
            std::thread::sleep(Duration::from_secs(600));
        }
        other => panic!("unknown child role {other}"),
    }
}

fn bulk_writer(d: &Domain) {
    let total = env_u64("SHMBUS_STREAM_BYTES", 1 << 30);
    let mut rng = Rng(env_u64("SHMBUS_STREAM_SEED", 1));
    let mut w = Stream::open(d, NAME).unwrap().writer().unwrap();
    let deadline = Instant::now() + Duration::from_secs(600);
    let (mut seq, mut bytes) = (0u64, 0u64);
    while bytes < total {
        let len = bulk_len(&mut rng);
        let mut g = loop {
            match w.loan(len) {
                Ok(g) => break g,
                // No reader yet (or not any more): it is being started; retry.
                Err(StreamSendError::Disconnected) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => panic!("writer: {e}"),
            }
        };
        fill(seq, &mut g);
        g.send();
        seq += 1;
        bytes += len as u64;
    }
    println!("WROTE {seq} {bytes}");
}

fn bulk_reader(d: &Domain) {
    let total = env_u64("SHMBUS_STREAM_BYTES", 1 << 30);
    let mut rng = Rng(env_u64("SHMBUS_STREAM_SEED", 1));
    let mut r = Stream::open(d, NAME).unwrap().reader().unwrap();
    let deadline = Instant::now() + Duration::from_secs(600);
    let start = Instant::now();
    let (mut seq, mut bytes) = (0u64, 0u64);
    while bytes < total {
        let len = bulk_len(&mut rng);
        let rec = loop {
            match r.recv_ref() {
                Ok(rec) => break rec,
                Err(StreamRecvError::Disconnected) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => panic!("reader at record {seq}: {e}"),
            }
        };
        assert_eq!(rec.len(), len, "record {seq}: wrong length");
        assert!(verify(seq, &rec), "record {seq} of {len} bytes is torn or corrupt");
        rec.consume();
        seq += 1;
        bytes += len as u64;
    }
    let secs = start.elapsed().as_secs_f64();
    // Everything arrived; the writer has finished, so the stream ends with Disconnected.
    match r.recv_ref_timeout(Duration::from_secs(30)) {
        Err(StreamRecvTimeoutError::Disconnected) => {}
        Ok(rec) => panic!("unexpected extra record of {} bytes", rec.len()),
        Err(e) => panic!("reader after the last record: {e}"),
    }
    println!("READ {seq} {bytes} {:.0}MB/s", bytes as f64 / secs / 1e6);
}

// ---------------------------------------------------------------------------------------
// Tests

/// A writer process and a reader process carry `SHMBUS_STREAM_BYTES` (1 GiB) of records of
/// 0..64 KiB, each verified byte for byte, through a 1 MiB ring.
#[test]
fn bulk_transfer_between_processes() {
    let root = Scratch::in_temp_dir("stream-bulk");
    let d = root.domain("test");
    drop(Stream::create_or_open(&d, NAME, &StreamConfig::default().capacity(1 << 20)).unwrap().writer().unwrap());
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    println!("seed {seed}");
    let env = [("SHMBUS_STREAM_SEED", seed.to_string())];
    let mut w = spawn("bulk-writer", &root, &env);
    let mut r = spawn("bulk-reader", &root, &env);
    let wrote = read_line_with(&mut w, "WROTE");
    let read = read_line_with(&mut r, "READ");
    assert!(wait_with_deadline(&mut w, 600, "writer").success());
    assert!(wait_with_deadline(&mut r, 600, "reader").success());
    println!("{wrote}; {read}");
    let w_fields: Vec<&str> = wrote.split(' ').collect();
    let r_fields: Vec<&str> = read.split(' ').collect();
    assert_eq!(w_fields[1..3], r_fields[1..3], "records/bytes written and read differ");
    let st = Stream::status(&d, NAME).unwrap();
    assert_eq!((st.used, st.writer, st.reader), (0, None, None));
}

/// A second writer or reader gets `Busy` with the holder's pid while the holder lives, and
/// takes over once it is SIGKILLed.
#[test]
fn second_endpoint_is_busy_until_the_holder_dies() {
    let root = Scratch::in_temp_dir("stream-busy");
    let d = root.domain("test");
    drop(Stream::create_or_open(&d, NAME, &StreamConfig::default().capacity(1 << 16)).unwrap().writer().unwrap());
    for role in ["writer", "reader"] {
        let mut holder = spawn(&format!("hold-{role}"), &root, &[]);
        read_line_with(&mut holder, "HOLDING");
        let busy = if role == "writer" {
            Stream::open(&d, NAME).and_then(|s| s.writer()).map(drop)
        } else {
            Stream::open(&d, NAME).and_then(|s| s.reader()).map(drop)
        };
        match busy {
            Err(OpenError::Busy { holder_pid, .. }) => assert_eq!(holder_pid, holder.id()),
            other => panic!("second {role}: expected Busy, got {other:?}"),
        }
        let st = Stream::status(&d, NAME).unwrap();
        let ep = if role == "writer" { st.writer } else { st.reader };
        assert_eq!(ep.map(|e| (e.pid, e.alive)), Some((holder.id(), true)));
        sigkill(&mut holder);
        holder.wait().unwrap();
        let st = Stream::status(&d, NAME).unwrap();
        let ep = if role == "writer" { st.writer } else { st.reader };
        assert_eq!(ep.map(|e| e.alive), Some(false), "dead {role} still shown alive");
        if role == "writer" {
            let mut w = Stream::open(&d, NAME).unwrap().writer().expect("takeover from a dead writer");
            w.try_send(b"after takeover").unwrap();
        } else {
            let mut r = Stream::open(&d, NAME).unwrap().reader().expect("takeover from a dead reader");
            let rec = r.try_recv_ref().unwrap();
            assert_eq!(&*rec, b"after takeover");
            rec.consume();
        }
    }
}
