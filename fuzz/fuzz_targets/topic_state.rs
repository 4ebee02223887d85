//! Fuzzes a topic's control state: a valid topic is created with a publisher and a
//! subscriber, the input is written over its control words (positions, index, slot guard
//! and reader lines, participant entries), and every receive verb is run with zero timeouts,
//! then publishing: `cargo +nightly fuzz run topic_state`.
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("topic_state_body.rs");

fuzz_target!(|data: &[u8]| exercise_topic_state(data));
