//! Every public Rust error of shmbus mapped to a status code (the known variants; a variant
//! added later maps to `SHMBUS_UNKNOWN` with its own message).

use shmbus::{
    JournalRecvError, JournalRecvTimeoutError, JournalSendError, JournalTryRecvError, OpenError, PoolRecvError,
    PoolRecvTimeoutError, PoolTryRecvError, PoolTrySendError, QueueRecvError, QueueRecvTimeoutError, QueueSendError,
    QueueSendTimeoutError, QueueTryRecvError, QueueTrySendError, RecvIntoSliceError, StreamRecvError,
    StreamRecvTimeoutError, StreamSendError, StreamSendTimeoutError, StreamTryRecvError, StreamTrySendError,
    TopicGetError, TopicRecvError, TopicRecvTimeoutError, TopicSendError, TopicSendTimeoutError, TopicTryRecvError,
    TopicTrySendError, WaitError, WaitTimeoutError,
};

use crate::status::*;

/// A receive into the caller's buffer: `SHMBUS_BUFFER_TOO_SMALL` with the length needed
/// (`shmbus_last_error_value`), or the receive's own error.
impl<E> From<RecvIntoSliceError<E>> for Error
where
    Error: From<E>,
{
    fn from(e: RecvIntoSliceError<E>) -> Error {
        match e {
            RecvIntoSliceError::TooSmall { needed, capacity } => Error::with_value(
                SHMBUS_BUFFER_TOO_SMALL,
                needed as u64,
                format_args!("the message is {needed} bytes, the buffer {capacity}; it is kept for the next receive"),
            ),
            RecvIntoSliceError::Recv(e) => e.into(),
            _ => Error::new(SHMBUS_UNKNOWN, "a receive into the buffer failed"),
        }
    }
}

impl From<OpenError> for Error {
    fn from(e: OpenError) -> Error {
        let code = match &e {
            OpenError::InvalidName(_) => SHMBUS_INVALID_NAME,
            OpenError::InvalidConfig { .. } => SHMBUS_INVALID_CONFIG,
            OpenError::NotFound { .. } => SHMBUS_NOT_FOUND,
            OpenError::PermissionDenied { .. } | OpenError::CannotCreate { .. } => SHMBUS_PERMISSION_DENIED,
            OpenError::NotASegment { .. }
            | OpenError::VersionMismatch { .. }
            | OpenError::WrongKind { .. }
            | OpenError::UnexpectedFileType { .. } => SHMBUS_INCOMPATIBLE,
            OpenError::Truncated { .. } => SHMBUS_TRUNCATED,
            OpenError::Corrupt { .. } => SHMBUS_CORRUPT,
            OpenError::LayoutMismatch { .. } => SHMBUS_LAYOUT_MISMATCH,
            OpenError::TypeMismatch { .. } => SHMBUS_TYPE_MISMATCH,
            OpenError::SchemaMismatch { .. } => SHMBUS_SCHEMA_MISMATCH,
            OpenError::TooManyParticipants { .. } => SHMBUS_TOO_MANY_PARTICIPANTS,
            OpenError::Busy { .. } => SHMBUS_BUSY,
            OpenError::Untrusted { .. } => SHMBUS_UNTRUSTED,
            OpenError::InvalidTrustList { .. } => SHMBUS_INVALID_CONFIG,
            OpenError::Io { .. } => SHMBUS_IO,
            _ => SHMBUS_UNKNOWN,
        };
        Error::new(code, e)
    }
}

/// `From<E> for Error` for each listed error: `|e| match e { pattern => (code, value) }`;
/// every unlisted (future) variant is `SHMBUS_UNKNOWN`.
macro_rules! map_errors {
    ($( $ty:ty => { $( $pat:pat => $code:expr ),* $(,)? } )*) => {$(
        impl From<$ty> for Error {
            #[allow(unused_imports)]
            fn from(e: $ty) -> Error {
                type E = $ty;
                let (code, value): (shmbus_status, u64) = match &e {
                    $( $pat => $code, )*
                    _ => (SHMBUS_UNKNOWN, 0),
                };
                Error::from_rust(code, value, &e)
            }
        }
    )*};
}

/// The three errors of one receive (or send) family: the try-only arms, then the arms all
/// three share; the timeout form adds `Timeout`.
macro_rules! map_family {
    ($try:ty, $block:ty, $timeout:ty; try { $( $tp:pat => $tc:expr ),* $(,)? } shared { $( $p:pat => $c:expr ),* $(,)? }) => {
        map_errors! {
            $try => { $( $tp => $tc, )* $( $p => $c, )* }
            $block => { $( $p => $c, )* }
            $timeout => { E::Timeout => (SHMBUS_TIMEOUT, 0), $( $p => $c, )* }
        }
    };
}

map_errors! {
    TopicGetError => {
        E::InvalidSeq => (SHMBUS_INVALID_ARGUMENT, 0),
        E::NotYet { last, .. } => (SHMBUS_EMPTY, *last),
        E::Pending { .. } => (SHMBUS_EMPTY, 0),
        E::Evicted { oldest, .. } => (SHMBUS_LAGGED, *oldest),
        E::PinLimit { budget } => (SHMBUS_PINNED, *budget as u64),
        E::Corrupt(_) => (SHMBUS_CORRUPT, 0),
        E::Truncated => (SHMBUS_TRUNCATED, 0),
    }
    PoolTrySendError => {
        E::AllBusy => (SHMBUS_ALL_BUSY, 0),
        E::NoWorkers => (SHMBUS_NO_WORKERS, 0),
        E::TooLarge { max, .. } => (SHMBUS_TOO_LARGE, *max as u64),
        E::Truncated => (SHMBUS_TRUNCATED, 0),
    }
    JournalSendError => {
        E::TooLarge { max, .. } => (SHMBUS_TOO_LARGE, *max),
        E::Abandoned { index } => (SHMBUS_DAMAGED, *index),
        E::Damaged(_) => (SHMBUS_CORRUPT, 0),
        E::Truncated { .. } => (SHMBUS_TRUNCATED, 0),
        E::Open(o) => (open_code(o), 0),
        E::Io(_) => (SHMBUS_IO, 0),
    }
}

