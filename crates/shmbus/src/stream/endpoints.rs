//! The stream's segment glue: layout, endpoints, errors (see the module docs of `stream`).

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

use super::protocol::{
    decode_header, encode_header, record_size, ClaimError, Corruption, ReaderCore, RingShared, WriterCore, HEADER,
};
use crate::domain::Domain;
use crate::error::OpenError;
use crate::participants::{EntryState, ParticipantTable};
use crate::segment::{CreateOptions, Kind, Layout, Segment, KIND_OFFSET, PARAMS, TRUNCATED_MSG};
use crate::sys::{coarse_monotonic_ns, page_size, process_is_alive, Mapping, ProcessId};
use crate::wait::{block_on, deadline_after, WaitPolicy};
use crate::waitset::{WaitHandle, Waitable};

pub use super::protocol::Corruption as StreamCorrupt;

/// How often a blocked endpoint re-checks that its peer is alive, and how long a liveness
/// answer is cached: a dead peer is reported at most this long (plus one `/proc` read) after
/// it died.
pub const LIVENESS_INTERVAL: Duration = Duration::from_millis(50);
/// Largest accepted ring capacity (1 TiB).
pub const MAX_CAPACITY: u64 = 1 << 40;
/// Participant entry held by the writer.
const WRITER_SLOT: usize = 0;
/// Participant entry held by the reader.
const READER_SLOT: usize = 1;
/// Role numbers stored in the participant entries.
pub(crate) const ROLE_WRITER: u32 = 1;
pub(crate) const ROLE_READER: u32 = 2;
/// Bound on the offset of the ring data inside the kind area (a corrupt header cannot make
/// us map far beyond the control block).
const MAX_DATA_OFFSET: u64 = 1 << 20;

/// Creation parameters of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamConfig {
    /// Ring size in bytes: a power of two, at least one page (see the module docs).
    pub capacity: usize,
}

impl StreamConfig {
    /// A stream of `capacity` bytes.
    pub fn new(capacity: usize) -> StreamConfig {
        StreamConfig { capacity }
    }
}

impl Default for StreamConfig {
    /// 1 MiB.
    fn default() -> Self {
        StreamConfig::new(1 << 20)
    }
}

// ---------------------------------------------------------------------------------------
// Layout

/// The stream's kind area: the control block ([`RingShared`]) at offset 0, the ring data at
/// `data_offset` (page aligned in the file), `capacity` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamLayout {
    capacity: u64,
    data_offset: u64,
}

fn capacity_error(c: u64) -> Option<String> {
    let page = page_size() as u64;
    let up = c.checked_next_power_of_two().unwrap_or(MAX_CAPACITY).clamp(page, MAX_CAPACITY);
    let down = if c.is_power_of_two() { c } else { up / 2 }.max(page);
    if c == 0 {
        Some(format!("stream capacity is 0 bytes; give a power of two of at least one page ({page} bytes)"))
    } else if c % page != 0 {
        Some(format!("stream capacity {c} is not a multiple of the page size {page}; use a power of two of at least {page}, e.g. {up}"))
    } else if !c.is_power_of_two() {
        Some(format!("stream capacity {c} is a page multiple but not a power of two; use {down} or {up}"))
    } else if c > MAX_CAPACITY {
        Some(format!("stream capacity {c} exceeds the maximum {MAX_CAPACITY}"))
    } else {
        None
    }
}

impl StreamLayout {
    fn for_capacity(capacity: u64) -> Result<StreamLayout, String> {
        if let Some(e) = capacity_error(capacity) {
            return Err(e);
        }
        let page = page_size() as u64;
        let ctrl_end = KIND_OFFSET as u64 + std::mem::size_of::<RingShared>() as u64;
        let data_offset = ctrl_end.div_ceil(page) * page - KIND_OFFSET as u64;
        Ok(StreamLayout { capacity, data_offset })
    }

    fn max_record_len(&self) -> u64 {
        (self.capacity - HEADER).min(u32::MAX as u64)
    }
}

impl Layout for StreamLayout {
    const KIND: Kind = Kind::Stream;

    fn from_params(params: &[u64; PARAMS]) -> Result<Self, String> {
        let (capacity, data_offset) = (params[0], params[1]);
        if let Some(e) = capacity_error(capacity) {
            return Err(e);
        }
        let page = page_size() as u64;
        if data_offset < std::mem::size_of::<RingShared>() as u64 || data_offset > MAX_DATA_OFFSET {
            return Err(format!("stream data offset {data_offset} is outside the control block bounds"));
        }
        if (KIND_OFFSET as u64 + data_offset) % page != 0 {
            return Err(format!("stream data offset {data_offset} is not page aligned in the file (page size {page}); was it created on a host with another page size?"));
        }
        if let Some((i, v)) = params.iter().enumerate().skip(2).find(|(_, &v)| v != 0) {
            return Err(format!("unknown stream parameter #{i} = {v} (from a newer shmbus?)"));
        }
        Ok(StreamLayout { capacity, data_offset })
    }

    fn params(&self) -> [u64; PARAMS] {
        let mut p = [0; PARAMS];
        p[0] = self.capacity;
        p[1] = self.data_offset;
        p
    }

    fn kind_area_size(&self) -> u64 {
        self.data_offset + self.capacity
    }

    fn param_names() -> [&'static str; PARAMS] {
        ["capacity", "", "", "", "", "", "", ""]
    }

    unsafe fn init(&self, _base: *mut u8) {
        // A zero-filled control block is an empty ring: both positions 0, no waiters.
    }
}

// ---------------------------------------------------------------------------------------
// Shared endpoint plumbing

/// An open segment with the ring mapped twice and one participant entry held.
#[derive(Debug)]
struct Shared {
    seg: Segment,
    /// `2 * capacity` bytes: the ring data, mapped twice back to back.
    ring: Mapping,
    layout: StreamLayout,
    slot: usize,
    me: ProcessId,
}

impl Shared {
    fn create(
        domain: &Domain,
        name: &str,
        config: &StreamConfig,
        opts: &CreateOptions,
        slot: usize,
        role: u32,
    ) -> Result<Shared, OpenError> {
        let layout =
            StreamLayout::for_capacity(config.capacity as u64).map_err(|what| OpenError::InvalidConfig { what })?;
        let (seg, layout, _created) = Segment::create_or_open(domain, name, &layout, opts)?;
        Shared::attach(seg, layout, slot, role)
    }

