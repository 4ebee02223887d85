//! `shmbus record` and `shmbus replay`: topics to a journal or an MCAP file, and back.
//!
//! A journal recording (`record --dir`) is written by [`shmbus_record::JournalRecorder`]:
//! one topic entry per topic (its slot size, history and schema), then one message entry per
//! recorded message (the `SBRC` record entry format, version 1, described in the
//! `shmbus_record::journal` docs). The journal's own entry timestamp (CLOCK_REALTIME at
//! append) is when the message was recorded; `replay --from-ts` selects by it. Replay spaces
//! messages by the *original* timestamps; where those go backwards or jump by more than a
//! second beyond the recording clock (a journal holding several recording sessions, maybe
//! across reboots), it uses the recording timestamps instead.
//!
//! An MCAP recording (`record --out FILE.mcap`) is written by [`shmbus_record::McapWriter`]:
//! one channel per topic with its schema, `log_time` the receive time, `publish_time` the
//! publish time (both Unix epoch), `sequence` the topic's sequence number (modulo 2³²).
//! SIGINT and SIGTERM stop it cleanly (the summary section is written); a killed recorder
//! leaves a file readable up to its last whole chunk, and chunks are closed at least once a
//! second.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use shmbus::journal::{EntryCipher, Journal, JournalConfig, JournalTryRecvError};
use shmbus::time::monotonic_ns;
use shmbus::topic::{Publisher, Subscriber, Topic, TopicConfig, TopicTryRecvError};
use shmbus::{Domain, OpenError, Schema, WaitSet, WaitTimeoutError, Waitable};
use shmbus_record::journal::{Entry, JournalRecorder};
use shmbus_record::{Compression, McapMessages, McapOptions, McapWriter};

use crate::journal::{open, open_to_read, KeyArg};
use crate::output::JsonLines;
use crate::{CliError, Ctx, Result};

/// What `record` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RecordFormat {
    /// A shmbus journal directory (`--dir`).
    Journal,
    /// An MCAP file (`--out`).
    Mcap,
}

/// `--compression`.
fn parse_compression(s: &str) -> std::result::Result<Compression, String> {
    s.parse()
}

/// Set by SIGINT or SIGTERM while an MCAP recording runs: stop and write the summary.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    // Relaxed: a lone flag polled by the recording loop; no data is published with it.
    STOP.store(true, Ordering::Relaxed);
}

/// Makes SIGINT and SIGTERM set [`STOP`] instead of ending the process.
fn stop_on_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `on_stop_signal` only stores to an atomic (async-signal-safe); the
        // sigaction struct is zeroed (no flags, empty mask) and then given the handler.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Where `record` writes.
enum Sink {
    Journal(Box<JournalRecorder>),
    Mcap {
        /// Boxed, as the recorder is: both hold their buffers' state inline.
        writer: Box<McapWriter<BufWriter<File>>>,
        /// Monotonic time of the last chunk close.
        flushed_ns: u64,
        /// Messages written since then.
        pending: bool,
    },
}

/// Longest time an MCAP recording keeps messages in its open chunk.
const MCAP_FLUSH_NS: u64 = 1_000_000_000;

impl Sink {
    fn write(&mut self, topic: &str, seq: u64, publish_ns: u64, payload: &[u8]) -> Result<()> {
        match self {
            Sink::Journal(r) => {
                r.write(topic, seq, publish_ns, payload).map_err(|e| CliError::msg(format!("append failed: {e}")))?;
            }
            Sink::Mcap { writer, pending, .. } => {
                writer.write(topic, seq, publish_ns, monotonic_ns(), payload)?;
                *pending = true;
            }
        }
        Ok(())
    }

