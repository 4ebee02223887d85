//! `shmbus hz`, `shmbus bw` and `shmbus delay`: a channel's message rate, bandwidth and
//! publish → receive latency, printed every `--interval`, in the manner of
//! `ros2 topic hz/bw/delay`.
//!
//! How each kind is observed, never taking a message from anyone:
//!
//! * **Topic**: a real [`Subscriber`] (every subscriber sees every message, so it takes
//!   nothing from the others; it does register as a participant while it runs). The
//!   statistics cover the last `--window` messages: the rate is messages published per
//!   second between the first and the last of them (by sequence number and publish
//!   timestamp, so messages this subscriber missed still count), the intervals are those
//!   between the publish timestamps of consecutive messages, sizes are the messages'
//!   lengths, and the delay is receive time − publish time (both `CLOCK_MONOTONIC`, same
//!   host).
//! * **Queue, stream, pool**: nothing is opened for writing and nothing registers: the
//!   channel's counters ([`shmbus::stats::channel_stats`]) are sampled every
//!   [`SAMPLE_PERIOD`] (or every `--interval`, if shorter), and the statistics cover the last
//!   `--window` samples: the mean rate is messages sent / time, the minimum, maximum and
//!   standard deviation are those of the per-sample rates (a sampling period, not one
//!   message), and bytes come from the senders' counters. Messages sent are the kind's own
//!   channel-wide total where it keeps one (a queue's `sent`, a pool's `jobs_dispatched`),
//!   else the senders' counters. These kinds carry no timestamps: `delay` refuses them.
//! * **Journal** (`--journal DIR`): [`Journal::status`] sampled the same way: entries
//!   appended (from the next index) and data bytes. `delay` refuses journals: an entry's
//!   timestamp is its wall-clock append time, so "now − timestamp" is its age, not a delay.

use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;
use shmbus::admin::{self, Scalar};
use shmbus::journal::Journal;
use shmbus::stats::{self, ChannelStats};
use shmbus::time::monotonic_ns;
use shmbus::topic::{Subscriber, Topic, TopicRecvTimeoutError};
use shmbus::{Domain, Kind, OpenError};

use crate::output::JsonLines;
use crate::{CliError, Ctx, Result};

/// How often the counters of a queue, stream, pool or journal are sampled (unless
/// `--interval` is shorter).
pub const SAMPLE_PERIOD: Duration = Duration::from_millis(25);

/// Which statistic to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// Message rate and the spread of intervals.
    Hz,
    /// Bytes per second and message sizes.
    Bw,
    /// Publish → receive latency.
    Delay,
}

impl Verb {
    fn name(self) -> &'static str {
        match self {
            Verb::Hz => "hz",
            Verb::Bw => "bw",
            Verb::Delay => "delay",
        }
    }
}

/// `shmbus hz|bw|delay (--domain D NAME [--wait SECS] | --journal DIR) [--window N]
/// [--interval SECS] [--count K] [--json]`
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The channel's domain (or give the channel as D/NAME). Default: $SHMBUS_DOMAIN.
    #[arg(long, value_name = "D")]
    pub domain: Option<String>,
    /// The channel's name, or D/NAME.
    #[arg(required_unless_present = "journal", conflicts_with = "journal")]
    pub name: Option<String>,
    /// Watch the journal in this directory instead of a channel (not for `delay`).
    // Not in conflict with --domain, which a SHMBUS_DOMAIN in the environment sets: a
    // channel NAME with it is refused, and a domain alone is ignored.
    #[arg(long, value_name = "DIR")]
    pub journal: Option<PathBuf>,
    /// What the statistics cover: the last N messages (topic) or the last N counter samples
    /// of 25 ms (queue, stream, pool, journal).
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub window: u64,
    /// Print a line every SECS seconds.
    #[arg(long, value_name = "SECS", default_value = "1", value_parser = parse_interval)]
    pub interval: Duration,
    /// Exit (with 0) after printing this many lines (at least 1). Default: run until killed.
    #[arg(long, value_name = "K", value_parser = crate::units::count)]
    pub count: Option<u64>,
    /// One JSON object per line, with raw numbers (ns, bytes/s, msg/s; null where unknown).
    #[arg(long)]
    pub json: bool,
    /// Wait up to SECS seconds (or a duration: `500ms`, `2m`) for the channel to exist, so
    /// the watch can start before its publisher. Default: fail at once if it does not exist.
    #[arg(long, value_name = "SECS", value_parser = crate::parse_wait, conflicts_with = "journal")]
    pub wait: Option<Duration>,
}

