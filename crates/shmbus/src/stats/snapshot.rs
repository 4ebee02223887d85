//! Snapshots: a channel's participants with their counters, read through a read-only
//! mapping, and the rates between two snapshots.

use std::path::PathBuf;

use super::{Counters, Ordering, Relaxed};
use crate::admin::{self, Description, Pending};
use crate::domain::Domain;
use crate::error::OpenError;
use crate::kind::Kind;
use crate::segment::Segment;
use crate::sys::{monotonic_ns, ProcessId, ReadOnly};

/// One participant of a channel with its counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParticipantStats {
    /// Its entry in the participant table (its counter block's index).
    pub index: usize,
    /// Its process.
    pub process: ProcessId,
    /// The kind's role number.
    pub role: u32,
    /// The role's name ("publisher", "consumer", …; "unknown" for a number the kind does
    /// not use).
    pub role_name: &'static str,
    /// Whether its process is alive. A dead participant's entry stays (with its last
    /// counts) until a live endpoint of the channel reclaims it.
    pub alive: bool,
    /// `CLOCK_MONOTONIC` time at which it registered (its counters count from there).
    pub since_ns: u64,
    /// Its counters.
    pub counters: Counters,
}

/// A snapshot of one channel: its state and every participant's counters.
#[derive(Debug, Clone)]
pub struct ChannelStats {
    /// Its domain.
    pub domain: String,
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: Kind,
    /// Its file.
    pub path: PathBuf,
    /// `CLOCK_MONOTONIC` time at which the snapshot was taken.
    pub taken_ns: u64,
    /// The kind's live state, as `shmbus info` shows it.
    pub description: Description,
    /// Committed data no reader has taken yet (queues, streams, pools).
    pub pending: Option<Pending>,
    /// The participants, live and dead.
    pub participants: Vec<ParticipantStats>,
}

impl ChannelStats {
    /// The counters of every participant in role `role_name`, summed.
    pub fn total(&self, role_name: &str) -> Counters {
        let mut t = Counters::default();
        for p in self.participants.iter().filter(|p| p.role_name == role_name) {
            t.add(&p.counters);
        }
        t
    }

    /// How many messages receiver `p` is behind the newest (topics; `None` elsewhere, and for
    /// a participant with no position).
    pub fn lag(&self, p: &ParticipantStats) -> Option<u64> {
        let last = self.description.last_seq?;
        (p.counters.position > 0).then(|| last.saturating_add(1).saturating_sub(p.counters.position))
    }
}

/// The counters of segment `seg` (opened read-only), one per participant entry in use.
pub(crate) fn participants(seg: &Segment<ReadOnly>) -> Vec<ParticipantStats> {
    let kind = seg.info().kind;
    let view = seg.participant_view();
    let mut out = Vec::new();
    for info in view.list() {
        let block = seg.counter_block(info.index);
        let owner = block.owner.load(Ordering::Acquire);
        let since_ns = block.since_ns.load(Relaxed);
        // A block its entry's owner has not (yet) reset is someone else's numbers.
        let counters = if owner == u64::from(info.process.pid) { Counters::load(block) } else { Counters::default() };
        out.push(ParticipantStats {
            index: info.index,
            process: info.process,
            role: info.role,
            role_name: admin::role_name(kind, info.role).unwrap_or("unknown"),
            alive: view.is_alive(&info),
            since_ns: if owner == u64::from(info.process.pid) { since_ns } else { 0 },
            counters,
        });
    }
    out
}

/// A snapshot of channel `name` in `domain` (any kind but journal, whose state is in
/// [`crate::journal::Journal::status`]): read through a read-only mapping, so read
/// permission is enough and nothing in the channel is disturbed.
pub fn channel_stats(domain: &Domain, name: &str) -> Result<ChannelStats, OpenError> {
    let report = admin::inspect_channel(domain, name)?;
    let seg = Segment::<ReadOnly>::open_in(&domain.open_dir()?, name)?;
    let taken_ns = monotonic_ns();
    let participants = participants(&seg);
    let description = admin::describe(domain, name, &report)?;
    Ok(ChannelStats {
        domain: domain.name().to_owned(),
        name: name.to_owned(),
        kind: report.header.kind,
        path: report.path,
        taken_ns,
        description,
        pending: report.pending,
        participants,
    })
}

/// One channel's name and its snapshot, or why it could not be read (see [`domain_stats`]).
pub type NamedStats = (String, Result<ChannelStats, OpenError>);

