//! The Rust programs installed the way users install them: `cargo install --path
//! crates/shmbus-cli`, `crates/shmbus-bridge` and `crates/shmbus-foxglove` into a scratch
//! root, then the installed `shmbus` run from there: `--version`, a publish and `ls`, and
//! `shmbus bridge` and `shmbus foxglove`, which must find the programs cargo installed beside
//! it (PATH holds neither).
//!
//! cargo builds in this test's own target directory and profile (`--profile ci` under `make
//! test`) with the workspace's lock file, so only what differs from the suite's build (the
//! shmbus crates, whose features the workspace build unifies) is compiled again. It lives
//! with the C API's install test so the two install checks sit together.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// This test's target directory and cargo profile: the test executable is
/// `<target>/<profile dir>/deps/install_cargo-<hash>`.
fn target_and_profile() -> (PathBuf, String) {
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>/deps");
    let target = profile_dir.parent().expect("the target directory").to_path_buf();
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_string(),
        Some(other) => other.to_string(),
        None => panic!("no profile directory in {}", exe.display()),
    };
    (target, profile)
}

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("shmbus-test-install-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn check(what: &str, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `cargo install --path crates/<krate> --bin <bin> --root <root>` in this test's target
/// directory and profile.
fn cargo_install(krate: &str, bin: &str, root: &Path) {
    let (target, profile) = target_and_profile();
    let out = Command::new(env!("CARGO"))
        .arg("install")
        .arg("--path")
        .arg(workspace().join("crates").join(krate))
        .args(["--bin", bin, "--locked", "--profile", &profile, "--root"])
        .arg(root)
        .arg("--target-dir")
        .arg(&target)
        .current_dir(workspace())
        .output()
        .expect("run cargo install");
    check(&format!("cargo install --path crates/{krate}"), &out);
}

/// The installed `shmbus`, run with a PATH of system directories only (not the install
/// root's bin, not cargo's) and the domains under `shm`.
fn shmbus(root: &Path, shm: &Path) -> Command {
    let mut cmd = Command::new(root.join("bin/shmbus"));
    cmd.env("PATH", "/usr/bin:/bin").env("SHMBUS_ROOT", shm).current_dir(root);
    cmd
}

#[test]
fn cargo_install_gives_a_working_shmbus_that_finds_its_helper_programs() {
    let scratch = Scratch::new("cargo");
    let root = scratch.0.join("root");
    let shm = scratch.0.join("shm");
    std::fs::create_dir_all(&shm).unwrap();
    cargo_install("shmbus-cli", "shmbus", &root);
    cargo_install("shmbus-bridge", "shmbus-bridge", &root);
    cargo_install("shmbus-foxglove", "shmbus-foxglove", &root);
    for bin in ["shmbus", "shmbus-bridge", "shmbus-foxglove"] {
        assert!(root.join("bin").join(bin).is_file(), "cargo install put no bin/{bin}");
    }

    let version = check("shmbus --version", &shmbus(&root, &shm).arg("--version").output().unwrap());
    assert_eq!(version.trim(), format!("shmbus {}", env!("CARGO_PKG_VERSION")));

    let empty = check("shmbus ls", &shmbus(&root, &shm).arg("ls").output().unwrap());
    assert!(empty.contains("no channels"), "{empty}");
    check(
        "shmbus pub",
        &shmbus(&root, &shm).args(["pub", "--domain", "installed", "hello", "--data", "hi"]).output().unwrap(),
    );
    let listed = check("shmbus ls", &shmbus(&root, &shm).arg("ls").output().unwrap());
    assert!(listed.contains("hello"), "shmbus ls after a publish:\n{listed}");

    // `shmbus bridge` runs the bridge cargo installed beside it: its help is the bridge's own.
    let help = check("shmbus bridge --help", &shmbus(&root, &shm).args(["bridge", "--help"]).output().unwrap());
    assert!(help.contains("Zenoh") && help.contains("Usage: shmbus bridge"), "shmbus bridge --help said:\n{help}");
    let help = check("shmbus foxglove --help", &shmbus(&root, &shm).args(["foxglove", "--help"]).output().unwrap());
    assert!(
        help.contains("Foxglove WebSocket") && help.contains("Usage: shmbus foxglove"),
        "shmbus foxglove --help said:\n{help}"
    );
}
