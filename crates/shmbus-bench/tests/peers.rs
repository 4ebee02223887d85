//! The peers (Redis pub/sub and streams over TCP and a Unix socket) and `report`: every path
//! briefly, the one-line skip when `redis-server` is missing, output shape only (never speed).
//!
//! The tests that run Redis need `redis-server` on `PATH`, and the plot checks a TrueType
//! font (`make test` installs both). Without them they print a note and pass, unless
//! `SHMBUS_BENCH_REQUIRE_REDIS=1` is set (as `make test` does), in which case they fail.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{redis_on_path, run_with, Run};

use serde_json::Value;

const REDIS: &[&str] = &["redis-pubsub-tcp", "redis-pubsub-uds", "redis-stream-tcp", "redis-stream-uds"];
const NOT_FOUND: &str = "redis-server not found: skipping the Redis peers";
const DEADLINE: Duration = Duration::from_secs(600);

fn run_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    run_with(args, env, DEADLINE)
}

fn run(args: &[&str]) -> Run {
    run_env(args, &[])
}

fn one_json(r: &Run, what: &str) -> serde_json::Map<String, Value> {
    assert!(r.success, "{what} failed: {}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: expected one JSON line, got {:?}", r.stdout);
    serde_json::from_str::<Value>(lines[0]).expect("stdout is JSON").as_object().expect("an object").clone()
}

fn percentiles_ordered(obj: &serde_json::Map<String, Value>, what: &str) {
    let ps: Vec<u64> = ["p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"]
        .iter()
        .map(|k| obj[*k].as_u64().unwrap_or_else(|| panic!("{what}: {k} is not an integer")))
        .collect();
    assert!(ps[0] > 0, "{what}: {ps:?}");
    assert!(ps.windows(2).all(|w| w[0] <= w[1]), "{what}: percentiles out of order: {ps:?}");
}

#[test]
fn every_redis_transport_round_trips_small_and_large_messages() {
    if !redis_on_path("the Redis runs are") {
        return;
    }
    for t in REDIS {
        // 1 B, and 300,000 B: several socket reads per message on both sides.
        for size in ["1", "300000"] {
            let what = format!("{t} {size} B");
            let r = run(&["pingpong", "--transport", t, "--size", size, "--iters", "200", "--warmup", "20", "--json"]);
            let obj = one_json(&r, &what);
            assert_eq!(obj["transport"], *t);
            assert_eq!(obj["mode"], "block", "{what}");
            assert_eq!(obj["payload"], "copy", "{what}");
            assert_eq!(obj["size"].to_string(), size);
            percentiles_ordered(&obj, &what);
        }
    }
}

#[test]
fn redis_always_blocks_and_says_so() {
    if !redis_on_path("the Redis runs are") {
        return;
    }
    let r = run(&["pingpong", "--transport", "redis-pubsub-uds", "--mode", "spin", "--iters", "100"]);
    assert!(r.success, "{}", r.stderr);
    assert_eq!(r.stdout.lines().count(), 1, "{:?}", r.stdout);
    assert!(r.stdout.contains("redis-pubsub-uds") && r.stdout.contains("block"), "{:?}", r.stdout);
    assert!(r.stderr.contains("always runs in block mode"), "{:?}", r.stderr);
}

