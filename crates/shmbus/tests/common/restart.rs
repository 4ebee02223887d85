//! The harness shared by the `restart_*` suites: children that are this test binary run again
//! as `child_entry`, killed with SIGKILL, and the kill-then-restart loop.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use shmbus::Domain;

use super::{child_command, sigkill, wait_with_deadline, Rng, Scratch};

/// Kills per role: `SHMBUS_RESTARTS` (default 8).
fn restarts() -> u64 {
    std::env::var("SHMBUS_RESTARTS").ok().and_then(|v| v.parse().ok()).unwrap_or(8)
}

/// Ends a child with exit code 3 after saying why.
pub fn fail(what: String) -> ! {
    eprintln!("{what}");
    std::process::exit(3)
}

/// A child in `role` with `MODE=mode`: `work` loops until killed, `restart` does a bounded
/// job and exits 0.
fn spawn_in_mode(role: &str, mode: &str, root: &Path) -> Child {
    child_command("child_entry", role, &[("SHMBUS_ROOT", root.display().to_string()), ("MODE", mode.to_owned())])
        .spawn()
        .unwrap()
}

/// Kills a working `role` child at a random moment, `restarts()` times; after each kill the
/// first replacement must finish its job. `drive` runs the peer's side while waiting (one
/// step per call).
pub fn kill_and_restart<T>(tag: &str, role: &str, setup: impl FnOnce(&Domain) -> T, mut drive: impl FnMut(&mut T)) {
    let s = Scratch::new(tag);
    let root = s.path().to_owned();
    let d = Domain::with_root("r", &root).unwrap();
    let mut peer = setup(&d);
    let mut rng = Rng::from_env_or_clock();
    for round in 0..restarts() {
        let mut child = spawn_in_mode(role, "work", &root);
        let until = Instant::now() + Duration::from_millis(20 + rng.below(150));
        while Instant::now() < until {
            drive(&mut peer);
        }
        sigkill(&mut child);
        let st = child.wait().unwrap();
        assert!(st.code().is_none(), "{role} round {round}: exited on its own before the kill: {st:?}");
        let mut next = spawn_in_mode(role, "restart", &root);
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

/// The domain the children of a suite open, under `root`.
pub fn domain_at(root: &Path) -> Domain {
    Domain::with_root("r", root).unwrap()
}

/// A child in `role` under `root`, its stdout discarded.
pub fn spawn(role: &str, root: &Path) -> Child {
    child_command("child_entry", role, &[("SHMBUS_ROOT", root.display().to_string())])
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// SIGKILLs `child` and reaps it.
pub fn kill(mut child: Child) {
    sigkill(&mut child);
    child.wait().unwrap();
}
