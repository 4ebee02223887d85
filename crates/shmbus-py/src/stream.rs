//! `shmbus.Stream`: an SPSC ring of variable-size records, with zero-copy `Record`s and
//! `StreamLoan`s.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use shmbus::stream::{OwnedLoan, OwnedRecord};
use shmbus::{Stream, StreamConfig, StreamReader, StreamRecvTimeoutError, StreamWriter};
use std::ffi::c_int;

use crate::block::{blocking, timeout_arg, Bytes, BytesMut};
use crate::cell::Cell;
use crate::copy;
use crate::domain::PyDomain;
use crate::errors::{class, is_class, Fail, OrRaise};
use crate::held::{Held, Names, LOAN};
use crate::methods::{closing_pymethods, config_from_args, lent_pymethods, py_dict};
use crate::r#async::{self as aio, PyRegistration, PyWake};
use crate::schema::{schema_arg, schema_of, PySchema};

/// A stream: one writer, one reader, records of any size up to `max_record_len`. Make one
/// with `Stream.create_or_open` or `Stream.open`.
#[pyclass(frozen, module = "shmbus", name = "Stream")]
#[derive(Debug)]
pub(crate) struct PyStream {
    cell: Cell<Stream>,
}

closing_pymethods! {
impl PyStream {
    /// Opens stream `name` in `domain`, creating it if it does not exist (`capacity`: the
    /// ring's size in bytes; None accepts an existing stream's).
    #[staticmethod]
    #[pyo3(signature = (domain, name, *, capacity=None, mode=None, group=None, schema=None))]
    fn create_or_open(
        domain: &PyDomain,
        name: &str,
        capacity: Option<usize>,
        mode: Option<u32>,
        group: Option<u32>,
        schema: Option<PyRef<'_, PySchema>>,
    ) -> PyResult<PyStream> {
        let schema = schema_arg(schema);
        let config = config_from_args!(StreamConfig::default(); capacity, mode, group, schema);
        let stream = Stream::create_or_open(&domain.inner, name, &config).or_raise()?;
        Ok(PyStream { cell: Cell::new(stream, "stream") })
    }

    /// The stream's schema, set by its creator (`Schema`), or None if it has none.
    #[getter]
    fn schema(&self) -> PyResult<Option<PySchema>> {
        Ok(self.cell.with_ref(|c| schema_of(c.schema()))?)
    }

    /// Opens the existing stream `name` in `domain`.
    #[staticmethod]
    fn open(domain: &PyDomain, name: &str) -> PyResult<PyStream> {
        let stream = Stream::open(&domain.inner, name).or_raise()?;
        Ok(PyStream { cell: Cell::new(stream, "stream") })
    }

    /// The stream's state (read permission is enough): a dict with `capacity`, `used`,
    /// `head`, `tail`, `writer_pid`, `writer_alive`, `reader_pid`, `reader_alive` (the pids
    /// None when no endpoint holds the role).
    #[staticmethod]
    fn status<'py>(py: Python<'py>, domain: &PyDomain, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let s = Stream::status(&domain.inner, name).or_raise()?;
        Ok(py_dict!(py, {
            "capacity" => s.capacity,
            "used" => s.used,
            "head" => s.head,
            "tail" => s.tail,
            "writer_pid" => s.writer.as_ref().map(|w| w.pid),
            "writer_alive" => s.writer.as_ref().is_some_and(|w| w.alive),
            "reader_pid" => s.reader.as_ref().map(|r| r.pid),
            "reader_alive" => s.reader.as_ref().is_some_and(|r| r.alive),
        }))
    }

    /// The writer (exclusive: `Busy` if a live process holds it).
    fn writer(&self) -> PyResult<PyStreamWriter> {
        let w = self.cell.with(|s| s.writer())?.or_raise()?;
        Ok(PyStreamWriter { cell: Cell::new(w, "stream writer") })
    }

    /// The reader (exclusive: `Busy` if a live process holds it).
    fn reader(&self) -> PyResult<PyStreamReader> {
        let r = self.cell.with(|s| s.reader())?.or_raise()?;
        Ok(PyStreamReader { cell: Cell::new(r, "stream reader") })
    }
}

