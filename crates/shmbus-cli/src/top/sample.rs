//! What `top` shows: one [`Row`] per channel or journal, made from two successive snapshots.
//!
//! A [`Sampler`] keeps the previous snapshot of every channel (`shmbus::stats`) and journal
//! (`Journal::status`) it watches; each [`Sampler::sample`] takes new ones and turns the
//! difference into rates. The first sample of a channel has no interval yet: its rates are
//! `None`. A channel missing from a sample (removed meanwhile) is reported in
//! [`Sample::gone`] and forgotten.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;

use shmbus::stats::{self, ChannelRates, ChannelStats, Counters};
use shmbus::time::monotonic_ns;
use shmbus::{Journal, JournalStatus, OpenError};

use crate::{Ctx, Result};

/// How many past rates and latencies a channel keeps for its sparklines.
pub const HISTORY: usize = 60;

/// What names a row across samples: its domain (none for a journal) and its name (the
/// journal's directory as given).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// The channel's domain; `None` for a journal.
    pub domain: Option<String>,
    /// The channel's name, or the journal's directory.
    pub name: String,
}

impl Key {
    /// The name in the table: `domain/name`, or a journal directory's last component.
    pub fn short(&self) -> String {
        match &self.domain {
            Some(d) => format!("{d}/{}", self.name),
            None => {
                let p = std::path::Path::new(&self.name);
                p.file_name().map_or_else(|| self.name.clone(), |f| f.to_string_lossy().into_owned())
            }
        }
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.domain {
            Some(d) => write!(f, "{d}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// A channel's activity over the last interval (every rate per second).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    /// Messages entering the channel: what its senders counted, else the growth of its
    /// sequence number (topic, queue), else what its receivers counted. Journals: entries
    /// appended.
    pub rate: f64,
    /// Messages the sending participants counted.
    pub sent_per_s: f64,
    /// Messages the receiving participants counted.
    pub received_per_s: f64,
    /// Payload bytes sent (received where the senders count nothing). Journals: growth of
    /// the data in use.
    pub bandwidth: f64,
    /// Messages lost by receivers.
    pub drops_per_s: f64,
    /// Sends that found the channel full (blocked sends).
    pub full_per_s: f64,
    /// Calls that waited.
    pub blocked_per_s: f64,
    /// `FUTEX_WAIT` and `FUTEX_WAKE` calls.
    pub futex_per_s: f64,
    /// The slowest receiver's lag (topics: messages; journals: entries behind, per named
    /// reader).
    pub max_lag: Option<u64>,
    /// Median sampled latency in the interval, ns.
    pub p50: Option<u64>,
    /// 99th percentile sampled latency in the interval, ns.
    pub p99: Option<u64>,
}

/// One participant of a channel.
#[derive(Debug, Clone, PartialEq)]
pub struct Participant {
    /// Its entry in the participant table.
    pub index: usize,
    /// Its process id.
    pub pid: u32,
    /// Its process's name (`/proc/PID/comm`), with the verb for the shmbus CLI
    /// (`shmbus sub`, from `/proc/PID/cmdline`); `None` when dead or unreadable.
    pub process: Option<String>,
    /// Its role ("publisher", "subscriber", …).
    pub role: String,
    /// Whether its process is alive.
    pub alive: bool,
    /// Messages per second in the last interval (`None` before there is one).
    pub messages_per_s: Option<f64>,
    /// Bytes per second in the last interval.
    pub bytes_per_s: Option<f64>,
    /// Messages behind the newest (topic receivers).
    pub lag: Option<u64>,
    /// Messages published past the history that this receiver had not read (its lag beyond
    /// the topic's history): lost to it, though its own `drops` counter counts them only
    /// when it next reads. 0 for other kinds.
    pub overrun: u64,
    /// Its counters since it registered.
    pub counters: Counters,
    /// Median latency in the last interval, ns.
    pub p50: Option<u64>,
    /// 99th percentile latency in the last interval, ns.
    pub p99: Option<u64>,
}

impl Participant {
    /// Messages it lost: those it counted (`counters.drops`) and those already overwritten
    /// before it read them ([`overrun`](Self::overrun)), so a stuck subscriber shows its
    /// losses before it reads again.
    pub fn drops(&self) -> u64 {
        self.counters.drops.saturating_add(self.overrun)
    }
}

/// A named reader of a journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reader {
    /// Its name.
    pub name: String,
    /// The index it resumes at.
    pub position: u64,
    /// Entries behind the newest: `next_index - position`.
    pub lag: u64,
    /// The live process holding it.
    pub holder_pid: Option<u32>,
}

/// What a journal row has beyond [`Metrics`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalState {
    /// Oldest retained index.
    pub first_index: u64,
    /// Index of the next entry.
    pub next_index: u64,
    /// Bytes of its cycle files on disk.
    pub file_bytes: u64,
    /// Cycle files present.
    pub cycles: usize,
    /// Named readers.
    pub readers: Vec<Reader>,
}

/// Rates and p50 latencies of the last [`HISTORY`] intervals, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// Messages (journal entries) per second.
    pub rate: VecDeque<u64>,
    /// Median latency in ns (0: no sample).
    pub p50: VecDeque<u64>,
}

