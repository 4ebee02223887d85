//! Runs `examples/stream.rs` (built by `cargo test` next to the test binaries).

use std::process::Command;

#[test]
fn stream_example_runs() {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().join("examples");
    let example = dir.join(format!("stream{}", std::env::consts::EXE_SUFFIX));
    {
        // `cargo test` builds examples, `cargo test --test stream_example` does not (and
        // could leave a stale one): make sure it is current. A no-op when it is.
        let st = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "shmbus", "--example", "stream"])
            .arg(if cfg!(debug_assertions) { "--profile=dev" } else { "--release" })
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .unwrap();
        assert!(st.success() && example.exists(), "could not build {}", example.display());
    }
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let root = std::env::temp_dir().join(format!("shmbus-stream-example-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let out = Command::new(&example).env("SHMBUS_ROOT", &root).output().unwrap();
    let _ = std::fs::remove_dir_all(&root);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "example failed: {}\n{stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("reader: received 10000 records"), "{stdout}");
    assert!(stdout.contains("writer: sent 10000 records"), "{stdout}");
}
