//! The topic protocol: slots, seqlock copies, pins, multi-publisher claims, and recovery.
//!
//! This file knows nothing about files or mappings: it works on a [`Shared`] view of plain
//! references, which the segment glue builds from a mapping and the loom models
//! (`tests/loom_topic.rs`) build on the heap. Under `--cfg loom` this module is public, and
//! what the models use is `pub`; in a normal build the module is crate-private.
//!
//! # Memory
//! * `C = history + spare` **slots**, each a 128-byte header (and, for messages larger than
//!   [`INLINE_DATA`], a data area of the slot size). The header's first line holds the
//!   *guard words*: `w0` = id+1 of the participant writing the slot (0 = no writer), `w1` and
//!   `w2` = *pin bits*, one per participant (ids 0..120). Its second line holds what copy
//!   readers poll and read: the committed sequence number `seq` (0 = nothing valid), `len`,
//!   `ts` and small payloads inline, so a small message crosses between cores as one line.
//! * An **index** of `L` (a power of two ≥ 2C) words maps a sequence number `k` to its
//!   slot: `index[k mod L] = (k mod 2^40) << 24 | slot`. A reader that finds another tag there
//!   knows `k` is not (or no longer) reachable through the index.
//! * `tail` is the last *claimed* sequence number, `committed_max` the highest committed one.
//!
//! # Publishing (any number of publishers)
//! 1. Pick a slot round-robin (`next_slot.fetch_add`) and acquire it: CAS `w0` from 0 to
//!    `me+1`, then check the pin words are 0 (all SeqCst: a Dekker handshake with pinning
//!    readers, who set their bit and then check `w0`). Pinned or busy slots are skipped; if
//!    every slot is pinned the publish fails instead of waiting.
//! 2. Claim the sequence number: store `k = tail+1` in the participant entry's `PENDING`
//!    word, then CAS `tail` to `k`. The pending word is written *before* the claim, so for
//!    every claimed `k` some entry named it: readers can tell a slow claimant (alive) from a
//!    dead one.
//! 3. Store `seq = 0` and a Release fence, *then* write the payload: a copy reader that sees
//!    any new byte also sees `seq` changed (the seqlock rule).
//! 4. Store `len`, `ts`, then `seq = k` (Release), then the index entry (Release), clear
//!    `w0` (a plain store), clear `PENDING`, raise `committed_max`, notify the event word.
//!
//! Steps 2 and 3 may come in either order. Copy-publishes of small messages claim first, so
//! that step 3 and the stores of step 4 up to `seq = k` hit the reader's line in one burst
//! with no locked instruction between them; loans and large messages write first, so a slow
//! write never holds back the sequence numbers of other publishers. A loan of an inline
//! slot is written into a buffer of its own and sent as a small copy-publish: it takes the
//! slot (step 1) when lent, and does the rest at its send.
//!
//! # Reading
//! * **Copy** (never torn): load `seq == k` (Acquire), copy `len` (clamped) bytes, Acquire
//!   fence, re-load `seq`: unchanged means no writer touched the slot during the copy.
//! * **Pin** (zero copy): set our pin bit (SeqCst), check no writer bits (SeqCst), check
//!   `seq == k`. While the bit is set no publisher can acquire the slot, so the bytes stay.
//!   A payload outside the header has its first and last lines prefetched before the pin
//!   bit is set (`Shared::prefetch_payload`, the length read racily: only a hint): the
//!   pin's RMW is serialising, so loads issued after it would start their misses only once
//!   it is done, while the prefetches are in flight together with it.
//!
//! # Cache lines per pinned message
//! Only slots larger than [`INLINE_DATA`] are pinned: a receive by reference of an inline
//! payload copies it ([`Shared::read_inline`], a copy read of the line the probe pulled), so
//! it moves no guard line at all, and an inline loan stores nothing in the slot before its
//! send, so the reader line crosses once. For the pinned ones, in a steady ping-pong a
//! loan/send → pinned receive → unpin moves, per message: the reader line (publisher's
//! `seq = 0` invalidates the polling reader, the commit writes it again, the reader pulls
//! it back), the guard line twice (the publisher's CAS on `w0` takes it from the reader
//! that pinned and unpinned the slot's previous message; the reader's pin RMW takes it
//! back), and the payload's first and last lines (written by the publisher, then read by
//! the reader; prefetched as above). The guard line transfers are the pin handshake's cost;
//! the rest is the message itself.
//!
//! # Recovery
//! * A publisher killed while holding a slot leaves its id in `w0`: whoever reclaims its
//!   participant entry zeroes the slot's `seq` and clears the writer bits.
//! * A subscriber killed while pinning leaves its bits: reclaiming its entry clears its bit
//!   in every slot (idempotent, so a reclaimer that dies mid-way is simply redone).
//! * A sequence number claimed by a publisher that died before committing is *abandoned*:
//!   `tail` passed it, the index never shows it, and no live participant has it pending.
//!   Readers report it as a gap.
//!
//! # Lossless delivery (`block` and `fail` topics)
//! The policy is in the header; an `overwrite` topic's publishers never read what follows.
//! * A **reliable subscriber** keeps its *cursor* (the next sequence number it will read) in
//!   its participant entry's [`AUX_CURSOR`] word (0 = not reliable). It moves it forward
//!   with a CAS (AcqRel) *after* it finished reading everything before it — so a publisher
//!   that reads the cursor (Acquire) overwrites only what was read. A CAS, not a store, so
//!   that the publishers' marks in the word are never lost: [`CURSOR_WAITING`] and
//!   [`CURSOR_EVICTED`]. A pinned read moves the cursor at once: publishers skip pinned
//!   slots anyway.
//! * A **publisher** holding slot `s` (acquired, not yet written), whose old message is `m`,
//!   may overwrite it iff every reliable cursor is above `m` ([`Shared::take_slot_lossless`]).
//!   Otherwise it gives the slot back untouched (its message stays readable) and turns the
//!   round-robin counter back, so slots keep filling in order.
//! * **Cost.** Each publisher keeps its last scan of the cursors (the slowest one, and the
//!   *epoch* it loaded before scanning). It scans again only when the old message of the
//!   slot it takes reaches that slowest cursor, or when the epoch moved (a subscriber
//!   joined). A scan reads the *reliable set* (a bitmap in the event line: a joiner sets its
//!   bit first, leaving or reclaiming clears it) and one participant line per member. In
//!   the steady state that is one scan per `slots` messages, whatever the number of reliable
//!   subscribers; between scans a publish adds one load of the epoch, in a line it writes
//!   anyway.
//! * **Joining** (SYNC POINT, a Dekker handshake, all SeqCst): a new reliable subscriber
//!   sets its bit, stores its cursor `c` and bumps the epoch, then walks the messages from
//!   `c` to `tail`: one whose slot a writer holds (or that is gone) moves `c` past it. A
//!   publisher takes the slot's writer word (its CAS), then loads the epoch. Either it sees
//!   the new epoch and scans, seeing the cursor, or the subscriber sees its writer word and
//!   starts after that message. Messages that no publisher was taking stay until the
//!   subscriber reads them, so a late joiner gets the oldest message kept, minus at most
//!   one per publisher writing at that moment. Seeking back is a join. The join's cursor
//!   stores are CASes that keep the publishers' marks: an eviction made meanwhile is never
//!   undone (the join gives up, and the subscriber goes on lossy), and a waiting mark
//!   stays, so the subscriber's next move wakes the publisher.
//! * **Waiting** (`block`): the publisher loads the `space` futex word, then sets
//!   [`CURSOR_WAITING`] in each cursor that holds it back (a CAS on that very word), then
//!   sleeps on `space` (armed as any event word). A subscriber whose cursor CAS finds the
//!   flag clears it and bumps `space` (a system call only if someone sleeps): the bump comes
//!   after the publisher's load, so the sleep cannot miss it. Subscribers never touch
//!   `space` otherwise. A waiting publisher also wakes every 10 ms to check liveness.
//! * **Dead and stuck subscribers.** A cursor whose owner is dead is dropped by reclaiming
//!   its entry (the scan reads only entries of registered subscribers). A live one that has
//!   not moved for the topic's reliable timeout while publishers were held back is evicted
//!   ([`Shared::evict_stuck`]): the publisher CASes its word from the value it saw to
//!   [`CURSOR_EVICTED`]. The subscriber's next cursor CAS fails on it (nothing stored); its
//!   next receive reports `Evicted` once and it goes on lossy.
//! * **The held-since stamps.** The clock of that timeout lives in the segment, not in a
//!   publisher, so that publishers that come and go (each giving up after its own short
//!   timeout) add up to one reliable timeout, and so that every stuck subscriber runs its
//!   clock at once, not one after the other. The topic keeps one *held* word per
//!   participant entry, after the payloads: [`held_stamp`]`(ms, cursor)`, the time
//!   (`CLOCK_MONOTONIC` milliseconds, one clock for every process of the machine, low 32
//!   bits) at which a held-back publisher first found that entry's cursor at this value,
//!   and the cursor's low 32 bits (its *tag*). A held-back publisher looks at every
//!   reliable cursor that has messages left to read (at most the newest committed one): a
//!   held word whose tag is not the cursor's (it moved since), or that is empty, or whose
//!   time is ahead of now (garbage) gets a fresh stamp, a CAS from what it loaded (so a slow
//!   publisher never writes its older time over a newer stamp); one whose time is more than
//!   the reliable timeout ago is evicted, by the CAS from the cursor value it loaded before
//!   the stamp, so a subscriber that moved in between is never evicted. Subscribers never
//!   write their held word on the read path (the tag tells a stale stamp apart); joining
//!   (and seeking back) clears it, as does leaving and reclaiming the entry, so a cursor
//!   that comes back to an old value starts a new clock. A publisher that gives up leaves
//!   its stamps: the next one, in any process, goes on with the same clock.
//! * **Hostile words.** A garbage cursor in a live subscriber's entry holds publishers back
//!   for at most the reliable timeout (then it is evicted); a garbage epoch only causes a
//!   scan; a garbage bit in the reliable set is ignored unless its entry is a registered
//!   subscriber; the policy word is validated when the header is read (out of range: the
//!   topic does not open, a typed error). A garbage held word is at worst a stamp made
//!   now (a time ahead is taken as now and rewritten): it delays an eviction by at most
//!   one reliable timeout, and evicts only a subscriber whose cursor stays where the word
//!   names it (a moving one's tag changes under it).

