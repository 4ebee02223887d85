//! Errors shared by every channel kind when creating or opening a segment, and what every
//! error of shmbus answers.
//!
//! Each operation has its own error enum (`OpenError` here; `SendError`, `RecvError`, … in
//! the kind modules). Every message says what was wrong and what to do about it, in the
//! library's terms. Every error is a [`Failure`]: its [`kind`](Failure::kind) says what
//! happened in one word a program can match on (the C API's status codes and the Python
//! exception classes are made from it), and its [`value`](Failure::value) carries the number
//! that goes with it, where there is one.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::kind::Kind;
use crate::name::{is_channel_path, NameError};
use crate::sys::fs::FileKind;

/// What went wrong, in one word a program can match on: the answer of
/// [`Failure::kind`] for every error of shmbus.
///
/// A kind groups the variants of many error types that a caller handles the same way
/// (`Empty` is a non-blocking receive's "nothing now" on every kind). New kinds may come in
/// later releases; match with a fallback arm.
///
/// ```
/// use shmbus::{ErrorKind, Failure};
/// fn retry_later<E: Failure>(e: &E) -> bool {
///     matches!(e.kind(), ErrorKind::Empty | ErrorKind::Full | ErrorKind::AllBusy | ErrorKind::Timeout)
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A non-blocking receive found nothing now (or random access asked for a message not
    /// committed yet).
    Empty,
    /// A non-blocking send found no room now: a full queue or stream, or a topic whose
    /// reliable subscriber has not read the message the send would overwrite.
    Full,
    /// Every worker of a pool is busy: the job is handed back.
    AllBusy,
    /// A pool has no worker at all.
    NoWorkers,
    /// A blocking call's timeout passed first.
    Timeout,
    /// A topic subscriber fell behind; the value is how many messages were skipped.
    Lagged,
    /// Random access asked for a message older than the history kept; the value is the
    /// oldest sequence number kept.
    Overwritten,
    /// A reliable topic subscriber stood still too long and is lossy from now on.
    Evicted,
    /// A subscriber holds as many samples as its pin budget allows; the value is the budget.
    PinLimit,
    /// Every slot of a topic is pinned by subscribers holding samples.
    AllPinned,
    /// The peer is gone: a stream's other side, a pool's dispatcher.
    Disconnected,
    /// The message is larger than the channel allows; the value is the limit.
    TooLarge,
    /// The caller's buffer cannot hold the next message, which is kept for the next receive;
    /// the value is the length needed.
    BufferTooSmall,
    /// Shared memory or a file holds what cannot be true.
    Corrupt,
    /// Journal entries cannot be read and were skipped (damaged, deleted by retention,
    /// abandoned, a reader position reset).
    Damaged,
    /// A journal entry is encrypted with a key this endpoint does not hold.
    NoKey,
    /// The channel's file was truncated under this process.
    Truncated,
    /// No such channel, journal, file or directory.
    NotFound,
    /// The file's owner or mode excludes this user.
    PermissionDenied,
    /// A file or directory is owned by a user the trust policy does not trust.
    Untrusted,
    /// A file this library cannot use as asked: another format version, another kind of
    /// channel, not a shmbus file, not a regular file.
    Incompatible,
    /// An exclusive endpoint is held by a live process, or an item lent by an endpoint is
    /// still held ([`LendError`](crate::lend::LendError)).
    Busy,
    /// The endpoint was closed by its owner ([`Lender::close`](crate::lend::Lender::close)).
    Closed,
    /// A service's server failed the request: it could not answer it.
    Failed,
    /// Every participant entry of the channel is in use.
    TooManyParticipants,
    /// The channel exists with another layout than requested.
    LayoutMismatch,
    /// The channel carries another payload type.
    TypeMismatch,
    /// The channel carries another schema.
    SchemaMismatch,
    /// A configuration (or a schema, a key file) that cannot work.
    InvalidConfig,
    /// A name that is not a valid channel, domain or reader name.
    InvalidName,
    /// An argument out of range (a sequence number 0, an empty wait set, …).
    InvalidArgument,
    /// An operating-system error.
    Io,
}

