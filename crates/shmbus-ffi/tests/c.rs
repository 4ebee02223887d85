//! The C programs of `tests/c/` and `examples/c/`, compiled with `cc` against
//! `include/shmbus.h` and the `libshmbus.a` that cargo built for this test run, and run as
//! real processes: once plain, once under AddressSanitizer and UndefinedBehaviorSanitizer.
//!
//! A test cannot depend on a staticlib, so the first test to need it runs `cargo build -p
//! shmbus-ffi --lib` with this test's own profile and target directory (found from the test
//! executable's path): up to date after `cargo test --workspace`, and never a stale library.
//! Linking statically also keeps the sanitizers' runtime first in the link, with no preloading.

mod common;
#[path = "common/program.rs"]
mod program;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use common::Scratch;
use program::{assert_success, command, compile, Build};

/// `$CC` (default `cc`) in C11.
fn compile_c(name: &str, sources: &[&str], build: Build) -> std::path::PathBuf {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    compile(&[&cc, "-std=c11"], name, sources, build)
}

/// Compiles and runs the single-process test `tests/c/<name>.c` with a scratch domain root.
fn run_c_test(name: &str, build: Build) {
    let exe = compile_c(name, &[&format!("tests/c/{name}.c")], build);
    let scratch = Scratch::new(name);
    let out = command(&exe, build).arg(&scratch.0).output().expect("run the C test");
    assert_success(name, &out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&format!("{name}: ok")), "{name} did not finish: {stdout}");
}

/// The example subscriber and publisher, as two processes: the subscriber reads in place what
/// the publisher writes in place.
fn topic_example(build: Build) {
    let sub_exe = compile_c("topic_subscriber", &["examples/c/topic_subscriber.c"], build);
    let pub_exe = compile_c("topic_publisher", &["examples/c/topic_publisher.c"], build);
    let scratch = Scratch::new("example");
    let root = scratch.0.to_str().expect("a UTF-8 temp path");
    let count = "1000";
    let mut sub: Child = command(&sub_exe, build)
        .args([root, "example", "imu", count])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the subscriber");
    let mut lines = BufReader::new(sub.stdout.take().expect("the subscriber's stdout")).lines();
    let first = lines.next().map(|l| l.unwrap_or_default()).unwrap_or_default();
    if first != "ready" {
        let out = sub.wait_with_output().expect("wait for the subscriber");
        panic!("the subscriber did not get ready: {first:?}\n{}", String::from_utf8_lossy(&out.stderr));
    }
    let publisher = command(&pub_exe, build).args([root, "example", "imu", count]).output().expect("run the publisher");
    assert_success("topic_publisher", &publisher);
    assert_eq!(String::from_utf8_lossy(&publisher.stdout).trim(), "published 1000");
    let rest: Vec<String> = lines.map(|l| l.unwrap_or_default()).collect();
    let out = sub.wait_with_output().expect("wait for the subscriber");
    assert_success("topic_subscriber", &out);
    assert_eq!(rest, vec!["received 1000".to_string()]);
}

#[test]
fn topic_example_publisher_and_subscriber() {
    topic_example(Build::Plain);
}

#[test]
fn topic_example_publisher_and_subscriber_sanitized() {
    topic_example(Build::Sanitized);
}

#[test]
fn topic() {
    run_c_test("topic", Build::Plain);
}

#[test]
fn topic_sanitized() {
    run_c_test("topic", Build::Sanitized);
}

#[test]
fn topic_reliable() {
    run_c_test("topic_reliable", Build::Plain);
}

#[test]
fn topic_reliable_sanitized() {
    run_c_test("topic_reliable", Build::Sanitized);
}

#[test]
fn recv_into() {
    run_c_test("recv_into", Build::Plain);
}

#[test]
fn recv_into_sanitized() {
    run_c_test("recv_into", Build::Sanitized);
}

#[test]
fn queue() {
    run_c_test("queue", Build::Plain);
}

#[test]
fn queue_sanitized() {
    run_c_test("queue", Build::Sanitized);
}

#[test]
fn stream() {
    run_c_test("stream", Build::Plain);
}

#[test]
fn stream_sanitized() {
    run_c_test("stream", Build::Sanitized);
}

#[test]
fn pool() {
    run_c_test("pool", Build::Plain);
}

#[test]
fn pool_sanitized() {
    run_c_test("pool", Build::Sanitized);
}

#[test]
fn service() {
    run_c_test("service", Build::Plain);
}

#[test]
fn service_sanitized() {
    run_c_test("service", Build::Sanitized);
}

#[test]
fn journal() {
    run_c_test("journal", Build::Plain);
}

#[test]
fn journal_sanitized() {
    run_c_test("journal", Build::Sanitized);
}

#[test]
fn schema() {
    run_c_test("schema", Build::Plain);
}

#[test]
fn schema_sanitized() {
    run_c_test("schema", Build::Sanitized);
}

#[test]
fn waitset() {
    run_c_test("waitset", Build::Plain);
}

#[test]
fn waitset_sanitized() {
    run_c_test("waitset", Build::Sanitized);
}

/// The benchmark's ping-pong program (`bench/pingpong.c`, run by `make bench-bindings`)
/// still builds against the header and completes a few round trips of both payloads, as two
/// processes, under the sanitizers. No figure is checked.
#[test]
fn bench_pingpong_sanitized() {
    let exe = compile_c("pingpong", &["bench/pingpong.c"], Build::Sanitized);
    for args in [&["--payload", "copy", "--size", "8"][..], &["--payload", "touch", "--size", "4096"][..]] {
        let out = command(&exe, Build::Sanitized)
            .args(args)
            .args(["--iters", "200", "--warmup", "20", "--json"])
            .output()
            .expect("run the ping-pong");
        assert_success("pingpong", &out);
        let json = String::from_utf8_lossy(&out.stdout);
        let payload = format!("\"payload\":\"{}\"", args[1]);
        for key in ["\"binding\":\"c\"", "\"mode\":\"spin\"", payload.as_str(), "\"iters\":200", "\"p50_ns\":"] {
            assert!(json.contains(key), "{key} missing from the ping-pong's output: {json}");
        }
    }
}
