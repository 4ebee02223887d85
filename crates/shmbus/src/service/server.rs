//! A service's servers and the requests they answer.

use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::DerefMut;
use std::sync::Arc;
use std::time::Duration;

use super::error::{RequestRecvError, RequestRecvTimeoutError, RequestTryRecvError, RespondError};
use super::protocol::{self, Claimed, Room, ABANDONED, TAKEN};
use super::shared::{taker_alive, Shared, SlotAt, View, ROLE_SERVER};
use crate::endpoint::forms::{until, wait_forms};
use crate::endpoint::liveness::{Throttle, CLOCK_EVERY, PEER};
use crate::endpoint::receive::Waited;
use crate::endpoint::registration::register_shared;
use crate::error::{Corrupt, OpenError};
use crate::kind::Kind;
use crate::lend::{LendOr, Lender, LentMut};
use crate::stats::Counter;
use crate::sync::Ordering;
use crate::sys::{process_is_alive, ProcessId};
use crate::wait::{block_on_with, try_then_block_on, Wait, WaitPolicy};
use crate::waitset::{WaitHandle, Waitable};

/// How often a server that finds no request looks at every slot, not only the pending
/// bitmap: the bound on how long a request whose bit a hostile write cleared waits.
const RESCAN: Duration = Duration::from_millis(100);

/// A server's participant entry, held by the server and every request it is answering: a
/// client sees its server alive until the last of them is finished.
#[derive(Debug)]
struct Registration {
    shared: Arc<Shared>,
    entry: usize,
    pid: u32,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.shared.participants().release(self.entry);
    }
}

/// Marks the requests server entry `entry` held (TAKEN or ABANDONED) as held by no entry:
/// their clients see their server gone. Idempotent, as a reclaim cleanup must be.
fn orphan_requests(shared: &Shared, entry: usize) {
    let v = View::of(shared);
    for index in 0..v.layout.slots() {
        let (lane, slot) = v.lane_slot(index);
        let head = v.slot(lane, slot);
        let k = head.claim.load(Ordering::Acquire);
        if matches!(protocol::tag(k), TAKEN | ABANDONED) && protocol::taker(k).0 == entry {
            let _ = head.claim.compare_exchange(k, protocol::orphaned(k), Ordering::AcqRel, Ordering::Relaxed);
        }
    }
}

/// One server of a service, made by [`Service::server`](super::Service::server). `Send`,
/// not `Sync`.
///
/// Servers of one service compete: each request goes to one of them, the first to claim
/// it. A request is an [`ActiveRequest`], owned (it may be answered on another thread, and
/// several may be answered at once): it answers with any number of responses and ends with
/// the last one ([`ActiveRequest::respond_last`]) or [`ActiveRequest::end`]; dropping it
/// ends it.
#[derive(Debug)]
pub struct Server {
    reg: Arc<Registration>,
    /// Where the next scan of the bitmap starts (fairness between clients).
    cursor: Cell<usize>,
    policy: WaitPolicy,
    rescan: Throttle,
    counter: Counter,
}

impl Server {
    pub(super) fn attach(shared: Arc<Shared>) -> Result<Server, OpenError> {
        let me = ProcessId::current();
        let servers = 0..shared.layout().max_servers;
        let parts = shared.participants();
        // A dead server's entry is taken over only after every request it held is marked
        // as held by no one: a new server in the same entry (with the same pid, as a
        // restarted container's) must not look like the one that died.
        let reclaim =
            || parts.reclaim_dead_in(servers.clone(), me, process_is_alive, |entry, _| orphan_requests(&shared, entry));
        let entry = register_shared(parts, me, ROLE_SERVER, servers.clone(), reclaim, shared.path())?;
        let counter = shared.own_counter(entry);
        Ok(Server {
            reg: Arc::new(Registration { shared, entry, pid: me.pid }),
            cursor: Cell::new(0),
            policy: WaitPolicy::default(),
            rescan: Throttle::new(RESCAN),
            counter,
        })
    }

