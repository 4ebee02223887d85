//! Handles: how a Rust value lives behind an opaque C pointer, how C arguments are checked,
//! and how items that borrow an endpoint (samples, loans, records) are lent out.
//!
//! Every endpoint sits in a [`Handle`], the core's [`Lender`]: shared ownership of the
//! endpoint, whose owned items (`OwnedLoan`, `OwnedSample`, ...) keep it alive and make every
//! call that would conflict with them fail with `SHMBUS_BUSY`. Freeing the handle while items
//! are out drops only C's share of it: the last item given back drops the endpoint.

use std::ffi::{c_char, c_void, CStr};
use std::ptr::NonNull;
use std::time::Duration;

use shmbus::lend::{LendError, LendOr, Lender};

use crate::status::*;

/// An endpoint (or a config) behind an opaque pointer.
pub(crate) type Handle<T> = Lender<T>;

/// The C-visible struct that wraps a [`Handle`] (each opaque `shmbus_*` type).
pub(crate) trait Wrapper: Sized + 'static {
    type Inner: 'static;
    /// The C type's name, for error messages.
    const NAME: &'static str;
    fn wrap(h: Handle<Self::Inner>) -> Self;
    fn handle(&self) -> &Handle<Self::Inner>;
}

/// Implements [`Wrapper`] for `shmbus_x { h: Handle<T> }` structs.
macro_rules! wrapper {
    ($($c:ident => $t:ty),* $(,)?) => {$(
        impl $crate::handle::Wrapper for $c {
            type Inner = $t;
            const NAME: &'static str = stringify!($c);
            fn wrap(h: $crate::handle::Handle<$t>) -> Self {
                $c { h }
            }
            fn handle(&self) -> &$crate::handle::Handle<$t> {
                &self.h
            }
        }
    )*};
}
pub(crate) use wrapper;

/// The handle behind `p` (`SHMBUS_INVALID_ARGUMENT` if NULL).
///
/// # Safety
/// `p` is NULL or a live pointer from this library of type `W`.
#[inline]
pub(crate) unsafe fn get<'a, W: Wrapper>(p: *const W) -> Result<&'a Handle<W::Inner>, Error> {
    if p.is_null() {
        return Err(Error::null(W::NAME));
    }
    // SAFETY: the caller passes a live `W` made by `into_c`.
    Ok(unsafe { &*p }.handle())
}

/// A refusal of the lender behind a `W`, in C's terms.
fn refused<W: Wrapper>(e: LendError) -> Error {
    match e {
        LendError::Busy => Error::new(
            SHMBUS_BUSY,
            format_args!("{} has a loan, sample or record out; send, release or discard it first", W::NAME),
        ),
        LendError::Closed => Error::from(e),
    }
}

/// Runs `f` on the endpoint behind `p` mutably: `SHMBUS_BUSY` while an item is lent from it.
///
/// # Safety
/// As [`get`].
#[inline]
pub(crate) unsafe fn with_mut<W: Wrapper, R>(
    p: *const W,
    f: impl FnOnce(&mut W::Inner) -> Result<R, Error>,
) -> Result<R, Error> {
    // SAFETY: forwarded.
    unsafe { get(p) }?.with(f).map_err(refused::<W>)?
}

/// Runs `f` on the endpoint behind `p` shared: `SHMBUS_BUSY` while it is lent mutably.
///
/// # Safety
/// As [`get`].
#[inline]
pub(crate) unsafe fn with_ref<W: Wrapper, R>(
    p: *const W,
    f: impl FnOnce(&W::Inner) -> Result<R, Error>,
) -> Result<R, Error> {
    // SAFETY: forwarded.
    unsafe { get(p) }?.with_ref(f).map_err(refused::<W>)?
}

/// The endpoint behind `p` shared, without holding its lock (for a `WaitSet` wait, which
/// makes no call back into C that could use it mutably, and may list it twice).
///
/// # Safety
/// As [`get`]; and the endpoint is not used mutably until the returned reference is dropped.
pub(crate) unsafe fn peek<'a, W: Wrapper>(p: *const W) -> Result<&'a W::Inner, Error> {
    // SAFETY: forwarded; C's callers use an endpoint from one thread at a time, and the
    // caller ends the use of the reference before any mutable one.
    unsafe { get(p)?.peek() }.map_err(refused::<W>)
}

/// Replaces the value behind `p` (a config) by `f` of it: the setters of the config objects.
///
/// # Safety
/// As [`get`].
pub(crate) unsafe fn update<W: Wrapper>(p: *mut W, f: impl FnOnce(W::Inner) -> W::Inner) -> Result<(), Error>
where
    W::Inner: Clone,
{
    // SAFETY: forwarded.
    unsafe {
        with_mut(p, |c| {
            *c = f(c.clone());
            Ok(())
        })
    }
}

/// A failure to make an owned item from the lender of a `W`, in C's terms.
pub(crate) fn lend_failed<W: Wrapper, X: Into<Error>>(e: LendOr<X>) -> Error {
    match e {
        LendOr::Refused(r) => refused::<W>(r),
        LendOr::Failed(x) => x.into(),
    }
}

/// Checks an output pointer before the work whose result it receives.
pub(crate) fn out_arg<T>(out: *mut T) -> Result<(), Error> {
    if out.is_null() {
        return Err(Error::null("the output pointer"));
    }
    Ok(())
}

