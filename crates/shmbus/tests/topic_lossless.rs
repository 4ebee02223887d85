//! Lossless topics (`block` and `fail` policies, reliable subscribers), across real
//! processes: every message delivered in order to a slow subscriber; a SIGKILLed reliable
//! subscriber releases a blocked publisher at once; a stuck one after the reliable timeout,
//! and it learns it; `fail` returns `Full`; `overwrite` is unchanged.

#![cfg(not(loom))]

mod common;

use std::io::{BufRead, BufReader};
use std::process::Child;
use std::time::{Duration, Instant};

use common::{child_role, env_str, env_u64, sigkill, spawn_child, wait_with_deadline, Scratch};
use shmbus::stats::channel_stats;
use shmbus::topic::{
    DeliveryPolicy, Topic, TopicConfig, TopicSendError, TopicSendTimeoutError, TopicTryRecvError, TopicTrySendError,
};
use shmbus::{Domain, OpenError};

fn child_domain() -> Domain {
    Domain::with_root("p", env_str("ROOT")).unwrap()
}

fn env(s: &Scratch, topic: &str, extra: &[(&str, String)]) -> Vec<(&'static str, String)> {
    let mut v: Vec<(&'static str, String)> =
        vec![("ROOT", s.path().display().to_string()), ("TOPIC", topic.to_string())];
    for (k, val) in extra {
        v.push((Box::leak(k.to_string().into_boxed_str()), val.clone()));
    }
    v
}

/// The next line the child prints with the `@@` prefix (other output is the test harness').
fn read_line(c: &mut Child) -> String {
    let out = c.stdout.as_mut().unwrap();
    let mut r = BufReader::new(out);
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).unwrap() == 0 {
            return String::new();
        }
        if let Some(rest) = line.trim_end().split("@@").nth(1) {
            // One line at a time: the BufReader is dropped with whatever it buffered beyond,
            // so children print one `@@` line and then wait or exit.
            return rest.to_string();
        }
    }
}

/// Entry point of every child process: does nothing in a normal test run.
#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    let topic = Topic::open(&child_domain(), &env_str("TOPIC")).unwrap();
    match role.as_str() {
        // Receives COUNT messages reliably, slowly, checking each is the next in order.
        "slow" => {
            let sub = topic.reliable_subscriber().unwrap();
            println!("@@ready");
            let count = env_u64("COUNT");
            for i in 1..=count {
                let m = sub.recv_timeout(Duration::from_secs(30)).unwrap();
                assert_eq!(m.seq(), i, "out of order");
                assert_eq!(m.data(), i.to_le_bytes(), "payload of {i}");
                if i % 64 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            println!("@@ok {count}");
        }
        // Subscribes reliably and never reads, until ROOT/go exists; then receives once.
        "stuck" => {
            let sub = topic.reliable_subscriber().unwrap();
            println!("@@ready");
            let go = std::path::Path::new(&env_str("ROOT")).join("go");
            while !go.exists() {
                std::thread::sleep(Duration::from_millis(5));
            }
            match sub.try_recv() {
                Err(TopicTryRecvError::Evicted) => println!("@@evicted {}", sub.is_reliable()),
                other => println!("@@unexpected {other:?}"),
            }
        }
        // Publishes one message with a short timeout (a one-shot publisher that gives up).
        "pub_once" => {
            let mut p = topic.publisher().unwrap();
            match p.send_timeout(b"once", Duration::from_millis(env_u64("TIMEOUT_MS"))) {
                Ok(k) => println!("@@sent {k}"),
                Err(TopicSendTimeoutError::Timeout) => println!("@@timeout"),
                Err(e) => println!("@@unexpected {e:?}"),
            }
        }
        other => panic!("unknown role {other}"),
    }
}

/// A child stopped with SIGSTOP: alive, registered, and running no code at all. Dropping
/// it resumes and kills it, so a failing test leaves no stopped process behind.
struct Stopped(Child);

impl Stopped {
    /// Spawns a `stuck` child (a reliable subscriber that never reads), waits until it
    /// subscribed, and stops it.
    fn stuck(s: &Scratch, topic: &str) -> Stopped {
        let mut child = spawn_child("child_entry", "stuck", &env(s, topic, &[]));
        assert_eq!(read_line(&mut child), "ready");
        signal(&child, libc::SIGSTOP);
        Stopped(child)
    }

