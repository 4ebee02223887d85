//! The two iterators every receiving endpoint has, written once: `iter()` (blocking
//! receives) and `try_iter()` (what is there now).
//!
//! Each kind names them (`topic::Iter`, `pool::TryIter`, …) as aliases of [`Iter`] and
//! [`TryIter`] over its receiver, which implements [`Receive`].

// Under loom only the kinds' protocols are built, not their endpoints.
#![cfg_attr(loom, allow(dead_code))]

use super::forms::Forever;
use super::receive::Receive;
use crate::wait::Wait;

/// A blocking iterator: each `next` is one blocking receive. It ends after an error that
/// [`Receive::ends`] says nothing follows; otherwise it never ends.
#[derive(Debug)]
pub struct Iter<R> {
    rx: R,
    done: bool,
}

impl<R> Iter<R> {
    pub(crate) fn new(rx: R) -> Iter<R> {
        Iter { rx, done: false }
    }
}

impl<R: Receive> Iterator for Iter<R> {
    type Item = Result<R::Item, R::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.rx.recv_with(Wait::Forever).map_err(Forever::forever);
        self.done = matches!(&r, Err(e) if R::ends(e));
        Some(r)
    }
}

/// An iterator over what can be received now: each `next` is one receive that does not
/// wait. It ends when there is nothing more; another error is yielded once, then it ends.
#[derive(Debug)]
pub struct TryIter<R> {
    rx: R,
    done: bool,
}

impl<R> TryIter<R> {
    pub(crate) fn new(rx: R) -> TryIter<R> {
        TryIter { rx, done: false }
    }
}

impl<R: Receive> Iterator for TryIter<R> {
    type Item = Result<R::Item, R::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.rx.recv_with(Wait::Now) {
            Ok(m) => Some(Ok(m)),
            Err(e) => {
                self.done = true;
                e.failure().map(Err)
            }
        }
    }
}
