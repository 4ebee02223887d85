//! Helpers shared by the integration tests: scratch roots and child processes.
#![allow(dead_code)]

pub mod hostile;
pub mod restart;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A scratch root directory (on tmpfs when there is one), removed on drop.
pub struct Scratch(pub PathBuf, bool);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        Scratch::under(&base, tag)
    }

    /// A scratch root under the system's temporary directory (never `/dev/shm`).
    pub fn in_temp_dir(tag: &str) -> Scratch {
        Scratch::under(&std::env::temp_dir(), tag)
    }

    fn under(base: &Path, tag: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = base.join(format!("shmbus-test-{tag}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir, false)
    }

    /// Keeps the directory (and says where it is) when the test fails, for its logs.
    pub fn kept_on_failure(mut self) -> Scratch {
        self.1 = true;
        self
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn domain(&self, name: &str) -> shmbus::Domain {
        shmbus::Domain::with_root(name, &self.0).unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.1 && std::thread::panicking() {
            eprintln!("logs kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A path for a directory that does not exist yet (a journal creates its own), inside a
/// fresh scratch root under the temporary directory, which is removed on drop.
/// Topic `name` in domain `t` of `s`, created with `slot`-byte messages and `history`.
pub fn topic(s: &Scratch, name: &str, slot: usize, history: usize) -> shmbus::Topic {
    shmbus::Topic::create_or_open(
        &s.domain("t"),
        name,
        &shmbus::TopicConfig::default().max_message_len(slot).history(history),
    )
    .unwrap()
}

pub fn fresh_dir(tag: &str) -> (PathBuf, Scratch) {
    let s = Scratch::in_temp_dir(tag);
    (s.path().join("dir"), s)
}

/// The command that runs this test binary again as a child executing test `entry` with
/// `role` in `SHMBUS_TEST_CHILD` and extra environment `env` (stdout piped, stderr inherited),
/// for a caller that changes something before spawning it.
pub fn child_command(entry: &str, role: &str, env: &[(&str, String)]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([entry, "--exact", "--nocapture", "--test-threads=1", "--include-ignored"])
        .env("SHMBUS_TEST_CHILD", role)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs this test binary again as a child executing test `entry` with `role` in
/// `SHMBUS_TEST_CHILD` and extra environment `env`.
pub fn spawn_child(entry: &str, role: &str, env: &[(&str, String)]) -> Child {
    child_command(entry, role, env).spawn().unwrap()
}

/// The child role, if this process is a child. A child dies with its parent test, so a
/// failed test never leaves processes behind.
pub fn child_role() -> Option<String> {
    let role = std::env::var("SHMBUS_TEST_CHILD").ok()?;
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag on this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    Some(role)
}

pub fn env_u64(name: &str) -> u64 {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} not set")).parse().unwrap()
}

pub fn env_str(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} not set"))
}

/// A small deterministic RNG (xorshift64*), seeded from the clock unless `SHMBUS_SEED` is set.
pub struct Rng(pub u64);

impl Rng {
    pub fn from_env_or_clock() -> Rng {
        Rng::from_var_or_clock("SHMBUS_SEED")
    }

    /// Seeded from environment variable `var` if set, else from the clock; the seed is
    /// printed so a failure can be replayed with `var`.
    pub fn from_var_or_clock(var: &str) -> Rng {
        let seed = std::env::var(var).ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
        });
        eprintln!("rng seed ({var}): {seed}");
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Waits for a child with a deadline; kills it and panics if it overruns.
pub fn wait_with_deadline(child: &mut Child, secs: u64, what: &str) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: child did not finish within {secs} s (hang)");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Waits until `cond` holds, polling every millisecond; panics after `secs` seconds.
pub fn eventually(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !cond() {
        assert!(std::time::Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

pub fn sigkill(child: &mut Child) {
    // SAFETY: plain kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
}

/// Runs example `name` with `SHMBUS_ROOT=root` and returns its output.
pub fn run_example(name: &str, root: &Path) -> std::process::Output {
    example_command(name).env("SHMBUS_ROOT", root).output().unwrap()
}

/// The command that runs example `name`. The example is the one `cargo test` built next to
/// this test binary (same profile); it is rebuilt first in case only this test target was
/// built (a no-op when it is current).
pub fn example_command(name: &str) -> Command {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev".to_owned(),
        Some(other) => other.to_owned(),
    };
    let example = profile_dir.join("examples").join(name);
    let st = Command::new(env!("CARGO"))
        .args(["build", "-q", "-p", "shmbus", "--example", name, "--profile", &profile])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(st.success() && example.exists(), "could not build {}", example.display());
    Command::new(&example)
}
