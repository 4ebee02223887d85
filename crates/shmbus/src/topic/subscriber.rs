//! Subscribing: the subscriber endpoint, its receive families, pinned samples and iterators.

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use super::error::{corrupt_positions, TopicGetError, TopicRecvError, TopicRecvTimeoutError, TopicTryRecvError};
use super::protocol::{CursorUpdate, Lookup, INLINE_DATA, PIN_RECORDS};
use super::shared::Inner;
use crate::endpoint::forms::{until, wait_forms};
use crate::endpoint::liveness::{self, PENDING_GRACE};
use crate::endpoint::receive::{impl_receive, ReceiveRef, Waited};
use crate::error::{too_small, RecvIntoSliceError};
use crate::lend::{LendOr, Lender, LentRef};
use crate::stats::Counter;
use crate::sys::process_is_alive;
use crate::wait::{block_on_with, Wait, WaitPolicy};
use crate::waitset::{WaitHandle, Waitable};

/// While polling, every how many misses an in-order read does a full lookup.
const FULL_LOOKUP_EVERY: u32 = 64;
// (The first miss of a wait is a full lookup too: `misses` starts at 0 after each read.)
/// Retries of a read whose slot was overwritten under it, before giving up on that message.
const MAX_RETRIES: usize = 64;

/// A received message, copied out of shared memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    seq: u64,
    ts_ns: u64,
    data: Vec<u8>,
}

impl Message {
    fn new(info: MessageInfo, data: Vec<u8>) -> Message {
        Message { seq: info.seq, ts_ns: info.ts_ns, data }
    }

    /// Sequence number.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// `CLOCK_MONOTONIC` nanoseconds at publish.
    pub fn ts_ns(&self) -> u64 {
        self.ts_ns
    }

    /// The payload.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Payload length.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The payload, taken out of the message.
    pub fn into_data(self) -> Vec<u8> {
        self.data
    }
}

/// What was received into a caller's buffer (the `*_recv_into*` and `*_recv_into_slice*`
/// families).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageInfo {
    seq: u64,
    ts_ns: u64,
    len: usize,
}

impl MessageInfo {
    /// Sequence number.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// `CLOCK_MONOTONIC` nanoseconds at publish.
    pub fn ts_ns(&self) -> u64 {
        self.ts_ns
    }

    /// Payload length (the buffer's length too).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Subscribes to a topic. `Send`, not `Sync`. Receives take `&self`, so that several pinned
/// [`Sample`]s (which borrow it) can be held at once.
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
    /// The last corrupt positions reported (tail, newest committed), so that each is
    /// reported once.
    reported: Cell<Option<(u64, u64)>>,
    /// A sequence number `recheck` found abandoned by a dead publisher (0: none), so that
    /// `is_ready` can say so without looking again.
    abandoned_seq: Cell<u64>,
    pin_budget: Cell<usize>,
    pending_since: Cell<Option<(u64, u64)>>,
    policy: Cell<WaitPolicy>,
    /// The slot of the last message read in order: the next is most likely in the one after.
    last_slot: Cell<usize>,
    /// Consecutive in-order reads that found nothing. While polling, only every
    /// `FULL_LOOKUP_EVERY`-th miss reads `tail`; the others look at the predicted slot and
    /// the index, so a spinning reader does not keep pulling the publisher's claim counter.
    misses: Cell<u32>,
    /// A reliable subscriber: publishes its cursor for the publishers of a `block` or
    /// `fail` topic (see `Topic::reliable_subscriber`).
    reliable: Cell<bool>,
    counter: Counter,
}

/// What a receive returns, as the counters see it: its length and publish time.
trait Delivered {
    fn len(&self) -> usize;
    fn ts_ns(&self) -> u64;
}

impl Delivered for MessageInfo {
    #[inline(always)]
    fn len(&self) -> usize {
        self.len
    }
    #[inline(always)]
    fn ts_ns(&self) -> u64 {
        self.ts_ns
    }
}

impl<'a, S: HoldsSubscriber + 'a> Delivered for Sample<'a, S> {
    #[inline(always)]
    fn len(&self) -> usize {
        self.len
    }
    #[inline(always)]
    fn ts_ns(&self) -> u64 {
        self.ts_ns
    }
}

enum Fail {
    Gone,
    PinLimit,
}

impl Subscriber {
    /// The subscriber registered as participant `id` of the topic `inner`, receiving
    /// messages published from now on.
    pub(super) fn new(inner: Arc<Inner>, id: usize) -> Subscriber {
        let next = inner.shared().committed_max().saturating_add(1);
        let counter = inner.own_counter(id);
        counter.position(next);
        Subscriber {
            inner,
            id,
            next: Cell::new(next),
            pins: RefCell::new(Vec::new()),
            untracked: Cell::new(false),
            reported: Cell::new(None),
            abandoned_seq: Cell::new(0),
            pin_budget: Cell::new(2),
            pending_since: Cell::new(None),
            policy: Cell::new(WaitPolicy::default()),
            last_slot: Cell::new(usize::MAX),
            misses: Cell::new(0),
            reliable: Cell::new(false),
            counter,
        }
    }

