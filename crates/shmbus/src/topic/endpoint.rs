//! Topic handles and endpoints: the segment glue around `protocol`.

use std::cell::{Cell, RefCell};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::errors::{Corrupt, PublishError, ReadError, RecvError, TryRecvError};
use super::protocol::{
    Control, DataRegion, Lookup, Shared, SlotHeader, INLINE_DATA, INLINE_OFFSET, MAX_SLOTS, MAX_TOPIC_PARTICIPANTS,
    PIN_RECORDS, ROLE_PUBLISHER, ROLE_SUBSCRIBER,
};
use crate::domain::Domain;
use crate::error::OpenError;
use crate::event::EventWord;
use crate::segment::{CreateOptions, Kind, Layout, Segment, PARAMS};
use crate::sync::AtomicU64;
use crate::sys::{monotonic_ns, process_is_alive, ProcessId};
use crate::wait::{block_on_with, deadline_after, WaitPolicy};
use crate::waitset::{WaitHandle, Waitable};

/// Largest slot size a topic accepts (1 GiB).
pub const MAX_SLOT_SIZE: u64 = 1 << 30;
/// Largest history depth a topic accepts.
pub const MAX_HISTORY: u64 = 1 << 20;
/// Largest number of spare slots.
pub const MAX_SPARE: u64 = 1 << 16;
/// How long a subscriber waits on a claimed-but-uncommitted sequence number before it asks
/// whether the claimant is still alive.
const PENDING_GRACE: Duration = Duration::from_millis(1);
/// While polling, every how many misses an in-order read does a full lookup.
const FULL_LOOKUP_EVERY: u32 = 64;
// (The first miss of a wait is a full lookup too: `misses` starts at 0 after each read.)
/// Largest copy-publish that claims its sequence number before writing (see `publish`).
const CLAIM_FIRST_MAX: usize = 4096;
/// Retries of a read whose slot was overwritten under it, before giving up on that message.
const MAX_RETRIES: usize = 64;

/// How to create a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicConfig {
    /// Largest message in bytes.
    pub slot_size: usize,
    /// Messages kept for random access (N).
    pub history: usize,
    /// Extra slots so that pinned samples do not shorten the history (default 4).
    pub spare_slots: usize,
    /// File mode and group of a created segment.
    pub create: CreateOptions,
}

impl TopicConfig {
    /// A topic of `slot_size`-byte messages keeping the last `history`.
    pub fn new(slot_size: usize, history: usize) -> TopicConfig {
        TopicConfig { slot_size, history, spare_slots: 4, create: CreateOptions::default() }
    }

    /// Sets the number of spare slots.
    pub fn spare_slots(mut self, n: usize) -> TopicConfig {
        self.spare_slots = n;
        self
    }

    /// Sets the file mode of a created segment (default `0o600`).
    pub fn mode(mut self, mode: u32) -> TopicConfig {
        self.create.mode = mode;
        self
    }
}

const CONTROL_SIZE: u64 = 256;

/// The topic's layout, derived from (slot_size, history, spare).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TopicLayout {
    slot_size: u64,
    history: u64,
    spare: u64,
    slots: u64,
    index_len: u64,
    stride: u64,
    headers_off: u64,
    /// Where slot 0's payload starts (inside its header for small slots).
    data_off: u64,
    total: u64,
}

fn round_up(v: u64, to: u64) -> Option<u64> {
    v.checked_add(to - 1).map(|x| x / to * to)
}

impl TopicLayout {
    fn new(slot_size: u64, history: u64, spare: u64) -> Result<TopicLayout, String> {
        if slot_size == 0 || slot_size > MAX_SLOT_SIZE {
            return Err(format!("slot size {slot_size} must be 1..={MAX_SLOT_SIZE} bytes"));
        }
        if history == 0 || history > MAX_HISTORY {
            return Err(format!("history {history} must be 1..={MAX_HISTORY}"));
        }
        if spare > MAX_SPARE {
            return Err(format!("spare slots {spare} must be at most {MAX_SPARE}"));
        }
        let slots = history + spare;
        if slots > MAX_SLOTS {
            return Err(format!("{slots} slots exceed the maximum of {MAX_SLOTS}"));
        }
        let index_len = (2 * slots).next_power_of_two().max(64);
        // Slot headers are 128 bytes: a line of guard words, and a line of seq/len/ts with inline payload.
        let header = std::mem::size_of::<SlotHeader>() as u64;
        let headers_off = round_up(CONTROL_SIZE + 8 * index_len, 128).ok_or("index overflows")?;
        let headers_end = headers_off + header * slots;
        let (stride, data_off, total) = if slot_size <= INLINE_DATA as u64 {
            // Small messages live inside their slot header.
            (header, headers_off + INLINE_OFFSET as u64, headers_end)
        } else {
            let stride = if slot_size < 4096 { round_up(slot_size, 64) } else { round_up(slot_size, 4096) }
                .ok_or("slot size overflows")?;
            let data_off = round_up(headers_end, 4096).ok_or("headers overflow")?;
            let total =
                stride.checked_mul(slots).and_then(|d| d.checked_add(data_off)).ok_or("topic size overflows")?;
            (stride, data_off, total)
        };
        if total > (1 << 40) {
            return Err(format!("topic would need {total} bytes; reduce slot size or history"));
        }
        Ok(TopicLayout { slot_size, history, spare, slots, index_len, stride, headers_off, data_off, total })
    }
}

