//! Tailers and named readers: reading in index order, waiting, stepping over dead
//! appenders' entries, moving between cycles.

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::endpoint::forms::{until, wait_forms};
use crate::endpoint::liveness::{self, Throttle};
use crate::endpoint::receive::{impl_receive, Waited};
use crate::error::{too_small, OpenError, RecvIntoSliceError};
use crate::sync::Ordering;
use crate::wait::{Wait, WaitPolicy};

use super::files::CycleFiles;
use super::format::{
    decompress_into, entry_nonce, entry_word_parts, find_next_entry, pos_parts, pos_word, read_entry, ScanStop,
    ENTRY_HEADER, FLAG_KEYED, FLAG_LZ4, FLAG_SEALED, ST_ABANDONED, ST_COMMITTED, ST_RESERVED, UNIT,
};
use super::protocol::{self, EntryState};

use super::cycles::{abandon_at, entry_ts, units_fit};
use super::error::{corrupt_entry, JournalRecvError, JournalRecvTimeoutError, JournalTryRecvError};
use super::shared::{realtime_ns, CipherError, EntryCipher, Inner};
use crate::lend::{LendOr, Lender, OwnedBytes};

/// One entry, borrowed from the tailer until its next call (zero-copy: from
/// [`Tailer::try_recv_ref`], [`Tailer::recv_ref`], [`Tailer::recv_ref_timeout`]). Derefs to
/// the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef<'a> {
    index: u64,
    ts_ns: u64,
    data: &'a [u8],
}

impl<'a> EntryRef<'a> {
    /// Global index (dense, identical for every reader).
    pub fn index(&self) -> u64 {
        self.index
    }

    /// CLOCK_REALTIME nanoseconds taken by the appender when it claimed the entry.
    pub fn ts_ns(&self) -> u64 {
        self.ts_ns
    }

    /// The payload (decompressed and decrypted if it was stored so).
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// Payload length.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// An owned copy.
    pub fn to_entry(&self) -> Entry {
        Entry { index: self.index, ts_ns: self.ts_ns, data: self.data.to_vec() }
    }

    fn info(&self) -> EntryInfo {
        EntryInfo { index: self.index, ts_ns: self.ts_ns, len: self.data.len() }
    }
}

/// An [`EntryRef`] that owns its tailer, lent by a [`Lender`](crate::lend::Lender)
/// ([`Tailer::entry_owned`]): derefs to the payload; [`OwnedBytes::info`] has the index and
/// timestamp.
pub type OwnedEntryRef = OwnedBytes<Tailer, EntryInfo>;

impl Tailer {
    /// An entry from `recv` (`try_recv_ref`, `recv_ref`, `recv_ref_timeout`) that owns the
    /// tailer of `lender`, lent exclusively, so it may be kept past the call, by a binding
    /// for instance. The receive runs with the lender's mutex held, as any call on it.
    ///
    /// # Panics
    /// If `recv` returns an entry that is not the tailer's it is given (in its mapped cycle
    /// or its decoding buffers).
    pub fn entry_owned<E>(
        lender: &Lender<Tailer>,
        recv: impl FnOnce(&mut Tailer) -> Result<EntryRef<'_>, E>,
    ) -> Result<OwnedEntryRef, LendOr<E>> {
        let view = |t: &mut Tailer| {
            let e = recv(t)?;
            let (info, bytes) = (e.info(), e.data as *const [u8]);
            // SAFETY: `bytes` is the entry just returned, still valid (nothing ran since).
            assert!(t.holds(unsafe { &*bytes }), "entry_owned: the entry is another tailer's");
            Ok((info, bytes))
        };
        // SAFETY: the entry's bytes are this tailer's (checked: its mapped cycle file or its
        // decoding buffers), valid and unchanged until its next call, which the owned entry
        // prevents by holding the tailer lent (and never using it).
        unsafe { OwnedBytes::received(lender, view) }
    }
}

impl std::ops::Deref for EntryRef<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.data
    }
}

/// One entry, owned (from [`Tailer::try_recv`], [`Tailer::recv`], [`Tailer::recv_timeout`]
/// and the iterators).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    index: u64,
    ts_ns: u64,
    data: Vec<u8>,
}

impl Entry {
    /// Global index (dense, identical for every reader).
    pub fn index(&self) -> u64 {
        self.index
    }

    /// CLOCK_REALTIME nanoseconds taken by the appender when it claimed the entry.
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

    /// The payload, without copying it.
    pub fn into_data(self) -> Vec<u8> {
        self.data
    }
}

/// What [`Tailer::try_recv_into`] and its blocking forms put into the buffer: the entry's
/// index, timestamp and length (the buffer holds exactly the payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryInfo {
    index: u64,
    ts_ns: u64,
    len: usize,
}

impl EntryInfo {
    /// Global index.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// CLOCK_REALTIME nanoseconds taken by the appender when it claimed the entry.
    pub fn ts_ns(&self) -> u64 {
        self.ts_ns
    }

