//! What the tool adds to the library's error messages: the library says what is wrong in its
//! own terms; the tool says which of its verbs and flags put it right.

use std::error::Error;

use shmbus::name::is_channel_path;

use shmbus::{
    ErrorKind, Failure, JournalRecvError, JournalRecvTimeoutError, JournalSendError, JournalTryRecvError, OpenError,
    PoolRecvError, PoolRecvTimeoutError, PoolTryRecvError, PoolTrySendError, QueueRecvError, QueueRecvTimeoutError,
    QueueSendError, QueueSendTimeoutError, QueueTryRecvError, QueueTrySendError, StreamRecvError,
    StreamRecvTimeoutError, StreamSendError, StreamSendTimeoutError, StreamTryRecvError, StreamTrySendError,
    TopicGetError, TopicRecvError, TopicRecvTimeoutError, TopicSendError, TopicSendTimeoutError, TopicTryRecvError,
    TopicTrySendError, WaitForError,
};

/// The tool's hint for `e`, to follow its message (`"; …"`), if it has one.
pub fn hint(e: &(dyn Error + 'static)) -> Option<&'static str> {
    if let Some(o) = e.downcast_ref::<OpenError>().or_else(|| match e.downcast_ref::<WaitForError>() {
        Some(WaitForError::Open(o)) => Some(o),
        _ => None,
    }) {
        return open_hint(o);
    }
    let failure = as_failure(e)?;
    match failure.kind() {
        ErrorKind::TooLarge if is_topic_send(e) => {
            Some("; `shmbus create --slot-size` sets a new topic's largest message (`shmbus info` shows this one's)")
        }
        ErrorKind::Truncated => Some("; `shmbus info` prints the channel's file"),
        _ => None,
    }
}

fn open_hint(e: &OpenError) -> Option<&'static str> {
    match e {
        OpenError::NotFound { path } if is_channel_path(path) => {
            Some("; `shmbus ls` lists the channels, `shmbus create` (or `shmbus pub`) makes one, --domain and --root say where to look")
        }
        OpenError::NotASegment { path } | OpenError::Truncated { path, .. } if is_channel_path(path) => {
            Some("; `shmbus clean --force` removes it")
        }
        OpenError::LayoutMismatch { path, .. } | OpenError::TypeMismatch { path, .. } | OpenError::SchemaMismatch { path, .. }
            if is_channel_path(path) =>
        {
            Some("; `shmbus info` shows what it was made with")
        }
        OpenError::Busy { path, .. } | OpenError::TooManyParticipants { path, .. } if is_channel_path(path) => {
            Some("; `shmbus info` shows who holds it")
        }
        _ => None,
    }
}

fn is_topic_send(e: &(dyn Error + 'static)) -> bool {
    e.is::<TopicSendError>() || e.is::<TopicTrySendError>() || e.is::<TopicSendTimeoutError>()
}

/// `e` as a library error, if it is one of those the tool's verbs return.
fn as_failure<'a>(e: &'a (dyn Error + 'static)) -> Option<&'a dyn Failure> {
    macro_rules! first_of {
        ($($t:ty),* $(,)?) => {
            $( if let Some(f) = e.downcast_ref::<$t>() {
                return Some(f);
            } )*
        };
    }
    first_of!(
        TopicSendError,
        TopicTrySendError,
        TopicSendTimeoutError,
        TopicRecvError,
        TopicTryRecvError,
        TopicRecvTimeoutError,
        TopicGetError,
        QueueSendError,
        QueueTrySendError,
        QueueSendTimeoutError,
        QueueRecvError,
        QueueTryRecvError,
        QueueRecvTimeoutError,
        StreamSendError,
        StreamTrySendError,
        StreamSendTimeoutError,
        StreamRecvError,
        StreamTryRecvError,
        StreamRecvTimeoutError,
        PoolTrySendError,
        PoolRecvError,
        PoolTryRecvError,
        PoolRecvTimeoutError,
        JournalSendError,
        JournalRecvError,
        JournalTryRecvError,
        JournalRecvTimeoutError,
    );
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn flags_come_from_the_tool() {
        let e = TopicSendError::TooLarge { len: 10, max: 4 };
        assert!(!e.to_string().contains("--"), "the library's message names no flag: {e}");
        assert!(hint(&e).unwrap().contains("--slot-size"));
        let q = QueueSendError::TooLarge { len: 10, max: 4 };
        assert_eq!(hint(&q), None);
        let missing = OpenError::NotFound { path: PathBuf::from("/dev/shm/shmbus.d/t") };
        assert!(!missing.to_string().contains("shmbus "), "{missing}");
        assert!(hint(&missing).unwrap().contains("--domain"));
        let elsewhere = OpenError::NotFound { path: PathBuf::from("/etc/x") };
        assert_eq!(hint(&elsewhere), None);
        assert!(hint(&TopicRecvError::Truncated).unwrap().contains("shmbus info"));
        let busy = OpenError::Busy { path: PathBuf::from("/dev/shm/shmbus.d/s"), holder_pid: 7 };
        assert!(hint(&busy).unwrap().contains("shmbus info"));
    }
}
