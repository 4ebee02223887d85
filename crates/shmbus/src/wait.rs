//! Blocking: adaptive spin, then futex sleep, with deadlines.

use std::time::{Duration, Instant};

#[cfg(not(loom))]
use crate::event::EventWord;
#[cfg(not(loom))]
use crate::stats::Counter;
use crate::sync::spin_hint;

/// How a blocking call waits before it sleeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPolicy {
    /// How long to busy-poll before going to sleep on the futex. Zero sleeps at once;
    /// `Duration::MAX` never sleeps (lowest latency, burns a core).
    pub spin: Duration,
}

impl WaitPolicy {
    /// Spin about 20 µs, then sleep: low latency for bursts, no CPU when idle.
    pub const ADAPTIVE: WaitPolicy = WaitPolicy { spin: Duration::from_micros(20) };
    /// Never sleep.
    pub const SPIN: WaitPolicy = WaitPolicy { spin: Duration::MAX };
    /// Sleep at once.
    pub const BLOCK: WaitPolicy = WaitPolicy { spin: Duration::ZERO };
}

impl Default for WaitPolicy {
    fn default() -> Self {
        WaitPolicy::ADAPTIVE
    }
}

/// How long a call waits: the one argument of every receive's (and every waiting send's
/// and loan's) `*_with` form, from which its `try_` (`Now`), blocking (`Forever`),
/// `_timeout` (`For`) and `_deadline` (`Until`) forms come.
///
/// ```
/// use std::time::{Duration, Instant};
/// use shmbus::Wait;
///
/// assert_eq!(Wait::timeout(Duration::from_millis(5)), Wait::For(Duration::from_millis(5)));
/// let at = Instant::now() + Duration::from_secs(1);
/// assert!(matches!(Wait::Until(at), Wait::Until(_)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Not at all: only what can be done now.
    Now,
    /// As long as it takes.
    Forever,
    /// At most this long, from when the call starts waiting (a call that has what it needs
    /// at once does not read the clock). A duration too long to add to the clock waits for
    /// ever.
    For(Duration),
    /// Until this instant on the monotonic clock, at most.
    Until(Instant),
}

impl Wait {
    /// [`Wait::For`] `timeout`.
    pub fn timeout(timeout: Duration) -> Wait {
        Wait::For(timeout)
    }

    /// The deadline of a call that waits, computed when it is asked for (`Now` has passed
    /// at once).
    #[inline]
    pub(crate) fn deadline(self) -> Deadline {
        match self {
            Wait::Now => Deadline(Some(Instant::now())),
            Wait::Forever => Deadline::NEVER,
            Wait::For(d) => Deadline::after(d),
            Wait::Until(t) => Deadline(Some(t)),
        }
    }
}

/// When a blocking call gives up: an instant on the monotonic clock, or never.
///
/// Every blocking receive, send and wait computes its deadline once, on entry, with
/// [`Wait::deadline`] (from a duration or a caller's instant) or [`Deadline::after`],
/// and checks it with
/// [`passed`](Deadline::passed) / [`remaining`](Deadline::remaining) as it goes.
///
/// A timeout so long that `now + timeout` is not representable as an [`Instant`] (such as
/// `Duration::MAX`) gives [`Deadline::NEVER`]: the call waits for ever, like its untimed
/// form, and never panics on the overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Deadline(Option<Instant>);

impl Deadline {
    /// No deadline: wait for ever.
    pub(crate) const NEVER: Deadline = Deadline(None);

    /// `timeout` from now; [`Deadline::NEVER`] when that instant is not representable.
    pub(crate) fn after(timeout: Duration) -> Deadline {
        Deadline(Instant::now().checked_add(timeout))
    }

