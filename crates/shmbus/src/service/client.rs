//! A service's clients: requests out, responses back.

use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::{CallError, ResponseRecvError, ResponseRecvTimeoutError, ResponseTryRecvError, ServiceTrySendError};
use super::layout::ServiceLayout;
use super::protocol::SlotHead;
use super::protocol::{self, GiveUp, LaneCounts, Look, TAKEN};
use super::shared::{taker_alive, Shared, SlotAt, View, ROLE_CLIENT};
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
use crate::wait::{try_then_block_on, Wait, WaitPolicy};
use crate::waitset::{WaitHandle, Waitable};

/// What this client knows of one of its request slots.
#[derive(Debug, Clone, Copy, Default)]
struct Local {
    /// The request in the slot (0: the slot is free; `INHERITED`: one the lane's previous
    /// client left, known by the slot's post word).
    id: u64,
    /// Responses read.
    tail: u64,
    /// The last response was read; the slot is freed once its server has finished.
    last_read: bool,
    /// Given up on (timed out, cancelled, or inherited busy): freed once its server lets go.
    given_up: bool,
    /// The slot's `fin` word when the request was posted: a `fin` still holding it is an
    /// earlier request's end (see `protocol::look`).
    fin_before: u64,
}

/// The id of a slot a client inherited busy from the lane's previous client.
const INHERITED: u64 = u64::MAX;

/// One client of a service, made by [`Service::client`](super::Service::client). `Send`, not
/// `Sync`.
///
/// A client sends requests ([`try_send_request`](Self::try_send_request), or in place with
/// [`loan_request`](Self::loan_request)), at most `max_in_flight` at once, and reads the
/// responses to them, which reach it alone ([`recv_response`](Self::recv_response) and its
/// forms, each [`Response`] naming its request), or does both in one
/// [`call`](Self::call).
#[derive(Debug)]
pub struct Client {
    shared: Arc<Shared>,
    layout: ServiceLayout,
    lane: usize,
    entry: usize,
    next_id: Cell<u64>,
    local: Box<[Cell<Local>]>,
    /// Where each of the lane's slots is, computed once.
    slots: Box<[SlotAt]>,
    /// Where the next look for responses starts (fairness between requests).
    cursor: Cell<usize>,
    policy: WaitPolicy,
    /// Servers holding our requests are asked whether they live at most this often.
    peer_check: Throttle,
    polls: Cell<u32>,
    counter: Counter,
}

/// A response copied out of its cell ([`Client::recv_response`] and its forms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    request_id: u64,
    data: Vec<u8>,
    last: bool,
}

impl Response {
    /// The id of the request this answers.
    pub fn request_id(&self) -> u64 {
        self.request_id
    }

    /// The response's bytes.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The bytes, owned.
    pub fn into_data(self) -> Vec<u8> {
        self.data
    }

    /// Whether this is the request's last response (its stream is over). A stream ended
    /// without a last response ([`ActiveRequest::end`](super::ActiveRequest::end), or a
    /// server dropping the request) ends with an empty last one.
    pub fn is_last(&self) -> bool {
        self.last
    }
}

/// A response read in place, in its cell (no copy), from [`Client::recv_response_ref`] and
/// its forms. The cell is handed back to the server when this is dropped.
///
/// `C` is how it holds its client: borrowed (the default) or owned ([`OwnedResponseRef`],
/// from [`Client::response_owned`]).
#[derive(Debug)]
pub struct ResponseRef<'a, C: Deref<Target = Client> + 'a = &'a Client> {
    client: C,
    got: Got,
    /// The lifetime only: what the response may be sent or shared with is `C`'s to say.
    _life: PhantomData<fn() -> &'a Client>,
}

/// A [`ResponseRef`] that owns its client, lent by a [`Lender`] ([`Client::response_owned`]):
/// for a binding, whose objects outlive the call.
pub type OwnedResponseRef = ResponseRef<'static, LentMut<Client>>;

