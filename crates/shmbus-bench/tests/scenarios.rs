//! Runs the built `shmbus-bench` binary through the multi-process scenarios — `throughput`,
//! `pool`, `fanout` — briefly, and checks the shape of the output, never the speed.

mod common;

use std::time::Duration;

use common::{run_with, Run};

use serde_json::{Map, Value};

/// Far above any sane run of these sizes, even on a loaded machine in a debug build.
const DEADLINE: Duration = Duration::from_secs(180);

fn run(args: &[&str]) -> Run {
    run_with(args, &[], DEADLINE)
}

/// Runs `args` with `--json`; asserts one JSON object on one line with exactly `keys`.
fn json(args: &[&str], keys: &[&str]) -> Map<String, Value> {
    let mut all = args.to_vec();
    all.push("--json");
    let r = run(&all);
    assert!(r.success, "{all:?} failed: {}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{all:?}: expected one JSON line, got {:?}", r.stdout);
    let v: Value = serde_json::from_str(lines[0]).expect("stdout is JSON");
    let obj = v.as_object().expect("a JSON object").clone();
    let mut got: Vec<&str> = obj.keys().map(String::as_str).collect();
    let mut want = keys.to_vec();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want, "{all:?}: keys of {obj:?}");
    obj
}

fn uint(obj: &Map<String, Value>, key: &str) -> u64 {
    obj[key].as_u64().unwrap_or_else(|| panic!("{key} is not an unsigned integer: {}", obj[key]))
}

fn assert_ordered(obj: &Map<String, Value>, keys: &[&str]) {
    let v: Vec<u64> = keys.iter().map(|k| uint(obj, k)).collect();
    assert!(v[0] > 0, "{keys:?}: first must be positive: {v:?}");
    assert!(v.windows(2).all(|w| w[0] <= w[1]), "{keys:?} out of order: {v:?} in {obj:?}");
}

const THROUGHPUT_KEYS: &[&str] = &[
    "transport",
    "mode",
    "payload",
    "size",
    "capacity",
    "bytes",
    "records",
    "pinned",
    "mb_per_s",
    "memcpy_mb_per_s",
    "ratio",
    "copy_floor_mb_per_s",
    "x_copy_floor",
    "floor_p50_ns",
];

#[test]
fn stream_throughput_reports_bandwidth_next_to_memcpy() {
    for (size, mode, payload) in
        [("64", "spin", "copy"), ("65536", "spin", "copy"), ("4096", "block", "copy"), ("1000", "spin", "touch")]
    {
        let o = json(
            &[
                "throughput",
                "--transport",
                "stream",
                "--size",
                size,
                "--bytes",
                "4000000",
                "--mode",
                mode,
                "--payload",
                payload,
                "--memcpy-millis",
                "20",
            ],
            THROUGHPUT_KEYS,
        );
        assert_eq!(o["transport"], "stream");
        assert_eq!(o["size"].to_string(), size);
        assert_eq!(o["mode"], mode);
        assert_eq!(o["payload"], payload);
        let size: u64 = size.parse().unwrap();
        assert_eq!(uint(&o, "bytes"), uint(&o, "records") * size);
        assert!(uint(&o, "bytes") <= 4_000_000 && uint(&o, "bytes") > 4_000_000 - size, "{o:?}");
        assert!(uint(&o, "capacity").is_power_of_two(), "{o:?}");
        assert!(uint(&o, "mb_per_s") > 0 && uint(&o, "memcpy_mb_per_s") > 0, "{o:?}");
        assert!(o["ratio"].as_f64().unwrap() > 0.0, "{o:?}");
        assert!(uint(&o, "floor_p50_ns") > 0, "{o:?}");
        assert!(uint(&o, "copy_floor_mb_per_s") > 0 && o["x_copy_floor"].as_f64().unwrap() > 0.0, "{o:?}");
    }
}

#[test]
fn throughput_text_is_one_line_and_bad_input_fails() {
    let r = run(&["throughput", "--size", "4096", "--bytes", "1000000", "--memcpy-millis", "10"]);
    assert!(r.success, "{}", r.stderr);
    assert_eq!(r.stdout.lines().count(), 1, "{:?}", r.stdout);
    assert!(r.stdout.contains("MB/s") && r.stdout.contains("memcpy"), "{:?}", r.stdout);
    for (args, needle) in [
        (&["throughput", "--transport", "pipe"][..], "stream"),
        (&["throughput", "--size", "0"][..], "--size"),
        (&["throughput", "--bytes", "0"][..], "--bytes"),
        (&["throughput", "--size", "100000", "--capacity", "65536"][..], "--capacity"),
        (&["throughput", "--capacity", "5000"][..], "capacity"),
    ] {
        let r = run(args);
        assert!(!r.success, "{args:?} should fail");
        assert!(r.stdout.is_empty(), "{args:?}: {:?}", r.stdout);
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {:?}", r.stderr);
        assert!(r.stderr.contains(needle), "{args:?}: {:?} lacks {needle}", r.stderr);
    }
}

const STATS_KEYS: &[&str] =
    &["count", "returned", "p1_ns", "p10_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns", "mean_ns", "stddev_ns"];