    fn view(&self) -> View<'_> {
        View::of(&self.reg.shared)
    }

    /// How a receive waits: spin, then sleep (default [`WaitPolicy::ADAPTIVE`]).
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.policy = policy;
    }

    /// The service's `max_response_len`.
    pub fn max_response_len(&self) -> usize {
        self.reg.shared.layout().max_response
    }

    /// Claims request slot `index` if it holds a pending request.
    fn claim(&self, index: usize) -> Option<Result<ActiveRequest, RequestRecvError>> {
        let v = self.view();
        let (lane, slot) = v.lane_slot(index);
        let at = v.slot_at(lane, slot);
        let Claimed { seq, len, id, inline } = protocol::claim(v.head(at), self.reg.entry, self.reg.pid)?;
        let mut req = ActiveRequest {
            reg: self.reg.clone(),
            lane,
            at,
            seq,
            id,
            len: 0,
            written: 0,
            inline,
            answered_inline: false,
            finished: false,
            policy: self.policy,
            counter: self.counter,
        };
        let max = if inline { protocol::INLINE_REQUEST.min(v.layout.max_request) } else { v.layout.max_request };
        if len > max as u64 {
            // `req` is dropped: the request is finished unanswered (its client reads an
            // empty last response).
            let c = Corrupt::new(Kind::Service, "a request claims more bytes than max_request_len")
                .with("len", len)
                .with("request_id", id)
                .and_repaired();
            return Some(Err(RequestRecvError::Corrupt(c)));
        }
        self.counter.message(len as usize);
        req.len = len as usize;
        Some(Ok(req))
    }

    /// The first pending request the bitmap shows that this server can claim.
    fn try_take(&self) -> Option<Result<ActiveRequest, RequestRecvError>> {
        let v = self.view();
        let words = v.layout.bitmap_words();
        // No division on this path (it runs on every poll): the cursor stays below
        // `words * 64`, and word indices wrap by one subtraction.
        let start = self.cursor.get();
        let (first, off) = (start >> 6, (start & 63) as u32);
        for k in 0..=words {
            let mut wi = first + k;
            if wi >= words {
                wi -= words;
            }
            let bits = v.bitmap(wi).load(Ordering::Acquire);
            // Round-robin inside the word too, from the cursor's bit on the first word.
            let off = if k == 0 { off } else { 0 };
            let mut rot = bits.rotate_right(off);
            while rot != 0 {
                let b = (rot.trailing_zeros() + off) & 63;
                rot &= rot - 1;
                let index = wi * 64 + b as usize;
                if index >= v.layout.slots() {
                    v.clear_pending(index); // a bit past the last slot: a hostile write
                    continue;
                }
                if let Some(r) = self.claim(index) {
                    self.cursor.set(if index + 1 == words * 64 { 0 } else { index + 1 });
                    return Some(r);
                }
            }
        }
        None
    }

    /// Every slot, not only the bitmap's: a pending request whose bit is missing gets it back.
    /// A request held up behind a dead taker of its slot's previous request (the taker died
    /// between announcing that request's end and handing back the claim word) is freed too,
    /// whether or not its client is looking.
    fn rescan(&self) {
        let v = self.view();
        let parts = self.reg.shared.participants();
        for index in 0..v.layout.slots() {
            let (lane, slot) = v.lane_slot(index);
            let head = v.slot(lane, slot);
            let (p, k) = (head.post.load(Ordering::Acquire), head.claim.load(Ordering::Acquire));
            if protocol::tag(p) == protocol::PENDING
                && protocol::tag(k) == TAKEN
                && protocol::seq(k) != protocol::seq(p)
                && !taker_alive(&parts, k, v.layout.max_servers)
            {
                protocol::take_back(head, k);
            }
            if head.holds_pending() {
                v.mark_pending(index);
            }
        }
    }

    /// The next request, claimed from the service, waiting as `wait` says.
    pub fn recv_with(&mut self, wait: Wait) -> Result<ActiveRequest, Waited<RequestRecvError>> {
        match wait {
            Wait::Now => self.try_take().ok_or(Waited::Empty)?.map_err(Waited::Failed),
            wait => until(wait, |w| {
                let event = &self.view().header().requests;
                // The clock is read every CLOCK_EVERY polls that find nothing, not on each.
                let polls = Cell::new(0u32);
                let attempt = || {
                    self.try_take().or_else(|| {
                        polls.set(polls.get().wrapping_add(1));
                        if polls.get() % CLOCK_EVERY == 0 && self.rescan.due() {
                            self.rescan();
                            return self.try_take();
                        }
                        None
                    })
                };
                // Before each sleep: the first attempt after it may rescan (an attempt
                // otherwise reads the clock on every CLOCK_EVERYth).
                let recheck = || {
                    polls.set(CLOCK_EVERY - 1);
                    Some(RESCAN)
                };
                match try_then_block_on(event, self.policy, w.deadline(), recheck, self.counter, attempt) {
                    Some(r) => r.map_err(Some),
                    None => Err(None),
                }
            })
            .map_err(Waited::timed),
        }
    }

    wait_forms! {
        /// Claims a request if one is waiting, without waiting. Use with a [`crate::WaitSet`].
        fn try_recv, recv, recv_timeout, recv_deadline (&mut self) = recv_with -> ActiveRequest;
        errors (RequestTryRecvError, RequestRecvError, RequestRecvTimeoutError)
    }
}