use crate::participants::{EntryState, Participant, ParticipantTable};
use crate::sync::{dekker_fence, fence, spin_hint, AtomicU32, AtomicU64, CachePadded, Load, Ordering};

/// Participants that can pin (and so can be registered on a topic).
pub(crate) const MAX_TOPIC_PARTICIPANTS: usize = 120;
/// `aux` word of a publisher's participant entry holding the sequence number it is claiming.
pub const AUX_PENDING: usize = 0;
/// `aux` words of a subscriber's participant entry recording the slots it pins (`slot + 1`,
/// 0 = unused): a pin bit is honoured only if its owner's record names the slot.
pub(crate) const AUX_PIN_RECORDS: std::ops::Range<usize> = 1..5;
/// Pins a subscriber can record (a larger pin budget stops recording, see [`PIN_UNTRACKED`]).
pub(crate) const PIN_RECORDS: usize = 4;
/// Stored in the first pin record by a subscriber whose pin budget exceeds [`PIN_RECORDS`]:
/// every pin bit of that (live, registered) subscriber is honoured.
pub(crate) const PIN_UNTRACKED: u64 = u64::MAX;
/// How far `tail` may honestly run ahead of `committed_max`: claims beyond the newest
/// commit are in flight (one per live publisher at most) or abandoned by publishers that
/// died with no commit since. Beyond this bound plus the slot count, the words are garbage.
pub(crate) const MAX_CLAIMS_AHEAD: u64 = 2 * MAX_TOPIC_PARTICIPANTS as u64;
/// `aux` word of a *reliable* subscriber's participant entry: its cursor, the next sequence
/// number it will read (0 = not reliable), with the flags below. Shares the index of
/// [`AUX_PENDING`], which only publishers use.
pub const AUX_CURSOR: usize = 0;
/// Cursor flag: a publisher waits for this subscriber (it bumps the `space` futex when it
/// next moves its cursor).
pub const CURSOR_WAITING: u64 = 1 << 62;
/// Cursor value of a reliable subscriber a publisher evicted (it stood still for the
/// topic's reliable timeout): publishers ignore it; it learns on its next receive.
pub const CURSOR_EVICTED: u64 = 1 << 63;
/// The sequence-number bits of a cursor word.
pub const CURSOR_SEQ: u64 = CURSOR_WAITING - 1;

/// The bits of a cursor that a held word keeps (its *tag*; see [`held_stamp`]).
const HELD_TAG: u64 = u32::MAX as u64;

/// The held word saying that a publisher held back by a reliable cursor at `cursor` first
/// found it there at `now_ms` (`CLOCK_MONOTONIC` milliseconds): the time's low 32 bits
/// over the cursor's low 32 bits. Never 0, which means "no stamp".
pub fn held_stamp(now_ms: u64, cursor: u64) -> u64 {
    let w = (now_ms << 32) | (cursor & CURSOR_SEQ & HELD_TAG);
    if w == 0 {
        1 << 32
    } else {
        w
    }
}

/// Where [`Shared::evict_stuck`] stops, for the models: `AfterStamp` is a publisher that
/// dies (or gives up) right after its first stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldCrash {
    /// Never: the look runs to its end.
    Never,
    /// Right after the first held word it stamped.
    AfterStamp,
}

/// In which order [`Shared::publish`] writes a message and claims its sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishOrder {
    /// Write, then claim and commit: a reader that sees the sequence number pending waits
    /// the shortest time (large messages).
    WriteFirst,
    /// Claim, then write and commit in one burst: the reader's line of the slot is written
    /// once (`seq = 0`, payload, `len`, `ts`, `seq = k`) with no locked instruction in
    /// between, which would let a polling reader take the line back half-way (small
    /// messages).
    ClaimFirst,
}

impl PublishOrder {
    /// Largest message that claims before it writes.
    pub const CLAIM_FIRST_MAX: usize = 4096;

    /// The order a copy-send of `len` bytes takes.
    #[inline(always)]
    pub fn for_len(len: usize) -> PublishOrder {
        if len > PublishOrder::CLAIM_FIRST_MAX {
            PublishOrder::WriteFirst
        } else {
            PublishOrder::ClaimFirst
        }
    }
}

/// Where [`Shared::publish`] stops, for the models: a publisher killed at that instant.
/// Production passes `Never`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishCrash {
    /// Never: the message is published.
    Never,
    /// After the first half of the payload is written (in `ClaimFirst` order the sequence
    /// number is claimed by then; in `WriteFirst` it is not).
    MidCopy,
    /// With the payload written and the sequence number claimed, before the commit.
    BeforeCommit,
}

/// Role numbers in the participant table.
pub const ROLE_PUBLISHER: u32 = 1;
/// Role number of a subscriber.
pub const ROLE_SUBSCRIBER: u32 = 2;