    /// Resumes it (SIGCONT) once ROOT/go exists, and returns what it printed: how it
    /// learnt what happened to it.
    fn resume(mut self) -> String {
        signal(&self.0, libc::SIGCONT);
        let line = read_line(&mut self.0);
        assert!(wait_with_deadline(&mut self.0, 30, "resumed subscriber").success());
        line
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: kill(2) with the pid of our own child, not reaped yet (just checked).
            unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGCONT) };
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) with a pid of our own child, which we have not waited for yet.
    let r = unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    assert_eq!(r, 0, "kill({}, {sig})", child.id());
}

fn block_topic(d: &Domain, name: &str, timeout: Duration) -> Topic {
    let config = TopicConfig::default()
        .max_message_len(8)
        .history(8)
        .spare_slots(0)
        .policy(DeliveryPolicy::Block)
        .reliable_timeout(timeout);
    Topic::create_or_open(d, name, &config).unwrap()
}

#[test]
fn a_slow_reliable_subscriber_gets_every_message_in_order() {
    let s = Scratch::new("ll-slow");
    let d = s.domain("p");
    let topic = block_topic(&d, "t", Duration::from_secs(30));
    let count = 20_000u64;
    let mut child = spawn_child("child_entry", "slow", &env(&s, "t", &[("COUNT", count.to_string())]));
    assert_eq!(read_line(&mut child), "ready");
    assert_eq!(Topic::status(&d, "t").unwrap().reliable_subscribers, 1);
    let mut p = topic.publisher().unwrap();
    for i in 1..=count {
        assert_eq!(p.send(&i.to_le_bytes()).unwrap(), i);
    }
    assert!(wait_with_deadline(&mut child, 60, "slow subscriber").success());
    assert_eq!(read_line(&mut child), format!("ok {count}"));
    // It did have to wait: 8 slots for 20 000 messages to a subscriber that sleeps.
    let stats = channel_stats(&d, "t").unwrap();
    assert!(stats.total("publisher").blocked > 0, "{:?}", stats.total("publisher"));
    assert_eq!(stats.total("publisher").drops, 0, "nobody was evicted");
}

/// Fills the topic until a reliable subscriber that does not read holds the publisher.
fn fill(p: &mut shmbus::topic::Publisher) {
    for i in 0..100u64 {
        match p.try_send(&i.to_le_bytes()) {
            Ok(_) => {}
            Err(TopicTrySendError::Full { .. }) => return,
            Err(e) => panic!("{e}"),
        }
    }
    panic!("100 messages into 8 slots and never full");
}

#[test]
fn a_sigkilled_reliable_subscriber_releases_a_blocked_publisher() {
    let s = Scratch::new("ll-kill");
    let d = s.domain("p");
    // A reliable timeout far longer than the send timeout below: only the death can
    // release the publisher.
    let topic = block_topic(&d, "t", Duration::from_secs(600));
    let mut child = spawn_child("child_entry", "stuck", &env(&s, "t", &[]));
    assert_eq!(read_line(&mut child), "ready");
    let mut p = topic.publisher().unwrap();
    fill(&mut p);
    assert!(matches!(p.send_timeout(b"x", Duration::from_millis(50)), Err(TopicSendTimeoutError::Timeout)));
    let sender = std::thread::spawn(move || {
        let r = p.send_timeout(b"after", Duration::from_secs(30));
        (r, Instant::now(), p) // kept registered: its counters are read below
    });
    std::thread::sleep(Duration::from_millis(100)); // let it sleep on the futex
    sigkill(&mut child);
    let killed = Instant::now();
    let _ = child.wait();
    let (r, released, _p) = sender.join().unwrap();
    assert!(r.is_ok(), "{r:?}");
    // Documented: within the 10 ms liveness poll plus a /proc read; the test only checks it
    // was the death, not the 600 s reliable timeout, with a tolerance for a busy machine.
    assert!(released.duration_since(killed) < Duration::from_secs(20));
    assert_eq!(Topic::status(&d, "t").unwrap().reliable_subscribers, 0);
    assert_eq!(channel_stats(&d, "t").unwrap().total("publisher").drops, 1, "the drop is counted");
}

