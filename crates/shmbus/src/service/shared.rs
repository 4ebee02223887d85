//! The service's shared state: the mapping its handle and endpoints share, the views of its
//! words, and what status reads.

use std::sync::Arc;

use super::layout::ServiceLayout;
use super::protocol::{self, Header, LaneHead, SlotHead, ABANDONED, TAKEN};
use crate::endpoint::channel::Channel;
use crate::participants::ParticipantView;
use crate::sync::{AtomicU64, Ordering};
use crate::sys::{process_is_alive, Access};

/// The service's mapping, shared by the handle and its endpoints.
pub(super) type Shared = Channel<ServiceLayout>;

/// Participant role numbers (shown by `shmbus info`).
pub(super) const ROLE_SERVER: u32 = 1;
pub(super) const ROLE_CLIENT: u32 = 2;

/// Where a request slot is in the kind area: made only from a checked `(lane, slot)`.
#[derive(Debug, Clone, Copy)]
pub(super) struct SlotAt(usize);

/// The words of a read-write service mapping, by position.
#[derive(Clone, Copy)]
pub(super) struct View<'a> {
    base: *mut u8,
    pub(super) layout: &'a ServiceLayout,
}

impl<'a> View<'a> {
    pub(super) fn of(shared: &'a Shared) -> View<'a> {
        View { base: shared.kind_base(), layout: shared.layout() }
    }

    /// # Safety
    /// `off + size_of::<T>()` is inside the kind area and `off` is aligned for `T`.
    unsafe fn at<T>(&self, off: usize) -> &'a T {
        // SAFETY: as the caller promises; the mapping lives as long as the `Shared` the view
        // was made from, and every type here is atomics (every bit pattern is valid).
        unsafe { &*(self.base.add(off) as *const T) }
    }

    pub(super) fn header(&self) -> &'a Header {
        // SAFETY: the header is the first HEADER_SIZE bytes of the kind area.
        unsafe { self.at(0) }
    }

    /// Word `i` of the pending bitmap.
    pub(super) fn bitmap(&self, i: usize) -> &'a AtomicU64 {
        assert!(i < self.layout.bitmap_words());
        // SAFETY: the bitmap's words follow the header, inside `lanes_offset`.
        unsafe { self.at(protocol::HEADER_SIZE + i * 8) }
    }

    pub(super) fn lane(&self, lane: usize) -> &'a LaneHead {
        // SAFETY: `lane_offset` asserts the lane exists; lanes are 64-byte aligned.
        unsafe { self.at(self.layout.lane_offset(lane)) }
    }

    pub(super) fn slot(&self, lane: usize, slot: usize) -> &'a SlotHead {
        self.head(self.slot_at(lane, slot))
    }

    /// Where slot `slot` of lane `lane` is: computed once by a holder that comes back to it.
    pub(super) fn slot_at(&self, lane: usize, slot: usize) -> SlotAt {
        SlotAt(self.layout.slot_offset(lane, slot))
    }

    /// The head of the slot at `s`.
    pub(super) fn head(&self, s: SlotAt) -> &'a SlotHead {
        // SAFETY: `s` came from `slot_offset`, which asserts the slot exists, of this
        // service's layout; slots are 64-byte aligned.
        unsafe { self.at(s.0) }
    }

    /// Request slot `index` of the service (lane-major: `lane * max_in_flight + slot`) as
    /// its `(lane, slot)`.
    pub(super) fn lane_slot(&self, index: usize) -> (usize, usize) {
        self.layout.lane_slot(index)
    }

    /// The service-wide index of slot `slot` of lane `lane` (its bit in the bitmap).
    pub(super) fn index_of(&self, lane: usize, slot: usize) -> usize {
        lane * self.layout.in_flight + slot
    }

    /// The request room of the slot at `s` (`max_request_len` bytes).
    pub(super) fn request_ptr(&self, s: SlotAt) -> *mut u8 {
        // SAFETY: the request room follows the slot head, inside the slot.
        unsafe { self.base.add(s.0 + protocol::SLOT_HEAD) }
    }

    /// The inline request of the slot at `s`, in its request line (`INLINE_REQUEST` bytes).
    pub(super) fn inline_request_ptr(&self, s: SlotAt) -> *mut u8 {
        // SAFETY: inside the slot head.
        unsafe { self.base.add(s.0 + protocol::INLINE_REQUEST_AT) }
    }

    /// The inline response of the slot at `s`, in its answer line (`INLINE_RESPONSE` bytes).
    pub(super) fn inline_response_ptr(&self, s: SlotAt) -> *mut u8 {
        // SAFETY: inside the slot head.
        unsafe { self.base.add(s.0 + protocol::INLINE_RESPONSE_AT) }
    }

    /// Response cell `cell` of the slot at `s` (`max_response_len` bytes).
    pub(super) fn cell_ptr(&self, s: SlotAt, cell: usize) -> *mut u8 {
        assert!(cell < self.layout.depth);
        // The cells are the slot's last bytes, after its head and the request room.
        let cells = self.layout.slot_stride() - self.layout.depth * self.layout.cell_stride();
        // SAFETY: the cells follow the request room, inside the slot.
        unsafe { self.base.add(s.0 + cells + cell * self.layout.cell_stride()) }
    }

    /// Sets slot `index`'s bit, unless it is set (then no store: the line stays shared).
    pub(super) fn mark_pending(&self, index: usize) {
        let (word, bit) = (self.bitmap(index / 64), 1u64 << (index % 64));
        if word.load(Ordering::Relaxed) & bit == 0 {
            word.fetch_or(bit, Ordering::Release);
        }
    }

    /// Clears slot `index`'s bit.
    pub(super) fn clear_pending(&self, index: usize) {
        self.bitmap(index / 64).fetch_and(!(1 << (index % 64)), Ordering::Relaxed);
    }
}

