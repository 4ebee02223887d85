//! Owned lending: an endpoint held by several owners (a Python object and the samples it
//! lent, a C handle and its loans), lending items that live past the call that made them.
//!
//! The endpoints are `Send` but not `Sync`, and their zero-copy items borrow them: a topic
//! `Sample<'a>` holds `&'a Subscriber`, a `Loan<'a>` holds `&'a mut Publisher`. That is the
//! right shape for Rust callers, whose borrows the compiler checks, and the wrong one for a
//! binding, whose objects live as long as anything refers to them and may be used from any
//! thread. A [`Lender`] is the owned form, in the manner of tokio's `Mutex::lock_owned`:
//!
//! * it owns the endpoint behind an `Arc` and a mutex, so it is `Send` and `Sync`, and every
//!   call on the endpoint ([`Lender::with`], [`Lender::with_ref`]) runs with the mutex held;
//! * [`Lender::lend_mut`] gives a [`LentMut`]: exclusive, owned access that keeps the endpoint
//!   alive and gives it back when dropped. While it lives every other use of the endpoint is
//!   refused with [`LendError::Busy`] (not waited for: a binding's user holding a loan in one
//!   place and receiving in another has a bug to be told about, not a deadlock).
//!   Each kind makes its owned items from a lender (`Publisher::loan_owned`,
//!   `StreamReader::record_owned`, ...) with [`Lender::lend_mut_after`]: the receive (or
//!   loan) runs under the mutex, as any call does, so another thread's call waits for it
//!   instead of failing, and only an item it returns lends the endpoint. The items are the
//!   same types as the borrowed ones, holding the guard in place of the borrow, so nothing
//!   has its lifetime erased;
//! * [`Lender::lend_ref`] gives a [`LentRef`]: shared, owned access for items that borrow the
//!   endpoint shared (topic samples). Any number may live, and calls by shared reference go
//!   on; [`LentRef::with`] reaches the endpoint under the mutex, since it is not `Sync`;
//! * [`Lender::close`] refuses every later call with [`LendError::Closed`] and drops the
//!   endpoint now, or when the last lent item is given back.
//!
//! ```
//! use shmbus::{lend::{LendError, Lender}, Domain, Publisher, Topic, TopicConfig};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let scratch = std::env::temp_dir().join(format!("shmbus-lend-{}", std::process::id()));
//! # std::fs::create_dir_all(&scratch)?;
//! # let domain = Domain::with_root("lend", &scratch)?;
//! let topic = Topic::create_or_open(&domain, "frames", &TopicConfig::default().max_message_len(64))?;
//! let subscriber = topic.subscriber()?;
//! let lender = Lender::new(topic.publisher()?);
//! let mut loan = Publisher::loan_owned(&lender)?; // 'static: keep it anywhere
//! loan[..5].copy_from_slice(b"hello");
//! loan.truncate(5);
//! assert_eq!(lender.with(|p| p.max_message_len()), Err(LendError::Busy));
//! let seq = loan.send()?;
//! assert_eq!(lender.with(|p| p.max_message_len()), Ok(64));
//! assert_eq!(subscriber.recv()?.seq(), seq);
//! # std::fs::remove_dir_all(&scratch)?;
//! # Ok(()) }
//! ```
//!
//! The mutex is held only for the length of a call (or of a [`Lender::guard`]): a blocking
//! receive through a lender holds it while it waits, so a binding waits in short slices when
//! another thread must get in (as the Python binding does, to take signals).

use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{ErrorKind, Failure};

/// Why a [`Lender`] refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LendError {
    /// An item lent from the endpoint is still held, and the call would conflict with it:
    /// send, consume or release it first.
    Busy,
    /// The endpoint was closed.
    Closed,
}

impl fmt::Display for LendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LendError::Busy => {
                "an item lent by this endpoint (a loan, sample, record, job or entry) is still held; send, consume or release it first"
            }
            LendError::Closed => "the endpoint is closed",
        })
    }
}

impl std::error::Error for LendError {}

impl Failure for LendError {
    fn kind(&self) -> ErrorKind {
        match self {
            LendError::Busy => ErrorKind::Busy,
            LendError::Closed => ErrorKind::Closed,
        }
    }
}

