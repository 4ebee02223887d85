//! Runs the request/reply example (`examples/queue_request_reply.rs`) as a test.
#![cfg(not(loom))]

mod common;

#[allow(dead_code)]
#[path = "../examples/queue_request_reply.rs"]
mod example;

#[test]
fn request_reply_example_answers_every_request() {
    let root = common::Scratch::new("queue-example");
    let domain = root.domain("example");
    let total = example::run(&domain).unwrap();
    assert_eq!(total, 150);
    // The example cleans up after itself.
    assert!(domain.channel_names().unwrap().is_empty());
}
