//! Fuzzes opening a channel segment of every kind from hostile bytes: the input becomes a
//! channel file in a scratch domain, which is then inspected and opened as a topic, queue,
//! stream and pool, and read from: `cargo +nightly fuzz run segment_open`.
//!
//! The first input byte is a switch: odd means "fix the header checksum up" (a well-formed
//! lie), so the fuzzer gets past the CRC into the kind layouts and the participant table.
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("segment_open_body.rs");

fuzz_target!(|data: &[u8]| exercise_segment(data));