    /// Makes this new subscriber reliable from its cursor on (see `Shared::join_reliable`).
    pub(super) fn make_reliable(&self) {
        self.reliable.set(true);
        // `None`: its entry's cursor word says evicted (written by no honest publisher before
        // the join): the first receive reports it, and it goes on lossy.
        if let Some(at) = self.inner.shared().join_reliable(self.id, self.next.get()) {
            self.next.set(at);
            self.counter.position(at);
        }
    }

    /// Whether this subscriber is reliable (made by `Topic::reliable_subscriber` and not
    /// evicted since).
    pub fn is_reliable(&self) -> bool {
        self.reliable.get()
    }

    /// Publishes a reliable cursor moved to `next`. Out of line: lossy subscribers never
    /// come here.
    #[inline(never)]
    fn publish_cursor(&self, next: u64) {
        let sh = self.inner.shared();
        match sh.publish_cursor(self.id, next) {
            CursorUpdate::Stored => {}
            CursorUpdate::Wake => {
                if self.inner.space().notify() {
                    self.counter.futex_wake();
                }
            }
            // Reported by the next receive (`check_evicted`).
            CursorUpdate::Evicted => {}
        }
    }

    /// A reliable subscriber that a publisher evicted: from now on lossy, said once.
    #[cold]
    #[inline(never)]
    fn check_evicted(&self) -> Option<TopicTryRecvError> {
        if !self.inner.shared().cursor_evicted(self.id) {
            return None;
        }
        self.reliable.set(false);
        self.inner.shared().leave_reliable(self.id);
        Some(TopicTryRecvError::Evicted)
    }

    /// Moves the in-order cursor to `next` (and the position the counters show).
    #[inline(always)]
    fn set_next(&self, next: u64) {
        self.next.set(next);
        self.counter.position(next);
        if self.reliable.get() {
            self.publish_cursor(next);
        }
    }

    /// Moves the cursor past a gap of `missed` messages, counted as drops.
    fn skip(&self, next: u64, missed: u64) -> TopicTryRecvError {
        self.set_next(next);
        self.pending_since.set(None);
        self.counter.drops(missed);
        TopicTryRecvError::Lagged { missed }
    }

    /// The next sequence number an in-order receive will return.
    pub fn next_seq(&self) -> u64 {
        self.next.get()
    }

