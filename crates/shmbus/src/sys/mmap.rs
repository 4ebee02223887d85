//! Shared file mappings, read-write or read-only by type.
//!
//! A [`Mapping`] is `Mapping<ReadWrite>` (the default) or `Mapping<ReadOnly>`: the access
//! is a type parameter, fixed when the mapping is made.
//! A read-write mapping (`PROT_READ | PROT_WRITE`, for endpoints) hands out its start as a
//! `*mut u8` and can be prefaulted for writing or synced. A read-only one (`PROT_READ`, from
//! a file that may be opened `O_RDONLY`, for status and tools) hands out only a `*const u8`
//! and has none of the write-side calls, so code that holds one cannot get a pointer to
//! store through without a visible cast; a store would fault. What both have (length,
//! truncation detection) is written once for any access.
//!
//! Every mapping is registered with [`sigbus`] while it lives, so that a
//! fault in it because the file shrank under it is contained (the page reads as zeros and
//! [`Mapping::was_truncated`] turns true) instead of killing the process.

use std::ffi::c_int;
use std::io;
use std::marker::PhantomData;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;

use rustix::mm::{Advice, MapFlags, MsyncFlags, ProtFlags};

use super::sigbus;

mod sealed {
    pub trait Sealed {}
}

/// How a [`Mapping`] may be accessed: [`ReadWrite`] or [`ReadOnly`].
pub trait Access: sealed::Sealed + Send + Sync + 'static {
    /// The protection the memory is mapped with.
    #[doc(hidden)]
    const PROT: ProtFlags;
    /// Whether the file must be opened for writing (`O_RDWR`) to be mapped so.
    const WRITABLE: bool;
}

/// Mapped `PROT_READ | PROT_WRITE`: for endpoints.
#[derive(Debug)]
pub enum ReadWrite {}

/// Mapped `PROT_READ`: for status and tools that only look.
#[derive(Debug)]
pub enum ReadOnly {}

impl sealed::Sealed for ReadWrite {}
impl sealed::Sealed for ReadOnly {}

impl Access for ReadWrite {
    const PROT: ProtFlags = ProtFlags::READ.union(ProtFlags::WRITE);
    const WRITABLE: bool = true;
}

impl Access for ReadOnly {
    const PROT: ProtFlags = ProtFlags::READ;
    const WRITABLE: bool = false;
}

/// A read-only mapping (see the [module docs](self)).
#[cfg(any(test, feature = "internals"))]
pub type ReadOnlyMapping = Mapping<ReadOnly>;

/// A `MAP_SHARED` mapping of (the start of) a file, read-write or read-only as `A` says
/// (see the [module docs](self)), unmapped on drop.
///
/// The memory is shared with other processes: nothing in it may be trusted, and every
/// access to it goes through atomics or through copies that are validated afterwards.
///
/// If another process shrinks the file, the pages past its new end read as zeros (and
/// stores there are private to this process) instead of raising a fatal SIGBUS: see
/// [`sigbus`] and [`Mapping::was_truncated`].
pub struct Mapping<A: Access = ReadWrite> {
    ptr: NonNull<u8>,
    len: usize,
    /// Our registration for SIGBUS containment, removed before `munmap`.
    slot: &'static sigbus::Slot,
    _access: PhantomData<A>,
}

impl<A: Access> std::fmt::Debug for Mapping<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("writable", &A::WRITABLE)
            .field("contained_faults", &self.contained_faults())
            .finish()
    }
}

// SAFETY: the one place the raw pointer into shared memory lives. A Mapping is an owned
// address range, valid until it drops; it can be dropped on (sent to) any thread. The memory
// behind it is shared with other processes anyway, so sharing `&Mapping` between threads adds
// nothing: `&Mapping` exposes only the address and length, and the channel code accesses the
// memory only through atomics and through copies it validates, doing its own
// synchronization. The segments, channels and handles built on a Mapping are Send and Sync
// through this.
unsafe impl<A: Access> Send for Mapping<A> {}
// SAFETY: as above.
unsafe impl<A: Access> Sync for Mapping<A> {}

