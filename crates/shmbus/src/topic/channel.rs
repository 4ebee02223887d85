//! The topic handle: its configuration, status and the mapping shared by its endpoints.

use std::sync::Arc;
use std::time::Duration;

use super::layout::{TopicLayout, CONTROL_SIZE};
use super::protocol::{
    slot_pinned, Control, DataRegion, Shared, SlotHeader, MAX_TOPIC_PARTICIPANTS, ROLE_PUBLISHER, ROLE_SUBSCRIBER,
};
use super::publisher::Publisher;
use super::subscriber::Subscriber;
use crate::domain::Domain;
use crate::endpoint::channel::{Channel, ChannelConfig, ChannelLayout, CommonConfig};
use crate::endpoint::registration::register_shared;
use crate::error::OpenError;
use crate::event::EventWord;
use crate::participants::ParticipantView;
use crate::pod::PayloadType;
use crate::sync::{AtomicU64, Ordering, RoArea};
use crate::sys::{process_is_alive, Access, ProcessId, ReadOnly};

/// Default largest message of a created topic, in bytes.
pub const DEFAULT_MAX_MESSAGE_LEN: usize = 4096;
/// Default history of a created topic.
pub const DEFAULT_HISTORY: usize = 16;
/// Default number of spare slots of a created topic.
pub const DEFAULT_SPARE_SLOTS: usize = 4;

/// Default reliable timeout of a created topic, in milliseconds: how long a live reliable
/// subscriber may hold publishers back without reading before it is evicted.
pub const DEFAULT_RELIABLE_TIMEOUT_MS: u64 = 1000;

/// What a publisher does when the slot it would overwrite holds a message a *reliable*
/// subscriber has not read yet (see [`Topic::reliable_subscriber`]). Set per topic at
/// creation ([`TopicConfig::policy`]); stored in the topic's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum DeliveryPolicy {
    /// Overwrite the oldest message, as always: publishers never wait and read no cursor;
    /// reliable subscribers are refused.
    #[default]
    Overwrite = 0,
    /// Wait until every reliable subscriber has read it (`send` waits; `send_timeout` up to
    /// its timeout; `try_send` returns `Full`).
    Block = 1,
    /// Return `Full` at once, from every send verb; the caller keeps its message.
    Fail = 2,
}

impl DeliveryPolicy {
    /// The policy stored as number `v` in a topic's header, if any.
    pub fn from_u64(v: u64) -> Option<DeliveryPolicy> {
        match v {
            0 => Some(DeliveryPolicy::Overwrite),
            1 => Some(DeliveryPolicy::Block),
            2 => Some(DeliveryPolicy::Fail),
            _ => None,
        }
    }

    /// `overwrite`, `block` or `fail`.
    pub fn name(self) -> &'static str {
        match self {
            DeliveryPolicy::Overwrite => "overwrite",
            DeliveryPolicy::Block => "block",
            DeliveryPolicy::Fail => "fail",
        }
    }
}

impl std::str::FromStr for DeliveryPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<DeliveryPolicy, String> {
        match s {
            "overwrite" => Ok(DeliveryPolicy::Overwrite),
            "block" => Ok(DeliveryPolicy::Block),
            "fail" => Ok(DeliveryPolicy::Fail),
            _ => Err(format!("unknown delivery policy {s:?}: expected overwrite, block or fail")),
        }
    }
}

impl std::fmt::Display for DeliveryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How to create or open a topic, built with setters:
/// `TopicConfig::default().max_message_len(64).history(16)`.
///
/// A setter that is not called accepts whatever an existing topic has; a value that is set
/// and differs from the existing topic fails with [`OpenError::LayoutMismatch`]. A topic
/// that is created takes the documented default of every value not set.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct TopicConfig {
    max_message_len: Option<usize>,
    history: Option<usize>,
    spare_slots: Option<usize>,
    policy: Option<DeliveryPolicy>,
    reliable_timeout: Option<Duration>,
    common: CommonConfig,
}

impl TopicConfig {
    /// The largest message in bytes (the slot size; default
    /// [`DEFAULT_MAX_MESSAGE_LEN`], 4096).
    pub fn max_message_len(mut self, len: usize) -> TopicConfig {
        self.max_message_len = Some(len);
        self
    }

    /// How many of the last messages stay readable by sequence number (default
    /// [`DEFAULT_HISTORY`], 16).
    pub fn history(mut self, history: usize) -> TopicConfig {
        self.history = Some(history);
        self
    }

    /// Extra slots, so that pinned samples do not shorten the history (default
    /// [`DEFAULT_SPARE_SLOTS`], 4).
    pub fn spare_slots(mut self, n: usize) -> TopicConfig {
        self.spare_slots = Some(n);
        self
    }

    /// The delivery policy (default [`DeliveryPolicy::Overwrite`]): what publishers do
    /// when a reliable subscriber has not read the slot they would overwrite.
    pub fn policy(mut self, policy: DeliveryPolicy) -> TopicConfig {
        self.policy = Some(policy);
        self
    }

