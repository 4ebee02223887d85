//! Traffic and contention counters, kept in the channel itself.
//!
//! Every segment holds one [`COUNTERS_SIZE`]-byte counter block per participant entry, in
//! the area between the participant table and the kind area. The endpoint holding entry `i`
//! owns block `i`: it resets the block when it registers and is the only process that
//! writes it afterwards, so every counter is a plain load and store by one writer (no
//! locked instruction), on cache lines no other endpoint writes. Anyone with read permission
//! reads the blocks through a read-only mapping ([`channel_stats`]) without disturbing the
//! channel: no registration, no store, no lock.
//!
//! # The counters
//!
//! What each field means is documented on [`Counters`]; `docs/observability.md` has the
//! table per kind and role. They count from the endpoint's registration
//! ([`ParticipantStats::since_ns`]), wrap at `u64::MAX` (the histograms' buckets at
//! `u32::MAX`), and are meant to be read as differences between two snapshots
//! ([`Counters::since`]).
//!
//! # Trust
//!
//! The blocks are untrusted input like the rest of the segment: a reader only loads and
//! copies them, and [`Counters::since`] saturates, so garbage shows as odd numbers, never as
//! a panic or an out-of-bounds read. A block belongs to the participant whose pid it names
//! ([`ParticipantStats`] is built only when the entry's owner and the block's owner agree),
//! so a snapshot taken while an endpoint is registering never shows the previous owner's
//! numbers as the new one's.
//!
//! The counters order nothing: they are statistics, not part of any protocol, and use
//! relaxed accesses only.

use crate::sync::Ordering::{self, Relaxed};
use crate::sync::{AtomicU32, AtomicU64, Load, Ro};

use crate::sys::{monotonic_ns, ProcessId};

/// Bytes of one participant's counter block (eight cache lines).
pub const COUNTERS_SIZE: usize = 512;
/// Buckets of the spin histogram (see [`spin_bucket`]).
pub const SPIN_BUCKETS: usize = 16;
/// Buckets of the latency histogram (see [`latency_bucket`]).
pub const LATENCY_BUCKETS: usize = 64;
/// A receiver timestamps one message in this many (the first, then every 64th), so the
/// clock read costs nothing measurable on the receive path.
pub const LATENCY_SAMPLE_EVERY: u64 = 64;

/// One participant's counter block in shared memory, with words of type `W64` and `W32`:
/// the atomics themselves (its owner's [`Counter`]) or load-only ones ([`RoBlock`], what
/// readers get); the layout is the same.
#[repr(C, align(64))]
pub(crate) struct Block<W64, W32> {
    // Line 0: identity and the per-message counters.
    owner: W64,
    since_ns: W64,
    messages: W64,
    bytes: W64,
    position: W64,
    drops: W64,
    _line0: [W64; 2],
    // Line 1: what only the exceptional paths touch.
    full: W64,
    blocked: W64,
    futex_waits: W64,
    futex_wakes: W64,
    pins: W64,
    _line1: [W64; 3],
    // Line 2: the spin histogram.
    spins: [W32; SPIN_BUCKETS],
    // Lines 3 to 6: the latency histogram.
    latency: [W32; LATENCY_BUCKETS],
    // Line 7: reserved.
    _line7: [W64; 8],
}

/// The owner's block: stores.
type RwBlock = Block<AtomicU64, AtomicU32>;
/// A block through load-only words: what a snapshot reads.
pub(crate) type RoBlock = Block<Ro<AtomicU64>, Ro<AtomicU32>>;

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<RwBlock>() == COUNTERS_SIZE);
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<RoBlock>() == COUNTERS_SIZE);

/// Adds `n` to a counter only its owner writes: a load and a store, no locked instruction.
#[inline(always)]
fn bump(w: &AtomicU64, n: u64) {
    w.store(w.load(Relaxed).wrapping_add(n), Relaxed);
}

#[inline(always)]
fn bump32(w: &AtomicU32) {
    w.store(w.load(Relaxed).wrapping_add(1), Relaxed);
}

