//! The one receive contract every receiving endpoint keeps: [`Receive`] (and [`ReceiveRef`]
//! for the kinds that lend a payload in place).
//!
//! A receiver writes each operation once, as a `*_with(…, wait)` that takes a [`Wait`] and
//! fails with a [`Waited`] of its blocking error. `wait_forms!` (in `forms`) makes the inherent
//! `try_` / blocking / `_timeout` / `_deadline` forms from it, the iterators, the async
//! receive and the typed receivers use the trait, and the C binding calls `*_with` with the
//! wait its caller chose.

// Under loom only the kinds' protocols are built, not their endpoints.
#![cfg_attr(loom, allow(dead_code, unused_macros, unused_imports))]

use std::fmt;
use std::ops::Deref;
use std::time::Duration;

use super::forms::{sealed, Forever};
use crate::error::{Corrupt, ErrorKind, Failure, RecvIntoSliceError};
use crate::kind::Kind;
use crate::pod::Pod;
use crate::wait::Wait;

/// Why a receive with a [`Wait`] returned no message: a failure (the blocking form's error,
/// `E`), nothing now (after [`Wait::Now`]), or the deadline passed (after [`Wait::For`] or
/// [`Wait::Until`]).
/// A receive with [`Wait::Forever`] ends only with a message or a failure.
///
/// Each kind's `try_` and `_timeout` errors convert from it (`Empty` is the try error's
/// `Empty`, `TimedOut` the timed error's `Timeout`); its blocking form returns the failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited<E> {
    /// The receive failed.
    Failed(E),
    /// Nothing to receive now ([`Wait::Now`]).
    Empty,
    /// The deadline passed first ([`Wait::For`], [`Wait::Until`]).
    TimedOut,
}

impl<E> Waited<E> {
    /// What a wait until a deadline ended with: `None` is the deadline passing.
    #[inline]
    pub(crate) fn timed(e: Option<E>) -> Waited<E> {
        e.map_or(Waited::TimedOut, Waited::Failed)
    }

    /// The failure, if it is one.
    pub fn failure(self) -> Option<E> {
        match self {
            Waited::Failed(e) => Some(e),
            Waited::Empty | Waited::TimedOut => None,
        }
    }
}

/// A receive that waited for ever ends with a message or a failure: every receiver's
/// `*_with` returns nothing else for [`Wait::Forever`].
impl<E> Forever for Waited<E> {
    type Failure = E;

    #[inline]
    fn forever(self) -> E {
        match self {
            Waited::Failed(e) => e,
            Waited::Empty | Waited::TimedOut => unreachable!("a receive that waits for ever ended without a message"),
        }
    }
}

impl<E> From<E> for Waited<E> {
    #[inline]
    fn from(e: E) -> Waited<E> {
        Waited::Failed(e)
    }
}

impl<E: fmt::Display> fmt::Display for Waited<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Waited::Failed(e) => e.fmt(f),
            Waited::Empty => f.write_str("nothing to receive now"),
            Waited::TimedOut => f.write_str("timed out"),
        }
    }
}

impl<E: std::error::Error> std::error::Error for Waited<E> {}

impl<E: Failure> Failure for Waited<E> {
    fn kind(&self) -> ErrorKind {
        match self {
            Waited::Failed(e) => e.kind(),
            Waited::Empty => ErrorKind::Empty,
            Waited::TimedOut => ErrorKind::Timeout,
        }
    }

    fn value(&self) -> Option<u64> {
        match self {
            Waited::Failed(e) => e.value(),
            Waited::Empty | Waited::TimedOut => None,
        }
    }
}

/// The three errors of a receive family, named from its blocking error (`E`, a
/// [`Receive::Error`]): the `try_` form's and the `_timeout` form's, both made from a
/// [`Waited<E>`].
pub trait RecvErrors: sealed::Sealed + Sized {
    /// The `try_` forms' error: `Empty` for [`Waited::Empty`].
    type Try: From<Waited<Self>>;
    /// The `_timeout` and `_deadline` forms' error: `Timeout` for [`Waited::TimedOut`].
    type Timeout: From<Waited<Self>>;

    /// The family's `Corrupt` (a typed receive's report of a payload that is not one `T`).
    #[doc(hidden)]
    fn corrupt(c: Corrupt) -> Self;
}