impl<A: Access> Mapping<A> {
    /// Maps the first `len` bytes of `fd` shared, with `A`'s access (`fd` must be opened for
    /// writing if `A` is [`ReadWrite`]; for [`ReadOnly`] `O_RDONLY` suffices).
    pub fn map_as(fd: BorrowedFd<'_>, len: usize) -> io::Result<Mapping<A>> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "cannot map zero bytes"));
        }
        // SAFETY: a fresh mapping at an address of the kernel's choice; no existing memory is
        // affected. The fd is valid for the call.
        let p = unsafe { map_shared(len, A::PROT, fd) }?;
        let ptr = NonNull::new(p.cast()).expect("mmap returned null");
        // SAFETY: the mapping just made, owned by nobody else, with protection `A::PROT`.
        Ok(unsafe { Mapping::from_raw_prot(ptr, len) })
    }

    /// [`Mapping::from_raw`] for a mapping with protection `A::PROT`, which the zero pages of
    /// SIGBUS containment get too.
    ///
    /// # Safety
    /// As for [`Mapping::from_raw`].
    unsafe fn from_raw_prot(ptr: NonNull<u8>, len: usize) -> Mapping<A> {
        // The registry keeps the raw `PROT_*` bits for the handler's own `mmap` (libc there).
        let slot = sigbus::register(ptr.as_ptr(), len, A::PROT.bits() as c_int);
        Mapping { ptr, len, slot, _access: PhantomData }
    }

    /// `len` bytes of address space, inaccessible (`PROT_NONE`, nothing backing them) until
    /// mappings are placed over them with `MAP_FIXED` or `MREMAP_FIXED`; registered for
    /// SIGBUS containment with `A`'s protection (that of what will be placed there), and
    /// unmapped whole when dropped.
    fn reserve(len: usize) -> io::Result<Mapping<A>> {
        let base = reserve_raw(len)?;
        // SAFETY: `base..base+len` is the reservation just made, owned by nobody else.
        Ok(unsafe { Mapping::from_raw_prot(NonNull::new(base.cast()).expect("mmap returned null"), len) })
    }

    /// The first byte of the mapping, for loads (the only pointer a read-only mapping gives).
    #[inline]
    pub fn as_const_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Whether an access to this mapping faulted because the file behind it shrank (another
    /// process truncated it) or could not be backed (tmpfs full), since it was mapped. Such
    /// pages now read as zeros and stores to them are private to this process: the channel
    /// behind it is damaged. Always false when the application opted out of shmbus's SIGBUS
    /// handler (see [`sigbus`]) without calling
    /// [`contain_fault`](super::sigbus::contain_fault) from its own.
    ///
    /// Cheap: while no fault was ever contained in this process (the usual case) it is one
    /// relaxed load of a process-wide counter, so it may run on polls that find nothing;
    /// only after a fault does it look at this mapping's own count.
    #[inline]
    pub fn was_truncated(&self) -> bool {
        sigbus::contained_faults() != 0 && self.contained_faults() != 0
    }

    /// How many page faults were contained in this mapping since it was made (see
    /// [`Mapping::was_truncated`]).
    pub fn contained_faults(&self) -> u64 {
        self.slot.faults()
    }

    /// The mapped length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a mapping is never empty.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Asks for huge pages where the filesystem can give them (`MADV_HUGEPAGE`): on ext4 and
    /// XFS the page cache then fills the mapping with 2 MiB folios mapped by one page-table
    /// entry each, instead of some of it, so writing fresh pages takes 512 times fewer
    /// faults. tmpfs follows its own `huge=` mount option. Advisory: errors are ignored.
    pub fn advise_huge(&self) {
        self.advise(Advice::LinuxHugepage);
    }

    /// `madvise` over the whole mapping with an advice that never changes its contents;
    /// errors are ignored (advice only).
    fn advise(&self, advice: Advice) {
        // SAFETY: the range is exactly our mapping; the callers' advice values do not change
        // its contents.
        let _ = unsafe { rustix::mm::madvise(self.ptr.as_ptr().cast(), self.len, advice) };
    }
}

#[cfg(any(test, feature = "internals"))]
impl Mapping<ReadOnly> {
    /// Maps the first `len` bytes of `fd` shared and read-only (`PROT_READ`; `fd` may be
    /// opened `O_RDONLY`). A store into it faults: for tools that only look.
    pub fn map_read_only(fd: BorrowedFd<'_>, len: usize) -> io::Result<ReadOnlyMapping> {
        Mapping::map_as(fd, len)
    }
}

