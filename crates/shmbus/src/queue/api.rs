//! The public queue API over a shared segment: [`Queue`], [`Producer`], [`Consumer`].

use std::cell::Cell;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ring::{CellHeader, Cells, Control, Pop, Push, Ring, Stall, CELL_HEADER};
use crate::domain::Domain;
use crate::error::OpenError;
use crate::event::EventWord;
use crate::participants::PARTICIPANTS;
use crate::segment::{CreateOptions, Kind, Layout, Segment, PARAMS, TRUNCATED_MSG};
use crate::sync::spin_hint;
use crate::sys::{process_is_alive, ProcessId};
use crate::wait::{block_on_with, deadline_after, WaitPolicy};
use crate::waitset::{WaitHandle, Waitable};

/// How long a claim may stand in a waiter's way before the waiter checks whether its owner
/// is still alive, and how often it re-checks after that. A blocked endpoint gets past a
/// dead participant's claim within about twice this.
pub const LIVENESS_RECHECK: Duration = Duration::from_millis(5);

/// How often an endpoint in a [`crate::WaitSet`] is re-checked while nothing blocks it, so a
/// claim left by a participant that died while the set slept is found within a bounded time.
pub const IDLE_RECHECK: Duration = Duration::from_millis(100);

/// Largest accepted capacity (messages).
pub const MAX_CAPACITY: u64 = 1 << 32;
/// Largest accepted message size (bytes).
pub const MAX_ELEMENT_SIZE: usize = 1 << 30;
/// Largest accepted queue segment (bytes).
pub const MAX_QUEUE_BYTES: u64 = 1 << 40;

/// Participant roles in the entry's `role` word.
pub(crate) const ROLE_PRODUCER: u32 = 1;
pub(crate) const ROLE_CONSUMER: u32 = 2;

/// Bytes before the first cell: the control block, padded.
const CONTROL_BYTES: usize = 1024;
const _: () = assert!(std::mem::size_of::<Control>() <= CONTROL_BYTES);

/// How often `try_recv` re-reads a cell whose producer is mid-copy before reporting empty.
const PENDING_SPINS: u32 = 64;

/// Layout of a queue, chosen at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConfig {
    /// How many messages the queue holds (at least 1).
    pub capacity: u64,
    /// Largest message, in bytes (at least 1).
    pub max_element_size: usize,
}

impl Default for QueueConfig {
    /// 1024 messages of up to 1 KiB.
    fn default() -> Self {
        QueueConfig { capacity: 1024, max_element_size: 1024 }
    }
}

/// The validated layout: header parameters `[capacity, max_element_size, stride, 0…]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueLayout {
    capacity: u64,
    max: usize,
    stride: usize,
}

impl QueueLayout {
    fn stride_for(max: usize) -> usize {
        (CELL_HEADER + max).div_ceil(64) * 64
    }

    fn new(capacity: u64, max: u64) -> Result<QueueLayout, String> {
        if capacity == 0 {
            return Err("capacity is 0; a queue must hold at least one message".into());
        }
        if capacity > MAX_CAPACITY {
            return Err(format!("capacity {capacity} is larger than the maximum {MAX_CAPACITY}"));
        }
        if max == 0 {
            return Err("max_element_size is 0; messages need at least one byte of room".into());
        }
        if max > MAX_ELEMENT_SIZE as u64 {
            return Err(format!("max_element_size {max} is larger than the maximum {MAX_ELEMENT_SIZE}"));
        }
        let max = max as usize;
        let stride = Self::stride_for(max);
        let bytes = (stride as u64).checked_mul(capacity).and_then(|b| b.checked_add(CONTROL_BYTES as u64));
        match bytes {
            Some(b) if b <= MAX_QUEUE_BYTES => Ok(QueueLayout { capacity, max, stride }),
            _ => Err(format!(
                "{capacity} messages of {max} bytes need more than the {MAX_QUEUE_BYTES} bytes a queue may take; lower capacity or max_element_size"
            )),
        }
    }
}

impl Layout for QueueLayout {
    const KIND: Kind = Kind::Queue;

    fn from_params(params: &[u64; PARAMS]) -> Result<Self, String> {
        let l = QueueLayout::new(params[0], params[1])?;
        if params[2] != l.stride as u64 {
            return Err(format!(
                "cell stride {} does not match max_element_size {} (expected {})",
                params[2], l.max, l.stride
            ));
        }
        if let Some(i) = (3..PARAMS).find(|&i| params[i] != 0) {
            return Err(format!("unknown layout parameter {i} = {}", params[i]));
        }
        Ok(l)
    }

