//! `rate-grid`, briefly: the shape of its output, never the speed.

use std::process::{Command, Output};
use std::sync::Mutex;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_shmbus-bench");

/// Runs pin processes; one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn run(args: &[&str]) -> Output {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    Command::new(BIN).args(args).output().expect("run shmbus-bench")
}

const KEYS: &[&str] = &[
    "experiment",
    "mode",
    "rate",
    "ring",
    "size_min",
    "size_max",
    "seconds",
    "sent",
    "received",
    "writer_waits",
    "pinned",
    "p50_ns",
    "p90_ns",
    "p99_ns",
    "p999_ns",
    "max_ns",
    "min_ns",
    "mean_ns",
];

#[test]
fn json_is_one_object_per_cell_for_both_modes() {
    let o = run(&["rate-grid", "--rates", "200,1000", "--rings", "4K,1M", "--seconds-per-cell", "0.05", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let cells: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(cells.len(), 2 * 2 * 2, "{text}");
    let mut seen = Vec::new();
    for c in &cells {
        let obj = c.as_object().expect("an object");
        let mut got: Vec<&str> = obj.keys().map(String::as_str).collect();
        let mut want = KEYS.to_vec();
        got.sort_unstable();
        want.sort_unstable();
        assert_eq!(got, want, "{c}");
        assert_eq!(c["experiment"], "rate_grid");
        assert_eq!((c["size_min"].as_u64(), c["size_max"].as_u64()), (Some(20), Some(40)), "{c}");
        let sent = c["sent"].as_u64().unwrap();
        let rate = c["rate"].as_u64().unwrap();
        assert_eq!(sent, (rate as f64 * 0.05).round() as u64, "{c}");
        assert_eq!(c["received"].as_u64(), Some(sent), "{c}");
        let q: Vec<u64> = ["min_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"]
            .iter()
            .map(|k| c[k].as_u64().unwrap())
            .collect();
        assert!(q[0] > 0 && q.windows(2).all(|w| w[0] <= w[1]), "{c}");
        seen.push((c["mode"].as_str().unwrap().to_string(), rate, c["ring"].as_u64().unwrap()));
    }
    for mode in ["spin", "block"] {
        for rate in [200, 1000] {
            for ring in [4096, 1 << 20] {
                assert!(seen.contains(&(mode.to_string(), rate, ring)), "{mode} {rate} {ring} missing: {seen:?}");
            }
        }
    }
}

#[test]
fn text_is_p50_and_p99_tables_per_mode() {
    let o =
        run(&["rate-grid", "--rates", "500", "--rings", "16K,32K", "--seconds-per-cell", "0.02", "--mode", "block"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(text.matches("mode block").count(), 2, "{text}");
    assert!(!text.contains("mode spin"), "{text}");
    assert!(text.contains("p50 µs") && text.contains("p99 µs"), "{text}");
    let header = text.lines().nth(1).unwrap();
    assert_eq!(header.split_whitespace().collect::<Vec<_>>(), ["rate", "16K", "32K"], "{text}");
    let row = text.lines().nth(2).unwrap();
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[0], "500", "{text}");
    assert!(cols[1..].iter().all(|v| v.parse::<f64>().is_ok_and(|x| x > 0.0)), "{text}");
}

#[test]
fn bad_input_is_one_line() {
    for args in [
        &["rate-grid", "--rings", "3K"][..],
        &["rate-grid", "--rings", "1000"],
        &["rate-grid", "--rates", "0"],
        &["rate-grid", "--size", "8"],
        &["rate-grid", "--seconds-per-cell", "0"],
    ] {
        let o = run(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("shmbus-bench: error: "), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn report_quick_has_the_rate_grid_section_and_plot() {
    let dir = std::env::temp_dir().join(format!("shmbus-bench-rate-grid-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Redis plays no part here: skip it so the test needs no server.
    let o = {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        Command::new(BIN)
            .args(["report", "--out", dir.to_str().unwrap(), "--quick"])
            .env("SHMBUS_BENCH_REDIS_SERVER", "/nonexistent/redis-server")
            .output()
            .expect("run report")
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let results: Value = serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    let cells = results["rate_grid"].as_array().expect("rate_grid is an array");
    // --quick: 2 rates × 2 rings × 2 modes.
    assert_eq!(cells.len(), 8, "{cells:?}");
    assert!(cells.iter().all(|c| c.get("error").is_none() && c["p50_ns"].as_u64().is_some()), "{cells:?}");
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    for needle in [
        "## rate-grid: stream one-way latency",
        "### spin: p50 (µs)",
        "### block: p99 (µs)",
        "| msg/s | 4 KiB | 1 MiB |",
    ] {
        assert!(md.contains(needle), "summary.md lacks {needle:?}");
    }
    check_demo(&results, &md);
    if md.contains("rate_grid_p50.svg and rate_grid_p50.png not written") || md.contains("no TrueType font found") {
        eprintln!("note: no font here; the plot files are not checked");
    } else {
        assert!(md.contains("(rate_grid_p50.svg)"), "{md}");
        let svg = std::fs::read_to_string(dir.join("rate_grid_p50.svg")).unwrap();
        assert!(svg.contains("<svg") && svg.trim_end().ends_with("</svg>"));
        let png = std::fs::read(dir.join("rate_grid_p50.png")).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The demo in a report: two runs (6,220,800 B and 1,080 B images) when the `shmbus`
/// binary is next to `shmbus-bench`, else one skip line. These reports run without
/// `redis-server`: the Redis half of the demo is one skip line.
fn check_demo(results: &Value, md: &str) {
    assert!(md.contains("## demo: `shmbus demo`"), "{md}");
    let demo = &results["demo"];
    assert_eq!(demo["redis"]["skipped"], "redis-server not found: skipping the Redis peers", "{demo}");
    assert!(md.contains("Redis skipped: redis-server not found"), "{md}");
    if let Some(skip) = demo.get("skipped") {
        assert!(skip.as_str().unwrap().starts_with("shmbus binary not found"), "{demo}");
        assert!(md.contains("shmbus skipped: shmbus binary not found"), "{md}");
        assert!(!md.contains("### image"), "{md}");
        return;
    }
    let runs = demo["runs"].as_array().expect("demo runs");
    assert_eq!(runs.len(), 2, "{demo}");
    for (run, image) in runs.iter().zip([6_220_800u64, 1080]) {
        assert!(run.get("error").is_none(), "{run}");
        let r = &run["result"];
        assert_eq!(r["image_bytes"].as_u64(), Some(image), "{run}");
        assert_eq!(r["consumers"].as_array().map(Vec::len), Some(6), "{run}");
        assert_eq!(r["producers"].as_array().map(Vec::len), Some(7), "{run}");
        for c in r["consumers"].as_array().unwrap() {
            assert!(c["view"]["n"].as_u64().is_some_and(|n| n > 0), "{c}");
            assert!(c["view_copy"]["p50_ns"].as_u64().is_some(), "{c}");
        }
    }
    assert!(md.contains("| consumer | shmbus view |") && md.contains("| producer | shmbus write |"), "{md}");
    assert!(md.contains("### image 6,220,800 B") && md.contains("--image-bytes 1080"), "{md}");
}

#[test]
fn report_without_a_shmbus_binary_skips_the_demo_in_one_line() {
    let dir = std::env::temp_dir().join(format!("shmbus-bench-rate-grid-nodemo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // A copy of the binary alone in a directory: no `shmbus` beside it. `cp` writes it, so
    // no write descriptor of this process can leak into a child another test thread forks
    // meanwhile (running the copy would then fail with "Text file busy").
    let bin = dir.join("shmbus-bench");
    assert!(Command::new("cp").arg(BIN).arg(&bin).status().unwrap().success());
    let out = dir.join("out");
    let o = {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        Command::new(&bin)
            .args(["report", "--out", out.to_str().unwrap(), "--quick"])
            .env("SHMBUS_BENCH_REDIS_SERVER", "/nonexistent/redis-server")
            .output()
            .expect("run report")
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(err.lines().filter(|l| l.contains("shmbus binary not found")).count(), 1, "{err}");
    let results: Value = serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    assert!(results["demo"]["skipped"].is_string(), "{}", results["demo"]);
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    check_demo(&results, &md);
    std::fs::remove_dir_all(&dir).unwrap();
}
