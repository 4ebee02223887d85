//! Sending: the publisher endpoint and its in-place loans.

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use super::config::DeliveryPolicy;
use super::error::{TopicSendError, TopicSendTimeoutError, TopicTrySendError};
use super::protocol::{CursorCache, HeldCrash, PublishCrash, PublishOrder, CURSOR_SEQ, INLINE_DATA};
use super::shared::Inner;
use crate::endpoint::forms::wait_forms;
use crate::endpoint::send::{impl_transmit, Refusal, Refused};
use crate::lend::{LendOr, Lender, LentMut};
use crate::stats::Counter;
use crate::sys::monotonic_ns;
use crate::wait::{Deadline, Wait};

/// How often a publisher waiting for reliable subscribers wakes to check that they live
/// (a SIGKILLed one releases it within this, plus one `/proc` read).
pub(crate) const RELIABLE_LIVENESS_POLL: Duration = Duration::from_millis(10);

/// How long a send may wait for reliable subscribers.
#[derive(Debug, Clone, Copy)]
enum Until {
    /// Not at all (`try_send`, and every verb on a `fail` topic).
    No,
    /// Until the deadline (`send_timeout`; `send` and `loan` wait with none).
    Deadline(Deadline),
}

/// Publishes to a topic. `Send`, not `Sync`: one thread at a time; make one per thread.
#[derive(Debug)]
pub struct Publisher {
    inner: Arc<Inner>,
    id: usize,
    counter: Counter,
    policy: DeliveryPolicy,
    /// The last scan of the reliable cursors (see `Shared::take_slot_lossless`).
    cursors: CursorCache,
    /// When the liveness of the reliable subscribers holding us back was last checked.
    liveness_checked: u64,
}

impl Publisher {
    /// The publisher registered as participant `id` of the topic `inner`.
    pub(super) fn new(inner: Arc<Inner>, id: usize) -> Publisher {
        let counter = inner.own_counter(id);
        let policy = inner.policy();
        Publisher { inner, id, counter, policy, cursors: CursorCache::default(), liveness_checked: 0 }
    }

    /// Wakes the sleepers and counts the message.
    #[inline(always)]
    fn announce(&self, len: usize) {
        if self.inner.event().notify() {
            self.counter.futex_wake();
        }
        self.counter.message(len);
    }

    /// A slot to write, as the topic's policy allows: `send` and `loan` wait on a `block`
    /// topic, fail at once on a `fail` topic.
    #[inline]
    fn acquire_for_send(&mut self) -> Result<usize, TopicSendError> {
        self.acquire_waiting(Wait::Forever).map_err(Into::into)
    }

    /// A slot, waiting for reliable subscribers on a `block` topic as `wait` says (its
    /// deadline read there only); the other policies never wait.
    fn acquire_waiting(&mut self, wait: Wait) -> Result<usize, TopicSendTimeoutError> {
        match self.policy {
            DeliveryPolicy::Overwrite => Ok(self.acquire()?),
            DeliveryPolicy::Block => self.acquire_lossless(Until::Deadline(wait.deadline())),
            _ => self.acquire_lossless(Until::No),
        }
    }

    fn acquire(&self) -> Result<usize, TopicSendError> {
        match self.inner.shared().acquire_slot(self.id) {
            Ok(s) => Ok(s),
            Err(_) => self.acquire_slow(),
        }
    }

    /// Every slot looked busy. Out of line, so the send path stays small.
    #[cold]
    #[inline(never)]
    fn acquire_slow(&self) -> Result<usize, TopicSendError> {
        let sh = self.inner.shared();
        // Maybe the dead hold slots: reclaim, then try once more; then once more
        // honouring only the pins and writer marks a live participant can own
        // (garbage a corrupt or hostile peer wrote is cleared).
        self.inner.reclaim_dead();
        sh.acquire_slot(self.id).or_else(|_| sh.acquire_slot_audited(self.id)).map_err(|_| {
            self.counter.full();
            // Failing anyway: the slow path may say why the slots look taken.
            if self.inner.was_truncated() {
                TopicSendError::Truncated
            } else {
                TopicSendError::AllPinned { slots: self.inner.layout().slots as usize }
            }
        })
    }