    /// Closes the open MCAP chunk when it has held messages for a second.
    fn tick(&mut self) -> Result<()> {
        if let Sink::Mcap { writer, flushed_ns, pending } = self {
            let now = monotonic_ns();
            if *pending && now.saturating_sub(*flushed_ns) >= MCAP_FLUSH_NS {
                writer.flush()?;
                (*flushed_ns, *pending) = (now, false);
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<()> {
        if let Sink::Mcap { writer, .. } = self {
            // The summary written and flushed, then on the disk: a recording `record`
            // reported as done survives a power loss too.
            let file = writer.finish()?.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
        }
        Ok(())
    }
}

/// `shmbus record --domain D TOPIC... (--dir DIR | --out FILE.mcap) [--count N] [--seconds S] [--timeout-ms T]`
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// The topics' domain (or give the topics as D/NAME). Default: $SHMBUS_DOMAIN.
    #[arg(long, value_name = "D")]
    domain: Option<String>,
    /// Topics to record (they must exist), each NAME or D/NAME, all of one domain. Only
    /// messages published from now on are recorded.
    #[arg(required = true, value_name = "TOPIC")]
    topics: Vec<String>,
    /// Record into this journal directory (created if missing).
    #[arg(long, value_name = "DIR", required_unless_present = "out", conflicts_with = "out")]
    dir: Option<PathBuf>,
    /// Record into this MCAP file (replaced if it exists): a name ending in `.mcap`, or any
    /// name with `--format mcap`.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// What to write: `journal` (`--dir`) or `mcap` (`--out`). Default: by the option given.
    #[arg(long, value_enum, value_name = "FORMAT")]
    format: Option<RecordFormat>,
    /// MCAP chunk compression: zstd, lz4 or none.
    #[arg(long, default_value = "zstd", value_parser = parse_compression, value_name = "zstd|lz4|none")]
    compression: Compression,
    /// MCAP chunk size (uncompressed bytes, `1M`): a chunk is written whole when it holds
    /// this much, or after a second. Default 1 MiB.
    #[arg(long, value_name = "BYTES", value_parser = crate::units::size)]
    chunk_size: Option<u64>,
    /// Stop (with 0) after this many messages in total (at least 1).
    #[arg(long, value_name = "N", value_parser = crate::units::count)]
    count: Option<u64>,
    /// Stop (with 0) after this long: seconds (fractions allowed), or with a unit (`5m`).
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    seconds: Option<f64>,
    /// Fail (exit 1) when no message arrives on any topic for this long (default: wait for
    /// ever); what was recorded before stays committed.
    #[arg(long, value_name = "MS", value_parser = crate::units::millis)]
    timeout_ms: Option<u64>,
    /// Print the summary as one JSON object {"messages","gaps","topics":{name: count}}.
    #[arg(long)]
    json: bool,
    /// No progress on stderr (shown for a large recording when stderr is a terminal).
    #[arg(long)]
    quiet: bool,
    /// Wait up to SECS for every topic to be created instead of failing when it does not
    /// exist yet (listeners may start first).
    #[arg(long, value_name = "SECS", value_parser = crate::parse_wait)]
    wait: Option<std::time::Duration>,
    #[command(flatten)]
    key: KeyArg,
}

/// The MCAP file `record` writes, or `None` for a journal; usage errors for options that do
/// not fit together.
fn mcap_target(args: &RecordArgs) -> Result<Option<&Path>> {
    match (&args.dir, &args.out, args.format) {
        (Some(_), _, Some(RecordFormat::Mcap)) => {
            Err(CliError::usage("--format mcap writes an MCAP file: give --out FILE.mcap instead of --dir"))
        }
        (Some(_), _, _) => Ok(None),
        (None, Some(_), Some(RecordFormat::Journal)) => {
            Err(CliError::usage("--format journal writes a journal directory: give --dir DIR instead of --out"))
        }
        (None, Some(out), Some(RecordFormat::Mcap)) => Ok(Some(out)),
        (None, Some(out), None) if out.extension().is_some_and(|e| e.eq_ignore_ascii_case("mcap")) => Ok(Some(out)),
        (None, Some(out), None) => Err(CliError::usage(format!(
            "--out {} writes MCAP: give a name ending in .mcap or add --format mcap (a journal is --dir DIR)",
            out.display()
        ))),
        (None, None, _) => Err(CliError::usage("give --dir DIR (a journal) or --out FILE.mcap")),
    }
}

/// Records messages of topics into a journal or an MCAP file until `--count` or `--seconds`
/// (or, for MCAP, SIGINT/SIGTERM). Killed, a journal keeps every message recorded so far, an
/// MCAP file every whole chunk.
pub fn run_record(ctx: &Ctx, args: &RecordArgs) -> Result<()> {
    let (domain_name, topics) = crate::target::channels(args.domain.as_deref(), &args.topics)?;
    let domain = ctx.domain(&domain_name)?;
    let mcap = mcap_target(args)?;
    // Checked before anything is subscribed or created.
    let cipher = args.key.cipher()?;
    if mcap.is_some() && cipher.is_some() {
        return Err(CliError::usage("--key-file encrypts journal entries; an MCAP recording is not encrypted"));
    }
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    // Topics that appeared while waiting are recorded from their first message (all of
    // them published since `record` started).
    let appeared = ctx.wait_for(&domain, &names, args.wait)?;
    for name in &names {
        crate::target::require(&domain, name, crate::target::WaitHint::Offer)?;
    }
    let mut subs: Vec<(String, Subscriber, u32, u32, Option<Schema>)> = Vec::new();
    for name in &topics {
        if subs.iter().any(|s| &s.0 == name) {
            continue;
        }
        let t = Topic::open(&domain, name)?;
        let (slot, hist) = (t.max_message_len() as u32, t.history() as u32);
        let schema = t.schema().cloned();
        let sub = t.subscriber()?;
        if appeared.contains(&name.as_str()) {
            sub.seek(1);
        }
        subs.push((name.clone(), sub, slot, hist, schema));
    }
    // Subscribed first: a missing topic leaves no recording behind.
    let target = match mcap {
        Some(out) => out.to_path_buf(),
        None => args.dir.clone().unwrap_or_default(),
    };
    let mut sink = match mcap {
        Some(out) => {
            let mut options = McapOptions { compression: args.compression, ..McapOptions::default() };
            if let Some(c) = args.chunk_size {
                options.chunk_size = c.max(1);
            }
            let mut writer = McapWriter::create_with(out, options)?;
            for (name, _, _, _, schema) in &subs {
                writer.add_topic(name, schema.as_ref())?;
            }
            stop_on_signals();
            Sink::Mcap { writer: Box::new(writer), flushed_ns: monotonic_ns(), pending: false }
        }
        None => {
            let j = open(&target, &JournalConfig::default())?;
            let mut app = j.appender().map_err(|e| CliError::msg(format!("{}: {e}", target.display())))?;
            app.set_cipher(cipher);
            let mut rec = JournalRecorder::new(app);
            for (name, _, slot, hist, schema) in &subs {
                rec.add_topic(name, *slot, *hist, schema.as_ref())
                    .map_err(|e| CliError::msg(format!("append failed: {e}")))?;
            }
            Sink::Journal(Box::new(rec))
        }
    };
    let until = args.seconds.map(|s| monotonic_ns().saturating_add((s.max(0.0) * 1e9) as u64));
    let waitables: Vec<&dyn Waitable> = subs.iter().map(|s| &s.1 as &dyn Waitable).collect();
    let mut ws = WaitSet::new();
    let mut counts = vec![0u64; subs.len()];
    let mut dropped = vec![0u64; subs.len()];
    // Gaps not yet reported on stderr, and when each topic's last report was.
    let (mut unreported, mut reported_at) = (vec![0u64; subs.len()], vec![0u64; subs.len()]);
    let (mut total, mut gaps) = (0u64, 0u64);
    let mut buf = Vec::new();
    let mut ready = Vec::new();
    let per_message = args.timeout_ms.map(Duration::from_millis);
    // An MCAP recording wakes at least this often to see a stop signal and close chunks.
    let poll = mcap.map(|_| Duration::from_millis(100));
    let mut quiet_since = monotonic_ns();
    let mut progress = crate::progress::Counter::new(crate::progress::allowed(args.quiet, args.json), args.count);
    'run: while args.count.is_none_or(|n| total < n) {
        if STOP.load(Ordering::Relaxed) {
            break;
        }
        sink.tick()?;
        let now = monotonic_ns();
        let left = match until {
            Some(u) => {
                if now >= u {
                    break;
                }
                Some(Duration::from_nanos(u - now))
            }
            None => None,
        };
        // Time left before `--timeout-ms` since the last message.
        let per_left = per_message.map(|p| p.saturating_sub(Duration::from_nanos(now.saturating_sub(quiet_since))));
        // The wait ends at `--seconds` (done) or `--timeout-ms` (an error), whichever is
        // first, or at the poll interval (to look again).
        let (timeout, timing_out) = match (left, per_left) {
            (Some(l), Some(p)) if p < l => (Some(p), true),
            (None, Some(p)) => (Some(p), true),
            (l, _) => (l, false),
        };
        let (timeout, polling) = match (timeout, poll) {
            (Some(t), Some(p)) if p < t => (Some(p), true),
            (None, Some(p)) => (Some(p), true),
            (t, _) => (t, false),
        };
        let waited = match timeout {
            Some(t) => ws.wait_timeout(&waitables, t),
            None => ws.wait(&waitables).map_err(WaitTimeoutError::from),
        };
        match waited {
            Ok(r) => {
                ready.clear();
                ready.extend_from_slice(r);
            }
            Err(WaitTimeoutError::Timeout) if polling => continue,
            Err(WaitTimeoutError::Timeout) if timing_out => {
                // What was written stays readable: an MCAP file gets its summary.
                sink.finish()?;
                return Err(CliError::msg(format!(
                    "no message on {} within --timeout-ms {} ms ({total} message(s) recorded before, committed in {})",
                    names.join(", "),
                    args.timeout_ms.unwrap_or(0),
                    target.display()
                )));
            }
            Err(WaitTimeoutError::Timeout) => break,
            Err(e) => return Err(e.into()),
        }
        for &i in &ready {
            let (name, sub, ..) = &subs[i];
            // At most a batch per topic per wake: a topic published faster than the recorder
            // writes must neither starve the others nor keep `--seconds` and a stop signal
            // from being seen (the wait returns at once while messages remain).
            for _ in 0..BATCH {
                if args.count.is_some_and(|n| total >= n) {
                    break 'run;
                }
                match sub.try_recv_into(&mut buf) {
                    Ok(m) => {
                        sink.write(name, m.seq(), m.ts_ns(), &buf)?;
                        quiet_since = monotonic_ns();
                        counts[i] += 1;
                        total += 1;
                        progress.add(buf.len());
                    }
                    Err(TopicTryRecvError::Empty) => break,
                    Err(TopicTryRecvError::Lagged { missed }) => {
                        gaps += missed;
                        dropped[i] += missed;
                        // One line per topic per second at most: a recorder that keeps
                        // falling behind must not flood (or block on) its stderr.
                        unreported[i] += missed;
                        let now = monotonic_ns();
                        if now.saturating_sub(reported_at[i]) >= GAP_REPORT_NS {
                            let n = std::mem::take(&mut unreported[i]);
                            progress.suspend(|| eprintln!("gap: {n} message(s) of {name} skipped (not recorded)"));
                            reported_at[i] = now;
                        }
                    }
                    Err(e) => return Err(CliError::msg(format!("receive from {name} failed: {e}"))),
                }
            }
        }
    }
    drop(progress);
    sink.finish()?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let topics = subs.iter().zip(&counts).map(|(s, c)| (s.0.as_str(), *c)).collect();
        JsonLines::new().write(&mut out, &RecordJson { messages: total, gaps, topics })?;
    } else {
        writeln!(out, "recorded {total} message(s) from {} topic(s) into {}", subs.len(), target.display())?;
        if gaps > 0 {
            let per: Vec<String> =
                subs.iter().zip(&dropped).filter(|(_, d)| **d > 0).map(|(s, d)| format!("{} {d}", s.0)).collect();
            writeln!(out, "skipped {gaps} message(s) the recorder fell behind on ({})", per.join(", "))?;
        }
    }
    Ok(())
}

