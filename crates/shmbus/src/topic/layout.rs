//! The topic's segment layout: where the control block, index, slot headers and payloads sit.

use super::protocol::{SlotHeader, INLINE_DATA, INLINE_OFFSET, MAX_SLOTS};
use crate::segment::{Kind, Layout, PARAMS};

/// Largest slot size a topic accepts (1 GiB).
pub const MAX_SLOT_SIZE: u64 = 1 << 30;
/// Largest history depth a topic accepts.
pub const MAX_HISTORY: u64 = 1 << 20;
/// Largest number of spare slots.
pub const MAX_SPARE: u64 = 1 << 16;

/// Largest reliable timeout a topic accepts, in milliseconds (one day).
pub const MAX_RELIABLE_TIMEOUT_MS: u64 = 86_400_000;

pub(super) const CONTROL_SIZE: u64 = super::protocol::CONTROL_BYTES as u64;

/// The topic's layout, derived from (slot_size, history, spare).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TopicLayout {
    pub(super) slot_size: u64,
    pub(super) history: u64,
    pub(super) spare: u64,
    /// The delivery policy's number (`DeliveryPolicy as u64`).
    pub(super) policy: u64,
    /// Milliseconds a reliable subscriber may hold publishers back without reading.
    pub(super) reliable_timeout_ms: u64,
    pub(super) slots: u64,
    pub(super) index_len: u64,
    pub(super) stride: u64,
    pub(super) headers_off: u64,
    /// Where slot 0's payload starts (inside its header for small slots).
    pub(super) data_off: u64,
    /// Where the held words start (one per participant entry, after the payloads; see
    /// `protocol`'s "The held-since stamps").
    pub(super) held_off: u64,
    pub(super) total: u64,
}

/// Bytes of the held words: one 8-byte word per participant entry.
pub(super) const HELD_SIZE: u64 = 8 * crate::participants::PARTICIPANTS as u64;

fn round_up(v: u64, to: u64) -> Option<u64> {
    v.checked_add(to - 1).map(|x| x / to * to)
}

impl TopicLayout {
    pub(super) fn new(
        slot_size: u64,
        history: u64,
        spare: u64,
        policy: u64,
        reliable_timeout_ms: u64,
    ) -> Result<TopicLayout, String> {
        if super::channel::DeliveryPolicy::from_u64(policy).is_none() {
            return Err(format!("delivery policy {policy} is none of 0 (overwrite), 1 (block), 2 (fail)"));
        }
        if reliable_timeout_ms == 0 || reliable_timeout_ms > MAX_RELIABLE_TIMEOUT_MS {
            return Err(format!("reliable timeout {reliable_timeout_ms} ms must be 1..={MAX_RELIABLE_TIMEOUT_MS}"));
        }
        if slot_size == 0 || slot_size > MAX_SLOT_SIZE {
            return Err(format!("slot size {slot_size} must be 1..={MAX_SLOT_SIZE} bytes"));
        }
        if history == 0 || history > MAX_HISTORY {
            return Err(format!("history {history} must be 1..={MAX_HISTORY}"));
        }
        if spare > MAX_SPARE {
            return Err(format!("spare slots {spare} must be at most {MAX_SPARE}"));
        }
        let slots = history + spare;
        if slots > MAX_SLOTS {
            return Err(format!("{slots} slots exceed the maximum of {MAX_SLOTS}"));
        }
        let index_len = (2 * slots).next_power_of_two().max(64);
        // Slot headers are 128 bytes: a line of guard words, and a line of seq/len/ts with inline payload.
        let header = std::mem::size_of::<SlotHeader>() as u64;
        let headers_off = round_up(CONTROL_SIZE + 8 * index_len, 128).ok_or("index overflows")?;
        let headers_end = headers_off + header * slots;
        let (stride, data_off, total) = if slot_size <= INLINE_DATA as u64 {
            // Small messages live inside their slot header.
            (header, headers_off + INLINE_OFFSET as u64, headers_end)
        } else {
            let stride = if slot_size < 4096 { round_up(slot_size, 64) } else { round_up(slot_size, 4096) }
                .ok_or("slot size overflows")?;
            let data_off = round_up(headers_end, 4096).ok_or("headers overflow")?;
            let total =
                stride.checked_mul(slots).and_then(|d| d.checked_add(data_off)).ok_or("topic size overflows")?;
            (stride, data_off, total)
        };
        let held_off = round_up(total, 128).ok_or("topic size overflows")?;
        let total = held_off.checked_add(HELD_SIZE).ok_or("topic size overflows")?;
        if total > (1 << 40) {
            return Err(format!("topic would need {total} bytes; reduce slot size or history"));
        }
        Ok(TopicLayout {
            slot_size,
            history,
            spare,
            policy,
            reliable_timeout_ms,
            slots,
            index_len,
            stride,
            headers_off,
            data_off,
            held_off,
            total,
        })
    }
}