/// Unmaps the stream (endpoints made from it keep working).
fn close;

/// Maps every page of the stream into this process now, so that no write or read of
/// this process takes a page fault the first time it touches a page: for a long-lived
/// process on a latency path (advice only; docs/topic.md, "Sizing").
fn prefault -> (), without_gil;

/// The ring's size in bytes.
#[getter]
fn capacity -> usize;

/// The largest record, in bytes.
#[getter]
fn max_record_len -> usize;
}

/// Writes records into a stream; `send` waits for room.
#[pyclass(frozen, module = "shmbus", name = "StreamWriter")]
#[derive(Debug)]
pub(crate) struct PyStreamWriter {
    pub(crate) cell: Cell<StreamWriter>,
}

closing_pymethods! {
impl PyStreamWriter {
    /// Writes `data` (any contiguous bytes-like object) as one record without waiting:
    /// `Full` if the ring has no room, `Disconnected` if the reader is gone.
    fn try_send(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = Bytes::get(data)?;
        Ok(py.detach(|| self.cell.with(|w| w.try_send(bytes.as_slice()).or_raise()))??)
    }

    /// Writes `data` as one record, waiting up to `timeout` seconds for room (None: for
    /// ever).
    #[pyo3(signature = (data, timeout=None))]
    fn send(&self, py: Python<'_>, data: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<()> {
        let bytes = Bytes::get(data)?;
        blocking(py, timeout_arg(timeout)?, |d| self.cell.with(|w| w.send_timeout(bytes.as_slice(), d).or_raise())?)
    }

    /// Lends `len` bytes of the ring for a record, waiting up to `timeout` seconds for room
    /// (None: for ever; 0: `Full` at once): a `StreamLoan` exporting a writable buffer.
    /// `send(len)` publishes it; dropping it unsent publishes nothing.
    #[pyo3(signature = (len, timeout=None))]
    fn loan(slf: Bound<'_, Self>, len: usize, timeout: Option<f64>) -> PyResult<PyStreamLoan> {
        let this = slf.get();
        let timeout = timeout_arg(timeout)?;
        let mut lent = if timeout == Some(std::time::Duration::ZERO) {
            this.cell.owned(|w| StreamWriter::loan_owned(w, |w| w.try_loan(len)))?
        } else {
            blocking(slf.py(), timeout, |d| this.cell.owned(|w| StreamWriter::loan_owned(w, |w| w.loan_timeout(len, d))))?
        };
        // The bytes are written through the exported buffer only; the `Loan` is next used
        // when sent, after every view is gone.
        let (ptr, n) = (lent.as_mut_ptr(), lent.len());
        Ok(PyStreamLoan { held: Held::new(slf.unbind(), lent, ptr, n, true, LOAN) })
    }

    /// Waits up to `timeout` seconds (None: for ever) until a live process holds the reader
    /// role. Returns whether one does.
    #[pyo3(signature = (timeout=None))]
    fn wait_for_reader(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let r = blocking(py, timeout_arg(timeout)?, |d| match self.cell.with(|w| w.wait_for_reader_timeout(d))? {
            true => Ok(true),
            false => Err(Fail::new("Timeout", "timed out waiting for the reader")),
        });
        match r {
            Err(e) if is_class(py, &e, "Timeout") => Ok(false),
            r => r,
        }
    }

    /// Whether a live process holds the reader role.
    fn reader_alive(&self) -> PyResult<bool> {
        Ok(self.cell.with(|w| w.reader_alive())?)
    }
}

/// Releases the writer role (deferred while a loan lives).
fn close;

/// Ring bytes free now.
#[getter]
fn free -> usize;

/// The largest record, in bytes.
#[getter]
fn max_record_len -> usize;
}

/// Ring space lent by `StreamWriter.loan()`: write the record through the buffer protocol,
/// then `send()` it (every view gone first, else `BufferError`).
#[pyclass(frozen, module = "shmbus", name = "StreamLoan")]
#[derive(Debug)]
pub(crate) struct PyStreamLoan {
    held: Held<PyStreamWriter, OwnedLoan>,
}

