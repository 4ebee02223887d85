//! The service's shared words: the header, the pending-request bitmap, the lanes and their
//! request slots, and the state machine of a slot.
//!
//! # A request slot
//!
//! Each client owns one *lane* of `max_in_flight` request slots. A slot has two words that
//! decide it, each written by one side in a call:
//!
//! * the **post word**, the client's: `PENDING | seq << 33` once it has posted request
//!   `seq` there (0 before the first); only the slot's client writes it;
//! * the **claim word**, the servers': what became of the slot's latest request. It packs
//!   `tag | taker entry << 4 | taker pid << 11 | seq << 33` and runs, for request `seq`,
//!
//! ```text
//!  (an earlier request's end) --a server claims (CAS)--> TAKEN --server finishes--> DONE
//!              |                                           |   |
//!              +--client gives up (CAS)--> FREE            |   +--taker found dead (CAS)--> FREE
//!                                                          +--client gives up (CAS)--> ABANDONED --server finishes--> FREE
//! ```
//!
//! (A dead server's entry taken over by a new server marks the words it held as held by no
//! entry, `orphaned`, so that their clients see it gone.)
//!
//! A request is *pending* while the post word names it and the claim word still names an
//! earlier one; it is *over* (its slot its client's again) once the claim word names it as
//! FREE or DONE. The taker is the server's participant entry and its pid (22 bits), so a
//! client can tell whether *that* server still lives, and `seq` (31 bits) is why no CAS of a
//! server that read an older request of the slot can succeed on a newer one: a client posts
//! again only after its last request was claimed (it read that request's end) or withdrawn,
//! and either moved the claim word. Every transition of the claim word is one CAS; that is
//! why two parties never both free a slot, and never neither. A client
//! writes it only to give up (a timeout, a cancel, a dead taker): in a call, only servers do.
//!
//! Responses go through the slot's own ring of `response_depth` cells: the taker (one server)
//! writes cell `head % depth` and then `resp_head` (Release), the client reads up to it and
//! stores `resp_tail`. A cell's length word carries [`LAST`] on the stream's last response.
//! The server's end is a DONE word that carries the number of responses in place of the
//! taker ([`done`]), stored in the answer line right after the last response (`fin`) and
//! then CASed into the claim word: the last response and the end become visible together,
//! so a client that has read the last response may post again at once (its next request is
//! claimed once the claim word follows).
//!
//! # One line each way
//!
//! A slot head is four cache lines, each written by one side in a call: the client's
//! *request line* (the post word, the request's length and id, the ring's tail, and a small
//! request inline), the taker's *answer line* (`fin`, the DONE word, and a small last
//! response inline), the taker's *ring line* (the ring's head and the cells' lengths) and the
//! servers' *claim line* (the claim word). A call whose request fits [`INLINE_REQUEST`] bytes
//! and whose one response fits [`INLINE_RESPONSE`] moves one line each way: the server reads
//! the request with the post word and claims on a line the client does not read, writes the
//! answer line in one go, and the client, which polls it, finds the end and the response
//! together and posts its next request without looking at the claim word. The client looks
//! at the claim word itself only every so often (a dead taker, a hostile word, a `fin`
//! overwritten by a late store: [`look`]) and to give up.
//!
//! # Finding requests
//!
//! Each slot has a bit in a bitmap: set by its client the first time it posts there, and
//! kept while that client holds the lane (cleared when the lane is cleaned, the client gone).
//! A server scans the set bits and looks at those slots' post and claim words; it claims a
//! pending request by CAS. The bit is only where to look, the words decide: a ping-pong
//! client's bit is set once, so its server's poll reads the slot's request line directly (one
//! cache miss to see a request, not two), and no one writes the bitmap per request. A server
//! waiting long also scans every slot and sets the bit of a pending one without it, so a bit
//! lost to a hostile write delays a request, never strands it.

use crate::event::EventWord;
use crate::sync::{AtomicU64, Ordering};

