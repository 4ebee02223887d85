//! The queue's shared state: the mapping its handle and endpoints share, what every
//! endpoint keeps of it, and the read-only view its status reads.

use std::cell::Cell;
use std::mem::offset_of;
use std::sync::Arc;
use std::time::Duration;

#[cfg(doc)] // for intra-doc links
use super::error::QueueTryRecvError;
use super::layout::{MappedCells, QueueLayout, CONTROL_BYTES};
use super::protocol::{depth_of, pop_ready_at, CellHeader, Control, Ring, Stall};
use crate::endpoint::channel::Channel;
use crate::endpoint::liveness;
use crate::endpoint::registration::register_shared;
use crate::error::OpenError;
use crate::event::EventWord;
use crate::participants::{ParticipantView, PARTICIPANTS};
use crate::segment::Segment;
use crate::stats::Counter;
use crate::sync::{Ordering, RoArea};
use crate::sys::{process_is_alive, Access, ProcessId, ReadOnly};
use crate::wait::{try_then_block_on, Deadline, WaitPolicy};

/// How long a claim may stand in a waiter's way before the waiter checks whether its owner
/// is still alive, and how often it re-checks after that. A blocked endpoint gets past a
/// dead participant's claim within about twice this.
pub(crate) const LIVENESS_RECHECK: Duration = liveness::CLAIM_RECHECK;

/// How often an endpoint in a [`crate::WaitSet`] is re-checked while nothing blocks it, so a
/// claim left by a participant that died while the set slept is found within a bounded time.
pub(crate) const IDLE_RECHECK: Duration = liveness::ORPHAN;

/// Participant roles in the entry's `role` word.
pub(super) const ROLE_PRODUCER: u32 = 1;
pub(super) const ROLE_CONSUMER: u32 = 2;

/// The queue's mapping, shared by the handle and its endpoints.
pub(super) type Shared = Channel<QueueLayout>;

/// The ring view of a read-write queue channel.
impl Shared {
    /// The control block.
    #[inline]
    pub(super) fn ctl(&self) -> &Control {
        // SAFETY: the kind area starts page aligned with the control block (at least
        // CONTROL_BYTES long: validated size), inside the mapping `self` keeps alive; its
        // fields are atomics, valid for any bit pattern.
        unsafe { &*(self.kind_base() as *const Control) }
    }

    #[inline]
    pub(super) fn ring(&self) -> Ring<'_, MappedCells> {
        let layout = self.layout();
        // SAFETY: the kind area is at least CONTROL_BYTES long (validated size), page aligned.
        let base = unsafe { self.kind_base().add(CONTROL_BYTES) };
        let cells = MappedCells { base, stride: layout.stride };
        Ring::new(self.ctl(), cells, self.participants(), layout.capacity, layout.max)
    }
}

/// What a queue's status reads, through load-only words (see [`Channel`]'s module docs).
pub(super) struct StatusView<'a> {
    area: RoArea<'a>,
    layout: &'a QueueLayout,
    participants: ParticipantView<'a>,
}

impl<A: Access> Channel<QueueLayout, A> {
    /// The status view of this channel, read-only or read-write.
    pub(super) fn status_view(&self) -> StatusView<'_> {
        StatusView { area: self.kind_area(), layout: self.layout(), participants: self.participant_view() }
    }
}

impl StatusView<'_> {
    /// A control block word, by its offset in [`Control`].
    fn ctl(&self, offset: usize, order: Ordering) -> u64 {
        self.area.u64_at(offset).load(order)
    }

    /// Messages in the queue, as [`Ring::depth`].
    fn depth(&self) -> u64 {
        let head = self.ctl(offset_of!(Control, head.0), Ordering::Acquire);
        let tail = self.ctl(offset_of!(Control, tail.0), Ordering::Acquire);
        depth_of(head, tail, self.layout.capacity)
    }

    /// Whether a pop could make progress now, as [`Ring::pop_ready`].
    fn pop_ready(&self) -> bool {
        let pos = self.ctl(offset_of!(Control, head.0), Ordering::Acquire);
        let cell = CONTROL_BYTES + (pos % self.layout.capacity) as usize * self.layout.stride;
        let s = self.area.u64_at(cell + offset_of!(CellHeader, stamp)).load(Ordering::Acquire);
        pop_ready_at(pos, s, self.layout.capacity).is_ok()
    }
}

