//! `report --out DIR [--quick]`: the head-to-head against the peers and the existing
//! benchmarks in one run, written as `results.json`, `summary.md` and plots (SVG and PNG).
//!
//! * **Head-to-head** (in this process, through the ping-pong driver, each run on the same
//!   CPU pair): shmbus topic (spin and block, copy and touch) against Unix sockets, pipes,
//!   loopback TCP, Redis pub/sub (TCP and Unix socket) and, built with the `iceoryx2` feature,
//!   iceoryx2 publish-subscribe (spin; copy and touch), with the spin and futex floors as
//!   the yardsticks, for 8 B, 1 KiB, 64 KiB, 1 MiB and 6 MiB. One-way latency = RTT/2.
//! * **Redis streams** (TCP and Unix socket) at the same sizes, in their own table.
//! * **Kinds**: every shmbus kind (topic, stream, queue, journal) at 64 B, spin and block.
//! * **Demo (seed 000)**: `shmbus demo` (the `shmbus` binary next to this one) and the same
//!   profile over Redis streams (`demo-redis --transport tcp|uds`), each with 6,220,800 B and
//!   1,080 B images; summary.md gets one table per image size with a column per backend.
//! * **The other subcommands** (`queue-table`, `journal`, `pool`, `fanout`, `rate-grid`,
//!   `throughput`) run
//!   as child processes of this binary with `--json`; their objects go into `results.json`
//!   as printed.
//!
//! A failing run is recorded (`"error"`) and the rest goes on; the command then exits
//! non-zero after writing everything. Without `redis-server` the Redis rows are skipped with
//! one line on stderr (and a note in the results), and the command still succeeds.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::cpus::CpuSet;
use crate::driver;
use crate::plots;
use crate::report::Summary;
use crate::transports::{self, redis, Mode, Params, Payload};

/// The command line of `report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Directory for results.json, summary.md and the plots (created if missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Every path briefly (tiny iteration counts, sizes up to 64 KiB): for tests, not numbers.
    #[arg(long)]
    quick: bool,
}

/// The head-to-head sizes.
pub const SIZES: &[usize] = &[8, 1024, 65536, 1 << 20, 6 << 20];
/// `--quick` drops the two largest.
const QUICK_SIZES: &[usize] = &[8, 1024, 65536];

/// One row of the head-to-head: a transport in a mode with a payload handling.
#[derive(Debug, Clone, Copy)]
struct Contender {
    transport: &'static str,
    mode: Mode,
    payload: Payload,
}

impl Contender {
    fn label(&self) -> String {
        let t = self.transport;
        if transports::by_name(t).is_some_and(|tr| tr.payload(Payload::Touch) == Payload::Touch) {
            format!("{t} {} {}", self.mode.as_str(), self.payload.as_str())
        } else {
            format!("{t} {}", self.mode.as_str())
        }
    }

    fn is_floor(&self) -> bool {
        self.transport.ends_with("floor")
    }
}

const fn c(transport: &'static str, mode: Mode, payload: Payload) -> Contender {
    Contender { transport, mode, payload }
}

/// The head-to-head rows, floors first.
const CONTENDERS: &[Contender] = &[
    c("floor", Mode::Spin, Payload::Copy),
    c("floor", Mode::Spin, Payload::Touch),
    c("futex-floor", Mode::Block, Payload::Copy),
    c("futex-floor", Mode::Block, Payload::Touch),
    c("topic", Mode::Spin, Payload::Copy),
    c("topic", Mode::Spin, Payload::Touch),
    c("topic", Mode::Block, Payload::Copy),
    c("topic", Mode::Block, Payload::Touch),
    #[cfg(feature = "iceoryx2")]
    c("iceoryx2", Mode::Spin, Payload::Copy),
    #[cfg(feature = "iceoryx2")]
    c("iceoryx2", Mode::Spin, Payload::Touch),
    c("uds", Mode::Block, Payload::Copy),
    c("pipe", Mode::Block, Payload::Copy),
    c("tcp", Mode::Block, Payload::Copy),
    c("redis-pubsub-tcp", Mode::Block, Payload::Copy),
    c("redis-pubsub-uds", Mode::Block, Payload::Copy),
];

/// Redis streams (`XADD` / `XREAD BLOCK`), beside the head-to-head at the same sizes.
const REDIS_STREAMS: &[Contender] =
    &[c("redis-stream-tcp", Mode::Block, Payload::Copy), c("redis-stream-uds", Mode::Block, Payload::Copy)];

/// The kinds table: every shmbus kind at 64 B.
const KINDS: &[&str] = &["topic", "stream", "queue", "journal"];