/// The bucket of a wait that succeeded after `attempts` failed tries: 0 for none (the first
/// try succeeded), then `1 + log2(attempts)`, the last bucket taking everything from
/// 2^14 failed tries up.
#[inline]
pub fn spin_bucket(attempts: u64) -> usize {
    if attempts == 0 {
        0
    } else {
        (1 + attempts.ilog2() as usize).min(SPIN_BUCKETS - 1)
    }
}

/// The smallest attempt count of spin bucket `b` (see [`spin_bucket`]).
pub fn spin_bucket_floor(b: usize) -> u64 {
    if b == 0 {
        0
    } else {
        1 << (b - 1)
    }
}

/// The bucket of a latency of `ns` nanoseconds: two buckets per power of two from 16 ns
/// (bucket 0 also takes everything below 16 ns; bucket 63 everything from about 51 s up).
/// Bucket `2k` starts at `2^(k+4)` ns and bucket `2k+1` at `1.5 × 2^(k+4)` ns.
#[inline]
pub fn latency_bucket(ns: u64) -> usize {
    if ns < 16 {
        return 0;
    }
    let octave = ns.ilog2() as usize; // >= 4
    let half = ((ns >> (octave - 1)) & 1) as usize;
    ((octave - 4) * 2 + half).min(LATENCY_BUCKETS - 1)
}

/// The smallest latency, in ns, of latency bucket `b` (see [`latency_bucket`]).
pub fn latency_bucket_floor(b: usize) -> u64 {
    let octave = 4 + (b / 2) as u32;
    let base = 1u64 << octave;
    if b % 2 == 1 {
        base + base / 2
    } else {
        base
    }
}

/// The write side of one participant's block: what endpoints count with. Holds a pointer
/// into the segment mapping, which the endpoint keeps alive.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Counter {
    block: *const RwBlock,
}

// SAFETY: a `Counter` points into a shared mapping that its endpoint keeps alive; the block
// is atomics, and its single-writer discipline is the endpoint's (one thread at a time).
unsafe impl Send for Counter {}
// SAFETY: as above; concurrent callers only lose counts, never memory safety.
unsafe impl Sync for Counter {}

impl Counter {
    /// # Safety
    /// `block` points to a `COUNTERS_SIZE`-byte, 64-aligned block inside a read-write mapping
    /// that outlives every use of the `Counter`.
    pub(crate) unsafe fn from_raw(block: *mut u8) -> Counter {
        Counter { block: block as *const RwBlock }
    }

    #[inline(always)]
    fn b(&self) -> &RwBlock {
        // SAFETY: `from_raw`'s contract.
        unsafe { &*self.block }
    }

    /// Zeroes the block and names `owner` its owner: a registering endpoint's first act.
    pub(crate) fn reset(&self, owner: ProcessId) {
        let b = self.b();
        b.owner.store(0, Ordering::Release);
        for w in [&b.since_ns, &b.messages, &b.bytes, &b.position, &b.drops].into_iter().chain([
            &b.full,
            &b.blocked,
            &b.futex_waits,
            &b.futex_wakes,
            &b.pins,
        ]) {
            w.store(0, Relaxed);
        }
        for w in b.spins.iter().chain(b.latency.iter()) {
            w.store(0, Relaxed);
        }
        b.since_ns.store(monotonic_ns(), Relaxed);
        b.owner.store(u64::from(owner.pid), Ordering::Release);
    }

    /// One message of `len` bytes sent or received.
    #[inline(always)]
    pub(crate) fn message(&self, len: usize) {
        let b = self.b();
        bump(&b.messages, 1);
        bump(&b.bytes, len as u64);
    }

    /// `n` messages of `len` bytes in all.
    #[inline(always)]
    pub(crate) fn messages(&self, n: u64, len: u64) {
        let b = self.b();
        bump(&b.messages, n);
        bump(&b.bytes, len);
    }