impl Mapping<ReadOnly> {
    /// A second mapping, read-only, of bytes in mappings shmbus made in this process, and
    /// the address of their first byte in it: the same pages (what others write shows in
    /// both), but a store through the alias faults whatever the first mapping allows.
    /// `parts` are the bytes in order, each `(address, length)` inside one mapping; every
    /// part after the first starts on a page boundary and every part before the last ends on
    /// one (the two halves of a ring mapped twice, [`Mapping::map_ring`]). Bytes outside
    /// shmbus's mappings (the heap) are refused before any system call.
    ///
    /// Each part is mapped again with `mremap(2)` and an old size of 0, at an address of the
    /// kernel's choice (a failure there unmaps nothing); several parts are then moved back to
    /// back into a reservation; the whole is made read-only with `mprotect(2)`. Registered for
    /// SIGBUS containment as any mapping: a page of a file shrunk under it reads as zeros.
    ///
    /// # Safety
    /// Each part must lie inside one mapping of this process during the call. The kernel
    /// checks none of that: `mremap` maps the file from where the part starts for the length
    /// asked, so a part running past its mapping would map other pages of the file.
    pub unsafe fn alias_read_only(parts: &[(*const u8, usize)]) -> io::Result<(Mapping<ReadOnly>, *const u8)> {
        use rustix::mm::{MprotectFlags, MremapFlags};
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("read-only alias: {what}"));
        let page = super::page_size();
        let &(first, _) = parts.first().ok_or_else(|| invalid("no bytes"))?;
        let lead = first as usize % page;
        // Page-aligned source spans: the first one widened down to its page.
        let mut spans = Vec::with_capacity(parts.len());
        let mut total = 0usize;
        for (k, &(at, len)) in parts.iter().enumerate() {
            if len == 0 {
                return Err(invalid("an empty part"));
            }
            if !sigbus::covers(at as usize, len) {
                return Err(invalid("bytes outside shmbus's mappings"));
            }
            let start = if k == 0 { at as usize - lead } else { at as usize };
            let end = (at as usize).checked_add(len).ok_or_else(|| invalid("length overflows"))?;
            if k > 0 && start % page != 0 {
                return Err(invalid("a part after the first does not start on a page"));
            }
            if k + 1 < parts.len() && end % page != 0 {
                return Err(invalid("a part before the last does not end on a page"));
            }
            let n = end.div_ceil(page).checked_mul(page).ok_or_else(|| invalid("length overflows"))? - start;
            total = total.checked_add(n).ok_or_else(|| invalid("length overflows"))?;
            spans.push((start, n));
        }
        // Each part again, where the kernel likes: nothing of ours is unmapped if it fails.
        let mut dups: Vec<(*mut std::ffi::c_void, usize)> = Vec::with_capacity(spans.len());
        for &(start, n) in &spans {
            // SAFETY: the source lies in a shared mapping of ours (the caller's promise); a
            // fresh mapping at an address of the kernel's choice affects no other memory.
            match unsafe { rustix::mm::mremap(start as *mut _, 0, n, MremapFlags::MAYMOVE) } {
                Ok(p) => dups.push((p, n)),
                Err(e) => {
                    for &(p, n) in &dups {
                        // SAFETY: a duplicate made just above, ours alone.
                        let _ = unsafe { unmap(p.cast(), n) };
                    }
                    return Err(e.into());
                }
            }
        }
        let base = if let [(p, _)] = dups[..] {
            p
        } else {
            // SAFETY: the duplicates are ours alone; see `join`.
            unsafe { join(&dups, total) }?
        };
        // SAFETY: `base..base+total` is ours alone (the duplicates, joined).
        if let Err(e) = unsafe { rustix::mm::mprotect(base, total, MprotectFlags::READ) } {
            // SAFETY: as above.
            let _ = unsafe { unmap(base.cast(), total) };
            return Err(e.into());
        }
        // SAFETY: `base..base+total` is a mapping of ours, owned by nobody else.
        let alias = unsafe { Mapping::from_raw_prot(NonNull::new(base.cast()).expect("mremap returned null"), total) };
        // SAFETY: `lead < page <= total`.
        let data = unsafe { base.cast::<u8>().add(lead) };
        Ok((alias, data.cast_const()))
    }
}

