//! Loom models of the service's slot protocol: the production transitions of a request
//! slot's post and claim words (`service::protocol`: `post`, `claim`, `room`, `publish`,
//! `finish`, `look`, `consume`, `settle`, `give_up`, `take_back`) on a heap slot, with the
//! request and the response cells in loom's checked cells, so that a payload read that is not ordered after its write
//! is a failure.
//!
//! Run with:
//! `RUSTFLAGS="--cfg loom" cargo test -p shmbus --test loom_service --release`
//!
//! What they check: of two competing servers exactly one claims a request and its client
//! reads the response that server wrote; a client giving up at any point against a server
//! answering leaves the slot over (its client's again), with nobody writing a cell the other
//! reads; a stream
//! through a one-cell ring hands each response over whole and in order; a server that dies
//! holding a request leaves a slot its client takes back; a client posting again as soon as
//! it has read an end is claimed once the claim word follows; a taker dead between its end
//! and its hand-back holds nothing up.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::Ordering;
use loom::sync::Arc;
use loom::thread;
use shmbus::service::protocol::{
    announce, claim, consume, done_inline, finish, give_up, hand_back, is_pending, look, post, publish, publish_inline,
    room, settle, take_back, taken, GiveUp, Look, Room, SlotHead, INLINE_CELL, TAKEN,
};

/// A request slot on the heap: its head, its request's room and its response cells.
struct Slot {
    head: SlotHead,
    request: UnsafeCell<u64>,
    cells: [UnsafeCell<u64>; 2],
}

impl Slot {
    fn new() -> Arc<Slot> {
        Arc::new(Slot {
            head: SlotHead::new(),
            request: UnsafeCell::new(0),
            cells: [UnsafeCell::new(0), UnsafeCell::new(0)],
        })
    }

    fn write_request(&self, v: u64) {
        // SAFETY: loom's cell checks the access; the slot is the client's while FREE.
        self.request.with_mut(|p| unsafe { *p = v });
    }

    fn read_request(&self) -> u64 {
        // SAFETY: as above; the server reads it after its claim.
        self.request.with(|p| unsafe { *p })
    }

    fn write_cell(&self, cell: usize, v: u64) {
        // SAFETY: loom's cell checks the access; `room` gave the cell to the server.
        self.cells[cell].with_mut(|p| unsafe { *p = v });
    }

    fn read_cell(&self, cell: usize) -> u64 {
        // SAFETY: as above; `look` gave the cell to the client.
        self.cells[cell].with(|p| unsafe { *p })
    }
}

/// Runs `f` under loom with at most three preemptions per execution (the bound the other
/// models use; `LOOM_MAX_PREEMPTIONS` overrides it).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = b.preemption_bound.or(Some(3));
    b.check(f);
}

const ID: u64 = 7;
const DEPTH: u64 = 2;

/// A server (entry `entry`, pid `pid`) that tries once to claim the request and, if it
/// does, answers it with one last response, its double, inline (in the answer line, here
/// the model's cell 0) as a call's small answer goes; returns whether it claimed.
fn serve_once(slot: &Slot, entry: usize, pid: u32) -> bool {
    let Some(c) = claim(&slot.head, entry, pid) else { return false };
    let answer = slot.read_request() * 2;
    let mine = taken(TAKEN, c.seq, entry, pid);
    let inline = room(&slot.head, mine, 0, DEPTH) == Room::Cell(0);
    if inline {
        slot.write_cell(0, answer);
        publish_inline(&slot.head, 8);
    }
    finish(&slot.head, c.seq, entry, pid, 1, false, inline);
    true
}

/// `f` on a thread of its own, with the slot.
fn spawn_on<T: Send + 'static>(slot: &Arc<Slot>, f: impl FnOnce(&Slot) -> T + Send + 'static) -> thread::JoinHandle<T> {
    let slot = slot.clone();
    thread::spawn(move || f(&slot))
}