    /// The receiver's position: the next sequence number (or byte offset) it will read.
    #[inline(always)]
    pub(crate) fn position(&self, next: u64) {
        self.b().position.store(next, Relaxed);
    }

    /// `n` messages lost to this receiver (overwritten before it read them, or abandoned).
    #[inline]
    pub(crate) fn drops(&self, n: u64) {
        bump(&self.b().drops, n);
    }

    /// A send found the channel full (no room, no free slot).
    #[inline]
    pub(crate) fn full(&self) {
        bump(&self.b().full, 1);
    }

    /// A call found nothing to do at once and waited (spun or slept).
    #[inline]
    pub(crate) fn blocked(&self) {
        bump(&self.b().blocked, 1);
    }

    /// A `FUTEX_WAIT` entered.
    #[inline]
    pub(crate) fn futex_wait(&self) {
        bump(&self.b().futex_waits, 1);
    }

    /// A `FUTEX_WAKE` issued.
    #[inline]
    pub(crate) fn futex_wake(&self) {
        bump(&self.b().futex_wakes, 1);
    }

    /// How many samples this receiver pins now (a level, not a count).
    #[inline]
    pub(crate) fn pins(&self, n: u64) {
        self.b().pins.store(n, Relaxed);
    }

    /// A wait that succeeded after `attempts` failed tries.
    #[inline]
    pub(crate) fn spins(&self, attempts: u64) {
        bump32(&self.b().spins[spin_bucket(attempts)]);
    }

    /// Whether the message about to be counted is one to timestamp (see
    /// [`LATENCY_SAMPLE_EVERY`]): call before [`message`](Self::message).
    #[inline(always)]
    pub(crate) fn sample_latency_now(&self) -> bool {
        self.b().messages.load(Relaxed) % LATENCY_SAMPLE_EVERY == 0
    }

    /// A publish → receive latency of `ns` nanoseconds.
    #[inline]
    pub(crate) fn latency(&self, ns: u64) {
        bump32(&self.b().latency[latency_bucket(ns)]);
    }

    /// Samples the latency of a message published at `published_ns` (`CLOCK_MONOTONIC`) if
    /// this is one to sample, then counts it (`len` bytes).
    #[inline(always)]
    pub(crate) fn received(&self, len: usize, published_ns: u64) {
        if self.sample_latency_now() {
            self.latency(monotonic_ns().saturating_sub(published_ns));
        }
        self.message(len);
    }
}

/// One participant's counters, copied out of its block (see the [module docs](self)).
///
/// Which fields a role fills is in `docs/observability.md`; a field a role never touches
/// stays 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters {
    /// Messages sent (senders) or received (receivers); for streams, write or read calls
    /// that moved data; for pools, jobs dispatched (dispatcher) or taken (workers).
    pub messages: u64,
    /// Payload bytes of those messages.
    pub bytes: u64,
    /// A receiver's position: the next sequence number (topic) or byte offset (stream) it
    /// will read; 0 where the kind has no per-receiver position.
    pub position: u64,
    /// Messages this receiver lost: overwritten before it read them, or abandoned by a
    /// publisher that died mid-send.
    pub drops: u64,
    /// Sends that found the channel full (queue full, no room in a stream, every topic slot
    /// pinned, no idle worker).
    pub full: u64,
    /// Calls that found nothing to do at once and waited (spun, slept, or both).
    pub blocked: u64,
    /// `FUTEX_WAIT` system calls entered.
    pub futex_waits: u64,
    /// `FUTEX_WAKE` system calls issued (only made when someone sleeps).
    pub futex_wakes: u64,
    /// Samples this receiver pins right now (a level, not a count).
    pub pins: u64,
    /// Waits by how many failed tries they took before success (see [`spin_bucket`]).
    pub spins: [u64; SPIN_BUCKETS],
    /// Sampled publish → receive latencies (see [`latency_bucket`],
    /// [`LATENCY_SAMPLE_EVERY`]).
    pub latency: [u64; LATENCY_BUCKETS],
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            messages: 0,
            bytes: 0,
            position: 0,
            drops: 0,
            full: 0,
            blocked: 0,
            futex_waits: 0,
            futex_wakes: 0,
            pins: 0,
            spins: [0; SPIN_BUCKETS],
            latency: [0; LATENCY_BUCKETS],
        }
    }
}