const WRITER_MASK: u64 = 0xff;
const TAG_BITS: u32 = 40;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
const SLOT_BITS: u32 = 24;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
/// Most slots a topic can have (the index packs a slot number into 24 bits).
pub(crate) const MAX_SLOTS: u64 = SLOT_MASK;

/// The topic's control block: one cache-line pair per hot word.
#[repr(C)]
#[derive(Debug)]
pub struct Control {
    pub(crate) tail: CachePadded<AtomicU64>,
    pub(crate) committed_max: CachePadded<AtomicU64>,
    pub(crate) next_slot: CachePadded<AtomicU64>,
    pub(crate) event: CachePadded<EventLine>,
}

/// The event word's line: what subscribers sleep on, and the two rarely written words of
/// lossless delivery (in what was padding, so a topic made before them reads them as 0).
#[repr(C)]
#[derive(Debug)]
pub struct EventLine {
    /// The futex subscribers sleep on (an `EventWord`), bumped by every commit.
    pub(crate) event: AtomicU32,
    /// The futex publishers of a `block` topic sleep on: a reliable subscriber bumps it
    /// when it finds [`CURSOR_WAITING`] in its cursor word.
    pub(crate) space: AtomicU32,
    /// Bumped by every subscriber that joins the reliable set (or seeks back): a publisher
    /// that sees it unchanged since its last scan of the cursors trusts that scan.
    pub(crate) epoch: AtomicU64,
    /// One bit per participant that is (or was, until it leaves or its entry is reclaimed)
    /// a reliable subscriber: the entries a scan of the cursors reads, so its cost follows the number of
    /// reliable subscribers, not the size of the table. A bit of anything else is ignored.
    pub(crate) reliable: [AtomicU64; 2],
}

/// Bytes of [`Control`] in the segment.
pub(crate) const CONTROL_BYTES: usize = 512;
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Control>() == CONTROL_BYTES);

impl Control {
    /// A zeroed control block (for heap-backed models and tests).
    #[allow(dead_code)]
    pub fn new() -> Control {
        Control {
            tail: CachePadded(AtomicU64::new(0)),
            committed_max: CachePadded(AtomicU64::new(0)),
            next_slot: CachePadded(AtomicU64::new(0)),
            event: CachePadded(EventLine {
                event: AtomicU32::new(0),
                space: AtomicU32::new(0),
                epoch: AtomicU64::new(0),
                reliable: [AtomicU64::new(0), AtomicU64::new(0)],
            }),
        }
    }
}

/// One slot's header: two cache lines. The first holds the guard words, which publishers
/// and pinning subscribers fight over; the second holds what a copy reader polls and reads —
/// `seq`, `len`, `ts` and, for messages of at most [`INLINE_DATA`] bytes, the payload itself —
/// so that a copy read of a small message moves exactly one line between the cores, and the
/// publisher's bookkeeping on the guard line after the commit never disturbs the reader.
#[repr(C, align(128))]
#[derive(Debug)]
pub struct SlotHeader {
    pub(crate) w0: AtomicU64,
    /// Pin bits of participants 0..64.
    pub w1: AtomicU64,
    pub(crate) w2: AtomicU64,
    _guard_pad: [u64; 5],
    pub(crate) seq: AtomicU64,
    pub(crate) len: AtomicU64,
    pub(crate) ts: AtomicU64,
    _inline: [u64; 5],
}

/// Bytes of payload a slot header carries inline (in the line of `seq`, `len` and `ts`).
pub(crate) const INLINE_DATA: usize = 40;
/// Offset of the inline payload in a slot header.
pub(crate) const INLINE_OFFSET: usize = 88;

const _: () = {
    assert!(std::mem::size_of::<SlotHeader>() == 128);
    assert!(std::mem::offset_of!(SlotHeader, seq) == 64, "seq must start the reader's line");
    assert!(std::mem::offset_of!(SlotHeader, _inline) == INLINE_OFFSET);
    assert!(INLINE_OFFSET + INLINE_DATA == 128);
};

impl SlotHeader {
    /// A free, empty slot header (for heap-backed models and tests).
    #[allow(dead_code)]
    pub fn new() -> SlotHeader {
        SlotHeader {
            w0: AtomicU64::new(0),
            w1: AtomicU64::new(0),
            w2: AtomicU64::new(0),
            _guard_pad: [0; 5],
            seq: AtomicU64::new(0),
            len: AtomicU64::new(0),
            ts: AtomicU64::new(0),
            _inline: [0; 5],
        }
    }
}

/// Where slot payloads live. In production a raw region of the mapping; under loom a heap
/// array of atomic bytes, so the model sees every racy byte access.
#[derive(Debug, Clone, Copy)]
pub struct DataRegion<'a> {
    #[cfg(not(loom))]
    pub(crate) base: *mut u8,
    #[cfg(not(loom))]
    pub(crate) _life: std::marker::PhantomData<&'a [u8]>,
    /// The payload bytes (under loom: a heap array the model owns).
    #[cfg(loom)]
    pub bytes: &'a [crate::sync::AtomicU8],
    /// Bytes from one slot's payload to the next.
    pub stride: usize,
    /// Payload capacity of a slot.
    pub slot_size: usize,
}

impl DataRegion<'_> {
    /// Copies `src` into slot `s`.
    ///
    /// # Safety
    /// `s < slots` and `src.len() <= slot_size`; the caller holds the slot's writer bits.
    #[inline]
    pub unsafe fn write(&self, s: usize, src: &[u8]) {
        debug_assert!(src.len() <= self.slot_size);
        #[cfg(not(loom))]
        // SAFETY: per the contract the destination is inside slot `s` of the mapping, and we
        // hold the writer bits, so no other writer touches it (readers may read it racily;
        // they validate with the seqlock).
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.base.add(s * self.stride), src.len())
        };
        #[cfg(loom)]
        for (i, b) in src.iter().enumerate() {
            self.bytes[s * self.stride + i].store(*b, Ordering::Relaxed);
        }
    }

    /// Copies `dst.len()` bytes of slot `s` into `dst` (possibly torn; validate afterwards).
    ///
    /// # Safety
    /// `s < slots` and `dst.len() <= slot_size`.
    #[inline]
    pub(crate) unsafe fn read(&self, s: usize, dst: &mut [u8]) {
        #[cfg(not(loom))]
        // SAFETY: the source is inside slot `s`; a concurrent writer can make the bytes
        // inconsistent but not out of bounds, and the caller discards torn copies.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.add(s * self.stride), dst.as_mut_ptr(), dst.len())
        };
        #[cfg(loom)]
        for (i, b) in dst.iter_mut().enumerate() {
            *b = self.bytes[s * self.stride + i].load(Ordering::Relaxed);
        }
    }

    /// The first byte of slot `s`.
    #[cfg(not(loom))]
    pub(crate) fn slot_ptr(&self, s: usize) -> *mut u8 {
        // SAFETY: callers pass s < slots, so the offset is inside the data region.
        unsafe { self.base.add(s * self.stride) }
    }
}

/// Everything the protocol touches, as references.
#[derive(Debug, Clone, Copy)]
pub struct Shared<'a> {
    /// The control block.
    pub ctl: &'a Control,
    /// The sequence-number index (a power of two of entries).
    pub index: &'a [AtomicU64],
    /// The slot headers.
    pub slots: &'a [SlotHeader],
    /// The slot payloads.
    pub data: DataRegion<'a>,
    /// The segment's participant table.
    pub participants: ParticipantTable<'a>,
    /// The held words of the reliable cursors, one per participant entry (see
    /// [`held_stamp`] and [`Shared::evict_stuck`]).
    pub held: &'a [AtomicU64],
}

