//! The topic's shared state: the mapping its handle and endpoints share, the protocol view
//! of it, and the read-only view its status reads.

use super::config::DeliveryPolicy;
use super::layout::{TopicLayout, CONTROL_SIZE};
use super::protocol::{slot_pinned, Control, DataRegion, Shared, SlotHeader, MAX_TOPIC_PARTICIPANTS, ROLE_SUBSCRIBER};
use crate::endpoint::channel::Channel;
use crate::endpoint::registration::register_shared;
use crate::error::OpenError;
use crate::event::EventWord;
use crate::participants::ParticipantView;
use crate::sync::{AtomicU64, Ordering, RoArea};
use crate::sys::{process_is_alive, Access, ProcessId, ReadOnly};

/// The topic's mapping, shared by the handle and its endpoints.
pub(super) type Inner = Channel<TopicLayout>;

/// The protocol view of a read-write topic channel.
impl Inner {
    #[inline]
    pub(super) fn shared(&self) -> Shared<'_> {
        let base = self.kind_base();
        let l = self.layout();
        // SAFETY: the segment was validated to be exactly `KIND_OFFSET + l.total` bytes and
        // the offsets below are derived from the same validated layout: the control block at
        // 0, `index_len` index words at CONTROL_SIZE, `slots` 128-byte headers at headers_off
        // (128-byte aligned), payloads at data_off + s * stride (inside the headers when the
        // slot size fits inline), and one held word per participant entry at held_off
        // (8-aligned: a multiple of 128). All are atomics or raw bytes, valid for any content.
        unsafe {
            Shared {
                ctl: &*(base as *const Control),
                index: std::slice::from_raw_parts(
                    base.add(CONTROL_SIZE as usize) as *const AtomicU64,
                    l.index_len as usize,
                ),
                slots: std::slice::from_raw_parts(
                    base.add(l.headers_off as usize) as *const SlotHeader,
                    l.slots as usize,
                ),
                data: DataRegion {
                    base: base.add(l.data_off as usize),
                    _life: std::marker::PhantomData,
                    stride: l.stride as usize,
                    slot_size: l.slot_size as usize,
                },
                participants: self.participants(),
                held: std::slice::from_raw_parts(
                    base.add(l.held_off as usize) as *const AtomicU64,
                    crate::participants::PARTICIPANTS,
                ),
            }
        }
    }
}

/// What a topic's status reads, through load-only words (see [`Channel`]'s module docs).
pub(super) struct StatusView<'a> {
    pub(super) area: RoArea<'a>,
    pub(super) layout: &'a TopicLayout,
    pub(super) participants: ParticipantView<'a>,
}

impl<A: Access> Channel<TopicLayout, A> {
    /// The status view of this channel, read-only or read-write.
    pub(super) fn status_view(&self) -> StatusView<'_> {
        StatusView { area: self.kind_area(), layout: self.layout(), participants: self.participant_view() }
    }
}

/// Messages the history of topic `seg` holds now: the committed ones, at most `history`
/// (a publisher that died before committing leaves a hole that this counts; it errs on the
/// side of more, as `admin::Pending` does).
pub(super) fn history_len(seg: crate::segment::Segment<ReadOnly>) -> Result<u64, OpenError> {
    let chan = Channel::<TopicLayout, ReadOnly>::from_segment(seg)?;
    let sv = chan.status_view();
    Ok(sv.committed_max().min(sv.layout.history))
}

impl StatusView<'_> {
    /// Highest committed sequence number (0: none yet), as [`Shared::committed_max`].
    pub(super) fn committed_max(&self) -> u64 {
        self.area.u64_at(std::mem::offset_of!(Control, committed_max.0)).load(Ordering::Acquire)
    }

    /// Live subscribers whose cursor word says reliable (not evicted).
    pub(super) fn reliable_subscribers(&self) -> usize {
        self.participants
            .list()
            .into_iter()
            .filter(|p| p.role == ROLE_SUBSCRIBER && self.participants.is_alive(p))
            .filter(|p| {
                let v = self.participants.aux(p.index, super::protocol::AUX_CURSOR);
                v != 0 && v & super::protocol::CURSOR_EVICTED == 0
            })
            .count()
    }

    /// Slots pinned by anyone now (each slot's pin words, as [`slot_pinned`] reads them).
    pub(super) fn pinned_slots(&self) -> usize {
        let l = self.layout;
        let word = |s: usize, offset: usize| {
            self.area.u64_at(l.headers_off as usize + s * std::mem::size_of::<SlotHeader>() + offset)
        };
        let (w1, w2) = (std::mem::offset_of!(SlotHeader, w1), std::mem::offset_of!(SlotHeader, w2));
        (0..l.slots as usize).filter(|&s| slot_pinned(word(s, w1), word(s, w2), Ordering::Relaxed)).count()
    }
}

impl Inner {
    pub(super) fn event(&self) -> &EventWord {
        // SAFETY: the control block's `event` is an AtomicU32 in the mapping; EventWord is
        // repr(transparent) over AtomicU32.
        unsafe { &*(&self.shared().ctl.event.0.event as *const crate::sync::AtomicU32 as *const EventWord) }
    }

    /// The futex publishers of a `block` topic sleep on (see `protocol::EventLine`).
    pub(super) fn space(&self) -> &EventWord {
        // SAFETY: as in `event`.
        unsafe { &*(&self.shared().ctl.event.0.space as *const crate::sync::AtomicU32 as *const EventWord) }
    }

    /// The topic's delivery policy (validated when the header was read).
    pub(super) fn policy(&self) -> DeliveryPolicy {
        DeliveryPolicy::from_u64(self.layout().policy).unwrap_or_default()
    }

    pub(super) fn reclaim_dead(&self) -> usize {
        let sh = self.shared();
        sh.participants.reclaim_dead(ProcessId::current(), process_is_alive, |i, _| sh.cleanup_participant(i))
    }

    pub(super) fn register(&self, role: u32) -> Result<usize, OpenError> {
        let range = 0..MAX_TOPIC_PARTICIPANTS;
        register_shared(self.participants(), ProcessId::current(), role, range, || self.reclaim_dead(), self.path())
    }
}
