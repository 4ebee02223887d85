//! What the receive contract ([`receive`](super::receive)) and its sending twin
//! ([`send`](super::send)) share: the seal on their traits, the failure of a call that waited
//! for ever, and [`wait_forms!`], which makes a call's inherent forms from its `*_with`.

#![cfg_attr(loom, allow(dead_code, unused_macros, unused_imports))]

use crate::wait::Wait;

pub(crate) mod sealed {
    /// Only the crate's receivers and senders keep the contract.
    pub trait Sealed {}
}

/// The waiting part of a `*_with`: `attempt` with the wait (`Err(None)` once its deadline
/// has passed), again and again for [`Wait::Forever`], once for a [`Wait::For`] or
/// [`Wait::Until`]. The attempt asks for the deadline ([`Wait::deadline`]) when it needs it:
/// after a first try that found something, a timed call has not read the clock.
#[inline]
pub(crate) fn until<T, E>(wait: Wait, mut attempt: impl FnMut(Wait) -> Result<T, Option<E>>) -> Result<T, Option<E>> {
    loop {
        match attempt(wait) {
            // No deadline passes: cannot happen, and would be waited through.
            Err(None) if wait == Wait::Forever => continue,
            r => return r,
        }
    }
}

/// The failure of a call that waited for ever (a `Waited`'s or a `Refused`'s): what
/// the generated blocking forms return.
pub(crate) trait Forever {
    /// The blocking form's error.
    type Failure;
    /// The failure (a wait for ever ends with nothing else).
    fn forever(self) -> Self::Failure;
}

/// The inherent forms of one receive (or send, or loan), from its `*_with`: the `try_` form
/// (waits [`Wait::Now`]), the blocking one ([`Wait::Forever`]), the `_timeout` one
/// ([`Wait::For`]) and the `_deadline` one ([`Wait::Until`]), each with its family's error
/// (in a `RecvIntoSliceError` after `slice`). The doc comment given is the `try_` form's; the
/// others point at it. A `'_` in the output type borrows the receiver. After `now`, the
/// `try_` form calls that method (same arguments, the try error) instead: the path the
/// `_with` takes for `Wait::Now`.
macro_rules! wait_forms {
    (
        $(#[$doc:meta])*
        fn $try:ident, $block:ident, $timeout:ident, $deadline:ident
            (&mut self $(, $arg:ident : $argt:ty)*) = $with:ident $(now $now:ident)? -> $out:ty;
        errors ($try_e:ty, $block_e:ty, $timeout_e:ty) $($slice:ident)?
    ) => {
        wait_forms! {
            @forms [mut] $(#[$doc])* fn $try, $block, $timeout, $deadline ($($arg : $argt),*)
                = $with [$($now)?] -> $out;
            errors ($try_e, $block_e, $timeout_e) $($slice)?
        }
    };
    (
        $(#[$doc:meta])*
        fn $try:ident, $block:ident, $timeout:ident, $deadline:ident
            (&self $(, $arg:ident : $argt:ty)*) = $with:ident $(now $now:ident)? -> $out:ty;
        errors ($try_e:ty, $block_e:ty, $timeout_e:ty) $($slice:ident)?
    ) => {
        wait_forms! {
            @forms [] $(#[$doc])* fn $try, $block, $timeout, $deadline ($($arg : $argt),*)
                = $with [$($now)?] -> $out;
            errors ($try_e, $block_e, $timeout_e) $($slice)?
        }
    };
    (
        @forms [$($mut:ident)?] $(#[$doc:meta])*
        fn $try:ident, $block:ident, $timeout:ident, $deadline:ident
            ($($arg:ident : $argt:ty),*) = $with:ident [$($now:ident)?] -> $out:ty;
        errors ($try_e:ty, $block_e:ty, $timeout_e:ty) $($slice:ident)?
    ) => {
        $(#[$doc])*
        #[inline]
        pub fn $try(&$($mut)? self $(, $arg: $argt)*) -> Result<$out, wait_forms!(@err $try_e $(, $slice)?)> {
            wait_forms!(@now self, $with, [$($now)?], ($($arg),*) $(, $slice)?)
        }

        #[doc = concat!(
            "[`", stringify!($try), "`](Self::", stringify!($try), "), waiting as long as it takes: [`",
            stringify!($with), "`](Self::", stringify!($with), ") with `Wait::Forever`."
        )]
        #[inline]
        pub fn $block(&$($mut)? self $(, $arg: $argt)*) -> Result<$out, wait_forms!(@err $block_e $(, $slice)?)> {
            wait_forms!(
                @map self.$with($($arg,)* $crate::wait::Wait::Forever),
                $crate::endpoint::forms::Forever::forever $(, $slice)?
            )
        }

        #[doc = concat!(
            "[`", stringify!($try), "`](Self::", stringify!($try), "), waiting at most `timeout`: [`",
            stringify!($with), "`](Self::", stringify!($with), ") with `Wait::For(timeout)`."
        )]
        #[inline]
        pub fn $timeout(
            &$($mut)? self $(, $arg: $argt)*,
            timeout: ::std::time::Duration,
        ) -> Result<$out, wait_forms!(@err $timeout_e $(, $slice)?)> {
            wait_forms!(
                @map self.$with($($arg,)* $crate::wait::Wait::For(timeout)),
                ::std::convert::Into::into $(, $slice)?
            )
        }

        #[doc = concat!(
            "[`", stringify!($try), "`](Self::", stringify!($try), "), waiting until `deadline` at most: [`",
            stringify!($with), "`](Self::", stringify!($with), ") with `Wait::Until(deadline)`."
        )]
        #[inline]
        pub fn $deadline(
            &$($mut)? self $(, $arg: $argt)*,
            deadline: ::std::time::Instant,
        ) -> Result<$out, wait_forms!(@err $timeout_e $(, $slice)?)> {
            wait_forms!(
                @map self.$with($($arg,)* $crate::wait::Wait::Until(deadline)),
                ::std::convert::Into::into $(, $slice)?
            )
        }
    };
    // The try form: the `_with` call with `Wait::Now`, or straight the receiver's `now`
    // path (what its `_with` runs for `Wait::Now`), which the hottest polls take without
    // converting their "nothing now" to a `Waited` and back.
    (@now $self:ident, $with:ident, [], ($($arg:ident),*) $(, $slice:ident)?) => {
        wait_forms!(@map $self.$with($($arg,)* $crate::wait::Wait::Now), ::std::convert::Into::into $(, $slice)?)
    };
    (@now $self:ident, $with:ident, [$now:ident], ($($arg:ident),*) $(, $slice:ident)?) => {
        $self.$now($($arg),*)
    };
    (@err $e:ty) => { $e };
    (@err $e:ty, slice) => { $crate::error::RecvIntoSliceError<$e> };
    (@map $call:expr, $f:path) => { $call.map_err($f) };
    (@map $call:expr, $f:path, slice) => { $call.map_err(|e| e.map_recv($f)) };
}
pub(crate) use wait_forms;
