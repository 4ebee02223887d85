//! Pool: work dispatch to worker processes with return-to-sender semantics.
//!
//! One [`Dispatcher`] hands byte jobs to any number of [`Worker`] processes (up to
//! `max_workers`, at most 64). [`Dispatcher::try_dispatch`] succeeds only if some worker is
//! waiting for work *right now*; otherwise the job comes back
//! ([`TryDispatchError::AllBusy`]) and the caller decides what to do with the overflow
//! (drop it, queue it, run it inline). This is burst-pool's "return to sender", without its
//! wake-all: each worker sleeps on the futex in its own mailbox and the dispatcher wakes
//! exactly the worker it chose, with no system call at all if that worker is spinning.
//!
//! # Algorithm
//!
//! Each worker owns one *mailbox*: a state word, a futex word, the job id, the length and
//! `max_job_size` payload bytes. The state word runs the machine
//! `VACANT → BUSY → IDLE → FILLING → FULL → TAKEN → IDLE …` (and `LOST` for jobs whose worker
//! died or left). A worker becomes IDLE when it calls `recv` (or `done`); the dispatcher
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
//!   gets [`RecvError::Orphaned`]; a dispatcher that exits cleanly wakes every worker and
//!   they see `Orphaned` at once. A job already in a mailbox is still delivered first.
//!   Calling `recv` again waits for a new dispatcher, which may take over as soon as the old
//!   one is dead ([`Dispatcher::open`]), repairing a mailbox it left half-filled. A worker
//!   that joins after the dispatcher died (or exited) is not told about it: it waits for
//!   the next one, so restarting a crashed system works the first time.
//! * **Hostile memory**: a state its worker cannot be in is reported once
//!   ([`RecvError::Corrupt`]) and reset; [`Dispatcher::reap`] repairs ownerless mailboxes
//!   and hint bits; every wait is bounded. See `docs/pool.md` for exactly what holds.
//! * Only one dispatcher at a time: a second one gets [`OpenError::Busy`] while the first
//!   lives.
//!
//! # Example
//!
//! ```no_run
//! use shmbus::pool::{Dispatcher, PoolConfig, TryDispatchError, Worker};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let d = shmbus::Domain::new("robot1")?;
//! let mut dispatcher = Dispatcher::create(&d, "work", PoolConfig { max_workers: 4, max_job_size: 4096 })?;
//! // In each worker process:
//! let mut worker = Worker::join(&d, "work")?;
//! # std::thread::spawn(move || {
//! while let Ok(job) = worker.recv() {
//!     println!("job {} has {} bytes", job.id(), job.data().len());
//! }
//! # });
//! // In the dispatcher:
//! match dispatcher.try_dispatch(b"frame 1".as_slice()) {
//!     Ok(sent) => println!("job {} went to worker {}", sent.job_id, sent.worker),
//!     Err(TryDispatchError::AllBusy(job)) => println!("all busy, dropping {} bytes", job.len()),
//!     Err(e) => return Err(e.to_string().into()),
//! }
//! for lost in dispatcher.reap() {
//!     println!("worker pid {} died holding job {}", lost.pid, lost.job_id);
//! }
//! # Ok(()) }
//! ```

use std::fmt;

#[cfg(loom)]
pub mod protocol;
#[cfg(not(loom))]
mod protocol;

#[cfg(not(loom))]
mod endpoints;
#[cfg(not(loom))]
pub use endpoints::{status, Dispatcher, Job, Worker};
#[cfg(not(loom))]
pub(crate) use endpoints::{undelivered_jobs, ROLE_DISPATCHER, ROLE_WORKER};

pub use protocol::MAX_WORKERS;

/// Largest job payload a pool accepts (16 MiB).
pub const MAX_JOB_SIZE: usize = 16 << 20;

/// How often a waiting worker checks, by default, that its dispatcher process still lives.
pub const DEFAULT_ORPHAN_CHECK: std::time::Duration = std::time::Duration::from_millis(100);

#[cfg(not(loom))]
use crate::error::OpenError;
use crate::segment::TRUNCATED_MSG;

/// Layout of a pool, fixed at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Most workers attached at once (1..=64).
    pub max_workers: usize,
    /// Largest job payload in bytes (1..=[`MAX_JOB_SIZE`]).
    pub max_job_size: usize,
}

/// A job placed in a worker's mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dispatched {
    /// The job's id (assigned by the pool, or given by the caller).
    pub job_id: u64,
    /// The worker's mailbox index (0..max_workers).
    pub worker: usize,
}