impl History {
    fn push(&mut self, m: &Metrics) {
        for (q, v) in [(&mut self.rate, m.rate.round() as u64), (&mut self.p50, m.p50.unwrap_or(0))] {
            if q.len() == HISTORY {
                q.pop_front();
            }
            q.push_back(v);
        }
    }
}

/// One line of `top`: a channel or journal.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Which one.
    pub key: Key,
    /// Its kind ("topic", …, "journal"); `None` when it could not be read.
    pub kind: Option<String>,
    /// Why it could not be read.
    pub error: Option<String>,
    /// Live sending endpoints (journals: appenders).
    pub senders: Option<usize>,
    /// Live receiving endpoints (journals: named readers).
    pub receivers: Option<usize>,
    /// Activity over the last interval; `None` on its first sample.
    pub metrics: Option<Metrics>,
    /// Its participants (channels).
    pub participants: Vec<Participant>,
    /// Its state (journals).
    pub journal: Option<JournalState>,
    /// Its past rates and latencies.
    pub history: History,
    /// Its schema in one line (`crate::schema::summary`), if it has one.
    pub schema: Option<String>,
    /// What its kind says of its state in one line, where that is more than the columns show
    /// (a service's requests, responses, timeouts and requests in flight).
    pub note: Option<String>,
}

impl Row {
    fn failed(key: Key, error: String) -> Row {
        Row {
            key,
            kind: None,
            error: Some(error),
            senders: None,
            receivers: None,
            metrics: None,
            participants: Vec::new(),
            journal: None,
            history: History::default(),
            schema: None,
            note: None,
        }
    }
}

/// The result of one [`Sampler::sample`].
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// Every channel and journal, in domain and name order (journals last, as given).
    pub rows: Vec<Row>,
    /// Channels seen in the previous sample and missing now.
    pub gone: Vec<Key>,
    /// A domain that could not be listed, and why.
    pub warnings: Vec<String>,
}

/// What a sampler remembers of a channel or journal between samples.
#[derive(Debug)]
enum Previous {
    Channel(ChannelStats),
    Journal { status: JournalStatus, taken_ns: u64 },
}

/// Takes successive snapshots of the channels of one domain (or all) and of some journals.
#[derive(Debug)]
pub struct Sampler {
    domain: Option<String>,
    journals: Vec<PathBuf>,
    previous: HashMap<Key, Previous>,
    history: HashMap<Key, History>,
    /// Each channel's schema line, read once when it is first seen (a schema is fixed for
    /// the channel's life; a channel gone from one sample is read again if it comes back).
    schemas: HashMap<Key, Option<String>>,
}

