//! The typed endpoints of every kind, written once: a [`Sender`] and a [`Receiver`] of
//! [`Pod`] values over a kind's byte endpoint, the [`Loan`] of a `T` built in place, and the
//! [`Ref`] of a `T` received in place.
//!
//! Each kind names them: `TypedPublisher<T>` is `Sender<Publisher, T>`, `TypedConsumer<T>` is
//! `Receiver<Consumer, T>`, `topic::TypedSample<'a, T>` is `Ref<Sample<'a>, T>`, and so on.
//! A wrapper has the verbs its byte endpoint has (a queue producer's `try_send`, `send`,
//! `send_timeout`; a topic publisher's `send` and `loan`), with the same errors; the receives
//! check that every payload is exactly `size_of::<T>()` bytes (and, in place, aligned for
//! `T`) and report one that is not as the receive error's `Corrupt` variant (values `len`
//! and `size`), after letting go of it so that the next receive goes on.

mod ops;

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

use crate::endpoint::forms::{sealed, wait_forms};
use crate::endpoint::receive::{Receive, ReceiveInto, ReceiveRef, RecvErrors, Waited};
use crate::endpoint::send::{Refusal, SendErrors, Transmit};
use crate::error::Corrupt;
use crate::pod::{bytes_of, read_from, ref_from, PayloadType, Pod};
use crate::topic::{Sample, Subscriber, TopicRecvError};
use crate::wait::Wait;
use crate::waitset::Waitable;
use ops::{AlignedRef, LendBytes, Loaned, SendBytes, TimedSendBytes, TryLendBytes, TrySendBytes};

/// What a typed receive reports for a payload of `len` bytes that is not one `T`.
fn not_one<T: Pod>(kind: crate::kind::Kind, what: &'static str, len: usize) -> Corrupt {
    Corrupt::new(kind, what).with("len", len as u64).with("size", std::mem::size_of::<T>() as u64)
}

/// Sends `T` values through a kind's byte sender `B` (its bytes; see the module docs).
pub struct Sender<B, T: Pod> {
    inner: B,
    _type: PhantomData<fn(T)>,
}

impl<B, T: Pod> Sender<B, T> {
    pub(crate) fn new(inner: B) -> Self {
        Sender { inner, _type: PhantomData }
    }

    /// The byte endpoint underneath.
    pub fn as_bytes(&mut self) -> &mut B {
        &mut self.inner
    }
}

impl<B: SendBytes, T: Pod> Sender<B, T> {
    /// Sends a copy of `value` (waiting for room where the kind waits), as the byte
    /// endpoint's `send`.
    pub fn send(&mut self, value: &T) -> Result<B::Sent, B::Error> {
        self.inner.send_bytes(bytes_of(value))
    }
}

impl<B: TrySendBytes, T: Pod> Sender<B, T> {
    /// Sends a copy of `value` if it can be now, as the byte endpoint's `try_send`.
    pub fn try_send(&mut self, value: &T) -> Result<B::Sent, B::Error> {
        self.inner.try_send_bytes(bytes_of(value))
    }
}

impl<B: TimedSendBytes, T: Pod> Sender<B, T> {
    /// Sends a copy of `value`, waiting at most `timeout` for room; returns what the byte
    /// endpoint's `send_timeout` does (a topic's sequence number).
    pub fn send_timeout(&mut self, value: &T, timeout: Duration) -> Result<B::Sent, B::Error> {
        self.inner.send_bytes_timeout(bytes_of(value), timeout)
    }
}

impl<B: Transmit, T: Pod> Sender<B, T> {
    /// Sends a copy of `value`, waiting for room as `wait` says: the byte endpoint's
    /// `send_with`.
    pub fn send_with(&mut self, value: &T, wait: Wait) -> Result<B::Sent, Refusal<B::Error>> {
        self.inner.send_with(bytes_of(value), wait)
    }

    /// Sends a copy of `value`, waiting until `deadline` at most for room.
    pub fn send_deadline(
        &mut self,
        value: &T,
        deadline: Instant,
    ) -> Result<B::Sent, <B::Error as SendErrors>::Timeout> {
        self.inner.send_with(bytes_of(value), Wait::Until(deadline)).map_err(Into::into)
    }
}