/// A server thread (entry 0, pid 100) that claims the posted request and writes its inline
/// answer (the request plus one), then takes only the end steps `end` takes (a taker that
/// dies partway, or whose `fin` is lost).
fn answer_partly(slot: &Arc<Slot>, end: fn(&SlotHead, u64)) -> thread::JoinHandle<()> {
    spawn_on(slot, move |slot| {
        let c = claim(&slot.head, 0, 100).expect("posted");
        slot.write_cell(0, slot.read_request() + 1);
        publish_inline(&slot.head, 8);
        end(&slot.head, c.seq);
    })
}

/// The client's request, written into the slot's room and posted.
fn send(slot: &Slot, v: u64) {
    send_as(slot, ID, v);
}

/// The client's request `id`, written into the slot's room and posted.
fn send_as(slot: &Slot, id: u64, v: u64) {
    slot.write_request(v);
    post(&slot.head, id, 8, false);
}

/// The client waits for its one response, polling the answer line as it does (the claim
/// word only every so often: here every third look), and reads it; returns it.
fn await_response(slot: &Slot) -> u64 {
    await_response_to(slot, ID, 0)
}

/// [`await_response`] for request `id`, posted when `fin` held `fin_before`.
fn await_response_to(slot: &Slot, id: u64, fin_before: u64) -> u64 {
    for n in 0.. {
        match look(&slot.head, id, 0, fin_before, DEPTH as usize, 8, n % 3 == 2).1 {
            Look::Response { cell, len, last } => {
                assert_eq!((cell, len, last), (INLINE_CELL, 8, true));
                let v = slot.read_cell(0);
                assert!(!consume(&slot.head, 0, last, DEPTH), "no server waits after the last response");
                return v;
            }
            Look::Nothing => thread::yield_now(),
            other => panic!("a call's slot showed {other:?}"),
        }
    }
    unreachable!()
}

#[test]
fn one_of_two_competing_servers_answers_and_its_answer_arrives_whole() {
    model(|| {
        let slot = Slot::new();
        // Posted before the servers look: the race is theirs (one CAS wins, the other finds
        // it taken) and the response's way back. The request's way in is the stream's model.
        send(&slot, 21);
        let servers: Vec<_> = [(0usize, 100u32), (1, 200)]
            .into_iter()
            .map(|(entry, pid)| spawn_on(&slot, move |slot| serve_once(slot, entry, pid)))
            .collect();
        assert_eq!(await_response(&slot), 42);
        let claimed = servers.into_iter().map(|h| h.join().unwrap()).filter(|&c| c).count();
        assert_eq!(claimed, 1, "exactly one server claims a request");
        assert!(slot.head.is_over(), "the slot is its client's again");
        assert_eq!(slot.head.claim.load(Ordering::Acquire) & 0xf, 3, "DONE");
    });
}

#[test]
fn a_client_giving_up_at_any_point_leaves_the_slot_free() {
    model(|| {
        let slot = Slot::new();
        send(&slot, 5);
        let server = spawn_on(&slot, move |slot| serve_once(slot, 0, 100));
        // The client gives up whenever it does: before the claim (withdrawn), while the
        // server holds it (abandoned: the server frees it), or after the end (freed).
        let outcome = give_up(&slot.head, ID);
        let claimed = server.join().unwrap();
        let w = slot.head.claim.load(Ordering::Acquire);
        match outcome {
            GiveUp::Freed | GiveUp::Abandoned => assert!(slot.head.is_over(), "slot left as {w:#x}"),
            GiveUp::Left => panic!("nothing to give up on a posted request"),
        }
        assert!(!claimed || outcome != GiveUp::Freed || w & 0xf == 3, "a claimed request freed before its end");
        if outcome == GiveUp::Abandoned {
            assert!(claimed, "only a claimed request is abandoned");
        }
    });
}

