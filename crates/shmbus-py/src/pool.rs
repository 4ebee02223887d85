//! `shmbus.Pool`: work dispatch to worker processes, handing the job back when all are busy.

use std::ffi::c_int;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use shmbus::pool::{Job, OwnedJobRef};
use shmbus::{Dispatcher, Pool, PoolConfig, PoolRecvTimeoutError, Worker};

use crate::block::{blocking, timeout_arg, Bytes, BytesMut};
use crate::cell::Cell;
use crate::copy;
use crate::domain::PyDomain;
use crate::errors::{is_class, Fail, OrRaise};
use crate::held::{Held, Names};
use crate::methods::{closing_pymethods, config_from_args, lent_pymethods, py_dict};
use crate::r#async::{self as aio, PyRegistration, PyWake};
use crate::schema::{schema_arg, schema_of, PySchema};

/// A pool. Make one with `Pool.create_or_open` or `Pool.open`; endpoints come from
/// `dispatcher()` (exclusive) and `worker()`.
#[pyclass(frozen, module = "shmbus", name = "Pool")]
#[derive(Debug)]
pub(crate) struct PyPool {
    cell: Cell<Pool>,
}

closing_pymethods! {
impl PyPool {
    /// Opens pool `name` in `domain`, creating it if it does not exist (keywords left at
    /// None accept what an existing pool has).
    #[staticmethod]
    #[pyo3(signature = (domain, name, *, max_workers=None, max_job_len=None, mode=None, group=None, schema=None))]
    fn create_or_open(
        domain: &PyDomain,
        name: &str,
        max_workers: Option<usize>,
        max_job_len: Option<usize>,
        mode: Option<u32>,
        group: Option<u32>,
        schema: Option<PyRef<'_, PySchema>>,
    ) -> PyResult<PyPool> {
        let schema = schema_arg(schema);
        let config = config_from_args!(PoolConfig::default(); max_workers, max_job_len, mode, group, schema);
        let pool = Pool::create_or_open(&domain.inner, name, &config).or_raise()?;
        Ok(PyPool { cell: Cell::new(pool, "pool") })
    }

    /// The pool's schema, set by its creator (`Schema`), or None if it has none.
    #[getter]
    fn schema(&self) -> PyResult<Option<PySchema>> {
        Ok(self.cell.with_ref(|c| schema_of(c.schema()))?)
    }

    /// Opens the existing pool `name` in `domain`.
    #[staticmethod]
    fn open(domain: &PyDomain, name: &str) -> PyResult<PyPool> {
        let pool = Pool::open(&domain.inner, name).or_raise()?;
        Ok(PyPool { cell: Cell::new(pool, "pool") })
    }

    /// The pool's state (read permission is enough): a dict with `max_workers`,
    /// `max_job_len`, `workers`, `idle`, `busy`, `dispatcher_pid` (None if none),
    /// `dispatcher_alive`, `dispatched` and `lost`.
    #[staticmethod]
    fn status<'py>(py: Python<'py>, domain: &PyDomain, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let s = Pool::status(&domain.inner, name).or_raise()?;
        Ok(py_dict!(py, {
            "max_workers" => s.max_workers,
            "max_job_len" => s.max_job_len,
            "workers" => s.workers,
            "idle" => s.idle,
            "busy" => s.busy,
            "dispatcher_pid" => s.dispatcher_pid,
            "dispatcher_alive" => s.dispatcher_alive,
            "dispatched" => s.dispatched,
            "lost" => s.lost,
        }))
    }

    /// The dispatcher (exclusive: `Busy` if a live process holds it).
    fn dispatcher(&self) -> PyResult<PyDispatcher> {
        let d = self.cell.with(|p| p.dispatcher())?.or_raise()?;
        Ok(PyDispatcher { cell: Cell::new(d, "dispatcher") })
    }

    /// A new worker (a mailbox of the pool).
    fn worker(&self) -> PyResult<PyWorker> {
        let w = self.cell.with(|p| p.worker())?.or_raise()?;
        Ok(PyWorker { cell: Cell::new(w, "worker") })
    }
}