/// Why making an owned item from a [`Lender`] failed: the lender refused, or the call that
/// makes the item (a receive, a loan) failed with `E`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LendOr<E> {
    /// The lender refused (an item still held, or closed).
    Refused(LendError),
    /// The receive or loan failed.
    Failed(E),
}

impl<E: fmt::Display> fmt::Display for LendOr<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LendOr::Refused(e) => e.fmt(f),
            LendOr::Failed(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for LendOr<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LendOr::Refused(e) => Some(e),
            LendOr::Failed(e) => Some(e),
        }
    }
}

impl<E: Failure + 'static> Failure for LendOr<E> {
    fn kind(&self) -> ErrorKind {
        match self {
            LendOr::Refused(e) => e.kind(),
            LendOr::Failed(e) => e.kind(),
        }
    }

    fn value(&self) -> Option<u64> {
        match self {
            LendOr::Refused(_) => None,
            LendOr::Failed(e) => e.value(),
        }
    }
}

impl<E> From<LendError> for LendOr<E> {
    fn from(e: LendError) -> Self {
        LendOr::Refused(e)
    }
}

#[derive(Debug, Default)]
struct State {
    /// A [`LentMut`] is out.
    exclusive: bool,
    /// [`LentRef`]s out.
    shared: usize,
    /// [`Lender::close`] was called.
    closed: bool,
}

struct Inner<E> {
    state: Mutex<State>,
    /// The endpoint; `None` once closed and given back. Reached with `state` locked, or
    /// through the one [`LentMut`] out (while `state.exclusive` refuses everyone else).
    ep: UnsafeCell<Option<E>>,
}

// SAFETY: the endpoint is reached by one thread at a time: under the mutex, or by the one
// `LentMut` out while every other access is refused (see `Inner::ep`). So it only needs to
// be `Send` for the lender to be shared between threads.
unsafe impl<E: Send> Sync for Inner<E> {}

/// An endpoint owned by several holders, lending owned items (see the [module docs](self)).
pub struct Lender<E> {
    inner: Arc<Inner<E>>,
}

impl<E> Clone for Lender<E> {
    fn clone(&self) -> Self {
        Lender { inner: Arc::clone(&self.inner) }
    }
}

impl<E> fmt::Debug for Lender<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lender").field("state", &*self.inner.lock()).finish_non_exhaustive()
    }
}

impl<E> Inner<E> {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing under the lock leaves `State` half-updated on a panic: keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The endpoint, if not closed; `st` is this lender's locked state.
    ///
    /// # Safety
    /// The caller holds `st` (the lock), and no `LentMut` is out; a `&mut` is only made when
    /// no `LentRef` is out either.
    unsafe fn ep(&self, _st: &MutexGuard<'_, State>) -> *mut Option<E> {
        self.ep.get()
    }

    /// Drops the endpoint (once closed and nothing lent).
    fn free(&self, st: &MutexGuard<'_, State>) {
        debug_assert!(st.closed && !st.exclusive && st.shared == 0);
        // SAFETY: locked, nothing lent: no other reference to the endpoint exists.
        drop(unsafe { (*self.ep(st)).take() });
    }
}

impl<E> Lender<E> {
    /// A lender owning `ep`.
    pub fn new(ep: E) -> Lender<E> {
        Lender { inner: Arc::new(Inner { state: Mutex::new(State::default()), ep: UnsafeCell::new(Some(ep)) }) }
    }

    /// Runs `f` on the endpoint, exclusively: [`LendError::Busy`] while any item is lent.
    pub fn with<R>(&self, f: impl FnOnce(&mut E) -> R) -> Result<R, LendError> {
        let st = self.inner.lock();
        if st.exclusive || st.shared > 0 {
            return Err(if st.closed { LendError::Closed } else { LendError::Busy });
        }
        // SAFETY: locked, nothing lent: this is the only reference.
        let ep = unsafe { &mut *self.inner.ep(&st) };
        ep.as_mut().filter(|_| !st.closed).map(f).ok_or(LendError::Closed)
    }

    /// Runs `f` on the endpoint by shared reference: allowed while shared items are lent,
    /// [`LendError::Busy`] while an exclusive one is.
    pub fn with_ref<R>(&self, f: impl FnOnce(&E) -> R) -> Result<R, LendError> {
        let g = self.guard()?;
        Ok(f(&g))
    }