/// `len` bytes of address space at an address of the kernel's choice, inaccessible and
/// unbacked (`PROT_NONE`, `MAP_NORESERVE`), the caller's to place mappings over and unmap.
fn reserve_raw(len: usize) -> io::Result<*mut std::ffi::c_void> {
    // SAFETY: a fresh anonymous reservation at an address of the kernel's choice; no existing
    // memory is affected.
    Ok(unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            len,
            ProtFlags::empty(),
            MapFlags::PRIVATE | MapFlags::NORESERVE,
        )
    }?)
}

/// Moves the mappings `dups` (each `(address, length)`, `total` in all) back to back into a
/// reservation made for them, and returns its start; on failure unmaps them and what is
/// ours of the reservation.
///
/// `mremap` with `MREMAP_FIXED` may unmap its target before it fails: the hole it leaves is
/// taken back (`MAP_FIXED_NOREPLACE`) before the reservation is unmapped, and left alone if
/// another thread's mapping landed there meanwhile.
///
/// # Safety
/// The mappings in `dups` are the caller's alone.
unsafe fn join(dups: &[(*mut std::ffi::c_void, usize)], total: usize) -> io::Result<*mut std::ffi::c_void> {
    let unmap_all = |from: usize| {
        for &(p, n) in &dups[from..] {
            // SAFETY: the caller's mappings, not moved.
            let _ = unsafe { unmap(p.cast(), n) };
        }
    };
    let base = match reserve_raw(total) {
        Ok(b) => b,
        Err(e) => {
            unmap_all(0);
            return Err(e);
        }
    };
    let mut at = 0;
    for (k, &(p, n)) in dups.iter().enumerate() {
        // SAFETY: `base+at..base+at+n` lies inside our reservation; `p` is the caller's.
        let target = unsafe { base.cast::<u8>().add(at) }.cast();
        // SAFETY: moves the caller's mapping over our own reservation.
        match unsafe { rustix::mm::mremap_fixed(p, n, n, rustix::mm::MremapFlags::MAYMOVE, target) } {
            Ok(q) if q == target => at += n,
            moved => {
                // What is ours: the parts moved (`base..base+at`), the reservation after the
                // hole, the parts not moved; the hole only if we can take it back.
                // SAFETY: ours, as said.
                unsafe {
                    let _ = unmap(base.cast(), at);
                    let after = at + n;
                    let _ = unmap(base.cast::<u8>().add(after), total - after);
                    let hole = rustix::mm::mmap_anonymous(
                        target,
                        n,
                        ProtFlags::empty(),
                        MapFlags::PRIVATE | MapFlags::NORESERVE | MapFlags::FIXED_NOREPLACE,
                    );
                    match hole {
                        Ok(h) if h == target => {
                            let _ = unmap(h.cast(), n);
                        }
                        Ok(h) => {
                            let _ = unmap(h.cast(), n); // placed elsewhere: ours, not the hole
                        }
                        Err(_) => {} // our reservation, or someone else's mapping: left
                    }
                }
                return Err(match moved {
                    Ok(q) => {
                        // Moved, but not where asked: ours at `q`.
                        // SAFETY: the mapping just moved, ours.
                        let _ = unsafe { unmap(q.cast(), n) };
                        unmap_all(k + 1);
                        io::Error::other("read-only alias: mremap placed a part elsewhere")
                    }
                    Err(e) => {
                        unmap_all(k); // this part was not moved
                        e.into()
                    }
                });
            }
        }
    }
    Ok(base)
}

