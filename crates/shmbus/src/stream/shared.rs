//! The stream's shared state: the double-mapped segment its handle and endpoints share, the
//! claim and takeover of the exclusive writer and reader roles, the peer's liveness, and the
//! stream's status.

use std::sync::Arc;
use std::time::Duration;

use super::layout::StreamLayout;
use super::protocol::{positions_of, Corruption, RingShared, HEAD_POS_OFFSET, TAIL_POS_OFFSET};
use crate::endpoint::channel::Channel;
use crate::endpoint::liveness;
use crate::endpoint::registration::claim_exclusive;
use crate::error::OpenError;
use crate::participants::ParticipantTable;
use crate::segment::Segment;
use crate::stats::Counter;
use crate::sys::{Access, Mapping, ProcessId, ReadOnly};
use crate::wait::{block_on, Deadline, WaitPolicy};

#[cfg(doc)]
use super::error::StreamRecvError;

/// How often a blocked endpoint re-checks that its peer is alive, and how long a liveness
/// answer is cached: a dead peer is reported at most this long (plus one `/proc` read) after
/// it died.
pub const LIVENESS_INTERVAL: Duration = liveness::PEER;
/// Participant entry held by the writer.
pub(super) const WRITER_SLOT: usize = 0;
/// Participant entry held by the reader.
pub(super) const READER_SLOT: usize = 1;
/// Role numbers stored in the participant entries.
pub(super) const ROLE_WRITER: u32 = 1;
pub(super) const ROLE_READER: u32 = 2;

/// An open stream segment with its ring mapped twice, shared by a [`Stream`] and the
/// endpoints made from it.
#[derive(Debug)]
pub(super) struct Mapped {
    pub(super) chan: Channel<StreamLayout>,
    /// `2 * capacity` bytes: the ring data, mapped twice back to back.
    pub(super) ring: Mapping,
}

/// One endpoint's hold on a stream: the shared mapping and one participant entry, released
/// on drop.
#[derive(Debug)]
pub(super) struct Shared {
    mapped: Arc<Mapped>,
    /// The control block and the ring base, cached from `mapped` (which keeps them mapped)
    /// so that the hot path loads them from the endpoint itself.
    ctrl: *const RingShared,
    base: *mut u8,
    mask: u64,
    slot: usize,
    me: ProcessId,
    /// The endpoint's counter block (see [`crate::stats`]): written by this endpoint alone,
    /// which is `!Sync`, so every count is a plain load and store.
    pub(super) counter: Counter,
}

// SAFETY: the raw pointers are copies of addresses inside the mappings owned by `mapped`
// (Send and Sync through `Mapping`), which outlives them; through them only atomics (the
// control block) and the ring bytes this endpoint's role owns are accessed, from whichever
// thread owns the endpoint. Not Sync: the endpoints holding a `Shared` are not (their peer
// watch is `Cell`s), so nothing shares one between threads.
unsafe impl Send for Shared {}

impl Shared {
    pub(super) fn claim(mapped: Arc<Mapped>, slot: usize, role: u32) -> Result<Shared, OpenError> {
        let me = ProcessId::current();
        // A stream endpoint leaves nothing to repair (see the module docs), so taking over a
        // dead holder's entry only frees it.
        claim_exclusive(mapped.chan.participants(), me, slot, role, mapped.chan.path(), |_, _| {})?;
        let ctrl = mapped.chan.kind_base() as *const RingShared;
        let base = mapped.ring.as_ptr();
        let mask = mapped.chan.layout().capacity - 1;
        let counter = mapped.chan.own_counter(slot);
        Ok(Shared { mapped, ctrl, base, mask, slot, me, counter })
    }

    #[inline]
    pub(super) fn chan(&self) -> &Channel<StreamLayout> {
        &self.mapped.chan
    }

    #[inline]
    pub(super) fn layout(&self) -> &StreamLayout {
        self.mapped.chan.layout()
    }

    #[inline]
    pub(super) fn ctrl(&self) -> &RingShared {
        // SAFETY: the kind area starts page aligned (align ≥ 128) and is at least
        // `data_offset >= size_of::<RingShared>()` bytes (validated by `from_params` and the
        // file size check), mapped as long as `self.mapped` lives; RingShared holds only
        // atomics, valid for every bit pattern.
        unsafe { &*self.ctrl }
    }

