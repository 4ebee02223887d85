//! `shmbus.Topic`: broadcast publish/subscribe, with zero-copy `Sample`s and `Loan`s.

use std::ffi::c_int;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use shmbus::topic::{Loan, Message, Sample};
use shmbus::{
    Publisher, Subscriber, Topic, TopicConfig, TopicGetError, TopicRecvTimeoutError, TopicSendError, TopicTryRecvError,
};

use crate::block::{blocking, timeout_arg, Bytes};
use crate::cell::{Cell, Lending};
use crate::domain::{status_dict, PyDomain};
use crate::errors::{Fail, OrRaise};
use crate::held::Held;

/// A `Lagged` error keeps its count of missed messages as `.missed`.
fn try_fail(e: TopicTryRecvError) -> Fail {
    match e {
        TopicTryRecvError::Lagged { missed } => Fail::of(e).missed(missed),
        e => Fail::of(e),
    }
}

fn timeout_fail(e: TopicRecvTimeoutError) -> Fail {
    match e {
        TopicRecvTimeoutError::Lagged { missed } => Fail::of(e).missed(missed),
        e => Fail::of(e),
    }
}

fn send_fail(e: TopicSendError) -> Fail {
    Fail::of(e)
}

fn get_fail(e: TopicGetError) -> Fail {
    Fail::of(e)
}

/// A topic: the mapping every endpoint of it shares. Make one with `Topic.create_or_open`
/// or `Topic.open`; endpoints come from `publisher()` and `subscriber()`.
#[pyclass(frozen, module = "shmbus", name = "Topic")]
#[derive(Debug)]
pub(crate) struct PyTopic {
    cell: Cell<Topic>,
}

#[pymethods]
impl PyTopic {
    /// Opens topic `name` in `domain`, creating it if it does not exist. A keyword left at
    /// None accepts what an existing topic has (a created one uses the default); a value
    /// that differs from an existing topic raises `LayoutMismatch`.
    #[staticmethod]
    #[pyo3(signature = (domain, name, *, max_message_len=None, history=None, spare_slots=None, mode=None, group=None))]
    fn create_or_open(
        domain: &PyDomain,
        name: &str,
        max_message_len: Option<usize>,
        history: Option<usize>,
        spare_slots: Option<usize>,
        mode: Option<u32>,
        group: Option<u32>,
    ) -> PyResult<PyTopic> {
        let mut config = TopicConfig::default();
        if let Some(v) = max_message_len {
            config = config.max_message_len(v);
        }
        if let Some(v) = history {
            config = config.history(v);
        }
        if let Some(v) = spare_slots {
            config = config.spare_slots(v);
        }
        if let Some(v) = mode {
            config = config.mode(v);
        }
        if let Some(v) = group {
            config = config.group(v);
        }
        let topic = Topic::create_or_open(&domain.inner, name, &config).or_raise()?;
        Ok(PyTopic { cell: Cell::new(topic, Lending::Exclusive, "topic") })
    }

    /// Opens the existing topic `name` in `domain` (`NotFound` if there is none).
    #[staticmethod]
    fn open(domain: &PyDomain, name: &str) -> PyResult<PyTopic> {
        let topic = Topic::open(&domain.inner, name).or_raise()?;
        Ok(PyTopic { cell: Cell::new(topic, Lending::Exclusive, "topic") })
    }

