//! `shmbus.Journal`: a persistent, replayable log in a directory, with durable named readers.

use std::ffi::c_int;
use std::path::PathBuf;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use shmbus::journal::{Durability, Entry, OwnedEntryRef, OwnedLoan, Retention, RollCycle};
use shmbus::{Appender, Journal, JournalConfig, JournalRecvTimeoutError, Tailer};

use crate::block::{blocking, timeout_arg, Bytes, BytesMut};
use crate::cell::Cell;
use crate::copy;
use crate::errors::{is_class, Fail, OrRaise};
use crate::held::{Held, Names, LOAN};
use crate::methods::{closing_pymethods, config_from_args, copied_item, lent_pymethods, py_dict};
use crate::r#async::{self as aio, PyRegistration, PyWake};
use crate::schema::{schema_arg, schema_of, PySchema};

fn seconds(what: &str, s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s)
        .map_err(|_| PyValueError::new_err(format!("{what} must be a non-negative number of seconds, not {s}")))
}

fn roll_arg(roll: &Bound<'_, PyAny>) -> PyResult<RollCycle> {
    if let Ok(s) = roll.extract::<String>() {
        return match s.as_str() {
            "never" => Ok(RollCycle::Never),
            "minutely" => Ok(RollCycle::Minutely),
            "hourly" => Ok(RollCycle::Hourly),
            "daily" => Ok(RollCycle::Daily),
            _ => Err(PyValueError::new_err(format!(
                "roll must be 'never', 'minutely', 'hourly', 'daily' or a number of seconds, not {s:?}"
            ))),
        };
    }
    Ok(RollCycle::Every(seconds("roll", roll.extract::<f64>()?)?))
}

fn durability_arg(d: &Bound<'_, PyAny>) -> PyResult<Durability> {
    if let Ok(s) = d.extract::<String>() {
        return match s.as_str() {
            "none" => Ok(Durability::None),
            "flush" => Ok(Durability::Flush),
            _ => Err(PyValueError::new_err(format!(
                "durability must be 'none', 'flush' or a period in seconds, not {s:?}"
            ))),
        };
    }
    Ok(Durability::Periodic(seconds("durability", d.extract::<f64>()?)?))
}

/// A journal: a directory of cycle files. Make one with `Journal.create_or_open(dir)` or
/// `Journal.open(dir)`; `appender()` writes, `tailer*()` and `reader(name)` read.
#[pyclass(frozen, module = "shmbus", name = "Journal")]
#[derive(Debug)]
pub(crate) struct PyJournal {
    cell: Cell<Journal>,
}

