//! Segment glue: the pool's endpoints over a shared mapping.
//!
//! Builds [`PoolRef`]s from the validated segment layout, ties mailbox `i` to participant
//! entry `i + 1` (entry 0 is the dispatcher's), and does everything that needs a clock, a
//! futex or `/proc`: blocking, orphan detection, reclaiming the dead.

use std::cell::Cell;
use std::time::{Duration, Instant};

use super::protocol::{
    Claim, Idle, Leave, Mail, PoolHeader, PoolRef, Withdraw, BUSY, FULL, HEADER_SIZE, LOST, MAILBOX_HEAD, TAKEN, VACANT,
};
use super::{
    BatchDispatchError, Dispatched, LostJob, PoolConfig, PoolLayout, PoolStatus, RecvError, TryDispatchError,
    TryRecvError, DEFAULT_ORPHAN_CHECK,
};
use crate::domain::Domain;
use crate::error::OpenError;
use crate::segment::{CreateOptions, Segment};
use crate::sys::{monotonic_ns, process_is_alive, ProcessId};
use crate::wait::{block_on, deadline_after, WaitPolicy};
use crate::waitset::{WaitHandle, Waitable};

/// Participant role numbers (shown by `shmbus info`).
pub(crate) const ROLE_DISPATCHER: u32 = 1;
pub(crate) const ROLE_WORKER: u32 = 2;
/// The dispatcher's participant entry.
const DISPATCHER_ENTRY: usize = 0;
/// How long a worker waits for a live dispatcher to finish writing a job (a copy of at most
/// 16 MiB) before it gives up on it; see `settle_filling`.
const FILLING_PATIENCE: Duration = Duration::from_secs(1);

/// The pool view of a segment.
fn pool_ref<'a>(seg: &'a Segment, layout: &PoolLayout) -> PoolRef<'a> {
    let base = seg.kind_base();
    // SAFETY: `Segment::open`/`create_or_open` validated that the file is exactly
    // KIND_OFFSET + kind_area_size() bytes, so the header and `max_workers` mailboxes of
    // `stride` bytes lie inside the mapping, which lives as long as `seg`. The kind area is
    // page aligned and HEADER_SIZE and stride are multiples of 64, so each Mailbox is 64-byte
    // aligned. All fields are atomics: every bit pattern is valid.
    unsafe {
        let hdr = &*(base as *const PoolHeader);
        PoolRef::from_raw(hdr, base.add(HEADER_SIZE), layout.stride(), layout.max_workers)
    }
}

/// Start of mailbox `i`'s payload (`i < max_workers`).
fn payload_ptr(seg: &Segment, layout: &PoolLayout, i: usize) -> *mut u8 {
    assert!(i < layout.max_workers);
    // SAFETY: as in `pool_ref`: mailbox i and its max_job_size payload bytes are inside the
    // mapping.
    unsafe { seg.kind_base().add(HEADER_SIZE + i * layout.stride() + MAILBOX_HEAD) }
}

fn dispatcher_alive(seg: &Segment) -> Option<(u32, bool)> {
    seg.participants().owner(DISPATCHER_ENTRY).map(|o| (o.process.pid, process_is_alive(o.process)))
}

/// Reads a pool's status without joining it (read permission suffices).
pub fn status(domain: &Domain, name: &str) -> Result<PoolStatus, OpenError> {
    let (seg, layout) = Segment::open_read_only::<PoolLayout>(domain, name)?;
    Ok(status_of(&seg, &layout))
}

