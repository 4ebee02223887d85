//! `shmbus.Topic`: broadcast publish/subscribe, with zero-copy `Sample`s and `Loan`s.

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use shmbus::lend::{LendOr, Lender};
use shmbus::r#async::AsyncRecv;
use shmbus::topic::{Message, OwnedLoan, OwnedSample, Sample};
use shmbus::{DeliveryPolicy, ErrorKind, Failure, Publisher, Subscriber, Topic, TopicConfig, TopicRecvTimeoutError};
use std::ffi::c_int;

use crate::block::{blocking, timeout_arg, Bytes, BytesMut};
use crate::cell::Cell;
use crate::copy::{self, ONE_COPY_FROM};
use crate::domain::PyDomain;
use crate::errors::{is_class, Fail, OrRaise};
use crate::held::{Held, Names, LOAN};
use crate::methods::{closing_pymethods, config_from_args, copied_item, lent_pymethods, py_dict};
use crate::r#async::{self as aio, PyRegistration, PyWake};
use crate::schema::{schema_arg, schema_of, PySchema};

/// A reliable subscriber's unread message raises `TopicFull` (a `Full`), apart from
/// `AllPinned` (also a `Full`).
fn send_fail<E: Failure>(e: E) -> Fail {
    Fail::of(e).narrowed("Full", "TopicFull")
}

/// A sample from `recv`, owning the subscriber of `sub`, or `None` when the subscriber
/// holds every pin its budget allows (the caller then copies without one).
fn pinned<E: Failure>(
    sub: &Lender<Subscriber>,
    recv: impl FnOnce(&Subscriber) -> Result<Sample<'_>, E>,
) -> Result<Option<OwnedSample>, LendOr<E>> {
    match Subscriber::sample_owned(sub, recv) {
        Ok(sample) => Ok(Some(sample)),
        Err(LendOr::Failed(e)) if e.kind() == ErrorKind::PinLimit => Ok(None),
        Err(e) => Err(e),
    }
}

/// A sample from `recv` owning the subscriber of `sub`, boxed (see [`PySample`]).
fn owned_sample<E: Failure>(
    sub: &Lender<Subscriber>,
    recv: impl FnOnce(&Subscriber) -> Result<Sample<'_>, E>,
) -> Result<Box<OwnedSample>, LendOr<E>> {
    Subscriber::sample_owned(sub, recv).map(Box::new)
}

/// A topic: the mapping every endpoint of it shares. Make one with `Topic.create_or_open`
/// or `Topic.open`; endpoints come from `publisher()` and `subscriber()`.
#[pyclass(frozen, module = "shmbus", name = "Topic")]
#[derive(Debug)]
pub(crate) struct PyTopic {
    cell: Cell<Topic>,
}

