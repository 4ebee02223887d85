//! Queue: a bounded MPMC queue of byte messages with competing consumers.
//!
//! Every message goes to exactly one consumer. Capacity and the largest message size are
//! fixed when the queue is created; messages may be any length up to that size.
//!
//! ```no_run
//! use shmbus::{CreateOptions, Domain};
//! use shmbus::queue::{Queue, QueueConfig};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let d = Domain::new("robot1")?;
//! let q = Queue::create(&d, "jobs", QueueConfig { capacity: 1024, max_element_size: 256 }, &CreateOptions::default())?;
//! let mut tx = q.producer()?;
//! let mut rx = Queue::open(&d, "jobs")?.consumer()?; // usually in another process
//! tx.try_send(b"hello")?;
//! assert_eq!(rx.recv()?, b"hello");
//! # Ok(()) }
//! ```
//!
//! # Verbs
//!
//! The verbs are crossbeam-channel's, as in every shmbus channel kind: [`Producer::try_send`]
//! (hands the message back in [`TrySendError::Full`] when there is no room),
//! [`Producer::send`] / [`Producer::send_timeout`] (block), [`Consumer::try_recv`],
//! [`Consumer::recv`] / [`Consumer::recv_timeout`]. The `*_into` receive variants copy into a
//! caller buffer of at least [`Consumer::max_element_size`] bytes and allocate nothing: that
//! is the hot path. `push`/`pop` in the design notes mean the same operations.
//!
//! # Algorithm
//!
//! Dmitry Vyukov's bounded MPMC ring: cells stamped with sequence numbers, producers and
//! consumers meet only on the cell they claim, and `tail`/`head` sit on their own cache lines.
//! Unlike the original, a position is claimed by a CAS on the *cell's* stamp, which records
//! the claimant's participant index; `tail`/`head` are hints that anyone moves past a claimed
//! cell. The ring module (`queue/ring.rs`) states the stamps and invariants; `docs/queue.md`
//! walks through them. The hot path is: one load of the counter, one load and one CAS of the
//! cell stamp (just the CAS when the last send found room), one CAS of the counter, the copy,
//! one store of the stamp and one atomic add on the event word. No lock, no allocation, no
//! system call unless someone sleeps.
//!
//! # Crash semantics
//!
//! * A producer killed mid-send leaves a cell claimed `WRITING`. Consumers that reach it wait
//!   (a sleeping consumer is woken by the next message behind it); once the claim has stood
//!   for [`LIVENESS_RECHECK`] they check the claimant's process, and if it is dead, mark the
//!   cell abandoned and skip it. A blocked consumer therefore resumes within about
//!   2 × [`LIVENESS_RECHECK`] (10 ms) of reaching the dead claim. The half-written message
//!   is never delivered.
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
//! `Corrupt` by the operation that meets it, which repairs it from the cells (cold path, by
//! CAS from the bad value); the next call works. See `docs/queue.md` for exactly what holds.
//!
//! Endpoints do not survive `fork`: open them in the process that uses them.

mod ring;

#[cfg(not(loom))]
mod channel;
#[cfg(not(loom))]
mod consumer;
#[cfg(not(loom))]
mod error;
#[cfg(not(loom))]
mod layout;
#[cfg(not(loom))]
mod producer;

#[cfg(not(loom))]
pub(crate) use channel::{undelivered, ROLE_CONSUMER, ROLE_PRODUCER};
#[cfg(not(loom))]
pub use channel::{Queue, QueueStatus, IDLE_RECHECK, LIVENESS_RECHECK};
#[cfg(not(loom))]
pub use consumer::Consumer;
#[cfg(not(loom))]
pub use error::{RecvError, SendError, TryRecvError, TrySendError};
#[cfg(not(loom))]
pub use layout::{QueueConfig, MAX_CAPACITY, MAX_ELEMENT_SIZE, MAX_QUEUE_BYTES};
#[cfg(not(loom))]
pub use producer::Producer;

#[cfg(loom)]
pub mod model;
