//! The journal's errors, and the journal meaning of an [`OpenError`].

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::error::OpenError;
use crate::name::NameError;

use super::files;
use super::format::{MAX_ARCHIVE_PATH, META_FILE};

/// Appending to a journal failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum AppendError {
    /// The entry is larger than the journal's `max_entry`.
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: u64,
    },
    /// All 128 appender entries of the journal are held by live processes.
    TooManyAppenders,
    /// A cycle file could not be opened, created or grown.
    Open(OpenError),
    /// A file operation failed (growing, syncing).
    Io(io::Error),
    /// The entry was abandoned by readers before it was committed (see
    /// [`CommitError::Abandoned`]) too many times in a row.
    Abandoned,
    /// The journal's shared state is damaged so that no entry can be claimed now.
    Damaged {
        /// What was found.
        what: &'static str,
    },
    /// Another process truncated a journal file this appender has mapped (`path`: the
    /// metadata file, or cycle `cycle`'s data or index file). The entry of this call (if it
    /// got as far as being written) landed past the cut, in memory private to this process,
    /// and is not in the journal. This appender never writes through that file again: every
    /// later call fails the same way. Open the journal again for a new appender once the
    /// files are sound (recovery repairs the cut cycle).
    Truncated {
        /// The truncated file.
        path: std::path::PathBuf,
        /// Its cycle (`None` for `journal.meta`).
        cycle: Option<u64>,
    },
}

impl fmt::Display for AppendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppendError::TooLarge { len, max } => write!(f, "entry of {len} bytes exceeds the journal's max entry size {max}; split it or create the journal with a larger max_entry"),
            AppendError::TooManyAppenders => f.write_str("all 128 appender slots of the journal are held by live processes; drop some appenders"),
            AppendError::Open(e) => write!(f, "journal cycle: {}", super::open_error_message(e)),
            AppendError::Io(e) => write!(f, "journal file operation failed: {e}; check free space and permissions"),
            AppendError::Damaged { what } => write!(f, "cannot append: {what}; stop the processes using the journal and open it again (recovery repairs the cycle), or move it aside"),
            AppendError::Abandoned => f.write_str("the entry was abandoned by readers before commit (the appender stalled longer than the abandon timeout); append again"),
            AppendError::Truncated { path, cycle } => f.write_str(&files::truncated_message(path, *cycle, true)),
        }
    }
}

impl std::error::Error for AppendError {}

impl From<OpenError> for AppendError {
    fn from(e: OpenError) -> Self {
        AppendError::Open(e)
    }
}

/// Committing a reservation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitError {
    /// Readers gave up on this entry (it stayed reserved longer than the journal's abandon
    /// timeout) and skipped it; its data is not in the journal. Append it again.
    Abandoned {
        /// The index the entry had.
        index: u64,
    },
    /// Another process truncated a journal file this appender has mapped (see
    /// [`AppendError::Truncated`]): the entry landed past the cut, in memory private to this
    /// process, and is not in the journal. Open the journal again for a new appender.
    Truncated {
        /// The index the entry would have had.
        index: u64,
        /// The truncated file.
        path: std::path::PathBuf,
        /// Its cycle (`None` for `journal.meta`).
        cycle: Option<u64>,
    },
}

impl fmt::Display for CommitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommitError::Abandoned { index } => write!(f, "entry {index} was abandoned by readers before commit (reserved longer than the abandon timeout); append it again"),
            CommitError::Truncated { index, path, cycle } => {
                write!(f, "entry {index} is lost: {}", files::truncated_message(path, *cycle, true))
            }
        }
    }
}

impl std::error::Error for CommitError {}