/// The change of a 32-bit histogram bucket from `earlier` to `now`, across a wrap.
fn bucket_delta(now: u64, earlier: u64) -> u64 {
    u64::from((now as u32).wrapping_sub(earlier as u32))
}

impl Counters {
    /// What was counted between `earlier` and `self` (two snapshots of the same
    /// participant). Counts that went backwards (a reset, or garbage) give 0, except the
    /// histograms' 32-bit buckets, which wrap in earnest on a busy endpoint (about an hour at
    /// a million waits per second) and are subtracted modulo 2^32; `position` and `pins` are
    /// levels and are `self`'s.
    pub fn since(&self, earlier: &Counters) -> Counters {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        Counters {
            messages: d(self.messages, earlier.messages),
            bytes: d(self.bytes, earlier.bytes),
            position: self.position,
            drops: d(self.drops, earlier.drops),
            full: d(self.full, earlier.full),
            blocked: d(self.blocked, earlier.blocked),
            futex_waits: d(self.futex_waits, earlier.futex_waits),
            futex_wakes: d(self.futex_wakes, earlier.futex_wakes),
            pins: self.pins,
            spins: std::array::from_fn(|i| bucket_delta(self.spins[i], earlier.spins[i])),
            latency: std::array::from_fn(|i| bucket_delta(self.latency[i], earlier.latency[i])),
        }
    }

    /// Adds `other`'s counts to these (to sum participants); levels are added too.
    pub fn add(&mut self, other: &Counters) {
        let s = |a: &mut u64, b: u64| *a = a.wrapping_add(b);
        s(&mut self.messages, other.messages);
        s(&mut self.bytes, other.bytes);
        s(&mut self.drops, other.drops);
        s(&mut self.full, other.full);
        s(&mut self.blocked, other.blocked);
        s(&mut self.futex_waits, other.futex_waits);
        s(&mut self.futex_wakes, other.futex_wakes);
        s(&mut self.pins, other.pins);
        self.position = self.position.max(other.position);
        for (a, b) in self.spins.iter_mut().zip(other.spins) {
            s(a, b);
        }
        for (a, b) in self.latency.iter_mut().zip(other.latency) {
            s(a, b);
        }
    }

    /// How many latencies were sampled.
    pub fn latency_samples(&self) -> u64 {
        self.latency.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// The `q`-quantile (0.0 to 1.0) of the sampled latencies, in ns: the middle of the bucket
    /// that holds it (within a quarter of the true value). `None` without samples.
    pub fn latency_quantile(&self, q: f64) -> Option<u64> {
        let total = self.latency_samples();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0u64;
        for (b, &n) in self.latency.iter().enumerate() {
            seen = seen.saturating_add(n);
            if seen >= rank {
                let lo = latency_bucket_floor(b);
                let hi = if b + 1 < LATENCY_BUCKETS { latency_bucket_floor(b + 1) } else { lo + lo / 3 };
                return Some(lo + (hi - lo) / 2);
            }
        }
        None
    }

    /// Copies `block` out with relaxed loads.
    pub(crate) fn load<W64: Load<Value = u64>, W32: Load<Value = u32>>(block: &Block<W64, W32>) -> Counters {
        let l = |w: &W64| w.load(Relaxed);
        Counters {
            messages: l(&block.messages),
            bytes: l(&block.bytes),
            position: l(&block.position),
            drops: l(&block.drops),
            full: l(&block.full),
            blocked: l(&block.blocked),
            futex_waits: l(&block.futex_waits),
            futex_wakes: l(&block.futex_wakes),
            pins: l(&block.pins),
            spins: std::array::from_fn(|i| u64::from(block.spins[i].load(Relaxed))),
            latency: std::array::from_fn(|i| u64::from(block.latency[i].load(Relaxed))),
        }
    }
}

#[cfg(not(loom))]
mod snapshot;
#[cfg(not(loom))]
pub use snapshot::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_buckets_are_log2_of_failed_tries() {
        assert_eq!(spin_bucket(0), 0);
        assert_eq!(spin_bucket(1), 1);
        assert_eq!(spin_bucket(2), 2);
        assert_eq!(spin_bucket(3), 2);
        assert_eq!(spin_bucket(4), 3);
        assert_eq!(spin_bucket(u64::MAX), SPIN_BUCKETS - 1);
        for b in 0..SPIN_BUCKETS {
            assert_eq!(spin_bucket(spin_bucket_floor(b)), b);
        }
    }

