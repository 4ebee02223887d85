//! `Cell<T>`: how a Python object owns a Rust handle or endpoint, and lends items that
//! borrow it (a topic `Sample` or `Loan`, a stream `Record` or `Loan`, a pool `JobRef`, a
//! journal `Loan`).
//!
//! The Rust endpoints are `Send` but not `Sync`, and their zero-copy items borrow them
//! (`Sample<'a>` holds `&'a Subscriber`, `Loan<'a>` holds `&'a mut Publisher`). A Python
//! object may be used from any thread and lives as long as anything refers to it, so:
//!
//! * the endpoint is boxed (its address never changes) and every use of it happens with the
//!   cell's mutex held, which makes the cell `Sync`;
//! * a lent item is the Rust item with its lifetime erased to `'static`. Its Python object
//!   holds a strong reference to the endpoint's object, so the box outlives it; the box is
//!   freed only when the endpoint is closed *and* no item is lent (a `close()` while items
//!   live is deferred to the last one's return);
//! * while an item is lent from a `&mut self` endpoint (`Lending::Exclusive`) every other use
//!   of the endpoint is refused with `Busy`, so the item's `&mut` stays the only reference;
//!   a `&self` endpoint (`Lending::Shared`, the topic subscriber) goes on being used;
//! * an item is dropped (or sent, or consumed) with the mutex held, since that touches the
//!   endpoint's state.
//!
//! Nothing under the mutex touches Python, so a thread holding the GIL that waits for the
//! mutex cannot deadlock with the holder (which runs without the GIL).
//!
//! An async receive waiting on the endpoint parks its waker in the cell ([`Cell::park`]):
//! `close()` wakes it, so that the receive polls again and raises `Closed`, as a blocking
//! receive in another thread does. Nothing else would wake it: closing notifies no channel.

use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::Waker;

use crate::errors::Fail;

/// Whether items lent by a cell borrow its endpoint shared or exclusively.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lending {
    /// `&self` items (topic `Sample`): the endpoint stays usable while they live.
    Shared,
    /// `&mut self` items: the endpoint refuses every call while one lives.
    Exclusive,
}

#[derive(Debug)]
struct State<T> {
    /// The boxed endpoint (`None` once freed).
    ep: Option<NonNull<T>>,
    /// Items lent and not yet returned.
    lent: usize,
    /// `close()` was called: refuse every call, free when `lent` reaches 0.
    closed: bool,
    /// The wakers of async receives waiting on the endpoint, woken by `close()`. Weak: each
    /// receive's registration owns its waker, and drops it when done.
    parked: Vec<Weak<Waker>>,
}

impl<T> State<T> {
    fn free(&mut self) {
        if let Some(ep) = self.ep.take() {
            // SAFETY: made by `Box::leak` in `new`, taken out of `ep` once, and no item
            // borrows it (`lent` is 0).
            drop(unsafe { Box::from_raw(ep.as_ptr()) });
        }
    }
}

/// A Rust handle or endpoint owned by a Python object (see the module docs).
#[derive(Debug)]
pub(crate) struct Cell<T> {
    state: Mutex<State<T>>,
    lending: Lending,
    /// What it is, for messages: "subscriber", "stream reader", ...
    what: &'static str,
}

// SAFETY: the endpoint (`T: Send`) is reached only through `state`'s mutex, one thread at a
// time, and lent items are returned under the same mutex; so the cell may move to and be
// shared with any thread.
unsafe impl<T: Send> Send for Cell<T> {}
// SAFETY: as above: every access to the `T` is serialized by the mutex.
unsafe impl<T: Send> Sync for Cell<T> {}

/// An item borrowed from a [`Cell`], its lifetime erased; returned with [`Cell::give_back`].
#[derive(Debug)]
pub(crate) struct Lent<I>(I);

// SAFETY: a lent item is only dropped, sent or consumed through `Cell::give_back`, with its
// endpoint's mutex held (so never at the same time as another use of the endpoint, whatever
// the thread). What is read of it without that mutex is a pointer and a length into shared
// memory the item keeps valid, which any thread may read.
unsafe impl<I> Send for Lent<I> {}
// SAFETY: as above; `&Lent<I>` gives no access to the item.
unsafe impl<I> Sync for Lent<I> {}

impl<I> Lent<I> {
    /// The item.
    pub(crate) fn get(&self) -> &I {
        &self.0
    }

    /// The item, mutably (to take a writable pointer to a loan's bytes).
    pub(crate) fn get_mut(&mut self) -> &mut I {
        &mut self.0
    }
}