    fn open(domain: &Domain, name: &str, slot: usize, role: u32) -> Result<Shared, OpenError> {
        let (seg, layout) = Segment::open::<StreamLayout>(domain, name)?;
        Shared::attach(seg, layout, slot, role)
    }

    fn attach(seg: Segment, layout: StreamLayout, slot: usize, role: u32) -> Result<Shared, OpenError> {
        let cap = usize::try_from(layout.capacity)
            .map_err(|_| OpenError::corrupt(seg.path(), "capacity exceeds the address space"))?;
        let ring = Mapping::map_ring(seg.file().as_fd(), KIND_OFFSET as u64 + layout.data_offset, cap)
            .map_err(|e| OpenError::io(seg.path(), e))?;
        let me = ProcessId::current();
        claim(&seg, me, slot, role)?;
        Ok(Shared { seg, ring, layout, slot, me })
    }

    #[inline]
    fn ctrl(&self) -> &RingShared {
        // SAFETY: the kind area starts page aligned (align ≥ 128) and is at least
        // `data_offset >= size_of::<RingShared>()` bytes (validated by `from_params` and the
        // file size check), mapped as long as `self.seg` lives; RingShared holds only
        // atomics, valid for every bit pattern.
        unsafe { &*(self.seg.kind_base() as *const RingShared) }
    }

    #[inline]
    fn mask(&self) -> u64 {
        self.layout.capacity - 1
    }

    /// Address of ring position `pos`. Any record starting there of at most `capacity`
    /// bytes is inside the double mapping.
    #[inline]
    fn at(&self, pos: u64) -> *mut u8 {
        // SAFETY: `pos & mask < capacity` and the mapping is `2 * capacity` bytes long.
        unsafe { self.ring.as_ptr().add((pos & self.mask()) as usize) }
    }

    fn table(&self) -> ParticipantTable<'_> {
        self.seg.participants()
    }

    /// Whether the segment or the ring mapping was truncated under this process (see
    /// [`ReadError::Truncated`]). Slow paths only: nothing found, a failure, a timeout.
    #[cold]
    fn truncated(&self) -> bool {
        self.seg.was_truncated() || self.ring.was_truncated()
    }

    fn corrupt_open(&self, c: Corruption) -> OpenError {
        OpenError::corrupt(self.seg.path(), c.to_string())
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.table().release(self.slot);
        // Wake a peer blocked on us so it notices we are gone now, not at its next re-check.
        self.ctrl().nudge();
    }
}

/// How long an entry may stay half-claimed or half-reclaimed (an honest claimer or
/// reclaimer finishes in microseconds) before a newcomer takes it over.
const STALE_ENTRY: Duration = Duration::from_millis(20);

/// Claims the exclusive participant entry `slot`, taking it over from a dead holder, from a
/// claimer or reclaimer that died half-way (the entry stays unchanged for `STALE_ENTRY`),
/// or from garbage a corrupt or hostile peer wrote there.
fn claim(seg: &Segment, me: ProcessId, slot: usize, role: u32) -> Result<(), OpenError> {
    let table = seg.participants();
    let mut holder = 0;
    let mut watched: Option<(u64, Instant)> = None;
    let give_up = Instant::now() + 10 * STALE_ENTRY;
    while Instant::now() < give_up {
        if table.register(me, role, slot..slot + 1).is_some() {
            return Ok(());
        }
        let word = table.raw_word(slot);
        match (table.state(slot), table.owner(slot)) {
            (_, None) => continue, // released meanwhile
            (EntryState::Active { .. }, Some(o)) => {
                holder = o.process.pid;
                // Our own pid with another start time is a dead predecessor (a pid reused,
                // as when a container restarts), not us: `process_is_alive` says so.
                let us = o.process.pid == me.pid
                    && (o.process.start_time == me.start_time || o.process.start_time == 0 || me.start_time == 0);
                if us || process_is_alive(o.process) {
                    return Err(OpenError::Busy { path: seg.path().to_owned(), holder_pid: holder });
                }
            }
            (EntryState::Claiming | EntryState::Reclaiming, Some(o)) if process_is_alive(o.process) => {
                // Someone is claiming or reclaiming it right now, or died doing so long ago
                // (and its pid was reused), or a hostile peer wrote a live pid here: wait a
                // little, then take it over if the word has not moved.
                holder = o.process.pid;
                match watched {
                    Some((w, since)) if w == word => {
                        if since.elapsed() >= STALE_ENTRY {
                            table.take_over_stale(slot, word, me, |_, _| {});
                        }
                    }
                    _ => watched = Some((word, Instant::now())),
                }
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            _ => {}
        }
        // The holder is dead (or the entry is garbage). A stream endpoint leaves nothing to
        // repair (see the module docs), so the cleanup is empty; reclaiming only frees it.
        table.reclaim_dead_in(slot..slot + 1, me, process_is_alive, |_, _| {});
        std::thread::yield_now();
    }
    Err(OpenError::Busy { path: seg.path().to_owned(), holder_pid: holder })
}

/// Cached liveness of the peer endpoint.
#[derive(Debug)]
struct PeerWatch {
    slot: usize,
    seen: ProcessId,
    checked_ns: u64,
    alive: bool,
}

impl PeerWatch {
    fn new(slot: usize) -> PeerWatch {
        PeerWatch { slot, seen: ProcessId { pid: 0, start_time: 0 }, checked_ns: 0, alive: false }
    }

    /// Whether a live process holds the peer's entry (re-checked at most every
    /// `LIVENESS_INTERVAL`; an empty entry is seen at once).
    fn alive(&mut self, shared: &Shared) -> bool {
        let Some(owner) = shared.table().owner(self.slot) else {
            self.alive = false;
            return false;
        };
        if owner.process.pid == shared.me.pid {
            return true;
        }
        // The coarse clock: this runs on every empty poll of a spinning reader, and a precise
        // clock read there (~20 ns) would delay noticing the record it waits for.
        let now = coarse_monotonic_ns();
        if owner.process != self.seen || now.saturating_sub(self.checked_ns) >= LIVENESS_INTERVAL.as_nanos() as u64 {
            self.seen = owner.process;
            self.checked_ns = now;
            self.alive = process_is_alive(owner.process);
        }
        self.alive
    }
}

/// Sleeps on `event` (which an attaching peer notifies, see `RingShared::nudge`) until
/// `peer` is alive or `timeout` passes.
fn wait_for_peer(
    shared: &Shared,
    peer: &mut PeerWatch,
    event: &crate::event::EventWord,
    timeout: Option<Duration>,
) -> bool {
    let deadline = timeout.map(|t| deadline_after(Some(t)).unwrap_or_else(far_future));
    block_on(event, WaitPolicy::BLOCK, deadline, Some(LIVENESS_INTERVAL), || peer.alive(shared).then_some(())).is_some()
}

// ---------------------------------------------------------------------------------------
// Status

/// One endpoint as seen in the participant table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointStatus {
    /// The holder's pid.
    pub pid: u32,
    /// Whether that process is still running.
    pub alive: bool,
}