map_family! {
    TopicTrySendError, TopicSendError, TopicSendTimeoutError;
    try {}
    shared {
        E::TooLarge { max, .. } => (SHMBUS_TOO_LARGE, *max as u64),
        E::AllPinned { .. } => (SHMBUS_PINNED, 0),
        E::Full { seq } => (SHMBUS_FULL, *seq),
        E::Truncated => (SHMBUS_TRUNCATED, 0),
    }
}

map_family! {
    TopicTryRecvError, TopicRecvError, TopicRecvTimeoutError;
    try { E::Empty => (SHMBUS_EMPTY, 0) }
    shared {
        E::Lagged { missed } => (SHMBUS_LAGGED, *missed),
        E::Evicted => (SHMBUS_EVICTED, 0),
        E::PinLimit { budget } => (SHMBUS_PINNED, *budget as u64),
        E::Corrupt(_) => (SHMBUS_CORRUPT, 0),
        E::Truncated => (SHMBUS_TRUNCATED, 0),
    }
}

map_family! {
    QueueTrySendError, QueueSendError, QueueSendTimeoutError;
    try { E::Full => (SHMBUS_FULL, 0) }
    shared {
        E::TooLarge { max, .. } => (SHMBUS_TOO_LARGE, *max as u64),
        E::Corrupt(_) => (SHMBUS_CORRUPT, 0),
        E::Truncated => (SHMBUS_TRUNCATED, 0),
    }
}

map_family! {
    QueueTryRecvError, QueueRecvError, QueueRecvTimeoutError;
    try { E::Empty => (SHMBUS_EMPTY, 0) }
    shared {
        E::Corrupt(_) => (SHMBUS_CORRUPT, 0),
        E::Truncated => (SHMBUS_TRUNCATED, 0),
    }
}

map_family! {
    StreamTrySendError, StreamSendError, StreamSendTimeoutError;
    try { E::Full { .. } => (SHMBUS_FULL, 0) }
    shared {
        E::TooLarge { max, .. } => (SHMBUS_TOO_LARGE, *max as u64),
        E::Disconnected => (SHMBUS_DISCONNECTED, 0),
        E::Corrupt(_) => (SHMBUS_CORRUPT, 0),
        E::Truncated => (SHMBUS_TRUNCATED, 0),
    }
}

map_family! {
    StreamTryRecvError, StreamRecvError, StreamRecvTimeoutError;
    try { E::Empty => (SHMBUS_EMPTY, 0) }
    shared {
        E::Disconnected => (SHMBUS_DISCONNECTED, 0),
        E::Corrupt(_) => (SHMBUS_CORRUPT, 0),
        E::Truncated => (SHMBUS_TRUNCATED, 0),
    }
}

map_family! {
    PoolTryRecvError, PoolRecvError, PoolRecvTimeoutError;
    try { E::Empty => (SHMBUS_EMPTY, 0) }
    shared {
        E::Orphaned => (SHMBUS_DISCONNECTED, 0),
        E::Corrupt(_) => (SHMBUS_CORRUPT, 0),
        E::Truncated => (SHMBUS_TRUNCATED, 0),
    }
}

map_family! {
    JournalTryRecvError, JournalRecvError, JournalRecvTimeoutError;
    try { E::Empty => (SHMBUS_EMPTY, 0) }
    shared {
        E::Gap { .. } | E::Damaged { .. } | E::Encrypted { .. } | E::UnknownKey { .. } | E::PositionReset { .. } => (SHMBUS_DAMAGED, 0),
        E::Unauthenticated { .. } => (SHMBUS_CORRUPT, 0),
        E::Corrupt(_) => (SHMBUS_CORRUPT, 0),
        E::Truncated { .. } => (SHMBUS_TRUNCATED, 0),
        E::Open(o) => (open_code(o), 0),
        E::Io(_) => (SHMBUS_IO, 0),
    }
}

map_errors! {
    WaitError => {
        E::TooMany { .. } | E::Empty => (SHMBUS_INVALID_ARGUMENT, 0),
        E::Os(_) => (SHMBUS_IO, 0),
    }
    WaitTimeoutError => {
        E::Timeout => (SHMBUS_TIMEOUT, 0),
        E::TooMany { .. } | E::Empty => (SHMBUS_INVALID_ARGUMENT, 0),
        E::Os(_) => (SHMBUS_IO, 0),
    }
}

/// The code of an `OpenError` nested in another error.
fn open_code(e: &OpenError) -> shmbus_status {
    match e {
        OpenError::NotFound { .. } => SHMBUS_NOT_FOUND,
        OpenError::PermissionDenied { .. } => SHMBUS_PERMISSION_DENIED,
        OpenError::Truncated { .. } => SHMBUS_TRUNCATED,
        OpenError::Corrupt { .. } => SHMBUS_CORRUPT,
        _ => SHMBUS_IO,
    }
}
