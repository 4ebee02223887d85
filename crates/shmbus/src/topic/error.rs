//! The topic's errors: publishing, the receive family and random access.

use std::fmt;

use crate::error::{error_family, Corrupt, ErrorKind, Failure};
use crate::kind::Kind;
use crate::segment::TRUNCATED_MSG;

error_family! {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    try
    /// [`Publisher::try_send`](super::Publisher::try_send) failed; the message was not sent
    /// (the caller still has it). Never waits.
    TopicTrySendError {}
    block
    /// Publishing ([`Publisher::send`](super::Publisher::send),
    /// [`loan`](super::Publisher::loan), [`Loan::send`](super::Loan::send)) failed. On an
    /// `overwrite` topic a publisher never waits; on a `block` topic `send` and `loan` wait
    /// for reliable subscribers (about the topic's reliable timeout at most, however many
    /// are stuck: every one that has not moved for that long is then evicted).
    TopicSendError;
    timeout
    /// [`Publisher::send_timeout`](super::Publisher::send_timeout) failed; the message was
    /// not sent.
    TopicSendTimeoutError => "timed out waiting for reliable subscribers to read; are they running?";
    shared {
        /// The message is larger than the topic's largest message.
        TooLarge {
            /// Message length.
            len: usize,
            /// The topic's `max_message_len`.
            max: usize,
        } => [ErrorKind::TooLarge, *max as u64] ("message of {len} bytes exceeds the topic's slot size of {max} bytes; recreate the topic with a larger max_message_len"),
        /// Every slot is pinned by subscribers (or being written): nothing may be overwritten.
        AllPinned {
            /// Number of slots in the topic.
            slots: usize,
        } => [ErrorKind::AllPinned] ("all {slots} slots are pinned by subscribers holding zero-copy samples; subscribers must drop samples sooner, or recreate the topic with more spare slots"),
        /// A reliable subscriber has not read message `seq` yet, which the send would
        /// overwrite: from every send on a `fail` topic, and from `try_send` on a `block`
        /// topic. Retry later; a subscriber that stands still is evicted after the topic's
        /// reliable timeout.
        Full {
            /// The oldest message a reliable subscriber still needs.
            seq: u64,
        } => [ErrorKind::Full, *seq] ("topic is full: a reliable subscriber has not read message {seq} yet; retry later (a subscriber that stops reading is evicted after the topic's reliable timeout)"),
        /// The topic's file was truncated by another process while this one had it mapped:
        /// what was written past the cut is lost. Checked when a send fails; recreate the
        /// topic.
        Truncated => [ErrorKind::Truncated] ("{}", TRUNCATED_MSG),
    }
}

impl From<TopicSendTimeoutError> for TopicSendError {
    /// For the verbs that wait without a deadline: `Timeout` cannot come from them.
    fn from(e: TopicSendTimeoutError) -> TopicSendError {
        match e {
            TopicSendTimeoutError::TooLarge { len, max } => TopicSendError::TooLarge { len, max },
            TopicSendTimeoutError::AllPinned { slots } => TopicSendError::AllPinned { slots },
            TopicSendTimeoutError::Full { seq } => TopicSendError::Full { seq },
            TopicSendTimeoutError::Truncated | TopicSendTimeoutError::Timeout => TopicSendError::Truncated,
        }
    }
}

impl From<TopicSendTimeoutError> for TopicTrySendError {
    /// For `try_send`, which never waits: `Timeout` cannot come from it.
    fn from(e: TopicSendTimeoutError) -> TopicTrySendError {
        TopicSendError::from(e).into()
    }
}

error_family! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    try
    /// A non-blocking in-order receive ([`Subscriber::try_recv`](super::Subscriber::try_recv)
    /// and its `_into` / `_ref` forms) returned nothing.
    TopicTryRecvError {
        /// No new message yet.
        Empty => [ErrorKind::Empty] ("no new message"),
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
        } => [ErrorKind::Lagged, *missed] ("subscriber lagged: {missed} message(s) skipped; read faster or create the topic with a longer history"),
        /// This reliable subscriber stood still for the topic's reliable timeout while a
        /// publisher waited for it, and was evicted: it is a lossy subscriber from now on
        /// (reported once; the next receive goes on from where it stands, and may report
        /// `Lagged`). Make a new reliable subscriber to be reliable again.
        Evicted => [ErrorKind::Evicted] ("evicted: this reliable subscriber stopped reading for longer than the topic's reliable timeout and is lossy from now on; read faster or create the topic with a longer reliable timeout"),
        /// The subscriber already holds as many pinned samples as its budget allows.
        PinLimit {
            /// The budget.
            budget: usize,
        } => [ErrorKind::PinLimit, *budget as u64] ("pin budget of {budget} samples exhausted; drop samples before taking more, or raise it with set_pin_budget"),
        /// The topic's shared positions cannot be true (a corrupt or hostile process wrote
        /// them): reported once per corrupt state seen. The values are `tail` (the last
        /// claimed sequence number as read), `committed` (the newest committed one as read),
        /// `cursor` (where the subscriber was) and `next` (where its cursor was moved: after
        /// the last claimed sequence number, so the following receives wait for new
        /// messages); the report is [`repaired`](Corrupt::repaired).
        Corrupt(c: Corrupt) => [ErrorKind::Corrupt] ("{c}"),
        /// The topic's file was truncated by another process while this subscriber had it
        /// mapped: the cut part reads as zeros for the life of this subscriber, so every
        /// later call reports this. Checked when there is nothing valid to return (and on a
        /// timeout); recreate the topic.
        Truncated => [ErrorKind::Truncated] ("{}", TRUNCATED_MSG),
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

impl Failure for TopicGetError {
    fn kind(&self) -> ErrorKind {
        match self {
            TopicGetError::InvalidSeq => ErrorKind::InvalidArgument,
            TopicGetError::NotYet { .. } | TopicGetError::Pending { .. } => ErrorKind::Empty,
            TopicGetError::Evicted { .. } => ErrorKind::Overwritten,
            TopicGetError::PinLimit { .. } => ErrorKind::PinLimit,
            TopicGetError::Corrupt(_) => ErrorKind::Corrupt,
            TopicGetError::Truncated => ErrorKind::Truncated,
        }
    }

    /// The last sequence number claimed (`NotYet`), the oldest kept (`Evicted`), the budget
    /// (`PinLimit`).
    fn value(&self) -> Option<u64> {
        match self {
            TopicGetError::NotYet { last, .. } => Some(*last),
            TopicGetError::Evicted { oldest, .. } => Some(*oldest),
            TopicGetError::PinLimit { budget } => Some(*budget as u64),
            _ => None,
        }
    }
}

crate::endpoint::receive::waited!(TopicTryRecvError::Empty, TopicRecvError, TopicRecvTimeoutError);
crate::endpoint::send::refused!(TopicTrySendError, TopicSendError, TopicSendTimeoutError);