/// Bytes of the service header: the request event and room to grow.
pub const HEADER_SIZE: usize = 256;
/// Bytes of a lane's head: the client's event words, then its counters.
pub const LANE_HEAD: usize = 128;
/// Bytes of a slot's head ([`SlotHead`]): the request line, the answer line, the ring line,
/// the claim line.
pub const SLOT_HEAD: usize = 256;
/// Offset of the claim word in a slot head.
pub const CLAIM_AT: usize = 192;
/// Largest request carried in the request line itself (longer ones use the request room).
pub const INLINE_REQUEST: usize = 32;
/// Largest response carried in the answer line itself: a request's only response, sent as
/// its last (longer ones, streams and loans use the cells).
pub const INLINE_RESPONSE: usize = 48;
/// Offset of the inline request in a slot head.
pub const INLINE_REQUEST_AT: usize = 32;
/// Offset of the inline response in a slot head (64-byte aligned, as the cells).
pub const INLINE_RESPONSE_AT: usize = 64;
/// The flag in `req_len` that says the request is inline.
pub const INLINE: u64 = 1 << 62;
/// Most response cells per slot.
pub const MAX_DEPTH: usize = 4;

/// Claim word: the request is over and nobody holds the slot (given up on, or its taker
/// gone); a zeroed slot's claim word, over "request 0".
pub const FREE: u64 = 0;
/// Post word: request `seq` is posted.
pub const PENDING: u64 = 1;
/// Claim word: a server claimed the request and is answering it.
pub const TAKEN: u64 = 2;
/// Claim word: the request's server has finished it; its slot is its client's again.
pub const DONE: u64 = 3;
/// Claim word: a claimed request its client gave up on; its server frees the slot when it
/// finishes.
pub const ABANDONED: u64 = 4;

/// The flag in a response cell's length word that marks the stream's last response.
pub const LAST: u64 = 1 << 63;
/// The bits of a request number a post or claim word keeps.
pub const SEQ_MASK: u64 = (1 << 31) - 1;
const PID_MASK: u64 = (1 << 22) - 1;

/// A post or claim word.
pub fn state(tag: u64, seq: u64) -> u64 {
    tag | (seq & SEQ_MASK) << 33
}

/// A claim word naming its taker (TAKEN, ABANDONED).
pub fn taken(tag: u64, seq: u64, entry: usize, pid: u32) -> u64 {
    state(tag, seq) | ((entry as u64) & 0x7f) << 4 | (pid as u64 & PID_MASK) << 11
}

/// The tag of a post or claim word.
pub fn tag(w: u64) -> u64 {
    w & 0xf
}

/// The request number of a post or claim word.
pub fn seq(w: u64) -> u64 {
    w >> 33
}

/// The bits of a DONE word that hold how many responses the request had.
pub const COUNT_MASK: u64 = (1 << 27) - 1;
/// The bit of a DONE word that says its one response is inline, in the answer line.
pub const INLINE_DONE: u64 = 1 << 31;
/// The bit of a DONE word that says the server failed the request.
const FAILED: u64 = 1 << 32;

/// The DONE word of request `seq`, which had `count` responses (modulo 2^27) and, if
/// `failed`, was failed by its server: the server's end, stored in `fin` and then CASed into
/// the claim word ([`finish`]); it publishes the last response and ends the request at once.
pub fn done(seq: u64, count: u64, failed: bool) -> u64 {
    state(DONE, seq) | (count & COUNT_MASK) << 4 | if failed { FAILED } else { 0 }
}

/// The DONE word of request `seq` answered with one inline response.
pub fn done_inline(seq: u64) -> u64 {
    done(seq, 1, false) | INLINE_DONE
}

/// The response count of a DONE word.
pub fn count(w: u64) -> u64 {
    (w >> 4) & COUNT_MASK
}

/// The taker's participant entry and pid (its low 22 bits) of a claim word.
pub fn taker(w: u64) -> (usize, u64) {
    (((w >> 4) & 0x7f) as usize, (w >> 11) & PID_MASK)
}

/// The entry no server has: a request marked held by it has lost its server.
pub const NO_ENTRY: u64 = 0x7f;

/// `w` with its taker's entry replaced by [`NO_ENTRY`] (its server died and its entry was
/// taken over).
pub fn orphaned(w: u64) -> u64 {
    (w & !(0x7f << 4)) | NO_ENTRY << 4
}

/// Whether `pid` is the pid a claim word's taker field holds.
pub fn same_pid(field: u64, pid: u32) -> bool {
    field == pid as u64 & PID_MASK
}

/// Whether a slot is its client's to post in: nothing posted yet (`post` is not PENDING), or
/// its latest request over (the claim word names it, FREE or DONE).
pub fn over(post: u64, claim: u64) -> bool {
    tag(post) != PENDING || (seq(claim) == seq(post) && matches!(tag(claim), FREE | DONE))
}

