//! Typed topic endpoints: a [`Pod`] type `T` instead of bytes, as thin wrappers over
//! [`Publisher`] and [`Subscriber`].

use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

use super::channel::{Topic, TopicConfig};
use super::error::{TopicRecvError, TopicRecvTimeoutError, TopicSendError, TopicTryRecvError};
use super::protocol::INLINE_DATA;
use super::publisher::{Loan, Publisher};
use super::subscriber::{Sample, Subscriber};
use crate::error::{Corrupt, OpenError};
use crate::pod::{bytes_of, read_from, ref_from, PayloadType, Pod};
use crate::segment::Kind;
use crate::waitset::{WaitHandle, Waitable};

/// The alignment of every slot's payload in a topic of `slot_size`-byte slots: 8 for small
/// slots (the payload sits inside the 128-byte-aligned slot header, at offset 88), 64 for
/// the others (slots of a multiple of 64 bytes from a page-aligned start).
pub(super) fn payload_align(slot_size: u64) -> usize {
    if slot_size <= INLINE_DATA as u64 {
        8
    } else {
        64
    }
}

/// The slot size of a topic made by [`TopicConfig::for_type`]: the type's size, or at least
/// `INLINE_DATA + 1` bytes for a type aligned to more than 8, so that its slots are 64-aligned.
pub(super) fn slot_size_for(t: &PayloadType) -> usize {
    if t.align > 8 {
        t.size.max(INLINE_DATA + 1)
    } else {
        t.size
    }
}

/// What a typed receive reports for a message that is not exactly one `T`.
fn wrong_len<T>(len: usize) -> Corrupt {
    Corrupt::new(Kind::Topic, "message length is not the size of the subscriber's payload type")
        .with("len", len as u64)
        .with("size", std::mem::size_of::<T>() as u64)
}

impl TopicConfig {
    /// A config for a topic of `T` messages: the slot size is `size_of::<T>()` (at least 41
    /// bytes for a type aligned to more than 8, so that its slots are 64-byte aligned) unless
    /// [`max_message_len`](Self::max_message_len) sets it, and a created topic records `T`'s
    /// name, size and alignment in its header. Opening an existing topic with it fails with
    /// [`OpenError::TypeMismatch`] if the topic records another type, or is an untyped topic
    /// whose slots cannot hold a `T`; a type aligned to more than 64 bytes is refused with
    /// [`OpenError::InvalidConfig`].
    pub fn for_type<T: Pod>() -> TopicConfig {
        TopicConfig::default().payload_type(PayloadType::of::<T>())
    }
}

impl Topic {
    /// A new publisher of `T` messages. Fails with [`OpenError::TypeMismatch`] if the topic
    /// records another payload type, or is untyped and its slots are smaller than a `T` or
    /// less aligned than `T` needs; otherwise as [`Topic::publisher`].
    pub fn publisher_of<T: Pod>(&self) -> Result<TypedPublisher<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        Ok(TypedPublisher { inner: self.publisher()?, _type: PhantomData })
    }

    /// A new subscriber of `T` messages, receiving those published from now on. Fails as
    /// [`Topic::publisher_of`] does; otherwise as [`Topic::subscriber`].
    pub fn subscriber_of<T: Pod>(&self) -> Result<TypedSubscriber<T>, OpenError> {
        self.check_type(&PayloadType::of::<T>())?;
        let buf = Vec::with_capacity(std::mem::size_of::<T>());
        Ok(TypedSubscriber { inner: self.subscriber()?, buf: Cell::new(buf), _type: PhantomData })
    }
}

/// Publishes `T` messages to a topic: a [`Publisher`] that sends the bytes of a `T`.
#[derive(Debug)]
pub struct TypedPublisher<T: Pod> {
    inner: Publisher,
    _type: PhantomData<fn(T)>,
}

impl<T: Pod> TypedPublisher<T> {
    /// Publishes a copy of `value`; returns its sequence number (see [`Publisher::send`]).
    pub fn send(&mut self, value: &T) -> Result<u64, TopicSendError> {
        self.inner.send(bytes_of(value))
    }

    /// Loans a slot to build a `T` in place (zero copy), then [`TypedLoan::send`] it. The
    /// loan holds whatever the slot held before (some valid `T`): set every field.
    /// Dropping it unsent publishes nothing.
    pub fn loan(&mut self) -> Result<TypedLoan<'_, T>, TopicSendError> {
        let size = std::mem::size_of::<T>();
        let mut loan = self.inner.loan()?;
        if loan.len() < size {
            return Err(TopicSendError::TooLarge { len: size, max: loan.len() });
        }
        loan.truncate(size);
        // Checked when the publisher was made (`payload_align`): slots are aligned for T.
        assert!(loan.as_ptr().align_offset(std::mem::align_of::<T>()) == 0, "topic slot not aligned for the type");
        Ok(TypedLoan { inner: loan, _type: PhantomData })
    }

    /// The byte publisher underneath.
    pub fn as_bytes(&mut self) -> &mut Publisher {
        &mut self.inner
    }
}

/// A slot lent by [`TypedPublisher::loan`]: a `T` to write in place
/// (`DerefMut<Target = T>`), published by [`TypedLoan::send`].
#[must_use = "a loan publishes nothing unless sent"]
#[derive(Debug)]
pub struct TypedLoan<'a, T: Pod> {
    inner: Loan<'a>,
    _type: PhantomData<&'a mut T>,
}

impl<T: Pod> TypedLoan<'_, T> {
    /// Publishes the value; returns its sequence number.
    pub fn send(self) -> Result<u64, TopicSendError> {
        self.inner.send()
    }
}