closing_pymethods! {
impl PyJournal {
    /// Opens the journal in directory `dir`, creating it if it does not exist. The keywords
    /// apply only when it is created (an existing journal keeps its own): `roll` is
    /// 'never', 'minutely', 'hourly', 'daily' or seconds; `durability` 'none', 'flush' or
    /// a sync period in seconds; `max_cycles` / `max_age` (seconds) the retention;
    /// `abandon_timeout` in seconds. `schema` (a `Schema`) is stored when it is created; an
    /// existing journal must carry the same (`SchemaMismatch`), and without it any is accepted.
    #[staticmethod]
    #[pyo3(signature = (dir, *, roll=None, cycle_bytes=None, chunk_bytes=None, max_entry_len=None, durability=None, max_cycles=None, max_age=None, abandon_timeout=None, mode=None, schema=None))]
    #[allow(clippy::too_many_arguments)]
    fn create_or_open(
        dir: PathBuf,
        roll: Option<&Bound<'_, PyAny>>,
        cycle_bytes: Option<u64>,
        chunk_bytes: Option<u64>,
        max_entry_len: Option<u64>,
        durability: Option<&Bound<'_, PyAny>>,
        max_cycles: Option<u64>,
        max_age: Option<f64>,
        abandon_timeout: Option<f64>,
        mode: Option<u32>,
        schema: Option<PyRef<'_, PySchema>>,
    ) -> PyResult<PyJournal> {
        let schema = schema_arg(schema);
        let mut config = config_from_args!(JournalConfig::default(); cycle_bytes, chunk_bytes, max_entry_len, mode, schema);
        if let Some(r) = roll {
            config = config.roll(roll_arg(r)?);
        }
        if let Some(d) = durability {
            config = config.durability(durability_arg(d)?);
        }
        if max_cycles.is_some() || max_age.is_some() {
            let max_age = max_age.map(|s| seconds("max_age", s)).transpose()?;
            config = config.retention(Retention { max_cycles, max_age });
        }
        if let Some(s) = abandon_timeout {
            config = config.abandon_timeout(seconds("abandon_timeout", s)?);
        }
        let journal = Journal::create_or_open(dir, &config).or_raise()?;
        Ok(PyJournal { cell: Cell::new(journal, "journal") })
    }

    /// The journal's schema, set by its creator (`Schema`), or None if it has none.
    #[getter]
    fn schema(&self) -> PyResult<Option<PySchema>> {
        Ok(self.cell.with_ref(|c| schema_of(c.schema()))?)
    }

    /// Opens the existing journal in `dir`.
    #[staticmethod]
    fn open(dir: PathBuf) -> PyResult<PyJournal> {
        let journal = Journal::open(dir).or_raise()?;
        Ok(PyJournal { cell: Cell::new(journal, "journal") })
    }

    /// The journal's state: a dict with `dir`, `format_version`, `first_index`,
    /// `next_index`, `bytes`, `file_bytes`, `appenders`, `cycles` (how many) and `readers`
    /// (a list of dicts with `name`, `position`, `holder_pid`).
    #[staticmethod]
    fn status<'py>(py: Python<'py>, dir: PathBuf) -> PyResult<Bound<'py, PyDict>> {
        let s = Journal::status(dir).or_raise()?;
        let readers = s
            .readers
            .iter()
            .map(|r| Ok(py_dict!(py, { "name" => &r.name, "position" => r.position, "holder_pid" => r.holder_pid })))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(py_dict!(py, {
            "dir" => &s.dir,
            "format_version" => s.format_version,
            "first_index" => s.first_index,
            "next_index" => s.next_index,
            "bytes" => s.bytes,
            "file_bytes" => s.file_bytes,
            "appenders" => s.appenders,
            "cycles" => s.cycles.len(),
            "readers" => readers,
        }))
    }

    /// A new appender.
    fn appender(&self) -> PyResult<PyAppender> {
        let a = self.cell.with(|j| j.appender())?.or_raise()?;
        Ok(PyAppender { cell: Cell::new(a, "appender") })
    }

    /// A tailer reading from the oldest entry kept.
    fn tailer(&self) -> PyResult<PyTailer> {
        tailer(self.cell.with(|j| j.tailer())?)
    }

    /// A tailer reading from global index `index`.
    fn tailer_at(&self, index: u64) -> PyResult<PyTailer> {
        tailer(self.cell.with(|j| j.tailer_at(index))?)
    }

    /// A tailer reading only entries appended from now on.
    fn tailer_at_end(&self) -> PyResult<PyTailer> {
        tailer(self.cell.with(|j| j.tailer_at_end())?)
    }

    /// A tailer reading from the first entry stamped at or after `ts_ns` (`CLOCK_REALTIME`
    /// nanoseconds).
    fn tailer_at_time(&self, ts_ns: u64) -> PyResult<PyTailer> {
        tailer(self.cell.with(|j| j.tailer_at_time(ts_ns))?)
    }

    /// The named reader `name` (exclusive; created at the start if new): it resumes where
    /// it was last acknowledged.
    fn reader(&self, name: &str) -> PyResult<PyTailer> {
        tailer(self.cell.with(|j| j.reader(name))?)
    }

    /// Removes the named reader `name`. Returns whether it existed.
    fn remove_reader(&self, name: &str) -> PyResult<bool> {
        Ok(self.cell.with(|j| j.remove_reader(name).or_raise())??)
    }

    /// The journal's directory.
    #[getter]
    fn dir(&self) -> PyResult<PathBuf> {
        Ok(self.cell.with(|j| j.dir().to_path_buf())?)
    }
}

/// Closes the journal handle (endpoints made from it keep working).
fn close;
}

fn tailer(t: Result<Tailer, shmbus::OpenError>) -> PyResult<PyTailer> {
    Ok(PyTailer { cell: Cell::new(t.or_raise()?, "tailer") })
}

/// Appends entries to a journal. It never waits.
#[pyclass(frozen, module = "shmbus", name = "Appender")]
#[derive(Debug)]
pub(crate) struct PyAppender {
    cell: Cell<Appender>,
}