impl Layout for TopicLayout {
    const KIND: Kind = Kind::Topic;

    fn from_params(p: &[u64; PARAMS]) -> Result<Self, String> {
        TopicLayout::new(p[0], p[1], p[2])
    }

    fn params(&self) -> [u64; PARAMS] {
        [self.slot_size, self.history, self.spare, 0, 0, 0, 0, 0]
    }

    fn kind_area_size(&self) -> u64 {
        self.total
    }

    fn param_names() -> [&'static str; PARAMS] {
        ["slot size", "history", "spare slots", "", "", "", "", ""]
    }

    unsafe fn init(&self, _base: *mut u8) {
        // All-zero is the initial state: no message, no writer, no pins, tail 0.
    }
}

/// An open topic: a shared handle to its mapping. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Topic {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    seg: Segment,
    layout: TopicLayout,
    name: String,
}

// SAFETY: the raw pointers derived from the mapping are only dereferenced through atomics
// or validated copies; the mapping itself is Send + Sync.
unsafe impl Send for Inner {}
// SAFETY: as above.
unsafe impl Sync for Inner {}

impl Inner {
    #[inline]
    fn shared(&self) -> Shared<'_> {
        let base = self.seg.kind_base();
        let l = &self.layout;
        // SAFETY: the segment was validated to be exactly `KIND_OFFSET + l.total` bytes and
        // the offsets below are derived from the same validated layout: the control block at
        // 0, `index_len` index words at CONTROL_SIZE, `slots` 128-byte headers at headers_off
        // (128-byte aligned), payloads at data_off + s * stride (inside the headers when the
        // slot size fits inline). All are atomics or raw bytes, valid for any content.
        unsafe {
            Shared {
                ctl: &*(base as *const Control),
                index: std::slice::from_raw_parts(
                    base.add(CONTROL_SIZE as usize) as *const AtomicU64,
                    l.index_len as usize,
                ),
                slots: std::slice::from_raw_parts(
                    base.add(l.headers_off as usize) as *const SlotHeader,
                    l.slots as usize,
                ),
                data: DataRegion {
                    base: base.add(l.data_off as usize),
                    _life: std::marker::PhantomData,
                    stride: l.stride as usize,
                    slot_size: l.slot_size as usize,
                },
                participants: self.seg.participants(),
            }
        }
    }

    fn event(&self) -> &EventWord {
        // SAFETY: the control block's `event` is an AtomicU32 in the mapping; EventWord is
        // repr(transparent) over AtomicU32.
        unsafe { &*(&self.shared().ctl.event as *const crate::sync::AtomicU32 as *const EventWord) }
    }

    fn reclaim_dead(&self) -> usize {
        let sh = self.shared();
        sh.participants.reclaim_dead(ProcessId::current(), process_is_alive, |i, _| sh.cleanup_participant(i))
    }

    fn register(&self, role: u32) -> Result<usize, OpenError> {
        let me = ProcessId::current();
        let table = self.seg.participants();
        if let Some(i) = table.register(me, role, 0..MAX_TOPIC_PARTICIPANTS) {
            return Ok(i);
        }
        self.reclaim_dead();
        table.register(me, role, 0..MAX_TOPIC_PARTICIPANTS).ok_or_else(|| OpenError::TooManyParticipants {
            path: self.seg.path().to_owned(),
            max: MAX_TOPIC_PARTICIPANTS,
        })
    }
}

/// A snapshot of a topic's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicStatus {
    /// Largest message.
    pub slot_size: u64,
    /// Guaranteed history depth.
    pub history: u64,
    /// Total slots (history + spare).
    pub slots: u64,
    /// Highest committed sequence number (0: none yet).
    pub last_seq: u64,
    /// Live publishers.
    pub publishers: usize,
    /// Live subscribers.
    pub subscribers: usize,
    /// Slots pinned right now.
    pub pinned_slots: usize,
}

impl Topic {
    /// Opens topic `name`, creating it with `config` if it does not exist. If it exists with
    /// a different slot size, history or spare count, fails with
    /// [`OpenError::LayoutMismatch`] naming both values.
    pub fn create_or_open(domain: &Domain, name: &str, config: &TopicConfig) -> Result<Topic, OpenError> {
        let layout = TopicLayout::new(config.slot_size as u64, config.history as u64, config.spare_slots as u64)
            .map_err(|what| OpenError::InvalidConfig { what })?;
        let (seg, layout, _) = Segment::create_or_open(domain, name, &layout, &config.create)?;
        Ok(Topic::from_segment(seg, layout, name))
    }

