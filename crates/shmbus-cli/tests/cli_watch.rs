//! `shmbus watch`: a domain's channels created and removed and its participants joined and
//! left, printed by a real `shmbus watch` process while other `shmbus` processes come and go
//! (one of them killed by SIGKILL).

mod common;

use std::io::BufRead;
use std::process::{Child, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use common::Root;
use serde_json::Value;

/// A running `shmbus watch --json`, its lines read by a thread.
struct Watch {
    child: Child,
    lines: Receiver<Value>,
}

impl Watch {
    fn start(r: &Root, args: &[&str]) -> Watch {
        let mut child = r.cmd(args).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(|l| l.ok()) {
                let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Watch { child, lines }
    }

    /// Lines until one matches `want` (returned last), within 20 s.
    fn until(&self, what: &str, want: impl Fn(&Value) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) => {
                    let done = want(&v);
                    seen.push(v);
                    if done {
                        return seen;
                    }
                }
                Err(_) => panic!("no {what} within 20 s; saw {seen:?}"),
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is(v: &Value, event: &str, channel: &str) -> bool {
    v["event"] == event && v["name"] == channel
}

/// Makes channels until the watch reports one: from then on it sees everything.
fn synced(r: &Root, w: &Watch) {
    for i in 0..200 {
        let name = format!("sync{i}");
        r.ok(&["create", "--domain", "w", "--kind", "topic", &name]);
        if let Ok(v) = w.lines.recv_timeout(Duration::from_millis(100)) {
            assert_eq!(v["event"], "created", "{v}");
            return;
        }
    }
    panic!("the watch reported nothing");
}

#[test]
fn watch_prints_channels_and_participants_as_they_come_and_go() {
    let r = Root::new();
    r.ok(&["create", "--domain", "w", "--kind", "topic", "first"]);
    let w = Watch::start(&r, &["watch", "--domain", "w", "--json", "--interval-ms", "10"]);
    synced(&r, &w);

    // A subscriber waiting for one message: it joins; the message ends it, and it leaves.
    let mut sub = r
        .cmd(&["sub", "--domain", "w", "t", "--count", "1", "--wait", "20", "--timeout-ms", "20000"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    r.ok(&["create", "--domain", "w", "--kind", "topic", "t"]);
    let seen = w.until("the subscriber's join", |v| is(v, "joined", "t") && v["role"] == "subscriber");
    assert!(seen.iter().any(|v| is(v, "created", "t") && v["kind"] == "topic"), "{seen:?}");
    let joined = seen.last().unwrap();
    assert_eq!(joined["pid"], sub.id(), "{joined}");
    assert_eq!((joined["domain"].as_str(), joined["kind"].as_str()), (Some("w"), Some("topic")));

    r.ok(&["pub", "--domain", "w", "t", "--data", "hello"]);
    assert!(sub.wait().unwrap().success());
    let left = w.until("the subscriber's leave", |v| is(v, "left", "t") && v["role"] == "subscriber");
    assert_eq!(left.last().unwrap()["pid"], sub.id());

    // A participant killed by SIGKILL leaves too (its entry waits to be reclaimed).
    let mut victim =
        r.cmd(&["sub", "--domain", "w", "first", "--timeout-ms", "60000"]).stdout(Stdio::null()).spawn().unwrap();
    w.until("the victim's join", |v| is(v, "joined", "first") && v["pid"] == victim.id());
    victim.kill().unwrap();
    victim.wait().unwrap();
    w.until("the victim's leave", |v| is(v, "left", "first") && v["pid"] == victim.id());

    r.ok(&["rm", "--domain", "w", "t"]);
    w.until("the removal", |v| is(v, "removed", "t") && v["kind"] == "topic");
}

#[test]
fn watch_stops_after_count_and_prints_plain_lines() {
    let r = Root::new();
    r.ok(&["create", "--domain", "w", "--kind", "queue", "q0"]);
    let child = r.cmd(&["watch", "--domain", "w", "--count", "1"]).stdout(Stdio::piped()).spawn().unwrap();
    // Until it has started watching, a channel made is part of its starting point: make
    // them until one is reported.
    let done = std::thread::spawn(move || child.wait_with_output().unwrap());
    let mut i = 0;
    while !done.is_finished() {
        r.ok(&["create", "--domain", "w", "--kind", "queue", &format!("q{}", i + 1)]);
        i += 1;
        std::thread::sleep(Duration::from_millis(20));
        assert!(i < 1000, "watch --count 1 did not end");
    }
    let out = done.join().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].starts_with("created queue w/q"), "{text}");
}

#[test]
fn watch_without_a_domain_watches_them_all() {
    let r = Root::new();
    r.ok(&["create", "--domain", "a", "--kind", "topic", "t0"]);
    let mut cmd = r.cmd(&["watch", "--json"]);
    cmd.env_remove("SHMBUS_DOMAIN");
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    let (tx, lines) = channel();
    std::thread::spawn(move || {
        for line in out.lines().map_while(|l| l.ok()) {
            let _ = tx.send(serde_json::from_str::<Value>(&line).unwrap());
        }
    });
    // A domain made after the watch started, until one is reported.
    let mut i = 0;
    let first = loop {
        r.ok(&["create", "--domain", &format!("new{i}"), "--kind", "queue", "q"]);
        if let Ok(v) = lines.recv_timeout(Duration::from_millis(100)) {
            break v;
        }
        i += 1;
        assert!(i < 200, "the watch reported nothing");
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        (first["event"].as_str(), first["name"].as_str(), first["kind"].as_str()),
        (Some("created"), Some("q"), Some("queue"))
    );
    assert!(first["domain"].as_str().is_some_and(|d| d.starts_with("new")), "{first}");
    assert!(first["role"].is_null() && first["pid"].is_null(), "{first}");
}