/// Parses a duration (bare number: seconds, fractions allowed) from 1 ms to a day.
fn parse_interval(s: &str) -> std::result::Result<Duration, String> {
    let d = crate::units::secs_duration(s)?;
    if !(Duration::from_millis(1)..=Duration::from_secs(86_400)).contains(&d) {
        return Err(format!("{s} is out of range (1ms to 1d)"));
    }
    Ok(d)
}

/// Runs `verb` until `--count` lines are printed (or for ever).
pub fn run(ctx: &Ctx, args: &Args, verb: Verb) -> Result<()> {
    let mut printer = Printer::new(args, verb);
    if let Some(dir) = &args.journal {
        if verb == Verb::Delay {
            return Err(CliError::usage(
                "delay: a journal's entries carry their wall-clock append time, not a publish time to measure a delay \
                 from; delay works on topics",
            ));
        }
        let shown = dir.display().to_string();
        if !dir.is_dir() {
            return Err(CliError::msg(format!("{}: no journal '{shown}'", verb.name())));
        }
        let mut sampler = JournalSampler { dir: dir.clone(), shown, verb, previous: None };
        return watch_counters(&mut sampler, args, &mut printer);
    }
    // clap requires both without --journal.
    let Some(name) = args.name.as_deref() else {
        return Err(CliError::usage("give a channel (--domain D NAME, or D/NAME), or --journal DIR"));
    };
    let ch = crate::target::channel(args.domain.as_deref(), name)?;
    let (domain, name) = (ctx.domain(&ch.domain)?, ch.name.as_str());
    ctx.wait_for(&domain, &[name], args.wait)?;
    let guard = Guard::new(&domain, name, verb)?;
    match guard.kind {
        Kind::Topic => watch_topic(&domain, &guard, args, &mut printer),
        Kind::Journal => Err(CliError::usage(format!(
            "{}: '{name}' is a journal's segment; watch the journal with --journal DIR",
            verb.name()
        ))),
        kind if verb == Verb::Delay => {
            Err(CliError::usage(format!("delay: {kind} '{name}' carries no timestamps; delay works on topics")))
        }
        _ => {
            let mut sampler = ChannelSampler { domain, guard, previous: None };
            watch_counters(&mut sampler, args, &mut printer)
        }
    }
}

/// The channel being watched: notices when it is removed or replaced.
struct Guard {
    domain: String,
    name: String,
    verb: Verb,
    kind: Kind,
    created_ns: u64,
}

impl Guard {
    fn new(domain: &Domain, name: &str, verb: Verb) -> Result<Guard> {
        let header = match admin::inspect_channel(domain, name) {
            Ok(r) => r.header,
            Err(OpenError::NotFound { .. }) => {
                return Err(crate::target::missing(domain.name(), name, crate::target::WaitHint::Offer))
            }
            Err(e) => return Err(e.into()),
        };
        Ok(Guard {
            domain: domain.name().to_owned(),
            name: name.to_owned(),
            verb,
            kind: header.kind,
            created_ns: header.created_ns,
        })
    }

    /// The error to end with when the channel is gone.
    fn gone(&self) -> CliError {
        CliError::msg(format!(
            "{}: {} {}/{} disappeared while watched",
            self.verb.name(),
            self.kind,
            self.domain,
            self.name
        ))
    }