    /// A slot whose old message every reliable subscriber has read (`block` and `fail`
    /// topics), waiting as `wait` allows. While waiting it holds no slot.
    fn acquire_lossless(&mut self, wait: Until) -> Result<usize, TopicSendTimeoutError> {
        loop {
            let s = self.acquire().map_err(|e| match e {
                TopicSendError::AllPinned { slots } => TopicSendTimeoutError::AllPinned { slots },
                _ => TopicSendTimeoutError::Truncated,
            })?;
            let sh = self.inner.shared();
            let old = match sh.take_slot_lossless(s, &mut self.cursors) {
                Ok(()) => return Ok(s),
                Err(old) => old,
            };
            // Give the slot back untouched (its message stays readable) and see why.
            sh.give_back_slot(s);
            if self.release_blockers(old) {
                continue; // a dead or stuck subscriber was dropped: look again
            }
            let deadline = match wait {
                Until::No => {
                    self.counter.full();
                    return Err(TopicSendTimeoutError::Full { seq: old });
                }
                Until::Deadline(d) if d.passed() => {
                    if self.inner.was_truncated() {
                        return Err(TopicSendTimeoutError::Truncated);
                    }
                    return Err(TopicSendTimeoutError::Timeout);
                }
                Until::Deadline(d) => d,
            };
            self.sleep_for_space(old, deadline);
        }
    }

    /// Sleeps until a reliable subscriber holding message `old` moves, the liveness poll
    /// interval passes or `deadline` does.
    #[cold]
    fn sleep_for_space(&self, old: u64, deadline: Deadline) {
        self.counter.blocked();
        let sh = self.inner.shared();
        let space = self.inner.space();
        // SYNC POINT: load the futex word, then flag the cursors we wait for; a subscriber
        // that sees its flag bumps the word afterwards, so the sleep below cannot miss it.
        let seen = space.load();
        for (i, v) in sh.reliable_cursors() {
            if v & CURSOR_SEQ <= old && !sh.announce_wait(i, v) {
                return; // it moved meanwhile: look again
            }
        }
        let Some(armed) = space.arm(seen) else { return };
        let nap = deadline.remaining().map_or(RELIABLE_LIVENESS_POLL, |r| r.min(RELIABLE_LIVENESS_POLL));
        self.counter.futex_wait();
        space.sleep(armed, Some(nap));
    }

    /// Drops the reliable subscribers holding message `old` that are dead (their entries
    /// are reclaimed), and every reliable subscriber that has not moved for the topic's
    /// reliable timeout while publishers (this one or any other, in any process) were held
    /// back (evicted, all at once: see `Shared::evict_stuck`); both are counted in this
    /// publisher's `drops`. Returns whether any was dropped.
    #[cold]
    fn release_blockers(&mut self, old: u64) -> bool {
        let sh = self.inner.shared();
        let now = monotonic_ns();
        if sh.reliable_cursors().all(|(_, v)| v & CURSOR_SEQ > old) {
            return true; // the subscriber left meanwhile
        }
        // Dead ones: a /proc read each, so at most once per liveness poll interval.
        if now.saturating_sub(self.liveness_checked) >= RELIABLE_LIVENESS_POLL.as_nanos() as u64 {
            self.liveness_checked = now;
            let dead = sh
                .reliable_cursors()
                .filter(|&(_, v)| v & CURSOR_SEQ <= old)
                .filter(|&(i, _)| sh.participants.owner(i).is_none_or(|o| !sh.participants.is_alive(&o)))
                .count();
            if dead > 0 && self.inner.reclaim_dead() > 0 {
                // Reported as evictions are: the publisher's drops.
                self.counter.drops(dead as u64);
                return true;
            }
        }
        // Live but still: evicted once the clock in the segment says the reliable timeout
        // passed, whichever publisher started it.
        let timeout = self.inner.layout().reliable_timeout_ms;
        let evicted = sh.evict_stuck(|| monotonic_ns() / 1_000_000, timeout, HeldCrash::Never);
        self.counter.drops(evicted);
        evicted > 0
    }

