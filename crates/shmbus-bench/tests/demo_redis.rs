//! `demo-redis`: the demo profile over Redis streams (TCP and a Unix socket), briefly:
//! the shape of its output and that every role moved messages, never the speed.
//!
//! The runs need `redis-server` on `PATH`. Without it they print a note and pass, unless
//! `SHMBUS_BENCH_REQUIRE_REDIS=1` is set (as `make test` does), in which case they fail.

mod common;

use std::time::Duration;

use common::{redis_on_path, run_with};
use serde_json::Value;

const NOT_FOUND: &str = "redis-server not found: skipping the Redis peers";
const DEADLINE: Duration = Duration::from_secs(120);
const CONSUMERS: &[&str] =
    &["imu", "image", "image+med01", "image+med0[1-5]", "imu+image+med0[1-5]", "imu+image+med0[1-5] & sleep(10ms)"];
const PRODUCERS: &[&str] = &["imu", "image", "med01", "med02", "med03", "med04", "med05"];

/// A latency summary with messages in it: n > 0 and 0 < p50 <= p99 <= max, mean > 0.
fn has_latencies(s: &Value, what: &str) -> u64 {
    let n = s["n"].as_u64().unwrap_or(0);
    assert!(n > 0, "{what}: no messages: {s}");
    let mean = s["mean_ns"].as_f64().unwrap_or(0.0);
    let p: Vec<u64> = ["p50_ns", "p99_ns", "max_ns"].iter().map(|k| s[*k].as_u64().unwrap_or(0)).collect();
    assert!(mean > 0.0 && p[0] > 0 && p[0] <= p[1] && p[1] <= p[2], "{what}: {s}");
    n
}

#[test]
fn both_transports_report_every_consumer_and_producer() {
    if !redis_on_path("demo-redis is") {
        return;
    }
    for via in ["tcp", "uds"] {
        // A private TMPDIR: the server's directory is in it and must be gone afterwards.
        let tmp = std::env::temp_dir().join(format!("shmbus-bench-demo-redis-test-{}-{via}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let r = run_with(
            &["demo-redis", "--transport", via, "--seconds", "1", "--json"],
            &[("TMPDIR", tmp.to_str().unwrap())],
            DEADLINE,
        );
        let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().file_name()).collect();
        std::fs::remove_dir_all(&tmp).unwrap();
        assert!(r.success, "{via}: {}", r.stderr);
        assert!(left.is_empty(), "{via}: the server's directory was left behind: {left:?}");
        let lines: Vec<&str> = r.stdout.lines().collect();
        assert_eq!(lines.len(), 1, "{via}: one JSON line: {:?}", r.stdout);
        let v: Value = serde_json::from_str(lines[0]).expect("stdout is JSON");
        assert_eq!(v["backend"], format!("redis-{via}"));
        assert_eq!(v["image_bytes"].as_u64(), Some(6_220_800), "{v}");
        assert_eq!(v["view_is_copy"], true);
        let consumers = v["consumers"].as_array().expect("consumers");
        let names: Vec<&str> = consumers.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, CONSUMERS, "{via}");
        for c in consumers {
            let what = format!("{via} consumer {}", c["name"]);
            has_latencies(&c["view"], &what);
            assert_eq!(c["view"], c["view_copy"], "{what}: a socket client views what it copied");
            assert!(c["gaps"].as_u64().is_some(), "{what}: {c}");
        }
        let producers = v["producers"].as_array().expect("producers");
        let names: Vec<&str> = producers.iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(names, PRODUCERS, "{via}");
        for p in producers {
            has_latencies(&p["write"], &format!("{via} producer {}", p["name"]));
            assert_eq!(p["failed"].as_u64(), Some(0), "{p}");
        }
        // A consumer of one stream gets each message its producer sent, less what was trimmed.
        let sent = producers[0]["write"]["n"].as_u64().unwrap();
        let got = consumers[0]["view"]["n"].as_u64().unwrap() + consumers[0]["gaps"].as_u64().unwrap();
        assert_eq!(got, sent, "{via}: imu consumer vs producer");
    }
}

#[test]
fn the_text_output_is_the_demo_table() {
    if !redis_on_path("demo-redis is") {
        return;
    }
    let r = run_with(&["demo-redis", "--transport", "uds", "--seconds", "0.3", "--image-bytes", "1080"], &[], DEADLINE);
    assert!(r.success, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("ROLE")).expect("a table header");
    for col in ["NAME", "LATENCY OF", "MEAN", "P50", "P99", "MAX", "N"] {
        assert!(lines[header].contains(col), "{}", lines[header]);
    }
    let rows = &lines[header + 1..];
    // Two rows (view, view+copy) per consumer, one (write) per producer.
    assert_eq!(rows.len(), 2 * CONSUMERS.len() + PRODUCERS.len(), "{}", r.stdout);
    assert!(rows.iter().any(|l| l.contains("=> image+med0[1-5]") && l.contains("view+copy")), "{}", r.stdout);
    assert!(rows.iter().any(|l| l.contains("med05 =>") && l.contains("write")), "{}", r.stdout);
    assert!(lines[0].contains("Unix socket") && lines[0].contains("image 1080 B"), "{}", lines[0]);
}

#[test]
fn a_missing_redis_server_is_one_line_and_a_failure() {
    for env in [("PATH", "/nonexistent"), ("SHMBUS_BENCH_REDIS_SERVER", "/nonexistent/redis-server")] {
        let r = run_with(&["demo-redis", "--transport", "tcp", "--seconds", "1"], &[env], DEADLINE);
        assert!(!r.success, "{env:?}: must fail");
        assert!(r.stdout.is_empty(), "{env:?}: {:?}", r.stdout);
        assert_eq!(r.stderr.trim_end(), NOT_FOUND, "{env:?}");
    }
}

#[test]
fn bad_arguments_are_one_line_errors() {
    for args in [
        &["demo-redis", "--transport", "shm"][..],
        &["demo-redis", "--transport", "tcp", "--seconds", "0"],
        &["demo-redis", "--transport", "uds", "--image-bytes", "0"],
    ] {
        let r = run_with(args, &[], DEADLINE);
        assert!(!r.success, "{args:?} succeeded");
        assert_eq!(r.stderr.trim_end().lines().count(), 1, "{args:?}: {}", r.stderr);
        assert!(r.stderr.starts_with("shmbus-bench: error: "), "{args:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{args:?}");
    }
}