/// `record --json`: one line when it stops.
#[derive(Debug, Serialize)]
struct RecordJson<'a> {
    /// Messages recorded.
    messages: u64,
    /// Messages skipped because the recorder lagged (not recorded).
    gaps: u64,
    /// Messages recorded per topic, by name.
    topics: BTreeMap<&'a str, u64>,
}

/// `replay --json`: one line when it ends.
#[derive(Debug, Serialize)]
struct ReplayJson<'a> {
    /// Messages republished.
    messages: u64,
    /// Messages republished per topic, by name.
    topics: BTreeMap<&'a str, u64>,
}

/// Replay speed: a factor of the original pace, or as fast as possible.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Speed {
    /// Original spacing divided by this factor.
    Factor(f64),
    /// No waiting.
    Max,
}

/// The most messages `record` takes from one topic before it looks at the other topics, the
/// clock and the stop signal again.
const BATCH: usize = 64;

/// The shortest time between two `gap:` lines of one topic on stderr (the summary gives the
/// totals).
const GAP_REPORT_NS: u64 = 1_000_000_000;

/// `--seconds`: a duration, a bare number being seconds.
fn parse_seconds(s: &str) -> std::result::Result<f64, String> {
    Ok(crate::units::secs_duration(s)?.as_secs_f64())
}