    /// Claims, commits and announces slot `s`, whose `len` bytes are written.
    fn finish(&self, s: usize, len: usize) -> u64 {
        let k = self.inner.shared().publish_written(self.id, s, len, monotonic_ns());
        self.announce(len);
        k
    }

    /// Copies `data` into the topic as the next message, waiting as `wait` says where the
    /// topic waits. Returns its sequence number. On an `overwrite` topic it never waits: the
    /// oldest unpinned slot is overwritten. On a `block` topic it waits until every reliable
    /// subscriber has read the message it would overwrite ([`Refused::Full`] after
    /// [`Wait::Now`]); on a `fail` topic it fails with [`TopicSendError::Full`] instead.
    pub fn send_with(&mut self, data: &[u8], wait: Wait) -> Result<u64, Refusal<TopicSendError>> {
        self.check_len(data.len()).map_err(Refused::Failed)?;
        let s = self.acquire_with(wait)?;
        Ok(self.write_and_commit(s, data))
    }

    wait_forms! {
        /// [`send_with`](Self::send_with) that never waits: on a `block` topic it returns
        /// [`TopicTrySendError::Full`] where `send` would wait.
        fn try_send, send, send_timeout, send_deadline (&mut self, data: &[u8]) = send_with now try_send_now -> u64;
        errors (TopicTrySendError, TopicSendError, TopicSendTimeoutError)
    }

    /// [`try_send`](Self::try_send): what [`send_with`](Self::send_with) does for
    /// [`Wait::Now`].
    fn try_send_now(&mut self, data: &[u8]) -> Result<u64, TopicTrySendError> {
        self.check_len(data.len())?;
        let s = self.try_acquire()?;
        Ok(self.write_and_commit(s, data))
    }

    /// `TooLarge` for a message longer than a slot.
    #[inline]
    fn check_len(&self, len: usize) -> Result<(), TopicSendError> {
        let max = self.inner.layout().slot_size as usize;
        if len > max {
            return Err(TopicSendError::TooLarge { len, max });
        }
        Ok(())
    }

    /// A slot to write the next message into, waiting for reliable subscribers on a `block`
    /// topic as `wait` says.
    #[inline]
    fn acquire_with(&mut self, wait: Wait) -> Result<usize, Refusal<TopicSendError>> {
        match wait {
            Wait::Now => self.try_acquire().map_err(|e| match e {
                // Where a blocking send would wait: no room now.
                TopicTrySendError::Full { .. } if self.policy == DeliveryPolicy::Block => Refused::Full(e),
                e => Refused::from(e),
            }),
            // For ever, no deadline passes: `Timeout` comes only from `For` and `Until`.
            wait => self.acquire_waiting(wait).map_err(|e| match e {
                TopicSendTimeoutError::Timeout => Refused::TimedOut,
                e => Refused::Failed(e.into()),
            }),
        }
    }

    /// A slot to write the next message into, without waiting.
    fn try_acquire(&mut self) -> Result<usize, TopicTrySendError> {
        Ok(match self.policy {
            DeliveryPolicy::Overwrite => self.acquire()?,
            _ => self.acquire_lossless(Until::No)?,
        })
    }

    /// The topic's delivery policy.
    pub fn policy(&self) -> DeliveryPolicy {
        self.policy
    }

    /// Writes `data` (at most the slot size) into acquired slot `s` and publishes it.
    #[inline(always)]
    fn write_and_commit(&self, s: usize, data: &[u8]) -> u64 {
        let sh = self.inner.shared();
        let order = PublishOrder::for_len(data.len());
        // SAFETY: `s` came from acquire_slot (so `s < slots` and we hold its writer bits)
        // and `data.len() <= slot_size` was checked by every caller.
        let k = unsafe { sh.publish(self.id, s, data, order, monotonic_ns, PublishCrash::Never) };
        self.announce(data.len());
        k
    }

