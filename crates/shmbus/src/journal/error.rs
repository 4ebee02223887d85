//! The journal's errors, and the journal meaning of an [`OpenError`].

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::error::{error_family, Corrupt, ErrorKind, Failure, OpenError};
use crate::kind::Kind;

use super::files;
use super::format::{MAX_ARCHIVE_PATH, META_FILE, READERS_LOCK_FILE};

/// Sending (appending) an entry failed. It merges what appending a copy and sending a
/// [`Loan`](super::Loan) can report.
#[derive(Debug)]
#[non_exhaustive]
pub enum JournalSendError {
    /// The entry is larger than the journal's `max_entry_len`.
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: u64,
    },
    /// Readers gave up on the entry (it stayed claimed longer than the journal's abandon
    /// timeout) and skipped it; its data is not in the journal. [`Appender::send`](super::Appender::send)
    /// retries this a few times before it reports it; after a [`Loan::send`](super::Loan::send),
    /// send the entry again.
    Abandoned {
        /// The index the entry had.
        index: u64,
    },
    /// The journal's shared state is damaged so that no entry can be claimed now (what was
    /// found: [`Corrupt::what`]).
    Damaged(Corrupt),
    /// Another process truncated a journal file this appender has mapped (`path`: the
    /// metadata file, or cycle `cycle`'s data or index file). The entry of this call (if it
    /// got as far as being written) landed past the cut, in memory private to this process,
    /// and is not in the journal. This appender never writes through that file again: every
    /// later call fails the same way. Open the journal again for a new appender once the
    /// files are sound (recovery repairs the cut cycle).
    Truncated {
        /// The truncated file.
        path: PathBuf,
        /// Its cycle (`None` for `journal.meta`).
        cycle: Option<u64>,
        /// The index the entry would have had, if it was claimed.
        index: Option<u64>,
    },
    /// A cycle file could not be opened, created or grown.
    Open(OpenError),
    /// A file operation failed (growing, syncing).
    Io(io::Error),
    /// The appender's cipher numbers its keys (the built-in one does), and the journal is
    /// of an older format version (`version`), which libraries reading only that version
    /// open too: they would take such entries for damage and cut them off in recovery.
    /// Nothing was appended. Write encrypted entries to a journal created by this library.
    KeyedOnOldFormat {
        /// The journal's format version.
        version: u32,
    },
}

impl fmt::Display for JournalSendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JournalSendError::TooLarge { len, max } => write!(f, "entry of {len} bytes exceeds the journal's max entry size {max}; split it or create the journal with a larger max_entry"),
            JournalSendError::Open(e) => write!(f, "journal cycle: {}", super::open_error_message(e)),
            JournalSendError::Io(e) => write!(f, "journal file operation failed: {e}; check free space and permissions"),
            JournalSendError::Damaged(c) => write!(f, "cannot append: {}; stop the processes using the journal and open it again (recovery repairs the cycle), or move it aside", c.what()),
            JournalSendError::Abandoned { index } => write!(f, "entry {index} was abandoned by readers before commit (the appender stalled longer than the abandon timeout); append it again"),
            JournalSendError::Truncated { path, cycle, index: Some(index) } => {
                write!(f, "entry {index} is lost: {}", files::truncated_message(path, *cycle, true))
            }
            JournalSendError::Truncated { path, cycle, index: None } => f.write_str(&files::truncated_message(path, *cycle, true)),
            JournalSendError::KeyedOnOldFormat { version } => write!(f, "cannot append an entry sealed with a numbered key (the built-in cipher) to a journal of format version {version}: older shmbus builds also open such a journal and would take the entry for damage and cut it off; nothing was appended. Write encrypted entries to a new journal (created by this version)"),
        }
    }
}

impl std::error::Error for JournalSendError {}

impl Failure for JournalSendError {
    fn kind(&self) -> ErrorKind {
        match self {
            JournalSendError::TooLarge { .. } => ErrorKind::TooLarge,
            JournalSendError::Abandoned { .. } => ErrorKind::Damaged,
            JournalSendError::Damaged(_) => ErrorKind::Corrupt,
            JournalSendError::Truncated { .. } => ErrorKind::Truncated,
            JournalSendError::Open(e) => e.kind(),
            JournalSendError::Io(_) => ErrorKind::Io,
            JournalSendError::KeyedOnOldFormat { .. } => ErrorKind::Incompatible,
        }
    }

    /// The limit (`TooLarge`), the abandoned entry's index (`Abandoned`).
    fn value(&self) -> Option<u64> {
        match self {
            JournalSendError::TooLarge { max, .. } => Some(*max),
            JournalSendError::Abandoned { index } => Some(*index),
            _ => None,
        }
    }
}

impl From<OpenError> for JournalSendError {
    fn from(e: OpenError) -> Self {
        JournalSendError::Open(e)
    }
}

