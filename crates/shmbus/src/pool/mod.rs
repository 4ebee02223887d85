//! Pool: work dispatch to worker processes with return-to-sender semantics.
//!
//! A [`Pool`] handle is made with [`Pool::create_or_open`] or [`Pool::open`]; from it, one
//! [`Dispatcher`] ([`Pool::dispatcher`]) hands byte jobs to any number of [`Worker`] processes
//! ([`Pool::worker`], up to `max_workers`, at most 64). [`Dispatcher::try_send`] succeeds
//! only if some worker is waiting for work *right now*; otherwise nothing is sent
//! ([`PoolTrySendError::AllBusy`]) and the caller decides what to do with the overflow
//! (drop it, queue it, run it inline). This is burst-pool's "return to sender", without its
//! wake-all: each worker sleeps on the futex in its own mailbox and the dispatcher wakes
//! exactly the worker it chose, with no system call at all if that worker is spinning.
//!
//! # Algorithm
//!
//! Each worker owns one *mailbox*: a state word, a futex word, the job id, the length and
//! `max_job_len` payload bytes. The state word runs the machine
//! `VACANT → BUSY → IDLE → FILLING → FULL → TAKEN → IDLE …` (and `LOST` for jobs whose worker
//! died or left). A worker becomes IDLE when it asks for a job (any receive, or `done`); the dispatcher
//! claims an idle mailbox with one compare-and-swap `IDLE → FILLING`, found through an
//! `idle_bits` word (round-robin start), copies the job, stores FULL (Release) and notifies
//! that mailbox's event word. The worker takes it (`FULL → TAKEN`) and reads the payload in
//! place. See `protocol.rs` for the full state machine and its invariants; it is
//! model-checked with loom in `tests/loom_pool.rs`.
//!
//! Invariants: a job is placed only in a mailbox whose worker is waiting (the CAS from IDLE
//! races the worker's own withdrawing CAS, and exactly one wins); the dispatcher never
//! writes a mailbox that is not FILLING by its own claim; every dispatched job is either
//! received by exactly one worker or reported lost by [`Dispatcher::reap`], never both.
//!
//! # Crash semantics
//!
//! * **A worker is SIGKILLed**: its participant entry and mailbox stay until the
//!   dispatcher calls [`Dispatcher::reap`] (call it periodically, e.g. every 100 ms or when
//!   dispatch keeps failing), or until a joining worker finds every mailbox taken and frees
//!   the dead ones itself. `reap` reports each job the dead worker held, dispatched but
//!   not taken or taken but not finished, as a [`LostJob`], and frees the mailbox for a new
//!   worker. A lost job may have been partly or fully processed.
//! * **The dispatcher is SIGKILLed**: a worker blocked in `recv` notices within its orphan
//!   check interval (default [`DEFAULT_ORPHAN_CHECK`], 100 ms, plus one `/proc` read) and
//!   gets [`PoolRecvError::Orphaned`]; a dispatcher that exits cleanly wakes every worker and
//!   they see `Orphaned` at once. A job already in a mailbox is still delivered first.
//!   [`Worker::dispatcher_finished`] then tells the two apart.
//!   Calling `recv` again waits for a new dispatcher, which may take over as soon as the old
//!   one is dead ([`Pool::dispatcher`]), repairing a mailbox it left half-filled. A worker
//!   that joins after the dispatcher died (or exited) is not told about it: it waits for
//!   the next one, so restarting a crashed system works the first time.
//! * **Hostile memory**: a state its worker cannot be in is reported once
//!   ([`PoolRecvError::Corrupt`], [`Corrupt::repaired`](crate::Corrupt::repaired)) and
//!   reset; [`Dispatcher::reap`] repairs ownerless mailboxes
//!   and hint bits; every wait is bounded. See `docs/pool.md` for exactly what holds.
//! * Only one dispatcher at a time: a second one gets [`OpenError::Busy`] while the first
//!   lives.
//!
//! # Example
//!
//! ```no_run
//! use shmbus::pool::{Pool, PoolConfig, PoolTrySendError};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let d = shmbus::Domain::new("robot1")?;
//! let pool = Pool::create_or_open(&d, "work", &PoolConfig::default().max_workers(4).max_job_len(4096))?;
//! // In each worker process:
//! let mut worker = pool.worker()?;
//! # std::thread::spawn(move || {
//! while let Ok(job) = worker.recv_ref() {
//!     println!("job {} has {} bytes", job.id(), job.len());
//! }
//! # });
//! // In the dispatcher:
//! let mut dispatcher = pool.dispatcher()?;
//! let job = b"frame 1";
//! match dispatcher.try_send(job) {
//!     Ok(sent) => println!("job {} went to worker {}", sent.job_id, sent.worker),
//!     Err(PoolTrySendError::AllBusy) => println!("all busy, dropping {} bytes", job.len()),
//!     Err(e) => return Err(e.into()),
//! }
//! for lost in dispatcher.reap() {
//!     println!("worker pid {} died holding job {}", lost.pid, lost.job_id);
//! }
//! # Ok(()) }
//! ```
//!
//! [`OpenError::Busy`]: crate::error::OpenError::Busy

#[cfg(loom)]
pub mod protocol;
#[cfg(not(loom))]
mod protocol;

#[cfg(not(loom))]
mod describe;
#[cfg(not(loom))]
mod dispatcher;
mod error;
#[cfg(not(loom))]
mod handle;
mod layout;
mod shared;
#[cfg(not(loom))]
mod typed;
#[cfg(not(loom))]
mod worker;

#[cfg(not(loom))]
pub(crate) use describe::PoolKind;
#[cfg(not(loom))]
pub use dispatcher::Dispatcher;
pub use error::{PoolRecvError, PoolRecvTimeoutError, PoolTryRecvError, PoolTrySendError};
#[cfg(not(loom))]
pub use handle::Pool;
pub use layout::{PoolConfig, MAX_JOB_LEN};
pub use shared::{Dispatched, LostJob, PoolStatus, DEFAULT_ORPHAN_CHECK};
#[cfg(not(loom))]
pub use typed::{TypedDispatcher, TypedJob, TypedJobRef, TypedWorker};
#[cfg(not(loom))]
pub use worker::{Iter, Job, JobInfo, JobRef, OwnedJobRef, TryIter, Worker};

pub use protocol::MAX_WORKERS;
