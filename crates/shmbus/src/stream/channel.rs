//! The shared endpoint plumbing: the open segment with its double-mapped ring, the claim
//! and takeover of the exclusive writer and reader roles, the peer's liveness, and the
//! stream's status.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use super::layout::{StreamConfig, StreamLayout};
use super::protocol::{Corruption, RingShared};
use crate::domain::Domain;
use crate::error::OpenError;
use crate::participants::{EntryState, ParticipantTable};
use crate::segment::{CreateOptions, Segment, KIND_OFFSET};
use crate::sys::{coarse_monotonic_ns, process_is_alive, Mapping, ProcessId};
use crate::wait::{block_on, Deadline, WaitPolicy};

#[cfg(doc)]
use super::error::StreamRecvError;

/// How often a blocked endpoint re-checks that its peer is alive, and how long a liveness
/// answer is cached: a dead peer is reported at most this long (plus one `/proc` read) after
/// it died.
pub const LIVENESS_INTERVAL: Duration = Duration::from_millis(50);
/// Participant entry held by the writer.
pub(super) const WRITER_SLOT: usize = 0;
/// Participant entry held by the reader.
pub(super) const READER_SLOT: usize = 1;
/// Role numbers stored in the participant entries.
pub(crate) const ROLE_WRITER: u32 = 1;
pub(crate) const ROLE_READER: u32 = 2;

/// An open segment with the ring mapped twice and one participant entry held.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) seg: Segment,
    /// `2 * capacity` bytes: the ring data, mapped twice back to back.
    pub(super) ring: Mapping,
    pub(super) layout: StreamLayout,
    slot: usize,
    me: ProcessId,
}

impl Shared {
    pub(super) fn create(
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

    pub(super) fn open(domain: &Domain, name: &str, slot: usize, role: u32) -> Result<Shared, OpenError> {
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
    pub(super) fn ctrl(&self) -> &RingShared {
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
    pub(super) fn at(&self, pos: u64) -> *mut u8 {
        // SAFETY: `pos & mask < capacity` and the mapping is `2 * capacity` bytes long.
        unsafe { self.ring.as_ptr().add((pos & self.mask()) as usize) }
    }

    fn table(&self) -> ParticipantTable<'_> {
        self.seg.participants()
    }

    /// Whether the segment or the ring mapping was truncated under this process (see
    /// [`StreamRecvError::Truncated`]). Slow paths only: nothing found, a failure, a timeout.
    #[cold]
    pub(super) fn truncated(&self) -> bool {
        self.seg.was_truncated() || self.ring.was_truncated()
    }

    pub(super) fn corrupt_open(&self, c: Corruption) -> OpenError {
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
pub(super) struct PeerWatch {
    slot: usize,
    seen: ProcessId,
    checked_ns: u64,
    alive: bool,
}

impl PeerWatch {
    pub(super) fn new(slot: usize) -> PeerWatch {
        PeerWatch { slot, seen: ProcessId { pid: 0, start_time: 0 }, checked_ns: 0, alive: false }
    }

    /// Whether a live process holds the peer's entry (re-checked at most every
    /// `LIVENESS_INTERVAL`; an empty entry is seen at once).
    pub(super) fn alive(&mut self, shared: &Shared) -> bool {
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
pub(super) fn wait_for_peer(
    shared: &Shared,
    peer: &mut PeerWatch,
    event: &crate::event::EventWord,
    timeout: Option<Duration>,
) -> bool {
    let deadline = Deadline::from_timeout(timeout);
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

pub(super) fn status_of(seg: &Segment, layout: &StreamLayout) -> StreamStatus {
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