/// Recorded round trips for a size.
fn iters_for(size: usize, quick: bool) -> u64 {
    if quick {
        return 200;
    }
    match size {
        0..=4096 => 20_000,
        4097..=65536 => 5_000,
        65537..=1_048_576 => 500,
        _ => 200,
    }
}

/// Quantiles at which the latency CDF is kept for the plots.
const CDF_QUANTILES: &[f64] =
    &[0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9999, 1.0];

/// What a successful ping-pong measured.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Percentiles (ns).
    pub summary: Summary,
    /// Whether the two processes were pinned.
    pub pinned: bool,
    /// (quantile, ns) points of the latency CDF.
    pub cdf: Vec<(f64, u64)>,
}

/// One measured (or failed) ping-pong.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Row label.
    pub label: String,
    /// The transport's name.
    pub transport: String,
    /// Whether this is a floor (yardstick) row.
    pub floor: bool,
    /// Mode that ran.
    pub mode: Mode,
    /// Payload handling that ran.
    pub payload: Payload,
    /// Message size.
    pub size: usize,
    /// Recorded round trips.
    pub iters: u64,
    /// The result, or the one-line error.
    pub result: Result<Stats, String>,
}

impl Measured {
    /// The median one-way latency, when the run succeeded.
    pub fn p50(&self) -> Option<u64> {
        self.result.as_ref().ok().map(|r| r.summary.p50)
    }

    fn to_json(&self) -> Value {
        let mut v = json!({
            "label": self.label,
            "transport": self.transport,
            "mode": self.mode.as_str(),
            "payload": self.payload.as_str(),
            "size": self.size,
            "iters": self.iters,
        });
        let o = v.as_object_mut().expect("an object");
        match &self.result {
            Ok(Stats { summary: s, pinned, cdf }) => {
                o.insert("pinned".into(), json!(pinned));
                for (k, x) in [
                    ("p50_ns", s.p50),
                    ("p90_ns", s.p90),
                    ("p99_ns", s.p99),
                    ("p999_ns", s.p999),
                    ("max_ns", s.max),
                    ("min_ns", s.min),
                    ("mean_ns", s.mean),
                ] {
                    o.insert(k.into(), json!(x));
                }
                o.insert("cdf".into(), json!(cdf.iter().map(|(q, ns)| json!([q, ns])).collect::<Vec<_>>()));
            }
            Err(e) => {
                o.insert("error".into(), json!(e));
            }
        }
        v
    }
}

fn measure(cpu_set: &CpuSet, c: Contender, size: usize, quick: bool) -> Measured {
    let iters = iters_for(size, quick);
    let warmup = if quick { 20 } else { (iters / 10).clamp(20, 2000) };
    let result = (|| {
        let t = transports::by_name(c.transport).ok_or_else(|| format!("unknown transport {}", c.transport))?;
        cpu_set.restore()?;
        let (mode, payload) = driver::effective(t, Some(c.mode), c.payload);
        let o = driver::run(driver::Config {
            transport: t,
            params: Params { size, mode, payload },
            iters,
            warmup,
            timeout: Duration::from_secs(30),
            echo_exit_after: None,
        })?;
        let cdf = CDF_QUANTILES.iter().map(|&q| (q, o.hist.value_at_quantile(q))).collect();
        Ok(Stats { summary: Summary::of(&o), pinned: o.cpus.is_some(), cdf })
    })();
    if let Err(e) = &result {
        eprintln!("shmbus-bench: report: {} {} B failed: {e}", c.label(), size);
    }
    Measured {
        label: c.label(),
        transport: c.transport.to_string(),
        floor: c.is_floor(),
        mode: c.mode,
        payload: c.payload,
        size,
        iters,
        result,
    }
}

/// Runs this binary with `args` (which end in `--json`) and parses every stdout line.
fn child_json(args: &[String]) -> Result<Vec<Value>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let out = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!("{} failed ({})", args.join(" "), out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| format!("{}: not JSON ({e}): {l}", args.join(" "))))
        .collect()
}