/// Where sequence number `k` stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Committed, in this slot.
    Found(usize),
    /// Not claimed yet.
    NotYet,
    /// Beyond the next sequence number to be claimed (`k > tail + 1`): an in-order cursor
    /// never gets there honestly, so either `tail` went backwards (corrupt) or a caller asked
    /// for the future.
    Ahead,
    /// Claimed, not committed (or abandoned by a dead publisher: see `claimant_alive`).
    Pending,
    /// Overwritten: older than the history kept.
    Evicted,
}

/// Why acquiring a slot failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireError {
    /// Every slot is pinned by subscribers or being written.
    AllBusy,
}

/// Why a pin failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinError {
    /// The slot no longer holds `k` (or a writer is taking it).
    Gone,
}

/// The pin word (`w1` or `w2`) and bit of a participant.
#[inline]
fn pin_bit(slot: &SlotHeader, participant: usize) -> (&AtomicU64, u64) {
    if participant < 64 {
        (&slot.w1, 1u64 << participant)
    } else {
        (&slot.w2, 1u64 << (participant - 64))
    }
}

impl SlotHeader {
    /// Whether any participant pins this slot.
    #[inline]
    fn pinned(&self, order: Ordering) -> bool {
        slot_pinned(&self.w1, &self.w2, order)
    }
}

/// Whether a slot whose pin words are `w1` and `w2` is pinned by anyone: for the slot
/// header's own words and for the load-only ones of a status view.
#[inline]
pub(crate) fn slot_pinned<W: Load<Value = u64>>(w1: &W, w2: &W, order: Ordering) -> bool {
    w1.load(order) | w2.load(order) != 0
}

impl<'a> Shared<'a> {
    #[inline]
    fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Acquires a free slot for writing by participant `me`: takes its writer word. Skips
    /// pinned and busy slots. The slot's old message stays readable until [`begin_write`].
    ///
    /// [`begin_write`]: Shared::begin_write
    pub fn acquire_slot(&self, me: usize) -> Result<usize, AcquireError> {
        let n = self.slot_count();
        let mine = me as u64 + 1;
        for _ in 0..n {
            let s = (self.ctl.next_slot.fetch_add(1, Ordering::Relaxed) % n as u64) as usize;
            let slot = &self.slots[s];
            // No load first: a CAS straight away takes the guard line for writing in one
            // transfer, where a load would share it and the CAS then upgrade it (the line
            // moves to subscribers whenever they pin).
            // SYNC POINT (Dekker with `pin`): our CAS on w0 and loads of the pin words are
            // SeqCst, as are the reader's fetch_or on its pin word and its load of w0; at
            // least one side sees the other and backs off.
            if slot.w0.compare_exchange(0, mine, Ordering::SeqCst, Ordering::Relaxed).is_err() {
                continue;
            }
            dekker_fence();
            if slot.pinned(Ordering::SeqCst) {
                slot.w0.store(0, Ordering::Release);
                continue;
            }
            return Ok(s);
        }
        Err(AcquireError::AllBusy)
    }

    /// Invalidates the old message of acquired slot `s`, before its bytes are touched.
    #[inline]
    pub fn begin_write(&self, s: usize) {
        // Pairs with the Acquire fence in `read_copy`: a reader that sees any byte we write
        // next also sees this.
        self.slots[s].seq.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
    }

    /// Gives a slot back without publishing (an unsent loan). Its old message is gone.
    pub(crate) fn abandon_slot(&self, s: usize) {
        self.slots[s].w0.store(0, Ordering::Release);
    }

    /// Claims the next sequence number for participant `me`, recording it as pending first.
    pub fn claim_seq(&self, me: &Participant) -> u64 {
        let pending = &me.aux[AUX_PENDING];
        let mut t = self.ctl.tail.load(Ordering::Relaxed);
        loop {
            // Record before claiming. Relaxed is enough: the CAS below is a release, so a
            // reader whose Acquire load of `tail` sees `k` also sees this store (see
            // `claimant_alive`). Wrapping: a hostile `tail` near u64::MAX must not panic us.
            let k = t.wrapping_add(1);
            pending.store(k, Ordering::Relaxed);
            match self.ctl.tail.compare_exchange_weak(t, k, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => return k,
                Err(now) => {
                    t = now;
                    spin_hint();
                }
            }
        }
    }

    /// Publishes `data` in acquired slot `s` as participant `me`: the whole write side of a
    /// send, in `order`, stamped with `now()` (read where the order needs it). Returns the
    /// sequence number it claimed: committed unless the model stopped at `crash` (0 when it
    /// stopped before claiming one).
    ///
    /// # Safety
    ///
    /// `s` came from [`acquire_slot`](Self::acquire_slot) (so `s < slots` and this publisher
    /// holds its writer bits) and `data` fits the slot.
    #[inline(always)]
    pub unsafe fn publish(
        &self,
        me: usize,
        s: usize,
        data: &[u8],
        order: PublishOrder,
        now: impl FnOnce() -> u64,
        crash: PublishCrash,
    ) -> u64 {
        let part = self.participants.entry(me);
        let written = match crash {
            PublishCrash::MidCopy => &data[..data.len() / 2],
            _ => data,
        };
        match order {
            PublishOrder::WriteFirst => {
                self.begin_write(s);
                // SAFETY: the caller's promise.
                unsafe { self.data.write(s, written) };
                if crash == PublishCrash::MidCopy {
                    return 0;
                }
                if crash == PublishCrash::BeforeCommit {
                    return self.claim_seq(part);
                }
                self.publish_written(me, s, data.len(), now())
            }
            PublishOrder::ClaimFirst => {
                let k = self.claim_seq(part);
                let ts = now();
                self.begin_write(s);
                // SAFETY: the caller's promise.
                unsafe { self.data.write(s, written) };
                if crash != PublishCrash::Never {
                    return k;
                }
                self.commit(part, s, k, data.len(), ts);
                k
            }
        }
    }

    /// Publishes acquired slot `s`, whose `len` bytes are written already (a loan), as
    /// participant `me`: claims its sequence number and commits it, stamped `ts`. Returns
    /// the sequence number.
    #[inline]
    pub fn publish_written(&self, me: usize, s: usize, len: usize, ts: u64) -> u64 {
        let part = self.participants.entry(me);
        let k = self.claim_seq(part);
        self.commit(part, s, k, len, ts);
        k
    }

    /// Publishes slot `s` (holding `len` bytes already written) as sequence number `k`.
    pub fn commit(&self, me: &Participant, s: usize, k: u64, len: usize, ts: u64) {
        let slot = &self.slots[s];
        slot.len.store(len as u64, Ordering::Relaxed);
        slot.ts.store(ts, Ordering::Relaxed);
        // Pairs with the Acquire loads of `seq` in `read_copy` and `pin`.
        slot.seq.store(k, Ordering::Release);
        // Pairs with the Acquire load of the index in `lookup`.
        self.index[(k as usize) & (self.index.len() - 1)]
            .store(((k & TAG_MASK) << SLOT_BITS) | s as u64, Ordering::Release);
        // A plain store: `w0` holds nothing but the writer (pins live in `w1`/`w2`).
        slot.w0.store(0, Ordering::Release);
        // After the index: a reader that sees PENDING cleared also sees the index entry.
        me.aux[AUX_PENDING].store(0, Ordering::Release);
        self.ctl.committed_max.fetch_max(k, Ordering::Release);
    }

    /// Last claimed sequence number.
    #[inline]
    pub(crate) fn tail(&self) -> u64 {
        self.ctl.tail.load(Ordering::Acquire)
    }

    /// Highest committed sequence number (0: none yet).
    #[inline]
    pub(crate) fn committed_max(&self) -> u64 {
        self.ctl.committed_max.load(Ordering::Acquire)
    }