    /// Opens an existing topic.
    pub fn open(domain: &Domain, name: &str) -> Result<Topic, OpenError> {
        let (seg, layout) = Segment::open::<TopicLayout>(domain, name)?;
        Ok(Topic::from_segment(seg, layout, name))
    }

    /// Opens an existing topic and subscribes to it (new messages only).
    pub fn subscribe(domain: &Domain, name: &str) -> Result<Subscriber, OpenError> {
        Topic::open(domain, name)?.subscriber()
    }

    fn from_segment(seg: Segment, layout: TopicLayout, name: &str) -> Topic {
        Topic { inner: Arc::new(Inner { seg, layout, name: name.to_owned() }) }
    }

    /// The topic's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Largest message in bytes.
    pub fn slot_size(&self) -> usize {
        self.inner.layout.slot_size as usize
    }

    /// Guaranteed history depth.
    pub fn history(&self) -> usize {
        self.inner.layout.history as usize
    }

    /// A new publisher.
    pub fn publisher(&self) -> Result<Publisher, OpenError> {
        let id = self.inner.register(ROLE_PUBLISHER)?;
        Ok(Publisher { inner: self.inner.clone(), id })
    }

    /// A new subscriber that receives messages published from now on.
    pub fn subscriber(&self) -> Result<Subscriber, OpenError> {
        let id = self.inner.register(ROLE_SUBSCRIBER)?;
        let next = self.inner.shared().committed_max().saturating_add(1);
        Ok(Subscriber {
            inner: self.inner.clone(),
            id,
            next: Cell::new(next),
            pins: RefCell::new(Vec::new()),
            untracked: Cell::new(false),
            reported: Cell::new(None),
            pin_budget: Cell::new(2),
            pending_since: Cell::new(None),
            policy: Cell::new(WaitPolicy::default()),
            last_slot: Cell::new(usize::MAX),
            misses: Cell::new(0),
        })
    }

    /// Highest committed sequence number (0: none yet).
    pub fn last_seq(&self) -> u64 {
        self.inner.shared().committed_max()
    }

    /// A snapshot of the topic's state.
    pub fn status(&self) -> TopicStatus {
        let sh = self.inner.shared();
        let mut publishers = 0;
        let mut subscribers = 0;
        for p in sh.participants.list() {
            if !process_is_alive(p.process) {
                continue;
            }
            match p.role {
                ROLE_PUBLISHER => publishers += 1,
                ROLE_SUBSCRIBER => subscribers += 1,
                _ => {}
            }
        }
        TopicStatus {
            slot_size: self.inner.layout.slot_size,
            history: self.inner.layout.history,
            slots: self.inner.layout.slots,
            last_seq: sh.committed_max(),
            publishers,
            subscribers,
            pinned_slots: sh.pinned_slots(),
        }
    }

    /// Reclaims what dead participants held (their slots, pins and entries). Returns how
    /// many entries were reclaimed. Runs automatically when needed; exposed for tools.
    pub fn reclaim_dead(&self) -> usize {
        self.inner.reclaim_dead()
    }
}

/// Publishes to a topic. `Send`, not `Sync`: one thread at a time; make one per thread.
#[derive(Debug)]
pub struct Publisher {
    inner: Arc<Inner>,
    id: usize,
}

impl Publisher {
    fn acquire(&self) -> Result<usize, PublishError> {
        match self.inner.shared().acquire_slot(self.id) {
            Ok(s) => Ok(s),
            Err(_) => self.acquire_slow(),
        }
    }

    /// Every slot looked busy. Out of line, so the publish path stays small.
    #[cold]
    #[inline(never)]
    fn acquire_slow(&self) -> Result<usize, PublishError> {
        let sh = self.inner.shared();
        // Maybe the dead hold slots: reclaim, then try once more; then once more
        // honouring only the pins and writer marks a live participant can own
        // (garbage a corrupt or hostile peer wrote is cleared).
        self.inner.reclaim_dead();
        sh.acquire_slot(self.id).or_else(|_| sh.acquire_slot_audited(self.id)).map_err(|_| {
            // Failing anyway: the slow path may say why the slots look taken.
            if self.inner.seg.was_truncated() {
                PublishError::Truncated
            } else {
                PublishError::AllPinned { slots: self.inner.layout.slots as usize }
            }
        })
    }

    /// Claims, commits and announces slot `s`, whose `len` bytes are written.
    fn finish(&self, s: usize, len: usize) -> u64 {
        let inner = &*self.inner;
        let sh = inner.shared();
        let me = sh.participants.entry(self.id);
        let k = sh.claim_seq(me);
        sh.commit(me, s, k, len, monotonic_ns());
        inner.event().notify();
        k
    }