error_family! {
    #[derive(Debug)]
    try
    /// [`Tailer::try_recv`](super::Tailer::try_recv) (and its `_into` and `_ref` forms) failed.
    JournalTryRecvError {
        /// No entry is committed after the tailer's position now.
        Empty => [ErrorKind::Empty] ("no journal entry to read now"),
    }
    block
    /// [`Tailer::recv`](super::Tailer::recv) (and its `_into` and `_ref` forms) failed.
    JournalRecvError;
    timeout
    /// [`Tailer::recv_timeout`](super::Tailer::recv_timeout) (and its `_into` and `_ref` forms) failed.
    JournalRecvTimeoutError => "no journal entry was committed before the timeout";
    shared {
        /// Entries `from..to` were deleted by retention before this tailer read them; it
        /// continues at `to`.
        Gap {
            /// First missing index.
            from: u64,
            /// Where the tailer continues.
            to: u64,
        } => [ErrorKind::Damaged] ("entries {from}..{to} were deleted by retention before they were read; continuing at {to} (keep more cycles to avoid this)"),
        /// An entry fails its checks (CRC, header, decryption, decompression); the tailer
        /// skips it (or the rest of its cycle if its size is unusable). The entry's global
        /// index is [`Corrupt::value`]`("index")`, what failed is [`Corrupt::what`].
        Corrupt(c: Corrupt) => [ErrorKind::Corrupt] ("journal entry {} is corrupt ({}); it is skipped", c.value("index").unwrap_or_default(), c.what()),
        /// Entry `index` is encrypted and this tailer has no cipher ([`Tailer::set_cipher`](super::Tailer::set_cipher));
        /// it is skipped.
        Encrypted {
            /// The entry.
            index: u64,
            /// The id of the key that sealed it, when the cipher numbers its keys (the
            /// built-in [`XChaCha20Poly1305Cipher`](super::XChaCha20Poly1305Cipher) does).
            key_id: Option<u32>,
        } => [ErrorKind::NoKey] ("journal entry {index} is encrypted{}; give the tailer the appenders' cipher (Tailer::set_cipher); it is skipped", key_id.map(|k| format!(" with key id {k}")).unwrap_or_default()),
        /// Entry `index` was sealed with key `key_id`, which the tailer's cipher does not
        /// hold (an older or newer key than its keyring's); it is skipped.
        UnknownKey {
            /// The entry.
            index: u64,
            /// The key it needs.
            key_id: u32,
        } => [ErrorKind::NoKey] ("journal entry {index} is encrypted with key id {key_id}, which is not in the tailer's keyring; it is skipped"),
        /// Entry `index` failed authentication: a wrong key, or its bytes were changed or
        /// moved from another position or journal. Nothing of it is returned; it is skipped.
        Unauthenticated {
            /// The entry.
            index: u64,
        } => [ErrorKind::Corrupt] ("journal entry {index} failed authentication (a wrong key, or the entry was tampered with); it is skipped"),
        /// Entries `from..to` of cycle `cycle` are damaged (zeroed or overwritten bytes, junk
        /// headers, an unreadable cycle file) and cannot be read; the tailer has moved past
        /// them and continues at `to`, the next healthy entry. Reported once per range.
        Damaged {
            /// The cycle the damage is in.
            cycle: u64,
            /// First global index lost (equal to `to` when a whole cycle file is unreadable and
            /// its first index is unknown).
            from: u64,
            /// Where the tailer continues.
            to: u64,
            /// The damaged bytes of the cycle's data area (offsets from its start), when known.
            bytes: Option<(u64, u64)>,
            /// What was found there.
            what: String,
        } => [ErrorKind::Damaged] ("{}", damaged_message(*cycle, *from, *to, *bytes, what)),
        /// A named reader's persisted position was impossible (past the end of the journal: a
        /// damaged or overwritten reader table); it was reset to `to`, the oldest retained
        /// entry, so nothing is skipped (entries may be delivered again). Reported once.
        PositionReset {
            /// The position found.
            saved: u64,
            /// Where the reader continues.
            to: u64,
        } => [ErrorKind::Damaged] ("the named reader's saved position {saved} is past the end of the journal (its reader table is damaged); reset to the oldest entry {to}, entries may be delivered again"),
        /// Another process truncated a journal file (`path`: the metadata file, or cycle
        /// `cycle`'s data or index file) while this process had it mapped. What this tailer
        /// read past the cut is zeros; entries appended there are lost; the entries before the
        /// cut are on disk. Reported on every call from then on: stop whatever truncates the
        /// journal's files and open the journal again (recovery repairs the cut cycle).
        Truncated {
            /// The truncated file.
            path: PathBuf,
            /// Its cycle (`None` for `journal.meta`).
            cycle: Option<u64>,
        } => [ErrorKind::Truncated] ("{}", files::truncated_message(path, *cycle, false)),
        /// A cycle file could not be opened.
        Open(e: OpenError) => [e.kind()] ("journal cycle: {}", super::open_error_message(e)),
        /// Listing the directory failed.
        Io(e: io::Error) => [ErrorKind::Io] ("journal directory: {e}"),
    }
}