/// Unmaps the pool (endpoints made from it keep working).
fn close;

/// Maps every page of the pool into this process now, so that no dispatch or job of
/// this process takes a page fault the first time it touches a page: for a long-lived
/// process on a latency path (advice only; docs/topic.md, "Sizing").
fn prefault -> (), without_gil;

/// The most workers.
#[getter]
fn max_workers -> usize;

/// The largest job, in bytes.
#[getter]
fn max_job_len -> usize;
}

/// Where a job went: `job_id` and the `worker` mailbox index.
#[pyclass(frozen, module = "shmbus", name = "Dispatched", get_all)]
#[derive(Debug)]
pub(crate) struct PyDispatched {
    job_id: u64,
    worker: usize,
}

#[pymethods]
impl PyDispatched {
    fn __repr__(&self) -> String {
        format!("Dispatched(job_id={}, worker={})", self.job_id, self.worker)
    }
}

/// A job lost with its worker (from `Dispatcher.reap()`): `job_id`, `worker`, `pid`.
#[pyclass(frozen, module = "shmbus", name = "LostJob", get_all)]
#[derive(Debug)]
pub(crate) struct PyLostJob {
    job_id: u64,
    worker: usize,
    pid: u32,
}

#[pymethods]
impl PyLostJob {
    fn __repr__(&self) -> String {
        format!("LostJob(job_id={}, worker={}, pid={})", self.job_id, self.worker, self.pid)
    }
}

/// Hands jobs to idle workers. It never waits: with every worker busy the job comes back
/// (`Full`), with none attached `Disconnected`.
#[pyclass(frozen, module = "shmbus", name = "Dispatcher")]
#[derive(Debug)]
pub(crate) struct PyDispatcher {
    pub(crate) cell: Cell<Dispatcher>,
}

closing_pymethods! {
impl PyDispatcher {
    /// Places `data` (any contiguous bytes-like object) in an idle worker's mailbox, with
    /// `job_id` or the next id the pool assigns. Returns a `Dispatched`.
    #[pyo3(signature = (data, job_id=None))]
    fn try_send(&self, py: Python<'_>, data: &Bound<'_, PyAny>, job_id: Option<u64>) -> PyResult<PyDispatched> {
        let bytes = Bytes::get(data)?;
        let d = py.detach(|| {
            self.cell.with(|d| match job_id {
                Some(id) => d.try_send_with_id(id, bytes.as_slice()).or_raise(),
                None => d.try_send(bytes.as_slice()).or_raise(),
            })
        })??;
        Ok(PyDispatched { job_id: d.job_id, worker: d.worker })
    }

    /// Reclaims dead workers' mailboxes; returns the jobs lost with them.
    fn reap(&self) -> PyResult<Vec<PyLostJob>> {
        let lost = self.cell.with(|d| d.reap())?;
        Ok(lost.into_iter().map(|l| PyLostJob { job_id: l.job_id, worker: l.worker, pid: l.pid }).collect())
    }
}

/// Releases the dispatcher role.
fn close;

/// The largest job, in bytes.
#[getter]
fn max_job_len -> usize;
}

/// Receives jobs. A received `Job` is copied out of the mailbox; `job.done()` (or
/// `worker.done()`) declares it finished and the worker idle again (a receive does too).
/// Iterating blocks for each next job.
#[pyclass(frozen, module = "shmbus", name = "Worker")]
#[derive(Debug)]
pub(crate) struct PyWorker {
    pub(crate) cell: Cell<Worker>,
}

