//! Every example runs and says what it should (examples are code the tests run).

#![cfg(not(loom))]

mod common;

use common::{run_example, Scratch};

fn run(name: &str) -> String {
    let s = Scratch::new(&format!("example-{name}"));
    let out = run_example(name, s.path());
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{name} failed: {}\n{stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    stdout
}

#[test]
fn topic_quickstart() {
    let out = run("topic");
    assert!(out.contains("frame 1 (6220800 bytes) first byte 42"), "{out}");
    assert!(out.contains("imu 1: accel"), "{out}");
}

#[test]
fn stream() {
    let out = run("stream");
    assert!(out.contains("reader: received 10000 records"), "{out}");
    assert!(out.contains("writer: sent 10000 records"), "{out}");
}

#[test]
fn pool() {
    let out = run("pool");
    assert!(out.contains("all 30 jobs done"), "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("worker ")).count(), 30, "each job received once:\n{out}");
}

#[test]
fn typed_topic() {
    let out = run("typed_topic");
    assert!(out.contains("frame 3 seq 3 (307216 bytes) exposure 500 us, pixel[100][0] = 103"), "{out}");
    assert!(out.contains("refused: ") && out.contains("open it with the same type or as bytes"), "{out}");
}

#[test]
fn service() {
    let out = run("service");
    assert!(out.contains("requests service::AddTwoInts / responses service::Sum"), "{out}");
    assert!(out.contains("40 + 2 = 42") && out.contains("answered: 303"), "{out}");
    assert!(out.contains("countdown [3, 2, 1]"), "{out}");
}

#[test]
fn typed_journal() {
    let out = run("typed_journal");
    assert!(out.contains("records ") && out.contains("Trade (24 bytes, align 8)"), "{out}");
    assert!(out.contains("appended up to index 1"), "{out}");
    assert!(out.contains("trade at 2 ns: 5 x 101300000 side 1"), "{out}");
    assert!(out.contains("audit resumes at ts 2"), "{out}");
    assert!(out.contains("refused: ") && out.contains("open it with the same type or as bytes"), "{out}");
}