fn damaged_message(cycle: u64, from: u64, to: u64, bytes: Option<(u64, u64)>, what: &str) -> String {
    let mut s = if from < to {
        format!("journal entries {from}..{to} of cycle {cycle} are damaged ({what})")
    } else {
        format!("journal cycle {cycle} is damaged ({what})")
    };
    if let Some((a, b)) = bytes {
        s.push_str(&format!(" at bytes {a}..{b} of its data area"));
    }
    s.push_str(&format!("; they are skipped, reading continues at entry {to}"));
    s
}

/// The report of a corrupt entry: `index`, and what failed.
pub(super) fn corrupt_entry(index: u64, what: &'static str) -> JournalRecvError {
    JournalRecvError::Corrupt(Corrupt::new(Kind::Journal, what).with("index", index))
}

impl From<OpenError> for JournalRecvError {
    fn from(e: OpenError) -> Self {
        JournalRecvError::Open(e)
    }
}

impl From<io::Error> for JournalRecvError {
    fn from(e: io::Error) -> Self {
        JournalRecvError::Io(e)
    }
}

/// Moving cycles to the archive failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum JournalTierError {
    /// The journal already archives to another directory.
    OtherArchive {
        /// The archive in use.
        existing: PathBuf,
    },
    /// The archive path is empty, too long or contains a NUL byte.
    BadPath,
    /// A zstd level outside 1..=22 ([`Journal::tier_zstd`](super::Journal::tier_zstd)).
    BadLevel {
        /// The level given.
        level: i32,
    },
    /// A file operation failed.
    Io(io::Error),
}

impl fmt::Display for JournalTierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JournalTierError::OtherArchive { existing } => {
                write!(f, "this journal already archives to {}; use that directory", existing.display())
            }
            JournalTierError::BadPath => write!(f, "archive path must be 1 to {MAX_ARCHIVE_PATH} bytes without NUL"),
            JournalTierError::BadLevel { level } => write!(f, "zstd level {level}: use 1 to 22 (3 is a good default)"),
            JournalTierError::Io(e) => {
                write!(f, "moving cycles to the archive failed: {e}; check space and permissions")
            }
        }
    }
}

impl std::error::Error for JournalTierError {}

impl Failure for JournalTierError {
    fn kind(&self) -> ErrorKind {
        match self {
            JournalTierError::OtherArchive { .. } | JournalTierError::BadPath | JournalTierError::BadLevel { .. } => {
                ErrorKind::InvalidConfig
            }
            JournalTierError::Io(_) => ErrorKind::Io,
        }
    }
}

/// What an [`OpenError`] from a journal call means for a journal: the shared messages of
/// [`OpenError`] speak of channels (and of `shmbus clean`, which does not touch journals).
/// Every journal error message goes through this; use it for errors of [`Journal::open`](super::Journal::open).
pub fn open_error_message(e: &OpenError) -> String {
    match e {
        OpenError::NotFound { path } if path.file_name().is_some_and(|n| n == META_FILE) => format!(
            "{}: not a journal (no {META_FILE}); `Journal::create_or_open` creates one",
            path.display()
        ),
        OpenError::NotFound { path } => format!(
            "{}: a journal file is missing (deleted while in use, or by hand); the journal skips what it cannot read",
            path.display()
        ),
        OpenError::NotASegment { path } if path.is_dir() => format!(
            "{}: not a journal directory (it holds other files); use a new or empty directory",
            path.display()
        ),
        OpenError::NotASegment { path } => format!(
            "{}: not a shmbus journal file (bad magic); the journal directory holds a foreign or damaged file: move it away",
            path.display()
        ),
        OpenError::VersionMismatch { path, found, supported } => format!(
            "{}: journal format version {found}, this library reads {supported}; use a shmbus that reads version {found}",
            path.display()
        ),
        OpenError::Truncated { path, size, expected } => format!(
            "{}: journal file is {size} bytes, its header needs {expected}: it is damaged; restore it from a copy, or move the journal directory aside and start a new one",
            path.display()
        ),
        OpenError::Corrupt { path, what } => format!(
            "{}: damaged journal file ({what}); restore it from a copy, or move the journal directory aside and start a new one",
            path.display()
        ),
        OpenError::InvalidConfig { what } => format!("invalid journal configuration: {what}"),
        OpenError::Busy { path, holder_pid } if path.file_name().is_some_and(|n| n == READERS_LOCK_FILE) => {
            format!("the named reader is held by live process {holder_pid}; stop it first or use another name")
        }
        OpenError::TooManyParticipants { path, max } if path.file_name().is_some_and(|n| n == READERS_LOCK_FILE) => {
            format!("all {max} named readers are in use; remove unused ones (`Journal::remove_reader`)")
        }
        OpenError::TooManyParticipants { max, .. } => {
            format!("all {max} appender slots of the journal are held by live processes; drop some appenders")
        }
        e => e.to_string(),
    }
}

crate::endpoint::receive::waited!(JournalTryRecvError::Empty, JournalRecvError, JournalRecvTimeoutError);