/// A snapshot of a stream, for tools (`shmbus info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamStatus {
    /// Ring size in bytes.
    pub capacity: u64,
    /// Bytes committed and not yet consumed (headers and padding included).
    pub used: u64,
    /// Bytes ever committed (the write position).
    pub head: u64,
    /// Bytes ever consumed (the read position).
    pub tail: u64,
    /// The writer, if an entry holds the role.
    pub writer: Option<EndpointStatus>,
    /// The reader, if an entry holds the role.
    pub reader: Option<EndpointStatus>,
}

fn status_of(seg: &Segment, layout: &StreamLayout) -> StreamStatus {
    // SAFETY: as in `Shared::ctrl`: a validated stream segment's kind area starts with the
    // control block, mapped while `seg` lives.
    let ctrl = unsafe { &*(seg.kind_base() as *const RingShared) };
    let (head, tail) = ctrl.positions();
    let table = seg.participants();
    let ep =
        |slot| table.owner(slot).map(|o| EndpointStatus { pid: o.process.pid, alive: process_is_alive(o.process) });
    StreamStatus {
        capacity: layout.capacity,
        used: head.saturating_sub(tail).min(layout.capacity),
        head,
        tail,
        writer: ep(WRITER_SLOT),
        reader: ep(READER_SLOT),
    }
}

/// Reads the status of stream `name` without attaching to it (read permission suffices).
pub fn status(domain: &Domain, name: &str) -> Result<StreamStatus, OpenError> {
    let (seg, layout) = Segment::open_read_only::<StreamLayout>(domain, name)?;
    Ok(status_of(&seg, &layout))
}

/// Bytes committed to stream segment `seg` and not yet consumed (record headers and padding
/// included), for `admin::inspect`: the status's `used`, by loads only.
pub(crate) fn unread_bytes(seg: &Segment) -> Result<u64, OpenError> {
    let layout = seg.layout::<StreamLayout>()?;
    Ok(status_of(seg, &layout).used)
}

// ---------------------------------------------------------------------------------------
// Errors

/// [`StreamWriter::try_reserve`] / [`StreamWriter::try_write`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TryReserveError {
    /// The record can never fit in this ring.
    TooLarge {
        /// Requested payload length.
        len: usize,
        /// Largest payload this stream accepts.
        max: usize,
    },
    /// Not enough free space right now.
    Full {
        /// Ring bytes the record needs (header and padding included).
        needed: usize,
        /// Ring bytes free.
        free: usize,
    },
    /// The ring is full and no live reader will ever drain it.
    Disconnected,
    /// The shared positions break the ring's invariants.
    Corrupt(StreamCorrupt),
    /// The stream's file was truncated by another process while this one had it mapped:
    /// what is written past the cut is lost. Checked when a reserve fails or times out;
    /// recreate the stream.
    Truncated,
}

/// [`StreamWriter::reserve`] / [`StreamWriter::write`] (and their `_timeout` forms) failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReserveError {
    /// The record can never fit in this ring.
    TooLarge {
        /// Requested payload length.
        len: usize,
        /// Largest payload this stream accepts.
        max: usize,
    },
    /// The timeout passed before enough space was free.
    Timeout,
    /// The ring is full and no live reader will ever drain it.
    Disconnected,
    /// The shared positions break the ring's invariants.
    Corrupt(StreamCorrupt),
    /// The stream's file was truncated by another process while this one had it mapped:
    /// what is written past the cut is lost. Checked when a reserve fails or times out;
    /// recreate the stream.
    Truncated,
}

/// [`StreamReader::try_read`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TryReadError {
    /// No record right now; the writer is alive.
    Empty,
    /// No record, and no live writer (never attached, closed, or dead).
    Disconnected,
    /// The ring's positions or a record header are garbage.
    Corrupt(StreamCorrupt),
    /// The stream's file was truncated by another process while this one had it mapped: the
    /// cut part reads as zeros for the life of this reader, so every later call that finds
    /// no valid record (or times out) reports this. Recreate the stream.
    Truncated,
}

/// [`StreamReader::read`] / [`StreamReader::read_timeout`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The timeout passed without a record.
    Timeout,
    /// No record, and no live writer (never attached, closed, or dead).
    Disconnected,
    /// The ring's positions or a record header are garbage.
    Corrupt(StreamCorrupt),
    /// The stream's file was truncated by another process while this one had it mapped: the
    /// cut part reads as zeros for the life of this reader, so every later call that finds
    /// no valid record (or times out) reports this. Recreate the stream.
    Truncated,
}

const CORRUPT_HINT: &str = "a peer process is corrupt or hostile; stop both endpoints and recreate the stream";

impl fmt::Display for TryReserveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryReserveError::TooLarge { len, max } => write!(f, "record of {len} bytes is larger than this stream's maximum of {max}; split it or recreate the stream with a larger capacity"),
            TryReserveError::Full { needed, free } => write!(f, "stream full: record needs {needed} ring bytes, {free} free; retry, or use a blocking write"),
            TryReserveError::Disconnected => f.write_str("stream full and no reader is attached; start a reader or retry later"),
            TryReserveError::Corrupt(c) => write!(f, "{c}; {CORRUPT_HINT}"),
            TryReserveError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl fmt::Display for ReserveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReserveError::TooLarge { len, max } => write!(f, "record of {len} bytes is larger than this stream's maximum of {max}; split it or recreate the stream with a larger capacity"),
            ReserveError::Timeout => f.write_str("timed out waiting for space in the stream; the reader is slow or stuck"),
            ReserveError::Disconnected => f.write_str("stream full and no reader is attached; start a reader or retry later"),
            ReserveError::Corrupt(c) => write!(f, "{c}; {CORRUPT_HINT}"),
            ReserveError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl fmt::Display for TryReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryReadError::Empty => f.write_str("stream empty; retry, or use a blocking read"),
            TryReadError::Disconnected => {
                f.write_str("stream empty and no writer is attached; start a writer or retry later")
            }
            TryReadError::Corrupt(c) => write!(f, "{c}; {CORRUPT_HINT}"),
            TryReadError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Timeout => f.write_str("timed out waiting for a record; the writer is idle"),
            ReadError::Disconnected => {
                f.write_str("stream empty and no writer is attached; start a writer or retry later")
            }
            ReadError::Corrupt(c) => write!(f, "{c}; {CORRUPT_HINT}"),
            ReadError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl std::error::Error for TryReserveError {}
