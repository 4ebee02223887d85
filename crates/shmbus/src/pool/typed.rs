//! Typed pool endpoints: a [`Pod`] type `T` instead of bytes, as thin wrappers over
//! [`Dispatcher`] and [`Worker`].

use std::marker::PhantomData;
use std::ops::Deref;
use std::time::Duration;

use super::channel::Dispatched;
use super::dispatcher::Dispatcher;
use super::error::{PoolRecvError, PoolRecvTimeoutError, PoolTryRecvError, PoolTrySendError};
use super::handle::Pool;
use super::layout::PoolConfig;
use super::worker::{JobRef, Worker};
use crate::error::{Corrupt, OpenError};
use crate::pod::{bytes_of, read_from, ref_from, PayloadType, Pod};
use crate::segment::Kind;
use crate::waitset::{WaitHandle, Waitable};

/// What a typed receive reports for a job that is not exactly one `T`.
fn wrong_len<T>(job: &JobRef<'_>) -> Corrupt {
    Corrupt::new(Kind::Pool, "job length is not the size of the worker's payload type")
        .with("job_id", job.id())
        .with("len", job.len() as u64)
        .with("size", std::mem::size_of::<T>() as u64)
}

impl PoolConfig {
    /// A config for a pool of `T` jobs: the max job length is `size_of::<T>()` unless
    /// [`max_job_len`](Self::max_job_len) sets it, and a created pool records `T`'s name,
    /// size and alignment in its header. Opening an existing pool with it fails with
    /// [`OpenError::TypeMismatch`] if the pool records another type, or is an untyped pool
    /// whose jobs cannot hold a `T`. Jobs are placed at 64-byte aligned addresses: a type
    /// aligned to more is refused with [`OpenError::InvalidConfig`].
    pub fn for_type<T: Pod>() -> PoolConfig {
        PoolConfig::default().payload_type(PayloadType::of::<T>())
    }
}

impl Pool {
    /// Becomes the pool's dispatcher of `T` jobs. Fails with [`OpenError::TypeMismatch`] if
    /// the pool records another payload type, or is untyped and cannot hold a `T` (too
    /// large, or aligned to more than 64 bytes); otherwise as [`Pool::dispatcher`].
    pub fn dispatcher_of<T: Pod>(&self) -> Result<TypedDispatcher<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(TypedDispatcher { inner: self.dispatcher()?, _type: PhantomData })
    }

    /// Joins the pool as a worker of `T` jobs. Fails as [`Pool::dispatcher_of`] does;
    /// otherwise as [`Pool::worker`].
    pub fn worker_of<T: Pod>(&self) -> Result<TypedWorker<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(TypedWorker { inner: self.worker()?, _type: PhantomData })
    }
}

/// Dispatches `T` jobs: a [`Dispatcher`] that sends the bytes of a `T`.
#[derive(Debug)]
pub struct TypedDispatcher<T: Pod> {
    inner: Dispatcher,
    _type: PhantomData<fn(T)>,
}

impl<T: Pod> TypedDispatcher<T> {
    /// Places a copy of `value` in an idle worker's mailbox (see [`Dispatcher::try_send`]).
    pub fn try_send(&mut self, value: &T) -> Result<Dispatched, PoolTrySendError> {
        self.inner.try_send(bytes_of(value))
    }

    /// [`try_send`](Self::try_send) with the caller's job id (see
    /// [`Dispatcher::try_send_with_id`]).
    pub fn try_send_with_id(&mut self, job_id: u64, value: &T) -> Result<Dispatched, PoolTrySendError> {
        self.inner.try_send_with_id(job_id, bytes_of(value))
    }

    /// The byte dispatcher underneath (for `reap`, `status`, batches).
    pub fn as_bytes(&mut self) -> &mut Dispatcher {
        &mut self.inner
    }
}

impl<T: Pod> Waitable for TypedDispatcher<T> {
    fn wait_handle(&self) -> WaitHandle<'_> {
        self.inner.wait_handle()
    }

    fn is_ready(&self) -> bool {
        self.inner.is_ready()
    }

    fn recheck_interval(&self) -> Option<Duration> {
        self.inner.recheck_interval()
    }

    fn recheck(&self) -> bool {
        self.inner.recheck()
    }
}