lent_pymethods! {
impl PyStreamLoan {
    /// Publishes the first `len` bytes (default: all of them) as one record.
    #[pyo3(signature = (len=None))]
    fn send(&self, len: Option<usize>) -> PyResult<()> {
        let len = self.held.fits(len)?;
        self.held.give_back(|mut loan| {
            loan.truncate(len);
            loan.send()
        })
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        // SAFETY: called by Python as `bf_getbuffer` of `slf`, with the view to fill.
        unsafe { slf.get().held.export(slf.as_any(), view, flags) }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.held.unexport()
    }
}

/// Gives the space back unsent. Also what leaving a `with` block does.
fn release;
}

/// Reads records from a stream: copies (`recv` → bytes) or zero-copy (`recv_ref` →
/// `Record`). Iterating yields bytes and ends when the writer is gone and the ring empty.
#[pyclass(frozen, module = "shmbus", name = "StreamReader")]
#[derive(Debug)]
pub(crate) struct PyStreamReader {
    pub(crate) cell: Cell<StreamReader>,
}

impl PyStreamReader {
    /// A record read in place, copied once into `bytes`, then consumed.
    fn copied<'py>(&self, py: Python<'py>, lent: OwnedRecord) -> PyResult<Bound<'py, PyBytes>> {
        copy::lent_bytes(py, lent, |r| r, OwnedRecord::consume)
    }
}

closing_pymethods! {
impl PyStreamReader {
    /// The next record without waiting: `Empty` if there is none, `Disconnected` if the
    /// writer is gone and everything was read.
    fn try_recv<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let lent = self.cell.owned(|r| StreamReader::record_owned(r, StreamReader::try_recv_ref))?;
        self.copied(py, lent)
    }

    /// The next record, waiting up to `timeout` seconds (None: for ever).
    #[pyo3(signature = (timeout=None))]
    fn recv<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyBytes>> {
        let lent = blocking(py, timeout_arg(timeout)?, |d| self.cell.owned(|r| StreamReader::record_owned(r, |r| r.recv_ref_timeout(d))))?;
        self.copied(py, lent)
    }

    /// Copies the next record into `buffer` (any writable buffer: a `bytearray`, a numpy
    /// array, a writable `memoryview`, ...), without waiting: one copy, into memory the
    /// caller keeps, and no allocation. Returns its length; the record is `buffer[:len]`.
    /// A buffer too small raises `BufferTooSmall` (`.needed` bytes): the record stays in
    /// the ring, to be received next. Raises what `try_recv` raises otherwise.
    fn try_recv_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let mut buf = BytesMut::get(buffer)?;
        let len = buf.len();
        let r = copy::into_buffer(py, len, || self.cell.with(|r| r.try_recv_into_slice(buf.as_mut_slice())))?;
        Ok(r.map_err(Fail::of)?)
    }

    /// Copies the next record into `buffer`, waiting up to `timeout` seconds (None: for
    /// ever; `Timeout` after), as `try_recv_into` does.
    #[pyo3(signature = (buffer, timeout=None))]
    fn recv_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<usize> {
        let mut buf = BytesMut::get(buffer)?;
        blocking(py, timeout_arg(timeout)?, |d| {
            let r = self.cell.with(|r| r.recv_into_slice_timeout(buf.as_mut_slice(), d))?;
            r.map_err(Fail::of)
        })
    }

    /// The next record, awaited: `await reader.recv_async()` returns what `recv` returns and
    /// raises what it raises, without a thread waiting (docs/python.md, "Async"). `timeout`
    /// in seconds (None: for ever; `Timeout` after). Cancellation-safe: a cancelled await
    /// takes nothing.
    #[pyo3(signature = (timeout=None))]
    fn recv_async<'py>(slf: &Bound<'py, Self>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        aio::recv_async(slf.as_any(), timeout, StreamRecvTimeoutError::Timeout)
    }

    /// One poll of an async receive (for `shmbus._async`): the record (bytes), or None when it
    /// waits (`wake` is then registered with the waiter thread).
    fn _poll_recv<'py>(
        &self,
        py: Python<'py>,
        reg: &PyRegistration,
        wake: PyRef<'_, PyWake>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        // A record already there is copied once; only when there is none does the poll below
        // register the wake-up (and a record that races in is taken by it).
        match self.try_recv(py) {
            Err(e) if is_class(py, &e, "Empty") => {}
            r => return r.map(Some),
        }
        let v = aio::poll_endpoint(py, &self.cell, reg, &wake, Fail::of)?;
        Ok(v.map(|v| PyBytes::new(py, &v)))
    }

    /// The next record in place, without waiting: a `Record` (read-only buffer).
    /// `consume()` it, else it is read again. The reader refuses other calls (`Busy`) while
    /// it lives.
    fn try_recv_ref(slf: Bound<'_, Self>) -> PyResult<PyRecord> {
        let lent = slf.get().cell.owned(|r| StreamReader::record_owned(r, StreamReader::try_recv_ref))?;
        Ok(PyRecord::new(slf.unbind(), lent))
    }

    /// The next record in place, waiting up to `timeout` seconds (None: for ever).
    #[pyo3(signature = (timeout=None))]
    fn recv_ref(slf: Bound<'_, Self>, timeout: Option<f64>) -> PyResult<PyRecord> {
        let this = slf.get();
        let lent =
            blocking(slf.py(), timeout_arg(timeout)?, |d| this.cell.owned(|r| StreamReader::record_owned(r, |r| r.recv_ref_timeout(d))))?;
        Ok(PyRecord::new(slf.unbind(), lent))
    }

    /// Waits up to `timeout` seconds (None: for ever) until a live process holds the writer
    /// role. Returns whether one does.
    #[pyo3(signature = (timeout=None))]
    fn wait_for_writer(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let r = blocking(py, timeout_arg(timeout)?, |d| match self.cell.with(|r| r.wait_for_writer_timeout(d))? {
            true => Ok(true),
            false => Err(Fail::new("Timeout", "timed out waiting for the writer")),
        });
        match r {
            Err(e) if is_class(py, &e, "Timeout") => Ok(false),
            r => r,
        }
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        match self.recv(py, None) {
            Ok(b) => Ok(Some(b)),
            Err(e) if is_class(py, &e, "Disconnected") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The records, awaited one by one: `async for rec in reader`, ending where iterating
    /// does: when the writer is gone and the ring is read.
    fn __aiter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        aio::aiter(slf.as_any(), Some(class(slf.py(), "Disconnected")))
    }

    /// Whether a live process holds the writer role.
    fn writer_alive(&self) -> PyResult<bool> {
        Ok(self.cell.with(|r| r.writer_alive())?)
    }
}