impl Shared {
    pub(super) fn register(self: &Arc<Self>, role: u32) -> Result<Endpoint, OpenError> {
        let me = ProcessId::current();
        let reclaim = || self.ring().reclaim_dead(me, process_is_alive);
        let index = register_shared(self.participants(), me, role, 0..PARTICIPANTS, reclaim, self.path())?;
        Ok(Endpoint {
            shared: Arc::clone(self),
            index,
            counter: self.own_counter(index),
            me,
            policy: WaitPolicy::default(),
            watch: Cell::new(None),
            had_room: Cell::new(true),
        })
    }
}

/// A claim being watched: what it was and when to look at its owner next.
#[derive(Debug, Clone, Copy)]
pub(super) struct Watch {
    stall: Stall,
    /// On the liveness clock.
    next_check_ns: u64,
}

/// What producers and consumers share: the registration and the stall watch.
#[derive(Debug)]
pub(super) struct Endpoint {
    pub(super) shared: Arc<Shared>,
    pub(super) index: usize,
    /// Our counter block (see [`crate::stats`]); only this endpoint writes it, and the
    /// endpoint is `!Sync`, so every count is a plain load and store.
    pub(super) counter: Counter,
    me: ProcessId,
    pub(super) policy: WaitPolicy,
    /// `Cell`: makes the endpoint `!Sync`, and lets `is_ready(&self)` keep watching.
    pub(super) watch: Cell<Option<Watch>>,
    /// The last push found room: claim optimistically (see `Ring::try_push`).
    pub(super) had_room: Cell<bool>,
}

impl Endpoint {
    /// The ring, counting the wakes we issue and the abandoned cells we retire.
    #[inline]
    pub(super) fn ring(&self) -> Ring<'_, MappedCells> {
        self.shared.ring().counted(self.counter)
    }

    /// Notes the claim (if any) in our way. Once the same claim has stood for
    /// `LIVENESS_RECHECK`, checks its owner and reclaims it if dead. Returns true if that
    /// freed the way.
    pub(super) fn observe(&self, stall: Option<Stall>) -> bool {
        let Some(stall) = stall else {
            self.watch.set(None);
            return false;
        };
        let now = liveness::now_ns();
        let next_check_ns = now.saturating_add(LIVENESS_RECHECK.as_nanos() as u64);
        match self.watch.get() {
            Some(w) if w.stall == stall => {
                if now < w.next_check_ns {
                    return false;
                }
            }
            _ => {
                self.watch.set(Some(Watch { stall, next_check_ns }));
                return false;
            }
        }
        self.watch.set(Some(Watch { stall, next_check_ns }));
        let ring = self.ring();
        let owner_alive = match ring.table.owner(stall.owner) {
            Some(info) => ring.table.is_alive(&info),
            // The entry is free but the claim stands: nothing to reclaim through the table.
            None => true,
        };
        if owner_alive {
            return false;
        }
        ring.reclaim_dead(self.me, process_is_alive);
        let freed = !ring.still_stalled(&stall);
        if freed {
            self.watch.set(None);
        }
        freed
    }

    /// The longest a blocked call may sleep before it must look at a watched claim again.
    fn recheck(&self) -> Option<Duration> {
        self.watch.get().map(|w| {
            Duration::from_nanos(w.next_check_ns.saturating_sub(liveness::now_ns())).max(Duration::from_micros(100))
        })
    }

    /// Tries once; if that yields nothing, spins per the policy, then sleeps on `event`
    /// until `attempt` yields or the deadline (the wait counted in our block); while a claim
    /// is watched, each sleep ends in time for its liveness re-check.
    pub(super) fn block<T>(
        &self,
        event: &EventWord,
        deadline: Deadline,
        mut attempt: impl FnMut(&Self) -> Option<T>,
    ) -> Option<T> {
        try_then_block_on(event, self.policy, deadline, || self.recheck(), self.counter, || attempt(self))
    }

    /// Whether the queue's file was truncated under this process (see
    /// [`QueueTryRecvError::Truncated`]). Slow paths only: a failed or empty attempt, a timeout.
    #[cold]
    pub(super) fn truncated(&self) -> bool {
        self.shared.was_truncated()
    }

    /// How often a [`crate::WaitSet`] re-checks this endpoint: soon while a claim stands in
    /// its way (`stall`, or one being watched), else now and then.
    pub(super) fn wait_interval(&self, stall: Option<Stall>) -> Option<Duration> {
        Some(if stall.is_some() || self.watch.get().is_some() { LIVENESS_RECHECK } else { IDLE_RECHECK })
    }

    /// `Waitable::is_ready` of a producer or consumer whose way is `way` (`push_ready` or
    /// `pop_ready`): ready when the way is clear, or when the file was truncated (the call
    /// reports that). A claim in the way is looked at by `recheck`, not here.
    pub(super) fn ready(&self, way: Result<(), Option<Stall>>) -> bool {
        way.is_ok() || self.truncated()
    }

    /// `Waitable::recheck` of a producer or consumer whose way is `way`: checks the owner of
    /// a claim in it (once it has stood for the liveness interval) and reclaims it if the
    /// owner is dead.
    pub(super) fn recheck_way(&self, way: Result<(), Option<Stall>>) -> bool {
        match way {
            Ok(()) => true,
            Err(stall) => self.observe(stall),
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // Every operation completes before it returns, so we hold no claim here.
        self.shared.participants().release(self.index);
    }
}

