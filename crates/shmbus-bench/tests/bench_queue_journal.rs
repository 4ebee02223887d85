//! Runs the queue and journal benchmarks of the built `shmbus-bench` briefly: `pingpong
//! --transport queue|journal` in both modes, `queue-table`, and `journal` in every durability
//! mode with one and two appenders. Checks the shape of the output, never speed.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{run_with, Run};

use serde_json::{Map, Value};

const PERCENTILES: &[&str] = &["p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"];
const DEADLINE: Duration = Duration::from_secs(120);

fn run_in(args: &[&str], tmpdir: Option<&PathBuf>) -> Run {
    let dir = tmpdir.map(|d| d.display().to_string());
    let env: Vec<(&str, &str)> = dir.as_deref().map(|d| ("TMPDIR", d)).into_iter().collect();
    run_with(args, &env, DEADLINE)
}

fn run(args: &[&str]) -> Run {
    run_in(args, None)
}

/// Every stdout line as a JSON object.
fn json_lines(args: &[&str], r: &Run) -> Vec<Map<String, Value>> {
    assert!(r.success, "{args:?} failed: {}", r.stderr);
    r.stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {l}"));
            v.as_object().expect("a JSON object").clone()
        })
        .collect()
}

fn u(obj: &Map<String, Value>, key: &str) -> u64 {
    obj.get(key).and_then(Value::as_u64).unwrap_or_else(|| panic!("{key} is not an unsigned integer in {obj:?}"))
}

fn f(obj: &Map<String, Value>, key: &str) -> f64 {
    obj.get(key).and_then(Value::as_f64).unwrap_or_else(|| panic!("{key} is not a number in {obj:?}"))
}

fn assert_percentiles(obj: &Map<String, Value>) {
    let v: Vec<u64> = PERCENTILES.iter().map(|k| u(obj, k)).collect();
    assert!(v[0] > 0, "p50 is zero: {obj:?}");
    assert!(v.windows(2).all(|w| w[0] <= w[1]), "percentiles out of order: {obj:?}");
}

/// A private parent directory for journals, so the test can see that nothing is left.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("shmbus-bench-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn assert_empty_and_remove(d: &PathBuf) {
    let left: Vec<_> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "temporary journals left behind in {}: {left:?}", d.display());
    std::fs::remove_dir(d).unwrap();
}

#[test]
fn queue_and_journal_pingpong_in_both_modes() {
    for t in ["queue", "journal"] {
        for mode in ["spin", "block"] {
            for size in ["1", "64", "5000"] {
                let args = [
                    "pingpong",
                    "--json",
                    "--transport",
                    t,
                    "--mode",
                    mode,
                    "--size",
                    size,
                    "--iters",
                    "300",
                    "--warmup",
                    "50",
                ];
                let r = run(&args);
                let lines = json_lines(&args, &r);
                assert_eq!(lines.len(), 1, "{args:?}: one JSON line expected, got {}", r.stdout);
                let o = &lines[0];
                assert_eq!(o["transport"], t);
                assert_eq!(o["mode"], mode);
                assert_eq!(o["payload"], "copy");
                assert_eq!(u(o, "size"), size.parse::<u64>().unwrap());
                assert_eq!(u(o, "iters"), 300);
                assert_percentiles(o);
            }
        }
    }
}

#[test]
fn queue_table_prints_every_reference_size() {
    let args = ["queue-table", "--messages", "2000", "--json"];
    let r = run(&args);
    let rows = json_lines(&args, &r);
    let sizes: Vec<u64> = rows.iter().map(|o| u(o, "size")).collect();
    assert_eq!(sizes, [16, 128, 256, 1024, 8192, 65536]);
    for o in &rows {
        let expected = if u(o, "size") == 65536 { 200 } else { 2000 };
        assert_eq!(u(o, "messages"), expected, "{o:?}");
        assert_eq!(u(o, "round_trips"), expected / 2);
        assert!(f(o, "wall_s") > 0.0 && f(o, "total_s") >= f(o, "wall_s"), "{o:?}");
        assert!(f(o, "reference_wall_s") > 0.0 && f(o, "speedup") > 0.0, "{o:?}");
        assert!(u(o, "p50_ns") > 0 && u(o, "p50_ns") <= u(o, "p99_ns"), "{o:?}");
    }
    assert_eq!(f(&rows[2], "reference_wall_s"), 0.754);

    // The text table: a header, six rows and the 256 B comparison line.
    let r = run(&["queue-table", "--messages", "2000"]);
    assert!(r.success, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 8, "{}", r.stdout);
    assert!(lines[0].contains("speed-up"), "{}", lines[0]);
    assert!(lines[7].starts_with("256 B:") && lines[7].contains("0.754"), "{}", lines[7]);
}

