//! `shmbus.Service`: request/response between clients and competing servers.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use shmbus::service::{
    ActiveRequest, RequestRecvTimeoutError, RespondError, ResponseRecvTimeoutError, Service, ServiceConfig,
};
use shmbus::{Client, Server};

use crate::block::{blocking, timeout_arg, Bytes};
use crate::cell::Cell;
use crate::domain::PyDomain;
use crate::errors::{Fail, OrRaise};
use crate::methods::{closing_pymethods, config_from_args, py_dict};
use crate::r#async::{self as aio, PyRegistration, PyWake};
use crate::schema::{schema_arg, schema_of, PySchema};

/// A response's id, bytes and last flag.
fn parts(r: shmbus::service::Response) -> (u64, Vec<u8>, bool) {
    let (id, last) = (r.request_id(), r.is_last());
    (id, r.into_data(), last)
}

/// A service. Make one with `Service.create_or_open` or `Service.open`; endpoints come from
/// `server()` and `client()`.
#[pyclass(frozen, module = "shmbus", name = "Service")]
#[derive(Debug)]
pub(crate) struct PyService {
    cell: Cell<Service>,
}

closing_pymethods! {
impl PyService {
    /// Opens service `name` in `domain`, creating it if it does not exist (keywords left at
    /// None accept what an existing service has).
    #[staticmethod]
    #[pyo3(signature = (domain, name, *, max_servers=None, max_clients=None, max_in_flight=None,
        max_request_len=None, max_response_len=None, response_depth=None, mode=None, group=None,
        request_schema=None, response_schema=None))]
    #[allow(clippy::too_many_arguments)]
    fn create_or_open(
        domain: &PyDomain,
        name: &str,
        max_servers: Option<usize>,
        max_clients: Option<usize>,
        max_in_flight: Option<usize>,
        max_request_len: Option<usize>,
        max_response_len: Option<usize>,
        response_depth: Option<usize>,
        mode: Option<u32>,
        group: Option<u32>,
        request_schema: Option<PyRef<'_, PySchema>>,
        response_schema: Option<PyRef<'_, PySchema>>,
    ) -> PyResult<PyService> {
        let (request_schema, response_schema) = (schema_arg(request_schema), schema_arg(response_schema));
        let config = config_from_args!(ServiceConfig::default(); max_servers, max_clients, max_in_flight,
            max_request_len, max_response_len, response_depth, mode, group, request_schema, response_schema);
        let svc = Service::create_or_open(&domain.inner, name, &config).or_raise()?;
        Ok(PyService { cell: Cell::new(svc, "service") })
    }

    /// Opens the existing service `name` in `domain`.
    #[staticmethod]
    fn open(domain: &PyDomain, name: &str) -> PyResult<PyService> {
        let svc = Service::open(&domain.inner, name).or_raise()?;
        Ok(PyService { cell: Cell::new(svc, "service") })
    }

    /// The schema of the service's requests, set by its creator (`Schema`), or None if it
    /// has none.
    #[getter]
    fn request_schema(&self) -> PyResult<Option<PySchema>> {
        Ok(self.cell.with_ref(|c| schema_of(c.request_schema()))?)
    }

    /// The schema of the service's responses, set by its creator (`Schema`), or None if it
    /// has none.
    #[getter]
    fn response_schema(&self) -> PyResult<Option<PySchema>> {
        Ok(self.cell.with_ref(|c| schema_of(c.response_schema()))?)
    }

    /// The service's state (read permission is enough): a dict with its layout
    /// (`max_servers`, `max_clients`, `max_in_flight`, `max_request_len`,
    /// `max_response_len`, `response_depth`), the live `servers` and `clients`, the requests
    /// `pending` and `in_flight` now and `abandoned`, and over its life `requests`,
    /// `responses`, `timeouts`, `server_gone` and `failed`.
    #[staticmethod]
    fn status<'py>(py: Python<'py>, domain: &PyDomain, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let s = Service::status(&domain.inner, name).or_raise()?;
        Ok(py_dict!(py, {
            "max_servers" => s.max_servers,
            "max_clients" => s.max_clients,
            "max_in_flight" => s.max_in_flight,
            "max_request_len" => s.max_request_len,
            "max_response_len" => s.max_response_len,
            "response_depth" => s.response_depth,
            "servers" => s.servers,
            "clients" => s.clients,
            "pending" => s.pending,
            "in_flight" => s.in_flight,
            "abandoned" => s.abandoned,
            "requests" => s.requests,
            "responses" => s.responses,
            "timeouts" => s.timeouts,
            "server_gone" => s.server_gone,
            "failed" => s.failed,
        }))
    }

    /// Joins the service as one of its servers.
    fn server(&self) -> PyResult<PyServer> {
        let s = self.cell.with(|svc| svc.server())?.or_raise()?;
        Ok(PyServer { cell: Cell::new(s, "server") })
    }

    /// Joins the service as a client.
    fn client(&self) -> PyResult<PyClient> {
        let c = self.cell.with(|svc| svc.client())?.or_raise()?;
        Ok(PyClient { cell: Cell::new(c, "client") })
    }
}

