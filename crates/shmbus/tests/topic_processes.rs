//! Topics across real processes: delivery, WaitSet over 128 topics, and SIGKILL at random
//! points (no torn message, no hang, pins and slots reclaimed, abandoned claims as gaps).

#![cfg(not(loom))]

mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{child_role, env_str, env_u64, sigkill, spawn_child, wait_with_deadline, Rng, Scratch};
use shmbus::topic::{Topic, TopicConfig, TopicRecvTimeoutError, TopicTryRecvError};
use shmbus::{Domain, WaitSet, WaitTimeoutError, Waitable};

// ---- message format: [pid u32][counter u64][pattern...][hash u32] -------------------------

fn fnv(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h = (h ^ *b as u32).wrapping_mul(0x0100_0193);
    }
    h
}

fn make_message(pid: u32, counter: u64, len: usize, buf: &mut [u8]) -> usize {
    let len = len.max(16);
    buf[..4].copy_from_slice(&pid.to_le_bytes());
    buf[4..12].copy_from_slice(&counter.to_le_bytes());
    for (i, b) in buf[12..len - 4].iter_mut().enumerate() {
        *b = (counter as usize).wrapping_add(i) as u8;
    }
    let h = fnv(&buf[..len - 4]);
    buf[len - 4..len].copy_from_slice(&h.to_le_bytes());
    len
}

/// `(pid, counter)` if the message is intact.
fn check_message(m: &[u8]) -> Option<(u32, u64)> {
    if m.len() < 16 {
        return None;
    }
    let (body, tail) = m.split_at(m.len() - 4);
    if fnv(body) != u32::from_le_bytes(tail.try_into().unwrap()) {
        return None;
    }
    let counter = u64::from_le_bytes(m[4..12].try_into().unwrap());
    if !m[12..m.len() - 4].iter().enumerate().all(|(i, b)| *b == (counter as usize).wrapping_add(i) as u8) {
        return None;
    }
    Some((u32::from_le_bytes(m[..4].try_into().unwrap()), counter))
}

fn child_domain() -> Domain {
    Domain::with_root("p", env_str("ROOT")).unwrap()
}

fn child_topic() -> Topic {
    Topic::open(&child_domain(), &env_str("TOPIC")).unwrap()
}

