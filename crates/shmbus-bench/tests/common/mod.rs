//! The one way the bench tests run the `shmbus-bench` binary: piped output, a deadline
//! instead of a hang, and one run at a time per test binary (spinning runs pin both CPUs;
//! two at once would only fight over them).
#![allow(dead_code)]

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_shmbus-bench");

static SERIAL: Mutex<()> = Mutex::new(());

/// What a run printed and how it ended.
pub struct Run {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `shmbus-bench args` with extra environment `env`; kills it and panics if it takes
/// longer than `deadline`.
pub fn run_with(args: &[&str], env: &[(&str, &str)], deadline: Duration) -> Run {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut cmd = Command::new(BIN);
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn shmbus-bench");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).unwrap();
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("shmbus-bench {args:?} did not finish within {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Run { success: status.success(), stdout: out_reader.join().unwrap(), stderr: err_reader.join().unwrap() }
}

/// Whether `redis-server` is on PATH. Without it the Redis runs are skipped with a note
/// saying what (`what`), unless `SHMBUS_BENCH_REQUIRE_REDIS=1` (as `make test` sets), which
/// makes a missing server a failure.
pub fn redis_on_path(what: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|d| d.join("redis-server").is_file());
    if !found {
        assert!(
            std::env::var_os("SHMBUS_BENCH_REQUIRE_REDIS").is_none_or(|v| v != "1"),
            "redis-server is not on PATH but SHMBUS_BENCH_REQUIRE_REDIS=1"
        );
        eprintln!("note: redis-server not on PATH; {what} not tested here");
    }
    found
}