    /// Moves the in-order cursor to `seq`, clamped to `1..=` the next sequence number to be
    /// claimed: seeking beyond it (say `u64::MAX`) waits for the next message published, as
    /// a new subscriber does.
    ///
    /// A reliable subscriber seeking back stops at the oldest message publishers still keep
    /// for it (see [`Topic::reliable_subscriber`](super::Topic::reliable_subscriber)).
    pub fn seek(&self, seq: u64) {
        let next = self.inner.shared().tail().saturating_add(1);
        let at = seq.clamp(1, next);
        // An evicted one stays evicted (its next receive says so), even if a publisher
        // evicts it while it joins again: it then seeks as a lossy one.
        let joined = if self.reliable.get() && at < self.next.get() && !self.inner.shared().cursor_evicted(self.id) {
            self.inner.shared().join_reliable(self.id, at)
        } else {
            None
        };
        match joined {
            Some(at) => {
                self.next.set(at);
                self.counter.position(at);
            }
            None => self.set_next(at),
        }
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
        self.seek(t.saturating_add(1).saturating_sub(self.inner.layout().history));
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
    /// while it lives. Samples of a topic of inline slots (up to 40 B) are copies and do not
    /// count (see [`Sample`]).
    pub fn set_pin_budget(&self, budget: usize) {
        if budget > PIN_RECORDS && !self.untracked.get() {
            self.untracked.set(true);
            self.inner.shared().set_pins_untracked(self.id);
        }
        self.pin_budget.set(budget);
    }

    /// The topic's largest message in bytes.
    pub fn max_message_len(&self) -> usize {
        self.inner.layout().slot_size as usize
    }

    /// Whether `k`, stuck as pending, was abandoned by a dead publisher. Rate-limited: asks
    /// only after `PENDING_GRACE`.
    fn abandoned(&self, k: u64) -> bool {
        let now = liveness::now_ns();
        match self.pending_since.get() {
            Some((seq, since)) if seq == k => {
                if now.saturating_sub(since) < PENDING_GRACE.as_nanos() as u64 {
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
    fn corrupt(&self, k: u64, (tail, committed): (u64, u64)) -> TopicTryRecvError {
        let next = tail.saturating_add(1).max(1);
        self.set_next(next);
        self.pending_since.set(None);
        self.misses.set(0);
        if self.reported.replace(Some((tail, committed))) == Some((tail, committed)) {
            return TopicTryRecvError::Empty;
        }
        let seen = corrupt_positions(tail, committed);
        TopicTryRecvError::Corrupt(seen.with("cursor", k).with("next", next).and_repaired())
    }

    /// An error about to be returned, replaced by `Truncated` if the mapping was truncated
    /// under us (zeros read past the cut look like "nothing yet" or impossible positions).
    /// Only on paths that return no message; the pin budget is this subscriber's own.
    /// Inline: an empty poll of a spinning receiver comes through here, and costs one load
    /// of the process-wide fault counter.
    #[inline]
    fn or_truncated(&self, e: TopicTryRecvError) -> TopicTryRecvError {
        match e {
            TopicTryRecvError::PinLimit { .. } => e,
            _ if self.inner.was_truncated() => TopicTryRecvError::Truncated,
            _ => e,
        }
    }

    /// The same for random access.
    #[cold]
    #[inline(never)]
    fn read_or_truncated(&self, e: TopicGetError) -> TopicGetError {
        match e {
            TopicGetError::PinLimit { .. } | TopicGetError::InvalidSeq => e,
            _ if self.inner.was_truncated() => TopicGetError::Truncated,
            _ => e,
        }
    }

    /// [`Subscriber::try_next_raw`], with a truncated mapping reported as such when nothing
    /// valid was found (the successful path is untouched).
    fn try_next<T: Delivered>(&self, read: impl FnMut(usize, u64) -> Result<T, Fail>) -> Result<T, TopicTryRecvError> {
        if self.reliable.get() {
            if let Some(e) = self.check_evicted() {
                return Err(e);
            }
        }
        match self.try_next_raw(read) {
            Ok(v) => Ok(v),
            Err(e) => Err(self.or_truncated(e)),
        }
    }

    /// The in-order state machine shared by every receive flavour.
    fn try_next_raw<T: Delivered>(
        &self,
        mut read: impl FnMut(usize, u64) -> Result<T, Fail>,
    ) -> Result<T, TopicTryRecvError> {
        let sh = self.inner.shared();
        // Bounded: a slot overwritten under us retries, but a hostile peer flipping words
        // for ever must not make this loop for ever (it ends as a gap instead).
        let slots = self.inner.layout().slots as usize;
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
                        Lookup::NotYet => return Err(TopicTryRecvError::Empty),
                        other => other,
                    }
                }
            };
            match found {
                Lookup::Found(s) => match read(s, k) {
                    Ok(v) => {
                        self.set_next(k.saturating_add(1));
                        self.counter.received(v.len(), v.ts_ns());
                        self.last_slot.set(s);
                        self.misses.set(1); // the next full lookup is FULL_LOOKUP_EVERY misses away
                        self.pending_since.set(None);
                        return Ok(v);
                    }
                    Err(Fail::PinLimit) => return Err(TopicTryRecvError::PinLimit { budget: self.pin_budget.get() }),
                    Err(Fail::Gone) => continue, // overwritten under us: the lookup says Evicted now
                },
                Lookup::NotYet => return Err(TopicTryRecvError::Empty),
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
                        return Err(self.skip(k.saturating_add(missed), missed));
                    }
                    return Err(TopicTryRecvError::Empty);
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
    fn skip_evicted(&self, k: u64) -> TopicTryRecvError {
        let (tail, committed) = match self.inner.shared().positions() {
            Ok(p) => p,
            Err(bad) => return self.corrupt(k, bad),
        };
        let oldest = tail.saturating_add(1).saturating_sub(self.inner.layout().history).max(k.saturating_add(1));
        if oldest <= k || oldest > tail.saturating_add(1) {
            return self.corrupt(k, (tail, committed));
        }
        self.skip(oldest, oldest - k)
    }

    fn copy_reader<'b>(&'b self, buf: &'b mut Vec<u8>) -> impl FnMut(usize, u64) -> Result<MessageInfo, Fail> + 'b {
        move |s, k| {
            let sh = self.inner.shared();
            sh.read_copy(s, k, buf).map(|(len, ts_ns)| MessageInfo { seq: k, ts_ns, len }).ok_or(Fail::Gone)
        }
    }

    /// Receives the next message in order into `buf`, waiting as `wait` says. `buf` is
    /// cleared and filled with the payload, reusing its allocation.
    #[inline]
    pub fn recv_into_with(&self, buf: &mut Vec<u8>, wait: Wait) -> Result<MessageInfo, Waited<TopicRecvError>> {
        self.next_with(wait, self.copy_reader(buf))
    }

    wait_forms! {
        /// Receives the next message in order into `buf`, without blocking (see
        /// [`recv_into_with`](Self::recv_into_with)).
        fn try_recv_into, recv_into, recv_into_timeout, recv_into_deadline (&self, buf: &mut Vec<u8>)
            = recv_into_with now try_next_into -> MessageInfo;
        errors (TopicTryRecvError, TopicRecvError, TopicRecvTimeoutError)
    }

    /// [`try_recv_into`](Self::try_recv_into): what [`recv_into_with`](Self::recv_into_with)
    /// does for [`Wait::Now`], without a `Waited` between (the form a spinning subscriber
    /// polls).
    fn try_next_into(&self, buf: &mut Vec<u8>) -> Result<MessageInfo, TopicTryRecvError> {
        self.try_next(self.copy_reader(buf))
    }

    /// Receives the next message in order, waiting as `wait` says.
    #[inline]
    pub fn recv_with(&self, wait: Wait) -> Result<Message, Waited<TopicRecvError>> {
        let mut data = Vec::new();
        let info = self.recv_into_with(&mut data, wait)?;
        Ok(Message::new(info, data))
    }

    wait_forms! {
        /// Receives the next message in order, without blocking.
        fn try_recv, recv, recv_timeout, recv_deadline (&self) = recv_with now try_next_owned -> Message;
        errors (TopicTryRecvError, TopicRecvError, TopicRecvTimeoutError)
    }

    /// [`try_recv`](Self::try_recv): what [`recv_with`](Self::recv_with) does for
    /// [`Wait::Now`], without a `Waited` between.
    fn try_next_owned(&self) -> Result<Message, TopicTryRecvError> {
        let mut data = Vec::new();
        let info = self.try_next_into(&mut data)?;
        Ok(Message::new(info, data))
    }

    /// The next message in order, read by `read`, waiting as `wait` says.
    #[inline]
    fn next_with<T: Delivered>(
        &self,
        wait: Wait,
        mut read: impl FnMut(usize, u64) -> Result<T, Fail>,
    ) -> Result<T, Waited<TopicRecvError>> {
        match wait {
            Wait::Now => Ok(self.try_next(read)?),
            wait => until(wait, |w| self.block(w, || self.try_next(&mut read))).map_err(Waited::timed),
        }
    }

    /// Waits for `attempt` to return something other than `Empty`, as `wait` says (its
    /// deadline read only after a first attempt found nothing). `Err(None)` means the
    /// deadline passed.
    fn block<T>(
        &self,
        wait: Wait,
        mut attempt: impl FnMut() -> Result<T, TopicTryRecvError>,
    ) -> Result<T, Option<TopicRecvError>> {
        match attempt() {
            Ok(v) => return Ok(v),
            Err(e) => {
                if let Some(e) = e.into_blocking() {
                    return Err(Some(e));
                }
            }
        }
        let deadline = wait.deadline();
        let sh = self.inner.shared();
        let recheck = || {
            // About to sleep: the first attempt after waking looks everywhere.
            self.misses.set(0);
            (sh.tail() >= self.next.get()).then_some(PENDING_GRACE)
        };
        let r =
            block_on_with(
                self.inner.event(),
                self.policy.get(),
                deadline,
                recheck,
                Some(self.counter),
                || match attempt() {
                    Err(TopicTryRecvError::Empty) => None,
                    other => Some(other),
                },
            );
        match r {
            // Not `Empty` (the attempt above returned None for it), so never `None` here.
            Some(r) => r.map_err(TopicTryRecvError::into_blocking),
            // Timed out: a truncation the attempts did not run into is still reported.
            None if self.inner.was_truncated() => Err(Some(TopicRecvError::Truncated)),
            None => Err(None),
        }
    }

    /// A blocking iterator over the messages in order: each item is what
    /// [`recv`](Self::recv) returns. It ends only after yielding
    /// [`TopicRecvError::Truncated`], which every later receive would return too.
    pub fn iter(&self) -> Iter<'_> {
        Iter::new(self)
    }

    /// An iterator over the messages received without waiting: it yields messages until
    /// there is none ([`TopicTryRecvError::Empty`]); any other error is yielded once, then it
    /// ends.
    pub fn try_iter(&self) -> TryIter<'_> {
        TryIter::new(self)
    }

    fn pin_slot(&self, s: usize, k: u64) -> Result<Sample<'_>, Fail> {
        self.pin_slot_within(s, k, self.pin_budget.get())
    }