/// One section of child runs: a name, and the argument lists.
fn sections(quick: bool) -> Vec<(&'static str, Vec<Vec<String>>)> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).chain(["--json".to_string()]).collect::<Vec<_>>();
    let q = quick;
    vec![
        ("queue_table", vec![s(&["queue-table", "--messages", if q { "2000" } else { "200000" }])]),
        (
            "journal",
            vec![s(&[
                "journal",
                "--mode",
                "none",
                "--iters",
                if q { "200" } else { "5000" },
                "--warmup",
                if q { "20" } else { "500" },
                "--messages",
                if q { "500" } else { "50000" },
            ])],
        ),
        (
            "pool",
            [("2", "3"), ("3", "3"), ("5", "3"), ("6", "6")]
                .iter()
                .map(|(j, w)| s(&["pool", "--jobs", j, "--workers", w, "--rounds", if q { "20" } else { "1000" }]))
                .collect(),
        ),
        (
            "fanout",
            ["1", "8"]
                .iter()
                .map(|k| s(&["fanout", "--subscribers", k, "--iters", if q { "500" } else { "50000" }]))
                .collect(),
        ),
        (
            "rate_grid",
            vec![if q {
                s(&["rate-grid", "--rates", "100,1000", "--rings", "4K,1M", "--seconds-per-cell", "0.1"])
            } else {
                s(&["rate-grid"])
            }],
        ),
        (
            "throughput",
            vec![s(&[
                "throughput",
                "--size",
                "65536",
                "--bytes",
                if q { "16777216" } else { "1073741824" },
                "--memcpy-millis",
                if q { "20" } else { "300" },
            ])],
        ),
    ]
}

fn read_trim(p: &str) -> String {
    std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default()
}

fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let redis_version = redis::server_binary()
        .and_then(|b| Command::new(b).arg("--version").output().ok())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    json!({
        "cpu_model": model,
        "cpus_allowed": crate::affinity::allowed_cpus().map(|c| c.len()).unwrap_or(0),
        "kernel": read_trim("/proc/sys/kernel/osrelease"),
        "redis_server": redis_version,
    })
}

