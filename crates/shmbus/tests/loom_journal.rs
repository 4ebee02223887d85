//! Loom models of the journal protocol (`journal::protocol`), on heap atomics:
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p shmbus --release --test loom_journal`
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use loom::thread;
use shmbus::journal::format::pos_parts;
use shmbus::journal::protocol::*;

/// Runs a model with a preemption bound, which keeps each model to seconds.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// Two appenders claim while a third party seals: claims get distinct, dense indices and
/// contiguous, non-overlapping ranges, and the sealed word is exactly their sum.
#[test]
fn claims_are_dense_and_seal_is_exact() {
    model(|| {
        let pos = Arc::new(AtomicU64::new(0));
        let appenders: Vec<_> = (0..2u64)
            .map(|k| {
                let pos = pos.clone();
                thread::spawn(move || {
                    let units = 4 + k;
                    loop {
                        let w = load_pos(&pos);
                        let (sealed, n, u) = pos_parts(w);
                        if sealed {
                            return None;
                        }
                        if try_claim(&pos, w, units) {
                            return Some((n, u, units));
                        }
                    }
                })
            })
            .collect();
        let sealer = {
            let pos = pos.clone();
            thread::spawn(move || seal(&pos))
        };
        let sealed_word = sealer.join().unwrap();
        let mut claims: Vec<_> = appenders.into_iter().filter_map(|h| h.join().unwrap()).collect();
        claims.sort_unstable();
        let (sealed, n, u) = pos_parts(load_pos(&pos));
        assert!(sealed);
        assert_eq!(load_pos(&pos), sealed_word, "nothing changes a sealed word");
        assert_eq!(n as usize, claims.len());
        let mut next_u = 0;
        for (i, &(cn, cu, cunits)) in claims.iter().enumerate() {
            assert_eq!(cn, i as u64, "dense indices");
            assert_eq!(cu, next_u, "contiguous ranges");
            next_u += cunits;
        }
        assert_eq!(u, next_u);
    });
}

/// The owner's write-then-commit races an abandoner and a reader: exactly one of commit and
/// abandon succeeds, and a reader that sees COMMITTED sees the payload (no data race: loom
/// checks the happens-before edge through the Release CAS). The owner writes its payload
/// while word 0 is still 0 (there is no reserved step); after an abandonment it writes
/// bytes nobody reads.
#[test]
fn commit_and_abandon_exclude_each_other() {
    model(|| {
        let word = Arc::new(AtomicU64::new(0));
        let payload = Arc::new(UnsafeCell::new(0u64));
        let owner = {
            let (word, payload) = (word.clone(), payload.clone());
            thread::spawn(move || {
                // SAFETY (model): the payload is ours between claim and commit (readers
                // read it only after seeing COMMITTED, which only this thread writes).
                payload.with_mut(|p| unsafe { *p = 42 });
                commit_entry(&word, 4, 0)
            })
        };
        let abandoner = {
            let word = word.clone();
            thread::spawn(move || abandon_entry(&word, 4))
        };
        let reader = {
            let (word, payload) = (word.clone(), payload.clone());
            thread::spawn(move || {
                if let EntryState::Committed { units, .. } = observe(&word) {
                    assert_eq!(units, 4);
                    // SAFETY (model): committed entries are immutable.
                    assert_eq!(payload.with(|p| unsafe { *p }), 42);
                }
            })
        };
        let committed = owner.join().unwrap();
        let abandoned = abandoner.join().unwrap();
        reader.join().unwrap();
        assert!(committed ^ abandoned, "committed {committed} abandoned {abandoned}");
        match observe(&word) {
            EntryState::Committed { .. } => assert!(committed),
            EntryState::Abandoned { units } => assert!(abandoned && units == 4),
            s => panic!("final state {s:?}"),
        }
    });
}