    /// Whether slot `s` holds committed message `k`: the fast path of an in-order reader,
    /// which guesses the slot after the one it read last (publishers fill slots round-robin)
    /// and so touches only that slot's lines, not `tail` or the index.
    #[inline]
    pub(crate) fn probe(&self, s: usize, k: u64) -> bool {
        // Pairs with the Release store of `seq` in `commit`.
        self.slots.get(s).is_some_and(|slot| slot.seq.load(Ordering::Acquire) == k)
    }

    /// Finds sequence number `k` (k >= 1).
    #[inline]
    pub fn lookup(&self, k: u64) -> Lookup {
        let tail = self.tail();
        if k > tail {
            return if k - 1 > tail { Lookup::Ahead } else { Lookup::NotYet };
        }
        match self.lookup_index(k) {
            // An entry from an earlier lap: k is pending, unless it is too old to be kept.
            Lookup::NotYet if self.tail().saturating_sub(k) >= self.index.len() as u64 => Lookup::Evicted,
            Lookup::NotYet => Lookup::Pending,
            other => other,
        }
    }

    /// Finds `k` through its index entry alone, without reading `tail` (which publishers
    /// write on every claim): `NotYet` here means "not committed", whether claimed or not.
    #[inline]
    pub(crate) fn lookup_index(&self, k: u64) -> Lookup {
        // Pairs with the Release store of the index entry in `commit`.
        let e = self.index[(k as usize) & (self.index.len() - 1)].load(Ordering::Acquire);
        let tag = e >> SLOT_BITS;
        let want = k & TAG_MASK;
        if tag == want {
            let s = (e & SLOT_MASK) as usize;
            if s >= self.slot_count() {
                return Lookup::Evicted; // corrupt entry: never index out of bounds
            }
            return if self.slots[s].seq.load(Ordering::Acquire) == k { Lookup::Found(s) } else { Lookup::Evicted };
        }
        // Is the entry's tag older than k (k not written yet) or newer (k overwritten)?
        let behind = want.wrapping_sub(tag) & TAG_MASK;
        if behind != 0 && behind < (1 << (TAG_BITS - 1)) {
            Lookup::NotYet
        } else {
            Lookup::Evicted
        }
    }