fn parse_speed(s: &str) -> std::result::Result<Speed, String> {
    if s.eq_ignore_ascii_case("max") {
        return Ok(Speed::Max);
    }
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 => Ok(Speed::Factor(f)),
        _ => Err(format!("{s:?} is not a speed: give a positive factor (1.0 = original pace) or `max`")),
    }
}

/// `shmbus replay (--dir DIR | --from FILE.mcap) --domain D [--speed 1.0|max] [--from-ts T]`
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The journal directory written by `shmbus record --dir`.
    #[arg(long, value_name = "DIR", required_unless_present = "from", conflicts_with = "from")]
    dir: Option<PathBuf>,
    /// An MCAP file (written by `shmbus record --out` or any MCAP writer): each channel is
    /// republished to the topic of its name, created with the channel's schema.
    #[arg(long, value_name = "FILE.mcap")]
    from: Option<PathBuf>,
    /// Domain to publish into (topics keep their recorded names; missing ones are created
    /// with the recorded slot size, history and schema, or a slot as large as the largest
    /// message). Default: $SHMBUS_DOMAIN.
    #[arg(long, env = "SHMBUS_DOMAIN", hide_env_values = true)]
    domain: String,
    /// Pace: a factor of the original (2.0 = twice as fast) or `max` (no waiting).
    #[arg(long, default_value = "1.0", value_parser = parse_speed, value_name = "FACTOR|max")]
    speed: Speed,
    /// Start at the first message recorded at or after this wall-clock (CLOCK_REALTIME) time
    /// (an MCAP message's log time): nanoseconds since 1970, RFC 3339
    /// (`2026-11-24T10:00:00Z`) or a time ago (`-10m`).
    #[arg(long, value_name = "TIME", value_parser = crate::units::time_ns, allow_hyphen_values = true)]
    from_ts: Option<u64>,
    /// Only these topics (default: every recorded topic).
    #[arg(long = "topic", value_name = "NAME")]
    topics: Vec<String>,
    /// Print the summary as one JSON object {"messages","topics":{name: count}}.
    #[arg(long)]
    json: bool,
    /// No progress bar on stderr (shown for a large recording when stderr is a terminal).
    #[arg(long)]
    quiet: bool,
    #[command(flatten)]
    key: KeyArg,
}