/// Whether a slot holds a request a server may claim: posted, and the claim word still at an
/// earlier request's end.
pub fn is_pending(post: u64, claim: u64) -> bool {
    tag(post) == PENDING && seq(claim) != seq(post) && matches!(tag(claim), FREE | DONE)
}

/// The head of a request slot, four cache lines each written by one side in a call (see
/// "One line each way" in the module docs): the request line, the answer line, the ring
/// line, the claim line.
#[derive(Debug)]
#[repr(C)]
pub struct SlotHead {
    /// The post word (see the module docs), written by the slot's client only.
    pub post: AtomicU64,
    /// The request's length, written by the client before it posts ([`INLINE`] when the
    /// request is in the request line).
    pub req_len: AtomicU64,
    /// The request's id as its client numbers it.
    pub req_id: AtomicU64,
    /// Responses the client has read.
    pub resp_tail: AtomicU64,
    /// The inline request's bytes ([`INLINE_REQUEST_AT`]), reached by pointer.
    _inline_request: [u64; INLINE_REQUEST / 8],
    /// The answer line: the inline response's bytes ([`INLINE_RESPONSE_AT`]), reached by
    /// pointer.
    _inline_response: [u64; INLINE_RESPONSE / 8],
    /// The DONE word of the slot's last finished request, stored by its taker right after
    /// the last response and before the claim word follows: the end the client polls.
    pub fin: AtomicU64,
    /// The length of the inline last response.
    pub inline_len: AtomicU64,
    /// The ring line: responses the server has written.
    pub resp_head: AtomicU64,
    /// Each cell's length, with [`LAST`] on the last response.
    pub resp_len: [AtomicU64; MAX_DEPTH],
    _pad: [u64; 3],
    /// The claim line: the claim word (see the module docs), written by servers (and by the
    /// client only to give up).
    pub claim: AtomicU64,
    _pad_claim: [u64; 7],
}

#[cfg(not(loom))]
const _: () = {
    assert!(std::mem::size_of::<SlotHead>() == SLOT_HEAD);
    assert!(std::mem::offset_of!(SlotHead, _inline_request) == INLINE_REQUEST_AT);
    assert!(std::mem::offset_of!(SlotHead, _inline_response) == INLINE_RESPONSE_AT);
    assert!(std::mem::offset_of!(SlotHead, fin) == 112);
    assert!(std::mem::offset_of!(SlotHead, resp_head) == 128);
    assert!(std::mem::offset_of!(SlotHead, claim) == CLAIM_AT);
};

impl SlotHead {
    /// Whether the slot holds a request a server may claim ([`is_pending`]).
    pub fn holds_pending(&self) -> bool {
        is_pending(self.post.load(Ordering::Acquire), self.claim.load(Ordering::Acquire))
    }

    /// Whether the slot is its client's to post in ([`over`]).
    pub fn is_over(&self) -> bool {
        over(self.post.load(Ordering::Acquire), self.claim.load(Ordering::Acquire))
    }
}

#[cfg(loom)]
impl SlotHead {
    /// A FREE slot head on the heap, for the loom models.
    pub fn new() -> SlotHead {
        let w = || AtomicU64::new(0);
        SlotHead {
            post: w(),
            req_len: w(),
            req_id: w(),
            resp_tail: w(),
            _inline_request: [0; INLINE_REQUEST / 8],
            _inline_response: [0; INLINE_RESPONSE / 8],
            fin: w(),
            inline_len: w(),
            resp_head: w(),
            resp_len: [w(), w(), w(), w()],
            _pad: [0; 3],
            claim: w(),
            _pad_claim: [0; 7],
        }
    }
}

/// A lane's head: the event its client sleeps on for responses, the one a server waiting
/// for room in a full ring sleeps on, and (on a line of their own) the lane's counters,
/// which its clients write (one at a time: plain loads and stores) and keep across clients.
#[repr(C)]
pub(crate) struct LaneHead {
    /// Notified on every response written to the lane and every request finished.
    pub(crate) responses: EventWord,
    /// Notified when the client reads from a ring that was full.
    pub(crate) room: EventWord,
    _pad: [u32; 14],
    /// The lane's counters.
    pub(crate) counts: LaneCounts,
}