    /// Fails once the channel was removed, or replaced by another of the same name.
    fn check(&self, domain: &Domain) -> Result<()> {
        match admin::inspect_channel(domain, &self.name) {
            Ok(r) if r.header.created_ns == self.created_ns && r.header.kind == self.kind => Ok(()),
            Ok(_) | Err(OpenError::NotFound { .. }) => Err(self.gone()),
            Err(e) => Err(e.into()),
        }
    }
}

/// One `--json` line of `hz`, `bw` or `delay`: what was watched, then the verb's figures
/// (`null` until there is something to measure).
#[derive(Debug, Serialize)]
struct RateLine<'k> {
    #[serde(flatten)]
    head: Head<'k>,
    #[serde(flatten)]
    figures: Figures,
}

/// What a line was measured over.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Head<'k> {
    /// The last `window` messages of a topic, seen by a subscriber.
    Topic { verb: &'static str, kind: &'static str, window: usize, new: u64, missed: u64 },
    /// The last `window` counter samples of a queue, stream, pool or journal.
    Counters { verb: &'static str, kind: &'k str, window: usize, sample_ns: u64, messages: u64, new: u64 },
}

/// The figures of a line, per verb (and for `hz`, per source).
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Figures {
    /// `hz` on a topic.
    TopicHz {
        rate_per_s: Option<f64>,
        interval_min_ns: Option<u64>,
        interval_max_ns: Option<u64>,
        interval_mean_ns: Option<u64>,
        interval_std_ns: Option<u64>,
    },
    /// `hz` on counters.
    CounterHz {
        rate_per_s: Option<f64>,
        sample_rate_min_per_s: Option<f64>,
        sample_rate_max_per_s: Option<f64>,
        sample_rate_std_per_s: Option<f64>,
    },
    /// `bw` (sizes `null` on counters: they have totals, not each message's size).
    Bw { bytes_per_s: Option<f64>, size_mean: Option<f64>, size_min: Option<u64>, size_max: Option<u64> },
    /// `delay` (topics only).
    Delay { min_ns: Option<u64>, p50_ns: Option<u64>, p90_ns: Option<u64>, p99_ns: Option<u64>, max_ns: Option<u64> },
}

/// Paces the lines and writes them.
struct Printer {
    verb: Verb,
    json: bool,
    count: Option<u64>,
    printed: u64,
    interval: Duration,
    next: Instant,
}

impl Printer {
    fn new(args: &Args, verb: Verb) -> Printer {
        Printer {
            verb,
            json: args.json,
            count: args.count,
            printed: 0,
            interval: args.interval,
            next: Instant::now() + args.interval,
        }
    }

    /// Time left until the next line is due.
    fn until_next(&self) -> Duration {
        self.next.saturating_duration_since(Instant::now())
    }

    /// Writes one line (text or JSON); returns whether `--count` lines are now printed.
    fn line(&mut self, text: &str, json: &RateLine) -> Result<bool> {
        let mut out = std::io::stdout().lock();
        if self.json {
            JsonLines::new().write(&mut out, json)?;
        } else {
            writeln!(out, "{text}")?;
        }
        out.flush()?;
        self.printed += 1;
        // The next line is due one interval after this one was due, so the lines keep their
        // pace; after a stall, one interval from now.
        self.next = (self.next + self.interval).max(Instant::now());
        Ok(self.count.is_some_and(|n| self.printed >= n))
    }
}

// ---------------------------------------------------------------------------------------
// Topics: a subscriber's view of each message.

/// One message as the watching subscriber saw it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    seq: u64,
    published_ns: u64,
    received_ns: u64,
    len: usize,
}