impl std::error::Error for ReserveError {}
impl std::error::Error for TryReadError {}
impl std::error::Error for ReadError {}

// ---------------------------------------------------------------------------------------
// Writer

/// The writing end of a stream (one at a time per stream, across all processes).
#[derive(Debug)]
pub struct StreamWriter {
    shared: Shared,
    core: WriterCore,
    reader: PeerWatch,
    policy: WaitPolicy,
    writable_size: u64,
    /// The corrupt state reported last: the same state again reads as a full ring, so
    /// corruption is reported once per state, not by every call while it lasts.
    reported: Option<Corruption>,
}

impl StreamWriter {
    /// Opens stream `name`, creating it with `config` if it does not exist, and attaches as
    /// its writer. An existing stream must have the same capacity.
    pub fn create(domain: &Domain, name: &str, config: &StreamConfig) -> Result<StreamWriter, OpenError> {
        StreamWriter::create_with(domain, name, config, &CreateOptions::default())
    }

    /// [`StreamWriter::create`] with explicit file mode and group.
    pub fn create_with(
        domain: &Domain,
        name: &str,
        config: &StreamConfig,
        opts: &CreateOptions,
    ) -> Result<StreamWriter, OpenError> {
        StreamWriter::attach(Shared::create(domain, name, config, opts, WRITER_SLOT, ROLE_WRITER)?)
    }

    /// Attaches as the writer of the existing stream `name`.
    pub fn open(domain: &Domain, name: &str) -> Result<StreamWriter, OpenError> {
        StreamWriter::attach(Shared::open(domain, name, WRITER_SLOT, ROLE_WRITER)?)
    }

    fn attach(shared: Shared) -> Result<StreamWriter, OpenError> {
        let core = WriterCore::attach(shared.ctrl(), shared.layout.capacity).map_err(|c| shared.corrupt_open(c))?;
        shared.ctrl().nudge();
        Ok(StreamWriter {
            shared,
            core,
            reader: PeerWatch::new(READER_SLOT),
            policy: WaitPolicy::default(),
            writable_size: HEADER,
            reported: None,
        })
    }

    /// Ring size in bytes.
    pub fn capacity(&self) -> usize {
        self.shared.layout.capacity as usize
    }

    /// The largest record payload this stream accepts (`capacity - 8`, at most `u32::MAX`).
    pub fn max_record_len(&self) -> usize {
        self.shared.layout.max_record_len() as usize
    }

    /// The segment file.
    pub fn path(&self) -> &Path {
        self.shared.seg.path()
    }

    /// How blocking calls wait (default: spin ~20 µs, then sleep).
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.policy = policy;
    }

    /// For [`Waitable::is_ready`]: report ready when a record of `len` payload bytes fits
    /// (default 0: when any record fits). Clamped to the maximum record length.
    pub fn set_writable_len(&mut self, len: usize) {
        self.writable_size = record_size((len as u64).min(self.shared.layout.max_record_len()));
    }

    /// Whether a live process holds the reader role (cached for [`LIVENESS_INTERVAL`]).
    pub fn reader_alive(&mut self) -> bool {
        self.reader.alive(&self.shared)
    }

    /// Waits until a live process holds the reader role, at most `timeout` (`None`: for
    /// ever). Returns whether one does. Useful at start-up: a writer whose ring fills before
    /// any reader attached gets `Disconnected`.
    pub fn wait_for_reader(&mut self, timeout: Option<Duration>) -> bool {
        wait_for_peer(&self.shared, &mut self.reader, self.shared.ctrl().writable_event(), timeout)
    }

    /// Ring bytes free right now.
    pub fn free(&self) -> usize {
        self.core.free_now(self.shared.ctrl()).unwrap_or(0) as usize
    }

    /// A snapshot for tools.
    pub fn status(&self) -> StreamStatus {
        status_of(&self.shared.seg, &self.shared.layout)
    }

    #[inline]
    fn size_for(&self, len: usize) -> Option<u64> {
        let max = self.shared.layout.max_record_len();
        (len as u64 <= max).then(|| record_size(len as u64))
    }

    /// Reserves `len` contiguous bytes for a record, without waiting. Write them through the
    /// returned grant, then [`WriteGrant::commit`]; dropping the grant commits nothing.
    #[inline]
    pub fn try_reserve(&mut self, len: usize) -> Result<WriteGrant<'_>, TryReserveError> {
        let Some(size) = self.size_for(len) else {
            return Err(TryReserveError::TooLarge { len, max: self.max_record_len() });
        };
        match latch(self.core.try_claim(self.shared.ctrl(), size), &mut self.reported) {
            Ok(pos) => Ok(WriteGrant { pos, len, writer: self }),
            Err(_) if self.shared.truncated() => Err(TryReserveError::Truncated),
            Err(ClaimError::Full { free }) => {
                if self.reader.alive(&self.shared) {
                    Err(TryReserveError::Full { needed: size as usize, free: free as usize })
                } else {
                    Err(TryReserveError::Disconnected)
                }
            }
            Err(ClaimError::Corrupt(c)) => Err(TryReserveError::Corrupt(c)),
        }
    }

    /// Reserves `len` contiguous bytes, waiting for space as long as it takes.
    pub fn reserve(&mut self, len: usize) -> Result<WriteGrant<'_>, ReserveError> {
        self.reserve_until(len, None)
    }

    /// Reserves `len` contiguous bytes, waiting for space at most `timeout`.
    pub fn reserve_timeout(&mut self, len: usize, timeout: Duration) -> Result<WriteGrant<'_>, ReserveError> {
        self.reserve_until(len, Some(deadline_after(Some(timeout)).unwrap_or_else(far_future)))
    }

    fn reserve_until(&mut self, len: usize, deadline: Option<Instant>) -> Result<WriteGrant<'_>, ReserveError> {
        let Some(size) = self.size_for(len) else {
            return Err(ReserveError::TooLarge { len, max: self.max_record_len() });
        };
        let StreamWriter { shared, core, reader, policy, reported, .. } = self;
        let ctrl = shared.ctrl();
        let outcome = block_on(ctrl.writable_event(), *policy, deadline, Some(LIVENESS_INTERVAL), || {
            match latch(core.try_claim(ctrl, size), reported) {
                Ok(pos) => Some(Ok(pos)),
                // No room (or garbage): a truncated file never makes room, so say so now.
                Err(_) if shared.truncated() => Some(Err(ReserveError::Truncated)),
                Err(ClaimError::Full { .. }) => (!reader.alive(shared)).then_some(Err(ReserveError::Disconnected)),
                Err(ClaimError::Corrupt(c)) => Some(Err(ReserveError::Corrupt(c))),
            }
        });
        match outcome {
            Some(Ok(pos)) => Ok(WriteGrant { pos, len, writer: self }),
            Some(Err(e)) => Err(e),
            None if self.shared.truncated() => Err(ReserveError::Truncated),
            None => Err(ReserveError::Timeout),
        }
    }

    /// Copies `data` in as one record, without waiting.
    #[inline]
    pub fn try_write(&mut self, data: &[u8]) -> Result<(), TryReserveError> {
        let mut g = self.try_reserve(data.len())?;
        g.copy_from_slice(data);
        g.commit();
        Ok(())
    }

    /// Copies `data` in as one record, waiting for space as long as it takes.
    pub fn write(&mut self, data: &[u8]) -> Result<(), ReserveError> {
        let mut g = self.reserve(data.len())?;
        g.copy_from_slice(data);
        g.commit();
        Ok(())
    }

    /// Copies `data` in as one record, waiting for space at most `timeout`.
    pub fn write_timeout(&mut self, data: &[u8], timeout: Duration) -> Result<(), ReserveError> {
        let mut g = self.reserve_timeout(data.len(), timeout)?;
        g.copy_from_slice(data);
        g.commit();
        Ok(())
    }
}

