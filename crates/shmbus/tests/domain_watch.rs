//! Discovery events (`Domain::watch`): channels created and removed, participants joined and
//! left, in this process and across processes, including one killed by SIGKILL.

#![cfg(not(loom))]

mod common;

use std::io::BufRead;
use std::time::{Duration, Instant};

use common::{child_role, sigkill, spawn_child, Scratch};
use shmbus::watch::{DomainEvent, DomainWatch, EventKind};
use shmbus::{Domain, Kind, Queue, QueueConfig, Topic, TopicConfig};

const WAIT: Duration = Duration::from_secs(10);

/// The next event, within [`WAIT`].
fn next(w: &mut DomainWatch) -> DomainEvent {
    w.next_timeout(WAIT).unwrap().expect("an event within 10 s")
}

/// Events until one matches `want`, within [`WAIT`] (the ones before it are returned too).
fn until(w: &mut DomainWatch, want: impl Fn(&DomainEvent) -> bool) -> Vec<DomainEvent> {
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match w.next_timeout(left).unwrap() {
            Some(e) => {
                let done = want(&e);
                seen.push(e);
                if done {
                    return seen;
                }
            }
            None => panic!("no matching event within 10 s; saw {seen:?}"),
        }
    }
}

#[test]
fn a_channel_and_its_endpoints_come_and_go() {
    let s = Scratch::new("watch-local");
    let d = s.domain("w");
    std::fs::create_dir_all(d.dir()).unwrap();
    let existing = Topic::create_or_open(&d, "before", &TopicConfig::default()).unwrap();
    let mut w = d.watch().unwrap();
    assert_eq!(w.try_next().unwrap(), None, "what existed before the watch is not reported");

    let topic = Topic::create_or_open(&d, "imu", &TopicConfig::default().max_message_len(64)).unwrap();
    let e = next(&mut w);
    assert_eq!((e.what, e.channel.as_str(), e.kind), (EventKind::Created, "imu", Some(Kind::Topic)));

    let publisher = topic.publisher().unwrap();
    let e = next(&mut w);
    assert_eq!((e.what, e.channel.as_str(), e.role), (EventKind::Joined, "imu", Some("publisher")));
    assert_eq!(e.process.unwrap().pid, std::process::id());
    assert_eq!(e.to_string(), format!("joined topic w/imu publisher pid {}", std::process::id()));
    assert_eq!(e.domain, "w");

    drop(publisher);
    let e = next(&mut w);
    assert_eq!((e.what, e.role), (EventKind::Left, Some("publisher")));

    let sub = existing.subscriber().unwrap();
    let e = next(&mut w);
    assert_eq!((e.what, e.channel.as_str(), e.role), (EventKind::Joined, "before", Some("subscriber")));
    drop(sub);
    assert_eq!(next(&mut w).what, EventKind::Left);

    // Removed and made again by the same process: removed, then created.
    drop(topic);
    d.open_dir().unwrap().remove_file("imu").unwrap();
    let topic = Topic::create_or_open(&d, "imu", &TopicConfig::default().max_message_len(128)).unwrap();
    let seen: Vec<_> = (0..2).map(|_| next(&mut w)).map(|e| (e.what, e.channel)).collect();
    assert_eq!(seen, [(EventKind::Removed, "imu".to_owned()), (EventKind::Created, "imu".to_owned())]);
    drop(topic);
    d.open_dir().unwrap().remove_file("imu").unwrap();
    let e = next(&mut w);
    assert_eq!((e.what, e.channel.as_str(), e.kind), (EventKind::Removed, "imu", Some(Kind::Topic)));
    assert_eq!(w.try_next().unwrap(), None);
}

