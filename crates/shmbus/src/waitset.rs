//! Waiting on any set of channels at once.
//!
//! A [`WaitSet`] sleeps until at least one of up to 128 channels of any kind is ready, and
//! reports which. It sleeps *exactly*: with `futex_waitv` (Linux ≥ 5.16) the kernel watches
//! every channel's event word at once, so a notification on any of them wakes the waiter
//! and no other notification does. (A design that packs channels into one 32-bit futex bitset
//! aliases beyond 32; this does not alias.)
//!
//! Where `futex_waitv` is missing (older kernels, or `SHMBUS_NO_WAITV=1`) a set of one channel
//! still sleeps exactly on its futex; a larger set sleeps on its first channel in slices of
//! at most 1 ms, re-checking all of them after each: correct (nothing is missed) with up to
//! 1 ms of extra latency for the others.
//!
//! The protocol for each channel is the event-word handshake of the `event` module: load the
//! word, check readiness, set the waiters flag, sleep on the flagged value; see there why no
//! wake-up can be lost.
//!
//! ```no_run
//! # use shmbus::{Domain, WaitSet, Waitable, topic::{Topic, TopicConfig}};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let d = Domain::new("robot1")?;
//! let imu = Topic::open(&d, "imu")?.subscriber()?;
//! let image = Topic::open(&d, "image")?.subscriber()?;
//! let mut ws = WaitSet::new();
//! loop {
//!     let ready = ws.wait(&[&imu, &image])?;
//!     if ready.contains(&0) { while let Ok(m) = imu.try_recv() { /* … */ } }
//!     if ready.contains(&1) { while let Ok(m) = image.try_recv() { /* … */ } }
//! #   break;
//! }
//! # Ok(()) }
//! ```

use std::fmt;
use std::time::Duration;

use crate::event::EventWord;
use crate::sys::futex::WAITV_MAX;
use crate::sys::{futex_waitv, monotonic_ns, waitv_supported, WaitvEntry};
use crate::wait::{Deadline, WaitPolicy};

/// The most channels one [`WaitSet::wait`] call accepts.
pub const MAX_WAIT_CHANNELS: usize = WAITV_MAX;

/// A channel's futex word, as the [`WaitSet`] needs it. Obtained from [`Waitable`].
#[derive(Debug, Clone, Copy)]
pub struct WaitHandle<'a> {
    pub(crate) event: &'a EventWord,
}

/// Anything a [`WaitSet`] can wait on: every channel endpoint implements it.
pub trait Waitable {
    /// The event word that is notified whenever [`Waitable::is_ready`] may have turned true.
    fn wait_handle(&self) -> WaitHandle<'_>;
    /// Whether the endpoint can make progress now (a message to read, room to write, …).
    fn is_ready(&self) -> bool;
    /// For conditions that can change without a notification (a peer's death): how often
    /// a sleeping waiter should call [`Waitable::recheck`]. `None` (the default) sleeps until
    /// notified.
    fn recheck_interval(&self) -> Option<Duration> {
        None
    }
    /// Looks for what no notification announces (a dead peer, a role to take over) and
    /// acts on it; returns whether that made the endpoint ready. A [`WaitSet`] calls it each
    /// time a [`Waitable::recheck_interval`] ends; the default does nothing.
    fn recheck(&self) -> bool {
        false
    }
}

/// Why [`WaitSet::wait`] returned without a ready channel. It cannot time out; see
/// [`WaitTimeoutError`] for [`WaitSet::wait_timeout`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitError {
    /// More channels than [`MAX_WAIT_CHANNELS`] were given.
    TooMany {
        /// How many were given.
        given: usize,
    },
    /// No channel was given: the wait could never end.
    Empty,
    /// The kernel refused the wait (an unexpected `futex_waitv` error).
    Os(i32),
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::TooMany { given } => write!(f, "a wait set takes at most {MAX_WAIT_CHANNELS} channels, {given} were given; split them over several threads"),
            WaitError::Empty => f.write_str("a wait set needs at least one channel"),
            WaitError::Os(e) => write!(f, "futex_waitv failed: {}", std::io::Error::from_raw_os_error(*e)),
        }
    }
}

impl std::error::Error for WaitError {}

impl crate::error::Failure for WaitError {
    fn kind(&self) -> crate::error::ErrorKind {
        match self {
            WaitError::TooMany { .. } | WaitError::Empty => crate::error::ErrorKind::InvalidArgument,
            WaitError::Os(_) => crate::error::ErrorKind::Io,
        }
    }
}

