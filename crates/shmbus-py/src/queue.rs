//! `shmbus.Queue`: a bounded MPMC queue; each message goes to exactly one consumer.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use shmbus::{Consumer, Producer, Queue, QueueConfig, QueueRecvTimeoutError};

use crate::block::{blocking, timeout_arg, Bytes};
use crate::cell::{Cell, Lending};
use crate::domain::PyDomain;
use crate::errors::{Fail, OrRaise};
use crate::methods::{closing_pymethods, config_from_args, py_dict};
use crate::r#async::{self as aio, PyRegistration, PyWake};

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
    #[pyo3(signature = (domain, name, *, capacity=None, max_message_len=None, mode=None, group=None))]
    fn create_or_open(
        domain: &PyDomain,
        name: &str,
        capacity: Option<u64>,
        max_message_len: Option<usize>,
        mode: Option<u32>,
        group: Option<u32>,
    ) -> PyResult<PyQueue> {
        let config = config_from_args!(QueueConfig::default(); capacity, max_message_len, mode, group);
        let queue = Queue::create_or_open(&domain.inner, name, &config).or_raise()?;
        Ok(PyQueue { cell: Cell::new(queue, Lending::Exclusive, "queue") })
    }

    /// Opens the existing queue `name` in `domain`.
    #[staticmethod]
    fn open(domain: &PyDomain, name: &str) -> PyResult<PyQueue> {
        let queue = Queue::open(&domain.inner, name).or_raise()?;
        Ok(PyQueue { cell: Cell::new(queue, Lending::Exclusive, "queue") })
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
        Ok(PyProducer { cell: Cell::new(p, Lending::Exclusive, "producer") })
    }

    /// A new consumer.
    fn consumer(&self) -> PyResult<PyConsumer> {
        let c = self.cell.with(|q| q.consumer())?.or_raise()?;
        Ok(PyConsumer { cell: Cell::new(c, Lending::Exclusive, "consumer") })
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
}

closing_pymethods! {
impl PyConsumer {
    /// The next message without waiting: `Empty` if there is none.
    fn try_recv<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let v = self.cell.with(|c| c.try_recv().or_raise())??;
        Ok(PyBytes::new(py, &v))
    }

    /// The next message, waiting up to `timeout` seconds (None: for ever).
    #[pyo3(signature = (timeout=None))]
    fn recv<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyBytes>> {
        let v = blocking(py, timeout_arg(timeout)?, |d| self.cell.with(|c| c.recv_timeout(d).or_raise())?)?;
        Ok(PyBytes::new(py, &v))
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