/// Unmaps the service (endpoints made from it keep working).
fn close;

/// Maps every page of the service into this process now (advice only; docs/topic.md,
/// "Sizing").
fn prefault -> (), without_gil;

/// The largest request, in bytes.
#[getter]
fn max_request_len -> usize;

/// The largest response, in bytes.
#[getter]
fn max_response_len -> usize;

/// Requests one client may have unanswered.
#[getter]
fn max_in_flight -> usize;
}

/// A response: `request_id`, `data` (bytes) and `last` (the request's stream is over).
#[pyclass(frozen, module = "shmbus", name = "Response", get_all)]
#[derive(Debug)]
pub(crate) struct PyResponse {
    request_id: u64,
    data: Py<PyBytes>,
    last: bool,
}

#[pymethods]
impl PyResponse {
    fn __len__(&self, py: Python<'_>) -> usize {
        self.data.bind(py).as_bytes().len()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("Response(request_id={}, len={}, last={})", self.request_id, self.__len__(py), self.last)
    }
}

impl PyResponse {
    fn new(py: Python<'_>, (request_id, data, last): (u64, Vec<u8>, bool)) -> PyResponse {
        PyResponse { request_id, data: PyBytes::new(py, &data).unbind(), last }
    }
}

/// Sends requests and reads the responses to them, which reach this client alone.
#[pyclass(frozen, module = "shmbus", name = "Client")]
#[derive(Debug)]
pub(crate) struct PyClient {
    pub(crate) cell: Cell<Client>,
}