/// Subscribes to the topic and prints a line every interval over the last `--window`
/// messages.
fn watch_topic(domain: &Domain, guard: &Guard, args: &Args, printer: &mut Printer) -> Result<()> {
    let sub: Subscriber = match Topic::open(domain, &guard.name) {
        Ok(t) => t.subscriber()?,
        Err(OpenError::NotFound { .. }) => return Err(guard.gone()),
        Err(e) => return Err(e.into()),
    };
    let window = args.window as usize;
    let mut seen: VecDeque<Seen> = VecDeque::with_capacity(window.min(4096));
    let mut buf = Vec::new();
    let (mut new, mut missed) = (0u64, 0u64);
    loop {
        let wait = printer.until_next();
        if !wait.is_zero() {
            match sub.recv_into_timeout(&mut buf, wait) {
                Ok(m) => {
                    if seen.len() == window {
                        seen.pop_front();
                    }
                    seen.push_back(Seen {
                        seq: m.seq(),
                        published_ns: m.ts_ns(),
                        received_ns: monotonic_ns(),
                        len: m.len(),
                    });
                    new += 1;
                }
                Err(TopicRecvTimeoutError::Lagged { missed: n }) => missed += n,
                Err(TopicRecvTimeoutError::Timeout) => {}
                Err(e) => return Err(CliError::msg(format!("{}: receive failed: {e}", printer.verb.name()))),
            }
            continue;
        }
        guard.check(domain)?;
        let (text, json) = topic_line(printer.verb, &seen, new, missed);
        if printer.line(&text, &json)? {
            return Ok(());
        }
        (new, missed) = (0, 0);
    }
}

