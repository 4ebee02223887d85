//! The bodies that many exported functions share. Each `extern "C"` function stays written
//! out (cbindgen reads its signature and doc comment for the header) and calls one of these:
//! opening a channel, its status snapshot, a getter, a call on an endpoint, the three waits of
//! a receive, the copy receive into the caller's buffer, and the lent items (samples, loans,
//! records): lending one out, reading its bytes, giving it back.

use std::ffi::c_char;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

use shmbus::lend::LendOr;
use shmbus::{Domain, Failure, RecvErrors, RecvIntoSliceError, Refused, SendErrors, WaitPolicy, Waited};

use crate::domain::shmbus_domain;
use crate::handle::*;
use crate::status::*;

/// How long a call waits: `try_` (never), blocking (for ever) or `_timeout` (`timeout_ns`).
pub(crate) use shmbus::Wait;

/// The wait of a `_timeout` form, from its `timeout_ns` argument.
pub(crate) fn wait_ns(ns: u64) -> Wait {
    Wait::timeout(timeout(ns))
}

/// The outcome of a receive's `*_with(wait)` as an `Error`: nothing is the error of the form
/// the caller chose (the try form's `Empty`, the timed form's `Timeout`, with their messages).
pub(crate) trait Settle {
    /// What the receive returns.
    type Ok;
    /// The outcome, its error as an `Error`.
    fn settle(self, wait: Wait) -> Result<Self::Ok, Error>;
}

impl<T, E> Settle for Result<T, Waited<E>>
where
    E: RecvErrors + Failure,
    E::Try: Failure,
    E::Timeout: Failure,
{
    type Ok = T;

    fn settle(self, wait: Wait) -> Result<T, Error> {
        self.map_err(|w| match wait {
            Wait::Now => Error::from(E::Try::from(w)),
            Wait::Forever => Error::from(w),
            Wait::For(_) | Wait::Until(_) => Error::from(E::Timeout::from(w)),
        })
    }
}

impl<T, E> Settle for Result<T, RecvIntoSliceError<Waited<E>>>
where
    E: RecvErrors + Failure + 'static,
    E::Try: Failure + 'static,
    E::Timeout: Failure + 'static,
{
    type Ok = T;

    fn settle(self, wait: Wait) -> Result<T, Error> {
        self.map_err(|e| match wait {
            Wait::Now => Error::from(e.map_recv(E::Try::from)),
            Wait::Forever => Error::from(e),
            Wait::For(_) | Wait::Until(_) => Error::from(e.map_recv(E::Timeout::from)),
        })
    }
}

/// The wait policy of a `spin_ns` argument: busy-poll that long before sleeping (0: sleep at
/// once; `u64::MAX`: never sleep).
pub(crate) fn wait_policy(spin_ns: u64) -> WaitPolicy {
    WaitPolicy { spin: if spin_ns == u64::MAX { Duration::MAX } else { Duration::from_nanos(spin_ns) } }
}

/// The outcome of a send's (or loan's) `*_with(wait)` as an `Error`: no room now is the try
/// form's error (with how much room there was), a deadline passed the timed form's.
impl<T, E> Settle for Result<T, Refused<E, E::Try>>
where
    E: SendErrors + Failure,
    E::Try: Failure,
    E::Timeout: Failure,
{
    type Ok = T;

    fn settle(self, wait: Wait) -> Result<T, Error> {
        self.map_err(|r| match (wait, r) {
            (_, Refused::Full(t)) => Error::from(t),
            (Wait::Now, Refused::Failed(e)) => Error::from(E::Try::from(e)),
            (Wait::Forever, r) => Error::from(r),
            (_, r) => Error::from(E::Timeout::from(r)),
        })
    }
}

/// The config behind `config`, or the kind's defaults for NULL.
///
/// # Safety
/// As [`get`].
pub(crate) unsafe fn config_or_default<W: Wrapper>(config: *const W) -> Result<W::Inner, Error>
where
    W::Inner: Clone + Default,
{
    if config.is_null() {
        return Ok(W::Inner::default());
    }
    // SAFETY: forwarded.
    unsafe { with_ref(config, |c| Ok(c.clone())) }
}

