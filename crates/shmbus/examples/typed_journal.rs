//! A typed journal: trades as a `#[repr(C)]` struct, appended by copy or built in place, and
//! replayed as copies by a tailer and by a named reader that resumes where it acknowledged.
//! The journal records the type in its metadata, so opening it with another type fails
//! clearly. Run with `cargo run --example typed_journal [DIR]` (default: a fresh directory
//! under `SHMBUS_ROOT`, or the temporary directory).

use shmbus::journal::{Journal, JournalConfig, RollCycle};
use shmbus::{OpenError, Pod};

/// One trade, laid out as a C struct would be.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct Trade {
    ts_ns: u64,
    price_micros: i64,
    qty: u32,
    side: u32,
}
// SAFETY: repr(C); integers only, every bit pattern valid; no padding (8 + 8 + 4 + 4 = 24, a
// multiple of the alignment 8); no pointers.
unsafe impl Pod for Trade {}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::env::var_os("SHMBUS_ROOT").map_or_else(std::env::temp_dir, std::path::PathBuf::from);
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join(format!("shmbus-typed-journal-{}", std::process::id())));
    let config = JournalConfig::for_type::<Trade>().roll(RollCycle::Never).cycle_bytes(1 << 20).chunk_bytes(64 << 10);
    let journal = Journal::create_or_open(&dir, &config)?;
    println!("records {}", journal.payload_type().ok_or("no type recorded")?);

    let mut appender = journal.appender_of::<Trade>()?;
    appender.send(&Trade { ts_ns: 1, price_micros: 101_250_000, qty: 10, side: 0 })?;
    // Built in place in the mapped cycle file: nothing is copied.
    let mut trade = appender.loan()?;
    *trade = Trade { ts_ns: 2, price_micros: 101_300_000, qty: 5, side: 1 };
    let index = trade.send()?;
    println!("appended up to index {index}");

    let mut tailer = journal.tailer_of::<Trade>()?;
    while let Ok(t) = tailer.try_recv() {
        println!("trade at {} ns: {} x {} side {}", t.ts_ns, t.qty, t.price_micros, t.side);
    }

    // A named reader acknowledges the first trade; reopened, it resumes at the second.
    let mut audit = journal.reader_of::<Trade>("audit")?;
    audit.try_recv()?;
    audit.ack();
    drop(audit);
    println!("audit resumes at ts {}", journal.reader_of::<Trade>("audit")?.try_recv()?.ts_ns);

    // Another type is refused, naming both.
    match journal.tailer_of::<[u64; 3]>() {
        Err(e @ OpenError::TypeMismatch { .. }) => println!("refused: {e}"),
        other => return Err(format!("expected a type mismatch, got {:?}", other.map(|_| ())).into()),
    }
    drop((appender, tailer, journal));
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
