//! The stream's lock-free head/tail protocol, apart from any mapping.
//!
//! This is the single-producer single-consumer ring of Lamport, with the refinements of
//! rtrb: each side keeps its own position in a local variable (it is the only writer of it)
//! and a *cached copy* of the other side's position, re-reading the shared one only when the
//! cached copy says "full" (writer) or "empty" (reader). In steady state each side touches
//! the other's cache line once per batch instead of once per record.
//!
//! The code here knows positions, sizes and frame headers, not memory: the segment glue in
//! `stream/mod.rs` turns a position into an address of the double-mapped ring, and the loom
//! model (`tests/loom_stream.rs`) turns it into an index of a heap buffer. It is public only
//! so that model can drive it (`pub` under `cfg(loom)` only); applications use `StreamWriter`
//! and `StreamReader`, whose errors carry a [`crate::Corrupt`] converted from [`Corruption`].
//!
//! # Positions and invariants
//!
//! `head` (bytes ever committed) and `tail` (bytes ever consumed) are `u64` that only grow;
//! they never wrap in practice (2^64 bytes). A position maps to ring offset `pos & (cap - 1)`
//! (`cap` is a power of two). At every instant:
//!
//! * `tail <= head <= tail + cap`, and both are multiples of [`ALIGN`];
//! * bytes `[tail, head)` are committed records, owned by the reader until it consumes them;
//! * bytes `[head, tail + cap)` are free, owned by the writer;
//! * `head` is stored only by the writer, with Release, after the record's bytes and header;
//!   `tail` only by the reader, with Release, after it has finished reading the bytes.
//!
//! Every value loaded from the shared struct is checked against these invariants before it
//! is used ([`Corruption`] otherwise): the other side may be a corrupt or hostile process.
//!
//! # Framing
//!
//! A record is an 8-byte header followed by the payload, padded to a multiple of [`ALIGN`].
//! The header holds the payload length and, in its upper half, the length xor a constant,
//! so a reader detects a garbage header instead of trusting it.

use crate::event::EventWord;
use crate::sync::{AtomicU64, CachePadded, Load, Ordering};

/// Bytes of the per-record header.
pub const HEADER: u64 = 8;
/// Every record starts at a multiple of this (so headers are aligned `u64`s).
pub const ALIGN: u64 = 8;
/// Xored into the upper half of a header.
const FRAME_CHECK: u32 = 0x5354_524D; // "STRM"

/// Ring bytes taken by a record of `len` payload bytes: header plus payload, rounded up to
/// [`ALIGN`]. `len` must be at most `u32::MAX` (callers check it against the maximum first).
#[inline]
pub fn record_size(len: u64) -> u64 {
    (HEADER + len + (ALIGN - 1)) & !(ALIGN - 1)
}

/// The header word of a record of `len` payload bytes.
#[inline]
pub fn encode_header(len: u32) -> u64 {
    len as u64 | ((len ^ FRAME_CHECK) as u64) << 32
}

/// Validates a header word read from the ring, when `avail` committed bytes start at it.
/// Returns the payload length and the record size.
#[inline]
pub fn decode_header(header: u64, avail: u64, head: u64, tail: u64) -> Result<(u32, u64), Corruption> {
    let len = header as u32;
    if (header >> 32) as u32 != len ^ FRAME_CHECK {
        return Err(Corruption { what: "record header fails its check (garbage in the ring)", head, tail });
    }
    let size = record_size(len as u64);
    if size > avail {
        return Err(Corruption { what: "record header claims more bytes than were committed", head, tail });
    }
    Ok((len, size))
}

/// The shared state breaks an invariant: a peer is corrupt or hostile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corruption {
    /// What was wrong.
    pub what: &'static str,
    /// The write position seen.
    pub head: u64,
    /// The read position seen.
    pub tail: u64,
}

impl std::fmt::Display for Corruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stream ring is corrupt: {} (head {}, tail {})", self.what, self.head, self.tail)
    }
}

impl std::error::Error for Corruption {}

/// Checks the ring invariants for a pair of positions.
#[inline]
fn check(head: u64, tail: u64, cap: u64) -> Result<(), Corruption> {
    if tail > head {
        return Err(Corruption { what: "read position is ahead of the write position", head, tail });
    }
    if head - tail > cap {
        return Err(Corruption { what: "more bytes committed than the ring holds", head, tail });
    }
    if (head | tail) % ALIGN != 0 {
        return Err(Corruption { what: "position not aligned to a record boundary", head, tail });
    }
    Ok(())
}