/// A claim's corruption equal to the one reported last reads as a full ring (no space can
/// be trusted), so that it is reported once, not by every call while it lasts.
#[inline]
fn latch(r: Result<u64, ClaimError>, reported: &mut Option<Corruption>) -> Result<u64, ClaimError> {
    match r {
        Err(ClaimError::Corrupt(c)) if *reported == Some(c) => Err(ClaimError::Full { free: 0 }),
        Err(ClaimError::Corrupt(c)) => {
            *reported = Some(c);
            Err(ClaimError::Corrupt(c))
        }
        ok => ok,
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 86_400)
}

impl Waitable for StreamWriter {
    fn wait_handle(&self) -> WaitHandle<'_> {
        WaitHandle { event: self.shared.ctrl().writable_event() }
    }

    /// Ready when a record of [`StreamWriter::set_writable_len`] bytes fits now (or the file
    /// was truncated: the reserve reports it).
    fn is_ready(&self) -> bool {
        self.core.free_now(self.shared.ctrl()).is_ok_and(|free| free >= self.writable_size) || self.shared.truncated()
    }
}

/// Space reserved for one record: write the payload through `Deref<Target = [u8]>`, then
/// [`WriteGrant::commit`]. Until committed the reader cannot see it; dropping the grant
/// (or the writer process dying) discards it.
#[must_use = "a reservation is discarded unless committed"]
pub struct WriteGrant<'a> {
    writer: &'a mut StreamWriter,
    pos: u64,
    len: usize,
}

impl WriteGrant<'_> {
    /// Publishes the record with all the reserved bytes.
    #[inline]
    pub fn commit(self) {
        let len = self.len;
        self.commit_len(len);
    }

    /// Publishes the record with only its first `len` bytes (for a writer that reserved the
    /// maximum it might need).
    ///
    /// # Panics
    /// If `len` is larger than the reservation.
    #[inline]
    pub fn commit_len(self, len: usize) {
        assert!(len <= self.len, "commit_len({len}) exceeds the reservation of {} bytes", self.len);
        let w = self.writer;
        let at = w.shared.at(self.pos);
        // SAFETY: `at` is an 8-aligned position (records start at multiples of ALIGN; the
        // mapping is page aligned) of the claimed space, which only this writer may touch
        // until `publish`.
        unsafe { std::ptr::write(at as *mut u64, encode_header(len as u32)) };
        w.core.publish(w.shared.ctrl(), record_size(len as u64));
    }
}

impl Deref for WriteGrant<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: `pos` was claimed for HEADER + len <= capacity bytes; from `at(pos)` they lie
        // inside the 2×capacity double mapping, and the reader does not access them until
        // commit. The borrow of the writer keeps the mapping alive.
        unsafe { std::slice::from_raw_parts(self.writer.shared.at(self.pos).add(HEADER as usize), self.len) }
    }
}

