//! Fuzzes a journal's cursor and control state: the input is a list of writes into a real
//! journal's shared words (metadata, named-reader positions, appender claim records,
//! position/alloc words, index slots, entry headers), which is then tailed, positioned,
//! read as a named reader, appended to and recovered: `cargo +nightly fuzz run journal_state`.
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("journal_state_body.rs");

fuzz_target!(|data: &[u8]| exercise_journal_state(data));