/// A job whose worker died (or left) before finishing it, reported by [`Dispatcher::reap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostJob {
    /// The job's id.
    pub job_id: u64,
    /// The mailbox index the job was in (now free for a new worker).
    pub worker: usize,
    /// The worker's process id.
    pub pid: u32,
}

/// A snapshot of a pool, for the CLI and monitoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStatus {
    /// Layout: most workers.
    pub max_workers: usize,
    /// Layout: largest job.
    pub max_job_size: usize,
    /// Workers attached (including dead ones the dispatcher has not reaped yet).
    pub workers: usize,
    /// Workers waiting for work.
    pub idle: usize,
    /// Workers attached and not waiting (`workers - idle`).
    pub busy: usize,
    /// The dispatcher's pid, if one holds the pool.
    pub dispatcher_pid: Option<u32>,
    /// Whether that dispatcher process is alive.
    pub dispatcher_alive: bool,
    /// Jobs dispatched over the pool's life.
    pub dispatched: u64,
    /// Jobs reported lost over the pool's life.
    pub lost: u64,
}

/// [`Dispatcher::try_dispatch`] failed; the job is handed back.
pub enum TryDispatchError<J> {
    /// Every worker is busy right now (return to sender).
    AllBusy(J),
    /// No worker is attached to the pool.
    NoWorkers(J),
    /// The job is larger than the pool's `max_job_size`.
    TooLarge {
        /// The job.
        job: J,
        /// Its length.
        len: usize,
        /// The pool's limit.
        max: usize,
    },
    /// The pool's file was truncated by another process while this one had it mapped:
    /// what is written past the cut is lost, so the job was not dispatched. Checked when a
    /// dispatch fails; recreate the pool.
    Truncated(J),
}

impl<J> TryDispatchError<J> {
    /// The job that was not dispatched.
    pub fn into_job(self) -> J {
        match self {
            TryDispatchError::AllBusy(j)
            | TryDispatchError::NoWorkers(j)
            | TryDispatchError::TooLarge { job: j, .. }
            | TryDispatchError::Truncated(j) => j,
        }
    }
}

impl<J> fmt::Debug for TryDispatchError<J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryDispatchError::AllBusy(_) => f.write_str("AllBusy(..)"),
            TryDispatchError::NoWorkers(_) => f.write_str("NoWorkers(..)"),
            TryDispatchError::Truncated(_) => f.write_str("Truncated(..)"),
            TryDispatchError::TooLarge { len, max, .. } => {
                write!(f, "TooLarge {{ len: {len}, max: {max}, .. }}")
            }
        }
    }
}

impl<J> fmt::Display for TryDispatchError<J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryDispatchError::AllBusy(_) => f.write_str(
                "every worker of the pool is busy; handle the job yourself, drop it, or retry when a worker is idle",
            ),
            TryDispatchError::NoWorkers(_) => {
                f.write_str("the pool has no workers; start worker processes (Worker::join) first")
            }
            TryDispatchError::TooLarge { len, max, .. } => {
                write!(f, "job of {len} bytes exceeds the pool's max_job_size of {max}; split it or recreate the pool with a larger max_job_size")
            }
            TryDispatchError::Truncated(_) => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl<J> std::error::Error for TryDispatchError<J> {}

/// [`Dispatcher::try_dispatch_batch`] dispatched nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchDispatchError {
    /// No worker is attached to the pool.
    NoWorkers,
    /// Job `index` of the batch is larger than `max_job_size` (nothing was dispatched).
    TooLarge {
        /// Position in the batch.
        index: usize,
        /// Its length.
        len: usize,
        /// The pool's limit.
        max: usize,
    },
    /// See [`TryDispatchError::Truncated`].
    Truncated,
}

impl fmt::Display for BatchDispatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchDispatchError::NoWorkers => f.write_str("the pool has no workers; start worker processes (Worker::join) first"),
            BatchDispatchError::TooLarge { index, len, max } => write!(
                f,
                "job {index} of the batch has {len} bytes, more than the pool's max_job_size of {max}; nothing was dispatched; split it or recreate the pool"
            ),
            BatchDispatchError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl std::error::Error for BatchDispatchError {}