/// What the clients of a lane have done, over the service's life (statistics: relaxed,
/// never part of the protocol).
#[repr(C)]
pub(crate) struct LaneCounts {
    /// Requests posted.
    pub(crate) requests: AtomicU64,
    /// Responses read (a stream's empty end included).
    pub(crate) responses: AtomicU64,
    /// Requests given up on: timed out or cancelled.
    pub(crate) given_up: AtomicU64,
    /// Requests whose server died holding them.
    pub(crate) server_gone: AtomicU64,
    /// Requests their server failed.
    pub(crate) failed: AtomicU64,
}

/// Offsets of [`LaneCounts`]' words in a lane head, for status (loads only).
pub(crate) const LANE_COUNTS: usize = 64;

impl LaneCounts {
    /// Adds one to `w` (only the lane's client writes it).
    pub(crate) fn bump(w: &AtomicU64) {
        w.store(w.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }
}

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<LaneHead>() <= LANE_HEAD);

/// The service header.
#[repr(C)]
pub(crate) struct Header {
    /// Notified on every request posted; servers sleep on it.
    pub(crate) requests: EventWord,
}

/// How often a client's transition tries a CAS on a word that keeps changing under it (an
/// honest peer changes it at most twice meanwhile; a hostile one may forever) before leaving
/// it for its next look.
pub const CAS_TRIES: usize = 64;

// The transitions of a slot, each the one place its step is taken: the client and the server
// call them, and the loom models (`tests/loom_service.rs`) run them on a heap slot. Payload
// bytes (the request's room, the response cells) are written before the step that publishes
// them (Release) and read after the step that sees it (Acquire).

/// Client: posts request `id` of `len` bytes, already written into the slot's room (or,
/// `inline`, at [`INLINE_REQUEST_AT`]), in a slot of its own lane that is [`over`]. `id`'s
/// number differs from the slot's previous request's ([`fresh_id`]).
pub fn post(head: &SlotHead, id: u64, len: usize, inline: bool) {
    head.req_len.store(len as u64 | if inline { INLINE } else { 0 }, Ordering::Relaxed);
    head.req_id.store(id, Ordering::Relaxed);
    head.resp_head.store(0, Ordering::Relaxed);
    head.resp_tail.store(0, Ordering::Relaxed);
    head.post.store(state(PENDING, id), Ordering::Release);
}

/// Client: `id`, or the first number after it whose request number is neither 0 (a zeroed
/// claim word's) nor the slot's previous request's (a claim word still naming that one would
/// make the new request look over before it began).
pub fn fresh_id(head: &SlotHead, id: u64) -> u64 {
    let before = seq(head.post.load(Ordering::Relaxed));
    let mut id = id;
    while id & SEQ_MASK == 0 || id & SEQ_MASK == before {
        id = id.wrapping_add(1);
    }
    id
}

/// A request a server claimed: its number, its length and its id as read from the slot
/// (untrusted: the caller checks the length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claimed {
    /// The request's number, as the post word holds it.
    pub seq: u64,
    /// The request's length, as its client wrote it.
    pub len: u64,
    /// The request's id.
    pub id: u64,
    /// The request is in the request line (else in the slot's room).
    pub inline: bool,
}

/// Server: claims the slot for the server at participant entry `entry` (pid `pid`) if it
/// holds a pending request. One CAS on the claim word: of several servers, one wins, and the
/// request line its client wrote is only read.
pub fn claim(head: &SlotHead, entry: usize, pid: u32) -> Option<Claimed> {
    // The claim word first, then the post word (Acquire: not read before it): the CAS below
    // succeeds only if the claim word has not moved since, and while it has not, its client
    // has posted nothing after the request read here (it posts again only once the claim
    // word names its last request). Read the other way round, a server slow between the two
    // could pair an old post word with a newer request's end, and claim a number that is
    // over.
    let k = head.claim.load(Ordering::Acquire);
    let p = head.post.load(Ordering::Acquire);
    if !is_pending(p, k) {
        return None;
    }
    let seq = seq(p);
    head.claim.compare_exchange(k, taken(TAKEN, seq, entry, pid), Ordering::AcqRel, Ordering::Relaxed).ok()?;
    let len = head.req_len.load(Ordering::Relaxed);
    Some(Claimed { seq, len: len & !INLINE, id: head.req_id.load(Ordering::Relaxed), inline: len & INLINE != 0 })
}

/// The cell of response number `n` in a ring of `depth` cells: `n % depth`, without the
/// division for a request's first `depth` responses (a call's one response among them).
pub fn cell_of(n: u64, depth: u64) -> usize {
    (if n < depth { n } else { n % depth }) as usize
}

