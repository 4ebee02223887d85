//! The topic's segment layout: where the control block, index, slot headers and payloads sit.

use super::config::{
    DeliveryPolicy, TopicConfig, DEFAULT_HISTORY, DEFAULT_MAX_MESSAGE_LEN, DEFAULT_RELIABLE_TIMEOUT_MS,
    DEFAULT_SPARE_SLOTS,
};
use super::protocol::{SlotHeader, INLINE_DATA, INLINE_OFFSET, MAX_SLOTS};
use crate::endpoint::channel::{ChannelConfig, ChannelLayout, CommonConfig};
use crate::error::OpenError;
use crate::kind::Kind;
use crate::pod::PayloadType;
use crate::segment::{Layout, PARAMS};

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
        if DeliveryPolicy::from_u64(policy).is_none() {
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
        let timeout = if p[4] == 0 { DEFAULT_RELIABLE_TIMEOUT_MS } else { p[4] };
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

/// The alignment of every slot's payload in a topic of `slot_size`-byte slots: 8 for small
/// slots (the payload sits inside the 128-byte-aligned slot header, at offset 88), 64 for
/// the others (slots of a multiple of 64 bytes from a page-aligned start).
pub(super) fn payload_align(slot_size: u64) -> usize {
    if slot_size <= INLINE_DATA as u64 {
        8
    } else {
        64
    }
}

/// The slot size of a topic made by [`TopicConfig::for_type`]: the type's size, or at least
/// `INLINE_DATA + 1` bytes for a type aligned to more than 8, so that its slots are 64-aligned.
pub(super) fn slot_size_for(t: &PayloadType) -> usize {
    if t.align > 8 {
        t.size.max(INLINE_DATA + 1)
    } else {
        t.size
    }
}

impl TopicConfig {
    pub(super) fn timeout_ms(&self) -> Option<u64> {
        self.reliable_timeout.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

impl ChannelConfig for TopicConfig {
    type Layout = TopicLayout;

    fn layout_to_create(&self) -> Result<TopicLayout, OpenError> {
        let typed = self.common.payload.map(|t| slot_size_for(&t));
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
        (self.slot_size as usize, payload_align(self.slot_size))
    }
}