/// Mean and population standard deviation.
fn mean_std(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// The `q`-quantile of sorted `xs` (nearest rank).
fn quantile(sorted: &[u64], q: f64) -> u64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// One line of `verb` over the topic messages `seen`; `new` arrived and `missed` were
/// skipped since the last line.
fn topic_line(verb: Verb, seen: &VecDeque<Seen>, new: u64, missed: u64) -> (String, RateLine<'static>) {
    let n = seen.len();
    let head = Head::Topic { verb: verb.name(), kind: "topic", window: n, new, missed };
    let stale = if new == 0 && n > 0 { " (no new messages)" } else { "" };
    let missed_note = if missed > 0 { format!("  missed: {missed}") } else { String::new() };
    let (text, figures) = match verb {
        Verb::Hz => {
            // Rate from the sequence numbers and publish times of the first and last
            // message (messages this subscriber missed count too); intervals between
            // consecutive sequence numbers only.
            let (first, last) = (seen.front(), seen.back());
            let span = match (first, last) {
                (Some(f), Some(l)) if l.seq > f.seq && l.published_ns > f.published_ns => {
                    Some((l.seq - f.seq, l.published_ns - f.published_ns))
                }
                _ => None,
            };
            let rate = span.map(|(msgs, ns)| msgs as f64 * 1e9 / ns as f64);
            let intervals: Vec<f64> = seen
                .iter()
                .zip(seen.iter().skip(1))
                .filter(|(a, b)| b.seq == a.seq + 1)
                .map(|(a, b)| b.published_ns.saturating_sub(a.published_ns) as f64)
                .collect();
            let spread = (!intervals.is_empty()).then(|| {
                let (mean, std) = mean_std(&intervals);
                let min = intervals.iter().copied().fold(f64::INFINITY, f64::min);
                let max = intervals.iter().copied().fold(0.0, f64::max);
                (min, max, mean, std)
            });
            let figures = Figures::TopicHz {
                rate_per_s: rate,
                interval_min_ns: spread.map(|s| s.0 as u64),
                interval_max_ns: spread.map(|s| s.1 as u64),
                interval_mean_ns: spread.map(|s| s.2 as u64),
                interval_std_ns: spread.map(|s| s.3 as u64),
            };
            let text = match (rate, spread) {
                (Some(r), Some((min, max, _, std))) => format!(
                    "average rate: {}  min: {} max: {} std dev: {} window: {n}{missed_note}{stale}",
                    human_rate(r),
                    human_ns(min),
                    human_ns(max),
                    human_ns(std)
                ),
                (Some(r), None) => format!("average rate: {}  window: {n}{missed_note}{stale}", human_rate(r)),
                _ if n == 0 => "no messages yet".into(),
                _ => format!("{n} message(s) so far: too few for a rate{missed_note}"),
            };
            (text, figures)
        }
        Verb::Bw => {
            let sizes: Vec<u64> = seen.iter().map(|s| s.len as u64).collect();
            // Bytes after the first message over the time since it was published.
            let rate = match (seen.front(), seen.back()) {
                (Some(f), Some(l)) if n > 1 && l.published_ns > f.published_ns => {
                    Some(sizes[1..].iter().sum::<u64>() as f64 * 1e9 / (l.published_ns - f.published_ns) as f64)
                }
                _ => None,
            };
            let mean = (n > 0).then(|| sizes.iter().sum::<u64>() as f64 / n as f64);
            let (min, max) = (sizes.iter().min().copied(), sizes.iter().max().copied());
            let figures = Figures::Bw { bytes_per_s: rate, size_mean: mean, size_min: min, size_max: max };
            let text = match (rate, mean, min, max) {
                (Some(r), Some(mean), Some(min), Some(max)) => format!(
                    "{}/s from {n} messages  mean: {} min: {} max: {}{missed_note}{stale}",
                    human_bytes(r),
                    human_bytes(mean),
                    human_bytes(min as f64),
                    human_bytes(max as f64)
                ),
                _ if n == 0 => "no messages yet".into(),
                _ => format!("{n} message(s) so far: too few for a rate{missed_note}"),
            };
            (text, figures)
        }
        Verb::Delay => {
            let mut delays: Vec<u64> = seen.iter().map(|s| s.received_ns.saturating_sub(s.published_ns)).collect();
            delays.sort_unstable();
            let q = |q: f64| (!delays.is_empty()).then(|| quantile(&delays, q));
            let (p50, p90, p99, max) = (q(0.5), q(0.9), q(0.99), delays.last().copied());
            let figures =
                Figures::Delay { min_ns: delays.first().copied(), p50_ns: p50, p90_ns: p90, p99_ns: p99, max_ns: max };
            let text = match (p50, p90, p99, max) {
                (Some(p50), Some(p90), Some(p99), Some(max)) => format!(
                    "p50: {} p90: {} p99: {} max: {} window: {n}{missed_note}{stale}",
                    human_ns(p50 as f64),
                    human_ns(p90 as f64),
                    human_ns(p99 as f64),
                    human_ns(max as f64)
                ),
                _ => "no messages yet".into(),
            };
            (text, figures)
        }
    };
    (text, RateLine { head, figures })
}

// ---------------------------------------------------------------------------------------
// Queues, streams, pools, journals: counter samples.

/// Cumulative totals at one instant.
#[derive(Debug, Clone, Copy)]
struct Totals {
    /// `CLOCK_MONOTONIC` time of the reading.
    taken_ns: u64,
    /// Messages sent since the previous reading.
    messages: u64,
    /// Payload bytes sent since the previous reading, `None` when the senders did not
    /// count them (messages moved that no sender's counter shows).
    bytes: Option<u64>,
}

/// Something whose activity can be sampled.
trait Sampler {
    /// The kind's name, for the output.
    fn kind(&self) -> String;
    /// What moved since the previous call (the first call: `None`, it only takes a reading).
    fn sample(&mut self) -> Result<Option<Totals>>;
    /// Fails once the watched thing is gone.
    fn check(&mut self) -> Result<()>;
}

/// A queue, stream or pool, through [`stats::channel_stats`].
struct ChannelSampler {
    domain: Domain,
    guard: Guard,
    previous: Option<ChannelStats>,
}

/// The kind's own channel-wide count of messages sent, where it keeps one.
fn channel_sent(s: &ChannelStats) -> Option<u64> {
    match s.kind {
        Kind::Queue => s.description.last_seq,
        Kind::Pool => s.description.status.iter().find(|(k, _)| *k == "jobs_dispatched").and_then(|(_, v)| match v {
            Scalar::Int(n) => Some(*n),
            _ => None,
        }),
        _ => None,
    }
}

impl Sampler for ChannelSampler {
    fn kind(&self) -> String {
        self.guard.kind.to_string()
    }

    fn sample(&mut self) -> Result<Option<Totals>> {
        let now = match stats::channel_stats(&self.domain, &self.guard.name) {
            Ok(s) if s.kind == self.guard.kind => s,
            Ok(_) | Err(OpenError::NotFound { .. }) => return Err(self.guard.gone()),
            Err(e) => return Err(e.into()),
        };
        let Some(before) = self.previous.take() else {
            self.previous = Some(now);
            return Ok(None);
        };
        let r = stats::rates(&before, &now);
        // Counters are untrusted input: add without overflowing.
        let (counted, bytes) = r
            .participants
            .iter()
            .filter(|p| stats::is_sender(p.participant.role_name))
            .fold((0u64, 0u64), |(m, b), p| (m.saturating_add(p.delta.messages), b.saturating_add(p.delta.bytes)));
        let messages = match (channel_sent(&before), channel_sent(&now)) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => counted,
        };
        let taken_ns = now.taken_ns;
        self.previous = Some(now);
        Ok(Some(Totals { taken_ns, messages, bytes: (counted > 0 || messages == 0).then_some(bytes) }))
    }

    fn check(&mut self) -> Result<()> {
        self.guard.check(&self.domain)
    }
}

