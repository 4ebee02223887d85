//! The stream's error families (send and receive, each in a try / blocking / timeout form)
//! and the conversion of the protocol's corruption reports into [`Corrupt`].

use crate::error::{error_family, Corrupt, ErrorKind};
use crate::kind::Kind;
use crate::segment::TRUNCATED_MSG;

use super::protocol::Corruption;

error_family! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    try
    /// [`StreamWriter::try_send`](super::StreamWriter::try_send) / [`StreamWriter::try_loan`](super::StreamWriter::try_loan) failed.
    StreamTrySendError {
        /// Not enough free space right now.
        Full {
            /// Ring bytes the record needs (header and padding included).
            needed: usize,
            /// Ring bytes free.
            free: usize,
        } => [ErrorKind::Full] ("stream full: record needs {needed} ring bytes, {free} free; retry, or use a blocking write"),
    }
    block
    /// [`StreamWriter::send`](super::StreamWriter::send) / [`StreamWriter::loan`](super::StreamWriter::loan) failed.
    StreamSendError;
    timeout
    /// [`StreamWriter::send_timeout`](super::StreamWriter::send_timeout) / [`StreamWriter::loan_timeout`](super::StreamWriter::loan_timeout) failed.
    StreamSendTimeoutError => "timed out waiting for space in the stream; the reader is slow or stuck";
    shared {
        /// The record can never fit in this ring.
        TooLarge {
            /// Requested payload length.
            len: usize,
            /// Largest payload this stream accepts.
            max: usize,
        } => [ErrorKind::TooLarge, *max as u64] ("record of {len} bytes is larger than this stream's maximum of {max}; split it or recreate the stream with a larger capacity"),
        /// The ring is full and no live reader will ever drain it.
        Disconnected => [ErrorKind::Disconnected] ("stream full and no reader is attached; start a reader or retry later"),
        /// The shared positions break the ring's invariants (reported once per corrupt state).
        Corrupt(c: Corrupt) => [ErrorKind::Corrupt] ("{c}"),
        /// The stream's file was truncated by another process while this one had it mapped:
        /// what is written past the cut is lost. Checked when a send fails or times out;
        /// recreate the stream.
        Truncated => [ErrorKind::Truncated] ("{}", TRUNCATED_MSG),
    }
}

error_family! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    try
    /// [`StreamReader::try_recv`](super::StreamReader::try_recv) (and its `_into` / `_ref` forms) failed.
    StreamTryRecvError {
        /// No record right now; the writer is alive.
        Empty => [ErrorKind::Empty] ("stream empty; retry, or use a blocking read"),
    }
    block
    /// [`StreamReader::recv`](super::StreamReader::recv) (and its `_into` / `_ref` forms) failed.
    StreamRecvError;
    timeout
    /// [`StreamReader::recv_timeout`](super::StreamReader::recv_timeout) (and its `_into` / `_ref` forms) failed.
    StreamRecvTimeoutError => "timed out waiting for a record; the writer is idle";
    shared {
        /// No record, and no live writer (never attached, closed, or dead).
        Disconnected => [ErrorKind::Disconnected] ("stream empty and no writer is attached; start a writer or retry later"),
        /// The ring's positions or a record header are garbage (reported once per corrupt
        /// state).
        Corrupt(c: Corrupt) => [ErrorKind::Corrupt] ("{c}"),
        /// The stream's file was truncated by another process while this one had it mapped:
        /// the cut part reads as zeros for the life of this reader, so every later call that
        /// finds no valid record (or times out) reports this. Recreate the stream.
        Truncated => [ErrorKind::Truncated] ("{}", TRUNCATED_MSG),
    }
}

impl From<Corruption> for Corrupt {
    fn from(c: Corruption) -> Corrupt {
        Corrupt::new(Kind::Stream, c.what).with("head", c.head).with("tail", c.tail)
    }
}

crate::endpoint::receive::waited!(StreamTryRecvError::Empty, StreamRecvError, StreamRecvTimeoutError);
crate::endpoint::send::refused!(StreamTrySendError, StreamSendError, StreamSendTimeoutError);
