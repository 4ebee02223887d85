//! The pool's errors: one enum for sending, one family of three for receiving.

use std::fmt;

use crate::error::{error_family, Corrupt, ErrorKind, Failure};
use crate::segment::TRUNCATED_MSG;

/// [`Dispatcher::try_send`] (or its `_with_id` / `_batch` forms) sent nothing. The job stays
/// with the caller, who decides what to do with it (return to sender).
///
/// [`Dispatcher::try_send`]: super::Dispatcher::try_send
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PoolTrySendError {
    /// Every worker is busy right now (return to sender).
    AllBusy,
    /// No worker is attached to the pool.
    NoWorkers,
    /// The job is larger than the pool's `max_job_len`; nothing was sent.
    TooLarge {
        /// Its length.
        len: usize,
        /// The pool's limit.
        max: usize,
        /// Which job of a batch ([`Dispatcher::try_send_batch`]); `None` for a single job.
        ///
        /// [`Dispatcher::try_send_batch`]: super::Dispatcher::try_send_batch
        index: Option<usize>,
    },
    /// The pool's file was truncated by another process while this one had it mapped:
    /// what is written past the cut is lost, so the job was not sent. Checked when a send
    /// fails; recreate the pool.
    Truncated,
}

impl fmt::Display for PoolTrySendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolTrySendError::AllBusy => f.write_str(
                "every worker of the pool is busy; handle the job yourself, drop it, or retry when a worker is idle",
            ),
            PoolTrySendError::NoWorkers => {
                f.write_str("the pool has no workers; start worker processes (pool.worker()) first")
            }
            PoolTrySendError::TooLarge { len, max, index: None } => {
                write!(f, "job of {len} bytes exceeds the pool's max_job_size of {max}; split it or recreate the pool with a larger max_job_size")
            }
            PoolTrySendError::TooLarge { len, max, index: Some(index) } => write!(
                f,
                "job {index} of the batch has {len} bytes, more than the pool's max_job_size of {max}; nothing was dispatched; split it or recreate the pool"
            ),
            PoolTrySendError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl std::error::Error for PoolTrySendError {}

impl Failure for PoolTrySendError {
    fn kind(&self) -> ErrorKind {
        match self {
            PoolTrySendError::AllBusy => ErrorKind::AllBusy,
            PoolTrySendError::NoWorkers => ErrorKind::NoWorkers,
            PoolTrySendError::TooLarge { .. } => ErrorKind::TooLarge,
            PoolTrySendError::Truncated => ErrorKind::Truncated,
        }
    }

    fn value(&self) -> Option<u64> {
        match self {
            PoolTrySendError::TooLarge { max, .. } => Some(*max as u64),
            _ => None,
        }
    }
}

error_family! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    try
    /// [`Worker::try_recv`] (or `try_recv_ref` / `try_recv_into`) found no job.
    ///
    /// [`Worker::try_recv`]: super::Worker::try_recv
    PoolTryRecvError {
        /// No job yet; the worker is now waiting for one (idle).
        Empty => [ErrorKind::Empty] ("no job in the mailbox yet; wait (recv, or a WaitSet) and try again"),
    }
    block
    /// A blocking [`Worker::recv`] (or `recv_ref` / `recv_into`) ended without a job.
    ///
    /// [`Worker::recv`]: super::Worker::recv
    PoolRecvError;
    timeout
    /// [`Worker::recv_timeout`] (or `recv_ref_timeout` / `recv_into_timeout`) ended without
    /// a job.
    ///
    /// [`Worker::recv_timeout`]: super::Worker::recv_timeout
    PoolRecvTimeoutError => "timed out waiting for a job";
    shared {
        /// The dispatcher exited or died. Receive again to wait for a new dispatcher, or
        /// drop the worker.
        Orphaned => [ErrorKind::Disconnected] ("the pool's dispatcher is gone; call recv again to wait for a new one, or stop the worker"),
        /// The mailbox holds something impossible (corrupt segment or misbehaving peer).
        /// [`Corrupt::repaired`] says whether the worker reset its mailbox and goes on.
        Corrupt(c: Corrupt) => [ErrorKind::Corrupt] ("{c}"),
        /// The pool's file was truncated by another process while this worker had it mapped:
        /// the cut part reads as zeros for the life of this worker, so every later call that
        /// finds no job (or times out) reports this. Recreate the pool.
        Truncated => [ErrorKind::Truncated] ("{}", TRUNCATED_MSG),
    }
}

crate::endpoint::receive::waited!(PoolTryRecvError::Empty, PoolRecvError, PoolRecvTimeoutError);
