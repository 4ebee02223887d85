//! The pool handle: one mapping of a pool, from which its endpoints are made.

use std::sync::Arc;

use super::dispatcher::Dispatcher;
use super::layout::{PoolConfig, PoolLayout};
use super::shared::{status_of, PoolStatus, Shared};
use super::worker::Worker;
use crate::domain::Domain;
use crate::endpoint::channel::Channel;
use crate::error::OpenError;
use crate::pod::PayloadType;
use crate::sys::ReadOnly;

/// A pool, mapped: make its [`Dispatcher`] and its [`Worker`]s from it.
///
/// Cheap to clone (the mapping is shared); the endpoints keep it alive.
///
/// ```no_run
/// use shmbus::pool::{Pool, PoolConfig};
/// # fn main() -> Result<(), shmbus::OpenError> {
/// let d = shmbus::Domain::new("robot1")?;
/// let pool = Pool::create_or_open(&d, "work", &PoolConfig::default().max_workers(4).max_job_len(4096))?;
/// let mut dispatcher = pool.dispatcher()?;
/// let mut worker = pool.worker()?;
/// # let _ = (&mut dispatcher, &mut worker);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Pool {
    shared: Arc<Shared>,
}

impl Pool {
    /// Opens the pool `name`, creating it with `config` if it does not exist yet.
    ///
    /// A layout value set in `config` that differs from an existing pool's fails with
    /// [`OpenError::LayoutMismatch`]; an unset one accepts what exists (see [`PoolConfig`]).
    pub fn create_or_open(domain: &Domain, name: &str, config: &PoolConfig) -> Result<Pool, OpenError> {
        Ok(Pool { shared: Arc::new(Channel::create_or_open(domain, name, config)?) })
    }

    /// Opens the existing pool `name`.
    pub fn open(domain: &Domain, name: &str) -> Result<Pool, OpenError> {
        Ok(Pool { shared: Arc::new(Channel::open(domain, name)?) })
    }

    /// Reads a pool's status without joining it: read permission suffices (the file is
    /// mapped read-only, nothing is registered or written).
    pub fn status(domain: &Domain, name: &str) -> Result<PoolStatus, OpenError> {
        Ok(status_of(&Channel::<PoolLayout, ReadOnly>::open_read_only(domain, name)?))
    }

    /// Becomes the pool's dispatcher. Fails with [`OpenError::Busy`] while another
    /// dispatcher lives; takes over from a dead one (repairing what it left).
    pub fn dispatcher(&self) -> Result<Dispatcher, OpenError> {
        Dispatcher::attach(self.shared.clone())
    }

    /// Joins the pool as a worker, taking a free mailbox.
    ///
    /// Fails with [`OpenError::TooManyParticipants`] when all `max_workers` mailboxes are
    /// taken (by live workers, or by dead ones the dispatcher has not reaped yet, which this
    /// call frees when it finds every mailbox taken).
    pub fn worker(&self) -> Result<Worker, OpenError> {
        Worker::attach(self.shared.clone())
    }

    /// The pool's schema, set by its creator (`None`: it has none; see [`Schema`](crate::Schema)).
    pub fn schema(&self) -> Option<&crate::Schema> {
        self.shared.schema().map(|s| &**s)
    }

    /// Maps every page of this pool into this process now, so that no dispatch or job
    /// taken in this process takes a page fault the first time it touches a page (see
    /// [`Topic::prefault`](crate::Topic::prefault)).
    pub fn prefault(&self) {
        self.shared.prefault();
    }

    /// The pool's `max_workers`.
    pub fn max_workers(&self) -> usize {
        self.shared.layout().max_workers
    }

    /// Checks that this pool can carry `t` (see [`Channel::check_type`]).
    pub(super) fn check_type(&self, t: &PayloadType) -> Result<(), OpenError> {
        self.shared.check_type(t)
    }

    /// The pool's `max_job_len`: the largest job in bytes.
    pub fn max_job_len(&self) -> usize {
        self.shared.layout().max_job_size
    }
}
