//! `shmbus.WaitSet`: waits on any endpoints of any kinds at once; `shmbus.wait_async`, its
//! async form.

use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;
use shmbus::{WaitSet, WaitTimeoutError, Waitable};

use crate::block::{blocking, timeout_arg};
use crate::errors::Fail;
use crate::journal::PyTailer;
use crate::pool::{PyDispatcher, PyWorker};
use crate::queue::{PyConsumer, PyProducer};
use crate::r#async::{self as aio, PyRegistration, PyWake};
use crate::service::{PyClient, PyServer};
use crate::stream::{PyStreamReader, PyStreamWriter};
use crate::topic::PySubscriber;
use shmbus::lend::Guard;

/// Declares the waitable endpoint classes: `Chan` (one of them, held) and `Locked` (its
/// endpoint, locked for the wait).
macro_rules! waitables {
    ($($variant:ident($py:ty, $rust:ty)),* $(,)?) => {
        enum Chan {
            $($variant(Py<$py>),)*
        }

        enum Locked<'a> {
            $($variant(Guard<'a, $rust>),)*
        }

        impl Chan {
            fn extract(obj: &Bound<'_, PyAny>) -> PyResult<Chan> {
                $(if let Ok(c) = obj.cast::<$py>() {
                    return Ok(Chan::$variant(c.clone().unbind()));
                })*
                Err(PyTypeError::new_err(format!(
                    "cannot wait on a {}: a WaitSet takes Subscriber, Producer, Consumer, StreamWriter, StreamReader, Dispatcher, Worker, Tailer, Server and Client endpoints",
                    obj.get_type().name()?
                )))
            }

            fn addr(&self) -> usize {
                match self {
                    $(Chan::$variant(c) => c.get().cell.addr(),)*
                }
            }

            /// Parks an async wait's waker in the endpoint's cell (woken by `close()`).
            fn park(&self, waker: &std::sync::Arc<std::task::Waker>) {
                match self {
                    $(Chan::$variant(c) => c.get().cell.park(waker),)*
                }
            }

            fn lock(&self) -> Result<Locked<'_>, Fail> {
                Ok(match self {
                    $(Chan::$variant(c) => Locked::$variant(c.get().cell.guard()?),)*
                })
            }
        }

        impl Locked<'_> {
            fn waitable(&self) -> &dyn Waitable {
                match self {
                    $(Locked::$variant(g) => &**g,)*
                }
            }
        }
    };
}

waitables! {
    Subscriber(PySubscriber, shmbus::Subscriber),
    Producer(PyProducer, shmbus::Producer),
    Consumer(PyConsumer, shmbus::Consumer),
    StreamWriter(PyStreamWriter, shmbus::StreamWriter),
    StreamReader(PyStreamReader, shmbus::StreamReader),
    Dispatcher(PyDispatcher, shmbus::Dispatcher),
    Worker(PyWorker, shmbus::Worker),
    Tailer(PyTailer, shmbus::Tailer),
    Server(PyServer, shmbus::Server),
    Client(PyClient, shmbus::Client),
}

/// Waits on several endpoints of any kinds: receivers are ready with something to read,
/// senders with room (the pool dispatcher with an idle worker).
///
/// The Rust `WaitSet` keeps scratch space that may not move between threads, so each wait
/// slice (at most 50 ms, see `block`) uses its own, made on the thread that waits.
#[pyclass(frozen, module = "shmbus", name = "WaitSet")]
#[derive(Debug, Default)]
pub(crate) struct PyWaitSet {}

impl PyWaitSet {
    /// Locks every endpoint (in address order, so that two waits on overlapping lists
    /// cannot deadlock) and runs `f` on them in the caller's order.
    fn with_locked<R>(chans: &[Chan], f: impl FnOnce(&[&dyn Waitable]) -> R) -> Result<R, Fail> {
        let mut order: Vec<usize> = (0..chans.len()).collect();
        order.sort_by_key(|&i| chans[i].addr());
        let mut locked: Vec<Option<Locked<'_>>> = (0..chans.len()).map(|_| None).collect();
        for i in order {
            locked[i] = Some(chans[i].lock()?);
        }
        let refs: Vec<&dyn Waitable> = locked.iter().flatten().map(Locked::waitable).collect();
        Ok(f(&refs))
    }

