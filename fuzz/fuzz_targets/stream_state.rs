//! Fuzzes a stream's control state: a valid stream is created with its writer and reader,
//! the input is written over its control words (both positions and event words, the two
//! endpoint entries, the first record headers), and every read and write verb is run with
//! zero timeouts, then the endpoints are re-attached: `cargo +nightly fuzz run stream_state`.
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("stream_state_body.rs");

fuzz_target!(|data: &[u8]| exercise_stream_state(data));
