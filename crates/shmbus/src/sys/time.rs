//! Clocks.

/// Nanoseconds of `CLOCK_MONOTONIC`: the clock every shmbus timestamp uses.
///
/// It is shared by all processes on the host, so a timestamp taken by a publisher can be
/// compared with one taken by a subscriber to measure latency.
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Nanoseconds of `CLOCK_MONOTONIC_COARSE`: the same clock at the resolution of the kernel's
/// tick (1–4 ms), read from the vDSO without the time-stamp counter. For rate-limiting
/// checks inside polling loops (liveness every 50 ms, say), where a precise clock read
/// would stretch every poll and so delay the message the loop is waiting for.
#[inline]
pub fn coarse_monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC_COARSE)
}

/// Nanoseconds of `clock` (wrapping: a realtime clock set before 1970 must not panic us).
#[inline(always)]
pub(crate) fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clocks used here (MONOTONIC, its COARSE
    // form since 2.6.32, REALTIME) exist on every Linux shmbus supports.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}