fn loadavg() -> String {
    read_trim("/proc/loadavg").split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

/// `report`: runs everything and writes the files. Errors are one line.
pub fn run(a: ReportArgs) -> Result<(), String> {
    let started = Instant::now();
    std::fs::create_dir_all(&a.out).map_err(|e| format!("cannot create {}: {e}", a.out.display()))?;
    let cpu_set = CpuSet::current()?;
    let load_start = loadavg();
    let sizes = if a.quick { QUICK_SIZES } else { SIZES };
    let mut skipped = Vec::new();
    let redis_ok = redis::available();
    if !redis_ok {
        eprintln!("{}", redis::NOT_FOUND);
        skipped.push(redis::NOT_FOUND.to_string());
    }
    let mut failures = 0usize;

    let mut h2h = Vec::new();
    for &size in sizes {
        for &c in CONTENDERS {
            if redis::is_redis(c.transport) && !redis_ok {
                continue;
            }
            let m = measure(&cpu_set, c, size, a.quick);
            failures += usize::from(m.result.is_err());
            h2h.push(m);
        }
    }
    let mut streams = Vec::new();
    if redis_ok {
        for &size in sizes {
            for &c in REDIS_STREAMS {
                let m = measure(&cpu_set, c, size, a.quick);
                failures += usize::from(m.result.is_err());
                streams.push(m);
            }
        }
    }
    let mut kinds = Vec::new();
    for &t in KINDS {
        for mode in [Mode::Spin, Mode::Block] {
            let m = measure(&cpu_set, c(t, mode, Payload::Copy), 64, a.quick);
            failures += usize::from(m.result.is_err());
            kinds.push(m);
        }
    }
    cpu_set.restore()?;

    let mut others = serde_json::Map::new();
    for (name, runs) in sections(a.quick) {
        let mut objs = Vec::new();
        for args in runs {
            match child_json(&args) {
                Ok(v) => objs.extend(v),
                Err(e) => {
                    eprintln!("shmbus-bench: report: {e}");
                    failures += 1;
                    objs.push(json!({"args": args, "error": e}));
                }
            }
        }
        others.insert(name.to_string(), Value::Array(objs));
    }

    let demo = demo_runs(a.quick, redis_ok, &mut failures);

    let load_end = loadavg();
    let mut results = json!({
        "quick": a.quick,
        "machine": machine(),
        "loadavg_start": load_start,
        "loadavg_end": load_end,
        "seconds": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        "skipped": skipped,
        "failures": failures,
        "head_to_head": h2h.iter().map(Measured::to_json).collect::<Vec<_>>(),
        "redis_streams": streams.iter().map(Measured::to_json).collect::<Vec<_>>(),
        "kinds": kinds.iter().map(Measured::to_json).collect::<Vec<_>>(),
        "demo": demo,
    });
    results.as_object_mut().expect("an object").extend(others);

    let json_path = a.out.join("results.json");
    let text = serde_json::to_string_pretty(&results).expect("JSON values serialize");
    std::fs::write(&json_path, text + "\n").map_err(|e| format!("cannot write {}: {e}", json_path.display()))?;

    let plot_files = plots::write_all(&a.out, &h2h, sizes);
    let grid_cells = results["rate_grid"].as_array().cloned().unwrap_or_default();
    let grid_plot = plots::rate_grid(&a.out, &grid_cells);
    let md = summary(&results, &h2h, &streams, &kinds, sizes, &plot_files);
    let md = md + &rate_grid_section(&grid_cells, &grid_plot) + &demo_section(&results["demo"]);
    let md_path = a.out.join("summary.md");
    std::fs::write(&md_path, md).map_err(|e| format!("cannot write {}: {e}", md_path.display()))?;
    let mut written = vec![json_path, md_path];
    written.extend(plot_files.iter().chain([&grid_plot]).flat_map(|p| p.files.iter().cloned()));
    for p in &written {
        eprintln!("shmbus-bench: report: wrote {}", p.display());
    }
    if failures > 0 {
        return Err(format!("{failures} benchmark run(s) failed; see results.json"));
    }
    Ok(())
}

/// "8 B", "1 KiB", "6 MiB".
pub fn size_label(b: usize) -> String {
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{} MiB", b >> 20)
    } else if b >= 1024 && b % 1024 == 0 {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// Nanoseconds, readably: "850 ns", "12.3 µs", "4.56 ms".
pub fn ns_label(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", f / 1e3)
    } else {
        format!("{:.2} ms", f / 1e6)
    }
}

fn ratio(a: u64, b: Option<u64>) -> String {
    match b {
        Some(b) if b > 0 => {
            let r = a as f64 / b as f64;
            if r < 0.1 {
                format!("{r:.3}×")
            } else {
                format!("{r:.2}×")
            }
        }
        _ => "–".into(),
    }
}

fn md_table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(out, "|{}|", header.iter().map(|_| "---").collect::<Vec<_>>().join("|"));
    for r in rows {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
    out.push('\n');
}

fn cell(v: &Value) -> String {
    match v {
        Value::Null => "–".into(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => format!("{f:.3}"),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// A table of the chosen keys of each object (errors on their own row).
fn objects_table(out: &mut String, objs: &[Value], keys: &[&str]) {
    let rows: Vec<Vec<String>> = objs
        .iter()
        .map(|o| match o.get("error") {
            Some(e) => {
                let mut r = vec![format!("error: {}", cell(e))];
                r.resize(keys.len(), String::new());
                r
            }
            None => keys.iter().map(|k| cell(o.get(*k).unwrap_or(&Value::Null))).collect(),
        })
        .collect();
    md_table(out, keys, &rows);
}

fn summary(
    results: &Value,
    h2h: &[Measured],
    streams: &[Measured],
    kinds: &[Measured],
    sizes: &[usize],
    plots: &[plots::Plot],
) -> String {
    let mut s = String::new();
    let m = &results["machine"];
    let _ =
        writeln!(s, "# shmbus-bench report{}\n", if results["quick"] == true { " (--quick: not numbers)" } else { "" });
    let _ = writeln!(
        s,
        "Machine: {} ({} CPUs allowed), Linux {}; {}. Load average (1, 5, 15 min) at start {}, at end {}. \
         {} s in all.\n",
        cell(&m["cpu_model"]),
        cell(&m["cpus_allowed"]),
        cell(&m["kernel"]),
        m["redis_server"].as_str().unwrap_or("no redis-server"),
        cell(&results["loadavg_start"]),
        cell(&results["loadavg_end"]),
        cell(&results["seconds"]),
    );
    for skip in results["skipped"].as_array().into_iter().flatten() {
        let _ = writeln!(s, "Skipped: {}\n", cell(skip));
    }
    let _ = writeln!(
        s,
        "## Head-to-head: one-way latency (RTT/2)\n\n\
         Two processes pinned to two CPUs, ping-pong through the same driver for every row. `×floor`: \
         p50 over the floor of the same size, mode and payload handling (spin rows: the spin \
         floor; block rows: the futex floor). `×topic`: p50 over shmbus topic in the same mode with copy (below 1 it is \
         faster than the topic). Redis always blocks; its server is a third, unpinned process.\n"
    );
    let p50_of =
        |label: &str, size: usize| h2h.iter().find(|x| x.label == label && x.size == size).and_then(Measured::p50);
    // The yardstick of a row: the floor of its mode with its payload handling, and the
    // topic of its mode with copy.
    let floor_of = |x: &Measured| {
        let t = if x.mode == Mode::Spin { "floor" } else { "futex-floor" };
        h2h.iter().find(|f| f.transport == t && f.payload == x.payload && f.size == x.size).and_then(Measured::p50)
    };
    let topic_of = |x: &Measured| {
        h2h.iter()
            .find(|f| f.transport == "topic" && f.mode == x.mode && f.payload == Payload::Copy && f.size == x.size)
            .and_then(Measured::p50)
    };
    for &size in sizes {
        let _ = writeln!(s, "### {}\n", size_label(size));
        let rows: Vec<Vec<String>> = h2h
            .iter()
            .filter(|x| x.size == size)
            .map(|x| match &x.result {
                Ok(Stats { summary: sm, .. }) => {
                    vec![
                        format!("`{}`", x.label),
                        ns_label(sm.p50),
                        ns_label(sm.p99),
                        ns_label(sm.p999),
                        if x.floor { "–".into() } else { ratio(sm.p50, floor_of(x)) },
                        if x.floor { "–".into() } else { ratio(sm.p50, topic_of(x)) },
                        x.iters.to_string(),
                    ]
                }
                Err(e) => vec![
                    format!("`{}`", x.label),
                    format!("error: {e}"),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    x.iters.to_string(),
                ],
            })
            .collect();
        md_table(&mut s, &["transport", "p50", "p99", "p99.9", "×floor", "×topic", "round trips"], &rows);
    }
    let _ = writeln!(s, "### p50 by size (ns)\n");
    let mut labels: Vec<String> = Vec::new();
    for x in h2h {
        if !labels.contains(&x.label) {
            labels.push(x.label.clone());
        }
    }
    let mut header = vec!["transport".to_string()];
    header.extend(sizes.iter().map(|&b| size_label(b)));
    let rows: Vec<Vec<String>> = labels
        .iter()
        .map(|l| {
            let mut r = vec![format!("`{l}`")];
            r.extend(sizes.iter().map(|&b| p50_of(l, b).map_or("–".into(), |v| v.to_string())));
            r
        })
        .collect();
    md_table(&mut s, &header.iter().map(String::as_str).collect::<Vec<_>>(), &rows);
    for p in plots {
        for f in &p.files {
            if f.extension().is_some_and(|e| e == "svg") {
                let name = f.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
                let _ = writeln!(s, "![{}]({name})\n", p.title);
            }
        }
        if let Some(note) = &p.note {
            let _ = writeln!(s, "{note}\n");
        }
    }

    if !streams.is_empty() {
        let _ = writeln!(
            s,
            "## Redis streams (XADD, XREAD BLOCK), one-way (RTT/2)\n\n`×topic`: p50 over shmbus topic block copy of the same size.\n"
        );
        let rows: Vec<Vec<String>> = streams
            .iter()
            .map(|x| match &x.result {
                Ok(Stats { summary: sm, .. }) => vec![
                    format!("`{}`", x.label),
                    size_label(x.size),
                    ns_label(sm.p50),
                    ns_label(sm.p99),
                    ns_label(sm.p999),
                    ratio(sm.p50, topic_of(x)),
                ],
                Err(e) => vec![
                    format!("`{}`", x.label),
                    size_label(x.size),
                    format!("error: {e}"),
                    String::new(),
                    String::new(),
                    String::new(),
                ],
            })
            .collect();
        md_table(&mut s, &["transport", "size", "p50", "p99", "p99.9", "×topic"], &rows);
    }
    let _ = writeln!(s, "## shmbus kinds at 64 B (one-way, RTT/2)\n");
    let rows: Vec<Vec<String>> = kinds
        .iter()
        .map(|x| match &x.result {
            Ok(Stats { summary: sm, .. }) => {
                vec![format!("`{}`", x.label), ns_label(sm.p50), ns_label(sm.p99), ns_label(sm.p999)]
            }
            Err(e) => vec![format!("`{}`", x.label), format!("error: {e}"), String::new(), String::new()],
        })
        .collect();
    md_table(&mut s, &["kind", "p50", "p99", "p99.9"], &rows);

    let empty = Vec::new();
    let section = |k: &str| results[k].as_array().unwrap_or(&empty).clone();
    let _ = writeln!(s, "## queue-table (seed 004)\n");
    objects_table(
        &mut s,
        &section("queue_table"),
        &[
            "size",
            "messages",
            "p50_ns",
            "p99_ns",
            "wall_s_per_2m",
            "p50_s_per_2m",
            "seed_wall_s",
            "speedup_p50",
            "floor_p50_ns",
        ],
    );
    let _ = writeln!(s, "## journal (seed 002), durability none\n");
    objects_table(
        &mut s,
        &section("journal"),
        &["size", "fs", "p50_ns", "p99_ns", "p999_ns", "msgs_per_s", "mib_per_s", "floor_p50_ns"],
    );
    let _ = writeln!(s, "## pool (seed 003): enqueue → recv, shmbus pool vs crossbeam threads\n");
    let pool_rows: Vec<Value> = section("pool")
        .iter()
        .map(|o| {
            if o.get("error").is_some() {
                return o.clone();
            }
            json!({
                "jobs/workers": format!("{}/{}", cell(&o["jobs"]), cell(&o["workers"])),
                "mode": o["mode"],
                "pool p50_ns": o["pool"]["p50_ns"], "pool p99_ns": o["pool"]["p99_ns"],
                "crossbeam p50_ns": o["crossbeam"]["p50_ns"], "crossbeam p99_ns": o["crossbeam"]["p99_ns"],
                "returned": o["pool"]["returned"],
            })
        })
        .collect();
    objects_table(
        &mut s,
        &pool_rows,
        &["jobs/workers", "mode", "pool p50_ns", "pool p99_ns", "crossbeam p50_ns", "crossbeam p99_ns", "returned"],
    );
    let _ = writeln!(s, "## fanout: ns per publish with K subscriber processes\n");
    objects_table(
        &mut s,
        &section("fanout"),
        &["subscribers", "size", "p50_ns", "p99_ns", "clock_ns", "received_min", "lagged"],
    );
    let _ = writeln!(s, "## stream throughput vs memcpy\n");
    objects_table(
        &mut s,
        &section("throughput"),
        &[
            "size",
            "capacity",
            "mb_per_s",
            "memcpy_mb_per_s",
            "ratio",
            "copy_floor_mb_per_s",
            "x_copy_floor",
            "floor_p50_ns",
        ],
    );
    s
}

/// The seed 001 section: per mode, p50 and p99 (µs) by rate (rows) and ring (columns), and
/// the plot.
fn rate_grid_section(cells: &[Value], plot: &plots::Plot) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## rate-grid (seed 001): stream one-way latency vs message rate and ring size\n\n\
         20–40 B records paced by absolute deadlines; each carries its CLOCK_MONOTONIC send time and the \
         reader process (other CPU) records now − sent. µs; rows: msg/s, columns: ring.\n"
    );
    for c in cells.iter().filter(|c| c.get("error").is_some()) {
        let _ = writeln!(s, "error: {}\n", cell(&c["error"]));
    }
    let ok: Vec<&Value> = cells.iter().filter(|c| c.get("error").is_none()).collect();
    let mut rates: Vec<u64> = ok.iter().filter_map(|c| c["rate"].as_u64()).collect();
    rates.sort_unstable();
    rates.dedup();
    let mut rings: Vec<u64> = ok.iter().filter_map(|c| c["ring"].as_u64()).collect();
    rings.sort_unstable();
    rings.dedup();
    for mode in ["spin", "block"] {
        if !ok.iter().any(|c| c["mode"] == mode) {
            continue;
        }
        for (name, key) in [("p50", "p50_ns"), ("p99", "p99_ns")] {
            let _ = writeln!(s, "### {mode}: {name} (µs)\n");
            let mut header = vec!["msg/s".to_string()];
            header.extend(rings.iter().map(|&r| size_label(r as usize)));
            let rows: Vec<Vec<String>> = rates
                .iter()
                .map(|&rate| {
                    let mut row = vec![rate.to_string()];
                    row.extend(rings.iter().map(|&ring| {
                        ok.iter()
                            .find(|c| c["mode"] == mode && c["rate"] == rate && c["ring"] == ring)
                            .and_then(|c| c[key].as_u64())
                            .map_or("–".into(), |ns| format!("{:.1}", ns as f64 / 1e3))
                    }));
                    row
                })
                .collect();
            md_table(&mut s, &header.iter().map(String::as_str).collect::<Vec<_>>(), &rows);
        }
    }
    for f in &plot.files {
        if f.extension().is_some_and(|e| e == "svg") {
            let name = f.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
            let _ = writeln!(s, "![{}]({name})\n", plot.title);
        }
    }
    if let Some(note) = &plot.note {
        let _ = writeln!(s, "{note}\n");
    }
    s
}

/// The `shmbus` binary next to this one (same target directory), if built.
fn shmbus_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.join("shmbus");
    p.is_file().then_some(p)
}

/// The demo's image sizes: the seed's full-HD frame and its small-message run.
const DEMO_IMAGES: &[&str] = &["6220800", "1080"];

/// Seed 000's demo profile through `shmbus demo --seconds S --image-bytes B --json`, and
/// over Redis streams through `demo-redis --transport tcp|uds …`, with the seed's
/// 6,220,800 B images and with 1,080 B ones: `{"runs": [...], "redis": {"runs": [...]}}`.
/// Either part is `{"skipped": "…"}` instead when its binary (`shmbus` next to this one,
/// `redis-server`) is missing; the missing `redis-server` was announced already.
fn demo_runs(quick: bool, redis_ok: bool, failures: &mut usize) -> Value {
    let seconds = if quick { "0.5" } else { "10" };
    let mut demo = match shmbus_binary() {
        None => {
            let line = "shmbus binary not found next to shmbus-bench: skipping the demo (seed 000); \
                        build it with `cargo build -p shmbus-cli` (same profile)";
            eprintln!("shmbus-bench: report: {line}");
            json!({ "skipped": line })
        }
        Some(bin) => {
            let mut runs = Vec::new();
            for &image in DEMO_IMAGES {
                let args = ["demo", "--seconds", seconds, "--image-bytes", image, "--json"];
                let what = format!("shmbus {}", args.join(" "));
                let r = Command::new(&bin)
                    .args(args)
                    .stdin(Stdio::null())
                    .stderr(Stdio::inherit())
                    .output()
                    .map_err(|e| format!("cannot run {what}: {e}"))
                    .and_then(|o| {
                        if !o.status.success() {
                            return Err(format!("{what} failed ({})", o.status));
                        }
                        serde_json::from_slice::<Value>(&o.stdout).map_err(|e| format!("{what}: not JSON ({e})"))
                    });
                runs.push(demo_run(&args, r, failures));
            }
            json!({ "runs": runs })
        }
    };
    demo["redis"] = if redis_ok {
        let mut runs = Vec::new();
        for &image in DEMO_IMAGES {
            for via in ["tcp", "uds"] {
                let args = ["demo-redis", "--transport", via, "--seconds", seconds, "--image-bytes", image, "--json"];
                let owned: Vec<String> = args.iter().map(|a| a.to_string()).collect();
                let r = child_json(&owned).and_then(|mut v| match (v.pop(), v.is_empty()) {
                    (Some(obj), true) => Ok(obj),
                    _ => Err(format!("{}: expected one JSON line", args.join(" "))),
                });
                runs.push(demo_run(&args, r, failures));
            }
        }
        json!({ "runs": runs })
    } else {
        json!({ "skipped": redis::NOT_FOUND })
    };
    demo
}

/// One demo run in results.json: its arguments and its result or error.
fn demo_run(args: &[&str], r: Result<Value, String>, failures: &mut usize) -> Value {
    match r {
        Ok(v) => json!({ "args": args, "result": v }),
        Err(e) => {
            eprintln!("shmbus-bench: report: {e}");
            *failures += 1;
            json!({ "args": args, "error": e })
        }
    }
}

/// A demo latency summary as "mean / p99", each in its own unit ("158.6 µs / 2.53 ms").
fn mean_p99(v: &Value) -> String {
    match (v["n"].as_u64(), v["mean_ns"].as_f64(), v["p99_ns"].as_u64()) {
        (Some(n), Some(mean), Some(p99)) if n > 0 => format!("{} / {}", ns_label(mean.round() as u64), ns_label(p99)),
        _ => "–".into(),
    }
}

/// The seed 000 section: per image size one table of the consumers (view and view+copy) and
/// one of the producers (write), with a column per backend (shmbus, Redis TCP, Redis UDS),
/// as the seed's profile compares babus with Redis.
fn demo_section(demo: &Value) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## demo (seed 000): `shmbus demo` against Redis streams (`shmbus-bench demo-redis`)\n");
    let _ = writeln!(
        s,
        "imu 1 kHz (64 B), image 30 Hz, med01..med05 40–44 Hz (2 KiB), 13 processes; latency from the \
         producer's `CLOCK_MONOTONIC` timestamp to the message in hand, mean / p99. shmbus: \
         view = pinned sample in hand, view+copy = payload copied out. Redis (`XADD` / `XREAD BLOCK`, \
         the harness's own `redis-server`): one number, since a socket client has the payload only \
         once it has read (copied) it into its buffer; write = the `XADD` round trip.\n"
    );
    // (backend, column title, its runs or why there are none)
    let redis = &demo["redis"];
    let backends: [(&str, &str, &Value); 3] =
        [("shmbus", "shmbus", demo), ("redis-tcp", "Redis TCP", redis), ("redis-uds", "Redis UDS", redis)];
    for (what, part) in [("shmbus", demo), ("Redis", redis)] {
        if let Some(skip) = part.get("skipped") {
            let _ = writeln!(s, "{what} skipped: {}\n", cell(skip));
        }
    }
    let run_of = |backend: &str, image: &str, part: &Value| -> Option<Value> {
        part["runs"].as_array()?.iter().find_map(|r| {
            let args: Vec<&str> = r["args"].as_array()?.iter().filter_map(Value::as_str).collect();
            let via = args.iter().position(|&a| a == "--transport").and_then(|i| args.get(i + 1));
            let this = match via {
                Some(v) => format!("redis-{v}"),
                None => "shmbus".into(),
            };
            let img = args.iter().position(|&a| a == "--image-bytes").and_then(|i| args.get(i + 1));
            (this == backend && img == Some(&image)).then(|| r.clone())
        })
    };
    for &image in DEMO_IMAGES {
        let bytes: usize = image.parse().unwrap_or(0);
        let runs: Vec<Option<Value>> = backends.iter().map(|(b, _, part)| run_of(b, image, part)).collect();
        if runs.iter().all(Option::is_none) {
            continue;
        }
        let _ = writeln!(s, "### image {} B\n", group_digits(bytes));
        for run in runs.iter().flatten() {
            let args: Vec<&str> = run["args"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let bin = if args.first() == Some(&"demo") { "shmbus" } else { "shmbus-bench" };
            match run.get("error") {
                Some(e) => {
                    let _ = writeln!(s, "* `{bin} {}`: error: {}", args.join(" "), cell(e));
                }
                None => {
                    let _ = writeln!(s, "* `{bin} {}`", args.join(" "));
                }
            }
        }
        let _ = writeln!(s);
        let results: Vec<Option<&Value>> = runs.iter().map(|r| r.as_ref().and_then(|r| r.get("result"))).collect();
        let shmbus = results[0];
        let find = |r: Option<&Value>, list: &str, name: &str| -> Value {
            r.and_then(|r| r[list].as_array())
                .and_then(|a| a.iter().find(|c| c["name"] == name))
                .cloned()
                .unwrap_or(Value::Null)
        };
        // Names in the order of the first result that has them.
        let names = |list: &str| -> Vec<String> {
            results
                .iter()
                .flatten()
                .find_map(|r| r[list].as_array())
                .into_iter()
                .flatten()
                .filter_map(|c| c["name"].as_str().map(str::to_string))
                .collect()
        };
        let per_backend = |f: &dyn Fn(&Value) -> String, list: &str, name: &str| -> String {
            results.iter().map(|r| f(&find(*r, list, name))).collect::<Vec<_>>().join(" / ")
        };
        let count =
            |v: &Value| v["view"]["n"].as_u64().or(v["write"]["n"].as_u64()).map_or("–".into(), |n| n.to_string());
        let gaps = |v: &Value| v["gaps"].as_u64().map_or("–".into(), |n| n.to_string());
        let rows: Vec<Vec<String>> = names("consumers")
            .iter()
            .map(|name| {
                let mut row = vec![format!("`{name}`")];
                let c = find(shmbus, "consumers", name);
                row.push(mean_p99(&c["view"]));
                row.push(mean_p99(&c["view_copy"]));
                for r in &results[1..] {
                    row.push(mean_p99(&find(*r, "consumers", name)["view_copy"]));
                }
                row.push(per_backend(&count, "consumers", name));
                row.push(per_backend(&gaps, "consumers", name));
                row
            })
            .collect();
        let titles: Vec<&str> = backends.iter().map(|b| b.1).collect();
        md_table(
            &mut s,
            &[
                "consumer",
                "shmbus view",
                "shmbus view+copy",
                "Redis TCP view+copy",
                "Redis UDS view+copy",
                &format!("n ({})", titles.join(" / ")),
                &format!("gaps ({})", titles.join(" / ")),
            ],
            &rows,
        );
        let rows: Vec<Vec<String>> = names("producers")
            .iter()
            .map(|name| {
                let mut row = vec![format!("`{name}`")];
                for r in &results {
                    row.push(mean_p99(&find(*r, "producers", name)["write"]));
                }
                row.push(per_backend(&count, "producers", name));
                row
            })
            .collect();
        md_table(
            &mut s,
            &["producer", "shmbus write", "Redis TCP write", "Redis UDS write", &format!("n ({})", titles.join(" / "))],
            &rows,
        );
    }
    s
}

/// 6220800 → "6,220,800".
fn group_digits(n: usize) -> String {
    let d = n.to_string();
    let mut out = String::new();
    for (i, ch) in d.chars().enumerate() {
        if i > 0 && (d.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}