    /// Copies `data` into the topic as the next message. Returns its sequence number.
    pub fn publish(&mut self, data: &[u8]) -> Result<u64, PublishError> {
        let max = self.inner.layout.slot_size as usize;
        if data.len() > max {
            return Err(PublishError::TooLarge { len: data.len(), max });
        }
        let s = self.acquire()?;
        let inner = &*self.inner;
        let sh = inner.shared();
        if data.len() > CLAIM_FIRST_MAX {
            sh.begin_write(s);
            // SAFETY: `s` came from acquire_slot (so `s < slots` and we hold its writer bits)
            // and `data.len() <= slot_size` was checked above.
            unsafe { sh.data.write(s, data) };
            return Ok(self.finish(s, data.len()));
        }
        // Small: claim and stamp first, so that the reader's line of the slot is written in
        // one burst (`seq = 0`, payload, `len`, `ts`, `seq = k`) with no locked instruction in
        // between, which would let a polling reader take the line back half-way.
        let me = sh.participants.entry(self.id);
        let k = sh.claim_seq(me);
        let ts = monotonic_ns();
        sh.begin_write(s);
        // SAFETY: as above.
        unsafe { sh.data.write(s, data) };
        sh.commit(me, s, k, data.len(), ts);
        inner.event().notify();
        Ok(k)
    }

    /// Loans a slot to write a message in place (zero copy). Write into the loan, then
    /// [`Loan::send`] it; dropping it unsent publishes nothing.
    pub fn loan(&mut self) -> Result<Loan<'_>, PublishError> {
        let s = self.acquire()?;
        self.inner.shared().begin_write(s);
        Ok(Loan { publisher: self, slot: s, sent: false })
    }

    /// Test hook: acquires a slot, writes `junk` into it and claims a sequence number, then
    /// returns *without committing*, as a publisher killed at that instant would leave it.
    /// Only for crash tests; the slot stays held until this process dies and is reclaimed.
    #[doc(hidden)]
    pub fn debug_claim_without_commit(&mut self, junk: &[u8]) -> Result<u64, PublishError> {
        let s = self.acquire()?;
        let n = junk.len().min(self.slot_size());
        self.inner.shared().begin_write(s);
        // SAFETY: as in `publish`: we hold slot `s` and `n <= slot_size`.
        unsafe { self.inner.shared().data.write(s, &junk[..n]) };
        let sh = self.inner.shared();
        Ok(sh.claim_seq(sh.participants.entry(self.id)))
    }

    /// Largest message in bytes.
    pub fn slot_size(&self) -> usize {
        self.inner.layout.slot_size as usize
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        // No slot can be held here: loans borrow the publisher mutably.
        self.inner.seg.participants().release(self.id);
    }
}

/// A slot loaned for writing in place. Derefs to the whole slot (`slot_size` bytes, with
/// whatever an earlier message left there). Not visible to anyone until sent.
#[derive(Debug)]
pub struct Loan<'a> {
    publisher: &'a mut Publisher,
    slot: usize,
    sent: bool,
}

impl Loan<'_> {
    /// Publishes the first `len` bytes of the loan. Returns the sequence number.
    pub fn send(mut self, len: usize) -> Result<u64, PublishError> {
        let max = self.publisher.slot_size();
        if len > max {
            return Err(PublishError::TooLarge { len, max }); // drop releases the slot
        }
        self.sent = true;
        Ok(self.publisher.finish(self.slot, len))
    }
}

impl Deref for Loan<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let sh = self.publisher.inner.shared();
        // SAFETY: we hold the slot's writer bits, so no one else writes it, and it is
        // `slot_size` bytes inside the mapping which the publisher keeps alive.
        unsafe { std::slice::from_raw_parts(sh.data.slot_ptr(self.slot), sh.data.slot_size) }
    }
}

impl DerefMut for Loan<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        let sh = self.publisher.inner.shared();
        // SAFETY: as in `deref`; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(sh.data.slot_ptr(self.slot), sh.data.slot_size) }
    }
}

impl Drop for Loan<'_> {
    fn drop(&mut self) {
        if !self.sent {
            self.publisher.inner.shared().abandon_slot(self.slot);
        }
    }
}

/// A received message (copied out of shared memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Sequence number.
    pub seq: u64,
    /// `CLOCK_MONOTONIC` nanoseconds at publish.
    pub ts_ns: u64,
    /// The payload.
    pub data: Vec<u8>,
}

/// What was received into a caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageInfo {
    /// Sequence number.
    pub seq: u64,
    /// `CLOCK_MONOTONIC` nanoseconds at publish.
    pub ts_ns: u64,
    /// Payload length.
    pub len: usize,
}