/// Jobs in pool segment `seg` that the pool still owes someone, for `admin::inspect` (loads
/// only): mailboxes FULL (dispatched, not taken), LOST (its worker died or left holding
/// it; the next `reap` reports it), or TAKEN by a worker that has died (the next `reap`
/// marks it LOST and reports it). By the protocol's invariant 5 every dispatched job is
/// taken or reported lost; these are the ones that are neither yet.
pub(crate) fn undelivered_jobs(seg: &Segment) -> Result<u64, OpenError> {
    let layout = seg.layout::<PoolLayout>()?;
    let pool = pool_ref(seg, &layout);
    let parts = seg.participants();
    // Mailbox `i` belongs to participant entry `1 + i`. A job taken by a worker that has died
    // since is owed too: the next `reap` turns it into a loss report.
    let owed = |i: usize| match pool.mailbox(i).state() {
        FULL | LOST => true,
        TAKEN => parts.owner(1 + i).is_none_or(|p| !process_is_alive(p.process)),
        _ => false,
    };
    // Plus loss reports a worker that adopted a LOST mailbox moved aside.
    let pending = (0..pool.workers()).filter(|&i| pool.has_pending(i)).count() as u64;
    Ok((0..pool.workers()).filter(|&i| owed(i)).count() as u64 + pending)
}

fn status_of(seg: &Segment, layout: &PoolLayout) -> PoolStatus {
    let pool = pool_ref(seg, layout);
    let (workers, idle) = pool.counts();
    let disp = dispatcher_alive(seg);
    PoolStatus {
        max_workers: layout.max_workers,
        max_job_size: layout.max_job_size,
        workers: workers as usize,
        idle: idle as usize,
        busy: (workers - idle) as usize,
        dispatcher_pid: disp.map(|d| d.0),
        dispatcher_alive: disp.is_some_and(|d| d.1),
        dispatched: pool.dispatched(),
        lost: pool.lost(),
    }
}

// ==================================================================== Dispatcher

/// The pool's single dispatcher. `Send`; one thread dispatches at a time (`&mut self`).
#[derive(Debug)]
pub struct Dispatcher {
    seg: Segment,
    layout: PoolLayout,
    /// Round-robin start for the idle search.
    rr: usize,
    next_id: u64,
    dispatched: u64,
    /// Lost jobs found while attaching, returned by the first `reap`.
    pending_lost: Vec<LostJob>,
}

impl Dispatcher {
    /// Creates the pool `name` (or opens it if it exists with the same layout) and becomes
    /// its dispatcher.
    pub fn create(domain: &Domain, name: &str, config: PoolConfig) -> Result<Dispatcher, OpenError> {
        Dispatcher::create_with(domain, name, config, &CreateOptions::default())
    }

    /// [`create`](Self::create) with explicit file options.
    pub fn create_with(
        domain: &Domain,
        name: &str,
        config: PoolConfig,
        opts: &CreateOptions,
    ) -> Result<Dispatcher, OpenError> {
        let layout = config.layout()?;
        let (seg, layout, _) = Segment::create_or_open(domain, name, &layout, opts)?;
        Dispatcher::attach(seg, layout)
    }

    /// Becomes the dispatcher of the existing pool `name`. Fails with [`OpenError::Busy`]
    /// while another dispatcher lives; takes over from a dead one (repairing what it left).
    pub fn open(domain: &Domain, name: &str) -> Result<Dispatcher, OpenError> {
        let (seg, layout) = Segment::open::<PoolLayout>(domain, name)?;
        Dispatcher::attach(seg, layout)
    }

