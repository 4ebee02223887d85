//! Event words: the futex each channel's waiters sleep on.
//!
//! An event word counts notifications in its upper 31 bits and keeps a *waiters* flag in bit
//! 0. A notifier adds 2 (one locked instruction) and makes the `FUTEX_WAKE` system call only
//! if the flag was set, so a sender whose receivers are all spinning or busy makes no system
//! call. A waiter loads the word, re-checks its condition, sets the flag with a CAS and
//! sleeps on the flagged value; any notification in between changes the word, so the kernel
//! refuses the sleep (`EAGAIN`) and no wake-up is ever lost.
//!
//! A waiter killed while asleep leaves the flag set: the next notifier clears it and pays one
//! extra system call. The flag heals itself; there is no counter to leak.

use crate::sync::{AtomicU32, Ordering};

/// A futex word in shared memory (see the module docs).
#[repr(transparent)]
#[derive(Debug)]
pub(crate) struct EventWord(AtomicU32);

const WAITERS: u32 = 1;

impl EventWord {
    #[allow(dead_code)]
    pub(crate) fn new() -> EventWord {
        EventWord(AtomicU32::new(0))
    }

    /// Publishes "something changed". Call after the change itself is visible (stored with
    /// Release or stronger). Returns whether it made the `FUTEX_WAKE` system call (someone
    /// was asleep), for the caller's counters.
    #[inline]
    pub(crate) fn notify(&self) -> bool {
        // SeqCst: pairs with the SeqCst load/CAS in `arm`, so either the waiter sees this
        // increment (and does not sleep) or we see its flag (and wake it).
        let old = self.0.fetch_add(2, Ordering::SeqCst);
        if old & WAITERS != 0 {
            self.0.fetch_and(!WAITERS, Ordering::SeqCst);
            self.wake_all();
            return true;
        }
        false
    }

    /// The current value, to pass to `arm` after re-checking the condition.
    #[inline]
    pub(crate) fn load(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }

    /// Sets the waiters flag on `seen`. Returns the value to sleep on, or `None` if the word
    /// moved since `seen` (re-check the condition and try again).
    #[inline]
    pub(crate) fn arm(&self, seen: u32) -> Option<u32> {
        if seen & WAITERS != 0 {
            return Some(seen);
        }
        match self.0.compare_exchange(seen, seen | WAITERS, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => Some(seen | WAITERS),
            Err(_) => None,
        }
    }

    #[cfg(not(loom))]
    fn wake_all(&self) {
        crate::sys::futex_wake(&self.0, u32::MAX);
    }

    #[cfg(loom)]
    fn wake_all(&self) {}

    /// Sleeps while the word equals `armed`, up to `timeout`.
    #[cfg(not(loom))]
    pub(crate) fn sleep(&self, armed: u32, timeout: Option<std::time::Duration>) -> crate::sys::WaitOutcome {
        crate::sys::futex_wait(&self.0, armed, timeout)
    }

    /// The word itself, for `futex_waitv`.
    #[cfg(not(loom))]
    pub(crate) fn word(&self) -> &std::sync::atomic::AtomicU32 {
        &self.0
    }
}