    /// Payload length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A blocking iterator over owned entries ([`Tailer::iter`]): it waits for each entry and
/// never ends (the journal has no terminal error; a cut file is reported on every call).
///
/// An `Iterator` whose items are `Result<Entry, JournalRecvError>`.
pub type Iter<'a> = crate::endpoint::iter::Iter<&'a mut Tailer>;

/// An iterator over the owned entries committed now ([`Tailer::try_iter`]): it ends at
/// `Empty`; another error is yielded once, then it ends.
///
/// An `Iterator` whose items are `Result<Entry, JournalRecvError>`.
pub type TryIter<'a> = crate::endpoint::iter::TryIter<&'a mut Tailer>;

impl_receive!(
    Tailer: Entry, EntryInfo, JournalRecvError; Journal, "entry length is not the size of the tailer's payload type";
    typed T = |_info, value| value, note |info, c| c.with("index", info.index())
);
impl_receive!(ref Tailer: EntryRef<'a>; note |entry, c| c.with("index", entry.index()));

/// Where the next entry is: what `materialize` needs.
#[derive(Debug, Clone, Copy)]
struct Found {
    off: u64,
    len: usize,
    flags: u64,
    raw_len: u64,
    ts: u64,
    index: u64,
}

enum Step {
    Entry(Found),
    Empty,
}

/// Entries (and abandoned entries skipped) one `step` walks at most before it returns, so
/// that a call checks its deadline however many entries a cycle holds.
const STEP_BUDGET: u32 = 4096;

/// Index slots after a damaged entry that a tailer tries before it scans the data.
const RESYNC_SLOTS: u64 = 64;

/// Bytes of a damaged range a tailer scans per call (a few ms), see `resync`.
const SCAN_WINDOW: u64 = 4 << 20;

/// Reads entries in index order; any number per journal, in any process. A named reader
/// (from [`Journal::reader`](super::Journal::reader)) also persists its position.
#[derive(Debug)]
pub struct Tailer {
    inner: Arc<Inner>,
    cy: CycleFiles,
    /// In-cycle index and byte offset of the next entry.
    i: u64,
    off: u64,
    /// Deliver nothing below this global index (positioning without an index slot).
    skip_until: u64,
    scratch: Vec<u8>,
    sealed_scratch: Vec<u8>,
    cipher: Option<Arc<dyn EntryCipher>>,
    stuck_since: Cell<Option<(u64, Instant)>>,
    /// Dead appenders are reclaimed at most this often while an entry is in flight.
    reclaim_throttle: Throttle,
    named: Option<usize>,
    policy: WaitPolicy,
    /// An error to report once before anything else (a gap, a damaged range, a reset).
    pending: Option<Box<JournalRecvError>>,
    /// The position word of `cy` as last loaded.
    seen: u64,
    /// Polls that found the next entry not yet committed (see `step`).
    idle_polls: u32,
    /// The last `step` stopped on its budget, not at the end: there is more to do now.
    more: bool,
    /// For a cycle whose position word says "not sealed" although a newer cycle exists (a
    /// damaged word): its end as the successor's first index says, and the bytes present.
    forced_end: Option<(u64, u64)>,
    /// A cycle that could not be opened, already reported.
    bad_cycle: Option<u64>,
    /// (cycle, index, offset) where the current cycle's position word claims more than
    /// its bytes hold, already reported (see `past_the_bytes`).
    held: Option<(u64, u64, u64)>,
    /// Damaged ranges this tailer has reported and skipped.
    damaged: u64,
    /// A scan for the next sound entry in progress: (cycle, index, offset) of the damaged
    /// entry, and how far the scan got.
    scan: Option<(u64, u64, u64, u64)>,
    /// An entry received into a buffer too small for it ([`Tailer::try_recv_into_slice`]):
    /// the next receive returns it again before stepping on.
    redeliver: Option<Found>,
}

impl Tailer {
    pub(super) fn at(inner: Arc<Inner>, index: u64, named: Option<usize>) -> Result<Tailer, OpenError> {
        let cycles = inner.list_cycles().map_err(|e| OpenError::io(&inner.dir, e))?;
        let current = inner.current_cycle();
        // The newest cycle whose first index is <= index. Cycles that cannot be opened are
        // passed over here; reading reports them when it gets there.
        let mut chosen = None;
        for &c in cycles.iter().rev() {
            match inner.open_cycle(c) {
                Ok(cy) if cy.hdr.first_index <= index => {
                    chosen = Some(cy);
                    break;
                }
                Ok(cy) => chosen = Some(cy),
                Err(_) => continue,
            }
        }
        let cy = match chosen {
            Some(cy) => cy,
            None => inner.open_or_create_cycle(current, realtime_ns())?,
        };
        let mut t = Tailer {
            inner,
            i: 0,
            off: 0,
            skip_until: index.max(cy.hdr.first_index),
            cy,
            scratch: Vec::new(),
            sealed_scratch: Vec::new(),
            cipher: None,
            stuck_since: Cell::new(None),
            reclaim_throttle: Throttle::new(liveness::CLAIM_RECHECK),
            named,
            policy: WaitPolicy::default(),
            pending: None,
            seen: 0,
            idle_polls: 0,
            more: false,
            forced_end: None,
            bad_cycle: None,
            held: None,
            damaged: 0,
            scan: None,
            redeliver: None,
        };
        if index < t.cy.hdr.first_index {
            t.pending = Some(Box::new(JournalRecvError::Gap { from: index, to: t.cy.hdr.first_index }));
        }
        // A start in the future of the newest cycle is the end (indices are dense: nothing
        // can be claimed past the end without everything before it).
        if t.inner.current_cycle() <= t.cy.num {
            let (_, n, _) = pos_parts(t.cy.pos().load(Ordering::Acquire));
            t.skip_until = t.skip_until.min(t.cy.hdr.first_index + n);
        }
        // Jump straight to the entry when its index slot is written and checks out.
        let target = t.skip_until - t.cy.hdr.first_index;
        if target > 0 {
            if let Some(off) =
                t.cy.index_slot(target)
                    .map(|s| s.load(Ordering::Relaxed) as u64)
                    .filter(|&v| v != 0)
                    .map(|v| (v - 1) * UNIT as u64)
            {
                if entry_ts(&t.cy, target, t.inner.hdr().max_entry).is_some() {
                    t.i = target;
                    t.off = off;
                }
            }
        }
        Ok(t)
    }

    /// A named reader at its saved position `pos`: a position past the end of the journal
    /// cannot have been saved by a reader (it only ever saves indices it has seen), so the
    /// table is damaged: the reader restarts at the oldest retained entry and reports it.
    pub(super) fn named_at(inner: Arc<Inner>, pos: u64, k: usize) -> Result<Tailer, OpenError> {
        let next = inner.next_index()?;
        if pos <= next {
            return Tailer::at(inner, pos, Some(k));
        }
        let first = inner.first_index()?;
        inner.store_reader_pos(k, first);
        let mut t = Tailer::at(inner, first, Some(k))?;
        t.pending = Some(Box::new(JournalRecvError::PositionReset { saved: pos, to: first }));
        Ok(t)
    }

    /// Makes `e` the first thing this tailer reports (before a pending gap, if any).
    pub(super) fn report_first(&mut self, e: JournalRecvError) {
        if matches!(e, JournalRecvError::Damaged { .. }) {
            self.damaged += 1;
        }
        self.pending = Some(Box::new(e));
    }

    /// Sets the spin-then-sleep policy of the blocking calls.
    pub fn set_wait_policy(&mut self, p: WaitPolicy) {
        self.policy = p;
    }

    /// Global index of the next entry this tailer will look at.
    pub fn position(&self) -> u64 {
        if let Some(f) = &self.redeliver {
            return f.index;
        }
        (self.cy.hdr.first_index + self.i).max(self.skip_until)
    }

    /// How many damaged ranges ([`JournalRecvError::Damaged`]) this tailer has reported and
    /// skipped.
    pub fn damaged_ranges(&self) -> u64 {
        self.damaged
    }

    /// The next entry (zero-copy, valid until the next call), waiting as `wait` says.
    /// Returns within the wait whatever the journal's files hold.
    ///
    /// An entry that is claimed but not written, with no live appender writing it, is
    /// damage, not an entry in flight: it is reported ([`JournalRecvError::Damaged`]) and
    /// skipped at once, so reading a damaged journal to its end never stops early.
    ///
    /// [`Wait::Now`] does not wait, but it does the work there is: walking abandoned entries
    /// and scanning a damaged range for the next sound entry (linear in the cycle's size)
    /// before it says [`Waited::Empty`].
    #[inline]
    pub fn recv_ref_with(&mut self, wait: Wait) -> Result<EntryRef<'_>, Waited<JournalRecvError>> {
        let f = self.find_with(wait)?;
        Ok(self.materialize(f)?)
    }

    wait_forms! {
        /// The next entry if one is committed now (zero-copy, valid until the next call);
        /// [`JournalTryRecvError::Empty`] at the end (see [`recv_ref_with`](Self::recv_ref_with)).
        fn try_recv_ref, recv_ref, recv_ref_timeout, recv_ref_deadline (&mut self) = recv_ref_with -> EntryRef<'_>;
        errors (JournalTryRecvError, JournalRecvError, JournalRecvTimeoutError)
    }

    /// [`recv_ref_with`](Self::recv_ref_with), copied into an owned [`Entry`].
    #[inline]
    pub fn recv_with(&mut self, wait: Wait) -> Result<Entry, Waited<JournalRecvError>> {
        self.recv_ref_with(wait).map(|e| e.to_entry())
    }

    wait_forms! {
        /// [`try_recv_ref`](Self::try_recv_ref), copied into an owned [`Entry`].
        fn try_recv, recv, recv_timeout, recv_deadline (&mut self) = recv_with -> Entry;
        errors (JournalTryRecvError, JournalRecvError, JournalRecvTimeoutError)
    }

    /// [`recv_ref_with`](Self::recv_ref_with), copied into `buf` (cleared first; no
    /// allocation once it has room).
    #[inline]
    pub fn recv_into_with(&mut self, buf: &mut Vec<u8>, wait: Wait) -> Result<EntryInfo, Waited<JournalRecvError>> {
        let e = self.recv_ref_with(wait)?;
        buf.clear();
        buf.extend_from_slice(e.data);
        Ok(e.info())
    }

    wait_forms! {
        /// [`try_recv_ref`](Self::try_recv_ref), copied into `buf` (cleared first; no
        /// allocation once it has room).
        fn try_recv_into, recv_into, recv_into_timeout, recv_into_deadline (&mut self, buf: &mut Vec<u8>)
            = recv_into_with -> EntryInfo;
        errors (JournalTryRecvError, JournalRecvError, JournalRecvTimeoutError)
    }

    /// Copies the entry `f` into the start of `buf`; an entry longer than `buf` is kept to be
    /// returned by the next receive (`TooSmall`).
    fn found_into_slice<E: From<JournalRecvError>>(
        &mut self,
        f: Found,
        buf: &mut [u8],
    ) -> Result<EntryInfo, RecvIntoSliceError<E>> {
        let e = self.materialize(f).map_err(E::from)?;
        let info = e.info();
        match buf.get_mut(..info.len) {
            Some(dst) => {
                dst.copy_from_slice(e.data);
                Ok(info)
            }
            None => {
                self.redeliver = Some(f);
                Err(too_small(info.len, buf.len()))
            }
        }
    }

    /// The next entry, copied into the start of `buf`, waiting as `wait` says: one copy,
    /// straight out of the mapped file (a compressed or sealed entry is decoded into the
    /// tailer's buffer first, as for [`recv_ref_with`](Self::recv_ref_with)), and no
    /// allocation. Returns its index, time stamp and length (`buf[..len]` holds it).
    ///
    /// An entry longer than `buf` is [`RecvIntoSliceError::TooSmall`] and is not delivered:
    /// the tailer stays on it ([`position`](Self::position) and [`ack`](Self::ack) say its
    /// index), and the next receive of any form returns it. Entries are never rewritten, so
    /// it is the same entry then.
    #[inline]
    pub fn recv_into_slice_with(
        &mut self,
        buf: &mut [u8],
        wait: Wait,
    ) -> Result<EntryInfo, RecvIntoSliceError<Waited<JournalRecvError>>> {
        let f = self.find_with(wait)?;
        self.found_into_slice(f, buf)
    }

    wait_forms! {
        /// The next entry if one is committed now, copied into the start of `buf` (see
        /// [`recv_into_slice_with`](Self::recv_into_slice_with)).
        fn try_recv_into_slice, recv_into_slice, recv_into_slice_timeout, recv_into_slice_deadline
            (&mut self, buf: &mut [u8]) = recv_into_slice_with -> EntryInfo;
        errors (JournalTryRecvError, JournalRecvError, JournalRecvTimeoutError) slice
    }

    /// Where the next entry is, waiting for it as `wait` says.
    fn find_with(&mut self, wait: Wait) -> Result<Found, Waited<JournalRecvError>> {
        match wait {
            Wait::Now => self.try_find()?.ok_or(Waited::Empty),
            wait => until(wait, |w| self.wait_find(w.deadline()).map_err(Some)?.ok_or(None)).map_err(Waited::timed),
        }
    }

    /// A blocking iterator over owned entries (see [`Iter`]).
    pub fn iter(&mut self) -> Iter<'_> {
        Iter::new(self)
    }