/// Snapshots of every channel of `domain` (journals live in directories and are not among
/// them), by name, each as [`channel_stats`] takes it. A channel that cannot be read (gone
/// meanwhile, corrupt, no permission) is listed with its error. A missing domain directory
/// is an empty list; an untrusted one is an error.
pub fn domain_stats(domain: &Domain) -> Result<Vec<NamedStats>, OpenError> {
    let dir = match domain.open_dir() {
        Ok(d) => d,
        Err(OpenError::NotFound { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let names = dir.channel_names().map_err(|e| OpenError::io(dir.path(), e))?;
    Ok(names.into_iter().map(|n| (n.clone(), channel_stats(domain, &n))).collect())
}

/// Whether role `role_name` sends (publisher, producer, writer, dispatcher, appender)
/// rather than receives.
pub fn is_sender(role_name: &str) -> bool {
    matches!(role_name, "publisher" | "producer" | "writer" | "dispatcher" | "appender")
}

/// One participant's activity between two snapshots.
#[derive(Debug, Clone, PartialEq)]
pub struct ParticipantRates {
    /// The participant, as the later snapshot shows it.
    pub participant: ParticipantStats,
    /// What it counted in the interval (levels as the later snapshot has them).
    pub delta: Counters,
    /// Messages per second.
    pub messages_per_s: f64,
    /// Payload bytes per second.
    pub bytes_per_s: f64,
    /// Messages behind the newest (topic receivers).
    pub lag: Option<u64>,
}

/// A channel's activity between two snapshots ([`rates`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelRates {
    /// Seconds between the snapshots.
    pub interval_s: f64,
    /// Messages sent per second (every sending participant).
    pub sent_per_s: f64,
    /// Messages received per second (every receiving participant).
    pub received_per_s: f64,
    /// Payload bytes sent per second.
    pub sent_bytes_per_s: f64,
    /// Payload bytes received per second.
    pub received_bytes_per_s: f64,
    /// Everything the participants counted in the interval, summed.
    pub total: Counters,
    /// The largest receiver lag (topics).
    pub max_lag: Option<u64>,
    /// Each participant of the later snapshot.
    pub participants: Vec<ParticipantRates>,
}

impl ChannelRates {
    /// Messages lost by receivers per second.
    pub fn drops_per_s(&self) -> f64 {
        self.total.drops as f64 / self.interval_s
    }

    /// `FUTEX_WAIT` and `FUTEX_WAKE` calls per second.
    pub fn futex_per_s(&self) -> f64 {
        (self.total.futex_waits + self.total.futex_wakes) as f64 / self.interval_s
    }
}

/// The activity of one channel between snapshots `earlier` and `later`. A participant is
/// the same one in both when its entry, pid and registration time match; one that
/// registered in between counts from its registration (all its counts are in the interval).
pub fn rates(earlier: &ChannelStats, later: &ChannelStats) -> ChannelRates {
    let interval_s = (later.taken_ns.saturating_sub(earlier.taken_ns) as f64 / 1e9).max(1e-9);
    let mut total = Counters::default();
    let (mut sent, mut received, mut sent_bytes, mut received_bytes) = (0u64, 0u64, 0u64, 0u64);
    let mut max_lag: Option<u64> = None;
    let mut participants = Vec::new();
    for p in &later.participants {
        let before = earlier
            .participants
            .iter()
            .find(|e| e.index == p.index && e.process.pid == p.process.pid && e.since_ns == p.since_ns);
        let delta = match before {
            Some(e) => p.counters.since(&e.counters),
            None if p.since_ns >= earlier.taken_ns => p.counters.clone(),
            // Registered before the earlier snapshot but not in it (its block was still
            // being reset then): nothing to compare with.
            None => Counters { position: p.counters.position, pins: p.counters.pins, ..Counters::default() },
        };
        if is_sender(p.role_name) {
            sent += delta.messages;
            sent_bytes += delta.bytes;
        } else {
            received += delta.messages;
            received_bytes += delta.bytes;
        }
        total.add(&delta);
        let lag = later.lag(p);
        if let Some(l) = lag {
            max_lag = Some(max_lag.map_or(l, |m| m.max(l)));
        }
        participants.push(ParticipantRates {
            participant: p.clone(),
            messages_per_s: delta.messages as f64 / interval_s,
            bytes_per_s: delta.bytes as f64 / interval_s,
            delta,
            lag,
        });
    }
    ChannelRates {
        interval_s,
        sent_per_s: sent as f64 / interval_s,
        received_per_s: received as f64 / interval_s,
        sent_bytes_per_s: sent_bytes as f64 / interval_s,
        received_bytes_per_s: received_bytes as f64 / interval_s,
        total,
        max_lag,
        participants,
    }
}
