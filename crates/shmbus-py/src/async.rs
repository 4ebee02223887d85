//! Async receive for asyncio: `recv_async()` and `async for` on every receiving endpoint,
//! and `shmbus.wait_async`, over the core's async receive (`shmbus::r#async`: one waiter
//! thread per process, sleeping in `futex_waitv` on every waited-on channel).
//!
//! The coroutines are Python (`shmbus/_async.py`): poll; if that returns nothing, await an
//! asyncio future, then poll again. A poll is one poll of the core's receive by hand
//! (`AsyncRecv::poll_recv` with a `RecvState`; `WaitState::poll` for a wait), whose state a
//! [`PyRegistration`] keeps apart from the endpoint, which is locked for the poll only. A
//! poll that finds nothing leaves a std [`Waker`] registered with the waiter thread; waking
//! it adds the await's token to its event loop's [`PyLoopWaker`] and writes that loop's
//! eventfd, without the GIL; the loop, woken by its own `epoll`, drains the tokens and
//! resolves their futures. So no thread waits per await, no Python runs on the waiter
//! thread, and since a message is taken only by the poll that returns it, a cancelled await
//! has taken nothing.
//!
//! # The GIL and the locks
//!
//! A poll runs without the GIL: it takes the endpoint's lock (which another thread's blocking
//! call may hold for a 50 ms slice) and the waiter thread's registry lock. Wakers never take
//! the GIL, so neither the waiter thread nor a `close()` waits for it holding a lock.
//!
//! `close()` notifies no channel, so the waiter thread would not wake a receive waiting on
//! a closed endpoint: each poll also parks its waker in the endpoint's cell, and `close()`
//! wakes it (`cell.rs`); the receive then raises `Closed`, as a blocking one does.

use std::collections::HashSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use shmbus::r#async::{AsyncRecv, RecvState, WaitState};

use crate::block::timeout_arg;
use crate::cell::Cell;
use crate::errors::Fail;

/// Where an async receive or wait is registered with the process's waiter thread (the
/// core's poll-by-hand states), and the waker its endpoints hold to be woken on `close()`.
/// `cancel()` removes both; the object may then register again. One per waiting coroutine
/// (`shmbus._async` makes them).
#[pyclass(frozen, module = "shmbus", name = "_Registration")]
#[derive(Debug, Default)]
pub(crate) struct PyRegistration {
    recv: Mutex<RecvState>,
    wait: Mutex<WaitState>,
    /// The waker of the last poll that found nothing, parked (weakly) in its endpoints'
    /// cells ([`Cell::park`](crate::cell::Cell::park)); dropping it unparks it.
    parked: Mutex<Option<Arc<Waker>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in a poll leaves the state as consistent as a dropped future: keep going.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[pymethods]
impl PyRegistration {
    #[new]
    fn new() -> PyRegistration {
        PyRegistration::default()
    }

