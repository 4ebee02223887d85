//! Topic semantics in one process: ordering, history, gaps, pins, loans, errors.

#![cfg(not(loom))]

mod common;

use common::{topic, Scratch};
use shmbus::topic::{
    Topic, TopicConfig, TopicGetError, TopicRecvError, TopicRecvTimeoutError, TopicSendError, TopicTryRecvError,
};
use shmbus::OpenError;

#[test]
fn publish_then_receive_in_order() {
    let s = Scratch::new("order");
    let t = topic(&s, "a", 64, 8);
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    assert_eq!(sub.try_recv(), Err(TopicTryRecvError::Empty));
    for i in 1..=5u64 {
        assert_eq!(p.send(format!("m{i}").as_bytes()).unwrap(), i);
    }
    let mut last_ts = 0;
    for i in 1..=5u64 {
        let m = sub.try_recv().unwrap();
        assert_eq!(m.seq(), i);
        assert_eq!(m.data(), format!("m{i}").into_bytes());
        assert!(m.ts_ns() >= last_ts);
        last_ts = m.ts_ns();
    }
    assert_eq!(sub.try_recv(), Err(TopicTryRecvError::Empty));
    assert_eq!(t.last_seq(), 5);
}

#[test]
fn lagging_subscriber_gets_a_gap_report_then_the_oldest_kept() {
    let s = Scratch::new("lag");
    let t = topic(&s, "a", 16, 4);
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    for i in 1..=20u64 {
        p.send(&i.to_le_bytes()).unwrap();
    }
    match sub.try_recv() {
        Err(TopicTryRecvError::Lagged { missed }) => assert_eq!(missed, 16),
        other => panic!("expected a gap, got {other:?}"),
    }
    for i in 17..=20u64 {
        let m = sub.try_recv().unwrap();
        assert_eq!(m.seq(), i);
        assert_eq!(m.data(), i.to_le_bytes());
    }
}

#[test]
fn random_access_to_the_last_n() {
    let s = Scratch::new("random");
    let t = topic(&s, "a", 16, 4);
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    assert_eq!(sub.get(0), Err(TopicGetError::InvalidSeq));
    assert!(matches!(sub.get(1), Err(TopicGetError::NotYet { seq: 1, last: 0 })));
    assert!(matches!(sub.latest(), Err(TopicGetError::NotYet { .. })));
    for i in 1..=10u64 {
        p.send(&i.to_le_bytes()).unwrap();
    }
    for i in 7..=10u64 {
        assert_eq!(sub.get(i).unwrap().data(), i.to_le_bytes());
        assert_eq!(&*sub.get_ref(i).unwrap(), &i.to_le_bytes());
    }
    match sub.get(1) {
        Err(TopicGetError::Evicted { seq: 1, oldest }) => assert_eq!(oldest, 7),
        other => panic!("{other:?}"),
    }
    assert!(matches!(sub.get(11), Err(TopicGetError::NotYet { seq: 11, last: 10 })));
    assert_eq!(sub.latest().unwrap().seq(), 10);
    // The cursor did not move.
    assert_eq!(sub.next_seq(), 1);
    let e = sub.get(1).unwrap_err().to_string();
    assert!(e.contains("no longer in the history"), "{e}");
}

#[test]
fn loan_write_send_is_zero_copy_and_unsent_loans_publish_nothing() {
    let s = Scratch::new("loan");
    let t = topic(&s, "a", 4096, 4);
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    {
        let mut loan = p.loan().unwrap();
        assert_eq!(loan.len(), 4096);
        loan[..3].copy_from_slice(b"abc");
        // dropped unsent
    }
    assert_eq!(sub.try_recv(), Err(TopicTryRecvError::Empty));
    let mut loan = p.loan().unwrap();
    loan[0] = 7;
    loan[4095] = 9;
    loan.truncate(4096);
    assert_eq!(loan.send().unwrap(), 1);
    let sample = sub.try_recv_ref().unwrap();
    assert_eq!((sample[0], sample[4095], sample.len(), sample.seq()), (7, 9, 4096, 1));
    drop(sample);
    // Truncating shortens only (Vec semantics): a loan cannot grow past the slot.
    let mut loan = p.loan().unwrap();
    loan.truncate(5000);
    assert_eq!(loan.len(), 4096);
    loan.truncate(2);
    assert_eq!(loan.len(), 2);
    drop(loan);
    assert_eq!(sub.try_recv(), Err(TopicTryRecvError::Empty));
}

