//! The pool's errors: one enum per operation.

use std::fmt;

use crate::segment::TRUNCATED_MSG;

/// [`Dispatcher::try_dispatch`] failed; the job is handed back.
///
/// [`Dispatcher::try_dispatch`]: super::Dispatcher::try_dispatch
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
///
/// [`Dispatcher::try_dispatch_batch`]: super::Dispatcher::try_dispatch_batch
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
///
/// [`Worker::recv`]: super::Worker::recv
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
///
/// [`Worker::try_recv`]: super::Worker::try_recv
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
