//! Clocks.

/// Nanoseconds of `CLOCK_MONOTONIC`: the clock every shmbus timestamp uses.
///
/// It is shared by all processes on the host, so a timestamp taken by a publisher can be
/// compared with one taken by a subscriber to measure latency.
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
