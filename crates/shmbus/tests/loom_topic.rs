//! Loom models of the topic protocol (`shmbus::topic::protocol`), on heap memory.
//!
//! Payloads are two bytes `[x, x]`: a torn copy shows as two different bytes.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p shmbus --release --test loom_topic`
#![cfg(loom)]

use loom::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use loom::sync::Arc;
use loom::thread;

use shmbus::participants::{Participant, ParticipantTable};
use shmbus::topic::protocol::{
    held_stamp, CursorCache, CursorUpdate, DataRegion, HeldCrash, Lookup, PublishCrash, PublishOrder, Shared,
    SlotHeader,
};
use shmbus::topic::protocol::{Control, AUX_PENDING, ROLE_PUBLISHER, ROLE_SUBSCRIBER};
use shmbus::ProcessId;

struct Mem {
    ctl: Control,
    index: Vec<AtomicU64>,
    slots: Vec<SlotHeader>,
    bytes: Vec<AtomicU8>,
    parts: Vec<Participant>,
    held: Vec<AtomicU64>,
}

const PAYLOAD: usize = 2;

impl Mem {
    fn new(slots: usize) -> Arc<Mem> {
        Arc::new(Mem {
            ctl: Control::new(),
            index: (0..4).map(|_| AtomicU64::new(0)).collect(),
            slots: (0..slots).map(|_| SlotHeader::new()).collect(),
            bytes: (0..slots * PAYLOAD).map(|_| AtomicU8::new(0)).collect(),
            parts: (0..4).map(|_| Participant::new()).collect(),
            held: (0..4).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    fn shared(&self) -> Shared<'_> {
        Shared {
            ctl: &self.ctl,
            index: &self.index,
            slots: &self.slots,
            data: DataRegion { bytes: &self.bytes, stride: PAYLOAD, slot_size: PAYLOAD },
            participants: ParticipantTable::from_slice(&self.parts),
            held: &self.held,
        }
    }
}

/// Publishes `[x, x]` as participant `me` in `order`, with the publisher's own operation
/// (`Shared::publish`, what `Publisher::send` runs). Returns the sequence number, or None if
/// no slot.
fn publish_in(sh: &Shared<'_>, me: usize, x: u8, order: PublishOrder) -> Option<u64> {
    let s = sh.acquire_slot(me).ok()?;
    // SAFETY: `s` came from acquire_slot and the payload fits the slot.
    Some(unsafe { sh.publish(me, s, &[x, x], order, || 0, PublishCrash::Never) })
}

/// Publishes `[x, x]` writing before claiming (loans, large messages).
fn publish(sh: &Shared<'_>, me: usize, x: u8) -> Option<u64> {
    publish_in(sh, me, x, PublishOrder::WriteFirst)
}

/// Publishes `[x, x]` claiming before writing (small copy-publishes).
fn publish_claim_first(sh: &Shared<'_>, me: usize, x: u8) -> Option<u64> {
    publish_in(sh, me, x, PublishOrder::ClaimFirst)
}

/// Publishes `[x, x]` on a `block`/`fail` topic: gives the slot back if a reliable cursor
/// still needs its old message (as `Publisher::try_send` does). `cursors` is the
/// publisher's last scan, kept between publishes as a `Publisher` keeps it.
fn publish_lossless(sh: &Shared<'_>, me: usize, x: u8, cursors: &mut CursorCache) -> Option<u64> {
    let s = sh.acquire_slot(me).ok()?;
    if sh.take_slot_lossless(s, cursors).is_err() {
        sh.give_back_slot(s);
        return None;
    }
    // SAFETY: `s` came from acquire_slot and the payload fits the slot.
    Some(unsafe { sh.publish(me, s, &[x, x], PublishOrder::WriteFirst, || 0, PublishCrash::Never) })
}

/// Copies `k` if it can; asserts it is never torn.
fn read(sh: &Shared<'_>, k: u64) -> Option<[u8; 2]> {
    if let Lookup::Found(s) = sh.lookup(k) {
        let mut buf = Vec::new();
        if sh.read_copy(s, k, &mut buf).is_some() {
            assert_eq!(buf.len(), 2);
            assert_eq!(buf[0], buf[1], "torn copy of {k}: {buf:?}");
            return Some([buf[0], buf[1]]);
        }
    }
    None
}

#[test]
fn two_publishers_and_a_copy_reader_never_tear() {
    loom::model(|| {
        let mem = Mem::new(2);
        // One publisher writes first, the other claims first: both orders, interleaved.
        let handles: Vec<_> = [(0usize, 1u8), (1, 2)]
            .into_iter()
            .map(|(me, x)| {
                let mem = mem.clone();
                thread::spawn(move || {
                    if me == 0 {
                        publish(&mem.shared(), me, x)
                    } else {
                        publish_claim_first(&mem.shared(), me, x)
                    }
                })
            })
            .collect();
        let sh = mem.shared();
        let _ = read(&sh, 1);
        let seqs: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        // Two slots, two messages: both were published with distinct sequence numbers.
        let mut got: Vec<u64> = seqs.iter().map(|s| s.expect("a slot was free")).collect();
        got.sort();
        assert_eq!(got, vec![1, 2]);
        for k in 1..=2 {
            assert!(read(&sh, k).is_some(), "committed {k} unreadable");
        }
    });
}

#[test]
fn an_inline_copy_is_never_torn_by_an_overwrite() {
    // The copy a small `Sample` holds (`read_inline`), racing a publisher that overwrites
    // the only slot: it is all of message 1 or nothing.
    loom::model(|| {
        let mem = Mem::new(1);
        let sh = mem.shared();
        assert_eq!(publish(&sh, 0, 7), Some(1));
        let writer = {
            let mem = mem.clone();
            thread::spawn(move || publish_claim_first(&mem.shared(), 0, 9))
        };
        let mut buf = [0u8; 40];
        if let Some((len, _)) = sh.read_inline(0, 1, &mut buf) {
            assert_eq!((len, buf[0], buf[1]), (2, 7, 7), "torn inline copy");
        }
        assert_eq!(writer.join().unwrap(), Some(2));
    });
}

#[test]
fn a_pinned_slot_is_never_overwritten() {
    loom::model(|| {
        // One slot: the second publish must either fail or wait for the pin to go.
        let mem = Mem::new(1);
        let sh = mem.shared();
        assert_eq!(publish(&sh, 0, 7), Some(1));
        let writer = {
            let mem = mem.clone();
            thread::spawn(move || publish_claim_first(&mem.shared(), 0, 9))
        };
        // Reader: pin seq 1; while pinned its bytes must stay [7, 7].
        if let Lookup::Found(s) = sh.lookup(1) {
            if sh.pin(1, s, 1, None).is_ok() {
                let a = mem.bytes[0].load(Ordering::Relaxed);
                let b = mem.bytes[1].load(Ordering::Relaxed);
                assert_eq!((a, b), (7, 7), "pinned payload changed");
                sh.unpin(1, s, None);
            }
        }
        writer.join().unwrap();
    });
}

#[test]
fn a_dead_writer_leaves_no_readable_partial_message() {
    loom::model(|| {
        let mem = Mem::new(1);
        let sh = mem.shared();
        assert_eq!(publish(&sh, 0, 5), Some(1));
        // A writer that acquires the slot, claims a sequence number, writes half and "dies",
        // in the publisher's own operation.
        let dying = {
            let mem = mem.clone();
            thread::spawn(move || {
                let sh = mem.shared();
                if let Ok(s) = sh.acquire_slot(1) {
                    // SAFETY: `s` came from acquire_slot and the payload fits the slot.
                    let k = unsafe { sh.publish(1, s, &[6, 6], PublishOrder::ClaimFirst, || 0, PublishCrash::MidCopy) };
                    assert_eq!(k, 2);
                }
            })
        };
        let _ = read(&sh, 1);
        dying.join().unwrap();
        // Reclaim the dead writer, then the slot is usable and nothing torn is ever read.
        sh.cleanup_participant(1);
        let pending = sh.participants.entry(1).aux[AUX_PENDING].load(Ordering::Relaxed);
        if pending == 2 {
            assert_eq!(sh.lookup(2), Lookup::Pending);
            assert!(!sh.claimant_alive(2, |_| false));
        }
        let _ = read(&sh, 1);
        let k = publish(&sh, 0, 8).expect("slot reclaimed");
        assert_eq!(read(&sh, k), Some([8, 8]));
    });
}

#[test]
fn an_audited_acquire_clears_garbage_pins_but_never_takes_a_recorded_one() {
    loom::model(|| {
        // One slot holding seq 1; a registered subscriber pins it (recording the pin) while a
        // publisher that found every slot busy acquires with the audit. A garbage pin bit of
        // a free entry must not block the publisher, and the real pin must never be overrun.
        let mem = Mem::new(1);
        let sh = mem.shared();
        let me = ProcessId { pid: 7, start_time: 1 };
        assert_eq!(sh.participants.register(me, ROLE_PUBLISHER, 0..1), Some(0));
        assert_eq!(sh.participants.register(me, ROLE_SUBSCRIBER, 1..2), Some(1));
        assert_eq!(publish(&sh, 0, 7), Some(1));
        mem.slots[0].w1.store(1 << 3, Ordering::Relaxed); // entry 3 is free: garbage
        let writer = {
            let mem = mem.clone();
            thread::spawn(move || {
                let sh = mem.shared();
                let s = sh.acquire_slot_audited(0).ok()?;
                // SAFETY: `s` came from acquire_slot_audited and the payload fits the slot.
                Some(unsafe { sh.publish(0, s, &[9, 9], PublishOrder::WriteFirst, || 0, PublishCrash::Never) })
            })
        };
        let pinned = if let Lookup::Found(s) = sh.lookup(1) {
            if sh.pin(1, s, 1, Some(0)).is_ok() {
                let a = mem.bytes[0].load(Ordering::Relaxed);
                let b = mem.bytes[1].load(Ordering::Relaxed);
                assert_eq!((a, b), (7, 7), "pinned payload changed");
                sh.unpin(1, s, Some(0));
                true
            } else {
                false
            }
        } else {
            false
        };
        let published = writer.join().unwrap();
        let _ = pinned;
        // The audit looked at the slot either way, and cleared the garbage bit.
        assert_eq!(mem.slots[0].w1.load(Ordering::Relaxed) & (1 << 3), 0, "garbage pin left");
        // Both sides may have backed off (the Dekker handshake allows it); with the pin
        // gone, the garbage bit alone never stops a publisher.
        if published.is_none() {
            assert!(sh.acquire_slot_audited(0).is_ok(), "garbage pin blocked the publisher");
        }
    });
}

/// Two slots holding 1 and 2, a publisher and a subscriber registered (entries 0 and 1),
/// and the publisher's scan of the cursors (none, so far: it trusts it until the epoch moves).
fn two_messages_two_endpoints() -> (Arc<Mem>, CursorCache) {
    let mem = Mem::new(2);
    let sh = mem.shared();
    let me = ProcessId { pid: 7, start_time: 1 };
    assert_eq!(sh.participants.register(me, ROLE_PUBLISHER, 0..1), Some(0));
    assert_eq!(sh.participants.register(me, ROLE_SUBSCRIBER, 1..2), Some(1));
    let mut cursors = CursorCache::default();
    assert_eq!(publish_lossless(&sh, 0, 1, &mut cursors), Some(1));
    assert_eq!(publish_lossless(&sh, 0, 2, &mut cursors), Some(2));
    (mem, cursors)
}

#[test]
fn a_reliable_cursor_keeps_its_message_until_it_moves_past() {
    loom::model(|| {
        // The subscriber's cursor stands at 1; the publisher's next slot holds 1. It may
        // overwrite it only after the subscriber has read 1 and moved its cursor.
        let (mem, mut cursors) = two_messages_two_endpoints();
        let sh = mem.shared();
        assert_eq!(sh.join_reliable(1, 1), Some(1));
        let writer = {
            let mem = mem.clone();
            thread::spawn(move || publish_lossless(&mem.shared(), 0, 3, &mut cursors))
        };
        assert_eq!(read(&sh, 1), Some([1, 1]), "a message a reliable cursor needs was overwritten");
        let _ = sh.publish_cursor(1, 2);
        if let Some(k) = writer.join().unwrap() {
            assert_eq!(k, 3);
            assert_eq!(read(&sh, 2), Some([2, 2]), "the publisher overwrote past the slot it checked");
        }
    });
}

#[test]
fn a_joining_reliable_subscriber_never_loses_where_it_starts() {
    loom::model(|| {
        // No reliable subscriber yet: the publisher takes the slot of 1 while a subscriber
        // joins asking for 1. Either the publisher sees the join (and the cursor), or the
        // subscriber sees the slot taken and starts after it; the message it starts at is
        // never overwritten under it.
        let (mem, mut cursors) = two_messages_two_endpoints();
        let sh = mem.shared();
        let writer = {
            let mem = mem.clone();
            thread::spawn(move || publish_lossless(&mem.shared(), 0, 3, &mut cursors))
        };
        let c = sh.join_reliable(1, 1).expect("nobody evicts");
        // 4: the walk saw 3 mid-commit and started after it (conservative, allowed).
        assert!((1..=4).contains(&c), "joined at {c}");
        if c <= 2 {
            assert_eq!(read(&sh, c), Some([c as u8; 2]), "lost {c}, where it joined");
        }
        writer.join().unwrap();
    });
}

#[test]
fn an_eviction_while_a_reliable_subscriber_seeks_back_is_never_undone() {
    loom::model(|| {
        // Subscriber 1, reliable at 2 (it read 1), seeks back to 1 (a join) while a publisher
        // evicts it, having seen its cursor at 2. The eviction takes only if it comes before
        // the join moves the cursor; then the join says so and the word stays evicted.
        let (mem, _) = two_messages_two_endpoints();
        let sh = mem.shared();
        assert_eq!(sh.join_reliable(1, 2), Some(2));
        let evictor = {
            let mem = mem.clone();
            thread::spawn(move || mem.shared().evict(1, 2))
        };
        let joined = sh.join_reliable(1, 1);
        let evicted = evictor.join().unwrap();
        assert_eq!(sh.cursor_evicted(1), evicted, "an eviction was undone (or made up)");
        assert_eq!(joined, if evicted { None } else { Some(1) }, "the join did not say what happened");
    });
}

/// The reliable timeout of the eviction models, in (model) milliseconds.
const TIMEOUT_MS: u64 = 10;

#[test]
fn a_publisher_after_one_that_gave_up_goes_on_with_its_clock() {
    loom::model(|| {
        // Subscriber 1, reliable at 1, never reads. Publisher A is held back at time 0,
        // stamps and gives up (or dies) right after; publisher B, held back at 5, looks at
        // the same time. Whoever stamped, the clock started by 5: a publisher held back at
        // 16 (more than the timeout after) evicts it, though it never saw it before. The
        // clock is one for both (as CLOCK_MONOTONIC is for every process): B moves it to 5.
        let (mem, _) = two_messages_two_endpoints();
        let sh = mem.shared();
        assert_eq!(sh.join_reliable(1, 1), Some(1));
        let clock = Arc::new(AtomicU64::new(0));
        let a = {
            let (mem, clock) = (mem.clone(), clock.clone());
            thread::spawn(move || {
                mem.shared().evict_stuck(|| clock.load(Ordering::SeqCst), TIMEOUT_MS, HeldCrash::AfterStamp)
            })
        };
        clock.store(5, Ordering::SeqCst);
        let b = sh.evict_stuck(|| clock.load(Ordering::SeqCst), TIMEOUT_MS, HeldCrash::Never);
        assert_eq!(b, 0, "evicted before the timeout");
        assert_eq!(a.join().unwrap(), 0, "evicted before the timeout");
        let h = mem.held[1].load(Ordering::Relaxed);
        assert!(h == held_stamp(0, 1) || h == held_stamp(5, 1), "held word {h:#x}");
        assert_eq!(sh.evict_stuck(|| 9, TIMEOUT_MS, HeldCrash::Never), 0, "evicted before the timeout");
        assert_eq!(sh.evict_stuck(|| 16, TIMEOUT_MS, HeldCrash::Never), 1, "the clock restarted");
        assert!(sh.cursor_evicted(1));
        assert_eq!(sh.publish_cursor(1, 2), CursorUpdate::Evicted, "the subscriber is not told");
    });
}

#[test]
fn an_eviction_racing_with_the_subscriber_moving_never_evicts_one_that_moved() {
    loom::model(|| {
        // Subscriber 1, reliable at 1, stamped stuck at time 0; at 20 (past the timeout) a
        // publisher evicts while the subscriber moves to 2. Exactly one wins: the eviction
        // only if the move comes after it (and the move then says so); a moved subscriber is
        // never evicted, and its old stamp never counts for where it moved to.
        let (mem, _) = two_messages_two_endpoints();
        let sh = mem.shared();
        assert_eq!(sh.join_reliable(1, 1), Some(1));
        assert_eq!(sh.evict_stuck(|| 0, TIMEOUT_MS, HeldCrash::Never), 0);
        let evictor = {
            let mem = mem.clone();
            thread::spawn(move || mem.shared().evict_stuck(|| 20, TIMEOUT_MS, HeldCrash::Never))
        };
        let moved = sh.publish_cursor(1, 2);
        let evicted = evictor.join().unwrap();
        assert_eq!(evicted == 1, moved == CursorUpdate::Evicted, "moved {moved:?}, evicted {evicted}");
        assert_eq!(sh.cursor_evicted(1), evicted == 1);
        if evicted == 0 {
            // At 2 since 20 at the earliest: not stuck for the timeout at 25.
            assert_eq!(sh.evict_stuck(|| 25, TIMEOUT_MS, HeldCrash::Never), 0, "evicted on a stale stamp");
            assert!(!sh.cursor_evicted(1));
        }
    });
}

#[test]
fn a_garbage_held_word_delays_an_eviction_by_one_timeout_at_most() {
    loom::model(|| {
        // A held word from the future (its tag the cursor's), and one that is all ones.
        for garbage in [held_stamp(1_000_000, 1), u64::MAX] {
            let (mem, _) = two_messages_two_endpoints();
            let sh = mem.shared();
            assert_eq!(sh.join_reliable(1, 1), Some(1));
            mem.held[1].store(garbage, Ordering::Relaxed);
            assert_eq!(sh.evict_stuck(|| 100, TIMEOUT_MS, HeldCrash::Never), 0);
            assert_eq!(mem.held[1].load(Ordering::Relaxed), held_stamp(100, 1), "taken as now");
            assert_eq!(sh.evict_stuck(|| 111, TIMEOUT_MS, HeldCrash::Never), 1);
        }
    });
}