impl<T: 'static> Cell<T> {
    /// A cell owning `ep`.
    pub(crate) fn new(ep: T, lending: Lending, what: &'static str) -> Cell<T> {
        let ep = NonNull::from(Box::leak(Box::new(ep)));
        Cell { state: Mutex::new(State { ep: Some(ep), lent: 0, closed: false, parked: Vec::new() }), lending, what }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A panic under the lock cannot leave the state half-updated: keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn usable(&self, st: &State<T>) -> Result<NonNull<T>, Fail> {
        match st.ep {
            Some(ep) if !st.closed => {
                if st.lent > 0 && self.lending == Lending::Exclusive {
                    return Err(Fail::new(
                        "Busy",
                        format!(
                            "this {} lends an item (a loan, record, job or entry) that is still held; send, consume or release it first",
                            self.what
                        ),
                    ));
                }
                Ok(ep)
            }
            _ => Err(Fail::new("Closed", format!("this {} is closed", self.what))),
        }
    }

    /// Runs `f` on the endpoint, with the mutex held.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Result<R, Fail> {
        let st = self.lock();
        let ep = self.usable(&st)?;
        if self.lending == Lending::Shared && st.lent > 0 {
            // Lent items hold `&T`: no `&mut` may be made now. `with_ref` is the way.
            return Err(Fail::new("Busy", format!("this {} has samples alive", self.what)));
        }
        // SAFETY: the box is alive (`ep` is `Some`), the mutex serializes every access, and no
        // item is lent (checked above and in `usable`), so this is the only reference.
        Ok(f(unsafe { &mut *ep.as_ptr() }))
    }

    /// Runs `f` on the endpoint by shared reference, with the mutex held. Allowed while
    /// `Shared` items are lent.
    pub(crate) fn with_ref<R>(&self, f: impl FnOnce(&T) -> R) -> Result<R, Fail> {
        let st = self.lock();
        let ep = self.usable(&st)?;
        // SAFETY: the box is alive; lent items (if any) are `Shared` ones holding `&T`, which
        // a further `&T` may alias; the mutex serializes the endpoint's interior mutability.
        Ok(f(unsafe { &*ep.as_ptr() }))
    }

    /// Lends an item that borrows the endpoint exclusively: `f` makes it from a `&mut T` that
    /// lives until the item is given back.
    pub(crate) fn lend_mut<I>(&self, f: impl FnOnce(&'static mut T) -> Result<I, Fail>) -> Result<Lent<I>, Fail> {
        debug_assert_eq!(self.lending, Lending::Exclusive);
        let mut st = self.lock();
        let ep = self.usable(&st)?;
        // SAFETY: the box lives until `lent` is back to 0 after a close (the item's Python
        // object holds the endpoint's object, so the cell too); while the item lives every
        // other use is refused (`usable`), so its `&mut` is the only reference. `'static` is
        // the erased lifetime the module docs describe.
        let item = f(unsafe { &mut *ep.as_ptr() })?;
        st.lent += 1;
        Ok(Lent(item))
    }

    /// Lends an item that borrows the endpoint shared.
    pub(crate) fn lend_ref<I>(&self, f: impl FnOnce(&'static T) -> Result<I, Fail>) -> Result<Lent<I>, Fail> {
        debug_assert_eq!(self.lending, Lending::Shared);
        let mut st = self.lock();
        let ep = self.usable(&st)?;
        // SAFETY: as in `lend_mut`, but shared: other uses take `&T` too (`with_ref`), and
        // `with` refuses a `&mut` while any item is lent.
        let item = f(unsafe { &*ep.as_ptr() })?;
        st.lent += 1;
        Ok(Lent(item))
    }

    /// Returns a lent item: `f` drops, sends or consumes it with the mutex held.
    pub(crate) fn give_back<I, R>(&self, item: Lent<I>, f: impl FnOnce(I) -> R) -> R {
        let mut st = self.lock();
        let r = f(item.0);
        st.lent -= 1;
        if st.lent == 0 && st.closed {
            st.free();
        }
        r
    }

    /// Locks the endpoint for a `&T` use spanning several calls (the WaitSet).
    pub(crate) fn guard(&self) -> Result<Guard<'_, T>, Fail> {
        let st = self.lock();
        let ep = self.usable(&st)?;
        Ok(Guard { _st: st, ep })
    }

    /// The cell's address, to lock several in one order and to find one listed twice.
    pub(crate) fn addr(&self) -> usize {
        self as *const Cell<T> as usize
    }

    /// Parks an async receive's waker (see the module docs) until its owner drops it.
    pub(crate) fn park(&self, waker: &Arc<Waker>) {
        let mut st = self.lock();
        st.parked.retain(|w| w.strong_count() > 0);
        st.parked.push(Arc::downgrade(waker));
    }

    /// Closes: later calls raise `Closed`; the endpoint is dropped now, or when the last
    /// lent item comes back. Async receives waiting on it are woken (and raise `Closed`).
    pub(crate) fn close(&self) {
        let parked = {
            let mut st = self.lock();
            st.closed = true;
            if st.lent == 0 {
                st.free();
            }
            std::mem::take(&mut st.parked)
        };
        // Outside the lock: a waker takes its event loop's lock.
        parked.iter().filter_map(Weak::upgrade).for_each(|w| w.wake_by_ref());
    }
}

/// The endpoint of a [`Cell`], locked (from [`Cell::guard`]).
pub(crate) struct Guard<'a, T> {
    _st: MutexGuard<'a, State<T>>,
    ep: NonNull<T>,
}

impl<T> std::ops::Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: as in `Cell::with_ref`: the box is alive while the mutex is held, and any
        // lent item holds only `&T` (`usable` refused exclusive lenders).
        unsafe { &*self.ep.as_ptr() }
    }
}

impl<T> Drop for Cell<T> {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        // Lent items hold the cell's Python object, so none is left when it is dropped.
        debug_assert_eq!(st.lent, 0);
        st.free();
    }
}