    fn params(&self) -> [u64; PARAMS] {
        let mut p = [0; PARAMS];
        p[0] = self.capacity;
        p[1] = self.max as u64;
        p[2] = self.stride as u64;
        p
    }

    fn kind_area_size(&self) -> u64 {
        CONTROL_BYTES as u64 + self.capacity * self.stride as u64
    }

    fn param_names() -> [&'static str; PARAMS] {
        ["capacity", "max_element_size", "", "", "", "", "", ""]
    }

    unsafe fn init(&self, base: *mut u8) {
        // The control block is all zeros (tail = head = 0, no waiters), as the file is. Each
        // cell starts EMPTY for its own index.
        for i in 0..self.capacity as usize {
            // SAFETY: cell i lies inside the kind area (kind_area_size covers capacity * stride
            // after CONTROL_BYTES) and is 64-byte aligned (base is page aligned, stride a
            // multiple of 64); the file is private to the creator.
            unsafe {
                std::ptr::write(base.add(CONTROL_BYTES + i * self.stride) as *mut CellHeader, CellHeader::new(i))
            };
        }
    }
}

/// Cells in the shared mapping.
#[derive(Debug, Clone, Copy)]
struct MappedCells {
    base: *mut u8,
    stride: usize,
}

impl Cells for MappedCells {
    #[inline]
    fn header(&self, index: usize) -> &CellHeader {
        // SAFETY: `index < capacity` (the ring reduces every position modulo capacity) and the
        // validated layout puts `capacity` cells of `stride` bytes at `base` inside the mapping,
        // which the owning `Shared` keeps alive; the header is atomics, valid for any bits.
        unsafe { &*(self.base.add(index * self.stride) as *const CellHeader) }
    }

    #[inline]
    unsafe fn write(&self, index: usize, data: &[u8]) {
        // SAFETY: caller holds the WRITING claim and data.len() <= max, so the copy stays
        // inside the cell's payload (stride >= CELL_HEADER + max).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(index * self.stride + CELL_HEADER), data.len())
        };
    }

    #[inline]
    unsafe fn read(&self, index: usize, out: &mut [u8]) {
        // SAFETY: caller holds the READING claim and out.len() <= max, as above.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.add(index * self.stride + CELL_HEADER), out.as_mut_ptr(), out.len())
        };
    }

    #[inline]
    fn prefetch_read(&self, index: usize, bytes: usize) {
        // From line 1: line 0, the header, is already here (the stamp was just read).
        for off in (64..bytes.min(self.stride)).step_by(64) {
            crate::sync::prefetch_line(self.base.wrapping_add(index * self.stride + off));
        }
    }
}

/// The mapping and the addresses derived from its validated layout.
#[derive(Debug)]
struct Shared {
    seg: Segment,
    layout: QueueLayout,
    ctl: *const Control,
    cells: MappedCells,
}

// SAFETY: the raw pointers point into `seg`'s mapping, which lives as long as `Shared`; all
// shared state behind them is atomics or claimed payload (see the ring's invariants).
unsafe impl Send for Shared {}
// SAFETY: as above; `&Shared` only hands out the ring, whose operations are thread-safe.
unsafe impl Sync for Shared {}

impl Shared {
    fn new(seg: Segment, layout: QueueLayout) -> Shared {
        let base = seg.kind_base();
        // SAFETY: the kind area is at least CONTROL_BYTES long (validated size), page aligned.
        let cells = MappedCells { base: unsafe { base.add(CONTROL_BYTES) }, stride: layout.stride };
        Shared { ctl: base as *const Control, cells, seg, layout }
    }

    #[inline]
    fn ring(&self) -> Ring<'_, MappedCells> {
        // SAFETY: `ctl` points to the control block inside the mapping `self` keeps alive;
        // its fields are atomics, valid for any bit pattern, and it is 128-byte aligned.
        let ctl = unsafe { &*self.ctl };
        Ring::new(ctl, self.cells, self.seg.participants(), self.layout.capacity, self.layout.max)
    }

    fn register(self: &Arc<Self>, role: u32) -> Result<Endpoint, OpenError> {
        let me = ProcessId::current();
        let table = self.seg.participants();
        let index = match table.register(me, role, 0..PARTICIPANTS) {
            Some(i) => i,
            None => {
                self.ring().reclaim_dead(me, process_is_alive);
                table.register(me, role, 0..PARTICIPANTS).ok_or_else(|| OpenError::TooManyParticipants {
                    path: self.seg.path().to_owned(),
                    max: PARTICIPANTS,
                })?
            }
        };
        Ok(Endpoint {
            shared: Arc::clone(self),
            index,
            me,
            policy: WaitPolicy::default(),
            watch: Cell::new(None),
            had_room: Cell::new(true),
        })
    }
}

