//! A pool's workers and the jobs they take.

use std::cell::Cell;
use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::{PoolRecvError, PoolRecvTimeoutError, PoolTryRecvError};
use super::layout::PoolLayout;
use super::protocol::{Idle, Leave, Mail, PoolRef, Withdraw, BUSY, LOST, VACANT};
use super::shared::Shared;
use super::shared::{dispatcher_alive, payload_ptr, pool_ref, DEFAULT_ORPHAN_CHECK, ROLE_WORKER};
use crate::endpoint::forms::{until, wait_forms};
use crate::endpoint::liveness::Throttle;
use crate::endpoint::receive::{impl_receive, Waited};
use crate::error::{too_small, Corrupt, OpenError, RecvIntoSliceError};
use crate::kind::Kind;
use crate::lend::{LendOr, Lender, OwnedBytes};
use crate::segment::Segment;
use crate::stats::Counter;
use crate::sys::{process_is_alive, ProcessId};
use crate::wait::{try_then_block_on, Deadline, Wait, WaitPolicy};
use crate::waitset::{WaitHandle, Waitable};

/// How long a worker waits for a live dispatcher to finish writing a job (a copy of at most
/// 16 MiB) before it gives up on it; see `settle_filling`.
const FILLING_PATIENCE: Duration = Duration::from_secs(1);

// ==================================================================== Worker

/// One worker of a pool, made by [`Pool::worker`]. `Send`, not `Sync`.
///
/// A worker is *idle* (the dispatcher may hand it a job) from the moment it asks for work
/// (any receive, or [`done`](Self::done)) until it gets a job; it is busy with that job until
/// its next receive or `done`, whichever of the three receive families it used.
///
/// [`Pool::worker`]: super::Pool::worker
#[derive(Debug)]
pub struct Worker {
    shared: Arc<Shared>,
    layout: PoolLayout,
    /// Our mailbox; our participant entry is `slot + 1`.
    slot: usize,
    policy: WaitPolicy,
    /// Orphan detection (see `check_orphaned`): how often `/proc` is asked.
    orphan_check: Throttle,
    orphaned: Cell<bool>,
    /// Whether the dispatcher last found gone had detached cleanly (see `dispatcher_finished`).
    finished: Cell<bool>,
    reported_epoch: Cell<u64>,
    /// A job (id, checked length) taken by a receive into a buffer too small for it
    /// ([`Worker::try_recv_into_slice`]): it stays in our mailbox, which is ours (busy) until
    /// the next receive, and the next receive returns it again instead of asking for work.
    redeliver: Option<(u64, u64)>,
    /// Our counter block (see [`crate::stats`]); only this worker writes it, and the worker
    /// is `!Sync`, so every count is a plain load and store.
    counter: Counter,
}

/// A job read in place, in the worker's mailbox (no copy), from
/// [`Worker::recv_ref`] and its `try_` / `_timeout` forms. The worker stays busy with it
/// until its next receive or [`Worker::done`].
#[derive(Debug)]
pub struct JobRef<'a> {
    id: u64,
    data: &'a [u8],
}

impl<'a> JobRef<'a> {
    /// The job's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The payload, in the shared mailbox (no copy).
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// The payload's length in bytes.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// A [`JobRef`] that owns its worker, lent by a [`Lender`](crate::lend::Lender)
/// ([`Worker::job_owned`]): derefs to the payload; [`OwnedBytes::info`] has the id.
pub type OwnedJobRef = OwnedBytes<Worker, JobInfo>;

impl Worker {
    /// A job from `recv` (`try_recv_ref`, `recv_ref`, `recv_ref_timeout`) that owns the
    /// worker of `lender`, lent exclusively, so it may be kept past the call, by a binding
    /// for instance. The receive runs with the lender's mutex held, as any call on it.
    /// The worker stays busy with it until its next receive or `done`, as for a [`JobRef`].
    ///
    /// # Panics
    /// If `recv` returns a job that is not in the mailbox of the worker it is given.
    pub fn job_owned<E>(
        lender: &Lender<Worker>,
        recv: impl FnOnce(&mut Worker) -> Result<JobRef<'_>, E>,
    ) -> Result<OwnedJobRef, LendOr<E>> {
        let view = |w: &mut Worker| {
            let mailbox = payload_ptr(w.seg(), &w.layout, w.slot) as *const u8;
            let job = recv(w)?;
            assert!(job.data.is_empty() || job.data.as_ptr() == mailbox, "job_owned: the job is another worker's");
            Ok((JobInfo { id: job.id, len: job.data.len() }, job.data as *const [u8]))
        };
        // SAFETY: the job's bytes are this worker's mailbox (checked), mapped while the worker
        // lives and unchanged until its next receive or `done`, which the owned job prevents
        // by holding the worker lent (and never using it).
        unsafe { OwnedBytes::received(lender, view) }
    }
}

impl Deref for JobRef<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.data
    }
}