    /// Removes the registration, if any (without the GIL: see the module docs).
    fn cancel(&self, py: Python<'_>) {
        py.detach(|| {
            drop(std::mem::take(&mut *lock(&self.recv)));
            drop(std::mem::take(&mut *lock(&self.wait)));
            drop(lock(&self.parked).take());
        });
    }
}

/// One event loop's wake-ups (`shmbus._async` keeps one per loop): an eventfd the loop
/// watches (`loop.add_reader`), and the tokens of the awaits woken since the loop last
/// drained them. Waking one ([`_Wake`](PyWake)) takes no GIL and runs no Python: it adds the
/// token and, if it is the first since the last drain, writes the eventfd. So the waiter
/// thread never waits for the GIL, and the loop, woken by its own `epoll`, does not wait for
/// the waiter thread to give the GIL back.
#[pyclass(frozen, module = "shmbus", name = "_LoopWaker")]
pub(crate) struct PyLoopWaker {
    sink: Arc<Sink>,
}

/// What a [`PyLoopWaker`] shares with its wakers.
struct Sink {
    event: OwnedFd,
    /// The tokens woken since the last drain: a set, so that wakes of a loop that no longer
    /// drains (closed) take no more room than its awaits.
    woken: Mutex<HashSet<u64>>,
}

impl Sink {
    fn wake(&self, token: u64) {
        let first = {
            let mut woken = lock(&self.woken);
            woken.insert(token) && woken.len() == 1
        };
        // Once per drain: a drain reads the eventfd before it takes the set, so a token added
        // without a write is in the set it takes.
        if first {
            let one = 1u64.to_ne_bytes();
            // Cannot block (EFD_NONBLOCK) and cannot fail but on a counter at its maximum,
            // which one write per drain never reaches.
            // SAFETY: writes 8 bytes from a live buffer to an fd this sink owns.
            unsafe { libc::write(self.event.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        }
    }
}

#[pymethods]
impl PyLoopWaker {
    #[new]
    fn new() -> PyResult<PyLoopWaker> {
        // SAFETY: eventfd(2) with valid flags; the fd it returns is owned here alone.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: `fd` is a new descriptor nobody else owns.
        let event = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(PyLoopWaker { sink: Arc::new(Sink { event, woken: Mutex::default() }) })
    }

    /// The eventfd, readable when a token was woken since the last `drain()`.
    fn fileno(&self) -> i32 {
        self.sink.event.as_raw_fd()
    }

    /// The tokens woken since the last call, in no order; clears the eventfd first.
    fn drain(&self) -> Vec<u64> {
        let mut count = [0u8; 8];
        // EAGAIN (nothing written since the last drain) is the one failure, and harmless.
        // SAFETY: reads at most 8 bytes into a live buffer of 8.
        unsafe { libc::read(self.sink.event.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
        lock(&self.sink.woken).drain().collect()
    }

    /// The wake-up of the await known by `token`, to hand to its polls.
    fn waker(&self, token: u64) -> PyWake {
        PyWake(Arc::new(TokenWake { sink: Arc::clone(&self.sink), token }))
    }
}

/// An await's wake-up, handed to each of its polls: a poll that finds nothing registers it
/// (as a std [`Waker`]) with the waiter thread.
#[pyclass(frozen, module = "shmbus", name = "_Wake")]
pub(crate) struct PyWake(Arc<TokenWake>);

/// Wakes `token` in its loop's [`PyLoopWaker`].
struct TokenWake {
    sink: Arc<Sink>,
    token: u64,
}

impl Wake for TokenWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.sink.wake(self.token);
    }
}

/// A receive's poll as a binding returns it: the item, pending, or the error's exception.
pub(crate) fn ready<T, E>(p: Poll<Result<T, E>>, fail: impl FnOnce(E) -> Fail) -> Result<Poll<T>, Fail> {
    match p {
        Poll::Ready(Ok(v)) => Ok(Poll::Ready(v)),
        Poll::Ready(Err(e)) => Err(fail(e)),
        Poll::Pending => Ok(Poll::Pending),
    }
}

/// Runs `poll` once without the GIL, on `state` (locked), with a context whose waker is
/// `wake` (also handed to `poll`, to park in the endpoints' cells before it polls them):
/// `Some(item)`, or `None` when it waits (`wake` is then registered, and parked).
fn poll_with<S: Send, T: Send>(
    py: Python<'_>,
    reg: &PyRegistration,
    state: &Mutex<S>,
    wake: &PyWake,
    poll: impl FnOnce(&mut S, &Arc<Waker>, &mut Context<'_>) -> Result<Poll<T>, Fail> + Send,
) -> PyResult<Option<T>> {
    // A new `Arc` per poll (the same `TokenWake`): what replaces it in `parked` is dropped,
    // which unparks it from the cells.
    let waker = Arc::new(Waker::from(Arc::clone(&wake.0)));
    let r = py.detach(|| poll(&mut lock(state), &waker, &mut Context::from_waker(&waker)))?;
    // Parked (since before the poll) until the next poll or `cancel()`, so that a `close()`
    // after the poll finds it; nothing stays parked once ready.
    *lock(&reg.parked) = r.is_pending().then_some(waker);
    Ok(match r {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    })
}

/// One poll of a receive, on `reg`'s receive state: `poll` parks the waker in the
/// endpoint's cell, then locks the endpoint and polls it.
pub(crate) fn poll_recv<T: Send>(
    py: Python<'_>,
    reg: &PyRegistration,
    wake: &PyWake,
    poll: impl FnOnce(&mut RecvState, &Arc<Waker>, &mut Context<'_>) -> Result<Poll<T>, Fail> + Send,
) -> PyResult<Option<T>> {
    poll_with(py, reg, &reg.recv, wake, poll)
}

/// [`poll_recv`] for an endpoint whose receive takes `&mut self` (all but the topic
/// subscriber), in its cell.
pub(crate) fn poll_endpoint<E>(
    py: Python<'_>,
    cell: &Cell<E>,
    reg: &PyRegistration,
    wake: &PyWake,
    fail: fn(E::Error) -> Fail,
) -> PyResult<Option<E::Item>>
where
    E: AsyncRecv + Send + 'static,
    E::Item: Send,
{
    poll_recv(py, reg, wake, |st, parked, cx| {
        cell.park(parked);
        cell.with(|ep| ready(ep.poll_recv(st, cx), fail))?
    })
}

/// One poll of an async wait, on `reg`'s wait state: `poll` parks the waker in every
/// channel's cell, then locks the channels and polls.
pub(crate) fn poll_wait<T: Send>(
    py: Python<'_>,
    reg: &PyRegistration,
    wake: &PyWake,
    poll: impl FnOnce(&mut WaitState, &Arc<Waker>, &mut Context<'_>) -> Result<Poll<T>, Fail> + Send,
) -> PyResult<Option<T>> {
    poll_with(py, reg, &reg.wait, wake, poll)
}

/// A function of `shmbus._async`.
/// Calls `shmbus._async.NAME(*args)` (for the rarer calls, not cached).
pub(crate) fn helper_call<'py>(
    py: Python<'py>,
    name: &str,
    args: impl pyo3::call::PyCallArgs<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    py.import("shmbus._async")?.getattr(name)?.call1(args)
}

fn helper<'py>(py: Python<'py>, cache: &'static PyOnceLock<Py<PyAny>>, name: &str) -> PyResult<&'py Bound<'py, PyAny>> {
    cache.import(py, "shmbus._async", name)
}

/// `endpoint.recv_async(timeout)`: checks `timeout` as the blocking `recv` does, then
/// returns the coroutine (`shmbus._async.recv`), which raises `Timeout` with
/// `timeout_msg` (the blocking receive's message) when `timeout` passes.
pub(crate) fn recv_async<'py>(
    ep: &Bound<'py, PyAny>,
    timeout: Option<f64>,
    timeout_msg: impl std::fmt::Display,
) -> PyResult<Bound<'py, PyAny>> {
    static RECV: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    timeout_arg(timeout)?;
    helper(ep.py(), &RECV, "recv")?.call1((ep, timeout, timeout_msg.to_string()))
}

/// `endpoint.__aiter__()`: an async iterator of the endpoint's items (`shmbus._async.Receiving`),
/// which ends where the sync iterator does: on the exception class `ends`, if any.
pub(crate) fn aiter<'py>(ep: &Bound<'py, PyAny>, ends: Option<Bound<'py, PyType>>) -> PyResult<Bound<'py, PyAny>> {
    static RECEIVING: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    helper(ep.py(), &RECEIVING, "Receiving")?.call1((ep, ends))
}

/// `shmbus.wait_async(channels, timeout)`: the coroutine of `shmbus._async.wait` over the
/// channels given (checked by the caller as `WaitSet.wait` checks them).
pub(crate) fn wait_async<'py>(
    channels: Bound<'py, PyAny>,
    timeout: Option<f64>,
    timeout_msg: impl std::fmt::Display,
) -> PyResult<Bound<'py, PyAny>> {
    static WAIT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    timeout_arg(timeout)?;
    helper(channels.py(), &WAIT, "wait")?.call1((&channels, timeout, timeout_msg.to_string()))
}