/// Opens (or creates) channel `name` in `domain` with `open`, and stores the handle in `*out`
/// (checked before anything is opened).
///
/// # Safety
/// `domain` is NULL or live; `name` NULL or NUL-terminated; `out` NULL or valid for a write.
pub(crate) unsafe fn open_in<W: Wrapper>(
    domain: *const shmbus_domain,
    name: *const c_char,
    out: *mut *mut W,
    open: impl FnOnce(&Domain, &str) -> Result<W::Inner, Error>,
) -> shmbus_status {
    guard(|| {
        out_arg(out)?;
        // SAFETY: per the caller's contract.
        unsafe {
            let channel = with_ref(domain, |d| open(d, str_arg(name, "name")?))?;
            into_c(out, channel)
        }
    })
}

/// Reads the status of channel `name` in `domain` with `read` into `*out`, as its C struct.
///
/// # Safety
/// `domain` is NULL or live; `name` NULL or NUL-terminated; `out` NULL or valid for a write.
pub(crate) unsafe fn status_in<S, T: From<S>>(
    domain: *const shmbus_domain,
    name: *const c_char,
    out: *mut T,
    read: impl FnOnce(&Domain, &str) -> Result<S, Error>,
) -> shmbus_status {
    guard(|| {
        // SAFETY: per the caller's contract.
        unsafe {
            let status = with_ref(domain, |d| read(d, str_arg(name, "name")?))?;
            put_required(out, T::from(status), "out")
        }
    })
}

/// A plain getter: `f` of the value behind `p`, or `fallback` when `p` is NULL (or busy).
///
/// # Safety
/// As [`get`].
pub(crate) unsafe fn value_of<W: Wrapper, T>(p: *const W, fallback: T, f: impl FnOnce(&W::Inner) -> T) -> T
where
    T: Copy,
{
    // SAFETY: forwarded.
    guard_value(fallback, || unsafe { with_ref(p, |v| Ok(f(v))) }.unwrap_or(fallback))
}

/// A call that cannot fail on the endpoint behind `p` (shared), as a status.
///
/// # Safety
/// As [`get`].
pub(crate) unsafe fn run_ref<W: Wrapper>(p: *const W, f: impl FnOnce(&W::Inner)) -> shmbus_status {
    // SAFETY: forwarded.
    guard(|| unsafe {
        with_ref(p, |v| {
            f(v);
            Ok(())
        })
    })
}

/// A call that cannot fail on the endpoint behind `p` (mutably), as a status.
///
/// # Safety
/// As [`get`].
pub(crate) unsafe fn run_mut<W: Wrapper>(p: *mut W, f: impl FnOnce(&mut W::Inner)) -> shmbus_status {
    // SAFETY: forwarded.
    guard(|| unsafe {
        with_mut(p, |v| {
            f(v);
            Ok(())
        })
    })
}

/// A config setter: replaces the config behind `config` by `f` of it.
///
/// # Safety
/// As [`get`].
pub(crate) unsafe fn set<W: Wrapper>(config: *mut W, f: impl FnOnce(W::Inner) -> W::Inner) -> shmbus_status
where
    W::Inner: Clone,
{
    // SAFETY: forwarded.
    guard(|| unsafe { update(config, f) })
}