impl<'a, C: Deref<Target = Client> + 'a> ResponseRef<'a, C> {
    /// The id of the request this answers.
    pub fn request_id(&self) -> u64 {
        self.got.id
    }

    /// The response's bytes, in the shared cell (no copy).
    pub fn data(&self) -> &[u8] {
        self.client.bytes(&self.got)
    }

    /// Whether this is the request's last response (see [`Response::is_last`]).
    pub fn is_last(&self) -> bool {
        self.got.last
    }

    /// Leaves the response unread: the next receive returns it again (for a caller whose
    /// buffer turned out too small for it).
    pub fn unread(self) {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again: the client holder is moved out once
        // and dropped (giving an owned client back), without the consume of `Drop`.
        drop(unsafe { std::ptr::read(&this.client) });
    }
}

impl<'a, C: Deref<Target = Client> + 'a> Deref for ResponseRef<'a, C> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.data()
    }
}

impl<'a, C: Deref<Target = Client> + 'a> Drop for ResponseRef<'a, C> {
    fn drop(&mut self) {
        self.client.consume(&self.got);
    }
}

/// A request slot lent for writing a request in place ([`Client::loan_request`]). Dropped
/// unsent, it sends nothing.
///
/// `C` is how it holds its client: borrowed (the default) or owned ([`OwnedRequestLoan`],
/// from [`Client::loan_request_owned`]).
#[derive(Debug)]
pub struct RequestLoan<'a, C: DerefMut<Target = Client> + 'a = &'a mut Client> {
    client: C,
    slot: usize,
    _life: PhantomData<&'a mut Client>,
}

/// A [`RequestLoan`] that owns its client, lent by a [`Lender`]
/// ([`Client::loan_request_owned`]).
pub type OwnedRequestLoan = RequestLoan<'static, LentMut<Client>>;

impl<'a, C: DerefMut<Target = Client> + 'a> RequestLoan<'a, C> {
    /// The request's room: `max_request_len` bytes, 64-byte aligned, not cleared.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self
    }

    /// Sends the first `len` bytes as a request; returns its id.
    ///
    /// # Panics
    /// If `len` is larger than the room.
    pub fn send(self, len: usize) -> u64 {
        let room = self.client.layout.max_request;
        assert!(len <= room, "a request of {len} bytes in a room of {room}");
        self.client.post(self.slot, len, false)
    }

    fn room(&self) -> *mut u8 {
        self.client.view().request_ptr(self.client.slots[self.slot])
    }
}

impl<'a, C: DerefMut<Target = Client> + 'a> Deref for RequestLoan<'a, C> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the slot is free (no server reads it until `post`) and its room has
        // `max_request_len` bytes in the mapping the client keeps alive; the loan holds the
        // client, so nothing else writes it meanwhile.
        unsafe { std::slice::from_raw_parts(self.room(), self.client.layout.max_request) }
    }
}

impl<'a, C: DerefMut<Target = Client> + 'a> DerefMut for RequestLoan<'a, C> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.room(), self.client.layout.max_request) }
    }
}

/// A response found: in cell `cell` (`None`: the empty end of a stream), `len` bytes.
#[derive(Debug, Clone, Copy)]
struct Got {
    slot: usize,
    id: u64,
    cell: Option<usize>,
    len: usize,
    last: bool,
}

/// Frees what a client that left or died held in lane `lane`: a request no server took is
/// withdrawn, one a server holds is abandoned (the server drops its responses and frees the
/// slot when it finishes), a finished one is freed. Idempotent (a reclaimer may die and be
/// redone).
fn clean_lane(v: View<'_>, lane: usize) {
    for slot in 0..v.layout.in_flight {
        protocol::clean(v.slot(lane, slot));
    }
    // A server waiting for room in an abandoned ring sees it now.
    v.lane(lane).room.notify();
    // The lane's client is gone: servers stop looking at its slots.
    for slot in 0..v.layout.in_flight {
        v.clear_pending(v.index_of(lane, slot));
    }
}

