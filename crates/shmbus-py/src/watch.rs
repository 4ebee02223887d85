//! `Domain.watch()`: a domain's channels created and removed, and participants joined and
//! left (`shmbus::watch`), as a blocking iterator and an async one.
//!
//! The async form (`async for ev in watch`, `await watch.next_async()`) waits on the watch's
//! inotify descriptor in the event loop (`loop.add_reader`) and, for participants, on the
//! loop's clock (`_due()`): no thread waits for it, and an event is taken only by the poll
//! that returns it (`try_next`), so a cancelled await loses nothing.

use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use shmbus::watch::{DomainEvent, DomainWatch};

use crate::block::{timeout_arg, SLICE};
use crate::errors::{Fail, OrRaise};

/// One event of a `DomainWatch`: `event` (`"created"`, `"removed"`, `"joined"`, `"left"`),
/// `domain`, `channel`, `kind` (`"topic"`, …, None for a file that is not a readable channel), and for
/// joins and leaves `role` (`"publisher"`, …) and `pid`.
#[pyclass(frozen, module = "shmbus", name = "DomainEvent", eq)]
#[derive(Debug, PartialEq)]
pub(crate) struct PyDomainEvent {
    #[pyo3(get)]
    event: &'static str,
    #[pyo3(get)]
    domain: String,
    #[pyo3(get)]
    channel: String,
    #[pyo3(get)]
    kind: Option<&'static str>,
    #[pyo3(get)]
    role: Option<&'static str>,
    #[pyo3(get)]
    pid: Option<u32>,
}

impl From<DomainEvent> for PyDomainEvent {
    fn from(e: DomainEvent) -> Self {
        PyDomainEvent {
            event: e.what.as_str(),
            kind: e.kind.map(|k| k.as_str()),
            role: e.role,
            pid: e.process.map(|p| p.pid),
            domain: e.domain,
            channel: e.channel,
        }
    }
}

#[pymethods]
impl PyDomainEvent {
    fn __repr__(&self) -> String {
        let mut s = format!("DomainEvent({:?}, {:?}, kind={:?}", self.event, self.channel, self.kind.unwrap_or("?"));
        if let (Some(role), Some(pid)) = (self.role, self.pid) {
            s.push_str(&format!(", role={role:?}, pid={pid}"));
        }
        s.push(')');
        s
    }
}

/// What comes and goes in a domain from the moment it was made (`Domain.watch()`):
/// iterate it (blocking), `next(timeout)`, `try_next()`, or `async for` / `next_async()`.
#[pyclass(frozen, module = "shmbus", name = "DomainWatch")]
#[derive(Debug)]
pub(crate) struct PyDomainWatch {
    inner: Mutex<DomainWatch>,
    /// An async await is waiting on the watch's descriptor (one at a time: the event loop
    /// keeps one reader per descriptor).
    awaited: AtomicBool,
}

impl PyDomainWatch {
    pub(crate) fn new(watch: DomainWatch) -> PyDomainWatch {
        PyDomainWatch { inner: Mutex::new(watch), awaited: AtomicBool::new(false) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DomainWatch> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl PyDomainWatch {
    /// The next event, waiting up to `timeout` seconds (None: for ever); None if none came.
    /// The GIL is released while waiting; Ctrl-C interrupts.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<PyDomainEvent>> {
        let deadline = timeout_arg(timeout)?.map(|t| Instant::now().checked_add(t));
        loop {
            let slice = match deadline {
                None | Some(None) => SLICE,
                Some(Some(d)) => d.saturating_duration_since(Instant::now()).min(SLICE),
            };
            if let Some(e) = py.detach(|| self.lock().next_timeout(slice)).or_raise()? {
                return Ok(Some(e.into()));
            }
            if let Some(Some(d)) = deadline {
                if Instant::now() >= d {
                    return Ok(None);
                }
            }
            py.check_signals()?;
        }
    }

    /// The next event if there is one now (after one look at the domain), else None.
    fn try_next(&self) -> PyResult<Option<PyDomainEvent>> {
        Ok(self.lock().try_next().or_raise()?.map(Into::into))
    }

    /// The inotify descriptor the watch sleeps on (readable when a name in the domain
    /// changed): for an event loop, with `_due()`.
    fn fileno(&self) -> i32 {
        self.lock().as_fd().as_raw_fd()
    }

    /// Seconds until the participant tables are due for a look; None when only channels are
    /// watched.
    fn _due(&self) -> Option<f64> {
        self.lock().participants_due().map(|d| d.as_secs_f64())
    }

    /// Claims the watch for one async await (`Busy` if another is waiting on it).
    fn _claim(&self) -> PyResult<()> {
        if self.awaited.swap(true, Ordering::AcqRel) {
            return Err(
                Fail::new("Busy", "another coroutine is already awaiting this watch; make a watch per task").into()
            );
        }
        Ok(())
    }

    /// Lets go of the claim of `_claim`.
    fn _release(&self) {
        self.awaited.store(false, Ordering::Release);
    }

    /// The next event, awaited without a thread waiting: `timeout` in seconds (None: for
    /// ever); None if none came. Cancellation-safe.
    #[pyo3(signature = (timeout=None))]
    fn next_async<'py>(slf: &Bound<'py, Self>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        timeout_arg(timeout)?;
        crate::r#async::helper_call(slf.py(), "watch_next", (slf, timeout))
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<PyDomainEvent> {
        loop {
            if let Some(e) = self.next(py, Some(3600.0))? {
                return Ok(e);
            }
        }
    }

    /// The events, awaited one by one: `async for ev in watch` (never ends by itself).
    fn __aiter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        crate::r#async::helper_call(slf.py(), "WatchEvents", (slf,))
    }
}

/// `Domain.watch(participant_interval=0.1, channels_only=False)`.
pub(crate) fn watch(
    domain: &shmbus::Domain,
    participant_interval: Option<f64>,
    channels_only: bool,
) -> PyResult<PyDomainWatch> {
    let mut w = domain.watch().or_raise()?;
    if let Some(i) = timeout_arg(participant_interval)? {
        w.set_participant_interval(i.max(Duration::from_millis(1)));
    }
    if channels_only {
        w.channels_only();
    }
    Ok(PyDomainWatch::new(w))
}