/// What a server found looking for room for its next response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    /// Cell `.0` is free: write the response there, then [`publish`] it.
    Cell(usize),
    /// Every cell holds a response the client has not read.
    Full,
    /// The slot no longer holds this server's request: its client gave up on it.
    ClientGone,
}

/// Server: room for the next response of the request it holds as `mine` (its TAKEN word),
/// having written `written` responses, in a ring of `depth` cells.
pub fn room(head: &SlotHead, mine: u64, written: u64, depth: u64) -> Room {
    if head.claim.load(Ordering::Acquire) != mine {
        return Room::ClientGone;
    }
    let read = head.resp_tail.load(Ordering::Acquire);
    if written.wrapping_sub(read) < depth {
        Room::Cell(cell_of(written, depth))
    } else {
        Room::Full
    }
}

/// Server: makes the response in cell `cell`, `len` bytes, visible as response number
/// `written` (counting it). The last one is made visible by [`finish`], with the end.
pub fn publish(head: &SlotHead, cell: usize, len: usize, last: bool, written: u64) {
    head.resp_len[cell].store(len as u64 | if last { LAST } else { 0 }, Ordering::Relaxed);
    if !last {
        head.resp_head.store(written, Ordering::Release);
    }
}

/// Server: finishes request `seq`, which it holds as entry `entry` (pid `pid`), after
/// `written` responses (`inline`: its one response is the inline one): [`announce`] then
/// [`hand_back`].
pub fn finish(head: &SlotHead, seq: u64, entry: usize, pid: u32, written: u64, failed: bool, inline: bool) {
    let end = if inline { done_inline(seq) } else { done(seq, written, failed) };
    announce(head, end);
    hand_back(head, seq, entry, pid, end);
}

/// Server, a request's end (its DONE word) for the client polling the answer line: stored
/// right after the responses, so that the line the client reads is written in one go (a
/// locked instruction between the response and the end would let the polling client take
/// the line back in between, one more transfer per call).
pub fn announce(head: &SlotHead, end: u64) {
    head.fin.store(end, Ordering::Release);
}

/// Server, after [`announce`]: the claim word of request `seq` to its end, so that its
/// client's next request in the slot can be claimed; FREE if the client gave up on it
/// (ABANDONED). A word that names another request or taker is left alone. A client that
/// read the end may post again before this: its request is pending only once this lands,
/// and a taker that dies between the two is found dead and its word taken back
/// ([`take_back`]).
pub fn hand_back(head: &SlotHead, seq: u64, entry: usize, pid: u32, end: u64) {
    let mine = taken(TAKEN, seq, entry, pid);
    match head.claim.compare_exchange(mine, end, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {}
        Err(now) if now == taken(ABANDONED, seq, entry, pid) => {
            let _ = head.claim.compare_exchange(now, state(FREE, seq), Ordering::AcqRel, Ordering::Relaxed);
        }
        Err(_) => {}
    }
}

/// Server: the inline last response, `len` bytes already written at [`INLINE_RESPONSE_AT`];
/// [`finish`] with `inline` makes it visible.
pub fn publish_inline(head: &SlotHead, len: usize) {
    head.inline_len.store(len as u64, Ordering::Relaxed);
}

/// What a client's giving up on a request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUp {
    /// No server held it (or it was over): the slot is free again.
    Freed,
    /// A server holds it: marked ABANDONED, for that server to free when it finishes.
    Abandoned,
    /// The word kept changing, or held nothing to give up; left for the next look.
    Left,
}

/// Client: gives up on request `seq`, in its slot.
pub fn give_up(head: &SlotHead, seq: u64) -> GiveUp {
    let seq = seq & SEQ_MASK;
    for _ in 0..CAS_TRIES {
        let k = head.claim.load(Ordering::Acquire);
        let (to, outcome) = match (self::seq(k) == seq, tag(k)) {
            (true, TAKEN) => ((k & !0xf) | ABANDONED, GiveUp::Abandoned),
            (true, FREE | DONE) => return GiveUp::Freed,
            // Not claimed yet: withdrawn, so that no server claims it after this. A word
            // still TAKEN by the previous request (its end announced, its hand-back not
            // landed) is withdrawn over too: that hand-back then finds the word moved.
            (false, FREE | DONE | TAKEN) => (state(FREE, seq), GiveUp::Freed),
            _ => return GiveUp::Left,
        };
        if head.claim.compare_exchange(k, to, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            return outcome;
        }
    }
    GiveUp::Left
}