impl Sampler {
    /// A sampler of `domain` (every domain when `None`) and of the journal directories
    /// `journals`.
    pub fn new(domain: Option<String>, journals: Vec<PathBuf>) -> Sampler {
        Sampler { domain, journals, previous: HashMap::new(), history: HashMap::new(), schemas: HashMap::new() }
    }

    /// The discovery events of what this sampler lists: its domain, or every domain under
    /// the root (`None` if they cannot be watched: the view then only refreshes on its clock).
    pub fn watch(&self, ctx: &Ctx, interval: std::time::Duration) -> Option<shmbus::watch::DomainWatch> {
        let mut w = match &self.domain {
            Some(d) => ctx.domain(d).ok()?.watch().ok()?,
            None => shmbus::watch::DomainWatch::all(&ctx.root).ok()?,
        };
        // Participants are read as often as the view samples anyway.
        w.set_participant_interval(interval);
        Some(w)
    }

    /// Takes a snapshot of everything watched and the rates since the previous one. Fails
    /// only when the domains cannot be listed (the root is unreadable, a bad domain name).
    pub fn sample(&mut self, ctx: &Ctx) -> Result<Sample> {
        let mut out = Sample::default();
        let mut seen: HashMap<Key, Previous> = HashMap::new();
        for domain in ctx.domains(self.domain.as_deref())? {
            let listed = match stats::domain_stats(&domain) {
                Ok(l) => l,
                Err(e) => {
                    out.warnings.push(format!("domain {}: {e}", domain.name()));
                    continue;
                }
            };
            for (name, snapshot) in listed {
                let key = Key { domain: Some(domain.name().to_owned()), name };
                match snapshot {
                    // Removed between the listing and the read: as if not listed.
                    Err(OpenError::NotFound { .. }) => {}
                    Err(e) => out.rows.push(Row::failed(key, e.to_string())),
                    Ok(now) => {
                        let earlier = match self.previous.get(&key) {
                            Some(Previous::Channel(s)) => Some(s),
                            _ => None,
                        };
                        let history = self.history.entry(key.clone()).or_default();
                        let mut row = channel_row(key.clone(), earlier, &now, history);
                        row.schema = self
                            .schemas
                            .entry(key.clone())
                            .or_insert_with(|| {
                                let report = shmbus::admin::inspect_channel(&domain, &key.name).ok()?;
                                report.schema.map(|s| crate::schema::summary(&s))
                            })
                            .clone();
                        out.rows.push(row);
                        seen.insert(key, Previous::Channel(now));
                    }
                }
            }
        }
        for dir in &self.journals {
            let key = Key { domain: None, name: dir.display().to_string() };
            match Journal::status(dir) {
                Err(e) => out.rows.push(Row::failed(key, e.to_string())),
                Ok(status) => {
                    let taken_ns = monotonic_ns();
                    let earlier = match self.previous.get(&key) {
                        Some(Previous::Journal { status, taken_ns }) => Some((status, *taken_ns)),
                        _ => None,
                    };
                    let history = self.history.entry(key.clone()).or_default();
                    out.rows.push(journal_row(key.clone(), earlier, (&status, taken_ns), history));
                    seen.insert(key, Previous::Journal { status, taken_ns });
                }
            }
        }
        out.gone = self.previous.keys().filter(|k| !seen.contains_key(*k)).cloned().collect();
        out.gone.sort();
        self.history.retain(|k, _| seen.contains_key(k));
        self.schemas.retain(|k, _| seen.contains_key(k));
        self.previous = seen;
        Ok(out)
    }
}

/// The name of process `pid` (`/proc/PID/comm`), if it can be read; for the shmbus CLI,
/// with its verb (`shmbus sub`, `shmbus journal tail`) from `/proc/PID/cmdline`. A process
/// whose command line cannot be read (gone meanwhile, another user's under `hidepid`) keeps
/// its plain name.
fn process_name(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    let comm = comm.trim_end_matches('\n');
    if comm.is_empty() {
        return None;
    }
    if comm == "shmbus" {
        if let Some(verb) = std::fs::read(format!("/proc/{pid}/cmdline")).ok().and_then(|c| cli_verb(&c)) {
            return Some(format!("shmbus {verb}"));
        }
    }
    Some(comm.to_owned())
}