impl Client {
    pub(super) fn attach(shared: Arc<Shared>) -> Result<Client, OpenError> {
        let me = ProcessId::current();
        let layout = *shared.layout();
        let clients = layout.max_servers..layout.max_servers + layout.max_clients;
        let v = View::of(&shared);
        let parts = shared.participants();
        let reclaim = || {
            parts.reclaim_dead_in(clients.clone(), me, process_is_alive, |index, _| {
                clean_lane(v, index - layout.max_servers)
            })
        };
        let entry = register_shared(parts, me, ROLE_CLIENT, clients.clone(), reclaim, shared.path())?;
        let lane = entry - layout.max_servers;
        // What a predecessor in this lane left (it left with requests a server still holds,
        // or died and was reclaimed by a server's view of it): given up, freed as they finish.
        clean_lane(v, lane);
        let local = (0..layout.in_flight)
            .map(|slot| {
                let busy = !v.slot(lane, slot).is_over();
                Cell::new(Local { id: if busy { INHERITED } else { 0 }, given_up: busy, ..Local::default() })
            })
            .collect();
        let counter = shared.own_counter(entry);
        let slots = (0..layout.in_flight).map(|slot| v.slot_at(lane, slot)).collect();
        // Ids go on from the lane's count of requests, so that the client after this one
        // does not reuse this one's numbers (a slot's answer line keeps the last end).
        let first_id =
            (v.lane(lane).counts.requests.load(Ordering::Relaxed).wrapping_add(1) & protocol::SEQ_MASK).max(1);
        Ok(Client {
            shared,
            layout,
            lane,
            entry,
            next_id: Cell::new(first_id),
            local,
            slots,
            cursor: Cell::new(0),
            policy: WaitPolicy::default(),
            peer_check: Throttle::new(PEER),
            polls: Cell::new(0),
            counter,
        })
    }