/// A claim being watched: what it was and when to look at its owner next.
#[derive(Debug, Clone, Copy)]
struct Watch {
    stall: Stall,
    next_check: Instant,
}

/// What producers and consumers share: the registration and the stall watch.
#[derive(Debug)]
struct Endpoint {
    shared: Arc<Shared>,
    index: usize,
    me: ProcessId,
    policy: WaitPolicy,
    /// `Cell`: makes the endpoint `!Sync`, and lets `is_ready(&self)` keep watching.
    watch: Cell<Option<Watch>>,
    /// The last push found room: claim optimistically (see `Ring::try_push`).
    had_room: Cell<bool>,
}

impl Endpoint {
    /// Notes the claim (if any) in our way. Once the same claim has stood for
    /// `LIVENESS_RECHECK`, checks its owner and reclaims it if dead. Returns true if that
    /// freed the way.
    fn observe(&self, stall: Option<Stall>) -> bool {
        let Some(stall) = stall else {
            self.watch.set(None);
            return false;
        };
        let now = Instant::now();
        match self.watch.get() {
            Some(w) if w.stall == stall => {
                if now < w.next_check {
                    return false;
                }
            }
            _ => {
                self.watch.set(Some(Watch { stall, next_check: now + LIVENESS_RECHECK }));
                return false;
            }
        }
        self.watch.set(Some(Watch { stall, next_check: now + LIVENESS_RECHECK }));
        let ring = self.shared.ring();
        let owner_alive = match ring.table.owner(stall.owner) {
            Some(info) => process_is_alive(info.process),
            // The entry is free but the claim stands: nothing to reclaim through the table.
            None => true,
        };
        if owner_alive {
            return false;
        }
        ring.reclaim_dead(self.me, process_is_alive);
        let freed = !ring.still_stalled(&stall);
        if freed {
            self.watch.set(None);
        }
        freed
    }

    /// The longest a blocked call may sleep before it must look at a watched claim again.
    fn recheck(&self) -> Option<Duration> {
        self.watch.get().map(|w| w.next_check.saturating_duration_since(Instant::now()).max(Duration::from_micros(100)))
    }

    /// Spins per the policy, then sleeps on `event` until `attempt` yields or the deadline;
    /// while a claim is watched, each sleep ends in time for its liveness re-check.
    fn block<T>(
        &self,
        event: &EventWord,
        deadline: Option<Instant>,
        mut attempt: impl FnMut(&Self) -> Option<T>,
    ) -> Option<T> {
        block_on_with(event, self.policy, deadline, || self.recheck(), || attempt(self))
    }

    /// Whether the queue's file was truncated under this process (see
    /// [`TryRecvError::Truncated`]). Slow paths only: a failed or empty attempt, a timeout.
    #[cold]
    fn truncated(&self) -> bool {
        self.shared.seg.was_truncated()
    }

    fn wait_interval(&self) -> Option<Duration> {
        Some(if self.watch.get().is_some() { LIVENESS_RECHECK } else { IDLE_RECHECK })
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // Every operation completes before it returns, so we hold no claim here.
        self.shared.seg.participants().release(self.index);
    }
}

/// An open queue. Cheap to keep; make endpoints with [`Queue::producer`] and
/// [`Queue::consumer`] (each takes one of the segment's participant entries).
#[derive(Debug, Clone)]
pub struct Queue {
    shared: Arc<Shared>,
}

impl Queue {
    /// Creates the queue `name` in `domain`, or opens it if it already exists with the same
    /// capacity and max element size (else [`OpenError::LayoutMismatch`]).
    pub fn create(domain: &Domain, name: &str, config: QueueConfig, opts: &CreateOptions) -> Result<Queue, OpenError> {
        let layout = QueueLayout::new(config.capacity, config.max_element_size as u64)
            .map_err(|what| OpenError::InvalidConfig { what })?;
        let (seg, layout, _created) = Segment::create_or_open(domain, name, &layout, opts)?;
        Ok(Queue { shared: Arc::new(Shared::new(seg, layout)) })
    }