/// Why [`WaitSet::wait_timeout`] returned without a ready channel.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitTimeoutError {
    /// The timeout passed and nothing became ready.
    Timeout,
    /// More channels than [`MAX_WAIT_CHANNELS`] were given.
    TooMany {
        /// How many were given.
        given: usize,
    },
    /// No channel was given.
    Empty,
    /// The kernel refused the wait (an unexpected `futex_waitv` error).
    Os(i32),
}

impl From<WaitError> for WaitTimeoutError {
    fn from(e: WaitError) -> WaitTimeoutError {
        match e {
            WaitError::TooMany { given } => WaitTimeoutError::TooMany { given },
            WaitError::Empty => WaitTimeoutError::Empty,
            WaitError::Os(e) => WaitTimeoutError::Os(e),
        }
    }
}

impl WaitTimeoutError {
    /// The untimed error, or `None` for [`WaitTimeoutError::Timeout`].
    fn untimed(&self) -> Option<WaitError> {
        match *self {
            WaitTimeoutError::Timeout => None,
            WaitTimeoutError::TooMany { given } => Some(WaitError::TooMany { given }),
            WaitTimeoutError::Empty => Some(WaitError::Empty),
            WaitTimeoutError::Os(e) => Some(WaitError::Os(e)),
        }
    }
}