    fn view(&self) -> View<'_> {
        View::of(&self.shared)
    }

    /// The head of this client's slot `slot`.
    fn head(&self, slot: usize) -> &SlotHead {
        self.view().head(self.slots[slot])
    }

    /// How a receive waits: spin, then sleep (default [`WaitPolicy::ADAPTIVE`]).
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.policy = policy;
    }

    /// The service's `max_request_len`.
    pub fn max_request_len(&self) -> usize {
        self.layout.max_request
    }

    /// This client's lane (its index among the service's clients).
    pub fn index(&self) -> usize {
        self.lane
    }

    /// Requests sent and not over yet (the last response not read), including those given up
    /// on that a server still holds.
    pub fn in_flight(&self) -> usize {
        (0..self.layout.in_flight)
            .filter(|&s| {
                let l = self.local[s].get();
                // One given up on counts until its server lets go (looked at now).
                l.id != 0 && !l.last_read && !(l.given_up && self.settle(s, false))
            })
            .count()
    }

    /// Whether request `id` is in flight: sent, not given up on, its last response not read.
    pub fn is_pending(&self, id: u64) -> bool {
        self.slot_of(id).is_some()
    }

    /// Whether some server is attached (its entry is held; a server SIGKILLed counts until
    /// its entry is reclaimed).
    pub fn server_attached(&self) -> bool {
        let parts = self.shared.participants();
        (0..self.layout.max_servers).any(|e| parts.owner(e).is_some())
    }

    fn slot_of(&self, id: u64) -> Option<usize> {
        self.local.iter().position(|l| {
            let l = l.get();
            l.id == id && !l.given_up && !l.last_read
        })
    }

    fn update(&self, slot: usize, f: impl FnOnce(&mut Local)) {
        let mut l = self.local[slot].get();
        f(&mut l);
        self.local[slot].set(l);
    }

    /// Whether the server that claim word `w` names is gone (reads `/proc`: throttled by the
    /// callers).
    fn taker_gone(&self, w: u64) -> bool {
        !taker_alive(&self.shared.participants(), w, self.layout.max_servers)
    }

    /// Frees slot `slot` if its request is over on the server's side too. `ask` allows a
    /// `/proc` look at the server holding it.
    fn settle(&self, slot: usize, ask: bool) -> bool {
        let id = self.local[slot].get().id;
        let seq = (id != INHERITED).then_some(id);
        let free = protocol::settle(self.head(slot), seq, |w| ask && self.taker_gone(w));
        if free {
            self.local[slot].set(Local::default());
        }
        free
    }

    /// A slot free for a new request.
    fn free_slot(&self) -> Option<usize> {
        // A slot whose request was read to its end first: its lines are the ones in use, and
        // its end was seen (a last response is only shown with it), so the claim word is not
        // read: it stays in the servers' caches.
        if let Some(s) = self.local.iter().position(|l| l.get().last_read) {
            self.local[s].set(Local::default());
            return Some(s);
        }
        if let Some(s) = self.local.iter().position(|l| l.get().id == 0) {
            return Some(s);
        }
        let ask = self.peer_check.due();
        (0..self.layout.in_flight).find(|&s| {
            let l = self.local[s].get();
            (l.given_up || l.last_read) && self.settle(s, ask)
        })
    }

    /// Why nothing can be sent now, if so.
    fn refuse(&self, len: usize) -> Result<usize, ServiceTrySendError> {
        if len > self.layout.max_request {
            return Err(ServiceTrySendError::TooLarge { len, max: self.layout.max_request });
        }
        if !self.server_attached() {
            return Err(ServiceTrySendError::NoServer);
        }
        if self.shared.was_truncated() {
            return Err(ServiceTrySendError::Truncated);
        }
        self.free_slot().ok_or_else(|| {
            self.counter.full();
            ServiceTrySendError::Full
        })
    }

    /// Sends `request` to the service without waiting; returns its id, which its responses
    /// carry. Refused (the request stays with the caller) when it is too large, no server is
    /// attached, or this client has `max_in_flight` requests unanswered.
    pub fn try_send_request(&mut self, request: &[u8]) -> Result<u64, ServiceTrySendError> {
        let slot = self.refuse(request.len())?;
        // A small request rides in the request line, with the post word the server reads.
        let inline = request.len() <= protocol::INLINE_REQUEST;
        let v = self.view();
        let p = if inline { v.inline_request_ptr(self.slots[slot]) } else { v.request_ptr(self.slots[slot]) };
        // SAFETY: the room has max_request_len bytes (checked in `refuse`), the inline area
        // INLINE_REQUEST, and the slot is over: no server reads it until `post`.
        unsafe { std::ptr::copy_nonoverlapping(request.as_ptr(), p, request.len()) };
        Ok(self.post(slot, request.len(), inline))
    }

    /// A request slot to write a request in place (zero copy): fill it, then
    /// [`RequestLoan::send`]. Refused as [`try_send_request`](Self::try_send_request) is.
    pub fn loan_request(&mut self) -> Result<RequestLoan<'_>, ServiceTrySendError> {
        let slot = self.refuse(0)?;
        Ok(RequestLoan { client: self, slot, _life: PhantomData })
    }

    /// [`loan_request`](Self::loan_request) as an owned loan, for a client held by a
    /// [`Lender`] (a binding's object): the client is lent to the loan (every other use of
    /// it refused with `Busy`) until the loan is sent or dropped.
    pub fn loan_request_owned(lender: &Lender<Client>) -> Result<OwnedRequestLoan, LendOr<ServiceTrySendError>> {
        let (client, slot) = lender.lend_mut_after(|c| c.refuse(0))?;
        Ok(RequestLoan { client, slot, _life: PhantomData })
    }

    /// A response read in place by `recv` (one of the `recv_response_ref` or
    /// `recv_response_for` forms), as an owned [`OwnedResponseRef`] holding the client lent
    /// (every other use of it refused with `Busy`) until it is dropped. The receive runs
    /// under the lender's mutex.
    ///
    /// # Panics
    /// If `recv` returns a response of another client.
    pub fn response_owned<E>(
        lender: &Lender<Client>,
        recv: impl FnOnce(&mut Client) -> Result<ResponseRef<'_>, E>,
    ) -> Result<OwnedResponseRef, LendOr<E>> {
        let (client, got) = lender.lend_mut_after(|c| {
            let me: *const Client = c;
            let r = recv(c)?;
            assert!(std::ptr::eq(r.client, me), "response_owned: the response is another client's");
            let got = r.got;
            // The read moves to the owned response: this one must not consume it.
            std::mem::forget(r);
            Ok(got)
        })?;
        Ok(ResponseRef { client, got, _life: PhantomData })
    }

    /// Posts the `len`-byte request in free slot `slot` (`inline`: in its request line).
    fn post(&self, slot: usize, len: usize, inline: bool) -> u64 {
        let v = self.view();
        let head = v.head(self.slots[slot]);
        let id = protocol::fresh_id(head, self.next_id.get());
        self.next_id.set(id.wrapping_add(1));
        let fin_before = head.fin.load(Ordering::Relaxed);
        // Counted before it is posted: a client that dies in between leaves the count past
        // this id, so the lane's next client (which numbers on from the count) never reuses it.
        LaneCounts::bump(&v.lane(self.lane).counts.requests);
        protocol::post(head, id, len, inline);
        // The slot's bit stays set while this client holds the lane (servers look at the
        // slot's state, which says whether a request is there): set once, not per request.
        v.mark_pending(v.index_of(self.lane, slot));
        v.header().requests.notify();
        self.local[slot].set(Local { id, fin_before, ..Local::default() });
        self.counter.message(len);
        id
    }

    /// Gives up on request `id`: a response that comes later is dropped by its server.
    /// Returns whether it was in flight. Its slot is free again once its server lets go.
    pub fn cancel(&mut self, id: u64) -> bool {
        let Some(slot) = self.slot_of(id) else { return false };
        self.give_up(slot);
        true
    }

    fn give_up(&self, slot: usize) {
        LaneCounts::bump(&self.view().lane(self.lane).counts.given_up);
        match protocol::give_up(self.head(slot), self.local[slot].get().id) {
            GiveUp::Freed => {
                self.local[slot].set(Local::default());
                return;
            }
            // A server waiting for room in this request's ring sees it abandoned now.
            GiveUp::Abandoned => {
                self.view().lane(self.lane).room.notify();
            }
            GiveUp::Left => {}
        }
        self.update(slot, |l| l.given_up = true);
    }

    /// Looks at slot `slot`, whose request this client knows as `l` (see `protocol::look`).
    fn look(&self, slot: usize, l: Local, check_state: bool) -> (u64, Look) {
        let head = self.head(slot);
        protocol::look(head, l.id, l.tail, l.fin_before, self.layout.depth, self.layout.max_response, check_state)
    }

    /// Looks for a response: to request `only`, or to any request in flight.
    fn poll(&self, only: Option<usize>) -> Option<Result<Got, ResponseRecvError>> {
        let n = self.layout.in_flight;
        let start = self.cursor.get();
        let mut any = false;
        // The post and claim words are read every CLOCK_EVERY polls (a poll otherwise reads
        // the answer and ring lines only), and a dead server looked for then, at most once
        // per PEER.
        let polls = self.polls.get().wrapping_add(1);
        self.polls.set(polls);
        let check_state = polls % CLOCK_EVERY == 0;
        let ask = check_state && self.peer_check.due();
        for k in 0..n {
            // No division on the polling path: `start < n`, so one subtraction wraps.
            let slot = only.unwrap_or(if start + k >= n { start + k - n } else { start + k });
            let l = self.local[slot].get();
            if l.id == 0 || l.given_up {
                if only.is_some() {
                    break;
                }
                continue;
            }
            if l.last_read {
                // Freed when its slot is next needed (`free_slot`).
                continue;
            }
            any = true;
            let head = self.head(slot);
            let (w, look) = self.look(slot, l, check_state);
            let got = |cell, len, last| Got { slot, id: l.id, cell, len, last };
            // The next look starts after a slot that had something (fairness between requests).
            let advance = || self.cursor.set(if slot + 1 == n { 0 } else { slot + 1 });
            match look {
                Look::Response { cell, len, last } => {
                    advance();
                    return Some(Ok(got(Some(cell), len, last)));
                }
                Look::Finished { failed: false } => {
                    advance();
                    return Some(Ok(got(None, 0, true)));
                }
                Look::Finished { failed: true } => {
                    advance();
                    // Over, as a read last response is: the slot is reused without a look at
                    // the claim word.
                    self.update(slot, |l| l.last_read = true);
                    LaneCounts::bump(&self.view().lane(self.lane).counts.failed);
                    return Some(Err(ResponseRecvError::Failed { request_id: l.id }));
                }
                Look::Nothing if protocol::tag(w) == TAKEN && ask && self.taker_gone(w) => {
                    if protocol::seq(w) != l.id & protocol::SEQ_MASK {
                        // The previous request's taker died between its end (which this client
                        // read) and its claim word: that request is over; this one can be
                        // claimed.
                        if protocol::take_back(head, w) {
                            self.view().header().requests.notify();
                        }
                    } else {
                        // Its responses written before it died were read: look once more for
                        // one written just before, then take the slot back.
                        if let (_, Look::Response { cell, len, last }) = self.look(slot, l, true) {
                            return Some(Ok(got(Some(cell), len, last)));
                        }
                        if protocol::take_back(head, w) {
                            self.local[slot].set(Local::default());
                            self.counter.drops(1);
                            LaneCounts::bump(&self.view().lane(self.lane).counts.server_gone);
                            return Some(Err(ResponseRecvError::ServerGone { request_id: l.id }));
                        }
                    }
                }
                Look::Nothing => {}
                Look::Corrupt(what) => {
                    // Given up: a request a server holds (by the claim word) is abandoned, for
                    // the server to free when it finishes; any other is freed or withdrawn.
                    if protocol::give_up(head, l.id) == GiveUp::Freed {
                        self.local[slot].set(Local::default());
                    } else {
                        self.update(slot, |l| l.given_up = true);
                        self.view().lane(self.lane).room.notify();
                    }
                    let c = Corrupt::new(Kind::Service, what).with("request_id", l.id).with("claim", w).and_repaired();
                    return Some(Err(ResponseRecvError::Corrupt(c)));
                }
            }
            if only.is_some() {
                break;
            }
        }
        if !any {
            return Some(Err(ResponseRecvError::NoneInFlight));
        }
        None
    }

    /// The bytes of a response found.
    fn bytes(&self, got: &Got) -> &[u8] {
        match got.cell {
            None => &[],
            Some(protocol::INLINE_CELL) => {
                let p = self.view().inline_response_ptr(self.slots[got.slot]);
                // SAFETY: `look` checked the length against INLINE_RESPONSE; the request is
                // finished, so its server writes the answer line no more.
                unsafe { std::slice::from_raw_parts(p, got.len) }
            }
            Some(cell) => {
                let p = self.view().cell_ptr(self.slots[got.slot], cell);
                // SAFETY: `look` checked the length against max_response_len, the cell's
                // size; the server does not write the cell again until we move the tail past it.
                unsafe { std::slice::from_raw_parts(p, got.len) }
            }
        }
    }

    /// Hands a read response's cell back (and the slot, after the last one).
    fn consume(&self, got: &Got) {
        let v = self.view();
        let head = v.head(self.slots[got.slot]);
        if got.cell.is_some() {
            let l = self.local[got.slot].get();
            self.update(got.slot, |l| l.tail = l.tail.wrapping_add(1));
            // A server waits for room only when the ring was full before this read.
            if protocol::consume(head, l.tail, got.last, self.layout.depth as u64) {
                v.lane(self.lane).room.notify();
            }
        }
        self.counter.message(got.len);
        LaneCounts::bump(&v.lane(self.lane).counts.responses);
        if got.last {
            // The slot is reused when it is next needed (`free_slot`), without a look at the
            // claim word (the end was read).
            self.update(got.slot, |l| l.last_read = true);
        }
    }

    /// The response found by `wait`ing for `only` (or any request).
    fn find(&self, only: Option<usize>, wait: Wait) -> Result<Got, Waited<ResponseRecvError>> {
        match wait {
            Wait::Now => self.poll(only).ok_or(Waited::Empty)?.map_err(Waited::Failed),
            wait => until(wait, |w| {
                let event = &self.view().lane(self.lane).responses;
                // Before each sleep: the first poll after it asks whether the servers live
                // (a poll otherwise asks on every CLOCK_EVERYth), so a dead one is noticed
                // within PEER of sleeping.
                let recheck = || {
                    self.polls.set(CLOCK_EVERY - 1);
                    Some(PEER)
                };
                let polled =
                    try_then_block_on(event, self.policy, w.deadline(), recheck, self.counter, || self.poll(only));
                // Before saying it timed out: one poll that reads the claim word (an end only
                // it shows is not missed for want of a check).
                let last_look = || {
                    self.polls.set(CLOCK_EVERY - 1);
                    self.poll(only)
                };
                match polled.or_else(last_look) {
                    Some(r) => r.map_err(Some),
                    None => Err(None),
                }
            })
            .map_err(Waited::timed),
        }
    }

    /// The next response to any request in flight, read in place, waiting as `wait` says.
    pub fn recv_response_ref_with(&mut self, wait: Wait) -> Result<ResponseRef<'_>, Waited<ResponseRecvError>> {
        let got = self.find(None, wait)?;
        Ok(ResponseRef { client: self, got, _life: PhantomData })
    }

    wait_forms! {
        /// The next response to any request in flight if one is there, without waiting, read
        /// in place. `NoneInFlight` when no request is in flight.
        fn try_recv_response_ref, recv_response_ref, recv_response_ref_timeout, recv_response_ref_deadline (&mut self)
            = recv_response_ref_with -> ResponseRef<'_>;
        errors (ResponseTryRecvError, ResponseRecvError, ResponseRecvTimeoutError)
    }

    /// [`recv_response_ref_with`](Self::recv_response_ref_with), copied out.
    pub fn recv_response_with(&mut self, wait: Wait) -> Result<Response, Waited<ResponseRecvError>> {
        self.recv_response_ref_with(wait).map(|r| Response {
            request_id: r.request_id(),
            data: r.to_vec(),
            last: r.is_last(),
        })
    }

    wait_forms! {
        /// [`try_recv_response_ref`](Self::try_recv_response_ref), copied out.
        fn try_recv_response, recv_response, recv_response_timeout, recv_response_deadline (&mut self)
            = recv_response_with -> Response;
        errors (ResponseTryRecvError, ResponseRecvError, ResponseRecvTimeoutError)
    }

    /// The next response to request `id`, read in place, waiting as `wait` says; responses
    /// to other requests wait for their turn. `NoneInFlight` when `id` is not in flight.
    pub fn recv_response_for_with(
        &mut self,
        id: u64,
        wait: Wait,
    ) -> Result<ResponseRef<'_>, Waited<ResponseRecvError>> {
        let slot = self.slot_of(id).ok_or(Waited::Failed(ResponseRecvError::NoneInFlight))?;
        let got = self.find(Some(slot), wait)?;
        Ok(ResponseRef { client: self, got, _life: PhantomData })
    }

    wait_forms! {
        /// The next response to request `id` if it is there, without waiting (see
        /// [`recv_response_for_with`](Self::recv_response_for_with)).
        fn try_recv_response_for, recv_response_for, recv_response_for_timeout, recv_response_for_deadline
            (&mut self, id: u64) = recv_response_for_with -> ResponseRef<'_>;
        errors (ResponseTryRecvError, ResponseRecvError, ResponseRecvTimeoutError)
    }

    /// Sends `request` and waits at most `timeout` for its response, which is returned: one
    /// round trip. For a service that answers with one response (a server streaming several
    /// has the rest dropped). A timeout gives the request up (`CallError::Timeout`). The
    /// request is refused as [`try_send_request`](Self::try_send_request) would, without
    /// waiting.
    pub fn call(&mut self, request: &[u8], timeout: Duration) -> Result<Vec<u8>, CallError> {
        self.call_with(request, timeout, <[u8]>::to_vec)
    }

    /// [`call`](Self::call) with the response read in place by `read`, which returns what
    /// the call returns (no copy of the response).
    pub fn call_with<T>(
        &mut self,
        request: &[u8],
        timeout: Duration,
        read: impl FnOnce(&[u8]) -> T,
    ) -> Result<T, CallError> {
        self.call_ref(request, timeout, |r| read(r.data()))
    }

    /// [`call`](Self::call) with the first response handed to `read` whole (its id, bytes
    /// and last flag); the request is given up after it (if it was not the last) or after
    /// the wait.
    pub(super) fn call_ref<T>(
        &mut self,
        request: &[u8],
        timeout: Duration,
        read: impl FnOnce(&ResponseRef<'_>) -> T,
    ) -> Result<T, CallError> {
        let wait = Instant::now().checked_add(timeout).map_or(Wait::Forever, Wait::Until);
        let id = self.try_send_request(request)?;
        match self.recv_response_for_with(id, wait).map(|r| (read(&r), r.is_last())) {
            Ok((out, last)) => {
                if !last {
                    self.cancel(id);
                }
                Ok(out)
            }
            Err(Waited::Failed(e)) => Err(CallError::Recv(e)),
            Err(Waited::Empty | Waited::TimedOut) => {
                self.cancel(id);
                Err(CallError::Timeout)
            }
        }
    }
}

