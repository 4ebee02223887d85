//! Runs the built `shmbus-bench` binary: every transport in both modes, bad input, and a
//! dying echo process. Asserts shape and sanity of the output, never speed.

mod common;

use std::time::{Duration, Instant};

use common::{run_with, Run};

use serde_json::Value;

const TRANSPORTS: &[&str] =
    &["floor", "futex-floor", "topic", "topic-lossless", "stream", "queue", "pipe", "uds", "tcp"];
/// Transports that honour `--payload touch` (the rest always copy).
const ZERO_COPY: &[&str] = &["floor", "futex-floor", "topic", "topic-lossless", "stream"];
const REQUIRED: &[&str] = &["transport", "mode", "size", "iters", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"];
const OPTIONAL: &[&str] = &["payload", "warmup", "pinned", "min_ns", "mean_ns"];
/// Far above any sane run of these sizes, even on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(120);

fn run(args: &[&str]) -> Run {
    run_with(args, &[], DEADLINE)
}

fn pingpong_json(args: &[&str]) -> serde_json::Map<String, Value> {
    let mut all = vec!["pingpong", "--json"];
    all.extend_from_slice(args);
    let r = run(&all);
    assert!(r.success, "{all:?} failed: {}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{all:?}: expected one JSON line, got {:?}", r.stdout);
    let v: Value = serde_json::from_str(lines[0]).expect("stdout is JSON");
    let obj = v.as_object().expect("a JSON object").clone();
    for key in REQUIRED {
        assert!(obj.contains_key(*key), "{all:?}: missing {key} in {obj:?}");
    }
    for key in obj.keys() {
        assert!(
            REQUIRED.contains(&key.as_str()) || OPTIONAL.contains(&key.as_str()),
            "{all:?}: unexpected field {key}"
        );
    }
    let ps: Vec<u64> = ["p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"]
        .iter()
        .map(|k| obj[*k].as_u64().unwrap_or_else(|| panic!("{all:?}: {k} is not an integer: {}", obj[*k])))
        .collect();
    assert!(ps[0] > 0, "{all:?}: p50 must be positive: {ps:?}");
    assert!(ps.windows(2).all(|w| w[0] <= w[1]), "{all:?}: percentiles out of order: {ps:?}");
    obj
}

fn expected_mode(transport: &str, asked: &str) -> &'static str {
    match (transport, asked) {
        ("floor", _) => "spin",
        ("futex-floor", _) => "block",
        (_, "spin") => "spin",
        _ => "block",
    }
}

#[test]
fn every_transport_in_both_modes_reports_ordered_percentiles() {
    for t in TRANSPORTS {
        for mode in ["spin", "block"] {
            let obj = pingpong_json(&["--transport", t, "--mode", mode, "--size", "64", "--iters", "2000"]);
            assert_eq!(obj["transport"], *t);
            assert_eq!(obj["mode"], expected_mode(t, mode), "{t} asked {mode}");
            assert_eq!(obj["size"], 64);
            assert_eq!(obj["iters"], 2000);
        }
    }
}

#[test]
fn async_mode_runs_topic_and_queue_and_is_block_elsewhere() {
    for t in ["topic", "queue"] {
        for payload in ["copy", "touch"] {
            let obj = pingpong_json(&[
                "--transport",
                t,
                "--mode",
                "async",
                "--payload",
                payload,
                "--size",
                "64",
                "--iters",
                "2000",
            ]);
            assert_eq!(obj["mode"], "async", "{t} {payload}");
        }
    }
    let obj = pingpong_json(&["--transport", "stream", "--mode", "async", "--iters", "200"]);
    assert_eq!(obj["mode"], "block");
    let r = run(&["pool", "--mode", "async"]);
    assert!(!r.success && r.stderr.contains("--mode async is only for pingpong"), "{}", r.stderr);
}

#[test]
fn default_mode_is_block_except_for_floor() {
    for t in TRANSPORTS {
        let obj = pingpong_json(&["--transport", t, "--iters", "200", "--warmup", "10"]);
        let want = if *t == "floor" { "spin" } else { "block" };
        assert_eq!(obj["mode"], want, "{t}");
        assert_eq!(obj["warmup"], 10, "{t}");
    }
}

