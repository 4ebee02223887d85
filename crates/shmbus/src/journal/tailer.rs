//! Tailers and named readers: reading in index order, waiting, stepping over dead
//! appenders' entries, moving between cycles.

use std::cell::Cell;
use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::OpenError;
use crate::name::NameError;
use crate::sync::Ordering;
use crate::wait::WaitPolicy;

use super::files::CycleFiles;
use super::format::*;
use super::protocol::{self, EntryState};

use super::handle::*;

/// One entry, borrowed from the tailer until its next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Global index (dense, identical for every reader).
    pub index: u64,
    /// CLOCK_REALTIME nanoseconds taken by the appender when it reserved the entry.
    pub ts_ns: u64,
    /// The payload (decompressed if it was stored compressed).
    pub data: &'a [u8],
}

impl Entry<'_> {
    /// Payload length.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// Reading failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    /// Entries `from..to` were deleted by retention before this tailer read them; it
    /// continues at `to`.
    Gap {
        /// First missing index.
        from: u64,
        /// Where the tailer continues.
        to: u64,
    },
    /// Entry `index` fails its checks (CRC, header); the tailer skips it (or the rest of its
    /// cycle if its size is unusable).
    Corrupt {
        /// The entry.
        index: u64,
        /// What failed.
        what: &'static str,
    },
    /// Entry `index` is encrypted and this tailer has no cipher ([`Tailer::set_cipher`]);
    /// it is skipped.
    Encrypted {
        /// The entry.
        index: u64,
    },
    /// A cycle file could not be opened.
    Open(OpenError),
    /// Listing the directory failed.
    Io(io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Gap { from, to } => write!(f, "entries {from}..{to} were deleted by retention before they were read; continuing at {to} (keep more cycles to avoid this)"),
            ReadError::Corrupt { index, what } => write!(f, "journal entry {index} is corrupt ({what}); it is skipped"),
            ReadError::Encrypted { index } => write!(f, "journal entry {index} is encrypted; give the tailer the appenders' cipher (Tailer::set_cipher); it is skipped"),
            ReadError::Open(e) => write!(f, "journal cycle: {e}"),
            ReadError::Io(e) => write!(f, "journal directory: {e}"),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<OpenError> for ReadError {
    fn from(e: OpenError) -> Self {
        ReadError::Open(e)
    }
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// Opening a named reader failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReaderError {
    /// The name is not acceptable (same rules as channel names: no path separators).
    InvalidName(NameError),
    /// A live process holds this reader.
    Busy {
        /// Its pid.
        holder_pid: u32,
    },
    /// All reader entries are used.
    TableFull {
        /// The table size.
        max: usize,
    },
    /// The reader lock file could not be used.
    Io(OpenError),
    /// Positioning the reader failed.
    Read(ReadError),
}

impl fmt::Display for ReaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReaderError::InvalidName(e) => write!(f, "reader name: {e}"),
            ReaderError::Busy { holder_pid } => {
                write!(f, "the named reader is held by live process {holder_pid}; stop it first or use another name")
            }
            ReaderError::TableFull { max } => {
                write!(f, "all {max} named readers are in use; remove unused ones (`Journal::remove_reader`)")
            }
            ReaderError::Io(e) => write!(f, "{e}"),
            ReaderError::Read(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReaderError {}

impl From<NameError> for ReaderError {
    fn from(e: NameError) -> Self {
        ReaderError::InvalidName(e)
    }
}

enum Step {
    Entry { off: u64, len: usize, flags: u64, raw_len: u64, ts: u64, index: u64 },
    Empty,
}

/// Reads entries in index order; any number per journal, in any process. A named reader
/// (from [`Journal::reader`]) also persists its position.
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
    last_reclaim: Cell<Option<Instant>>,
    named: Option<usize>,
    policy: WaitPolicy,
    pending_gap: Option<(u64, u64)>,
    /// The position word of `cy` as last loaded.
    seen: u64,
    /// Polls that found the next entry not yet committed (see `step`).
    idle_polls: u32,
}

impl Tailer {
    pub(super) fn at(inner: Arc<Inner>, index: u64, named: Option<usize>) -> Result<Tailer, ReadError> {
        let cycles = inner.list_cycles()?;
        let current = inner.meta.current().load(Ordering::Acquire);
        // The newest cycle whose first index is <= index.
        let mut chosen = None;
        for &c in cycles.iter().rev() {
            match inner.open_cycle(c) {
                Ok(cy) if cy.hdr.first_index <= index => {
                    chosen = Some(cy);
                    break;
                }
                Ok(cy) => chosen = Some(cy),
                Err(OpenError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
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
            last_reclaim: Cell::new(None),
            named,
            policy: WaitPolicy::default(),
            pending_gap: None,
            seen: 0,
            idle_polls: 0,
        };
        if index < t.cy.hdr.first_index {
            t.pending_gap = Some((index, t.cy.hdr.first_index));
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

    /// Sets the spin-then-sleep policy of the blocking calls.
    pub fn set_wait_policy(&mut self, p: WaitPolicy) {
        self.policy = p;
    }

    /// Global index of the next entry this tailer will look at.
    pub fn position(&self) -> u64 {
        (self.cy.hdr.first_index + self.i).max(self.skip_until)
    }

    /// The next entry if one is committed now; `Ok(None)` at the end.
    pub fn try_next(&mut self) -> Result<Option<Entry<'_>>, ReadError> {
        match self.step()? {
            Step::Entry { off, len, flags, raw_len, ts, index } => {
                self.materialize(off, len, flags, raw_len, ts, index).map(Some)
            }
            Step::Empty => Ok(None),
        }
    }

    /// The next entry, waiting up to `timeout` (`None`: for ever) for it. `Ok(None)` when
    /// the timeout passes.
    pub fn next_timeout(&mut self, timeout: Option<Duration>) -> Result<Option<Entry<'_>>, ReadError> {
        let deadline = crate::wait::deadline_after(timeout);
        loop {
            if let Step::Entry { off, len, flags, raw_len, ts, index } = self.step()? {
                return self.materialize(off, len, flags, raw_len, ts, index).map(Some);
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
    /// sealed entries are reported as [`ReadError::Encrypted`] and skipped.
    pub fn set_cipher(&mut self, cipher: Option<Arc<dyn EntryCipher>>) {
        self.cipher = cipher;
    }

    /// Persists "everything up to and including the last delivered entry is done" for a
    /// named reader (no-op for plain tailers). Without `ack`, each `next` persists the
    /// position of the entry it returns, so after a crash that entry is delivered again:
    /// at-least-once, with a duplicate window of exactly the last delivered entry.
    pub fn ack(&self) {
        if let Some(k) = self.named {
            self.inner.store_reader_pos(k, self.position());
        }
    }

    fn recheck_interval(&self) -> Option<Duration> {
        let (sealed, n, _) = pos_parts(self.cy.pos().load(Ordering::Acquire));
        if self.i < n || sealed {
            Some(Duration::from_millis(2))
        } else {
            None
        }
    }

    /// Whether `step` would make progress (an entry, a skip, a cycle change).
    fn peek_ready(&self) -> bool {
        if self.pending_gap.is_some() {
            return true;
        }
        if self.next_is_final() {
            return true;
        }
        let (sealed, n, u) = pos_parts(self.cy.pos().load(Ordering::Acquire));
        if self.i >= n {
            return sealed && self.next_cycle_exists();
        }
        if self.off + ENTRY_HEADER as u64 > u * UNIT as u64
            || !units_fit(&self.cy, self.off / UNIT as u64, (ENTRY_HEADER / UNIT) as u64, u)
        {
            return true; // inconsistent: let step report it
        }
        let (st, _, _) = entry_word_parts(self.cy.entry_word(self.off).load(Ordering::Acquire));
        if st == ST_COMMITTED || st == ST_ABANDONED {
            return true;
        }
        self.handle_in_flight(n, u);
        false
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

    fn next_cycle_exists(&self) -> bool {
        self.inner.meta.current().load(Ordering::Acquire) > self.cy.num
            || self.stuck_for(u64::MAX) > Duration::from_millis(20)
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
    fn handle_in_flight(&self, n: u64, u: u64) {
        let waited = self.stuck_for(0);
        if waited < Duration::from_millis(1) {
            return;
        }
        if self.last_reclaim.get().is_none_or(|t| t.elapsed() > Duration::from_millis(5)) {
            self.last_reclaim.set(Some(Instant::now()));
            self.inner.reclaim();
        }
        if waited >= Duration::from_millis(self.inner.hdr().abandon_ms) {
            self.force_abandon(n, u);
        }
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

    fn step(&mut self) -> Result<Step, ReadError> {
        if let Some((from, to)) = self.pending_gap.take() {
            return Err(ReadError::Gap { from, to });
        }
        let max = self.inner.hdr().max_entry;
        loop {
            // The position word is reloaded only when we have read everything it showed
            // last time: a tailer keeping up touches the appenders' hot line once per
            // batch, not once per entry. (n and units only grow, so an old value is a
            // valid bound.)
            let (sealed, n, u) = if pos_parts(self.seen).1 > self.i {
                pos_parts(self.seen)
            } else {
                match self.next_state() {
                    Some(EntryState::Committed { .. } | EntryState::Abandoned { .. }) => {
                        // Caught up, but the next entry's own header already says it is
                        // there: read it without touching the position line (see
                        // `next_is_final`).
                        self.idle_polls = 0;
                        (false, self.i + 1, self.cy.cap_units)
                    }
                    Some(EntryState::Unwritten | EntryState::Reserved { .. })
                        if self.inner.meta.current().load(Ordering::Acquire) == self.cy.num
                            && self.idle_polls_skip() =>
                    {
                        // Caught up in the newest cycle and the next entry is not there yet:
                        // nothing to deliver. Loading the position word on every such poll
                        // would pull the appenders' claim line to this core each time and
                        // stall their claim CAS. It is needed here only to notice a stuck
                        // claim, so only every 16th such poll loads it. (A sealed cycle is
                        // followed by a newer one, announced in the metadata's `current`
                        // word, a line written once per cycle: with a newer cycle we always
                        // load the position word.)
                        return Ok(Step::Empty);
                    }
                    _ => {
                        self.seen = self.cy.pos().load(Ordering::Acquire);
                        pos_parts(self.seen)
                    }
                }
            };
            if self.i >= n {
                if !sealed {
                    return Ok(Step::Empty);
                }
                if !self.move_next()? {
                    return Ok(Step::Empty);
                }
                continue;
            }
            let global = self.cy.hdr.first_index + self.i;
            if !units_fit(&self.cy, self.off / UNIT as u64, (ENTRY_HEADER / UNIT) as u64, u) {
                // The position word and our offset disagree: nothing more in this cycle is
                // trustworthy. Move on if we can.
                self.i = n;
                self.off = u * UNIT as u64;
                return Err(ReadError::Corrupt { index: global, what: "entry offset outside the cycle" });
            }
            // Acquire (in `observe`): pairs with the Release CAS in `protocol::commit_entry`.
            let (units, abandoned) = match protocol::observe(self.cy.entry_word(self.off)) {
                EntryState::Committed { units, .. } => (units, false),
                EntryState::Abandoned { units } => (units, true),
                EntryState::Unwritten | EntryState::Reserved { .. } => {
                    let (_, n, u) = pos_parts(self.cy.pos().load(Ordering::Acquire));
                    self.handle_in_flight(n, u);
                    return Ok(Step::Empty);
                }
                EntryState::Junk => {
                    self.i = n;
                    self.off = u * UNIT as u64;
                    return Err(ReadError::Corrupt { index: global, what: "unknown entry state" });
                }
            };
            if !units_fit(&self.cy, self.off / UNIT as u64, units, u) {
                self.i = n;
                self.off = u * UNIT as u64;
                return Err(ReadError::Corrupt { index: global, what: "entry size outside the cycle" });
            }
            self.stuck_since.set(None);
            let off = self.off;
            self.i += 1;
            self.off += units * UNIT as u64;
            if abandoned || global < self.skip_until {
                continue;
            }
            // SAFETY: committed (the Acquire load of word 0 pairs with the Release CAS in
            // `commit_inner`), so these bytes are final; `units_fit` checked that they lie
            // inside the claimed and backed data area.
            let bytes = unsafe {
                std::slice::from_raw_parts(self.cy.data_ptr(off) as *const u8, (units * UNIT as u64) as usize)
            };
            return match read_entry(bytes, 0, self.i - 1, max) {
                Ok((_, payload, flags, raw_len)) => {
                    Ok(Step::Entry { off, len: payload.len(), flags, raw_len, ts: rd_ts(bytes), index: global })
                }
                Err(ScanStop::BadCrc) => Err(ReadError::Corrupt { index: global, what: "CRC mismatch" }),
                Err(_) => Err(ReadError::Corrupt { index: global, what: "bad entry header" }),
            };
        }
    }

    /// Counts an idle poll; `true` when this one may skip the position word.
    fn idle_polls_skip(&mut self) -> bool {
        self.idle_polls = self.idle_polls.wrapping_add(1);
        self.idle_polls % 16 != 0
    }

    fn materialize(
        &mut self,
        off: u64,
        len: usize,
        flags: u64,
        raw_len: u64,
        ts: u64,
        index: u64,
    ) -> Result<Entry<'_>, ReadError> {
        if let Some(k) = self.named {
            self.inner.store_reader_pos(k, index);
        }
        // SAFETY: as in `step`: a committed entry's payload, inside the backed area.
        let payload =
            unsafe { std::slice::from_raw_parts(self.cy.data_ptr(off + ENTRY_HEADER as u64) as *const u8, len) };
        let mut body = payload;
        if flags & FLAG_SEALED != 0 {
            let Some(c) = &self.cipher else {
                return Err(ReadError::Encrypted { index });
            };
            let Some(plain_len) = len.checked_sub(c.overhead()) else {
                return Err(ReadError::Corrupt { index, what: "sealed payload shorter than the cipher's tag" });
            };
            let idx = index.saturating_sub(self.cy.hdr.first_index);
            let nonce = entry_nonce(&self.inner.hdr().id, self.cy.num, idx as u32);
            self.sealed_scratch.clear();
            self.sealed_scratch.resize(plain_len, 0);
            if !c.open(&nonce, &index.to_le_bytes(), payload, &mut self.sealed_scratch) {
                return Err(ReadError::Corrupt { index, what: "decryption failed (wrong key or tampered entry)" });
            }
            body = &self.sealed_scratch;
        }
        if flags & FLAG_LZ4 != 0 {
            if !decompress_into(body, raw_len as usize, &mut self.scratch) {
                return Err(ReadError::Corrupt { index, what: "lz4 payload does not decompress" });
            }
            return Ok(Entry { index, ts_ns: ts, data: &self.scratch });
        }
        if body.len() as u64 != raw_len {
            return Err(ReadError::Corrupt { index, what: "payload length does not match its header" });
        }
        Ok(Entry { index, ts_ns: ts, data: body })
    }

    /// Moves to the next cycle after a sealed one. `Ok(false)`: not there yet.
    fn move_next(&mut self) -> Result<bool, ReadError> {
        let (_, n, _) = pos_parts(self.cy.pos().load(Ordering::Acquire));
        let expect_first = self.cy.hdr.first_index + n;
        let c1 = self.cy.num + 1;
        let current = self.inner.meta.current().load(Ordering::Acquire);
        let next = match self.inner.open_cycle(c1) {
            Ok(cy) => cy,
            Err(OpenError::NotFound { .. }) if current <= self.cy.num => {
                // Sealed but the successor is not created yet (its creator is slow or died).
                if self.stuck_for(u64::MAX) < Duration::from_millis(20) {
                    return Ok(false);
                }
                self.inner.open_or_create_cycle(c1, realtime_ns())?
            }
            Err(OpenError::NotFound { .. }) => {
                // Deleted by retention: continue at the oldest retained entry.
                let first = self.inner.first_index()?;
                let mut t = Tailer::at(self.inner.clone(), first, None)?;
                std::mem::swap(&mut self.cy, &mut t.cy);
                self.seen = 0;
                self.i = t.i;
                self.off = t.off;
                self.skip_until = t.skip_until;
                return Err(ReadError::Gap { from: expect_first, to: first });
            }
            Err(e) => return Err(e.into()),
        };
        if next.hdr.first_index != expect_first {
            let to = next.hdr.first_index;
            self.cy = next;
            self.seen = 0;
            self.i = 0;
            self.off = 0;
            return Err(ReadError::Gap { from: expect_first, to });
        }
        self.cy = next;
        self.seen = 0;
        self.i = 0;
        self.off = 0;
        self.stuck_since.set(None);
        Ok(true)
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
        self.peek_ready()
    }

    fn recheck_interval(&self) -> Option<Duration> {
        Tailer::recheck_interval(self)
    }
}