/// Subscribes to a topic. `Send`, not `Sync`. Samples borrow it.
#[derive(Debug)]
pub struct Subscriber {
    inner: Arc<Inner>,
    id: usize,
    next: Cell<u64>,
    /// Slots this subscriber pins, with how many samples hold each and the pin record
    /// (`None`: untracked) naming the slot in shared memory.
    pins: RefCell<Vec<(usize, u32, Option<usize>)>>,
    /// Pins are no longer recorded (the budget went above `PIN_RECORDS`).
    untracked: Cell<bool>,
    /// The last corrupt `(tail, committed_max)` reported, so that it is reported once.
    reported: Cell<Option<(u64, u64)>>,
    pin_budget: Cell<usize>,
    pending_since: Cell<Option<(u64, Instant)>>,
    policy: Cell<WaitPolicy>,
    /// The slot of the last message read in order: the next is most likely in the one after.
    last_slot: Cell<usize>,
    /// Consecutive in-order reads that found nothing. While polling, only every
    /// `FULL_LOOKUP_EVERY`-th miss reads `tail`; the others look at the predicted slot and
    /// the index, so a spinning reader does not keep pulling the publisher's claim counter.
    misses: Cell<u32>,
}

enum Fail {
    Gone,
    PinLimit,
}

impl Subscriber {
    /// The next sequence number an in-order receive will return.
    pub fn next_seq(&self) -> u64 {
        self.next.get()
    }

    /// Moves the in-order cursor to `seq`, clamped to `1..=` the next sequence number to be
    /// claimed: seeking beyond it (say `u64::MAX`) waits for the next message published, as
    /// a new subscriber does.
    pub fn seek(&self, seq: u64) {
        let next = self.inner.shared().tail().saturating_add(1);
        self.next.set(seq.clamp(1, next));
        self.pending_since.set(None);
    }

    /// Moves the cursor to the newest committed message, so the next receive returns it
    /// (or, if there is none, the first one published).
    pub fn seek_latest(&self) {
        self.seek(self.inner.shared().committed_max());
    }

    /// Moves the cursor to the oldest message the history still guarantees.
    pub fn seek_oldest(&self) {
        let t = self.inner.shared().tail();
        self.seek(t.saturating_add(1).saturating_sub(self.inner.layout.history));
    }

    /// How many messages are committed beyond the cursor.
    pub fn lag(&self) -> u64 {
        self.inner.shared().committed_max().saturating_add(1).saturating_sub(self.next.get())
    }

    /// How long blocking receives spin before they sleep.
    pub fn set_wait_policy(&self, policy: WaitPolicy) {
        self.policy.set(policy);
    }

    /// How many pinned samples this subscriber may hold at once (default 2). Up to 4 pins
    /// are recorded in the subscriber's participant entry, which lets publishers tell real
    /// pins from garbage; with a larger budget every pin bit of this subscriber is honoured
    /// while it lives.
    pub fn set_pin_budget(&self, budget: usize) {
        if budget > PIN_RECORDS && !self.untracked.get() {
            self.untracked.set(true);
            self.inner.shared().set_pins_untracked(self.id);
        }
        self.pin_budget.set(budget);
    }

    /// The topic's slot size.
    pub fn slot_size(&self) -> usize {
        self.inner.layout.slot_size as usize
    }

    /// Whether `k`, stuck as pending, was abandoned by a dead publisher. Rate-limited: asks
    /// only after `PENDING_GRACE`.
    fn abandoned(&self, k: u64) -> bool {
        let now = Instant::now();
        match self.pending_since.get() {
            Some((seq, since)) if seq == k => {
                if now.duration_since(since) < PENDING_GRACE {
                    return false;
                }
            }
            _ => {
                self.pending_since.set(Some((k, now)));
                return false;
            }
        }
        let sh = self.inner.shared();
        if sh.claimant_alive(k, process_is_alive) {
            self.pending_since.set(Some((k, now)));
            return false;
        }
        if sh.lookup(k) != Lookup::Pending {
            return false; // committed in the meantime
        }
        self.inner.reclaim_dead();
        true
    }

    /// Reports the impossible positions seen (`Err` of `Shared::positions`) at cursor `k`
    /// once: moves the cursor after the last claimed sequence number and returns `Corrupt`,
    /// or `Empty` if this very state was reported already.
    #[cold]
    #[inline(never)]
    fn corrupt(&self, k: u64, (tail, committed): (u64, u64)) -> TryRecvError {
        let next = tail.saturating_add(1).max(1);
        self.next.set(next);
        self.pending_since.set(None);
        self.misses.set(0);
        if self.reported.replace(Some((tail, committed))) == Some((tail, committed)) {
            return TryRecvError::Empty;
        }
        TryRecvError::Corrupt(Corrupt { tail, committed, cursor: k, next })
    }

    /// An error about to be returned, replaced by `Truncated` if the mapping was truncated
    /// under us (zeros read past the cut look like "nothing yet" or impossible positions).
    /// Only on paths that return no message; the pin budget is this subscriber's own.
    /// Inline: an empty poll of a spinning receiver comes through here, and costs one load
    /// of the process-wide fault counter.
    #[inline]
    fn or_truncated(&self, e: TryRecvError) -> TryRecvError {
        match e {
            TryRecvError::PinLimit { .. } => e,
            _ if self.inner.seg.was_truncated() => TryRecvError::Truncated,
            _ => e,
        }
    }