/// The copy receive into the caller's buffer (`cap` bytes at `buf`, checked first): `recv`
/// receives into it with the Rust endpoint's `*_recv_into_slice`, one copy out of shared
/// memory. The length goes to `*len_out`: the message's (`len_of` its result), or on
/// `SHMBUS_BUFFER_TOO_SMALL` the length needed (the endpoint keeps that message for the next
/// receive).
///
/// # Safety
/// `buf` is valid for writing `cap` bytes (or NULL with `cap` 0) and not used by anything
/// else during the call; `len_out` is NULL or valid for a write.
pub(crate) unsafe fn recv_into_buf<T>(
    buf: *mut std::ffi::c_void,
    cap: usize,
    len_out: *mut usize,
    recv: impl FnOnce(&mut [u8]) -> Result<T, Error>,
    len_of: impl FnOnce(&T) -> usize,
) -> Result<T, Error> {
    buf_args(buf, cap, len_out)?;
    let dst: &mut [u8] = if cap == 0 {
        &mut []
    } else {
        // SAFETY: `buf` is not NULL (`buf_args`) and valid for writing `cap` bytes, per the
        // caller; the receive only writes through the slice (it never reads bytes it has not
        // written), so bytes the caller left uninitialized are never read.
        unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), cap) }
    };
    let r = recv(dst);
    let len = match &r {
        Ok(v) => Some(len_of(v)),
        Err(e) if e.code == SHMBUS_BUFFER_TOO_SMALL => Some(e.value as usize),
        Err(_) => None,
    };
    if let Some(len) = len {
        // SAFETY: not NULL (`buf_args`), valid for a write per the caller.
        unsafe { len_out.write(len) };
    }
    r
}

/// The in-place receive of an endpoint: the bytes `take` receives go to `*data` / `*len`
/// (both checked first, so a message is never received into a NULL output), the rest of its
/// result is returned.
///
/// # Safety
/// `p` as [`get`]; `data` and `len` NULL or valid for writes.
pub(crate) unsafe fn recv_in_place<W: Wrapper, M>(
    p: *mut W,
    data: *mut *const u8,
    len: *mut usize,
    take: impl FnOnce(&mut W::Inner) -> Result<(&[u8], M), Error>,
) -> Result<M, Error> {
    out_arg(data)?;
    out_arg(len)?;
    // SAFETY: forwarded; the bytes stay in shared memory (or the mapped file) until the next
    // call on the endpoint, as the exported functions document.
    unsafe {
        with_mut(p, |e| {
            let (bytes, meta) = take(e)?;
            data.write(bytes.as_ptr());
            len.write(bytes.len());
            Ok(meta)
        })
    }
}

/// The C struct of an item lent from an endpoint (`shmbus_sample { item: OwnedSample }`, ...):
/// an owned item of the core, which keeps its endpoint lent until it is dropped.
pub(crate) trait LentItem: Sized + 'static {
    type Item;
    /// The C type's name, for error messages.
    const NAME: &'static str;
    fn wrap(item: Self::Item) -> Self;
    fn item(&self) -> &Self::Item;
    fn item_mut(&mut self) -> &mut Self::Item;
    fn into_item(self) -> Self::Item;
}

/// Implements [`LentItem`] for `shmbus_x { item: Item }` structs.
macro_rules! lent_item {
    ($($c:ident => $item:ty;)*) => {$(
        impl $crate::call::LentItem for $c {
            type Item = $item;
            const NAME: &'static str = stringify!($c);
            fn wrap(item: $item) -> Self {
                $c { item }
            }
            fn item(&self) -> &$item {
                &self.item
            }
            fn item_mut(&mut self) -> &mut $item {
                &mut self.item
            }
            fn into_item(self) -> $item {
                self.item
            }
        }
    )*};
}
pub(crate) use lent_item;

/// An owned item made by `make` from the lender behind `owner` (a loan, a sample, a record:
/// the core's `*_owned` constructors), into `*out` (checked first).
///
/// # Safety
/// `owner` as [`get`]; `out` NULL or valid for a write.
pub(crate) unsafe fn lend_out<W: Wrapper, T: LentItem, X: Into<Error>>(
    owner: *const W,
    out: *mut *mut T,
    make: impl FnOnce(&Handle<W::Inner>) -> Result<T::Item, LendOr<X>>,
) -> shmbus_status {
    guard(|| {
        out_arg(out)?;
        // SAFETY: per the caller's contract.
        unsafe {
            let item = make(get(owner)?).map_err(lend_failed::<W, X>)?;
            lent_into_c(out, T::wrap(item))
        }
    })
}

