//! Stream: a single-producer single-consumer ring of variable-size records over a
//! double-mapped ("magic") ring buffer.
//!
//! A [`Stream`] handle maps the ring (made with [`Stream::create_or_open`] and a
//! [`StreamConfig`], or [`Stream::open`]). From it, one [`StreamWriter`] sends records,
//! copied ([`StreamWriter::send`]) or written in place through a [`Loan`]; one
//! [`StreamReader`] receives them in order: copied out ([`StreamReader::recv`],
//! [`StreamReader::recv_into`]) or read in place as a [`Record`] and then consumed
//! ([`StreamReader::recv_ref`]). Records are byte strings of any length up to
//! [`StreamWriter::max_record_len`] (capacity − 8).
//!
//! # The double mapping
//!
//! Each process maps the ring's file range *twice*, back to back, so ring byte `i` is also
//! visible at `i + capacity`. A record that starts near the end of the ring and runs past it
//! is therefore contiguous: the writer gets one `&mut [u8]`, the reader one `&[u8]`, and the
//! hot path has no wrap-around logic beyond masking a position with `capacity - 1`.
//!
//! # Capacity rule
//!
//! The capacity is a **power of two of at least one page** (so also a page multiple, which
//! the double mapping needs, and a mask replaces the modulo). Zero, a non-page-multiple or a
//! page multiple that is not a power of two is refused with [`OpenError::InvalidConfig`](crate::OpenError::InvalidConfig)
//! naming the nearest valid sizes.
//!
//! # Protocol and invariants
//!
//! The lock-free head/tail protocol lives in `stream/protocol.rs` (Lamport's SPSC ring with
//! rtrb's cached peer positions), checked by the loom model `tests/loom_stream.rs`. In short:
//! `tail <= head <= tail + capacity`; bytes `[tail, head)` are committed records owned by
//! the reader; the writer owns the rest; each side publishes its position with one Release
//! store. Framing: an 8-byte header (length plus a check word), then the payload, padded to
//! 8 bytes. See `docs/stream.md` for the full description.
//!
//! # Exclusive endpoints and crashes
//!
//! The writer role is participant entry 0 of the segment and the reader role entry 1; a
//! second writer (or reader) while the first is alive gets [`OpenError::Busy`](crate::OpenError::Busy). If the
//! holder is dead its entry is reclaimed and the newcomer takes over. Nothing needs repair:
//!
//! * a writer killed holding a loan never published its `head`, so the reader never sees the
//!   partial record; the next writer starts at the last committed position and overwrites it;
//! * a reader killed mid-read never stored its `tail`, so the next reader resumes at the last
//!   consumed position and **the record being read is delivered again**; a record is never
//!   delivered again once consumed.
//!
//! A reader whose ring is empty and whose writer is gone (never attached, closed, or dead)
//! gets `Disconnected`; a writer whose ring is full and whose reader is gone likewise.
//! Death is noticed within [`LIVENESS_INTERVAL`] (the blocking calls re-check it that often
//! while they sleep). Records committed before the writer died are still delivered first.
//!
//! # Waiting
//!
//! Blocking calls spin briefly then sleep on a futex ([`WaitPolicy`](crate::WaitPolicy)); both endpoints are
//! [`Waitable`](crate::Waitable): the reader is ready when a record is available, the writer when a record
//! of [`StreamWriter::set_writable_len`] bytes (default 0) fits. The hot path makes no
//! system call while nobody sleeps, allocates nothing and takes no lock.
//!
//! ```no_run
//! use shmbus::{Domain, stream::{Stream, StreamConfig}};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let d = Domain::new("robot1")?;
//! let stream = Stream::create_or_open(&d, "log", &StreamConfig::default().capacity(1 << 20))?;
//! let mut w = stream.writer()?;
//! let mut loan = w.loan(5)?;
//! loan.copy_from_slice(b"hello");
//! loan.send();
//! w.send(b"world")?;
//!
//! let mut r = Stream::open(&d, "log")?.reader()?;
//! let rec = r.recv_ref()?;
//! assert_eq!(&*rec, b"hello");
//! rec.consume();
//! assert_eq!(r.recv()?, b"world");
//! # Ok(()) }
//! ```

#[cfg(loom)]
pub mod protocol;
#[cfg(not(loom))]
pub(crate) mod protocol;

#[cfg(not(loom))]
mod describe;
#[cfg(not(loom))]
mod error;
#[cfg(not(loom))]
mod handle;
#[cfg(not(loom))]
mod layout;
#[cfg(not(loom))]
mod reader;
#[cfg(not(loom))]
mod shared;
#[cfg(all(test, not(loom)))]
mod tests;
#[cfg(not(loom))]
mod typed;
#[cfg(not(loom))]
mod writer;

#[cfg(not(loom))]
pub(crate) use describe::StreamKind;
#[cfg(not(loom))]
pub use error::{
    StreamRecvError, StreamRecvTimeoutError, StreamSendError, StreamSendTimeoutError, StreamTryRecvError,
    StreamTrySendError,
};
#[cfg(not(loom))]
pub use handle::Stream;
#[cfg(not(loom))]
pub use layout::{StreamConfig, MAX_CAPACITY};
#[cfg(not(loom))]
pub use reader::{Iter, OwnedRecord, Record, StreamReader, TryIter};
#[cfg(not(loom))]
pub use shared::{EndpointStatus, StreamStatus, LIVENESS_INTERVAL};
#[cfg(not(loom))]
pub use typed::{TypedLoan, TypedRecord, TypedStreamReader, TypedStreamWriter};
#[cfg(not(loom))]
pub use writer::{Loan, OwnedLoan, StreamWriter};