    /// The topic's state, read through a read-only mapping (read permission is enough): a
    /// dict with `max_message_len`, `history`, `slots`, `last_seq`, `publishers`,
    /// `subscribers` and `pinned_slots`.
    #[staticmethod]
    fn status<'py>(py: Python<'py>, domain: &PyDomain, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let s = Topic::status(&domain.inner, name).or_raise()?;
        status_dict(
            py,
            &[
                ("max_message_len", s.max_message_len),
                ("history", s.history),
                ("slots", s.slots),
                ("last_seq", s.last_seq),
                ("publishers", s.publishers as u64),
                ("subscribers", s.subscribers as u64),
                ("pinned_slots", s.pinned_slots as u64),
            ],
        )
    }

    /// A new publisher (a participant entry of the topic, released by `close()`).
    fn publisher(&self) -> PyResult<PyPublisher> {
        let p = self.cell.with(|t| t.publisher())?.or_raise()?;
        Ok(PyPublisher { cell: Cell::new(p, Lending::Exclusive, "publisher") })
    }

    /// A new subscriber, reading from the next message published.
    fn subscriber(&self) -> PyResult<PySubscriber> {
        let s = self.cell.with(|t| t.subscriber())?.or_raise()?;
        Ok(PySubscriber { cell: Cell::new(s, Lending::Shared, "subscriber") })
    }

    /// The topic's name.
    #[getter]
    fn name(&self) -> PyResult<String> {
        Ok(self.cell.with(|t| t.name().to_owned())?)
    }

    /// The largest message, in bytes.
    #[getter]
    fn max_message_len(&self) -> PyResult<usize> {
        Ok(self.cell.with(|t| t.max_message_len())?)
    }

    /// The guaranteed history depth.
    #[getter]
    fn history(&self) -> PyResult<usize> {
        Ok(self.cell.with(|t| t.history())?)
    }

    /// The highest committed sequence number (0: none yet).
    #[getter]
    fn last_seq(&self) -> PyResult<u64> {
        Ok(self.cell.with(|t| t.last_seq())?)
    }

    /// Unmaps the topic (endpoints made from it keep working).
    fn close(&self) {
        self.cell.close()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.cell.close();
        false
    }
}

/// Publishes to a topic. It never waits: the oldest unpinned slot is overwritten.
#[pyclass(frozen, module = "shmbus", name = "Publisher")]
#[derive(Debug)]
pub(crate) struct PyPublisher {
    cell: Cell<Publisher>,
}

#[pymethods]
impl PyPublisher {
    /// Publishes `data` (any contiguous bytes-like object: bytes, bytearray, memoryview, a
    /// numpy array, ...; read in place). Returns the message's sequence number.
    fn send(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<u64> {
        let bytes = Bytes::get(data)?;
        let r = py.detach(|| self.cell.with(|p| p.send(bytes.as_slice()).map_err(send_fail)));
        Ok(r??)
    }

    /// Lends the next slot to write in place: a `Loan` exporting a writable buffer of
    /// `max_message_len` bytes. Publish it with `loan.send(len)`; dropping it unsent
    /// publishes nothing. The publisher refuses other calls (`Busy`) while it lives.
    fn loan(slf: Bound<'_, Self>) -> PyResult<PyLoan> {
        let mut lent = slf.get().cell.lend_mut(|p| p.loan().map_err(send_fail))?;
        // The loan's bytes are written through the exported buffer only (`Loan` itself is
        // not touched until it is sent, after every view is gone).
        let (ptr, len) = (lent.get_mut().as_mut_ptr(), lent.get().len());
        Ok(PyLoan { owner: slf.unbind(), held: Held::new(lent, ptr, len, true, "loan") })
    }

    /// The largest message, in bytes.
    #[getter]
    fn max_message_len(&self) -> PyResult<usize> {
        Ok(self.cell.with(|p| p.max_message_len())?)
    }

    /// Releases the publisher's participant entry (deferred while a loan lives).
    fn close(&self) {
        self.cell.close()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.cell.close();
        false
    }
}

/// A slot lent by `Publisher.loan()`: write the message into it through the buffer protocol
/// (`memoryview(loan)`, `numpy.frombuffer(loan, numpy.uint8)`), then `send()` it. Every view
/// must be gone before `send()` (else `BufferError`): once sent, the slot is read by others.
#[pyclass(frozen, module = "shmbus", name = "Loan")]
#[derive(Debug)]
pub(crate) struct PyLoan {
    owner: Py<PyPublisher>,
    held: Held<Loan<'static>>,
}

#[pymethods]
impl PyLoan {
    /// Publishes the first `len` bytes (default: all of them). Returns the sequence number.
    #[pyo3(signature = (len=None))]
    fn send(&self, len: Option<usize>) -> PyResult<u64> {
        if len.is_some_and(|l| l > self.held.len()) {
            return Err(PyValueError::new_err(format!(
                "len {} exceeds the loan's {} bytes",
                len.unwrap_or_default(),
                self.held.len()
            )));
        }
        let Some(lent) = self.held.take()? else {
            return Err(Fail::new("Closed", "this loan was already sent or released").into());
        };
        let r = self.owner.get().cell.give_back(lent, |mut loan| {
            if let Some(l) = len {
                loan.truncate(l);
            }
            loan.send()
        });
        Ok(r.map_err(send_fail)?)
    }

