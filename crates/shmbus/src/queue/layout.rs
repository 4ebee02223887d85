//! The queue's layout in its segment and the configuration it is made from.

use std::mem::MaybeUninit;

use super::protocol::{CellHeader, Cells, Control, CELL_HEADER};
use crate::endpoint::channel::{ChannelConfig, ChannelLayout, CommonConfig};
use crate::error::OpenError;
use crate::kind::Kind;
use crate::segment::{Layout, PARAMS};

/// Largest accepted capacity (messages).
pub const MAX_CAPACITY: u64 = 1 << 32;
/// Largest accepted max message length (bytes).
pub const MAX_MESSAGE_LEN: usize = 1 << 30;
/// Largest accepted queue segment (bytes).
pub const MAX_QUEUE_BYTES: u64 = 1 << 40;

/// Bytes before the first cell: the control block, padded.
pub(super) const CONTROL_BYTES: usize = 1024;
const _: () = assert!(std::mem::size_of::<Control>() <= CONTROL_BYTES);

/// How to make a queue: its layout (fixed when it is created) and the file's mode and group.
///
/// Built with the setters, each of which says its default:
/// `QueueConfig::default().capacity(1024).max_message_len(256)`. A setter that is not called
/// accepts whatever an existing queue has; a value that is set and differs from the existing
/// queue fails with [`OpenError::LayoutMismatch`](crate::OpenError::LayoutMismatch). When the
/// queue is created, unset values take the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueConfig {
    capacity: Option<u64>,
    max_message_len: Option<usize>,
    common: CommonConfig,
}

impl QueueConfig {
    /// How many messages the queue holds (at least 1, at most [`MAX_CAPACITY`]).
    /// Default: [`QueueConfig::DEFAULT_CAPACITY`].
    pub fn capacity(mut self, capacity: u64) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// The largest message, in bytes (at least 1, at most [`MAX_MESSAGE_LEN`]).
    /// Default: [`QueueConfig::DEFAULT_MAX_MESSAGE_LEN`].
    pub fn max_message_len(mut self, len: usize) -> Self {
        self.max_message_len = Some(len);
        self
    }

    crate::endpoint::channel::common_setters!("queue");

    /// Capacity of a created queue whose capacity was not set.
    pub const DEFAULT_CAPACITY: u64 = 1024;
    /// Max message length of a created queue whose max message length was not set.
    pub const DEFAULT_MAX_MESSAGE_LEN: usize = 1024;
}

impl ChannelConfig for QueueConfig {
    type Layout = QueueLayout;

    fn layout_to_create(&self) -> Result<QueueLayout, OpenError> {
        let typed = self.common.payload.map(|t| t.size);
        QueueLayout::new(
            self.capacity.unwrap_or(Self::DEFAULT_CAPACITY),
            self.max_message_len.or(typed).unwrap_or(Self::DEFAULT_MAX_MESSAGE_LEN) as u64,
        )
        .map_err(|what| OpenError::InvalidConfig { what })
    }

    fn set_fields(&self, existing: &QueueLayout) -> Vec<(&'static str, Option<u64>, u64)> {
        vec![
            ("capacity", self.capacity, existing.capacity),
            ("max_element_size", self.max_message_len.map(|m| m as u64), existing.max as u64),
        ]
    }

    fn common(&self) -> &CommonConfig {
        &self.common
    }
}

/// The validated layout: header parameters `[capacity, max_element_size, stride, 0…]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueLayout {
    pub(super) capacity: u64,
    pub(super) max: usize,
    pub(super) stride: usize,
}

impl QueueLayout {
    fn stride_for(max: usize) -> usize {
        (CELL_HEADER + max).div_ceil(64) * 64
    }

    pub(super) fn new(capacity: u64, max: u64) -> Result<QueueLayout, String> {
        if capacity == 0 {
            return Err("capacity is 0; a queue must hold at least one message".into());
        }
        if capacity > MAX_CAPACITY {
            return Err(format!("capacity {capacity} is larger than the maximum {MAX_CAPACITY}"));
        }
        if max == 0 {
            return Err("max_message_len is 0; messages need at least one byte of room".into());
        }
        if max > MAX_MESSAGE_LEN as u64 {
            return Err(format!("max_message_len {max} is larger than the maximum {MAX_MESSAGE_LEN}"));
        }
        let max = max as usize;
        let stride = Self::stride_for(max);
        let bytes = (stride as u64).checked_mul(capacity).and_then(|b| b.checked_add(CONTROL_BYTES as u64));
        match bytes {
            Some(b) if b <= MAX_QUEUE_BYTES => Ok(QueueLayout { capacity, max, stride }),
            _ => Err(format!(
                "{capacity} messages of {max} bytes need more than the {MAX_QUEUE_BYTES} bytes a queue may take; lower capacity or max_message_len"
            )),
        }
    }
}