impl fmt::Display for WaitTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.untimed() {
            None => f.write_str("timed out waiting for any channel to become ready"),
            Some(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for WaitTimeoutError {}

impl crate::error::Failure for WaitTimeoutError {
    fn kind(&self) -> crate::error::ErrorKind {
        match self {
            WaitTimeoutError::Timeout => crate::error::ErrorKind::Timeout,
            WaitTimeoutError::TooMany { .. } | WaitTimeoutError::Empty => crate::error::ErrorKind::InvalidArgument,
            WaitTimeoutError::Os(_) => crate::error::ErrorKind::Io,
        }
    }
}

/// Sleeps on many channels at once. Holds only scratch space: the channels are passed to each
/// [`WaitSet::wait`] call, so the endpoints stay free for `try_recv` in between.
#[derive(Debug, Default)]
pub struct WaitSet {
    policy: WaitPolicy,
    seen: Vec<u32>,
    entries: Vec<WaitvEntry>,
    ready: Vec<usize>,
}

impl WaitSet {
    /// A wait set with the default adaptive policy (spin ~20 µs, then sleep).
    pub fn new() -> WaitSet {
        WaitSet::with_policy(WaitPolicy::default())
    }

    /// A wait set with an explicit spin policy.
    pub fn with_policy(policy: WaitPolicy) -> WaitSet {
        WaitSet { policy, seen: Vec::with_capacity(16), entries: Vec::with_capacity(16), ready: Vec::with_capacity(16) }
    }

    /// Indices of the channels that are ready right now, without sleeping (may be empty).
    pub fn poll(&mut self, channels: &[&dyn Waitable]) -> &[usize] {
        self.scan(channels);
        &self.ready
    }

    /// Waits until at least one of `channels` is ready and returns the indices (into
    /// `channels`) of all that are.
    pub fn wait(&mut self, channels: &[&dyn Waitable]) -> Result<&[usize], WaitError> {
        match self.wait_until(channels, Deadline::NEVER) {
            Ok(_) => Ok(&self.ready),
            // A deadline of never cannot pass.
            Err(e) => Err(e.untimed().unwrap_or(WaitError::Empty)),
        }
    }

    /// [`WaitSet::wait`], giving up with [`WaitTimeoutError::Timeout`] after `timeout`
    /// (a zero timeout checks once, like [`WaitSet::poll`] but with the errors of a wait).
    pub fn wait_timeout(
        &mut self,
        channels: &[&dyn Waitable],
        timeout: Duration,
    ) -> Result<&[usize], WaitTimeoutError> {
        self.wait_until(channels, Deadline::after(timeout))?;
        Ok(&self.ready)
    }

    fn wait_until(&mut self, channels: &[&dyn Waitable], deadline: Deadline) -> Result<(), WaitTimeoutError> {
        if channels.is_empty() {
            return Err(WaitTimeoutError::Empty);
        }
        if channels.len() > MAX_WAIT_CHANNELS {
            return Err(WaitTimeoutError::TooMany { given: channels.len() });
        }
        // Spin phase.
        let policy = self.policy;
        let mut any = || {
            self.scan(channels);
            (!self.ready.is_empty()).then_some(())
        };
        if crate::wait::spin_phase(policy, deadline, &mut any).is_some() {
            return Ok(());
        }
        let recheck = channels.iter().filter_map(|c| c.recheck_interval()).min();
        let mut next_recheck = recheck.map(|r| monotonic_ns().saturating_add(duration_ns(r)));
        'outer: loop {
            // Checked on every turn: a channel whose event word keeps changing (a busy or
            // hostile peer) makes arming fail over and over, and must not keep us past it.
            if deadline.passed() {
                self.scan(channels);
                return if self.ready.is_empty() { Err(WaitTimeoutError::Timeout) } else { Ok(()) };
            }
            if let (Some(r), Some(at)) = (recheck, next_recheck) {
                let now = monotonic_ns();
                if now >= at {
                    for c in channels.iter().filter(|c| c.recheck_interval().is_some()) {
                        c.recheck();
                    }
                    next_recheck = Some(now.saturating_add(duration_ns(r)));
                }
            }
            self.seen.clear();
            for c in channels {
                self.seen.push(c.wait_handle().event.load());
            }
            self.scan(channels);
            if !self.ready.is_empty() {
                return Ok(());
            }
            self.entries.clear();
            for (c, &seen) in channels.iter().zip(&self.seen) {
                let ev = c.wait_handle().event;
                let Some(armed) = ev.arm(seen) else { continue 'outer };
                self.entries.push(WaitvEntry::new(ev.word(), armed));
            }
            let mut remaining = deadline.remaining();
            if remaining.is_some_and(|r| r.is_zero()) {
                return Err(WaitTimeoutError::Timeout);
            }
            if let Some(r) = recheck {
                remaining = Some(remaining.map_or(r, |t| t.min(r)));
            }
            if waitv_supported() {
                let abs = remaining.map(|r| monotonic_ns().saturating_add(duration_ns(r)));
                // SAFETY: every entry was built from the event word of a channel in
                // `channels`, which the caller keeps borrowed (and so mapped) for this call.
                if let Err(e) = unsafe { futex_waitv(&self.entries, abs) } {
                    return Err(WaitTimeoutError::Os(e.raw_os_error().unwrap_or(0)));
                }
            } else {
                let first = channels[0].wait_handle().event;
                let slice = if channels.len() == 1 {
                    remaining
                } else {
                    Some(remaining.map_or(Duration::from_millis(1), |r| r.min(Duration::from_millis(1))))
                };
                first.sleep(self.entries_value(0), slice);
            }
        }
    }

    fn entries_value(&self, i: usize) -> u32 {
        // The armed value of channel i: `seen` with the waiters flag set.
        self.seen[i] | 1
    }

    fn scan(&mut self, channels: &[&dyn Waitable]) {
        self.ready.clear();
        for (i, c) in channels.iter().enumerate() {
            if c.is_ready() {
                self.ready.push(i);
            }
        }
    }
}

fn duration_ns(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Becomes ready only through `recheck`, as an endpoint whose peer died silently does.
    struct Silent {
        event: EventWord,
        ready: Cell<bool>,
        rechecks: Cell<u32>,
    }

    impl Waitable for Silent {
        fn wait_handle(&self) -> WaitHandle<'_> {
            WaitHandle { event: &self.event }
        }
        fn is_ready(&self) -> bool {
            self.ready.get()
        }
        fn recheck_interval(&self) -> Option<Duration> {
            Some(Duration::from_millis(2))
        }
        fn recheck(&self) -> bool {
            self.rechecks.set(self.rechecks.get() + 1);
            self.ready.set(self.rechecks.get() >= 3);
            self.ready.get()
        }
    }

    #[test]
    fn recheck_makes_a_silent_endpoint_ready() {
        let s = Silent { event: EventWord::new(), ready: Cell::new(false), rechecks: Cell::new(0) };
        let mut ws = WaitSet::with_policy(WaitPolicy::BLOCK);
        assert_eq!(ws.wait(&[&s]).unwrap(), &[0]);
        assert_eq!(s.rechecks.get(), 3);
    }

    #[test]
    fn wait_timeout_times_out_and_wait_rejects_bad_sets() {
        let s = Silent { event: EventWord::new(), ready: Cell::new(false), rechecks: Cell::new(0) };
        let mut ws = WaitSet::with_policy(WaitPolicy::BLOCK);
        // Rechecks keep it unready for the first two intervals.
        assert_eq!(ws.wait_timeout(&[&s], Duration::from_millis(1)), Err(WaitTimeoutError::Timeout));
        assert_eq!(ws.wait(&[]), Err(WaitError::Empty));
        assert_eq!(ws.wait_timeout(&[], Duration::ZERO), Err(WaitTimeoutError::Empty));
        let many: Vec<&dyn Waitable> = vec![&s; MAX_WAIT_CHANNELS + 1];
        assert_eq!(ws.wait(&many), Err(WaitError::TooMany { given: MAX_WAIT_CHANNELS + 1 }));
    }
}