    /// How long a live reliable subscriber may hold publishers back without reading before
    /// it is evicted (default [`DEFAULT_RELIABLE_TIMEOUT_MS`], 1 s; stored in milliseconds,
    /// 1 ms to one day). The clock is the topic's, not a publisher's: it runs from the first
    /// time any publisher was held back by the subscriber standing where it stands, across
    /// publishers that give up and new ones, in any process; and it runs for every stuck
    /// subscriber at once, so a publisher waits about this long in all, however many are
    /// stuck.
    pub fn reliable_timeout(mut self, timeout: Duration) -> TopicConfig {
        self.reliable_timeout = Some(timeout);
        self
    }

    crate::endpoint::channel::common_setters!("topic");
}

impl TopicConfig {
    fn timeout_ms(&self) -> Option<u64> {
        self.reliable_timeout.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

impl ChannelConfig for TopicConfig {
    type Layout = TopicLayout;

    fn layout_to_create(&self) -> Result<TopicLayout, OpenError> {
        let typed = self.common.payload.map(|t| super::typed::slot_size_for(&t));
        TopicLayout::new(
            self.max_message_len.or(typed).unwrap_or(DEFAULT_MAX_MESSAGE_LEN) as u64,
            self.history.unwrap_or(DEFAULT_HISTORY) as u64,
            self.spare_slots.unwrap_or(DEFAULT_SPARE_SLOTS) as u64,
            self.policy.unwrap_or_default() as u64,
            self.timeout_ms().unwrap_or(DEFAULT_RELIABLE_TIMEOUT_MS),
        )
        .map_err(|what| OpenError::InvalidConfig { what })
    }

    fn set_fields(&self, existing: &TopicLayout) -> Vec<(&'static str, Option<u64>, u64)> {
        let set = |v: Option<usize>| v.map(|v| v as u64);
        vec![
            ("slot size", set(self.max_message_len), existing.slot_size),
            ("history", set(self.history), existing.history),
            ("spare slots", set(self.spare_slots), existing.spare),
            ("delivery policy (0 overwrite, 1 block, 2 fail)", self.policy.map(|p| p as u64), existing.policy),
            ("reliable timeout ms", self.timeout_ms(), existing.reliable_timeout_ms),
        ]
    }

    fn common(&self) -> &CommonConfig {
        &self.common
    }
}

impl ChannelLayout for TopicLayout {
    /// A sample lends its slot's payload, aligned as `typed::payload_align` says.
    fn payload_room(&self) -> (usize, usize) {
        (self.slot_size as usize, super::typed::payload_align(self.slot_size))
    }
}

/// An open topic: a shared handle to its mapping. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Topic {
    inner: Arc<Inner>,
}

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
    area: RoArea<'a>,
    layout: &'a TopicLayout,
    participants: ParticipantView<'a>,
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
    fn committed_max(&self) -> u64 {
        self.area.u64_at(std::mem::offset_of!(Control, committed_max.0)).load(Ordering::Acquire)
    }

    /// Live subscribers whose cursor word says reliable (not evicted).
    fn reliable_subscribers(&self) -> usize {
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
    fn pinned_slots(&self) -> usize {
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

    fn register(&self, role: u32) -> Result<usize, OpenError> {
        let range = 0..MAX_TOPIC_PARTICIPANTS;
        register_shared(self.participants(), ProcessId::current(), role, range, || self.reclaim_dead(), self.path())
    }
}

/// A snapshot of a topic's state, from [`Topic::status`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicStatus {
    /// Largest message in bytes.
    pub max_message_len: u64,
    /// Guaranteed history depth.
    pub history: u64,
    /// Total slots (history + spare).
    pub slots: u64,
    /// Highest committed sequence number (0: none yet).
    pub last_seq: u64,
    /// Live publishers.
    pub publishers: usize,
    /// Live subscribers.
    pub subscribers: usize,
    /// Slots pinned right now.
    pub pinned_slots: usize,
    /// The delivery policy.
    pub policy: DeliveryPolicy,
    /// How long a live reliable subscriber may hold publishers back without reading.
    pub reliable_timeout: Duration,
    /// Live reliable subscribers (not evicted).
    pub reliable_subscribers: usize,
    /// The channel's schema (`None`: it has none).
    pub schema: Option<std::sync::Arc<crate::Schema>>,
}

impl Topic {
    /// Opens topic `name`, creating it with `config` if it does not exist. The values `config`
    /// sets must match an existing topic (else [`OpenError::LayoutMismatch`] names both);
    /// the values it leaves unset accept the existing topic's, or take their defaults when
    /// the topic is created.
    pub fn create_or_open(domain: &Domain, name: &str, config: &TopicConfig) -> Result<Topic, OpenError> {
        Ok(Topic { inner: Arc::new(Channel::create_or_open(domain, name, config)?) })
    }

    /// Opens an existing topic.
    pub fn open(domain: &Domain, name: &str) -> Result<Topic, OpenError> {
        Ok(Topic { inner: Arc::new(Channel::open(domain, name)?) })
    }