impl crate::endpoint::forms::sealed::Sealed for Server {}

/// A server's receive is its requests' ([`Server::recv_with`]): the iterators and the async
/// receive (`recv_async`, feature `tokio`) are made from it.
impl crate::endpoint::receive::Receive for Server {
    type Item = ActiveRequest;
    type Error = RequestRecvError;

    fn recv_with(&mut self, wait: Wait) -> Result<ActiveRequest, Waited<RequestRecvError>> {
        Server::recv_with(self, wait)
    }
}

impl Waitable for Server {
    /// The service's request event: notified on every request posted.
    fn wait_handle(&self) -> WaitHandle<'_> {
        WaitHandle { event: &self.view().header().requests }
    }

    /// Some request is pending (another server may claim it first: `try_recv` then finds
    /// nothing): a slot whose bit is set holds a pending request.
    fn is_ready(&self) -> bool {
        let v = self.view();
        (0..v.layout.bitmap_words()).any(|i| {
            let mut bits = v.bitmap(i).load(Ordering::Acquire);
            while bits != 0 {
                let index = i * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if index < v.layout.slots() {
                    let (lane, slot) = v.lane_slot(index);
                    if v.slot(lane, slot).holds_pending() {
                        return true;
                    }
                }
            }
            false
        })
    }

    fn recheck_interval(&self) -> Option<Duration> {
        Some(RESCAN)
    }

    fn recheck(&self) -> bool {
        self.rescan();
        self.is_ready()
    }
}

/// A request a server claimed, read in place, answered through its slot's response ring.
///
/// Owned and `Send`: answer it here or on another thread, one response or a stream of them
/// ([`respond`](Self::respond) ... [`respond_last`](Self::respond_last), or
/// [`end`](Self::end) after the last). Dropping it unfinished ends it: its client reads an
/// empty last response. Its bytes ([`data`](Self::data)) stay valid and unchanged until it
/// is finished.
#[derive(Debug)]
pub struct ActiveRequest {
    reg: Arc<Registration>,
    lane: usize,
    /// Where its slot is, computed once.
    at: SlotAt,
    seq: u64,
    id: u64,
    len: usize,
    /// Responses written so far (the ring's head).
    written: u64,
    /// The request is in its slot's request line (else in the room).
    inline: bool,
    /// The one response was sent inline, in the answer line.
    answered_inline: bool,
    finished: bool,
    policy: WaitPolicy,
    counter: Counter,
}

// SAFETY: the request's slot is this request's alone until it is finished (its client
// touches only the ring's tail and the claim word, with atomics); the counter's
// single-writer rule is the server's, and a request on another thread shares only
// statistics with it (relaxed, may miss a count).
unsafe impl Send for ActiveRequest {}

