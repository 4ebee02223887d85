//! Typed queue endpoints: a [`Pod`] type `T` instead of bytes, as thin wrappers over
//! [`Producer`] and [`Consumer`].

use std::marker::PhantomData;
use std::time::Duration;

use super::channel::Queue;
use super::consumer::Consumer;
use super::error::{
    QueueRecvError, QueueRecvTimeoutError, QueueSendError, QueueSendTimeoutError, QueueTryRecvError, QueueTrySendError,
};
use super::layout::QueueConfig;
use super::producer::Producer;
use crate::error::{Corrupt, OpenError};
use crate::pod::{bytes_of, read_from, PayloadType, Pod};
use crate::segment::Kind;
use crate::waitset::{WaitHandle, Waitable};

/// What a typed receive reports for a message that is not exactly one `T`.
fn wrong_len<T>(len: usize) -> Corrupt {
    Corrupt::new(Kind::Queue, "message length is not the size of the consumer's payload type")
        .with("len", len as u64)
        .with("size", std::mem::size_of::<T>() as u64)
}

impl QueueConfig {
    /// A config for a queue of `T` messages: the max message length is `size_of::<T>()`
    /// unless [`max_message_len`](Self::max_message_len) sets it, and a created queue records
    /// `T`'s name, size and alignment in its header. Opening an existing queue with it fails
    /// with [`OpenError::TypeMismatch`] if the queue records another type, or is an untyped
    /// queue whose messages cannot hold a `T`. Any alignment goes: a queue's receives copy.
    pub fn for_type<T: Pod>() -> QueueConfig {
        QueueConfig::default().payload_type(PayloadType::of::<T>())
    }
}

impl Queue {
    /// A new producer of `T` messages. Fails with [`OpenError::TypeMismatch`] if the queue
    /// records another payload type, or is untyped and its max message length is smaller than
    /// a `T`; otherwise as [`Queue::producer`].
    pub fn producer_of<T: Pod>(&self) -> Result<TypedProducer<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(TypedProducer { inner: self.producer()?, _type: PhantomData })
    }

    /// A new consumer of `T` messages. Fails as [`Queue::producer_of`] does; otherwise as
    /// [`Queue::consumer`].
    pub fn consumer_of<T: Pod>(&self) -> Result<TypedConsumer<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(TypedConsumer { inner: self.consumer()?, buf: Vec::new(), _type: PhantomData })
    }
}

/// Sends `T` messages to a queue: a [`Producer`] that sends the bytes of a `T`.
#[derive(Debug)]
pub struct TypedProducer<T: Pod> {
    inner: Producer,
    _type: PhantomData<fn(T)>,
}

impl<T: Pod> TypedProducer<T> {
    /// Sends a copy of `value` if there is room now (see [`Producer::try_send`]).
    pub fn try_send(&mut self, value: &T) -> Result<(), QueueTrySendError> {
        self.inner.try_send(bytes_of(value))
    }

    /// Sends a copy of `value`, waiting as long as it takes for room.
    pub fn send(&mut self, value: &T) -> Result<(), QueueSendError> {
        self.inner.send(bytes_of(value))
    }

    /// Sends a copy of `value`, waiting at most `timeout` for room.
    pub fn send_timeout(&mut self, value: &T, timeout: Duration) -> Result<(), QueueSendTimeoutError> {
        self.inner.send_timeout(bytes_of(value), timeout)
    }

    /// The byte producer underneath.
    pub fn as_bytes(&mut self) -> &mut Producer {
        &mut self.inner
    }
}

impl<T: Pod> Waitable for TypedProducer<T> {
    fn wait_handle(&self) -> WaitHandle<'_> {
        self.inner.wait_handle()
    }

    fn is_ready(&self) -> bool {
        self.inner.is_ready()
    }

    fn recheck_interval(&self) -> Option<Duration> {
        self.inner.recheck_interval()
    }

    fn recheck(&self) -> bool {
        self.inner.recheck()
    }
}

/// Receives `T` messages from a queue: a [`Consumer`] whose receives return a `T` copy.
///
/// A message that is not exactly `size_of::<T>()` bytes (sent by a byte producer, or a
/// hostile peer) is reported as `Corrupt` (with the values `len` and `size`): it has been
/// taken from the queue, like any received message, and the next receive goes on with the
/// message after it.
#[derive(Debug)]
pub struct TypedConsumer<T: Pod> {
    inner: Consumer,
    /// The receives' buffer, reserved once to the max message length.
    buf: Vec<u8>,
    _type: PhantomData<fn() -> T>,
}

impl<T: Pod> TypedConsumer<T> {
    /// Receives a `T` if one is there now (see [`Consumer::try_recv`]).
    pub fn try_recv(&mut self) -> Result<T, QueueTryRecvError> {
        self.inner.try_recv_into(&mut self.buf)?;
        read_from(&self.buf).ok_or_else(|| QueueTryRecvError::Corrupt(wrong_len::<T>(self.buf.len())))
    }

    /// Receives a `T`, waiting as long as it takes.
    pub fn recv(&mut self) -> Result<T, QueueRecvError> {
        self.inner.recv_into(&mut self.buf)?;
        read_from(&self.buf).ok_or_else(|| QueueRecvError::Corrupt(wrong_len::<T>(self.buf.len())))
    }

    /// Receives a `T`, waiting at most `timeout`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<T, QueueRecvTimeoutError> {
        self.inner.recv_into_timeout(&mut self.buf, timeout)?;
        read_from(&self.buf).ok_or_else(|| QueueRecvTimeoutError::Corrupt(wrong_len::<T>(self.buf.len())))
    }

    /// The byte consumer underneath.
    pub fn as_bytes(&mut self) -> &mut Consumer {
        &mut self.inner
    }
}

impl<T: Pod> Waitable for TypedConsumer<T> {
    fn wait_handle(&self) -> WaitHandle<'_> {
        self.inner.wait_handle()
    }

    fn is_ready(&self) -> bool {
        self.inner.is_ready()
    }

    fn recheck_interval(&self) -> Option<Duration> {
        self.inner.recheck_interval()
    }

    fn recheck(&self) -> bool {
        self.inner.recheck()
    }
}