/// Entry point of every child process: does nothing in a normal test run.
#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    let pid = std::process::id();
    match role.as_str() {
        // Publishes COUNT verified messages (or for ever if COUNT=0), random lengths.
        "publisher" => {
            let t = child_topic();
            let mut p = t.publisher().unwrap();
            let mut rng = Rng(env_u64("SEED") | 1);
            let max = env_u64("MAXLEN") as usize;
            let count = env_u64("COUNT");
            let mut buf = vec![0u8; max];
            println!("@@ready");
            let mut i = 0;
            while count == 0 || i < count {
                let len = 16 + rng.below((max - 16) as u64 + 1) as usize;
                let n = make_message(pid, i, len, &mut buf);
                if rng.below(2) == 0 {
                    p.send(&buf[..n]).unwrap();
                } else {
                    let mut loan = p.loan().unwrap();
                    loan[..n].copy_from_slice(&buf[..n]);
                    loan.truncate(n);
                    loan.send().unwrap();
                }
                i += 1;
            }
        }
        // Receives until it has seen EXPECT messages; prints "ok <count>".
        "subscriber" => {
            let t = child_topic();
            let s = t.subscriber().unwrap();
            s.seek(1);
            println!("@@ready");
            let expect = env_u64("EXPECT");
            let mut seen = HashSet::new();
            let mut buf = Vec::new();
            while (seen.len() as u64) < expect {
                match s.recv_into_timeout(&mut buf, Duration::from_secs(20)) {
                    Ok(_) => {
                        let id = check_message(&buf).expect("torn or corrupt message");
                        assert!(seen.insert(id), "duplicate {id:?}");
                    }
                    Err(e) => panic!("subscriber: {e}"),
                }
            }
            println!("@@ok {}", seen.len());
        }
        // Pins samples, checks them while pinned, holds some; exits 3 on a torn sample.
        "pinner" => {
            let t = child_topic();
            let s = t.subscriber().unwrap();
            s.set_pin_budget(2);
            println!("@@ready");
            let mut held = Vec::new();
            let mut rng = Rng(env_u64("SEED") | 1);
            loop {
                match s.recv_ref_timeout(Duration::from_millis(100)) {
                    Ok(sample) => {
                        if check_message(&sample).is_none() {
                            std::process::exit(3);
                        }
                        held.push(sample);
                        if held.len() >= 2 || rng.below(2) == 0 {
                            let x = held.remove(0);
                            if check_message(&x).is_none() {
                                std::process::exit(3);
                            }
                        }
                    }
                    Err(TopicRecvTimeoutError::PinLimit { .. }) => {
                        held.clear();
                    }
                    Err(_) => {}
                }
            }
        }
        // Pins PINS samples from seq 1 and sleeps until killed.
        "hold-pins" => {
            let t = child_topic();
            let s = t.subscriber().unwrap();
            let n = env_u64("PINS") as usize;
            s.set_pin_budget(n);
            s.seek(1);
            let held: Vec<_> = (0..n).map(|_| s.try_recv_ref().unwrap()).collect();
            println!("@@pinned {}", held.len());
            std::thread::sleep(Duration::from_secs(600));
        }
        // Claims a sequence number without committing, prints it, sleeps until killed.
        "claim-and-hang" => {
            let t = child_topic();
            let mut p = t.publisher().unwrap();
            let k = p.debug_claim_without_commit(&[0xAA; 64]).unwrap();
            println!("@@claimed {k}");
            std::thread::sleep(Duration::from_secs(600));
        }
        // Publishes one message to each of N topics in random order, ROUNDS times.
        "fan-publisher" => {
            let d = child_domain();
            let n = env_u64("N") as usize;
            let rounds = env_u64("ROUNDS");
            let topics: Vec<Topic> = (0..n).map(|i| Topic::open(&d, &format!("t{i}")).unwrap()).collect();
            let mut pubs: Vec<_> = topics.iter().map(|t| t.publisher().unwrap()).collect();
            let mut rng = Rng(env_u64("SEED") | 1);
            for r in 0..rounds {
                let mut order: Vec<usize> = (0..n).collect();
                for i in (1..n).rev() {
                    order.swap(i, rng.below(i as u64 + 1) as usize);
                }
                for i in order {
                    pubs[i].send(&[(i % 256) as u8, r as u8]).unwrap();
                    if rng.below(8) == 0 {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
            }
        }
        // Waits on N topics with a WaitSet and checks every message arrives, in order.
        "fan-waiter" => {
            let d = child_domain();
            let n = env_u64("N") as usize;
            let rounds = env_u64("ROUNDS");
            let subs: Vec<_> =
                (0..n).map(|i| Topic::open(&d, &format!("t{i}")).unwrap().subscriber().unwrap()).collect();
            for s in &subs {
                s.seek(1);
            }
            println!("@@ready");
            let refs: Vec<&dyn Waitable> = subs.iter().map(|s| s as &dyn Waitable).collect();
            let mut ws = WaitSet::new();
            let mut got = vec![0u64; n];
            let total = n as u64 * rounds;
            let mut received = 0;
            while received < total {
                let ready =
                    ws.wait_timeout(&refs, Duration::from_secs(20)).expect("wait set timed out: lost wake-up").to_vec();
                assert!(!ready.is_empty());
                let mut progressed = false;
                for i in ready {
                    while let Ok(m) = subs[i].try_recv() {
                        assert_eq!(m.data(), vec![(i % 256) as u8, got[i] as u8], "topic {i} out of order");
                        got[i] += 1;
                        received += 1;
                        progressed = true;
                    }
                }
                assert!(progressed, "a channel reported ready had nothing to read");
            }
            assert!(got.iter().all(|&g| g == rounds));
            println!("@@ok {received}");
        }
        // Creates (or opens) the topic and checks its layout.
        "create" => {
            let t = Topic::create_or_open(
                &child_domain(),
                &env_str("TOPIC"),
                &TopicConfig::default().max_message_len(256).history(16),
            )
            .unwrap();
            assert_eq!((t.max_message_len(), t.history()), (256, 16));
        }
        other => panic!("unknown child role {other}"),
    }
}

fn env(root: &Scratch, topic: &str, extra: &[(&str, String)]) -> Vec<(&'static str, String)> {
    let mut v: Vec<(&'static str, String)> =
        vec![("ROOT", root.path().display().to_string()), ("TOPIC", topic.to_owned())];
    for (k, val) in extra {
        let k: &'static str = Box::leak(k.to_string().into_boxed_str());
        v.push((k, val.clone()));
    }
    v
}

/// The next line the child said with the `@@` marker (the test harness prints its own lines
/// on the same stdout).
fn read_line(child: &mut std::process::Child) -> String {
    let out = child.stdout.as_mut().unwrap();
    loop {
        let mut line = String::new();
        // One byte at a time so no later output is buffered away.
        let mut b = [0u8; 1];
        use std::io::Read;
        let mut eof = true;
        while out.read(&mut b).unwrap_or(0) == 1 {
            eof = false;
            if b[0] == b'\n' {
                break;
            }
            line.push(b[0] as char);
        }
        // libtest may print "test child_entry ... " before the child's first words.
        if let Some(at) = line.find("@@") {
            return line[at + 2..].to_owned();
        }
        if eof {
            return String::new();
        }
    }
}

#[test]
fn publishers_and_subscribers_in_separate_processes() {
    let s = Scratch::new("procs");
    let d = s.domain("p");
    Topic::create_or_open(&d, "data", &TopicConfig::default().max_message_len(1024).history(4096)).unwrap();
    let per = 2000u64;
    let mut subs: Vec<_> = (0..2)
        .map(|_| spawn_child("child_entry", "subscriber", &env(&s, "data", &[("EXPECT", (2 * per).to_string())])))
        .collect();
    for c in &mut subs {
        assert_eq!(read_line(c), "ready");
    }
    let mut pubs: Vec<_> = (0..2u64)
        .map(|i| {
            spawn_child(
                "child_entry",
                "publisher",
                &env(
                    &s,
                    "data",
                    &[("SEED", (i + 7).to_string()), ("MAXLEN", "1024".into()), ("COUNT", per.to_string())],
                ),
            )
        })
        .collect();
    for c in &mut pubs {
        assert!(wait_with_deadline(c, 60, "publisher").success());
    }
    for c in &mut subs {
        let st = wait_with_deadline(c, 60, "subscriber");
        let rest: Vec<String> = BufReader::new(c.stdout.take().unwrap()).lines().map_while(Result::ok).collect();
        assert!(st.success(), "subscriber failed: {rest:?}");
        assert!(rest.iter().any(|l| l.ends_with(&format!("@@ok {}", 2 * per))), "{rest:?}");
    }
}

fn waitset_over_many_topics(no_waitv: bool) {
    let s = Scratch::new("fan");
    let d = s.domain("p");
    let n = 128;
    for i in 0..n {
        Topic::create_or_open(&d, &format!("t{i}"), &TopicConfig::default().max_message_len(8).history(64)).unwrap();
    }
    let mut extra = vec![("N", n.to_string()), ("ROUNDS", "20".to_string())];
    if no_waitv {
        extra.push(("SHMBUS_NO_WAITV", "1".to_string()));
    }
    let mut waiter = spawn_child("child_entry", "fan-waiter", &env(&s, "-", &extra));
    assert_eq!(read_line(&mut waiter), "ready");
    extra.push(("SEED", "42".to_string()));
    let mut publisher = spawn_child("child_entry", "fan-publisher", &env(&s, "-", &extra));
    assert!(wait_with_deadline(&mut publisher, 60, "fan publisher").success());
    assert!(wait_with_deadline(&mut waiter, 60, "fan waiter").success());
    assert_eq!(read_line(&mut waiter), format!("ok {}", n * 20));
}

#[test]
fn waitset_over_128_topics_with_futex_waitv() {
    waitset_over_many_topics(false);
}

#[test]
fn waitset_over_128_topics_with_the_fallback() {
    waitset_over_many_topics(true);
}

#[test]
fn a_publisher_dying_after_its_claim_becomes_a_gap_not_a_hang() {
    let s = Scratch::new("claim");
    let d = s.domain("p");
    let t = Topic::create_or_open(&d, "data", &TopicConfig::default().max_message_len(64).history(4).spare_slots(1))
        .unwrap();
    let sub = t.subscriber().unwrap();
    let mut child = spawn_child("child_entry", "claim-and-hang", &env(&s, "data", &[]));
    assert_eq!(read_line(&mut child), "claimed 1");
    // A live claimant is waited for, never skipped.
    assert_eq!(sub.recv_timeout(Duration::from_millis(50)).unwrap_err(), TopicRecvTimeoutError::Timeout);
    assert!(!sub.is_ready());
    sigkill(&mut child);
    child.wait().unwrap();
    // Without any further publish, the waiting subscriber notices the death.
    let start = Instant::now();
    assert_eq!(sub.recv_timeout(Duration::from_secs(10)).unwrap_err(), TopicRecvTimeoutError::Lagged { missed: 1 });
    eprintln!("@@gap noticed {:?} after the kill", start.elapsed());
    // The dead publisher's slot was reclaimed: every slot is usable again.
    let mut p = t.publisher().unwrap();
    assert_eq!(p.send(b"next").unwrap(), 2);
    assert_eq!(sub.try_recv().unwrap().data(), b"next");
    let slots = Topic::status(&d, "data").unwrap().slots;
    for i in 0..slots + 2 {
        p.send(&i.to_le_bytes()).unwrap();
    }
    assert_eq!(sub.latest().unwrap().seq(), 2 + slots + 2);
    assert_eq!(Topic::status(&d, "data").unwrap().publishers, 1);
}

/// A `WaitSet` notices a dead claimant through `Subscriber::recheck` (`is_ready` itself looks
/// only), and the receive that follows reports the gap.
#[test]
fn a_wait_set_notices_a_publisher_dying_after_its_claim() {
    let s = Scratch::new("claimws");
    let d = s.domain("p");
    let t = Topic::create_or_open(&d, "data", &TopicConfig::default().max_message_len(64).history(4).spare_slots(1))
        .unwrap();
    let sub = t.subscriber().unwrap();
    let mut child = spawn_child("child_entry", "claim-and-hang", &env(&s, "data", &[]));
    assert_eq!(read_line(&mut child), "claimed 1");
    let mut ws = WaitSet::new();
    assert_eq!(ws.wait_timeout(&[&sub], Duration::from_millis(50)).unwrap_err(), WaitTimeoutError::Timeout);
    assert!(!sub.is_ready());
    sigkill(&mut child);
    child.wait().unwrap();
    // Asking is_ready does not probe or reclaim: it stays false however often it is asked.
    for _ in 0..3 {
        assert!(!sub.is_ready());
        std::thread::sleep(Duration::from_millis(2));
    }
    let start = Instant::now();
    assert_eq!(ws.wait_timeout(&[&sub], Duration::from_secs(10)).unwrap(), &[0]);
    eprintln!("@@gap noticed by the wait set {:?} after the kill", start.elapsed());
    assert_eq!(sub.try_recv().unwrap_err(), TopicTryRecvError::Lagged { missed: 1 });
    assert_eq!(sub.next_seq(), 2);
}

#[test]
fn publishers_dying_one_after_another_after_their_claims_make_one_gap() {
    let s = Scratch::new("claims");
    let d = s.domain("p");
    let t = Topic::create_or_open(&d, "data", &TopicConfig::default().max_message_len(64).history(4).spare_slots(2))
        .unwrap();
    let sub = t.subscriber().unwrap();
    let mut p = t.publisher().unwrap();
    assert_eq!(p.send(b"first").unwrap(), 1);
    // Three publishers claim 2, 3, 4 and die before committing; a live one claims 5.
    for k in 2..=4 {
        let mut child = spawn_child("child_entry", "claim-and-hang", &env(&s, "data", &[]));
        assert_eq!(read_line(&mut child), format!("claimed {k}"));
        sigkill(&mut child);
        child.wait().unwrap();
    }
    let mut live = spawn_child("child_entry", "claim-and-hang", &env(&s, "data", &[]));
    assert_eq!(read_line(&mut live), "claimed 5");
    assert_eq!(sub.recv_timeout(Duration::from_secs(5)).unwrap().data(), b"first");
    // One gap for the three dead claims, not three; the live claimant is waited for.
    assert_eq!(sub.recv_timeout(Duration::from_secs(10)).unwrap_err(), TopicRecvTimeoutError::Lagged { missed: 3 });
    assert_eq!(sub.next_seq(), 5);
    assert_eq!(sub.recv_timeout(Duration::from_millis(50)).unwrap_err(), TopicRecvTimeoutError::Timeout);
    sigkill(&mut live);
    live.wait().unwrap();
    assert_eq!(sub.recv_timeout(Duration::from_secs(10)).unwrap_err(), TopicRecvTimeoutError::Lagged { missed: 1 });
    assert_eq!(p.send(b"after").unwrap(), 6);
    assert_eq!(sub.recv_timeout(Duration::from_secs(5)).unwrap().data(), b"after");
}

#[test]
fn pins_of_a_killed_subscriber_are_reclaimed() {
    let s = Scratch::new("pins");
    let d = s.domain("p");
    // Two slots in all, both to be pinned by the child.
    let t = Topic::create_or_open(&d, "data", &TopicConfig::default().max_message_len(64).history(1).spare_slots(1))
        .unwrap();
    let mut p = t.publisher().unwrap();
    p.send(b"one").unwrap();
    p.send(b"two").unwrap();
    let mut child = spawn_child("child_entry", "hold-pins", &env(&s, "data", &[("PINS", "2".into())]));
    assert_eq!(read_line(&mut child), "pinned 2");
    assert_eq!(Topic::status(&d, "data").unwrap().pinned_slots, 2);
    assert!(matches!(p.send(b"three"), Err(shmbus::topic::TopicSendError::AllPinned { slots: 2 })));
    sigkill(&mut child);
    child.wait().unwrap();
    // The next publish finds every slot pinned, reclaims the dead subscriber and succeeds.
    assert_eq!(p.send(b"three").unwrap(), 3);
    let st = Topic::status(&d, "data").unwrap();
    assert_eq!(st.pinned_slots, 0);
    assert_eq!(st.subscribers, 0);
}

#[test]
fn sigkill_publishers_and_subscribers_at_random_points() {
    let iterations: u64 = std::env::var("SHMBUS_KILL_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let s = Scratch::new("kill");
    let d = s.domain("p");
    let max = 64 * 1024;
    let t = Topic::create_or_open(&d, "data", &TopicConfig::default().max_message_len(max).history(8).spare_slots(4))
        .unwrap();
    let mut rng = Rng::from_env_or_clock();

    // A verifier in this process checks every message it can get.
    let stop = Arc::new(AtomicBool::new(false));
    let verified = Arc::new(AtomicU64::new(0));
    let gaps = Arc::new(AtomicU64::new(0));
    let verifier = {
        let sub = t.subscriber().unwrap();
        let (stop, verified, gaps) = (stop.clone(), verified.clone(), gaps.clone());
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                match sub.recv_into_timeout(&mut buf, Duration::from_millis(20)) {
                    Ok(_) => {
                        assert!(check_message(&buf).is_some(), "verifier received a torn message");
                        verified.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(TopicRecvTimeoutError::Lagged { missed }) => {
                        gaps.fetch_add(missed, Ordering::Relaxed);
                    }
                    Err(TopicRecvTimeoutError::Timeout) => {}
                    Err(e) => panic!("verifier: {e}"),
                }
            }
        })
    };

    let mut probe = t.publisher().unwrap();
    let mut probe_buf = vec![0u8; 64];
    for it in 0..iterations {
        let seed = rng.next();
        let mut publisher = spawn_child(
            "child_entry",
            "publisher",
            &env(&s, "data", &[("SEED", seed.to_string()), ("MAXLEN", max.to_string()), ("COUNT", "0".into())]),
        );
        let mut pinner = spawn_child("child_entry", "pinner", &env(&s, "data", &[("SEED", (seed >> 1).to_string())]));
        assert_eq!(read_line(&mut publisher), "ready");
        assert_eq!(read_line(&mut pinner), "ready");
        std::thread::sleep(Duration::from_micros(rng.below(8000)));
        if rng.below(2) == 0 {
            sigkill(&mut publisher);
            std::thread::sleep(Duration::from_micros(rng.below(2000)));
            sigkill(&mut pinner);
        } else {
            sigkill(&mut pinner);
            std::thread::sleep(Duration::from_micros(rng.below(2000)));
            sigkill(&mut publisher);
        }
        let ps = publisher.wait().unwrap();
        let ss = pinner.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(ps.signal(), Some(libc::SIGKILL), "iteration {it}: publisher ended otherwise: {ps:?}");
        assert_eq!(
            ss.signal(),
            Some(libc::SIGKILL),
            "iteration {it}: pinner ended otherwise (exit 3 = torn sample): {ss:?}"
        );

        // Nothing is wedged: the dead are reclaimed, no pins remain, and a new message
        // reaches the verifier.
        t.reclaim_dead();
        let st = Topic::status(&d, "data").unwrap();
        assert_eq!(st.pinned_slots, 0, "iteration {it}: pins of dead subscribers remain");
        assert_eq!((st.publishers, st.subscribers), (1, 1), "iteration {it}: dead participants remain");
        let before = verified.load(Ordering::Relaxed);
        let n = make_message(0, it, 64, &mut probe_buf);
        probe.send(&probe_buf[..n]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while verified.load(Ordering::Relaxed) == before {
            assert!(Instant::now() < deadline, "iteration {it}: verifier stuck after the kill");
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    stop.store(true, Ordering::Relaxed);
    verifier.join().expect("verifier failed");
    eprintln!(
        "@@{iterations} kill rounds: {} messages verified, {} skipped as gaps",
        verified.load(Ordering::Relaxed),
        gaps.load(Ordering::Relaxed)
    );
    assert!(verified.load(Ordering::Relaxed) >= iterations);
}

#[test]
fn racing_creators_never_see_a_half_built_topic() {
    let s = Scratch::new("race");
    let rounds = 10;
    for round in 0..rounds {
        let name = format!("r{round}");
        // Four processes and four threads create the same topic at once.
        let mut children: Vec<_> = (0..4).map(|_| spawn_child("child_entry", "create", &env(&s, &name, &[]))).collect();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (root, name) = (s.path().to_owned(), name.clone());
                std::thread::spawn(move || {
                    let d = Domain::with_root("p", root).unwrap();
                    let t = Topic::create_or_open(&d, &name, &TopicConfig::default().max_message_len(256).history(16))
                        .unwrap();
                    assert_eq!((t.max_message_len(), t.history()), (256, 16));
                })
            })
            .collect();
        for h in threads {
            h.join().unwrap();
        }
        for c in &mut children {
            assert!(wait_with_deadline(c, 30, "creator").success());
        }
    }
    // Only final names remain: no temporary files leaked.
    let left: Vec<_> = std::fs::read_dir(s.path().join("shmbus.p")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), rounds, "{left:?}");
    let _ = TopicTryRecvError::Empty;
}
