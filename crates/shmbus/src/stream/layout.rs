//! The stream's segment layout (the kind area: control block, then the ring data) and its
//! creation parameters.

use super::protocol::{RingShared, ALIGN, HEADER};
use crate::endpoint::channel::{ChannelConfig, ChannelLayout, CommonConfig};
use crate::error::OpenError;
use crate::kind::Kind;
use crate::segment::{Layout, KIND_OFFSET, PARAMS};
use crate::sys::page_size;

/// Largest accepted ring capacity (1 TiB).
pub const MAX_CAPACITY: u64 = 1 << 40;
/// Bound on the offset of the ring data inside the kind area (a corrupt header cannot make
/// us map far beyond the control block).
const MAX_DATA_OFFSET: u64 = 1 << 20;

/// How to make a stream: built with named setters, each optional.
///
/// ```
/// # use shmbus::stream::StreamConfig;
/// let config = StreamConfig::default().capacity(1 << 16).mode(0o660);
/// # let _ = config;
/// ```
///
/// A setter that is not called accepts whatever an existing stream has; a set capacity that
/// differs from an existing stream's fails with
/// [`OpenError::LayoutMismatch`](crate::OpenError::LayoutMismatch). When the stream is
/// created, unset values take their defaults.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct StreamConfig {
    capacity: Option<usize>,
    common: CommonConfig,
}

impl StreamConfig {
    /// The capacity of a stream created without one: 1 MiB.
    pub const DEFAULT_CAPACITY: usize = 1 << 20;

    /// Ring size in bytes: a power of two of at least one page (see the module docs).
    /// Default (when creating): [`StreamConfig::DEFAULT_CAPACITY`].
    pub fn capacity(mut self, bytes: usize) -> StreamConfig {
        self.capacity = Some(bytes);
        self
    }

    crate::endpoint::channel::common_setters!("stream");
}

impl ChannelConfig for StreamConfig {
    type Layout = StreamLayout;

    fn layout_to_create(&self) -> Result<StreamLayout, OpenError> {
        StreamLayout::for_capacity(self.capacity.unwrap_or(Self::DEFAULT_CAPACITY) as u64)
            .map_err(|what| OpenError::InvalidConfig { what })
    }

    fn set_fields(&self, existing: &StreamLayout) -> Vec<(&'static str, Option<u64>, u64)> {
        vec![("capacity", self.capacity.map(|c| c as u64), existing.capacity)]
    }

    fn common(&self) -> &CommonConfig {
        &self.common
    }
}

/// Records are placed at 8-byte aligned addresses.
impl ChannelLayout for StreamLayout {
    fn payload_room(&self) -> (usize, usize) {
        (self.max_record_len() as usize, ALIGN as usize)
    }
}

/// The stream's kind area: the control block ([`RingShared`]) at offset 0, the ring data at
/// `data_offset` (page aligned in the file), `capacity` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamLayout {
    pub(super) capacity: u64,
    pub(super) data_offset: u64,
}

fn capacity_error(c: u64) -> Option<String> {
    let page = page_size() as u64;
    let up = c.checked_next_power_of_two().unwrap_or(MAX_CAPACITY).clamp(page, MAX_CAPACITY);
    let down = if c.is_power_of_two() { c } else { up / 2 }.max(page);
    if c == 0 {
        Some(format!("stream capacity is 0 bytes; give a power of two of at least one page ({page} bytes)"))
    } else if c % page != 0 {
        Some(format!("stream capacity {c} is not a multiple of the page size {page}; use a power of two of at least {page}, e.g. {up}"))
    } else if !c.is_power_of_two() {
        Some(format!("stream capacity {c} is a page multiple but not a power of two; use {down} or {up}"))
    } else if c > MAX_CAPACITY {
        Some(format!("stream capacity {c} exceeds the maximum {MAX_CAPACITY}"))
    } else {
        None
    }
}

impl StreamLayout {
    pub(super) fn for_capacity(capacity: u64) -> Result<StreamLayout, String> {
        if let Some(e) = capacity_error(capacity) {
            return Err(e);
        }
        let page = page_size() as u64;
        let ctrl_end = KIND_OFFSET as u64 + std::mem::size_of::<RingShared>() as u64;
        let data_offset = ctrl_end.div_ceil(page) * page - KIND_OFFSET as u64;
        Ok(StreamLayout { capacity, data_offset })
    }

    pub(super) fn max_record_len(&self) -> u64 {
        (self.capacity - HEADER).min(u32::MAX as u64)
    }
}

impl Layout for StreamLayout {
    const KIND: Kind = Kind::Stream;

    fn from_params(params: &[u64; PARAMS]) -> Result<Self, String> {
        let (capacity, data_offset) = (params[0], params[1]);
        if let Some(e) = capacity_error(capacity) {
            return Err(e);
        }
        let page = page_size() as u64;
        if data_offset < std::mem::size_of::<RingShared>() as u64 || data_offset > MAX_DATA_OFFSET {
            return Err(format!("stream data offset {data_offset} is outside the control block bounds"));
        }
        if (KIND_OFFSET as u64 + data_offset) % page != 0 {
            return Err(format!("stream data offset {data_offset} is not page aligned in the file (page size {page}); was it created on a host with another page size?"));
        }
        if let Some((i, v)) = params.iter().enumerate().skip(2).find(|(_, &v)| v != 0) {
            return Err(format!("unknown stream parameter #{i} = {v} (from a newer shmbus?)"));
        }
        Ok(StreamLayout { capacity, data_offset })
    }

    fn params(&self) -> [u64; PARAMS] {
        let mut p = [0; PARAMS];
        p[0] = self.capacity;
        p[1] = self.data_offset;
        p
    }

    fn kind_area_size(&self) -> u64 {
        self.data_offset + self.capacity
    }

    fn param_names() -> [&'static str; PARAMS] {
        ["capacity", "", "", "", "", "", "", ""]
    }

    unsafe fn init(&self, _base: *mut u8) {
        // A zero-filled control block is an empty ring: both positions 0, no waiters.
    }
}