#[test]
fn a_stuck_reliable_subscriber_is_evicted_after_the_timeout_and_told() {
    let s = Scratch::new("ll-stuck");
    let d = s.domain("p");
    let topic = block_topic(&d, "t", Duration::from_millis(300));
    let mut child = spawn_child("child_entry", "stuck", &env(&s, "t", &[]));
    assert_eq!(read_line(&mut child), "ready");
    let mut p = topic.publisher().unwrap();
    // Before the fill: the clock starts when a publisher is first held back, in `fill`.
    let start = Instant::now();
    fill(&mut p);
    // Alive and not reading: the publisher waits the reliable timeout, then evicts it.
    p.send_timeout(b"after", Duration::from_secs(30)).unwrap();
    assert!(start.elapsed() >= Duration::from_millis(300), "evicted before its timeout");
    let st = Topic::status(&d, "t").unwrap();
    assert_eq!((st.subscribers, st.reliable_subscribers), (1, 0));
    assert_eq!(channel_stats(&d, "t").unwrap().total("publisher").drops, 1, "the eviction is counted");
    // Now lossy: publishing goes on without waiting.
    for i in 0..50u64 {
        p.try_send(&i.to_le_bytes()).unwrap();
    }
    std::fs::write(s.path().join("go"), b"").unwrap();
    assert_eq!(read_line(&mut child), "evicted false");
    assert!(wait_with_deadline(&mut child, 30, "stuck subscriber").success());
}

/// Publishers that come and go, each giving up long before the reliable timeout, still get
/// a stopped reliable subscriber evicted after about one reliable timeout in all: the clock
/// is the topic's, not a publisher's. Then the subscriber, resumed, is told it was evicted.
#[test]
fn publishers_that_give_up_add_up_to_one_reliable_timeout() {
    let s = Scratch::new("ll-oneshot");
    let d = s.domain("p");
    let topic = block_topic(&d, "t", Duration::from_millis(1000));
    let stuck = Stopped::stuck(&s, "t");
    fill(&mut topic.publisher().unwrap());
    // Each one waits 200 ms at most: five of them make the reliable timeout (the clock
    // started in `fill`, and runs between them too). Without a shared clock every one
    // starts afresh and none ever gets through.
    let mut timeouts = 0;
    let sent = loop {
        let mut child = spawn_child("child_entry", "pub_once", &env(&s, "t", &[("TIMEOUT_MS", "200".into())]));
        let line = read_line(&mut child);
        assert!(wait_with_deadline(&mut child, 30, "one-shot publisher").success());
        match line.as_str() {
            "timeout" => timeouts += 1,
            l if l.starts_with("sent ") => break l.to_string(),
            other => panic!("one-shot publisher: {other:?}"),
        }
        assert!(timeouts < 15, "{timeouts} one-shot publishers of 200 ms each timed out; the reliable timeout is 1 s");
    };
    assert_eq!(sent, "sent 9", "after {timeouts} timeouts");
    let st = Topic::status(&d, "t").unwrap();
    assert_eq!((st.subscribers, st.reliable_subscribers), (1, 0));
    std::fs::write(s.path().join("go"), b"").unwrap();
    assert_eq!(stuck.resume(), "evicted false");
}

/// Several stopped reliable subscribers at different cursors are evicted together, after
/// one reliable timeout: not one timeout each, one after the other.
#[test]
fn stuck_subscribers_at_different_cursors_cost_one_reliable_timeout_together() {
    const STUCK: u64 = 5;
    let s = Scratch::new("ll-many");
    let d = s.domain("p");
    let timeout = Duration::from_millis(1000);
    let topic = block_topic(&d, "t", timeout);
    let mut p = topic.publisher().unwrap();
    // Subscriber i joins before message i: it stands at cursor i.
    let mut stuck = Vec::new();
    for i in 1..=STUCK {
        stuck.push(Stopped::stuck(&s, "t"));
        assert_eq!(p.send(&i.to_le_bytes()).unwrap(), i);
    }
    fill(&mut p);
    assert_eq!(Topic::status(&d, "t").unwrap().reliable_subscribers, STUCK as usize);
    let start = Instant::now();
    // The first send past the full ring waits for the subscriber at 1; by then each of the
    // others has stood still as long, and goes with it.
    p.send_timeout(b"first", Duration::from_secs(60)).unwrap();
    assert_eq!(
        Topic::status(&d, "t").unwrap().reliable_subscribers,
        0,
        "the subscribers at later cursors were left for later timeouts"
    );
    assert_eq!(channel_stats(&d, "t").unwrap().total("publisher").drops, STUCK);
    // The messages those cursors held go without waiting: the whole wait was one timeout
    // (one per stuck subscriber would be five), with slack for a slow machine.
    for i in 0..STUCK {
        p.send_timeout(&i.to_le_bytes(), Duration::from_secs(60)).unwrap();
    }
    let waited = start.elapsed();
    assert!(waited < 2 * timeout + Duration::from_millis(1500), "waited {waited:?} for {STUCK} stuck subscribers");
    std::fs::write(s.path().join("go"), b"").unwrap();
    for sub in stuck {
        assert_eq!(sub.resume(), "evicted false");
    }
}

