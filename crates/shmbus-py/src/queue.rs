//! `shmbus.Queue`: a bounded MPMC queue; each message goes to exactly one consumer.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use shmbus::{Consumer, Producer, Queue, QueueConfig, QueueRecvTimeoutError, RecvIntoSliceError};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::block::{blocking, timeout_arg, Bytes, BytesMut};
use crate::cell::Cell;
use crate::copy::{self, ONE_COPY_FROM};
use crate::domain::PyDomain;
use crate::errors::{is_class, Fail, OrRaise};
use crate::methods::{closing_pymethods, config_from_args, py_dict};
use crate::r#async::{self as aio, PyRegistration, PyWake};
use crate::schema::{schema_arg, schema_of, PySchema};

/// A queue. Make one with `Queue.create_or_open` or `Queue.open`; endpoints come from
/// `producer()` and `consumer()`.
#[pyclass(frozen, module = "shmbus", name = "Queue")]
#[derive(Debug)]
pub(crate) struct PyQueue {
    cell: Cell<Queue>,
}

closing_pymethods! {
impl PyQueue {
    /// Opens queue `name` in `domain`, creating it if it does not exist (keywords left at
    /// None accept what an existing queue has; see `Topic.create_or_open`).
    #[staticmethod]
    #[pyo3(signature = (domain, name, *, capacity=None, max_message_len=None, mode=None, group=None, schema=None))]
    fn create_or_open(
        domain: &PyDomain,
        name: &str,
        capacity: Option<u64>,
        max_message_len: Option<usize>,
        mode: Option<u32>,
        group: Option<u32>,
        schema: Option<PyRef<'_, PySchema>>,
    ) -> PyResult<PyQueue> {
        let schema = schema_arg(schema);
        let config = config_from_args!(QueueConfig::default(); capacity, max_message_len, mode, group, schema);
        let queue = Queue::create_or_open(&domain.inner, name, &config).or_raise()?;
        Ok(PyQueue { cell: Cell::new(queue, "queue") })
    }

    /// The queue's schema, set by its creator (`Schema`), or None if it has none.
    #[getter]
    fn schema(&self) -> PyResult<Option<PySchema>> {
        Ok(self.cell.with_ref(|c| schema_of(c.schema()))?)
    }

    /// Opens the existing queue `name` in `domain`.
    #[staticmethod]
    fn open(domain: &PyDomain, name: &str) -> PyResult<PyQueue> {
        let queue = Queue::open(&domain.inner, name).or_raise()?;
        Ok(PyQueue { cell: Cell::new(queue, "queue") })
    }

    /// The queue's state (read permission is enough): a dict with `capacity`,
    /// `max_message_len`, `depth`, `producers`, `consumers`, `sent`, `received`,
    /// `abandoned` and `lost`.
    #[staticmethod]
    fn status<'py>(py: Python<'py>, domain: &PyDomain, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let s = Queue::status(&domain.inner, name).or_raise()?;
        Ok(py_dict!(py, {
            "capacity" => s.capacity,
            "max_message_len" => s.max_message_len,
            "depth" => s.depth,
            "producers" => s.producers,
            "consumers" => s.consumers,
            "sent" => s.sent,
            "received" => s.received,
            "abandoned" => s.abandoned,
            "lost" => s.lost,
        }))
    }

    /// A new producer.
    fn producer(&self) -> PyResult<PyProducer> {
        let p = self.cell.with(|q| q.producer())?.or_raise()?;
        Ok(PyProducer { cell: Cell::new(p, "producer") })
    }

    /// A new consumer.
    fn consumer(&self) -> PyResult<PyConsumer> {
        let c = self.cell.with(|q| q.consumer())?.or_raise()?;
        Ok(PyConsumer::new(c))
    }
}

/// Unmaps the queue (endpoints made from it keep working).
fn close;

/// Maps every page of the queue into this process now, so that no send or receive of
/// this process takes a page fault the first time it touches a page: for a long-lived
/// process on a latency path (advice only; docs/topic.md, "Sizing").
fn prefault -> (), without_gil;

/// How many messages the queue holds.
#[getter]
fn capacity -> u64;

/// The largest message, in bytes.
#[getter]
fn max_message_len -> usize;
}