#[test]
fn too_large_is_refused_and_nothing_is_published() {
    let s = Scratch::new("large");
    let t = topic(&s, "a", 8, 2);
    let mut p = t.publisher().unwrap();
    let err = p.send(&[0; 9]).unwrap_err();
    assert_eq!(err, TopicSendError::TooLarge { len: 9, max: 8 });
    assert!(err.to_string().contains("slot size"));
    assert_eq!(t.last_seq(), 0);
}

#[test]
fn pinned_samples_are_never_overwritten_and_full_pins_fail_publish() {
    let s = Scratch::new("pins");
    // 2 history + 1 spare = 3 slots, larger than the inline 40 B (those are copied).
    let t = Topic::create_or_open(
        &s.domain("t"),
        "a",
        &TopicConfig::default().max_message_len(64).history(2).spare_slots(1),
    )
    .unwrap();
    let mut p = t.publisher().unwrap();
    let a = t.subscriber().unwrap();
    let b = t.subscriber().unwrap();
    a.set_pin_budget(2);
    b.set_pin_budget(1);
    p.send(b"one").unwrap();
    p.send(b"two").unwrap();
    p.send(b"three").unwrap();
    let s1 = a.try_recv_ref().unwrap();
    let s2 = a.try_recv_ref().unwrap();
    assert!(matches!(a.try_recv_ref(), Err(TopicTryRecvError::PinLimit { budget: 2 })));
    b.seek(3);
    let s3 = b.try_recv_ref().unwrap();
    assert_eq!((&*s1, &*s2, &*s3), (&b"one"[..], &b"two"[..], &b"three"[..]));
    assert_eq!(Topic::status(&s.domain("t"), "a").unwrap().pinned_slots, 3);
    // Every slot is pinned: publishing must fail, not overwrite.
    assert_eq!(p.send(b"four"), Err(TopicSendError::AllPinned { slots: 3 }));
    assert_eq!(&*s1, b"one");
    drop(s1);
    assert_eq!(p.send(b"four").unwrap(), 4);
    assert_eq!((&*s2, &*s3), (&b"two"[..], &b"three"[..]));
    // Two samples of the same message share one pin.
    drop(s2);
    let x = b.get_ref(3);
    assert!(matches!(x, Err(TopicGetError::PinLimit { budget: 1 })) || x.is_ok());
}