/// A job copied out of the mailbox, from [`Worker::recv`] and its `try_` / `_timeout` forms.
/// The worker stays busy with it until its next receive or [`Worker::done`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    id: u64,
    data: Vec<u8>,
}

impl Job {
    /// The job's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The payload.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The payload's length in bytes.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The payload, owned.
    pub fn into_data(self) -> Vec<u8> {
        self.data
    }
}

/// What [`Worker::recv_into`] (and its `try_` / `_timeout` forms) put in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobInfo {
    id: u64,
    len: usize,
}

impl JobInfo {
    /// The job's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The payload's length in bytes (the buffer's length).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Worker {
    pub(super) fn attach(shared: Arc<Shared>) -> Result<Worker, OpenError> {
        let (seg, layout) = (shared.seg(), *shared.layout());
        let me = ProcessId::current();
        let parts = seg.participants();
        let pool = pool_ref(seg, &layout);
        let take_vacant = || {
            for i in 0..layout.max_workers {
                if pool.mailbox(i).state() != VACANT {
                    continue;
                }
                let Some(entry) = parts.register(me, ROLE_WORKER, i + 1..i + 2) else {
                    continue;
                };
                if pool.join(i, me.pid) {
                    return Some(i);
                }
                parts.release(entry); // a lost job still waits to be reported: not ours to take
            }
            None
        };
        // A mailbox left LOST by a worker that died or left holding a job: taken over with
        // its loss report moved aside for the dispatcher (see `PoolRef::adopt_lost`).
        let adopt_lost = || {
            for i in 0..layout.max_workers {
                if pool.mailbox(i).state() != LOST {
                    continue;
                }
                let Some(entry) = parts.register(me, ROLE_WORKER, i + 1..i + 2) else {
                    continue;
                };
                if pool.adopt_lost(i, me.pid) {
                    return Some(i);
                }
                parts.release(entry);
            }
            None
        };
        let slot = take_vacant().or_else(|| {
            // Every mailbox is taken. Those of dead workers are freed here, without waiting
            // for the dispatcher's next `reap` (there may be no dispatcher): by CAS only, a
            // job they held becoming LOST; then a LOST one is adopted. So the first worker
            // restarted after a crash joins even when every mailbox was held by the dead.
            parts.reclaim_dead_in(1..1 + layout.max_workers, me, process_is_alive, |index, _| {
                pool.release_dead(index - 1);
            });
            take_vacant().or_else(adopt_lost)
        });
        let Some(slot) = slot else {
            return Err(OpenError::TooManyParticipants { path: seg.path().to_owned(), max: layout.max_workers });
        };
        // A dispatcher attached and alive now is ours to serve. One that detached, or that
        // died without detaching (its attached bit still set), is not: we wait for the next
        // one instead of reporting a dispatcher we never had as gone.
        let st = pool.dispatcher_state();
        let serving = st & 1 == 1 && dispatcher_alive(seg).is_some_and(|d| d.1);
        let reported_epoch = if serving { (st >> 1).wrapping_sub(1) } else { st >> 1 };
        let counter = shared.own_counter(slot + 1);
        Ok(Worker {
            shared,
            layout,
            slot,
            policy: WaitPolicy::default(),
            orphan_check: Throttle::new(DEFAULT_ORPHAN_CHECK),
            orphaned: Cell::new(false),
            finished: Cell::new(false),
            reported_epoch: Cell::new(reported_epoch),
            redeliver: None,
            counter,
        })
    }