    #[test]
    fn latency_buckets_are_half_octaves_from_16_ns() {
        assert_eq!(latency_bucket(0), 0);
        assert_eq!(latency_bucket(16), 0);
        assert_eq!(latency_bucket(23), 0);
        assert_eq!(latency_bucket(24), 1);
        assert_eq!(latency_bucket(32), 2);
        assert_eq!(latency_bucket(u64::MAX), LATENCY_BUCKETS - 1);
        for b in 0..LATENCY_BUCKETS {
            assert_eq!(latency_bucket(latency_bucket_floor(b)), b, "bucket {b}");
            if b > 0 {
                assert_eq!(latency_bucket(latency_bucket_floor(b) - 1), b - 1);
            }
        }
    }

    #[test]
    fn quantiles_come_from_the_bucket_holding_the_rank() {
        let mut c = Counters::default();
        assert_eq!(c.latency_quantile(0.5), None);
        c.latency[latency_bucket(1000)] = 99;
        c.latency[latency_bucket(100_000)] = 1;
        let p50 = c.latency_quantile(0.5).unwrap();
        assert!((768..=1024).contains(&p50), "{p50}");
        let p99 = c.latency_quantile(0.99).unwrap();
        assert!((768..=1024).contains(&p99), "{p99}");
        let max = c.latency_quantile(1.0).unwrap();
        assert!((65_536..=131_072).contains(&max), "{max}");
    }

    #[test]
    fn deltas_saturate_and_keep_levels() {
        let mut a = Counters { messages: 10, position: 7, pins: 2, ..Default::default() };
        let b = Counters { messages: 4, position: 3, pins: 1, ..Default::default() };
        let d = a.since(&b);
        assert_eq!((d.messages, d.position, d.pins), (6, 7, 2));
        assert_eq!(b.since(&a).messages, 0);
        let mut wrapped = Counters::default();
        wrapped.spins[1] = 3;
        let mut before = Counters::default();
        before.spins[1] = u64::from(u32::MAX) - 1;
        assert_eq!(wrapped.since(&before).spins[1], 5, "a bucket's wrap is counted through");
        a.add(&b);
        assert_eq!(a.messages, 14);
    }

    #[test]
    fn a_block_counts_as_its_owner_writes() {
        #[repr(C, align(64))]
        struct Mem([u8; COUNTERS_SIZE]);
        let mut mem = Box::new(Mem([0; COUNTERS_SIZE]));
        // SAFETY: the box is COUNTERS_SIZE bytes, 64-aligned, and outlives the counter.
        let c = unsafe { Counter::from_raw(mem.0.as_mut_ptr()) };
        c.reset(ProcessId::current());
        c.message(10);
        c.messages(2, 6);
        c.drops(3);
        c.spins(5);
        c.latency(1000);
        // SAFETY: as above; the counter is done writing.
        let block = unsafe { &*(mem.0.as_ptr() as *const RoBlock) };
        let got = Counters::load(block);
        assert_eq!((got.messages, got.bytes, got.drops), (3, 16, 3));
        assert_eq!(got.spins[spin_bucket(5)], 1);
        assert_eq!(got.latency_samples(), 1);
        assert_eq!(block.owner.load(Relaxed), u64::from(std::process::id()));
    }
}