    fn attach(seg: Segment, layout: PoolLayout) -> Result<Dispatcher, OpenError> {
        let me = ProcessId::current();
        let parts = seg.participants();
        let mut registered = false;
        for _ in 0..16 {
            if parts.register(me, ROLE_DISPATCHER, DISPATCHER_ENTRY..DISPATCHER_ENTRY + 1).is_some() {
                registered = true;
                break;
            }
            match parts.owner(DISPATCHER_ENTRY) {
                // Our own pid with another start time is a dead predecessor (a pid reused, as
                // when a container restarts), not us: `process_is_alive` says so.
                Some(o)
                    if (o.process.pid == me.pid
                        && (o.process.start_time == me.start_time
                            || o.process.start_time == 0
                            || me.start_time == 0))
                        || process_is_alive(o.process) =>
                {
                    return Err(OpenError::Busy { path: seg.path().to_owned(), holder_pid: o.process.pid });
                }
                // Dead (or just released): reclaim the entry and try again. Nothing to clean
                // in the entry itself; the mailboxes it left FILLING are repaired below.
                _ => {
                    parts.reclaim_dead_in(DISPATCHER_ENTRY..DISPATCHER_ENTRY + 1, me, process_is_alive, |_, _| {});
                }
            }
        }
        if !registered {
            let holder_pid = parts.owner(DISPATCHER_ENTRY).map_or(0, |o| o.process.pid);
            return Err(OpenError::Busy { path: seg.path().to_owned(), holder_pid });
        }
        let pool = pool_ref(&seg, &layout);
        // We are the only dispatcher and have not dispatched yet: any FILLING is a dead
        // predecessor's half-written job, never delivered. Its worker is still waiting.
        pool.reset_filling();
        pool.attach();
        let next_id = pool.next_job_id().max(1);
        let dispatched = pool.dispatched();
        let mut d = Dispatcher { seg, layout, rr: 0, next_id, dispatched, pending_lost: Vec::new() };
        let mut lost = Vec::new();
        d.reap_into(&mut lost);
        d.pending_lost = lost;
        Ok(d)
    }