/// Sends into a queue; `send` waits for room.
#[pyclass(frozen, module = "shmbus", name = "Producer")]
#[derive(Debug)]
pub(crate) struct PyProducer {
    pub(crate) cell: Cell<Producer>,
}

closing_pymethods! {
impl PyProducer {
    /// Sends `data` (any contiguous bytes-like object) without waiting: `Full` if the queue
    /// is full.
    fn try_send(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = Bytes::get(data)?;
        Ok(py.detach(|| self.cell.with(|p| p.try_send(bytes.as_slice()).or_raise()))??)
    }

    /// Sends `data`, waiting up to `timeout` seconds for room (None: for ever; `Timeout`
    /// after). The GIL is released while waiting; Ctrl-C interrupts.
    #[pyo3(signature = (data, timeout=None))]
    fn send(&self, py: Python<'_>, data: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<()> {
        let bytes = Bytes::get(data)?;
        blocking(py, timeout_arg(timeout)?, |d| self.cell.with(|p| p.send_timeout(bytes.as_slice(), d).or_raise())?)
    }
}

/// Releases the producer's participant entry.
fn close;

/// Whether a `try_send` would find room now.
fn has_room -> bool;

/// The largest message, in bytes.
#[getter]
fn max_message_len -> usize;
}

/// Receives from a queue, as `bytes` (the queue copies: it has no zero-copy receive).
/// Iterating blocks for each next message.
#[pyclass(frozen, module = "shmbus", name = "Consumer")]
#[derive(Debug)]
pub(crate) struct PyConsumer {
    pub(crate) cell: Cell<Consumer>,
    /// Owned receives copy once (see [`PyConsumer::sized`]): the queue's messages may be
    /// [`ONE_COPY_FROM`] bytes or longer.
    one_copy: bool,
    /// The length of the last message an owned receive took: the size of the next one's
    /// `bytes`, made before the message is taken.
    last_len: AtomicUsize,
}

/// What one receive into a buffer got: the message's length, or, when it did not fit, the
/// length it needs (the consumer then keeps it for its next receive).
type Into = Result<usize, usize>;

impl PyConsumer {
    fn new(c: Consumer) -> PyConsumer {
        let one_copy = c.max_message_len() >= ONE_COPY_FROM;
        PyConsumer { cell: Cell::new(c, "consumer"), one_copy, last_len: AtomicUsize::new(0) }
    }

    /// An owned receive copied once. A queue's pop cannot be undone and its length is known
    /// only once it is taken, so the `bytes` is made first, as long as the last message this
    /// consumer received, and `into` receives into it: one pass when messages keep their
    /// length (frames). A shorter message is copied out of it again; a longer one is kept by
    /// the consumer (in its own buffer, which it reuses), and received at once into a
    /// `bytes` of its length. A poll that finds nothing has made that `bytes` all the same
    /// (uninitialised: an allocation, no page written); deciding by a look at the queue
    /// first would let a message that lands between the look and the pop take the two-copy
    /// path, which busy-polling receivers hit on a large share of their messages.
    fn sized<'py>(
        &self,
        py: Python<'py>,
        mut into: impl FnMut(&mut [u8]) -> PyResult<Into>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let guess = self.last_len.load(Ordering::Relaxed);
        let mut fresh = copy::Fresh::new(py, guess)?;
        match into(fresh.bytes_mut())? {
            Ok(n) if n == guess => Ok(fresh.into_bytes()),
            Ok(n) => {
                self.last_len.store(n, Ordering::Relaxed);
                copy::bytes(py, &fresh.bytes_mut()[..n])
            }
            Err(needed) => {
                self.last_len.store(needed, Ordering::Relaxed);
                let mut fresh = copy::Fresh::new(py, needed)?;
                match into(fresh.bytes_mut())? {
                    Ok(n) if n == needed => Ok(fresh.into_bytes()),
                    // The kept message is returned first, whole: nothing else can come.
                    _ => Err(Fail::new("Error", "the message kept by this consumer changed length").into()),
                }
            }
        }
    }
}

/// A receive into a buffer's outcome as [`Into`], or its exception.
fn into_or_fail<E: shmbus::Failure + 'static>(r: Result<usize, RecvIntoSliceError<E>>) -> Result<Into, Fail> {
    match r {
        Ok(n) => Ok(Ok(n)),
        Err(RecvIntoSliceError::TooSmall { needed, .. }) => Ok(Err(needed)),
        Err(e) => Err(Fail::of(e)),
    }
}