    /// The time left before the deadline (zero once it has passed); `None` for
    /// [`Deadline::NEVER`].
    pub(crate) fn remaining(&self) -> Option<Duration> {
        self.0.map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Whether the deadline has passed (never true for [`Deadline::NEVER`]).
    pub(crate) fn passed(&self) -> bool {
        self.passed_at(Instant::now())
    }

    /// Whether the deadline had passed at `now`, for a caller that already read the clock.
    pub(crate) fn passed_at(&self, now: Instant) -> bool {
        self.0.is_some_and(|d| now >= d)
    }
}

/// Busy-polls `attempt` for the policy's spin time. `Some` as soon as it yields a value.
#[inline]
pub(crate) fn spin_phase<T>(
    policy: WaitPolicy,
    deadline: Deadline,
    attempt: &mut impl FnMut() -> Option<T>,
) -> Option<T> {
    if let Some(v) = attempt() {
        return Some(v);
    }
    if policy.spin.is_zero() {
        return None;
    }
    let start = Instant::now();
    let mut i: u32 = 0;
    loop {
        for _ in 0..32 {
            spin_hint();
            if let Some(v) = attempt() {
                return Some(v);
            }
        }
        i = i.wrapping_add(1);
        if i % 8 == 0 {
            let now = Instant::now();
            if now.duration_since(start) >= policy.spin || deadline.passed_at(now) {
                return None;
            }
        }
    }
}

/// Waits until `attempt` yields a value, sleeping on `event` between tries.
///
/// `attempt` is called again after every wake-up and must be cheap and idempotent.
/// `recheck` caps each sleep, for conditions that can change without a notification (a
/// peer's death); `None` sleeps until woken. Returns `None` at the deadline. Uncounted: an
/// endpoint's wait goes through [`try_then_block_on`] (or [`block_on_with`] with its counter).
#[cfg(not(loom))]
pub(crate) fn block_on<T>(
    event: &EventWord,
    policy: WaitPolicy,
    deadline: Deadline,
    recheck: Option<Duration>,
    attempt: impl FnMut() -> Option<T>,
) -> Option<T> {
    block_on_with(event, policy, deadline, || recheck, None, attempt)
}

/// Like [`block_on`], with the re-check interval asked anew before each sleep (so a waiter
/// polls for a peer's death only while it has reason to).
#[cfg(not(loom))]
pub(crate) fn block_on_with<T>(
    event: &EventWord,
    policy: WaitPolicy,
    deadline: Deadline,
    recheck: impl Fn() -> Option<Duration>,
    counter: Option<Counter>,
    mut attempt: impl FnMut() -> Option<T>,
) -> Option<T> {
    if let Some(c) = counter {
        c.blocked();
    }
    let failed = std::cell::Cell::new(0u64);
    let mut attempt = || {
        let r = attempt();
        if r.is_none() {
            failed.set(failed.get() + 1);
        }
        r
    };
    let done = |v: T| {
        if let Some(c) = counter {
            c.spins(failed.get());
        }
        Some(v)
    };
    if let Some(v) = spin_phase(policy, deadline, &mut attempt) {
        return done(v);
    }
    loop {
        let seen = event.load();
        if let Some(v) = attempt() {
            return done(v);
        }
        // The deadline is checked on every turn, before arming: a peer that keeps changing
        // the event word (hostile, or just busy) makes `arm` fail over and over, and must
        // not keep us past the deadline.
        let mut timeout = deadline.remaining();
        if timeout.is_some_and(|t| t.is_zero()) {
            return None;
        }
        let Some(armed) = event.arm(seen) else { continue };
        if let Some(r) = recheck() {
            timeout = Some(timeout.map_or(r, |t| t.min(r)));
        }
        if let Some(c) = counter {
            c.futex_wait();
        }
        event.sleep(armed, timeout);
    }
}

/// [`block_on_with`] for a call that has not tried yet: one try first, uncounted, and the
/// wait, counted in `counter`, only if that try finds nothing. So `blocked` counts the calls
/// that had to wait, and the spin histogram the tries a wait took after the first.
#[cfg(not(loom))]
pub(crate) fn try_then_block_on<T>(
    event: &EventWord,
    policy: WaitPolicy,
    deadline: Deadline,
    recheck: impl Fn() -> Option<Duration>,
    counter: Counter,
    mut attempt: impl FnMut() -> Option<T>,
) -> Option<T> {
    if let Some(v) = attempt() {
        return Some(v);
    }
    block_on_with(event, policy, deadline, recheck, Some(counter), attempt)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A peer that keeps changing the event word (clearing the waiters flag every time) makes
    /// every `arm` fail or every sleep return at once: the waiter must still return at its
    /// deadline.
    #[test]
    fn a_word_that_keeps_changing_does_not_hold_a_waiter_past_its_deadline() {
        let event = EventWord::new();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut v = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    v = v.wrapping_add(2);
                    event.word().store(v, Ordering::SeqCst);
                }
            });
            for policy in [WaitPolicy::BLOCK, WaitPolicy::ADAPTIVE] {
                let timeout = Duration::from_millis(50);
                let start = Instant::now();
                let r: Option<()> = block_on(&event, policy, Deadline::after(timeout), None, || None);
                let took = start.elapsed();
                assert!(r.is_none());
                assert!(took < timeout + Duration::from_secs(2), "returned after {took:?} for a {timeout:?} timeout");
            }
            stop.store(true, Ordering::Relaxed);
        });
    }

    #[test]
    fn a_timeout_past_the_clock_s_range_is_never_and_does_not_panic() {
        assert_eq!(Deadline::after(Duration::MAX), Deadline::NEVER);
        let d = Deadline::after(Duration::MAX);
        assert!(!d.passed());
        assert_eq!(d.remaining(), None);
    }

    #[test]
    fn a_wait_s_deadline_is_never_for_ever_and_its_instant_otherwise() {
        assert_eq!(Wait::Forever.deadline(), Deadline::NEVER);
        assert_eq!(Wait::timeout(Duration::MAX).deadline(), Deadline::NEVER, "too long to add: for ever");
        assert!(!Wait::For(Duration::from_secs(3600)).deadline().passed());
        assert!(Wait::For(Duration::ZERO).deadline().passed());
        let t = Instant::now() + Duration::from_secs(3600);
        assert!(!Wait::Until(t).deadline().passed());
        assert!(Wait::Until(t).deadline().passed_at(t));
        assert!(Wait::Now.deadline().passed(), "a wait of nothing has passed at once");
    }

    #[test]
    fn never_never_passes() {
        assert!(!Deadline::NEVER.passed());
        assert_eq!(Deadline::NEVER.remaining(), None);
    }

    #[test]
    fn a_zero_timeout_has_passed_at_once() {
        let d = Deadline::after(Duration::ZERO);
        assert!(d.passed());
        assert_eq!(d.remaining(), Some(Duration::ZERO));
    }

    #[test]
    fn a_finite_timeout_counts_down_and_passes() {
        let timeout = Duration::from_millis(30);
        let d = Deadline::after(timeout);
        assert_ne!(d, Deadline::NEVER);
        let left = d.remaining().expect("a finite deadline has a remaining time");
        assert!(left <= timeout);
        std::thread::sleep(timeout + Duration::from_millis(5));
        assert!(d.passed());
        assert_eq!(d.remaining(), Some(Duration::ZERO));
        let start = Instant::now();
        assert!(d.passed_at(start));
        assert!(!Deadline::after(Duration::from_secs(3600)).passed_at(start));
    }
}