    /// Loans a slot to write a message in place (zero copy), waiting as `wait` says where
    /// the topic waits (as [`send_with`](Self::send_with) does). The loan is the whole slot
    /// ([`max_message_len`](Self::max_message_len) bytes); write into it,
    /// [`truncate`](Loan::truncate) it to the message's length, then [`Loan::send`] it.
    /// Dropping it unsent publishes nothing.
    ///
    /// On a topic of slots up to 40 B (payloads inline in the slot header) the loan is a
    /// buffer in the `Loan` itself, zeroed, and sending it copies it into the slot it holds:
    /// the slot's old message stays readable until then, and the reader's cache line is
    /// written once, at the send, instead of also when the loan is taken.
    pub fn loan_with(&mut self, wait: Wait) -> Result<Loan<'_>, Refusal<TopicSendError>> {
        let s = self.acquire_with(wait)?;
        Ok(Self::loan_at(self, s))
    }

    wait_forms! {
        /// [`loan_with`](Self::loan_with) that never waits: on a `block` topic it returns
        /// [`TopicTrySendError::Full`] where `loan` would wait.
        fn try_loan, loan, loan_timeout, loan_deadline (&mut self) = loan_with now try_loan_now -> Loan<'_>;
        errors (TopicTrySendError, TopicSendError, TopicSendTimeoutError)
    }

    /// [`try_loan`](Self::try_loan): what [`loan_with`](Self::loan_with) does for
    /// [`Wait::Now`].
    fn try_loan_now(&mut self) -> Result<Loan<'_>, TopicTrySendError> {
        let s = self.try_acquire()?;
        Ok(Self::loan_at(self, s))
    }

    /// [`loan`](Self::loan) for a publisher owned by a [`Lender`]: the loan owns the lent
    /// publisher (which stays refused to every other use until the loan is sent or
    /// dropped), so it may be kept past the call, by a binding for instance. The loan is
    /// taken with the lender's mutex held, as any call on it ([`Lender::lend_mut_after`]).
    pub fn loan_owned(lender: &Lender<Publisher>) -> Result<OwnedLoan, LendOr<TopicSendError>> {
        let (lent, p) = lender.lend_mut_after(|p| Self::loan_in(p).map(Loan::into_parts))?;
        Ok(Loan {
            publisher: lent,
            slot: p.slot,
            len: p.len,
            sent: false,
            inline: p.inline,
            buf: p.buf,
            _life: PhantomData,
        })
    }

    fn loan_in<'a, P: DerefMut<Target = Publisher> + 'a>(mut p: P) -> Result<Loan<'a, P>, TopicSendError> {
        let s = p.acquire_for_send()?;
        Ok(Self::loan_at(p, s))
    }

    /// The loan of acquired slot `s`.
    fn loan_at<'a, P: DerefMut<Target = Publisher> + 'a>(p: P, s: usize) -> Loan<'a, P> {
        let len = p.max_message_len();
        let inline = len <= INLINE_DATA;
        if !inline {
            p.inner.shared().begin_write(s);
        }
        Loan { publisher: p, slot: s, len, sent: false, inline, buf: LoanBytes([0; INLINE_DATA]), _life: PhantomData }
    }

    /// Test hook: acquires a slot, writes `junk` into it and claims a sequence number, then
    /// returns *without committing*, as a publisher killed at that instant would leave it.
    /// Only for crash tests; the slot stays held until this process dies and is reclaimed.
    /// Not part of the API.
    #[cfg(any(test, feature = "internals"))]
    #[doc(hidden)]
    pub fn debug_claim_without_commit(&mut self, junk: &[u8]) -> Result<u64, TopicSendError> {
        let s = self.acquire()?;
        let n = junk.len().min(self.max_message_len());
        let sh = self.inner.shared();
        // SAFETY: as in `send`: we hold slot `s` and `n <= slot_size`.
        Ok(unsafe {
            sh.publish(self.id, s, &junk[..n], PublishOrder::WriteFirst, monotonic_ns, PublishCrash::BeforeCommit)
        })
    }

    /// Largest message in bytes.
    pub fn max_message_len(&self) -> usize {
        self.inner.layout().slot_size as usize
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        // No slot can be held here: loans borrow the publisher mutably.
        self.inner.participants().release(self.id);
    }
}

