//! Clocks.

use rustix::time::{clock_gettime, ClockId};

/// Nanoseconds of `CLOCK_MONOTONIC`: the clock every shmbus timestamp uses.
///
/// It is shared by all processes on the host, so a timestamp taken by a publisher can be
/// compared with one taken by a subscriber to measure latency.
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(ClockId::Monotonic)
}

/// Nanoseconds of `CLOCK_MONOTONIC_COARSE`: the same clock at the resolution of the kernel's
/// tick (1–4 ms), read from the vDSO without the time-stamp counter. For rate-limiting
/// checks inside polling loops (liveness every 50 ms, say), where a precise clock read
/// would stretch every poll and so delay the message the loop is waiting for.
#[inline]
#[cfg(any(test, feature = "internals"))]
pub fn coarse_monotonic_ns() -> u64 {
    clock_ns(ClockId::MonotonicCoarse)
}

/// Nanoseconds of `CLOCK_REALTIME` since 1970: wall-clock time, meaningful across reboots
/// and hosts (wrapping for a clock set before 1970).
pub fn realtime_ns() -> u64 {
    clock_ns(ClockId::Realtime)
}

/// Nanoseconds of `clock` (wrapping: a realtime clock set before 1970 must not panic us).
#[inline(always)]
pub(crate) fn clock_ns(clock: ClockId) -> u64 {
    // The clocks used here (MONOTONIC, its COARSE form since 2.6.32, REALTIME) exist on every
    // Linux shmbus supports; rustix reads them from the vDSO.
    let ts = clock_gettime(clock);
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// `CLOCK_REALTIME` read through the time-stamp counter: one `rdtsc`, a multiply and a shift
/// per reading (about 10 ns) instead of the vDSO's clock read (about 24 ns on our benchmark
/// host, a quarter of a 40-byte journal append).
///
/// It is the kernel's own method, done per reader. Every [`REANCHOR_NS`] of counter ticks it
/// takes a fresh `CLOCK_REALTIME` reading as its anchor, and in between it extrapolates from
/// the anchor at the counter's rate, measured against `CLOCK_REALTIME` over the reader's
/// whole life. So a reading is within the clock's slew rate times 1 ms of what the kernel
/// would say: nanoseconds normally (4.5 million readings on our benchmark host: 7 ns off on
/// average, 0.7 µs at worst), 0.5 µs while ntpd slews at its maximum of 500 ppm, up to
/// 83 µs while chrony corrects a large offset at its fastest. A step of the clock is taken
/// up at the next anchor (≤ 1 ms later) and restarts the rate measurement. Readings never go
/// back because of a correction at an anchor (they hold still instead); they do go back
/// with a backward step of the clock, as `CLOCK_REALTIME` itself does.
///
/// The counter is used only where the kernel itself keeps its clocks on it: x86-64 with an
/// invariant TSC and `tsc` as the current clocksource (checked once per process; the kernel
/// picks `tsc` only after checking that the CPUs' counters agree). Elsewhere, and for the
/// first [`MIN_BASELINE_NS`] while the rate is measured, every reading is a `clock_gettime`.
#[derive(Debug, Clone)]
pub struct TscRealtime {
    /// Counter and clock at the last anchor.
    anchor_tsc: u64,
    anchor_ns: u64,
    /// Counter and clock where the rate measurement started (`base_ns == 0`: not started).
    base_tsc: u64,
    base_ns: u64,
    /// Nanoseconds per tick, times 2^32; 0 while the rate is unknown.
    mult: u64,
    /// Ticks after the anchor the fast path may extrapolate over (0: none).
    window: u64,
    /// The last reading returned.
    last: u64,
    tsc: bool,
}

/// Clock time the counter is extrapolated over before a fresh clock reading.
pub const REANCHOR_NS: u64 = 1_000_000;

/// Clock time the rate must have been measured over before the counter is used.
pub const MIN_BASELINE_NS: u64 = 5_000_000;

/// Most ticks between the two counter reads around an anchor's clock read (normally ~70): a
/// pair further apart was interrupted and cannot say closely enough which tick the clock
/// reading belongs to. At 3 GHz that bounds an anchor's error to 0.33 µs, and so the rate's
/// first measurement (over [`MIN_BASELINE_NS`]) to 130 ppm.
const MAX_READ_TICKS: u64 = 2_000;

/// A rate further than 2^-10 (about 1,000 ppm, twice ntpd's maximum slew) from the last one
/// means the clock was stepped while the rate was still being measured: start over.
const RATE_TOLERANCE_SHIFT: u32 = 10;

impl Default for TscRealtime {
    fn default() -> Self {
        Self::new()
    }
}

impl TscRealtime {
    /// A clock that uses the counter where it is safe to (see the type's documentation).
    pub fn new() -> Self {
        Self::with_counter(tsc_usable())
    }

    /// `tsc: false`: every reading is a `clock_gettime`, as [`TscRealtime::new`] does where
    /// the counter is not usable. (Private: `true` where it is not usable gives wrong
    /// readings.)
    fn with_counter(tsc: bool) -> Self {
        TscRealtime { anchor_tsc: 0, anchor_ns: 0, base_tsc: 0, base_ns: 0, mult: 0, window: 0, last: 0, tsc }
    }

    /// Whether readings come from the counter once the rate is known.
    #[cfg(any(test, feature = "internals"))]
    pub fn uses_counter(&self) -> bool {
        self.tsc
    }

    /// Nanoseconds of `CLOCK_REALTIME` (see the type's documentation for how close).
    #[inline]
    pub fn now_ns(&mut self) -> u64 {
        // `window` is 0 without the counter and while the rate is measured: no `rdtsc` then.
        if self.window != 0 {
            let d = rdtsc().wrapping_sub(self.anchor_tsc);
            if d < self.window {
                // d < window (1 ms of ticks: < 2^24 at ≤ 16 ticks/ns) and mult < 2^34 (≥ 0.25
                // ticks/ns): the product stays below 2^58.
                let t = self.anchor_ns.wrapping_add((d * self.mult) >> 32);
                self.last = self.last.max(t);
                return self.last;
            }
        }
        self.reanchor()
    }

    #[cold]
    #[inline(never)]
    fn reanchor(&mut self) -> u64 {
        if !self.tsc {
            return clock_ns(ClockId::Realtime);
        }
        if self.mult == 0 && self.base_ns != 0 {
            // Measuring the rate: plain readings (no dearer than before) until the baseline
            // is long enough for the careful one below.
            let ns = clock_ns(ClockId::Realtime);
            if ns >= self.base_ns && ns - self.base_ns < MIN_BASELINE_NS {
                return self.settle(ns);
            }
        }
        let mut tries = 0;
        let (ns, c) = loop {
            let c1 = rdtsc();
            let ns = clock_ns(ClockId::Realtime);
            let gap = rdtsc().wrapping_sub(c1);
            if gap <= MAX_READ_TICKS {
                break (ns, c1.wrapping_add(gap / 2));
            }
            tries += 1;
            if tries == 3 {
                // No trustworthy pair now: answer from the clock, anchor on the next call.
                self.window = 0;
                return self.settle(ns);
            }
        };
        if self.base_ns == 0 || ns <= self.base_ns || c <= self.base_tsc {
            self.restart(ns, c);
        } else if ns - self.base_ns >= MIN_BASELINE_NS {
            let mult = ((u128::from(ns - self.base_ns) << 32) / u128::from(c - self.base_tsc)).min(u128::from(u64::MAX))
                as u64;
            // Between 0.25 and 16 ticks per nanosecond, and no jump from the last rate.
            let plausible = (1 << 28..1 << 34).contains(&mult);
            if plausible && (self.mult == 0 || mult.abs_diff(self.mult) <= self.mult >> RATE_TOLERANCE_SHIFT) {
                self.mult = mult;
                self.window = ((u128::from(REANCHOR_NS) << 32) / u128::from(mult)) as u64;
            } else {
                self.restart(ns, c);
            }
        }
        self.anchor_tsc = c;
        self.anchor_ns = ns;
        self.settle(ns)
    }

    /// Returns `ns` as a reading: held at the last reading when it is behind it by no more
    /// than an anchor's correction can be, taken as it is otherwise (a step of the clock).
    fn settle(&mut self, ns: u64) -> u64 {
        if ns >= self.last || self.last - ns > REANCHOR_NS {
            self.last = ns;
        }
        self.last
    }

    fn restart(&mut self, ns: u64, c: u64) {
        self.base_ns = ns;
        self.base_tsc = c;
        self.mult = 0;
        self.window = 0;
    }
}

#[inline(always)]
fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` exists on every x86-64 CPU and has no memory effects.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// Whether the time-stamp counter runs at a constant rate through every power state
/// (CPUID's invariant-TSC bit) and the kernel keeps its own clocks on it.
fn tsc_usable() -> bool {
    static USABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *USABLE.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::__cpuid;
            // SAFETY: `cpuid` exists on every x86-64 CPU; leaf 0x8000_0007 is read only when
            // the highest extended leaf says it exists. (Safe to call from Rust 1.87 on; our
            // oldest supported toolchain still needs the block.)
            #[allow(unused_unsafe)]
            let invariant =
                unsafe { __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0 };
            invariant
                && std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
                    .is_ok_and(|s| s.trim() == "tsc")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How far a reading may stray from the kernel's clock read just before and after it.
    /// Extrapolating over 1 ms strays by nanoseconds (by 83 µs at most under chrony's fastest
    /// slew); a wrong rate or a torn anchor strays by far more.
    const SLACK_NS: u64 = 100_000;

    fn realtime() -> u64 {
        clock_ns(ClockId::Realtime)
    }

    /// Reads `clock` between two kernel readings for at least `for_ns` of clock time (past the
    /// calibration, so the counter path is exercised) and checks each reading lies between
    /// them (within the slack) and that readings never go back.
    fn check_tracks(clock: &mut TscRealtime, for_ns: u64) {
        let start = realtime();
        let mut last = 0;
        let mut n = 0u64;
        loop {
            let before = realtime();
            let t = clock.now_ns();
            let after = realtime();
            assert!(
                t + SLACK_NS >= before && t <= after + SLACK_NS,
                "reading {n}: {t} outside [{before}, {after}] (counter: {})",
                clock.uses_counter()
            );
            assert!(t >= last, "reading {n}: {t} went back from {last}");
            last = t;
            n += 1;
            if after - start > for_ns {
                break;
            }
        }
    }

    #[test]
    fn counter_readings_track_clock_realtime() {
        let mut clock = TscRealtime::new();
        check_tracks(&mut clock, MIN_BASELINE_NS + 50 * REANCHOR_NS);
        if clock.uses_counter() {
            assert!(clock.window > 0 && clock.mult > 0, "rate still unknown after the baseline: {clock:?}");
        } else {
            eprintln!("the counter is not usable here: checked the clock_gettime path only");
        }
    }

    #[test]
    fn without_the_counter_every_reading_is_the_kernels() {
        let mut clock = TscRealtime::with_counter(false);
        for _ in 0..1000 {
            let before = realtime();
            let t = clock.now_ns();
            assert!(before <= t && t <= realtime());
        }
        assert_eq!(clock.window, 0);
    }

    #[test]
    fn a_rate_gone_wrong_is_measured_again() {
        let mut clock = TscRealtime::new();
        if !clock.uses_counter() {
            eprintln!("the counter is not usable here: nothing to check");
            return;
        }
        check_tracks(&mut clock, MIN_BASELINE_NS + 2 * REANCHOR_NS);
        // As if the clock had been stepped by a second while the rate was measured: the next
        // anchor finds a rate far from the last one and starts the measurement over.
        clock.base_ns -= 1_000_000_000;
        clock.window = 0;
        clock.now_ns();
        assert_eq!(clock.mult, 0, "the rate was not measured again: {clock:?}");
        // A measurement disturbed by preemption (a loaded machine: the tests run in parallel)
        // is thrown away and started over, as it should be: give it a few tries.
        for _ in 0..50 {
            check_tracks(&mut clock, MIN_BASELINE_NS + 2 * REANCHOR_NS);
            if clock.mult > 0 {
                break;
            }
        }
        assert!(clock.mult > 0, "the rate was never measured again: {clock:?}");
    }

    #[test]
    fn readings_hold_still_through_a_backward_correction() {
        let mut clock = TscRealtime::with_counter(false);
        clock.last = realtime() + REANCHOR_NS / 2;
        let held = clock.last;
        assert_eq!(clock.settle(realtime()), held, "a correction inside the window holds still");
        let stepped = realtime() - 10 * REANCHOR_NS;
        assert_eq!(clock.settle(stepped), stepped, "a step of the clock is taken as it is");
    }
}