/// Boxes `value` into a new handle and stores the pointer in `*out`.
///
/// # Safety
/// `out` is NULL or valid for a pointer write.
pub(crate) unsafe fn into_c<W: Wrapper>(out: *mut *mut W, value: W::Inner) -> Result<(), Error> {
    // SAFETY: forwarded.
    unsafe { lent_into_c(out, W::wrap(Lender::new(value))) }
}

/// Frees a handle (NULL: nothing). Items still lent from it keep the endpoint until the last
/// one is given back.
///
/// # Safety
/// `p` is NULL or a live pointer from [`into_c`], not used again by the caller.
pub(crate) unsafe fn free<W: Wrapper>(p: *mut W) {
    if !p.is_null() {
        // SAFETY: made by `Box::into_raw` in `into_c`, given up by the caller.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// Boxes a value for C into `*out`.
///
/// # Safety
/// `out` is valid for a pointer write (checked for NULL).
pub(crate) unsafe fn lent_into_c<T>(out: *mut *mut T, value: T) -> Result<(), Error> {
    let out = NonNull::new(out).ok_or_else(|| Error::null("the output pointer"))?;
    // SAFETY: the caller gives a pointer valid for a write.
    unsafe { out.as_ptr().write(Box::into_raw(Box::new(value))) };
    Ok(())
}

/// A NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that lives for `'a`.
pub(crate) unsafe fn str_arg<'a>(p: *const c_char, what: &str) -> Result<&'a str, Error> {
    if p.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: a NUL-terminated string, per the caller.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Error::new(SHMBUS_INVALID_ARGUMENT, format_args!("{what} is not UTF-8")))
}

/// A byte-buffer argument: `len` bytes at `data` (which may be NULL when `len` is 0).
///
/// # Safety
/// `data` is valid for reading `len` bytes for `'a`.
pub(crate) unsafe fn bytes_arg<'a>(data: *const c_void, len: usize) -> Result<&'a [u8], Error> {
    if data.is_null() {
        return if len == 0 { Ok(&[]) } else { Err(Error::null("data")) };
    }
    // SAFETY: valid for `len` bytes, per the caller.
    Ok(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) })
}

/// Writes `value` to an optional output (NULL: skipped).
///
/// # Safety
/// `p` is NULL or valid for a write of `T`.
pub(crate) unsafe fn put<T>(p: *mut T, value: T) {
    if !p.is_null() {
        // SAFETY: non-NULL and valid for a write, per the caller.
        unsafe { p.write(value) };
    }
}

/// Writes `value` to a required output (`SHMBUS_INVALID_ARGUMENT` if NULL).
///
/// # Safety
/// `p` is NULL or valid for a write of `T`.
pub(crate) unsafe fn put_required<T>(p: *mut T, value: T, what: &str) -> Result<(), Error> {
    if p.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: non-NULL and valid for a write, per the caller.
    unsafe { p.write(value) };
    Ok(())
}

/// A `timeout_ns` argument.
pub(crate) fn timeout(ns: u64) -> Duration {
    Duration::from_nanos(ns)
}

/// Copies a received message to the caller's buffer `out` (`cap` bytes), its length to
/// `*len_out`; a message longer than `cap` is `SHMBUS_BUFFER_TOO_SMALL` (with the length).
///
/// # Safety
/// `out` is valid for writing `cap` bytes (or NULL with `cap` 0); `len_out` is NULL or valid.
pub(crate) unsafe fn deliver(msg: &[u8], out: *mut c_void, cap: usize, len_out: *mut usize) -> Result<(), Error> {
    // SAFETY: per the caller.
    unsafe { put_required(len_out, msg.len(), "len_out") }?;
    if msg.len() > cap {
        let len = msg.len();
        return Err(Error::with_value(
            SHMBUS_BUFFER_TOO_SMALL,
            len as u64,
            format_args!("the message is {len} bytes, the buffer {cap}; it is kept for the next receive"),
        ));
    }
    if !msg.is_empty() {
        // SAFETY: `out` holds `cap >= len` bytes, per the caller (and is not NULL, as `cap` is
        // not 0); the message is in memory of ours, distinct from the caller's buffer.
        unsafe { std::ptr::copy_nonoverlapping(msg.as_ptr(), out.cast::<u8>(), msg.len()) };
    }
    Ok(())
}

/// Checks the buffer arguments of a copy receive before anything is received.
pub(crate) fn buf_args(out: *mut c_void, cap: usize, len_out: *mut usize) -> Result<(), Error> {
    if len_out.is_null() {
        return Err(Error::null("len_out"));
    }
    if out.is_null() && cap != 0 {
        return Err(Error::null("buf"));
    }
    Ok(())
}

/// `Waitable` for a wrapper struct around the Rust endpoint (field `$inner`): what the
/// endpoint says (it is ready also while it keeps a message a too-small buffer did not take).
macro_rules! waitable_via {
    ($($ty:ty => $inner:ident),* $(,)?) => {$(
        impl shmbus::Waitable for $ty {
            fn wait_handle(&self) -> shmbus::WaitHandle<'_> {
                self.$inner.wait_handle()
            }
            fn is_ready(&self) -> bool {
                self.$inner.is_ready()
            }
            fn recheck_interval(&self) -> Option<std::time::Duration> {
                self.$inner.recheck_interval()
            }
            fn recheck(&self) -> bool {
                self.$inner.recheck()
            }
        }
    )*};
}
pub(crate) use waitable_via;