/// Whether the server that the claim word `w` names as its taker still holds its entry and
/// lives (reads `/proc`: throttle it).
pub(super) fn taker_alive(parts: &crate::participants::ParticipantTable<'_>, w: u64, max_servers: usize) -> bool {
    let (entry, pid) = protocol::taker(w);
    entry < max_servers
        && parts.owner(entry).is_some_and(|o| protocol::same_pid(pid, o.process.pid) && parts.is_alive(&o))
}

/// A snapshot of a service, for the CLI and monitoring ([`Service::status`]).
///
/// [`Service::status`]: super::Service::status
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServiceStatus {
    /// Layout: most servers.
    pub max_servers: usize,
    /// Layout: most clients.
    pub max_clients: usize,
    /// Layout: most requests in flight per client.
    pub max_in_flight: usize,
    /// Layout: largest request in bytes.
    pub max_request_len: usize,
    /// Layout: largest response in bytes.
    pub max_response_len: usize,
    /// Layout: responses per request that may wait unread.
    pub response_depth: usize,
    /// Live servers.
    pub servers: usize,
    /// Live clients.
    pub clients: usize,
    /// Requests posted and not claimed by a server yet.
    pub pending: u64,
    /// Requests a server is answering (claimed, not finished). A finished request whose
    /// end its client has not read yet counts in neither.
    pub in_flight: u64,
    /// Requests whose client gave up (timed out or went away) while a server still held them.
    pub abandoned: u64,
    /// Requests sent, over the service's life.
    pub requests: u64,
    /// Responses read by clients (a stream's empty end included), over the service's life.
    pub responses: u64,
    /// Requests their clients gave up on (a call that timed out, a cancel).
    pub timeouts: u64,
    /// Requests whose server died holding them (`ServerGone`).
    pub server_gone: u64,
    /// Requests their server failed.
    pub failed: u64,
    /// The schema of the service's requests (`None`: it has none).
    pub request_schema: Option<Arc<crate::Schema>>,
    /// The schema of the service's responses (`None`: it has none).
    pub response_schema: Option<Arc<crate::Schema>>,
}

/// The slot states of a service, counted: `(pending, taken, abandoned)`. Loads only.
fn count_slots<A: Access>(chan: &Channel<ServiceLayout, A>) -> (u64, u64, u64) {
    let (area, l) = (chan.kind_area(), chan.layout());
    let mut n = (0, 0, 0);
    for lane in 0..l.max_clients {
        for slot in 0..l.in_flight {
            let at = l.slot_offset(lane, slot);
            let post = area.u64_at(at).load(Ordering::Acquire);
            let claim = area.u64_at(at + protocol::CLAIM_AT).load(Ordering::Acquire);
            match protocol::tag(claim) {
                _ if protocol::is_pending(post, claim) => n.0 += 1,
                TAKEN => n.1 += 1,
                ABANDONED => n.2 += 1,
                _ => {}
            }
        }
    }
    n
}

/// The lanes' counters, summed: requests, responses, given up, server gone, failed.
fn sum_counts<A: Access>(chan: &Channel<ServiceLayout, A>) -> [u64; 5] {
    let (area, l) = (chan.kind_area(), chan.layout());
    let mut n = [0u64; 5];
    for lane in 0..l.max_clients {
        for (i, n) in n.iter_mut().enumerate() {
            let w = area.u64_at(l.lane_offset(lane) + protocol::LANE_COUNTS + i * 8).load(Ordering::Relaxed);
            *n = n.wrapping_add(w);
        }
    }
    n
}

pub(super) fn status_of<A: Access>(chan: &Channel<ServiceLayout, A>) -> ServiceStatus {
    let l = chan.layout();
    let view: ParticipantView<'_> = chan.participant_view();
    let (pending, in_flight, abandoned) = count_slots(chan);
    let [requests, responses, timeouts, server_gone, failed] = sum_counts(chan);
    ServiceStatus {
        max_servers: l.max_servers,
        max_clients: l.max_clients,
        max_in_flight: l.in_flight,
        max_request_len: l.max_request,
        max_response_len: l.max_response,
        response_depth: l.depth,
        servers: view.live_in_role(ROLE_SERVER, process_is_alive),
        clients: view.live_in_role(ROLE_CLIENT, process_is_alive),
        pending,
        in_flight,
        abandoned,
        requests,
        responses,
        timeouts,
        server_gone,
        failed,
        request_schema: chan.schemas().first().cloned(),
        response_schema: chan.schemas().get(1).cloned(),
    }
}

/// Requests a service holds that no server has answered yet, for `admin::inspect`.
pub(super) fn unanswered(seg: crate::segment::Segment<crate::sys::ReadOnly>) -> Result<u64, crate::OpenError> {
    let chan = Channel::<ServiceLayout, crate::sys::ReadOnly>::from_segment(seg)?;
    let (pending, taken, _) = count_slots(&chan);
    Ok(pending + taken)
}
