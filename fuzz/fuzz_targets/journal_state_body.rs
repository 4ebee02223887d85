// The body of the `journal_state` fuzz target, shared with the test that replays its corpus
// (crates/shmbus/tests/journal_hostile.rs) through `include!`: one copy of the harness.

use shmbus::journal::format::{data_file_name, index_file_name, META_FILE};
use shmbus::journal::{Journal, JournalConfig, JournalTryRecvError, RollCycle, Tailer};

/// Options of the scratch journal: 64 KiB cycles, so 1000 entries make three cycles.
fn journal_state_opts() -> JournalConfig {
    JournalConfig::default()
        .roll(RollCycle::Never)
        .cycle_bytes(64 << 10)
        .chunk_bytes(16 << 10)
        .max_entry_len(1024)
        .abandon_timeout(std::time::Duration::from_millis(1))
}

/// Reads at most `n` results from `t` (entries or errors): bounded whatever the files say.
fn drain(t: &mut Tailer, n: usize) -> u64 {
    let mut acc = 0;
    for _ in 0..n {
        match t.try_recv_ref() {
            Ok(e) => acc += e.index() ^ e.data().len() as u64,
            Err(JournalTryRecvError::Empty) => break,
            Err(_) => acc += 1,
        }
    }
    acc
}

/// Builds a small journal (three cycles, a named reader with a saved position), applies
/// `data` as writes into its control state, then opens, positions and reads it every
/// way, with a handle that was open during the writes (no recovery) and with a fresh one
/// (recovery). Must never panic, fault or hang, whatever `data` is.
///
/// `data` is a list of 11-byte records: a target byte, a 16-bit selector, a 64-bit value.
/// Targets: the metadata's shared words (current, first, event, archive length), the named
/// reader's words (state, position = the cursor, holder, name), the appender table (state,
/// pid, claim records), a cycle's position/alloc/ialloc words, index slots, entry headers.
pub fn exercise_journal_state(data: &[u8]) {
    // One directory per call: tests replaying the corpus may run this on several threads.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("shmbus-fuzz-jstate-{}-{call}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = journal_state_opts();
    let open = Journal::create_or_open(&dir, &opts).expect("fresh journal");
    {
        let mut a = open.appender().expect("appender");
        for i in 0..1000u64 {
            a.send(&i.to_le_bytes().repeat(12)).expect("append");
        }
        let mut r = open.reader("fz").expect("reader");
        drain(&mut r, 10);
        r.ack();
    }
    let mut live = open.tailer().expect("tailer");
    drain(&mut live, 200);
    for rec in data.chunks_exact(11) {
        let sel = u16::from_le_bytes([rec[1], rec[2]]) as u64;
        let v = u64::from_le_bytes(rec[3..11].try_into().unwrap_or([0; 8]));
        let (file, off) = match rec[0] % 6 {
            0 => (META_FILE.to_owned(), [512u64, 520, 576, 1024][sel as usize % 4]),
            1 => (META_FILE.to_owned(), 12288 + 8 * (sel % 16)),
            2 => (META_FILE.to_owned(), 4096 + 8 * (sel % 64)),
            3 => (data_file_name(sel % 3), [256u64, 320, 384][(sel / 3) as usize % 3]),
            4 => (index_file_name(sel % 3), 4 * (sel / 3 % 2048)),
            _ => (data_file_name(sel % 3), 4096 + 8 * (sel / 3 % 8192)),
        };
        if let Ok(f) = std::fs::OpenOptions::new().write(true).open(dir.join(&file)) {
            use std::os::unix::fs::FileExt;
            // Never past the end: growing a file is not the point here (and truncation is
            // the documented SIGBUS case).
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            if off + 8 <= len {
                let _ = f.write_all_at(&v.to_le_bytes(), off);
            }
        }
    }
    let mut acc = drain(&mut live, 3000);
    for _ in 0..3 {
        if let Ok(e) = live.recv_ref_timeout(std::time::Duration::from_millis(1)) {
            acc ^= e.index();
        }
    }
    drop(live);
    let reopened = Journal::create_or_open(&dir, &opts);
    for j in [Ok(open), reopened].into_iter().flatten() {
        let last = Journal::status(j.dir()).map(|i| i.next_index).unwrap_or(0);
        let tailers =
            [j.tailer(), j.tailer_at(last / 2), j.tailer_at(u64::MAX), j.tailer_at_end(), j.tailer_at_time(1)];
        for mut t in tailers.into_iter().flatten() {
            acc ^= drain(&mut t, 3000);
        }
        if let Ok(mut r) = j.reader("fz") {
            acc ^= drain(&mut r, 3000);
            r.ack();
        }
        acc ^= j.readers().len() as u64;
        if let Ok(mut a) = j.appender() {
            acc ^= a.send(b"after").unwrap_or(0);
        }
        let _ = j.gc();
    }
    std::hint::black_box(acc);
    let _ = std::fs::remove_dir_all(&dir);
}