    /// Copies sequence number `k` from slot `s` into `buf` (resized to the message length).
    /// Returns `(len, ts)`, or `None` if the slot was overwritten (the copy is discarded).
    #[inline]
    pub fn read_copy(&self, s: usize, k: u64, buf: &mut Vec<u8>) -> Option<(usize, u64)> {
        buf.clear();
        let got = self.read_validated(s, k, |len| {
            buf.reserve(len);
            // SAFETY: the spare capacity is at least `len` bytes; the read fills them whole
            // before the length is set below.
            Some(unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr(), len) })
        })?;
        // SAFETY: `read_validated` wrote the `got.0` bytes asked for.
        unsafe { buf.set_len(got.0) };
        Some(got)
    }

    /// [`read_copy`](Shared::read_copy) into the start of `buf`, which the caller keeps: the
    /// same `(len, ts)`, but when `len` exceeds `buf.len()` nothing is copied (the caller
    /// reports the buffer too small).
    pub fn read_copy_into(&self, s: usize, k: u64, buf: &mut [u8]) -> Option<(usize, u64)> {
        self.read_validated(s, k, |len| buf.get_mut(..len))
    }

    /// The seqlock read behind the copying reads: checks that slot `s` holds `k`, copies the
    /// message into what `dst` gives for its length (nothing for `None`), then checks that no
    /// writer took the slot meanwhile. Returns `(len, ts)`, or `None` if the slot was
    /// overwritten (whatever was copied is then garbage).
    #[inline]
    fn read_validated<'b>(
        &self,
        s: usize,
        k: u64,
        dst: impl FnOnce(usize) -> Option<&'b mut [u8]>,
    ) -> Option<(usize, u64)> {
        let slot = &self.slots[s];
        // Pairs with the Release store of `seq` in `commit`.
        if slot.seq.load(Ordering::Acquire) != k {
            return None;
        }
        let len = (slot.len.load(Ordering::Relaxed) as usize).min(self.data.slot_size);
        let ts = slot.ts.load(Ordering::Relaxed);
        if let Some(dst) = dst(len) {
            let n = dst.len().min(self.data.slot_size);
            // SAFETY: `s` is a valid slot (callers got it from `lookup`) and `n <= slot_size`.
            unsafe { self.data.read(s, &mut dst[..n]) };
        }
        // Pairs with the Release fence in `acquire_slot`: if the copy saw a new writer's
        // bytes, this load sees its `seq = 0` (or later).
        fence(Ordering::Acquire);
        if slot.seq.load(Ordering::Relaxed) != k {
            return None;
        }
        Some((len, ts))
    }

    /// Copies sequence number `k` from slot `s` into `dst`, for a topic whose payloads are
    /// inline in the slot header (`slot_size <= INLINE_DATA`): the seqlock copy of
    /// [`read_copy`](Shared::read_copy) into a fixed buffer, touching only the reader's line.
    /// Returns `(len, ts)`, or `None` if the slot was overwritten (the copy is discarded).
    #[inline]
    pub fn read_inline(&self, s: usize, k: u64, dst: &mut [u8; INLINE_DATA]) -> Option<(usize, u64)> {
        let (len, ts) = self.read_validated(s, k, |len| Some(&mut dst[..len.min(INLINE_DATA)]))?;
        Some((len.min(INLINE_DATA), ts))
    }

    /// Pins slot `s` for participant `me` if it still holds `k`. `record` is the pin record
    /// (`0..PIN_RECORDS`) naming the slot, or `None` for an untracked subscriber.
    pub fn pin(&self, me: usize, s: usize, k: u64, record: Option<usize>) -> Result<(), PinError> {
        let slot = &self.slots[s];
        let (word, bit) = pin_bit(slot, me);
        let record = record.map(|r| &self.participants.entry(me).aux[AUX_PIN_RECORDS.start + r]);
        if let Some(r) = record {
            // Before the pin bit: the SeqCst RMW below releases it, so an auditing publisher
            // that sees our bit also sees the record (see `pin_possible`).
            r.store(s as u64 + 1, Ordering::Relaxed);
        }
        // SYNC POINT (Dekker with `acquire_slot`), see there.
        word.fetch_or(bit, Ordering::SeqCst);
        dekker_fence();
        let writer = slot.w0.load(Ordering::SeqCst) & WRITER_MASK;
        if (writer != 0 && !self.committing(writer as usize - 1, k)) || slot.seq.load(Ordering::Acquire) != k {
            word.fetch_and(!bit, Ordering::Release);
            if let Some(r) = record {
                r.store(0, Ordering::Relaxed);
            }
            return Err(PinError::Gone);
        }
        Ok(())
    }

    /// Whether writer `id` is still finishing the commit of `k` (between its `seq = k` store
    /// and clearing its writer bits). Such a slot already holds all of `k` and the writer will
    /// not touch the payload again, so a pin on it is valid. A writer that holds the bits for
    /// a *new* message cannot have `k` pending: `commit` clears `PENDING` only after the
    /// writer bits, and the writer re-acquires (a SeqCst CAS on `w0`, which our SeqCst load
    /// read from) only after that, so we would see `PENDING` as 0 or its next claim.
    fn committing(&self, id: usize, k: u64) -> bool {
        id < self.participants.len() && self.participants.entry(id).aux[AUX_PENDING].load(Ordering::Acquire) == k
    }

    /// Releases participant `me`'s pin on slot `s`, then its pin record (if any).
    pub fn unpin(&self, me: usize, s: usize, record: Option<usize>) {
        let (word, bit) = pin_bit(&self.slots[s], me);
        // Pairs with the SeqCst CAS in `acquire_slot`: our reads of the slot happen-before
        // a writer acquiring it.
        word.fetch_and(!bit, Ordering::Release);
        if let Some(r) = record {
            // After the bit: a record never goes missing while its bit is set by us.
            self.participants.entry(me).aux[AUX_PIN_RECORDS.start + r].store(0, Ordering::Relaxed);
        }
    }

    /// Marks participant `me` as a subscriber whose pins are not recorded (pin budget above
    /// [`PIN_RECORDS`]): all its pin bits are honoured while it is registered.
    pub(crate) fn set_pins_untracked(&self, me: usize) {
        self.participants.entry(me).aux[AUX_PIN_RECORDS.start].store(PIN_UNTRACKED, Ordering::Relaxed);
    }

    /// Whether participant `i`'s pin bit on slot `s` can be real: `i` is a registered
    /// subscriber whose pin records name `s` (or who does not record). Called with the
    /// slot's writer word held, after loading the pin word (SeqCst): a subscriber whose bit
    /// that load saw stored its record before setting the bit, so the record is visible; a
    /// subscriber that sets its bit later sees our writer word and backs off by itself.
    fn pin_possible(&self, i: usize, s: usize) -> bool {
        if !matches!(self.participants.state(i), EntryState::Active { role: ROLE_SUBSCRIBER }) {
            return false;
        }
        let e = self.participants.entry(i);
        let want = s as u64 + 1;
        AUX_PIN_RECORDS.clone().any(|r| {
            // Acquire: pairs with the release of the subscriber's pin RMW (see above).
            let v = e.aux[r].load(Ordering::Acquire);
            v == want || v == PIN_UNTRACKED
        })
    }

    /// Whether writer word `w` can be a live publisher's mark (or one being cleaned up):
    /// `w` names a participant that is a registered publisher, or that a reclaimer holds.
    fn writer_possible(&self, w: u64) -> bool {
        if w == 0 || w > MAX_TOPIC_PARTICIPANTS as u64 {
            return false;
        }
        matches!(
            self.participants.state(w as usize - 1),
            EntryState::Active { role: ROLE_PUBLISHER } | EntryState::Reclaiming
        )
    }

    /// [`acquire_slot`](Shared::acquire_slot) for when it found every slot busy and the
    /// dead were reclaimed: a slot whose writer word or pin bits no live participant can own
    /// (garbage from a corrupt or hostile peer, or left by an entry since freed) is taken
    /// anyway, and its impossible pin bits cleared. Bits of registered subscribers that record
    /// the slot, and writer marks of registered publishers, are still honoured.
    pub fn acquire_slot_audited(&self, me: usize) -> Result<usize, AcquireError> {
        let n = self.slot_count();
        let mine = me as u64 + 1;
        for _ in 0..n {
            let s = (self.ctl.next_slot.fetch_add(1, Ordering::Relaxed) % n as u64) as usize;
            let slot = &self.slots[s];
            let w = slot.w0.load(Ordering::SeqCst);
            // A writer word read from a publisher's CAS carries its registration with it
            // (the CAS came after it, Acquire here); so "not possible" is never a live one.
            if w == mine || (w != 0 && self.writer_possible(w)) {
                continue;
            }
            // SYNC POINT: the same Dekker handshake as in `acquire_slot`.
            if slot.w0.compare_exchange(w, mine, Ordering::SeqCst, Ordering::Relaxed).is_err() {
                continue;
            }
            dekker_fence();
            let mut honoured = false;
            for (word, base) in [(&slot.w1, 0usize), (&slot.w2, 64usize)] {
                let mut bits = word.load(Ordering::SeqCst);
                while bits != 0 {
                    let j = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if self.pin_possible(base + j, s) {
                        honoured = true;
                    } else {
                        // Clearing while we hold the writer word: a subscriber setting this
                        // bit from now on sees us and backs off, so no real pin is lost.
                        word.fetch_and(!(1u64 << j), Ordering::AcqRel);
                    }
                }
            }
            if honoured {
                slot.w0.store(0, Ordering::Release);
                continue;
            }
            return Ok(s);
        }
        Err(AcquireError::AllBusy)
    }

    /// Prefetches the first and last line of slot `s`'s payload, its length read racily
    /// (only a hint, issued before pinning so that these misses overlap the pin's).
    #[inline(always)]
    pub(crate) fn prefetch_payload(&self, s: usize) {
        #[cfg(not(loom))]
        if let Some(slot) = self.slots.get(s) {
            let len = (slot.len.load(Ordering::Relaxed) as usize).min(self.data.slot_size);
            let p = self.data.slot_ptr(s);
            crate::sync::prefetch_line(p);
            // Inside the slot (len <= slot_size); a prefetch never faults anyway.
            crate::sync::prefetch_line(p.wrapping_add(len.saturating_sub(1)));
        }
        #[cfg(loom)]
        let _ = s;
    }

    /// `(len, ts)` of a pinned slot (stable while pinned).
    pub(crate) fn pinned_meta(&self, s: usize) -> (usize, u64) {
        let slot = &self.slots[s];
        ((slot.len.load(Ordering::Relaxed) as usize).min(self.data.slot_size), slot.ts.load(Ordering::Relaxed))
    }

    /// Whether some live publisher still has `k` pending (so it may yet commit).
    pub fn claimant_alive(&self, k: u64, is_alive: impl Fn(crate::sys::ProcessId) -> bool) -> bool {
        for i in 0..self.participants.len() {
            let e = self.participants.entry(i);
            if e.aux[AUX_PENDING].load(Ordering::Acquire) != k {
                continue;
            }
            // Only a publisher claims: a pending word in any other entry is garbage.
            match self.participants.owner(i) {
                Some(owner) if owner.role == ROLE_PUBLISHER && self.participants.alive_with(&owner, &is_alive) => {
                    return true
                }
                _ => {}
            }
        }
        false
    }

    /// How many sequence numbers from `k` on are abandoned, `k` being one (its claimant is
    /// dead): the run continues while a number up to `tail` is neither committed nor pending
    /// with a live publisher, and stops after `index.len()` numbers. `tail` must have been
    /// loaded before this call: every number up to it was claimed, its pending word stored
    /// before the claim, so the scan of pending words below sees it (or, if cleared, the
    /// commit's index entry, stored before the clear).
    pub(crate) fn abandoned_run(&self, k: u64, tail: u64, is_alive: impl Fn(crate::sys::ProcessId) -> bool) -> u64 {
        let mut live = [0u64; MAX_TOPIC_PARTICIPANTS];
        let mut n_live = 0;
        for i in 0..self.participants.len().min(MAX_TOPIC_PARTICIPANTS) {
            // Acquire: pairs with the Release of the claim (the CAS of `tail`) and of the
            // clear in `commit`, see above.
            let p = self.participants.entry(i).aux[AUX_PENDING].load(Ordering::Acquire);
            if p <= k || p > tail {
                continue;
            }
            match self.participants.owner(i) {
                Some(owner) if owner.role == ROLE_PUBLISHER && self.participants.alive_with(&owner, &is_alive) => {
                    live[n_live] = p;
                    n_live += 1;
                }
                _ => {}
            }
        }
        let live = &live[..n_live];
        let limit = k.saturating_add(self.index.len() as u64).min(tail.saturating_add(1));
        let mut j = k.saturating_add(1);
        while j < limit && self.lookup_index(j) == Lookup::NotYet && !live.contains(&j) {
            j += 1;
        }
        j - k
    }

    /// Undoes whatever dead participant `index` held: its writer bits and its pin bits.
    /// Idempotent.
    pub fn cleanup_participant(&self, index: usize) {
        let writer = index as u64 + 1;
        for slot in self.slots {
            if slot.w0.load(Ordering::Acquire) & WRITER_MASK == writer {
                // The dead writer may have left half a message: make it unreadable first.
                slot.seq.store(0, Ordering::Relaxed);
                fence(Ordering::Release);
                let _ = slot.w0.compare_exchange(writer, 0, Ordering::Release, Ordering::Relaxed);
            }
            if index < MAX_TOPIC_PARTICIPANTS {
                let (word, bit) = pin_bit(slot, index);
                word.fetch_and(!bit, Ordering::Release);
            }
        }
        if let Some((bits, bit)) = self.reliable_bit(index) {
            bits.fetch_and(!bit, Ordering::Release);
        }
        if let Some(h) = self.held.get(index) {
            h.store(0, Ordering::Relaxed);
        }
        if let Some(e) = (index < self.participants.len()).then(|| self.participants.entry(index)) {
            for r in AUX_PIN_RECORDS {
                e.aux[r].store(0, Ordering::Relaxed);
            }
        }
    }

    /// Checks that `tail` and `committed_max` can be true together. Returns them, or
    /// `Err((tail, committed_max))` if a corrupt or hostile peer wrote at least one.
    pub(crate) fn positions(&self) -> Result<(u64, u64), (u64, u64)> {
        // `tail`, then `committed_max`, then `tail` again. Every sequence number up to the
        // first `tail` that was committed before the `committed_max` load is at most `cm`, so
        // the ones in (cm, t1] were still uncommitted then: in flight or abandoned, a bounded
        // number. And every commit follows its claim, so `cm <= t2`.
        let t1 = self.tail();
        let cm = self.committed_max();
        let tail = self.tail();
        let bound = MAX_CLAIMS_AHEAD + self.slot_count() as u64;
        if cm > tail || t1.saturating_sub(cm) > bound || tail == u64::MAX {
            return Err((tail, cm));
        }
        Ok((tail, cm))
    }
}