    /// Gives the slot back unsent (nothing is published). Also what leaving a `with` block
    /// does.
    fn release(&self) -> PyResult<()> {
        if let Some(lent) = self.held.take()? {
            self.owner.get().cell.give_back(lent, drop);
        }
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.held.len()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.release()?;
        Ok(false)
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        // SAFETY: called by Python as `bf_getbuffer` of `slf`.
        unsafe { slf.get().held.export(slf.as_any(), view, flags) }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.held.unexport()
    }
}

impl Drop for PyLoan {
    fn drop(&mut self) {
        if let Some(lent) = self.held.take_at_drop() {
            self.owner.get().cell.give_back(lent, drop);
        }
    }
}

/// A copied message: `data` (bytes), `seq` and `ts_ns` (`CLOCK_MONOTONIC` at publish).
#[pyclass(frozen, module = "shmbus", name = "Message", get_all)]
#[derive(Debug)]
pub(crate) struct PyMessage {
    data: Py<PyBytes>,
    seq: u64,
    ts_ns: u64,
}

impl PyMessage {
    fn new(py: Python<'_>, m: Message) -> PyMessage {
        PyMessage { data: PyBytes::new(py, m.data()).unbind(), seq: m.seq(), ts_ns: m.ts_ns() }
    }
}

#[pymethods]
impl PyMessage {
    fn __len__(&self, py: Python<'_>) -> usize {
        self.data.bind(py).as_bytes().len()
    }

    fn __bytes__(&self, py: Python<'_>) -> Py<PyBytes> {
        self.data.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("Message(seq={}, ts_ns={}, len={})", self.seq, self.ts_ns, self.__len__(py))
    }
}

/// Reads a topic in order. Receives copy (`recv` → `Message`) or pin the slot
/// (`recv_ref` → `Sample`, zero-copy). Iterating blocks for each next message.
#[pyclass(frozen, module = "shmbus", name = "Subscriber")]
#[derive(Debug)]
pub(crate) struct PySubscriber {
    pub(crate) cell: Cell<Subscriber>,
}

#[pymethods]
impl PySubscriber {
    /// The next message, without waiting: raises `Empty` if there is none yet, `Lagged`
    /// (with `.missed`) if messages were overwritten before being read.
    fn try_recv(&self, py: Python<'_>) -> PyResult<PyMessage> {
        let m = self.cell.with_ref(|s| s.try_recv().map_err(try_fail))??;
        Ok(PyMessage::new(py, m))
    }