    /// An iterator over the owned entries committed now (see [`TryIter`]).
    pub fn try_iter(&mut self) -> TryIter<'_> {
        TryIter::new(self)
    }

    /// Where the next entry is, if one is committed now (`None`: the end).
    fn try_find(&mut self) -> Result<Option<Found>, JournalRecvError> {
        if let Some(f) = self.redeliver.take() {
            return Ok(Some(f));
        }
        loop {
            match self.step(true) {
                Ok(Step::Entry(f)) => return Ok(Some(f)),
                // Each such step made progress (entries walked, bytes scanned).
                Ok(Step::Empty) if self.more => continue,
                Ok(Step::Empty) => return self.truncation().map_or(Ok(None), Err),
                Err(e) => return Err(self.truncation().unwrap_or(e)),
            }
        }
    }

    /// [`JournalRecvError::Truncated`] if a file this tailer has mapped (the metadata file, the
    /// current cycle's data or index file) was cut by another process. Slow paths only
    /// (nothing to read, a timeout, damage found): zeros read past a cut look like damage
    /// or like the end, and this says why.
    fn truncation(&self) -> Option<JournalRecvError> {
        super::files::truncated_file(&self.inner.dir, &self.inner.meta, &self.cy)
            .map(|(path, cycle)| JournalRecvError::Truncated { path, cycle })
    }

    /// Where the next entry is, waiting until `deadline` for it (`None`: it passed).
    fn wait_find(&mut self, deadline: crate::wait::Deadline) -> Result<Option<Found>, JournalRecvError> {
        if let Some(f) = self.redeliver.take() {
            return Ok(Some(f));
        }
        let mut idle = 0u32;
        loop {
            match self.step(false) {
                Ok(Step::Entry(f)) => return Ok(Some(f)),
                Ok(Step::Empty) => {}
                Err(e) => return Err(self.truncation().unwrap_or(e)),
            }
            if let Some(e) = self.truncation() {
                return Err(e);
            }
            // `block_on` returns at once while the tailer has work: the deadline is checked
            // here too, so no state of the files can keep this loop past it.
            let remaining = deadline.remaining();
            if remaining.is_some_and(|r| r.is_zero()) {
                return Ok(None);
            }
            if self.more {
                continue;
            }
            idle += 1;
            if idle >= 3 && self.peek_ready() {
                // Ready by its look, yet steps make no progress: the files are in a state
                // that only time or another process changes (already reported). Poll gently
                // instead of spinning.
                let nap = liveness::POLL;
                std::thread::sleep(remaining.map_or(nap, |r| nap.min(r)));
                continue;
            }
            let this = &*self;
            let recheck = this.recheck_interval();
            let ev = this.inner.meta.event();
            if crate::wait::block_on(ev, this.policy, deadline, recheck, || this.peek_ready().then_some(())).is_none() {
                return Ok(None);
            }
        }
    }

    /// Decrypts sealed entries with `cipher` (the appenders' [`EntryCipher`]). Without it,
    /// sealed entries are reported as [`JournalRecvError::Encrypted`] and skipped.
    pub fn set_cipher(&mut self, cipher: Option<Arc<dyn EntryCipher>>) {
        self.cipher = cipher;
    }

    /// Persists "everything up to and including the last delivered entry is done" for a
    /// named reader (no-op for plain tailers). Without `ack`, each receive persists the
    /// position of the entry it returns, so after a crash that entry is delivered again:
    /// at-least-once, with a duplicate window of exactly the last delivered entry.
    pub fn ack(&self) {
        if let Some(k) = self.named {
            self.inner.store_reader_pos(k, self.position());
        }
    }

    fn recheck_interval(&self) -> Option<Duration> {
        let (sealed, n, _) = pos_parts(self.cy.pos().load(Ordering::Acquire));
        if self.i < n || sealed || self.inner.meta.current().load(Ordering::Acquire) > self.cy.num {
            Some(liveness::POLL)
        } else {
            None
        }
    }

    /// Whether `step` would make progress (an entry, a skip, a cycle change). It may
    /// reclaim dead appenders and abandon a stuck entry (see `handle_in_flight`); use
    /// `peek_ready_now` for a look without side effects.
    fn peek_ready(&self) -> bool {
        self.peek(true)
    }

    /// `peek_ready` without side effects: an entry in flight, or a missing successor cycle,
    /// counts as not ready until `peek_ready` (the WaitSet's `recheck`) has looked into it.
    fn peek_ready_now(&self) -> bool {
        self.peek(false)
    }

    fn peek(&self, probe: bool) -> bool {
        // A cut file is reported by the next call: wake the waiter for it.
        if self.redeliver.is_some() || self.pending.is_some() || self.more || self.truncation().is_some() {
            return true;
        }
        if self.next_is_final() {
            return true;
        }
        let (sealed, n, u) = self.view();
        if self.i >= n {
            return sealed && self.next_cycle_exists(probe);
        }
        if self.off + ENTRY_HEADER as u64 > u * UNIT as u64
            || !units_fit(&self.cy, self.off / UNIT as u64, (ENTRY_HEADER / UNIT) as u64, u)
        {
            // Inconsistent: let step report it, unless it has (see `past_the_bytes`).
            return self.held != Some((self.cy.num, self.i, self.off));
        }
        let (st, _, _) = entry_word_parts(self.cy.entry_word(self.off).load(Ordering::Acquire));
        if st == ST_COMMITTED || st == ST_ABANDONED {
            return true;
        }
        probe && self.handle_in_flight(n, u, false)
    }

    /// The position word as this tailer must use it: `(sealed, entries, units)`. A cycle
    /// with a successor is sealed (appenders seal a cycle before creating the next); if its
    /// word says otherwise the word is damaged, and the cycle ends where the successor's
    /// first index says, within the bytes present.
    fn view(&self) -> (bool, u64, u64) {
        match self.forced_end {
            Some((n, u)) => (true, n, u),
            None => pos_parts(self.cy.pos().load(Ordering::Acquire)),
        }
    }

    /// Sets `forced_end` when the position word is not sealed although a successor cycle
    /// exists (see `view`).
    fn check_forced_end(&mut self) {
        if self.forced_end.is_some() || self.inner.meta.current().load(Ordering::Acquire) <= self.cy.num {
            return;
        }
        let (sealed, _, _) = pos_parts(self.cy.pos().load(Ordering::Acquire));
        if sealed {
            return;
        }
        if let Ok(next) = self.inner.open_cycle(self.cy.num + 1) {
            if let Some(n) = next.hdr.first_index.checked_sub(self.cy.hdr.first_index) {
                let n = n.min(self.cy.max_entries);
                let units = self.backed_units();
                self.forced_end = Some((n.max(self.i), units));
            }
        }
    }

    /// Where a sealed cycle really ends (entries): the successor's first index says it
    /// exactly; without one, the position word's count, bounded by the cycle's capacity.
    fn sealed_end(&self, n: u64) -> u64 {
        let end = match self.inner.open_cycle(self.cy.num + 1) {
            Ok(next) => next.hdr.first_index.checked_sub(self.cy.hdr.first_index).unwrap_or(n),
            Err(_) => n,
        };
        end.min(self.cy.max_entries).max(self.i)
    }

    /// Our offset is past the bytes a cycle holds (a damaged position word or entry size
    /// led here). A sealed cycle is done: the rest of it is reported as one range and the
    /// tailer moves on. In the current cycle appenders will seal or extend it: reported
    /// once, then waited on.
    fn past_the_bytes(&mut self) -> Result<Step, JournalRecvError> {
        let (sealed, n, _) = self.view();
        let (first, i, off) = (self.cy.hdr.first_index, self.i, self.off);
        if sealed {
            let end = self.sealed_end(n);
            self.forced_end = Some((end, self.backed_units()));
            self.i = end;
            self.seen = 0;
            if end <= i {
                return Ok(Step::Empty);
            }
            self.damaged += 1;
            return Err(JournalRecvError::Damaged {
                cycle: self.cy.num,
                from: first + i,
                to: first + end,
                bytes: Some((off, off)),
                what: "the cycle's entries end before its position word says".into(),
            });
        }
        if self.held == Some((self.cy.num, i, off)) {
            return Ok(Step::Empty);
        }
        self.held = Some((self.cy.num, i, off));
        self.damaged += 1;
        Err(JournalRecvError::Damaged {
            cycle: self.cy.num,
            from: first + i,
            to: first + i,
            bytes: Some((off, off)),
            what: "the position word claims entries past the bytes present; waiting for appenders to move on".into(),
        })
    }

    /// Units of the data area the file holds now.
    fn backed_units(&self) -> u64 {
        let cap = self.cy.cap_units * UNIT as u64;
        let _ = self.cy.backed(cap);
        self.cy.backed_bytes().min(cap) / UNIT as u64
    }

    /// Whether the entry at our offset is already committed or abandoned, judged from its
    /// own header alone. Sound without the position word: claims are contiguous, so the
    /// entry at our offset can only be our next index, and bytes past the claimed end are
    /// zero (fresh file pages, or zeroed by recovery); the entry is validated (index, size,
    /// CRC) before use anyway. A caught-up tailer thus polls one line, the one the
    /// appender writes next, instead of the appenders' contended position word.
    fn next_is_final(&self) -> bool {
        matches!(self.next_state(), Some(EntryState::Committed { .. } | EntryState::Abandoned { .. }))
    }

    /// The state of the entry at our offset, from its own header alone (`None`: the offset
    /// or the size it claims is outside the cycle). Committed and abandoned states are
    /// only reported when their size fits.
    fn next_state(&self) -> Option<EntryState> {
        let at = self.off / UNIT as u64;
        if !units_fit(&self.cy, at, (ENTRY_HEADER / UNIT) as u64, self.cy.cap_units) {
            return None;
        }
        match protocol::observe(self.cy.entry_word(self.off)) {
            s @ (EntryState::Committed { units, .. } | EntryState::Abandoned { units }) => {
                units_fit(&self.cy, at, units, self.cy.cap_units).then_some(s)
            }
            s => Some(s),
        }
    }

    /// Whether there is a cycle after ours to move to (or to create, if its creator is
    /// slow or died).
    /// `probe`: may start the timer of a successor not created yet.
    fn next_cycle_exists(&self, probe: bool) -> bool {
        let current = self.inner.meta.current().load(Ordering::Acquire);
        if current > self.cy.num {
            // The successor is unreadable (reported): only a later cycle is progress.
            if self.bad_cycle == Some(self.cy.num + 1) {
                return current > self.cy.num + 1;
            }
            return true;
        }
        if !probe {
            let key = u64::MAX ^ (self.cy.num << 40) ^ self.i;
            return matches!(self.stuck_since.get(), Some((k, t)) if k == key && t.elapsed() > liveness::STALLED);
        }
        self.stuck_for(u64::MAX) > liveness::STALLED
    }

    fn stuck_for(&self, key: u64) -> Duration {
        let key = key ^ (self.cy.num << 40) ^ self.i;
        match self.stuck_since.get() {
            Some((k, t)) if k == key => t.elapsed(),
            _ => {
                self.stuck_since.set(Some((key, Instant::now())));
                Duration::ZERO
            }
        }
    }

    /// The next entry is claimed but not committed: detect dead or stuck appenders.
    /// `true`: nobody is writing it (no live appender records the claim, and it is still
    /// unwritten after that was checked): the bytes are damaged, not in flight. `now`:
    /// decide at once (`try_recv_ref`); otherwise only after the entry has waited 1 ms, so a
    /// tailer does not scan the appender table on every poll of an entry being written.
    fn handle_in_flight(&self, n: u64, u: u64, now: bool) -> bool {
        let waited = self.stuck_for(0);
        if !now && waited < liveness::PENDING_GRACE {
            return false;
        }
        if self.reclaim_throttle.due() {
            self.inner.reclaim();
        }
        if !matches!(
            protocol::observe(self.cy.entry_word(self.off)),
            EntryState::Unwritten | EntryState::Reserved { .. }
        ) {
            return false;
        }
        let at = self.off / UNIT as u64;
        // An appender records (cycle, position word before its claim, units) in its
        // participant entry before the claim CAS (Release) and clears it after its commit
        // CAS: a record seen means the entry is being written; no record, and the word
        // still unwritten when loaded after the records, means nobody will write it.
        if self.inner.claim_recorded_elsewhere(usize::MAX, self.cy.num, pos_word(false, self.i, at)).is_none()
            && matches!(
                protocol::observe(self.cy.entry_word(self.off)),
                EntryState::Unwritten | EntryState::Reserved { .. }
            )
        {
            return true;
        }
        if waited >= Duration::from_millis(self.inner.hdr().abandon_ms) {
            self.force_abandon(n, u);
        }
        false
    }

    /// Abandons the entry at our position after the abandon timeout.
    fn force_abandon(&self, n: u64, u: u64) {
        let at = self.off / UNIT as u64;
        let w0 = self.cy.entry_word(self.off).load(Ordering::Acquire);
        let (st, _, cu) = entry_word_parts(w0);
        let units = if st == ST_RESERVED {
            Some(cu)
        } else if w0 == 0 {
            let w = pos_word(false, self.i, at);
            self.inner.claim_recorded_elsewhere(usize::MAX, self.cy.num, w).or_else(|| {
                if self.i + 1 == n {
                    Some(u - at)
                } else {
                    self.cy
                        .index_slot(self.i + 1)
                        .map(|s| s.load(Ordering::Relaxed) as u64)
                        .filter(|&v| v != 0)
                        .map(|v| (v - 1).saturating_sub(at))
                }
            })
        } else {
            None
        };
        if let Some(units) = units.filter(|&k| units_fit(&self.cy, at, k, u)) {
            if abandon_at(&self.cy, at, units) {
                self.inner.meta.event().notify();
            }
        }
    }

    /// The entry at our position (`self.i` at `self.off`) is damaged: finds the next sound
    /// entry of the cycle, moves there, and describes what was skipped. Sources, in order:
    /// the index slots of the next entries (validated against the entries they point at),
    /// then a scan of the data area for the next committed entry whose header and checksum
    /// hold (each entry carries its own index). Entries that live appenders are still
    /// writing inside the range are not skipped: reading stops before the first of them.
    fn resync(&mut self, what: &str) -> Option<JournalRecvError> {
        // The real bounds (the caller may have had the fast path's guess).
        self.seen = self.cy.pos().load(Ordering::Acquire);
        self.check_forced_end();
        let (_, n, u) = self.view();
        let (i, off) = (self.i, self.off);
        let max = self.inner.hdr().max_entry;
        let limit = u.saturating_mul(UNIT as u64).min(self.backed_units() * UNIT as u64);
        let mut found = None;
        for j in i + 1..n.min(i + 1 + RESYNC_SLOTS) {
            let Some(v) = self.cy.index_slot(j).map(|s| s.load(Ordering::Relaxed) as u64).filter(|&v| v != 0) else {
                continue;
            };
            let o = (v - 1) * UNIT as u64;
            if o > off && o + ENTRY_HEADER as u64 <= limit && self.sound_at(j, o, limit, max) {
                found = Some((j, o));
                break;
            }
        }
        if found.is_none() && off < limit {
            // The scan goes on from where an earlier call left it for this same place, and
            // looks at most SCAN_WINDOW bytes per call, so that a call keeps to its deadline
            // whatever the size of the damage (the caller is told to come back).
            let from = match self.scan {
                Some((c, si, soff, at)) if (c, si, soff) == (self.cy.num, i, off) => at,
                _ => off,
            };
            let window_end = from.saturating_add(SCAN_WINDOW);
            // An entry starting before the window's end may extend past it.
            let end = limit.min(window_end.saturating_add(ENTRY_HEADER as u64 + max));
            // SAFETY: `end <= limit`, within the bytes the file holds (`backed_units`) and
            // the mapping; the scan only reads, and validates every entry it accepts (a
            // concurrent writer can only be writing claimed-but-uncommitted entries, which
            // the scan does not accept).
            let data = unsafe { std::slice::from_raw_parts(self.cy.data_ptr(0), end as usize) };
            found = find_next_entry(data, from, i + 1, n, max);
            if found.is_none() && window_end < limit {
                self.scan = Some((self.cy.num, i, off, window_end));
                return None;
            }
        }
        self.scan = None;
        let (mut j, mut o) = match found {
            Some(x) => x,
            // Nothing sound follows: the damage runs to the end of what is claimed. A
            // damaged position word may claim the impossible: the end is bounded by the
            // bytes present, by a successor's first index, and by the smallest entry size.
            None => {
                let units = u.min(self.backed_units());
                let (sealed, _, _) = self.view();
                if sealed {
                    let end = self.sealed_end(n);
                    self.forced_end = Some((end, units));
                    (end, units * UNIT as u64)
                } else {
                    (n.min(self.cy.max_entries).min(units / (ENTRY_HEADER / UNIT) as u64), units * UNIT as u64)
                }
            }
        };
        // Always past the damaged entry, never back.
        j = j.max(i + 1);
        o = o.max(off);
        // Claims in flight between: resume at the first (it will be committed or abandoned).
        if let Some((k, ku)) = self.inner.earliest_claim_between(self.cy.num, i, j) {
            j = k;
            o = ku * UNIT as u64;
        }
        let first = self.cy.hdr.first_index;
        self.i = j;
        self.off = o;
        self.seen = 0;
        self.stuck_since.set(None);
        self.damaged += 1;
        Some(JournalRecvError::Damaged {
            cycle: self.cy.num,
            from: first + i,
            to: first + j,
            bytes: Some((off, o.max(off))),
            what: what.to_owned(),
        })
    }

    /// Whether entry `j` at byte `o` is sound: committed and valid, or abandoned with a size
    /// that fits.
    fn sound_at(&self, j: u64, o: u64, limit: u64, max: u64) -> bool {
        let w = self.cy.entry_word(o).load(Ordering::Acquire);
        let (st, _, units) = entry_word_parts(w);
        let Some(end) = units.checked_mul(UNIT as u64).and_then(|b| b.checked_add(o)) else { return false };
        if units < (ENTRY_HEADER / UNIT) as u64 || end > limit {
            return false;
        }
        match st {
            ST_ABANDONED => true,
            ST_COMMITTED => {
                // SAFETY: committed (Acquire above), inside the backed bytes (`end <= limit`).
                let bytes = unsafe { std::slice::from_raw_parts(self.cy.data_ptr(o), (units * UNIT as u64) as usize) };
                read_entry(bytes, 0, j, max).is_ok()
            }
            _ => false,
        }
    }

    /// The entry at our position failed a check: reported, and the tailer moves to the next
    /// sound entry.
    fn damaged_here(&mut self, what: &str) -> Result<Step, JournalRecvError> {
        let Some(e) = self.resync(what) else {
            // The scan for the next sound entry is not finished: more next call.
            self.more = true;
            return Ok(Step::Empty);
        };
        if matches!(e, JournalRecvError::Damaged { to, .. } if to <= self.skip_until) {
            // Before where this tailer was asked to start: not its business.
            self.damaged -= 1;
            self.more = true;
            return Ok(Step::Empty);
        }
        Err(e)
    }

    fn step(&mut self, now: bool) -> Result<Step, JournalRecvError> {
        self.more = false;
        if let Some(e) = self.pending.take() {
            return Err(*e);
        }
        let max = self.inner.hdr().max_entry;
        let mut budget = STEP_BUDGET;
        loop {
            budget -= 1;
            if budget == 0 {
                self.more = true;
                return Ok(Step::Empty);
            }
            // The position word is reloaded only when we have read everything it showed
            // last time: a tailer keeping up touches the appenders' hot line once per
            // batch, not once per entry. (n and units only grow, so an old value is a
            // valid bound.)
            let (sealed, n, u) = if pos_parts(self.seen).1 > self.i && self.forced_end.is_none() {
                pos_parts(self.seen)
            } else {
                match self.next_state() {
                    Some(EntryState::Committed { .. } | EntryState::Abandoned { .. }) if self.forced_end.is_none() => {
                        // Caught up, but the next entry's own header already says it is
                        // there: read it without touching the position line (see
                        // `next_is_final`).
                        self.idle_polls = 0;
                        (false, self.i + 1, self.cy.cap_units)
                    }
                    Some(EntryState::Unwritten | EntryState::Reserved { .. })
                        if (!now || (self.seen != 0 && pos_parts(self.seen).1 <= self.i))
                            && self.inner.meta.current().load(Ordering::Acquire) == self.cy.num
                            && self.idle_polls_skip() =>
                    {
                        // Caught up in the newest cycle and the next entry is not there yet:
                        // nothing to deliver. Loading the position word on every such poll
                        // would pull the appenders' claim line to this core each time and
                        // stall their claim CAS. It is needed here only to notice a stuck
                        // claim, so only every 16th such poll loads it. (A sealed cycle is
                        // followed by a newer one, announced in the metadata's `current`
                        // word, a line written once per cycle: with a newer cycle we always
                        // load the position word.) `try_recv_ref` skips only once it has seen the
                        // position word say it is caught up: an unwritten entry that the word
                        // already claimed may be damage, which it must report at once.
                        return Ok(Step::Empty);
                    }
                    _ => {
                        self.seen = self.cy.pos().load(Ordering::Acquire);
                        self.check_forced_end();
                        self.view()
                    }
                }
            };
            if self.i >= n {
                if !sealed {
                    self.check_forced_end();
                    if self.forced_end.is_some() {
                        continue;
                    }
                    return Ok(Step::Empty);
                }
                if !self.move_next()? {
                    return Ok(Step::Empty);
                }
                continue;
            }
            if !units_fit(&self.cy, self.off / UNIT as u64, (ENTRY_HEADER / UNIT) as u64, u) {
                // Our offset is outside the claimed, backed area: what led here was damaged.
                if self.off + ENTRY_HEADER as u64 > self.backed_units() * UNIT as u64 {
                    return self.past_the_bytes();
                }
                return self.damaged_here("entry offset outside the cycle");
            }
            // Acquire (in `observe`): pairs with the Release CAS in `protocol::commit_entry`.
            let (units, abandoned) = match protocol::observe(self.cy.entry_word(self.off)) {
                EntryState::Committed { units, .. } => (units, false),
                EntryState::Abandoned { units } => (units, true),
                EntryState::Unwritten | EntryState::Reserved { .. } => {
                    if self.handle_in_flight(n, u, now) {
                        return self.damaged_here("claimed but never written: zeroed or overwritten bytes");
                    }
                    return Ok(Step::Empty);
                }
                EntryState::Junk => return self.damaged_here("unknown entry state"),
            };
            if !units_fit(&self.cy, self.off / UNIT as u64, units, u) {
                return self.damaged_here("entry size outside the cycle");
            }
            let global = self.cy.hdr.first_index + self.i;
            let off = self.off;
            if abandoned {
                self.stuck_since.set(None);
                self.i += 1;
                self.off += units * UNIT as u64;
                continue;
            }
            // SAFETY: committed (the Acquire load of word 0 pairs with the Release CAS in
            // `commit_inner`), so these bytes are final; `units_fit` checked that they lie
            // inside the claimed and backed data area.
            let bytes = unsafe { std::slice::from_raw_parts(self.cy.data_ptr(off), (units * UNIT as u64) as usize) };
            let checked = read_entry(bytes, 0, self.i, max);
            match checked {
                Err(ScanStop::BadCrc) => {
                    // The header holds (index, sizes): only this entry's bytes are bad.
                    self.stuck_since.set(None);
                    self.i += 1;
                    self.off += units * UNIT as u64;
                    if global < self.skip_until {
                        continue;
                    }
                    return Err(corrupt_entry(global, "CRC mismatch"));
                }
                Err(_) => return self.damaged_here("bad entry header"),
                Ok(_) => {}
            }
            self.stuck_since.set(None);
            self.i += 1;
            self.off += units * UNIT as u64;
            if global < self.skip_until {
                continue;
            }
            return match checked {
                Ok((_, payload, flags, raw_len)) => {
                    Ok(Step::Entry(Found { off, len: payload.len(), flags, raw_len, ts: rd_ts(bytes), index: global }))
                }
                Err(_) => Err(corrupt_entry(global, "bad entry header")),
            };
        }
    }

    /// Counts an idle poll; `true` when this one may skip the position word.
    fn idle_polls_skip(&mut self) -> bool {
        self.idle_polls = self.idle_polls.wrapping_add(1);
        self.idle_polls % 16 != 0
    }

    fn materialize(&mut self, f: Found) -> Result<EntryRef<'_>, JournalRecvError> {
        let Found { off, len, flags, raw_len, ts, index } = f;
        if let Some(k) = self.named {
            self.inner.store_reader_pos(k, index);
        }
        // SAFETY: as in `step`: a committed entry's payload, inside the backed area.
        let payload = unsafe { std::slice::from_raw_parts(self.cy.data_ptr(off + ENTRY_HEADER as u64), len) };
        let mut body = payload;
        if flags & FLAG_SEALED != 0 {
            let key_id = (flags & FLAG_KEYED != 0 && payload.len() >= 4)
                .then(|| u32::from_le_bytes([payload[0], payload[1], payload[2], payload[3]]));
            let Some(c) = &self.cipher else {
                return Err(JournalRecvError::Encrypted { index, key_id });
            };
            let Some(plain_len) = len.checked_sub(c.overhead()) else {
                return Err(corrupt_entry(index, "sealed payload shorter than the cipher's tag"));
            };
            let idx = index.saturating_sub(self.cy.hdr.first_index);
            let nonce = entry_nonce(&self.inner.hdr().id, self.cy.num, idx as u32);
            self.sealed_scratch.clear();
            self.sealed_scratch.resize(plain_len, 0);
            match c.open_entry(&nonce, &index.to_le_bytes(), payload, &mut self.sealed_scratch) {
                Ok(()) => {}
                Err(CipherError::UnknownKey { key_id }) => return Err(JournalRecvError::UnknownKey { index, key_id }),
                Err(_) => return Err(JournalRecvError::Unauthenticated { index }),
            }
            body = &self.sealed_scratch;
        }
        if flags & FLAG_LZ4 != 0 {
            if !decompress_into(body, raw_len as usize, &mut self.scratch) {
                return Err(corrupt_entry(index, "lz4 payload does not decompress"));
            }
            return Ok(EntryRef { index, ts_ns: ts, data: &self.scratch });
        }
        if body.len() as u64 != raw_len {
            return Err(corrupt_entry(index, "payload length does not match its header"));
        }
        Ok(EntryRef { index, ts_ns: ts, data: body })
    }

    /// Whether `bytes` lie in this tailer's memory: its mapped cycle file or its decoding
    /// buffers (where the entries it lends are). Empty bytes are anyone's.
    fn holds(&self, bytes: &[u8]) -> bool {
        let within = |base: *const u8, len: usize| {
            let (start, at) = (base as usize, bytes.as_ptr() as usize);
            at >= start && at.saturating_add(bytes.len()) <= start.saturating_add(len)
        };
        bytes.is_empty()
            || within(self.cy.data.as_ptr(), self.cy.data.len())
            || within(self.scratch.as_ptr(), self.scratch.len())
            || within(self.sealed_scratch.as_ptr(), self.sealed_scratch.len())
    }

    /// Moves to the next cycle after a sealed one. `Ok(false)`: not there yet.
    ///
    /// Only ever forward: a missing successor (deleted by retention: a gap; lost otherwise:
    /// damage) or one that cannot be opened (damage) is passed over to the next cycle
    /// present, and reported once.
    fn move_next(&mut self) -> Result<bool, JournalRecvError> {
        let (_, n, _) = self.view();
        let expect_first = self.cy.hdr.first_index.saturating_add(n);
        let c1 = self.cy.num + 1;
        let problem = match self.inner.open_cycle(c1) {
            Ok(next) => {
                let to = next.hdr.first_index;
                self.enter(next);
                if to > expect_first {
                    return Err(JournalRecvError::Gap { from: expect_first, to });
                }
                return Ok(true);
            }
            Err(OpenError::NotFound { .. }) if self.inner.current_cycle() <= self.cy.num => {
                // Sealed but the successor is not created yet (its creator is slow or died).
                if self.stuck_for(u64::MAX) < liveness::STALLED {
                    return Ok(false);
                }
                let next = match self.inner.open_or_create_after(c1, realtime_ns(), Some(&self.cy)) {
                    Ok(next) => next,
                    // Reported once; then waited on like a successor not created yet.
                    Err(e) if self.bad_cycle != Some(c1) => {
                        self.bad_cycle = Some(c1);
                        return Err(e.into());
                    }
                    Err(_) => return Ok(false),
                };
                self.enter(next);
                return Ok(true);
            }
            Err(OpenError::NotFound { .. }) => None,
            Err(e) => Some(e),
        };
        // The successor is missing or unreadable: the next cycle present that opens.
        let mut next = None;
        for c in self.inner.list_cycles()?.into_iter().filter(|&c| c > c1) {
            if let Ok(cy) = self.inner.open_cycle(c) {
                next = Some(cy);
                break;
            }
        }
        let retention = problem.is_none() && self.inner.meta.first().load(Ordering::Acquire) > c1;
        let Some(next) = next else {
            // Nothing after it (yet): report an unreadable successor once, then wait for
            // it to be repaired or followed.
            if let Some(e) = problem {
                if self.bad_cycle != Some(c1) {
                    self.bad_cycle = Some(c1);
                    self.damaged += 1;
                    return Err(JournalRecvError::Damaged {
                        cycle: c1,
                        from: expect_first,
                        to: expect_first,
                        bytes: None,
                        what: super::open_error_message(&e),
                    });
                }
            }
            return Ok(false);
        };
        let to = next.hdr.first_index;
        let num = next.num;
        self.enter(next);
        if to <= expect_first {
            return Ok(true);
        }
        if retention {
            return Err(JournalRecvError::Gap { from: expect_first, to });
        }
        self.damaged += 1;
        Err(JournalRecvError::Damaged {
            cycle: c1,
            from: expect_first,
            to,
            bytes: None,
            what: match problem {
                Some(e) => super::open_error_message(&e),
                None if num > c1 + 1 => format!("cycles {c1}..{num} are missing"),
                None => format!("cycle {c1}'s files are missing"),
            },
        })
    }

    /// Makes `next` the cycle being read, from its start.
    fn enter(&mut self, next: CycleFiles) {
        self.cy = next;
        self.seen = 0;
        self.i = 0;
        self.off = 0;
        self.forced_end = None;
        self.stuck_since.set(None);
    }
}

fn rd_ts(b: &[u8]) -> u64 {
    b.get(24..32).and_then(|s| s.try_into().ok()).map_or(0, u64::from_le_bytes)
}

impl Drop for Tailer {
    fn drop(&mut self) {
        if let Some(k) = self.named {
            self.inner.release_reader(k);
        }
    }
}

#[cfg(not(loom))]
impl crate::waitset::Waitable for Tailer {
    fn wait_handle(&self) -> crate::waitset::WaitHandle<'_> {
        crate::waitset::WaitHandle { event: self.inner.meta.event() }
    }

    fn is_ready(&self) -> bool {
        self.peek_ready_now()
    }

    fn recheck(&self) -> bool {
        self.peek_ready()
    }

    fn recheck_interval(&self) -> Option<Duration> {
        Tailer::recheck_interval(self)
    }
}
