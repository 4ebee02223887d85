//! What the typed wrappers need from a kind's byte endpoints, as traits, and each kind's
//! answer. The traits are public (they bound the wrappers' methods) but live in a private
//! module: nothing outside the crate can name or implement them.

use std::cell::Cell;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

use crate::error::Corrupt;
use crate::kind::Kind;
use crate::pod::Pod;

/// A byte receiver: what its receives report and how a typed receive says "not one `T`".
pub trait Receive {
    /// The kind, for `Corrupt` reports.
    const KIND: Kind;
    /// What a `Corrupt` report for a payload that is not one `T` says.
    const WRONG_LEN: &'static str;
    /// The copy receives' buffer: a `Vec<u8>`, in a `Cell` where the receives take `&self`.
    type Scratch: Scratch;
    /// What a receive into a buffer reports besides the bytes.
    type Info;
    /// What a typed copy receive returns: the `T`, or the `T` with the kind's metadata.
    type Owned<T: Pod>;
    /// The try receive's error.
    type TryRecvError;
    /// The blocking receive's error.
    type RecvError;
    /// The timed receive's error.
    type RecvTimeoutError;
    /// The typed copy of a received payload.
    fn owned<T: Pod>(info: &Self::Info, value: T) -> Self::Owned<T>;
    /// `c` with what `info` says about the payload (the pool adds the job id).
    fn note(_info: &Self::Info, c: Corrupt) -> Corrupt {
        c
    }
    /// `c` as the try receive's error.
    fn try_corrupt(c: Corrupt) -> Self::TryRecvError;
    /// `c` as the blocking receive's error.
    fn corrupt(c: Corrupt) -> Self::RecvError;
    /// `c` as the timed receive's error.
    fn timeout_corrupt(c: Corrupt) -> Self::RecvTimeoutError;
}

/// The copy receives' buffer.
pub trait Scratch: From<Vec<u8>> {
    /// The buffer, through `&mut`.
    fn vec(&mut self) -> &mut Vec<u8>;
}

impl Scratch for Vec<u8> {
    fn vec(&mut self) -> &mut Vec<u8> {
        self
    }
}

impl Scratch for Cell<Vec<u8>> {
    fn vec(&mut self) -> &mut Vec<u8> {
        self.get_mut()
    }
}

/// A byte receiver whose receives into a buffer take `&mut self` (every kind's but the
/// topic's, whose subscriber receives through `&self`).
pub trait RecvBytes: Receive {
    /// Receives into `buf` without waiting.
    fn try_recv_into(&mut self, buf: &mut Vec<u8>) -> Result<Self::Info, Self::TryRecvError>;
    /// Receives into `buf`, waiting as long as it takes.
    fn recv_into(&mut self, buf: &mut Vec<u8>) -> Result<Self::Info, Self::RecvError>;
    /// Receives into `buf`, waiting at most `timeout`.
    fn recv_into_timeout(&mut self, buf: &mut Vec<u8>, timeout: Duration)
        -> Result<Self::Info, Self::RecvTimeoutError>;
}

/// A byte receiver that lends received payloads in place.
pub trait ReceiveRef: Receive {
    /// The payload lent in place.
    type Pinned<'a>: Pinned
    where
        Self: 'a;
}

/// A [`ReceiveRef`] whose receives take `&mut self`.
pub trait RecvRefBytes: ReceiveRef + RecvBytes {
    /// The next payload in place, without waiting.
    fn try_recv_ref(&mut self) -> Result<Self::Pinned<'_>, Self::TryRecvError>;
    /// The next payload in place, waiting as long as it takes.
    fn recv_ref(&mut self) -> Result<Self::Pinned<'_>, Self::RecvError>;
    /// The next payload in place, waiting at most `timeout`.
    fn recv_ref_timeout(&mut self, timeout: Duration) -> Result<Self::Pinned<'_>, Self::RecvTimeoutError>;
}

/// A payload lent in place by a receive.
pub trait Pinned: Deref<Target = [u8]> {
    /// Lets go of a payload that is not one `T` so that the next receive goes on after it
    /// (the stream consumes the record; the others only drop it).
    fn discard(self)
    where
        Self: Sized,
    {
    }
    /// `c` with what the payload's metadata says (the pool adds the job id).
    fn note(&self, c: Corrupt) -> Corrupt {
        c
    }
}

