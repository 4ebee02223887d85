//! `shmbus top`: a live, full-screen view of every channel's activity (ratatui over
//! crossterm), or with `--once` one snapshot as a table or JSON.
//!
//! `sample` turns two successive snapshots (`shmbus::stats`, `Journal::status`) into rows
//! of rates; `view` is the live view's state and keys; `ui` draws it; `term` owns the
//! terminal and the event loop; `format` writes numbers into narrow columns.

mod format;
mod sample;
mod term;
mod ui;
mod view;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::output::{print_json, Align, Table};
use crate::{CliError, Ctx, Result};
use format::{bytes, count, nanos};
use sample::{Participant, Row, Sampler};

/// `shmbus top [--domain D] [--journal DIR]... [--interval SECS] [--once [--json]]`
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this domain (default: every domain under the root).
    #[arg(long)]
    domain: Option<String>,
    /// Also show this journal directory (repeatable).
    #[arg(long, value_name = "DIR")]
    journal: Vec<PathBuf>,
    /// Seconds between refreshes (and, with --once, between the two snapshots).
    #[arg(long, value_name = "SECS", default_value = "1.0", value_parser = parse_interval)]
    interval: f64,
    /// Take two snapshots --interval apart, print the rates and exit.
    #[arg(long)]
    once: bool,
    /// With --once: one JSON object instead of a table.
    #[arg(long, requires = "once")]
    json: bool,
}

/// The longest refresh interval accepted.
const MAX_INTERVAL_S: f64 = 3600.0;

fn parse_interval(s: &str) -> std::result::Result<f64, String> {
    let v = crate::units::secs_duration(s)?.as_secs_f64();
    if !(v > 0.0 && v <= MAX_INTERVAL_S) {
        return Err(format!("must be more than 0 and at most {MAX_INTERVAL_S} seconds"));
    }
    Ok(v)
}

/// Runs the live view, or prints one snapshot with `--once`.
pub fn run(ctx: &Ctx, args: &Args) -> Result<()> {
    let interval = Duration::from_secs_f64(args.interval);
    let mut sampler = Sampler::new(args.domain.clone(), args.journal.clone());
    if !args.once {
        if !std::io::stdout().is_terminal() {
            return Err(CliError::usage("top needs a terminal; use `shmbus top --once` (add --json for scripts)"));
        }
        return term::run(ctx, &mut sampler, interval);
    }
    sampler.sample(ctx)?;
    std::thread::sleep(interval);
    let sample = sampler.sample(ctx)?;
    for w in &sample.warnings {
        eprintln!("shmbus top: {w}");
    }
    if args.json {
        let channels: Vec<Value> = sample.rows.iter().map(row_json).collect();
        print_json(&json!({ "interval_s": args.interval, "channels": channels }))?;
        return Ok(());
    }
    print_table(ctx, &sample.rows)
}

fn participant_json(p: &Participant) -> Value {
    let c = &p.counters;
    json!({
        "index": p.index,
        "pid": p.pid,
        "process": p.process,
        "role": p.role,
        "alive": p.alive,
        "messages_per_s": p.messages_per_s,
        "bytes_per_s": p.bytes_per_s,
        "lag": p.lag,
        "drops": c.drops,
        "full": c.full,
        "blocked": c.blocked,
        "futex_waits": c.futex_waits,
        "futex_wakes": c.futex_wakes,
        "pins": c.pins,
        "latency_p50_ns": p.p50,
        "latency_p99_ns": p.p99,
        "messages": c.messages,
        "bytes": c.bytes,
    })
}

/// One row as a JSON object (see docs/observability.md, "shmbus top").
fn row_json(r: &Row) -> Value {
    let m = r.metrics.as_ref();
    let mut v = json!({
        "domain": r.key.domain,
        "name": r.key.name,
        "kind": r.kind,
        "error": r.error,
        "rate_msgs_per_s": m.map(|m| m.rate),
        "sent_per_s": m.map(|m| m.sent_per_s),
        "received_per_s": m.map(|m| m.received_per_s),
        "bandwidth_bytes_per_s": m.map(|m| m.bandwidth),
        "senders": r.senders,
        "receivers": r.receivers,
        "max_lag": m.and_then(|m| m.max_lag),
        "drops_per_s": m.map(|m| m.drops_per_s),
        "full_per_s": m.map(|m| m.full_per_s),
        "blocked_per_s": m.map(|m| m.blocked_per_s),
        "futex_per_s": m.map(|m| m.futex_per_s),
        "latency_p50_ns": m.and_then(|m| m.p50),
        "latency_p99_ns": m.and_then(|m| m.p99),
        "participants": r.participants.iter().map(participant_json).collect::<Vec<_>>(),
    });
    if let (Some(j), Value::Object(map)) = (&r.journal, &mut v) {
        let readers: Vec<Value> = j
            .readers
            .iter()
            .map(|r| json!({"name": r.name, "position": r.position, "lag": r.lag, "holder_pid": r.holder_pid}))
            .collect();
        map.insert("first_index".into(), json!(j.first_index));
        map.insert("next_index".into(), json!(j.next_index));
        map.insert("file_bytes".into(), json!(j.file_bytes));
        map.insert("cycles".into(), json!(j.cycles));
        map.insert("readers".into(), Value::Array(readers));
    }
    v
}

fn print_table(ctx: &Ctx, rows: &[Row]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if rows.is_empty() {
        writeln!(out, "no channels under {}", ctx.root.display())?;
        return Ok(());
    }
    let mut t = Table::new(&[
        ("DOMAIN", Align::Left),
        ("NAME", Align::Left),
        ("KIND", Align::Left),
        ("MSG/S", Align::Right),
        ("BYTES/S", Align::Right),
        ("SENDERS", Align::Right),
        ("RECEIVERS", Align::Right),
        ("MAX_LAG", Align::Right),
        ("DROPS/S", Align::Right),
        ("FULL/S", Align::Right),
        ("FUTEX/S", Align::Right),
        ("P50", Align::Right),
        ("P99", Align::Right),
        ("NOTE", Align::Left),
    ]);
    for r in rows {
        let m = r.metrics.as_ref();
        let f = |get: fn(&sample::Metrics) -> f64| count(m.map(get));
        t.row(vec![
            r.key.domain.clone().unwrap_or_else(|| "-".into()),
            r.key.name.clone(),
            r.kind.clone().unwrap_or_else(|| "-".into()),
            f(|m| m.rate),
            bytes(m.map(|m| m.bandwidth)),
            crate::output::cell(r.senders),
            crate::output::cell(r.receivers),
            crate::output::cell(m.and_then(|m| m.max_lag)),
            f(|m| m.drops_per_s),
            f(|m| m.full_per_s),
            f(|m| m.futex_per_s),
            nanos(m.and_then(|m| m.p50)),
            nanos(m.and_then(|m| m.p99)),
            r.error.clone().unwrap_or_default(),
        ]);
    }
    t.write(&mut out)?;
    Ok(())
}
