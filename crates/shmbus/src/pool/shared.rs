//! The pool's shared state: the mapping its handle and endpoints share, and the segment
//! glue its endpoints work through.
//!
//! Builds [`PoolRef`]s from the validated segment layout, ties mailbox `i` to participant
//! entry `i + 1` (entry 0 is the dispatcher's), and does everything that needs a clock, a
//! futex or `/proc`: blocking, orphan detection, reclaiming the dead.

// The segment glue is not built under loom (the value types below are).
#[cfg(not(loom))]
use {
    super::layout::PoolLayout,
    super::protocol::{
        counts_of, offsets, worker_mask, PoolHeader, PoolRef, FULL, HEADER_SIZE, LOST, MAILBOX_HEAD, MAX_WORKERS, TAKEN,
    },
    crate::endpoint::channel::Channel,
    crate::error::OpenError,
    crate::participants::ParticipantView,
    crate::segment::Segment,
    crate::sync::{Ordering, RoArea},
    crate::sys::{Access, ReadOnly},
};

/// How often a waiting worker checks, by default, that its dispatcher process still lives.
pub const DEFAULT_ORPHAN_CHECK: std::time::Duration = crate::endpoint::liveness::ORPHAN;

/// A job placed in a worker's mailbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dispatched {
    /// The job's id (assigned by the pool, or given by the caller).
    pub job_id: u64,
    /// The worker's mailbox index (0..max_workers).
    pub worker: usize,
}

/// A job whose worker died (or left) before finishing it, reported by [`Dispatcher::reap`].
///
/// [`Dispatcher::reap`]: super::Dispatcher::reap
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostJob {
    /// The job's id.
    pub job_id: u64,
    /// The mailbox index the job was in (now free for a new worker).
    pub worker: usize,
    /// The worker's process id.
    pub pid: u32,
}

/// A snapshot of a pool, for the CLI and monitoring ([`Pool::status`]).
///
/// [`Pool::status`]: super::Pool::status
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStatus {
    /// Layout: most workers.
    pub max_workers: usize,
    /// Layout: largest job in bytes.
    pub max_job_len: usize,
    /// Workers attached (including dead ones the dispatcher has not reaped yet).
    pub workers: usize,
    /// Workers waiting for work.
    pub idle: usize,
    /// Workers attached and not waiting (`workers - idle`).
    pub busy: usize,
    /// The dispatcher's pid, if one holds the pool.
    pub dispatcher_pid: Option<u32>,
    /// Whether that dispatcher process is alive.
    pub dispatcher_alive: bool,
    /// Jobs dispatched over the pool's life.
    pub dispatched: u64,
    /// Jobs reported lost over the pool's life.
    pub lost: u64,
    /// The channel's schema (`None`: it has none).
    pub schema: Option<std::sync::Arc<crate::Schema>>,
}

/// Participant role numbers (shown by `shmbus info`).
#[cfg(not(loom))]
pub(super) const ROLE_DISPATCHER: u32 = 1;
#[cfg(not(loom))]
pub(super) const ROLE_WORKER: u32 = 2;
/// The dispatcher's participant entry.
#[cfg(not(loom))]
pub(super) const DISPATCHER_ENTRY: usize = 0;

/// The pool view of a read-write segment.
#[cfg(not(loom))]
pub(super) fn pool_ref<'a>(seg: &'a Segment, layout: &PoolLayout) -> PoolRef<'a> {
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

/// What a pool's status and [`undelivered_jobs`] read, through load-only words (see
/// [`Channel`]'s module docs).
#[cfg(not(loom))]
pub(super) struct StatusView<'a> {
    area: RoArea<'a>,
    layout: &'a PoolLayout,
    participants: ParticipantView<'a>,
}

#[cfg(not(loom))]
impl<A: Access> Channel<PoolLayout, A> {
    /// The status view of this channel, read-only or read-write.
    pub(super) fn status_view(&self) -> StatusView<'_> {
        StatusView { area: self.kind_area(), layout: self.layout(), participants: self.participant_view() }
    }
}

