//! The pool handle: one mapping of a pool, from which its endpoints are made.

use std::sync::Arc;

use super::channel::{status_of, PoolStatus};
use super::dispatcher::Dispatcher;
use super::layout::{PoolConfig, PoolLayout};
use super::worker::Worker;
use crate::domain::Domain;
use crate::error::OpenError;
use crate::pod::{check_creatable, check_payload, PayloadType};
use crate::segment::Segment;

/// The alignment of every mailbox's payload: the pool area starts page aligned, with a
/// 256-byte header, then mailboxes of a multiple of 64 bytes, each a 64-byte head and the job.
pub(super) const MAILBOX_ALIGN: usize = 64;

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

/// What the handle and its endpoints share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) seg: Segment,
    pub(super) layout: PoolLayout,
}

impl Pool {
    /// Opens the pool `name`, creating it with `config` if it does not exist yet.
    ///
    /// A layout value set in `config` that differs from an existing pool's fails with
    /// [`OpenError::LayoutMismatch`]; an unset one accepts what exists (see [`PoolConfig`]).
    pub fn create_or_open(domain: &Domain, name: &str, config: &PoolConfig) -> Result<Pool, OpenError> {
        let layout = config.layout()?;
        let Some(t) = config.payload() else { return Pool::create_or_open_with(domain, name, config, &layout) };
        // A type the created pool could not carry fails before anything is made.
        check_creatable(&t, layout.max_job_size, MAILBOX_ALIGN)?;
        let pool = Pool::create_or_open_with(domain, name, config, &layout)?;
        pool.check_type(&t)?;
        Ok(pool)
    }

    fn create_or_open_with(
        domain: &Domain,
        name: &str,
        config: &PoolConfig,
        layout: &PoolLayout,
    ) -> Result<Pool, OpenError> {
        let opts = config.create_options();
        // An existing pool is opened as it is and checked against the values that were set;
        // a missing one is created with the defaults for the others. If someone else creates
        // it in between with other values for unset fields, open theirs.
        for _ in 0..16 {
            match Segment::open::<PoolLayout>(domain, name) {
                Ok((seg, existing)) => {
                    config.check(seg.path(), &existing)?;
                    return Ok(Pool::from_parts(seg, existing));
                }
                Err(OpenError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
            match Segment::create_or_open(domain, name, layout, &opts, config.payload().as_ref()) {
                Ok((seg, layout, _)) => return Ok(Pool::from_parts(seg, layout)),
                Err(OpenError::LayoutMismatch { field, .. }) if config.is_unset(field) => continue,
                Err(e) => return Err(e),
            }
        }
        // It keeps changing under us: say how it differs now.
        let (seg, existing) = Segment::open::<PoolLayout>(domain, name)?;
        config.check(seg.path(), &existing)?;
        Ok(Pool::from_parts(seg, existing))
    }

    /// Opens the existing pool `name`.
    pub fn open(domain: &Domain, name: &str) -> Result<Pool, OpenError> {
        let (seg, layout) = Segment::open::<PoolLayout>(domain, name)?;
        Ok(Pool::from_parts(seg, layout))
    }

    /// Reads a pool's status without joining it: read permission suffices (the file is
    /// mapped read-only, nothing is registered or written).
    pub fn status(domain: &Domain, name: &str) -> Result<PoolStatus, OpenError> {
        let (seg, layout) = Segment::open_read_only::<PoolLayout>(domain, name)?;
        Ok(status_of(&seg, &layout))
    }

    fn from_parts(seg: Segment, layout: PoolLayout) -> Pool {
        Pool { shared: Arc::new(Shared { seg, layout }) }
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

    /// The pool's `max_workers`.
    pub fn max_workers(&self) -> usize {
        self.shared.layout.max_workers
    }

    /// Checks that this pool can carry `t` (see [`check_payload`]).
    pub(super) fn check_type(&self, t: &PayloadType) -> Result<(), OpenError> {
        let seg = &self.shared.seg;
        check_payload(seg.path(), seg.info().payload.as_ref(), t, self.max_job_len(), MAILBOX_ALIGN)
    }

    /// The pool's `max_job_len`: the largest job in bytes.
    pub fn max_job_len(&self) -> usize {
        self.shared.layout.max_job_size
    }
}