    /// [`pin_slot`](Self::pin_slot) with `budget` pins at most (the copy of
    /// `try_recv_into_slice` may take one beyond the subscriber's budget, which it gives back
    /// before it returns).
    fn pin_slot_within(&self, s: usize, k: u64, budget: usize) -> Result<Sample<'_>, Fail> {
        let sh = self.inner.shared();
        if sh.data.slot_size <= INLINE_DATA {
            return self.copy_inline(s, k);
        }
        let mut pins = self.pins.borrow_mut();
        if let Some(entry) = pins.iter_mut().find(|(slot, _, _)| *slot == s) {
            // Already pinned by us, so it cannot have been rewritten: check it is still `k`.
            if sh.slots[s].seq.load(crate::sync::Ordering::Acquire) != k {
                return Err(Fail::Gone);
            }
            entry.1 += 1;
        } else {
            if pins.len() >= budget {
                return Err(Fail::PinLimit);
            }
            // A free pin record: there is one within the subscriber's budget (a tracked
            // budget is at most PIN_RECORDS); a copy's extra pin may find none.
            let record = if self.untracked.get() {
                None
            } else {
                match (0..PIN_RECORDS).find(|r| pins.iter().all(|p| p.2 != Some(*r))) {
                    Some(r) => Some(r),
                    None => return Err(Fail::PinLimit),
                }
            };
            // The payload (outside the header: inline ones are copied, above): its first and
            // last lines start on their way now, so that the misses of reading them overlap
            // the pin's read-modify-write (a serialising instruction, which no later load
            // passes) instead of following it.
            sh.prefetch_payload(s);
            sh.pin(self.id, s, k, record).map_err(|_| Fail::Gone)?;
            pins.push((s, 1, record));
            self.counter.pins(pins.len() as u64);
        }
        let (len, ts_ns) = sh.pinned_meta(s);
        Ok(Sample {
            sub: self,
            seq: k,
            ts_ns,
            len,
            body: Body::Pinned { slot: s, ptr: sh.data.slot_ptr(s) },
            _life: PhantomData,
        })
    }

    /// A sample of a topic whose payloads are inline in the slot header: a seqlock copy of
    /// the line the probe already pulled, cheaper than a pin (whose read-modify-writes move
    /// the slot's guard line twice per message). It holds no pin and costs no pin budget.
    #[inline]
    fn copy_inline(&self, s: usize, k: u64) -> Result<Sample<'_>, Fail> {
        let mut bytes = InlineBytes([0; INLINE_DATA]);
        let (len, ts_ns) = self.inner.shared().read_inline(s, k, &mut bytes.0).ok_or(Fail::Gone)?;
        Ok(Sample { sub: self, seq: k, ts_ns, len, body: Body::Inline(bytes), _life: PhantomData })
    }

    fn release_pin(&self, s: usize) {
        let mut pins = self.pins.borrow_mut();
        if let Some(i) = pins.iter().position(|(slot, _, _)| *slot == s) {
            pins[i].1 -= 1;
            if pins[i].1 == 0 {
                let (_, _, record) = pins.swap_remove(i);
                self.inner.shared().unpin(self.id, s, record);
                self.counter.pins(pins.len() as u64);
            }
        }
    }

    /// Receives the next message in order as a zero-copy pinned [`Sample`], waiting as `wait`
    /// says. At most [`set_pin_budget`](Self::set_pin_budget) samples are held at once
    /// (samples of a topic of slots up to 40 B are copies, any number: see [`Sample`]).
    #[inline]
    pub fn recv_ref_with(&self, wait: Wait) -> Result<Sample<'_>, Waited<TopicRecvError>> {
        self.next_with(wait, |s, k| self.pin_slot(s, k))
    }

    wait_forms! {
        /// Receives the next message in order as a zero-copy pinned [`Sample`], without
        /// blocking (see [`recv_ref_with`](Self::recv_ref_with)).
        fn try_recv_ref, recv_ref, recv_ref_timeout, recv_ref_deadline (&self)
            = recv_ref_with now try_next_ref -> Sample<'_>;
        errors (TopicTryRecvError, TopicRecvError, TopicRecvTimeoutError)
    }

    /// [`try_recv_ref`](Self::try_recv_ref): what [`recv_ref_with`](Self::recv_ref_with)
    /// does for [`Wait::Now`], without a `Waited` between.
    fn try_next_ref(&self) -> Result<Sample<'_>, TopicTryRecvError> {
        self.try_next(|s, k| self.pin_slot(s, k))
    }

    /// Pins slot `s` holding `k` for the length of a copy: one pin beyond the budget, so that
    /// a copying receive works while the caller holds as many samples as the budget allows.
    fn pin_for_copy(&self, s: usize, k: u64) -> Result<Sample<'_>, Fail> {
        self.pin_slot_within(s, k, self.pin_budget.get().saturating_add(1))
    }

    /// Copies the message of `sample` into the start of `buf`, or, if `buf` is too short,
    /// moves the cursor back to it (while it is still pinned) so that the next receive reads
    /// it again.
    fn sample_into_slice<E>(&self, sample: Sample<'_>, buf: &mut [u8]) -> Result<MessageInfo, RecvIntoSliceError<E>> {
        let len = sample.len;
        let Some(dst) = buf.get_mut(..len) else {
            // Back to this message while our pin still holds it: a reliable subscriber's
            // publishers keep it from here on (see `seek`).
            self.seek(sample.seq);
            return Err(too_small(len, buf.len()));
        };
        dst.copy_from_slice(&sample);
        Ok(MessageInfo { seq: sample.seq, ts_ns: sample.ts_ns, len })
    }

    /// Receives the next message in order into the start of `buf`, waiting as `wait` says:
    /// one copy, straight out of the slot, and no allocation. Returns the message's sequence
    /// number, publish time and length (`buf[..len]` holds it).
    ///
    /// The slot is pinned for the length of the copy (on a topic of slots up to 40 B, read
    /// without a pin, as [`Sample`] says), one pin beyond the
    /// [budget](Self::set_pin_budget), given back before it returns: it works while samples
    /// hold the whole budget, except with a budget of exactly 4 all held (every pin record
    /// taken), where it fails with [`TopicRecvError::PinLimit`].
    ///
    /// A message longer than `buf` is [`RecvIntoSliceError::TooSmall`] and the cursor stays
    /// on it: the next receive of any form reads it again. A reliable subscriber gets it for
    /// sure (its publishers keep it from then on); for a lossy one it can be overwritten
    /// meanwhile like any unread message, and the next receive then reports the gap
    /// ([`TopicRecvError::Lagged`]).
    #[inline]
    pub fn recv_into_slice_with(
        &self,
        buf: &mut [u8],
        wait: Wait,
    ) -> Result<MessageInfo, RecvIntoSliceError<Waited<TopicRecvError>>> {
        let sample = self.next_with(wait, |s, k| self.pin_for_copy(s, k))?;
        self.sample_into_slice(sample, buf)
    }

    wait_forms! {
        /// Receives the next message in order into the start of `buf`, without blocking (see
        /// [`recv_into_slice_with`](Self::recv_into_slice_with)).
        fn try_recv_into_slice, recv_into_slice, recv_into_slice_timeout, recv_into_slice_deadline
            (&self, buf: &mut [u8]) = recv_into_slice_with now try_next_slice -> MessageInfo;
        errors (TopicTryRecvError, TopicRecvError, TopicRecvTimeoutError) slice
    }

    /// [`try_recv_into_slice`](Self::try_recv_into_slice): what
    /// [`recv_into_slice_with`](Self::recv_into_slice_with) does for [`Wait::Now`], without a
    /// `Waited` between.
    fn try_next_slice(&self, buf: &mut [u8]) -> Result<MessageInfo, RecvIntoSliceError<TopicTryRecvError>> {
        let sample = self.try_next(|s, k| self.pin_for_copy(s, k))?;
        self.sample_into_slice(sample, buf)
    }

    fn locate(&self, seq: u64) -> Result<usize, TopicGetError> {
        if seq == 0 {
            return Err(TopicGetError::InvalidSeq);
        }
        let sh = self.inner.shared();
        match sh.lookup(seq) {
            Lookup::Found(s) => Ok(s),
            Lookup::NotYet | Lookup::Ahead => Err(TopicGetError::NotYet { seq, last: sh.tail() }),
            Lookup::Pending => Err(TopicGetError::Pending { seq }),
            Lookup::Evicted => Err(self.evicted(seq)),
        }
    }

    /// Copies message `seq` (any of the last N) without moving the cursor.
    pub fn get(&self, seq: u64) -> Result<Message, TopicGetError> {
        self.get_raw(seq).map_err(|e| self.read_or_truncated(e))
    }

    fn get_raw(&self, seq: u64) -> Result<Message, TopicGetError> {
        let mut data = Vec::new();
        let info = self.read_at(seq, |s| self.inner.shared().read_copy(s, seq, &mut data))?;
        Ok(Message { seq, ts_ns: info.ts_ns, data })
    }

    /// Reads message `seq` with `read` (from its slot: `Some((len, ts_ns))`, or `None` when
    /// it was overwritten meanwhile), looking it up again while publishers overtake the read.
    fn read_at(
        &self,
        seq: u64,
        mut read: impl FnMut(usize) -> Option<(usize, u64)>,
    ) -> Result<MessageInfo, TopicGetError> {
        for _ in 0..MAX_RETRIES {
            if let Some((len, ts_ns)) = read(self.locate(seq)?) {
                return Ok(MessageInfo { seq, ts_ns, len });
            }
        }
        Err(self.evicted(seq))
    }

    fn evicted(&self, seq: u64) -> TopicGetError {
        let tail = self.inner.shared().tail();
        TopicGetError::Evicted {
            seq,
            oldest: tail.saturating_add(1).saturating_sub(self.inner.layout().history).max(1),
        }
    }

    /// Pins message `seq` (any of the last N) as a zero-copy [`Sample`], without moving the
    /// cursor.
    pub fn get_ref(&self, seq: u64) -> Result<Sample<'_>, TopicGetError> {
        self.get_ref_raw(seq).map_err(|e| self.read_or_truncated(e))
    }

    fn get_ref_raw(&self, seq: u64) -> Result<Sample<'_>, TopicGetError> {
        for _ in 0..MAX_RETRIES {
            let s = self.locate(seq)?;
            match self.pin_slot(s, seq) {
                Ok(sample) => return Ok(sample),
                Err(Fail::PinLimit) => return Err(TopicGetError::PinLimit { budget: self.pin_budget.get() }),
                Err(Fail::Gone) => continue,
            }
        }
        Err(self.evicted(seq))
    }

    /// Copies message `seq` (any of the last N) into the start of `buf`, without moving the
    /// cursor: one copy, straight out of the slot, and no allocation. Returns the message's
    /// sequence number, publish time and length (`buf[..len]` holds it). A message longer
    /// than `buf` is [`RecvIntoSliceError::TooSmall`]; it stays in the history until
    /// publishers overwrite it.
    pub fn get_into_slice(&self, seq: u64, buf: &mut [u8]) -> Result<MessageInfo, RecvIntoSliceError<TopicGetError>> {
        let info = self.get_into_slice_raw(seq, buf).map_err(|e| self.read_or_truncated(e))?;
        fitted(info, buf.len())
    }

    /// Copies message `seq` into `buf` if it fits; its info either way (`len` longer than
    /// `buf`: nothing was copied).
    fn get_into_slice_raw(&self, seq: u64, buf: &mut [u8]) -> Result<MessageInfo, TopicGetError> {
        self.read_at(seq, |s| self.inner.shared().read_copy_into(s, seq, buf))
    }

    /// Copies the newest committed message without moving the cursor.
    pub fn latest(&self) -> Result<Message, TopicGetError> {
        self.newest(|k| self.get_raw(k)).map_err(|e| self.read_or_truncated(e))
    }

    /// Pins the newest committed message as a zero-copy [`Sample`], without moving the
    /// cursor (counted against the [pin budget](Self::set_pin_budget) as
    /// [`get_ref`](Self::get_ref) is).
    pub fn latest_ref(&self) -> Result<Sample<'_>, TopicGetError> {
        self.newest(|k| self.get_ref_raw(k)).map_err(|e| self.read_or_truncated(e))
    }

    /// Copies the newest committed message into the start of `buf`, without moving the
    /// cursor, as [`get_into_slice`](Self::get_into_slice) copies one.
    pub fn latest_into_slice(&self, buf: &mut [u8]) -> Result<MessageInfo, RecvIntoSliceError<TopicGetError>> {
        let info = self.newest(|k| self.get_into_slice_raw(k, buf)).map_err(|e| self.read_or_truncated(e))?;
        fitted(info, buf.len())
    }

    /// Reads the newest committed message with `get`, taking a newer one when publishers
    /// overtake the read.
    fn newest<T>(&self, mut get: impl FnMut(u64) -> Result<T, TopicGetError>) -> Result<T, TopicGetError> {
        let mut r = Err(TopicGetError::NotYet { seq: 1, last: 0 });
        for _ in 0..MAX_RETRIES {
            let k = match self.inner.shared().positions() {
                Ok((_, committed)) => committed,
                Err((tail, committed)) => return Err(TopicGetError::Corrupt(corrupt_positions(tail, committed))),
            };
            if k == 0 {
                return Err(TopicGetError::NotYet { seq: 1, last: 0 });
            }
            r = get(k);
            if !matches!(r, Err(TopicGetError::Evicted { .. })) {
                break; // else overtaken: take the newer one
            }
        }
        r
    }
}