closing_pymethods! {
impl PyWorker {
    /// The next job without waiting: `Empty` if there is none (the worker is then idle),
    /// `Disconnected` if the dispatcher is gone.
    fn try_recv(slf: Bound<'_, Self>) -> PyResult<PyJob> {
        let lent = slf.get().cell.owned(|w| Worker::job_owned(w, Worker::try_recv_ref))?;
        PyJob::copied(slf, lent)
    }

    /// The next job, waiting up to `timeout` seconds (None: for ever).
    #[pyo3(signature = (timeout=None))]
    fn recv(slf: Bound<'_, Self>, timeout: Option<f64>) -> PyResult<PyJob> {
        let this = slf.get();
        let lent =
            blocking(slf.py(), timeout_arg(timeout)?, |d| this.cell.owned(|w| Worker::job_owned(w, |w| w.recv_ref_timeout(d))))?;
        PyJob::copied(slf, lent)
    }

    /// The next job, awaited: `await worker.recv_async()` returns what `recv` returns and
    /// raises what it raises, without a thread waiting (docs/python.md, "Async"). `timeout`
    /// in seconds (None: for ever; `Timeout` after). Cancellation-safe: a cancelled await
    /// takes nothing.
    #[pyo3(signature = (timeout=None))]
    fn recv_async<'py>(slf: &Bound<'py, Self>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        aio::recv_async(slf.as_any(), timeout, PoolRecvTimeoutError::Timeout)
    }

    /// One poll of an async receive (for `shmbus._async`): the `Job`, or None when it
    /// waits (`wake` is then registered with the waiter thread).
    fn _poll_recv(slf: Bound<'_, Self>, reg: &PyRegistration, wake: PyRef<'_, PyWake>) -> PyResult<Option<PyJob>> {
        // A job already there is copied once; only when there is none does the poll below
        // register the wake-up (and a job that races in is taken by it).
        match PyWorker::try_recv(slf.clone()) {
            Err(e) if is_class(slf.py(), &e, "Empty") => {}
            r => return r.map(Some),
        }
        let job = aio::poll_endpoint(slf.py(), &slf.get().cell, reg, &wake, Fail::of)?;
        job.map(|job| PyJob::new(slf, job)).transpose()
    }

    /// Copies the next job into `buffer` (any writable buffer: a `bytearray`, a numpy array,
    /// a writable `memoryview`, ...), without waiting: one copy, into memory the caller
    /// keeps, and no allocation. Returns `(len, id)`; the job is `buffer[:len]`, and the
    /// worker is busy with it as after `try_recv`. A buffer too small raises
    /// `BufferTooSmall` (`.needed` bytes) and leaves the job in the mailbox, to be received
    /// next. Raises what `try_recv` raises otherwise.
    fn try_recv_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<(usize, u64)> {
        let mut buf = BytesMut::get(buffer)?;
        let len = buf.len();
        let r = copy::into_buffer(py, len, || self.cell.with(|w| w.try_recv_into_slice(buf.as_mut_slice())))?;
        let j = r.map_err(Fail::of)?;
        Ok((j.len(), j.id()))
    }

    /// Copies the next job into `buffer`, waiting up to `timeout` seconds (None: for ever;
    /// `Timeout` after), as `try_recv_into` does.
    #[pyo3(signature = (buffer, timeout=None))]
    fn recv_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<(usize, u64)> {
        let mut buf = BytesMut::get(buffer)?;
        let j = blocking(py, timeout_arg(timeout)?, |d| {
            let r = self.cell.with(|w| w.recv_into_slice_timeout(buf.as_mut_slice(), d))?;
            r.map_err(Fail::of)
        })?;
        Ok((j.len(), j.id()))
    }

    /// The next job in place, without waiting: a `JobRef` (a read-only buffer over the
    /// mailbox). The worker refuses other calls (`Busy`) while it lives.
    fn try_recv_ref(slf: Bound<'_, Self>) -> PyResult<PyJobRef> {
        let lent = slf.get().cell.owned(|w| Worker::job_owned(w, Worker::try_recv_ref))?;
        Ok(PyJobRef::new(slf.unbind(), lent))
    }

    /// The next job in place, waiting up to `timeout` seconds (None: for ever).
    #[pyo3(signature = (timeout=None))]
    fn recv_ref(slf: Bound<'_, Self>, timeout: Option<f64>) -> PyResult<PyJobRef> {
        let this = slf.get();
        let lent =
            blocking(slf.py(), timeout_arg(timeout)?, |d| this.cell.owned(|w| Worker::job_owned(w, |w| w.recv_ref_timeout(d))))?;
        Ok(PyJobRef::new(slf.unbind(), lent))
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(slf: Bound<'_, Self>) -> PyResult<PyJob> {
        PyWorker::recv(slf, None)
    }

    /// The jobs, awaited one by one: `async for job in worker` (never ends by itself).
    fn __aiter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        aio::aiter(slf.as_any(), None)
    }

    /// Declares the current job finished and the worker idle.
    fn done(&self) -> PyResult<()> {
        Ok(self.cell.with(|w| w.done())?)
    }
}