#[test]
fn pool_reports_the_reference_table_for_pool_and_crossbeam() {
    for (jobs, workers, mode) in [("2", "3", "block"), ("5", "3", "block"), ("3", "3", "spin"), ("6", "6", "block")] {
        let o = json(
            &[
                "pool",
                "--jobs",
                jobs,
                "--workers",
                workers,
                "--rounds",
                "40",
                "--warmup",
                "5",
                "--gap-us",
                "100",
                "--mode",
                mode,
            ],
            &["jobs", "workers", "rounds", "warmup", "mode", "gap_us", "work_us", "pool", "crossbeam"],
        );
        assert_eq!(o["jobs"].to_string(), jobs);
        assert_eq!(o["workers"].to_string(), workers);
        assert_eq!(o["mode"], mode);
        let jobs: u64 = jobs.parse().unwrap();
        for side in ["pool", "crossbeam"] {
            let s = o[side].as_object().unwrap_or_else(|| panic!("{side} is not an object: {o:?}")).clone();
            let mut keys: Vec<&str> = s.keys().map(String::as_str).collect();
            keys.sort_unstable();
            let mut want = STATS_KEYS.to_vec();
            want.sort_unstable();
            assert_eq!(keys, want, "{side}");
            assert_ordered(&s, &["p1_ns", "p10_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"]);
            // Every job of every recorded burst is either received or handed back; the
            // crossbeam channel queues instead of handing back.
            assert_eq!(uint(&s, "count") + uint(&s, "returned"), 40 * jobs, "{side}: {s:?}");
            if side == "crossbeam" {
                assert_eq!(uint(&s, "returned"), 0, "{s:?}");
            }
        }
    }
}

#[test]
fn pool_text_is_a_table_and_bad_input_fails() {
    let r = run(&["pool", "--jobs", "2", "--workers", "2", "--rounds", "20", "--warmup", "2"]);
    assert!(r.success, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{:?}", r.stdout);
    assert!(lines[0].contains("50%") && lines[1].starts_with("shmbus pool") && lines[2].starts_with("crossbeam"));
    for (args, needle) in [
        (&["pool", "--jobs", "0"][..], "--jobs"),
        (&["pool", "--workers", "0"][..], "--workers"),
        (&["pool", "--workers", "65"][..], "--workers"),
        (&["pool", "--rounds", "0"][..], "--rounds"),
        (&["pool", "--mode", "fast"][..], "fast"),
    ] {
        let r = run(args);
        assert!(!r.success, "{args:?} should fail");
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {:?}", r.stderr);
        assert!(r.stderr.contains(needle), "{args:?}: {:?} lacks {needle}", r.stderr);
    }
}

const FANOUT_KEYS: &[&str] = &[
    "subscribers",
    "size",
    "iters",
    "warmup",
    "mode",
    "payload",
    "reliable",
    "pinned",
    "p50_ns",
    "p90_ns",
    "p99_ns",
    "p999_ns",
    "max_ns",
    "min_ns",
    "mean_ns",
    "clock_ns",
    "received_min",
    "received_max",
    "lagged",
];

#[test]
fn fanout_to_reliable_subscribers_delivers_every_message_to_each() {
    for k in ["1", "8"] {
        let o = json(&["fanout", "--reliable", "--subscribers", k, "--iters", "3000", "--warmup", "500"], FANOUT_KEYS);
        assert_eq!(o["reliable"], true);
        assert_ordered(&o, &["min_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"]);
        // Lossless: each subscriber read all 3500 publishes, none skipped.
        assert_eq!((uint(&o, "received_min"), uint(&o, "received_max"), uint(&o, "lagged")), (3500, 3500, 0), "{o:?}");
    }
}

#[test]
fn fanout_with_1_8_and_64_subscriber_processes() {
    for k in ["1", "8", "64"] {
        let o = json(&["fanout", "--subscribers", k, "--iters", "3000", "--warmup", "500"], FANOUT_KEYS);
        assert_eq!(o["subscribers"].to_string(), k);
        assert_eq!(o["iters"], 3000);
        assert_ordered(&o, &["min_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"]);
        // Every subscriber read something (at least the last message) and never more than
        // was published; what it missed it reported as lagged.
        let published = 3500;
        assert!(uint(&o, "received_min") >= 1, "{o:?}");
        assert!(uint(&o, "received_max") <= published, "{o:?}");
        assert!(uint(&o, "received_min") <= uint(&o, "received_max"), "{o:?}");
    }
}

#[test]
fn fanout_block_mode_and_touch_payload() {
    for (mode, payload) in [("block", "copy"), ("spin", "touch"), ("block", "touch")] {
        let o = json(
            &[
                "fanout",
                "--subscribers",
                "4",
                "--iters",
                "2000",
                "--warmup",
                "100",
                "--mode",
                mode,
                "--payload",
                payload,
            ],
            FANOUT_KEYS,
        );
        assert_eq!(o["mode"], mode);
        assert_eq!(o["payload"], payload);
        assert_ordered(&o, &["min_ns", "p50_ns", "p99_ns", "max_ns"]);
    }
    for (args, needle) in [
        (&["fanout", "--subscribers", "0"][..], "--subscribers"),
        (&["fanout", "--subscribers", "1000"][..], "--subscribers"),
        (&["fanout", "--size", "0"][..], "--size"),
        (&["fanout", "--iters", "0"][..], "--iters"),
    ] {
        let r = run(args);
        assert!(!r.success, "{args:?} should fail");
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {:?}", r.stderr);
        assert!(r.stderr.contains(needle), "{args:?}: {:?} lacks {needle}", r.stderr);
    }
}