#[test]
fn a_stream_through_one_cell_is_handed_over_whole_and_in_order() {
    const ONE: u64 = 1;
    model(|| {
        let slot = Slot::new();
        let server = spawn_on(&slot, move |slot| {
            let c = loop {
                if let Some(c) = claim(&slot.head, 0, 100) {
                    break c;
                }
                thread::yield_now();
            };
            assert_eq!(slot.read_request(), 3);
            let mine = taken(TAKEN, c.seq, 0, 100);
            // Two responses through a ring of one cell: the second waits for room.
            for (written, last) in [(0u64, false), (1, true)] {
                let cell = loop {
                    match room(&slot.head, mine, written, ONE) {
                        Room::Cell(cell) => break cell,
                        Room::Full => thread::yield_now(),
                        Room::ClientGone => panic!("the client reads on"),
                    }
                };
                slot.write_cell(cell, 10 + written);
                publish(&slot.head, cell, 8, last, written + 1);
            }
            finish(&slot.head, c.seq, 0, 100, 2, false, false);
        });
        send(&slot, 3);
        let mut got = Vec::new();
        let mut tail = 0;
        while got.len() < 2 {
            match look(&slot.head, ID, tail, 0, ONE as usize, 8, false).1 {
                Look::Response { cell, last, .. } => {
                    got.push(slot.read_cell(cell));
                    consume(&slot.head, tail, last, ONE);
                    tail += 1;
                }
                Look::Nothing => thread::yield_now(),
                other => panic!("a stream showed {other:?}"),
            }
        }
        assert_eq!(got, vec![10, 11]);
        server.join().unwrap();
        assert!(settle(&slot.head, Some(ID), |_| false));
    });
}

#[test]
fn a_server_dead_holding_a_request_leaves_a_slot_its_client_takes_back() {
    model(|| {
        let slot = Slot::new();
        post(&slot.head, ID, 8, true);
        // The server claims and dies (its thread ends: the kernel orders a dead process's
        // stores before anyone sees it dead) while the client polls.
        let server = spawn_on(&slot, move |slot| claim(&slot.head, 0, 100).is_some());
        let first = look(&slot.head, ID, 0, 0, DEPTH as usize, 8, true).1;
        assert_eq!(first, Look::Nothing);
        assert!(server.join().unwrap(), "the only server claims");
        // Dead: its client frees the slot (ServerGone), and a new request posts.
        assert!(!settle(&slot.head, Some(ID), |_| false), "a live taker's slot is not taken back");
        let k = slot.head.claim.load(Ordering::Acquire);
        assert!(take_back(&slot.head, k), "a dead taker's word stays as it left it");
        post(&slot.head, ID + 1, 8, true);
        let (p, k) = (slot.head.post.load(Ordering::Acquire), slot.head.claim.load(Ordering::Acquire));
        assert!(is_pending(p, k), "the next request is there to claim");
    });
}

#[test]
fn the_client_posting_again_as_the_taker_hands_back_is_claimed_once_after_it() {
    model(|| {
        let slot = Slot::new();
        send(&slot, 3);
        // One server answers the first request, then the second, which its client posts as
        // soon as it has read the first answer: possibly before the claim word followed.
        let server = spawn_on(&slot, move |slot| {
            assert!(serve_once(&slot, 0, 100), "the first request is there");
            while !serve_once(&slot, 0, 100) {
                thread::yield_now();
            }
        });
        assert_eq!(await_response(&slot), 6);
        let fin_before = slot.head.fin.load(Ordering::Relaxed);
        send_as(&slot, ID + 1, 20);
        assert_eq!(await_response_to(&slot, ID + 1, fin_before), 40);
        server.join().unwrap();
        assert!(slot.head.is_over(), "both ended");
    });
}