    /// Address of ring position `pos`. Any record starting there of at most `capacity`
    /// bytes is inside the double mapping.
    #[inline]
    pub(super) fn at(&self, pos: u64) -> *mut u8 {
        // SAFETY: `pos & mask < capacity` and the mapping is `2 * capacity` bytes long.
        unsafe { self.base.add((pos & self.mask) as usize) }
    }

    fn table(&self) -> ParticipantTable<'_> {
        self.mapped.chan.participants()
    }

    /// Whether the segment or the ring mapping was truncated under this process (see
    /// [`StreamRecvError::Truncated`]). Slow paths only: nothing found, a failure, a timeout.
    #[cold]
    pub(super) fn truncated(&self) -> bool {
        self.mapped.chan.was_truncated() || self.mapped.ring.was_truncated()
    }

    pub(super) fn corrupt_open(&self, c: Corruption) -> OpenError {
        OpenError::corrupt(self.mapped.chan.path(), c.to_string())
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.table().release(self.slot);
        // Wake a peer blocked on us so it notices we are gone now, not at its next re-check.
        self.ctrl().nudge();
    }
}

/// Cached liveness of the peer endpoint (the one watcher of `endpoint::liveness`, re-checking
/// every [`LIVENESS_INTERVAL`]).
#[derive(Debug)]
pub(super) struct PeerWatch(liveness::PeerWatch);

impl PeerWatch {
    pub(super) fn new(slot: usize) -> PeerWatch {
        PeerWatch(liveness::PeerWatch::new(slot, LIVENESS_INTERVAL))
    }

    /// Whether a live process holds the peer's entry (an empty entry is seen at once).
    #[inline]
    pub(super) fn alive(&mut self, shared: &Shared) -> bool {
        self.0.alive(shared.table(), shared.me)
    }

    /// See `liveness::PeerWatch::clock_next`.
    pub(super) fn clock_next(&self) {
        self.0.clock_next()
    }
}

/// Sleeps on `event` (which an attaching peer notifies, see `RingShared::nudge`) until
/// `peer` is alive or `deadline` passes.
pub(super) fn wait_for_peer(
    shared: &Shared,
    peer: &mut PeerWatch,
    event: &crate::event::EventWord,
    deadline: Deadline,
) -> bool {
    block_on(event, WaitPolicy::BLOCK, deadline, Some(LIVENESS_INTERVAL), || peer.alive(shared).then_some(())).is_some()
}

// ---------------------------------------------------------------------------------------
// Status

/// One endpoint as seen in the participant table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EndpointStatus {
    /// The holder's pid.
    pub pid: u32,
    /// Whether that process is still running.
    pub alive: bool,
}

/// A snapshot of a stream, for tools (`shmbus info`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
    /// The channel's schema (`None`: it has none).
    pub schema: Option<std::sync::Arc<crate::Schema>>,
}

pub(super) fn status_of<A: Access>(chan: &Channel<StreamLayout, A>) -> StreamStatus {
    let layout = chan.layout();
    // The stream's status view is these two load-only words and the table's view.
    let area = chan.kind_area();
    let (head, tail) = positions_of(area.u64_at(HEAD_POS_OFFSET), area.u64_at(TAIL_POS_OFFSET));
    let table = chan.participant_view();
    let ep = |slot| table.owner(slot).map(|o| EndpointStatus { pid: o.process.pid, alive: table.is_alive(&o) });
    StreamStatus {
        capacity: layout.capacity,
        used: head.saturating_sub(tail).min(layout.capacity),
        head,
        tail,
        writer: ep(WRITER_SLOT),
        reader: ep(READER_SLOT),
        schema: chan.schema().cloned(),
    }
}

/// Bytes committed to stream segment `seg` and not yet consumed (record headers and padding
/// included), for `admin::inspect`: the status's `used`, by loads only.
pub(super) fn unread_bytes(seg: Segment<ReadOnly>) -> Result<u64, OpenError> {
    Ok(status_of(&Channel::<StreamLayout, ReadOnly>::from_segment(seg)?).used)
}