/// A receiving endpoint: `Consumer`, `StreamReader`, `Worker`, `Tailer`, `&Subscriber` (a
/// subscriber receives through a shared reference) and the typed receivers over them.
/// Sealed: the crate's receivers implement it.
///
/// A receive waits as its [`Wait`] says and fails with a [`Waited`] of [`Receive::Error`];
/// the endpoints' inherent `try_recv`, `recv`, `recv_timeout` and `recv_deadline` are
/// [`recv_with`](Receive::recv_with) with [`Wait::Now`], [`Wait::Forever`], [`Wait::For`]
/// and [`Wait::Until`], and the iterators and the async receive are made from it.
pub trait Receive: sealed::Sealed {
    /// What a receive returns: the owned message (`Vec<u8>`, a topic's `Message`, a pool's
    /// `Job`, a journal's `Entry`; a typed receiver's `T`).
    type Item;
    /// What a receive fails with (the blocking form's error).
    type Error: RecvErrors;

    /// The next message, owned.
    fn recv_with(&mut self, wait: Wait) -> Result<Self::Item, Waited<Self::Error>>;

    /// Whether `e` ends a blocking iteration: nothing can be received after it (a truncated
    /// file, a peer gone for good). The default: no error does.
    fn ends(e: &Self::Error) -> bool {
        let _ = e;
        false
    }

    /// Work a receive attempt that does not wait owes first (the stream reader's clock of
    /// its writer's liveness), for the async receive.
    #[doc(hidden)]
    fn before_attempt(&self) {}

    /// How often a waiting async receive tries again although nothing was notified, for a
    /// peer's death that only a receive attempt finds (the stream's writer). `None`: never.
    #[doc(hidden)]
    fn retry_interval(&self) -> Option<Duration> {
        None
    }
}

/// A byte [`Receive`]r that also receives into the caller's buffers.
pub trait ReceiveInto: Receive {
    /// What a receive into a buffer returns besides the bytes (the length, or the kind's
    /// metadata with it).
    type Info;
    /// What a typed receive of `T` returns: the `T`, or the `T` with the kind's metadata (a
    /// pool's `TypedJob<T>`).
    type Typed<T: Pod>;
    /// The kind, for `Corrupt` reports.
    #[doc(hidden)]
    const KIND: Kind;
    /// What a typed receive's `Corrupt` report for a payload that is not one `T` says.
    #[doc(hidden)]
    const WRONG_LEN: &'static str;

    /// The next message into `buf`, replacing its contents (reusing its allocation).
    fn recv_into_with(&mut self, buf: &mut Vec<u8>, wait: Wait) -> Result<Self::Info, Waited<Self::Error>>;

    /// The next message into the start of `buf`; one longer than `buf` is
    /// [`RecvIntoSliceError::TooSmall`] and the next receive returns it.
    fn recv_into_slice_with(
        &mut self,
        buf: &mut [u8],
        wait: Wait,
    ) -> Result<Self::Info, RecvIntoSliceError<Waited<Self::Error>>>;

    /// The typed copy of a received payload.
    #[doc(hidden)]
    fn typed<T: Pod>(info: &Self::Info, value: T) -> Self::Typed<T>;

    /// `c` with what `info` says about the payload (the pool adds the job id).
    #[doc(hidden)]
    fn note(info: &Self::Info, c: Corrupt) -> Corrupt {
        let _ = info;
        c
    }
}

/// A [`Receive`]r that lends the next payload in place (the topic's pinned sample, the
/// stream's record, the pool's job in its mailbox, the journal's entry in its file).
pub trait ReceiveRef: Receive {
    /// The payload lent in place.
    type Ref<'a>: Deref<Target = [u8]>
    where
        Self: 'a;

    /// The next payload in place.
    fn recv_ref_with(&mut self, wait: Wait) -> Result<Self::Ref<'_>, Waited<Self::Error>>;

    /// Lets go of a payload that is not one `T` so that the next receive goes on after it
    /// (the stream consumes the record; the others only drop it).
    #[doc(hidden)]
    fn discard(payload: Self::Ref<'_>) {
        drop(payload)
    }

    /// `c` with what the payload's metadata says (the pool adds the job id, the journal the
    /// entry's index).
    #[doc(hidden)]
    fn note_ref(payload: &Self::Ref<'_>, c: Corrupt) -> Corrupt {
        let _ = payload;
        c
    }
}

impl<R: sealed::Sealed + ?Sized> sealed::Sealed for &mut R {}

impl<R: Receive + ?Sized> Receive for &mut R {
    type Item = R::Item;
    type Error = R::Error;

    #[inline]
    fn recv_with(&mut self, wait: Wait) -> Result<R::Item, Waited<R::Error>> {
        (**self).recv_with(wait)
    }

    fn ends(e: &R::Error) -> bool {
        R::ends(e)
    }

    fn before_attempt(&self) {
        (**self).before_attempt()
    }

    fn retry_interval(&self) -> Option<Duration> {
        (**self).retry_interval()
    }
}