impl Mapping<ReadWrite> {
    /// Maps the first `len` bytes of `fd` shared and read-write.
    pub fn map(fd: BorrowedFd<'_>, len: usize) -> io::Result<Mapping> {
        Mapping::map_as(fd, len)
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
        // `off_t` is signed: an offset past `i64::MAX` is out of range.
        if i64::try_from(offset).is_err() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "ring offset out of range"));
        }
        // From here on the reservation is ours: unmap all of it on any failure. It is
        // registered whole, with the protection of the two halves mapped over it.
        let reservation = Mapping::<ReadWrite>::reserve(total)?;
        let base: *mut std::ffi::c_void = reservation.ptr.as_ptr().cast();
        for half in 0..2 {
            // SAFETY: `base + half * ring_len` lies inside our own reservation, so MAP_FIXED
            // replaces only pages we own; the fd is valid for the call.
            let at = unsafe { (base as *mut u8).add(half * ring_len) };
            // SAFETY: as above: the target range is inside the reservation we own.
            let p = unsafe {
                rustix::mm::mmap(
                    at.cast(),
                    ring_len,
                    ProtFlags::READ | ProtFlags::WRITE,
                    MapFlags::SHARED | MapFlags::FIXED,
                    fd,
                    offset,
                )
            }?; // on failure `reservation` unmaps everything
            if p != at.cast() {
                return Err(io::Error::other("MAP_FIXED mapped the ring at another address"));
            }
        }
        Ok(reservation)
    }

    /// Takes ownership of an existing mapping of `len` bytes at `ptr`. It is registered for
    /// SIGBUS containment as readable and writable: a page that faults because the file
    /// shrank is replaced by a read-write zero page.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be a mapping this process made with `mmap`, owned by nobody else:
    /// it is unmapped when the returned value drops.
    #[cfg(any(test, feature = "internals"))]
    pub unsafe fn from_raw(ptr: NonNull<u8>, len: usize) -> Mapping {
        // SAFETY: forwarded from the caller.
        unsafe { Mapping::from_raw_prot(ptr, len) }
    }

    /// The first byte of the mapping: loads and stores.
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Asks the kernel to back the whole mapping with pages now (`MADV_WILLNEED`), so the
    /// first writes of a hot path do not page-fault. Advisory: errors are ignored.
    #[cfg(any(test, feature = "internals"))]
    pub fn prefault(&self) {
        self.advise(Advice::WillNeed);
    }

    /// Pre-faults the pages covering `offset..offset+len` for writing
    /// (`MADV_POPULATE_WRITE`, Linux 5.14+), so writers do not take one page fault per page
    /// of a fresh range. The range is widened down to a page boundary and clipped to the
    /// mapping. Advisory: errors (older kernels) are ignored and the pages fault in on first
    /// touch instead.
    pub fn populate_write(&self, offset: usize, len: usize) {
        let Some((start, end)) = self.page_range(offset, len) else { return };
        // SAFETY: the range lies inside our own mapping; populating does not change contents
        // (it faults pages in as if written with their current values).
        let _ = unsafe {
            rustix::mm::madvise(self.ptr.as_ptr().add(start).cast(), end - start, Advice::LinuxPopulateWrite)
        };
    }

    /// `msync(MS_SYNC)` of the pages covering `offset..offset+len` (widened down to a page
    /// boundary, clipped to the mapping): they reach the file before this returns.
    pub fn msync_range(&self, offset: usize, len: usize) -> io::Result<()> {
        let Some((start, end)) = self.page_range(offset, len) else { return Ok(()) };
        // SAFETY: `start..end` lies inside our own mapping and is page aligned at the start;
        // msync does not change memory contents.
        Ok(unsafe { rustix::mm::msync(self.ptr.as_ptr().add(start).cast(), end - start, MsyncFlags::SYNC) }?)
    }

    /// `offset..offset+len` widened down to a page boundary and clipped to the mapping;
    /// `None` if that is empty.
    fn page_range(&self, offset: usize, len: usize) -> Option<(usize, usize)> {
        let page = super::page_size();
        let start = offset / page * page;
        let end = offset.saturating_add(len).min(self.len);
        (end > start).then_some((start, end))
    }
}

impl<A: Access> Drop for Mapping<A> {
    fn drop(&mut self) {
        // Unregister first: once unmapped, the range may be reused by anything.
        sigbus::unregister(self.slot);
        // SAFETY: we own this mapping (invariant of the type); nothing borrows it past drop.
        let _ = unsafe { unmap(self.ptr.as_ptr(), self.len) };
    }
}

/// `mmap(2)` of the first `len` bytes of `fd`, shared, at an address of the kernel's choice.
///
/// # Safety
/// `fd` is valid for the call.
#[cfg(not(tsan))]
unsafe fn map_shared(len: usize, prot: ProtFlags, fd: BorrowedFd<'_>) -> io::Result<*mut std::ffi::c_void> {
    // SAFETY: forwarded from the caller; a fresh mapping affects no existing memory.
    Ok(unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, fd, 0) }?)
}