impl<B: LendBytes, T: Pod> Sender<B, T> {
    /// Lends room for one `T` (waiting for it where the kind waits) to build it in place,
    /// then [`Loan::send`] it. The room holds whatever was there before (some valid `T`):
    /// set every field. Dropping the loan unsent sends nothing.
    pub fn loan(&mut self) -> Result<Loan<B::Loan<'_>, T>, B::Error> {
        self.inner.lend(std::mem::size_of::<T>()).map(Loan::new)
    }
}

impl<B: TryLendBytes, T: Pod> Sender<B, T> {
    /// [`loan`](Self::loan), without waiting.
    pub fn try_loan(&mut self) -> Result<Loan<B::Loan<'_>, T>, B::TryError> {
        self.inner.try_lend(std::mem::size_of::<T>()).map(Loan::new)
    }

    /// [`loan`](Self::loan), waiting at most `timeout` for room.
    pub fn loan_timeout(&mut self, timeout: Duration) -> Result<Loan<B::Loan<'_>, T>, B::TimeoutError> {
        self.inner.lend_timeout(std::mem::size_of::<T>(), timeout).map(Loan::new)
    }
}

impl<B: fmt::Debug, T: Pod> fmt::Debug for Sender<B, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").field("inner", &self.inner).field("type", &PayloadType::of::<T>()).finish()
    }
}

/// Room for one `T` lent by [`Sender::loan`] and its forms (`DerefMut<Target = T>`), sent by
/// [`Loan::send`].
#[must_use = "a loan sends nothing unless sent"]
pub struct Loan<L, T: Pod> {
    inner: L,
    _type: PhantomData<fn(T) -> T>,
}

impl<L: Loaned, T: Pod> Loan<L, T> {
    fn new(inner: L) -> Self {
        // Every kind that lends places payloads at addresses aligned for any `T` its typed
        // endpoints were allowed to open with (checked at open).
        assert!(
            inner.len() == std::mem::size_of::<T>() && inner.as_ptr().align_offset(std::mem::align_of::<T>()) == 0,
            "loan not sized and aligned for the payload type"
        );
        Loan { inner, _type: PhantomData }
    }

    /// Sends the value (as the byte loan's `send`).
    pub fn send(self) -> L::Sent {
        self.inner.send()
    }
}

impl<L: Loaned, T: Pod> Deref for Loan<L, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: exactly size_of::<T>() bytes, aligned for T (checked in `new`); any bit
        // pattern is a valid T (Pod).
        unsafe { &*(self.inner.as_ptr() as *const T) }
    }
}

impl<L: Loaned, T: Pod> DerefMut for Loan<L, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; the lent bytes are the sender's alone until sent, and
        // `&mut self` makes this the only reference.
        unsafe { &mut *(self.inner.as_mut_ptr() as *mut T) }
    }
}

impl<L: fmt::Debug, T: Pod> fmt::Debug for Loan<L, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loan").field("inner", &self.inner).field("type", &PayloadType::of::<T>()).finish()
    }
}

/// Receives `T` values through a kind's byte receiver `B`: copies (`try_recv`, `recv`,
/// `recv_timeout`, `recv_deadline`, all [`recv_with`](Self::recv_with)) and, where the kind
/// lends its memory, a `T` in place (the same forms of `recv_ref`). A payload that is not
/// exactly one `T` is the receive error's `Corrupt` variant (values `len` and `size`), and is
/// let go of: the next receive goes on after it.
pub struct Receiver<B, T: Pod> {
    inner: B,
    /// The copy receives' buffer, allocated once (in a `Cell`: the topic's receive through
    /// `&self`).
    buf: Cell<Vec<u8>>,
    _type: PhantomData<fn() -> T>,
}

impl<B, T: Pod> Receiver<B, T> {
    pub(crate) fn new(inner: B) -> Self {
        Receiver { inner, buf: Cell::new(Vec::with_capacity(std::mem::size_of::<T>())), _type: PhantomData }
    }

    /// The byte endpoint underneath, shared.
    pub(crate) fn bytes(&self) -> &B {
        &self.inner
    }
}