impl<R: ReceiveInto + ?Sized> ReceiveInto for &mut R {
    type Info = R::Info;
    type Typed<T: Pod> = R::Typed<T>;
    const KIND: Kind = R::KIND;
    const WRONG_LEN: &'static str = R::WRONG_LEN;

    #[inline]
    fn recv_into_with(&mut self, buf: &mut Vec<u8>, wait: Wait) -> Result<R::Info, Waited<R::Error>> {
        (**self).recv_into_with(buf, wait)
    }

    #[inline]
    fn recv_into_slice_with(
        &mut self,
        buf: &mut [u8],
        wait: Wait,
    ) -> Result<R::Info, RecvIntoSliceError<Waited<R::Error>>> {
        (**self).recv_into_slice_with(buf, wait)
    }

    fn typed<T: Pod>(info: &R::Info, value: T) -> R::Typed<T> {
        R::typed(info, value)
    }

    fn note(info: &R::Info, c: Corrupt) -> Corrupt {
        R::note(info, c)
    }
}

impl<R: ReceiveRef + ?Sized> ReceiveRef for &mut R {
    type Ref<'a>
        = R::Ref<'a>
    where
        Self: 'a;

    #[inline]
    fn recv_ref_with(&mut self, wait: Wait) -> Result<R::Ref<'_>, Waited<R::Error>> {
        (**self).recv_ref_with(wait)
    }

    fn discard(payload: R::Ref<'_>) {
        R::discard(payload)
    }

    fn note_ref(payload: &R::Ref<'_>, c: Corrupt) -> Corrupt {
        R::note_ref(payload, c)
    }
}

/// The error conversions of a receive family, generated with it: [`RecvErrors`], its try
/// error from `Waited::Empty`, its timed error from `Waited::TimedOut`, and a `Waited` from a
/// try error (its `Empty` is `Waited::Empty`).
macro_rules! waited {
    ($try:ident :: $empty:ident, $block:ident, $timeout:ident) => {
        impl $crate::endpoint::forms::sealed::Sealed for $block {}

        impl $crate::endpoint::receive::RecvErrors for $block {
            type Try = $try;
            type Timeout = $timeout;

            fn corrupt(c: $crate::error::Corrupt) -> $block {
                $block::Corrupt(c)
            }
        }

        impl From<$crate::endpoint::receive::Waited<$block>> for $try {
            #[inline]
            fn from(w: $crate::endpoint::receive::Waited<$block>) -> $try {
                match w {
                    $crate::endpoint::receive::Waited::Failed(e) => e.into(),
                    // `TimedOut` does not come from a `Wait::Now`; it is nothing now all the same.
                    $crate::endpoint::receive::Waited::Empty | $crate::endpoint::receive::Waited::TimedOut => {
                        $try::$empty
                    }
                }
            }
        }

        impl From<$crate::endpoint::receive::Waited<$block>> for $timeout {
            #[inline]
            fn from(w: $crate::endpoint::receive::Waited<$block>) -> $timeout {
                match w {
                    $crate::endpoint::receive::Waited::Failed(e) => e.into(),
                    // An `Empty` of a deadline already passed is a timeout.
                    $crate::endpoint::receive::Waited::Empty | $crate::endpoint::receive::Waited::TimedOut => {
                        $timeout::Timeout
                    }
                }
            }
        }

        impl From<$try> for $crate::endpoint::receive::Waited<$block> {
            #[inline]
            fn from(e: $try) -> $crate::endpoint::receive::Waited<$block> {
                match e.into_blocking() {
                    Some(e) => $crate::endpoint::receive::Waited::Failed(e),
                    None => $crate::endpoint::receive::Waited::Empty,
                }
            }
        }
    };
}
pub(crate) use waited;

