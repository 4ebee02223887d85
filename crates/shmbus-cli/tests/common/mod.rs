//! Helpers of the CLI tests: a scratch root per test and a way to run `shmbus` in it.
//!
//! Every test gets its own root directory (on tmpfs when there is one) through
//! `SHMBUS_ROOT`, removed afterwards. No test asserts a timing: waits poll for a condition
//! with a generous limit.

#![allow(dead_code)] // each test binary uses some of the helpers

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A scratch root, removed on drop, and a way to run `shmbus` against it.
pub struct Root(pub PathBuf);

impl Root {
    pub fn new() -> Root {
        static N: AtomicUsize = AtomicUsize::new(0);
        let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let dir = base.join(format!("shmbus-cli-test-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Root(dir)
    }

    /// A journal directory path inside the scratch root (not created).
    pub fn jdir(&self, name: &str) -> String {
        self.0.join(format!("journal-{name}")).to_str().unwrap().to_owned()
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_shmbus"));
        c.args(args).env("SHMBUS_ROOT", &self.0).env_remove("RUST_BACKTRACE").stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// Runs and expects success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "shmbus {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs and expects failure with exactly one line on stderr, prefixed `shmbus: `;
    /// returns that line.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(!out.status.success(), "shmbus {args:?} succeeded: {}", String::from_utf8_lossy(&out.stdout));
        one_error_line(&out)
    }

    /// Runs with `input` on stdin.
    pub fn run_stdin(&self, args: &[&str], input: &[u8]) -> Output {
        let mut child =
            self.cmd(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), input).unwrap();
        child.wait_with_output().unwrap()
    }

    /// Runs with `input` on stdin and expects success; returns stdout.
    pub fn ok_stdin(&self, args: &[&str], input: &str) -> String {
        let out = self.run_stdin(args, input.as_bytes());
        assert!(out.status.success(), "shmbus {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let text = self.ok(args);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    }

    pub fn channel_file(&self, domain: &str, name: &str) -> PathBuf {
        self.0.join(format!("shmbus.{domain}")).join(name)
    }

    pub fn spawn(&self, args: &[&str]) -> Killed {
        Killed(Some(self.cmd(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()))
    }

    /// The `info --json` of a channel, once `cond` holds for it (panics after 20 s).
    pub fn wait_info(&self, domain: &str, name: &str, cond: impl Fn(&Value) -> bool) -> Value {
        self.wait_json(&["info", "--domain", domain, name, "--json"], cond)
    }

    /// The JSON of `args` once `cond` holds for it (panics after 20 s).
    pub fn wait_json(&self, args: &[&str], cond: impl Fn(&Value) -> bool) -> Value {
        let t0 = Instant::now();
        loop {
            let out = self.run(args);
            if out.status.success() {
                let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                if cond(&v) {
                    return v;
                }
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "condition on {args:?} never held");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child process killed (SIGKILL, by its handle) and reaped when dropped.
pub struct Killed(pub Option<Child>);

impl Killed {
    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("child already finished")
    }

    pub fn id(&self) -> u32 {
        self.0.as_ref().expect("child already finished").id()
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits for the child to exit by itself and returns its output.
    pub fn finish(mut self) -> Output {
        self.0.take().expect("child already finished").wait_with_output().unwrap()
    }

    /// Like `finish`, and expects success; returns stdout.
    pub fn finish_ok(self) -> String {
        let out = self.finish();
        assert!(out.status.success(), "child failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Whether the child has exited (without reaping it twice).
    pub fn exited(&mut self) -> bool {
        self.0.as_mut().is_some_and(|c| c.try_wait().unwrap().is_some())
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn one_error_line(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "expected one stderr line, got {err:?}");
    assert!(lines[0].starts_with("shmbus: "), "{err:?}");
    assert!(!err.contains("panicked"), "{err:?}");
    lines[0].to_owned()
}

pub fn json_lines(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect()
}