/// What replay knows of a recorded topic before its first message is republished.
#[derive(Debug, Clone, Default)]
struct TopicShape {
    slot_size: usize,
    history: usize,
    schema: Option<Schema>,
}

/// Opens the topic for replay, creating it if missing with the recorded shape and schema and
/// room for `min_slot` bytes.
fn replay_topic(domain: &Domain, name: &str, shape: &TopicShape, min_slot: usize) -> Result<Publisher> {
    let topic = match Topic::open(domain, name) {
        Ok(t) => t,
        Err(OpenError::NotFound { .. }) => {
            let slot = shape.slot_size.max(min_slot).max(1);
            let mut config = TopicConfig::default().max_message_len(slot);
            if shape.history > 0 {
                config = config.history(shape.history);
            }
            if let Some(s) = &shape.schema {
                config = config.schema(s.clone());
            }
            Topic::create_or_open(domain, name, &config)?
        }
        Err(e) => return Err(e.into()),
    };
    Ok(topic.publisher()?)
}

/// The time to publish the next message: `gap` after the previous one (original spacing
/// by publish time, else by recording time), scaled by `--speed`.
fn schedule(prev: Option<(u64, u64, u64)>, speed: Speed, publish_ns: u64, recorded_ns: u64, now: u64) -> u64 {
    match (prev, speed) {
        (None, _) | (_, Speed::Max) => now,
        (Some((pts, pj, pat)), Speed::Factor(f)) => {
            let recorded_gap = recorded_ns.saturating_sub(pj);
            let gap = match publish_ns.checked_sub(pts) {
                Some(g) if g <= recorded_gap.saturating_add(1_000_000_000) => g,
                _ => recorded_gap,
            };
            pat.saturating_add((gap as f64 / f) as u64)
        }
    }
}

