//! `Cell<T>`: how a Python object owns a Rust handle or endpoint, and lends the items that
//! borrow it (a topic `Sample` or `Loan`, a stream `Record` or `Loan`, a pool job, a journal
//! entry or `Loan`).
//!
//! The owning and lending are the core's [`Lender`]: the endpoint behind an `Arc` and a
//! mutex (so the cell is `Sync`, as a Python object must be), every call on it with the
//! mutex held, and the lent items the core's owned forms (`OwnedSample`, `OwnedLoan`, ...),
//! which keep the endpoint alive, make every conflicting call fail with `Busy`, and give the
//! endpoint back when dropped. A `close()` while items live drops the endpoint when the last
//! one is given back.
//!
//! What the cell adds is Python's: the endpoint's name in messages, and the wakers of async
//! receives waiting on it ([`Cell::park`]): `close()` wakes them, so that the receive polls
//! again and raises `Closed`, as a blocking receive in another thread does. Nothing else
//! would wake it: closing notifies no channel.
//!
//! Nothing under the lender's mutex touches Python, so a thread holding the GIL that waits
//! for the mutex cannot deadlock with the holder (which runs without the GIL).

use std::sync::{Arc, Mutex, Weak};
use std::task::Waker;

use shmbus::lend::{Guard, LendError, LendOr, Lender};
use shmbus::Failure;

use crate::errors::Fail;

/// A Rust handle or endpoint owned by a Python object (see the module docs).
#[derive(Debug)]
pub(crate) struct Cell<T> {
    lender: Lender<T>,
    /// What it is, for messages: "subscriber", "stream reader", ...
    what: &'static str,
    /// The wakers of async receives waiting on the endpoint, woken by `close()`. Weak: each
    /// receive's registration owns its waker, and drops it when done.
    parked: Mutex<Vec<Weak<Waker>>>,
}

impl<T: Send + 'static> Cell<T> {
    /// A cell owning `ep`.
    pub(crate) fn new(ep: T, what: &'static str) -> Cell<T> {
        Cell { lender: Lender::new(ep), what, parked: Mutex::new(Vec::new()) }
    }

    /// A refusal of the lender, in this endpoint's words.
    fn refused(&self, e: LendError) -> Fail {
        match e {
            LendError::Busy => Fail::new(
                "Busy",
                format!(
                    "this {} lends an item (a loan, sample, record, job or entry) that is still held; send, consume or release it first",
                    self.what
                ),
            ),
            LendError::Closed => Fail::new("Closed", format!("this {} is closed", self.what)),
        }
    }

    /// Runs `f` on the endpoint, with the mutex held (`Busy` while any item is lent).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Result<R, Fail> {
        self.lender.with(f).map_err(|e| self.refused(e))
    }

    /// Runs `f` on the endpoint by shared reference, with the mutex held. Allowed while
    /// shared items (samples) are lent.
    pub(crate) fn with_ref<R>(&self, f: impl FnOnce(&T) -> R) -> Result<R, Fail> {
        self.lender.with_ref(f).map_err(|e| self.refused(e))
    }

    /// An owned item that `f` makes from the endpoint's lender with one of the core's
    /// `*_owned` constructors (a loan, sample, record, job or entry): the receive or loan runs
    /// under the lender's mutex, so other threads' calls wait for it, and are refused with
    /// `Busy` only while the item is held.
    pub(crate) fn owned<I, X: Failure>(&self, f: impl FnOnce(&Lender<T>) -> Result<I, LendOr<X>>) -> Result<I, Fail> {
        f(&self.lender).map_err(|e| match e {
            LendOr::Refused(r) => self.refused(r),
            LendOr::Failed(x) => Fail::of(x),
        })
    }

    /// Locks the endpoint for a `&T` use spanning several calls (the WaitSet).
    pub(crate) fn guard(&self) -> Result<Guard<'_, T>, Fail> {
        self.lender.guard().map_err(|e| self.refused(e))
    }

    /// The cell's address, to lock several in one order and to find one listed twice.
    pub(crate) fn addr(&self) -> usize {
        self.lender.addr()
    }

    /// Parks an async receive's waker (see the module docs) until its owner drops it.
    pub(crate) fn park(&self, waker: &Arc<Waker>) {
        let mut parked = self.parked.lock().unwrap_or_else(|p| p.into_inner());
        parked.retain(|w| w.strong_count() > 0);
        parked.push(Arc::downgrade(waker));
    }

    /// Closes: later calls raise `Closed`; the endpoint is dropped now, or when the last
    /// lent item comes back. Async receives waiting on it are woken (and raise `Closed`).
    pub(crate) fn close(&self) {
        self.lender.close();
        let parked = std::mem::take(&mut *self.parked.lock().unwrap_or_else(|p| p.into_inner()));
        // Outside the lock: a waker takes its event loop's lock.
        parked.iter().filter_map(Weak::upgrade).for_each(|w| w.wake_by_ref());
    }
}
