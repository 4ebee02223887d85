//! Typed topic endpoints: a [`Pod`] type `T` instead of bytes, as thin wrappers over
//! [`Publisher`] and [`Subscriber`] (the wrappers are [`crate::typed`]'s).

use super::config::TopicConfig;
use super::handle::Topic;
use super::publisher::Publisher;
use super::subscriber::{Sample, Subscriber};
use crate::error::OpenError;
use crate::pod::{PayloadType, Pod};
use crate::typed::{Loan, Receiver, Ref, Sender};

impl TopicConfig {
    /// A config for a topic of `T` messages: the slot size is `size_of::<T>()` (at least 41
    /// bytes for a type aligned to more than 8, so that its slots are 64-byte aligned) unless
    /// [`max_message_len`](Self::max_message_len) sets it, and a created topic records `T`'s
    /// name, size and alignment in its header. Opening an existing topic with it fails with
    /// [`OpenError::TypeMismatch`] if the topic records another type, or is an untyped topic
    /// whose slots cannot hold a `T`; a type aligned to more than 64 bytes is refused with
    /// [`OpenError::InvalidConfig`].
    pub fn for_type<T: Pod>() -> TopicConfig {
        TopicConfig::default().payload_type::<T>()
    }
}

impl Topic {
    /// A new publisher of `T` messages. Fails with [`OpenError::TypeMismatch`] if the topic
    /// records another payload type, or is untyped and its slots are smaller than a `T` or
    /// less aligned than `T` needs; otherwise as [`Topic::publisher`].
    pub fn publisher_of<T: Pod>(&self) -> Result<TypedPublisher<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(Sender::new(self.publisher()?))
    }

    /// A new subscriber of `T` messages, receiving those published from now on. Fails as
    /// [`Topic::publisher_of`] does; otherwise as [`Topic::subscriber`].
    pub fn subscriber_of<T: Pod>(&self) -> Result<TypedSubscriber<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(Receiver::new(self.subscriber()?))
    }

    /// A new reliable subscriber of `T` messages. Fails as [`Topic::publisher_of`] does;
    /// otherwise as [`Topic::reliable_subscriber`].
    pub fn reliable_subscriber_of<T: Pod>(&self) -> Result<TypedSubscriber<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(Receiver::new(self.reliable_subscriber()?))
    }
}

/// Publishes `T` messages to a topic: a [`Publisher`] that sends the bytes of a `T`
/// ([`send`](crate::typed::Sender::send), returning the sequence number) or lends a slot to
/// build one in place ([`loan`](crate::typed::Sender::loan), a [`TypedLoan`]).
pub type TypedPublisher<T> = Sender<Publisher, T>;

/// A slot lent by [`TypedPublisher`]'s `loan`: a `T` to write in place
/// (`DerefMut<Target = T>`), published by its `send` (returning the sequence number).
pub type TypedLoan<'a, T> = Loan<crate::topic::Loan<'a>, T>;

/// Subscribes to a topic of `T` messages: a [`Subscriber`] whose receives (through `&self`)
/// return a `T` (copied) or a pinned [`TypedSample`] (a `&T` in place). A message that is
/// not exactly `size_of::<T>()` bytes (sent by a byte publisher, or a hostile peer) is
/// reported as `Corrupt` (with the values `len` and `size`) and skipped: the next receive
/// goes on with the message after it. `Send`, not `Sync`, like [`Subscriber`].
pub type TypedSubscriber<T> = Receiver<Subscriber, T>;

/// A `T` pinned in place in a topic slot (`Deref<Target = T>`), from [`TypedSubscriber`]'s
/// `recv_ref` and its forms: no publisher overwrites it while it lives.
pub type TypedSample<'a, T> = Ref<Sample<'a>, T>;

impl<T: Pod> Ref<Sample<'_>, T> {
    /// Sequence number.
    pub fn seq(&self) -> u64 {
        self.item().seq()
    }

    /// Publish time (`CLOCK_MONOTONIC` nanoseconds).
    pub fn ts_ns(&self) -> u64 {
        self.item().ts_ns()
    }
}