/// Says which `--topic` names the recording does not hold.
fn missing_topics(args: &ReplayArgs, held: &BTreeSet<String>, what: &Path) -> Result<()> {
    let missing: Vec<&str> = args.topics.iter().map(String::as_str).filter(|n| !held.contains(*n)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let holds = if held.is_empty() {
        "it holds no topics".to_owned()
    } else {
        format!("it holds: {}", held.iter().map(String::as_str).collect::<Vec<_>>().join(", "))
    };
    Err(CliError::msg(format!("--topic {} not in the recording {}; {holds}", missing.join(", "), what.display())))
}

/// The topics a recording journal holds, with the shape and schema of their topic entries
/// (a recording without topic entries: the shape of their first message). One pass over the
/// entries' headers (the journal bounds it); entries that cannot be read are left to the
/// replay to report.
fn scan_topics(j: &Journal, dir: &Path, cipher: &Option<Arc<dyn EntryCipher>>) -> Result<BTreeMap<String, TopicShape>> {
    let mut t = j.tailer().map_err(|e| CliError::msg(format!("{}: {e}", dir.display())))?;
    t.set_cipher(cipher.clone());
    let mut held: BTreeMap<String, TopicShape> = BTreeMap::new();
    loop {
        match t.try_recv_ref() {
            Ok(e) => match Entry::decode(e.data()) {
                Ok(Entry::Topic(te)) => {
                    let shape = TopicShape {
                        slot_size: te.slot_size as usize,
                        history: te.history as usize,
                        schema: te.schema.clone(),
                    };
                    held.insert(te.topic.to_owned(), shape);
                }
                Ok(Entry::Message(m)) => {
                    if !held.contains_key(m.topic) {
                        let shape =
                            TopicShape { slot_size: m.slot_size as usize, history: m.history as usize, schema: None };
                        held.insert(m.topic.to_owned(), shape);
                    }
                }
                Err(_) => continue,
            },
            Err(JournalTryRecvError::Empty) => break,
            Err(
                JournalTryRecvError::Gap { .. }
                | JournalTryRecvError::Corrupt(_)
                | JournalTryRecvError::Damaged { .. }
                | JournalTryRecvError::Encrypted { .. }
                | JournalTryRecvError::UnknownKey { .. }
                | JournalTryRecvError::Unauthenticated { .. }
                | JournalTryRecvError::PositionReset { .. },
            ) => continue,
            // Unreadable from here on: the replay says why.
            Err(_) => break,
        }
    }
    Ok(held)
}

/// Republishes the recorded messages in file order, with their original spacing scaled by
/// `--speed`.
pub fn run_replay(ctx: &Ctx, args: &ReplayArgs) -> Result<()> {
    let domain = ctx.domain(&args.domain)?;
    match (&args.dir, &args.from) {
        (Some(dir), _) => replay_journal(&domain, dir, args),
        (None, Some(file)) => replay_mcap(&domain, file, args),
        (None, None) => Err(CliError::usage("give --dir DIR (a journal recording) or --from FILE.mcap")),
    }
}

/// Replay's publishers and counts, by topic.
#[derive(Default)]
struct Republisher {
    pubs: HashMap<String, Publisher>,
    counts: Vec<(String, u64)>,
    total: u64,
}

impl Republisher {
    fn send(
        &mut self,
        domain: &Domain,
        name: &str,
        shape: &TopicShape,
        payload: &[u8],
        domain_name: &str,
    ) -> Result<()> {
        if !self.pubs.contains_key(name) {
            self.pubs.insert(name.to_owned(), replay_topic(domain, name, shape, payload.len())?);
            self.counts.push((name.to_owned(), 0));
        }
        let publisher = self.pubs.get_mut(name).ok_or_else(|| CliError::msg("internal: publisher missing"))?;
        publisher
            .send(payload)
            .map_err(|err| CliError::msg(format!("publish to {domain_name}/{name} failed: {err}")))?;
        if let Some(c) = self.counts.iter_mut().find(|c| c.0 == name) {
            c.1 += 1;
        }
        self.total += 1;
        Ok(())
    }

    fn report(&self, args: &ReplayArgs) -> Result<()> {
        let mut out = std::io::stdout().lock();
        if args.json {
            let topics = self.counts.iter().map(|(n, c)| (n.as_str(), *c)).collect();
            JsonLines::new().write(&mut out, &ReplayJson { messages: self.total, topics })?;
        } else {
            writeln!(
                out,
                "replayed {} message(s) to {} topic(s) in domain {}",
                self.total,
                self.counts.len(),
                args.domain
            )?;
        }
        Ok(())
    }
}

/// `replay --dir`: a recording journal.
fn replay_journal(domain: &Domain, dir: &Path, args: &ReplayArgs) -> Result<()> {
    let cipher = args.key.cipher()?;
    let (j, lost) = open_to_read(dir)?;
    // Topic entries hold each topic's schema; read ahead when --from-ts may start past them
    // or --topic must be checked.
    let mut shapes = BTreeMap::new();
    if !args.topics.is_empty() || args.from_ts.is_some() {
        shapes = scan_topics(&j, dir, &cipher)?;
        if !args.topics.is_empty() {
            missing_topics(args, &shapes.keys().cloned().collect(), dir)?;
        }
    }
    let mut t = match args.from_ts {
        Some(ts) => j.tailer_at_time(ts),
        None => j.tailer(),
    }
    .map_err(|e| CliError::msg(format!("{}: {e}", dir.display())))?;
    let progress = match crate::progress::allowed(args.quiet, args.json) {
        true => match Journal::status(dir) {
            Ok(st) => crate::progress::Progress::over_journal(true, "replay", st.first_index, st.next_index, st.bytes),
            Err(_) => crate::progress::Progress::over_journal(false, "", 0, 0, 0),
        },
        false => crate::progress::Progress::over_journal(false, "", 0, 0, 0),
    };
    t.set_cipher(cipher);
    let mut out = Republisher::default();
    // (original ts, journal ts, scheduled monotonic time) of the previous message.
    let mut prev: Option<(u64, u64, u64)> = None;
    let mut damaged = 0u64;
    let mut undecrypted = 0u64;
    loop {
        let e = match t.try_recv_ref() {
            Ok(e) => e,
            Err(JournalTryRecvError::Empty) => break,
            Err(JournalTryRecvError::Gap { from, to }) => {
                progress
                    .suspend(|| eprintln!("gap: entries {from}..{to} were removed by retention before they were read"));
                continue;
            }
            Err(e @ (JournalTryRecvError::Corrupt(_) | JournalTryRecvError::Damaged { .. })) => {
                // Reported and skipped; the exit status says so at the end.
                damaged += 1;
                progress.suspend(|| eprintln!("damaged: {e}"));
                continue;
            }
            Err(
                e @ (JournalTryRecvError::Encrypted { .. }
                | JournalTryRecvError::UnknownKey { .. }
                | JournalTryRecvError::Unauthenticated { .. }),
            ) => {
                // Reported and skipped (no --key-file, a key file without its key, or a
                // wrong key); the exit status says so at the end.
                undecrypted += 1;
                progress.suspend(|| eprintln!("skipped: {e}"));
                continue;
            }
            Err(e @ JournalTryRecvError::PositionReset { .. }) => {
                progress.suspend(|| eprintln!("skipped: {e}"));
                continue;
            }
            Err(e) => return Err(CliError::msg(format!("reading {}: {e}", dir.display()))),
        };
        progress.at(e.index());
        let rec = match Entry::decode(e.data()) {
            Ok(Entry::Message(m)) => m,
            Ok(Entry::Topic(te)) => {
                let shape =
                    TopicShape { slot_size: te.slot_size as usize, history: te.history as usize, schema: te.schema };
                shapes.insert(te.topic.to_owned(), shape);
                continue;
            }
            Err(what) => {
                let hint = match what {
                    shmbus_record::journal::EntryError::NotARecordEntry => {
                        "; was this journal written by `shmbus record`?"
                    }
                    _ => "",
                };
                return Err(CliError::msg(format!("{} entry {}: {what}{hint}", dir.display(), e.index())));
            }
        };
        if !args.topics.is_empty() && !args.topics.iter().any(|n| n == rec.topic) {
            continue;
        }
        let now = monotonic_ns();
        let at = schedule(prev, args.speed, rec.ts_ns, e.ts_ns(), now);
        if at > now {
            std::thread::sleep(Duration::from_nanos(at - now));
        }
        prev = Some((rec.ts_ns, e.ts_ns(), at));
        let shape = shapes.entry(rec.topic.to_owned()).or_insert_with(|| TopicShape {
            slot_size: rec.slot_size as usize,
            history: rec.history as usize,
            schema: None,
        });
        out.send(domain, rec.topic, shape, rec.payload, &args.domain)?;
    }
    drop(progress);
    out.report(args)?;
    if lost > 0 {
        return Err(CliError::msg(format!(
            "{}: {lost} range(s) of the recording were lost in recovery (listed above); everything else was replayed",
            dir.display()
        )));
    }
    if damaged > 0 {
        return Err(CliError::msg(format!(
            "{}: {damaged} damaged range(s) of the recording were skipped (listed above); everything else was replayed",
            dir.display()
        )));
    }
    if undecrypted > 0 {
        return Err(CliError::msg(format!(
            "{}: {undecrypted} encrypted entr{} of the recording could not be read (listed above: no --key-file, a key \
             file without its key id, or failed authentication); everything else was replayed",
            dir.display(),
            if undecrypted == 1 { "y" } else { "ies" }
        )));
    }
    Ok(())
}

/// `replay --from FILE.mcap`: one pass to learn each channel's topic, schema and largest
/// message (the topics are created from them), then the messages in file order.
fn replay_mcap(domain: &Domain, file: &Path, args: &ReplayArgs) -> Result<()> {
    if args.key.cipher()?.is_some() {
        return Err(CliError::usage("--key-file decrypts journal entries; an MCAP recording is not encrypted"));
    }
    let mut shapes: BTreeMap<String, TopicShape> = BTreeMap::new();
    for m in McapMessages::open(file)? {
        // A file cut short (its writer was killed) is read up to its last whole chunk; the
        // replay pass reports the rest.
        let Ok(m) = m else { break };
        let shape = shapes.entry(m.topic.clone()).or_insert_with(|| TopicShape {
            slot_size: 0,
            history: 0,
            schema: m.schema.as_deref().cloned(),
        });
        shape.slot_size = shape.slot_size.max(m.payload.len());
    }
    if !args.topics.is_empty() {
        missing_topics(args, &shapes.keys().cloned().collect(), file)?;
    }
    let mut out = Republisher::default();
    // (publish time, log time, scheduled monotonic time) of the previous message.
    let mut prev: Option<(u64, u64, u64)> = None;
    let mut cut_short = None;
    for m in McapMessages::open(file)? {
        let m = match m {
            Ok(m) => m,
            Err(e) => {
                cut_short = Some(e);
                break;
            }
        };
        if args.from_ts.is_some_and(|ts| m.log_ns < ts) {
            continue;
        }
        if !args.topics.is_empty() && !args.topics.contains(&m.topic) {
            continue;
        }
        let now = monotonic_ns();
        let at = schedule(prev, args.speed, m.publish_ns, m.log_ns, now);
        if at > now {
            std::thread::sleep(Duration::from_nanos(at - now));
        }
        prev = Some((m.publish_ns, m.log_ns, at));
        let shape = shapes.get(&m.topic).cloned().unwrap_or_default();
        out.send(domain, &m.topic, &shape, &m.payload, &args.domain)?;
    }
    out.report(args)?;
    if let Some(e) = cut_short {
        return Err(CliError::msg(format!(
            "{}: the file ends early ({e}; was its recorder killed?): every message before was replayed",
            file.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speeds_parse() {
        assert_eq!(parse_speed("max"), Ok(Speed::Max));
        assert_eq!(parse_speed("2.5"), Ok(Speed::Factor(2.5)));
        assert!(parse_speed("0").is_err());
        assert!(parse_speed("fast").is_err());
    }
}