/// Reading failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    /// Entries `from..to` were deleted by retention before this tailer read them; it
    /// continues at `to`.
    Gap {
        /// First missing index.
        from: u64,
        /// Where the tailer continues.
        to: u64,
    },
    /// Entry `index` fails its checks (CRC, header); the tailer skips it (or the rest of its
    /// cycle if its size is unusable).
    Corrupt {
        /// The entry.
        index: u64,
        /// What failed.
        what: &'static str,
    },
    /// Entry `index` is encrypted and this tailer has no cipher ([`Tailer::set_cipher`](super::Tailer::set_cipher));
    /// it is skipped.
    Encrypted {
        /// The entry.
        index: u64,
    },
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
    },
    /// A named reader's persisted position was impossible (past the end of the journal: a
    /// damaged or overwritten reader table); it was reset to `to`, the oldest retained
    /// entry, so nothing is skipped (entries may be delivered again). Reported once.
    PositionReset {
        /// The position found.
        saved: u64,
        /// Where the reader continues.
        to: u64,
    },
    /// Another process truncated a journal file (`path`: the metadata file, or cycle
    /// `cycle`'s data or index file) while this process had it mapped. What this tailer
    /// read past the cut is zeros; entries appended there are lost; the entries before the
    /// cut are on disk. Reported on every call from then on: stop whatever truncates the
    /// journal's files and open the journal again (recovery repairs the cut cycle).
    Truncated {
        /// The truncated file.
        path: std::path::PathBuf,
        /// Its cycle (`None` for `journal.meta`).
        cycle: Option<u64>,
    },
    /// A cycle file could not be opened.
    Open(OpenError),
    /// Listing the directory failed.
    Io(io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Gap { from, to } => write!(f, "entries {from}..{to} were deleted by retention before they were read; continuing at {to} (keep more cycles to avoid this)"),
            ReadError::Corrupt { index, what } => write!(f, "journal entry {index} is corrupt ({what}); it is skipped"),
            ReadError::Encrypted { index } => write!(f, "journal entry {index} is encrypted; give the tailer the appenders' cipher (Tailer::set_cipher); it is skipped"),
            ReadError::Damaged { cycle, from, to, bytes, what } => {
                if from < to {
                    write!(f, "journal entries {from}..{to} of cycle {cycle} are damaged ({what})")?;
                } else {
                    write!(f, "journal cycle {cycle} is damaged ({what})")?;
                }
                if let Some((a, b)) = bytes {
                    write!(f, " at bytes {a}..{b} of its data area")?;
                }
                write!(f, "; they are skipped, reading continues at entry {to}")
            }
            ReadError::PositionReset { saved, to } => write!(
                f,
                "the named reader's saved position {saved} is past the end of the journal (its reader table is damaged); reset to the oldest entry {to}, entries may be delivered again"
            ),
            ReadError::Truncated { path, cycle } => f.write_str(&super::files::truncated_message(path, *cycle, false)),
            ReadError::Open(e) => write!(f, "journal cycle: {}", super::open_error_message(e)),
            ReadError::Io(e) => write!(f, "journal directory: {e}"),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<OpenError> for ReadError {
    fn from(e: OpenError) -> Self {
        ReadError::Open(e)
    }
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// Opening a named reader failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReaderError {
    /// The name is not acceptable (same rules as channel names: no path separators).
    InvalidName(NameError),
    /// A live process holds this reader.
    Busy {
        /// Its pid.
        holder_pid: u32,
    },
    /// All reader entries are used.
    TableFull {
        /// The table size.
        max: usize,
    },
    /// The reader lock file could not be used.
    Io(OpenError),
    /// Positioning the reader failed.
    Read(ReadError),
}

impl fmt::Display for ReaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReaderError::InvalidName(e) => write!(f, "reader name: {e}"),
            ReaderError::Busy { holder_pid } => {
                write!(f, "the named reader is held by live process {holder_pid}; stop it first or use another name")
            }
            ReaderError::TableFull { max } => {
                write!(f, "all {max} named readers are in use; remove unused ones (`Journal::remove_reader`)")
            }
            ReaderError::Io(e) => write!(f, "{}", super::open_error_message(e)),
            ReaderError::Read(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReaderError {}

impl From<NameError> for ReaderError {
    fn from(e: NameError) -> Self {
        ReaderError::InvalidName(e)
    }
}

/// Moving cycles to the archive failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum TierError {
    /// The journal already archives to another directory.
    OtherArchive {
        /// The archive in use.
        existing: PathBuf,
    },
    /// The archive path is empty, too long or contains a NUL byte.
    BadPath,
    /// A file operation failed.
    Io(io::Error),
}

impl fmt::Display for TierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TierError::OtherArchive { existing } => {
                write!(f, "this journal already archives to {}; use that directory", existing.display())
            }
            TierError::BadPath => write!(f, "archive path must be 1 to {MAX_ARCHIVE_PATH} bytes without NUL"),
            TierError::Io(e) => write!(f, "moving cycles to the archive failed: {e}; check space and permissions"),
        }
    }
}

impl std::error::Error for TierError {}

/// What an [`OpenError`] from a journal call means for a journal: the shared messages of
/// [`OpenError`] speak of channels (and of `shmbus clean`, which does not touch journals).
/// Every journal error message goes through this; use it for errors of [`Journal::open`](super::Journal::open).
pub fn open_error_message(e: &OpenError) -> String {
    match e {
        OpenError::NotFound { path } if path.file_name().is_some_and(|n| n == META_FILE) => format!(
            "{}: not a journal (no {META_FILE}); `Journal::open` with `create` (or `shmbus journal append`) creates one",
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
        e => e.to_string(),
    }
}