/// A lent item's bytes, read-only: `*data` and `*len` (a sample, a record).
///
/// # Safety
/// `item` is NULL or live; `data` and `len` NULL or valid for writes.
pub(crate) unsafe fn item_bytes<T: LentItem>(item: *const T, data: *mut *const u8, len: *mut usize) -> shmbus_status
where
    T::Item: Deref<Target = [u8]>,
{
    guard(|| {
        // SAFETY: NULL or live, per the caller's contract.
        let item = unsafe { item.as_ref() }.ok_or_else(|| Error::null(T::NAME))?;
        let bytes: &[u8] = item.item();
        // SAFETY: per the caller's contract.
        unsafe {
            put_required(data, bytes.as_ptr(), "data")?;
            put_required(len, bytes.len(), "len")
        }
    })
}

/// A loan's room, writable: `*data` and its size in `*size` (the output named `size_name`).
///
/// # Safety
/// `item` is NULL or live; `data` and `size` NULL or valid for writes.
pub(crate) unsafe fn item_room<T: LentItem>(
    item: *mut T,
    data: *mut *mut u8,
    size: *mut usize,
    size_name: &str,
) -> shmbus_status
where
    T::Item: DerefMut<Target = [u8]>,
{
    guard(|| {
        // SAFETY: NULL or live, per the caller's contract.
        let item = unsafe { item.as_mut() }.ok_or_else(|| Error::null(T::NAME))?;
        let room: &mut [u8] = item.item_mut();
        // SAFETY: per the caller's contract.
        unsafe {
            put_required(data, room.as_mut_ptr(), "data")?;
            put_required(size, room.len(), size_name)
        }
    })
}

/// A value of a lent item (0 ... for NULL): its sequence number, its time stamp.
///
/// # Safety
/// `item` is NULL or live.
pub(crate) unsafe fn item_value<T: LentItem, V: Copy>(item: *const T, fallback: V, f: impl FnOnce(&T::Item) -> V) -> V {
    // SAFETY: NULL or live, per the caller's contract.
    guard_value(fallback, || unsafe { item.as_ref() }.map_or(fallback, |i| f(i.item())))
}

/// Gives a lent item back and frees it, running `f` on it first (send a loan, consume a
/// record; `drop` for a discard or release): in every case, also when `f` fails.
///
/// # Safety
/// `item` is NULL or a live item made by [`lent_into_c`], not used again by the caller.
pub(crate) unsafe fn give_back<T: LentItem, R>(item: *mut T, f: impl FnOnce(T::Item) -> R) -> Result<R, Error> {
    if item.is_null() {
        return Err(Error::null(T::NAME));
    }
    // SAFETY: a live item made by `lent_into_c`, given up by the caller.
    let boxed = unsafe { Box::from_raw(item) };
    Ok(f(boxed.into_item()))
}

/// Checks that a loan of `cap` bytes can send `len` (`SHMBUS_TOO_LARGE`, with `cap`, if not).
pub(crate) fn loan_fits(cap: usize, len: usize, what: &str) -> Result<(), Error> {
    if len > cap {
        return Err(Error::with_value(
            SHMBUS_TOO_LARGE,
            cap as u64,
            format_args!("a loan of {cap} bytes cannot send {len}; nothing was {what}"),
        ));
    }
    Ok(())
}

/// [`give_back`] for the functions that return nothing (discard, release, consume): NULL is
/// nothing, not an error.
///
/// # Safety
/// As [`give_back`].
pub(crate) unsafe fn hand_back<T: LentItem>(item: *mut T, f: impl FnOnce(T::Item)) {
    if !item.is_null() {
        // SAFETY: per the caller's contract.
        guard_value((), || drop(unsafe { give_back(item, f) }))
    }
}
