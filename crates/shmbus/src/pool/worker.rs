//! A pool's workers and the jobs they take.

use std::cell::Cell;
use std::time::{Duration, Instant};

use super::channel::{dispatcher_alive, payload_ptr, pool_ref, DEFAULT_ORPHAN_CHECK, ROLE_WORKER};
use super::error::{RecvError, TryRecvError};
use super::layout::{PoolConfig, PoolLayout};
use super::protocol::{Idle, Leave, Mail, PoolRef, Withdraw, BUSY, LOST, VACANT};
use crate::domain::Domain;
use crate::error::OpenError;
use crate::segment::{CreateOptions, Segment};
use crate::sys::{monotonic_ns, process_is_alive, ProcessId};
use crate::wait::{block_on, Deadline, WaitPolicy};
use crate::waitset::{WaitHandle, Waitable};

/// How long a worker waits for a live dispatcher to finish writing a job (a copy of at most
/// 16 MiB) before it gives up on it; see `settle_filling`.
const FILLING_PATIENCE: Duration = Duration::from_secs(1);

// ==================================================================== Worker

/// One worker of a pool. `Send`, not `Sync`.
#[derive(Debug)]
pub struct Worker {
    seg: Segment,
    layout: PoolLayout,
    /// Our mailbox; our participant entry is `slot + 1`.
    slot: usize,
    policy: WaitPolicy,
    orphan_check: Duration,
    /// Orphan detection (see `check_orphaned`).
    orphaned: Cell<bool>,
    reported_epoch: Cell<u64>,
    next_check_ns: Cell<u64>,
}

/// A job taken from the mailbox: read it in place. The worker stays busy with it until its
/// next `recv` / `try_recv` / `done`.
#[derive(Debug)]
pub struct Job<'a> {
    id: u64,
    data: &'a [u8],
}

impl<'a> Job<'a> {
    /// The job's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The payload, in the shared mailbox (no copy).
    pub fn data(&self) -> &'a [u8] {
        self.data
    }
}

impl Worker {
    /// Joins the existing pool `name` as a worker, taking a free mailbox.
    ///
    /// Fails with [`OpenError::TooManyParticipants`] when all `max_workers` mailboxes are
    /// taken (by live workers, or by dead ones the dispatcher has not reaped yet).
    pub fn join(domain: &Domain, name: &str) -> Result<Worker, OpenError> {
        let (seg, layout) = Segment::open::<PoolLayout>(domain, name)?;
        Worker::attach(seg, layout)
    }

    /// Joins `name`, creating the pool with `config` if it does not exist yet (so workers
    /// may start before the dispatcher).
    pub fn create_or_join(domain: &Domain, name: &str, config: PoolConfig) -> Result<Worker, OpenError> {
        let layout = config.layout()?;
        let (seg, layout, _) = Segment::create_or_open(domain, name, &layout, &CreateOptions::default())?;
        Worker::attach(seg, layout)
    }

    fn attach(seg: Segment, layout: PoolLayout) -> Result<Worker, OpenError> {
        let me = ProcessId::current();
        let parts = seg.participants();
        let pool = pool_ref(&seg, &layout);
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
        let serving = st & 1 == 1 && dispatcher_alive(&seg).is_some_and(|d| d.1);
        let reported_epoch = if serving { (st >> 1).wrapping_sub(1) } else { st >> 1 };
        Ok(Worker {
            seg,
            layout,
            slot,
            policy: WaitPolicy::default(),
            orphan_check: DEFAULT_ORPHAN_CHECK,
            orphaned: Cell::new(false),
            reported_epoch: Cell::new(reported_epoch),
            next_check_ns: Cell::new(0),
        })
    }