impl ErrorKind {
    /// The kind's name in snake case (`"not_found"`), for logs and machine-readable output.
    pub fn as_str(self) -> &'static str {
        use ErrorKind::*;
        match self {
            Empty => "empty",
            Full => "full",
            AllBusy => "all_busy",
            NoWorkers => "no_workers",
            Timeout => "timeout",
            Lagged => "lagged",
            Overwritten => "overwritten",
            Evicted => "evicted",
            PinLimit => "pin_limit",
            AllPinned => "all_pinned",
            Disconnected => "disconnected",
            TooLarge => "too_large",
            BufferTooSmall => "buffer_too_small",
            Corrupt => "corrupt",
            Damaged => "damaged",
            NoKey => "no_key",
            Truncated => "truncated",
            NotFound => "not_found",
            PermissionDenied => "permission_denied",
            Untrusted => "untrusted",
            Incompatible => "incompatible",
            Busy => "busy",
            Closed => "closed",
            Failed => "failed",
            TooManyParticipants => "too_many_participants",
            LayoutMismatch => "layout_mismatch",
            TypeMismatch => "type_mismatch",
            SchemaMismatch => "schema_mismatch",
            InvalidConfig => "invalid_config",
            InvalidName => "invalid_name",
            InvalidArgument => "invalid_argument",
            Io => "io",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What every error of shmbus answers besides its message: its [`ErrorKind`] and the number
/// that goes with it.
///
/// The bindings build on it (a C status code and a Python exception class per kind), and so
/// can a program that handles errors by what happened rather than by which call failed.
pub trait Failure: std::error::Error {
    /// What went wrong, in one word.
    fn kind(&self) -> ErrorKind;

    /// The number the error carries, if its variant has one: messages skipped (`Lagged`),
    /// the limit (`TooLarge`), the budget (`PinLimit`), the unread sequence number (a
    /// topic's `Full`), the last sequence number claimed (random access's `Empty`), the
    /// oldest sequence number kept (`Overwritten`), the
    /// length needed (`BufferTooSmall`), the entry's index (`Damaged` when an append was
    /// abandoned).
    fn value(&self) -> Option<u64> {
        None
    }
}

/// The first of zero or one values: what the error macro's optional value becomes.
pub(crate) fn first_value(values: &[u64]) -> Option<u64> {
    values.first().copied()
}

impl Failure for OpenError {
    fn kind(&self) -> ErrorKind {
        use OpenError::*;
        match self {
            InvalidName(_) => ErrorKind::InvalidName,
            InvalidConfig { .. } | InvalidTrustList { .. } => ErrorKind::InvalidConfig,
            NotFound { .. } => ErrorKind::NotFound,
            PermissionDenied { .. } | CannotCreate { .. } => ErrorKind::PermissionDenied,
            NotASegment { .. } | VersionMismatch { .. } | WrongKind { .. } | UnexpectedFileType { .. } => {
                ErrorKind::Incompatible
            }
            Truncated { .. } => ErrorKind::Truncated,
            Corrupt { .. } => ErrorKind::Corrupt,
            LayoutMismatch { .. } => ErrorKind::LayoutMismatch,
            TypeMismatch { .. } => ErrorKind::TypeMismatch,
            SchemaMismatch { .. } => ErrorKind::SchemaMismatch,
            TooManyParticipants { .. } => ErrorKind::TooManyParticipants,
            Busy { .. } => ErrorKind::Busy,
            Untrusted { .. } => ErrorKind::Untrusted,
            Io { .. } => ErrorKind::Io,
        }
    }
}

impl Failure for WaitForError {
    fn kind(&self) -> ErrorKind {
        match self {
            WaitForError::Timeout { .. } => ErrorKind::Timeout,
            WaitForError::Open(e) => e.kind(),
        }
    }
}

impl<E: Failure + 'static> Failure for RecvIntoSliceError<E> {
    fn kind(&self) -> ErrorKind {
        match self {
            RecvIntoSliceError::TooSmall { .. } => ErrorKind::BufferTooSmall,
            RecvIntoSliceError::Recv(e) => e.kind(),
        }
    }

    fn value(&self) -> Option<u64> {
        match self {
            RecvIntoSliceError::TooSmall { needed, .. } => Some(*needed as u64),
            RecvIntoSliceError::Recv(e) => e.value(),
        }
    }
}

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
    /// The channel carries another payload type than a typed endpoint or typed config asked
    /// for (see [`Pod`](crate::Pod)): another name, size or alignment, or an untyped channel
    /// whose messages cannot hold the type.
    TypeMismatch {
        /// The file.
        path: PathBuf,
        /// The type that was asked for, as `name (size bytes, align n)`.
        expected: String,
        /// What the channel carries: its recorded type, or `bytes (…)` for an untyped one.
        found: String,
    },
    /// The channel carries another schema than the config or endpoint asked for (an opener
    /// that states no schema accepts any; one that states a schema accepts only that one).
    SchemaMismatch {
        /// The file.
        path: PathBuf,
        /// The schema that was asked for, as `encoding name (schema encoding, n bytes)`.
        expected: String,
        /// The channel's schema, or `no schema`.
        found: String,
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
    /// A domain directory or channel file this process does not trust (see
    /// [`TrustPolicy`](crate::domain::TrustPolicy)): owned by a user it does not trust, or a
    /// domain directory every user may write to without the sticky bit. Refused for creating,
    /// publishing and reading alike.
    Untrusted {
        /// The directory or file.
        path: PathBuf,
        /// Its owner.
        owner_uid: u32,
        /// What is wrong and how to fix it.
        why: String,
    },
    /// Something other than a regular file is under a channel's name, or other than a
    /// directory under a domain's name (a symlink, FIFO, socket, device, …). Never opened
    /// through, never waited on.
    UnexpectedFileType {
        /// The name that was looked up.
        path: PathBuf,
        /// What is there.
        found: FileKind,
        /// What shmbus expected ([`FileKind::Regular`] or [`FileKind::Directory`]).
        expected: FileKind,
        /// Its owner (`u32::MAX` if it could not be read).
        owner_uid: u32,
    },
    /// This user may not create files in a directory (a domain directory, or the root when
    /// the domain directory itself is missing): the directory's owner and mode are the cause.
    CannotCreate {
        /// The directory that is not writable.
        dir: PathBuf,
        /// What was to be created in it.
        what: String,
        /// The directory's owner.
        owner_uid: u32,
        /// The directory's mode.
        mode: u32,
    },
    /// A list of users to trust (`SHMBUS_TRUST_UIDS`, [`TrustPolicy::parse`]) names a user
    /// that does not exist.
    ///
    /// [`TrustPolicy::parse`]: crate::domain::TrustPolicy::parse
    InvalidTrustList {
        /// What is wrong with it.
        what: String,
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

/// Waiting for a channel to appear ([`Domain::wait_for`](crate::Domain::wait_for)) failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum WaitForError {
    /// No channel of that name appeared within the timeout.
    Timeout {
        /// The channel file waited for.
        path: PathBuf,
        /// How long it was waited for.
        waited: std::time::Duration,
    },
    /// Something an open would refuse for good: an invalid name, an untrusted or
    /// non-directory domain, something other than a regular file under the channel's name,
    /// a missing root, or an error of the watch itself.
    Open(OpenError),
}

impl fmt::Display for WaitForError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitForError::Timeout { path, waited } => write!(
                f,
                "{}: no such channel after waiting {:.1} s; is its creator running, in this domain and root?",
                path.display(),
                waited.as_secs_f64()
            ),
            WaitForError::Open(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for WaitForError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WaitForError::Open(e) => Some(e),
            WaitForError::Timeout { .. } => None,
        }
    }
}

