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

use serde::Serialize;

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
        let channels = sample.rows.iter().map(row_json).collect();
        print_json(&SnapshotJson { interval_s: args.interval, channels })?;
        return Ok(());
    }
    print_table(ctx, &sample.rows)
}

/// `top --once --json` (see docs/observability.md, "shmbus top").
#[derive(Debug, Serialize)]
struct SnapshotJson<'a> {
    interval_s: f64,
    channels: Vec<RowJson<'a>>,
}

/// One participant of a row.
#[derive(Debug, Serialize)]
struct ParticipantJson<'a> {
    index: usize,
    pid: u32,
    process: Option<&'a str>,
    role: &'a str,
    alive: bool,
    messages_per_s: Option<f64>,
    bytes_per_s: Option<f64>,
    lag: Option<u64>,
    drops: u64,
    full: u64,
    blocked: u64,
    futex_waits: u64,
    futex_wakes: u64,
    pins: u64,
    latency_p50_ns: Option<u64>,
    latency_p99_ns: Option<u64>,
    messages: u64,
    bytes: u64,
}

fn participant_json(p: &Participant) -> ParticipantJson<'_> {
    let c = &p.counters;
    ParticipantJson {
        index: p.index,
        pid: p.pid,
        process: p.process.as_deref(),
        role: &p.role,
        alive: p.alive,
        messages_per_s: p.messages_per_s,
        bytes_per_s: p.bytes_per_s,
        lag: p.lag,
        drops: p.drops(),
        full: c.full,
        blocked: c.blocked,
        futex_waits: c.futex_waits,
        futex_wakes: c.futex_wakes,
        pins: c.pins,
        latency_p50_ns: p.p50,
        latency_p99_ns: p.p99,
        messages: c.messages,
        bytes: c.bytes,
    }
}

/// One channel (or journal) row.
#[derive(Debug, Serialize)]
struct RowJson<'a> {
    /// `null` for a journal.
    domain: Option<&'a str>,
    name: &'a str,
    kind: Option<&'a str>,
    error: Option<&'a str>,
    rate_msgs_per_s: Option<f64>,
    sent_per_s: Option<f64>,
    received_per_s: Option<f64>,
    bandwidth_bytes_per_s: Option<f64>,
    senders: Option<usize>,
    receivers: Option<usize>,
    max_lag: Option<u64>,
    drops_per_s: Option<f64>,
    full_per_s: Option<f64>,
    blocked_per_s: Option<f64>,
    futex_per_s: Option<f64>,
    latency_p50_ns: Option<u64>,
    latency_p99_ns: Option<u64>,
    participants: Vec<ParticipantJson<'a>>,
    /// Journal rows only.
    #[serde(flatten)]
    journal: Option<JournalJson<'a>>,
}

/// The keys a journal row adds.
#[derive(Debug, Serialize)]
struct JournalJson<'a> {
    first_index: u64,
    next_index: u64,
    file_bytes: u64,
    cycles: usize,
    readers: Vec<ReaderJson<'a>>,
}

/// A named reader of a journal row.
#[derive(Debug, Serialize)]
struct ReaderJson<'a> {
    name: &'a str,
    position: u64,
    lag: u64,
    holder_pid: Option<u32>,
}

/// One row as a JSON object (see docs/observability.md, "shmbus top").
fn row_json(r: &Row) -> RowJson<'_> {
    let m = r.metrics.as_ref();
    RowJson {
        domain: r.key.domain.as_deref(),
        name: &r.key.name,
        kind: r.kind.as_deref(),
        error: r.error.as_deref(),
        rate_msgs_per_s: m.map(|m| m.rate),
        sent_per_s: m.map(|m| m.sent_per_s),
        received_per_s: m.map(|m| m.received_per_s),
        bandwidth_bytes_per_s: m.map(|m| m.bandwidth),
        senders: r.senders,
        receivers: r.receivers,
        max_lag: m.and_then(|m| m.max_lag),
        drops_per_s: m.map(|m| m.drops_per_s),
        full_per_s: m.map(|m| m.full_per_s),
        blocked_per_s: m.map(|m| m.blocked_per_s),
        futex_per_s: m.map(|m| m.futex_per_s),
        latency_p50_ns: m.and_then(|m| m.p50),
        latency_p99_ns: m.and_then(|m| m.p99),
        participants: r.participants.iter().map(participant_json).collect(),
        journal: r.journal.as_ref().map(|j| JournalJson {
            first_index: j.first_index,
            next_index: j.next_index,
            file_bytes: j.file_bytes,
            cycles: j.cycles,
            readers: j
                .readers
                .iter()
                .map(|r| ReaderJson { name: &r.name, position: r.position, lag: r.lag, holder_pid: r.holder_pid })
                .collect(),
        }),
    }
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
            r.error.clone().or_else(|| r.note.clone()).unwrap_or_default(),
        ]);
    }
    t.write(&mut out)?;
    Ok(())
}