impl crate::endpoint::forms::sealed::Sealed for Client {}

/// A client's receive is its responses' ([`Client::recv_response_with`]): the iterators and
/// the async receive (`recv_async`, feature `tokio`) are made from it.
impl crate::endpoint::receive::Receive for Client {
    type Item = Response;
    type Error = ResponseRecvError;

    fn recv_with(&mut self, wait: Wait) -> Result<Response, Waited<ResponseRecvError>> {
        self.recv_response_with(wait)
    }
}

#[cfg(feature = "tokio")]
impl Client {
    /// [`call`](Self::call) awaited, without a thread waiting: sends `request` and resolves
    /// to its first response's bytes (the request is given up after it if it was not the
    /// last). No timeout of its own: wrap it in one (`tokio::time::timeout`); a call future
    /// dropped before it resolves gives its request up, so a late response is dropped.
    /// While other requests of this client are in flight with responses unread, it polls
    /// instead of sleeping: read those first.
    pub fn call_async(&mut self, request: &[u8]) -> Result<CallAsync<'_>, CallError> {
        let id = self.try_send_request(request)?;
        Ok(CallAsync { client: self, id, state: crate::r#async::WaitState::default(), done: false })
    }
}

/// The future of [`Client::call_async`].
#[cfg(feature = "tokio")]
#[must_use = "futures do nothing unless awaited; dropped, the request is given up"]
pub struct CallAsync<'a> {
    client: &'a mut Client,
    id: u64,
    state: crate::r#async::WaitState,
    done: bool,
}