/// A byte sender's blocking (or never-waiting) `send`.
pub trait SendBytes {
    /// What a send returns.
    type Sent;
    /// Its error.
    type Error;
    /// Sends `bytes`.
    fn send_bytes(&mut self, bytes: &[u8]) -> Result<Self::Sent, Self::Error>;
}

/// A byte sender's `try_send`.
pub trait TrySendBytes {
    /// What a send returns.
    type Sent;
    /// Its error.
    type Error;
    /// Sends `bytes` if there is room now.
    fn try_send_bytes(&mut self, bytes: &[u8]) -> Result<Self::Sent, Self::Error>;
}

/// A byte sender's `send_timeout`.
pub trait TimedSendBytes {
    /// What a send returns.
    type Sent;
    /// Its error.
    type Error;
    /// Sends `bytes`, waiting at most `timeout` for room.
    fn send_bytes_timeout(&mut self, bytes: &[u8], timeout: Duration) -> Result<Self::Sent, Self::Error>;
}

/// A byte sender that lends room for a payload of a given length (waiting for it if the
/// kind waits).
pub trait LendBytes {
    /// The room lent.
    type Loan<'a>: Loaned
    where
        Self: 'a;
    /// Its error.
    type Error;
    /// Room for exactly `len` bytes.
    fn lend(&mut self, len: usize) -> Result<Self::Loan<'_>, Self::Error>;
}

/// A [`LendBytes`] that can also lend without waiting, or waiting at most a timeout.
pub trait TryLendBytes: LendBytes {
    /// The try loan's error.
    type TryError;
    /// The timed loan's error.
    type TimeoutError;
    /// Room for exactly `len` bytes, without waiting.
    fn try_lend(&mut self, len: usize) -> Result<Self::Loan<'_>, Self::TryError>;
    /// Room for exactly `len` bytes, waiting at most `timeout`.
    fn lend_timeout(&mut self, len: usize, timeout: Duration) -> Result<Self::Loan<'_>, Self::TimeoutError>;
}

/// Room lent by a sender, sent by value.
pub trait Loaned: DerefMut<Target = [u8]> {
    /// What sending returns.
    type Sent;
    /// Sends it.
    fn send(self) -> Self::Sent;
}

/// `impl Receive for $ep` from the kind's types.
macro_rules! receive {
    ($ep:ty, $kind:ident, $what:literal, $scratch:ty, $info:ty, $owned:ty,
     $try_e:ident, $e:ident, $to_e:ident $(, |$i:ident, $v:ident| $make:expr, note $note:expr)?) => {
        impl Receive for $ep {
            const KIND: Kind = Kind::$kind;
            const WRONG_LEN: &'static str = $what;
            type Scratch = $scratch;
            type Info = $info;
            type Owned<T: Pod> = $owned;
            type TryRecvError = $try_e;
            type RecvError = $e;
            type RecvTimeoutError = $to_e;
            receive!(@owned $($i, $v, $make, $note)?);
            fn try_corrupt(c: Corrupt) -> $try_e {
                $try_e::Corrupt(c)
            }
            fn corrupt(c: Corrupt) -> $e {
                $e::Corrupt(c)
            }
            fn timeout_corrupt(c: Corrupt) -> $to_e {
                $to_e::Corrupt(c)
            }
        }
    };
    (@owned) => {
        fn owned<T: Pod>(_: &Self::Info, value: T) -> T {
            value
        }
    };
    (@owned $i:ident, $v:ident, $make:expr, $note:expr) => {
        fn owned<T: Pod>($i: &Self::Info, $v: T) -> Self::Owned<T> {
            $make
        }
        fn note(info: &Self::Info, c: Corrupt) -> Corrupt {
            $note(info, c)
        }
    };
}