    /// The endpoint by shared reference, with the mutex held until the guard drops (a wait
    /// over several endpoints, which must hold them all at once).
    pub fn guard(&self) -> Result<Guard<'_, E>, LendError> {
        let st = self.inner.lock();
        if st.closed {
            return Err(LendError::Closed);
        }
        if st.exclusive {
            return Err(LendError::Busy);
        }
        // SAFETY: locked, no `LentMut` out; lent shared items reach it under this lock too.
        let ep = unsafe { &*self.inner.ep(&st) };
        let ep: *const E = ep.as_ref().ok_or(LendError::Closed)?;
        Ok(Guard { _st: st, ep })
    }

    /// The endpoint by shared reference, without holding the mutex: for a holder with an
    /// exclusion rule of its own (the C API, whose callers use an endpoint from one thread
    /// at a time), which must not lock a lender twice in one wait.
    /// [`LendError::Busy`] while an exclusive item is lent.
    ///
    /// # Safety
    /// Until the reference is dropped, no other thread uses this lender or an item lent from
    /// it, and this thread makes no mutable use of it ([`with`](Self::with),
    /// [`lend_mut`](Self::lend_mut), [`close`](Self::close)).
    pub unsafe fn peek(&self) -> Result<&E, LendError> {
        let ep = self.guard()?.ep;
        // SAFETY: the endpoint was there and not lent exclusively under the lock; the caller
        // keeps every mutable use, and its dropping, away while the reference lives (this
        // function's contract).
        Ok(unsafe { &*ep })
    }

    /// Lends the endpoint exclusively, as an owned guard (see the [module docs](self)).
    pub fn lend_mut(&self) -> Result<LentMut<E>, LendError> {
        match self.lend_mut_after(|_| Ok::<(), LendError>(())) {
            Ok((lent, ())) => Ok(lent),
            Err(LendOr::Refused(e) | LendOr::Failed(e)) => Err(e),
        }
    }

    /// Runs `f` on the endpoint with the mutex held, as [`with`](Self::with) does, and if it
    /// succeeds lends the endpoint exclusively before letting the mutex go: how an owned item
    /// is made (a receive that returns what it found, then the item built from it and the
    /// guard). Another thread's call meanwhile waits for the mutex; it is refused only once
    /// an item is out. What `f` returns (`P`) cannot borrow the endpoint.
    pub fn lend_mut_after<P, X>(&self, f: impl FnOnce(&mut E) -> Result<P, X>) -> Result<(LentMut<E>, P), LendOr<X>> {
        let mut st = self.inner.lock();
        if st.closed {
            return Err(LendError::Closed.into());
        }
        if st.exclusive || st.shared > 0 {
            return Err(LendError::Busy.into());
        }
        // SAFETY: locked, nothing lent: this is the only reference until the guard is made.
        let ep = unsafe { &mut *self.inner.ep(&st) };
        let ep: &mut E = ep.as_mut().ok_or(LendError::Closed)?;
        let made = f(ep).map_err(LendOr::Failed)?;
        let ep: *mut E = ep;
        st.exclusive = true;
        Ok((LentMut { ep, owner: self.clone() }, made))
    }

    /// [`lend_mut_after`](Self::lend_mut_after) for items that borrow the endpoint shared
    /// (topic samples): `f` runs by shared reference, and lends it shared if it succeeds.
    pub fn lend_ref_after<P, X>(&self, f: impl FnOnce(&E) -> Result<P, X>) -> Result<(LentRef<E>, P), LendOr<X>> {
        let mut st = self.inner.lock();
        if st.closed {
            return Err(LendError::Closed.into());
        }
        if st.exclusive {
            return Err(LendError::Busy.into());
        }
        // SAFETY: locked, no `LentMut` out; lent shared items reach it under this lock too.
        let ep = unsafe { &*self.inner.ep(&st) };
        let made = f(ep.as_ref().ok_or(LendError::Closed)?).map_err(LendOr::Failed)?;
        st.shared += 1;
        Ok((LentRef { owner: self.clone() }, made))
    }

    /// Lends the endpoint shared, as an owned token (see the [module docs](self)).
    pub fn lend_ref(&self) -> Result<LentRef<E>, LendError> {
        match self.lend_ref_after(|_| Ok::<(), LendError>(())) {
            Ok((lent, ())) => Ok(lent),
            Err(LendOr::Refused(e) | LendOr::Failed(e)) => Err(e),
        }
    }

    /// Refuses every later call with [`LendError::Closed`]; drops the endpoint now, or when
    /// the last lent item is given back.
    pub fn close(&self) {
        let mut st = self.inner.lock();
        st.closed = true;
        if !st.exclusive && st.shared == 0 {
            self.inner.free(&st);
        }
    }

    /// Closes the lender and gives its endpoint back, for a holder that ends it by value
    /// (`ActiveRequest::fail`): [`LendError::Busy`] while an item is lent (nothing changes
    /// then), [`LendError::Closed`] once closed.
    pub fn take(&self) -> Result<E, LendError> {
        let mut st = self.inner.lock();
        if st.closed {
            return Err(LendError::Closed);
        }
        if st.exclusive || st.shared > 0 {
            return Err(LendError::Busy);
        }
        st.closed = true;
        // SAFETY: locked, nothing lent: this is the only reference.
        unsafe { (*self.inner.ep(&st)).take() }.ok_or(LendError::Closed)
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.inner.lock().closed
    }

    /// Whether `self` and `other` own the same endpoint.
    pub fn same(&self, other: &Lender<E>) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The lender's address, to lock several in one order and to find one listed twice.
    pub fn addr(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }
}

