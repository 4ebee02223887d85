//! Waiting on any set of channels at once.
//!
//! A [`WaitSet`] sleeps until at least one of up to 128 channels of any kind is ready, and
//! reports which. It sleeps *exactly*: with `futex_waitv` (Linux ≥ 5.16) the kernel watches
//! every channel's event word at once, so a notification on any of them wakes the waiter
//! and no other notification does. (babus packed channels into one 32-bit futex bitset and
//! aliased beyond 32; this does not alias.)
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
//! let mut imu = Topic::subscribe(&d, "imu")?;
//! let mut image = Topic::subscribe(&d, "image")?;
//! let mut ws = WaitSet::new();
//! loop {
//!     let ready = ws.wait(&[&imu, &image], None)?;
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
    /// a sleeping waiter should re-check. `None` (the default) sleeps until notified.
    fn recheck_interval(&self) -> Option<Duration> {
        None
    }
}

/// Why [`WaitSet::wait`] returned without a ready channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitError {
    /// The timeout passed and nothing became ready.
    Timeout,
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
            WaitError::Timeout => f.write_str("timed out waiting for any channel to become ready"),
            WaitError::TooMany { given } => write!(f, "a wait set takes at most {MAX_WAIT_CHANNELS} channels, {given} were given; split them over several threads"),
            WaitError::Empty => f.write_str("a wait set needs at least one channel"),
            WaitError::Os(e) => write!(f, "futex_waitv failed: {}", std::io::Error::from_raw_os_error(*e)),
        }
    }
}

impl std::error::Error for WaitError {}

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
    /// `channels`) of all that are. `timeout` of `None` waits for ever.
    pub fn wait(&mut self, channels: &[&dyn Waitable], timeout: Option<Duration>) -> Result<&[usize], WaitError> {
        if channels.is_empty() {
            return Err(WaitError::Empty);
        }
        if channels.len() > MAX_WAIT_CHANNELS {
            return Err(WaitError::TooMany { given: channels.len() });
        }
        let deadline = Deadline::from_timeout(timeout);
        // Spin phase.
        let policy = self.policy;
        let mut any = || {
            self.scan(channels);
            (!self.ready.is_empty()).then_some(())
        };
        if crate::wait::spin_phase(policy, deadline, &mut any).is_some() {
            return Ok(&self.ready);
        }
        let recheck = channels.iter().filter_map(|c| c.recheck_interval()).min();
        'outer: loop {
            // Checked on every turn: a channel whose event word keeps changing (a busy or
            // hostile peer) makes arming fail over and over, and must not keep us past it.
            if deadline.passed() {
                self.scan(channels);
                return if self.ready.is_empty() { Err(WaitError::Timeout) } else { Ok(&self.ready) };
            }
            self.seen.clear();
            for c in channels {
                self.seen.push(c.wait_handle().event.load());
            }
            self.scan(channels);
            if !self.ready.is_empty() {
                return Ok(&self.ready);
            }
            self.entries.clear();
            for (c, &seen) in channels.iter().zip(&self.seen) {
                let ev = c.wait_handle().event;
                let Some(armed) = ev.arm(seen) else { continue 'outer };
                self.entries.push(WaitvEntry::new(ev.word(), armed));
            }
            let mut remaining = deadline.remaining();
            if remaining.is_some_and(|r| r.is_zero()) {
                return Err(WaitError::Timeout);
            }
            if let Some(r) = recheck {
                remaining = Some(remaining.map_or(r, |t| t.min(r)));
            }
            if waitv_supported() {
                let abs = remaining.map(|r| monotonic_ns().saturating_add(r.as_nanos().min(u64::MAX as u128) as u64));
                // SAFETY: every entry was built from the event word of a channel in
                // `channels`, which the caller keeps borrowed (and so mapped) for this call.
                if let Err(e) = unsafe { futex_waitv(&self.entries, abs) } {
                    return Err(WaitError::Os(e.raw_os_error().unwrap_or(0)));
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
