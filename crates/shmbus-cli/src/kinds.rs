//! What each channel kind reports to `ls` and `info`, and which endpoints `pub` and `sub`
//! open on it.
//!
//! This is the one place that dispatches on [`Kind`]: supporting a new kind is one match
//! arm in [`summarize`], and one in [`sink`] and [`source`] if `pub`/`sub` drive it. Role
//! names come from the library (`shmbus::admin::role_name`). Queues take their own path
//! through `pub`/`sub` (`queue::pub_if_queue`, before `sink`/`source` are asked).

use serde_json::{json, Map, Value};
use shmbus::admin::{self, Pending, SegmentReport};
use shmbus::topic::Topic;
use shmbus::{pool, Domain, Kind, OpenError, Stream};

use crate::pubsub::{KindArg, PubArgs, Sink, Source, SubArgs};
use crate::{CliError, Result};

/// The kind-specific keys every `ls --json` object has (`null` where the kind has no such
/// number). `info --json` has them too.
pub const LS_KEYS: &[&str] = &[
    // stream (capacity also for a queue, in messages)
    "capacity",
    "bytes_used",
    "writer_pid",
    "writer_alive",
    "reader_pid",
    "reader_alive",
    // queue
    "depth",
    // pool
    "max_workers",
    "max_job_size",
    "workers",
    "workers_idle",
    "workers_busy",
    "dispatcher_pid",
    "dispatcher_alive",
];

/// A channel's kind-specific numbers. Fields a kind does not have stay `None`.
#[derive(Debug, Default)]
pub struct Summary {
    /// Largest message in bytes (topic slot, stream record, pool job).
    pub slot_size: Option<u64>,
    /// Messages kept (topic history, queue capacity, …).
    pub history: Option<u64>,
    /// Highest committed sequence number.
    pub last_seq: Option<u64>,
    /// Live writing endpoints (topic publishers, stream writer, pool dispatcher).
    pub publishers: Option<usize>,
    /// Live reading endpoints (topic subscribers, stream reader, pool workers).
    pub subscribers: Option<usize>,
    /// The header's layout parameters, by name.
    pub params: Map<String, Value>,
    /// Everything else the kind knows about its live state, by name.
    pub status: Map<String, Value>,
    /// Values of [`LS_KEYS`] this kind has.
    pub fields: Map<String, Value>,
    /// The live state in a few words, for the `ls` table.
    pub detail: String,
}

impl Summary {
    /// Every key of [`LS_KEYS`], `null` where this kind has no value.
    pub fn ls_fields(&self) -> Map<String, Value> {
        LS_KEYS.iter().map(|k| (k.to_string(), self.fields.get(*k).cloned().unwrap_or(Value::Null))).collect()
    }
}

/// [`summarize`], or, when that fails for a user who may not open the segment read-write
/// (the status of topics needs a read-write open), what the read-only look in
/// `report` found: the header, users and undelivered count. The flag says which it is.
pub fn summarize_or_read_only(domain: &Domain, name: &str, report: &SegmentReport) -> Result<(Summary, bool)> {
    match summarize(domain, name, report) {
        Ok(s) => Ok((s, false)),
        Err(_) if !report.writable => Ok((read_only_summary(report), true)),
        Err(e) => Err(e),
    }
}

/// What is known of a channel whose kind status this user cannot read (topics need a
/// read-write open for it): the raw layout parameters, a queue's depth (its undelivered
/// messages) and a note saying so.
fn read_only_summary(report: &SegmentReport) -> Summary {
    let mut s = Summary::default();
    for (i, v) in report.header.params.iter().enumerate().filter(|(_, v)| **v != 0) {
        s.params.insert(format!("param{i}"), json!(v));
    }
    let pending = report.pending;
    if let Some(Pending::Messages(n)) = pending {
        s.status.insert("depth".into(), json!(n));
        s.fields.insert("depth".into(), json!(n));
    }
    let what = pending.map(|p| format!("{p}; ")).unwrap_or_default();
    s.detail = format!("{what}read-only to this user: no live status");
    s
}

/// Reads the kind-specific state of the channel `name` that `report` describes.
pub fn summarize(domain: &Domain, name: &str, report: &SegmentReport) -> Result<Summary> {
    match report.header.kind {
        Kind::Topic => topic(domain, name, report),
        Kind::Stream => stream_summary(domain, name, report),
        Kind::Pool => pool_summary(domain, name, report),
        Kind::Queue => crate::queue::summarize(domain, name, report),
        Kind::Journal => Ok(generic(report)),
    }
}

/// The name of participant role number `role` in a channel of `kind`.
pub fn role_name(kind: Kind, role: u32) -> String {
    admin::role_name(kind, role).map_or_else(|| format!("role {role}"), str::to_owned)
}