closing_pymethods! {
impl PyTopic {
    /// Opens topic `name` in `domain`, creating it if it does not exist. A keyword left at
    /// None accepts what an existing topic has (a created one uses the default); a value
    /// that differs from an existing topic raises `LayoutMismatch`. `policy` is the delivery
    /// policy, `"overwrite"` (the default), `"block"` or `"fail"`: what publishers do when a
    /// reliable subscriber has not read the message they would overwrite; `reliable_timeout`
    /// (seconds) how long such a subscriber may stand still before it is evicted. `schema`
    /// (a `Schema`) is stored with a created topic; an existing one must carry the same
    /// (`SchemaMismatch`), and None accepts any.
    #[staticmethod]
    #[pyo3(signature = (domain, name, *, max_message_len=None, history=None, spare_slots=None, mode=None, group=None, policy=None, reliable_timeout=None, schema=None))]
    #[allow(clippy::too_many_arguments)]
    fn create_or_open(
        domain: &PyDomain,
        name: &str,
        max_message_len: Option<usize>,
        history: Option<usize>,
        spare_slots: Option<usize>,
        mode: Option<u32>,
        group: Option<u32>,
        policy: Option<&str>,
        reliable_timeout: Option<f64>,
        schema: Option<PyRef<'_, PySchema>>,
    ) -> PyResult<PyTopic> {
        let policy = policy.map(|p| p.parse::<DeliveryPolicy>().map_err(PyValueError::new_err)).transpose()?;
        let reliable_timeout = timeout_arg(reliable_timeout)?;
        let schema = schema_arg(schema);
        let config = config_from_args!(TopicConfig::default(); max_message_len, history, spare_slots, mode, group, policy, reliable_timeout, schema);
        let topic = Topic::create_or_open(&domain.inner, name, &config).or_raise()?;
        Ok(PyTopic { cell: Cell::new(topic, "topic") })
    }

    /// The topic's schema, set by its creator (`Schema`), or None if it has none.
    #[getter]
    fn schema(&self) -> PyResult<Option<PySchema>> {
        Ok(self.cell.with_ref(|c| schema_of(c.schema()))?)
    }

    /// Opens the existing topic `name` in `domain` (`NotFound` if there is none).
    #[staticmethod]
    fn open(domain: &PyDomain, name: &str) -> PyResult<PyTopic> {
        let topic = Topic::open(&domain.inner, name).or_raise()?;
        Ok(PyTopic { cell: Cell::new(topic, "topic") })
    }

    /// The topic's state, read through a read-only mapping (read permission is enough): a
    /// dict with `max_message_len`, `history`, `slots`, `last_seq`, `publishers`,
    /// `subscribers`, `pinned_slots`, `policy` (`"overwrite"`, `"block"` or `"fail"`),
    /// `reliable_timeout` (seconds) and `reliable_subscribers`.
    #[staticmethod]
    fn status<'py>(py: Python<'py>, domain: &PyDomain, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let s = Topic::status(&domain.inner, name).or_raise()?;
        Ok(py_dict!(py, {
            "max_message_len" => s.max_message_len,
            "history" => s.history,
            "slots" => s.slots,
            "last_seq" => s.last_seq,
            "publishers" => s.publishers,
            "subscribers" => s.subscribers,
            "pinned_slots" => s.pinned_slots,
            "policy" => s.policy.name(),
            "reliable_timeout" => s.reliable_timeout.as_secs_f64(),
            "reliable_subscribers" => s.reliable_subscribers,
        }))
    }

    /// A new publisher (a participant entry of the topic, released by `close()`).
    fn publisher(&self) -> PyResult<PyPublisher> {
        let p = self.cell.with(|t| t.publisher())?.or_raise()?;
        Ok(PyPublisher { cell: Cell::new(p, "publisher") })
    }

    /// A new subscriber, reading from the next message published.
    fn subscriber(&self) -> PyResult<PySubscriber> {
        let s = self.cell.with(|t| t.subscriber())?.or_raise()?;
        Ok(PySubscriber::new(s))
    }

    /// A new reliable subscriber, reading from the next message published: on a `block` or
    /// `fail` topic publishers do not overwrite a message it has not read, unless it stands
    /// still for the topic's reliable timeout; it is then evicted (its next receive raises
    /// `Evicted` once) and reads on as a lossy subscriber. `InvalidConfig` on an `overwrite`
    /// topic.
    fn reliable_subscriber(&self) -> PyResult<PySubscriber> {
        let s = self.cell.with(|t| t.reliable_subscriber())?.or_raise()?;
        Ok(PySubscriber::new(s))
    }

    /// The delivery policy: `"overwrite"`, `"block"` or `"fail"`.
    #[getter]
    fn policy(&self) -> PyResult<&'static str> {
        Ok(self.cell.with(|t| t.policy().name())?)
    }

    /// The topic's name.
    #[getter]
    fn name(&self) -> PyResult<String> {
        Ok(self.cell.with(|t| t.name().to_owned())?)
    }
}

/// Unmaps the topic (endpoints made from it keep working).
fn close;

/// Maps every page of the topic into this process now, so that no send or receive of
/// this process takes a page fault the first time it touches a page: for a long-lived
/// process on a latency path (advice only; docs/topic.md, "Sizing").
fn prefault -> (), without_gil;