#[test]
fn fail_returns_full_and_the_caller_retries() {
    let s = Scratch::new("ll-fail");
    let d = s.domain("p");
    let config = TopicConfig::default().max_message_len(8).history(4).spare_slots(0).policy(DeliveryPolicy::Fail);
    let topic = Topic::create_or_open(&d, "t", &config).unwrap();
    let sub = topic.reliable_subscriber().unwrap();
    let mut p = topic.publisher().unwrap();
    for i in 1..=4u64 {
        p.send(&i.to_le_bytes()).unwrap();
    }
    assert_eq!(p.send(b"5"), Err(TopicSendError::Full { seq: 1 }));
    assert!(matches!(p.try_send(b"5"), Err(TopicTrySendError::Full { seq: 1 })));
    assert!(matches!(p.send_timeout(b"5", Duration::from_secs(1)), Err(TopicSendTimeoutError::Full { seq: 1 })));
    assert!(p.loan().is_err());
    assert!(channel_stats(&d, "t").unwrap().total("publisher").full >= 4);
    assert_eq!(sub.try_recv().unwrap().seq(), 1);
    assert_eq!(p.send(b"5").unwrap(), 5);
    for i in 2..=5 {
        assert_eq!(sub.try_recv().unwrap().seq(), i);
    }
    // A lossy subscriber next to it holds nothing back.
    let lossy = topic.subscriber().unwrap();
    for _ in 0..3 {
        p.send(b"more").unwrap();
    }
    assert!(!lossy.is_reliable());
    // Dropping the reliable one lets the publisher overwrite freely.
    drop(sub);
    for _ in 0..20 {
        p.send(b"free").unwrap();
    }
}

#[test]
fn try_send_on_a_block_topic_does_not_wait() {
    let s = Scratch::new("ll-try");
    let d = s.domain("p");
    let topic = block_topic(&d, "t", Duration::from_secs(60));
    let sub = topic.reliable_subscriber().unwrap();
    let mut p = topic.publisher().unwrap();
    fill(&mut p);
    assert!(matches!(p.send_timeout(b"x", Duration::from_millis(20)), Err(TopicSendTimeoutError::Timeout)));
    assert_eq!(sub.try_recv().unwrap().seq(), 1);
    p.try_send(b"x").unwrap();
}

#[test]
fn a_late_reliable_subscriber_starts_from_the_oldest_kept_and_misses_nothing_after() {
    let s = Scratch::new("ll-late");
    let d = s.domain("p");
    let topic = block_topic(&d, "t", Duration::from_secs(60));
    let mut p = topic.publisher().unwrap();
    for i in 1..=30u64 {
        p.send(&i.to_le_bytes()).unwrap(); // no reliable subscriber: overwrites
    }
    let sub = topic.reliable_subscriber().unwrap();
    sub.seek_oldest();
    let first = sub.next_seq();
    // 30 published into 8 slots: 23..=30 are kept, and no publisher is writing now.
    assert_eq!(first, 23, "starts at the oldest message kept");
    let mut expect = first;
    let mut next = 31u64;
    // Interleaved: the publisher can never lap it.
    while expect <= 200 {
        while next <= 200 {
            match p.try_send(&next.to_le_bytes()) {
                Ok(k) => {
                    assert_eq!(k, next);
                    next += 1;
                }
                Err(TopicTrySendError::Full { .. }) => break,
                Err(e) => panic!("{e}"),
            }
        }
        let m = sub.try_recv().unwrap();
        assert_eq!((m.seq(), m.data()), (expect, &expect.to_le_bytes()[..]));
        expect += 1;
    }
}

