//! Noticing that a peer died: one clock and one table of intervals for every kind.
//!
//! A process that is SIGKILLed sends no notification, so an endpoint that waits on a peer
//! asks whether it still runs (`ParticipantTable::is_alive`: `/proc` for a peer in this PID
//! namespace, the peer's entry lock for one in another; a few microseconds). Asking on
//! every poll would cost more than the poll, so each check is throttled to an interval. All
//! of them read one clock, [`now_ns`]: `CLOCK_MONOTONIC` through the vDSO (about 20 ns, never
//! a system call). A spinning reader polls every few tens of nanoseconds, so [`PeerWatch`]
//! reads the clock only on every [`CLOCK_EVERY`]th poll of an unchanged peer: an interval is
//! then a lower bound that a poll loop overshoots by at most that many polls.
//!
//! # The intervals
//!
//! | constant | value | rule |
//! |---|---|---|
//! | [`PENDING_GRACE`] | 1 ms | a topic slot or journal entry claimed but not committed for this long has its claimant's liveness checked |
//! | [`POLL`] | 2 ms | a journal tailer waiting on an entry in flight or a cycle switch looks again this often |
//! | [`CLAIM_RECHECK`] | 5 ms | a queue cell held by a claimant is re-checked this often while someone waits on it; a journal tailer reclaims dead appenders at most this often |
//! | [`STALLED`] | 20 ms | a half-done step of a peer that has not moved for this long is taken over (an exclusive entry left claiming, a journal cycle sealed without its successor) |
//! | [`PEER`] | 50 ms | a stream endpoint re-checks its peer (the writer for a reader, the reader for a writer) this often |
//! | [`ORPHAN`] | 100 ms | a pool worker re-checks its dispatcher, and an idle queue waiter its peers, this often |
//!
//! A peer that detaches cleanly is seen at once (its entry is freed); these bound only how
//! long a SIGKILLed peer can go unnoticed.

use std::cell::Cell;
use std::time::Duration;

use crate::participants::ParticipantInfo;
use crate::participants::ParticipantTable;
use crate::sys::{monotonic_ns, ProcessId};

/// A topic slot or journal entry claimed and not committed for this long has its claimant
/// checked.
pub(crate) const PENDING_GRACE: Duration = Duration::from_millis(1);
/// A journal tailer waiting on an entry in flight or a cycle switch looks again this often.
pub(crate) const POLL: Duration = Duration::from_millis(2);
/// A queue cell held by a claimant is re-checked this often while someone waits on it; a
/// journal tailer reclaims dead appenders at most this often.
pub(crate) const CLAIM_RECHECK: Duration = Duration::from_millis(5);
/// A half-done step of a peer that has not moved for this long is taken over.
pub(crate) const STALLED: Duration = Duration::from_millis(20);
/// A stream endpoint re-checks its peer this often.
pub(crate) const PEER: Duration = Duration::from_millis(50);
/// A pool worker re-checks its dispatcher, and an idle queue waiter its peers, this often.
pub(crate) const ORPHAN: Duration = Duration::from_millis(100);

/// A [`PeerWatch`] whose peer has not changed reads the clock on every this many polls.
pub(crate) const CLOCK_EVERY: u32 = 64;

/// The liveness clock, in nanoseconds (see the module docs).
#[inline]
pub(crate) fn now_ns() -> u64 {
    monotonic_ns()
}