/// One side's position and the event word its peer sleeps on (each side on a cache-line pair
/// of its own in [`RingShared`]).
#[repr(C)]
#[derive(Debug)]
struct Side {
    pos: AtomicU64,
    event: EventWord,
}

/// The shared part of a stream: at the start of the kind area in the segment, or on the heap
/// in a model. Atomics only, so every bit pattern is a valid value.
#[repr(C)]
#[derive(Debug)]
pub struct RingShared {
    /// `head` and the *readable* event (notified by the writer on commit).
    head: CachePadded<Side>,
    /// `tail` and the *writable* event (notified by the reader on consume).
    tail: CachePadded<Side>,
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<RingShared>() == 256);

/// Offsets of the `head` and `tail` positions in [`RingShared`], for the stream's load-only
/// status view.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) const HEAD_POS_OFFSET: usize = std::mem::offset_of!(RingShared, head.0.pos);
#[cfg_attr(loom, allow(dead_code))]
pub(crate) const TAIL_POS_OFFSET: usize = std::mem::offset_of!(RingShared, tail.0.pos);

/// `(head, tail)` as the words `head` and `tail` hold now, unvalidated: for
/// [`RingShared::positions`] and the load-only words of a status view.
pub(crate) fn positions_of<W: Load<Value = u64>>(head: &W, tail: &W) -> (u64, u64) {
    // Both Acquire: pair with the Release stores in `WriterCore::publish` and
    // `ReaderCore::release`; a snapshot only, the two loads are not atomic together.
    let tail = tail.load(Ordering::Acquire);
    let head = head.load(Ordering::Acquire);
    (head, tail)
}

impl Default for RingShared {
    fn default() -> Self {
        RingShared::new()
    }
}

impl RingShared {
    /// An empty ring's shared state (both positions 0).
    pub fn new() -> RingShared {
        RingShared {
            head: CachePadded(Side { pos: AtomicU64::new(0), event: EventWord::new() }),
            tail: CachePadded(Side { pos: AtomicU64::new(0), event: EventWord::new() }),
        }
    }

    /// `(head, tail)` as stored now, unvalidated (for status displays).
    pub fn positions(&self) -> (u64, u64) {
        positions_of(&self.head.pos, &self.tail.pos)
    }

    /// Notified whenever records are committed (the reader sleeps on it).
    pub(crate) fn readable_event(&self) -> &EventWord {
        &self.head.event
    }

    /// Notified whenever records are consumed (the writer sleeps on it).
    pub(crate) fn writable_event(&self) -> &EventWord {
        &self.tail.event
    }

    /// Wakes everyone sleeping on either side, so they re-check their condition (used when an
    /// endpoint attaches or detaches: a peer's liveness changed without a position changing).
    pub fn nudge(&self) {
        self.head.event.notify();
        self.tail.event.notify();
    }
}

/// Why the writer cannot claim space now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimError {
    /// Fewer than the requested bytes are free; `free` are.
    Full {
        /// Bytes free right now.
        free: u64,
    },
    /// The reader's position breaks an invariant.
    Corrupt(Corruption),
}

/// The writer's side of the protocol (exactly one at a time; see the module docs).
#[derive(Debug)]
pub struct WriterCore {
    head: u64,
    cached_tail: u64,
    cap: u64,
}

impl WriterCore {
    /// Attaches to `shared`, continuing after the previous writer's last commit. Whatever a
    /// previous writer reserved but did not commit lies beyond `head` and is overwritten.
    ///
    /// `cap` must be a power of two and a multiple of [`ALIGN`].
    pub fn attach(shared: &RingShared, cap: u64) -> Result<WriterCore, Corruption> {
        debug_assert!(cap.is_power_of_two() && cap >= ALIGN);
        // Acquire: pairs with the Release store of `tail` in `ReaderCore::release`, so what
        // the reader has finished reading happens-before we overwrite it.
        let tail = shared.tail.pos.load(Ordering::Acquire);
        // Acquire: pairs with the previous writer's Release store in `publish` (a process may
        // take over from a dead writer; its commits are the only state we inherit).
        let head = shared.head.pos.load(Ordering::Acquire);
        check(head, tail, cap)?;
        Ok(WriterCore { head, cached_tail: tail, cap })
    }

