//! The one place atomics come from.
//!
//! Every lock-free protocol in shmbus imports its atomics from here, so that building with
//! `RUSTFLAGS="--cfg loom"` swaps in loom's instrumented types and the same protocol code is
//! model-checked on a heap buffer (see `tests/loom_*.rs`).
//!
//! It also holds the load-only side of shared memory: [`Ro`], a word that can only be
//! loaded, [`Load`], what it shares with the plain atomics (so a computation that only loads
//! is written once, generic over it), and [`RoArea`], the bounds-checked way to get such
//! words out of a mapping. A read-only channel (`Channel<L, ReadOnly>`) hands out its kind
//! area only as an `RoArea`, so the status code built on it has no store, compare-and-swap
//! or `fetch_*` to call: a read-only view cannot be written, by construction.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicU8, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// A word that can be loaded, and nothing else: the plain atomics, and [`Ro`] around them.
pub(crate) trait Load {
    /// What a load gives.
    type Value;
    /// Loads the word with `order`.
    fn load(&self, order: Ordering) -> Self::Value;
}

impl Load for AtomicU64 {
    type Value = u64;
    #[inline(always)]
    fn load(&self, order: Ordering) -> u64 {
        AtomicU64::load(self, order)
    }
}

impl Load for AtomicU32 {
    type Value = u32;
    #[inline(always)]
    fn load(&self, order: Ordering) -> u32 {
        AtomicU32::load(self, order)
    }
}

/// A shared word of type `T` (an atomic) that can only be loaded: [`load`](Ro::load) is
/// all it has. Same layout as `T`, and its `T` is private to this module, so no store,
/// compare-and-swap or `fetch_*` can reach it. What read-only views are made of.
#[repr(transparent)]
#[derive(Debug)]
pub(crate) struct Ro<T>(T);

#[cfg_attr(loom, allow(dead_code))]
impl<T: Load> Ro<T> {
    /// Loads the word with `order`.
    #[inline(always)]
    pub(crate) fn load(&self, order: Ordering) -> T::Value {
        self.0.load(order)
    }
}

impl<T: Load> Load for Ro<T> {
    type Value = T::Value;
    #[inline(always)]
    fn load(&self, order: Ordering) -> T::Value {
        self.0.load(order)
    }
}

/// A mapped area seen through load-only words: [`u64_at`](RoArea::u64_at) and
/// [`u32_at`](RoArea::u32_at) check the offset against the area's length and the word's
/// alignment, so the views built on it need no `unsafe` of their own.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RoArea<'a> {
    base: *const u8,
    len: usize,
    _life: std::marker::PhantomData<&'a [u8]>,
}

#[cfg_attr(loom, allow(dead_code))]
impl<'a> RoArea<'a> {
    /// # Safety
    /// `base` is 8-byte aligned and `len` bytes from it stay mapped (readable) for `'a`.
    pub(crate) unsafe fn new(base: *const u8, len: usize) -> RoArea<'a> {
        RoArea { base, len, _life: std::marker::PhantomData }
    }

    /// The word of type `T` at byte offset `offset`. Panics if it is not inside the area or
    /// not aligned for `T`: offsets come from the validated layout, never from the area.
    fn at<T>(&self, offset: usize) -> &'a Ro<T> {
        let size = std::mem::size_of::<T>();
        assert!(
            offset.checked_add(size).is_some_and(|end| end <= self.len) && offset % std::mem::align_of::<T>() == 0,
            "word at {offset} outside the {}-byte area or misaligned",
            self.len
        );
        // SAFETY: inside the mapping (checked above; `new`'s contract), aligned (base is
        // 8-aligned and offset a multiple of T's alignment, at most 8), and an atomic is valid
        // for every bit pattern. `Ro` gives loads only, which read-only pages serve.
        unsafe { &*(self.base.add(offset) as *const Ro<T>) }
    }

    /// The 64-bit word at `offset`.
    #[inline]
    pub(crate) fn u64_at(&self, offset: usize) -> &'a Ro<AtomicU64> {
        self.at(offset)
    }

    /// The 32-bit word at `offset`.
    #[inline]
    pub(crate) fn u32_at(&self, offset: usize) -> &'a Ro<AtomicU32> {
        self.at(offset)
    }
}

/// A value on a cache-line pair of its own: aligned and padded to 128 bytes, because x86's
/// spatial prefetcher pulls cache lines in pairs, so a word on the neighbouring line of a
/// busy word is disturbed as if it shared the line (crossbeam's `CachePadded` does the
/// same). The one way shmbus keeps hot shared words apart.
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// One step of a busy wait: a CPU pause hint, or a scheduling point under loom.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// A hint that the cache line at `p` will be read soon (`PREFETCHT0` on x86-64; nothing
/// elsewhere or under loom). Never faults and changes no memory, whatever `p` is.
#[inline(always)]
pub(crate) fn prefetch_line(p: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    // SAFETY: a prefetch is only a hint: it never faults and has no effect on memory.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(any(not(target_arch = "x86_64"), loom))]
    let _ = p;
}

/// The middle of a Dekker handshake whose two accesses on each side are already SeqCst
/// (a SeqCst read-modify-write, then a SeqCst load of the other side's word). The C++/Rust
/// memory model orders those by itself, so this is nothing in production; loom models SeqCst
/// accesses only as AcqRel (its documented limitation) but models `fence(SeqCst)` fully, so
/// under loom it is that fence, and the model checks the handshake as the hardware runs it.
#[inline(always)]
pub(crate) fn dekker_fence() {
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}
