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
        Mapping::map_prot(fd, len, libc::PROT_READ | libc::PROT_WRITE)
    }

    /// Maps the first `len` bytes of `fd` shared and read-only (`PROT_READ`; `fd` may be
    /// opened `O_RDONLY`). A store into it faults: for tools that only look.
    pub fn map_read_only(fd: BorrowedFd<'_>, len: usize) -> io::Result<Mapping> {
        Mapping::map_prot(fd, len, libc::PROT_READ)
    }

    fn map_prot(fd: BorrowedFd<'_>, len: usize, prot: libc::c_int) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "cannot map zero bytes"));
        }
        // SAFETY: a fresh mapping at an address of the kernel's choice; no existing memory is
        // affected. The fd is valid for the call.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr: NonNull::new(p.cast()).expect("mmap returned null"), len })
    }

    /// Maps the `ring_len` bytes of `fd` at `offset` *twice*, back to back: the returned
    /// mapping is `2 * ring_len` bytes long and byte `i + ring_len` is the same physical byte
    /// as byte `i` (the "magic ring buffer"). A record that starts near the end of the ring
    /// and runs past it is therefore contiguous in this address space.
    ///
    /// `offset` and `ring_len` must be non-zero multiples of the page size (`offset` may be 0).
    /// Done in three steps so that nothing else can land in between: reserve `2 * ring_len`
    /// of address space with an anonymous `PROT_NONE` mapping, then map the file range over
    /// each half with `MAP_FIXED`.
    pub fn map_ring(fd: BorrowedFd<'_>, offset: u64, ring_len: usize) -> io::Result<Mapping> {
        let page = super::page_size();
        if ring_len == 0 || ring_len % page != 0 || offset % page as u64 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "ring offset and length must be page multiples (length non-zero)",
            ));
        }
        let total = ring_len
            .checked_mul(2)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "ring too large to map twice"))?;
        let off = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "ring offset out of range"))?;
        // SAFETY: a fresh anonymous reservation at an address of the kernel's choice; no
        // existing memory is affected.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // From here on the reservation is ours: unmap all of it on any failure.
        // SAFETY: `base..base+total` is the reservation just made, owned by nobody else.
        let reservation = unsafe { Mapping::from_raw(NonNull::new(base.cast()).expect("mmap returned null"), total) };
        for half in 0..2 {
            // SAFETY: `base + half * ring_len` lies inside our own reservation, so MAP_FIXED
            // replaces only pages we own; the fd is valid for the call.
            let at = unsafe { (base as *mut u8).add(half * ring_len) };
            // SAFETY: as above: the target range is inside the reservation we own.
            let p = unsafe {
                libc::mmap(
                    at.cast(),
                    ring_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_FIXED,
                    fd.as_raw_fd(),
                    off,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error()); // `reservation` unmaps everything
            }
            if p != at.cast() {
                return Err(io::Error::other("MAP_FIXED mapped the ring at another address"));
            }
        }
        Ok(reservation)
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
        self.advise(libc::MADV_WILLNEED);
    }

    /// Asks for huge pages where the filesystem can give them (`MADV_HUGEPAGE`): on ext4 and
    /// XFS the page cache then fills the mapping with 2 MiB folios mapped by one page-table
    /// entry each, instead of some of it, so writing fresh pages takes 512 times fewer
    /// faults. tmpfs follows its own `huge=` mount option. Advisory: errors are ignored.
    pub fn advise_huge(&self) {
        self.advise(libc::MADV_HUGEPAGE);
    }

    /// `madvise` over the whole mapping with an advice that never changes its contents;
    /// errors are ignored (advice only).
    fn advise(&self, advice: libc::c_int) {
        // SAFETY: the range is exactly our mapping; the callers' advice values do not change
        // its contents.
        unsafe { libc::madvise(self.ptr.as_ptr().cast(), self.len, advice) };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: we own this mapping (invariant of the type); nothing borrows it past drop.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