    fn seg(&self) -> &Segment {
        self.shared.seg()
    }

    fn pool(&self) -> PoolRef<'_> {
        pool_ref(self.seg(), &self.layout)
    }

    /// This worker's mailbox index (what [`Dispatched::worker`] reports).
    ///
    /// [`Dispatched::worker`]: super::Dispatched::worker
    pub fn index(&self) -> usize {
        self.slot
    }

    /// The pool's `max_job_len`: the largest job in bytes.
    pub fn max_job_len(&self) -> usize {
        self.layout.max_job_size
    }

    /// How `recv` waits: spin, then sleep (default [`WaitPolicy::ADAPTIVE`]).
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.policy = policy;
    }

    /// How often a waiting worker checks that the dispatcher process lives (default
    /// [`DEFAULT_ORPHAN_CHECK`]): the bound on noticing a SIGKILLed dispatcher.
    pub fn set_orphan_check(&mut self, interval: Duration) {
        self.orphan_check.set_interval(interval.max(Duration::from_millis(1)));
    }

    /// Whether a live dispatcher holds the pool right now (reads `/proc`).
    pub fn dispatcher_alive(&self) -> bool {
        self.pool().dispatcher_state() & 1 == 1 && dispatcher_alive(self.seg()).is_some_and(|d| d.1)
    }

    /// After a receive reported `Orphaned` ([`PoolRecvError::Orphaned`]): whether that
    /// dispatcher finished normally, detaching when it was dropped (its process may have
    /// exited normally since), rather than dying holding the pool (SIGKILLed, crashed).
    /// `false` before any `Orphaned`.
    pub fn dispatcher_finished(&self) -> bool {
        self.finished.get()
    }

    /// [`check_orphaned`](Self::check_orphaned) without its `/proc` probe and without
    /// changing anything: a gone dispatcher already noticed, or one that detached cleanly.
    fn orphan_seen(&self) -> bool {
        if self.orphaned.get() {
            return true;
        }
        let st = self.pool().dispatcher_state();
        st >> 1 != self.reported_epoch.get() && st & 1 == 0
    }

    /// Whether the dispatcher this worker served is gone (sticky until reported by a
    /// `recv`). A clean detach is seen at once; a dead process within `orphan_check`.
    ///
    /// Dispatchers are numbered by the epoch in the pool's dispatcher state. Each loss is
    /// reported once: `reported_epoch` is the newest epoch whose dispatcher this worker has
    /// reported gone (or that was already gone when it joined).
    fn check_orphaned(&self) -> bool {
        if self.orphaned.get() {
            return true;
        }
        let st = self.pool().dispatcher_state();
        let epoch = st >> 1;
        // `==`, not `<=`: epochs only grow, but a peer may have written any value, and a
        // dispatcher attaching after that must still be recognised.
        if epoch == self.reported_epoch.get() {
            return false; // no dispatcher since the last report: wait for one
        }
        if st & 1 == 1 {
            // Attached, unless it was SIGKILLed: ask /proc, at most once per interval.
            if !self.orphan_check.due() {
                return false;
            }
            if dispatcher_alive(self.seg()).is_some_and(|d| d.1) {
                return false;
            }
        }
        self.reported_epoch.set(epoch);
        self.orphaned.set(true);
        // Bit 0 clear: the dispatcher detached (dropped); set: its process died holding it.
        self.finished.set(st & 1 == 0);
        true
    }

    /// Our mailbox holds state `s`, which its own worker cannot be in: puts it back to BUSY
    /// (so the next receive works) and says what was found, for the one error that reports
    /// it.
    fn repair(&self, s: u32) -> Corrupt {
        let slot = self.slot;
        let c = Corrupt::new(Kind::Pool, "a mailbox is in a state its own worker cannot be in")
            .with("mailbox", slot as u64)
            .with("state", u64::from(s));
        if self.pool().repair_own(slot, s) {
            c.and_repaired()
        } else {
            c
        }
    }

    /// Validates the length of a job the protocol handed us.
    fn check_len(&self, id: u64, len: u64) -> Result<(), Corrupt> {
        let max = self.layout.max_job_size as u64;
        if len > max {
            return Err(Corrupt::new(Kind::Pool, "a job claims more bytes than max_job_len")
                .with("job", id)
                .with("len", len)
                .with("max", max));
        }
        Ok(())
    }

    /// The job `id` of `len` bytes (checked by `check_len`) in our mailbox, in place.
    fn job_ref(&self, id: u64, len: u64) -> JobRef<'_> {
        debug_assert!(len <= self.layout.max_job_size as u64);
        let ptr = payload_ptr(self.seg(), &self.layout, self.slot);
        // SAFETY: len <= max_job_size (`check_len`), so the range is inside our mailbox's
        // payload, mapped for as long as `self` (the JobRef borrows it). The mailbox is TAKEN
        // by us: the dispatcher writes a payload only while FILLING by its own claim of an
        // IDLE mailbox (protocol invariants 1-3), so the bytes do not change while the JobRef
        // lives unless a peer breaks the protocol, which can garble the bytes but not move
        // the bounds.
        let data = unsafe { std::slice::from_raw_parts(ptr as *const u8, len as usize) };
        JobRef { id, data }
    }

    /// Takes a job, waiting for one as `wait` says, and reads it in place. The worker is
    /// idle while it waits (the dispatcher can only give it work now). After
    /// [`Waited::Empty`] it stays idle (use with a [`crate::WaitSet`]); after
    /// [`Waited::TimedOut`] it is no longer idle (a job that raced the timeout is returned
    /// instead). A job still in the mailbox is delivered even if the dispatcher has gone
    /// since.
    #[inline]
    pub fn recv_ref_with(&mut self, wait: Wait) -> Result<JobRef<'_>, Waited<PoolRecvError>> {
        let (id, len) = self.take_with(wait)?;
        Ok(self.job_ref(id, len))
    }

    wait_forms! {
        /// Takes a job if one is in the mailbox, without waiting, and reads it in place;
        /// otherwise the worker is now idle (waiting for work) and `Empty` is returned. Use
        /// with a [`crate::WaitSet`].
        fn try_recv_ref, recv_ref, recv_ref_timeout, recv_ref_deadline (&mut self) = recv_ref_with -> JobRef<'_>;
        errors (PoolTryRecvError, PoolRecvError, PoolRecvTimeoutError)
    }

    /// The job in the mailbox (id, length), taken as `wait` says.
    fn take_with(&mut self, wait: Wait) -> Result<(u64, u64), Waited<PoolRecvError>> {
        match wait {
            Wait::Now => Ok(self.try_take()?),
            wait => until(wait, |w| self.take(w.deadline())).map_err(Waited::timed),
        }
    }

    /// [`recv_ref_with`](Self::recv_ref_with), copying the job out: an owned [`Job`].
    #[inline]
    pub fn recv_with(&mut self, wait: Wait) -> Result<Job, Waited<PoolRecvError>> {
        self.recv_ref_with(wait).map(|j| Job { id: j.id, data: j.data.to_vec() })
    }

    wait_forms! {
        /// [`try_recv_ref`](Self::try_recv_ref), copying the job out: an owned [`Job`].
        fn try_recv, recv, recv_timeout, recv_deadline (&mut self) = recv_with -> Job;
        errors (PoolTryRecvError, PoolRecvError, PoolRecvTimeoutError)
    }

    /// [`recv_ref_with`](Self::recv_ref_with), copying the job into `buf` (replacing its
    /// contents; no allocation once `buf` has the capacity).
    #[inline]
    pub fn recv_into_with(&mut self, buf: &mut Vec<u8>, wait: Wait) -> Result<JobInfo, Waited<PoolRecvError>> {
        self.recv_ref_with(wait).map(|j| copy_into(&j, buf))
    }

    wait_forms! {
        /// [`try_recv_ref`](Self::try_recv_ref), copying the job into `buf`.
        fn try_recv_into, recv_into, recv_into_timeout, recv_into_deadline (&mut self, buf: &mut Vec<u8>)
            = recv_into_with -> JobInfo;
        errors (PoolTryRecvError, PoolRecvError, PoolRecvTimeoutError)
    }

    /// Copies the job `job` into the start of `buf`; a job longer than `buf` stays in the
    /// mailbox for the next receive (`TooSmall`).
    fn job_into_slice<E>(&mut self, (id, len): (u64, u64), buf: &mut [u8]) -> Result<JobInfo, RecvIntoSliceError<E>> {
        let job = self.job_ref(id, len);
        let n = job.len();
        let Some(dst) = buf.get_mut(..n) else {
            self.redeliver = Some((id, len));
            return Err(too_small(n, buf.len()));
        };
        dst.copy_from_slice(job.data);
        Ok(JobInfo { id, len: n })
    }

    /// Takes a job, waiting as [`recv_ref_with`](Self::recv_ref_with) does, and copies it
    /// into the start of `buf`: one copy, straight out of the mailbox, and no allocation.
    /// Returns its id and length (`buf[..len]` holds it).
    ///
    /// A job longer than `buf` is [`RecvIntoSliceError::TooSmall`]: it stays in this worker's
    /// mailbox (the worker stays busy with it; the dispatcher cannot write there), and the
    /// next receive of any form returns it again instead of asking for work.
    /// [`done`](Self::done) gives it up instead.
    #[inline]
    pub fn recv_into_slice_with(
        &mut self,
        buf: &mut [u8],
        wait: Wait,
    ) -> Result<JobInfo, RecvIntoSliceError<Waited<PoolRecvError>>> {
        let job = self.take_with(wait)?;
        self.job_into_slice(job, buf)
    }

    wait_forms! {
        /// Takes a job if one is in the mailbox, without waiting, and copies it into the
        /// start of `buf` (see [`recv_into_slice_with`](Self::recv_into_slice_with));
        /// otherwise the worker is idle, as with [`try_recv_ref`](Self::try_recv_ref).
        fn try_recv_into_slice, recv_into_slice, recv_into_slice_timeout, recv_into_slice_deadline
            (&mut self, buf: &mut [u8]) = recv_into_slice_with -> JobInfo;
        errors (PoolTryRecvError, PoolRecvError, PoolRecvTimeoutError) slice
    }

    /// A blocking iterator over owned jobs: each `next` is a [`recv`](Self::recv). An error
    /// is yielded and the iteration goes on (after `Orphaned` it waits for the next
    /// dispatcher), except `Truncated`, which holds for the life of the worker: it is
    /// yielded once and the iteration ends.
    pub fn iter(&mut self) -> Iter<'_> {
        Iter::new(self)
    }

    /// An iterator over the jobs there are now, owned: each `next` is a
    /// [`try_recv`](Self::try_recv). It ends at `Empty` (the worker is then idle); another
    /// error is yielded once, then it ends.
    pub fn try_iter(&mut self) -> TryIter<'_> {
        TryIter::new(self)
    }

    /// Whether the pool's file was truncated under this process (see
    /// [`PoolRecvError::Truncated`]). Slow paths only: nothing found, a failure, a timeout.
    #[cold]
    fn truncated(&self) -> bool {
        self.seg().was_truncated()
    }

    /// The blocking take: a job's id and checked length, or an error (`None`: the deadline
    /// passed).
    fn take(&mut self, deadline: Deadline) -> Result<(u64, u64), Option<PoolRecvError>> {
        if let Some(job) = self.redeliver.take() {
            return Ok(job);
        }
        let slot = self.slot;
        if let Idle::Corrupt(s) = self.make_idle() {
            if self.truncated() {
                return Err(Some(PoolRecvError::Truncated));
            }
            return Err(Some(PoolRecvError::Corrupt(self.repair(s))));
        }
        let this = &*self;
        let pool = this.pool();
        let got = try_then_block_on(
            pool.mailbox(slot).event(),
            this.policy,
            deadline,
            || Some(this.orphan_check.interval()),
            this.counter,
            || {
                match pool.try_take(slot) {
                    Mail::Job { id, len } => Some(Ok((id, len))),
                    Mail::Corrupt(_) if this.truncated() => Some(Err(PoolRecvError::Truncated)),
                    Mail::Corrupt(s) => Some(Err(PoolRecvError::Corrupt(this.repair(s)))),
                    // Nothing: zeros past a cut also read as "the dispatcher is gone".
                    Mail::Empty | Mail::Filling if this.truncated() => Some(Err(PoolRecvError::Truncated)),
                    Mail::Empty | Mail::Filling => this.check_orphaned().then_some(Err(PoolRecvError::Orphaned)),
                }
            },
        );
        let (id, len) = match got {
            Some(Ok(job)) => job,
            Some(Err(PoolRecvError::Orphaned)) => match this.settle() {
                Some(job) => job,
                None => {
                    this.orphaned.set(false);
                    return Err(Some(PoolRecvError::Orphaned));
                }
            },
            Some(Err(e)) => return Err(Some(e)),
            None => match this.settle() {
                Some(job) => job,
                None if this.truncated() => return Err(Some(PoolRecvError::Truncated)),
                None => return Err(None),
            },
        };
        match this.check_len(id, len) {
            Ok(()) => {
                this.counter.message(len as usize);
                Ok((id, len))
            }
            Err(_) if this.truncated() => Err(Some(PoolRecvError::Truncated)),
            Err(c) => Err(Some(PoolRecvError::Corrupt(c))),
        }
    }

    /// The non-blocking take.
    fn try_take(&mut self) -> Result<(u64, u64), PoolTryRecvError> {
        if let Some(job) = self.redeliver.take() {
            return Ok(job);
        }
        let slot = self.slot;
        let pool = self.pool();
        if let Idle::Corrupt(s) = self.make_idle() {
            if self.truncated() {
                return Err(PoolTryRecvError::Truncated);
            }
            return Err(PoolTryRecvError::Corrupt(self.repair(s)));
        }
        let (id, len) = match pool.try_take(slot) {
            Mail::Job { id, len } => (id, len),
            Mail::Corrupt(_) if self.truncated() => return Err(PoolTryRecvError::Truncated),
            Mail::Corrupt(s) => return Err(PoolTryRecvError::Corrupt(self.repair(s))),
            Mail::Empty | Mail::Filling if self.truncated() => return Err(PoolTryRecvError::Truncated),
            Mail::Empty | Mail::Filling => {
                if !self.check_orphaned() {
                    return Err(PoolTryRecvError::Empty);
                }
                match self.settle() {
                    Some(job) => job,
                    None => {
                        self.orphaned.set(false);
                        return Err(PoolTryRecvError::Orphaned);
                    }
                }
            }
        };
        match self.check_len(id, len) {
            Ok(()) => {
                self.counter.message(len as usize);
                Ok((id, len))
            }
            Err(_) if self.truncated() => Err(PoolTryRecvError::Truncated),
            Err(c) => Err(PoolTryRecvError::Corrupt(c)),
        }
    }

    /// Stops being idle; returns a job that raced us into the mailbox, if any.
    fn settle(&self) -> Option<(u64, u64)> {
        let pool = self.pool();
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            // A live dispatcher finishes a FILLING within FILLING_PATIENCE, and the other
            // states end this loop at once; only a peer rewriting the word could keep us
            // here, so past twice the patience we stop and stay as we are.
            if start.elapsed() > 2 * FILLING_PATIENCE {
                return None;
            }
            match pool.withdraw(self.slot) {
                Withdraw::Withdrawn | Withdraw::Corrupt(_) => return None,
                Withdraw::Full => {
                    if let Mail::Job { id, len } = pool.try_take(self.slot) {
                        return Some((id, len));
                    }
                }
                Withdraw::Filling => {
                    if self.settle_filling(start, &mut spins, BUSY) {
                        return None;
                    }
                }
            }
        }
    }

    /// The dispatcher is writing into our mailbox. Waits for it, unless it is dead or has
    /// taken longer than FILLING_PATIENCE, in which case the FILLING is abandoned (moved to
    /// `to`) and `true` returned. (A live dispatcher that still finishes later finds its
    /// CAS to FULL failing and keeps the job: nothing is stranded.)
    fn settle_filling(&self, start: Instant, spins: &mut u32, to: u32) -> bool {
        *spins += 1;
        if *spins < 256 {
            std::hint::spin_loop();
            return false;
        }
        std::thread::yield_now();
        if *spins % 1024 != 0 {
            return false;
        }
        let dead = !dispatcher_alive(self.seg()).is_some_and(|d| d.1);
        (dead || start.elapsed() > FILLING_PATIENCE) && self.pool().abandon_filling(self.slot, to)
    }

    /// Declares the current job finished and the worker waiting for work, before the next
    /// receive. Call it only if a receive follows promptly (or before waiting in a
    /// [`crate::WaitSet`]): an idle worker is one the dispatcher may hand a job to.
    pub fn done(&mut self) {
        self.redeliver = None;
        let _ = self.make_idle();
    }

    /// Declares this worker waiting for work (see `PoolRef::make_idle`), counting the wake
    /// if a dispatcher slept on the idle event.
    fn make_idle(&self) -> Idle {
        let (idle, woke) = self.pool().make_idle_woke(self.slot);
        if woke {
            self.counter.futex_wake();
        }
        idle
    }
}

