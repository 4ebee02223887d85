//! Runs `examples/pool.rs` (a dispatcher and three worker processes) end to end.

use std::process::Command;

#[test]
fn pool_example_runs() {
    let root = std::env::temp_dir().join(format!(
        "shmbus-pool-example-{}-{}",
        std::process::id(),
        shmbus::sys::monotonic_ns()
    ));
    std::fs::create_dir_all(&root).unwrap();
    let out = Command::new(env!("CARGO"))
        .args(["run", "-q", "--manifest-path", concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"), "--example", "pool"])
        .env("SHMBUS_ROOT", &root)
        .output()
        .expect("run cargo");
    let _ = std::fs::remove_dir_all(&root);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "example failed: {}\n{stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("all 30 jobs done"), "{stdout}");
    assert_eq!(stdout.lines().filter(|l| l.starts_with("worker ")).count(), 30, "each job received once:\n{stdout}");
}
