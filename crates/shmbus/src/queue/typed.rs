//! Typed queue endpoints: a [`Pod`] type `T` instead of bytes, as thin wrappers over
//! [`Producer`] and [`Consumer`].

use super::consumer::Consumer;
use super::handle::Queue;
use super::layout::QueueConfig;
use super::producer::Producer;
use crate::error::OpenError;
use crate::pod::{PayloadType, Pod};
use crate::typed::{Receiver, Sender};

impl QueueConfig {
    /// A config for a queue of `T` messages: the max message length is `size_of::<T>()`
    /// unless [`max_message_len`](Self::max_message_len) sets it, and a created queue records
    /// `T`'s name, size and alignment in its header. Opening an existing queue with it fails
    /// with [`OpenError::TypeMismatch`] if the queue records another type, or is an untyped
    /// queue whose messages cannot hold a `T`. Any alignment goes: a queue's receives copy.
    pub fn for_type<T: Pod>() -> QueueConfig {
        QueueConfig::default().payload_type::<T>()
    }
}

impl Queue {
    /// A new producer of `T` messages. Fails with [`OpenError::TypeMismatch`] if the queue
    /// records another payload type, or is untyped and its max message length is smaller than
    /// a `T`; otherwise as [`Queue::producer`].
    pub fn producer_of<T: Pod>(&self) -> Result<TypedProducer<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(Sender::new(self.producer()?))
    }

    /// A new consumer of `T` messages. Fails as [`Queue::producer_of`] does; otherwise as
    /// [`Queue::consumer`].
    pub fn consumer_of<T: Pod>(&self) -> Result<TypedConsumer<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(Receiver::new(self.consumer()?))
    }
}

/// Sends `T` messages to a queue: a [`Producer`] that sends the bytes of a `T`
/// (`try_send`, `send`, `send_timeout`, as the producer's).
pub type TypedProducer<T> = Sender<Producer, T>;

/// Receives `T` messages from a queue: a [`Consumer`] whose receives (`try_recv`, `recv`,
/// `recv_timeout`) return a `T` copy.
///
/// A message that is not exactly `size_of::<T>()` bytes (sent by a byte producer, or a
/// hostile peer) is reported as `Corrupt` (with the values `len` and `size`): it has been
/// taken from the queue, like any received message, and the next receive goes on with the
/// message after it.
pub type TypedConsumer<T> = Receiver<Consumer, T>;