#[test]
fn journal_reports_latency_and_throughput_for_every_mode_and_appender_count() {
    let dir = scratch("modes");
    let d = dir.to_str().unwrap();
    for mode in ["none", "flush", "periodic"] {
        for appenders in ["1", "2"] {
            // The tailer reads along, or after the appenders are done (both checked once each).
            let tailer = if (mode == "none") == (appenders == "1") { "live" } else { "after" };
            let args = [
                "journal",
                "--json",
                "--size",
                "40",
                "--mode",
                mode,
                "--appenders",
                appenders,
                "--tailer",
                tailer,
                "--iters",
                "200",
                "--warmup",
                "50",
                "--messages",
                "2000",
                "--dir",
                d,
            ];
            let r = run(&args);
            let lines = json_lines(&args, &r);
            assert_eq!(lines.len(), 1, "{args:?}: {}", r.stdout);
            let o = &lines[0];
            assert_eq!(o["transport"], "journal");
            assert_eq!(o["durability"], mode);
            assert_eq!(o["mode"], "spin");
            assert_eq!(o["latency"], "rtt/2");
            assert_eq!(u(o, "size"), 40);
            assert_eq!(u(o, "iters"), 200);
            assert_eq!(u(o, "appenders"), appenders.parse::<u64>().unwrap());
            assert_eq!(u(o, "messages"), 2000);
            assert_percentiles(o);
            assert!(u(o, "msgs_per_s") > 0, "{o:?}");
            assert!(f(o, "mib_per_s") > 0.0, "{o:?}");
            assert_eq!(o["tailer"], tailer);
            // The appenders' own rate is about the end-to-end one or higher (equal with the
            // tailer after). Not strictly: an appender's clock also covers the flush that follows
            // its last commit (mode flush), which the tailer does not wait for.
            assert!(u(o, "append_msgs_per_s") > 0, "{o:?}");
            assert!(u(o, "append_msgs_per_s") as f64 >= 0.5 * u(o, "msgs_per_s") as f64, "{o:?}");
            if tailer == "after" {
                assert_eq!(u(o, "append_msgs_per_s"), u(o, "msgs_per_s"), "{o:?}");
            }
            assert_eq!(o.contains_key("period_ms"), mode == "periodic", "{o:?}");
            // The scratch directory's filesystem, named as the mount table does.
            assert!(o["fs"].as_str().is_some_and(|fs| !fs.is_empty() && fs != "unknown"), "{o:?}");
            for k in ["memcpy_stream_mib_per_s", "memcpy_fresh_mib_per_s", "memcpy_fresh_huge_mib_per_s"] {
                assert!(f(o, k) > 0.0, "{k}: {o:?}");
            }
        }
    }
    assert_empty_and_remove(&dir);
}

#[test]
fn journal_defaults_to_the_reference_sizes_and_blocks_when_asked() {
    let dir = scratch("sizes");
    // Without --dir the journals go to the system temporary directory (TMPDIR).
    let args = ["journal", "--json", "--wait", "block", "--iters", "100", "--warmup", "20", "--messages", "200"];
    let r = run_in(&args, Some(&dir));
    let rows = json_lines(&args, &r);
    let sizes: Vec<u64> = rows.iter().map(|o| u(o, "size")).collect();
    assert_eq!(sizes, [40, 160, 220, 512, 1024, 16384, 32768]);
    for o in &rows {
        assert_eq!(o["mode"], "block");
        assert_percentiles(o);
        assert!(u(o, "msgs_per_s") > 0);
    }
    assert_empty_and_remove(&dir);

    // The text form: one line per size.
    let dir = scratch("text");
    let r = run(&[
        "journal",
        "--size",
        "100",
        "--iters",
        "100",
        "--warmup",
        "20",
        "--messages",
        "200",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert!(r.success, "{}", r.stderr);
    assert_eq!(r.stdout.lines().count(), 1, "{}", r.stdout);
    assert!(r.stdout.contains("msg/s") && r.stdout.contains("MiB/s"), "{}", r.stdout);
    assert_empty_and_remove(&dir);
}

#[test]
fn bad_journal_and_table_input_is_one_line_and_a_failure() {
    for args in [
        &["journal", "--size", "4"][..],
        &["journal", "--appenders", "3"],
        &["journal", "--mode", "sometimes"],
        &["journal", "--iters", "0"],
        &["journal", "--dir", "/nonexistent/shmbus-bench"],
        &["queue-table", "--messages", "1"],
    ] {
        let r = run(args);
        assert!(!r.success, "{args:?} succeeded");
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {}", r.stderr);
        assert!(r.stderr.starts_with("shmbus-bench: error:"), "{args:?}: {}", r.stderr);
    }
}