    /// The position the next record will start at (for tests and models).
    #[inline]
    #[allow(dead_code)]
    pub fn position(&self) -> u64 {
        self.head
    }

    /// Bytes free according to the cached read position (a lower bound of the truth).
    #[inline]
    pub fn cached_free(&self) -> u64 {
        self.cap - (self.head - self.cached_tail)
    }

    /// Bytes free according to the shared read position, without updating the cache.
    #[inline]
    pub fn free_now(&self, shared: &RingShared) -> Result<u64, Corruption> {
        // Acquire: pairs with the Release store in `ReaderCore::release`.
        let tail = shared.tail.pos.load(Ordering::Acquire);
        self.checked_tail(tail)?;
        Ok(self.cap - (self.head - tail))
    }

    #[inline]
    fn checked_tail(&self, tail: u64) -> Result<(), Corruption> {
        check(self.head, tail, self.cap)?;
        if tail < self.cached_tail {
            return Err(Corruption { what: "read position moved backwards", head: self.head, tail });
        }
        Ok(())
    }

    /// Claims `size` bytes (a [`record_size`], at most `cap`) at [`WriterCore::position`]:
    /// the caller may write them until it calls [`WriterCore::publish`]. Claiming is free of
    /// side effects: a claim that is never published is simply forgotten.
    #[inline]
    pub fn try_claim(&mut self, shared: &RingShared, size: u64) -> Result<u64, ClaimError> {
        debug_assert!(size <= self.cap && size % ALIGN == 0);
        if self.cached_free() < size {
            // Acquire: pairs with the Release store of `tail` in `ReaderCore::release`: the
            // reader's reads of these bytes happen-before our writes to them.
            let tail = shared.tail.pos.load(Ordering::Acquire);
            if let Err(c) = self.checked_tail(tail) {
                // A read position that went backwards but is otherwise consistent only
                // understates the free space: take it, so the error is reported once and
                // the ring goes on working if the reader's real position is restored.
                if check(self.head, tail, self.cap).is_ok() {
                    self.cached_tail = tail;
                }
                return Err(ClaimError::Corrupt(c));
            }
            self.cached_tail = tail;
            let free = self.cached_free();
            if free < size {
                return Err(ClaimError::Full { free });
            }
        }
        Ok(self.head)
    }

    /// Makes the `size` bytes claimed at [`WriterCore::position`] (already filled in, header
    /// included) visible to the reader, and wakes it if it sleeps. Returns whether that took
    /// a `FUTEX_WAKE`.
    #[inline]
    pub fn publish(&mut self, shared: &RingShared, size: u64) -> bool {
        debug_assert!(size <= self.cached_free());
        self.head += size;
        // Release: pairs with the Acquire loads of `head` in `ReaderCore::poll`; the record's
        // bytes and header, written before, are visible to a reader that sees the new head.
        shared.head.pos.store(self.head, Ordering::Release);
        shared.head.event.notify()
    }
}

/// The reader's side of the protocol (exactly one at a time).
#[derive(Debug)]
pub struct ReaderCore {
    tail: u64,
    cached_head: u64,
    cap: u64,
}

impl ReaderCore {
    /// Attaches to `shared`, resuming at the last consumed position: a record a previous
    /// reader was reading but had not consumed is delivered again.
    pub fn attach(shared: &RingShared, cap: u64) -> Result<ReaderCore, Corruption> {
        debug_assert!(cap.is_power_of_two() && cap >= ALIGN);
        // Acquire: pairs with the previous reader's Release store in `release`.
        let tail = shared.tail.pos.load(Ordering::Acquire);
        // Acquire: pairs with the Release store of `head` in `WriterCore::publish`.
        let head = shared.head.pos.load(Ordering::Acquire);
        check(head, tail, cap)?;
        Ok(ReaderCore { tail, cached_head: head, cap })
    }

    /// The position of the next record to read.
    #[inline]
    pub fn position(&self) -> u64 {
        self.tail
    }

    /// The write position last seen.
    #[inline]
    pub fn cached_head(&self) -> u64 {
        self.cached_head
    }

