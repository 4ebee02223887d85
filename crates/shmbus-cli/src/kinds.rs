//! What each channel kind reports to `ls` and `info`, and which endpoints `pub` and `sub`
//! open on it.
//!
//! What `ls` and `info` print comes from the library, the same for every kind: the layout
//! parameters, status and note from `shmbus::admin::describe`, the role names from
//! `shmbus::admin::role_name`. This is the one place that dispatches on [`Kind`], for
//! `pub`/`sub`: supporting a new kind there is one match arm in [`sink`] and [`source`].
//! Queues take their own path through `pub`/`sub` (`queue::pub_if_queue`, before
//! `sink`/`source` are asked).

use serde::Serialize;
use serde_json::{json, Map, Value};
use shmbus::admin::{self, Scalar, SegmentReport};
use shmbus::topic::DeliveryPolicy;
use shmbus::{Domain, Kind, OpenError};

use crate::pubsub::{KindArg, PubArgs, Sink, Source, SubArgs};
use crate::{CliError, Result};

/// Declares [`KindFields`] and [`Summary::kind_fields`] from one list of keys.
macro_rules! kind_fields {
    ($($(#[$doc:meta])* $key:ident,)*) => {
        /// The kind-specific keys every `ls --json` object has, in this order (`null` where
        /// the kind has no such number). `info --json` has them too. A kind's status value
        /// of the same name fills each.
        #[derive(Debug, Serialize)]
        pub struct KindFields {
            $($(#[$doc])* pub $key: Value,)*
        }

        impl Summary {
            /// Every key of [`KindFields`]: the kind's status value of that name, `null`
            /// where it has none.
            pub fn kind_fields(&self) -> KindFields {
                KindFields { $($key: self.status.get(stringify!($key)).cloned().unwrap_or(Value::Null),)* }
            }
        }
    };
}

kind_fields! {
    /// Stream: ring bytes; queue: messages.
    capacity,
    /// Stream: bytes written and not yet consumed.
    bytes_used,
    /// Stream: its writer.
    writer_pid,
    /// Stream: whether its writer lives.
    writer_alive,
    /// Stream: its reader.
    reader_pid,
    /// Stream: whether its reader lives.
    reader_alive,
    /// Queue: messages in it now.
    depth,
    /// Pool: worker slots.
    max_workers,
    /// Pool: largest job.
    max_job_size,
    /// Pool: attached workers (dead ones not yet reaped included).
    workers,
    /// Pool: workers waiting for a job.
    workers_idle,
    /// Pool: workers holding a job.
    workers_busy,
    /// Pool: its dispatcher.
    dispatcher_pid,
    /// Pool: whether its dispatcher lives.
    dispatcher_alive,
}

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
    /// The live state in a few words, for the `ls` table.
    pub detail: String,
}

/// Reads the kind-specific state of the channel `name` that `report` describes, the same way
/// for every kind (`shmbus::admin::describe`): read permission suffices.
pub fn summarize(domain: &Domain, name: &str, report: &SegmentReport) -> Result<Summary> {
    let d = admin::describe(domain, name, report)?;
    // A topic's delivery policy is stored as a number; it is shown by its name.
    let param = |k: &str, v: u64| match (k, DeliveryPolicy::from_u64(v)) {
        ("policy", Some(p)) if report.header.kind == Kind::Topic => json!(p.name()),
        _ => json!(v),
    };
    let params = d.params.iter().map(|(k, v)| (k.to_string(), param(k, *v))).collect();
    let status = d.status.iter().map(|(k, v)| (k.to_string(), scalar(*v))).collect();
    Ok(Summary {
        slot_size: d.max_message_len,
        history: d.history,
        last_seq: d.last_seq,
        publishers: d.senders,
        subscribers: d.receivers,
        params,
        status,
        detail: d.detail,
    })
}

/// A status value as JSON.
fn scalar(v: Scalar) -> Value {
    match v {
        Scalar::Int(n) => json!(n),
        Scalar::Bool(b) => json!(b),
        Scalar::Null => Value::Null,
    }
}

/// The name of participant role number `role` in a channel of `kind`.
pub fn role_name(kind: Kind, role: u32) -> String {
    admin::role_name(kind, role).map_or_else(|| format!("role {role}"), str::to_owned)
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
/// `schema` is the one to create it with (or that an existing channel must have).
pub fn sink(domain: &Domain, args: &PubArgs, schema: Option<shmbus::Schema>) -> Result<Box<dyn Sink>> {
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
    // `--timeout-ms` on a topic is met trivially: publishing to a topic never waits.
    match kind {
        Kind::Topic => Ok(Box::new(crate::topic::publisher(domain, args, schema)?)),
        Kind::Stream => Ok(Box::new(crate::stream::writer(domain, args, schema)?)),
        Kind::Queue => Err(queue_not_built()),
        Kind::Pool => Err(CliError::msg(format!(
            "{}/{} is a pool; send jobs with `shmbus pool dispatch --domain {} {}`",
            args.domain, args.name, args.domain, args.name
        ))),
        Kind::Journal => Err(CliError::msg("this shmbus cannot publish to journals yet")),
        Kind::Service => Err(CliError::msg(format!(
            "{}/{} is a service; send it a request with `shmbus call --domain {} {} --data ...`",
            args.domain, args.name, args.domain, args.name
        ))),
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
        Kind::Service => Err(CliError::msg(format!(
            "{}/{} is a service; answer its requests with `shmbus serve --domain {} {} --echo` (or -- CMD)",
            args.domain, args.name, args.domain, args.name
        ))),
    }
}