#[test]
fn several_publishers_share_one_sequence() {
    let s = Scratch::new("multi");
    let t = topic(&s, "a", 16, 64);
    let sub = t.subscriber().unwrap();
    let mut handles = Vec::new();
    for w in 0..4u64 {
        let t = t.clone();
        handles.push(std::thread::spawn(move || {
            let mut p = t.publisher().unwrap();
            for i in 0..10u64 {
                p.send(&(w * 100 + i).to_le_bytes()).unwrap();
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let mut seen = Vec::new();
    while let Ok(m) = sub.try_recv() {
        seen.push(u64::from_le_bytes(m.data().try_into().unwrap()));
    }
    seen.sort();
    let want: Vec<u64> = (0..4).flat_map(|w| (0..10).map(move |i| w * 100 + i)).collect();
    assert_eq!(seen, want);
}

#[test]
fn reopening_with_another_layout_names_both_values() {
    let s = Scratch::new("mismatch");
    let d = s.domain("t");
    Topic::create_or_open(&d, "a", &TopicConfig::default().max_message_len(64).history(8)).unwrap();
    let e = Topic::create_or_open(&d, "a", &TopicConfig::default().max_message_len(128).history(8)).unwrap_err();
    match &e {
        OpenError::LayoutMismatch { field, existing, requested, .. } => {
            assert_eq!((*field, *existing, *requested), ("slot size", 64, 128))
        }
        other => panic!("{other:?}"),
    }
    let msg = e.to_string();
    assert!(msg.contains("64") && msg.contains("128"), "{msg}");
    let e = Topic::create_or_open(&d, "a", &TopicConfig::default().max_message_len(64).history(9)).unwrap_err();
    assert!(matches!(e, OpenError::LayoutMismatch { field: "history", existing: 8, requested: 9, .. }));
    // Same layout opens fine.
    Topic::create_or_open(&d, "a", &TopicConfig::default().max_message_len(64).history(8)).unwrap();
}

#[test]
fn unset_config_values_accept_the_existing_topic_and_take_defaults_when_creating() {
    let s = Scratch::new("unset");
    let d = s.domain("t");
    let created = Topic::create_or_open(&d, "a", &TopicConfig::default().max_message_len(64).history(8)).unwrap();
    // Nothing set: whatever the topic has.
    let t = Topic::create_or_open(&d, "a", &TopicConfig::default()).unwrap();
    assert_eq!((t.max_message_len(), t.history()), (64, 8));
    // Only the history set, and equal: fine; the spare slots (4 by default) are not compared
    // when unset.
    Topic::create_or_open(&d, "a", &TopicConfig::default().history(8)).unwrap();
    let e = Topic::create_or_open(&d, "a", &TopicConfig::default().spare_slots(1)).unwrap_err();
    assert!(matches!(e, OpenError::LayoutMismatch { field: "spare slots", existing: 4, requested: 1, .. }), "{e}");
    drop(created);
    // Created with nothing set: the documented defaults.
    let t = Topic::create_or_open(&d, "b", &TopicConfig::default()).unwrap();
    assert_eq!((t.max_message_len(), t.history()), (4096, 16));
    let st = Topic::status(&d, "b").unwrap();
    assert_eq!((st.max_message_len, st.history, st.slots), (4096, 16, 20));
}

#[test]
fn status_is_read_only_and_registers_nothing() {
    let s = Scratch::new("status");
    let d = s.domain("t");
    let t = topic(&s, "a", 16, 4);
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    p.send(b"x").unwrap();
    let st = Topic::status(&d, "a").unwrap();
    assert_eq!((st.last_seq, st.publishers, st.subscribers, st.pinned_slots), (1, 1, 1, 0));
    // Read permission is enough.
    use std::os::unix::fs::PermissionsExt;
    let path = d.channel_path("a").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let st = Topic::status(&d, "a").unwrap();
    assert_eq!((st.publishers, st.subscribers), (1, 1));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    drop(sub);
    assert_eq!(Topic::status(&d, "a").unwrap().subscribers, 0);
    assert!(matches!(Topic::status(&d, "missing"), Err(OpenError::NotFound { .. })));
}

#[test]
fn the_three_receive_families_and_the_iterators() {
    let s = Scratch::new("families");
    let t = topic(&s, "a", 16, 8);
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    for m in [&b"one"[..], b"two", b"three", b"four"] {
        p.send(m).unwrap();
    }
    let m = sub.recv().unwrap();
    assert_eq!((m.seq(), m.data(), m.len()), (1, &b"one"[..], 3));
    let mut buf = Vec::with_capacity(16);
    let info = sub.recv_into(&mut buf).unwrap();
    assert_eq!((info.seq(), info.len(), &buf[..]), (2, 3, &b"two"[..]));
    let info = sub.try_recv_into(&mut buf).unwrap();
    assert_eq!((info.seq(), &buf[..]), (3, &b"three"[..]));
    let sample = sub.recv_ref().unwrap();
    assert_eq!((sample.seq(), &*sample), (4, &b"four"[..]));
    drop(sample);
    assert_eq!(sub.recv_ref_timeout(std::time::Duration::ZERO).unwrap_err(), TopicRecvTimeoutError::Timeout);
    assert_eq!(sub.try_recv_ref().unwrap_err(), TopicTryRecvError::Empty);
    assert_eq!(sub.try_iter().count(), 0);
    let r = sub.get_ref(2).unwrap();
    assert_eq!(&*r, b"two");
    drop(r);
    // try_iter: everything there, then it ends at Empty.
    for m in [&b"five"[..], b"six"] {
        p.send(m).unwrap();
    }
    let got: Vec<Vec<u8>> = sub.try_iter().map(|m| m.unwrap().into_data()).collect();
    assert_eq!(got, [b"five".to_vec(), b"six".to_vec()]);
    // A gap is yielded once, then the iterator ends; the next one goes on from there.
    for i in 0..20u8 {
        p.send(&[i]).unwrap();
    }
    let mut it = sub.try_iter();
    assert!(matches!(it.next(), Some(Err(TopicRecvError::Lagged { .. }))));
    assert!(it.next().is_none());
    assert_eq!(sub.try_iter().count(), 8);
    // iter blocks for the next message.
    p.send(b"last").unwrap();
    assert_eq!(sub.iter().next().unwrap().unwrap().data(), b"last");
}

#[test]
fn invalid_configs_and_names_are_refused() {
    let s = Scratch::new("invalid");
    let d = s.domain("t");
    for (slot, hist) in [(0, 4), (8, 0), (1 << 31, 1)] {
        let e =
            Topic::create_or_open(&d, "a", &TopicConfig::default().max_message_len(slot).history(hist)).unwrap_err();
        assert!(matches!(e, OpenError::InvalidConfig { .. }), "{e}");
    }
    for name in ["", "../x", ".hidden", "a/b", "x y"] {
        let e = Topic::create_or_open(&d, name, &TopicConfig::default().max_message_len(8).history(1)).unwrap_err();
        assert!(matches!(e, OpenError::InvalidName(_)), "{name}: {e}");
    }
    assert!(matches!(Topic::open(&d, "missing"), Err(OpenError::NotFound { .. })));
}

#[test]
fn small_samples_are_copies_that_hold_no_pin() {
    // A topic of slots of at most 40 B keeps payloads inline in the slot header; its samples
    // are copies: any number may be held, none counts against the budget or pins a slot,
    // and their bytes stay while the publisher overwrites every slot many times.
    let s = Scratch::new("inline");
    let d = s.domain("t");
    let t =
        Topic::create_or_open(&d, "a", &TopicConfig::default().max_message_len(40).history(2).spare_slots(1)).unwrap();
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    sub.set_pin_budget(1);
    let msg = |i: u64| -> Vec<u8> { (0..(i as usize % 41)).map(|j| (i as u8) ^ (j as u8)).collect() };
    let mut held = Vec::new();
    for i in 1..=8u64 {
        assert_eq!(p.send(&msg(i)).unwrap(), i);
        let sample = if i % 2 == 0 { sub.try_recv_ref().unwrap() } else { sub.recv_ref().unwrap() };
        assert_eq!((sample.seq(), &*sample), (i, &msg(i)[..]));
        assert!(sample.ts_ns() > 0);
        held.push(sample);
    }
    held.push(sub.get_ref(8).unwrap());
    assert_eq!(Topic::status(&d, "a").unwrap().pinned_slots, 0);
    // 40 B, the largest inline payload, aligned as the slot's (typed samples view it in place).
    assert_eq!(p.send(&[0xab; 40]).unwrap(), 9);
    let full = sub.try_recv_ref().unwrap();
    assert_eq!(&*full, &[0xab; 40][..]);
    assert_eq!(full.as_ptr() as usize % 8, 0);
    for i in 10..1000u64 {
        assert_eq!(p.send(&msg(i)).unwrap(), i, "no slot is pinned: publishing never fails");
    }
    for (n, sample) in held.iter().enumerate() {
        let i = (n as u64 + 1).min(8);
        assert_eq!((sample.seq(), &**sample), (i, &msg(i)[..]));
    }
    assert_eq!(&*full, &[0xab; 40][..]);
    drop(held);
    drop(full);
    assert!(matches!(sub.try_recv_ref(), Err(TopicTryRecvError::Lagged { .. })));
}

#[test]
fn small_and_large_samples_held_together_budget_counts_only_pinned_ones() {
    let s = Scratch::new("mixed");
    let d = s.domain("t");
    let small = topic(&s, "small", 8, 4);
    let large = topic(&s, "large", 64, 4);
    let (mut ps, mut pl) = (small.publisher().unwrap(), large.publisher().unwrap());
    let (ss, sl) = (small.subscriber().unwrap(), large.subscriber().unwrap());
    sl.set_pin_budget(1);
    ss.set_pin_budget(1);
    for i in 0..3u8 {
        ps.send(&[i; 8]).unwrap();
        pl.send(&[i; 64]).unwrap();
    }
    let a = sl.try_recv_ref().unwrap();
    assert!(matches!(sl.try_recv_ref(), Err(TopicTryRecvError::PinLimit { budget: 1 })));
    let smalls: Vec<_> = (0..3).map(|_| ss.try_recv_ref().unwrap()).collect();
    assert_eq!(Topic::status(&d, "large").unwrap().pinned_slots, 1);
    assert_eq!(Topic::status(&d, "small").unwrap().pinned_slots, 0);
    assert_eq!(&*a, &[0; 64][..]);
    for (i, x) in smalls.iter().enumerate() {
        assert_eq!(&**x, &[i as u8; 8][..]);
    }
    drop(a);
    assert_eq!(&*sl.try_recv_ref().unwrap(), &[1; 64][..]);
}

#[test]
fn small_loans_keep_the_old_message_readable_until_sent() {
    // Slots of at most 40 B: a loan is a zeroed buffer copied into its slot at send, so the
    // message the slot holds is still readable (copied or by reference) while it is out.
    let s = Scratch::new("smallloan");
    let t = Topic::create_or_open(
        &s.domain("t"),
        "a",
        &TopicConfig::default().max_message_len(40).history(1).spare_slots(0),
    )
    .unwrap();
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    assert_eq!(p.send(b"old").unwrap(), 1);
    let mut loan = p.loan().unwrap();
    assert_eq!(&*loan, &[0; 40][..]);
    assert_eq!(loan.as_ptr() as usize % 8, 0);
    loan[..3].copy_from_slice(b"new");
    // One slot, held by the loan: its old message is still intact.
    assert_eq!(sub.get(1).unwrap().data(), b"old");
    assert_eq!(&*sub.get_ref(1).unwrap(), b"old");
    drop(loan); // unsent: nothing published, the old message stays
    assert_eq!(sub.try_recv().unwrap().data(), b"old");
    let mut loan = p.loan().unwrap();
    loan[..5].copy_from_slice(b"fresh");
    loan.truncate(5);
    assert_eq!(loan.send().unwrap(), 2);
    let got = sub.try_recv_ref().unwrap();
    assert_eq!((got.seq(), &*got), (2, &b"fresh"[..]));
    drop(got);
    let mut loan = p.loan().unwrap();
    loan.copy_from_slice(&[0x5a; 40]);
    assert_eq!(loan.send().unwrap(), 3);
    assert_eq!(sub.try_recv().unwrap().data(), &[0x5a; 40][..]);
}

#[test]
fn pinned_receives_of_every_length_outside_the_header() {
    // Payloads above 40 B live outside the slot header; a pinned receive prefetches their
    // first and last lines. Empty, one-byte and full messages, through every slot (the last
    // one ends the mapping), read back whole.
    let s = Scratch::new("pinlen");
    let t = topic(&s, "a", 100, 2);
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    for round in 0..3u8 {
        for len in [0usize, 1, 41, 64, 65, 100] {
            let data: Vec<u8> = (0..len).map(|i| (i as u8) ^ round).collect();
            let k = p.send(&data).unwrap();
            let sample = sub.try_recv_ref().unwrap();
            assert_eq!((sample.seq(), &*sample), (k, &data[..]));
            drop(sample);
            assert_eq!(&*sub.get_ref(k).unwrap(), &data[..]);
        }
    }
}

#[test]
fn large_slots_up_to_64_mib() {
    let s = Scratch::new("big");
    let t = Topic::create_or_open(
        &s.domain("t"),
        "img",
        &TopicConfig::default().max_message_len(64 << 20).history(1).spare_slots(1),
    )
    .unwrap();
    let mut p = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    let data: Vec<u8> = (0..(64usize << 20)).map(|i| (i % 251) as u8).collect();
    p.send(&data).unwrap();
    let m = sub.try_recv().unwrap();
    assert!(m.data() == data);
}

#[test]
fn files_are_private_by_default_and_mode_is_settable() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new("mode");
    let d = s.domain("t");
    Topic::create_or_open(&d, "private", &TopicConfig::default().max_message_len(8).history(1)).unwrap();
    Topic::create_or_open(&d, "group", &TopicConfig::default().max_message_len(8).history(1).mode(0o660)).unwrap();
    let mode = |n: &str| std::fs::metadata(d.channel_path(n).unwrap()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("private"), 0o600);
    assert_eq!(mode("group"), 0o660);
}