#[test]
fn a_request_given_up_as_soon_as_it_is_posted_is_never_left_behind() {
    model(|| {
        let slot = Slot::new();
        send(&slot, 3);
        // The server answers the first request, then looks a few times for the second.
        let server = spawn_on(&slot, move |slot| {
            assert!(serve_once(&slot, 0, 100));
            for _ in 0..2 {
                if serve_once(&slot, 0, 100) {
                    return;
                }
                thread::yield_now();
            }
        });
        assert_eq!(await_response(&slot), 6);
        // Posted while the claim word may still hold the first request's taker, and given up
        // at once: withdrawn, or abandoned to the server that claimed it; never left.
        post(&slot.head, ID + 1, 8, true);
        let outcome = give_up(&slot.head, ID + 1);
        assert_ne!(outcome, GiveUp::Left);
        server.join().unwrap();
        assert!(slot.head.is_over(), "the slot is its client's again");
    });
}

#[test]
fn a_server_that_read_an_earlier_request_never_claims_a_later_one() {
    model(|| {
        let slot = Slot::new();
        post(&slot.head, ID, 8, true);
        // A second server looks once, at any moment: it may read the words while the first
        // request is pending, or while another server answers it, or after that and the
        // client's next request.
        let late = spawn_on(&slot, move |slot| {
            let c = claim(&slot.head, 1, 200)?;
            finish(&slot.head, c.seq, 1, 200, 0, false, false);
            Some(c.seq)
        });
        // The first server and the client, in turn: each request claimed and ended by one
        // server, the client posting again once the first is over.
        let serve = || {
            let c = claim(&slot.head, 0, 100)?;
            finish(&slot.head, c.seq, 0, 100, 0, false, false);
            Some(c.seq)
        };
        let first = serve();
        while !slot.head.is_over() {
            thread::yield_now();
        }
        post(&slot.head, ID + 1, 8, true);
        let second = serve();
        let late = late.join().unwrap();
        let mut claimed: Vec<u64> = [first, second, late].into_iter().flatten().collect();
        claimed.sort();
        let n = claimed.len();
        claimed.dedup();
        assert_eq!(n, claimed.len(), "a request claimed twice: {claimed:?}");
        assert_eq!(claimed.first(), Some(&ID), "the first request is claimed");
    });
}

#[test]
fn a_taker_dead_between_its_end_and_its_hand_back_holds_nothing_up() {
    model(|| {
        let slot = Slot::new();
        send(&slot, 4);
        // The taker answers inline and announces the end, then dies before its claim word
        // follows.
        let server = answer_partly(&slot, |head, seq| announce(head, done_inline(seq)));
        assert_eq!(await_response(&slot), 5);
        server.join().unwrap();
        // The client posts again: held up (no server can claim it) until the client, looking
        // at the claim word, finds the previous taker dead and takes its word back.
        let fin_before = slot.head.fin.load(Ordering::Relaxed);
        post(&slot.head, ID + 1, 8, true);
        assert!(claim(&slot.head, 1, 200).is_none());
        let (w, seen) = look(&slot.head, ID + 1, 0, fin_before, DEPTH as usize, 8, true);
        assert_eq!(seen, Look::Nothing, "the previous taker's word is not corrupt");
        assert!(take_back(&slot.head, w));
        assert!(claim(&slot.head, 1, 200).is_some(), "the next request is claimed");
    });
}

#[test]
fn an_end_missing_from_the_answer_line_is_found_in_the_claim_word() {
    model(|| {
        let slot = Slot::new();
        send(&slot, 4);
        // The taker answers inline and hands back the end, but `fin` never shows it (as when
        // a hostile write overwrote it).
        let server = answer_partly(&slot, |head, seq| hand_back(head, seq, 0, 100, done_inline(seq)));
        server.join().unwrap();
        // Polling the answer line alone never shows it; the look that reads the claim word does.
        assert_eq!(look(&slot.head, ID, 0, 0, DEPTH as usize, 8, false).1, Look::Nothing);
        match look(&slot.head, ID, 0, 0, DEPTH as usize, 8, true).1 {
            Look::Response { cell: INLINE_CELL, len: 8, last: true } => assert_eq!(slot.read_cell(0), 5),
            other => panic!("{other:?}"),
        }
        assert!(settle(&slot.head, Some(ID), |_| false));
    });
}