/// Messages in queue segment `seg` that no consumer has received, for `admin::inspect` (a
/// look through a read-only mapping: loads only). The ring's depth, or 1 when the depth reads
/// 0 but a pop could make progress: a producer that died between publishing its message and
/// moving `tail` leaves `tail` one behind it. Errs on the side of more: a cell a dead
/// producer left half-written counts until a consumer retires it.
pub(super) fn undelivered(seg: Segment<ReadOnly>) -> Result<u64, OpenError> {
    let chan = Channel::<QueueLayout, ReadOnly>::from_segment(seg)?;
    let sv = chan.status_view();
    Ok(sv.depth().max(u64::from(sv.pop_ready())))
}

pub(super) fn status_of<A: Access>(chan: &Channel<QueueLayout, A>) -> QueueStatus {
    let sv = chan.status_view();
    let relaxed = |offset| sv.ctl(offset, Ordering::Relaxed);
    QueueStatus {
        capacity: sv.layout.capacity,
        max_message_len: sv.layout.max,
        depth: sv.depth(),
        producers: sv.participants.live_in_role(ROLE_PRODUCER, process_is_alive),
        consumers: sv.participants.live_in_role(ROLE_CONSUMER, process_is_alive),
        sent: relaxed(offset_of!(Control, tail.0)),
        received: relaxed(offset_of!(Control, head.0)),
        abandoned: relaxed(offset_of!(Control, abandoned)),
        lost: relaxed(offset_of!(Control, lost)),
        schema: chan.schema().cloned(),
    }
}

/// A snapshot of a queue, from [`Queue::status`](super::Queue::status), [`Producer::status`](super::Producer::status)
/// or [`Consumer::status`](super::Consumer::status).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStatus {
    /// Messages the queue holds.
    pub capacity: u64,
    /// Largest message, in bytes.
    pub max_message_len: usize,
    /// Messages in the queue now (including any being written).
    pub depth: u64,
    /// Live producer endpoints.
    pub producers: usize,
    /// Live consumer endpoints.
    pub consumers: usize,
    /// Positions claimed by producers so far (messages sent, plus abandoned ones).
    pub sent: u64,
    /// Positions taken by consumers so far.
    pub received: u64,
    /// Cells given up because their producer died mid-send (those messages were never sent).
    pub abandoned: u64,
    /// Messages lost because the consumer that had claimed them died mid-receive.
    pub lost: u64,
    /// The channel's schema (`None`: it has none).
    pub schema: Option<std::sync::Arc<crate::Schema>>,
}