closing_pymethods! {
impl PyConsumer {
    /// The next message without waiting: `Empty` if there is none.
    fn try_recv<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        if self.one_copy {
            return self.sized(py, |dst| {
                let len = dst.len();
                Ok(into_or_fail(copy::into_buffer(py, len, || self.cell.with(|c| c.try_recv_into_slice(dst)))?)?)
            });
        }
        let v = self.cell.with(|c| c.try_recv().or_raise())??;
        Ok(PyBytes::new(py, &v))
    }

    /// The next message, waiting up to `timeout` seconds (None: for ever).
    #[pyo3(signature = (timeout=None))]
    fn recv<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyBytes>> {
        if self.one_copy {
            let timeout = timeout_arg(timeout)?;
            return self.sized(py, |dst| {
                blocking(py, timeout, |d| into_or_fail(self.cell.with(|c| c.recv_into_slice_timeout(dst, d))?))
            });
        }
        let v = blocking(py, timeout_arg(timeout)?, |d| self.cell.with(|c| c.recv_timeout(d).or_raise())?)?;
        Ok(PyBytes::new(py, &v))
    }

    /// Copies the next message into `buffer` (any writable buffer: a `bytearray`, a numpy
    /// array, a writable `memoryview`, ...), without waiting: one copy, into memory the
    /// caller keeps, and no allocation. Returns its length; the message is `buffer[:len]`.
    /// A buffer too small raises `BufferTooSmall` (`.needed` bytes): the message is then
    /// kept by this consumer and returned by its next receive. Raises what `try_recv`
    /// raises otherwise.
    fn try_recv_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let mut buf = BytesMut::get(buffer)?;
        let len = buf.len();
        let r = copy::into_buffer(py, len, || self.cell.with(|c| c.try_recv_into_slice(buf.as_mut_slice())))?;
        Ok(r.map_err(Fail::of)?)
    }

    /// Copies the next message into `buffer`, waiting up to `timeout` seconds (None: for
    /// ever; `Timeout` after), as `try_recv_into` does.
    #[pyo3(signature = (buffer, timeout=None))]
    fn recv_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<usize> {
        let mut buf = BytesMut::get(buffer)?;
        blocking(py, timeout_arg(timeout)?, |d| {
            let r = self.cell.with(|c| c.recv_into_slice_timeout(buf.as_mut_slice(), d))?;
            r.map_err(Fail::of)
        })
    }

    /// The next message, awaited: `await consumer.recv_async()` returns what `recv` returns and
    /// raises what it raises, without a thread waiting (docs/python.md, "Async"). `timeout`
    /// in seconds (None: for ever; `Timeout` after). Cancellation-safe: a cancelled await
    /// takes nothing.
    #[pyo3(signature = (timeout=None))]
    fn recv_async<'py>(slf: &Bound<'py, Self>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        aio::recv_async(slf.as_any(), timeout, QueueRecvTimeoutError::Timeout)
    }

    /// One poll of an async receive (for `shmbus._async`): the message (bytes), or None when it
    /// waits (`wake` is then registered with the waiter thread).
    fn _poll_recv<'py>(
        &self,
        py: Python<'py>,
        reg: &PyRegistration,
        wake: PyRef<'_, PyWake>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        // A message already there is copied once; only when there is none does the poll
        // below register the wake-up (and a message that races in is taken by it).
        if self.one_copy {
            match self.try_recv(py) {
                Err(e) if is_class(py, &e, "Empty") => {}
                r => return r.map(Some),
            }
        }
        let v = aio::poll_endpoint(py, &self.cell, reg, &wake, Fail::of)?;
        Ok(v.map(|v| PyBytes::new(py, &v)))
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.recv(py, None)
    }

    /// The messages, awaited one by one: `async for msg in consumer` (never ends by itself).
    fn __aiter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        aio::aiter(slf.as_any(), None)
    }
}

/// Releases the consumer's participant entry.
fn close;

/// Whether a `try_recv` would find a message now.
fn has_message -> bool;

/// The largest message, in bytes.
#[getter]
fn max_message_len -> usize;
}