/// The endpoint of a [`Lender`] by shared reference, its mutex held (from [`Lender::guard`]).
pub struct Guard<'a, E> {
    _st: MutexGuard<'a, State>,
    ep: *const E,
}

impl<E> Deref for Guard<'_, E> {
    type Target = E;
    fn deref(&self) -> &E {
        // SAFETY: the endpoint lives while the lock is held (it is dropped only under it),
        // and no `LentMut` is out (checked when made).
        unsafe { &*self.ep }
    }
}

impl<E> fmt::Debug for Guard<'_, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Guard")
    }
}

/// Exclusive, owned access to a [`Lender`]'s endpoint: every other use is refused while it
/// lives; dropping it gives the endpoint back (and drops it if the lender was closed).
pub struct LentMut<E> {
    ep: *mut E,
    owner: Lender<E>,
}

// SAFETY: it is the only access to the endpoint while it lives (the lender refuses every
// other), so it may move to another thread with it when the endpoint is `Send`.
unsafe impl<E: Send> Send for LentMut<E> {}
// SAFETY: `&LentMut` gives `&E` (which `E: Sync` lets threads share) and its lender, whose
// last clone may drop `E` on another thread (which `E: Send` allows).
unsafe impl<E: Send + Sync> Sync for LentMut<E> {}

impl<E> LentMut<E> {
    /// The lender it came from.
    pub fn lender(&self) -> &Lender<E> {
        &self.owner
    }
}

impl<E> Deref for LentMut<E> {
    type Target = E;
    fn deref(&self) -> &E {
        // SAFETY: the endpoint stays in place while lent (it is dropped only once given
        // back), and this guard is the only access to it (see the type's docs).
        unsafe { &*self.ep }
    }
}

impl<E> DerefMut for LentMut<E> {
    fn deref_mut(&mut self) -> &mut E {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference.
        unsafe { &mut *self.ep }
    }
}

impl<E> Drop for LentMut<E> {
    fn drop(&mut self) {
        let mut st = self.owner.inner.lock();
        st.exclusive = false;
        if st.closed {
            self.owner.inner.free(&st);
        }
    }
}

impl<E> fmt::Debug for LentMut<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LentMut")
    }
}

/// Shared, owned access to a [`Lender`]'s endpoint, for items that borrow it shared (topic
/// samples): keeps the endpoint alive and refuses exclusive uses while it lives. The
/// endpoint is reached under the lender's mutex ([`LentRef::with`]), as it is not `Sync`.
pub struct LentRef<E> {
    owner: Lender<E>,
}

impl<E> LentRef<E> {
    /// Runs `f` on the endpoint by shared reference, with the lender's mutex held.
    pub fn with<R>(&self, f: impl FnOnce(&E) -> R) -> R {
        let st = self.owner.inner.lock();
        // SAFETY: locked, and no `LentMut` is out while a `LentRef` lives; the endpoint is
        // not dropped while one lives, even closed.
        let ep = unsafe { &*self.owner.inner.ep(&st) };
        f(ep.as_ref().expect("a lent endpoint is dropped only once given back"))
    }

