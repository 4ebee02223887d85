//! What the bridge's tests share: scratch roots, Zenoh sessions on loopback, waiting.

#![allow(dead_code)]

pub mod procs;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use zenoh::Wait;

/// A scratch directory, removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "shmbus-test-bridge-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A subdirectory, made.
    pub fn dir(&self, name: &str) -> PathBuf {
        let d = self.0.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A TCP port on 127.0.0.1 free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A Zenoh peer on loopback only: listening on `listen` (else an ephemeral port), connecting
/// to `connect`, no multicast scouting.
pub fn session(listen: Option<u16>, connect: &[u16]) -> zenoh::Session {
    let mut c = zenoh::Config::default();
    c.insert_json5("mode", "\"peer\"").unwrap();
    c.insert_json5("scouting/multicast/enabled", "false").unwrap();
    c.insert_json5("listen/endpoints", &format!("[\"tcp/127.0.0.1:{}\"]", listen.unwrap_or(0))).unwrap();
    let connect: Vec<String> = connect.iter().map(|p| format!("tcp/127.0.0.1:{p}")).collect();
    c.insert_json5("connect/endpoints", &serde_json::to_string(&connect).unwrap()).unwrap();
    zenoh::open(c).wait().unwrap()
}

/// Polls `f` until it is true, for at most `limit`.
pub fn wait_until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A Zenoh session in `mode` ("client" or "router") on loopback: a router listens on
/// `port`, a client connects to it.
pub fn session_in_mode(mode: &str, port: u16) -> zenoh::Session {
    let mut c = zenoh::Config::default();
    c.insert_json5("mode", &format!("\"{mode}\"")).unwrap();
    c.insert_json5("scouting/multicast/enabled", "false").unwrap();
    let ep = format!("[\"tcp/127.0.0.1:{port}\"]");
    if mode == "router" {
        c.insert_json5("listen/endpoints", &ep).unwrap();
    } else {
        c.insert_json5("connect/endpoints", &ep).unwrap();
    }
    zenoh::open(c).wait().unwrap()
}
