//! Blocking: adaptive spin, then futex sleep, with deadlines.

use std::time::{Duration, Instant};

use crate::event::EventWord;
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

/// Turns an optional timeout into an optional deadline.
pub(crate) fn deadline_after(timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| Instant::now().checked_add(t))
}

/// Busy-polls `attempt` for the policy's spin time. `Some` as soon as it yields a value.
#[inline]
pub(crate) fn spin_phase<T>(
    policy: WaitPolicy,
    deadline: Option<Instant>,
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
            if now.duration_since(start) >= policy.spin || deadline.is_some_and(|d| now >= d) {
                return None;
            }
        }
    }
}

/// Waits until `attempt` yields a value, sleeping on `event` between tries.
///
/// `attempt` is called again after every wake-up and must be cheap and idempotent.
/// `recheck` caps each sleep, for conditions that can change without a notification (a
/// peer's death); `None` sleeps until woken. Returns `None` at the deadline.
#[cfg(not(loom))]
pub(crate) fn block_on<T>(
    event: &EventWord,
    policy: WaitPolicy,
    deadline: Option<Instant>,
    recheck: Option<Duration>,
    attempt: impl FnMut() -> Option<T>,
) -> Option<T> {
    block_on_with(event, policy, deadline, || recheck, attempt)
}

/// Like [`block_on`], with the re-check interval asked anew before each sleep (so a waiter
/// polls for a peer's death only while it has reason to).
#[cfg(not(loom))]
pub(crate) fn block_on_with<T>(
    event: &EventWord,
    policy: WaitPolicy,
    deadline: Option<Instant>,
    recheck: impl Fn() -> Option<Duration>,
    mut attempt: impl FnMut() -> Option<T>,
) -> Option<T> {
    if let Some(v) = spin_phase(policy, deadline, &mut attempt) {
        return Some(v);
    }
    loop {
        let seen = event.load();
        if let Some(v) = attempt() {
            return Some(v);
        }
        // The deadline is checked on every turn, before arming: a peer that keeps changing
        // the event word (hostile, or just busy) makes `arm` fail over and over, and must
        // not keep us past the deadline.
        let mut timeout = match deadline {
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return None;
                }
                Some(d - now)
            }
            None => None,
        };
        let Some(armed) = event.arm(seen) else { continue };
        if let Some(r) = recheck() {
            timeout = Some(timeout.map_or(r, |t| t.min(r)));
        }
        event.sleep(armed, timeout);
    }
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
                let r: Option<()> = block_on(&event, policy, deadline_after(Some(timeout)), None, || None);
                let took = start.elapsed();
                assert!(r.is_none());
                assert!(took < timeout + Duration::from_secs(2), "returned after {took:?} for a {timeout:?} timeout");
            }
            stop.store(true, Ordering::Relaxed);
        });
    }
}
