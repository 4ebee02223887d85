//! The stream's error enums (one per operation) and their messages.

use std::fmt;

use crate::segment::TRUNCATED_MSG;

#[cfg(doc)]
use super::{reader::StreamReader, writer::StreamWriter};

pub use super::protocol::Corruption as StreamCorrupt;

/// [`StreamWriter::try_reserve`] / [`StreamWriter::try_write`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TryReserveError {
    /// The record can never fit in this ring.
    TooLarge {
        /// Requested payload length.
        len: usize,
        /// Largest payload this stream accepts.
        max: usize,
    },
    /// Not enough free space right now.
    Full {
        /// Ring bytes the record needs (header and padding included).
        needed: usize,
        /// Ring bytes free.
        free: usize,
    },
    /// The ring is full and no live reader will ever drain it.
    Disconnected,
    /// The shared positions break the ring's invariants.
    Corrupt(StreamCorrupt),
    /// The stream's file was truncated by another process while this one had it mapped:
    /// what is written past the cut is lost. Checked when a reserve fails or times out;
    /// recreate the stream.
    Truncated,
}

/// [`StreamWriter::reserve`] / [`StreamWriter::write`] (and their `_timeout` forms) failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReserveError {
    /// The record can never fit in this ring.
    TooLarge {
        /// Requested payload length.
        len: usize,
        /// Largest payload this stream accepts.
        max: usize,
    },
    /// The timeout passed before enough space was free.
    Timeout,
    /// The ring is full and no live reader will ever drain it.
    Disconnected,
    /// The shared positions break the ring's invariants.
    Corrupt(StreamCorrupt),
    /// The stream's file was truncated by another process while this one had it mapped:
    /// what is written past the cut is lost. Checked when a reserve fails or times out;
    /// recreate the stream.
    Truncated,
}

/// [`StreamReader::try_read`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TryReadError {
    /// No record right now; the writer is alive.
    Empty,
    /// No record, and no live writer (never attached, closed, or dead).
    Disconnected,
    /// The ring's positions or a record header are garbage.
    Corrupt(StreamCorrupt),
    /// The stream's file was truncated by another process while this one had it mapped: the
    /// cut part reads as zeros for the life of this reader, so every later call that finds
    /// no valid record (or times out) reports this. Recreate the stream.
    Truncated,
}

/// [`StreamReader::read`] / [`StreamReader::read_timeout`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The timeout passed without a record.
    Timeout,
    /// No record, and no live writer (never attached, closed, or dead).
    Disconnected,
    /// The ring's positions or a record header are garbage.
    Corrupt(StreamCorrupt),
    /// The stream's file was truncated by another process while this one had it mapped: the
    /// cut part reads as zeros for the life of this reader, so every later call that finds
    /// no valid record (or times out) reports this. Recreate the stream.
    Truncated,
}

const CORRUPT_HINT: &str = "a peer process is corrupt or hostile; stop both endpoints and recreate the stream";

impl fmt::Display for TryReserveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryReserveError::TooLarge { len, max } => write!(f, "record of {len} bytes is larger than this stream's maximum of {max}; split it or recreate the stream with a larger capacity"),
            TryReserveError::Full { needed, free } => write!(f, "stream full: record needs {needed} ring bytes, {free} free; retry, or use a blocking write"),
            TryReserveError::Disconnected => f.write_str("stream full and no reader is attached; start a reader or retry later"),
            TryReserveError::Corrupt(c) => write!(f, "{c}; {CORRUPT_HINT}"),
            TryReserveError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl fmt::Display for ReserveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReserveError::TooLarge { len, max } => write!(f, "record of {len} bytes is larger than this stream's maximum of {max}; split it or recreate the stream with a larger capacity"),
            ReserveError::Timeout => f.write_str("timed out waiting for space in the stream; the reader is slow or stuck"),
            ReserveError::Disconnected => f.write_str("stream full and no reader is attached; start a reader or retry later"),
            ReserveError::Corrupt(c) => write!(f, "{c}; {CORRUPT_HINT}"),
            ReserveError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl fmt::Display for TryReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryReadError::Empty => f.write_str("stream empty; retry, or use a blocking read"),
            TryReadError::Disconnected => {
                f.write_str("stream empty and no writer is attached; start a writer or retry later")
            }
            TryReadError::Corrupt(c) => write!(f, "{c}; {CORRUPT_HINT}"),
            TryReadError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Timeout => f.write_str("timed out waiting for a record; the writer is idle"),
            ReadError::Disconnected => {
                f.write_str("stream empty and no writer is attached; start a writer or retry later")
            }
            ReadError::Corrupt(c) => write!(f, "{c}; {CORRUPT_HINT}"),
            ReadError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl std::error::Error for TryReserveError {}
impl std::error::Error for ReserveError {}
impl std::error::Error for TryReadError {}
impl std::error::Error for ReadError {}