#[cfg(not(loom))]
impl StatusView<'_> {
    /// Mailboxes, as [`PoolRef::workers`].
    fn workers(&self) -> usize {
        self.layout.max_workers.min(MAX_WORKERS)
    }

    /// A header word, by its offset (`offsets`), loaded Relaxed as the counters are.
    fn header(&self, offset: usize) -> u64 {
        self.area.u64_at(offset).load(Ordering::Relaxed)
    }

    /// A 32-bit word of mailbox `i`'s head, by its offset (`offsets`), loaded Acquire as
    /// [`Mailbox::state`](super::protocol::Mailbox::state) and [`PoolRef::has_pending`] do.
    fn mailbox(&self, i: usize, offset: usize) -> u32 {
        assert!(i < self.workers());
        self.area.u32_at(HEADER_SIZE + i * self.layout.stride() + offset).load(Ordering::Acquire)
    }

    /// `(workers attached, workers idle)`, as [`PoolRef::counts`].
    fn counts(&self) -> (u32, u32) {
        let word = |offset| self.area.u64_at(offset);
        counts_of(word(offsets::PRESENT_BITS), word(offsets::IDLE_BITS), worker_mask(self.workers()))
    }
}
/// Start of mailbox `i`'s payload (`i < max_workers`).
#[cfg(not(loom))]
pub(super) fn payload_ptr(seg: &Segment, layout: &PoolLayout, i: usize) -> *mut u8 {
    assert!(i < layout.max_workers);
    // SAFETY: as in `pool_ref`: mailbox i and its max_job_size payload bytes are inside the
    // mapping.
    unsafe { seg.kind_base().add(HEADER_SIZE + i * layout.stride() + MAILBOX_HEAD) }
}

#[cfg(not(loom))]
pub(super) fn dispatcher_alive<A: Access>(seg: &Segment<A>) -> Option<(u32, bool)> {
    let view = seg.participant_view();
    view.owner(DISPATCHER_ENTRY).map(|o| (o.process.pid, view.is_alive(&o)))
}

/// Jobs in pool segment `seg` that the pool still owes someone, for `admin::inspect` (loads
/// only): mailboxes FULL (dispatched, not taken), LOST (its worker died or left holding
/// it; the next `reap` reports it), or TAKEN by a worker that has died (the next `reap`
/// marks it LOST and reports it). By the protocol's invariant 5 every dispatched job is
/// taken or reported lost; these are the ones that are neither yet.
#[cfg(not(loom))]
pub(super) fn undelivered_jobs(seg: Segment<ReadOnly>) -> Result<u64, OpenError> {
    let chan = Channel::<PoolLayout, ReadOnly>::from_segment(seg)?;
    let sv = chan.status_view();
    // Mailbox `i` belongs to participant entry `1 + i`. A job taken by a worker that has died
    // since is owed too: the next `reap` turns it into a loss report.
    let owed = |i: usize| match sv.mailbox(i, offsets::MAILBOX_STATE) {
        FULL | LOST => true,
        TAKEN => sv.participants.owner(1 + i).is_none_or(|p| !sv.participants.is_alive(&p)),
        _ => false,
    };
    // Plus loss reports a worker that adopted a LOST mailbox moved aside.
    let pending = (0..sv.workers()).filter(|&i| sv.mailbox(i, offsets::MAILBOX_PENDING_SET) != 0).count() as u64;
    Ok((0..sv.workers()).filter(|&i| owed(i)).count() as u64 + pending)
}

#[cfg(not(loom))]
pub(super) fn status_of<A: Access>(chan: &Channel<PoolLayout, A>) -> PoolStatus {
    let (sv, layout) = (chan.status_view(), chan.layout());
    let (workers, idle) = sv.counts();
    let disp = dispatcher_alive(chan.seg());
    PoolStatus {
        max_workers: layout.max_workers,
        max_job_len: layout.max_job_size,
        workers: workers as usize,
        idle: idle as usize,
        busy: (workers - idle) as usize,
        dispatcher_pid: disp.map(|d| d.0),
        dispatcher_alive: disp.is_some_and(|d| d.1),
        dispatched: sv.header(offsets::DISPATCHED),
        lost: sv.header(offsets::LOST),
        schema: chan.schema().cloned(),
    }
}

/// The pool's mapping, shared by the handle and its endpoints.
#[cfg(not(loom))]
pub(super) type Shared = Channel<PoolLayout>;