/// `impl Receive` and `impl ReceiveInto` for a byte receiver `$rx` from its inherent
/// `recv_with`, `recv_into_with` and `recv_into_slice_with` (those of `$inh` after `=>`: a
/// reference type has no inherent methods; `lifetime 'a,` names its lifetime), with its kind
/// and what a typed receive reports for a payload that is not one `T`; then, each optional:
/// the errors that end a blocking iteration (`ends`), the typed item and its `Corrupt` note
/// (`typed`; otherwise a typed receive returns the `T`), and `hooks from` (its type's
/// inherent `before_attempt` and `retry_interval`, for [`Receive`]'s). `ref` makes `impl ReceiveRef` from
/// `recv_ref_with`, with how a typed receive lets go of a payload that is not one `T`
/// (`discard`) and notes its metadata (`note`).
macro_rules! impl_receive {
    (
        @impl [$($gen:lifetime)?] $rx:ty => $inh:ty: $item:ty, $info:ty, $err:ty; $kind:ident, $what:literal
        $(; ends ($ends:pat))?
        ; typed [$($typed:ty = |$i:ident, $v:ident| $make:expr, note |$ni:ident, $nc:ident| $note:expr)?]
        $(; hooks from $hooks:ty)?
    ) => {
        impl$(<$gen>)? $crate::endpoint::forms::sealed::Sealed for $rx {}

        impl$(<$gen>)? $crate::endpoint::receive::Receive for $rx {
            type Item = $item;
            type Error = $err;

            #[inline]
            fn recv_with(
                &mut self,
                wait: $crate::wait::Wait,
            ) -> Result<$item, $crate::endpoint::receive::Waited<$err>> {
                <$inh>::recv_with(self, wait)
            }

            $(
                fn ends(e: &$err) -> bool {
                    matches!(e, $ends)
                }
            )?

            $(
                impl_receive!(@hooks $hooks);
            )?
        }

        impl$(<$gen>)? $crate::endpoint::receive::ReceiveInto for $rx {
            type Info = $info;
            const KIND: $crate::kind::Kind = $crate::kind::Kind::$kind;
            const WRONG_LEN: &'static str = $what;

            #[inline]
            fn recv_into_with(
                &mut self,
                buf: &mut Vec<u8>,
                wait: $crate::wait::Wait,
            ) -> Result<$info, $crate::endpoint::receive::Waited<$err>> {
                <$inh>::recv_into_with(self, buf, wait)
            }

            #[inline]
            fn recv_into_slice_with(
                &mut self,
                buf: &mut [u8],
                wait: $crate::wait::Wait,
            ) -> Result<$info, $crate::error::RecvIntoSliceError<$crate::endpoint::receive::Waited<$err>>> {
                <$inh>::recv_into_slice_with(self, buf, wait)
            }

            impl_receive!(@typed $info; $($typed = |$i, $v| $make, note |$ni, $nc| $note)?);
        }
    };
    (@typed $info:ty;) => {
        type Typed<T: $crate::pod::Pod> = T;

        fn typed<T: $crate::pod::Pod>(_: &$info, value: T) -> T {
            value
        }
    };
    (@typed $info:ty; $typed:ty = |$i:ident, $v:ident| $make:expr, note |$ni:ident, $nc:ident| $note:expr) => {
        type Typed<T: $crate::pod::Pod> = $typed;

        fn typed<T: $crate::pod::Pod>($i: &$info, $v: T) -> $typed {
            $make
        }

        fn note($ni: &$info, $nc: $crate::error::Corrupt) -> $crate::error::Corrupt {
            $note
        }
    };
    (@hooks $inh:ty) => {
        fn before_attempt(&self) {
            <$inh>::before_attempt(self)
        }

        fn retry_interval(&self) -> Option<::std::time::Duration> {
            <$inh>::retry_interval(self)
        }
    };
    (
        lifetime $gen:lifetime, $rx:ty => $inh:ty: $item:ty, $info:ty, $err:ty; $kind:ident, $what:literal
        $(; ends ($ends:pat))?
    ) => {
        impl_receive!(@impl [$gen] $rx => $inh: $item, $info, $err; $kind, $what $(; ends ($ends))?; typed []);
    };
    (
        ref $rx:ty: $ref_ty:ty
        $(; discard |$d:ident| $discard:expr)?
        $(; note |$r:ident, $c:ident| $note:expr)?
    ) => {
        impl $crate::endpoint::receive::ReceiveRef for $rx {
            type Ref<'a> = $ref_ty where Self: 'a;

            #[inline]
            fn recv_ref_with(
                &mut self,
                wait: $crate::wait::Wait,
            ) -> Result<Self::Ref<'_>, $crate::endpoint::receive::Waited<<$rx as $crate::endpoint::receive::Receive>::Error>> {
                <$rx>::recv_ref_with(self, wait)
            }

            $(
                fn discard($d: Self::Ref<'_>) {
                    $discard
                }
            )?

            $(
                fn note_ref($r: &Self::Ref<'_>, $c: $crate::error::Corrupt) -> $crate::error::Corrupt {
                    $note
                }
            )?
        }
    };
    (
        $rx:ty: $item:ty, $info:ty, $err:ty; $kind:ident, $what:literal
        $(; ends ($ends:pat))?
        $(; typed $typed:ty = |$i:ident, $v:ident| $make:expr, note |$ni:ident, $nc:ident| $note:expr)?
        $(; hooks from $hooks:ty)?
    ) => {
        impl_receive!(
            @impl [] $rx => $rx: $item, $info, $err; $kind, $what $(; ends ($ends))?
            ; typed [$($typed = |$i, $v| $make, note |$ni, $nc| $note)?] $(; hooks from $hooks)?
        );
    };
}
pub(crate) use impl_receive;