    /// The next message, waiting up to `timeout` seconds (None: for ever; `Timeout`
    /// after). The GIL is released while waiting; Ctrl-C interrupts.
    #[pyo3(signature = (timeout=None))]
    fn recv(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<PyMessage> {
        let m = blocking(py, timeout_arg(timeout)?, |d| {
            self.cell.with_ref(|s| s.recv_timeout(d).map_err(timeout_fail))?
        })?;
        Ok(PyMessage::new(py, m))
    }

    /// The next message, zero-copy and without waiting: a `Sample` pinning its slot.
    fn try_recv_ref(slf: Bound<'_, Self>) -> PyResult<PySample> {
        let lent = slf.get().cell.lend_ref(|s| s.try_recv_ref().map_err(try_fail))?;
        Ok(PySample::new(slf.unbind(), lent))
    }

    /// The next message, zero-copy, waiting up to `timeout` seconds (None: for ever).
    #[pyo3(signature = (timeout=None))]
    fn recv_ref(slf: Bound<'_, Self>, timeout: Option<f64>) -> PyResult<PySample> {
        let this = slf.get();
        let lent = blocking(slf.py(), timeout_arg(timeout)?, |d| {
            this.cell.lend_ref(|s| s.recv_ref_timeout(d).map_err(timeout_fail))
        })?;
        Ok(PySample::new(slf.unbind(), lent))
    }

    /// The message with sequence number `seq`, if still kept (copied).
    fn get(&self, py: Python<'_>, seq: u64) -> PyResult<PyMessage> {
        let m = self.cell.with_ref(|s| s.get(seq).map_err(get_fail))??;
        Ok(PyMessage::new(py, m))
    }

    /// The newest message (copied).
    fn latest(&self, py: Python<'_>) -> PyResult<PyMessage> {
        let m = self.cell.with_ref(|s| s.latest().map_err(get_fail))??;
        Ok(PyMessage::new(py, m))
    }

    /// Moves the cursor: the next in-order receive returns `seq`.
    fn seek(&self, seq: u64) -> PyResult<()> {
        Ok(self.cell.with_ref(|s| s.seek(seq))?)
    }

    /// Moves the cursor to the newest message: the next receive returns it.
    fn seek_latest(&self) -> PyResult<()> {
        Ok(self.cell.with_ref(|s| s.seek_latest())?)
    }

    /// Moves the cursor to the oldest message kept.
    fn seek_oldest(&self) -> PyResult<()> {
        Ok(self.cell.with_ref(|s| s.seek_oldest())?)
    }

    /// How many samples may be pinned at once (default 2).
    fn set_pin_budget(&self, budget: usize) -> PyResult<()> {
        Ok(self.cell.with_ref(|s| s.set_pin_budget(budget))?)
    }

    /// The sequence number the next in-order receive returns.
    #[getter]
    fn next_seq(&self) -> PyResult<u64> {
        Ok(self.cell.with_ref(|s| s.next_seq())?)
    }

    /// How many messages are published and not yet read.
    #[getter]
    fn lag(&self) -> PyResult<u64> {
        Ok(self.cell.with_ref(|s| s.lag())?)
    }

    /// The largest message, in bytes.
    #[getter]
    fn max_message_len(&self) -> PyResult<usize> {
        Ok(self.cell.with_ref(|s| s.max_message_len())?)
    }

    /// Releases the subscriber's participant entry (deferred while samples live).
    fn close(&self) {
        self.cell.close()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.cell.close();
        false
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<PyMessage> {
        self.recv(py, None)
    }
}

/// A message pinned in shared memory, zero-copy: its slot is not overwritten while this
/// object, or any view of it (`memoryview(sample)`, `numpy.frombuffer(sample, ...)`),
/// lives. The buffer is read-only. `release()` (or leaving a `with` block) unpins early and
/// raises `BufferError` if views still exist.
#[pyclass(frozen, module = "shmbus", name = "Sample")]
#[derive(Debug)]
pub(crate) struct PySample {
    owner: Py<PySubscriber>,
    held: Held<Sample<'static>>,
    seq: u64,
    ts_ns: u64,
}

impl PySample {
    fn new(owner: Py<PySubscriber>, lent: crate::cell::Lent<Sample<'static>>) -> PySample {
        let s = lent.get();
        let (ptr, len, seq, ts_ns) = (s.as_ptr().cast_mut(), s.len(), s.seq(), s.ts_ns());
        PySample { owner, held: Held::new(lent, ptr, len, false, "sample"), seq, ts_ns }
    }
}

#[pymethods]
impl PySample {
    /// The sequence number.
    #[getter]
    fn seq(&self) -> u64 {
        self.seq
    }

    /// `CLOCK_MONOTONIC` nanoseconds at publish.
    #[getter]
    fn ts_ns(&self) -> u64 {
        self.ts_ns
    }

    /// The payload, copied into `bytes`.
    fn tobytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        match self.held.to_vec() {
            Some(v) => Ok(PyBytes::new(py, &v)),
            None => Err(Fail::new("Closed", "this sample was already released").into()),
        }
    }

    /// Unpins the slot now. `BufferError` if views of the sample are alive.
    fn release(&self) -> PyResult<()> {
        if let Some(lent) = self.held.take()? {
            self.owner.get().cell.give_back(lent, drop);
        }
        Ok(())
    }

    /// Whether the sample is still pinned (not released).
    #[getter]
    fn pinned(&self) -> bool {
        self.held.is_live()
    }

    fn __len__(&self) -> usize {
        self.held.len()
    }

    fn __repr__(&self) -> String {
        format!("Sample(seq={}, ts_ns={}, len={})", self.seq, self.ts_ns, self.held.len())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.release()?;
        Ok(false)
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        // SAFETY: called by Python as `bf_getbuffer` of `slf`.
        unsafe { slf.get().held.export(slf.as_any(), view, flags) }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.held.unexport()
    }
}

impl Drop for PySample {
    fn drop(&mut self) {
        if let Some(lent) = self.held.take_at_drop() {
            self.owner.get().cell.give_back(lent, drop);
        }
    }
}