closing_pymethods! {
impl PyClient {
    /// Sends `data` (any contiguous bytes-like object) as a request, without waiting;
    /// returns its id. Raises `Full` with `max_in_flight` requests unanswered,
    /// `Disconnected` with no server, `TooLarge` over `max_request_len`.
    fn try_send_request(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<u64> {
        let bytes = Bytes::get(data)?;
        Ok(py.detach(|| self.cell.with(|c| c.try_send_request(bytes.as_slice()).map_err(Fail::of)))??)
    }

    /// The next response to any request in flight, waiting up to `timeout` seconds (None:
    /// for ever; `Timeout` after): a `Response`. Raises `Disconnected` when the server
    /// answering it died, `RequestFailed` when it failed it, `Empty` with nothing in flight.
    #[pyo3(signature = (timeout=None))]
    fn recv_response(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<PyResponse> {
        let r = blocking(py, timeout_arg(timeout)?, |d| {
            self.cell
                .with(|c| c.recv_response_timeout(d).map(parts))?
                .map_err(Fail::of)
        })?;
        Ok(PyResponse::new(py, r))
    }

    /// The next response to any request in flight, without waiting (`Empty` if none yet).
    fn try_recv_response(&self, py: Python<'_>) -> PyResult<PyResponse> {
        let r = self
            .cell
            .with(|c| c.try_recv_response().map(parts))?
            .map_err(Fail::of)?;
        Ok(PyResponse::new(py, r))
    }

    /// Sends `data` and returns the response's bytes: one round trip, waiting up to
    /// `timeout` seconds (None: for ever). A timeout raises `Timeout` and gives the request
    /// up (a late response is dropped); a server that died raises `Disconnected`, one that
    /// failed the request `RequestFailed`.
    #[pyo3(signature = (data, timeout=None))]
    fn call(&self, py: Python<'_>, data: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<Py<PyBytes>> {
        let bytes = Bytes::get(data)?;
        let timeout = timeout_arg(timeout)?;
        let id = py.detach(|| self.cell.with(|c| c.try_send_request(bytes.as_slice()).map_err(Fail::of)))??;
        let r = blocking(py, timeout, |d| {
            self.cell
                .with(|c| c.recv_response_for_timeout(id, d).map(|r| (r.to_vec(), r.is_last())))?
                .map_err(Fail::of)
        });
        let (data, last) = match r {
            Ok(v) => v,
            Err(e) => {
                // Given up (timed out, or interrupted): a late response is dropped.
                let _ = self.cell.with(|c| c.cancel(id));
                return Err(e);
            }
        };
        if !last {
            self.cell.with(|c| c.cancel(id))?;
        }
        Ok(PyBytes::new(py, &data).unbind())
    }

    /// The next response to any request in flight, awaited (docs/python.md, "Async"):
    /// what `recv_response` returns and raises, without a thread waiting. Cancellation-safe.
    #[pyo3(signature = (timeout=None))]
    fn recv_response_async<'py>(slf: &Bound<'py, Self>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        aio::recv_async(slf.as_any(), timeout, ResponseRecvTimeoutError::Timeout)
    }

    /// `call`, awaited: sends `data` and resolves to the response's bytes. For one call at a
    /// time: with other requests of this client in flight it raises `Busy` (use
    /// `try_send_request` and `recv_response_async` for several). A timeout, or a
    /// cancelled await, gives the request up.
    #[pyo3(signature = (data, timeout=None))]
    fn call_async<'py>(slf: &Bound<'py, Self>, data: &Bound<'py, PyAny>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        timeout_arg(timeout)?;
        let this = slf.get();
        if this.cell.with(|c| c.in_flight())? != 0 {
            return Err(Fail::new(
                "Busy",
                "call_async makes one call at a time: this client has requests in flight; read their responses first",
            )
            .into());
        }
        let id = this.try_send_request(py, data)?;
        aio::helper_call(py, "call", (slf, id, timeout, ResponseRecvTimeoutError::Timeout.to_string()))
    }

    /// One poll of an async receive (for `shmbus._async`): the `Response`, or None when it
    /// waits (`wake` is then registered with the waiter thread).
    fn _poll_recv(slf: Bound<'_, Self>, reg: &PyRegistration, wake: PyRef<'_, PyWake>) -> PyResult<Option<PyResponse>> {
        let py = slf.py();
        let r = aio::poll_endpoint(py, &slf.get().cell, reg, &wake, Fail::of)?;
        Ok(r.map(|r| PyResponse::new(py, parts(r))))
    }

    /// Gives request `id` up: a response that comes later is dropped. Returns whether it
    /// was in flight.
    fn cancel(&self, id: u64) -> PyResult<bool> {
        Ok(self.cell.with(|c| c.cancel(id))?)
    }

    /// Whether request `id` is in flight (sent, not given up, its last response not read).
    fn is_pending(&self, id: u64) -> PyResult<bool> {
        Ok(self.cell.with(|c| c.is_pending(id))?)
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The responses, one by one, until none is in flight.
    fn __next__(&self, py: Python<'_>) -> PyResult<PyResponse> {
        let r = blocking(py, None, |d| match self.cell.with(|c| c.recv_response_timeout(d).map(parts))? {
            Ok(r) => Ok(Some(r)),
            Err(ResponseRecvTimeoutError::NoneInFlight) => Ok(None),
            Err(e) => Err(Fail::of(e)),
        })?;
        let r = r.ok_or_else(|| pyo3::exceptions::PyStopIteration::new_err(()))?;
        Ok(PyResponse::new(py, r))
    }
}

/// Leaves the service; requests in flight are given up.
fn close;

/// Requests sent and not over yet.
#[getter]
fn in_flight -> usize;
}

/// Answers requests, competing with the service's other servers.
#[pyclass(frozen, module = "shmbus", name = "Server")]
#[derive(Debug)]
pub(crate) struct PyServer {
    pub(crate) cell: Cell<Server>,
}

closing_pymethods! {
impl PyServer {
    /// The next request, without waiting (`Empty` if none): a `Request`.
    fn try_recv(&self, py: Python<'_>) -> PyResult<PyRequest> {
        let req = self.cell.with(|s| s.try_recv())?.map_err(Fail::of)?;
        PyRequest::new(py, req)
    }

    /// The next request, waiting up to `timeout` seconds (None: for ever).
    #[pyo3(signature = (timeout=None))]
    fn recv(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<PyRequest> {
        let req = blocking(py, timeout_arg(timeout)?, |d| self.cell.with(|s| s.recv_timeout(d))?.map_err(Fail::of))?;
        PyRequest::new(py, req)
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<PyRequest> {
        self.recv(py, None)
    }

    /// The next request, awaited (docs/python.md, "Async"): what `recv` returns and
    /// raises, without a thread waiting. Cancellation-safe: a cancelled await takes nothing.
    #[pyo3(signature = (timeout=None))]
    fn recv_async<'py>(slf: &Bound<'py, Self>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        aio::recv_async(slf.as_any(), timeout, RequestRecvTimeoutError::Timeout)
    }

    /// One poll of an async receive (for `shmbus._async`): the `Request`, or None when it
    /// waits.
    fn _poll_recv(slf: Bound<'_, Self>, reg: &PyRegistration, wake: PyRef<'_, PyWake>) -> PyResult<Option<PyRequest>> {
        let py = slf.py();
        let r = aio::poll_endpoint(py, &slf.get().cell, reg, &wake, Fail::of)?;
        r.map(|req| PyRequest::new(py, req)).transpose()
    }

    /// The requests, awaited one by one: `async for req in server` (never ends by itself).
    fn __aiter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        aio::aiter(slf.as_any(), None)
    }
}

/// Leaves the service (requests being answered keep the server's place until finished).
fn close;

/// The largest response, in bytes.
#[getter]
fn max_response_len -> usize;
}

/// A request a server took: `id`, `data` (bytes); answer it with `respond` (more may
/// follow), `respond_last`, `end` or `fail`. A request garbage-collected unfinished is ended
/// (its client reads an empty last response).
#[pyclass(frozen, module = "shmbus", name = "Request")]
#[derive(Debug)]
pub(crate) struct PyRequest {
    req: Mutex<Option<ActiveRequest>>,
    /// The request's id, as its client numbered it.
    #[pyo3(get)]
    id: u64,
    /// The request's bytes.
    #[pyo3(get)]
    data: Py<PyBytes>,
}

impl PyRequest {
    fn new(py: Python<'_>, req: ActiveRequest) -> PyResult<PyRequest> {
        let data = PyBytes::new(py, req.data()).unbind();
        Ok(PyRequest { id: req.id(), data, req: Mutex::new(Some(req)) })
    }

    /// Runs `f` on the request, or raises `Closed` once it is finished.
    fn with<R>(&self, f: impl FnOnce(&mut Option<ActiveRequest>) -> Result<R, Fail>) -> Result<R, Fail> {
        let mut g = self.req.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            return Err(Fail::of(RespondError::Finished));
        }
        f(&mut g)
    }

    fn respond_with(&self, py: Python<'_>, data: &Bound<'_, PyAny>, last: bool, timeout: Option<f64>) -> PyResult<()> {
        let bytes = Bytes::get(data)?;
        let timeout = timeout_arg(timeout)?;
        py.detach(|| {
            self.with(|r| {
                let req = r.as_mut().expect("checked");
                let wait = timeout.map_or(shmbus::Wait::Forever, shmbus::Wait::For);
                let out = req.respond_with(bytes.as_slice(), last, wait);
                if last || matches!(out, Err(RespondError::ClientGone)) {
                    r.take(); // finished (a response to a client that went is dropped)
                }
                out.map_err(Fail::of)
            })
        })?;
        Ok(())
    }
}

#[pymethods]
impl PyRequest {
    /// Sends `data` as one response of a stream; more may follow. Waits up to `timeout`
    /// seconds (None: for ever) while the client has `response_depth` responses unread
    /// (`Full` after). `Disconnected` when the client gave up or died: the response was
    /// dropped, and the request is finished.
    #[pyo3(signature = (data, timeout=None))]
    fn respond(&self, py: Python<'_>, data: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<()> {
        self.respond_with(py, data, false, timeout)
    }

    /// Sends `data` as the last response, finishing the request.
    #[pyo3(signature = (data, timeout=None))]
    fn respond_last(&self, py: Python<'_>, data: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<()> {
        self.respond_with(py, data, true, timeout)
    }

    /// Finishes the request without another response (its client reads an empty last one).
    fn end(&self) -> PyResult<()> {
        Ok(self.with(|r| {
            r.take().expect("checked").end();
            Ok(())
        })?)
    }

    /// Finishes the request as failed: its client gets `RequestFailed`.
    fn fail(&self) -> PyResult<()> {
        Ok(self.with(|r| {
            r.take().expect("checked").fail();
            Ok(())
        })?)
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.data.bind(py).as_bytes().len()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("Request(id={}, len={})", self.id, self.__len__(py))
    }
}