    /// Opens the existing queue `name` in `domain`.
    pub fn open(domain: &Domain, name: &str) -> Result<Queue, OpenError> {
        let (seg, layout) = Segment::open::<QueueLayout>(domain, name)?;
        Ok(Queue { shared: Arc::new(Shared::new(seg, layout)) })
    }

    /// A new producer endpoint.
    pub fn producer(&self) -> Result<Producer, OpenError> {
        Ok(Producer { ep: self.shared.register(ROLE_PRODUCER)? })
    }

    /// A new consumer endpoint.
    pub fn consumer(&self) -> Result<Consumer, OpenError> {
        let ep = self.shared.register(ROLE_CONSUMER)?;
        Ok(Consumer { scratch: Vec::new(), ep })
    }

    /// Messages the queue holds.
    pub fn capacity(&self) -> u64 {
        self.shared.layout.capacity
    }

    /// Largest message, in bytes.
    pub fn max_element_size(&self) -> usize {
        self.shared.layout.max
    }

    /// The segment file.
    pub fn path(&self) -> &Path {
        self.shared.seg.path()
    }

    /// A snapshot for tools: depth, layout, live producers and consumers, crash counters.
    /// Reads `/proc` once per participant entry in use.
    pub fn status(&self) -> QueueStatus {
        status_of(&self.shared)
    }

    /// Reclaims what dead participants held (their entries and claims) now, instead of when
    /// a blocked endpoint finds them. Returns how many entries were reclaimed.
    pub fn reclaim_dead(&self) -> usize {
        self.shared.ring().reclaim_dead(ProcessId::current(), process_is_alive)
    }
}

/// Messages in queue segment `seg` that no consumer has received, for `admin::inspect` (a
/// look through a read-only mapping: loads only). The ring's depth, or 1 when the depth reads
/// 0 but a pop could make progress: a producer that died between publishing its message and
/// moving `tail` leaves `tail` one behind it. Errs on the side of more: a cell a dead
/// producer left half-written counts until a consumer retires it.
pub(crate) fn undelivered(seg: Segment) -> Result<u64, OpenError> {
    let layout = seg.layout::<QueueLayout>()?;
    let shared = Shared::new(seg, layout);
    let ring = shared.ring();
    Ok(ring.depth().max(u64::from(ring.pop_ready().is_ok())))
}

fn status_of(shared: &Shared) -> QueueStatus {
    let ring = shared.ring();
    let (mut producers, mut consumers) = (0, 0);
    for p in ring.table.list() {
        if !process_is_alive(p.process) {
            continue;
        }
        match p.role {
            ROLE_PRODUCER => producers += 1,
            ROLE_CONSUMER => consumers += 1,
            _ => {}
        }
    }
    use crate::sync::Ordering::Relaxed;
    QueueStatus {
        capacity: shared.layout.capacity,
        max_element_size: shared.layout.max,
        depth: ring.depth(),
        producers,
        consumers,
        sent: ring.ctl.tail.0.load(Relaxed),
        received: ring.ctl.head.0.load(Relaxed),
        abandoned: ring.ctl.abandoned.load(Relaxed),
        lost: ring.ctl.lost.load(Relaxed),
    }
}

/// A snapshot of a queue, from [`Queue::status`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStatus {
    /// Messages the queue holds.
    pub capacity: u64,
    /// Largest message, in bytes.
    pub max_element_size: usize,
    /// Messages in the queue now (including any being written).
    pub depth: u64,
    /// Live producer endpoints.
    pub producers: usize,
    /// Live consumer endpoints.
    pub consumers: usize,
    /// Positions claimed by producers so far (messages sent, plus abandoned ones).
    pub sent: u64,
    /// Positions taken by consumers so far.
    pub received: u64,
    /// Cells given up because their producer died mid-send (those messages were never sent).
    pub abandoned: u64,
    /// Messages lost because the consumer that had claimed them died mid-receive.
    pub lost: u64,
}

/// The sending end. `Send`, not `Sync`: one thread at a time; make one per thread.
#[derive(Debug)]
pub struct Producer {
    ep: Endpoint,
}

impl Producer {
    /// Sends `msg` if there is room now; otherwise hands it back in the error.
    pub fn try_send<T: AsRef<[u8]>>(&mut self, msg: T) -> Result<(), TrySendError<T>> {
        let bytes = msg.as_ref();
        let max = self.ep.shared.layout.max;
        if bytes.len() > max {
            return Err(TrySendError::TooLarge { len: bytes.len(), max, msg });
        }
        match self.ep.shared.ring().try_push(self.ep.index, bytes, self.ep.had_room.get()) {
            Push::Done => {
                self.ep.watch.set(None);
                self.ep.had_room.set(true);
                Ok(())
            }
            Push::Full(stall) => {
                self.ep.observe(stall);
                self.ep.had_room.set(false);
                if self.ep.truncated() {
                    return Err(TrySendError::Truncated(msg));
                }
                Err(TrySendError::Full(msg))
            }
            Push::Corrupt(_) if self.ep.truncated() => Err(TrySendError::Truncated(msg)),
            Push::Corrupt(what) => Err(TrySendError::Corrupt { what, msg }),
        }
    }