impl From<OpenError> for WaitForError {
    fn from(e: OpenError) -> Self {
        WaitForError::Open(e)
    }
}

impl From<NameError> for WaitForError {
    fn from(e: NameError) -> Self {
        WaitForError::Open(e.into())
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use OpenError::*;
        match self {
            InvalidName(e) => e.fmt(f),
            InvalidConfig { what } => write!(f, "invalid channel configuration: {what}"),
            NotFound { path } if is_channel_path(path) => write!(f, "{}: no such channel; create it first, or check the domain name and the root (SHMBUS_ROOT)", path.display()),
            NotFound { path } => write!(f, "{}: no such file or directory", path.display()),
            PermissionDenied { path } => write!(f, "{}: permission denied: its owner or mode excludes this user; run as its owner, or have it created with a mode/group that includes you (see docs/trust.md)", path.display()),
            NotASegment { path } => write!(f, "{}: not a shmbus segment (bad magic); {}", path.display(), fix_unusable(path)),
            VersionMismatch { path, found, supported } => write!(f, "{}: segment format version {found}, this library speaks {supported}; upgrade the older side, or remove the file (`rm {}`) if nothing uses it", path.display(), path.display()),
            WrongKind { path, found, expected } => match found {
                Some(k) => write!(f, "{}: is a {k}, not a {expected}; open it as a {k} or use another name", path.display()),
                None => write!(f, "{}: unknown channel kind in header, expected a {expected}; the file is corrupt or from a newer shmbus", path.display()),
            },
            Truncated { path, size, expected } => write!(f, "{}: file is {size} bytes but its header needs {expected}; it is truncated or corrupt: {}", path.display(), fix_unusable(path)),
            Corrupt { path, what } => write!(f, "{}: corrupt header: {what}; {}", path.display(), fix_unusable(path)),
            LayoutMismatch { path, field, existing, requested } => write!(f, "{}: exists with {field} = {existing}, but {requested} was requested; open it with the same {field} or use another name", path.display()),
            TypeMismatch { path, expected, found } => write!(f, "{}: carries {found}, but was opened for {expected}; open it with the same type or as bytes", path.display()),
            SchemaMismatch { path, expected, found } => write!(f, "{}: carries {found}, but was opened for {expected}; open it with the same schema or with none", path.display()),
            TooManyParticipants { path, max } => write!(f, "{}: all {max} participant entries are in use by live processes; close some endpoints", path.display()),
            Busy { path, holder_pid } => write!(f, "{}: this endpoint is exclusive and held by live process {holder_pid}; stop it first", path.display()),
            Untrusted { path, why, .. } => write!(f, "{}: refused: {why}", path.display()),
            UnexpectedFileType { path, found, expected: FileKind::Directory, owner_uid } => write!(
                f,
                "{}: is {found}{}, not a domain directory; shmbus never follows a symlink or uses anything but a real directory here, since another user could have put it there to redirect you: remove it (`rm {}`) and shmbus recreates the directory, or use another domain",
                path.display(),
                owner_note(*owner_uid),
                path.display()
            ),
            UnexpectedFileType { path, found, owner_uid, .. } => write!(
                f,
                "{}: is {found}{}, not a shmbus channel file; shmbus opens only regular files as channels, never through a symlink: remove it (`rm {}`) if it does not belong there, or use another channel name",
                path.display(),
                owner_note(*owner_uid),
                path.display()
            ),
            CannotCreate { dir, what, owner_uid, mode } => write!(
                f,
                "cannot create {what} in {}: the directory belongs to {} with mode {mode:04o}, and this user ({}) may not write to it; use a domain of your own (another domain name), or have its owner create the channel with a mode/group that includes you, or make the directory writable by a group you are in, with the sticky bit (see docs/trust.md)",
                dir.display(),
                crate::sys::fs::describe_uid(*owner_uid),
                crate::sys::fs::describe_uid(crate::sys::fs::effective_uid())
            ),
            InvalidTrustList { what } => f.write_str(what),
            Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

/// How to get rid of a file shmbus cannot use. (A forced clean also removes a channel file
/// whose header cannot be validated; a tool that offers one says so itself.)
fn fix_unusable(path: &std::path::Path) -> String {
    if is_channel_path(path) {
        format!("remove the file (`rm {}`) and recreate the channel", path.display())
    } else {
        "move the file aside, or remove it if nothing in it is needed".into()
    }
}

/// `, owned by uid 4242`, or nothing if the owner is unknown.
fn owner_note(uid: u32) -> String {
    if uid == u32::MAX {
        String::new()
    } else {
        format!(", owned by {}", crate::sys::fs::describe_uid(uid))
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

impl Failure for NameError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidName
    }
}

impl From<NameError> for OpenError {
    fn from(e: NameError) -> Self {
        OpenError::InvalidName(e)
    }
}

/// A channel's shared state broke an invariant while an endpoint used it: a process that
/// maps the channel is corrupt or hostile. Every kind reports it with this one type, inside
/// its receive and send errors.
///
/// It says which kind, what was impossible, the values that were read (by name) and whether
/// the endpoint repaired the state and carried on. It is one pointer wide, so the errors that
/// can carry it stay small on the paths that return "nothing now" at full speed; the report
/// itself is allocated only when one is made. An endpoint compares it with the last one it
/// reported to report each problem once.
///
/// ```
/// # use shmbus::{Corrupt, Kind};
/// fn log(c: &Corrupt) {
///     eprintln!("{} {}: {:?} (repaired: {})", c.kind(), c.what(), c.values(), c.repaired());
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corrupt(Box<CorruptReport>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct CorruptReport {
    kind: Kind,
    what: &'static str,
    seen: [(&'static str, u64); Corrupt::MAX_VALUES],
    n_seen: u8,
    repaired: bool,
}

// The constructors are used on the kinds' corrupt paths only.
impl Corrupt {
    /// The most values one report carries.
    pub const MAX_VALUES: usize = 4;

    /// A report of `what` in a channel of `kind`, with no values yet.
    pub(crate) fn new(kind: Kind, what: &'static str) -> Corrupt {
        Corrupt(Box::new(CorruptReport {
            kind,
            what,
            seen: [("", 0); Corrupt::MAX_VALUES],
            n_seen: 0,
            repaired: false,
        }))
    }

    /// Adds a value that was read (beyond [`Corrupt::MAX_VALUES`] it is dropped).
    pub(crate) fn with(mut self, name: &'static str, value: u64) -> Corrupt {
        let r = &mut *self.0;
        if (r.n_seen as usize) < Corrupt::MAX_VALUES {
            r.seen[r.n_seen as usize] = (name, value);
            r.n_seen += 1;
        }
        self
    }

    /// Marks the state as repaired by the endpoint that found it.
    pub(crate) fn and_repaired(mut self) -> Corrupt {
        self.0.repaired = true;
        self
    }

    /// The kind of channel.
    pub fn kind(&self) -> Kind {
        self.0.kind
    }

    /// What was impossible, in a few words.
    pub fn what(&self) -> &'static str {
        self.0.what
    }

    /// The values that were read, by name (`("tail", 17)`, …), in the order they were taken.
    pub fn values(&self) -> &[(&'static str, u64)] {
        &self.0.seen[..self.0.n_seen as usize]
    }

    /// The value read under `name`, if the report has one.
    pub fn value(&self, name: &str) -> Option<u64> {
        self.values().iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
    }

    /// Whether the endpoint put the shared state right and carried on (the problem was
    /// reported once); otherwise the same error comes back until the channel is recreated.
    pub fn repaired(&self) -> bool {
        self.0.repaired
    }
}

impl fmt::Display for Corrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} state is corrupt: {}", self.kind(), self.what())?;
        for (i, (name, value)) in self.values().iter().enumerate() {
            f.write_str(if i == 0 { " (" } else { ", " })?;
            write!(f, "{name} {value}")?;
        }
        if !self.values().is_empty() {
            f.write_str(")")?;
        }
        let kind = self.kind();
        write!(f, ": a process that maps the {kind} is corrupt or hostile; ")?;
        if self.repaired() {
            write!(f, "this endpoint repaired the state and carried on; if this repeats, stop every endpoint and recreate the {kind}")
        } else {
            write!(f, "stop every endpoint and recreate the {kind}")
        }
    }
}

impl std::error::Error for Corrupt {}

/// A receive into a buffer of the caller's (`try_recv_into_slice`, `recv_into_slice` and
/// `recv_into_slice_timeout`, on every receiving endpoint) failed: the buffer cannot hold the
/// next message, or the receive itself failed with the kind's own error `E` (for instance
/// [`TopicTryRecvError`](crate::TopicTryRecvError)).
///
/// A message too large for the buffer is not lost: the next receive of any form on the same
/// endpoint returns it (each kind's method says how, and what can still happen to it
/// meanwhile).
///
/// ```
/// # use shmbus::RecvIntoSliceError;
/// fn grow_to(e: &RecvIntoSliceError<std::io::Error>) -> Option<usize> {
///     e.needed()
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecvIntoSliceError<E> {
    /// The next message is longer than the buffer; receive it again with a buffer of at least
    /// `needed` bytes.
    TooSmall {
        /// The message's length.
        needed: usize,
        /// The buffer's length.
        capacity: usize,
    },
    /// The receive failed as the kind's copying receive does (nothing now, a timeout, a gap,
    /// corruption, ...).
    Recv(E),
}

impl<E> RecvIntoSliceError<E> {
    /// The length of the message that did not fit, or `None` for a failed receive.
    pub fn needed(&self) -> Option<usize> {
        match self {
            RecvIntoSliceError::TooSmall { needed, .. } => Some(*needed),
            RecvIntoSliceError::Recv(_) => None,
        }
    }

    /// The receive's own error, or `None` when the buffer was too small.
    pub fn into_recv(self) -> Option<E> {
        match self {
            RecvIntoSliceError::Recv(e) => Some(e),
            RecvIntoSliceError::TooSmall { .. } => None,
        }
    }

    /// The same outcome with the receive's error converted by `f` (another form's error,
    /// a binding's).
    pub fn map_recv<F>(self, f: impl FnOnce(E) -> F) -> RecvIntoSliceError<F> {
        match self {
            RecvIntoSliceError::TooSmall { needed, capacity } => RecvIntoSliceError::TooSmall { needed, capacity },
            RecvIntoSliceError::Recv(e) => RecvIntoSliceError::Recv(f(e)),
        }
    }
}

impl<E> From<E> for RecvIntoSliceError<E> {
    fn from(e: E) -> Self {
        RecvIntoSliceError::Recv(e)
    }
}

impl<E: fmt::Display> fmt::Display for RecvIntoSliceError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvIntoSliceError::TooSmall { needed, capacity } => write!(
                f,
                "the next message is {needed} bytes but the buffer holds {capacity}; it is kept for the next receive: give a buffer of at least {needed} bytes"
            ),
            RecvIntoSliceError::Recv(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for RecvIntoSliceError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RecvIntoSliceError::Recv(e) => Some(e),
            RecvIntoSliceError::TooSmall { .. } => None,
        }
    }
}

/// A message of `needed` bytes does not fit the caller's buffer of `capacity`.
pub(crate) fn too_small<E>(needed: usize, capacity: usize) -> RecvIntoSliceError<E> {
    RecvIntoSliceError::TooSmall { needed, capacity }
}

/// Defines the three errors of one operation, crossbeam style: the `try_` form (which alone can
/// say "nothing now"), the blocking form (which cannot time out) and the `_timeout` form
/// (which alone can). They share every other variant and its message, written once.
///
/// Each variant is a unit, a struct with named fields or a one-field tuple written
/// `Name(binding: Type)`; after `=>` comes the `write!` format and arguments for its message,
/// which may use the field names (or the binding) as variables. The generated items:
/// `From<Block> for Try` and `From<Block> for Timeout`, and `Try::into_blocking(self) ->
/// Option<Block>` (`None` for the try-only variants), which the blocking loops use.
#[allow(unused_macros)]
macro_rules! error_family {
    (
        $(#[$common:meta])*
        try $(#[$try_meta:meta])* $try:ident {
            $( $(#[$tv_meta:meta])* $tv:ident
               $( ( $tb:ident : $tbt:ty ) )?
               $( { $( $(#[$tf_meta:meta])* $tf:ident : $tft:ty ),* $(,)? } )?
               => [ $tkind:expr $( , $tval:expr )? ] ( $($tmsg:tt)* ) ),* $(,)?
        }
        block $(#[$block_meta:meta])* $block:ident;
        timeout $(#[$timeout_meta:meta])* $timeout:ident => $timeout_msg:literal;
        shared {
            $( $(#[$v_meta:meta])* $v:ident
               $( ( $b:ident : $bt:ty ) )?
               $( { $( $(#[$f_meta:meta])* $f:ident : $ft:ty ),* $(,)? } )?
               => [ $kind:expr $( , $val:expr )? ] ( $($msg:tt)* ) ),* $(,)?
        }
    ) => {
        $(#[$common])*
        $(#[$try_meta])*
        #[non_exhaustive]
        pub enum $try {
            $( $(#[$tv_meta])* $tv $( ($tbt) )? $( { $( $(#[$tf_meta])* $tf: $tft ),* } )?, )*
            $( $(#[$v_meta])* $v $( ($bt) )? $( { $( $(#[$f_meta])* $f: $ft ),* } )?, )*
        }

        $(#[$common])*
        $(#[$block_meta])*
        #[non_exhaustive]
        pub enum $block {
            $( $(#[$v_meta])* $v $( ($bt) )? $( { $( $(#[$f_meta])* $f: $ft ),* } )?, )*
        }

        $(#[$common])*
        $(#[$timeout_meta])*
        #[non_exhaustive]
        pub enum $timeout {
            /// The timeout passed first.
            Timeout,
            $( $(#[$v_meta])* $v $( ($bt) )? $( { $( $(#[$f_meta])* $f: $ft ),* } )?, )*
        }

        impl ::std::fmt::Display for $block {
            #[allow(unused_variables)]
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                match self {
                    $( $block::$v { $( 0: $b )? $( $( $f ),* )? } => write!(f, $($msg)*), )*
                }
            }
        }

        impl ::std::fmt::Display for $try {
            #[allow(unused_variables)]
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                match self {
                    $( $try::$tv { $( 0: $tb )? $( $( $tf ),* )? } => write!(f, $($tmsg)*), )*
                    $( $try::$v { $( 0: $b )? $( $( $f ),* )? } => write!(f, $($msg)*), )*
                }
            }
        }

        impl ::std::fmt::Display for $timeout {
            #[allow(unused_variables)]
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                match self {
                    $timeout::Timeout => f.write_str($timeout_msg),
                    $( $timeout::$v { $( 0: $b )? $( $( $f ),* )? } => write!(f, $($msg)*), )*
                }
            }
        }

        impl ::std::error::Error for $try {}
        impl ::std::error::Error for $block {}
        impl ::std::error::Error for $timeout {}

        impl $crate::error::Failure for $block {
            #[allow(unused_variables)]
            fn kind(&self) -> $crate::error::ErrorKind {
                match self {
                    $( $block::$v { $( 0: $b )? $( $( $f ),* )? } => $kind, )*
                }
            }

            #[allow(unused_variables)]
            fn value(&self) -> Option<u64> {
                match self {
                    $( $block::$v { $( 0: $b )? $( $( $f ),* )? } => $crate::error::first_value(&[$( $val )?]), )*
                }
            }
        }

        impl $crate::error::Failure for $try {
            #[allow(unused_variables)]
            fn kind(&self) -> $crate::error::ErrorKind {
                match self {
                    $( $try::$tv { $( 0: $tb )? $( $( $tf ),* )? } => $tkind, )*
                    $( $try::$v { $( 0: $b )? $( $( $f ),* )? } => $kind, )*
                }
            }

            #[allow(unused_variables)]
            fn value(&self) -> Option<u64> {
                match self {
                    $( $try::$tv { $( 0: $tb )? $( $( $tf ),* )? } => $crate::error::first_value(&[$( $tval )?]), )*
                    $( $try::$v { $( 0: $b )? $( $( $f ),* )? } => $crate::error::first_value(&[$( $val )?]), )*
                }
            }
        }

        impl $crate::error::Failure for $timeout {
            #[allow(unused_variables)]
            fn kind(&self) -> $crate::error::ErrorKind {
                match self {
                    $timeout::Timeout => $crate::error::ErrorKind::Timeout,
                    $( $timeout::$v { $( 0: $b )? $( $( $f ),* )? } => $kind, )*
                }
            }

            #[allow(unused_variables)]
            fn value(&self) -> Option<u64> {
                match self {
                    $timeout::Timeout => None,
                    $( $timeout::$v { $( 0: $b )? $( $( $f ),* )? } => $crate::error::first_value(&[$( $val )?]), )*
                }
            }
        }

        impl From<$block> for $try {
            #[inline]
            fn from(e: $block) -> $try {
                match e {
                    $( $block::$v { $( 0: $b )? $( $( $f ),* )? } => $try::$v { $( 0: $b )? $( $( $f ),* )? }, )*
                }
            }
        }

        impl From<$block> for $timeout {
            #[inline]
            fn from(e: $block) -> $timeout {
                match e {
                    $( $block::$v { $( 0: $b )? $( $( $f ),* )? } => $timeout::$v { $( 0: $b )? $( $( $f ),* )? }, )*
                }
            }
        }

        impl $try {
            /// This error in its blocking form, or itself for a "nothing now" outcome that a
            /// blocking call waits through.
            #[allow(dead_code, unused_variables)]
            #[inline]
            pub(crate) fn split(self) -> Result<$block, $try> {
                match self {
                    $( $try::$tv { .. } => Err(self), )*
                    $( $try::$v { $( 0: $b )? $( $( $f ),* )? } => Ok($block::$v { $( 0: $b )? $( $( $f ),* )? }), )*
                }
            }

            /// The blocking form of this error, or `None` for a "nothing now" outcome that a
            /// blocking call waits through.
            #[allow(dead_code, unused_variables)]
            #[inline]
            pub(crate) fn into_blocking(self) -> Option<$block> {
                self.split().ok()
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use error_family;

#[cfg(test)]
mod tests {
    use super::*;

    error_family! {
        #[derive(Debug, Clone, PartialEq, Eq)]
        try
        /// Try.
        DemoTryRecvError {
            /// Nothing now.
            Empty => [ErrorKind::Empty] ("nothing now"),
        }
        block
        /// Block.
        DemoRecvError;
        timeout
        /// Timeout.
        DemoRecvTimeoutError => "timed out";
        shared {
            /// Fell behind.
            Lagged {
                /// How many.
                missed: u64,
            } => [ErrorKind::Lagged, *missed] ("lagged by {missed}"),
            /// Corrupt.
            Corrupt(c: Corrupt) => [ErrorKind::Corrupt] ("{c}"),
            /// Cut.
            Truncated => [ErrorKind::Truncated] ("truncated"),
        }
    }

    #[test]
    fn corrupt_reports_values_and_repair() {
        let c = Corrupt::new(Kind::Topic, "committed ahead of tail").with("tail", 3).with("committed", 9);
        assert_eq!(c.values(), &[("tail", 3), ("committed", 9)]);
        assert_eq!(c.value("committed"), Some(9));
        assert_eq!(c.value("next"), None);
        assert!(!c.repaired());
        let text = c.and_repaired().to_string();
        assert!(text.starts_with("topic state is corrupt: committed ahead of tail (tail 3, committed 9)"), "{text}");
        assert!(text.contains("repaired"), "{text}");
        let many = (0..6).fold(Corrupt::new(Kind::Queue, "x"), |c, i| c.with("v", i));
        assert_eq!(many.values().len(), Corrupt::MAX_VALUES);
    }

    /// The errors of the try calls are returned on every empty poll of a spinning receiver:
    /// a large error there costs a copy per poll (this kept the stream ring 30 % slower
    /// until `Corrupt` became one pointer wide).
    #[cfg(not(loom))]
    #[test]
    fn errors_of_the_hot_paths_stay_small() {
        use std::mem::size_of;
        assert_eq!(size_of::<Corrupt>(), size_of::<usize>());
        assert!(size_of::<crate::topic::TopicTryRecvError>() <= 24);
        assert!(size_of::<crate::queue::QueueTryRecvError>() <= 24);
        assert!(size_of::<crate::queue::QueueTrySendError>() <= 24);
        assert!(size_of::<crate::stream::StreamTryRecvError>() <= 24);
        assert!(size_of::<crate::stream::StreamTrySendError>() <= 24);
        assert!(size_of::<crate::pool::PoolTryRecvError>() <= 24);
        assert!(size_of::<crate::pool::PoolTrySendError>() <= 32);
    }

    #[test]
    fn error_family_shares_variants_and_messages() {
        let c = Corrupt::new(Kind::Stream, "bad header");
        let block = DemoRecvError::Corrupt(c.clone());
        assert_eq!(DemoTryRecvError::from(block.clone()), DemoTryRecvError::Corrupt(c));
        assert_eq!(DemoRecvTimeoutError::from(block.clone()).to_string(), block.to_string());
        assert_eq!(DemoRecvTimeoutError::Timeout.to_string(), "timed out");
        assert_eq!(DemoTryRecvError::Lagged { missed: 4 }.to_string(), "lagged by 4");
        assert_eq!(DemoTryRecvError::Empty.into_blocking(), None);
        assert_eq!(DemoTryRecvError::Truncated.into_blocking(), Some(DemoRecvError::Truncated));
        assert_eq!(DemoTryRecvError::Empty.to_string(), "nothing now");
    }

    #[test]
    fn error_family_gives_kinds_and_values() {
        assert_eq!(DemoTryRecvError::Empty.kind(), ErrorKind::Empty);
        assert_eq!(DemoRecvError::Lagged { missed: 4 }.kind(), ErrorKind::Lagged);
        assert_eq!(DemoRecvTimeoutError::Lagged { missed: 4 }.value(), Some(4));
        assert_eq!(DemoRecvTimeoutError::Timeout.kind(), ErrorKind::Timeout);
        assert_eq!(DemoTryRecvError::Truncated.value(), None);
        let small: RecvIntoSliceError<DemoTryRecvError> = too_small(10, 4);
        assert_eq!((small.kind(), small.value()), (ErrorKind::BufferTooSmall, Some(10)));
        let inner = RecvIntoSliceError::Recv(DemoTryRecvError::Empty);
        assert_eq!(inner.kind(), ErrorKind::Empty);
        assert_eq!(ErrorKind::PermissionDenied.to_string(), "permission_denied");
    }
}