    fn pool(&self) -> PoolRef<'_> {
        pool_ref(&self.seg, &self.layout)
    }

    /// The pool's `max_job_size`.
    pub fn max_job_size(&self) -> usize {
        self.layout.max_job_size
    }

    /// The pool's `max_workers`.
    pub fn max_workers(&self) -> usize {
        self.layout.max_workers
    }

    /// Places `job` in an idle worker's mailbox and wakes that worker alone, with an id the
    /// pool assigns (1, 2, …, continued across dispatcher takeovers). Never blocks, never
    /// allocates; no system call unless the chosen worker sleeps.
    pub fn try_dispatch<J: AsRef<[u8]>>(&mut self, job: J) -> Result<Dispatched, TryDispatchError<J>> {
        let id = self.next_id;
        let r = self.try_dispatch_with_id(id, job);
        if r.is_ok() {
            self.next_id = id.wrapping_add(1);
            self.pool().record(self.next_id, self.dispatched);
        }
        r
    }

    /// [`try_dispatch`](Self::try_dispatch) with a caller-chosen job id.
    pub fn try_dispatch_with_id<J: AsRef<[u8]>>(
        &mut self,
        job_id: u64,
        job: J,
    ) -> Result<Dispatched, TryDispatchError<J>> {
        let bytes = job.as_ref();
        let max = self.layout.max_job_size;
        if bytes.len() > max {
            let len = bytes.len();
            return Err(TryDispatchError::TooLarge { job, len, max });
        }
        // A claim whose worker abandoned it (see `fill`) is retried with another worker;
        // each claim clears that worker's idle bit, so this ends.
        for _ in 0..=self.layout.max_workers {
            match self.pool().claim_idle(self.rr) {
                Claim::Claimed(i) => {
                    if self.fill(i, job_id, bytes, true) {
                        return Ok(Dispatched { job_id, worker: i });
                    }
                }
                Claim::AllBusy => break,
                Claim::NoWorkers if self.seg.was_truncated() => return Err(TryDispatchError::Truncated(job)),
                Claim::NoWorkers => return Err(TryDispatchError::NoWorkers(job)),
            }
        }
        // Failing anyway: zeros past a cut read as workers gone or busy.
        if self.seg.was_truncated() {
            return Err(TryDispatchError::Truncated(job));
        }
        Err(TryDispatchError::AllBusy(job))
    }

    /// Copies `bytes` into claimed (FILLING) mailbox `i` and publishes it. `false` if the
    /// worker gave up on us meanwhile (it wrongly believed us dead): not delivered.
    fn fill(&mut self, i: usize, job_id: u64, bytes: &[u8], wake: bool) -> bool {
        debug_assert!(bytes.len() <= self.layout.max_job_size);
        let dst = payload_ptr(&self.seg, &self.layout, i);
        // SAFETY: `dst` has max_job_size >= bytes.len() bytes inside the mapping; mailbox i
        // is FILLING by our claim, so its worker does not read the payload until `publish`
        // (protocol invariant 2); `bytes` is our own memory, not overlapping the mapping's
        // payload of a mailbox we own.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
        let pool = pool_ref(&self.seg, &self.layout);
        self.rr = (i + 1) % self.layout.max_workers;
        if !pool.publish(i, job_id, bytes.len() as u64, wake) {
            return false;
        }
        self.dispatched += 1;
        pool.record(self.next_id, self.dispatched);
        true
    }

    /// Fills as many idle workers as there are, in order, with `jobs` (pool-assigned ids),
    /// then wakes them all. Appends one [`Dispatched`] per job sent to `dispatched` (reuse
    /// the vector to avoid allocating) and returns how many were sent: `jobs[n..]` were not
    /// (every worker was busy). All sizes are checked before anything is sent.
    pub fn try_dispatch_batch(
        &mut self,
        jobs: &[&[u8]],
        dispatched: &mut Vec<Dispatched>,
    ) -> Result<usize, BatchDispatchError> {
        let max = self.layout.max_job_size;
        if let Some((index, j)) = jobs.iter().enumerate().find(|(_, j)| j.len() > max) {
            return Err(BatchDispatchError::TooLarge { index, len: j.len(), max });
        }
        let first = dispatched.len();
        let mut claims = 0;
        'jobs: for job in jobs {
            loop {
                claims += 1;
                match self.pool().claim_idle(self.rr) {
                    Claim::Claimed(i) => {
                        let id = self.next_id;
                        if self.fill(i, id, job, false) {
                            self.next_id = id.wrapping_add(1);
                            dispatched.push(Dispatched { job_id: id, worker: i });
                            break;
                        }
                        if claims > jobs.len() + self.layout.max_workers {
                            break 'jobs;
                        }
                    }
                    Claim::NoWorkers if dispatched.len() == first => {
                        return Err(if self.seg.was_truncated() {
                            BatchDispatchError::Truncated
                        } else {
                            BatchDispatchError::NoWorkers
                        });
                    }
                    Claim::AllBusy | Claim::NoWorkers => break 'jobs,
                }
            }
        }
        let pool = self.pool();
        for d in &dispatched[first..] {
            pool.wake(d.worker);
        }
        Ok(dispatched.len() - first)
    }

    /// Reclaims the mailboxes of dead workers and reports every job lost with them (held by
    /// a worker that died, or left in the mailbox of a worker that exited). Reads `/proc`
    /// once per attached worker: call it periodically, not per job.
    pub fn reap(&mut self) -> Vec<LostJob> {
        let mut lost = std::mem::take(&mut self.pending_lost);
        self.reap_into(&mut lost);
        lost
    }

    fn reap_into(&mut self, lost: &mut Vec<LostJob>) {
        let pool = pool_ref(&self.seg, &self.layout);
        let parts = self.seg.participants();
        let me = ProcessId::current();
        let workers = self.layout.max_workers;
        // Only the attached dispatcher reclaims worker entries, so no FILLING of ours is in
        // progress while `reclaim_worker` runs (it is the same thread).
        parts.reclaim_dead_in(1..1 + workers, me, process_is_alive, |index, _| {
            pool.reclaim_worker(index - 1);
        });
        // What no owner explains: a mailbox left in use with its entry free (a hostile or
        // corrupted peer, or a job published to a worker that died meanwhile), and hint bits
        // cleared from under a live worker. The entry is found free both before and after
        // the state is read, so the state is not that of a worker joining or leaving right
        // now (see `repair_ownerless`).
        for i in 0..workers {
            if parts.owner(1 + i).is_some() {
                pool.restore_hints(i);
                continue;
            }
            let seen = pool.mailbox(i).state();
            if parts.owner(1 + i).is_none() {
                pool.repair_ownerless(i, seen);
            }
        }
        for i in 0..workers {
            if let Some((job_id, pid)) = pool.drain_lost(i) {
                lost.push(LostJob { job_id, worker: i, pid });
            }
            if let Some((job_id, pid)) = pool.drain_pending(i) {
                lost.push(LostJob { job_id, worker: i, pid });
            }
        }
    }

    /// A snapshot of the pool.
    pub fn status(&self) -> PoolStatus {
        status_of(&self.seg, &self.layout)
    }
}

