//! Every error of shmbus as a status code: one `match` over its [`ErrorKind`], with the
//! number it carries as `shmbus_last_error_value` (a kind added later maps to
//! `SHMBUS_UNKNOWN`, with the error's own message).

use shmbus::{ErrorKind, Failure};

use crate::status::*;

impl<E: Failure> From<E> for Error {
    fn from(e: E) -> Error {
        Error::from_rust(status(e.kind()), e.value().unwrap_or(0), &e)
    }
}

/// The status code of a kind of error.
fn status(kind: ErrorKind) -> shmbus_status {
    match kind {
        ErrorKind::Empty => SHMBUS_EMPTY,
        ErrorKind::Full => SHMBUS_FULL,
        ErrorKind::AllBusy => SHMBUS_ALL_BUSY,
        ErrorKind::NoWorkers => SHMBUS_NO_WORKERS,
        ErrorKind::Timeout => SHMBUS_TIMEOUT,
        ErrorKind::Lagged | ErrorKind::Overwritten => SHMBUS_LAGGED,
        ErrorKind::Evicted => SHMBUS_EVICTED,
        ErrorKind::PinLimit | ErrorKind::AllPinned => SHMBUS_PINNED,
        ErrorKind::Disconnected => SHMBUS_DISCONNECTED,
        ErrorKind::TooLarge => SHMBUS_TOO_LARGE,
        ErrorKind::BufferTooSmall => SHMBUS_BUFFER_TOO_SMALL,
        ErrorKind::Corrupt => SHMBUS_CORRUPT,
        ErrorKind::Damaged | ErrorKind::NoKey => SHMBUS_DAMAGED,
        ErrorKind::Truncated => SHMBUS_TRUNCATED,
        ErrorKind::NotFound => SHMBUS_NOT_FOUND,
        ErrorKind::PermissionDenied => SHMBUS_PERMISSION_DENIED,
        ErrorKind::Untrusted => SHMBUS_UNTRUSTED,
        ErrorKind::Incompatible => SHMBUS_INCOMPATIBLE,
        ErrorKind::Busy => SHMBUS_BUSY,
        // A C handle is never closed under its holder: freeing it while items are out defers.
        ErrorKind::Closed => SHMBUS_INVALID_ARGUMENT,
        ErrorKind::Failed => SHMBUS_FAILED,
        ErrorKind::TooManyParticipants => SHMBUS_TOO_MANY_PARTICIPANTS,
        ErrorKind::LayoutMismatch => SHMBUS_LAYOUT_MISMATCH,
        ErrorKind::TypeMismatch => SHMBUS_TYPE_MISMATCH,
        ErrorKind::SchemaMismatch => SHMBUS_SCHEMA_MISMATCH,
        ErrorKind::InvalidConfig => SHMBUS_INVALID_CONFIG,
        ErrorKind::InvalidName => SHMBUS_INVALID_NAME,
        ErrorKind::InvalidArgument => SHMBUS_INVALID_ARGUMENT,
        ErrorKind::Io => SHMBUS_IO,
        _ => SHMBUS_UNKNOWN,
    }
}
