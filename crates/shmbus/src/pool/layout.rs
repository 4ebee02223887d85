//! The pool's configuration and its validated segment layout.

#[cfg(not(loom))]
use super::protocol;
use super::protocol::MAX_WORKERS;
#[cfg(not(loom))]
use crate::error::OpenError;

/// Largest job payload a pool accepts (16 MiB).
pub const MAX_JOB_SIZE: usize = 16 << 20;

/// Layout of a pool, fixed at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Most workers attached at once (1..=64).
    pub max_workers: usize,
    /// Largest job payload in bytes (1..=[`MAX_JOB_SIZE`]).
    pub max_job_size: usize,
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
        if max_job_size == 0 || max_job_size > MAX_JOB_SIZE as u64 {
            return Err(format!("max_job_size is {max_job_size}, must be 1..={MAX_JOB_SIZE}"));
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
    const KIND: crate::segment::Kind = crate::segment::Kind::Pool;

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
impl PoolConfig {
    pub(crate) fn layout(&self) -> Result<PoolLayout, OpenError> {
        PoolLayout::new(self.max_workers as u64, self.max_job_size as u64)
            .map_err(|what| OpenError::InvalidConfig { what })
    }
}
