//! Waiting without hanging: every wait loop in a transport goes through a [`Waiter`], which
//! now and then asks a [`Watch`] whether the peer is still there.
//!
//! The check is off the hot path: a spinning loop calls [`Waiter::spin`], which only counts
//! until [`CHECK_EVERY`] spins have passed; a blocking wait that timed out (a futex wait or a
//! socket receive timeout) calls [`Waiter::check`] directly.

use std::io;
use std::time::Duration;

use shmbus::time::monotonic_ns;

/// Spins between two checks of the peer.
pub const CHECK_EVERY: u32 = 1 << 16;

/// How long a blocking wait sleeps before it checks the peer (futex timeout, socket
/// receive timeout). Only reached when the peer is slow or gone.
pub const BLOCK_SLICE: Duration = Duration::from_millis(250);

/// Decides whether a wait that has lasted `waited` may go on.
pub trait Watch {
    /// `Ok` to keep waiting; an error (peer gone, too long) ends the run.
    fn check(&mut self, waited: Duration) -> io::Result<()>;
}

/// The wait state of one round trip; [`Waiter::reset`] it before each.
pub struct Waiter<'a> {
    watch: &'a mut dyn Watch,
    spins: u32,
    since_ns: u64,
}

impl std::fmt::Debug for Waiter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiter").field("spins", &self.spins).field("since_ns", &self.since_ns).finish_non_exhaustive()
    }
}

impl<'a> Waiter<'a> {
    /// A waiter that asks `watch`.
    pub fn new(watch: &'a mut dyn Watch) -> Self {
        Waiter { watch, spins: 0, since_ns: 0 }
    }

    /// Starts a new wait (two stores; called once per round trip).
    #[inline]
    pub fn reset(&mut self) {
        self.spins = 0;
        self.since_ns = 0;
    }

    /// One step of a busy wait: a pause hint, and every [`CHECK_EVERY`] steps a check.
    #[inline]
    pub fn spin(&mut self) -> io::Result<()> {
        std::hint::spin_loop();
        self.spins = self.spins.wrapping_add(1);
        if self.spins % CHECK_EVERY == 0 {
            return self.check();
        }
        Ok(())
    }

    /// Asks the watch now. The wait is timed from the first check since the last reset.
    #[cold]
    pub fn check(&mut self) -> io::Result<()> {
        let now = monotonic_ns();
        if self.since_ns == 0 {
            self.since_ns = now;
        }
        self.watch.check(Duration::from_nanos(now.saturating_sub(self.since_ns)))
    }
}
