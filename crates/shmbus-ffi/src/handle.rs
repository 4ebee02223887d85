//! Handles: how a Rust value lives behind an opaque C pointer, how C arguments are checked,
//! and how items that borrow an endpoint (samples, loans, records) are lent out.
//!
//! Every endpoint sits in a [`Handle`]: a `RefCell` in a `Box`, so it has a stable address.
//! An item that borrows the endpoint (a topic `Sample<'_>`, a `Loan<'_>`, ...) is boxed
//! together with the `Ref`/`RefMut` guard it was made from, its lifetime erased to `'static`
//! ([`Lent`]). The guard makes every call on the endpoint that would conflict with the item
//! fail with `SHMBUS_BUSY` instead of aliasing it, and freeing the endpoint while items are
//! out only marks it: the last item given back frees it.

use std::cell::{Cell, Ref, RefCell, RefMut};
use std::ffi::{c_char, c_void, CStr};
use std::ptr::NonNull;
use std::time::Duration;

use crate::status::*;

/// An endpoint (or any value borrowed by items handed to C) behind an opaque pointer.
#[derive(Debug)]
pub(crate) struct Handle<T> {
    cell: RefCell<T>,
    /// Freed by C while items were still lent: the last one given back frees the handle.
    orphaned: Cell<bool>,
}

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

impl<T> Handle<T> {
    pub(crate) fn new(value: T) -> Handle<T> {
        Handle { cell: RefCell::new(value), orphaned: Cell::new(false) }
    }
}

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

/// Runs `f` on the endpoint behind `p` mutably: `SHMBUS_BUSY` while an item is lent from it.
///
/// # Safety
/// As [`get`].
#[inline]
pub(crate) unsafe fn with_mut<W: Wrapper, R>(
    p: *mut W,
    f: impl FnOnce(&mut W::Inner) -> Result<R, Error>,
) -> Result<R, Error> {
    // SAFETY: forwarded.
    let h = unsafe { get(p) }?;
    let mut v = h.cell.try_borrow_mut().map_err(|_| busy(W::NAME))?;
    f(&mut v)
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
    let h = unsafe { get(p) }?;
    let v = h.cell.try_borrow().map_err(|_| busy(W::NAME))?;
    f(&v)
}

/// The endpoint behind `p` shared, without a guard (for a `WaitSet` wait, which makes no call
/// back into C that could borrow it mutably).
///
/// # Safety
/// As [`get`]; and the endpoint is not borrowed mutably until the returned reference is dropped.
pub(crate) unsafe fn peek<'a, W: Wrapper>(p: *const W) -> Result<&'a W::Inner, Error> {
    // SAFETY: forwarded.
    let h = unsafe { get(p) }?;
    // SAFETY: the caller ends the use of the reference before any mutable borrow.
    unsafe { h.cell.try_borrow_unguarded() }.map_err(|_| busy(W::NAME))
}

fn busy(name: &str) -> Error {
    Error::new(SHMBUS_BUSY, format_args!("{name} has a loan, sample or record out; send, release or discard it first"))
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
    let out = NonNull::new(out).ok_or_else(|| Error::null("the output pointer"))?;
    let p = Box::into_raw(Box::new(W::wrap(Handle::new(value))));
    // SAFETY: the caller gives a pointer valid for a write.
    unsafe { out.as_ptr().write(p) };
    Ok(())
}

/// Frees a handle (NULL: nothing); with items still lent, marks it for the last one to free.
///
/// # Safety
/// `p` is NULL or a live pointer from [`into_c`], not used again by the caller.
pub(crate) unsafe fn free<W: Wrapper>(p: *mut W) {
    if p.is_null() {
        return;
    }
    // SAFETY: live, from `into_c`.
    let h = unsafe { &*p }.handle();
    if h.cell.try_borrow_mut().is_err() {
        h.orphaned.set(true);
        return;
    }
    // SAFETY: made by `Box::into_raw` in `into_c`, and nothing borrows it.
    drop(unsafe { Box::from_raw(p) });
}