/// The copy of a payload `rx` received into `buf`, or what reports it is not one `T`.
fn copied<R: ReceiveInto, T: Pod>(
    r: Result<R::Info, Waited<R::Error>>,
    buf: &[u8],
) -> Result<R::Typed<T>, Waited<R::Error>> {
    let info = r?;
    match read_from::<T>(buf) {
        Some(value) => Ok(R::typed(&info, value)),
        None => {
            Err(Waited::Failed(RecvErrors::corrupt(R::note(&info, not_one::<T>(R::KIND, R::WRONG_LEN, buf.len())))))
        }
    }
}

/// A payload lent in place as a `T`, or what reports it is not one (let go of).
#[allow(clippy::type_complexity)]
fn pinned<R: ReceiveInto + ReceiveRef, T: Pod>(
    r: Result<R::Ref<'_>, Waited<R::Error>>,
) -> Result<Ref<R::Ref<'_>, T>, Waited<R::Error>> {
    let p = r?;
    if ref_from::<T>(&p).is_some() {
        return Ok(Ref { inner: p, _type: PhantomData });
    }
    let c = R::note_ref(&p, not_one::<T>(R::KIND, R::WRONG_LEN, p.len()));
    R::discard(p);
    Err(Waited::Failed(RecvErrors::corrupt(c)))
}

/// The forms of a typed receiver over `$b`, through `&self` (the topic's) or `&mut self`.
macro_rules! typed_forms {
    ($b:ty, $self:tt) => {
        wait_forms! {
            /// Receives the next payload as a `T` copy, without waiting (see
            /// [`recv_with`](Self::recv_with)).
            fn try_recv, recv, recv_timeout, recv_deadline $self = recv_with -> <$b as ReceiveInto>::Typed<T>;
            errors (
                <<$b as Receive>::Error as RecvErrors>::Try,
                <$b as Receive>::Error,
                <<$b as Receive>::Error as RecvErrors>::Timeout
            )
        }
    };
}

/// The in-place forms of a typed receiver over `$b`.
macro_rules! typed_ref_forms {
    ($b:ty, $ref:ty, $self:tt) => {
        wait_forms! {
            /// Receives the next payload in place, without waiting (see
            /// [`recv_ref_with`](Self::recv_ref_with)).
            fn try_recv_ref, recv_ref, recv_ref_timeout, recv_ref_deadline $self = recv_ref_with -> Ref<$ref, T>;
            errors (
                <<$b as Receive>::Error as RecvErrors>::Try,
                <$b as Receive>::Error,
                <<$b as Receive>::Error as RecvErrors>::Timeout
            )
        }
    };
}

impl<B: ReceiveInto, T: Pod> Receiver<B, T> {
    /// Receives the next payload as a `T` copy, waiting as `wait` says.
    pub fn recv_with(&mut self, wait: Wait) -> Result<B::Typed<T>, Waited<B::Error>> {
        let buf = self.buf.get_mut();
        copied::<B, T>(self.inner.recv_into_with(buf, wait), buf)
    }

    typed_forms!(B, (&mut self));

    /// The byte endpoint underneath.
    pub fn as_bytes(&mut self) -> &mut B {
        &mut self.inner
    }
}

impl<B: ReceiveInto + AlignedRef, T: Pod> Receiver<B, T> {
    /// Receives the next payload in place, waiting as `wait` says.
    pub fn recv_ref_with(&mut self, wait: Wait) -> Result<Ref<B::Ref<'_>, T>, Waited<B::Error>> {
        pinned::<B, T>(self.inner.recv_ref_with(wait))
    }

    typed_ref_forms!(B, B::Ref<'_>, (&mut self));
}

impl<T: Pod> Receiver<Subscriber, T> {
    /// Receives the next payload as a `T` copy, waiting as `wait` says.
    pub fn recv_with(&self, wait: Wait) -> Result<T, Waited<TopicRecvError>> {
        let mut buf = self.buf.take();
        let r = copied::<&Subscriber, T>(self.inner.recv_into_with(&mut buf, wait), &buf);
        self.buf.set(buf);
        r
    }

