//! The kind registry: what each channel kind tells tools about itself.
//!
//! `admin` (and through it `shmbus ls`, `info` and `clean`) iterates its registry of every
//! kind's [`KindInfo`] instead of matching on [`Kind`] and reaching into each kind's
//! internals; this module sits below the kinds, which implement it, and `admin` above them. Each kind has one
//! [`KindInfo`] impl, next to its segment layout (`<kind>/layout.rs`; the journal, which is
//! not a segment, next to its participant roles): its participant role names, its header
//! parameters as tools name them, what it holds undelivered and its live state, by name.

use std::fmt;

use crate::domain::Domain;
use crate::error::OpenError;
use crate::kind::Kind;
use crate::segment::{Segment, PARAMS};
use crate::sys::{process_is_alive, Access, ReadOnly};

/// What one channel kind tells tools about itself (see the [module docs](self)).
pub(crate) trait KindInfo: Sync {
    /// The kind this describes.
    fn kind(&self) -> Kind;

    /// The name of participant role number `role` ("publisher", "worker", …); `None` for a
    /// number the kind does not use (a corrupt entry, or a newer shmbus).
    fn role_name(&self, role: u32) -> Option<&'static str>;

    /// The header's layout parameters as tools name them (the JSON keys of `shmbus info`), in
    /// header order. Parameters past the end of the list are not shown.
    fn param_keys(&self) -> &'static [&'static str];

    /// The header's layout parameters `raw`, by name ([`param_keys`](Self::param_keys)).
    fn params(&self, raw: &[u64; PARAMS]) -> Vec<(&'static str, u64)> {
        self.param_keys().iter().copied().zip(raw.iter().copied()).collect()
    }

    /// Committed data that no reader has taken yet in `seg`, a validated segment of this kind
    /// opened read-only (loads only); `None` for a kind that owes no delivery.
    fn pending(&self, seg: Segment<ReadOnly>) -> Result<Option<Pending>, OpenError>;

    /// What `seg` (a validated segment of this kind opened read-only) holds for a later
    /// reader: its [`pending`](Self::pending) data, and for a kind that keeps a history
    /// instead (the topic) the messages that history holds now.
    fn contents(&self, seg: Segment<ReadOnly>) -> Result<(Option<Pending>, Option<u64>), OpenError> {
        Ok((self.pending(seg)?, None))
    }

    /// The live state of channel `name` in `domain`, read through a read-only mapping (read
    /// permission suffices, nothing is written). `params` is left empty: the caller has the
    /// header.
    fn describe(&self, domain: &Domain, name: &str) -> Result<Description, OpenError>;
}

/// Live participants of `seg` in role number `role`.
pub(crate) fn live_in_role<A: Access>(seg: &Segment<A>, role: u32) -> usize {
    seg.participant_view().live_in_role(role, process_is_alive)
}

/// The raw keys of a kind whose parameters have no names (`param0` … `param7`).
pub(crate) const RAW_PARAM_KEYS: [&str; PARAMS] =
    ["param0", "param1", "param2", "param3", "param4", "param5", "param6", "param7"];

/// Committed data a segment holds that no reader has taken yet: what removing it would lose.
///
/// A snapshot of indices that live processes may be moving; exact once nobody uses the
/// segment. It errs on the side of more (a queue cell a dead producer left half-written
/// counts until a consumer retires it), never of fewer, so a segment it calls empty holds
/// nothing deliverable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pending {
    /// Queue: messages sent and not yet received.
    Messages(u64),
    /// Stream: bytes committed and not yet consumed (record headers and padding included).
    Bytes(u64),
    /// Pool: jobs dispatched and not taken by a worker, or lost with their worker (taken or
    /// not) and not yet reported to a dispatcher.
    Jobs(u64),
    /// Service: requests posted and not finished by a server (waiting for one, or being
    /// answered).
    Requests(u64),
}

impl Pending {
    /// The number, in the variant's unit.
    pub fn count(self) -> u64 {
        match self {
            Pending::Messages(n) | Pending::Bytes(n) | Pending::Jobs(n) | Pending::Requests(n) => n,
        }
    }

    /// The unit of [`count`](Self::count): `"messages"`, `"bytes"`, `"jobs"` or `"requests"`.
    pub fn unit(self) -> &'static str {
        match self {
            Pending::Messages(_) => "messages",
            Pending::Bytes(_) => "bytes",
            Pending::Jobs(_) => "jobs",
            Pending::Requests(_) => "requests",
        }
    }
}

impl fmt::Display for Pending {
    /// `3 undelivered messages`, `1 unread byte`, `2 undelivered jobs`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.count();
        let (what, one) = match self {
            Pending::Messages(_) => ("undelivered", "message"),
            Pending::Bytes(_) => ("unread", "byte"),
            Pending::Jobs(_) => ("undelivered", "job"),
            Pending::Requests(_) => ("unanswered", "request"),
        };
        write!(f, "{n} {what} {one}{}", if n == 1 { "" } else { "s" })
    }
}

/// A value of a [`Description`]'s status: what a JSON number, boolean or `null` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    /// A count, size, position or pid.
    Int(u64),
    /// A yes/no (whether a process is alive).
    Bool(bool),
    /// No value (no such endpoint).
    Null,
}

impl From<u64> for Scalar {
    fn from(v: u64) -> Scalar {
        Scalar::Int(v)
    }
}

impl From<usize> for Scalar {
    fn from(v: usize) -> Scalar {
        Scalar::Int(v as u64)
    }
}

impl From<u32> for Scalar {
    fn from(v: u32) -> Scalar {
        Scalar::Int(u64::from(v))
    }
}

impl From<bool> for Scalar {
    fn from(v: bool) -> Scalar {
        Scalar::Bool(v)
    }
}

impl<T: Into<Scalar>> From<Option<T>> for Scalar {
    fn from(v: Option<T>) -> Scalar {
        v.map_or(Scalar::Null, Into::into)
    }
}

/// A channel's layout and live state by name, the same shape for every kind: what
/// `shmbus ls` and `info` print (see [`admin::describe`](crate::admin::describe)). Numbers a kind does not have are `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Description {
    /// The header's layout parameters by name, in header order: `slot_size`, `history`,
    /// `spare_slots` (topic); `capacity`, `max_element_size`, `stride` (queue); `capacity`,
    /// `data_offset` (stream); `max_workers`, `max_job_size` (pool).
    pub params: Vec<(&'static str, u64)>,
    /// The largest message in bytes (topic slot, queue element, stream record, pool job).
    pub max_message_len: Option<u64>,
    /// Messages kept (topic history, queue capacity).
    pub history: Option<u64>,
    /// The highest committed sequence number (topic), messages sent so far (queue).
    pub last_seq: Option<u64>,
    /// Live sending endpoints (topic publishers, queue producers, the stream writer, the
    /// pool dispatcher).
    pub senders: Option<usize>,
    /// Live receiving endpoints (topic subscribers, queue consumers, the stream reader, pool
    /// workers).
    pub receivers: Option<usize>,
    /// Everything else the kind's status knows, by name (the `status` object of
    /// `shmbus info --json`).
    pub status: Vec<(&'static str, Scalar)>,
    /// The live state in a few words (the note of `shmbus ls`); empty when the kind has none.
    pub detail: String,
}