fn topic(domain: &Domain, name: &str, report: &SegmentReport) -> Result<Summary> {
    let p = report.header.params;
    let st = Topic::status(domain, name)?;
    let mut params = Map::new();
    params.insert("slot_size".into(), json!(p[0]));
    params.insert("history".into(), json!(p[1]));
    params.insert("spare_slots".into(), json!(p[2]));
    let mut status = Map::new();
    status.insert("slots".into(), json!(st.slots));
    status.insert("pinned_slots".into(), json!(st.pinned_slots));
    Ok(Summary {
        slot_size: Some(st.max_message_len),
        history: Some(st.history),
        last_seq: Some(st.last_seq),
        publishers: Some(st.publishers),
        subscribers: Some(st.subscribers),
        params,
        status,
        ..Summary::default()
    })
}

/// `pid (alive)`, `pid (dead)` or `-`.
fn endpoint(e: Option<(u32, bool)>) -> String {
    match e {
        Some((pid, true)) => format!("{pid} (alive)"),
        Some((pid, false)) => format!("{pid} (dead)"),
        None => "-".into(),
    }
}

fn stream_summary(domain: &Domain, name: &str, report: &SegmentReport) -> Result<Summary> {
    let p = report.header.params;
    let st = Stream::status(domain, name)?;
    let live = live_after_status(domain, name)?;
    let mut params = Map::new();
    params.insert("capacity".into(), json!(p[0]));
    params.insert("data_offset".into(), json!(p[1]));
    let writer = st.writer.map(|e| (e.pid, e.alive));
    let reader = st.reader.map(|e| (e.pid, e.alive));
    let mut fields = Map::new();
    fields.insert("capacity".into(), json!(st.capacity));
    fields.insert("bytes_used".into(), json!(st.used));
    fields.insert("writer_pid".into(), json!(writer.map(|w| w.0)));
    fields.insert("writer_alive".into(), json!(writer.map(|w| w.1)));
    fields.insert("reader_pid".into(), json!(reader.map(|r| r.0)));
    fields.insert("reader_alive".into(), json!(reader.map(|r| r.1)));
    let mut status = fields.clone();
    status.insert("head".into(), json!(st.head));
    status.insert("tail".into(), json!(st.tail));
    Ok(Summary {
        // The largest record: the ring less one record header (stream::protocol::HEADER).
        slot_size: Some(st.capacity.saturating_sub(8).min(u32::MAX as u64)),
        publishers: Some(live.live_in_role("writer")),
        subscribers: Some(live.live_in_role("reader")),
        params,
        status,
        detail: format!("used {}/{} B, writer {}, reader {}", st.used, st.capacity, endpoint(writer), endpoint(reader)),
        fields,
        ..Summary::default()
    })
}

fn pool_summary(domain: &Domain, name: &str, report: &SegmentReport) -> Result<Summary> {
    let p = report.header.params;
    let st = pool::Pool::status(domain, name)?;
    let live = live_after_status(domain, name)?;
    let mut params = Map::new();
    params.insert("max_workers".into(), json!(p[0]));
    params.insert("max_job_size".into(), json!(p[1]));
    let dispatcher = st.dispatcher_pid.map(|pid| (pid, st.dispatcher_alive));
    let mut fields = Map::new();
    fields.insert("max_workers".into(), json!(st.max_workers));
    fields.insert("max_job_size".into(), json!(st.max_job_len));
    fields.insert("workers".into(), json!(st.workers));
    fields.insert("workers_idle".into(), json!(st.idle));
    fields.insert("workers_busy".into(), json!(st.busy));
    fields.insert("dispatcher_pid".into(), json!(st.dispatcher_pid));
    fields.insert("dispatcher_alive".into(), json!(dispatcher.map(|d| d.1)));
    let mut status = fields.clone();
    status.insert("jobs_dispatched".into(), json!(st.dispatched));
    status.insert("jobs_lost".into(), json!(st.lost));
    Ok(Summary {
        slot_size: Some(st.max_job_len as u64),
        publishers: Some(live.live_in_role("dispatcher")),
        subscribers: Some(live.live_in_role("worker")),
        params,
        status,
        detail: format!(
            "workers {}/{} ({} idle, {} busy), dispatcher {}",
            st.workers,
            st.max_workers,
            st.idle,
            st.busy,
            endpoint(dispatcher)
        ),
        fields,
        ..Summary::default()
    })
}

/// The participants of channel `name`, looked at *after* its status was read: every endpoint
/// the status shows alive registered before that, so the counts agree with the status (the
/// report the caller took first may predate an endpoint that attached since).
fn live_after_status(domain: &Domain, name: &str) -> Result<SegmentReport> {
    Ok(admin::inspect_channel(domain, name)?)
}