/// An item that borrows the endpoint of handle `W` (a sample, loan, record), with the guard
/// it was made under. Dropping it gives the borrow back (and frees an orphaned handle).
pub(crate) struct Lent<W: Wrapper, I, G> {
    // Field order is drop order: the item, then the guard it borrows through.
    item: Option<I>,
    guard: Option<G>,
    owner: *mut W,
}

impl<W: Wrapper, I, G> std::fmt::Debug for Lent<W, I, G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lent").field("owner", &self.owner).finish_non_exhaustive()
    }
}

impl<W: Wrapper, I, G> Lent<W, I, G> {
    pub(crate) fn item(&self) -> &I {
        // Present until `take` or drop.
        self.item.as_ref().expect("a lent item is present until given back")
    }

    pub(crate) fn item_mut(&mut self) -> &mut I {
        self.item.as_mut().expect("a lent item is present until given back")
    }

    /// Takes the item out (to consume it, e.g. `Loan::send(self)`); the borrow is given back
    /// when `self` drops.
    pub(crate) fn take(&mut self) -> I {
        self.item.take().expect("a lent item is present until given back")
    }
}

impl<W: Wrapper, I, G> Drop for Lent<W, I, G> {
    fn drop(&mut self) {
        drop(self.item.take());
        drop(self.guard.take());
        // SAFETY: the owner outlives every item lent from it: `free` only marks a handle with
        // an outstanding borrow, and this is where it is freed once the last one is back.
        let h = unsafe { &*self.owner }.handle();
        if h.orphaned.get() && h.cell.try_borrow_mut().is_ok() {
            // SAFETY: made by `Box::into_raw` in `into_c`, freed by C already (orphaned), and
            // nothing borrows it any more.
            drop(unsafe { Box::from_raw(self.owner) });
        }
    }
}

/// Lends the endpoint of `p` mutably to make an item (`f` returns it, borrowing the endpoint).
///
/// # Safety
/// As [`get`]. The item is stored with its lifetime erased: it must borrow nothing but the
/// endpoint, which the guard (stored with it and dropped after it) keeps borrowed.
pub(crate) unsafe fn lend_mut<W: Wrapper, I>(
    p: *mut W,
    f: impl FnOnce(&'static mut W::Inner) -> Result<I, Error>,
) -> Result<Lent<W, I, RefMut<'static, W::Inner>>, Error> {
    // SAFETY: forwarded; the handle is boxed, so it lives at a stable address until freed,
    // and `free` defers the freeing while this guard is alive (see `Lent`'s drop).
    let h: &'static Handle<W::Inner> = unsafe { &*(get(p)? as *const Handle<W::Inner>) };
    let mut guard = h.cell.try_borrow_mut().map_err(|_| busy(W::NAME))?;
    // SAFETY: the endpoint lives in the RefCell (not in the guard), so the reference stays
    // valid when the guard moves; the guard is kept alive (in `Lent`) as long as the item.
    let target: &'static mut W::Inner = unsafe { &mut *(&mut *guard as *mut W::Inner) };
    let item = f(target)?;
    Ok(Lent { item: Some(item), guard: Some(guard), owner: p })
}

/// [`lend_mut`] for items that borrow the endpoint shared (many may be out at once).
///
/// # Safety
/// As [`lend_mut`].
pub(crate) unsafe fn lend<W: Wrapper, I>(
    p: *mut W,
    f: impl FnOnce(&'static W::Inner) -> Result<I, Error>,
) -> Result<Lent<W, I, Ref<'static, W::Inner>>, Error> {
    // SAFETY: as in `lend_mut`.
    let h: &'static Handle<W::Inner> = unsafe { &*(get(p)? as *const Handle<W::Inner>) };
    let guard = h.cell.try_borrow().map_err(|_| busy(W::NAME))?;
    // SAFETY: as in `lend_mut`: the guard outlives the item.
    let target: &'static W::Inner = unsafe { &*(&*guard as *const W::Inner) };
    let item = f(target)?;
    Ok(Lent { item: Some(item), guard: Some(guard), owner: p })
}

/// Boxes a lent item into `*out`.
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