#[cfg(feature = "tokio")]
impl std::fmt::Debug for CallAsync<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallAsync").field("id", &self.id).finish_non_exhaustive()
    }
}

#[cfg(feature = "tokio")]
impl CallAsync<'_> {
    /// The id of the request this call sent.
    pub fn request_id(&self) -> u64 {
        self.id
    }
}

#[cfg(feature = "tokio")]
impl std::future::Future for CallAsync<'_> {
    type Output = Result<Vec<u8>, CallError>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        use std::task::Poll;
        let this = self.get_mut();
        loop {
            let r = this.client.recv_response_for_with(this.id, Wait::Now).map(|r| (r.to_vec(), r.is_last()));
            match r {
                Ok((data, last)) => {
                    this.done = true;
                    if !last {
                        this.client.cancel(this.id);
                    }
                    return Poll::Ready(Ok(data));
                }
                Err(Waited::Failed(e)) => {
                    this.done = true;
                    return Poll::Ready(Err(CallError::Recv(e)));
                }
                Err(Waited::Empty | Waited::TimedOut) => {}
            }
            match this.state.poll(&[&*this.client], cx) {
                // Ready (something to read, maybe another request's): look again.
                Poll::Ready(_) => continue,
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(feature = "tokio")]
impl Drop for CallAsync<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.client.cancel(self.id);
        }
    }
}

