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

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

use crate::error::Corrupt;
use crate::pod::{bytes_of, read_from, ref_from, PayloadType, Pod};
use crate::topic::Subscriber;
use crate::waitset::{WaitHandle, Waitable};
use ops::{
    LendBytes, Loaned, Pinned, Receive, ReceiveRef, RecvBytes, RecvRefBytes, Scratch, SendBytes, TimedSendBytes,
    TryLendBytes, TrySendBytes,
};
// For the async receives of the typed receivers (feature `tokio`).
#[cfg(feature = "tokio")]
pub(crate) use ops::Receive as TypedReceive;

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
/// `recv_timeout`) and, where the kind lends its memory, a `T` in place (`try_recv_ref`,
/// `recv_ref`, `recv_ref_timeout`). A payload that is not exactly one `T` is the receive
/// error's `Corrupt` variant (values `len` and `size`), and is let go of: the next receive
/// goes on after it.
pub struct Receiver<B: Receive, T: Pod> {
    inner: B,
    /// The copy receives' buffer, allocated once.
    buf: B::Scratch,
    _type: PhantomData<fn() -> T>,
}

impl<B: Receive, T: Pod> Receiver<B, T> {
    pub(crate) fn new(inner: B) -> Self {
        Receiver { inner, buf: Vec::with_capacity(std::mem::size_of::<T>()).into(), _type: PhantomData }
    }

    /// The byte endpoint underneath, shared.
    pub(crate) fn bytes(&self) -> &B {
        &self.inner
    }

    /// The copy of a payload received into `buf`, or what reports it is not one `T`.
    fn copied<E>(r: Result<B::Info, E>, buf: &[u8], corrupt: fn(Corrupt) -> E) -> Result<B::Owned<T>, E> {
        let info = r?;
        match read_from::<T>(buf) {
            Some(value) => Ok(B::owned(&info, value)),
            None => Err(corrupt(B::note(&info, not_one::<T>(B::KIND, B::WRONG_LEN, buf.len())))),
        }
    }
}

impl<B: ReceiveRef, T: Pod> Receiver<B, T> {
    /// A payload lent in place as a `T`, or what reports it is not one (let go of).
    fn pinned<'a, E>(r: Result<B::Pinned<'a>, E>, corrupt: fn(Corrupt) -> E) -> Result<Ref<B::Pinned<'a>, T>, E> {
        let p = r?;
        if ref_from::<T>(&p).is_some() {
            return Ok(Ref { inner: p, _type: PhantomData });
        }
        let c = p.note(not_one::<T>(B::KIND, B::WRONG_LEN, p.len()));
        p.discard();
        Err(corrupt(c))
    }
}

/// The copy receives, through `&self` (the topic's) or `&mut self` (the others').
macro_rules! copy_receives {
    ($b:ty $(, $mut:ident)?) => {
        /// Receives the next payload as a `T` copy, without waiting (as the byte endpoint's
        /// `try_recv`).
        pub fn try_recv(&$($mut)? self) -> Result<<$b as Receive>::Owned<T>, <$b as Receive>::TryRecvError> {
            self.with_scratch(|inner, buf| Self::copied(inner.try_recv_into(buf), buf, <$b>::try_corrupt))
        }

        /// Receives the next payload as a `T` copy, waiting as long as it takes.
        pub fn recv(&$($mut)? self) -> Result<<$b as Receive>::Owned<T>, <$b as Receive>::RecvError> {
            self.with_scratch(|inner, buf| Self::copied(inner.recv_into(buf), buf, <$b>::corrupt))
        }

        /// Receives the next payload as a `T` copy, waiting at most `timeout`.
        pub fn recv_timeout(&$($mut)? self, timeout: Duration) -> Result<<$b as Receive>::Owned<T>, <$b as Receive>::RecvTimeoutError> {
            self.with_scratch(|inner, buf| Self::copied(inner.recv_into_timeout(buf, timeout), buf, <$b>::timeout_corrupt))
        }

        /// The byte endpoint underneath.
        pub fn as_bytes(&$($mut)? self) -> &$($mut)? $b {
            &$($mut)? self.inner
        }
    };
}

/// The in-place receives, through `&self` (the topic's) or `&mut self` (the others').
macro_rules! ref_receives {
    ($b:ty $(, $mut:ident)?) => {
        /// Receives the next payload in place, without waiting (as the byte endpoint's
        /// `try_recv_ref`).
        pub fn try_recv_ref(&$($mut)? self) -> Result<Ref<<$b as ReceiveRef>::Pinned<'_>, T>, <$b as Receive>::TryRecvError> {
            Self::pinned(self.inner.try_recv_ref(), <$b>::try_corrupt)
        }

        /// Receives the next payload in place, waiting as long as it takes.
        pub fn recv_ref(&$($mut)? self) -> Result<Ref<<$b as ReceiveRef>::Pinned<'_>, T>, <$b as Receive>::RecvError> {
            Self::pinned(self.inner.recv_ref(), <$b>::corrupt)
        }

        /// Receives the next payload in place, waiting at most `timeout`.
        pub fn recv_ref_timeout(&$($mut)? self, timeout: Duration) -> Result<Ref<<$b as ReceiveRef>::Pinned<'_>, T>, <$b as Receive>::RecvTimeoutError> {
            Self::pinned(self.inner.recv_ref_timeout(timeout), <$b>::timeout_corrupt)
        }
    };
}

impl<B: RecvBytes, T: Pod> Receiver<B, T> {
    fn with_scratch<R>(&mut self, f: impl FnOnce(&mut B, &mut Vec<u8>) -> R) -> R {
        f(&mut self.inner, self.buf.vec())
    }

    copy_receives!(B, mut);
}

impl<B: RecvRefBytes, T: Pod> Receiver<B, T> {
    ref_receives!(B, mut);
}

impl<T: Pod> Receiver<Subscriber, T> {
    fn with_scratch<R>(&self, f: impl FnOnce(&Subscriber, &mut Vec<u8>) -> R) -> R {
        let mut buf = self.buf.take();
        let r = f(&self.inner, &mut buf);
        self.buf.set(buf);
        r
    }

    copy_receives!(Subscriber);
    ref_receives!(Subscriber);
}

impl<B: Receive + fmt::Debug, T: Pod> fmt::Debug for Receiver<B, T> {
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

/// `Waitable` for a wrapper, as its byte endpoint `inner`.
macro_rules! waitable_as_inner {
    ($($bound:path)?; $wrapper:ident) => {
        impl<B: Waitable $(+ $bound)?, T: Pod> Waitable for $wrapper<B, T> {
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
    };
}

waitable_as_inner!(; Sender);
waitable_as_inner!(Receive; Receiver);
