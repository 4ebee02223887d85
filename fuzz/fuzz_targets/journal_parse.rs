//! Fuzzes the journal file parsers (metadata header, cycle header, entry scan, lz4
//! payloads) on arbitrary bytes: `cargo +nightly fuzz run journal_parse`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    std::hint::black_box(shmbus::journal::format::fuzz_parse(data));
});
