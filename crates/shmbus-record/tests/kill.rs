//! A writer killed by SIGKILL mid-recording leaves an MCAP file without a summary that
//! readers (ours, and the official Python reader when its virtualenv is there) read up to
//! its last whole chunk: every message of a prefix of the recording, intact.
//!
//! The writer is this test binary run again as a child (`child_writer`, which does nothing
//! unless `SHMBUS_RECORD_KILL_CHILD` names its output file).

#[path = "../../../tests/support/interop.rs"]
mod interop;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use shmbus::Schema;
use shmbus_record::{read_info, Compression, McapMessages, McapOptions, McapWriter};

const CHILD_ENV: &str = "SHMBUS_RECORD_KILL_CHILD";

/// Message `i`: its index, then filler of a length that varies.
fn payload(i: u64) -> Vec<u8> {
    let mut p = i.to_le_bytes().to_vec();
    p.extend(std::iter::repeat_n((i % 251) as u8, (i % 97) as usize));
    p
}

/// The child: records messages until it is killed.
#[test]
fn child_writer() {
    let Some(path) = std::env::var_os(CHILD_ENV) else { return };
    let compression: Compression = std::env::var("SHMBUS_RECORD_KILL_COMPRESSION").unwrap().parse().unwrap();
    let mut w = McapWriter::create_with(PathBuf::from(path), McapOptions { compression, chunk_size: 4096 }).unwrap();
    let schema = Schema::new("json", "", "", Vec::new()).unwrap();
    w.add_topic("a", Some(&schema)).unwrap();
    w.add_topic("b", None).unwrap();
    for i in 0.. {
        let t = shmbus::time::monotonic_ns();
        w.write(if i % 2 == 0 { "a" } else { "b" }, i, t, t, &payload(i)).unwrap();
        if i % 64 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The official reader's linear path (no summary): how many messages it reads in file
/// order before the cut, and whether they are message 0, 1, 2, … with their payloads.
const PY_SCRIPT: &str = r#"
import json, sys
from mcap.reader import NonSeekingReader

n, ok, err = 0, True, None
with open(sys.argv[1], "rb") as f:
    try:
        for schema, ch, m in NonSeekingReader(f).iter_messages(log_time_order=False):
            i = int.from_bytes(m.data[:8], "little")
            want = i.to_bytes(8, "little") + bytes([i % 251]) * (i % 97)
            ok = ok and i == n and m.sequence == n and m.data == want and ch.topic == ("a" if n % 2 == 0 else "b")
            n += 1
    except Exception as e:
        err = type(e).__name__
print(json.dumps({"n": n, "ok": ok, "err": err}))
"#;

fn killed_recording(dir: &Path, compression: Compression) -> PathBuf {
    let path = dir.join(format!("killed-{}.mcap", compression.name()));
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["child_writer", "--exact", "--nocapture"])
        .env(CHILD_ENV, &path)
        .env("SHMBUS_RECORD_KILL_COMPRESSION", compression.name())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Until several chunks are in the file (generous bound: the machine may be busy).
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(&path).map_or(0, |m| m.len()) < 64 * 1024 {
        assert!(Instant::now() < deadline, "the child wrote too little");
        assert!(child.try_wait().unwrap().is_none(), "the child exited");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    path
}

#[test]
fn sigkilled_writer_leaves_a_file_read_up_to_its_last_whole_chunk() {
    let dir = std::env::temp_dir().join(format!("shmbus-record-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let py = interop::python();
    for compression in [Compression::Zstd, Compression::Lz4, Compression::None] {
        let path = killed_recording(&dir, compression);
        let mut n = 0u64;
        let mut ended_with_error = false;
        for m in McapMessages::open(&path).unwrap() {
            match m {
                Ok(m) => {
                    assert_eq!(m.payload, payload(n), "message {n}");
                    assert_eq!((m.sequence, m.topic.as_str()), (n as u32, if n % 2 == 0 { "a" } else { "b" }));
                    n += 1;
                }
                Err(_) => ended_with_error = true,
            }
        }
        assert!(ended_with_error, "a killed writer's file has no footer: the reader says it ends early");
        // 64 KiB of 4 KiB chunks: more than one chunk's messages are readable.
        assert!(n > 100, "{compression:?}: only {n} messages readable");

        let info = read_info(&path).unwrap();
        assert!(!info.from_summary && !info.complete);
        assert_eq!(info.messages, n);
        assert_eq!(info.topics.len(), 2);

        if let Some(py) = &py {
            let out = Command::new(py).arg("-c").arg(PY_SCRIPT).arg(&path).output().unwrap();
            assert!(out.status.success(), "python failed: {}", String::from_utf8_lossy(&out.stderr));
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["ok"], true, "{v}");
            assert_eq!(v["n"], n, "the official reader reads as many messages: {v}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
