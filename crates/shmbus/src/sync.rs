//! The one place atomics come from.
//!
//! Every lock-free protocol in shmbus imports its atomics from here, so that building with
//! `RUSTFLAGS="--cfg loom"` swaps in loom's instrumented types and the same protocol code is
//! model-checked on a heap buffer (see `tests/loom_*.rs`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicU8, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

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
