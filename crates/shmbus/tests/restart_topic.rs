//! Restart after a crash, for every role of a topic: a child process in the role is
//! SIGKILLed at a random moment of its work, then a replacement is started, and the *first*
//! replacement must work (no `Busy`, "gone" or "corrupt" from the corpse): a publisher
//! publishes, a subscriber receives.
//! Kills per role: SHMBUS_RESTARTS (default 8). Seed: SHMBUS_SEED.

#![cfg(not(loom))]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::child_role;
use common::restart::{fail, kill_and_restart};
use shmbus::topic::{Topic, TopicConfig, TopicRecvTimeoutError};
use shmbus::Domain;

const NAME: &str = "restart";

fn topic_config() -> TopicConfig {
    // Three slots, so a subscriber that dies holding pins pins all of them.
    TopicConfig::default().max_message_len(64).history(2).spare_slots(1)
}

// ---------------------------------------------------------------------------------------
// Children: MODE=work loops until killed; MODE=restart does a bounded job and exits 0.

#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    let root = PathBuf::from(std::env::var("SHMBUS_ROOT").unwrap());
    let d = Domain::with_root("r", &root).unwrap();
    let forever = std::env::var("MODE").unwrap() == "work";
    match role.as_str() {
        "publisher" => publisher(&d, forever),
        "subscriber" => subscriber(&d, forever),
        other => panic!("unknown child role {other}"),
    }
}

fn publisher(d: &Domain, forever: bool) {
    let t = Topic::open(d, NAME).unwrap_or_else(|e| fail(format!("publisher open: {e}")));
    let mut p = t.publisher().unwrap_or_else(|e| fail(format!("publisher: {e}")));
    for i in 0u64.. {
        if !forever && i == 50 {
            return;
        }
        // Loans and copies, so that a kill lands in either.
        let r = if i % 2 == 0 {
            p.send(format!("p{i}").as_bytes())
        } else {
            p.loan().and_then(|mut l| {
                l[..4].copy_from_slice(b"loan");
                l.truncate(4);
                l.send()
            })
        };
        if let Err(e) = r {
            fail(format!("publish {i}: {e}"));
        }
    }
}

fn subscriber(d: &Domain, forever: bool) {
    let t = Topic::open(d, NAME).unwrap_or_else(|e| fail(format!("subscriber open: {e}")));
    let s = t.subscriber().unwrap_or_else(|e| fail(format!("subscriber: {e}")));
    s.set_pin_budget(3);
    let mut held = Vec::new();
    let mut got = 0;
    let end = Instant::now() + Duration::from_secs(10);
    while forever || got < 20 {
        if Instant::now() > end {
            fail(format!("subscriber: {got} messages in 10 s"));
        }
        match s.recv_ref_timeout(Duration::from_millis(100)) {
            Ok(sample) => {
                got += 1;
                // Hold up to three pins (every slot), so a kill often leaves them all set.
                held.push(sample);
                if held.len() == 3 {
                    held.clear();
                }
            }
            Err(TopicRecvTimeoutError::Lagged { .. } | TopicRecvTimeoutError::Timeout) => {}
            Err(TopicRecvTimeoutError::PinLimit { .. }) => held.clear(),
            Err(e) => fail(format!("subscriber receive: {e}")),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Parents

#[test]
fn topic_publisher_restarts() {
    if child_role().is_some() {
        return;
    }
    kill_and_restart(
        "restart-pub",
        "publisher",
        |d| Topic::create_or_open(d, NAME, &topic_config()).unwrap().subscriber().unwrap(),
        |sub| {
            // Drain as a subscriber would; gaps from killed publishers are fine.
            match sub.recv_timeout(Duration::from_millis(1)) {
                Ok(_) | Err(TopicRecvTimeoutError::Timeout | TopicRecvTimeoutError::Lagged { .. }) => {}
                Err(e) => panic!("subscriber: {e}"),
            }
        },
    );
}

#[test]
fn topic_subscriber_restarts() {
    if child_role().is_some() {
        return;
    }
    let mut n = 0u64;
    kill_and_restart(
        "restart-sub",
        "subscriber",
        |d| Topic::create_or_open(d, NAME, &topic_config()).unwrap().publisher().unwrap(),
        |publ| {
            n += 1;
            // All slots pinned by a live subscriber is allowed; by a dead one, not for long.
            let _ = publ.send(format!("m{n}").as_bytes());
            std::thread::sleep(Duration::from_micros(300));
        },
    );
}