/// A message read into a caller's buffer of `capacity` bytes, or `TooSmall` if it did not
/// fit (nothing was copied then).
fn fitted(info: MessageInfo, capacity: usize) -> Result<MessageInfo, RecvIntoSliceError<TopicGetError>> {
    if info.len > capacity {
        return Err(too_small(info.len, capacity));
    }
    Ok(info)
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        // Samples borrow the subscriber, so none is alive; clear any pin left anyway.
        let sh = self.inner.shared();
        for (s, _, record) in self.pins.get_mut().drain(..) {
            sh.unpin(self.id, s, record);
        }
        if self.reliable.get() && sh.leave_reliable(self.id) && self.inner.space().notify() {
            self.counter.futex_wake();
        }
        sh.participants.release(self.id);
    }
}

impl Waitable for Subscriber {
    fn wait_handle(&self) -> WaitHandle<'_> {
        WaitHandle { event: self.inner.event() }
    }

    fn is_ready(&self) -> bool {
        let k = self.next.get();
        let sh = self.inner.shared();
        match sh.lookup(k) {
            Lookup::Found(_) => true,
            // A receive would report something, unless it is a corrupt state already reported.
            Lookup::Evicted | Lookup::Ahead => match sh.positions() {
                Ok(_) => true,
                Err((tail, committed)) => self.reported.get() != Some((tail, committed)) || self.inner.was_truncated(),
            },
            // Nothing to receive, unless the file was truncated: the receive reports that.
            Lookup::NotYet => self.inner.was_truncated(),
            // A receive reports a gap once `recheck` found the claimant dead.
            Lookup::Pending => self.abandoned_seq.get() == k || self.inner.was_truncated(),
        }
    }

    fn recheck_interval(&self) -> Option<Duration> {
        (self.inner.shared().tail() >= self.next.get()).then_some(PENDING_GRACE)
    }

    fn recheck(&self) -> bool {
        // The next receive looks everywhere, not only at the predicted slot and the index.
        self.misses.set(0);
        let k = self.next.get();
        if self.inner.shared().lookup(k) == Lookup::Pending && self.abandoned(k) {
            self.abandoned_seq.set(k);
            return true;
        }
        false
    }
}