/// Works on `T` jobs: a [`Worker`] whose receives return a [`TypedJob`] (the `T` copied out)
/// or a [`TypedJobRef`] (a `&T` in the mailbox).
///
/// A job that is not exactly `size_of::<T>()` bytes (sent by a byte dispatcher, or a hostile
/// peer) is reported as `Corrupt` (with the values `job_id`, `len` and `size`); the worker
/// has taken it, as any received job, and its next receive (or [`TypedWorker::done`]) makes
/// it idle again.
#[derive(Debug)]
pub struct TypedWorker<T: Pod> {
    inner: Worker,
    _type: PhantomData<fn() -> T>,
}

impl<T: Pod> TypedWorker<T> {
    /// Takes a job if one is in the mailbox, without waiting, and copies its `T` out (see
    /// [`Worker::try_recv`]).
    pub fn try_recv(&mut self) -> Result<TypedJob<T>, PoolTryRecvError> {
        let job = self.inner.try_recv_ref()?;
        TypedJob::new(&job).ok_or_else(|| PoolTryRecvError::Corrupt(wrong_len::<T>(&job)))
    }

    /// Waits for a job and copies its `T` out.
    pub fn recv(&mut self) -> Result<TypedJob<T>, PoolRecvError> {
        let job = self.inner.recv_ref()?;
        TypedJob::new(&job).ok_or_else(|| PoolRecvError::Corrupt(wrong_len::<T>(&job)))
    }

    /// Waits at most `timeout` for a job and copies its `T` out.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<TypedJob<T>, PoolRecvTimeoutError> {
        let job = self.inner.recv_ref_timeout(timeout)?;
        TypedJob::new(&job).ok_or_else(|| PoolRecvTimeoutError::Corrupt(wrong_len::<T>(&job)))
    }

    /// Takes a job if one is in the mailbox, without waiting, and reads its `T` in place.
    pub fn try_recv_ref(&mut self) -> Result<TypedJobRef<'_, T>, PoolTryRecvError> {
        let job = self.inner.try_recv_ref()?;
        TypedJobRef::new(&job).ok_or_else(|| PoolTryRecvError::Corrupt(wrong_len::<T>(&job)))
    }

    /// Waits for a job and reads its `T` in place.
    pub fn recv_ref(&mut self) -> Result<TypedJobRef<'_, T>, PoolRecvError> {
        let job = self.inner.recv_ref()?;
        TypedJobRef::new(&job).ok_or_else(|| PoolRecvError::Corrupt(wrong_len::<T>(&job)))
    }

    /// Waits at most `timeout` for a job and reads its `T` in place.
    pub fn recv_ref_timeout(&mut self, timeout: Duration) -> Result<TypedJobRef<'_, T>, PoolRecvTimeoutError> {
        let job = self.inner.recv_ref_timeout(timeout)?;
        TypedJobRef::new(&job).ok_or_else(|| PoolRecvTimeoutError::Corrupt(wrong_len::<T>(&job)))
    }

    /// Declares the current job finished (see [`Worker::done`]).
    pub fn done(&mut self) {
        self.inner.done()
    }

    /// The byte worker underneath.
    pub fn as_bytes(&mut self) -> &mut Worker {
        &mut self.inner
    }
}

impl<T: Pod> Waitable for TypedWorker<T> {
    fn wait_handle(&self) -> WaitHandle<'_> {
        self.inner.wait_handle()
    }

    fn is_ready(&self) -> bool {
        self.inner.is_ready()
    }

    fn recheck_interval(&self) -> Option<Duration> {
        self.inner.recheck_interval()
    }

    fn recheck(&self) -> bool {
        self.inner.recheck()
    }
}

/// A job copied out of the mailbox: its id and its `T` (`Deref<Target = T>`).
#[derive(Debug, Clone, Copy)]
pub struct TypedJob<T: Pod> {
    job_id: u64,
    value: T,
}

impl<T: Pod> TypedJob<T> {
    fn new(job: &JobRef<'_>) -> Option<TypedJob<T>> {
        read_from(job.data()).map(|value| TypedJob { job_id: job.id(), value })
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
/// [`TypedWorker::recv_ref`] and its forms. The worker stays busy with it until its next
/// receive or [`TypedWorker::done`].
#[derive(Debug)]
pub struct TypedJobRef<'a, T: Pod> {
    job_id: u64,
    value: &'a T,
}

impl<'a, T: Pod> TypedJobRef<'a, T> {
    fn new(job: &JobRef<'a>) -> Option<TypedJobRef<'a, T>> {
        ref_from(job.data()).map(|value| TypedJobRef { job_id: job.id(), value })
    }

    /// The job's id.
    pub fn id(&self) -> u64 {
        self.job_id
    }
}

impl<T: Pod> Deref for TypedJobRef<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}