    /// Reads the status of topic `name` without joining it: the file is opened and mapped
    /// read-only, so read permission suffices, and nothing is registered or written.
    pub fn status(domain: &Domain, name: &str) -> Result<TopicStatus, OpenError> {
        let chan = Channel::<TopicLayout, ReadOnly>::open_read_only(domain, name)?;
        let (sv, layout) = (chan.status_view(), chan.layout());
        Ok(TopicStatus {
            max_message_len: layout.slot_size,
            history: layout.history,
            slots: layout.slots,
            last_seq: sv.committed_max(),
            publishers: sv.participants.live_in_role(ROLE_PUBLISHER, process_is_alive),
            subscribers: sv.participants.live_in_role(ROLE_SUBSCRIBER, process_is_alive),
            pinned_slots: sv.pinned_slots(),
            policy: DeliveryPolicy::from_u64(layout.policy).unwrap_or_default(),
            reliable_timeout: Duration::from_millis(layout.reliable_timeout_ms),
            reliable_subscribers: sv.reliable_subscribers(),
            schema: chan.schema().cloned(),
        })
    }

    /// Checks that this topic can carry `t` (see [`Channel::check_type`]).
    pub(super) fn check_type(&self, t: &PayloadType) -> Result<(), OpenError> {
        self.inner.check_type(t)
    }

    /// The topic's schema, set by its creator (`None`: it has none; see [`Schema`](crate::Schema)).
    pub fn schema(&self) -> Option<&crate::Schema> {
        self.inner.schema().map(|s| &**s)
    }

    /// Maps every page of this topic into this process now, so that no send or receive of
    /// this process takes a page fault the first time it touches a page.
    ///
    /// The topic's memory is allocated when it is made; what each process lacks is its own
    /// page-table entries, one fault per 4 KiB page at its first touch. With large slots that
    /// is hundreds of faults per message over the first pass through the history (a 1 MiB
    /// slot is 256 pages). Call it once after opening, in a long-lived process on a latency
    /// path: it takes a moment (milliseconds for tens of MiB) and the page tables of the
    /// whole file (about 2 KiB per MiB). Advisory: before Linux 5.14, or over a file cut
    /// short, it does nothing.
    pub fn prefault(&self) {
        self.inner.prefault();
    }

    /// The topic's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Largest message in bytes.
    pub fn max_message_len(&self) -> usize {
        self.inner.layout().slot_size as usize
    }

    /// Guaranteed history depth.
    pub fn history(&self) -> usize {
        self.inner.layout().history as usize
    }

    /// A new publisher. Fails with [`OpenError::TooManyParticipants`] when every participant
    /// entry is taken by a live process.
    pub fn publisher(&self) -> Result<Publisher, OpenError> {
        let id = self.inner.register(ROLE_PUBLISHER)?;
        Ok(Publisher::new(self.inner.clone(), id))
    }

    /// A new subscriber that receives messages published from now on. Fails with
    /// [`OpenError::TooManyParticipants`] when every participant entry is taken by a live
    /// process.
    pub fn subscriber(&self) -> Result<Subscriber, OpenError> {
        let id = self.inner.register(ROLE_SUBSCRIBER)?;
        Ok(Subscriber::new(self.inner.clone(), id))
    }

    /// A new *reliable* subscriber: on a `block` or `fail` topic, publishers do not overwrite
    /// a message it has not read (see [`DeliveryPolicy`]), unless it dies (dropped at once)
    /// or does not move for the topic's reliable timeout while publishers are held back (by
    /// it or by another; whichever publisher, in any process: evicted, it receives on as a lossy
    /// subscriber, and its next receive returns the `Evicted` error once). It starts with
    /// the messages published from now on; [`Subscriber::seek_oldest`] moves it back to the
    /// oldest message publishers still keep for it. Fails with [`OpenError::InvalidConfig`]
    /// on an `overwrite` topic, whose publishers read no cursor.
    pub fn reliable_subscriber(&self) -> Result<Subscriber, OpenError> {
        if self.inner.policy() == DeliveryPolicy::Overwrite {
            return Err(OpenError::InvalidConfig {
                what: format!(
                    "topic {} has delivery policy overwrite, which keeps no message for a reliable subscriber; create it with policy block or fail",
                    self.name()
                ),
            });
        }
        let id = self.inner.register(ROLE_SUBSCRIBER)?;
        let sub = Subscriber::new(self.inner.clone(), id);
        sub.make_reliable();
        Ok(sub)
    }

    /// The topic's delivery policy.
    pub fn policy(&self) -> DeliveryPolicy {
        self.inner.policy()
    }

    /// Highest committed sequence number (0: none yet).
    pub fn last_seq(&self) -> u64 {
        self.inner.shared().committed_max()
    }

    /// Reclaims what dead participants held (their slots, pins and entries). Returns how
    /// many entries were reclaimed. Runs automatically when needed; exposed for tools.
    pub fn reclaim_dead(&self) -> usize {
        self.inner.reclaim_dead()
    }
}