/// `mmap(2)` through libc, under ThreadSanitizer, which intercepts it and forgets what it
/// knew of the range: a new mapping at an address an earlier one had (unmapped by another
/// thread) then never inherits that mapping's access history, whatever path unmapped it.
///
/// # Safety
/// As above.
#[cfg(tsan)]
unsafe fn map_shared(len: usize, prot: ProtFlags, fd: BorrowedFd<'_>) -> io::Result<*mut std::ffi::c_void> {
    use std::os::fd::AsRawFd;
    // SAFETY: forwarded from the caller.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), len, prot.bits() as libc::c_int, libc::MAP_SHARED, fd.as_raw_fd(), 0)
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p)
}

/// `munmap(2)`.
///
/// # Safety
/// `ptr..ptr+len` must be a mapping the caller owns and nothing borrows any more.
#[cfg(not(tsan))]
unsafe fn unmap(ptr: *mut u8, len: usize) -> io::Result<()> {
    // SAFETY: forwarded from the caller.
    Ok(unsafe { rustix::mm::munmap(ptr.cast(), len) }?)
}

/// `munmap(2)` through libc, under ThreadSanitizer. rustix makes the system call itself,
/// which ThreadSanitizer does not see; it then keeps the unmapped range's access history,
/// and the next mapping the kernel puts at the same address (another channel, opened by
/// another thread) inherits it: its first plain write, the creator's initialisation, is
/// reported as racing with the old mapping's last atomic access. libc's `munmap` is
/// intercepted and clears that history.
///
/// # Safety
/// As above.
#[cfg(tsan)]
unsafe fn unmap(ptr: *mut u8, len: usize) -> io::Result<()> {
    // SAFETY: forwarded from the caller.
    match unsafe { libc::munmap(ptr.cast(), len) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// A fresh file of `len` bytes filled with 0xAB, removed when the returned guard drops.
    fn filled_file(tag: &str, len: usize) -> (std::fs::File, TempPath) {
        use std::io::Write;
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("shmbus-mmap-test-{tag}-{}-{n}", std::process::id()));
        let mut f = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path).unwrap();
        f.write_all(&vec![0xAB; len]).unwrap();
        (f, TempPath(path))
    }

    struct TempPath(std::path::PathBuf);
    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn read<A: Access>(m: &Mapping<A>, off: usize) -> u8 {
        assert!(off < m.len());
        // SAFETY: in bounds of a live mapping; a volatile read so that it really happens.
        unsafe { m.as_const_ptr().add(off).read_volatile() }
    }

    /// The permissions column of /proc/self/maps for the line containing `addr`.
    fn perms_at(addr: usize) -> String {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        for line in maps.lines() {
            let (range, rest) = line.split_once(' ').unwrap();
            let (a, b) = range.split_once('-').unwrap();
            let (a, b) = (usize::from_str_radix(a, 16).unwrap(), usize::from_str_radix(b, 16).unwrap());
            if (a..b).contains(&addr) {
                return rest[..4].to_owned();
            }
        }
        panic!("{addr:#x} is not mapped");
    }

    #[test]
    fn a_read_only_alias_shows_the_same_pages_and_refuses_stores() {
        let page = super::super::page_size();
        let (f, _p) = filled_file("alias", 4 * page);
        let m = Mapping::map(f.as_fd(), 4 * page).unwrap();
        // Bytes that start and end inside pages, as a message in a slot does.
        let (off, len) = (page + 40, 2 * page - 100);
        // SAFETY: in bounds of `m`, a shared mapping of ours.
        let src = unsafe { m.as_ptr().add(off) };
        // SAFETY: the range lies inside the one mapping `m`.
        let (alias, data) = unsafe { ReadOnlyMapping::alias_read_only(&[(src, len)]) }.unwrap();
        assert_ne!(data, src.cast_const());
        assert_eq!(data as usize % page, off % page);
        // SAFETY: `data..data+len` lies inside `alias`, alive.
        let view = |k: usize| unsafe { data.add(k).read_volatile() };
        assert_eq!((view(0), view(len - 1)), (0xAB, 0xAB));
        // The same pages: a store through the first mapping shows in the alias.
        // SAFETY: in bounds of `m`.
        unsafe {
            src.write_volatile(1);
            src.add(len - 1).write_volatile(2);
        }
        assert_eq!((view(0), view(len - 1)), (1, 2));
        // Read-only, and shared: a store through it would fault.
        assert_eq!(perms_at(data as usize), "r--s");
        assert_eq!(perms_at(src as usize), "rw-s");
        drop(alias);
        assert_eq!(read(&m, off), 1, "the first mapping outlives its alias");
    }

    #[test]
    fn a_read_only_alias_of_bytes_outside_shmbus_mappings_is_refused() {
        let heap = vec![7u8; 64 * 1024];
        // SAFETY: the range lies inside the vector's allocation.
        let e = unsafe { ReadOnlyMapping::alias_read_only(&[(heap.as_ptr(), heap.len())]) }.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains("outside shmbus's mappings"), "{e}");
        // Nor bytes that run past the end of a shmbus mapping.
        let page = super::super::page_size();
        let (f, _p) = filled_file("alias-past", page);
        let m = Mapping::map(f.as_fd(), page).unwrap();
        // SAFETY: not dereferenced: refused before any system call.
        let e = unsafe { ReadOnlyMapping::alias_read_only(&[(m.as_const_ptr(), page + 1)]) }.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
    }

    #[test]
    fn a_read_only_alias_joins_the_two_halves_of_a_ring() {
        let page = super::super::page_size();
        let ring = 4 * page;
        let (f, _p) = filled_file("alias-ring", ring);
        let m = Mapping::map_ring(f.as_fd(), 0, ring).unwrap();
        for k in 0..ring {
            // SAFETY: in bounds of the first half.
            unsafe { m.as_ptr().add(k).write_volatile((k % 251) as u8) };
        }
        // A record running over the end of the ring: 100 bytes in the first half, the rest
        // from the second half's start.
        let (start, len) = (ring - 100, 300);
        // SAFETY: `start..ring` lies in the first half's mapping, `ring..start+len` in the
        // second's.
        let parts =
            unsafe { [(m.as_ptr().add(start).cast_const(), 100), (m.as_ptr().add(ring).cast_const(), len - 100)] };
        // SAFETY: as above.
        let (_alias, data) = unsafe { ReadOnlyMapping::alias_read_only(&parts) }.unwrap();
        for k in 0..len {
            // SAFETY: inside the alias.
            let got = unsafe { data.add(k).read_volatile() };
            assert_eq!(got, ((start + k) % ring % 251) as u8, "byte {k}");
        }
        // Misplaced parts are refused before anything is mapped.
        // SAFETY: not dereferenced: the call refuses the parts' shape first.
        let bad = unsafe { [(m.as_ptr().add(start).cast_const(), 50), (m.as_ptr().add(ring).cast_const(), 10)] };
        // SAFETY: as above.
        assert!(unsafe { ReadOnlyMapping::alias_read_only(&bad) }.is_err());
    }

    /// One thread maps a file, stores to it atomically and unmaps it; another, with nothing
    /// ordering the two, maps a second file, which the kernel puts at the same address, and
    /// writes it plainly, as a channel's creator initialises it. Under ThreadSanitizer this
    /// fails unless the unmap cleared the address's history (see `unmap`).
    #[test]
    fn a_reused_address_starts_with_no_history() {
        use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
        let page = super::super::page_size();
        let len = 16 * page;
        let (a, _pa) = filled_file("reuse-a", len);
        let (b, _pb) = filled_file("reuse-b", len);
        let (p, _pp) = filled_file("reuse-p", page);
        // Relaxed throughout: nothing here orders the two threads. Nor may the SIGBUS
        // registry: the second thread holds a slot of its own from before the first thread
        // takes one, and gives that back for the second mapping. (Two placeholders, so that
        // the hole the first leaves does not join the first thread's.)
        let (held, first) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let reused = std::thread::scope(|s| {
            s.spawn(|| {
                while held.load(Ordering::Relaxed) == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                let m = Mapping::map(a.as_fd(), len).unwrap();
                // SAFETY: in bounds and 8-byte aligned (page aligned); a live mapping.
                unsafe { &*(m.as_ptr() as *const AtomicU64) }.store(1, Ordering::SeqCst);
                first.store(m.as_ptr() as usize, Ordering::Relaxed);
            });
            let t = s.spawn(|| {
                let placeholder = Mapping::map(p.as_fd(), page).unwrap();
                let _between = Mapping::map(p.as_fd(), page).unwrap();
                held.store(1, Ordering::Relaxed);
                while first.load(Ordering::Relaxed) == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                std::thread::sleep(std::time::Duration::from_millis(50)); // past the unmap
                drop(placeholder);
                let m = Mapping::map(b.as_fd(), len).unwrap();
                // SAFETY: in bounds of a live mapping nobody else uses.
                unsafe { m.as_ptr().write_volatile(7) };
                m.as_ptr() as usize == first.load(Ordering::Relaxed)
            });
            t.join().unwrap()
        });
        if !reused {
            eprintln!("the kernel put the second mapping elsewhere; nothing was reused");
        }
    }

    #[test]
    fn a_truncated_file_reads_as_zeros_and_is_reported() {
        if sigbus::handler_disabled() {
            eprintln!("skipped: the SIGBUS handler is disabled by {}", sigbus::OPT_OUT_ENV);
            return;
        }
        let page = super::super::page_size();
        let len = 4 * page + 100; // a partly used last page
        let (f, _path) = filled_file("trunc", len);
        let m = Mapping::map(f.as_fd(), len).unwrap();
        assert_eq!(read(&m, 0), 0xAB);
        assert!(!m.was_truncated());
        let before = sigbus::contained_faults();
        f.set_len(page as u64).unwrap(); // keep the first page only
        assert_eq!(read(&m, 0), 0xAB, "the page still in the file is untouched");
        assert_eq!(read(&m, page), 0, "a page past the new end reads as zero");
        assert_eq!(read(&m, len - 1), 0, "so does the partly used last page");
        assert!(m.was_truncated());
        assert_eq!(m.contained_faults(), 2);
        assert!(sigbus::contained_faults() >= before + 2);
        // Stores into a replaced page work and stay private.
        // SAFETY: in bounds of a live read-write mapping.
        unsafe { m.as_ptr().add(page + 1).write_volatile(7) };
        assert_eq!(read(&m, page + 1), 7);
        assert_eq!(perms_at(m.as_ptr() as usize + page), "rw-p", "a private zero page");
    }

    #[test]
    fn a_read_only_mapping_stays_read_only() {
        if sigbus::handler_disabled() {
            return;
        }
        let page = super::super::page_size();
        let (f, _path) = filled_file("ro", 2 * page);
        let m = Mapping::map_read_only(f.as_fd(), 2 * page).unwrap();
        f.set_len(0).unwrap();
        assert_eq!(read(&m, page + 5), 0);
        assert!(m.was_truncated());
        assert_eq!(perms_at(m.as_const_ptr() as usize + page), "r--p");
    }

    #[test]
    fn a_truncated_ring_reads_as_zeros() {
        if sigbus::handler_disabled() {
            return;
        }
        let page = super::super::page_size();
        let (f, _path) = filled_file("ring", 3 * page);
        let m = Mapping::map_ring(f.as_fd(), page as u64, 2 * page).unwrap();
        assert_eq!(m.len(), 4 * page);
        assert_eq!(read(&m, 3 * page), 0xAB);
        f.set_len(0).unwrap();
        for off in [0, page, 2 * page, 4 * page - 1] {
            assert_eq!(read(&m, off), 0, "offset {off}");
        }
        assert_eq!(m.contained_faults(), 4);
    }

    #[test]
    fn a_fresh_mapping_does_not_inherit_faults() {
        if sigbus::handler_disabled() {
            return;
        }
        let page = super::super::page_size();
        for _ in 0..3 {
            let (f, _path) = filled_file("fresh", page);
            let m = Mapping::map(f.as_fd(), page).unwrap();
            assert!(!m.was_truncated());
            f.set_len(0).unwrap();
            assert_eq!(read(&m, 0), 0);
            assert!(m.was_truncated());
        }
    }

    #[test]
    fn threads_mapping_and_faulting_at_once() {
        if sigbus::handler_disabled() {
            return;
        }
        let page = super::super::page_size();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let (f, _path) = filled_file(&format!("threads{t}"), 2 * page);
                        let m = Mapping::map(f.as_fd(), 2 * page).unwrap();
                        assert_eq!(read(&m, page), 0xAB);
                        f.set_len(page as u64).unwrap();
                        assert_eq!(read(&m, 0), 0xAB);
                        assert_eq!(read(&m, page), 0);
                        assert_eq!(m.contained_faults(), 1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