/// A kind this tool does not know in detail yet: its raw layout parameters.
fn generic(report: &SegmentReport) -> Summary {
    let mut params = Map::new();
    for (i, v) in report.header.params.iter().enumerate().filter(|(_, v)| **v != 0) {
        params.insert(format!("param{i}"), json!(v));
    }
    Summary { params, ..Summary::default() }
}

/// Queues are handled before `sink`/`source` are asked (see `queue::pub_if_queue`): reaching
/// here with a queue is a bug in the dispatch, reported rather than guessed at.
fn queue_not_built() -> CliError {
    CliError::msg("internal: queues are handled by the queue verbs; please report this")
}

/// The kind in the header of channel `name`.
fn kind_of(domain: &Domain, name: &str) -> std::result::Result<Kind, OpenError> {
    Ok(admin::inspect_channel(domain, name)?.header.kind)
}

fn kind_from_arg(k: KindArg) -> Kind {
    match k {
        KindArg::Topic => Kind::Topic,
        KindArg::Stream => Kind::Stream,
        KindArg::Queue => Kind::Queue,
    }
}

/// The kind the size flags given to `pub` belong to, if any.
fn kind_of_size_flags(args: &PubArgs) -> Result<Option<Kind>> {
    let topic_sizes = args.slot_size.is_some() || args.history.is_some();
    match (topic_sizes, args.capacity.is_some()) {
        (true, true) => {
            Err(CliError::msg("--slot-size/--history (topic) and --capacity (stream) cannot be used together"))
        }
        (true, false) => Ok(Some(Kind::Topic)),
        (false, true) => Ok(Some(Kind::Stream)),
        (false, false) => Ok(None),
    }
}

/// Fails if `pub` was given a size flag that a channel of `kind` does not have.
fn check_size_flags(args: &PubArgs, kind: Kind) -> Result<()> {
    let wrong = match kind {
        Kind::Topic => args.capacity.is_some().then_some("--capacity"),
        _ if args.slot_size.is_some() => Some("--slot-size"),
        _ if args.history.is_some() => Some("--history"),
        _ => None,
    };
    match wrong {
        Some(flag) => Err(CliError::msg(format!(
            "{flag} does not apply to {}/{}, a {kind} (topics take --slot-size/--history, streams --capacity, queues --kind queue with --capacity/--max-element-size)",
            args.domain, args.name
        ))),
        None => Ok(()),
    }
}

/// Opens what `pub` writes to: the channel's kind if it exists (it must match `--kind`),
/// else creates a channel of the requested kind (a topic by default).
pub fn sink(domain: &Domain, args: &PubArgs) -> Result<Box<dyn Sink>> {
    let by_flags = kind_of_size_flags(args)?;
    let kind = match (kind_of(domain, &args.name), args.kind.map(kind_from_arg)) {
        (Ok(found), Some(want)) if found != want => {
            return Err(CliError::msg(format!(
                "{}/{} is a {found}, not a {want}; drop --kind or use another name",
                args.domain, args.name
            )))
        }
        (Ok(found), _) => found,
        (Err(OpenError::NotFound { .. }), want) => want.or(by_flags).unwrap_or(Kind::Topic),
        (Err(e), _) => return Err(e.into()),
    };
    check_size_flags(args, kind)?;
    if kind != Kind::Stream && args.timeout_ms.is_some() {
        return Err(CliError::msg(format!("--timeout-ms applies to streams; publishing to a {kind} never waits")));
    }
    match kind {
        Kind::Topic => Ok(Box::new(crate::topic::publisher(domain, args)?)),
        Kind::Stream => Ok(Box::new(crate::stream::writer(domain, args)?)),
        Kind::Queue => Err(queue_not_built()),
        Kind::Pool => Err(CliError::msg(format!(
            "{}/{} is a pool; send jobs with `shmbus pool dispatch --domain {} {}`",
            args.domain, args.name, args.domain, args.name
        ))),
        Kind::Journal => Err(CliError::msg("this shmbus cannot publish to journals yet")),
    }
}

/// Opens what `sub` reads from, by the kind in the channel's header.
pub fn source(domain: &Domain, args: &SubArgs) -> Result<Box<dyn Source>> {
    match kind_of(domain, &args.name)? {
        Kind::Topic => Ok(Box::new(crate::topic::subscriber(domain, args)?)),
        Kind::Stream => Ok(Box::new(crate::stream::reader(domain, args)?)),
        Kind::Queue => Err(queue_not_built()),
        Kind::Pool => Err(CliError::msg(format!(
            "{}/{} is a pool; take jobs with `shmbus pool worker --domain {} {}`",
            args.domain, args.name, args.domain, args.name
        ))),
        Kind::Journal => Err(CliError::msg("this shmbus cannot subscribe to journals yet")),
    }
}