/// `impl RecvBytes for $ep` (and `RecvRefBytes` with `ref $pinned`) from its inherent
/// receives of the same names.
macro_rules! recv_bytes {
    ($ep:ty $(, ref $pinned:ident)?) => {
        impl RecvBytes for $ep {
            fn try_recv_into(&mut self, buf: &mut Vec<u8>) -> Result<Self::Info, Self::TryRecvError> {
                <$ep>::try_recv_into(self, buf)
            }
            fn recv_into(&mut self, buf: &mut Vec<u8>) -> Result<Self::Info, Self::RecvError> {
                <$ep>::recv_into(self, buf)
            }
            fn recv_into_timeout(
                &mut self,
                buf: &mut Vec<u8>,
                timeout: Duration,
            ) -> Result<Self::Info, Self::RecvTimeoutError> {
                <$ep>::recv_into_timeout(self, buf, timeout)
            }
        }
        $(recv_bytes!(@ref $ep, $pinned);)?
    };
    (@ref $ep:ty, $pinned:ident) => {
        impl ReceiveRef for $ep {
            type Pinned<'a> = $pinned<'a>;
        }
        impl RecvRefBytes for $ep {
            fn try_recv_ref(&mut self) -> Result<$pinned<'_>, Self::TryRecvError> {
                <$ep>::try_recv_ref(self)
            }
            fn recv_ref(&mut self) -> Result<$pinned<'_>, Self::RecvError> {
                <$ep>::recv_ref(self)
            }
            fn recv_ref_timeout(&mut self, timeout: Duration) -> Result<$pinned<'_>, Self::RecvTimeoutError> {
                <$ep>::recv_ref_timeout(self, timeout)
            }
        }
    };
}

/// `impl $trait for $ep`, its `$method` being the endpoint's inherent `$inherent`.
macro_rules! send_bytes {
    ($ep:ty: $trait:ident::$method:ident = $inherent:ident -> $sent:ty, $err:ty) => {
        impl $trait for $ep {
            type Sent = $sent;
            type Error = $err;
            fn $method(&mut self, bytes: &[u8]) -> Result<$sent, $err> {
                <$ep>::$inherent(self, bytes)
            }
        }
    };
    ($ep:ty: TimedSendBytes = send_timeout -> $sent:ty, $err:ty) => {
        impl TimedSendBytes for $ep {
            type Sent = $sent;
            type Error = $err;
            fn send_bytes_timeout(&mut self, bytes: &[u8], timeout: Duration) -> Result<$sent, $err> {
                <$ep>::send_timeout(self, bytes, timeout)
            }
        }
    };
}

/// `impl Loaned for $loan` from its inherent `send`.
macro_rules! loaned {
    ($loan:ident, $sent:ty) => {
        impl Loaned for $loan<'_> {
            type Sent = $sent;
            fn send(self) -> $sent {
                $loan::send(self)
            }
        }
    };
}

/// `impl LendBytes for $ep` from its inherent `loan(len)`.
macro_rules! lend_bytes {
    ($ep:ty, $loan:ident, $err:ty) => {
        impl LendBytes for $ep {
            type Loan<'a> = $loan<'a>;
            type Error = $err;
            fn lend(&mut self, len: usize) -> Result<$loan<'_>, $err> {
                self.loan(len)
            }
        }
    };
}

mod topic {
    use super::*;
    use crate::topic::{
        Loan, MessageInfo, Publisher, Sample, Subscriber, TopicRecvError, TopicRecvTimeoutError, TopicSendError,
        TopicSendTimeoutError, TopicTryRecvError, TopicTrySendError,
    };

    receive!(
        Subscriber,
        Topic,
        "message length is not the size of the subscriber's payload type",
        Cell<Vec<u8>>,
        MessageInfo,
        T,
        TopicTryRecvError,
        TopicRecvError,
        TopicRecvTimeoutError
    );
    impl ReceiveRef for Subscriber {
        type Pinned<'a> = Sample<'a>;
    }
    impl Pinned for Sample<'_> {}
    send_bytes!(Publisher: SendBytes::send_bytes = send -> u64, TopicSendError);
    send_bytes!(Publisher: TrySendBytes::try_send_bytes = try_send -> u64, TopicTrySendError);
    send_bytes!(Publisher: TimedSendBytes = send_timeout -> u64, TopicSendTimeoutError);
    loaned!(Loan, Result<u64, TopicSendError>);

    impl LendBytes for Publisher {
        type Loan<'a> = Loan<'a>;
        type Error = TopicSendError;
        /// A slot, cut to `len` bytes (a slot holds `max_message_len` bytes).
        fn lend(&mut self, len: usize) -> Result<Loan<'_>, TopicSendError> {
            let mut loan = self.loan()?;
            if loan.len() < len {
                return Err(TopicSendError::TooLarge { len, max: loan.len() });
            }
            loan.truncate(len);
            Ok(loan)
        }
    }
}