/// A journal, through [`Journal::status`].
struct JournalSampler {
    dir: PathBuf,
    /// The directory as the user gave it.
    shown: String,
    verb: Verb,
    /// The previous reading: its time, next index and data bytes.
    previous: Option<(u64, u64, u64)>,
}

impl JournalSampler {
    fn gone(&self) -> CliError {
        CliError::msg(format!("{}: journal '{}' disappeared while watched", self.verb.name(), self.shown))
    }
}

impl Sampler for JournalSampler {
    fn kind(&self) -> String {
        "journal".into()
    }

    fn sample(&mut self) -> Result<Option<Totals>> {
        let st = match Journal::status(&self.dir) {
            Ok(st) => st,
            Err(OpenError::NotFound { .. }) => return Err(self.gone()),
            Err(e) => return Err(CliError::msg(format!("{}: journal '{}': {e}", self.verb.name(), self.shown))),
        };
        let now = (monotonic_ns(), st.next_index, st.bytes);
        let Some((_, index, bytes)) = self.previous.replace(now) else { return Ok(None) };
        // Retention removing a cycle lowers the bytes in use: that sample counts none.
        Ok(Some(Totals {
            taken_ns: now.0,
            messages: now.1.saturating_sub(index),
            bytes: Some(now.2.saturating_sub(bytes)),
        }))
    }

    fn check(&mut self) -> Result<()> {
        if self.dir.is_dir() {
            Ok(())
        } else {
            Err(self.gone())
        }
    }
}

/// One sampling period's activity.
#[derive(Debug, Clone, Copy)]
struct Sample {
    ns: u64,
    messages: u64,
    bytes: Option<u64>,
}