impl DerefMut for WriteGrant<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`; the claimed bytes belong to this writer alone, and `&mut self`
        // makes this the only slice over them.
        unsafe { std::slice::from_raw_parts_mut(self.writer.shared.at(self.pos).add(HEADER as usize), self.len) }
    }
}

impl fmt::Debug for WriteGrant<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteGrant").field("pos", &self.pos).field("len", &self.len).finish()
    }
}

// ---------------------------------------------------------------------------------------
// Reader

/// The reading end of a stream (one at a time per stream, across all processes).
#[derive(Debug)]
pub struct StreamReader {
    shared: Shared,
    core: ReaderCore,
    writer: PeerWatch,
    policy: WaitPolicy,
    /// The corrupt state reported last: the same state again reads as empty, so corruption
    /// is reported once per state, not by every call while it lasts.
    reported: Option<Corruption>,
}

/// Where the next record is: `(position, payload length, ring bytes)`.
type Next = (u64, u32, u64);

impl StreamReader {
    /// Opens stream `name`, creating it with `config` if it does not exist, and attaches as
    /// its reader. An existing stream must have the same capacity.
    pub fn create(domain: &Domain, name: &str, config: &StreamConfig) -> Result<StreamReader, OpenError> {
        StreamReader::create_with(domain, name, config, &CreateOptions::default())
    }

    /// [`StreamReader::create`] with explicit file mode and group.
    pub fn create_with(
        domain: &Domain,
        name: &str,
        config: &StreamConfig,
        opts: &CreateOptions,
    ) -> Result<StreamReader, OpenError> {
        StreamReader::attach(Shared::create(domain, name, config, opts, READER_SLOT, ROLE_READER)?)
    }

    /// Attaches as the reader of the existing stream `name`, resuming after the last record
    /// a previous reader consumed.
    pub fn open(domain: &Domain, name: &str) -> Result<StreamReader, OpenError> {
        StreamReader::attach(Shared::open(domain, name, READER_SLOT, ROLE_READER)?)
    }

    fn attach(shared: Shared) -> Result<StreamReader, OpenError> {
        let core = ReaderCore::attach(shared.ctrl(), shared.layout.capacity).map_err(|c| shared.corrupt_open(c))?;
        shared.ctrl().nudge();
        Ok(StreamReader {
            shared,
            core,
            writer: PeerWatch::new(WRITER_SLOT),
            policy: WaitPolicy::default(),
            reported: None,
        })
    }

    /// Ring size in bytes.
    pub fn capacity(&self) -> usize {
        self.shared.layout.capacity as usize
    }

    /// The segment file.
    pub fn path(&self) -> &Path {
        self.shared.seg.path()
    }

    /// How blocking calls wait (default: spin ~20 µs, then sleep).
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.policy = policy;
    }

    /// Whether a live process holds the writer role (cached for [`LIVENESS_INTERVAL`]).
    pub fn writer_alive(&mut self) -> bool {
        self.writer.alive(&self.shared)
    }

    /// Waits until a live process holds the writer role, at most `timeout` (`None`: for
    /// ever). Returns whether one does. Useful at start-up: a reader of an empty stream
    /// with no writer gets `Disconnected`.
    pub fn wait_for_writer(&mut self, timeout: Option<Duration>) -> bool {
        wait_for_peer(&self.shared, &mut self.writer, self.shared.ctrl().readable_event(), timeout)
    }

    /// Ring bytes committed and not yet consumed (headers and padding included).
    pub fn pending(&self) -> usize {
        self.core.pending_now(self.shared.ctrl()) as usize
    }

    /// A snapshot for tools.
    pub fn status(&self) -> StreamStatus {
        status_of(&self.shared.seg, &self.shared.layout)
    }

    /// The next committed record, if any, validated. A corrupt state equal to `reported` is
    /// not reported again: it reads as no record (see `StreamReader::reported`).
    #[inline]
    fn next(
        core: &mut ReaderCore,
        shared: &Shared,
        reported: &mut Option<Corruption>,
    ) -> Result<Option<Next>, Corruption> {
        match StreamReader::next_raw(core, shared) {
            Err(c) if *reported == Some(c) => Ok(None),
            Err(c) => {
                *reported = Some(c);
                Err(c)
            }
            ok => ok,
        }
    }

    #[inline]
    fn next_raw(core: &mut ReaderCore, shared: &Shared) -> Result<Option<Next>, Corruption> {
        let avail = core.poll(shared.ctrl())?;
        if avail == 0 {
            // Fetch the lines the next record will be written to while we wait for the write
            // position: once it moves, they are already on their way instead of requested
            // only then (about one cache-line round trip instead of two). Four lines cover
            // records up to ~250 B; the double mapping makes them contiguous. Measured, spin
            // ping-pong p50 at floor 55-60 ns: 32 B 105-110 -> 95-100 ns, 256 B 150 -> 135 ns.
            let at = shared.at(core.position());
            for i in 0..4 {
                crate::sync::prefetch_line(at.wrapping_add(64 * i));
            }
            return Ok(None);
        }
        let pos = core.position();
        // SAFETY: `avail > 0` committed bytes start at `pos`, a multiple of ALIGN, so an
        // aligned 8-byte header is inside the mapping; the writer wrote it before its Release
        // store of head (which `poll` Acquired) and will not touch it until we consume.
        // A volatile read copies it out once; only the copy is validated and used.
        let header = unsafe { std::ptr::read_volatile(shared.at(pos) as *const u64) };
        let (len, size) = decode_header(header, avail, core.cached_head(), pos).inspect_err(|_| core.resync())?;
        Ok(Some((pos, len, size)))
    }

    fn record(&mut self, (pos, len, size): Next) -> Record<'_> {
        // SAFETY: `decode_header` checked HEADER + len <= size <= avail <= capacity, so the
        // bytes are inside the double mapping; they are committed and the writer leaves them
        // alone until we consume (the Record borrows the reader, so no consume can happen
        // while the slice lives).
        let ptr = unsafe { self.shared.at(pos).add(HEADER as usize) };
        Record { reader: self, ptr, len: len as usize, size }
    }

    /// The next record, without waiting. Read it in place, then [`Record::consume`] it;
    /// dropping it unconsumed leaves it to be read again.
    #[inline]
    pub fn try_read(&mut self) -> Result<Record<'_>, TryReadError> {
        let e = match StreamReader::next(&mut self.core, &self.shared, &mut self.reported) {
            Ok(Some(n)) => return Ok(self.record(n)),
            Ok(None) => {
                if self.writer.alive(&self.shared) {
                    TryReadError::Empty
                } else {
                    // The writer may have committed just before it went: look once more.
                    match StreamReader::next(&mut self.core, &self.shared, &mut self.reported) {
                        Ok(Some(n)) => return Ok(self.record(n)),
                        Ok(None) => TryReadError::Disconnected,
                        Err(c) => TryReadError::Corrupt(c),
                    }
                }
            }
            Err(c) => TryReadError::Corrupt(c),
        };
        // Nothing valid found: zeros past a cut read as "empty" or as garbage.
        Err(if self.shared.truncated() { TryReadError::Truncated } else { e })
    }

    /// The next record, waiting as long as it takes (or until the writer is gone).
    pub fn read(&mut self) -> Result<Record<'_>, ReadError> {
        self.read_until(None)
    }

    /// The next record, waiting at most `timeout`.
    pub fn read_timeout(&mut self, timeout: Duration) -> Result<Record<'_>, ReadError> {
        self.read_until(Some(deadline_after(Some(timeout)).unwrap_or_else(far_future)))
    }

    fn read_until(&mut self, deadline: Option<Instant>) -> Result<Record<'_>, ReadError> {
        let StreamReader { shared, core, writer, policy, reported } = self;
        let ctrl = shared.ctrl();
        let outcome = block_on(ctrl.readable_event(), *policy, deadline, Some(LIVENESS_INTERVAL), || {
            let e = match StreamReader::next(core, shared, reported) {
                Ok(Some(n)) => return Some(Ok(n)),
                // Nothing yet: wait, unless the file was truncated (then nothing ever comes).
                Ok(None) if writer.alive(shared) => return shared.truncated().then_some(Err(ReadError::Truncated)),
                // Gone: one more look, as in `try_read`.
                Ok(None) => match StreamReader::next(core, shared, reported) {
                    Ok(Some(n)) => return Some(Ok(n)),
                    Ok(None) => ReadError::Disconnected,
                    Err(c) => ReadError::Corrupt(c),
                },
                Err(c) => ReadError::Corrupt(c),
            };
            Some(Err(if shared.truncated() { ReadError::Truncated } else { e }))
        });
        match outcome {
            Some(Ok(n)) => Ok(self.record(n)),
            Some(Err(e)) => Err(e),
            None if self.shared.truncated() => Err(ReadError::Truncated),
            None => Err(ReadError::Timeout),
        }
    }

    /// Copies the next record into `buf` (replacing its contents) and consumes it, without
    /// waiting. Returns the record length.
    pub fn try_read_into(&mut self, buf: &mut Vec<u8>) -> Result<usize, TryReadError> {
        let rec = self.try_read()?;
        Ok(rec.copy_into(buf))
    }

    /// Copies the next record into `buf` (replacing its contents) and consumes it, waiting
    /// as long as it takes. Returns the record length.
    pub fn read_into(&mut self, buf: &mut Vec<u8>) -> Result<usize, ReadError> {
        let rec = self.read()?;
        Ok(rec.copy_into(buf))
    }

    /// [`StreamReader::read_into`] waiting at most `timeout`.
    pub fn read_into_timeout(&mut self, buf: &mut Vec<u8>, timeout: Duration) -> Result<usize, ReadError> {
        let rec = self.read_timeout(timeout)?;
        Ok(rec.copy_into(buf))
    }
}

impl Waitable for StreamReader {
    fn wait_handle(&self) -> WaitHandle<'_> {
        WaitHandle { event: self.shared.ctrl().readable_event() }
    }

    /// Ready when a committed record is waiting (or a corrupt state not reported yet, or the
    /// file was truncated: the read reports it).
    fn is_ready(&self) -> bool {
        let ctrl = self.shared.ctrl();
        (self.core.has_data(ctrl) && self.reported.is_none_or(|c| c.head != ctrl.positions().0))
            || self.shared.truncated()
    }
}

/// A committed record, borrowed in place from the ring. [`Record::consume`] hands its space
/// back to the writer; dropping it unconsumed leaves it to be read again.
#[must_use = "a record is read again unless consumed"]
pub struct Record<'a> {
    reader: &'a mut StreamReader,
    ptr: *const u8,
    len: usize,
    size: u64,
}

impl Record<'_> {
    /// Marks the record consumed: its space goes back to the writer, and no reader (this one
    /// or a successor) will see it again.
    #[inline]
    pub fn consume(self) {
        let r = self.reader;
        r.core.release(r.shared.ctrl(), self.size);
    }

    /// The ring position of the record (bytes before it ever committed).
    pub fn position(&self) -> u64 {
        self.reader.core.position()
    }

    fn copy_into(self, buf: &mut Vec<u8>) -> usize {
        buf.clear();
        buf.extend_from_slice(&self);
        let n = self.len;
        self.consume();
        n
    }
}

impl Deref for Record<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: built by `StreamReader::record` from a validated header: `len` committed bytes
        // inside the mapping, untouched by the writer until consumed, which needs `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl fmt::Debug for Record<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Record").field("position", &self.position()).field("len", &self.len).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::monotonic_ns;
    use std::path::PathBuf;

    /// A domain in a fresh temporary root, removed on drop.
    struct TempDomain(Domain, PathBuf);
    impl TempDomain {
        fn new(tag: &str) -> TempDomain {
            let root = std::env::temp_dir().join(format!(
                "shmbus-stream-unit-{tag}-{}-{}",
                std::process::id(),
                monotonic_ns()
            ));
            std::fs::create_dir_all(&root).unwrap();
            TempDomain(Domain::with_root("t", &root).unwrap(), root)
        }
    }
    impl Drop for TempDomain {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }

    fn page() -> usize {
        page_size()
    }

    #[test]
    fn capacity_rule_is_enforced_with_clear_errors() {
        let p = page() as u64;
        for (cap, needle) in [
            (0, "is 0 bytes"),
            (p + 1, "not a multiple of the page size"),
            (3 * p, "not a power of two"),
            (MAX_CAPACITY * 2, "exceeds"),
        ] {
            let e = StreamLayout::for_capacity(cap).unwrap_err();
            assert!(e.contains(needle), "{cap}: {e}");
        }
        let l = StreamLayout::for_capacity(p).unwrap();
        assert_eq!((KIND_OFFSET as u64 + l.data_offset) % p, 0);
        assert_eq!(StreamLayout::from_params(&l.params()), Ok(l));
    }

    #[test]
    fn corrupt_params_are_rejected() {
        let good = StreamLayout::for_capacity(1 << 16).unwrap().params();
        let mut bad = Vec::new();
        for (i, v) in [(0, 0), (0, 12345), (0, 3 << 12), (1, 0), (1, 8), (1, 1 << 40), (1, good[1] + 1), (5, 1)] {
            let mut p = good;
            p[i] = v;
            bad.push(p);
        }
        for p in bad {
            assert!(StreamLayout::from_params(&p).is_err(), "{p:?} accepted");
        }
    }

    #[test]
    fn double_mapping_aliases_the_two_halves() {
        let d = TempDomain::new("alias");
        let cap = page();
        let w = StreamWriter::create(&d.0, "s", &StreamConfig::new(cap)).unwrap();
        let base = w.shared.ring.as_ptr();
        // SAFETY: both offsets are inside the 2×cap mapping; no grant is live.
        unsafe {
            base.add(3).write_volatile(0xAB);
            assert_eq!(base.add(cap + 3).read_volatile(), 0xAB);
            base.add(cap + cap - 1).write_volatile(0xCD);
            assert_eq!(base.add(cap - 1).read_volatile(), 0xCD);
        }
    }

    #[test]
    fn records_round_trip_across_the_wrap() {
        let d = TempDomain::new("wrap");
        let cap = page();
        let mut w = StreamWriter::create(&d.0, "s", &StreamConfig::new(cap)).unwrap();
        let mut r = StreamReader::open(&d.0, "s").unwrap();
        let mut buf = Vec::new();
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..5000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let len = (rng % (cap as u64 / 3)) as usize;
            let data: Vec<u8> = (0..len).map(|j| (i as usize * 31 + j) as u8).collect();
            w.try_write(&data).unwrap();
            assert_eq!(r.try_read_into(&mut buf), Ok(len));
            assert_eq!(buf, data);
        }
        assert_eq!(r.try_read().unwrap_err(), TryReadError::Empty);
    }

    #[test]
    fn full_ring_hands_back_and_max_record_fits_exactly() {
        let d = TempDomain::new("full");
        let cap = page();
        let mut w = StreamWriter::create(&d.0, "s", &StreamConfig::new(cap)).unwrap();
        let mut r = StreamReader::open(&d.0, "s").unwrap();
        assert_eq!(w.max_record_len(), cap - 8);
        assert!(matches!(w.try_reserve(cap - 7), Err(TryReserveError::TooLarge { .. })));
        assert!(matches!(w.reserve(cap), Err(ReserveError::TooLarge { .. })));
        w.try_write(&[1]).unwrap();
        assert!(
            matches!(w.try_reserve(cap - 8), Err(TryReserveError::Full { needed, free }) if needed == cap && free == cap - 16)
        );
        assert_eq!(w.reserve_timeout(cap - 8, Duration::from_millis(20)).unwrap_err(), ReserveError::Timeout);
        r.try_read().unwrap().consume();
        let big = vec![7u8; cap - 8];
        w.try_write(&big).unwrap();
        assert!(!w.is_ready());
        let rec = r.try_read().unwrap();
        assert_eq!(&*rec, &big[..]);
        rec.consume();
        assert!(w.is_ready());
    }

    #[test]
    fn uncommitted_grant_is_invisible_and_unconsumed_record_is_redelivered() {
        let d = TempDomain::new("grant");
        let mut w = StreamWriter::create(&d.0, "s", &StreamConfig::new(page())).unwrap();
        let mut r = StreamReader::open(&d.0, "s").unwrap();
        {
            let mut g = w.try_reserve(10).unwrap();
            g.fill(9);
            assert!(!r.is_ready());
            // dropped: nothing committed
        }
        assert_eq!(r.try_read().unwrap_err(), TryReadError::Empty);
        let mut g = w.try_reserve(100).unwrap();
        g[..3].copy_from_slice(b"abc");
        g.commit_len(3);
        assert!(r.is_ready());
        assert_eq!(&*r.try_read().unwrap(), b"abc"); // dropped, not consumed
        drop(r);
        let mut r = StreamReader::open(&d.0, "s").unwrap();
        let rec = r.try_read().unwrap();
        assert_eq!(&*rec, b"abc");
        rec.consume();
        drop(r);
        let mut r = StreamReader::open(&d.0, "s").unwrap();
        assert_eq!(r.try_read().unwrap_err(), TryReadError::Empty);
    }

    #[test]
    fn second_endpoint_of_a_role_is_busy_and_disconnects_are_reported() {
        let d = TempDomain::new("busy");
        let cfg = StreamConfig::new(page());
        let mut r = StreamReader::create(&d.0, "s", &cfg).unwrap();
        assert_eq!(r.try_read().unwrap_err(), TryReadError::Disconnected);
        assert!(
            matches!(StreamReader::open(&d.0, "s"), Err(OpenError::Busy { holder_pid, .. }) if holder_pid == std::process::id())
        );
        let mut w = StreamWriter::create(&d.0, "s", &cfg).unwrap();
        assert!(matches!(StreamWriter::open(&d.0, "s"), Err(OpenError::Busy { .. })));
        assert!(matches!(
            StreamWriter::create(&d.0, "s", &StreamConfig::new(2 * page())),
            Err(OpenError::LayoutMismatch { .. })
        ));
        w.try_write(b"last").unwrap();
        let st = w.status();
        assert_eq!((st.capacity, st.used), (page() as u64, 16));
        assert_eq!(st.writer.map(|e| e.alive), Some(true));
        assert_eq!(st.reader.map(|e| e.pid), Some(std::process::id()));
        drop(w);
        assert_eq!(status(&d.0, "s").unwrap().writer, None);
        // Committed data outlives the writer; then the reader learns it is gone.
        assert_eq!(&*r.read().unwrap(), b"last");
        r.read().unwrap().consume();
        assert_eq!(r.read().unwrap_err(), ReadError::Disconnected);
        let mut w = StreamWriter::open(&d.0, "s").unwrap();
        let fill = vec![0u8; page() - 8];
        w.try_write(&fill).unwrap();
        drop(r);
        assert_eq!(w.try_write(b"x").unwrap_err(), TryReserveError::Disconnected);
        assert_eq!(w.write(b"x").unwrap_err(), ReserveError::Disconnected);
    }

    #[test]
    fn blocking_calls_wake_across_threads() {
        let d = TempDomain::new("threads");
        let mut w = StreamWriter::create(&d.0, "s", &StreamConfig::new(page())).unwrap();
        let mut r = StreamReader::open(&d.0, "s").unwrap();
        r.set_wait_policy(WaitPolicy::BLOCK);
        w.set_wait_policy(WaitPolicy::BLOCK);
        let n = 20_000u32;
        let t = std::thread::spawn(move || {
            let mut sum = 0u64;
            for i in 0..n {
                let rec = r.read().unwrap();
                assert_eq!(rec.len(), (i % 300) as usize);
                assert!(rec.iter().all(|&b| b == i as u8));
                sum += rec.len() as u64;
                rec.consume();
            }
            sum
        });
        let mut sum = 0u64;
        for i in 0..n {
            let len = (i % 300) as usize;
            let mut g = w.reserve(len).unwrap();
            g.fill(i as u8);
            g.commit();
            sum += len as u64;
        }
        assert_eq!(t.join().unwrap(), sum);
    }
}