/// The subscriber receives through `&self`, so a shared reference waits as the subscriber
/// does. With the `tokio` feature `&Subscriber` is an `AsyncRecv` too: it awaits a message
/// while samples of the subscriber are held, as the blocking receives can.
impl Waitable for &Subscriber {
    fn wait_handle(&self) -> WaitHandle<'_> {
        (**self).wait_handle()
    }

    fn is_ready(&self) -> bool {
        (**self).is_ready()
    }

    fn recheck_interval(&self) -> Option<Duration> {
        (**self).recheck_interval()
    }

    fn recheck(&self) -> bool {
        (**self).recheck()
    }
}

/// A zero-copy view of a message, pinned in shared memory: no publisher overwrites it while
/// this value lives. Derefs to the payload, whose bytes stay as they are while it lives.
///
/// On a topic whose slots are at most 40 bytes (payloads inline in the slot header) a
/// sample is a copy instead, made when it is received: copying the line the receive
/// already read is cheaper than pinning. Such a sample holds no pin and does not count
/// against the [pin budget](Subscriber::set_pin_budget).
///
/// `S` is how the sample holds its subscriber: borrowed (the default) or owned
/// ([`OwnedSample`], from [`Subscriber::sample_owned`]).
#[derive(Debug)]
pub struct Sample<'a, S: HoldsSubscriber + 'a = &'a Subscriber> {
    sub: S,
    seq: u64,
    ts_ns: u64,
    len: usize,
    body: Body,
    _life: PhantomData<&'a Subscriber>,
}