/// A slot loaned for writing in place, from [`Publisher::loan`]. Derefs to the whole slot
/// (`max_message_len` bytes, with whatever an earlier message left there) until
/// [`truncate`](Loan::truncate)d. Not visible to anyone until sent; dropping it unsent
/// publishes nothing. On a topic of slots up to 40 B it is a zeroed buffer of the slot's
/// size, copied into the slot by [`send`](Loan::send) (see [`Publisher::loan`]).
///
/// `P` is how the loan holds its publisher: borrowed (the default, from
/// [`Publisher::loan`]) or owned ([`OwnedLoan`], from [`Publisher::loan_owned`]).
#[derive(Debug)]
pub struct Loan<'a, P: DerefMut<Target = Publisher> + 'a = &'a mut Publisher> {
    publisher: P,
    slot: usize,
    len: usize,
    sent: bool,
    /// The slot is inline: the message is written into `buf`, and into the slot at send.
    inline: bool,
    buf: LoanBytes,
    _life: PhantomData<&'a mut Publisher>,
}

/// A [`Loan`] that owns its publisher, lent by a [`Lender`](crate::lend::Lender)
/// ([`Publisher::loan_owned`]).
pub type OwnedLoan = Loan<'static, LentMut<Publisher>>;

/// The buffer of an inline loan, aligned as the inline payload in the slot header is (8),
/// so that a typed loan may write its `T` in it.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(8))]
struct LoanBytes([u8; INLINE_DATA]);

/// A loan's fields but its publisher, to move it from a borrowed to an owned holder.
struct LoanParts {
    slot: usize,
    len: usize,
    inline: bool,
    buf: LoanBytes,
}

impl Loan<'_> {
    /// The loan's parts; the slot stays held (nothing is abandoned).
    fn into_parts(self) -> LoanParts {
        let this = std::mem::ManuallyDrop::new(self);
        LoanParts { slot: this.slot, len: this.len, inline: this.inline, buf: this.buf }
    }
}

impl<'a, P: DerefMut<Target = Publisher> + 'a> Loan<'a, P> {
    /// Shortens the message to its first `len` bytes. Like [`Vec::truncate`], a `len` at
    /// least the current length does nothing.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Publishes the loan (its `len()` bytes). Returns the sequence number.
    pub fn send(mut self) -> Result<u64, TopicSendError> {
        self.sent = true;
        if self.inline {
            // `len <= slot_size <= INLINE_DATA`: the copy path of `send`, into the slot held.
            return Ok(self.publisher.write_and_commit(self.slot, &self.buf.0[..self.len]));
        }
        Ok(self.publisher.finish(self.slot, self.len))
    }
}

impl<'a, P: DerefMut<Target = Publisher> + 'a> Deref for Loan<'a, P> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.inline {
            return &self.buf.0[..self.len];
        }
        let sh = self.publisher.inner.shared();
        // SAFETY: we hold the slot's writer bits, so no one else writes it, and it is
        // `slot_size` bytes (at least `len`) inside the mapping which the publisher keeps
        // alive.
        unsafe { std::slice::from_raw_parts(sh.data.slot_ptr(self.slot), self.len) }
    }
}

impl<'a, P: DerefMut<Target = Publisher> + 'a> DerefMut for Loan<'a, P> {
    fn deref_mut(&mut self) -> &mut [u8] {
        if self.inline {
            return &mut self.buf.0[..self.len];
        }
        let sh = self.publisher.inner.shared();
        // SAFETY: as in `deref`; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(sh.data.slot_ptr(self.slot), self.len) }
    }
}

impl<'a, P: DerefMut<Target = Publisher> + 'a> Drop for Loan<'a, P> {
    fn drop(&mut self) {
        if !self.sent {
            self.publisher.inner.shared().abandon_slot(self.slot);
        }
    }
}

impl_transmit!(Publisher: u64, TopicSendError);