    /// The same for random access.
    #[cold]
    #[inline(never)]
    fn read_or_truncated(&self, e: ReadError) -> ReadError {
        match e {
            ReadError::PinLimit { .. } | ReadError::InvalidSeq => e,
            _ if self.inner.seg.was_truncated() => ReadError::Truncated,
            _ => e,
        }
    }

    /// [`Subscriber::try_next_raw`], with a truncated mapping reported as such when nothing
    /// valid was found (the successful path is untouched).
    fn try_next<T>(&self, read: impl FnMut(usize, u64) -> Result<T, Fail>) -> Result<T, TryRecvError> {
        match self.try_next_raw(read) {
            Ok(v) => Ok(v),
            Err(e) => Err(self.or_truncated(e)),
        }
    }

    /// The in-order state machine shared by every receive flavour.
    fn try_next_raw<T>(&self, mut read: impl FnMut(usize, u64) -> Result<T, Fail>) -> Result<T, TryRecvError> {
        let sh = self.inner.shared();
        // Bounded: a slot overwritten under us retries, but a hostile peer flipping words
        // for ever must not make this loop for ever (it ends as a gap instead).
        let slots = self.inner.layout.slots as usize;
        for _ in 0..MAX_RETRIES {
            let k = self.next.get();
            let guess = self.last_slot.get().wrapping_add(1) % slots;
            let found = if sh.probe(guess, k) {
                Lookup::Found(guess)
            } else {
                // Not where predicted. The index finds any committed message; only every
                // FULL_LOOKUP_EVERY-th miss (or the first after a sleep) also reads `tail`
                // to tell a pending claim (maybe of a dead publisher) from nothing at all.
                let m = self.misses.get();
                self.misses.set(m.wrapping_add(1));
                if m % FULL_LOOKUP_EVERY == 0 {
                    sh.lookup(k)
                } else {
                    match sh.lookup_index(k) {
                        Lookup::NotYet => return Err(TryRecvError::Empty),
                        other => other,
                    }
                }
            };
            match found {
                Lookup::Found(s) => match read(s, k) {
                    Ok(v) => {
                        self.next.set(k.saturating_add(1));
                        self.last_slot.set(s);
                        self.misses.set(1); // the next full lookup is FULL_LOOKUP_EVERY misses away
                        self.pending_since.set(None);
                        return Ok(v);
                    }
                    Err(Fail::PinLimit) => return Err(TryRecvError::PinLimit { budget: self.pin_budget.get() }),
                    Err(Fail::Gone) => continue, // overwritten under us: the lookup says Evicted now
                },
                Lookup::NotYet => return Err(TryRecvError::Empty),
                // Past the next claim: `tail` went backwards under us.
                Lookup::Ahead => {
                    let sh = self.inner.shared();
                    return Err(self.corrupt(k, (sh.tail(), sh.committed_max())));
                }
                Lookup::Pending => {
                    if self.abandoned(k) {
                        // A gap is only reported for positions that can be true: garbage in
                        // `tail` would otherwise make every sequence number up to it a gap.
                        let tail = match sh.positions() {
                            Ok((tail, _)) => tail,
                            Err(bad) => return Err(self.corrupt(k, bad)),
                        };
                        // The numbers right after `k` abandoned too (publishers that died
                        // one after another) make one gap, not one each.
                        let missed = sh.abandoned_run(k, tail, process_is_alive);
                        self.next.set(k.saturating_add(missed));
                        self.pending_since.set(None);
                        return Err(TryRecvError::Lagged { missed });
                    }
                    return Err(TryRecvError::Empty);
                }
                Lookup::Evicted => return Err(self.skip_evicted(k)),
            }
        }
        Err(self.skip_evicted(self.next.get()))
    }

    /// Moves the cursor past evicted sequence number `k` to the oldest one kept. The gap is
    /// at least 1 and never more than the positions allow: impossible positions (or a cursor
    /// that cannot move on) are reported as `Corrupt` instead.
    #[cold]
    #[inline(never)]
    fn skip_evicted(&self, k: u64) -> TryRecvError {
        let (tail, committed) = match self.inner.shared().positions() {
            Ok(p) => p,
            Err(bad) => return self.corrupt(k, bad),
        };
        let oldest = tail.saturating_add(1).saturating_sub(self.inner.layout.history).max(k.saturating_add(1));
        if oldest <= k || oldest > tail.saturating_add(1) {
            return self.corrupt(k, (tail, committed));
        }
        self.next.set(oldest);
        self.pending_since.set(None);
        TryRecvError::Lagged { missed: oldest - k }
    }

    fn copy_reader<'b>(&'b self, buf: &'b mut Vec<u8>) -> impl FnMut(usize, u64) -> Result<MessageInfo, Fail> + 'b {
        move |s, k| {
            let sh = self.inner.shared();
            sh.read_copy(s, k, buf).map(|(len, ts_ns)| MessageInfo { seq: k, ts_ns, len }).ok_or(Fail::Gone)
        }
    }

    /// Receives the next message in order into `buf` (reusing its allocation), without
    /// blocking.
    pub fn try_recv_into(&self, buf: &mut Vec<u8>) -> Result<MessageInfo, TryRecvError> {
        self.try_next(self.copy_reader(buf))
    }