/// Client: frees its slot, whose latest request is `seq` (`None`: the one its post word
/// names, for a slot inherited from the lane's previous client), if that request is over on
/// the server's side too; one no server claimed is withdrawn. A slot a server holds (TAKEN,
/// ABANDONED) is freed only if `taker_gone` says that server died. Returns whether the slot
/// is free.
pub fn settle(head: &SlotHead, seq: Option<u64>, taker_gone: impl FnOnce(u64) -> bool) -> bool {
    let p = head.post.load(Ordering::Relaxed);
    if seq.is_none() && tag(p) != PENDING {
        return true;
    }
    let seq = seq.map_or(self::seq(p), |s| s & SEQ_MASK);
    let k = head.claim.load(Ordering::Acquire);
    let free = |k: u64| head.claim.compare_exchange(k, state(FREE, seq), Ordering::AcqRel, Ordering::Relaxed).is_ok();
    match (self::seq(k) == seq, tag(k)) {
        (true, FREE | DONE) => true,
        (true, TAKEN | ABANDONED) => taker_gone(k) && free(k),
        // Never claimed (withdrawn now), or a tag no slot can hold (a hostile write): the
        // lane is ours, free it (by CAS, so a word that moved meanwhile is left for the next
        // look).
        _ => free(k),
    }
}

/// Client: hands back the cell of the response it read, having read `read` responses
/// before it. Returns whether a server may be waiting for room (the ring was full before
/// this read): the caller then wakes it.
pub fn consume(head: &SlotHead, read: u64, last: bool, depth: u64) -> bool {
    if last {
        // No response comes after the last: nobody reads the tail again, nobody waits for
        // room (and the request line is not written twice per call).
        return false;
    }
    head.resp_tail.store(read.wrapping_add(1), Ordering::Release);
    // Orders our store of the tail before our load of the head, as the server's store of
    // the head comes before its load of the tail: one of us sees the other.
    crate::sync::fence(Ordering::SeqCst);
    head.resp_head.load(Ordering::Acquire).wrapping_sub(read) >= depth
}

/// Reclaimer: frees what a client that left or died held in a slot: a request no server
/// took is withdrawn, one a server holds abandoned (its server frees the slot when it
/// finishes), a finished one left as it is (over). Idempotent.
pub fn clean(head: &SlotHead) {
    for _ in 0..CAS_TRIES {
        let p = head.post.load(Ordering::Acquire);
        if tag(p) != PENDING {
            return;
        }
        let k = head.claim.load(Ordering::Acquire);
        let to = match (seq(k) == seq(p), tag(k)) {
            (true, FREE | DONE | ABANDONED) => return,
            (true, TAKEN) => (k & !0xf) | ABANDONED,
            // Not claimed (withdrawn), or a word no slot can hold (a hostile write).
            _ => state(FREE, seq(p)),
        };
        if head.claim.compare_exchange(k, to, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            return;
        }
    }
}

/// Client: takes back the claim word `k`, whose taker died holding its request (this
/// client's request in flight, or the slot's previous one, whose end it announced before it
/// died): whether the claim word still held `k` (then that request is over, FREE).
pub fn take_back(head: &SlotHead, k: u64) -> bool {
    head.claim.compare_exchange(k, state(FREE, seq(k)), Ordering::AcqRel, Ordering::Relaxed).is_ok()
}

/// What a client's look at one of its in-flight slots found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// Nothing yet (pending, or taken with nothing written).
    Nothing,
    /// A response is in cell `cell`: `len` bytes, `last` if it ends the stream.
    Response {
        /// The cell.
        cell: usize,
        /// The response's length.
        len: usize,
        /// Whether it is the stream's last.
        last: bool,
    },
    /// The server finished (or, `failed`, failed) the request and every response is read.
    Finished {
        /// Whether the server failed the request.
        failed: bool,
    },
    /// The word holds what this client cannot have left there.
    Corrupt(&'static str),
}

/// The cell a [`Look::Response`] names for the inline response.
pub const INLINE_CELL: usize = usize::MAX;