/// The largest message, in bytes.
#[getter]
fn max_message_len -> usize;

/// The guaranteed history depth.
#[getter]
fn history -> usize;

/// The highest committed sequence number (0: none yet).
#[getter]
fn last_seq -> u64;
}

/// Publishes to a topic. On an `overwrite` topic it never waits: the oldest unpinned slot is
/// overwritten. On a `block` or `fail` topic it does not overwrite a message a reliable
/// subscriber has not read: `send` waits on a `block` topic and raises `TopicFull` on a
/// `fail` one.
#[pyclass(frozen, module = "shmbus", name = "Publisher")]
#[derive(Debug)]
pub(crate) struct PyPublisher {
    cell: Cell<Publisher>,
}

closing_pymethods! {
impl PyPublisher {
    /// Publishes `data` (any contiguous bytes-like object: bytes, bytearray, memoryview, a
    /// numpy array, ...; read in place). Returns the message's sequence number. On a `block`
    /// topic it waits up to `timeout` seconds (None: for ever; `Timeout` after) for reliable
    /// subscribers to read; on a `fail` topic it raises `TopicFull` instead. The GIL is
    /// released while waiting; Ctrl-C interrupts.
    #[pyo3(signature = (data, timeout=None))]
    fn send(&self, py: Python<'_>, data: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<u64> {
        let bytes = Bytes::get(data)?;
        blocking(py, timeout_arg(timeout)?, |d| {
            self.cell.with(|p| p.send_timeout(bytes.as_slice(), d).map_err(send_fail))?
        })
    }

    /// Publishes `data` without waiting: `TopicFull` where `send` would wait for a reliable
    /// subscriber. Returns the sequence number.
    fn try_send(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<u64> {
        let bytes = Bytes::get(data)?;
        Ok(py.detach(|| self.cell.with(|p| p.try_send(bytes.as_slice()).map_err(send_fail)))??)
    }

    /// Lends the next slot to write in place: a `Loan` exporting a writable buffer of
    /// `max_message_len` bytes. Publish it with `loan.send(len)`; dropping it unsent
    /// publishes nothing. The publisher refuses other calls (`Busy`) while it lives. On a
    /// `block` topic it waits (without the GIL) for reliable subscribers to read the slot; on
    /// a `fail` topic it raises `TopicFull` instead.
    fn loan(slf: Bound<'_, Self>) -> PyResult<PyLoan> {
        let this = slf.get();
        // Boxed: a loan of a small topic holds its buffer itself, and `held` keeps a pointer to it.
        let mut lent = slf.py().detach(|| {
            this.cell.owned(|p| Publisher::loan_owned(p).map(Box::new)).map_err(|f| f.narrowed("Full", "TopicFull"))
        })?;
        // The loan's bytes are written through the exported buffer only (`Loan` itself is
        // not touched until it is sent, after every view is gone).
        let (ptr, len) = (lent.as_mut_ptr(), lent.len());
        Ok(PyLoan { held: Held::new(slf.unbind(), lent, ptr, len, true, LOAN) })
    }
}

/// Releases the publisher's participant entry (deferred while a loan lives).
fn close;

/// The largest message, in bytes.
#[getter]
fn max_message_len -> usize;
}

/// A slot lent by `Publisher.loan()`: write the message into it through the buffer protocol
/// (`memoryview(loan)`, `numpy.frombuffer(loan, numpy.uint8)`), then `send()` it. Every view
/// must be gone before `send()` (else `BufferError`): once sent, the slot is read by others.
#[pyclass(frozen, module = "shmbus", name = "Loan")]
#[derive(Debug)]
pub(crate) struct PyLoan {
    held: Held<PyPublisher, Box<OwnedLoan>>,
}

lent_pymethods! {
impl PyLoan {
    /// Publishes the first `len` bytes (default: all of them). Returns the sequence number.
    #[pyo3(signature = (len=None))]
    fn send(&self, len: Option<usize>) -> PyResult<u64> {
        let len = self.held.fits(len)?;
        let r = self.held.give_back(|mut loan| {
            loan.truncate(len);
            (*loan).send()
        })?;
        Ok(r.map_err(send_fail)?)
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        // SAFETY: called by Python as `bf_getbuffer` of `slf`, with the view to fill.
        unsafe { slf.get().held.export(slf.as_any(), view, flags) }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.held.unexport()
    }
}

/// Gives the slot back unsent (nothing is published). Also what leaving a `with` block
/// does.
fn release;
}

copied_item! {
    /// A copied message: `data` (bytes), `seq` and `ts_ns` (`CLOCK_MONOTONIC` at publish).
    "Message": PyMessage from Message { seq, ts_ns }
}

/// Reads a topic in order. Receives copy (`recv` → `Message`) or pin the slot
/// (`recv_ref` → `Sample`, zero-copy). Iterating blocks for each next message.
#[pyclass(frozen, module = "shmbus", name = "Subscriber")]
#[derive(Debug)]
pub(crate) struct PySubscriber {
    pub(crate) cell: Cell<Subscriber>,
    /// Owned receives go through a pinned sample, one copy (`copy.rs`): the topic's messages
    /// may be [`ONE_COPY_FROM`] bytes or longer.
    one_copy: bool,
}

impl PySubscriber {
    fn new(s: Subscriber) -> PySubscriber {
        let one_copy = s.max_message_len() >= ONE_COPY_FROM;
        PySubscriber { cell: Cell::new(s, "subscriber"), one_copy }
    }

    /// A pinned sample copied into a `Message`, the sample unpinned; `None` if `lent` found
    /// every pin of this subscriber held (its pin budget), for the copying receive to take
    /// the message instead.
    fn copied(&self, py: Python<'_>, lent: Option<OwnedSample>) -> PyResult<Option<PyMessage>> {
        let Some(sample) = lent else {
            return Ok(None);
        };
        let (seq, ts_ns) = (sample.seq(), sample.ts_ns());
        let data = copy::lent_bytes(py, sample, |s| s, drop)?;
        Ok(Some(PyMessage::with_bytes(data, seq, ts_ns)))
    }

    /// A read that does not wait (`try_recv`, `get`, `latest`): a large message through the
    /// pinned sample `pin` gives, copied once; else (or with every pin held) by `copy`.
    fn random_access<E: Failure>(
        &self,
        py: Python<'_>,
        pin: impl FnOnce(&Subscriber) -> Result<Sample<'_>, E>,
        copy: impl FnOnce(&Subscriber) -> Result<Message, E>,
    ) -> PyResult<PyMessage> {
        if self.one_copy {
            let lent = self.cell.owned(|s| pinned(s, pin))?;
            if let Some(m) = self.copied(py, lent)? {
                return Ok(m);
            }
        }
        let m = self.cell.with_ref(|s| copy(s).map_err(Fail::of))??;
        Ok(PyMessage::new(py, m))
    }

    /// The next message through a pinned sample, without waiting (see [`Self::copied`]).
    fn try_copied(&self, py: Python<'_>) -> PyResult<Option<PyMessage>> {
        let lent = self.cell.owned(|s| pinned(s, Subscriber::try_recv_ref))?;
        self.copied(py, lent)
    }
}

closing_pymethods! {
impl PySubscriber {
    /// The next message, without waiting: raises `Empty` if there is none yet, `Lagged`
    /// (with `.missed`) if messages were overwritten before being read, `Evicted` (once) if
    /// this reliable subscriber was evicted.
    fn try_recv(&self, py: Python<'_>) -> PyResult<PyMessage> {
        self.random_access(py, |s| s.try_recv_ref(), Subscriber::try_recv)
    }

    /// The next message, waiting up to `timeout` seconds (None: for ever; `Timeout`
    /// after). The GIL is released while waiting; Ctrl-C interrupts.
    #[pyo3(signature = (timeout=None))]
    fn recv(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<PyMessage> {
        if self.one_copy {
            let lent = blocking(py, timeout_arg(timeout)?, |d| {
                self.cell.owned(|s| pinned(s, |s| s.recv_ref_timeout(d)))
            })?;
            if let Some(m) = self.copied(py, lent)? {
                return Ok(m);
            }
        }
        let m = blocking(py, timeout_arg(timeout)?, |d| {
            self.cell.with_ref(|s| s.recv_timeout(d).map_err(Fail::of))?
        })?;
        Ok(PyMessage::new(py, m))
    }

    /// The next message, awaited: `await sub.recv_async()` returns what `recv` returns and
    /// raises what it raises, without a thread waiting (docs/python.md, "Async"). `timeout`
    /// in seconds (None: for ever; `Timeout` after). Cancellation-safe: a cancelled await
    /// takes nothing.
    #[pyo3(signature = (timeout=None))]
    fn recv_async<'py>(slf: &Bound<'py, Self>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        aio::recv_async(slf.as_any(), timeout, TopicRecvTimeoutError::Timeout)
    }

    /// One poll of an async receive (for `shmbus._async`): the `Message`, or None when it
    /// waits (`wake` is then registered with the waiter thread).
    fn _poll_recv(&self, py: Python<'_>, reg: &PyRegistration, wake: PyRef<'_, PyWake>) -> PyResult<Option<PyMessage>> {
        // A message already there is copied once; only when there is none does the poll
        // below register the wake-up (and a message that races in is taken by it).
        if self.one_copy {
            match self.try_copied(py) {
                Ok(Some(m)) => return Ok(Some(m)),
                Ok(None) => {}
                Err(e) if is_class(py, &e, "Empty") => {}
                Err(e) => return Err(e),
            }
        }
        // Through `&Subscriber`, as `recv` receives: samples held meanwhile are no obstacle.
        let m = aio::poll_recv(py, reg, &wake, |st, parked, cx| {
            self.cell.park(parked);
            self.cell.with_ref(|mut s| aio::ready(s.poll_recv(st, cx), Fail::of))?
        })?;
        Ok(m.map(|m| PyMessage::new(py, m)))
    }

    /// Copies the next message into `buffer` (any writable buffer: a `bytearray`, a numpy
    /// array, a writable `memoryview`, ...), without waiting: one copy, into memory the
    /// caller keeps, and no allocation. Returns `(len, seq, ts_ns)`; the message is
    /// `buffer[:len]`. A buffer too small raises `BufferTooSmall` (`.needed` bytes) and
    /// leaves the message to be received next (unless it is overwritten meanwhile, which the
    /// next receive reports as `Lagged`). Raises what `try_recv` raises otherwise.
    fn try_recv_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<(usize, u64, u64)> {
        let mut buf = BytesMut::get(buffer)?;
        let len = buf.len();
        let r = copy::into_buffer(py, len, || self.cell.with_ref(|s| s.try_recv_into_slice(buf.as_mut_slice())))?;
        let m = r.map_err(Fail::of)?;
        Ok((m.len(), m.seq(), m.ts_ns()))
    }

    /// Copies the next message into `buffer`, waiting up to `timeout` seconds (None: for
    /// ever; `Timeout` after), as `try_recv_into` does. The GIL is released while waiting
    /// and copying; Ctrl-C interrupts.
    #[pyo3(signature = (buffer, timeout=None))]
    fn recv_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<(usize, u64, u64)> {
        let mut buf = BytesMut::get(buffer)?;
        let m = blocking(py, timeout_arg(timeout)?, |d| {
            let r = self.cell.with_ref(|s| s.recv_into_slice_timeout(buf.as_mut_slice(), d))?;
            r.map_err(Fail::of)
        })?;
        Ok((m.len(), m.seq(), m.ts_ns()))
    }

    /// The next message, zero-copy and without waiting: a `Sample` pinning its slot.
    fn try_recv_ref(slf: Bound<'_, Self>) -> PyResult<PySample> {
        let lent = slf.get().cell.owned(|s| owned_sample(s, Subscriber::try_recv_ref))?;
        Ok(PySample::new(slf.unbind(), lent))
    }

    /// The next message, zero-copy, waiting up to `timeout` seconds (None: for ever).
    #[pyo3(signature = (timeout=None))]
    fn recv_ref(slf: Bound<'_, Self>, timeout: Option<f64>) -> PyResult<PySample> {
        let this = slf.get();
        let lent = blocking(slf.py(), timeout_arg(timeout)?, |d| {
            this.cell.owned(|s| owned_sample(s, |s| s.recv_ref_timeout(d)))
        })?;
        Ok(PySample::new(slf.unbind(), lent))
    }

    /// The message with sequence number `seq`, if still kept (copied).
    fn get(&self, py: Python<'_>, seq: u64) -> PyResult<PyMessage> {
        self.random_access(py, |s| s.get_ref(seq), |s| s.get(seq))
    }

    /// The newest message (copied).
    fn latest(&self, py: Python<'_>) -> PyResult<PyMessage> {
        self.random_access(py, Subscriber::latest_ref, Subscriber::latest)
    }

    /// Moves the cursor: the next in-order receive returns `seq`.
    fn seek(&self, seq: u64) -> PyResult<()> {
        Ok(self.cell.with_ref(|s| s.seek(seq))?)
    }

    /// How many samples may be pinned at once (default 2).
    fn set_pin_budget(&self, budget: usize) -> PyResult<()> {
        Ok(self.cell.with_ref(|s| s.set_pin_budget(budget))?)
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<PyMessage> {
        self.recv(py, None)
    }

    /// The messages, awaited one by one: `async for msg in sub` (never ends by itself).
    fn __aiter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        aio::aiter(slf.as_any(), None)
    }
}

/// Releases the subscriber's participant entry (deferred while samples live).
fn close;

/// Moves the cursor to the newest message: the next receive returns it.
fn seek_latest -> ();

/// Moves the cursor to the oldest message kept.
fn seek_oldest -> ();

/// The sequence number the next in-order receive returns.
#[getter]
fn next_seq -> u64;

/// How many messages are published and not yet read.
#[getter]
fn lag -> u64;

/// The largest message, in bytes.
#[getter]
fn max_message_len -> usize;
}

/// A message pinned in shared memory, zero-copy: its slot is not overwritten while this
/// object, or any view of it (`memoryview(sample)`, `numpy.frombuffer(sample, ...)`),
/// lives. The buffer is read-only. `release()` (or leaving a `with` block) unpins early and
/// raises `BufferError` if views still exist.
#[pyclass(frozen, module = "shmbus", name = "Sample")]
#[derive(Debug)]
pub(crate) struct PySample {
    // Boxed: a small sample holds its bytes itself (a copy), and `held` keeps a pointer to them.
    held: Held<PySubscriber, Box<OwnedSample>>,
    seq: u64,
    ts_ns: u64,
}

impl PySample {
    fn new(owner: Py<PySubscriber>, lent: Box<OwnedSample>) -> PySample {
        let s = &lent;
        let (ptr, len, seq, ts_ns) = (s.as_ptr().cast_mut(), s.len(), s.seq(), s.ts_ns());
        let names = Names { what: "sample", gone: "released" };
        PySample { held: Held::new(owner, lent, ptr, len, false, names), seq, ts_ns }
    }
}

lent_pymethods! {
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

    /// Whether the sample is still pinned (not released).
    #[getter]
    fn pinned(&self) -> bool {
        self.held.is_live()
    }

    fn __repr__(&self) -> String {
        format!("Sample(seq={}, ts_ns={}, len={})", self.seq, self.ts_ns, self.held.len())
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        // SAFETY: called by Python as `bf_getbuffer` of `slf`, with the view to fill.
        unsafe { slf.get().held.export(slf.as_any(), view, flags) }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.held.unexport()
    }
}

/// Unpins the slot now. `BufferError` if views of the sample are alive.
fn release;
fn tobytes;
}
