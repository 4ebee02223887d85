//! Queue: a bounded MPMC queue of byte messages with competing consumers.
//!
//! Every message goes to exactly one consumer. Capacity and the largest message length are
//! fixed when the queue is created; messages may be any length up to that.
//!
//! ```no_run
//! use shmbus::Domain;
//! use shmbus::queue::{Queue, QueueConfig};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let d = Domain::new("robot1")?;
//! let q = Queue::create_or_open(&d, "jobs", &QueueConfig::default().capacity(1024).max_message_len(256))?;
//! let mut tx = q.producer()?;
//! let mut rx = Queue::open(&d, "jobs")?.consumer()?; // usually in another process
//! tx.try_send(b"hello")?;
//! assert_eq!(rx.recv()?, b"hello");
//! let mut buf = Vec::new(); // reused: no allocation once it has room for the largest message
//! tx.send(b"again")?;
//! let n = rx.recv_into(&mut buf)?;
//! assert_eq!(&buf[..n], b"again");
//! println!("{:?}", Queue::status(&d, "jobs")?); // read permission is enough
//! # Ok(()) }
//! ```
//!
//! # Verbs
//!
//! The verbs are crossbeam-channel's, as in every shmbus channel kind: [`Producer::try_send`]
//! ([`QueueTrySendError::Full`] when there is no room; the message stays with the caller),
//! [`Producer::send`] / [`Producer::send_timeout`] (block), [`Consumer::try_recv`],
//! [`Consumer::recv`] / [`Consumer::recv_timeout`], and [`Consumer::iter`] /
//! [`Consumer::try_iter`]. The `*_into` receive variants copy into a caller's `Vec<u8>`,
//! reusing its allocation, and allocate nothing once it has a capacity of
//! [`Consumer::max_message_len`] bytes: that is the hot path. There is no zero-copy receive
//! (see `docs/api.md`, "where a kind does not fit"). `push`/`pop` in the design notes mean the
//! same operations.
//!
//! # Algorithm
//!
//! Dmitry Vyukov's bounded MPMC ring: cells stamped with sequence numbers, producers and
//! consumers meet only on the cell they claim, and `tail`/`head` sit on their own cache lines.
//! Unlike the original, a position is claimed by a CAS on the *cell's* stamp, which records
//! the claimant's participant index; `tail`/`head` are hints that anyone moves past a claimed
//! cell. The protocol module (`queue/protocol.rs`) states the stamps and invariants; `docs/queue.md`
//! walks through them. The hot path is: one load of the counter, one load and one CAS of the
//! cell stamp (just the CAS when the last send found room), one CAS of the counter, the copy,
//! one store of the stamp and one atomic add on the event word, then two plain load/store
//! pairs on the endpoint's own counter block (`messages`, `bytes`; see `stats`). No lock, no
//! allocation, no system call unless someone sleeps.
//!
//! # Crash semantics
//!
//! * A producer killed mid-send leaves a cell claimed `WRITING`. Consumers that reach it wait
//!   (a sleeping consumer is woken by the next message behind it); once the claim has stood
//!   for 5 ms they check the claimant's process, and if it is dead, mark the cell abandoned
//!   and skip it. A blocked consumer (or one in a [`WaitSet`](crate::WaitSet)) therefore
//!   resumes within about 10 ms of reaching the dead claim. The half-written message is
//!   never delivered.
//! * A consumer killed mid-receive loses the one message it had claimed (counted in
//!   [`QueueStatus::lost`]); producers blocked on its cell recover within the same bound.
//!   A message whose receive had returned is the consumer's, and goes with it.
//! * Nothing is delivered twice and no torn message is delivered.
//! * A process that is alive but stopped (`SIGSTOP`, a debugger) blocks the queue behind its
//!   claim for as long as it is stopped: FIFO order cannot skip it.
//! * Any role restarted after a crash works at once: a new endpoint registers, and the dead
//!   one's claim is reclaimed by whoever it stands in the way of.
//!
//! # Hostile memory
//!
//! Every call returns within its timeout whatever the shared words say. A counter no cell
//! agrees with, or a cell stamp no honest participant writes, is reported once as
//! [`Corrupt`](crate::Corrupt) by the operation that meets it, which repairs it from the cells
//! (cold path, by CAS from the bad value) and says so ([`Corrupt::repaired`](crate::Corrupt::repaired));
//! the next call works. See `docs/queue.md` for exactly what holds.
//!
//! Endpoints do not survive `fork`: open them in the process that uses them.

// The lock-free core; public only to the loom models (`tests/loom_queue.rs`).
#[cfg(loom)]
pub mod protocol;
#[cfg(not(loom))]
mod protocol;

#[cfg(not(loom))]
mod consumer;
#[cfg(not(loom))]
mod describe;
#[cfg(not(loom))]
mod error;
#[cfg(not(loom))]
mod handle;
#[cfg(not(loom))]
mod layout;
#[cfg(not(loom))]
mod producer;
#[cfg(not(loom))]
mod shared;
#[cfg(not(loom))]
mod typed;

#[cfg(not(loom))]
pub use consumer::{Consumer, Iter, TryIter};
#[cfg(not(loom))]
pub(crate) use describe::QueueKind;
#[cfg(not(loom))]
pub use error::{
    QueueRecvError, QueueRecvTimeoutError, QueueSendError, QueueSendTimeoutError, QueueTryRecvError, QueueTrySendError,
};
#[cfg(not(loom))]
pub use handle::Queue;
#[cfg(not(loom))]
pub use layout::{QueueConfig, MAX_CAPACITY, MAX_MESSAGE_LEN, MAX_QUEUE_BYTES};
#[cfg(not(loom))]
pub use producer::Producer;
#[cfg(not(loom))]
pub use shared::QueueStatus;
#[cfg(not(loom))]
pub use typed::{TypedConsumer, TypedProducer};
