//! `report --out DIR [--quick]`: the head-to-head against the peers and the existing
//! benchmarks in one run, written as `results.json`, `summary.md` and plots (SVG and PNG).
//!
//! * **Head-to-head** (in this process, through the ping-pong driver, each run on the same
//!   CPU pair): shmbus topic (spin and block, copy and touch) against Unix sockets, pipes,
//!   loopback TCP, Redis pub/sub (TCP and Unix socket) and, built with the `iceoryx2` feature,
//!   iceoryx2 publish-subscribe (spin; copy and touch), and shmbus services (one call per
//!   round trip) against iceoryx2's request-response, with the spin and futex floors as
//!   the yardsticks, for 8 B, 1 KiB, 64 KiB, 1 MiB and 6 MiB. One-way latency = RTT/2.
//! * **Redis streams** (TCP and Unix socket) at the same sizes, in their own table.
//! * **Kinds**: every shmbus kind (topic, stream, queue, service, journal) at 64 B, spin and
//!   block (a service's round trip is one call).
//! * **Demo**: `shmbus demo` (the `shmbus` binary next to this one) and the same
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

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::cpus::CpuSet;
use crate::driver;
use crate::plots;
use crate::render::{demo_section, rate_grid_section, summary};
use crate::report::Summary;
use crate::transports::{self, redis, Mode, Params, Payload};

pub use crate::render::{ns_label, size_label};

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
    // Async receive (`recv_async().await` in a current-thread tokio runtime on both sides),
    // against the futex floor: the cost of waking a task instead of a thread.
    c("topic", Mode::Async, Payload::Copy),
    c("queue", Mode::Async, Payload::Copy),
    #[cfg(feature = "iceoryx2")]
    c("iceoryx2", Mode::Spin, Payload::Copy),
    #[cfg(feature = "iceoryx2")]
    c("iceoryx2", Mode::Spin, Payload::Touch),
    // Request/response: one call per round trip, against iceoryx2's request-response.
    c("service", Mode::Spin, Payload::Copy),
    c("service", Mode::Spin, Payload::Touch),
    c("service", Mode::Block, Payload::Copy),
    #[cfg(feature = "iceoryx2")]
    c("iceoryx2-rr", Mode::Spin, Payload::Copy),
    #[cfg(feature = "iceoryx2")]
    c("iceoryx2-rr", Mode::Spin, Payload::Touch),
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
const KINDS: &[&str] = &["topic", "stream", "queue", "service", "journal"];

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

/// The `shmbus` binary next to this one (same target directory), if built.
fn shmbus_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.join("shmbus");
    p.is_file().then_some(p)
}

/// The demo's image sizes: a full-HD frame and a small-message run.
pub(crate) const DEMO_IMAGES: &[&str] = &["6220800", "1080"];

/// The demo's robotics profile through `shmbus demo --seconds S --image-bytes B --json`, and
/// over Redis streams through `demo-redis --transport tcp|uds …`, with full-HD
/// 6,220,800 B images and with 1,080 B ones: `{"runs": [...], "redis": {"runs": [...]}}`.
/// Either part is `{"skipped": "…"}` instead when its binary (`shmbus` next to this one,
/// `redis-server`) is missing; the missing `redis-server` was announced already.
fn demo_runs(quick: bool, redis_ok: bool, failures: &mut usize) -> Value {
    let seconds = if quick { "0.5" } else { "10" };
    let mut demo = match shmbus_binary() {
        None => {
            let line = "shmbus binary not found next to shmbus-bench: skipping the demo; \
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
