//! The topic's errors: publishing, the receive family and random access.

use std::fmt;

use crate::error::{error_family, Corrupt};
use crate::segment::{Kind, TRUNCATED_MSG};

/// Publishing (or loaning a slot) failed. A publisher never waits, so there is one error for
/// [`Publisher::send`](super::Publisher::send), [`Publisher::loan`](super::Publisher::loan)
/// and [`Loan::send`](super::Loan::send).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TopicSendError {
    /// The message is larger than the topic's largest message.
    TooLarge {
        /// Message length.
        len: usize,
        /// The topic's `max_message_len`.
        max: usize,
    },
    /// Every slot is pinned by subscribers (or being written): nothing may be overwritten.
    AllPinned {
        /// Number of slots in the topic.
        slots: usize,
    },
    /// The topic's file was truncated by another process while this one had it mapped:
    /// what was written past the cut is lost. Checked when a send fails; recreate the
    /// topic.
    Truncated,
}

impl fmt::Display for TopicSendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopicSendError::TooLarge { len, max } => write!(f, "message of {len} bytes exceeds the topic's slot size of {max} bytes; recreate the topic with a larger --slot-size"),
            TopicSendError::AllPinned { slots } => write!(f, "all {slots} slots are pinned by subscribers holding zero-copy samples; subscribers must drop samples sooner, or recreate the topic with more spare slots"),
            TopicSendError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}
impl std::error::Error for TopicSendError {}

error_family! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    try
    /// A non-blocking in-order receive ([`Subscriber::try_recv`](super::Subscriber::try_recv)
    /// and its `_into` / `_ref` forms) returned nothing.
    TopicTryRecvError {
        /// No new message yet.
        Empty => ("no new message"),
    }
    block
    /// A blocking in-order receive ([`Subscriber::recv`](super::Subscriber::recv) and its
    /// `_into` / `_ref` forms) failed. It cannot time out.
    TopicRecvError;
    timeout
    /// An in-order receive with a timeout
    /// ([`Subscriber::recv_timeout`](super::Subscriber::recv_timeout) and its `_into` /
    /// `_ref` forms) failed.
    TopicRecvTimeoutError => "timed out waiting for a message";
    shared {
        /// The subscriber fell behind (or a publisher died before committing): `missed`
        /// messages were skipped; the next receive returns the oldest one still kept.
        Lagged {
            /// How many sequence numbers were skipped.
            missed: u64,
        } => ("subscriber lagged: {missed} message(s) skipped; read faster or create the topic with a longer history"),
        /// The subscriber already holds as many pinned samples as its budget allows.
        PinLimit {
            /// The budget.
            budget: usize,
        } => ("pin budget of {budget} samples exhausted; drop samples before taking more, or raise it with set_pin_budget"),
        /// The topic's shared positions cannot be true (a corrupt or hostile process wrote
        /// them): reported once per corrupt state seen. The values are `tail` (the last
        /// claimed sequence number as read), `committed` (the newest committed one as read),
        /// `cursor` (where the subscriber was) and `next` (where its cursor was moved: after
        /// the last claimed sequence number, so the following receives wait for new
        /// messages); the report is [`repaired`](Corrupt::repaired).
        Corrupt(c: Corrupt) => ("{c}"),
        /// The topic's file was truncated by another process while this subscriber had it
        /// mapped: the cut part reads as zeros for the life of this subscriber, so every
        /// later call reports this. Checked when there is nothing valid to return (and on a
        /// timeout); recreate the topic.
        Truncated => ("{}", TRUNCATED_MSG),
    }
}

/// What is wrong in impossible positions `(tail, committed)`: the part of a report that the
/// subscriber compares to report each corrupt state once.
pub(super) fn corrupt_positions(tail: u64, committed: u64) -> Corrupt {
    Corrupt::new(Kind::Topic, "positions are impossible (last claimed, newest committed)")
        .with("tail", tail)
        .with("committed", committed)
}

/// Random access by sequence number ([`Subscriber::get`](super::Subscriber::get),
/// [`get_ref`](super::Subscriber::get_ref), [`latest`](super::Subscriber::latest)) failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TopicGetError {
    /// Sequence numbers start at 1.
    InvalidSeq,
    /// Not published yet.
    NotYet {
        /// The sequence number asked for.
        seq: u64,
        /// The last sequence number claimed so far.
        last: u64,
    },
    /// Overwritten: older than the history kept.
    Evicted {
        /// The sequence number asked for.
        seq: u64,
        /// The oldest sequence number the history guarantees now.
        oldest: u64,
    },
    /// Claimed by a publisher that has not committed it (yet, or ever: it died).
    Pending {
        /// The sequence number asked for.
        seq: u64,
    },
    /// See [`TopicTryRecvError::PinLimit`].
    PinLimit {
        /// The budget.
        budget: usize,
    },
    /// The topic's shared positions cannot be true (a corrupt or hostile process wrote
    /// them); the newest message cannot be told. The values are `tail` and `committed`, as
    /// read; nothing was repaired.
    Corrupt(Corrupt),
    /// See [`TopicTryRecvError::Truncated`].
    Truncated,
}

impl fmt::Display for TopicGetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopicGetError::InvalidSeq => f.write_str("sequence numbers start at 1"),
            TopicGetError::NotYet { seq, last } => write!(f, "sequence {seq} is not published yet (last is {last})"),
            TopicGetError::Evicted { seq, oldest } => write!(f, "sequence {seq} is no longer in the history (oldest kept is {oldest}); create the topic with a longer history"),
            TopicGetError::Pending { seq } => write!(f, "sequence {seq} is claimed but not committed (publisher busy or dead)"),
            TopicGetError::PinLimit { budget } => TopicTryRecvError::PinLimit { budget: *budget }.fmt(f),
            TopicGetError::Corrupt(c) => c.fmt(f),
            TopicGetError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}
impl std::error::Error for TopicGetError {}