/// The verb (and sub-verb: `journal tail`) of a shmbus command line as `/proc/PID/cmdline`
/// holds it (arguments ended by NUL, the program first), as this CLI parses it: its global
/// `--root DIR` skipped, aliases named by their verb. `None` when no verb is found.
fn cli_verb(cmdline: &[u8]) -> Option<String> {
    let args: Vec<String> =
        cmdline.split(|&b| b == 0).skip(1).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let mut command = <crate::Cli as clap::CommandFactory>::command();
    let mut words = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--root" {
            rest.next(); // its value
            continue;
        }
        if arg.starts_with('-') {
            continue;
        }
        let Some(sub) = command.find_subcommand(arg).cloned() else { break };
        words.push(sub.get_name().to_owned());
        if !sub.has_subcommands() {
            break;
        }
        command = sub;
    }
    (!words.is_empty()).then(|| words.join(" "))
}

/// Messages per second entering a channel: see [`Metrics::rate`].
fn entering_rate(r: &ChannelRates, earlier: &ChannelStats, now: &ChannelStats) -> f64 {
    if r.sent_per_s > 0.0 {
        return r.sent_per_s;
    }
    match (earlier.description.last_seq, now.description.last_seq) {
        (Some(a), Some(b)) if b > a => (b - a) as f64 / r.interval_s,
        _ => r.received_per_s,
    }
}

fn channel_row(key: Key, earlier: Option<&ChannelStats>, now: &ChannelStats, history: &mut History) -> Row {
    let rates = earlier.map(|e| (e, stats::rates(e, now)));
    let metrics = rates.as_ref().map(|(e, r)| {
        let per_s = |n: u64| n as f64 / r.interval_s;
        Metrics {
            rate: entering_rate(r, e, now),
            sent_per_s: r.sent_per_s,
            received_per_s: r.received_per_s,
            bandwidth: if r.sent_bytes_per_s > 0.0 { r.sent_bytes_per_s } else { r.received_bytes_per_s },
            drops_per_s: r.drops_per_s(),
            full_per_s: per_s(r.total.full),
            blocked_per_s: per_s(r.total.blocked),
            futex_per_s: r.futex_per_s(),
            max_lag: r.max_lag,
            p50: r.total.latency_quantile(0.5),
            p99: r.total.latency_quantile(0.99),
        }
    });
    let history_len = now.description.history;
    let participants: Vec<Participant> = match &rates {
        Some((_, r)) => r
            .participants
            .iter()
            .map(|p| participant(&p.participant, Some(p), now.lag(&p.participant), history_len))
            .collect(),
        None => now.participants.iter().map(|p| participant(p, None, now.lag(p), history_len)).collect(),
    };
    // Drops per second include the growth of what receivers lost unread (see
    // `Participant::overrun`): a stuck subscriber's losses show while they happen.
    let metrics = metrics.map(|mut m| {
        if let Some((e, r)) = &rates {
            let overrun = |s: &ChannelStats| -> u64 {
                s.participants.iter().map(|p| overrun(s.lag(p), s.description.history)).fold(0, u64::saturating_add)
            };
            let grown = overrun(now).saturating_sub(overrun(e));
            m.drops_per_s += grown as f64 / r.interval_s;
        }
        m
    });
    if let Some(m) = &metrics {
        history.push(m);
    }
    Row {
        key,
        kind: Some(now.kind.to_string()),
        error: None,
        senders: now.description.senders,
        receivers: now.description.receivers,
        metrics,
        participants,
        journal: None,
        history: history.clone(),
        schema: None,
        note: (now.kind == shmbus::Kind::Service).then(|| now.description.detail.clone()),
    }
}

