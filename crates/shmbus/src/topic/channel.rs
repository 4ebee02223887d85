//! The topic handle: its configuration, status and the mapping shared by its endpoints.

use std::sync::Arc;

use super::layout::{TopicLayout, CONTROL_SIZE};
use super::protocol::{
    Control, DataRegion, Shared, SlotHeader, MAX_TOPIC_PARTICIPANTS, ROLE_PUBLISHER, ROLE_SUBSCRIBER,
};
use super::publisher::Publisher;
use super::subscriber::Subscriber;
use crate::domain::Domain;
use crate::error::OpenError;
use crate::event::EventWord;
use crate::segment::{CreateOptions, Segment};
use crate::sync::AtomicU64;
use crate::sys::{process_is_alive, ProcessId};

/// How to create a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicConfig {
    /// Largest message in bytes.
    pub slot_size: usize,
    /// Messages kept for random access (N).
    pub history: usize,
    /// Extra slots so that pinned samples do not shorten the history (default 4).
    pub spare_slots: usize,
    /// File mode and group of a created segment.
    pub create: CreateOptions,
}

impl TopicConfig {
    /// A topic of `slot_size`-byte messages keeping the last `history`.
    pub fn new(slot_size: usize, history: usize) -> TopicConfig {
        TopicConfig { slot_size, history, spare_slots: 4, create: CreateOptions::default() }
    }

    /// Sets the number of spare slots.
    pub fn spare_slots(mut self, n: usize) -> TopicConfig {
        self.spare_slots = n;
        self
    }

    /// Sets the file mode of a created segment (default `0o600`).
    pub fn mode(mut self, mode: u32) -> TopicConfig {
        self.create.mode = mode;
        self
    }
}

/// An open topic: a shared handle to its mapping. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Topic {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) seg: Segment,
    pub(super) layout: TopicLayout,
    name: String,
}

// SAFETY: the raw pointers derived from the mapping are only dereferenced through atomics
// or validated copies; the mapping itself is Send + Sync.
unsafe impl Send for Inner {}
// SAFETY: as above.
unsafe impl Sync for Inner {}

impl Inner {
    #[inline]
    pub(super) fn shared(&self) -> Shared<'_> {
        let base = self.seg.kind_base();
        let l = &self.layout;
        // SAFETY: the segment was validated to be exactly `KIND_OFFSET + l.total` bytes and
        // the offsets below are derived from the same validated layout: the control block at
        // 0, `index_len` index words at CONTROL_SIZE, `slots` 128-byte headers at headers_off
        // (128-byte aligned), payloads at data_off + s * stride (inside the headers when the
        // slot size fits inline). All are atomics or raw bytes, valid for any content.
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
                participants: self.seg.participants(),
            }
        }
    }

    pub(super) fn event(&self) -> &EventWord {
        // SAFETY: the control block's `event` is an AtomicU32 in the mapping; EventWord is
        // repr(transparent) over AtomicU32.
        unsafe { &*(&self.shared().ctl.event.0 as *const crate::sync::AtomicU32 as *const EventWord) }
    }

    pub(super) fn reclaim_dead(&self) -> usize {
        let sh = self.shared();
        sh.participants.reclaim_dead(ProcessId::current(), process_is_alive, |i, _| sh.cleanup_participant(i))
    }

    fn register(&self, role: u32) -> Result<usize, OpenError> {
        let me = ProcessId::current();
        let table = self.seg.participants();
        if let Some(i) = table.register(me, role, 0..MAX_TOPIC_PARTICIPANTS) {
            return Ok(i);
        }
        self.reclaim_dead();
        table.register(me, role, 0..MAX_TOPIC_PARTICIPANTS).ok_or_else(|| OpenError::TooManyParticipants {
            path: self.seg.path().to_owned(),
            max: MAX_TOPIC_PARTICIPANTS,
        })
    }
}

/// A snapshot of a topic's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicStatus {
    /// Largest message.
    pub slot_size: u64,
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
}

impl Topic {
    /// Opens topic `name`, creating it with `config` if it does not exist. If it exists with
    /// a different slot size, history or spare count, fails with
    /// [`OpenError::LayoutMismatch`] naming both values.
    pub fn create_or_open(domain: &Domain, name: &str, config: &TopicConfig) -> Result<Topic, OpenError> {
        let layout = TopicLayout::new(config.slot_size as u64, config.history as u64, config.spare_slots as u64)
            .map_err(|what| OpenError::InvalidConfig { what })?;
        let (seg, layout, _) = Segment::create_or_open(domain, name, &layout, &config.create)?;
        Ok(Topic::from_segment(seg, layout, name))
    }

    /// Opens an existing topic.
    pub fn open(domain: &Domain, name: &str) -> Result<Topic, OpenError> {
        let (seg, layout) = Segment::open::<TopicLayout>(domain, name)?;
        Ok(Topic::from_segment(seg, layout, name))
    }

    /// Opens an existing topic and subscribes to it (new messages only).
    pub fn subscribe(domain: &Domain, name: &str) -> Result<Subscriber, OpenError> {
        Topic::open(domain, name)?.subscriber()
    }

    fn from_segment(seg: Segment, layout: TopicLayout, name: &str) -> Topic {
        Topic { inner: Arc::new(Inner { seg, layout, name: name.to_owned() }) }
    }

    /// The topic's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Largest message in bytes.
    pub fn slot_size(&self) -> usize {
        self.inner.layout.slot_size as usize
    }

    /// Guaranteed history depth.
    pub fn history(&self) -> usize {
        self.inner.layout.history as usize
    }

    /// A new publisher.
    pub fn publisher(&self) -> Result<Publisher, OpenError> {
        let id = self.inner.register(ROLE_PUBLISHER)?;
        Ok(Publisher::new(self.inner.clone(), id))
    }

    /// A new subscriber that receives messages published from now on.
    pub fn subscriber(&self) -> Result<Subscriber, OpenError> {
        let id = self.inner.register(ROLE_SUBSCRIBER)?;
        Ok(Subscriber::new(self.inner.clone(), id))
    }

    /// Highest committed sequence number (0: none yet).
    pub fn last_seq(&self) -> u64 {
        self.inner.shared().committed_max()
    }

    /// A snapshot of the topic's state.
    pub fn status(&self) -> TopicStatus {
        let sh = self.inner.shared();
        let mut publishers = 0;
        let mut subscribers = 0;
        for p in sh.participants.list() {
            if !process_is_alive(p.process) {
                continue;
            }
            match p.role {
                ROLE_PUBLISHER => publishers += 1,
                ROLE_SUBSCRIBER => subscribers += 1,
                _ => {}
            }
        }
        TopicStatus {
            slot_size: self.inner.layout.slot_size,
            history: self.inner.layout.history,
            slots: self.inner.layout.slots,
            last_seq: sh.committed_max(),
            publishers,
            subscribers,
            pinned_slots: sh.pinned_slots(),
        }
    }

    /// Reclaims what dead participants held (their slots, pins and entries). Returns how
    /// many entries were reclaimed. Runs automatically when needed; exposed for tools.
    pub fn reclaim_dead(&self) -> usize {
        self.inner.reclaim_dead()
    }
}