impl<T: Pod> Deref for TypedLoan<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the loan is exactly size_of::<T>() bytes, aligned for T (checked in `loan`),
        // and any bit pattern is a valid T (Pod).
        unsafe { &*(self.inner.as_ptr() as *const T) }
    }
}

impl<T: Pod> DerefMut for TypedLoan<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; the loan's bytes belong to this publisher until sent.
        unsafe { &mut *(self.inner.as_mut_ptr() as *mut T) }
    }
}

/// Subscribes to a topic of `T` messages: a [`Subscriber`] whose receives return a `T`
/// (copied) or a pinned [`TypedSample`] (a `&T` in place). A message that is not exactly
/// `size_of::<T>()` bytes (sent by a byte publisher, or a hostile peer) is reported as
/// `Corrupt` (with the values `len` and `size`) and skipped: the next receive goes on with
/// the message after it. `Send`, not `Sync`, like [`Subscriber`].
pub struct TypedSubscriber<T: Pod> {
    inner: Subscriber,
    /// The copy receives' buffer: `size_of::<T>()` bytes, allocated once.
    buf: Cell<Vec<u8>>,
    _type: PhantomData<fn() -> T>,
}

impl<T: Pod> TypedSubscriber<T> {
    /// Receives the next message as a `T` copy, without waiting (see
    /// [`Subscriber::try_recv`]).
    pub fn try_recv(&self) -> Result<T, TopicTryRecvError> {
        let mut buf = self.buf.take();
        let r = self.inner.try_recv_into(&mut buf).map(|_| read_from::<T>(&buf).ok_or(buf.len()));
        self.buf.set(buf);
        r?.map_err(|len| TopicTryRecvError::Corrupt(wrong_len::<T>(len)))
    }

    /// Receives the next message as a `T` copy, waiting as long as it takes.
    pub fn recv(&self) -> Result<T, TopicRecvError> {
        let mut buf = self.buf.take();
        let r = self.inner.recv_into(&mut buf).map(|_| read_from::<T>(&buf).ok_or(buf.len()));
        self.buf.set(buf);
        r?.map_err(|len| TopicRecvError::Corrupt(wrong_len::<T>(len)))
    }

    /// Receives the next message as a `T` copy, waiting at most `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, TopicRecvTimeoutError> {
        let mut buf = self.buf.take();
        let r = self.inner.recv_into_timeout(&mut buf, timeout).map(|_| read_from::<T>(&buf).ok_or(buf.len()));
        self.buf.set(buf);
        r?.map_err(|len| TopicRecvTimeoutError::Corrupt(wrong_len::<T>(len)))
    }

    /// Receives the next message in place, pinned, without waiting (see
    /// [`Subscriber::try_recv_ref`]).
    pub fn try_recv_ref(&self) -> Result<TypedSample<'_, T>, TopicTryRecvError> {
        let s = self.inner.try_recv_ref()?;
        TypedSample::new(s).map_err(|len| TopicTryRecvError::Corrupt(wrong_len::<T>(len)))
    }

    /// Receives the next message in place, pinned, waiting as long as it takes.
    pub fn recv_ref(&self) -> Result<TypedSample<'_, T>, TopicRecvError> {
        let s = self.inner.recv_ref()?;
        TypedSample::new(s).map_err(|len| TopicRecvError::Corrupt(wrong_len::<T>(len)))
    }

    /// Receives the next message in place, pinned, waiting at most `timeout`.
    pub fn recv_ref_timeout(&self, timeout: Duration) -> Result<TypedSample<'_, T>, TopicRecvTimeoutError> {
        let s = self.inner.recv_ref_timeout(timeout)?;
        TypedSample::new(s).map_err(|len| TopicRecvTimeoutError::Corrupt(wrong_len::<T>(len)))
    }

    /// The byte subscriber underneath (for seeking, reading by sequence number, tuning).
    pub fn as_bytes(&self) -> &Subscriber {
        &self.inner
    }
}

impl<T: Pod> std::fmt::Debug for TypedSubscriber<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedSubscriber").field("inner", &self.inner).field("type", &PayloadType::of::<T>()).finish()
    }
}

impl<T: Pod> Waitable for TypedSubscriber<T> {
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

/// A `T` pinned in place in a topic slot (`Deref<Target = T>`), from
/// [`TypedSubscriber::recv_ref`] and its forms: no publisher overwrites it while it lives.
#[derive(Debug)]
pub struct TypedSample<'a, T: Pod> {
    inner: Sample<'a>,
    _type: PhantomData<&'a T>,
}

impl<'a, T: Pod> TypedSample<'a, T> {
    /// The sample as a `T`, or the length of a message that is not one (the sample is
    /// dropped, unpinning it).
    fn new(inner: Sample<'a>) -> Result<TypedSample<'a, T>, usize> {
        match ref_from::<T>(&inner) {
            Some(_) => Ok(TypedSample { inner, _type: PhantomData }),
            None => Err(inner.len()),
        }
    }

    /// Sequence number.
    pub fn seq(&self) -> u64 {
        self.inner.seq()
    }

    /// Publish time (`CLOCK_MONOTONIC` nanoseconds).
    pub fn ts_ns(&self) -> u64 {
        self.inner.ts_ns()
    }
}

impl<T: Pod> Deref for TypedSample<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: `new` checked that the pinned bytes are exactly size_of::<T>() long and
        // aligned for T; any bit pattern is a valid T (Pod); the pin keeps them in place.
        unsafe { &*(self.inner.as_ptr() as *const T) }
    }
}