#[test]
fn a_domain_made_after_the_watch_is_seen() {
    let s = Scratch::new("watch-late-dir");
    let d = s.domain("late");
    let mut w = d.watch().unwrap();
    assert_eq!(w.next_timeout(Duration::from_millis(50)).unwrap(), None);
    let _q = Queue::create_or_open(&d, "jobs", &QueueConfig::default()).unwrap();
    let e = next(&mut w);
    assert_eq!((e.what, e.channel.as_str(), e.kind), (EventKind::Created, "jobs", Some(Kind::Queue)));
}

/// Child: opens queue `q` of the domain at `$SHMBUS_TEST_ROOT`, makes a consumer, says
/// "ready" and waits to be killed.
#[test]
fn child_main() {
    let Some(role) = child_role() else { return };
    let root = std::env::var("SHMBUS_TEST_ROOT").unwrap();
    let d = Domain::with_root("procs", root).unwrap();
    let q = Queue::open(&d, "q").unwrap();
    let consumer = q.consumer().unwrap();
    println!("ready {role}");
    std::thread::sleep(Duration::from_secs(30));
    drop(consumer);
}

#[test]
fn another_process_joins_and_is_seen_to_leave_when_killed() {
    let s = Scratch::new("watch-procs");
    let d = s.domain("procs");
    let _q = Queue::create_or_open(&d, "q", &QueueConfig::default()).unwrap();
    let mut w = d.watch().unwrap();
    w.set_participant_interval(Duration::from_millis(20));
    let env = [("SHMBUS_TEST_ROOT", s.path().display().to_string())];
    let mut child = spawn_child("child_main", "consumer", &env);
    // The child's stdout also carries the test harness's own words, on the same line too.
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    let ready = out.lines().map(|l| l.unwrap()).find(|l| l.contains("ready consumer"));
    assert!(ready.is_some(), "the child ended before it was ready");
    let pid = child.id();

    let seen = until(&mut w, |e| e.what == EventKind::Joined);
    let e = seen.last().unwrap();
    assert_eq!((e.channel.as_str(), e.role, e.process.map(|p| p.pid)), ("q", Some("consumer"), Some(pid)));

    sigkill(&mut child);
    // Its entry stays until reclaimed; the watch sees the process gone.
    let seen = until(&mut w, |e| e.what == EventKind::Left);
    let e = seen.last().unwrap();
    assert_eq!((e.channel.as_str(), e.role, e.process.map(|p| p.pid)), ("q", Some("consumer"), Some(pid)));
    assert_eq!(w.next_timeout(Duration::from_millis(100)).unwrap(), None, "one leave, once");
}

#[test]
fn a_channels_only_watch_reports_no_participants() {
    let s = Scratch::new("watch-channels-only");
    let d = s.domain("c");
    let mut w = d.watch().unwrap();
    w.channels_only();
    let topic = Topic::create_or_open(&d, "t", &TopicConfig::default()).unwrap();
    let _publisher = topic.publisher().unwrap();
    let e = next(&mut w);
    assert_eq!((e.what, e.channel.as_str()), (EventKind::Created, "t"));
    assert_eq!(w.next_timeout(Duration::from_millis(300)).unwrap(), None, "no join reported");
    d.open_dir().unwrap().remove_file("t").unwrap();
    assert_eq!(next(&mut w).what, EventKind::Removed);
}

#[test]
fn a_watch_of_every_domain_sees_a_new_one() {
    let s = Scratch::new("watch-all");
    let _a = Topic::create_or_open(&s.domain("a"), "t", &TopicConfig::default()).unwrap();
    let mut w = DomainWatch::all(s.path()).unwrap();
    let _b = Queue::create_or_open(&s.domain("b"), "q", &QueueConfig::default()).unwrap();
    let e = next(&mut w);
    assert_eq!((e.what, e.domain.as_str(), e.channel.as_str()), (EventKind::Created, "b", "q"));
    let _p = _a.publisher().unwrap();
    let e = next(&mut w);
    assert_eq!((e.what, e.domain.as_str(), e.channel.as_str()), (EventKind::Joined, "a", "t"));
}