/// Releases the reader role (deferred while a record lives).
fn close;

/// Bytes committed and not yet consumed.
#[getter]
fn pending -> usize;
}

/// A record read in place from the ring (a read-only buffer). `consume()` hands its space
/// back to the writer; releasing it (or leaving a `with` block, or dropping it) without
/// consuming leaves it to be read again.
#[pyclass(frozen, module = "shmbus", name = "Record")]
#[derive(Debug)]
pub(crate) struct PyRecord {
    held: Held<PyStreamReader, OwnedRecord>,
    position: u64,
}

impl PyRecord {
    fn new(owner: Py<PyStreamReader>, lent: OwnedRecord) -> PyRecord {
        let r = &lent;
        let (ptr, len, position, second) = (r.as_ptr().cast_mut(), r.len(), r.position(), r.second_mapping_at());
        let names = Names { what: "record", gone: "consumed or released" };
        PyRecord { held: Held::new(owner, lent, ptr, len, false, names).second_mapping_at(second), position }
    }
}

lent_pymethods! {
impl PyRecord {
    /// The ring position of the record (bytes committed before it).
    #[getter]
    fn position(&self) -> u64 {
        self.position
    }

    /// Marks the record consumed: no reader sees it again. `BufferError` if views live.
    fn consume(&self) -> PyResult<()> {
        self.held.give_back(OwnedRecord::consume)
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        // SAFETY: called by Python as `bf_getbuffer` of `slf`, with the view to fill.
        unsafe { slf.get().held.export(slf.as_any(), view, flags) }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.held.unexport()
    }
}

/// Lets go of the record unconsumed: it is read again.
fn release;
fn tobytes;
}
