//! Typed pool endpoints: a [`Pod`] type `T` instead of bytes, as thin wrappers over
//! [`Dispatcher`] and [`Worker`].

use std::ops::Deref;

use super::dispatcher::Dispatcher;
use super::error::{PoolRecvError, PoolTrySendError};
use super::handle::Pool;
use super::layout::PoolConfig;
use super::shared::Dispatched;
use super::worker::{Job, JobInfo, JobRef, Worker};
use crate::endpoint::receive::impl_receive;
use crate::error::OpenError;
use crate::pod::{bytes_of, PayloadType, Pod};
use crate::typed::{Receiver, Ref, Sender};

impl PoolConfig {
    /// A config for a pool of `T` jobs: the max job length is `size_of::<T>()` unless
    /// [`max_job_len`](Self::max_job_len) sets it, and a created pool records `T`'s name,
    /// size and alignment in its header. Opening an existing pool with it fails with
    /// [`OpenError::TypeMismatch`] if the pool records another type, or is an untyped pool
    /// whose jobs cannot hold a `T`. Jobs are placed at 64-byte aligned addresses: a type
    /// aligned to more is refused with [`OpenError::InvalidConfig`].
    pub fn for_type<T: Pod>() -> PoolConfig {
        PoolConfig::default().payload_type::<T>()
    }
}

impl Pool {
    /// Becomes the pool's dispatcher of `T` jobs. Fails with [`OpenError::TypeMismatch`] if
    /// the pool records another payload type, or is untyped and cannot hold a `T` (too
    /// large, or aligned to more than 64 bytes); otherwise as [`Pool::dispatcher`].
    pub fn dispatcher_of<T: Pod>(&self) -> Result<TypedDispatcher<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(Sender::new(self.dispatcher()?))
    }

    /// Joins the pool as a worker of `T` jobs. Fails as [`Pool::dispatcher_of`] does;
    /// otherwise as [`Pool::worker`].
    pub fn worker_of<T: Pod>(&self) -> Result<TypedWorker<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(Receiver::new(self.worker()?))
    }
}

/// Dispatches `T` jobs: a [`Dispatcher`] that sends the bytes of a `T` (`try_send`, and
/// [`try_send_with_id`](Sender::try_send_with_id)).
pub type TypedDispatcher<T> = Sender<Dispatcher, T>;

impl<T: Pod> Sender<Dispatcher, T> {
    /// `try_send` with the caller's job id (see [`Dispatcher::try_send_with_id`]).
    pub fn try_send_with_id(&mut self, job_id: u64, value: &T) -> Result<Dispatched, PoolTrySendError> {
        self.as_bytes().try_send_with_id(job_id, bytes_of(value))
    }
}

/// Works on `T` jobs: a [`Worker`] whose receives return a [`TypedJob`] (the `T` copied out)
/// or a [`TypedJobRef`] (a `&T` in the mailbox).
///
/// A job that is not exactly `size_of::<T>()` bytes (sent by a byte dispatcher, or a hostile
/// peer) is reported as `Corrupt` (with the values `job_id`, `len` and `size`); the worker
/// has taken it, as any received job, and its next receive (or
/// [`done`](Receiver::done)) makes it idle again.
pub type TypedWorker<T> = Receiver<Worker, T>;

impl<T: Pod> Receiver<Worker, T> {
    /// Declares the current job finished (see [`Worker::done`]).
    pub fn done(&mut self) {
        self.as_bytes().done()
    }
}

/// A job copied out of the mailbox: its id and its `T` (`Deref<Target = T>`).
#[derive(Debug, Clone, Copy)]
pub struct TypedJob<T: Pod> {
    job_id: u64,
    value: T,
}

impl<T: Pod> TypedJob<T> {
    pub(crate) fn new(job_id: u64, value: T) -> TypedJob<T> {
        TypedJob { job_id, value }
    }

    /// The job's id.
    pub fn id(&self) -> u64 {
        self.job_id
    }

    /// The job's value.
    pub fn into_value(self) -> T {
        self.value
    }
}

impl<T: Pod> Deref for TypedJob<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

/// A job read in place in the worker's mailbox (`Deref<Target = T>`), from
/// [`TypedWorker`]'s `recv_ref` and its forms. The worker stays busy with it until its next
/// receive or `done`.
pub type TypedJobRef<'a, T> = Ref<JobRef<'a>, T>;

impl<T: Pod> Ref<JobRef<'_>, T> {
    /// The job's id.
    pub fn id(&self) -> u64 {
        self.item().id()
    }
}

// The worker's receive contract, here beside the typed job it makes.
impl_receive!(
    Worker: Job, JobInfo, PoolRecvError; Pool, "job length is not the size of the worker's payload type";
    ends (PoolRecvError::Truncated);
    typed TypedJob<T> = |info, value| TypedJob::new(info.id(), value), note |info, c| c.with("job_id", info.id())
);