/// Samples every [`SAMPLE_PERIOD`] and prints a line every interval over the last
/// `--window` samples.
fn watch_counters(sampler: &mut dyn Sampler, args: &Args, printer: &mut Printer) -> Result<()> {
    let period = SAMPLE_PERIOD.min(args.interval);
    let window = args.window as usize;
    let mut samples: VecDeque<Sample> = VecDeque::with_capacity(window.min(4096));
    let mut last_ns = 0u64;
    let mut new = 0u64;
    if sampler.sample()?.is_none() {
        last_ns = monotonic_ns();
    }
    loop {
        let wait = printer.until_next();
        if !wait.is_zero() {
            std::thread::sleep(wait.min(period));
            if let Some(t) = sampler.sample()? {
                if samples.len() == window {
                    samples.pop_front();
                }
                samples.push_back(Sample {
                    ns: t.taken_ns.saturating_sub(last_ns).max(1),
                    messages: t.messages,
                    bytes: t.bytes,
                });
                last_ns = t.taken_ns;
                new = new.saturating_add(t.messages);
            }
            continue;
        }
        sampler.check()?;
        let kind = sampler.kind();
        let (text, json) = counter_line(printer.verb, &kind, &samples, new, period);
        if printer.line(&text, &json)? {
            return Ok(());
        }
        new = 0;
    }
}

/// One line of `verb` over counter `samples`; `new` messages moved since the last line.
fn counter_line<'k>(
    verb: Verb,
    kind: &'k str,
    samples: &VecDeque<Sample>,
    new: u64,
    period: Duration,
) -> (String, RateLine<'k>) {
    let n = samples.len();
    let total_ns: u64 = samples.iter().map(|s| s.ns).sum();
    // Counts from shared memory are untrusted: add without overflowing.
    let messages = samples.iter().fold(0u64, |a, s| a.saturating_add(s.messages));
    let sample_ns = period.as_nanos() as u64;
    let head = Head::Counters { verb: verb.name(), kind, window: n, sample_ns, messages, new };
    let note = format!("window: {n} samples of {}", human_ns(sample_ns as f64));
    let stale = if new == 0 && messages > 0 { " (no new messages)" } else { "" };
    let (text, figures) = match verb {
        Verb::Hz | Verb::Delay => {
            // Null, not 0, while the window holds no message (as for a topic).
            let rate = (messages > 0).then(|| messages as f64 * 1e9 / total_ns as f64);
            let rates: Vec<f64> = samples.iter().map(|s| s.messages as f64 * 1e9 / s.ns as f64).collect();
            let spread = (messages > 0).then(|| {
                let (_, std) = mean_std(&rates);
                let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
                let max = rates.iter().copied().fold(0.0, f64::max);
                (min, max, std)
            });
            let figures = Figures::CounterHz {
                rate_per_s: rate,
                sample_rate_min_per_s: spread.map(|s| s.0),
                sample_rate_max_per_s: spread.map(|s| s.1),
                sample_rate_std_per_s: spread.map(|s| s.2),
            };
            let text = match (rate, spread) {
                _ if messages == 0 => format!("no messages yet ({note})"),
                (Some(r), Some((min, max, std))) => format!(
                    "average rate: {}  per sample min: {} max: {} std dev: {}  {note}{stale}",
                    human_rate(r),
                    human_rate(min),
                    human_rate(max),
                    human_rate(std)
                ),
                _ => format!("no messages yet ({note})"),
            };
            (text, figures)
        }
        Verb::Bw => {
            let bytes = samples.iter().try_fold(0u64, |a, s| Some(a.saturating_add(s.bytes?)));
            let rate = match bytes {
                Some(b) if messages > 0 => Some(b as f64 * 1e9 / total_ns as f64),
                _ => None,
            };
            let mean = match bytes {
                Some(b) if messages > 0 => Some(b as f64 / messages as f64),
                _ => None,
            };
            // Counters have totals, not each message's size.
            let figures = Figures::Bw { bytes_per_s: rate, size_mean: mean, size_min: None, size_max: None };
            let text = match (rate, mean) {
                _ if messages == 0 => format!("no messages yet ({note})"),
                (Some(r), Some(mean)) => {
                    format!("{}/s from {messages} messages  mean: {}  {note}{stale}", human_bytes(r), human_bytes(mean))
                }
                _ => {
                    format!("{messages} messages; their bytes are not counted by this {kind}'s senders  {note}{stale}")
                }
            };
            (text, figures)
        }
    };
    (text, RateLine { head, figures })
}

