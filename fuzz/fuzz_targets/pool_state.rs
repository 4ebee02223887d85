//! Fuzzes a pool's control state: a valid pool is created with its dispatcher and a worker
//! holding a job, the input is written over its control words (hint bits, dispatcher state,
//! counters, mailbox states, ids and lengths, participant entries), and every receive and
//! dispatch verb is run with zero timeouts: `cargo +nightly fuzz run pool_state`.
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("pool_state_body.rs");

fuzz_target!(|data: &[u8]| exercise_pool_state(data));