    /// Sends `msg`, waiting as long as it takes for room.
    pub fn send<T: AsRef<[u8]>>(&mut self, msg: T) -> Result<(), SendError<T>> {
        self.send_deadline(msg, None)
    }

    /// Sends `msg`, waiting at most `timeout` for room; hands it back on timeout.
    pub fn send_timeout<T: AsRef<[u8]>>(&mut self, msg: T, timeout: Duration) -> Result<(), SendError<T>> {
        self.send_deadline(msg, deadline_after(Some(timeout)))
    }

    fn send_deadline<T: AsRef<[u8]>>(&mut self, msg: T, deadline: Option<Instant>) -> Result<(), SendError<T>> {
        let bytes = msg.as_ref();
        let max = self.ep.shared.layout.max;
        if bytes.len() > max {
            return Err(SendError::TooLarge { len: bytes.len(), max, msg });
        }
        let shared = Arc::clone(&self.ep.shared);
        let ring = shared.ring();
        let r = self.ep.block(&ring.ctl.not_full.0, deadline, |ep| {
            match ring.try_push(ep.index, bytes, ep.had_room.get()) {
                Push::Done => {
                    ep.had_room.set(true);
                    Some(Ok(()))
                }
                Push::Full(stall) => {
                    ep.observe(stall);
                    ep.had_room.set(false);
                    // About to sleep: a truncated file never makes room.
                    ep.truncated().then_some(Err(None))
                }
                Push::Corrupt(what) => Some(Err(Some(what))),
            }
        });
        self.ep.watch.set(None);
        match r {
            Some(Ok(())) => Ok(()),
            Some(Err(_)) | None if self.ep.truncated() => Err(SendError::Truncated(msg)),
            Some(Err(Some(what))) => Err(SendError::Corrupt { what, msg }),
            Some(Err(None)) | None => Err(SendError::Timeout(msg)),
        }
    }

    /// Whether a message could be sent now (the queue is not full).
    pub fn has_room(&self) -> bool {
        self.ep.shared.ring().push_ready().is_ok()
    }

    /// How blocking calls wait (default: spin about 20 µs, then sleep).
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.ep.policy = policy;
    }

    /// Largest message, in bytes.
    pub fn max_element_size(&self) -> usize {
        self.ep.shared.layout.max
    }

    /// Messages the queue holds.
    pub fn capacity(&self) -> u64 {
        self.ep.shared.layout.capacity
    }

    /// A status snapshot (see [`Queue::status`]).
    pub fn status(&self) -> QueueStatus {
        status_of(&self.ep.shared)
    }
}

/// The receiving end. `Send`, not `Sync`: one thread at a time; make one per thread.
#[derive(Debug)]
pub struct Consumer {
    ep: Endpoint,
    /// Receive buffer for the allocating variants (grown to `max` on first use).
    scratch: Vec<u8>,
}

impl Consumer {
    /// Receives the next message if there is one now.
    pub fn try_recv(&mut self) -> Result<Vec<u8>, TryRecvError> {
        let mut buf = std::mem::take(&mut self.scratch);
        buf.resize(self.ep.shared.layout.max, 0);
        let r = self.try_recv_into(&mut buf).map(|n| buf[..n].to_vec());
        self.scratch = buf;
        r
    }