closing_pymethods! {
impl PyAppender {
    /// Appends `data` (any contiguous bytes-like object). Returns its global index.
    fn send(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<u64> {
        let bytes = Bytes::get(data)?;
        Ok(py.detach(|| self.cell.with(|a| a.send(bytes.as_slice()).or_raise()))??)
    }

    /// Claims room for an entry of exactly `len` bytes: a `JournalLoan` exporting a writable
    /// buffer. `send()` publishes it; dropped unsent, the entry is abandoned (readers skip
    /// it).
    fn loan(slf: Bound<'_, Self>, len: usize) -> PyResult<PyJournalLoan> {
        let mut lent = slf.get().cell.owned(|a| Appender::loan_owned(a, len))?;
        // Written through the exported buffer only, until sent after every view is gone.
        let (ptr, n, index) = (lent.as_mut_ptr(), lent.len(), lent.index());
        Ok(PyJournalLoan { held: Held::new(slf.unbind(), lent, ptr, n, true, LOAN), index })
    }

    /// Turns the background pretoucher on or off (on by default): off, the appending thread
    /// itself grows the file and takes the page faults when it reaches its end.
    fn set_pretouch(&self, on: bool) -> PyResult<()> {
        Ok(self.cell.with(|a| a.set_pretouch(on))?)
    }

    /// Runs the pretoucher on these CPUs. By default it inherits the CPU affinity of the
    /// thread that starts it, so an appender pinned to one CPU (`os.sched_setaffinity`)
    /// takes the pretoucher's page faults on that same CPU; give it others here.
    fn set_pretouch_cpus(&self, cpus: Vec<usize>) -> PyResult<()> {
        Ok(self.cell.with(|a| a.set_pretouch_cpus(&cpus))?)
    }
}

/// Releases the appender (deferred while a loan lives).
fn close;

/// The largest entry, in bytes.
#[getter]
fn max_entry_len -> usize;
}

/// Room for one entry, from `Appender.loan(len)`: write it through the buffer protocol,
/// then `send()` (every view gone first, else `BufferError`).
#[pyclass(frozen, module = "shmbus", name = "JournalLoan")]
#[derive(Debug)]
pub(crate) struct PyJournalLoan {
    held: Held<PyAppender, OwnedLoan>,
    /// The global index the entry will have.
    #[pyo3(get)]
    index: u64,
}

lent_pymethods! {
impl PyJournalLoan {
    /// Publishes the entry. Returns its global index.
    fn send(&self) -> PyResult<u64> {
        Ok(self.held.give_back(|loan| loan.send())?.or_raise()?)
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        // SAFETY: called by Python as `bf_getbuffer` of `slf`, with the view to fill.
        unsafe { slf.get().held.export(slf.as_any(), view, flags) }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.held.unexport()
    }
}

/// Abandons the entry unsent (readers skip it). Also what leaving a `with` block does.
fn release;
}

copied_item! {
    /// A journal entry, copied: `data` (bytes), `index` (global), `ts_ns` (`CLOCK_REALTIME`
    /// nanoseconds at append).
    "Entry": PyEntry from Entry { index, ts_ns }
}

/// Reads a journal in order (a tailer, or a named reader that persists its position).
/// Iterating blocks for each next entry.
#[pyclass(frozen, module = "shmbus", name = "Tailer")]
#[derive(Debug)]
pub(crate) struct PyTailer {
    pub(crate) cell: Cell<Tailer>,
}

impl PyTailer {
    /// An entry read in place, copied once into an `Entry`.
    fn copied(&self, py: Python<'_>, lent: OwnedEntryRef) -> PyResult<PyEntry> {
        let (index, ts_ns) = (lent.info().index(), lent.info().ts_ns());
        let data = copy::lent_bytes(py, lent, |e| e, drop)?;
        Ok(PyEntry::with_bytes(data, index, ts_ns))
    }
}

closing_pymethods! {
impl PyTailer {
    /// The next entry without waiting: `Empty` if there is none yet.
    fn try_recv(&self, py: Python<'_>) -> PyResult<PyEntry> {
        let lent = self.cell.owned(|t| Tailer::entry_owned(t, Tailer::try_recv_ref))?;
        self.copied(py, lent)
    }

    /// The next entry, waiting up to `timeout` seconds (None: for ever).
    #[pyo3(signature = (timeout=None))]
    fn recv(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<PyEntry> {
        let lent = blocking(py, timeout_arg(timeout)?, |d| self.cell.owned(|t| Tailer::entry_owned(t, |t| t.recv_ref_timeout(d))))?;
        self.copied(py, lent)
    }

    /// The next entry, awaited: `await tailer.recv_async()` returns what `recv` returns and
    /// raises what it raises, without a thread waiting (docs/python.md, "Async"). `timeout`
    /// in seconds (None: for ever; `Timeout` after). Cancellation-safe: a cancelled await
    /// takes nothing.
    #[pyo3(signature = (timeout=None))]
    fn recv_async<'py>(slf: &Bound<'py, Self>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        aio::recv_async(slf.as_any(), timeout, JournalRecvTimeoutError::Timeout)
    }

    /// One poll of an async receive (for `shmbus._async`): the `Entry`, or None when it
    /// waits (`wake` is then registered with the waiter thread).
    fn _poll_recv(&self, py: Python<'_>, reg: &PyRegistration, wake: PyRef<'_, PyWake>) -> PyResult<Option<PyEntry>> {
        // An entry already there is copied once; only when there is none does the poll below
        // register the wake-up (and an entry that races in is taken by it).
        match self.try_recv(py) {
            Err(e) if is_class(py, &e, "Empty") => {}
            r => return r.map(Some),
        }
        let e = aio::poll_endpoint(py, &self.cell, reg, &wake, Fail::of)?;
        Ok(e.map(|e| PyEntry::new(py, e)))
    }

    /// Copies the next entry into `buffer` (any writable buffer: a `bytearray`, a numpy
    /// array, a writable `memoryview`, ...), without waiting: one copy, into memory the
    /// caller keeps, and no allocation. Returns `(len, index, ts_ns)`; the entry is
    /// `buffer[:len]`. A buffer too small raises `BufferTooSmall` (`.needed` bytes) and
    /// leaves the tailer where it was, so the entry is received next. Raises what
    /// `try_recv` raises otherwise.
    fn try_recv_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<(usize, u64, u64)> {
        let mut buf = BytesMut::get(buffer)?;
        let len = buf.len();
        let r = copy::into_buffer(py, len, || self.cell.with(|t| t.try_recv_into_slice(buf.as_mut_slice())))?;
        let e = r.map_err(Fail::of)?;
        Ok((e.len(), e.index(), e.ts_ns()))
    }

    /// Copies the next entry into `buffer`, waiting up to `timeout` seconds (None: for
    /// ever; `Timeout` after), as `try_recv_into` does.
    #[pyo3(signature = (buffer, timeout=None))]
    fn recv_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<(usize, u64, u64)> {
        let mut buf = BytesMut::get(buffer)?;
        let e = blocking(py, timeout_arg(timeout)?, |d| {
            let r = self.cell.with(|t| t.recv_into_slice_timeout(buf.as_mut_slice(), d))?;
            r.map_err(Fail::of)
        })?;
        Ok((e.len(), e.index(), e.ts_ns()))
    }

    /// The next entry in place, without waiting: an `EntryRef` (a read-only buffer over the
    /// journal's memory, or the tailer's buffer for a compressed or encrypted entry). The
    /// tailer refuses other calls (`Busy`) while it lives.
    fn try_recv_ref(slf: Bound<'_, Self>) -> PyResult<PyEntryRef> {
        let lent = slf.get().cell.owned(|t| Tailer::entry_owned(t, Tailer::try_recv_ref))?;
        Ok(PyEntryRef::new(slf.unbind(), lent))
    }

    /// The next entry in place, waiting up to `timeout` seconds (None: for ever).
    #[pyo3(signature = (timeout=None))]
    fn recv_ref(slf: Bound<'_, Self>, timeout: Option<f64>) -> PyResult<PyEntryRef> {
        let this = slf.get();
        let lent =
            blocking(slf.py(), timeout_arg(timeout)?, |d| this.cell.owned(|t| Tailer::entry_owned(t, |t| t.recv_ref_timeout(d))))?;
        Ok(PyEntryRef::new(slf.unbind(), lent))
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<PyEntry> {
        self.recv(py, None)
    }

    /// The entries, awaited one by one: `async for entry in tailer` (never ends by itself).
    fn __aiter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        aio::aiter(slf.as_any(), None)
    }
}

/// Releases the tailer (and a named reader's hold).
fn close;

/// For a named reader: persists that everything delivered so far is done (no-op for a
/// plain tailer). Without it, the last delivered entry is delivered again after a
/// restart.
fn ack -> ();

/// The global index of the next entry to read.
#[getter]
fn position -> u64;

/// How many damaged ranges this tailer skipped.
#[getter]
fn damaged_ranges -> u64;
}

/// An entry read in place (a read-only buffer), from `Tailer.recv_ref()`: `index`, `ts_ns`;
/// `release()` (or leaving a `with` block) lets the tailer go on, and raises `BufferError`
/// while views of it live.
#[pyclass(frozen, module = "shmbus", name = "EntryRef")]
#[derive(Debug)]
pub(crate) struct PyEntryRef {
    held: Held<PyTailer, OwnedEntryRef>,
    /// The global index.
    #[pyo3(get)]
    index: u64,
    /// `CLOCK_REALTIME` nanoseconds at append.
    #[pyo3(get)]
    ts_ns: u64,
}

impl PyEntryRef {
    fn new(tailer: Py<PyTailer>, lent: OwnedEntryRef) -> PyEntryRef {
        let (ptr, len, index, ts_ns) = (lent.as_ptr().cast_mut(), lent.len(), lent.info().index(), lent.info().ts_ns());
        let names = Names { what: "entry", gone: "released" };
        PyEntryRef { held: Held::new(tailer, lent, ptr, len, false, names), index, ts_ns }
    }
}

lent_pymethods! {
impl PyEntryRef {
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        // SAFETY: called by Python as `bf_getbuffer` of `slf`, with the view to fill.
        unsafe { slf.get().held.export(slf.as_any(), view, flags) }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.held.unexport()
    }
}

/// Lets the tailer go on (the entry's memory may be reused).
fn release;
fn tobytes;
}