/// Releases the worker's mailbox.
fn close;

/// Whether a live dispatcher holds the pool.
fn dispatcher_alive -> bool;

/// After a receive raised `Disconnected` (the dispatcher is gone): whether that dispatcher
/// finished normally (closed) rather than dying holding the pool. False before.
fn dispatcher_finished -> bool;

/// The worker's mailbox index.
#[getter]
fn index -> usize;
}

/// A received job: `data` (bytes), `id`; `done()` declares it finished.
#[pyclass(frozen, module = "shmbus", name = "Job")]
#[derive(Debug)]
pub(crate) struct PyJob {
    worker: Py<PyWorker>,
    /// The payload.
    #[pyo3(get)]
    data: Py<PyBytes>,
    /// The job's id.
    #[pyo3(get)]
    id: u64,
}

impl PyJob {
    fn new(worker: Bound<'_, PyWorker>, job: Job) -> PyResult<PyJob> {
        let data = PyBytes::new(worker.py(), job.data()).unbind();
        Ok(PyJob { data, id: job.id(), worker: worker.unbind() })
    }

    /// A job read in place, copied once into `bytes` (the worker stays busy with it).
    fn copied(worker: Bound<'_, PyWorker>, lent: OwnedJobRef) -> PyResult<PyJob> {
        let id = lent.info().id();
        let data = copy::lent_bytes(worker.py(), lent, |j| j, drop)?.unbind();
        Ok(PyJob { data, id, worker: worker.unbind() })
    }
}

#[pymethods]
impl PyJob {
    /// Declares the job finished and the worker idle (`Worker.done()`).
    fn done(&self) -> PyResult<()> {
        self.worker.get().done()
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.data.bind(py).as_bytes().len()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("Job(id={}, len={})", self.id, self.__len__(py))
    }
}

/// A job read in place from the worker's mailbox (a read-only buffer), from
/// `Worker.recv_ref()`: `id`, and `done()` to finish it (the worker is idle again), or
/// `release()` to let go of it without declaring it done. Either raises `BufferError` while
/// views of it live.
#[pyclass(frozen, module = "shmbus", name = "JobRef")]
#[derive(Debug)]
pub(crate) struct PyJobRef {
    held: Held<PyWorker, OwnedJobRef>,
    /// The job's id.
    #[pyo3(get)]
    id: u64,
}

impl PyJobRef {
    fn new(worker: Py<PyWorker>, lent: OwnedJobRef) -> PyJobRef {
        let (ptr, len, id) = (lent.as_ptr().cast_mut(), lent.len(), lent.info().id());
        let names = Names { what: "job", gone: "done or released" };
        PyJobRef { held: Held::new(worker, lent, ptr, len, false, names), id }
    }
}

lent_pymethods! {
impl PyJobRef {
    /// Declares the job finished and the worker idle.
    fn done(&self) -> PyResult<()> {
        self.held.release()?;
        self.held.owner().done()
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        // SAFETY: called by Python as `bf_getbuffer` of `slf`, with the view to fill.
        unsafe { slf.get().held.export(slf.as_any(), view, flags) }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.held.unexport()
    }
}

/// Lets go of the job's memory without declaring it done.
fn release;
fn tobytes;
}
