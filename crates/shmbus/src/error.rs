//! Errors shared by every channel kind when creating or opening a segment.
//!
//! Each operation has its own error enum (`OpenError` here; `SendError`, `RecvError`, … in
//! the kind modules). Every message says what was wrong and what to do about it.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::name::NameError;
use crate::segment::Kind;

/// Creating or opening a channel failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum OpenError {
    /// The channel or domain name is not acceptable.
    InvalidName(NameError),
    /// A creation parameter is out of range (zero history, slot too large, …).
    InvalidConfig {
        /// Which parameter and why.
        what: String,
    },
    /// No channel of that name exists (open without create).
    NotFound {
        /// The segment file that was looked for.
        path: PathBuf,
    },
    /// The segment exists but this process may not open it.
    PermissionDenied {
        /// The segment file.
        path: PathBuf,
    },
    /// The file does not start with the shmbus magic number.
    NotASegment {
        /// The file.
        path: PathBuf,
    },
    /// The segment was written by an incompatible format version.
    VersionMismatch {
        /// The file.
        path: PathBuf,
        /// Version in the file.
        found: u32,
        /// Version this library speaks.
        supported: u32,
    },
    /// The segment is a different kind of channel.
    WrongKind {
        /// The file.
        path: PathBuf,
        /// Kind found in the header (`None` if the number is unknown).
        found: Option<Kind>,
        /// Kind that was asked for.
        expected: Kind,
    },
    /// The file is shorter (or longer) than its header says.
    Truncated {
        /// The file.
        path: PathBuf,
        /// Its actual size.
        size: u64,
        /// The size its header implies.
        expected: u64,
    },
    /// A header field is garbage (checksum mismatch, impossible layout, …).
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        what: String,
    },
    /// The channel exists with different layout parameters than requested.
    LayoutMismatch {
        /// The file.
        path: PathBuf,
        /// Which parameter differs.
        field: &'static str,
        /// Its value in the existing channel.
        existing: u64,
        /// The value that was requested.
        requested: u64,
    },
    /// Every participant entry of the segment is taken by live processes.
    TooManyParticipants {
        /// The file.
        path: PathBuf,
        /// The table size.
        max: usize,
    },
    /// The endpoint is exclusive (a stream's writer or reader) and a live process holds it.
    Busy {
        /// The file.
        path: PathBuf,
        /// The holder's pid.
        holder_pid: u32,
    },
    /// Any other operating-system error.
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

impl OpenError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> OpenError {
        let path = path.into();
        match source.kind() {
            io::ErrorKind::NotFound => OpenError::NotFound { path },
            io::ErrorKind::PermissionDenied => OpenError::PermissionDenied { path },
            _ => OpenError::Io { path, source },
        }
    }

    pub(crate) fn corrupt(path: impl Into<PathBuf>, what: impl Into<String>) -> OpenError {
        OpenError::Corrupt { path: path.into(), what: what.into() }
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use OpenError::*;
        match self {
            InvalidName(e) => e.fmt(f),
            InvalidConfig { what } => write!(f, "invalid channel configuration: {what}"),
            NotFound { path } => write!(f, "{}: no such channel; create it first (e.g. `shmbus pub`) or check --domain and SHMBUS_ROOT", path.display()),
            PermissionDenied { path } => write!(f, "{}: permission denied; run as the creator's user or have it created with a group/mode that includes you", path.display()),
            NotASegment { path } => write!(f, "{}: not a shmbus segment (bad magic); remove the file or use another name", path.display()),
            VersionMismatch { path, found, supported } => write!(f, "{}: segment format version {found}, this library speaks {supported}; upgrade the older side or remove the segment", path.display()),
            WrongKind { path, found, expected } => match found {
                Some(k) => write!(f, "{}: is a {k}, not a {expected}; open it as a {k} or use another name", path.display()),
                None => write!(f, "{}: unknown channel kind in header, expected a {expected}; the file is corrupt or from a newer shmbus", path.display()),
            },
            Truncated { path, size, expected } => write!(f, "{}: file is {size} bytes but its header needs {expected}; it is truncated or corrupt, remove it (`shmbus clean`)", path.display()),
            Corrupt { path, what } => write!(f, "{}: corrupt segment header: {what}; remove it (`shmbus clean`) and recreate", path.display()),
            LayoutMismatch { path, field, existing, requested } => write!(f, "{}: exists with {field} = {existing}, but {requested} was requested; open it with the same {field} or use another name", path.display()),
            TooManyParticipants { path, max } => write!(f, "{}: all {max} participant entries are in use by live processes; close some endpoints", path.display()),
            Busy { path, holder_pid } => write!(f, "{}: this endpoint is exclusive and held by live process {holder_pid}; stop it first", path.display()),
            Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::InvalidName(e) => Some(e),
            OpenError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<NameError> for OpenError {
    fn from(e: NameError) -> Self {
        OpenError::InvalidName(e)
    }
}
