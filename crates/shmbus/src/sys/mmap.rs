//! Shared file mappings.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

/// A `MAP_SHARED` read-write mapping of (the start of) a file, unmapped on drop.
///
/// The memory is shared with other processes: nothing in it may be trusted, and every
/// access to it goes through atomics or through copies that are validated afterwards.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a Mapping is an owned address range; the memory behind it is only accessed through
// raw pointers and atomics by the channel code, which does its own synchronization.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` exposes only the address and length.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the first `len` bytes of `fd` shared and read-write.
    pub fn map(fd: BorrowedFd<'_>, len: usize) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "cannot map zero bytes"));
        }
        // SAFETY: a fresh mapping at an address of the kernel's choice; no existing memory is
        // affected. The fd is valid for the call.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr: NonNull::new(p.cast()).expect("mmap returned null"), len })
    }

    /// Takes ownership of an existing mapping of `len` bytes at `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be a mapping this process made with `mmap`, owned by nobody else:
    /// it is unmapped when the returned value drops.
    pub unsafe fn from_raw(ptr: NonNull<u8>, len: usize) -> Mapping {
        Mapping { ptr, len }
    }

    /// The first byte of the mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The mapped length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a mapping is never empty.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Asks the kernel to back the whole mapping with pages now (`MADV_WILLNEED`), so the
    /// first writes of a hot path do not page-fault. Advisory: errors are ignored.
    pub fn prefault(&self) {
        // SAFETY: the range is exactly our mapping; madvise does not change its contents.
        unsafe { libc::madvise(self.ptr.as_ptr().cast(), self.len, libc::MADV_WILLNEED) };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: we own this mapping (invariant of the type); nothing borrows it past drop.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
