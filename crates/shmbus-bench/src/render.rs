//! The Markdown of `report`'s summary.md: the tables and sections rendered from the runs and
//! from results.json.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::plots;
use crate::suite::{Measured, Stats, DEMO_IMAGES};
use crate::transports::{Mode, Payload};

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

pub(crate) fn summary(
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
         faster than the topic; async rows: over the blocking topic). Async rows await `recv_async` in a \
         current-thread tokio runtime on both sides and are measured against the futex floor. Redis always blocks; its server is a third, unpinned process.\n"
    );
    let p50_of =
        |label: &str, size: usize| h2h.iter().find(|x| x.label == label && x.size == size).and_then(Measured::p50);
    // The yardstick of a row: the floor of its mode with its payload handling, and the
    // topic of its mode with copy.
    let floor_of = |x: &Measured| {
        let t = if x.mode == Mode::Spin { "floor" } else { "futex-floor" };
        h2h.iter().find(|f| f.transport == t && f.payload == x.payload && f.size == x.size).and_then(Measured::p50)
    };
    // An async row is compared with the blocking topic: what awaiting costs over a thread.
    let topic_of = |x: &Measured| {
        let mode = if x.mode == Mode::Async { Mode::Block } else { x.mode };
        h2h.iter()
            .find(|f| f.transport == "topic" && f.mode == mode && f.payload == Payload::Copy && f.size == x.size)
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
    let _ = writeln!(s, "## queue-table: 2,000,000 queue messages per size against a mutex-guarded queue\n");
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
            "reference_wall_s",
            "speedup_p50",
            "floor_p50_ns",
        ],
    );
    let _ = writeln!(s, "## journal: append → tail, durability none\n");
    objects_table(
        &mut s,
        &section("journal"),
        &["size", "fs", "p50_ns", "p99_ns", "p999_ns", "msgs_per_s", "mib_per_s", "floor_p50_ns"],
    );
    let _ = writeln!(s, "## pool: enqueue → recv, shmbus pool vs crossbeam threads\n");
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

/// The rate-grid section: per mode, p50 and p99 (µs) by rate (rows) and ring (columns), and
/// the plot.
pub(crate) fn rate_grid_section(cells: &[Value], plot: &plots::Plot) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## rate-grid: stream one-way latency vs message rate and ring size\n\n\
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

/// A demo latency summary as "mean / p99", each in its own unit ("158.6 µs / 2.53 ms").
fn mean_p99(v: &Value) -> String {
    match (v["n"].as_u64(), v["mean_ns"].as_f64(), v["p99_ns"].as_u64()) {
        (Some(n), Some(mean), Some(p99)) if n > 0 => format!("{} / {}", ns_label(mean.round() as u64), ns_label(p99)),
        _ => "–".into(),
    }
}

/// The demo section: per image size one table of the consumers (view and view+copy) and
/// one of the producers (write), with a column per backend (shmbus, Redis TCP, Redis UDS),
/// as the robotics profile compares shmbus with Redis.
pub(crate) fn demo_section(demo: &Value) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "## demo: `shmbus demo` against Redis streams (`shmbus-bench demo-redis`)\n");
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