impl Waitable for Worker {
    /// The mailbox's own futex: notified when a job is placed in it (and when the
    /// dispatcher detaches).
    fn wait_handle(&self) -> WaitHandle<'_> {
        WaitHandle { event: self.pool().mailbox(self.slot).event() }
    }

    /// A job is in the mailbox, or the dispatcher is gone (`try_recv` then says which).
    /// Only an idle worker gets jobs: call `try_recv` or `done` before waiting. Reads the
    /// mailbox and the dispatcher word only: a SIGKILLed dispatcher is found by
    /// [`recheck`](Waitable::recheck).
    fn is_ready(&self) -> bool {
        self.redeliver.is_some() || self.pool().is_full(self.slot) || self.truncated() || self.orphan_seen()
    }

    fn recheck_interval(&self) -> Option<Duration> {
        Some(self.orphan_check.interval())
    }

    /// Asks `/proc` whether the dispatcher still lives (at most once per orphan-check
    /// interval); `true` when it is gone, which the next receive reports.
    fn recheck(&self) -> bool {
        self.check_orphaned()
    }
}

/// Puts `job` in `buf`, replacing its contents.
fn copy_into(job: &JobRef<'_>, buf: &mut Vec<u8>) -> JobInfo {
    buf.clear();
    buf.extend_from_slice(job.data);
    JobInfo { id: job.id, len: job.data.len() }
}

/// The blocking iterator of [`Worker::iter`].
///
/// An `Iterator` whose items are `Result<Job, PoolRecvError>`.
pub type Iter<'a> = crate::endpoint::iter::Iter<&'a mut Worker>;

/// The non-blocking iterator of [`Worker::try_iter`].
///
/// An `Iterator` whose items are `Result<Job, PoolRecvError>`.
pub type TryIter<'a> = crate::endpoint::iter::TryIter<&'a mut Worker>;

impl_receive!(ref Worker: JobRef<'a>; note |job, c| c.with("job_id", job.id()));

impl Drop for Worker {
    fn drop(&mut self) {
        let pool = self.pool();
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            match pool.leave(self.slot) {
                Leave::Left | Leave::LeftLost => break,
                Leave::Filling => {
                    // Bounded as in `settle`, against a peer that keeps writing FILLING.
                    if self.settle_filling(start, &mut spins, VACANT) || start.elapsed() > 2 * FILLING_PATIENCE {
                        break;
                    }
                }
            }
        }
        self.seg().participants().release(self.slot + 1);
    }
}