/// A [`Sample`] that owns its subscriber through a [`Lender`](crate::lend::Lender)
/// ([`Subscriber::sample_owned`]). `Send` and `Sync`: its bytes are read-only, and the pin
/// is given back under the lender's lock.
pub type OwnedSample = Sample<'static, LentRef<Subscriber>>;

// SAFETY: the only field that is not `Send`/`Sync` is `Body::Pinned`'s pointer, to bytes
// that nobody writes while the pin is held, in a mapping the lent subscriber keeps alive;
// the pin is given back through `LentRef::with`, under the lender's lock, whatever the thread.
unsafe impl Send for OwnedSample {}
// SAFETY: as above; `&OwnedSample` reads the bytes and the fields only.
unsafe impl Sync for OwnedSample {}

/// How a [`Sample`] reaches its subscriber (to unpin its slot when dropped): `&Subscriber`,
/// or `LentRef<Subscriber>` for an [`OwnedSample`]. Sealed.
pub trait HoldsSubscriber: sealed::Sealed {
    #[doc(hidden)]
    fn with_subscriber<R>(&self, f: impl FnOnce(&Subscriber) -> R) -> R;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for &super::Subscriber {}
    impl Sealed for crate::lend::LentRef<super::Subscriber> {}
}

impl HoldsSubscriber for &Subscriber {
    #[inline(always)]
    fn with_subscriber<R>(&self, f: impl FnOnce(&Subscriber) -> R) -> R {
        f(self)
    }
}

