//! One error enum per topic operation.

use std::fmt;

use crate::segment::TRUNCATED_MSG;

/// Publishing (or loaning a slot) failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PublishError {
    /// The message is larger than the topic's slot size.
    TooLarge {
        /// Message length.
        len: usize,
        /// Slot size.
        max: usize,
    },
    /// Every slot is pinned by subscribers (or being written): nothing may be overwritten.
    AllPinned {
        /// Number of slots in the topic.
        slots: usize,
    },
    /// The topic's file was truncated by another process while this one had it mapped:
    /// what was written past the cut is lost. Checked when a publish fails; recreate the
    /// topic.
    Truncated,
}

impl fmt::Display for PublishError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PublishError::TooLarge { len, max } => write!(f, "message of {len} bytes exceeds the topic's slot size of {max} bytes; recreate the topic with a larger --slot-size"),
            PublishError::AllPinned { slots } => write!(f, "all {slots} slots are pinned by subscribers holding zero-copy samples; subscribers must drop samples sooner, or recreate the topic with more spare slots"),
            PublishError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}
impl std::error::Error for PublishError {}

/// A non-blocking in-order receive returned nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TryRecvError {
    /// No new message yet.
    Empty,
    /// The subscriber fell behind (or a publisher died before committing): `missed`
    /// messages were skipped; the next receive returns the oldest one still kept.
    Lagged {
        /// How many sequence numbers were skipped.
        missed: u64,
    },
    /// The subscriber already holds as many pinned samples as its budget allows.
    PinLimit {
        /// The budget.
        budget: usize,
    },
    /// The topic's shared positions cannot be true (a corrupt or hostile process wrote
    /// them): reported once per corrupt state seen. The cursor was moved to `next`, after
    /// the last claimed sequence number, so the following receives wait for new messages.
    Corrupt(Corrupt),
    /// The topic's file was truncated by another process while this subscriber had it
    /// mapped: the cut part reads as zeros for the life of this subscriber, so every later
    /// call reports this. Checked when there is nothing valid to return; recreate the topic.
    Truncated,
}

/// What a subscriber found impossible in the topic's shared positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt {
    /// The last claimed sequence number as read.
    pub tail: u64,
    /// The newest committed sequence number as read.
    pub committed: u64,
    /// Where the subscriber's cursor was.
    pub cursor: u64,
    /// Where the cursor was moved.
    pub next: u64,
}

impl fmt::Display for Corrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "topic positions are corrupt (last claimed {}, newest committed {}, subscriber at {}): a process sharing the topic is corrupt or hostile; the subscriber skipped to {}; if this repeats, stop every endpoint and recreate the topic",
            self.tail, self.committed, self.cursor, self.next
        )
    }
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("no new message"),
            TryRecvError::Lagged { missed } => write!(f, "subscriber lagged: {missed} message(s) skipped; read faster or create the topic with a longer history"),
            TryRecvError::PinLimit { budget } => write!(f, "pin budget of {budget} samples exhausted; drop samples before taking more, or raise it with set_pin_budget"),
            TryRecvError::Corrupt(c) => c.fmt(f),
            TryRecvError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}
impl std::error::Error for TryRecvError {}

/// A blocking in-order receive failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecvError {
    /// The timeout passed with no new message.
    Timeout,
    /// See [`TryRecvError::Lagged`].
    Lagged {
        /// How many sequence numbers were skipped.
        missed: u64,
    },
    /// See [`TryRecvError::PinLimit`].
    PinLimit {
        /// The budget.
        budget: usize,
    },
    /// See [`TryRecvError::Corrupt`].
    Corrupt(Corrupt),
    /// See [`TryRecvError::Truncated`]; also checked on a timeout.
    Truncated,
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvError::Timeout => f.write_str("timed out waiting for a message"),
            RecvError::Lagged { missed } => TryRecvError::Lagged { missed: *missed }.fmt(f),
            RecvError::PinLimit { budget } => TryRecvError::PinLimit { budget: *budget }.fmt(f),
            RecvError::Corrupt(c) => c.fmt(f),
            RecvError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}
impl std::error::Error for RecvError {}

impl From<TryRecvError> for RecvError {
    fn from(e: TryRecvError) -> Self {
        match e {
            TryRecvError::Empty => RecvError::Timeout,
            TryRecvError::Lagged { missed } => RecvError::Lagged { missed },
            TryRecvError::PinLimit { budget } => RecvError::PinLimit { budget },
            TryRecvError::Corrupt(c) => RecvError::Corrupt(c),
            TryRecvError::Truncated => RecvError::Truncated,
        }
    }
}

/// Random access by sequence number failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadError {
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
    /// See [`TryRecvError::PinLimit`].
    PinLimit {
        /// The budget.
        budget: usize,
    },
    /// The topic's shared positions cannot be true (a corrupt or hostile process wrote
    /// them); the newest message cannot be told.
    Corrupt {
        /// The last claimed sequence number as read.
        tail: u64,
        /// The newest committed sequence number as read.
        committed: u64,
    },
    /// See [`TryRecvError::Truncated`].
    Truncated,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::InvalidSeq => f.write_str("sequence numbers start at 1"),
            ReadError::NotYet { seq, last } => write!(f, "sequence {seq} is not published yet (last is {last})"),
            ReadError::Evicted { seq, oldest } => write!(f, "sequence {seq} is no longer in the history (oldest kept is {oldest}); create the topic with a longer history"),
            ReadError::Pending { seq } => write!(f, "sequence {seq} is claimed but not committed (publisher busy or dead)"),
            ReadError::PinLimit { budget } => TryRecvError::PinLimit { budget: *budget }.fmt(f),
            ReadError::Corrupt { tail, committed } => write!(f, "topic positions are corrupt (last claimed {tail}, newest committed {committed}): a process sharing the topic is corrupt or hostile; if this repeats, stop every endpoint and recreate the topic"),
            ReadError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}
impl std::error::Error for ReadError {}
