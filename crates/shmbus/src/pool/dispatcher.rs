//! The pool's single dispatcher.

use std::sync::Arc;

use super::error::PoolTrySendError;
use super::layout::PoolLayout;
use super::protocol::{Claim, PoolRef};
use super::shared::Shared;
use super::shared::{
    payload_ptr, pool_ref, status_of, Dispatched, LostJob, PoolStatus, DISPATCHER_ENTRY, ROLE_DISPATCHER,
};
use crate::endpoint::registration::claim_exclusive;
use crate::error::OpenError;
use crate::segment::Segment;
use crate::stats::Counter;
use crate::sys::{process_is_alive, ProcessId};
use crate::waitset::{WaitHandle, Waitable};

// ==================================================================== Dispatcher

/// The pool's single dispatcher, made by [`Pool::dispatcher`]. `Send`; one thread
/// dispatches at a time (`&mut self`).
///
/// [`Pool::dispatcher`]: super::Pool::dispatcher
#[derive(Debug)]
pub struct Dispatcher {
    shared: Arc<Shared>,
    layout: PoolLayout,
    /// Round-robin start for the idle search.
    rr: usize,
    next_id: u64,
    dispatched: u64,
    /// Lost jobs found while attaching, returned by the first `reap`.
    pending_lost: Vec<LostJob>,
    /// Our counter block (see [`crate::stats`]): the dispatcher dispatches through
    /// `&mut self`, so it is the block's one writer and every count is a load and a store.
    counter: Counter,
}

impl Dispatcher {
    pub(super) fn attach(shared: Arc<Shared>) -> Result<Dispatcher, OpenError> {
        let (seg, layout) = (shared.seg(), *shared.layout());
        // Nothing to clean in a dead predecessor's entry itself; the mailboxes it left FILLING
        // are repaired below.
        let me = ProcessId::current();
        claim_exclusive(seg.participants(), me, DISPATCHER_ENTRY, ROLE_DISPATCHER, seg.path(), |_, _| {})?;
        let counter = shared.own_counter(DISPATCHER_ENTRY);
        let pool = pool_ref(seg, &layout);
        // We are the only dispatcher and have not dispatched yet: any FILLING is a dead
        // predecessor's half-written job, never delivered. Its worker is still waiting.
        pool.reset_filling();
        pool.attach();
        let next_id = pool.next_job_id().max(1);
        let dispatched = pool.dispatched();
        let mut d = Dispatcher { shared, layout, rr: 0, next_id, dispatched, pending_lost: Vec::new(), counter };
        let mut lost = Vec::new();
        d.reap_into(&mut lost);
        d.pending_lost = lost;
        Ok(d)
    }

    fn seg(&self) -> &Segment {
        self.shared.seg()
    }