    /// Receives the next message in order, without blocking.
    pub fn try_recv(&self) -> Result<Message, TryRecvError> {
        let mut data = Vec::new();
        let info = self.try_recv_into(&mut data)?;
        Ok(Message { seq: info.seq, ts_ns: info.ts_ns, data })
    }

    fn block<T>(
        &self,
        timeout: Option<Duration>,
        mut attempt: impl FnMut() -> Result<T, TryRecvError>,
    ) -> Result<T, RecvError> {
        if let r @ (Ok(_)
        | Err(
            TryRecvError::Lagged { .. }
            | TryRecvError::PinLimit { .. }
            | TryRecvError::Corrupt(_)
            | TryRecvError::Truncated,
        )) = attempt()
        {
            return r.map_err(RecvError::from);
        }
        let deadline = deadline_after(timeout);
        let sh = self.inner.shared();
        let recheck = || {
            // About to sleep: the first attempt after waking looks everywhere.
            self.misses.set(0);
            (sh.tail() >= self.next.get()).then_some(PENDING_GRACE)
        };
        let r = block_on_with(self.inner.event(), self.policy.get(), deadline, recheck, || match attempt() {
            Err(TryRecvError::Empty) => None,
            other => Some(other),
        });
        match r {
            Some(r) => r.map_err(RecvError::from),
            // Timed out: a truncation the attempts did not run into is still reported.
            None if self.inner.seg.was_truncated() => Err(RecvError::Truncated),
            None => Err(RecvError::Timeout),
        }
    }

    /// Receives the next message in order into `buf`, waiting up to `timeout` (`None`: for
    /// ever).
    pub fn recv_into_timeout(&self, buf: &mut Vec<u8>, timeout: Option<Duration>) -> Result<MessageInfo, RecvError> {
        self.block(timeout, || self.try_next(self.copy_reader(buf)))
    }