// ---------------------------------------------------------------------------------------
// Units.

/// Nanoseconds as `850ns`, `12.3us`, `1.20ms`, `2.50s`.
fn human_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0}ns")
    } else if ns < 1e6 {
        format!("{:.1}us", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2}ms", ns / 1e6)
    } else {
        format!("{:.2}s", ns / 1e9)
    }
}

/// Bytes as `100 B`, `12.0 KiB`, `4.50 MiB` (powers of 1024, the units size flags take).
fn human_bytes(b: f64) -> String {
    crate::units::iec_bytes(b)
}

/// A rate as `1000.2 msg/s`.
fn human_rate(r: f64) -> String {
    format!("{r:.1} msg/s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_scale() {
        assert_eq!(human_ns(850.0), "850ns");
        assert_eq!(human_ns(12_300.0), "12.3us");
        assert_eq!(human_ns(1_200_000.0), "1.20ms");
        assert_eq!(human_ns(2.5e9), "2.50s");
        assert_eq!(human_bytes(100.0), "100 B");
        assert_eq!(human_bytes(12_288.0), "12.0 KiB");
        assert_eq!(human_bytes(4.5 * 1048576.0), "4.50 MiB");
    }

    #[test]
    fn intervals_parse() {
        assert_eq!(parse_interval("0.5"), Ok(Duration::from_millis(500)));
        assert!(parse_interval("0").is_err());
        assert!(parse_interval("-1").is_err());
        assert!(parse_interval("nan").is_err());
        assert!(parse_interval("x").is_err());
    }

    /// A line as the JSON a script reads.
    fn value(line: RateLine) -> serde_json::Value {
        serde_json::to_value(line).unwrap()
    }

    #[test]
    fn topic_hz_counts_missed_messages_in_the_rate_not_the_intervals() {
        // Messages 1, 2, 3 then 10: 9 sequence numbers over 9 ms; intervals of 1 ms only.
        let seen: VecDeque<Seen> = [(1, 0), (2, 1), (3, 2), (10, 9)]
            .iter()
            .map(|&(seq, ms)| Seen { seq, published_ns: ms * 1_000_000, received_ns: ms * 1_000_000 + 500, len: 8 })
            .collect();
        let j = value(topic_line(Verb::Hz, &seen, 4, 6).1);
        assert!((j["rate_per_s"].as_f64().unwrap() - 1000.0).abs() < 1e-6, "{j}");
        assert_eq!(j["interval_max_ns"], 1_000_000);
        assert_eq!(j["missed"], 6);
        let d = value(topic_line(Verb::Delay, &seen, 4, 0).1);
        assert_eq!(d["p50_ns"], 500);
        let (text, e) = topic_line(Verb::Bw, &VecDeque::new(), 0, 0);
        let e = value(e);
        assert_eq!(text, "no messages yet");
        assert!(e["bytes_per_s"].is_null());
    }

    #[test]
    fn counter_bw_without_counted_bytes_says_so() {
        let samples: VecDeque<Sample> = (0..4).map(|_| Sample { ns: 25_000_000, messages: 5, bytes: None }).collect();
        let (text, j) = counter_line(Verb::Bw, "queue", &samples, 20, SAMPLE_PERIOD);
        let j = value(j);
        assert!(j["bytes_per_s"].is_null());
        assert!(text.contains("not counted"), "{text}");
        let h = value(counter_line(Verb::Hz, "queue", &samples, 20, SAMPLE_PERIOD).1);
        assert!((h["rate_per_s"].as_f64().unwrap() - 200.0).abs() < 1e-6, "{h}");
        assert_eq!(h["sample_rate_std_per_s"], 0.0);
    }
}