impl Waitable for Client {
    /// The lane's response event: notified on every response to this client and every
    /// request of it finished.
    fn wait_handle(&self) -> WaitHandle<'_> {
        WaitHandle { event: &self.view().lane(self.lane).responses }
    }

    /// A response (or an end) is there to read, for some request in flight.
    fn is_ready(&self) -> bool {
        (0..self.layout.in_flight).any(|slot| {
            let l = self.local[slot].get();
            l.id != 0
                && !l.given_up
                && !l.last_read
                // Not the spin path: the claim word too, so that an end only it shows (a
                // `fin` overwritten by a hostile write) wakes a wait set.
                && !matches!(self.look(slot, l, true).1, Look::Nothing)
        })
    }

    fn recheck_interval(&self) -> Option<Duration> {
        Some(PEER)
    }

    /// A server holding one of our requests died (or the previous request of its slot, which
    /// then holds it up): the next receive reports it (or takes the word back).
    fn recheck(&self) -> bool {
        // The next receive asks too (it reports what this finds).
        self.polls.set(CLOCK_EVERY - 1);
        (0..self.layout.in_flight).any(|slot| {
            let l = self.local[slot].get();
            let k = self.head(slot).claim.load(Ordering::Acquire);
            l.id != 0 && !l.given_up && !l.last_read && protocol::tag(k) == TAKEN && self.taker_gone(k)
        })
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        clean_lane(self.view(), self.lane);
        self.shared.participants().release(self.entry);
    }
}
