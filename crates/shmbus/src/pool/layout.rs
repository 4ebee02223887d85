//! The pool's configuration and its validated segment layout.

#[cfg(not(loom))]
use super::protocol;
use super::protocol::MAX_WORKERS;
#[cfg(not(loom))]
use crate::error::OpenError;

/// Largest job payload a pool accepts (16 MiB).
pub const MAX_JOB_LEN: usize = 16 << 20;

/// How to make a pool: its layout, fixed at creation, and the file's mode and group.
///
/// Built with named setters from the default:
/// `PoolConfig::default().max_workers(4).max_job_len(4096)`. A setter that is not called
/// accepts whatever an existing pool has; a set value that differs from the existing pool
/// fails with [`OpenError::LayoutMismatch`]; a pool that is created uses the defaults for the
/// unset values.
///
/// [`OpenError::LayoutMismatch`]: crate::OpenError::LayoutMismatch
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct PoolConfig {
    max_workers: Option<usize>,
    max_job_len: Option<usize>,
    #[cfg_attr(loom, allow(dead_code))]
    common: crate::endpoint::channel::CommonConfig,
}

impl PoolConfig {
    /// The default of [`max_workers`](Self::max_workers).
    pub const DEFAULT_MAX_WORKERS: usize = 8;
    /// The default of [`max_job_len`](Self::max_job_len).
    pub const DEFAULT_MAX_JOB_LEN: usize = 4096;

    /// Most workers attached at once, 1..=64 (default 8).
    pub fn max_workers(mut self, n: usize) -> Self {
        self.max_workers = Some(n);
        self
    }

    /// Largest job payload in bytes, 1..=[`MAX_JOB_LEN`] (default 4096).
    pub fn max_job_len(mut self, len: usize) -> Self {
        self.max_job_len = Some(len);
        self
    }

    crate::endpoint::channel::common_setters!("pool");
}

/// The layout parameters of a pool segment, validated.
#[cfg_attr(loom, allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolLayout {
    pub(crate) max_workers: usize,
    pub(crate) max_job_size: usize,
}

#[cfg_attr(loom, allow(dead_code))]
impl PoolLayout {
    /// Validates (untrusted) parameters.
    pub(crate) fn new(max_workers: u64, max_job_size: u64) -> Result<PoolLayout, String> {
        if max_workers == 0 || max_workers > MAX_WORKERS as u64 {
            return Err(format!("max_workers is {max_workers}, must be 1..={MAX_WORKERS}"));
        }
        if max_job_size == 0 || max_job_size > MAX_JOB_LEN as u64 {
            return Err(format!("max_job_size is {max_job_size}, must be 1..={MAX_JOB_LEN}"));
        }
        Ok(PoolLayout { max_workers: max_workers as usize, max_job_size: max_job_size as usize })
    }

    /// Bytes from one mailbox to the next: a 64-byte head plus the payload, rounded to 64.
    #[cfg(not(loom))]
    pub(crate) fn stride(&self) -> usize {
        protocol::MAILBOX_HEAD + self.max_job_size.div_ceil(64) * 64
    }
}

#[cfg(not(loom))]
impl crate::segment::Layout for PoolLayout {
    const KIND: crate::kind::Kind = crate::kind::Kind::Pool;

    fn from_params(params: &[u64; crate::segment::PARAMS]) -> Result<Self, String> {
        if let Some((i, v)) = params.iter().enumerate().skip(2).find(|(_, v)| **v != 0) {
            return Err(format!("pool header parameter {i} is {v}, expected 0"));
        }
        PoolLayout::new(params[0], params[1])
    }

    fn params(&self) -> [u64; crate::segment::PARAMS] {
        let mut p = [0; crate::segment::PARAMS];
        p[0] = self.max_workers as u64;
        p[1] = self.max_job_size as u64;
        p
    }

    fn kind_area_size(&self) -> u64 {
        (protocol::HEADER_SIZE + self.max_workers * self.stride()) as u64
    }

    fn param_names() -> [&'static str; crate::segment::PARAMS] {
        ["max_workers", "max_job_size", "", "", "", "", "", ""]
    }

    unsafe fn init(&self, _base: *mut u8) {
        // All-zero is the initial state: every mailbox VACANT, no dispatcher, epoch 0.
    }
}

#[cfg(not(loom))]
impl crate::endpoint::channel::ChannelConfig for PoolConfig {
    type Layout = PoolLayout;

    fn layout_to_create(&self) -> Result<PoolLayout, OpenError> {
        PoolLayout::new(
            self.max_workers.unwrap_or(Self::DEFAULT_MAX_WORKERS) as u64,
            self.max_job_len.or(self.common.payload.map(|t| t.size)).unwrap_or(Self::DEFAULT_MAX_JOB_LEN) as u64,
        )
        .map_err(|what| OpenError::InvalidConfig { what })
    }

    fn set_fields(&self, existing: &PoolLayout) -> Vec<(&'static str, Option<u64>, u64)> {
        let set = |v: Option<usize>| v.map(|v| v as u64);
        vec![
            ("max_workers", set(self.max_workers), existing.max_workers as u64),
            ("max_job_size", set(self.max_job_len), existing.max_job_size as u64),
        ]
    }

    fn common(&self) -> &crate::endpoint::channel::CommonConfig {
        &self.common
    }
}

/// The alignment of every mailbox's payload: the pool area starts page aligned, with a
/// 256-byte header, then mailboxes of a multiple of 64 bytes, each a 64-byte head and the job.
#[cfg(not(loom))]
pub(super) const MAILBOX_ALIGN: usize = 64;

/// Every mailbox's payload is `MAILBOX_ALIGN`-aligned.
#[cfg(not(loom))]
impl crate::endpoint::channel::ChannelLayout for PoolLayout {
    fn payload_room(&self) -> (usize, usize) {
        (self.max_job_size, MAILBOX_ALIGN)
    }
}