/// A loan of a response cell ([`ActiveRequest::loan`]): write the response in place, then
/// [`send`](Self::send) or [`send_last`](Self::send_last) its first `len` bytes. Dropped
/// unsent, it sends nothing.
///
/// `R` is how the loan holds its request: borrowed (the default, from
/// [`ActiveRequest::loan`]) or owned ([`OwnedResponseLoan`], from
/// [`ActiveRequest::loan_owned`]).
#[derive(Debug)]
pub struct ResponseLoan<'a, R: DerefMut<Target = ActiveRequest> + 'a = &'a mut ActiveRequest> {
    req: R,
    cell: usize,
    _life: PhantomData<&'a mut ActiveRequest>,
}

/// A [`ResponseLoan`] that owns its request, lent by a [`Lender`]
/// ([`ActiveRequest::loan_owned`]): for a binding, whose objects outlive the call.
pub type OwnedResponseLoan = ResponseLoan<'static, LentMut<ActiveRequest>>;

impl<'a, R: DerefMut<Target = ActiveRequest> + 'a> ResponseLoan<'a, R> {
    /// The cell: `max_response_len` bytes, 64-byte aligned, not cleared.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self
    }

    /// Sends the first `len` bytes as a response; more may follow.
    ///
    /// # Panics
    /// If `len` is larger than the cell.
    pub fn send(self, len: usize) {
        self.publish(len, false);
    }

    /// Sends the first `len` bytes as the last response, finishing the request.
    ///
    /// # Panics
    /// If `len` is larger than the cell.
    pub fn send_last(self, len: usize) {
        self.publish(len, true);
    }

    fn publish(mut self, len: usize, last: bool) {
        let room = self.req.reg.shared.layout().max_response;
        assert!(len <= room, "a response of {len} bytes in a cell of {room}");
        let cell = self.cell;
        self.req.publish(cell, len, last);
    }
}

impl<'a, R: DerefMut<Target = ActiveRequest> + 'a> std::ops::Deref for ResponseLoan<'a, R> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let p = self.req.view().cell_ptr(self.req.at, self.cell);
        // SAFETY: the cell is free (the client read what it held and reads it again only
        // after `publish`) and has `max_response_len` bytes in the mapping the request keeps
        // alive; the loan holds the request, so nothing else writes it meanwhile.
        unsafe { std::slice::from_raw_parts(p, self.req.reg.shared.layout().max_response) }
    }
}

impl<'a, R: DerefMut<Target = ActiveRequest> + 'a> std::ops::DerefMut for ResponseLoan<'a, R> {
    fn deref_mut(&mut self) -> &mut [u8] {
        let p = self.req.view().cell_ptr(self.req.at, self.cell);
        // SAFETY: as in `deref`; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(p, self.req.reg.shared.layout().max_response) }
    }
}