impl Layout for TopicLayout {
    const KIND: Kind = Kind::Topic;

    fn from_params(p: &[u64; PARAMS]) -> Result<Self, String> {
        // A topic made before delivery policies stores 0, 0: overwrite, default timeout.
        let timeout = if p[4] == 0 { super::channel::DEFAULT_RELIABLE_TIMEOUT_MS } else { p[4] };
        TopicLayout::new(p[0], p[1], p[2], p[3], timeout)
    }

    fn params(&self) -> [u64; PARAMS] {
        [self.slot_size, self.history, self.spare, self.policy, self.reliable_timeout_ms, 0, 0, 0]
    }

    fn kind_area_size(&self) -> u64 {
        self.total
    }

    fn param_names() -> [&'static str; PARAMS] {
        ["slot size", "history", "spare slots", "delivery policy", "reliable timeout ms", "", "", ""]
    }

    unsafe fn init(&self, _base: *mut u8) {
        // All-zero is the initial state: no message, no writer, no pins, tail 0.
    }
}

/// The topic in the kind registry (`crate::kind`).
pub(crate) struct TopicKind;

impl crate::kind::KindInfo for TopicKind {
    fn kind(&self) -> Kind {
        Kind::Topic
    }

    fn role_name(&self, role: u32) -> Option<&'static str> {
        match role {
            super::protocol::ROLE_PUBLISHER => Some("publisher"),
            super::protocol::ROLE_SUBSCRIBER => Some("subscriber"),
            _ => None,
        }
    }

    fn param_keys(&self) -> &'static [&'static str] {
        &["slot_size", "history", "spare_slots", "policy", "reliable_timeout_ms"]
    }

    /// None, by decision: a topic's history is a window no reader is owed (see `admin`).
    fn pending(
        &self,
        _seg: crate::segment::Segment<crate::sys::ReadOnly>,
    ) -> Result<Option<crate::admin::Pending>, crate::OpenError> {
        Ok(None)
    }

    /// No pending data; the messages its history holds now.
    fn contents(
        &self,
        seg: crate::segment::Segment<crate::sys::ReadOnly>,
    ) -> Result<(Option<crate::admin::Pending>, Option<u64>), crate::OpenError> {
        Ok((None, Some(super::channel::history_len(seg)?)))
    }

    fn describe(&self, domain: &crate::Domain, name: &str) -> Result<crate::admin::Description, crate::OpenError> {
        let st = super::Topic::status(domain, name)?;
        Ok(crate::admin::Description {
            max_message_len: Some(st.max_message_len),
            history: Some(st.history),
            last_seq: Some(st.last_seq),
            senders: Some(st.publishers),
            receivers: Some(st.subscribers),
            status: vec![
                ("slots", st.slots.into()),
                ("pinned_slots", st.pinned_slots.into()),
                ("reliable_subscribers", st.reliable_subscribers.into()),
            ],
            detail: match st.policy {
                super::DeliveryPolicy::Overwrite => String::new(),
                p => format!("policy {}, {} reliable subscriber(s)", p.name(), st.reliable_subscribers),
            },
            ..Default::default()
        })
    }
}
