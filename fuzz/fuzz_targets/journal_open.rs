//! Fuzzes the whole open path: the input becomes cycle 0's data file of a real journal,
//! which is then opened (recovery scan) and read to the end:
//! `cargo +nightly fuzz run journal_open`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shmbus::journal::{format, Journal, JournalConfig, JournalTryRecvError, RollCycle};

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("shmbus-fuzz-open-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = JournalConfig::default()
        .roll(RollCycle::Never)
        .cycle_bytes(1 << 20)
        .chunk_bytes(64 << 10)
        .max_entry_len(64 << 10);
    drop(Journal::create_or_open(&dir, &opts).expect("fresh journal"));
    std::fs::write(dir.join(format::data_file_name(0)), data).expect("write cycle");
    if let Ok(j) = Journal::create_or_open(&dir, &opts) {
        if let Ok(mut t) = j.tailer() {
            for _ in 0..100_000 {
                match t.try_recv_ref() {
                    Ok(e) => {
                        std::hint::black_box(e.data());
                    }
                    Err(JournalTryRecvError::Empty) => break,
                    Err(_) => {}
                }
            }
        }
        let _ = Journal::status(j.dir());
    }
    let _ = std::fs::remove_dir_all(&dir);
});