#[test]
fn overwrite_topics_are_unchanged_and_refuse_reliable_subscribers() {
    let s = Scratch::new("ll-over");
    let d = s.domain("p");
    let topic = Topic::create_or_open(&d, "t", &TopicConfig::default().max_message_len(8).history(4)).unwrap();
    assert_eq!(topic.policy(), DeliveryPolicy::Overwrite);
    assert!(matches!(topic.reliable_subscriber(), Err(OpenError::InvalidConfig { .. })));
    let sub = topic.subscriber().unwrap();
    let mut p = topic.publisher().unwrap();
    for i in 0..100u64 {
        p.try_send(&i.to_le_bytes()).unwrap();
    }
    assert!(matches!(sub.try_recv(), Err(TopicTryRecvError::Lagged { .. })));
    // The policy is part of the layout: an unset one accepts, another one is a mismatch.
    Topic::create_or_open(&d, "t", &TopicConfig::default()).unwrap();
    let e = Topic::create_or_open(&d, "t", &TopicConfig::default().policy(DeliveryPolicy::Block)).unwrap_err();
    assert!(matches!(e, OpenError::LayoutMismatch { .. }), "{e}");
    assert_eq!(Topic::status(&d, "t").unwrap().policy, DeliveryPolicy::Overwrite);
}

#[test]
fn typed_endpoints_have_the_lossless_verbs() {
    let s = Scratch::new("ll-typed");
    let d = s.domain("p");
    let config = TopicConfig::for_type::<u64>().history(2).spare_slots(0).policy(DeliveryPolicy::Block);
    let topic = Topic::create_or_open(&d, "t", &config).unwrap();
    let sub = topic.reliable_subscriber_of::<u64>().unwrap();
    let mut p = topic.publisher_of::<u64>().unwrap();
    assert_eq!(p.try_send(&1).unwrap(), 1);
    assert_eq!(p.try_send(&2).unwrap(), 2);
    assert!(matches!(p.try_send(&3), Err(TopicTrySendError::Full { seq: 1 })));
    assert!(matches!(p.send_timeout(&3, Duration::from_millis(10)), Err(TopicSendTimeoutError::Timeout)));
    assert_eq!(sub.try_recv().unwrap(), 1);
    p.send_timeout(&3, Duration::from_secs(10)).unwrap();
    assert_eq!((sub.try_recv().unwrap(), sub.try_recv().unwrap()), (2, 3));
}

/// Garbage in the lossless words (the reliable set, the epoch, a lossy subscriber's cursor
/// word) holds a publisher back at most for the reliable timeout, and breaks nobody.
#[test]
fn garbage_in_the_lossless_words_only_delays_a_publisher() {
    use common::hostile::SharedMap;
    use shmbus::segment::{KIND_OFFSET, PARTICIPANTS_OFFSET};
    let s = Scratch::new("ll-hostile");
    let d = s.domain("p");
    let topic = block_topic(&d, "t", Duration::from_millis(200));
    let mut p = topic.publisher().unwrap(); // entry 0
    let lossy = topic.subscriber().unwrap(); // entry 1
    let map = SharedMap::new(&d.channel_path("t").unwrap());
    // The control block: tail, committed_max, next_slot, then the event line (event, space,
    // epoch, the reliable set), one 128-byte line each.
    let event_line = KIND_OFFSET + 3 * 128;
    map.store(event_line + 8, 8, 0xdead_beef); // epoch
    map.store(event_line + 16, 8, u64::MAX); // reliable set: everyone
    map.store(event_line + 24, 8, u64::MAX);
    map.store(PARTICIPANTS_OFFSET + 64 + 24, 8, 1); // the lossy subscriber's aux[0]: cursor 1
    map.store(PARTICIPANTS_OFFSET + 24, 8, 1); // the publisher's own aux[0] (its pending word)
                                               // The held words, one per entry after the slots (8 inline slots end at 2048): the lossy
                                               // subscriber's names its garbage cursor at a time that is now or later (whatever the
                                               // clock says, at most 2^31 ms ahead), the publisher's is all ones.
    let held = KIND_OFFSET + 2048;
    map.store(held + 8, 8, (0xffff_fff0 << 32) | 1);
    map.store(held, 8, u64::MAX);
    for i in 1..=40u64 {
        assert_eq!(p.send_timeout(&i.to_le_bytes(), Duration::from_secs(30)).unwrap(), i);
    }
    // The garbage cursor was evicted once (the publisher's aux[0] is no subscriber's).
    assert_eq!(channel_stats(&d, "t").unwrap().total("publisher").drops, 1);
    assert!(!lossy.is_reliable());
    let mut seen = 0;
    loop {
        match lossy.try_recv() {
            Ok(_) | Err(TopicTryRecvError::Lagged { .. }) => seen += 1,
            Err(TopicTryRecvError::Empty) => break,
            Err(e) => panic!("{e}"),
        }
        assert!(seen < 100);
    }
}