/// A publisher's last scan of the reliable cursors (see [`Shared::take_slot_lossless`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct CursorCache {
    /// The slowest cursor seen (`u64::MAX`: none).
    min: u64,
    /// The epoch loaded before that scan.
    epoch: u64,
    /// Whether there was a scan at all.
    valid: bool,
}

/// The set bits of a word, lowest first.
struct SetBits(u64);

impl Iterator for SetBits {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let b = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(b)
    }
}

/// What storing a reliable cursor found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorUpdate {
    /// Stored; no publisher waits.
    Stored,
    /// Stored, and a publisher announced it waits: bump the `space` futex.
    Wake,
    /// A publisher evicted this subscriber: nothing stored, it is lossy now.
    Evicted,
}

impl<'a> Shared<'a> {
    /// The cursor word of participant `i`.
    #[inline]
    fn cursor_word(&self, i: usize) -> &AtomicU64 {
        &self.participants.entry(i).aux[AUX_CURSOR]
    }

    /// Makes participant `me` (a registered subscriber) reliable from sequence number `want`
    /// on, or from the first message after it that no publisher may be overwriting right
    /// now. Returns where it stands, or `None` if a publisher has evicted it (before or
    /// during the join: it stays evicted, and its next receive says so).
    ///
    /// SYNC POINT (Dekker with [`take_slot_lossless`](Shared::take_slot_lossless)): we store
    /// the cursor and bump the epoch, then look at the writer word of each message's slot
    /// from the cursor on; a publisher takes a slot's writer word, then loads the epoch (all
    /// SeqCst). Either it sees the new epoch (and scans the cursors, ours included), or we
    /// see its writer word and start after that slot's message.
    pub fn join_reliable(&self, me: usize, want: u64) -> Option<u64> {
        // The bit and the cursor before the epoch: a publisher that sees the epoch sees them.
        if let Some((bits, bit)) = self.reliable_bit(me) {
            bits.fetch_or(bit, Ordering::SeqCst);
        }
        let word = self.cursor_word(me);
        let tail = self.tail();
        // Older than the index reaches is gone anyway (and bounds the walk below).
        let mut c = want.clamp(1, CURSOR_SEQ).max(tail.saturating_sub(self.index.len() as u64));
        let first = c;
        // A new clock for the new cursor, even if it comes back to the value of a stamp (a
        // seek back, or an earlier owner of the entry). Before the cursor's SeqCst CAS: a
        // publisher that loads the new cursor then loads this (or a later stamp).
        if let Some(h) = self.held.get(me) {
            h.store(0, Ordering::Relaxed);
        }
        set_cursor(word, c)?;
        self.ctl.event.0.epoch.fetch_add(1, Ordering::SeqCst);
        dekker_fence();
        let mut k = c;
        while k <= tail {
            // Committed and in its slot, with no writer holding that slot: kept for us. A
            // slot being written (or a message already gone) moves our start past it.
            let intact = match self.lookup_index(k) {
                Lookup::Found(s) => {
                    let slot = &self.slots[s];
                    let writer = slot.w0.load(Ordering::SeqCst) & WRITER_MASK;
                    // Acquire (after the writer word): a writer that overwrote `k` and let
                    // go of the slot since our lookup stored `seq` before letting go.
                    (writer == 0 || self.committing(writer as usize - 1, k)) && slot.seq.load(Ordering::Acquire) == k
                }
                // Claimed, not committed: being written fresh, into a slot whose old message
                // is another one of this walk (or older than it).
                Lookup::NotYet | Lookup::Pending => true,
                _ => false,
            };
            if !intact {
                c = k + 1;
            }
            k += 1;
        }
        if c != first {
            // Forward only: always safe, and seen by the next scan.
            set_cursor(word, c.min(CURSOR_SEQ))?;
        }
        Some(c)
    }