    /// Receives the next message into `buf` if there is one now; returns its length.
    /// `buf` must hold [`Consumer::max_element_size`] bytes. Allocates nothing.
    pub fn try_recv_into(&mut self, buf: &mut [u8]) -> Result<usize, TryRecvError> {
        let max = self.ep.shared.layout.max;
        if buf.len() < max {
            return Err(TryRecvError::BufferTooSmall { len: buf.len(), needed: max });
        }
        let ring = self.ep.shared.ring();
        let mut spins = 0;
        loop {
            match ring.try_pop(self.ep.index, buf) {
                Pop::Got(n) => {
                    self.ep.watch.set(None);
                    return Ok(n);
                }
                Pop::Empty(Some(stall))
                    if spins < PENDING_SPINS && ring.still_stalled(&stall) && stall.is_writing() =>
                {
                    // A producer is mid-copy at the head: it is usually done in nanoseconds.
                    spins += 1;
                    spin_hint();
                }
                Pop::Empty(stall) => {
                    if self.ep.observe(stall) {
                        continue;
                    }
                    if self.ep.truncated() {
                        return Err(TryRecvError::Truncated);
                    }
                    return Err(TryRecvError::Empty);
                }
                Pop::Corrupt(_) if self.ep.truncated() => return Err(TryRecvError::Truncated),
                Pop::Corrupt(what) => return Err(TryRecvError::Corrupt { what }),
            }
        }
    }

    /// Receives the next message, waiting as long as it takes.
    pub fn recv(&mut self) -> Result<Vec<u8>, RecvError> {
        self.recv_vec(None)
    }

    /// Receives the next message, waiting at most `timeout`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Vec<u8>, RecvError> {
        self.recv_vec(deadline_after(Some(timeout)))
    }

    /// Receives the next message into `buf` (at least [`Consumer::max_element_size`] bytes),
    /// waiting as long as it takes; returns its length. Allocates nothing.
    pub fn recv_into(&mut self, buf: &mut [u8]) -> Result<usize, RecvError> {
        self.recv_deadline(buf, None)
    }

    /// Like [`Consumer::recv_into`], waiting at most `timeout`.
    pub fn recv_into_timeout(&mut self, buf: &mut [u8], timeout: Duration) -> Result<usize, RecvError> {
        self.recv_deadline(buf, deadline_after(Some(timeout)))
    }

    fn recv_vec(&mut self, deadline: Option<Instant>) -> Result<Vec<u8>, RecvError> {
        let mut buf = std::mem::take(&mut self.scratch);
        buf.resize(self.ep.shared.layout.max, 0);
        let r = self.recv_deadline(&mut buf, deadline).map(|n| buf[..n].to_vec());
        self.scratch = buf;
        r
    }

    fn recv_deadline(&mut self, buf: &mut [u8], deadline: Option<Instant>) -> Result<usize, RecvError> {
        let max = self.ep.shared.layout.max;
        if buf.len() < max {
            return Err(RecvError::BufferTooSmall { len: buf.len(), needed: max });
        }
        let shared = Arc::clone(&self.ep.shared);
        let ring = shared.ring();
        let r = self.ep.block(&ring.ctl.not_empty.0, deadline, |ep| loop {
            match ring.try_pop(ep.index, buf) {
                Pop::Got(n) => return Some(Ok(n)),
                Pop::Empty(stall) => {
                    if !ep.observe(stall) {
                        // About to sleep: a truncated file never delivers.
                        return ep.truncated().then_some(Err(None));
                    }
                }
                Pop::Corrupt(what) => return Some(Err(Some(what))),
            }
        });
        self.ep.watch.set(None);
        match r {
            Some(Ok(n)) => Ok(n),
            Some(Err(_)) | None if self.ep.truncated() => Err(RecvError::Truncated),
            Some(Err(Some(what))) => Err(RecvError::Corrupt { what }),
            Some(Err(None)) | None => Err(RecvError::Timeout),
        }
    }

    /// Whether a receive could make progress now (the queue is not empty).
    pub fn has_message(&self) -> bool {
        self.ep.shared.ring().pop_ready().is_ok()
    }

    /// How blocking calls wait (default: spin about 20 µs, then sleep).
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.ep.policy = policy;
    }

    /// Largest message, in bytes: the size `*_into` buffers need.
    pub fn max_element_size(&self) -> usize {
        self.ep.shared.layout.max
    }

    /// Messages the queue holds.
    pub fn capacity(&self) -> u64 {
        self.ep.shared.layout.capacity
    }

    /// A status snapshot (see [`Queue::status`]).
    pub fn status(&self) -> QueueStatus {
        status_of(&self.ep.shared)
    }
}

/// Consumers are ready when a message (or a dead producer's abandoned cell) is at the head.
impl Waitable for Consumer {
    fn wait_handle(&self) -> WaitHandle<'_> {
        // SAFETY: see `Shared::ring`; the control block lives as long as `self`.
        let ctl = unsafe { &*self.ep.shared.ctl };
        WaitHandle { event: &ctl.not_empty.0 }
    }

    fn is_ready(&self) -> bool {
        match self.ep.shared.ring().pop_ready() {
            Ok(()) => true,
            // Not ready, unless the file was truncated: the call reports that.
            Err(stall) => self.ep.observe(stall) || self.ep.truncated(),
        }
    }

    fn recheck_interval(&self) -> Option<Duration> {
        self.ep.wait_interval()
    }
}