/// A blocking [`Worker::recv`] ended without a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecvError {
    /// The timeout passed with no job.
    Timeout,
    /// The dispatcher exited or died. Call `recv` again to wait for a new dispatcher, or
    /// drop the worker.
    Orphaned,
    /// The mailbox holds something impossible (corrupt segment or misbehaving peer).
    Corrupt {
        /// What was wrong.
        what: String,
    },
    /// The pool's file was truncated by another process while this worker had it mapped:
    /// the cut part reads as zeros for the life of this worker, so every later call that
    /// finds no job (or times out) reports this. Recreate the pool.
    Truncated,
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvError::Timeout => f.write_str("timed out waiting for a job"),
            RecvError::Orphaned => {
                f.write_str("the pool's dispatcher is gone; call recv again to wait for a new one, or stop the worker")
            }
            RecvError::Corrupt { what } => {
                write!(f, "pool mailbox is corrupt ({what}): a process that maps the pool wrote impossible values; if this repeats, stop the pool's processes and recreate it")
            }
            RecvError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl std::error::Error for RecvError {}

/// [`Worker::try_recv`] found no job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TryRecvError {
    /// No job yet; the worker is now waiting for one (idle).
    Empty,
    /// The dispatcher exited or died (see [`RecvError::Orphaned`]).
    Orphaned,
    /// The mailbox holds something impossible.
    Corrupt {
        /// What was wrong.
        what: String,
    },
    /// The pool's file was truncated by another process while this worker had it mapped:
    /// the cut part reads as zeros for the life of this worker, so every later call that
    /// finds no job (or times out) reports this. Recreate the pool.
    Truncated,
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("no job in the mailbox yet; wait (recv, or a WaitSet) and try again"),
            TryRecvError::Orphaned => {
                f.write_str("the pool's dispatcher is gone; call recv again to wait for a new one, or stop the worker")
            }
            TryRecvError::Corrupt { what } => {
                write!(f, "pool mailbox is corrupt ({what}): a process that maps the pool wrote impossible values; if this repeats, stop the pool's processes and recreate it")
            }
            TryRecvError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl std::error::Error for TryRecvError {}

/// The layout parameters of a pool segment, validated.
#[cfg_attr(loom, allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolLayout {
    pub(crate) max_workers: usize,
    pub(crate) max_job_size: usize,
}

#[cfg_attr(loom, allow(dead_code))]
impl PoolLayout {
    /// Validates (untrusted) parameters.
    pub(crate) fn new(max_workers: u64, max_job_size: u64) -> Result<PoolLayout, String> {
        if max_workers == 0 || max_workers > MAX_WORKERS as u64 {
            return Err(format!("max_workers is {max_workers}, must be 1..={MAX_WORKERS}"));
        }
        if max_job_size == 0 || max_job_size > MAX_JOB_SIZE as u64 {
            return Err(format!("max_job_size is {max_job_size}, must be 1..={MAX_JOB_SIZE}"));
        }
        Ok(PoolLayout { max_workers: max_workers as usize, max_job_size: max_job_size as usize })
    }

    /// Bytes from one mailbox to the next: a 64-byte head plus the payload, rounded to 64.
    #[cfg(not(loom))]
    pub(crate) fn stride(&self) -> usize {
        protocol::MAILBOX_HEAD + self.max_job_size.div_ceil(64) * 64
    }
}

#[cfg(not(loom))]
impl crate::segment::Layout for PoolLayout {
    const KIND: crate::segment::Kind = crate::segment::Kind::Pool;

    fn from_params(params: &[u64; crate::segment::PARAMS]) -> Result<Self, String> {
        if let Some((i, v)) = params.iter().enumerate().skip(2).find(|(_, v)| **v != 0) {
            return Err(format!("pool header parameter {i} is {v}, expected 0"));
        }
        PoolLayout::new(params[0], params[1])
    }

    fn params(&self) -> [u64; crate::segment::PARAMS] {
        let mut p = [0; crate::segment::PARAMS];
        p[0] = self.max_workers as u64;
        p[1] = self.max_job_size as u64;
        p
    }

    fn kind_area_size(&self) -> u64 {
        (protocol::HEADER_SIZE + self.max_workers * self.stride()) as u64
    }

    fn param_names() -> [&'static str; crate::segment::PARAMS] {
        ["max_workers", "max_job_size", "", "", "", "", "", ""]
    }

    unsafe fn init(&self, _base: *mut u8) {
        // All-zero is the initial state: every mailbox VACANT, no dispatcher, epoch 0.
    }
}

#[cfg(not(loom))]
impl PoolConfig {
    pub(crate) fn layout(&self) -> Result<PoolLayout, OpenError> {
        PoolLayout::new(self.max_workers as u64, self.max_job_size as u64)
            .map_err(|what| OpenError::InvalidConfig { what })
    }
}
