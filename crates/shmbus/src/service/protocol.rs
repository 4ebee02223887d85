//! The service's shared words: the header, the pending-request bitmap, the lanes and their
//! request slots, and the state machine of a slot.
//!
//! # A request slot
//!
//! Each client owns one *lane* of `max_in_flight` request slots. A slot's state word runs
//!
//! ```text
//! FREE --client posts--> PENDING --a server claims (CAS)--> TAKEN --server finishes--> DONE --client reads the end--> FREE
//!                           |                                  |
//!                           +--client cancels (CAS)--> FREE    +--client gives up (CAS)--> ABANDONED --server finishes--> FREE
//! ```
//!
//! and packs `tag | taker entry << 4 | taker pid << 11 | seq << 33`: the taker is the server's
//! participant entry and its pid (22 bits), so a client can tell whether *that* server still
//! lives, and `seq` is the request's number (31 bits), so no CAS of a server that read an
//! older request of the slot can succeed on a newer one. Every transition is one CAS on this
//! word; that is why two parties never both free a slot, and never neither.
//!
//! Responses go through the slot's own ring of `response_depth` cells: the taker (one server)
//! writes cell `head % depth` and then `resp_head` (Release), the client reads up to it and
//! stores `resp_tail`. A cell's length word carries [`LAST`] on the stream's last response.
//! The server's last step is one CAS from TAKEN to a DONE word that carries the number of
//! responses in place of the taker ([`done`]): the last response and the end become visible
//! together, so a client that has read the last response can free the slot at once.
//!
//! # Finding requests
//!
//! Each slot has a bit in a bitmap: set by its client the first time it posts there, and
//! kept while that client holds the lane (cleared when the lane is cleaned, the client gone).
//! A server scans the set bits and looks at those slots' state words; it claims a PENDING
//! one by CAS. The bit is only where to look, the state word decides: a ping-pong client's
//! bit is set once, so its server's poll reads the slot's state line directly (one cache
//! miss to see a request, not two), and no one writes the bitmap per request. A server
//! waiting long also scans every slot and sets the bit of a PENDING one without it, so a bit
//! lost to a hostile write delays a request, never strands it.

use crate::event::EventWord;
use crate::sync::{AtomicU64, Ordering};

/// Bytes of the service header: the request event and room to grow.
pub(crate) const HEADER_SIZE: usize = 256;
/// Bytes of a lane's head: the client's event words, then its counters.
pub(crate) const LANE_HEAD: usize = 128;
/// Bytes of a slot's head ([`SlotHead`]).
pub(crate) const SLOT_HEAD: usize = 128;
/// Most response cells per slot.
pub(crate) const MAX_DEPTH: usize = 4;

/// A slot no request uses: its client may post one.
pub(crate) const FREE: u64 = 0;
/// A posted request no server has claimed yet.
pub(crate) const PENDING: u64 = 1;
/// A request a server claimed and is answering.
pub(crate) const TAKEN: u64 = 2;
/// A request its server has finished; its client frees the slot after reading the end.
pub(crate) const DONE: u64 = 3;
/// A claimed request its client gave up on; its server frees the slot when it finishes.
pub(crate) const ABANDONED: u64 = 4;

/// The flag in a response cell's length word that marks the stream's last response.
pub(crate) const LAST: u64 = 1 << 63;
/// The bits of a request number a state word keeps.
pub(crate) const SEQ_MASK: u64 = (1 << 31) - 1;
const PID_MASK: u64 = (1 << 22) - 1;

/// A state word.
pub(crate) fn state(tag: u64, seq: u64) -> u64 {
    tag | (seq & SEQ_MASK) << 33
}

/// A state word naming its taker (TAKEN, DONE, ABANDONED).
pub(crate) fn taken(tag: u64, seq: u64, entry: usize, pid: u32) -> u64 {
    state(tag, seq) | ((entry as u64) & 0x7f) << 4 | (pid as u64 & PID_MASK) << 11
}

/// The tag of a state word.
pub(crate) fn tag(w: u64) -> u64 {
    w & 0xf
}

/// The request number of a state word.
pub(crate) fn seq(w: u64) -> u64 {
    w >> 33
}

/// The bits of a DONE word that hold how many responses the request had.
pub(crate) const COUNT_MASK: u64 = (1 << 28) - 1;
/// The bit of a DONE word that says the server failed the request.
const FAILED: u64 = 1 << 32;