/// A queue never lends its memory as a `&T` (receives copy), so any alignment goes.
impl ChannelLayout for QueueLayout {
    fn payload_room(&self) -> (usize, usize) {
        (self.max, usize::MAX)
    }
}

impl Layout for QueueLayout {
    const KIND: Kind = Kind::Queue;

    fn from_params(params: &[u64; PARAMS]) -> Result<Self, String> {
        let l = QueueLayout::new(params[0], params[1])?;
        if params[2] != l.stride as u64 {
            return Err(format!(
                "cell stride {} does not match max_element_size {} (expected {})",
                params[2], l.max, l.stride
            ));
        }
        if let Some(i) = (3..PARAMS).find(|&i| params[i] != 0) {
            return Err(format!("unknown layout parameter {i} = {}", params[i]));
        }
        Ok(l)
    }

    fn params(&self) -> [u64; PARAMS] {
        let mut p = [0; PARAMS];
        p[0] = self.capacity;
        p[1] = self.max as u64;
        p[2] = self.stride as u64;
        p
    }

    fn kind_area_size(&self) -> u64 {
        CONTROL_BYTES as u64 + self.capacity * self.stride as u64
    }

    fn param_names() -> [&'static str; PARAMS] {
        ["capacity", "max_element_size", "", "", "", "", "", ""]
    }

    unsafe fn init(&self, base: *mut u8) {
        // The control block is all zeros (tail = head = 0, no waiters), as the file is. Each
        // cell starts EMPTY for its own index.
        for i in 0..self.capacity as usize {
            // SAFETY: cell i lies inside the kind area (kind_area_size covers capacity * stride
            // after CONTROL_BYTES) and is 64-byte aligned (base is page aligned, stride a
            // multiple of 64); the file is private to the creator.
            unsafe {
                std::ptr::write(base.add(CONTROL_BYTES + i * self.stride) as *mut CellHeader, CellHeader::new(i))
            };
        }
    }
}

/// Cells in the shared mapping.
#[derive(Debug, Clone, Copy)]
pub(super) struct MappedCells {
    pub(super) base: *mut u8,
    pub(super) stride: usize,
}

impl Cells for MappedCells {
    #[inline]
    fn header(&self, index: usize) -> &CellHeader {
        // SAFETY: `index < capacity` (the ring reduces every position modulo capacity) and the
        // validated layout puts `capacity` cells of `stride` bytes at `base` inside the mapping,
        // which the owning `Shared` keeps alive; the header is atomics, valid for any bits.
        unsafe { &*(self.base.add(index * self.stride) as *const CellHeader) }
    }

    #[inline]
    unsafe fn write(&self, index: usize, data: &[u8]) {
        // SAFETY: caller holds the WRITING claim and data.len() <= max, so the copy stays
        // inside the cell's payload (stride >= CELL_HEADER + max).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(index * self.stride + CELL_HEADER), data.len())
        };
    }

    #[inline]
    unsafe fn read(&self, index: usize, out: &mut [MaybeUninit<u8>]) {
        // SAFETY: caller holds the READING claim and out.len() <= max, as above.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base.add(index * self.stride + CELL_HEADER),
                out.as_mut_ptr().cast::<u8>(),
                out.len(),
            )
        };
    }

    #[inline]
    fn prefetch_read(&self, index: usize, bytes: usize) {
        // From line 1: line 0, the header, is already here (the stamp was just read).
        for off in (64..bytes.min(self.stride)).step_by(64) {
            crate::sync::prefetch_line(self.base.wrapping_add(index * self.stride + off));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_params_are_validated() {
        let ok = QueueLayout::new(10, 100).unwrap();
        assert_eq!(ok.stride, 128);
        assert_eq!(QueueLayout::from_params(&ok.params()).unwrap(), ok);
        let bad: [[u64; PARAMS]; 8] = [
            [0, 100, 128, 0, 0, 0, 0, 0],
            [10, 0, 64, 0, 0, 0, 0, 0],
            [u64::MAX, 100, 128, 0, 0, 0, 0, 0],
            [10, u64::MAX, 128, 0, 0, 0, 0, 0],
            [10, 100, 64, 0, 0, 0, 0, 0],
            [10, 100, 128, 1, 0, 0, 0, 0],
            [MAX_CAPACITY, MAX_MESSAGE_LEN as u64, QueueLayout::stride_for(MAX_MESSAGE_LEN) as u64, 0, 0, 0, 0, 0],
            [u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX],
        ];
        for p in bad {
            let e = QueueLayout::from_params(&p).unwrap_err();
            assert!(!e.is_empty());
        }
    }
}