    fn pool(&self) -> PoolRef<'_> {
        pool_ref(self.seg(), &self.layout)
    }

    /// The pool's `max_job_len`: the largest job in bytes.
    pub fn max_job_len(&self) -> usize {
        self.layout.max_job_size
    }

    /// The pool's `max_workers`.
    pub fn max_workers(&self) -> usize {
        self.layout.max_workers
    }

    /// Places `job` in an idle worker's mailbox and wakes that worker alone, with an id the
    /// pool assigns (1, 2, …, continued across dispatcher takeovers). Never blocks, never
    /// allocates; no system call unless the chosen worker sleeps. On an error nothing was
    /// sent and the job stays with the caller.
    pub fn try_send(&mut self, job: &[u8]) -> Result<Dispatched, PoolTrySendError> {
        let id = self.next_id;
        let r = self.try_send_with_id(id, job);
        if r.is_ok() {
            self.next_id = id.wrapping_add(1);
            self.pool().record(self.next_id, self.dispatched);
        }
        r
    }

    /// [`try_send`](Self::try_send) with a caller-chosen job id.
    pub fn try_send_with_id(&mut self, job_id: u64, job: &[u8]) -> Result<Dispatched, PoolTrySendError> {
        let max = self.layout.max_job_size;
        if job.len() > max {
            return Err(PoolTrySendError::TooLarge { len: job.len(), max, index: None });
        }
        // A claim whose worker abandoned it (see `fill`) is retried with another worker;
        // each claim clears that worker's idle bit, so this ends.
        for _ in 0..=self.layout.max_workers {
            match self.pool().claim_idle(self.rr) {
                Claim::Claimed(i) => {
                    if self.fill(i, job_id, job, true) {
                        self.counter.message(job.len());
                        return Ok(Dispatched { job_id, worker: i });
                    }
                }
                Claim::AllBusy => break,
                Claim::NoWorkers if self.seg().was_truncated() => return Err(PoolTrySendError::Truncated),
                Claim::NoWorkers => return Err(PoolTrySendError::NoWorkers),
            }
        }
        // Failing anyway: zeros past a cut read as workers gone or busy.
        if self.seg().was_truncated() {
            return Err(PoolTrySendError::Truncated);
        }
        self.counter.full();
        Err(PoolTrySendError::AllBusy)
    }

    /// Copies `bytes` into claimed (FILLING) mailbox `i` and publishes it (counting the wake,
    /// if `wake` and the worker slept). `false` if the worker gave up on us meanwhile (it
    /// wrongly believed us dead): not delivered.
    fn fill(&mut self, i: usize, job_id: u64, bytes: &[u8], wake: bool) -> bool {
        debug_assert!(bytes.len() <= self.layout.max_job_size);
        let dst = payload_ptr(self.seg(), &self.layout, i);
        // SAFETY: `dst` has max_job_size >= bytes.len() bytes inside the mapping; mailbox i
        // is FILLING by our claim, so its worker does not read the payload until `publish`
        // (protocol invariant 2); `bytes` is our own memory, not overlapping the mapping's
        // payload of a mailbox we own.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
        let pool = pool_ref(self.shared.seg(), &self.layout);
        self.rr = (i + 1) % self.layout.max_workers;
        // The wake apart from the publish (as `publish` would do it, right after), to count it.
        if !pool.publish(i, job_id, bytes.len() as u64, false) {
            return false;
        }
        if wake && pool.wake(i) {
            self.counter.futex_wake();
        }
        self.dispatched += 1;
        pool.record(self.next_id, self.dispatched);
        true
    }

    /// Fills as many idle workers as there are, in order, with `jobs` (pool-assigned ids),
    /// then wakes them all. Appends one [`Dispatched`] per job sent to `dispatched` (reuse
    /// the vector to avoid allocating) and returns how many were sent: `jobs[n..]` were not
    /// (every worker was busy). All sizes are checked before anything is sent: a job too
    /// large is [`PoolTrySendError::TooLarge`] with its `index`. The error is `NoWorkers` or
    /// `Truncated` only when nothing was sent; `AllBusy` is `Ok(0)`.
    pub fn try_send_batch(
        &mut self,
        jobs: &[&[u8]],
        dispatched: &mut Vec<Dispatched>,
    ) -> Result<usize, PoolTrySendError> {
        let max = self.layout.max_job_size;
        if let Some((index, j)) = jobs.iter().enumerate().find(|(_, j)| j.len() > max) {
            return Err(PoolTrySendError::TooLarge { len: j.len(), max, index: Some(index) });
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
                        return Err(if self.seg().was_truncated() {
                            PoolTrySendError::Truncated
                        } else {
                            PoolTrySendError::NoWorkers
                        });
                    }
                    Claim::AllBusy | Claim::NoWorkers => break 'jobs,
                }
            }
        }
        let sent = dispatched.len() - first;
        let bytes = jobs[..sent].iter().map(|j| j.len() as u64).sum();
        self.counter.messages(sent as u64, bytes);
        if sent < jobs.len() {
            self.counter.full();
        }
        let pool = self.pool();
        for d in &dispatched[first..] {
            if pool.wake(d.worker) {
                self.counter.futex_wake();
            }
        }
        Ok(sent)
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
        let seg = self.shared.seg();
        let pool = pool_ref(seg, &self.layout);
        let parts = seg.participants();
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
        status_of(&self.shared)
    }
}

impl Waitable for Dispatcher {
    /// Notified whenever a worker becomes idle.
    fn wait_handle(&self) -> WaitHandle<'_> {
        WaitHandle { event: self.pool().idle_event() }
    }

    /// Some worker is (probably) idle: `try_send` will likely succeed (or the file was
    /// truncated: `try_send` reports it).
    fn is_ready(&self) -> bool {
        self.pool().any_idle() || self.seg().was_truncated()
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        let pool = self.pool();
        pool.record(self.next_id, self.dispatched);
        // Detach before releasing the entry: a successor attaches only after the release,
        // so our store cannot clear its attached bit.
        pool.detach();
        self.seg().participants().release(DISPATCHER_ENTRY);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use super::*;
    use crate::domain::Domain;
    use crate::participants::PARTICIPANT_SIZE;
    use crate::pool::{Pool, PoolConfig};
    use crate::segment::PARTICIPANTS_OFFSET;

    /// The dispatcher entry names our pid with another start time: a dead predecessor whose
    /// pid we reused (as after a container restart), taken over, not reported `Busy`; while
    /// a live dispatcher of ours (same pid, same start time) still is `Busy`.
    #[test]
    fn a_dead_predecessor_with_our_pid_is_taken_over() {
        let root = std::env::temp_dir().join(format!("shmbus-pool-pid-reuse-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let d = Domain::with_root("t", &root).unwrap();
        let pool = Pool::create_or_open(&d, "p", &PoolConfig::default().max_workers(1).max_job_len(64)).unwrap();
        drop(pool.dispatcher().unwrap());
        let f = std::fs::OpenOptions::new().write(true).open(d.channel_path("p").unwrap()).unwrap();
        let me = ProcessId::current();
        // participants.rs: `pid << 8 | ACTIVE`, then the start time, then the role.
        let at = (PARTICIPANTS_OFFSET + PARTICIPANT_SIZE * DISPATCHER_ENTRY) as u64;
        f.write_all_at(&((u64::from(me.pid) << 8) | 2).to_le_bytes(), at).unwrap();
        f.write_all_at(&me.start_time.wrapping_add(12345).to_le_bytes(), at + 8).unwrap();
        f.write_all_at(&ROLE_DISPATCHER.to_le_bytes(), at + 16).unwrap();
        let taken = pool.dispatcher();
        let again = pool.dispatcher().map(drop);
        let taken = taken.map(drop);
        let _ = std::fs::remove_dir_all(&root);
        assert!(taken.is_ok(), "the dead predecessor's entry was not taken over: {taken:?}");
        assert!(matches!(again, Err(OpenError::Busy { .. })), "a live dispatcher of ours is Busy: {again:?}");
    }
}