impl ActiveRequest {
    fn view(&self) -> View<'_> {
        View::of(&self.reg.shared)
    }

    /// The request's id, as its client numbered it ([`Client::try_send_request`]'s return).
    ///
    /// [`Client::try_send_request`]: super::Client::try_send_request
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The request's bytes, in the client's slot (no copy); empty once the request is
    /// finished (its slot is its client's again).
    pub fn data(&self) -> &[u8] {
        if self.finished {
            // The slot is its client's again: nothing of it may be read.
            return &[];
        }
        let v = self.view();
        let p = if self.inline { v.inline_request_ptr(self.at) } else { v.request_ptr(self.at) };
        // SAFETY: `len` was checked against max_request_len, the room's size (INLINE_REQUEST
        // for an inline one); the slot is this request's until it is finished, and the
        // mapping lives as long as `reg`.
        unsafe { std::slice::from_raw_parts(p, self.len) }
    }

    /// The request's length in bytes (0 once it is finished).
    pub fn len(&self) -> usize {
        if self.finished {
            0
        } else {
            self.len
        }
    }

    /// Whether the request is empty (or finished).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pid of the client that sent it (0 if it has left).
    pub fn client_pid(&self) -> u32 {
        let entry = self.reg.shared.layout().client_entry(self.lane);
        self.reg.shared.participants().owner(entry).map_or(0, |o| o.process.pid)
    }

    /// Whether this request is finished (its last response sent, or ended).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// A free response cell, waiting for the client to read one as `wait` says. Fails with
    /// `ClientGone` when the client gave up on the request or died.
    fn room(&mut self, wait: Wait) -> Result<usize, RespondError> {
        if self.finished {
            return Err(RespondError::Finished);
        }
        let v = View::of(&self.reg.shared);
        let head = v.head(self.at);
        let depth = v.layout.depth as u64;
        let mine = protocol::taken(TAKEN, self.seq, self.reg.entry, self.reg.pid);
        let written = self.written;
        let attempt = || match protocol::room(head, mine, written, depth) {
            Room::Cell(cell) => Some(Ok(cell)),
            Room::Full => None,
            Room::ClientGone => Some(Err(RespondError::ClientGone)),
        };
        // One try first: a ring with room (every call's case) needs none of the waiting's
        // setup (its clock).
        let r = match (attempt(), wait) {
            (Some(r), _) => r,
            (None, Wait::Now) => Err(RespondError::Full),
            (None, wait) => {
                // A client that died holding the request is found by its entry, checked every
                // PEER while the ring stays full.
                let entry = v.layout.client_entry(self.lane);
                let parts = self.reg.shared.participants();
                let check = Throttle::new(PEER);
                let polls = Cell::new(0u32);
                let client_gone = || {
                    polls.set(polls.get().wrapping_add(1));
                    polls.get() % CLOCK_EVERY == 0
                        && check.due()
                        && !parts.owner(entry).is_some_and(|o| parts.is_alive(&o))
                };
                let attempt = || attempt().or_else(|| client_gone().then_some(Err(RespondError::ClientGone)));
                // Before each sleep: the first attempt after it asks whether the client lives.
                let recheck = || {
                    polls.set(CLOCK_EVERY - 1);
                    Some(PEER)
                };
                until(wait, |w| {
                    block_on_with(&v.lane(self.lane).room, self.policy, w.deadline(), recheck, None, attempt)
                        .ok_or(None::<()>)
                })
                .unwrap_or(Err(RespondError::Full))
            }
        };
        if r == Err(RespondError::ClientGone) {
            self.counter.drops(1);
        }
        r
    }

    /// Makes the response in cell `cell` (`INLINE_CELL`: the answer line), `len` bytes,
    /// visible to the client; the last one with the request's end, in one step (`finish`).
    fn publish(&mut self, cell: usize, len: usize, last: bool) {
        let v = View::of(&self.reg.shared);
        self.written = self.written.wrapping_add(1);
        if cell == protocol::INLINE_CELL {
            protocol::publish_inline(v.head(self.at), len);
            self.answered_inline = true;
        } else {
            protocol::publish(v.head(self.at), cell, len, last, self.written);
        }
        self.counter.message(len);
        if last {
            self.finish(false);
        } else {
            v.lane(self.lane).responses.notify();
        }
    }

    /// Sends `data` as a response, waiting for room as `wait` says (see
    /// [`respond`](Self::respond)).
    pub fn respond_with(&mut self, data: &[u8], last: bool, wait: Wait) -> Result<(), RespondError> {
        let max = self.reg.shared.layout().max_response;
        if data.len() > max {
            return Err(RespondError::TooLarge { len: data.len(), max });
        }
        let cell = self.room(wait)?;
        // A request's only response, small: in the answer line, with the end.
        let inline = last && self.written == 0 && data.len() <= protocol::INLINE_RESPONSE;
        let (cell, p) = if inline {
            (protocol::INLINE_CELL, self.view().inline_response_ptr(self.at))
        } else {
            (cell, self.view().cell_ptr(self.at, cell))
        };
        // SAFETY: the cell has max_response_len bytes (checked above), the answer line
        // INLINE_RESPONSE, and either is free: the client has read what the cell held and
        // reads either again only after `publish`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        self.publish(cell, data.len(), last);
        Ok(())
    }

    /// Sends `data` as one response of a stream; more may follow. Waits while the client has
    /// `response_depth` responses unread (it reads them, gives up, or dies: `ClientGone`).
    pub fn respond(&mut self, data: &[u8]) -> Result<(), RespondError> {
        self.respond_with(data, false, Wait::Forever)
    }

    /// Sends `data` as the last response, finishing the request (waiting as
    /// [`respond`](Self::respond) does). The usual answer to a `call`.
    pub fn respond_last(mut self, data: &[u8]) -> Result<(), RespondError> {
        self.respond_with(data, true, Wait::Forever)
    }

    /// [`respond`](Self::respond) without waiting: `Full` when the client has
    /// `response_depth` responses unread.
    pub fn try_respond(&mut self, data: &[u8], last: bool) -> Result<(), RespondError> {
        self.respond_with(data, last, Wait::Now)
    }

    /// [`respond`](Self::respond), waiting at most `timeout` for room.
    pub fn respond_timeout(&mut self, data: &[u8], last: bool, timeout: Duration) -> Result<(), RespondError> {
        self.respond_with(data, last, Wait::For(timeout))
    }

    /// A response cell to write in place (zero copy), waiting for room as `wait` says:
    /// fill it, then [`ResponseLoan::send`] or [`ResponseLoan::send_last`]. A loan dropped
    /// unsent sends nothing.
    pub fn loan_with(&mut self, wait: Wait) -> Result<ResponseLoan<'_>, RespondError> {
        let cell = self.room(wait)?;
        Ok(ResponseLoan { req: self, cell, _life: PhantomData })
    }

    /// [`loan_with`](Self::loan_with) as an owned loan, for a request held by a [`Lender`]
    /// (a binding's object): the wait for room runs under the lender's mutex, and the
    /// request is lent to the loan (every other use of it refused with `Busy`) until the
    /// loan is sent or dropped.
    pub fn loan_owned(lender: &Lender<ActiveRequest>, wait: Wait) -> Result<OwnedResponseLoan, LendOr<RespondError>> {
        let (req, cell) = lender.lend_mut_after(|r| r.room(wait))?;
        Ok(ResponseLoan { req, cell, _life: PhantomData })
    }

    /// [`loan_with`](Self::loan_with), waiting as long as it takes.
    pub fn loan(&mut self) -> Result<ResponseLoan<'_>, RespondError> {
        self.loan_with(Wait::Forever)
    }

    /// Finishes the request without another response: its client reads an empty last
    /// response (unless the last one was already sent). Dropping the request does the same.
    pub fn end(mut self) {
        self.finish(false);
    }

    /// Finishes the request as failed: its client reads the responses sent before, then
    /// [`ResponseRecvError::Failed`](super::ResponseRecvError::Failed) (a
    /// [`CallError::Recv`](super::CallError::Recv) for a call). For a request this server
    /// cannot answer (a command that failed, an input it rejects).
    pub fn fail(mut self) {
        self.finish(true);
    }

    /// Hands the slot back: DONE (with the number of responses, the last included) for its
    /// client to read the end, or FREE if the client gave up on it.
    fn finish(&mut self, failed: bool) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        let v = View::of(&self.reg.shared);
        let (entry, pid) = (self.reg.entry, self.reg.pid);
        let head = v.head(self.at);
        protocol::finish(head, self.seq, entry, pid, self.written, failed, self.answered_inline);
        v.lane(self.lane).responses.notify();
        // The client may have posted its next request in the slot after reading the end and
        // before the claim word followed: a server that looked then and went to sleep is
        // woken now that it can be claimed.
        let next = head.post.load(Ordering::Relaxed);
        if protocol::tag(next) == protocol::PENDING && protocol::seq(next) != self.seq {
            v.header().requests.notify();
        }
    }
}

impl Drop for ActiveRequest {
    fn drop(&mut self) {
        self.finish(false);
    }
}
