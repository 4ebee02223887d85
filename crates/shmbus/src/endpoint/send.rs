//! The sending twin of the receive contract: [`Transmit`], each waiting sender's one
//! `send_with(msg, wait)`.
//!
//! A sender writes its send once for a wait (`send_with`, and the stream writer's
//! `loan_with`) and once without (its `try_` form, which says how much room there was);
//! `wait_forms!` (in `forms`) makes the blocking, `_timeout` and `_deadline`
//! forms from the first, and the C binding calls it with the wait its caller chose.

#![cfg_attr(loom, allow(dead_code, unused_macros, unused_imports))]

use std::fmt;

use super::forms::{sealed, Forever};
use crate::error::{ErrorKind, Failure};
use crate::wait::Wait;

/// Why a send with a [`Wait`] sent nothing: a failure (the blocking form's error, `E`), no
/// room now (after [`Wait::Now`]; `T` is the `try_` form's error, which says how much room
/// there was), or the deadline passed (after [`Wait::For`] or [`Wait::Until`]). A send with
/// [`Wait::Forever`] ends only sent or failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused<E, T> {
    /// The send failed.
    Failed(E),
    /// No room now ([`Wait::Now`]).
    Full(T),
    /// The deadline passed first ([`Wait::For`], [`Wait::Until`]).
    TimedOut,
}

impl<E, T> Refused<E, T> {
    /// What a wait until a deadline ended with: `None` is the deadline passing.
    #[inline]
    pub(crate) fn timed(e: Option<E>) -> Refused<E, T> {
        e.map_or(Refused::TimedOut, Refused::Failed)
    }

    /// The failure, if it is one.
    pub fn failure(self) -> Option<E> {
        match self {
            Refused::Failed(e) => Some(e),
            Refused::Full(_) | Refused::TimedOut => None,
        }
    }
}

/// A send that waited for ever ends sent or failed: every sender's `send_with` returns
/// nothing else for [`Wait::Forever`].
impl<E, T> Forever for Refused<E, T> {
    type Failure = E;

    #[inline]
    fn forever(self) -> E {
        match self {
            Refused::Failed(e) => e,
            Refused::Full(_) | Refused::TimedOut => unreachable!("a send that waits for ever ended unsent"),
        }
    }
}

impl<E: fmt::Display, T: fmt::Display> fmt::Display for Refused<E, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Failed(e) => e.fmt(f),
            Refused::Full(t) => t.fmt(f),
            Refused::TimedOut => f.write_str("timed out waiting for room"),
        }
    }
}

impl<E: std::error::Error, T: std::error::Error> std::error::Error for Refused<E, T> {}

impl<E: Failure, T: Failure> Failure for Refused<E, T> {
    fn kind(&self) -> ErrorKind {
        match self {
            Refused::Failed(e) => e.kind(),
            Refused::Full(t) => t.kind(),
            Refused::TimedOut => ErrorKind::Timeout,
        }
    }

    fn value(&self) -> Option<u64> {
        match self {
            Refused::Failed(e) => e.value(),
            Refused::Full(t) => t.value(),
            Refused::TimedOut => None,
        }
    }
}

/// The [`Refused`] of a send family, named from its blocking error.
pub type Refusal<E> = Refused<E, <E as SendErrors>::Try>;

/// The three errors of a send family, named from its blocking error (`E`): the `try_`
/// form's and the `_timeout` form's, which a [`Refused`] converts to.
pub trait SendErrors: sealed::Sealed + Sized {
    /// The `try_` forms' error (also the "no room now" of a [`Refused`]).
    type Try: From<Self>;
    /// The `_timeout` and `_deadline` forms' error: `Timeout` for [`Refused::TimedOut`].
    type Timeout: From<Refused<Self, Self::Try>>;
}

/// A sender that waits for room: the queue's `Producer`, the stream's `StreamWriter` and the
/// topic's `Publisher` (whose sends wait only on a `block` topic). Sealed.
///
/// Its inherent `send`, `send_timeout` and `send_deadline` are
/// [`send_with`](Transmit::send_with) with [`Wait::Forever`], [`Wait::For`] and
/// [`Wait::Until`]; its
/// `try_send` is the same send without waiting, with the try error.
pub trait Transmit: sealed::Sealed {
    /// What a send returns (a topic's sequence number).
    type Sent;
    /// What a send fails with (the blocking form's error).
    type Error: SendErrors;

    /// Sends a copy of `msg`, waiting for room as `wait` says.
    fn send_with(&mut self, msg: &[u8], wait: Wait) -> Result<Self::Sent, Refusal<Self::Error>>;
}

impl<S: Transmit + ?Sized> Transmit for &mut S {
    type Sent = S::Sent;
    type Error = S::Error;

    #[inline]
    fn send_with(&mut self, msg: &[u8], wait: Wait) -> Result<S::Sent, Refusal<S::Error>> {
        (**self).send_with(msg, wait)
    }
}

/// The error conversions of a send family, generated with it: [`SendErrors`], its timed
/// error from a [`Refused`], and a `Refused` from a try error (its "no room now" variants
/// are `Refused::Full`).
macro_rules! refused {
    ($try:ident, $block:ident, $timeout:ident) => {
        impl $crate::endpoint::forms::sealed::Sealed for $block {}

        impl $crate::endpoint::send::SendErrors for $block {
            type Try = $try;
            type Timeout = $timeout;
        }

        impl From<$crate::endpoint::send::Refused<$block, $try>> for $timeout {
            #[inline]
            fn from(r: $crate::endpoint::send::Refused<$block, $try>) -> $timeout {
                match r {
                    $crate::endpoint::send::Refused::Failed(e) => e.into(),
                    // No room at a deadline already passed is a timeout.
                    $crate::endpoint::send::Refused::Full(_) | $crate::endpoint::send::Refused::TimedOut => {
                        $timeout::Timeout
                    }
                }
            }
        }

        impl From<$try> for $crate::endpoint::send::Refused<$block, $try> {
            #[inline]
            fn from(t: $try) -> $crate::endpoint::send::Refused<$block, $try> {
                match t.split() {
                    Ok(e) => $crate::endpoint::send::Refused::Failed(e),
                    Err(t) => $crate::endpoint::send::Refused::Full(t),
                }
            }
        }
    };
}
pub(crate) use refused;

/// `impl Transmit for $tx` from its inherent `send_with`.
macro_rules! impl_transmit {
    ($tx:ty: $sent:ty, $err:ty) => {
        impl $crate::endpoint::forms::sealed::Sealed for $tx {}

        impl $crate::endpoint::send::Transmit for $tx {
            type Sent = $sent;
            type Error = $err;

            #[inline]
            fn send_with(
                &mut self,
                msg: &[u8],
                wait: $crate::wait::Wait,
            ) -> Result<$sent, $crate::endpoint::send::Refusal<$err>> {
                <$tx>::send_with(self, msg, wait)
            }
        }
    };
}
pub(crate) use impl_transmit;