    fn chans(channels: &Bound<'_, PyAny>) -> PyResult<Vec<Chan>> {
        let chans = channels.try_iter()?.map(|c| Chan::extract(&c?)).collect::<PyResult<Vec<_>>>()?;
        if chans.is_empty() {
            return Err(PyValueError::new_err("a WaitSet needs at least one endpoint to wait on"));
        }
        let mut addrs: Vec<usize> = chans.iter().map(Chan::addr).collect();
        addrs.sort_unstable();
        if addrs.windows(2).any(|w| w[0] == w[1]) {
            return Err(PyValueError::new_err("an endpoint is listed twice"));
        }
        Ok(chans)
    }
}

#[pymethods]
impl PyWaitSet {
    #[new]
    fn new() -> PyWaitSet {
        PyWaitSet::default()
    }

    /// Waits until at least one of `channels` (a sequence of endpoints) is ready, at most
    /// `timeout` seconds (None: for ever; `Timeout` after), and returns the indices (into
    /// `channels`) of all that are. The GIL is released while waiting; Ctrl-C interrupts.
    /// The endpoints are locked while the wait lasts (other threads' calls on them wait up
    /// to 50 ms at a time).
    #[pyo3(signature = (channels, timeout=None))]
    fn wait(&self, py: Python<'_>, channels: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<Vec<usize>> {
        let chans = Self::chans(channels)?;
        let timeout = timeout_arg(timeout)?;
        blocking(py, timeout, |d: Duration| {
            let mut ws = WaitSet::new();
            Self::with_locked(&chans, |refs| match ws.wait_timeout(refs, d) {
                Ok(ready) => Ok(ready.to_vec()),
                Err(e @ WaitTimeoutError::Timeout) => Err(Fail::new("Timeout", e.to_string())),
                Err(e) => Err(Fail::new("Error", e.to_string())),
            })?
        })
    }

    /// The indices of the endpoints of `channels` that are ready now, without waiting (may
    /// be empty).
    fn poll(&self, py: Python<'_>, channels: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
        let chans = Self::chans(channels)?;
        let r = py.detach(|| Self::with_locked(&chans, |refs| WaitSet::new().poll(refs).to_vec()));
        Ok(r?)
    }
}

/// Waits, awaited, until at least one of `channels` (a sequence of endpoints) is ready:
/// `await shmbus.wait_async(channels, timeout=None)` returns what `WaitSet.wait` returns (the
/// indices of every ready endpoint) and raises what it raises, without a thread waiting
/// (docs/python.md, "Async"). The list is checked at the call, as `WaitSet.wait` checks it.
/// It receives nothing: a cancelled await loses nothing.
#[pyfunction]
#[pyo3(signature = (channels, timeout=None))]
pub(crate) fn wait_async<'py>(channels: &Bound<'py, PyAny>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
    let list = PyList::new(channels.py(), channels.try_iter()?.collect::<PyResult<Vec<_>>>()?)?;
    PyWaitSet::chans(list.as_any())?;
    aio::wait_async(list.into_any(), timeout, WaitTimeoutError::Timeout)
}

/// One poll of an async wait (for `shmbus._async`): the indices of the ready endpoints, or
/// None when it waits (`wake` is then registered on every one).
#[pyfunction(name = "_poll_wait")]
pub(crate) fn poll_wait(
    py: Python<'_>,
    channels: &Bound<'_, PyAny>,
    reg: &PyRegistration,
    wake: PyRef<'_, PyWake>,
) -> PyResult<Option<Vec<usize>>> {
    let chans = PyWaitSet::chans(channels)?;
    aio::poll_wait(py, reg, &wake, |st, parked, cx| {
        chans.iter().for_each(|c| c.park(parked));
        PyWaitSet::with_locked(&chans, |refs| aio::ready(st.poll(refs, cx), |e| Fail::new("Error", e.to_string())))?
    })
}