/// Messages a receiver `lag` behind lost unread: those past the topic's `history`.
fn overrun(lag: Option<u64>, history: Option<u64>) -> u64 {
    match (lag, history) {
        (Some(lag), Some(history)) => lag.saturating_sub(history),
        _ => 0,
    }
}

fn participant(
    p: &stats::ParticipantStats,
    r: Option<&stats::ParticipantRates>,
    lag: Option<u64>,
    history: Option<u64>,
) -> Participant {
    Participant {
        index: p.index,
        pid: p.process.pid,
        process: if p.alive { process_name(p.process.pid) } else { None },
        role: p.role_name.to_owned(),
        alive: p.alive,
        messages_per_s: r.map(|r| r.messages_per_s),
        bytes_per_s: r.map(|r| r.bytes_per_s),
        lag,
        overrun: overrun(lag, history),
        counters: p.counters.clone(),
        p50: r.and_then(|r| r.delta.latency_quantile(0.5)),
        p99: r.and_then(|r| r.delta.latency_quantile(0.99)),
    }
}

fn journal_row(
    key: Key,
    earlier: Option<(&JournalStatus, u64)>,
    (now, now_ns): (&JournalStatus, u64),
    history: &mut History,
) -> Row {
    let readers: Vec<Reader> = now
        .readers
        .iter()
        .map(|r| Reader {
            name: r.name.clone(),
            position: r.position,
            lag: now.next_index.saturating_sub(r.position),
            holder_pid: r.holder_pid,
        })
        .collect();
    let max_lag = readers.iter().map(|r| r.lag).max();
    let metrics = earlier.map(|(e, e_ns)| {
        let interval_s = (now_ns.saturating_sub(e_ns) as f64 / 1e9).max(1e-9);
        let rate = now.next_index.saturating_sub(e.next_index) as f64 / interval_s;
        Metrics {
            rate,
            sent_per_s: rate,
            bandwidth: now.bytes.saturating_sub(e.bytes) as f64 / interval_s,
            max_lag,
            ..Metrics::default()
        }
    });
    if let Some(m) = &metrics {
        history.push(m);
    }
    Row {
        key,
        kind: Some("journal".into()),
        error: None,
        senders: Some(now.appenders),
        receivers: Some(readers.len()),
        metrics,
        participants: Vec::new(),
        journal: Some(JournalState {
            first_index: now.first_index,
            next_index: now.next_index,
            file_bytes: now.file_bytes,
            cycles: now.cycles.len(),
            readers,
        }),
        history: history.clone(),
        schema: now.schema.as_deref().map(crate::schema::summary),
        note: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmdline(args: &[&str]) -> Vec<u8> {
        args.iter().flat_map(|a| a.bytes().chain([0])).collect()
    }

    #[test]
    fn the_verb_is_read_from_the_command_line() {
        assert_eq!(cli_verb(&cmdline(&["/usr/bin/shmbus", "sub", "--domain", "d", "t"])).as_deref(), Some("sub"));
        assert_eq!(cli_verb(&cmdline(&["shmbus", "--root", "/r", "pub", "t"])).as_deref(), Some("pub"));
        assert_eq!(cli_verb(&cmdline(&["shmbus", "journal", "tail", "--dir", "j"])).as_deref(), Some("journal tail"));
        assert_eq!(cli_verb(&cmdline(&["shmbus", "echo", "t"])).as_deref(), Some("sub"));
        assert_eq!(cli_verb(&cmdline(&["shmbus", "--help"])), None);
        assert_eq!(cli_verb(&cmdline(&["shmbus", "nonsense"])), None);
        assert_eq!(cli_verb(b""), None);
    }

    #[test]
    fn a_lag_past_the_history_is_lost() {
        assert_eq!(overrun(Some(100), Some(16)), 84);
        assert_eq!(overrun(Some(16), Some(16)), 0);
        assert_eq!(overrun(None, Some(16)), 0);
        assert_eq!(overrun(Some(100), None), 0);
    }
}