    /// Receives the next message in order, waiting up to `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Message, RecvError> {
        let mut data = Vec::new();
        let info = self.recv_into_timeout(&mut data, Some(timeout))?;
        Ok(Message { seq: info.seq, ts_ns: info.ts_ns, data })
    }

    /// Receives the next message in order, waiting as long as it takes.
    pub fn recv(&self) -> Result<Message, RecvError> {
        let mut data = Vec::new();
        let info = self.recv_into_timeout(&mut data, None)?;
        Ok(Message { seq: info.seq, ts_ns: info.ts_ns, data })
    }

    fn pin_slot(&self, s: usize, k: u64) -> Result<Sample<'_>, Fail> {
        let sh = self.inner.shared();
        let mut pins = self.pins.borrow_mut();
        if let Some(entry) = pins.iter_mut().find(|(slot, _, _)| *slot == s) {
            // Already pinned by us, so it cannot have been rewritten: check it is still `k`.
            if sh.slots[s].seq.load(crate::sync::Ordering::Acquire) != k {
                return Err(Fail::Gone);
            }
            entry.1 += 1;
        } else {
            if pins.len() >= self.pin_budget.get() {
                return Err(Fail::PinLimit);
            }
            // A free pin record (there is one: a tracked budget is at most PIN_RECORDS).
            let record = if self.untracked.get() {
                None
            } else {
                (0..PIN_RECORDS).find(|r| pins.iter().all(|p| p.2 != Some(*r)))
            };
            sh.pin(self.id, s, k, record).map_err(|_| Fail::Gone)?;
            pins.push((s, 1, record));
        }
        let (len, ts_ns) = sh.pinned_meta(s);
        Ok(Sample { sub: self, slot: s, seq: k, ts_ns, ptr: sh.data.slot_ptr(s), len })
    }

    fn release_pin(&self, s: usize) {
        let mut pins = self.pins.borrow_mut();
        if let Some(i) = pins.iter().position(|(slot, _, _)| *slot == s) {
            pins[i].1 -= 1;
            if pins[i].1 == 0 {
                let (_, _, record) = pins.swap_remove(i);
                self.inner.shared().unpin(self.id, s, record);
            }
        }
    }

    /// Receives the next message in order as a zero-copy pinned sample, without blocking.
    pub fn try_recv_pinned(&self) -> Result<Sample<'_>, TryRecvError> {
        self.try_next(|s, k| self.pin_slot(s, k))
    }

    /// Receives the next message in order as a pinned sample, waiting up to `timeout`.
    pub fn recv_pinned_timeout(&self, timeout: Option<Duration>) -> Result<Sample<'_>, RecvError> {
        self.block(timeout, || self.try_next(|s, k| self.pin_slot(s, k)))
    }

    fn locate(&self, seq: u64) -> Result<usize, ReadError> {
        if seq == 0 {
            return Err(ReadError::InvalidSeq);
        }
        let sh = self.inner.shared();
        match sh.lookup(seq) {
            Lookup::Found(s) => Ok(s),
            Lookup::NotYet | Lookup::Ahead => Err(ReadError::NotYet { seq, last: sh.tail() }),
            Lookup::Pending => Err(ReadError::Pending { seq }),
            Lookup::Evicted => Err(self.evicted(seq)),
        }
    }

    /// Copies message `seq` (any of the last N) without moving the cursor.
    pub fn get(&self, seq: u64) -> Result<Message, ReadError> {
        self.get_raw(seq).map_err(|e| self.read_or_truncated(e))
    }

    fn get_raw(&self, seq: u64) -> Result<Message, ReadError> {
        let mut data = Vec::new();
        for _ in 0..MAX_RETRIES {
            let s = self.locate(seq)?;
            if let Some((_, ts_ns)) = self.inner.shared().read_copy(s, seq, &mut data) {
                return Ok(Message { seq, ts_ns, data });
            }
        }
        Err(self.evicted(seq))
    }

    fn evicted(&self, seq: u64) -> ReadError {
        let tail = self.inner.shared().tail();
        ReadError::Evicted { seq, oldest: tail.saturating_add(1).saturating_sub(self.inner.layout.history).max(1) }
    }

    /// Pins message `seq` (any of the last N) without moving the cursor.
    pub fn get_pinned(&self, seq: u64) -> Result<Sample<'_>, ReadError> {
        self.get_pinned_raw(seq).map_err(|e| self.read_or_truncated(e))
    }

    fn get_pinned_raw(&self, seq: u64) -> Result<Sample<'_>, ReadError> {
        for _ in 0..MAX_RETRIES {
            let s = self.locate(seq)?;
            match self.pin_slot(s, seq) {
                Ok(sample) => return Ok(sample),
                Err(Fail::PinLimit) => return Err(ReadError::PinLimit { budget: self.pin_budget.get() }),
                Err(Fail::Gone) => continue,
            }
        }
        Err(self.evicted(seq))
    }

    /// Copies the newest committed message without moving the cursor.
    pub fn latest(&self) -> Result<Message, ReadError> {
        self.latest_raw().map_err(|e| self.read_or_truncated(e))
    }

    fn latest_raw(&self) -> Result<Message, ReadError> {
        let mut r = Err(ReadError::NotYet { seq: 1, last: 0 });
        for _ in 0..MAX_RETRIES {
            let k = match self.inner.shared().positions() {
                Ok((_, committed)) => committed,
                Err((tail, committed)) => return Err(ReadError::Corrupt { tail, committed }),
            };
            if k == 0 {
                return Err(ReadError::NotYet { seq: 1, last: 0 });
            }
            r = self.get_raw(k);
            if !matches!(r, Err(ReadError::Evicted { .. })) {
                break; // else overtaken: take the newer one
            }
        }
        r
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        // Samples borrow the subscriber, so none is alive; clear any pin left anyway.
        let sh = self.inner.shared();
        for (s, _, record) in self.pins.get_mut().drain(..) {
            sh.unpin(self.id, s, record);
        }
        sh.participants.release(self.id);
    }
}

impl Waitable for Subscriber {
    fn wait_handle(&self) -> WaitHandle<'_> {
        WaitHandle { event: self.inner.event() }
    }

    fn is_ready(&self) -> bool {
        // A wait set asks this before and after sleeping: make the next receive look everywhere.
        self.misses.set(0);
        let k = self.next.get();
        let sh = self.inner.shared();
        match sh.lookup(k) {
            Lookup::Found(_) => true,
            // A receive would report something, unless it is a corrupt state already reported.
            Lookup::Evicted | Lookup::Ahead => match sh.positions() {
                Ok(_) => true,
                Err(bad) => self.reported.get() != Some(bad) || self.inner.seg.was_truncated(),
            },
            // Nothing to receive, unless the file was truncated: the receive reports that.
            Lookup::NotYet => self.inner.seg.was_truncated(),
            Lookup::Pending => self.abandoned(k) || self.inner.seg.was_truncated(),
        }
    }

    fn recheck_interval(&self) -> Option<Duration> {
        (self.inner.shared().tail() >= self.next.get()).then_some(PENDING_GRACE)
    }
}

/// A zero-copy view of a message, pinned in shared memory: no publisher overwrites it while
/// this value lives. Derefs to the payload.
#[derive(Debug)]
pub struct Sample<'a> {
    sub: &'a Subscriber,
    slot: usize,
    seq: u64,
    ts_ns: u64,
    ptr: *const u8,
    len: usize,
}

impl Sample<'_> {
    /// Sequence number.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// `CLOCK_MONOTONIC` nanoseconds at publish.
    pub fn ts_ns(&self) -> u64 {
        self.ts_ns
    }
}

impl Deref for Sample<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the slot is pinned by us (no publisher can acquire it), `len` was clamped to
        // the slot size, and the subscriber (borrowed for 'a) keeps the mapping alive.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Sample<'_> {
    fn drop(&mut self) {
        self.sub.release_pin(self.slot);
    }
}