#[test]
fn the_default_warmup_is_bounded_by_bytes_for_large_messages() {
    // A tenth of the recorded round trips, at least 1000, for small messages; no more round
    // trips than 256 MiB of messages each way (but at least 100) for large ones: a journal
    // row of 6 MiB entries must not write GiB into its file system before it measures.
    let small = pingpong_json(&["--transport", "floor", "--iters", "200"]);
    assert_eq!(small["warmup"], 1000);
    let large = pingpong_json(&["--transport", "topic", "--size", "4194304", "--iters", "20", "--mode", "spin"]);
    assert_eq!(large["warmup"], 100);
}

#[test]
fn odd_and_large_sizes_and_both_payloads_round_trip() {
    // 1 and 8 travel in the floors' control line, 9 in the buffer; 200 000 bytes forces
    // partial reads and writes on every byte stream.
    for t in TRANSPORTS {
        for size in ["1", "8", "9", "200000"] {
            for payload in ["copy", "touch"] {
                let obj = pingpong_json(&[
                    "--transport",
                    t,
                    "--mode",
                    "spin",
                    "--size",
                    size,
                    "--payload",
                    payload,
                    "--iters",
                    "200",
                    "--warmup",
                    "10",
                ]);
                assert_eq!(obj["size"].to_string(), size);
                let real = if ZERO_COPY.contains(t) { payload } else { "copy" };
                assert_eq!(obj["payload"], real, "{t} asked {payload}");
            }
        }
    }
}

#[test]
fn text_output_is_one_line() {
    let r = run(&["pingpong", "--transport", "uds", "--iters", "200"]);
    assert!(r.success, "{}", r.stderr);
    assert_eq!(r.stdout.lines().count(), 1, "{:?}", r.stdout);
    assert!(r.stdout.contains("p50") && r.stdout.contains("uds"), "{:?}", r.stdout);
}

#[test]
fn bad_input_is_one_line_on_stderr_and_a_failure() {
    let cases: &[(&[&str], &str)] = &[
        (&["pingpong", "--transport", "carrier-pigeon"], "unknown transport"),
        (&["pingpong", "--transport", "floor", "--size", "0"], "--size"),
        (&["pingpong", "--transport", "floor", "--iters", "0"], "--iters"),
        (&["pingpong", "--transport", "floor", "--mode", "fast"], "fast"),
        (&["pingpong", "--transport", "floor", "--payload", "x"], "--payload"),
        (&["pingpong", "--transport", "floor", "--bogus"], "--bogus"),
        (&["pingpong", "--size", "64"], "--transport"),
        (&["throughput-memcpy", "--size", "0"], "--size"),
    ];
    for (args, needle) in cases {
        let r = run(args);
        assert!(!r.success, "{args:?} should fail");
        assert!(r.stdout.is_empty(), "{args:?} printed to stdout: {:?}", r.stdout);
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: stderr should be one line: {:?}", r.stderr);
        assert!(lines[0].contains(needle), "{args:?}: {:?} does not mention {needle}", lines[0]);
    }
}

#[test]
fn a_dying_echo_process_fails_the_run_instead_of_hanging_it() {
    for t in TRANSPORTS {
        for mode in ["spin", "block"] {
            let start = Instant::now();
            let r = run(&[
                "pingpong",
                "--transport",
                t,
                "--mode",
                mode,
                "--iters",
                "1000000",
                "--echo-exit-after",
                "100",
                "--json",
            ]);
            assert!(!r.success, "{t} {mode}: should fail when the echo dies");
            assert!(r.stdout.is_empty(), "{t} {mode}: {:?}", r.stdout);
            assert!(r.stderr.contains("echo process exited"), "{t} {mode}: {:?}", r.stderr);
            assert!(start.elapsed() < Duration::from_secs(30), "{t} {mode}: took {:?} to notice", start.elapsed());
        }
    }
}

#[test]
fn memcpy_bandwidth_is_positive() {
    let r = run(&["throughput-memcpy", "--size", "4096", "--millis", "20", "--json"]);
    assert!(r.success, "{}", r.stderr);
    let v: Value = serde_json::from_str(r.stdout.trim()).expect("JSON");
    assert_eq!(v["size"], 4096);
    assert!(v["mb_per_s"].as_u64().unwrap() > 0, "{v}");
}