    typed_forms!(&'static Subscriber, (&self));

    /// Receives the next payload in place, waiting as `wait` says.
    pub fn recv_ref_with(&self, wait: Wait) -> Result<Ref<Sample<'_>, T>, Waited<TopicRecvError>> {
        pinned::<&Subscriber, T>(self.inner.recv_ref_with(wait))
    }

    typed_ref_forms!(&'static Subscriber, Sample<'_>, (&self));

    /// The byte endpoint underneath.
    pub fn as_bytes(&self) -> &Subscriber {
        &self.inner
    }
}

impl<B: ReceiveInto, T: Pod> sealed::Sealed for Receiver<B, T> {}

/// A typed receiver receives as its byte endpoint, with its typed item.
impl<B: ReceiveInto, T: Pod> Receive for Receiver<B, T> {
    type Item = B::Typed<T>;
    type Error = B::Error;

    fn recv_with(&mut self, wait: Wait) -> Result<B::Typed<T>, Waited<B::Error>> {
        <Receiver<B, T>>::recv_with(self, wait)
    }

    fn ends(e: &B::Error) -> bool {
        B::ends(e)
    }

    fn before_attempt(&self) {
        self.inner.before_attempt()
    }

    fn retry_interval(&self) -> Option<Duration> {
        self.inner.retry_interval()
    }
}

impl<T: Pod> sealed::Sealed for Receiver<Subscriber, T> {}

impl<T: Pod> Receive for Receiver<Subscriber, T> {
    type Item = T;
    type Error = TopicRecvError;

    fn recv_with(&mut self, wait: Wait) -> Result<T, Waited<TopicRecvError>> {
        <Receiver<Subscriber, T>>::recv_with(self, wait)
    }

    fn ends(e: &TopicRecvError) -> bool {
        <&Subscriber as Receive>::ends(e)
    }
}

impl<B: fmt::Debug, T: Pod> fmt::Debug for Receiver<B, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").field("inner", &self.inner).field("type", &PayloadType::of::<T>()).finish()
    }
}

/// A `T` received in place (`Deref<Target = T>`), from [`Receiver::recv_ref`] and its forms:
/// the byte endpoint's item `I` (a pinned sample, a ring record, a job in its mailbox), whose
/// bytes were checked to be one `T`, aligned.
pub struct Ref<I, T: Pod> {
    inner: I,
    _type: PhantomData<fn() -> T>,
}

impl<I, T: Pod> Ref<I, T> {
    /// The byte endpoint's item underneath.
    pub(crate) fn item(&self) -> &I {
        &self.inner
    }

    /// The byte endpoint's item underneath, by value.
    pub(crate) fn into_item(self) -> I {
        self.inner
    }
}

impl<I: Deref<Target = [u8]>, T: Pod> Deref for Ref<I, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: `Receiver::pinned` checked that the bytes are exactly size_of::<T>() long
        // and aligned for T; any bit pattern is a valid T (Pod); the item keeps them in place
        // (pinned, unconsumed or the job still taken) while it lives.
        unsafe { &*(self.inner.as_ptr() as *const T) }
    }
}

impl<I: fmt::Debug, T: Pod> fmt::Debug for Ref<I, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ref").field("inner", &self.inner).field("type", &PayloadType::of::<T>()).finish()
    }
}

/// `Waitable` for a typed wrapper (generics in brackets, then its type), as its byte
/// endpoint `inner`; the typed service endpoints use it too.
macro_rules! waitable_as_inner {
    ([$($generics:tt)*] $wrapper:ty) => {
        impl<$($generics)*> $crate::waitset::Waitable for $wrapper {
            fn wait_handle(&self) -> $crate::waitset::WaitHandle<'_> {
                self.inner.wait_handle()
            }

            fn is_ready(&self) -> bool {
                self.inner.is_ready()
            }

            fn recheck_interval(&self) -> Option<std::time::Duration> {
                self.inner.recheck_interval()
            }

            fn recheck(&self) -> bool {
                self.inner.recheck()
            }
        }
    };
}
pub(crate) use waitable_as_inner;

waitable_as_inner!([B: Waitable, T: Pod] Sender<B, T>);
waitable_as_inner!([B: Waitable, T: Pod] Receiver<B, T>);
