//! Journals: persistent, replayable, memory-mapped append-only logs in a directory.
//!
//! A journal is a directory holding `journal.meta` (configuration, the futex event word,
//! the appender table and the named-reader table, all mapped shared) and, per *cycle*, a
//! data file `NNNNNNNNNNNN.sbjd` and an index file `NNNNNNNNNNNN.sbji`. The format is
//! specified in `docs/journal-format.md`; user documentation is in `docs/journal.md`.
//!
//! # Use
//! ```no_run
//! use std::time::Duration;
//! use shmbus::journal::{Journal, JournalConfig, JournalRecvTimeoutError, RollCycle};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The configuration applies when the journal is created; `Journal::open(dir)` opens an
//! // existing one and never creates.
//! let j = Journal::create_or_open("/var/lib/app/events", &JournalConfig::default().roll(RollCycle::Hourly))?;
//! let mut app = j.appender()?;
//! let first = app.send(b"hello")?; // never waits: the journal is unbounded
//! let mut loan = app.loan(8)?; // zero-copy: write in place, then send
//! loan.copy_from_slice(&42u64.to_le_bytes());
//! loan.send()?;
//!
//! let mut t = j.tailer_at(first)?;
//! loop {
//!     match t.recv_ref_timeout(Duration::from_secs(1)) {
//!         Ok(e) => println!("{} {} {:?}", e.index(), e.ts_ns(), e.data()),
//!         Err(JournalRecvTimeoutError::Timeout) => break,
//!         Err(e) => eprintln!("{e}"), // a gap or damage: reported once, reading goes on
//!     }
//! }
//! let status = Journal::status("/var/lib/app/events")?;
//! println!("entries {}..{}", status.first_index, status.next_index);
//! # Ok(())
//! # }
//! ```
//!
//! # Algorithm
//! **Claiming.** Each cycle has one 64-bit *position word* `SEALED:1 | n:31 | units:32`:
//! `n` entries have been claimed and they span `units` 8-byte units of the data area. An
//! appender claims its entry with one compare-and-swap from `(n, u)` to `(n+1, u+k)`: that
//! single atomic gives it both its dense in-cycle index `n` (global index = the cycle's
//! `first_index + n`) and its bytes `[8u, 8(u+k))`; the index file slot `n` is then a plain,
//! uncontended store. (A CAS rather than a fetch_add, so that sealing is exact: see below.
//! Uncontended it costs the same single locked instruction.)
//!
//! **Entries.** Each entry starts with a 32-byte header whose word 0 packs `state | flags |
//! units`. The winner of the claim writes the payload, length, timestamp, index and CRC32C
//! while word 0 is still 0, and publishes with one Release CAS `0 → COMMITTED` (older
//! versions went through a `RESERVED` state first, which readers still accept). A reader
//! loads word 0 with Acquire: `COMMITTED` means every other field is final. `ABANDONED` entries are skipped. Indices are dense over claimed entries;
//! readers see every committed one, in index order, identical for all readers.
//!
//! **Dead and stuck appenders.** Before its claim CAS an appender records `(cycle, expected
//! position word, units)` in its participant entry's `aux` words. A reader that finds the
//! next entry claimed but not committed reclaims dead participants (pid + start time): the
//! cleanup turns a dead appender's claimed entry into `ABANDONED` (CAS from 0 or from
//! `RESERVED`), unless a live appender records the same claim. After `abandon_timeout` even a
//! live appender's entry is abandoned (its `Loan::send` then fails with
//! [`JournalSendError::Abandoned`]). So no appender can block readers for ever.
//!
//! **Sealing and rolling.** When an entry does not fit, or its timestamp is past the
//! cycle's time bucket, the appender *seals* the cycle by CASing the SEALED bit into the
//! position word: the final `(n, units)` stay in the word, so the next cycle's first index is
//! exact and anyone (an appender or a reader) can create the next cycle race-free (built
//! under a temporary name, `link(2)`ed into place).
//!
//! **Growth.** Files are mapped once at their full virtual size; the backed part grows in
//! chunks by `fallocate` *before* a claim may reach it (`alloc` word, monotonic), so readers
//! never touch an unbacked page and nobody is stopped while a file grows.
//!
//! **Recovery.** Every open handle holds a shared `flock` on the metadata file. An opener
//! that gets the lock exclusively is alone: it reclaims dead appenders and scans the current
//! cycle, keeping entries while headers and CRCs hold, and cuts (zeroing the rest) at the
//! first that does not. What was dropped is reported by [`Journal::recovery`].
//!
//! # Files
//! `format` (on-disk layout and the untrusting parsers, fuzzed), `protocol` (the lock-free
//! words, model-checked with loom), `files` (creation, growth, and the mapped
//! metadata and cycle files: read-write types for the handle, read-only ones with load-only
//! views for `status`), `channel` ([`Journal`]: configuration, open, the handle's calls,
//! `status`), `cycles` (cycle files, indices, time search), `recovery`, `retention` (`gc`), `tier` (tiering, moving files), `readers`
//! (the named readers' table), `error`, `appender`, `tailer`.

#[cfg(not(loom))]
mod appender;
#[cfg(not(loom))]
mod channel;
#[cfg(not(loom))]
mod crypt;
#[cfg(not(loom))]
mod cycles;
#[cfg(not(loom))]
mod error;
#[cfg(not(loom))]
mod files;
#[cfg(any(feature = "internals", loom))]
#[doc(hidden)]
pub mod format;
#[cfg(not(any(feature = "internals", loom)))]
mod format;
#[cfg(any(feature = "internals", loom))]
#[doc(hidden)]
pub mod protocol;
#[cfg(not(any(feature = "internals", loom)))]
mod protocol;
#[cfg(not(loom))]
mod readers;
#[cfg(not(loom))]
mod recovery;
#[cfg(not(loom))]
mod retention;
#[cfg(not(loom))]
mod shared;
#[cfg(not(loom))]
mod storage;
#[cfg(not(loom))]
mod tailer;
#[cfg(not(loom))]
mod tier;
#[cfg(not(loom))]
mod typed;

#[cfg(not(loom))]
pub use appender::{Appender, Loan, OwnedLoan};
#[cfg(not(loom))]
pub(crate) use channel::JournalKind;
#[cfg(not(loom))]
pub use channel::{CycleInfo, Durability, Journal, JournalConfig, JournalStatus, RollCycle};
#[cfg(not(loom))]
pub use crypt::{KeyFileError, Keyring, XChaCha20Poly1305Cipher};
#[cfg(not(loom))]
pub use error::{
    open_error_message, JournalRecvError, JournalRecvTimeoutError, JournalSendError, JournalTierError,
    JournalTryRecvError,
};
pub use format::JOURNAL_FORMAT_VERSION;
#[cfg(not(loom))]
pub use readers::ReaderInfo;
#[cfg(not(loom))]
pub use recovery::{LostEntries, RecoveryReport, RECOVERY_LOG};
#[cfg(not(loom))]
pub use retention::{GcReport, Retention};
#[cfg(not(loom))]
pub use shared::{realtime_ns, CipherError, EntryCipher};
#[cfg(not(loom))]
pub use storage::Storage;
#[cfg(not(loom))]
pub use tailer::{Entry, EntryInfo, EntryRef, Iter, OwnedEntryRef, Tailer, TryIter};
#[cfg(not(loom))]
pub use tier::TierReport;
#[cfg(not(loom))]
pub use typed::{TypedAppender, TypedLoan, TypedTailer};