#[test]
fn a_dying_echo_fails_a_redis_run_and_the_server_is_stopped() {
    if !redis_on_path("the Redis runs are") {
        return;
    }
    for t in REDIS {
        // A private TMPDIR: the server's directory is in it and must be gone afterwards
        // (it is removed when the server has been stopped).
        let tmp = std::env::temp_dir().join(format!("shmbus-bench-peers-test-{}-{t}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let start = Instant::now();
        let r = run_env(
            &["pingpong", "--transport", t, "--iters", "1000000", "--echo-exit-after", "50", "--json"],
            &[("TMPDIR", tmp.to_str().unwrap())],
        );
        let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().file_name()).collect();
        std::fs::remove_dir_all(&tmp).unwrap();
        assert!(left.is_empty(), "{t}: the server's directory was left behind: {left:?}");
        assert!(!r.success, "{t}: should fail when the echo dies");
        assert!(r.stdout.is_empty(), "{t}: {:?}", r.stdout);
        assert!(r.stderr.contains("echo process exited"), "{t}: {:?}", r.stderr);
        assert!(start.elapsed() < Duration::from_secs(60), "{t}: took {:?}", start.elapsed());
    }
}

#[test]
fn a_missing_redis_server_is_one_line_and_a_failure_for_an_explicit_run() {
    for t in REDIS {
        // PATH without redis-server …
        let r = run_env(&["pingpong", "--transport", t, "--iters", "10", "--json"], &[("PATH", "/nonexistent")]);
        assert!(!r.success, "{t}: must fail");
        assert!(r.stdout.is_empty(), "{t}: {:?}", r.stdout);
        assert_eq!(r.stderr.trim_end(), NOT_FOUND, "{t}");
    }
    // … or the override pointing nowhere.
    let r = run_env(
        &["pingpong", "--transport", "redis-stream-tcp", "--iters", "10"],
        &[("SHMBUS_BENCH_REDIS_SERVER", "/nonexistent/redis-server")],
    );
    assert!(!r.success);
    assert_eq!(r.stderr.trim_end(), NOT_FOUND);
}

fn nonempty(p: &Path) -> Vec<u8> {
    let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(!bytes.is_empty(), "{} is empty", p.display());
    bytes
}

/// A fresh output directory under the system temp dir.
fn out_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("shmbus-bench-report-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Checks the files of a `report --quick` in `dir`; returns results.json.
fn check_report(dir: &Path, with_redis: bool) -> Value {
    let results: Value = serde_json::from_slice(&nonempty(&dir.join("results.json"))).expect("results.json is JSON");
    assert_eq!(results["quick"], true);
    assert_eq!(results["failures"], 0, "{results}");
    for key in
        ["machine", "loadavg_start", "loadavg_end", "kinds", "queue_table", "journal", "pool", "fanout", "throughput"]
    {
        assert!(results.get(key).is_some(), "results.json lacks {key}");
    }
    let h2h = results["head_to_head"].as_array().expect("head_to_head is an array");
    let transports: Vec<&str> = h2h.iter().map(|r| r["transport"].as_str().unwrap()).collect();
    for t in ["floor", "futex-floor", "topic", "uds", "pipe", "tcp"] {
        assert!(transports.contains(&t), "head-to-head lacks {t}");
    }
    for t in ["redis-pubsub-tcp", "redis-pubsub-uds"] {
        assert_eq!(transports.contains(&t), with_redis, "{t} in the head-to-head: {transports:?}");
    }
    assert_eq!(transports.contains(&"iceoryx2"), cfg!(feature = "iceoryx2"), "{transports:?}");
    // The async rows: topic and queue awaiting `recv_async`.
    for t in ["topic", "queue"] {
        assert!(h2h.iter().any(|r| r["transport"] == t && r["mode"] == "async"), "no {t} async row: {transports:?}");
    }
    for r in h2h {
        for k in ["size", "p50_ns", "p99_ns", "p999_ns", "max_ns"] {
            assert!(r[k].as_u64().is_some(), "{k} missing in {r}");
        }
        assert!(r["p50_ns"].as_u64() <= r["p99_ns"].as_u64() && r["p99_ns"].as_u64() <= r["p999_ns"].as_u64(), "{r}");
        assert!(r["cdf"].as_array().is_some_and(|c| !c.is_empty()), "{r}");
    }
    let streams = results["redis_streams"].as_array().expect("redis_streams is an array");
    assert_eq!(streams.is_empty(), !with_redis, "{streams:?}");
    assert!(streams.iter().all(|r| r["p50_ns"].as_u64().is_some()), "{streams:?}");
    let sizes: Vec<u64> = h2h.iter().map(|r| r["size"].as_u64().unwrap()).collect();
    for s in [8, 1024, 65536] {
        assert!(sizes.contains(&s), "no {s} B row");
    }
    for section in ["kinds", "queue_table", "journal", "pool", "fanout", "throughput"] {
        let a = results[section].as_array().unwrap_or_else(|| panic!("{section} is not an array"));
        assert!(!a.is_empty(), "{section} is empty");
        assert!(a.iter().all(|o| o.get("error").is_none()), "{section}: {a:?}");
    }
    let md = String::from_utf8(nonempty(&dir.join("summary.md"))).expect("UTF-8");
    assert!(md.starts_with("# shmbus-bench report"), "{md}");
    for needle in [
        "## Head-to-head",
        "| transport | p50 | p99 | p99.9 | ×floor |",
        "`topic block copy`",
        "queue-table",
        "head_to_head_p50.svg",
    ] {
        assert!(md.contains(needle), "summary.md lacks {needle:?}");
    }
    assert_eq!(md.contains("redis-pubsub-uds"), with_redis);
    check_redis_demo(&results, &md, with_redis);
    assert_eq!(md.contains("`redis-stream-tcp block`"), with_redis);
    if md.contains("no TrueType font found") {
        // plotters needs a font for any text; `make test` installs one.
        assert!(
            std::env::var_os("SHMBUS_BENCH_REQUIRE_REDIS").is_none_or(|v| v != "1"),
            "no font for the plots, but make test installs fonts-dejavu-core"
        );
        eprintln!("note: no TrueType font here; the plot files are not checked");
        return results;
    }
    for stem in ["head_to_head_p50", "cdf_1KiB", "cdf_64KiB"] {
        let svg = String::from_utf8(nonempty(&dir.join(format!("{stem}.svg")))).expect("SVG is text");
        assert!(svg.contains("<svg") && svg.trim_end().ends_with("</svg>"), "{stem}.svg is not a whole SVG");
        let png = nonempty(&dir.join(format!("{stem}.png")));
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{stem}.png is not a PNG");
    }
    results
}

/// The Redis half of the report's demo section: `demo-redis` over TCP and UDS for both image
/// sizes, in the per-size tables beside shmbus; or one skip line.
fn check_redis_demo(results: &Value, md: &str, with_redis: bool) {
    let redis = &results["demo"]["redis"];
    if !with_redis {
        assert_eq!(redis["skipped"], NOT_FOUND, "{redis}");
        assert!(md.contains(&format!("Redis skipped: {NOT_FOUND}")), "{md}");
        return;
    }
    let runs = redis["runs"].as_array().expect("demo.redis.runs");
    let mut seen = Vec::new();
    for run in runs {
        assert!(run.get("error").is_none(), "{run}");
        let r = &run["result"];
        seen.push((r["backend"].as_str().unwrap().to_string(), r["image_bytes"].as_u64().unwrap()));
        assert_eq!(r["consumers"].as_array().map(Vec::len), Some(6), "{run}");
        assert_eq!(r["producers"].as_array().map(Vec::len), Some(7), "{run}");
        for c in r["consumers"].as_array().unwrap() {
            assert!(c["view_copy"]["n"].as_u64().is_some_and(|n| n > 0), "{c}");
            assert!(c["view_copy"]["mean_ns"].as_f64().is_some_and(|m| m > 0.0), "{c}");
        }
    }
    let want: Vec<(String, u64)> =
        [6_220_800, 1080].iter().flat_map(|&b| ["redis-tcp", "redis-uds"].map(|t| (t.to_string(), b))).collect();
    assert_eq!(seen, want);
    for needle in [
        "### image 6,220,800 B",
        "### image 1,080 B",
        "| consumer | shmbus view | shmbus view+copy | Redis TCP view+copy | Redis UDS view+copy |",
        "| producer | shmbus write | Redis TCP write | Redis UDS write |",
        "`shmbus-bench demo-redis --transport uds --seconds 0.5 --image-bytes 1080 --json`",
    ] {
        assert!(md.contains(needle), "summary.md lacks {needle:?}");
    }
}

#[test]
fn report_quick_writes_json_markdown_and_plots() {
    let with_redis = redis_on_path("the Redis runs are");
    let dir = out_dir("full");
    let r = run(&["report", "--out", dir.to_str().unwrap(), "--quick"]);
    assert!(r.success, "report failed: {}", r.stderr);
    assert!(r.stdout.is_empty(), "report prints to files only: {:?}", r.stdout);
    let results = check_report(&dir, with_redis);
    assert_eq!(results["skipped"].as_array().map(Vec::len), Some(usize::from(!with_redis)));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn report_without_redis_server_says_so_once_and_skips_only_redis() {
    let dir = out_dir("noredis");
    let r = run_env(
        &["report", "--out", dir.to_str().unwrap(), "--quick"],
        &[("SHMBUS_BENCH_REDIS_SERVER", "/nonexistent/redis-server")],
    );
    assert!(r.success, "report failed: {}", r.stderr);
    assert_eq!(r.stderr.lines().filter(|l| l.contains("redis-server not found")).count(), 1, "{}", r.stderr);
    assert!(r.stderr.lines().any(|l| l == NOT_FOUND), "{}", r.stderr);
    let results = check_report(&dir, false);
    assert_eq!(results["skipped"][0], NOT_FOUND);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(feature = "iceoryx2")]
#[test]
fn iceoryx2_round_trips_with_copy_and_touch() {
    for payload in ["copy", "touch"] {
        for size in ["1", "300000"] {
            let what = format!("iceoryx2 {payload} {size} B");
            let r = run(&[
                "pingpong",
                "--transport",
                "iceoryx2",
                "--payload",
                payload,
                "--size",
                size,
                "--iters",
                "500",
                "--warmup",
                "50",
                "--json",
            ]);
            let obj = one_json(&r, &what);
            assert_eq!(obj["transport"], "iceoryx2");
            assert_eq!(obj["mode"], "spin", "{what}");
            assert_eq!(obj["payload"], payload, "{what}");
            assert_eq!(obj["size"].to_string(), size);
            percentiles_ordered(&obj, &what);
        }
    }
}

#[cfg(feature = "iceoryx2")]
#[test]
fn a_dying_echo_fails_an_iceoryx2_run() {
    let start = Instant::now();
    let r = run(&["pingpong", "--transport", "iceoryx2", "--iters", "1000000", "--echo-exit-after", "50", "--json"]);
    assert!(!r.success, "should fail when the echo dies");
    assert!(r.stdout.is_empty(), "{:?}", r.stdout);
    assert!(r.stderr.contains("echo process exited"), "{:?}", r.stderr);
    assert!(start.elapsed() < Duration::from_secs(60), "took {:?}", start.elapsed());
}
