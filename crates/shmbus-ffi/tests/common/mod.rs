//! What the C tests and the install test share: the freshly built library and scratch
//! directories.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

pub const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");

/// The directory holding `libshmbus.a`, built (once per test process) by cargo in this
/// test's own target directory and profile: `target/<profile>/`.
pub fn lib_dir() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            // The test executable is `<target>/<profile dir>/deps/c-<hash>`.
            let exe = std::env::current_exe().expect("the test executable's path");
            let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>/deps").to_path_buf();
            let target_dir = profile_dir.parent().expect("the target directory");
            let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
                Some("debug") => "dev",
                Some(other) => other,
                None => panic!("no profile directory in {}", exe.display()),
            };
            let out = Command::new(env!("CARGO"))
                .args(["build", "-p", "shmbus-ffi", "--lib", "--profile", profile, "--target-dir"])
                .arg(target_dir)
                .current_dir(MANIFEST)
                .output()
                .expect("run cargo to build libshmbus.a");
            assert!(out.status.success(), "building libshmbus.a failed:\n{}", String::from_utf8_lossy(&out.stderr));
            assert!(profile_dir.join("libshmbus.a").is_file(), "no libshmbus.a in {}", profile_dir.display());
            profile_dir
        })
        .clone()
}

/// A scratch directory for the domains of one test, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "shmbus-test-c-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