/// The DONE word of request `seq`, which had `count` responses (modulo 2^28) and, if
/// `failed`, was failed by its server: the server's last step, one CAS that publishes its
/// last response and ends the request at once.
pub(crate) fn done(seq: u64, count: u64, failed: bool) -> u64 {
    state(DONE, seq) | (count & COUNT_MASK) << 4 | if failed { FAILED } else { 0 }
}

/// The response count of a DONE word.
pub(crate) fn count(w: u64) -> u64 {
    (w >> 4) & COUNT_MASK
}

/// The taker's participant entry and pid (its low 22 bits) of a state word.
pub(crate) fn taker(w: u64) -> (usize, u64) {
    (((w >> 4) & 0x7f) as usize, (w >> 11) & PID_MASK)
}

/// The entry no server has: a request marked held by it has lost its server.
pub(crate) const NO_ENTRY: u64 = 0x7f;

/// `w` with its taker's entry replaced by [`NO_ENTRY`] (its server died and its entry was
/// taken over).
pub(crate) fn orphaned(w: u64) -> u64 {
    (w & !(0x7f << 4)) | NO_ENTRY << 4
}

/// Whether `pid` is the pid a state word's taker field holds.
pub(crate) fn same_pid(field: u64, pid: u32) -> bool {
    field == pid as u64 & PID_MASK
}

/// The head of a request slot: its state, its request and its response ring. The state
/// and the cells' lengths share the first cache line: a client that finds its request
/// answered has the response's length with the same miss.
#[repr(C)]
pub(crate) struct SlotHead {
    /// The state word (see the module docs).
    pub(crate) state: AtomicU64,
    /// The request's length, written by the client before it posts.
    pub(crate) req_len: AtomicU64,
    /// The request's id as its client numbers it.
    pub(crate) req_id: AtomicU64,
    /// Responses the client has read.
    pub(crate) resp_tail: AtomicU64,
    /// Each cell's length, with [`LAST`] on the last response.
    pub(crate) resp_len: [AtomicU64; MAX_DEPTH],
    /// Responses the server has written, on a line of its own.
    pub(crate) resp_head: AtomicU64,
    _pad: [u64; 7],
}

const _: () = assert!(std::mem::size_of::<SlotHead>() == SLOT_HEAD);

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

const _: () = assert!(std::mem::size_of::<LaneHead>() <= LANE_HEAD);

/// The service header.
#[repr(C)]
pub(crate) struct Header {
    /// Notified on every request posted; servers sleep on it.
    pub(crate) requests: EventWord,
}

/// What a client's look at one of its in-flight slots found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Look {
    /// Nothing yet (pending, or taken with nothing written).
    Nothing,
    /// A response is in cell `cell`: `len` bytes, `last` if it ends the stream.
    Response { cell: usize, len: usize, last: bool },
    /// The server finished (or, `failed`, failed) the request and every response is read.
    Finished { failed: bool },
    /// The word holds what this client cannot have left there.
    Corrupt(&'static str),
}

/// Looks at the slot of a request numbered `seq` whose client has read `tail` responses.
pub(crate) fn look(head: &SlotHead, seq: u64, tail: u64, depth: usize, max_len: usize) -> (u64, Look) {
    let w = head.state.load(Ordering::Acquire);
    if self::seq(w) != seq & SEQ_MASK {
        return (w, Look::Corrupt("a request slot holds another request's number"));
    }
    match tag(w) {
        PENDING => (w, Look::Nothing),
        TAKEN | DONE => {
            let written = if tag(w) == DONE { count(w) } else { head.resp_head.load(Ordering::Acquire) };
            let unread = written.wrapping_sub(tail) & COUNT_MASK;
            if unread > depth as u64 {
                return (w, Look::Corrupt("a response ring claims more responses than it has cells"));
            }
            if unread == 0 {
                return (w, if tag(w) == DONE { Look::Finished { failed: w & FAILED != 0 } } else { Look::Nothing });
            }
            let cell = (tail % depth as u64) as usize;
            let word = head.resp_len[cell].load(Ordering::Relaxed);
            let len = word & !LAST;
            if len > max_len as u64 {
                return (w, Look::Corrupt("a response claims more bytes than max_response_len"));
            }
            (w, Look::Response { cell, len: len as usize, last: word & LAST != 0 })
        }
        _ => (w, Look::Corrupt("a request slot is in a state its client cannot have left it in")),
    }
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