    /// Committed bytes available from [`ReaderCore::position`], re-reading the shared write
    /// position only when the cached one says the ring is empty.
    #[inline]
    pub fn poll(&mut self, shared: &RingShared) -> Result<u64, Corruption> {
        if self.cached_head == self.tail {
            // Acquire: pairs with the Release store of `head` in `WriterCore::publish`: the
            // records below the new head are fully written before we read them.
            let head = shared.head.pos.load(Ordering::Acquire);
            check(head, self.tail, self.cap)?;
            if head < self.cached_head {
                return Err(Corruption { what: "write position moved backwards", head, tail: self.tail });
            }
            self.cached_head = head;
        }
        Ok(self.cached_head - self.tail)
    }

    /// Forgets the cached write position, so that the next [`ReaderCore::poll`] re-reads
    /// the shared one: after a corrupt record header, a write position restored by then is
    /// taken instead of the bad one cached.
    #[inline]
    pub fn resync(&mut self) {
        self.cached_head = self.tail;
    }

    /// Whether the shared write position is ahead of ours (without updating the cache).
    #[inline]
    pub fn has_data(&self, shared: &RingShared) -> bool {
        // Acquire: pairs with the Release store of `head` in `WriterCore::publish`.
        shared.head.pos.load(Ordering::Acquire) != self.tail
    }

    /// Bytes committed and not consumed, per the shared write position (for status).
    pub fn pending_now(&self, shared: &RingShared) -> u64 {
        // Acquire: pairs with the Release store of `head` in `WriterCore::publish`.
        let head = shared.head.pos.load(Ordering::Acquire);
        head.saturating_sub(self.tail).min(self.cap)
    }

    /// Consumes `size` bytes (one or more whole records, at most what `poll` returned): hands
    /// them back to the writer and wakes it if it sleeps. Returns whether that took a
    /// `FUTEX_WAKE`.
    #[inline]
    pub fn release(&mut self, shared: &RingShared, size: u64) -> bool {
        debug_assert!(size <= self.cached_head - self.tail);
        self.tail += size;
        // Release: pairs with the Acquire loads of `tail` in `WriterCore::try_claim`/`attach`:
        // our reads of the consumed bytes happen-before the writer reuses them.
        shared.tail.pos.store(self.tail, Ordering::Release);
        shared.tail.event.notify()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn framing_round_trips_and_rejects_garbage() {
        for len in [0u32, 1, 7, 8, 9, 4096, u32::MAX - 8] {
            let size = record_size(len as u64);
            assert_eq!(size % ALIGN, 0);
            assert!(size >= HEADER + len as u64 && size < HEADER + len as u64 + ALIGN);
            assert_eq!(decode_header(encode_header(len), size, 0, 0), Ok((len, size)));
            assert!(decode_header(encode_header(len), size - ALIGN, 0, 0).is_err());
        }
        assert!(decode_header(0, 64, 0, 0).is_err());
        assert!(decode_header(u64::MAX, 64, 0, 0).is_err());
    }

    #[test]
    fn claims_wrap_and_respect_the_reader() {
        let s = RingShared::new();
        let mut w = WriterCore::attach(&s, 64).unwrap();
        let mut r = ReaderCore::attach(&s, 64).unwrap();
        assert_eq!(r.poll(&s), Ok(0));
        for round in 0..10u64 {
            assert_eq!(w.try_claim(&s, 48), Ok(round * 48));
            w.publish(&s, 48);
            assert_eq!(w.try_claim(&s, 24), Err(ClaimError::Full { free: 16 }));
            assert_eq!(r.poll(&s), Ok(48));
            r.release(&s, 48);
        }
    }

    #[test]
    fn hostile_positions_are_errors() {
        let s = RingShared::new();
        s.tail.pos.store(8, Ordering::Relaxed);
        assert!(WriterCore::attach(&s, 64).is_err());
        s.head.pos.store(8 + 72, Ordering::Relaxed);
        assert!(ReaderCore::attach(&s, 64).is_err());
        s.head.pos.store(16, Ordering::Relaxed);
        let mut w = WriterCore::attach(&s, 64).unwrap();
        let mut r = ReaderCore::attach(&s, 64).unwrap();
        s.tail.pos.store(3, Ordering::Relaxed);
        assert!(matches!(w.try_claim(&s, 64), Err(ClaimError::Corrupt(_))));
        s.tail.pos.store(8, Ordering::Relaxed);
        assert_eq!(r.poll(&s), Ok(8));
        r.release(&s, 8);
        s.head.pos.store(1000, Ordering::Relaxed);
        assert!(r.poll(&s).is_err());
    }
}