impl Waitable for Dispatcher {
    /// Notified whenever a worker becomes idle.
    fn wait_handle(&self) -> WaitHandle<'_> {
        WaitHandle { event: self.pool().idle_event() }
    }

    /// Some worker is (probably) idle: `try_dispatch` will likely succeed (or the file was
    /// truncated: `try_dispatch` reports it).
    fn is_ready(&self) -> bool {
        self.pool().any_idle() || self.seg.was_truncated()
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        let pool = self.pool();
        pool.record(self.next_id, self.dispatched);
        // Detach before releasing the entry: a successor attaches only after the release,
        // so our store cannot clear its attached bit.
        pool.detach();
        self.seg.participants().release(DISPATCHER_ENTRY);
    }
}

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
        self.recv_deadline(None)
    }

    /// [`recv`](Self::recv) with a timeout; on [`RecvError::Timeout`] the worker is no
    /// longer idle (a job that raced the timeout is returned instead).
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Job<'_>, RecvError> {
        self.recv_deadline(deadline_after(Some(timeout)).or(Some(far_future())))
    }

    /// Whether the pool's file was truncated under this process (see
    /// [`RecvError::Truncated`]). Slow paths only: nothing found, a failure, a timeout.
    #[cold]
    fn truncated(&self) -> bool {
        self.seg.was_truncated()
    }

    fn recv_deadline(&mut self, deadline: Option<Instant>) -> Result<Job<'_>, RecvError> {
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

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86400 * 365)
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use super::*;
    use crate::participants::PARTICIPANT_SIZE;
    use crate::pool::PoolConfig;
    use crate::segment::PARTICIPANTS_OFFSET;

    /// The dispatcher entry names our pid with another start time: a dead predecessor whose
    /// pid we reused (as after a container restart), taken over, not reported `Busy`; while
    /// a live dispatcher of ours (same pid, same start time) still is `Busy`.
    #[test]
    fn a_dead_predecessor_with_our_pid_is_taken_over() {
        let root = std::env::temp_dir().join(format!("shmbus-pool-pid-reuse-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let d = Domain::with_root("t", &root).unwrap();
        drop(Dispatcher::create(&d, "p", PoolConfig { max_workers: 1, max_job_size: 64 }).unwrap());
        let f = std::fs::OpenOptions::new().write(true).open(d.channel_path("p").unwrap()).unwrap();
        let me = ProcessId::current();
        // participants.rs: `pid << 8 | ACTIVE`, then the start time, then the role.
        let at = (PARTICIPANTS_OFFSET + PARTICIPANT_SIZE * DISPATCHER_ENTRY) as u64;
        f.write_all_at(&((u64::from(me.pid) << 8) | 2).to_le_bytes(), at).unwrap();
        f.write_all_at(&me.start_time.wrapping_add(12345).to_le_bytes(), at + 8).unwrap();
        f.write_all_at(&ROLE_DISPATCHER.to_le_bytes(), at + 16).unwrap();
        let taken = Dispatcher::open(&d, "p");
        let again = Dispatcher::open(&d, "p").map(drop);
        let taken = taken.map(drop);
        let _ = std::fs::remove_dir_all(&root);
        assert!(taken.is_ok(), "the dead predecessor's entry was not taken over: {taken:?}");
        assert!(matches!(again, Err(OpenError::Busy { .. })), "a live dispatcher of ours is Busy: {again:?}");
    }
}