    /// Moves reliable subscriber `me`'s cursor forward to `next`, after it finished reading
    /// everything before `next`.
    #[inline]
    pub fn publish_cursor(&self, me: usize, next: u64) -> CursorUpdate {
        let word = self.cursor_word(me);
        let mut cur = word.load(Ordering::Relaxed);
        loop {
            if cur & CURSOR_EVICTED != 0 || cur == 0 {
                return CursorUpdate::Evicted;
            }
            // Release: pairs with the loads of cursors in `reliable_cursors`, so our reads of
            // the slots before `next` happen-before a publisher overwriting them. Acquire:
            // pairs with `announce_wait`. A CAS, not a store: a publisher's `CURSOR_WAITING`
            // or `CURSOR_EVICTED` is never lost.
            match word.compare_exchange_weak(cur, next.min(CURSOR_SEQ), Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) if cur & CURSOR_WAITING != 0 => return CursorUpdate::Wake,
                Ok(_) => return CursorUpdate::Stored,
                Err(now) => cur = now,
            }
        }
    }

    /// Stops participant `me` being reliable (it leaves). Returns whether a publisher waited.
    pub fn leave_reliable(&self, me: usize) -> bool {
        let waited = self.cursor_word(me).swap(0, Ordering::Release) & CURSOR_WAITING != 0;
        if let Some(h) = self.held.get(me) {
            h.store(0, Ordering::Relaxed);
        }
        if let Some((bits, bit)) = self.reliable_bit(me) {
            bits.fetch_and(!bit, Ordering::Release);
        }
        waited
    }

    /// The word and bit of participant `i` in the reliable set.
    #[inline]
    fn reliable_bit(&self, i: usize) -> Option<(&AtomicU64, u64)> {
        self.ctl.event.0.reliable.get(i / 64).map(|w| (w, 1u64 << (i % 64)))
    }

    /// Whether reliable subscriber `me` was evicted (an own-line load; no ordering needed).
    #[inline]
    pub fn cursor_evicted(&self, me: usize) -> bool {
        self.cursor_word(me).load(Ordering::Relaxed) & CURSOR_EVICTED != 0
    }

    /// The reliable cursors of registered subscribers, as `(participant, cursor word)`.
    /// Only the entries in the reliable set are read (a bit of anything but a registered
    /// subscriber is ignored).
    pub fn reliable_cursors(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        let limit = self.participants.len().min(MAX_TOPIC_PARTICIPANTS);
        let set = &self.ctl.event.0.reliable;
        // SeqCst: the Dekker handshake of `join_reliable`.
        let bits = [set[0].load(Ordering::SeqCst), set[1].load(Ordering::SeqCst)];
        (0..2usize).flat_map(move |w| SetBits(bits[w]).map(move |b| w * 64 + b)).filter(move |&i| i < limit).filter_map(
            move |i| {
                if !matches!(self.participants.state(i), EntryState::Active { role: ROLE_SUBSCRIBER }) {
                    return None;
                }
                // SeqCst: the Dekker handshake of `join_reliable`; also an Acquire pairing with
                // the Release CAS in `publish_cursor`.
                let v = self.cursor_word(i).load(Ordering::SeqCst);
                (v != 0 && v & CURSOR_EVICTED == 0).then_some((i, v))
            },
        )
    }

    /// Whether the publisher holding slot `s` (acquired, not yet written) may overwrite its
    /// old message on a `block` or `fail` topic: every reliable cursor is past it. `cache`
    /// is the publisher's last scan of the cursors: it scans again only when the old message
    /// reaches the slowest cursor it saw, or when a subscriber joined since (the epoch
    /// moved). `Err(seq)` is the old message's sequence number, which some reliable
    /// subscriber has not read yet.
    #[inline]
    pub fn take_slot_lossless(&self, s: usize, cache: &mut CursorCache) -> Result<(), u64> {
        // We hold the slot's writer word, so `seq` is stable; Relaxed.
        let old = self.slots[s].seq.load(Ordering::Relaxed);
        // SYNC POINT (Dekker with `join_reliable`): our writer word (taken with a SeqCst CAS
        // in `acquire_slot`), then the epoch.
        dekker_fence();
        let epoch = self.ctl.event.0.epoch.load(Ordering::SeqCst);
        if epoch != cache.epoch || !cache.valid || (old != 0 && old >= cache.min) {
            self.scan_cursors(epoch, cache);
        }
        if old != 0 && old >= cache.min {
            Err(old)
        } else {
            Ok(())
        }
    }

    #[cold]
    #[inline(never)]
    fn scan_cursors(&self, epoch: u64, cache: &mut CursorCache) {
        cache.min = self.reliable_cursors().map(|(_, v)| v & CURSOR_SEQ).fold(u64::MAX, u64::min);
        cache.epoch = epoch;
        cache.valid = true;
    }

    /// Gives back acquired slot `s` untouched (its message stays readable) because a reliable
    /// subscriber still needs it, and turns the round-robin counter back to it if no other
    /// publisher moved it since: the next publish tries the same, oldest, slot again, so
    /// slots keep filling in order (which in-order readers rely on to guess the next slot).
    pub fn give_back_slot(&self, s: usize) {
        self.slots[s].w0.store(0, Ordering::Release);
        let n = self.slot_count() as u64;
        let cur = self.ctl.next_slot.load(Ordering::Relaxed);
        if cur.wrapping_sub(1) % n == s as u64 {
            let _ = self.ctl.next_slot.compare_exchange(cur, cur.wrapping_sub(1), Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// Announces that a publisher waits for reliable subscriber `i`, whose cursor word was
    /// `seen`. `false`: the word moved (re-check before sleeping).
    pub fn announce_wait(&self, i: usize, seen: u64) -> bool {
        seen & CURSOR_WAITING != 0
            || self
                .cursor_word(i)
                .compare_exchange(seen, seen | CURSOR_WAITING, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// Evicts reliable subscriber `i` if its cursor word is still `seen`.
    pub fn evict(&self, i: usize, seen: u64) -> bool {
        self.cursor_word(i).compare_exchange(seen, CURSOR_EVICTED, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    }

    /// A held-back publisher's look at the stuck reliable subscribers, with `now_ms` its
    /// clock (`CLOCK_MONOTONIC` milliseconds, read after each cursor is loaded, so that a
    /// stamp is never earlier than the cursor value it names): stamps the held word of
    /// every reliable cursor with messages left to read whose stamp is missing, stale (its
    /// tag is not the cursor's) or ahead of now, and evicts every one whose stamp is more
    /// than `timeout_ms` old (see the module docs, "The held-since stamps"). Returns how
    /// many it evicted. `crash` stops it early, as a publisher dying (or giving up) there
    /// would.
    ///
    /// An eviction is the CAS of the cursor word from the value loaded *before* the held
    /// word: a subscriber that moved after that load makes it fail, and one that moved
    /// before it left a tag that no longer matches. So only a cursor that stood at that
    /// value for the whole timeout is evicted (but see `join_reliable` for a cursor that
    /// comes back to a value, which clears the word).
    pub fn evict_stuck(&self, now_ms: impl Fn() -> u64, timeout_ms: u64, crash: HeldCrash) -> u64 {
        let newest = self.committed_max();
        let mut evicted = 0;
        for (i, v) in self.reliable_cursors() {
            let c = v & CURSOR_SEQ;
            let Some(held) = self.held.get(i) else { continue };
            if c > newest {
                continue; // read everything: holds nobody back
            }
            // Acquire: pairs with the Release CAS of a stamp below, made by another
            // publisher. Its clock read happens-before ours, so an honest stamp we see is
            // never ahead of our clock (which would be taken for garbage and restamped
            // earlier than it should be).
            let h = held.load(Ordering::Acquire);
            let now_ms = now_ms();
            let age = (now_ms as u32).wrapping_sub((h >> 32) as u32);
            let valid = h != 0 && h & HELD_TAG == c & HELD_TAG && age <= i32::MAX as u32;
            if !valid {
                // Missing, stale, or ahead of now (garbage, or a clock step): the clock
                // starts now. A CAS from what we loaded: another publisher's stamp made
                // meanwhile stands (ours would be no older, but a slow publisher's is).
                let _ = held.compare_exchange(h, held_stamp(now_ms, c), Ordering::Release, Ordering::Relaxed);
                if crash == HeldCrash::AfterStamp {
                    return evicted;
                }
                continue;
            }
            // Strictly more: the times are whole milliseconds, so this is at least the
            // timeout of real time.
            if u64::from(age) > timeout_ms && self.evict(i, v) {
                evicted += 1;
            }
        }
        evicted
    }
}

/// Stores cursor `c` in a reliable subscriber's own cursor word, keeping a publisher's
/// [`CURSOR_WAITING`] (so that its next move wakes that publisher); `None`, storing nothing,
/// if the word says [`CURSOR_EVICTED`]. A CAS, not a store: an eviction that a publisher
/// made after the subscriber last looked is never undone. SeqCst: the Dekker handshake of
/// [`Shared::join_reliable`].
fn set_cursor(word: &AtomicU64, c: u64) -> Option<()> {
    let mut cur = word.load(Ordering::Relaxed);
    loop {
        if cur & CURSOR_EVICTED != 0 {
            return None;
        }
        match word.compare_exchange_weak(cur, c | (cur & CURSOR_WAITING), Ordering::SeqCst, Ordering::Relaxed) {
            Ok(_) => return Some(()),
            Err(now) => cur = now,
        }
    }
}
