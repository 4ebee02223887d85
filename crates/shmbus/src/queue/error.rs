//! What the queue's sends and receives can fail with.

use std::fmt;

#[cfg(doc)] // for intra-doc links
use super::consumer::Consumer;
#[cfg(doc)] // for intra-doc links
use super::producer::Producer;
use crate::segment::TRUNCATED_MSG;

/// [`Producer::try_send`] failed; the message is handed back.
pub enum TrySendError<T> {
    /// The queue is full. Retry later, or use [`Producer::send_timeout`].
    Full(T),
    /// The message is longer than the queue's max element size.
    TooLarge {
        /// The message.
        msg: T,
        /// Its length.
        len: usize,
        /// The queue's max element size.
        max: usize,
    },
    /// The queue's shared memory holds impossible values.
    Corrupt {
        /// The message.
        msg: T,
        /// What was wrong.
        what: &'static str,
    },
    /// The queue's file was truncated by another process while this one had it mapped:
    /// what is written past the cut is lost, so the message was not sent. Checked when a
    /// send fails or would wait; recreate the queue.
    Truncated(T),
}

/// [`Producer::send`] or [`Producer::send_timeout`] failed; the message is handed back.
pub enum SendError<T> {
    /// No room came free before the timeout (never from [`Producer::send`]).
    Timeout(T),
    /// The message is longer than the queue's max element size.
    TooLarge {
        /// The message.
        msg: T,
        /// Its length.
        len: usize,
        /// The queue's max element size.
        max: usize,
    },
    /// The queue's shared memory holds impossible values.
    Corrupt {
        /// The message.
        msg: T,
        /// What was wrong.
        what: &'static str,
    },
    /// The queue's file was truncated by another process while this one had it mapped:
    /// what is written past the cut is lost, so the message was not sent. Checked when a
    /// send fails or would wait; recreate the queue.
    Truncated(T),
}

impl<T> TrySendError<T> {
    /// The message that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(m)
            | TrySendError::TooLarge { msg: m, .. }
            | TrySendError::Corrupt { msg: m, .. }
            | TrySendError::Truncated(m) => m,
        }
    }

    /// Whether the queue was full (the only error a retry can fix).
    pub fn is_full(&self) -> bool {
        matches!(self, TrySendError::Full(_))
    }
}

impl<T> SendError<T> {
    /// The message that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            SendError::Timeout(m)
            | SendError::TooLarge { msg: m, .. }
            | SendError::Corrupt { msg: m, .. }
            | SendError::Truncated(m) => m,
        }
    }
}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::TooLarge { len, max, .. } => write!(f, "TooLarge {{ len: {len}, max: {max}, .. }}"),
            TrySendError::Corrupt { what, .. } => write!(f, "Corrupt {{ what: {what:?}, .. }}"),
            TrySendError::Truncated(_) => f.write_str("Truncated(..)"),
        }
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Timeout(_) => f.write_str("Timeout(..)"),
            SendError::TooLarge { len, max, .. } => write!(f, "TooLarge {{ len: {len}, max: {max}, .. }}"),
            SendError::Corrupt { what, .. } => write!(f, "Corrupt {{ what: {what:?}, .. }}"),
            SendError::Truncated(_) => f.write_str("Truncated(..)"),
        }
    }
}

fn too_large(f: &mut fmt::Formatter<'_>, len: usize, max: usize) -> fmt::Result {
    write!(f, "message of {len} bytes is larger than the queue's max element size of {max}; split it or recreate the queue with a larger max_element_size")
}

fn corrupt(f: &mut fmt::Formatter<'_>, what: &str) -> fmt::Result {
    write!(f, "queue memory is corrupt ({what}): a process that maps it wrote impossible values; find it (`shmbus info` lists the queue's users), and if this repeats, stop them and recreate the queue (`shmbus clean --force` removes it once no process uses it)")
}

impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("queue is full; retry later or use send_timeout to wait for room"),
            TrySendError::TooLarge { len, max, .. } => too_large(f, *len, *max),
            TrySendError::Corrupt { what, .. } => corrupt(f, what),
            TrySendError::Truncated(_) => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Timeout(_) => f.write_str("timed out waiting for room in the queue; are its consumers running?"),
            SendError::TooLarge { len, max, .. } => too_large(f, *len, *max),
            SendError::Corrupt { what, .. } => corrupt(f, what),
            SendError::Truncated(_) => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl<T> std::error::Error for TrySendError<T> {}
impl<T> std::error::Error for SendError<T> {}

/// [`Consumer::try_recv`] or [`Consumer::try_recv_into`] got no message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TryRecvError {
    /// Nothing to receive now. Retry later, or use [`Consumer::recv_timeout`].
    Empty,
    /// The buffer given to `try_recv_into` is smaller than the max element size.
    BufferTooSmall {
        /// The buffer's length.
        len: usize,
        /// The length it needs.
        needed: usize,
    },
    /// The queue's shared memory holds impossible values (the bad cell is skipped).
    Corrupt {
        /// What was wrong.
        what: &'static str,
    },
    /// The queue's file was truncated by another process while this one had it mapped: the
    /// cut part reads as zeros for the life of this endpoint, so every later call that finds
    /// nothing valid (or times out) reports this. Recreate the queue.
    Truncated,
}

/// [`Consumer::recv`] and its variants got no message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecvError {
    /// Nothing arrived before the timeout (never from the untimed variants).
    Timeout,
    /// The buffer given to `recv_into` is smaller than the max element size.
    BufferTooSmall {
        /// The buffer's length.
        len: usize,
        /// The length it needs.
        needed: usize,
    },
    /// The queue's shared memory holds impossible values (the bad cell is skipped).
    Corrupt {
        /// What was wrong.
        what: &'static str,
    },
    /// The queue's file was truncated by another process while this one had it mapped: the
    /// cut part reads as zeros for the life of this endpoint, so every later call that finds
    /// nothing valid (or times out) reports this. Recreate the queue.
    Truncated,
}

fn too_small(f: &mut fmt::Formatter<'_>, len: usize, needed: usize) -> fmt::Result {
    write!(f, "receive buffer of {len} bytes is smaller than the queue's max element size of {needed}; pass a buffer of at least that")
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("queue is empty; retry later or use recv_timeout to wait"),
            TryRecvError::BufferTooSmall { len, needed } => too_small(f, *len, *needed),
            TryRecvError::Corrupt { what } => corrupt(f, what),
            TryRecvError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvError::Timeout => f.write_str("timed out waiting for a message; are the queue's producers running?"),
            RecvError::BufferTooSmall { len, needed } => too_small(f, *len, *needed),
            RecvError::Corrupt { what } => corrupt(f, what),
            RecvError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl std::error::Error for TryRecvError {}
impl std::error::Error for RecvError {}