    /// The lender it came from.
    pub fn lender(&self) -> &Lender<E> {
        &self.owner
    }
}

impl<E> Drop for LentRef<E> {
    fn drop(&mut self) {
        let mut st = self.owner.inner.lock();
        st.shared -= 1;
        if st.closed && st.shared == 0 {
            self.owner.inner.free(&st);
        }
    }
}

impl<E> fmt::Debug for LentRef<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LentRef")
    }
}

/// Bytes that an endpoint lent exclusively keeps valid and unchanged until its next use (a
/// pool job in the worker's mailbox, a journal entry in the tailer's files), owning the lent
/// endpoint, with what describes them (`M`: a `JobInfo`, an `EntryInfo`). The owned form of
/// the `&'a [u8]` views (`JobRef`, `EntryRef`); made by each kind (`Worker::job_owned`,
/// `Tailer::entry_owned`). Derefs to the bytes.
pub struct OwnedBytes<E, M> {
    // Never used again: it only keeps the endpoint lent, so nothing receives over the bytes.
    _holder: LentMut<E>,
    info: M,
    ptr: *const u8,
    len: usize,
}

// SAFETY: the bytes are read-only and stay valid while the lent endpoint (`Send`) is held,
// whatever the thread; `M` is plain data.
unsafe impl<E: Send, M: Send> Send for OwnedBytes<E, M> {}
// SAFETY: as above; `&OwnedBytes` reads the bytes and `M` only.
unsafe impl<E: Send, M: Sync> Sync for OwnedBytes<E, M> {}

impl<E, M: Copy> OwnedBytes<E, M> {
    /// The bytes `recv` receives from the endpoint of `lender`, with what describes them,
    /// owning it (lent exclusively).
    ///
    /// # Safety
    /// The bytes `recv` returns are the endpoint's (it received them from the endpoint it
    /// was given), and stay valid and unchanged as long as the endpoint is not used again.
    pub(crate) unsafe fn received<X>(
        lender: &Lender<E>,
        recv: impl FnOnce(&mut E) -> Result<(M, *const [u8]), X>,
    ) -> Result<OwnedBytes<E, M>, LendOr<X>> {
        let (holder, (info, bytes)) = lender.lend_mut_after(recv)?;
        Ok(OwnedBytes { _holder: holder, info, ptr: bytes.cast::<u8>(), len: bytes.len() })
    }

    /// What describes the bytes (id, index, timestamp, length).
    pub fn info(&self) -> M {
        self.info
    }
}

impl<E, M> Deref for OwnedBytes<E, M> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: valid and unchanged while the endpoint stays lent to `_holder` and unused
        // (`new`'s contract); it does, as long as `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<E, M: fmt::Debug> fmt::Debug for OwnedBytes<E, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedBytes").field("info", &self.info).finish_non_exhaustive()
    }
}

/// Lent bytes mapped a second time, read-only: for handing a received item to code that
/// could write into it, such as an importer of DLPack's legacy ABI, which has no read-only
/// flag. A store through [`ReadOnlyAlias::as_ptr`] faults (`SIGSEGV`) instead of changing
/// memory that other processes read; what others write shows, as in the item itself. Made
/// with `mremap(2)`; unmapped when dropped.
pub struct ReadOnlyAlias {
    _map: crate::sys::Mapping<crate::sys::ReadOnly>,
    data: *const u8,
}

// SAFETY: the alias is a mapping this value owns; the pointer is into it and read only.
unsafe impl Send for ReadOnlyAlias {}
// SAFETY: as above; `&ReadOnlyAlias` gives out the address only.
unsafe impl Sync for ReadOnlyAlias {}

impl ReadOnlyAlias {
    /// Whether the `len` bytes at `ptr` lie in a mapping shmbus made in this process (a
    /// channel's segment, a journal file, a ring), so that they can be mapped again. Items
    /// copied into the process's own memory (a topic's messages of a few dozen bytes, a
    /// journal entry decoded into its tailer's buffer) do not.
    pub fn possible(ptr: *const u8, len: usize) -> bool {
        len > 0 && crate::sys::sigbus::covers(ptr as usize, len)
    }