/// Looks at the slot of a request numbered `seq` whose client has read `tail` responses: at
/// the answer line (`fin`) and the ring line, and, with `check_state`, at the post and claim
/// words first (the claim word is returned then, and with every `Corrupt`; else 0).
/// `fin_before` is what `fin` held when the request was posted: a `fin` still holding it is
/// an earlier request's end, even if its number matches (then the end is found in the claim
/// word, when checked). A last response is only ever shown with the request's end, so a
/// client that read it may post in the slot again without looking at the claim word.
#[allow(clippy::too_many_arguments)]
pub fn look(
    head: &SlotHead,
    seq: u64,
    tail: u64,
    fin_before: u64,
    depth: usize,
    max_len: usize,
    check_state: bool,
) -> (u64, Look) {
    let seq = seq & SEQ_MASK;
    let claim_word = || head.claim.load(Ordering::Acquire);
    let w = if check_state { claim_word() } else { 0 };
    let corrupt = |what| (if check_state { w } else { claim_word() }, Look::Corrupt(what));
    if check_state {
        if head.post.load(Ordering::Relaxed) != state(PENDING, seq) {
            return corrupt("a request slot holds another request's number");
        }
        let ok = match (self::seq(w) == seq, tag(w)) {
            (true, t) => matches!(t, TAKEN | DONE),
            // Another request's word: an earlier end, or the previous request's taker between
            // its end (which this client read before posting: `fin_before`) and its hand-back.
            (false, FREE | DONE) => true,
            (false, TAKEN) => tag(fin_before) == DONE && self::seq(fin_before) == self::seq(w),
            _ => false,
        };
        if !ok {
            return corrupt("a request slot is in a state its client cannot have left it in");
        }
    }
    // The claim word itself when it was read and is this request's end (`fin` is stored
    // first, so only a hostile write to `fin` leaves the end there alone).
    let f = if check_state && tag(w) == DONE && self::seq(w) == seq {
        w
    } else {
        match head.fin.load(Ordering::Acquire) {
            f if f == fin_before => 0,
            // `fin` moved, but to another request's end (a write that is not this request's
            // taker's): the claim word says where this one is.
            f if tag(f) != DONE || self::seq(f) != seq => match claim_word() {
                w if tag(w) == DONE && self::seq(w) == seq => w,
                _ => 0,
            },
            f => f,
        }
    };
    let finished = tag(f) == DONE && self::seq(f) == seq;
    let written = if finished { count(f) } else { head.resp_head.load(Ordering::Acquire) };
    let unread = written.wrapping_sub(tail) & COUNT_MASK;
    if unread > depth as u64 {
        return corrupt("a response ring claims more responses than it has cells");
    }
    if unread == 0 {
        return (w, if finished { Look::Finished { failed: f & FAILED != 0 } } else { Look::Nothing });
    }
    if finished && f & INLINE_DONE != 0 {
        let len = head.inline_len.load(Ordering::Relaxed);
        if len > INLINE_RESPONSE.min(max_len) as u64 || tail != 0 {
            return corrupt("an inline response claims more bytes than the answer line holds");
        }
        return (w, Look::Response { cell: INLINE_CELL, len: len as usize, last: true });
    }
    let cell = cell_of(tail, depth as u64);
    let word = head.resp_len[cell].load(Ordering::Relaxed);
    let len = word & !LAST;
    if len > max_len as u64 {
        return corrupt("a response claims more bytes than max_response_len");
    }
    let last = word & LAST != 0;
    if last && !finished {
        return corrupt("a response is marked last before its request ended");
    }
    (w, Look::Response { cell, len: len as usize, last })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_word_keeps_its_fields_apart() {
        let w = taken(TAKEN, (1 << 40) + 77, 127, 4_194_303);
        assert_eq!(tag(w), TAKEN);
        assert_eq!(seq(w), ((1u64 << 40) + 77) & SEQ_MASK);
        assert_eq!(taker(w), (127, 4_194_303));
        assert!(same_pid(taker(w).1, 4_194_303));
        assert_eq!(state(FREE, 0), 0, "a zeroed slot is free");
        let o = orphaned(w);
        assert_eq!((tag(o), seq(o), taker(o)), (TAKEN, seq(w), (NO_ENTRY as usize, 4_194_303)));
        let d = done(77, COUNT_MASK + 5, true);
        assert_eq!((tag(d), seq(d), count(d), d & FAILED != 0), (DONE, 77, 4, true));
        assert_eq!(done(77, 3, false) & FAILED, 0);
    }
}
