//! The shared-memory layout of the two floors: two one-way lanes in one memfd.
//!
//! ```text
//! offset 0     lane 0 control line: seq (u32) at +0, inline payload (<= 8 bytes) at +8
//! offset 128   lane 1 control line
//! offset 256   lane 0 buffer (size bytes, rounded up to 128), used when size > 8
//! ...          lane 1 buffer
//! ```
//!
//! Control lines are 128 bytes apart so the adjacent-line prefetcher does not pull the
//! other direction's line along. Lane 0 carries ping → echo, lane 1 echo → ping.
//!
//! Protocol of one lane (single writer, single reader): the writer puts the payload in place
//! (plain stores), then stores the message number `n` into `seq` with Release; the reader
//! waits until an Acquire load of `seq` returns `n`, then reads the payload. The next message
//! is written only after the peer's answer arrived, so a buffer is never written while read.

use std::io;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::sync::atomic::AtomicU32;

use shmbus::sys::Mapping;

use super::{Handoff, Params, Payload};

const LINE: usize = 128;
const INLINE_OFFSET: usize = 8;
/// Payloads up to this size travel in the control line itself.
pub const INLINE_MAX: usize = 8;

/// The mapped region shared by both processes.
#[derive(Debug)]
pub struct Region {
    map: Mapping,
    size: usize,
    payload: Payload,
}

/// One direction of a [`Region`].
#[derive(Debug, Clone, Copy)]
pub struct Lane {
    seq: *const AtomicU32,
    data: *mut u8,
}

fn buffer_span(size: usize) -> usize {
    size.div_ceil(LINE) * LINE
}

fn region_len(size: usize) -> io::Result<usize> {
    buffer_span(size)
        .checked_mul(2)
        .and_then(|b| b.checked_add(2 * LINE))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "message size too large"))
}

impl Region {
    /// Ping side: creates the memfd, maps it, and returns the handoff holding the memfd.
    pub fn create(name: &str, params: &Params) -> io::Result<(Region, Handoff)> {
        let len = region_len(params.size)?;
        let cname = std::ffi::CString::new(name).map_err(io::Error::other)?;
        // SAFETY: `cname` is a valid NUL-terminated string; memfd_create only reads it.
        let raw = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        std::fs::File::from(fd.try_clone()?).set_len(len as u64)?;
        let region = Region::map(&fd, params)?;
        let handoff = Handoff { fds: vec![fd], args: Vec::new() };
        Ok((region, handoff))
    }

    /// Echo side: maps the memfd from the handoff.
    pub fn attach(params: &Params, handoff: Handoff) -> io::Result<Region> {
        let fd = handoff
            .fds
            .into_iter()
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no shared-memory descriptor"))?;
        let have = std::fs::File::from(fd.try_clone()?).metadata()?.len();
        if have < region_len(params.size)? as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "shared region is smaller than the message size needs",
            ));
        }
        Region::map(&fd, params)
    }

    fn map(fd: &OwnedFd, params: &Params) -> io::Result<Region> {
        let map = Mapping::map(fd.as_fd(), region_len(params.size)?)?;
        map.prefault();
        Ok(Region { map, size: params.size, payload: params.payload })
    }

    /// Lane `i` (0: ping → echo, 1: echo → ping).
    pub fn lane(&self, i: usize) -> Lane {
        assert!(i < 2);
        let base = self.map.as_ptr();
        // SAFETY: both offsets are inside the mapping: region_len() reserves two control
        // lines and two buffers of buffer_span(size) bytes each.
        unsafe {
            let ctrl = base.add(i * LINE);
            let data = if self.size <= INLINE_MAX {
                ctrl.add(INLINE_OFFSET)
            } else {
                base.add(2 * LINE + i * buffer_span(self.size))
            };
            Lane { seq: ctrl.cast::<AtomicU32>(), data }
        }
    }

    /// Writes `msg` into `lane`'s payload area as the payload mode says (all of it, or the
    /// first and last byte). Does not publish.
    #[inline]
    pub fn put(&self, lane: Lane, msg: &[u8]) {
        let n = self.size;
        assert_eq!(msg.len(), n);
        if self.payload == Payload::Copy || n <= INLINE_MAX {
            // SAFETY: `lane.data` has room for `n` bytes (see lane()); the reader does not
            // read it until we publish, and `msg` is private memory, so no overlap.
            unsafe { std::ptr::copy_nonoverlapping(msg.as_ptr(), lane.data, n) };
        } else {
            // SAFETY: offsets 0 and n-1 are inside the lane's buffer of n bytes.
            unsafe {
                lane.data.write(msg[0]);
                lane.data.add(n - 1).write(msg[n - 1]);
            }
        }
    }

    /// Reads `lane`'s payload into `buf` as the payload mode says. Call only after the
    /// Acquire load that saw the message's number.
    #[inline]
    pub fn take(&self, lane: Lane, buf: &mut [u8]) {
        let n = self.size;
        assert_eq!(buf.len(), n);
        if self.payload == Payload::Copy || n <= INLINE_MAX {
            // SAFETY: `lane.data` holds `n` readable bytes; the writer does not touch them
            // until we answer; `buf` is private memory, so no overlap.
            unsafe { std::ptr::copy_nonoverlapping(lane.data, buf.as_mut_ptr(), n) };
        } else {
            // SAFETY: offsets 0 and n-1 are inside the lane's buffer of n bytes.
            unsafe {
                buf[0] = lane.data.read();
                buf[n - 1] = lane.data.add(n - 1).read();
            }
        }
    }

    /// The sequence word of `lane`.
    #[inline]
    pub fn seq(&self, lane: Lane) -> &AtomicU32 {
        // SAFETY: `seq` points at an aligned u32 at the start of a control line inside our
        // mapping, which lives as long as `self`; it is only ever accessed atomically.
        unsafe { &*lane.seq }
    }
}
