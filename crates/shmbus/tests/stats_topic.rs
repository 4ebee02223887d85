//! The topic's counters, read back through `shmbus::stats`.

#![cfg(not(loom))]

mod common;

use common::Scratch;
use shmbus::stats::channel_stats;
use shmbus::topic::{Topic, TopicConfig};

#[test]
fn a_topic_counts_what_its_publisher_sent_and_its_subscriber_received() {
    let s = Scratch::new("stats-topic");
    let domain = s.domain("d");
    let topic = Topic::create_or_open(&domain, "t", &TopicConfig::default().history(4).spare_slots(0)).unwrap();
    let sub = topic.subscriber().unwrap();
    let mut publisher = topic.publisher().unwrap();
    // Read 2, then fall behind: 4 of the next 8 are overwritten before they are read.
    for i in 0..2u8 {
        publisher.send(&[i; 8]).unwrap();
        sub.try_recv().unwrap();
    }
    for i in 2..10u8 {
        publisher.send(&[i; 8]).unwrap();
    }
    let before = channel_stats(&domain, "t").unwrap();
    let s = before.participants.iter().find(|p| p.role_name == "subscriber").unwrap();
    assert_eq!(before.lag(s), Some(8));
    while !matches!(sub.try_recv(), Err(shmbus::topic::TopicTryRecvError::Empty)) {}
    let st = channel_stats(&domain, "t").unwrap();
    let p = st.participants.iter().find(|p| p.role_name == "publisher").unwrap();
    let s = st.participants.iter().find(|p| p.role_name == "subscriber").unwrap();
    assert!(p.alive && s.alive);
    assert_eq!((p.counters.messages, p.counters.bytes), (10, 80));
    assert_eq!(s.counters.messages + s.counters.drops, 10, "{:?}", s.counters);
    assert_eq!(s.counters.drops, 4);
    assert_eq!(s.counters.bytes, 8 * s.counters.messages);
    assert_eq!(st.lag(s), Some(0));
    assert_eq!(s.counters.latency_samples(), 1, "the first message received is sampled");
    assert_eq!(st.total("publisher").messages, 10);
}