    /// Maps the `len` bytes at `ptr` again, read-only. `second_at`: where the bytes cross
    /// from one mapping into the next, as a stream record running over the end of its ring
    /// does ([`Record::second_mapping_at`](crate::stream::Record::second_mapping_at)). Bytes
    /// outside shmbus's mappings ([`ReadOnlyAlias::possible`]) are refused
    /// ([`std::io::ErrorKind::InvalidInput`]) before any system call.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be the bytes of an item lent by a shmbus endpoint of this process
    /// (a sample, record, job, entry, request or response), held for the length of the call,
    /// with `second_at` as the item says. A wrong `second_at` maps other bytes of the file.
    pub unsafe fn new(ptr: *const u8, len: usize, second_at: Option<usize>) -> std::io::Result<ReadOnlyAlias> {
        let parts: &[(*const u8, usize)] = match second_at {
            Some(at) if at > 0 && at < len => &[(ptr, at), (ptr.wrapping_add(at), len - at)],
            _ => &[(ptr, len)],
        };
        // SAFETY: the caller's promise: each part lies in one mapping, held.
        let (map, data) = unsafe { crate::sys::Mapping::<crate::sys::ReadOnly>::alias_read_only(parts) }?;
        Ok(ReadOnlyAlias { _map: map, data })
    }

    /// The first byte, in the alias (the item's bytes follow, as many as it has).
    pub fn as_ptr(&self) -> *const u8 {
        self.data
    }
}

impl fmt::Debug for ReadOnlyAlias {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadOnlyAlias").field("data", &self.data).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exclusive_lend_refuses_every_other_use_until_dropped() {
        let l = Lender::new(vec![1u8]);
        let mut held = l.lend_mut().unwrap();
        held.push(2);
        assert_eq!(l.with(|v| v.len()), Err(LendError::Busy));
        assert_eq!(l.with_ref(|v| v.len()), Err(LendError::Busy));
        assert_eq!(l.lend_ref().err(), Some(LendError::Busy));
        assert_eq!(l.lend_mut().err(), Some(LendError::Busy));
        drop(held);
        assert_eq!(l.with(|v| v.clone()), Ok(vec![1, 2]));
    }

    #[test]
    fn shared_lends_allow_shared_uses_only() {
        let l = Lender::new(7u32);
        let a = l.lend_ref().unwrap();
        let b = l.lend_ref().unwrap();
        assert_eq!(l.with_ref(|v| *v), Ok(7));
        assert_eq!(a.with(|v| *v), 7);
        assert_eq!(l.with(|v| *v), Err(LendError::Busy));
        assert_eq!(l.lend_mut().err(), Some(LendError::Busy));
        drop((a, b));
        assert_eq!(l.with(|v| *v), Ok(7));
    }

    /// Counts its drops, to see when a lender drops its endpoint.
    struct Dropped(Arc<std::sync::atomic::AtomicUsize>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn close_drops_the_endpoint_when_the_last_item_comes_back() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        let n = Arc::new(AtomicUsize::new(0));
        let l = Lender::new(Dropped(Arc::clone(&n)));
        let held = l.lend_mut().unwrap();
        l.close();
        assert_eq!(n.load(SeqCst), 0, "dropped under a lent item");
        assert_eq!(l.with(|_| ()), Err(LendError::Closed));
        assert_eq!(l.lend_ref().err(), Some(LendError::Closed));
        drop(held);
        assert_eq!(n.load(SeqCst), 1);

        let l = Lender::new(Dropped(Arc::clone(&n)));
        let (a, b) = (l.lend_ref().unwrap(), l.lend_ref().unwrap());
        l.close();
        drop(a);
        assert_eq!(n.load(SeqCst), 1);
        drop(b);
        assert_eq!(n.load(SeqCst), 2);

        let l = Lender::new(Dropped(Arc::clone(&n)));
        l.close();
        assert_eq!(n.load(SeqCst), 3, "closed with nothing lent: dropped at once");
        assert!(l.is_closed());
    }

    #[test]
    fn an_exclusive_lend_moves_to_another_thread() {
        let l = Lender::new(String::from("a"));
        let mut held = l.lend_mut().unwrap();
        std::thread::spawn(move || held.push('b')).join().unwrap();
        assert_eq!(l.with(|s| s.clone()), Ok("ab".to_string()));
    }
}