mod queue {
    use super::*;
    use crate::queue::{
        Consumer, Producer, QueueRecvError, QueueRecvTimeoutError, QueueSendError, QueueSendTimeoutError,
        QueueTryRecvError, QueueTrySendError,
    };

    receive!(
        Consumer,
        Queue,
        "message length is not the size of the consumer's payload type",
        Vec<u8>,
        usize,
        T,
        QueueTryRecvError,
        QueueRecvError,
        QueueRecvTimeoutError
    );
    recv_bytes!(Consumer);
    send_bytes!(Producer: TrySendBytes::try_send_bytes = try_send -> (), QueueTrySendError);
    send_bytes!(Producer: SendBytes::send_bytes = send -> (), QueueSendError);
    send_bytes!(Producer: TimedSendBytes = send_timeout -> (), QueueSendTimeoutError);
}

mod stream {
    use super::*;
    use crate::stream::{
        Loan, Record, StreamReader, StreamRecvError, StreamRecvTimeoutError, StreamSendError, StreamSendTimeoutError,
        StreamTryRecvError, StreamTrySendError, StreamWriter,
    };

    receive!(
        StreamReader,
        Stream,
        "record length is not the size of the reader's payload type",
        Vec<u8>,
        usize,
        T,
        StreamTryRecvError,
        StreamRecvError,
        StreamRecvTimeoutError
    );
    recv_bytes!(StreamReader, ref Record);
    impl Pinned for Record<'_> {
        fn discard(self) {
            self.consume()
        }
    }
    send_bytes!(StreamWriter: TrySendBytes::try_send_bytes = try_send -> (), StreamTrySendError);
    send_bytes!(StreamWriter: SendBytes::send_bytes = send -> (), StreamSendError);
    send_bytes!(StreamWriter: TimedSendBytes = send_timeout -> (), StreamSendTimeoutError);
    loaned!(Loan, ());

    lend_bytes!(StreamWriter, Loan, StreamSendError);

    impl TryLendBytes for StreamWriter {
        type TryError = StreamTrySendError;
        type TimeoutError = StreamSendTimeoutError;
        fn try_lend(&mut self, len: usize) -> Result<Loan<'_>, StreamTrySendError> {
            self.try_loan(len)
        }
        fn lend_timeout(&mut self, len: usize, timeout: Duration) -> Result<Loan<'_>, StreamSendTimeoutError> {
            self.loan_timeout(len, timeout)
        }
    }
}

mod pool {
    use super::*;
    use crate::pool::{
        Dispatched, Dispatcher, JobInfo, JobRef, PoolRecvError, PoolRecvTimeoutError, PoolTryRecvError,
        PoolTrySendError, TypedJob, Worker,
    };

    receive!(
        Worker,
        Pool,
        "job length is not the size of the worker's payload type",
        Vec<u8>,
        JobInfo,
        TypedJob<T>,
        PoolTryRecvError,
        PoolRecvError,
        PoolRecvTimeoutError,
        |info, value| TypedJob::new(info.id(), value),
        note |info: &JobInfo, c: Corrupt| c.with("job_id", info.id())
    );
    recv_bytes!(Worker, ref JobRef);
    impl Pinned for JobRef<'_> {
        fn note(&self, c: Corrupt) -> Corrupt {
            c.with("job_id", self.id())
        }
    }
    send_bytes!(Dispatcher: TrySendBytes::try_send_bytes = try_send -> Dispatched, PoolTrySendError);
}

mod journal {
    use super::*;
    use crate::journal::{
        Appender, EntryInfo, JournalRecvError, JournalRecvTimeoutError, JournalSendError, JournalTryRecvError, Loan,
        Tailer,
    };

    receive!(
        Tailer,
        Journal,
        "entry length is not the size of the tailer's payload type",
        Vec<u8>,
        EntryInfo,
        T,
        JournalTryRecvError,
        JournalRecvError,
        JournalRecvTimeoutError,
        |_info, value| value,
        note |info: &EntryInfo, c: Corrupt| c.with("index", info.index())
    );
    recv_bytes!(Tailer);
    send_bytes!(Appender: SendBytes::send_bytes = send -> u64, JournalSendError);
    loaned!(Loan, Result<u64, JournalSendError>);
    lend_bytes!(Appender, Loan, JournalSendError);
}