    fn pool(&self) -> PoolRef<'_> {
        pool_ref(&self.seg, &self.layout)
    }

    /// This worker's mailbox index (what [`Dispatched::worker`] reports).
    ///
    /// [`Dispatched::worker`]: super::Dispatched::worker
    pub fn index(&self) -> usize {
        self.slot
    }

    /// The pool's `max_job_size`.
    pub fn max_job_size(&self) -> usize {
        self.layout.max_job_size
    }

    /// How `recv` waits: spin, then sleep (default [`WaitPolicy::ADAPTIVE`]).
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.policy = policy;
    }

    /// How often a waiting worker checks that the dispatcher process lives (default
    /// [`DEFAULT_ORPHAN_CHECK`]): the bound on noticing a SIGKILLed dispatcher.
    pub fn set_orphan_check(&mut self, interval: Duration) {
        self.orphan_check = interval.max(Duration::from_millis(1));
    }

    /// Whether a live dispatcher holds the pool right now (reads `/proc`).
    pub fn dispatcher_alive(&self) -> bool {
        self.pool().dispatcher_state() & 1 == 1 && dispatcher_alive(&self.seg).is_some_and(|d| d.1)
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
            let now = monotonic_ns();
            if now < self.next_check_ns.get() {
                return false;
            }
            self.next_check_ns.set(now.saturating_add(self.orphan_check.as_nanos() as u64));
            if dispatcher_alive(&self.seg).is_some_and(|d| d.1) {
                return false;
            }
        }
        self.reported_epoch.set(epoch);
        self.orphaned.set(true);
        true
    }

    /// Our mailbox holds state `s`, which its own worker cannot be in: puts it back to BUSY
    /// (so the next `recv` works) and says what was found, for the one error that reports it.
    fn repair(&self, s: u32) -> String {
        let slot = self.slot;
        let fixed = if self.pool().repair_own(slot, s) { "; reset, the worker goes on" } else { "" };
        format!("mailbox {slot} was in state {s}, not one its own worker can be in{fixed}")
    }

    /// Turns a job the protocol handed us into a `Job`, validating its length.
    fn job(&self, id: u64, len: u64) -> Result<Job<'_>, String> {
        if len > self.layout.max_job_size as u64 {
            return Err(format!("job {id} claims {len} bytes, more than max_job_size {}", self.layout.max_job_size));
        }
        let ptr = payload_ptr(&self.seg, &self.layout, self.slot);
        // SAFETY: len <= max_job_size, so the range is inside our mailbox's payload, mapped
        // for as long as `self` (the Job borrows it). The mailbox is TAKEN by us: the
        // dispatcher writes a payload only while FILLING by its own claim of an IDLE mailbox
        // (protocol invariants 1-3), so the bytes do not change while the Job lives unless a
        // peer breaks the protocol, which can garble the bytes but not move the bounds.
        let data = unsafe { std::slice::from_raw_parts(ptr as *const u8, len as usize) };
        Ok(Job { id, data })
    }

    /// Waits for a job (blocking, with the wait policy). The worker is idle while it waits:
    /// the dispatcher can only give it work now. A job still in the mailbox is delivered
    /// even if the dispatcher has gone since.
    pub fn recv(&mut self) -> Result<Job<'_>, RecvError> {
        self.recv_deadline(Deadline::NEVER)
    }

    /// [`recv`](Self::recv) with a timeout; on [`RecvError::Timeout`] the worker is no
    /// longer idle (a job that raced the timeout is returned instead).
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Job<'_>, RecvError> {
        self.recv_deadline(Deadline::after(timeout))
    }

    /// Whether the pool's file was truncated under this process (see
    /// [`RecvError::Truncated`]). Slow paths only: nothing found, a failure, a timeout.
    #[cold]
    fn truncated(&self) -> bool {
        self.seg.was_truncated()
    }

    fn recv_deadline(&mut self, deadline: Deadline) -> Result<Job<'_>, RecvError> {
        let slot = self.slot;
        if let Idle::Corrupt(s) = self.pool().make_idle(slot) {
            if self.truncated() {
                return Err(RecvError::Truncated);
            }
            return Err(RecvError::Corrupt { what: self.repair(s) });
        }
        let this = &*self;
        let pool = this.pool();
        let got = block_on(pool.mailbox(slot).event(), this.policy, deadline, Some(this.orphan_check), || {
            match pool.try_take(slot) {
                Mail::Job { id, len } => Some(Ok((id, len))),
                Mail::Corrupt(_) if this.truncated() => Some(Err(RecvError::Truncated)),
                Mail::Corrupt(s) => Some(Err(RecvError::Corrupt { what: this.repair(s) })),
                // Nothing: zeros past a cut also read as "the dispatcher is gone".
                Mail::Empty | Mail::Filling if this.truncated() => Some(Err(RecvError::Truncated)),
                Mail::Empty | Mail::Filling => this.check_orphaned().then_some(Err(RecvError::Orphaned)),
            }
        });
        let (id, len) = match got {
            Some(Ok(job)) => job,
            Some(Err(RecvError::Orphaned)) => match this.settle() {
                Some(job) => job,
                None => {
                    this.orphaned.set(false);
                    return Err(RecvError::Orphaned);
                }
            },
            Some(Err(e)) => return Err(e),
            None => match this.settle() {
                Some(job) => job,
                None if this.truncated() => return Err(RecvError::Truncated),
                None => return Err(RecvError::Timeout),
            },
        };
        this.job(id, len)
            .map_err(|what| if this.truncated() { RecvError::Truncated } else { RecvError::Corrupt { what } })
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
        let dead = !dispatcher_alive(&self.seg).is_some_and(|d| d.1);
        (dead || start.elapsed() > FILLING_PATIENCE) && self.pool().abandon_filling(self.slot, to)
    }

    /// Takes a job if one is in the mailbox, without waiting; otherwise the worker is now
    /// idle (waiting for work) and `Empty` is returned. Use with a [`crate::WaitSet`].
    pub fn try_recv(&mut self) -> Result<Job<'_>, TryRecvError> {
        let slot = self.slot;
        let pool = self.pool();
        if let Idle::Corrupt(s) = pool.make_idle(slot) {
            if self.truncated() {
                return Err(TryRecvError::Truncated);
            }
            return Err(TryRecvError::Corrupt { what: self.repair(s) });
        }
        let (id, len) = match pool.try_take(slot) {
            Mail::Job { id, len } => (id, len),
            Mail::Corrupt(_) if self.truncated() => return Err(TryRecvError::Truncated),
            Mail::Corrupt(s) => return Err(TryRecvError::Corrupt { what: self.repair(s) }),
            Mail::Empty | Mail::Filling if self.truncated() => return Err(TryRecvError::Truncated),
            Mail::Empty | Mail::Filling => {
                if !self.check_orphaned() {
                    return Err(TryRecvError::Empty);
                }
                match self.settle() {
                    Some(job) => job,
                    None => {
                        self.orphaned.set(false);
                        return Err(TryRecvError::Orphaned);
                    }
                }
            }
        };
        self.job(id, len).map_err(|what| {
            if self.truncated() {
                TryRecvError::Truncated
            } else {
                TryRecvError::Corrupt { what }
            }
        })
    }

    /// Declares the current job finished and the worker waiting for work, before the next
    /// `recv`. Call it only if a `recv` / `try_recv` follows promptly (or before waiting in a
    /// [`crate::WaitSet`]): an idle worker is one the dispatcher may hand a job to.
    pub fn done(&mut self) {
        let _ = self.pool().make_idle(self.slot);
    }
}

impl Waitable for Worker {
    /// The mailbox's own futex: notified when a job is placed in it (and when the
    /// dispatcher detaches).
    fn wait_handle(&self) -> WaitHandle<'_> {
        WaitHandle { event: self.pool().mailbox(self.slot).event() }
    }

    /// A job is in the mailbox, or the dispatcher is gone (`try_recv` then says which).
    /// Only an idle worker gets jobs: call `try_recv` or `done` before waiting.
    fn is_ready(&self) -> bool {
        self.pool().is_full(self.slot) || self.truncated() || self.check_orphaned()
    }

    fn recheck_interval(&self) -> Option<Duration> {
        Some(self.orphan_check)
    }
}

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
        self.seg.participants().release(self.slot + 1);
    }
}
