//! Real processes for the bridge's tests: the `shmbus-bridge` and `shmbus` programs, run in
//! network namespaces made by the test (two "hosts" joined by a veth pair).

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The bridge program under test.
pub fn bridge_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_shmbus-bridge"))
}

/// The `shmbus` tool, built beside the bridge by `cargo test --workspace` (`make test`).
pub fn shmbus_exe() -> PathBuf {
    let p = bridge_exe().with_file_name("shmbus");
    assert!(
        p.is_file(),
        "{} is missing: build the workspace (`cargo test --workspace`, as `make test` does)",
        p.display()
    );
    p
}

/// Whether this process may make network namespaces (root); the tests that need them say
/// they were skipped otherwise.
pub fn can_make_namespaces() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: network namespaces need root");
    }
    root
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// Two namespaces, `a` (10.251.0.1) and `b` (10.251.0.2), joined by a veth pair; removed on
/// drop (which removes the pair too).
pub struct Net {
    pub a: String,
    pub b: String,
    va: String,
}

pub const IP_A: &str = "10.251.0.1";
pub const IP_B: &str = "10.251.0.2";

impl Net {
    pub fn new() -> Net {
        static N: AtomicUsize = AtomicUsize::new(0);
        let tag = format!("{}{}", std::process::id() % 1_000_000, N.fetch_add(1, Ordering::Relaxed));
        let net = Net { a: format!("sbb{tag}a"), b: format!("sbb{tag}b"), va: format!("sbv{tag}a") };
        let vb = format!("sbv{tag}b");
        ip(&["netns", "add", &net.a]);
        ip(&["netns", "add", &net.b]);
        ip(&["link", "add", &net.va, "type", "veth", "peer", "name", &vb]);
        ip(&["link", "set", &net.va, "netns", &net.a]);
        ip(&["link", "set", &vb, "netns", &net.b]);
        ip(&["-n", &net.a, "addr", "add", &format!("{IP_A}/24"), "dev", &net.va]);
        ip(&["-n", &net.b, "addr", "add", &format!("{IP_B}/24"), "dev", &vb]);
        for (ns, dev) in [(&net.a, &net.va), (&net.b, &vb)] {
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        net
    }

    /// Takes the link down (`false`) or up again, on host a's side.
    pub fn link(&self, up: bool) {
        ip(&["-n", &self.a, "link", "set", &self.va, if up { "up" } else { "down" }]);
    }

    /// `program args…` inside namespace `ns`, with `SHMBUS_ROOT=root`.
    pub fn cmd(&self, ns: &str, root: &Path, program: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]).arg(program).args(args).env("SHMBUS_ROOT", root).stdin(Stdio::null());
        c
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.a]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.b]).status();
    }
}

/// A child killed on drop.
pub struct Proc(pub Child);

impl Proc {
    pub fn spawn(mut c: Command) -> Proc {
        Proc(c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn"))
    }

    pub fn sigkill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }

    /// SIGTERM, then its whole output (the test fails if it does not exit within 20 s).
    pub fn terminate(mut self) -> Output {
        // SAFETY: kill with a pid of our own child.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(20);
        while self.0.try_wait().unwrap().is_none() {
            assert!(Instant::now() < end, "the process did not exit on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
        let child = std::mem::replace(&mut self.0, Command::new("true").spawn().unwrap());
        child.wait_with_output().unwrap()
    }

    /// Its stdout, line by line (for a child that prints as it goes).
    pub fn lines(&mut self) -> std::io::Lines<BufReader<std::process::ChildStdout>> {
        BufReader::new(self.0.stdout.take().expect("stdout already taken")).lines()
    }

    /// Waits (at most `limit`) for it to exit; its output (read as it comes, so a child
    /// that prints much never blocks on a full pipe).
    pub fn finish(mut self, limit: Duration) -> Output {
        let child = std::mem::replace(&mut self.0, Command::new("true").spawn().unwrap());
        let pid = child.id() as libc::pid_t;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(child.wait_with_output()));
        match rx.recv_timeout(limit) {
            Ok(out) => out.unwrap(),
            Err(_) => {
                // SAFETY: kill with our own child's pid (not yet reaped: the thread waits).
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("the process did not finish within {limit:?}");
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs a command to completion (at most 60 s); fails the test if it fails.
pub fn run_ok(c: Command) -> String {
    let out = Proc::spawn(c).finish(Duration::from_secs(60));
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}
