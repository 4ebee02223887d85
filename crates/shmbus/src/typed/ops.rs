//! What the typed senders need from a kind's byte endpoints, as traits, and each kind's
//! answer (the typed receivers use the receive contract, `crate::Receive`). The traits are public (they bound the wrappers' methods) but live in a private
//! module: nothing outside the crate can name or implement them.

use std::ops::DerefMut;
use std::time::Duration;

/// A byte receiver whose payloads lent in place sit at addresses aligned for any `T` its
/// typed receivers may open with, so that its typed receivers lend a `&T`: the stream's
/// records and the pool's jobs (and the topic's samples, whose typed receiver is its own).
/// Not the journal's: a compressed or sealed entry is decoded into a buffer of no promised
/// alignment, so its typed tailer copies.
pub trait AlignedRef: crate::endpoint::receive::ReceiveRef {}

impl AlignedRef for crate::stream::StreamReader {}
impl AlignedRef for crate::pool::Worker {}

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
    use crate::topic::{Loan, Publisher, TopicSendError, TopicSendTimeoutError, TopicTrySendError};

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
    use crate::queue::{Producer, QueueSendError, QueueSendTimeoutError, QueueTrySendError};

    send_bytes!(Producer: TrySendBytes::try_send_bytes = try_send -> (), QueueTrySendError);
    send_bytes!(Producer: SendBytes::send_bytes = send -> (), QueueSendError);
    send_bytes!(Producer: TimedSendBytes = send_timeout -> (), QueueSendTimeoutError);
}

mod stream {
    use super::*;
    use crate::stream::{Loan, StreamSendError, StreamSendTimeoutError, StreamTrySendError, StreamWriter};

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
    use crate::pool::{Dispatched, Dispatcher, PoolTrySendError};

    send_bytes!(Dispatcher: TrySendBytes::try_send_bytes = try_send -> Dispatched, PoolTrySendError);
}

mod journal {
    use super::*;
    use crate::journal::{Appender, JournalSendError, Loan};

    send_bytes!(Appender: SendBytes::send_bytes = send -> u64, JournalSendError);
    loaned!(Loan, Result<u64, JournalSendError>);
    lend_bytes!(Appender, Loan, JournalSendError);
}