/// Producers are ready when there is room for a message.
impl Waitable for Producer {
    fn wait_handle(&self) -> WaitHandle<'_> {
        // SAFETY: see `Shared::ring`; the control block lives as long as `self`.
        let ctl = unsafe { &*self.ep.shared.ctl };
        WaitHandle { event: &ctl.not_full.0 }
    }

    fn is_ready(&self) -> bool {
        match self.ep.shared.ring().push_ready() {
            Ok(()) => true,
            // Not ready, unless the file was truncated: the call reports that.
            Err(stall) => self.ep.observe(stall) || self.ep.truncated(),
        }
    }

    fn recheck_interval(&self) -> Option<Duration> {
        self.ep.wait_interval()
    }
}

/// [`Producer::try_send`] failed; the message is handed back.
pub enum TrySendError<T> {
    /// The queue is full. Retry later, or use [`Producer::send_timeout`].
    Full(T),
    /// The message is longer than the queue's max element size.
    TooLarge {
        /// The message.
        msg: T,
        /// Its length.
        len: usize,
        /// The queue's max element size.
        max: usize,
    },
    /// The queue's shared memory holds impossible values.
    Corrupt {
        /// The message.
        msg: T,
        /// What was wrong.
        what: &'static str,
    },
    /// The queue's file was truncated by another process while this one had it mapped:
    /// what is written past the cut is lost, so the message was not sent. Checked when a
    /// send fails or would wait; recreate the queue.
    Truncated(T),
}

/// [`Producer::send`] or [`Producer::send_timeout`] failed; the message is handed back.
pub enum SendError<T> {
    /// No room came free before the timeout (never from [`Producer::send`]).
    Timeout(T),
    /// The message is longer than the queue's max element size.
    TooLarge {
        /// The message.
        msg: T,
        /// Its length.
        len: usize,
        /// The queue's max element size.
        max: usize,
    },
    /// The queue's shared memory holds impossible values.
    Corrupt {
        /// The message.
        msg: T,
        /// What was wrong.
        what: &'static str,
    },
    /// The queue's file was truncated by another process while this one had it mapped:
    /// what is written past the cut is lost, so the message was not sent. Checked when a
    /// send fails or would wait; recreate the queue.
    Truncated(T),
}

impl<T> TrySendError<T> {
    /// The message that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(m)
            | TrySendError::TooLarge { msg: m, .. }
            | TrySendError::Corrupt { msg: m, .. }
            | TrySendError::Truncated(m) => m,
        }
    }

    /// Whether the queue was full (the only error a retry can fix).
    pub fn is_full(&self) -> bool {
        matches!(self, TrySendError::Full(_))
    }
}

impl<T> SendError<T> {
    /// The message that was not sent.
    pub fn into_inner(self) -> T {
        match self {
            SendError::Timeout(m)
            | SendError::TooLarge { msg: m, .. }
            | SendError::Corrupt { msg: m, .. }
            | SendError::Truncated(m) => m,
        }
    }
}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::TooLarge { len, max, .. } => write!(f, "TooLarge {{ len: {len}, max: {max}, .. }}"),
            TrySendError::Corrupt { what, .. } => write!(f, "Corrupt {{ what: {what:?}, .. }}"),
            TrySendError::Truncated(_) => f.write_str("Truncated(..)"),
        }
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Timeout(_) => f.write_str("Timeout(..)"),
            SendError::TooLarge { len, max, .. } => write!(f, "TooLarge {{ len: {len}, max: {max}, .. }}"),
            SendError::Corrupt { what, .. } => write!(f, "Corrupt {{ what: {what:?}, .. }}"),
            SendError::Truncated(_) => f.write_str("Truncated(..)"),
        }
    }
}

fn too_large(f: &mut fmt::Formatter<'_>, len: usize, max: usize) -> fmt::Result {
    write!(f, "message of {len} bytes is larger than the queue's max element size of {max}; split it or recreate the queue with a larger max_element_size")
}

fn corrupt(f: &mut fmt::Formatter<'_>, what: &str) -> fmt::Result {
    write!(f, "queue memory is corrupt ({what}): a process that maps it wrote impossible values; find it (`shmbus info` lists the queue's users), and if this repeats, stop them and recreate the queue (`shmbus clean --force` removes it once no process uses it)")
}

impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("queue is full; retry later or use send_timeout to wait for room"),
            TrySendError::TooLarge { len, max, .. } => too_large(f, *len, *max),
            TrySendError::Corrupt { what, .. } => corrupt(f, what),
            TrySendError::Truncated(_) => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Timeout(_) => f.write_str("timed out waiting for room in the queue; are its consumers running?"),
            SendError::TooLarge { len, max, .. } => too_large(f, *len, *max),
            SendError::Corrupt { what, .. } => corrupt(f, what),
            SendError::Truncated(_) => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl<T> std::error::Error for TrySendError<T> {}
impl<T> std::error::Error for SendError<T> {}

/// [`Consumer::try_recv`] or [`Consumer::try_recv_into`] got no message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TryRecvError {
    /// Nothing to receive now. Retry later, or use [`Consumer::recv_timeout`].
    Empty,
    /// The buffer given to `try_recv_into` is smaller than the max element size.
    BufferTooSmall {
        /// The buffer's length.
        len: usize,
        /// The length it needs.
        needed: usize,
    },
    /// The queue's shared memory holds impossible values (the bad cell is skipped).
    Corrupt {
        /// What was wrong.
        what: &'static str,
    },
    /// The queue's file was truncated by another process while this one had it mapped: the
    /// cut part reads as zeros for the life of this endpoint, so every later call that finds
    /// nothing valid (or times out) reports this. Recreate the queue.
    Truncated,
}

/// [`Consumer::recv`] and its variants got no message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecvError {
    /// Nothing arrived before the timeout (never from the untimed variants).
    Timeout,
    /// The buffer given to `recv_into` is smaller than the max element size.
    BufferTooSmall {
        /// The buffer's length.
        len: usize,
        /// The length it needs.
        needed: usize,
    },
    /// The queue's shared memory holds impossible values (the bad cell is skipped).
    Corrupt {
        /// What was wrong.
        what: &'static str,
    },
    /// The queue's file was truncated by another process while this one had it mapped: the
    /// cut part reads as zeros for the life of this endpoint, so every later call that finds
    /// nothing valid (or times out) reports this. Recreate the queue.
    Truncated,
}

fn too_small(f: &mut fmt::Formatter<'_>, len: usize, needed: usize) -> fmt::Result {
    write!(f, "receive buffer of {len} bytes is smaller than the queue's max element size of {needed}; pass a buffer of at least that")
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("queue is empty; retry later or use recv_timeout to wait"),
            TryRecvError::BufferTooSmall { len, needed } => too_small(f, *len, *needed),
            TryRecvError::Corrupt { what } => corrupt(f, what),
            TryRecvError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvError::Timeout => f.write_str("timed out waiting for a message; are the queue's producers running?"),
            RecvError::BufferTooSmall { len, needed } => too_small(f, *len, *needed),
            RecvError::Corrupt { what } => corrupt(f, what),
            RecvError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl std::error::Error for TryRecvError {}
impl std::error::Error for RecvError {}

/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<shmbus::queue::Producer>();
/// ```
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<shmbus::queue::Consumer>();
/// ```
#[allow(dead_code)]
fn endpoints_are_not_sync() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_params_are_validated() {
        let ok = QueueLayout::new(10, 100).unwrap();
        assert_eq!(ok.stride, 128);
        assert_eq!(QueueLayout::from_params(&ok.params()).unwrap(), ok);
        let bad: [[u64; PARAMS]; 8] = [
            [0, 100, 128, 0, 0, 0, 0, 0],
            [10, 0, 64, 0, 0, 0, 0, 0],
            [u64::MAX, 100, 128, 0, 0, 0, 0, 0],
            [10, u64::MAX, 128, 0, 0, 0, 0, 0],
            [10, 100, 64, 0, 0, 0, 0, 0],
            [10, 100, 128, 1, 0, 0, 0, 0],
            [MAX_CAPACITY, MAX_ELEMENT_SIZE as u64, QueueLayout::stride_for(MAX_ELEMENT_SIZE) as u64, 0, 0, 0, 0, 0],
            [u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX],
        ];
        for p in bad {
            let e = QueueLayout::from_params(&p).unwrap_err();
            assert!(!e.is_empty());
        }
    }

    #[test]
    fn endpoints_are_send_not_sync() {
        fn send<T: Send>() {}
        send::<Producer>();
        send::<Consumer>();
        send::<Queue>();
        // `Cell` in the endpoint makes it !Sync; checked by the compile-fail doc test below.
    }
}
