//! A tour of the journal: append, tail live from another thread, a named durable reader,
//! replay from a timestamp, status and gc.
//!
//! `cargo run --example journal [DIR]` (default: a fresh directory under the temp dir).

use std::time::Duration;

use shmbus::journal::{Journal, JournalConfig, Retention, RollCycle};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("shmbus-journal-example-{}", std::process::id())));
    let opts = JournalConfig::default()
        .roll(RollCycle::Hourly)
        .cycle_bytes(8 << 20)
        .chunk_bytes(1 << 20)
        .max_entry_len(1 << 20);
    let journal = Journal::create_or_open(&dir, &opts)?;

    // A live tailer in another thread, woken by the futex in the metadata file.
    let live = {
        let mut tailer = journal.tailer_at_end()?;
        std::thread::spawn(move || -> Result<u64, String> {
            let mut n = 0;
            while n < 1000 {
                let e = tailer.recv_ref_timeout(Duration::from_secs(10)).map_err(|e| e.to_string())?;
                assert_eq!(e.data(), format!("tick {}", n).as_bytes());
                n += 1;
            }
            Ok(n)
        })
    };

    let mut appender = journal.appender()?;
    let first = Journal::status(journal.dir())?.next_index;
    let start_ts = shmbus::journal::realtime_ns();
    for i in 0..1000 {
        appender.send(format!("tick {i}").as_bytes())?;
    }
    // Zero-copy: loan, write in place, send.
    let mut r = appender.loan(8)?;
    r.copy_from_slice(&42u64.to_le_bytes());
    let idx = r.send()?;
    println!("live tailer saw {} entries; the loaned entry got index {idx}", live.join().expect("tailer thread")?);

    // A named reader: resumes where it left off, across restarts.
    let mut billing = journal.reader("billing")?;
    let mut count = 0;
    for e in billing.try_iter() {
        let _ = e?.data().len();
        count += 1;
    }
    billing.ack();
    println!("billing read {count} entries, resumes at {}", billing.position());

    // Replay from a timestamp.
    let mut replay = journal.tailer_at_time(start_ts)?;
    let e = replay.try_recv_ref()?;
    println!("replay from the start timestamp begins at index {} (first appended: {first})", e.index());

    let info = Journal::status(journal.dir())?;
    println!(
        "{} cycle(s), entries {}..{}, {} data bytes, readers {:?}",
        info.cycles.len(),
        info.first_index,
        info.next_index,
        info.bytes,
        info.readers.iter().map(|r| (&r.name, r.position)).collect::<Vec<_>>()
    );
    let gc = journal.gc_with(Retention { max_cycles: Some(24), max_age: None })?;
    println!("gc removed {} cycle(s)", gc.removed_cycles.len());
    if std::env::args().nth(1).is_none() {
        drop((billing, replay, appender, journal));
        std::fs::remove_dir_all(&dir)?;
    }
    println!("ok");
    Ok(())
}