fn as_ns(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

/// Says "now" at most once per interval.
#[derive(Debug)]
pub(crate) struct Throttle {
    every_ns: u64,
    next_ns: Cell<u64>,
}

impl Throttle {
    /// A throttle whose first [`Throttle::due`] is true at once.
    pub(crate) fn new(every: Duration) -> Throttle {
        Throttle { every_ns: as_ns(every), next_ns: Cell::new(0) }
    }

    /// Changes the interval (the next due time is kept).
    pub(crate) fn set_interval(&mut self, every: Duration) {
        self.every_ns = as_ns(every);
    }

    /// The interval.
    pub(crate) fn interval(&self) -> Duration {
        Duration::from_nanos(self.every_ns)
    }

    /// Whether the interval has passed since the last time this said yes; if so, starts the
    /// next one.
    pub(crate) fn due(&self) -> bool {
        self.due_at(now_ns())
    }

    /// [`Throttle::due`] at a time the caller has already read from [`now_ns`].
    pub(crate) fn due_at(&self, now: u64) -> bool {
        if now < self.next_ns.get() {
            return false;
        }
        self.next_ns.set(now.saturating_add(self.every_ns));
        true
    }
}

/// Whether a live process holds a peer's entry, cached for an interval.
///
/// A free entry is seen at once (a clean detach); a new holder is checked at once; the same
/// holder is re-checked at most once per interval (the clock is read every [`CLOCK_EVERY`]
/// polls).
#[derive(Debug)]
pub(crate) struct PeerWatch {
    slot: usize,
    every_ns: u64,
    /// The holder last checked: its process and PID namespace.
    seen: Cell<(ProcessId, u32)>,
    checked_ns: Cell<u64>,
    alive: Cell<bool>,
    polls: Cell<u32>,
}

impl PeerWatch {
    /// Watches entry `slot`, re-checking its holder every `every`.
    pub(crate) fn new(slot: usize, every: Duration) -> PeerWatch {
        PeerWatch {
            slot,
            every_ns: as_ns(every),
            seen: Cell::new((ProcessId { pid: 0, start_time: 0 }, 0)),
            checked_ns: Cell::new(0),
            alive: Cell::new(false),
            polls: Cell::new(0),
        }
    }

    /// Whether a live process holds the entry (`me` counts as alive).
    pub(crate) fn alive(&self, table: ParticipantTable<'_>, me: ProcessId) -> bool {
        let Some(owner) = table.owner(self.slot) else {
            self.alive.set(false);
            return false;
        };
        if owner.process.pid == me.pid && owner.pid_namespace == own_namespace(&owner) {
            return true;
        }
        let holder = (owner.process, owner.pid_namespace);
        if holder == self.seen.get() {
            let polls = self.polls.get().wrapping_add(1);
            self.polls.set(polls);
            if polls % CLOCK_EVERY != 0 {
                return self.alive.get();
            }
        }
        let now = now_ns();
        if holder != self.seen.get() || now.saturating_sub(self.checked_ns.get()) >= self.every_ns {
            self.seen.set(holder);
            self.checked_ns.set(now);
            self.alive.set(table.is_alive(&owner));
        }
        self.alive.get()
    }

    /// Has the next [`alive`](Self::alive) read the clock (and ask `/proc` if the interval
    /// has passed), for a caller that polls once per wake-up instead of in a spin (an async
    /// receive): its polls are too few for every [`CLOCK_EVERY`]th to come soon.
    pub(crate) fn clock_next(&self) {
        self.polls.set(CLOCK_EVERY - 1);
    }
}

/// The namespace word an entry of ours would carry, compared with `owner`'s: ours, or 0
/// (unknown) when `owner`'s is 0. A pid equal to ours is ours only in our own namespace.
fn own_namespace(owner: &ParticipantInfo) -> u32 {
    if owner.pid_namespace == 0 {
        0
    } else {
        crate::sys::lock::pid_namespace()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::participants::Participant;

    #[test]
    fn throttle_says_yes_once_per_interval() {
        let t = Throttle::new(Duration::from_secs(3600));
        assert!(t.due_at(10));
        assert!(!t.due_at(11));
        assert!(!t.due_at(3_599_000_000_000));
        assert!(t.due_at(3_600_000_000_010));
        let quick = Throttle::new(Duration::ZERO);
        assert!(quick.due() && quick.due());
    }

    #[test]
    fn peer_watch_sees_a_detach_at_once_and_a_death_after_its_interval() {
        let entries: Vec<Participant> = (0..1).map(|_| Participant::new()).collect();
        let table = ParticipantTable::from_slice(&entries);
        let me = ProcessId::current();
        let watch = PeerWatch::new(0, Duration::from_secs(3600));
        assert!(!watch.alive(table, me), "free entry");

        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let peer = ProcessId { pid: child.id(), start_time: 0 };
        table.register(peer, 1, 0..1).unwrap();
        assert!(watch.alive(table, me), "live holder");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(watch.alive(table, me), "cached within the interval");
        let fresh = PeerWatch::new(0, Duration::ZERO);
        assert!(!fresh.alive(table, me), "dead holder once re-checked");
        let seen_alive = PeerWatch::new(0, Duration::ZERO);
        seen_alive.seen.set((peer, 0));
        seen_alive.alive.set(true);
        let polls_to_notice = (1..=2 * CLOCK_EVERY).find(|_| !seen_alive.alive(table, me));
        assert_eq!(polls_to_notice, Some(CLOCK_EVERY), "the clock is read every CLOCK_EVERY polls");
        table.release(0);
        assert!(!watch.alive(table, me), "a freed entry is seen at once");
    }
}
