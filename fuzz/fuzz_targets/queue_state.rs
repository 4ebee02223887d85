//! Fuzzes a queue's control state: a valid queue is created with a producer and a consumer,
//! the input is written over its control words (counters, event words, cell stamps and
//! lengths, participant entries), and every send and receive verb is run with zero timeouts:
//! `cargo +nightly fuzz run queue_state`.
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("queue_state_body.rs");

fuzz_target!(|data: &[u8]| exercise_queue_state(data));