impl HoldsSubscriber for LentRef<Subscriber> {
    fn with_subscriber<R>(&self, f: impl FnOnce(&Subscriber) -> R) -> R {
        self.with(f)
    }
}

/// A sample's fields but its subscriber, to move it from a borrowed to an owned holder.
struct SampleParts {
    seq: u64,
    ts_ns: u64,
    len: usize,
    body: Body,
}

impl<'a> Sample<'a> {
    fn into_parts(self) -> SampleParts {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again; `body` is read out once (the others
        // are `Copy`), so the pin it stands for moves to the parts.
        SampleParts { seq: this.seq, ts_ns: this.ts_ns, len: this.len, body: unsafe { std::ptr::read(&this.body) } }
    }
}

impl Subscriber {
    /// A sample from `recv` (any of the `_ref` receives: `try_recv_ref`, `recv_ref_timeout`,
    /// `latest_ref`, ...) that owns the subscriber of `lender`, lent shared, so it may be
    /// kept past the call, by a binding for instance. The receive runs with the lender's
    /// mutex held, as any call on it; the subscriber stays usable by shared reference
    /// meanwhile (more samples, copies), as it does under borrowed samples.
    ///
    /// # Panics
    /// If `recv` returns a sample of another subscriber than the one it is given.
    pub fn sample_owned<E>(
        lender: &Lender<Subscriber>,
        recv: impl FnOnce(&Subscriber) -> Result<Sample<'_>, E>,
    ) -> Result<OwnedSample, LendOr<E>> {
        let (lent, p) = lender.lend_ref_after(|s| {
            let sample = recv(s)?;
            assert!(std::ptr::eq(sample.sub, s), "sample_owned: the sample is another subscriber's");
            Ok(sample.into_parts())
        })?;
        Ok(Sample { sub: lent, seq: p.seq, ts_ns: p.ts_ns, len: p.len, body: p.body, _life: PhantomData })
    }
}

/// Where a [`Sample`]'s bytes are.
#[derive(Debug)]
enum Body {
    /// In slot `slot` of the mapping, pinned by us.
    Pinned { slot: usize, ptr: *const u8 },
    /// Copied out of an inline slot.
    Inline(InlineBytes),
}

/// A copied inline payload, aligned as the inline payload in the slot header is (8), so that
/// a typed sample may view it as its `T`.
#[derive(Debug)]
#[repr(C, align(8))]
struct InlineBytes([u8; INLINE_DATA]);

impl<'a, S: HoldsSubscriber + 'a> Sample<'a, S> {
    /// Sequence number.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// `CLOCK_MONOTONIC` nanoseconds at publish.
    pub fn ts_ns(&self) -> u64 {
        self.ts_ns
    }
}

impl<'a, S: HoldsSubscriber + 'a> Deref for Sample<'a, S> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.body {
            // SAFETY: the slot is pinned by us (no publisher can acquire it), `len` was clamped
            // to the slot size, and the subscriber (borrowed for 'a) keeps the mapping alive.
            Body::Pinned { ptr, .. } => unsafe { std::slice::from_raw_parts(*ptr, self.len) },
            // `len` was clamped to INLINE_DATA by `read_inline`; `get` keeps it a check anyway.
            Body::Inline(bytes) => bytes.0.get(..self.len).unwrap_or(&[]),
        }
    }
}

impl<'a, S: HoldsSubscriber + 'a> Drop for Sample<'a, S> {
    fn drop(&mut self) {
        if let Body::Pinned { slot, .. } = self.body {
            self.sub.with_subscriber(|s| s.release_pin(slot));
        }
    }
}

/// The blocking iterator of [`Subscriber::iter`].
///
/// An `Iterator` whose items are `Result<Message, TopicRecvError>`.
pub type Iter<'a> = crate::endpoint::iter::Iter<&'a Subscriber>;

/// The non-blocking iterator of [`Subscriber::try_iter`].
///
/// An `Iterator` whose items are `Result<Message, TopicRecvError>`.
pub type TryIter<'a> = crate::endpoint::iter::TryIter<&'a Subscriber>;

impl_receive!(
    lifetime 's, &'s Subscriber => Subscriber: Message, MessageInfo, TopicRecvError;
    Topic, "message length is not the size of the subscriber's payload type";
    ends (TopicRecvError::Truncated)
);

/// A sample lives as long as the subscriber, not as the `&mut` of the call.
impl<'s> ReceiveRef for &'s Subscriber {
    type Ref<'a>
        = Sample<'s>
    where
        Self: 'a;

    #[inline]
    fn recv_ref_with(&mut self, wait: Wait) -> Result<Sample<'s>, Waited<TopicRecvError>> {
        Subscriber::recv_ref_with(self, wait)
    }
}
