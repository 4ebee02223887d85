//! `shmbus.Service`: request/response between clients and competing servers.

use std::ffi::c_int;
use std::sync::OnceLock;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use shmbus::lend::{LendError, LendOr, Lender};
use shmbus::service::{
    ActiveRequest, OwnedRequestLoan, OwnedResponseLoan, OwnedResponseRef, RequestRecvTimeoutError, RespondError,
    ResponseRecvTimeoutError, ResponseRef, Service, ServiceConfig,
};
use shmbus::{Client, ErrorKind, Failure, Server, Wait};

use crate::block::{blocking, blocking_while, timeout_arg, Bytes};
use crate::cell::Cell;
use crate::copy;
use crate::domain::PyDomain;
use crate::errors::{Fail, OrRaise};
use crate::held::{Held, Names, LOAN};
use crate::methods::{closing_pymethods, config_from_args, lent_pymethods, py_dict};
use crate::r#async::{self as aio, PyRegistration, PyWake};
use crate::schema::{schema_arg, schema_of, PySchema};

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
        let (c, max) = self.cell.with(|svc| (svc.client(), svc.max_response_len()))?;
        Ok(PyClient { cell: Cell::new(c.or_raise()?, "client"), one_copy: max >= copy::ONE_COPY_FROM })
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

/// A response a copying receive took: still in its cell (a service whose responses may be
/// large: it is copied once, straight into `bytes`, see `copy.rs`), or copied out already
/// (small responses, for which a lent item costs more than a second copy).
enum Got {
    InPlace(OwnedResponseRef),
    Copied { request_id: u64, data: Vec<u8>, last: bool },
}

impl Got {
    fn is_last(&self) -> bool {
        match self {
            Got::InPlace(r) => r.is_last(),
            Got::Copied { last, .. } => *last,
        }
    }

    /// The bytes, in a `bytes` object (the cell handed back after the copy).
    fn into_bytes(self, py: Python<'_>) -> PyResult<Bound<'_, PyBytes>> {
        match self {
            Got::InPlace(r) => copy::lent_bytes(py, r, |r| r.data(), drop),
            Got::Copied { data, .. } => Ok(PyBytes::new(py, &data)),
        }
    }

    fn into_response(self, py: Python<'_>) -> PyResult<PyResponse> {
        let request_id = match &self {
            Got::InPlace(r) => r.request_id(),
            Got::Copied { request_id, .. } => *request_id,
        };
        let last = self.is_last();
        Ok(PyResponse { request_id, data: self.into_bytes(py)?.unbind(), last })
    }
}

impl PyClient {
    /// The response `recv` (a `recv_response_ref` form) reads, for a copying receive.
    fn take<E: Failure>(&self, recv: impl FnOnce(&mut Client) -> Result<ResponseRef<'_>, E>) -> Result<Got, Fail> {
        if self.one_copy {
            return self.cell.owned(|c| Client::response_owned(c, recv)).map(Got::InPlace);
        }
        let copied =
            |r: ResponseRef<'_>| Got::Copied { request_id: r.request_id(), data: r.to_vec(), last: r.is_last() };
        self.cell.with(|c| recv(c).map(copied))?.map_err(Fail::of)
    }
}

/// Sends requests and reads the responses to them, which reach this client alone.
#[pyclass(frozen, module = "shmbus", name = "Client")]
#[derive(Debug)]
pub(crate) struct PyClient {
    pub(crate) cell: Cell<Client>,
    /// Copying receives go through the response in its cell, one copy (`copy.rs`): the
    /// service's responses may be [`copy::ONE_COPY_FROM`] bytes or longer.
    one_copy: bool,
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
        let r = blocking(py, timeout_arg(timeout)?, |d| self.take(|c| c.recv_response_ref_timeout(d)))?;
        r.into_response(py)
    }

    /// The next response to any request in flight, without waiting (`Empty` if none yet).
    fn try_recv_response(&self, py: Python<'_>) -> PyResult<PyResponse> {
        self.take(Client::try_recv_response_ref)?.into_response(py)
    }

    /// A request slot to write a request in place (zero copy): a `RequestLoan` exporting a
    /// writable buffer of `max_request_len` bytes; `loan.send(len)` sends it and returns its
    /// id. Refused as `try_send_request` is. Until it is sent or released, this client
    /// refuses other calls (`Busy`).
    fn loan_request(slf: Bound<'_, Self>) -> PyResult<PyRequestLoan> {
        let mut lent = slf.get().cell.owned(Client::loan_request_owned)?;
        let (ptr, len) = (lent.as_mut_ptr(), lent.len());
        Ok(PyRequestLoan { held: Held::new(slf.unbind(), lent, ptr, len, true, LOAN) })
    }

    /// The next response to any request in flight, read in place (zero copy), waiting up to
    /// `timeout` seconds (None: for ever): a `ResponseRef`. Raises as `recv_response` does.
    /// Until it is released, this client refuses other calls (`Busy`).
    #[pyo3(signature = (timeout=None))]
    fn recv_response_ref(slf: Bound<'_, Self>, timeout: Option<f64>) -> PyResult<PyResponseRef> {
        let this = slf.get();
        let lent = blocking(slf.py(), timeout_arg(timeout)?, |d| {
            this.cell.owned(|c| Client::response_owned(c, |c| c.recv_response_ref_timeout(d)))
        })?;
        Ok(PyResponseRef::new(slf.unbind(), lent))
    }

    /// The next response to any request in flight, read in place, without waiting (`Empty`
    /// if none yet).
    fn try_recv_response_ref(slf: Bound<'_, Self>) -> PyResult<PyResponseRef> {
        let lent = slf.get().cell.owned(|c| Client::response_owned(c, Client::try_recv_response_ref))?;
        Ok(PyResponseRef::new(slf.unbind(), lent))
    }

    /// The next response to request `id`, read in place, waiting up to `timeout` seconds;
    /// responses to other requests wait for their turn. `Empty` when `id` is not in flight.
    #[pyo3(signature = (id, timeout=None))]
    fn recv_response_ref_for(slf: Bound<'_, Self>, id: u64, timeout: Option<f64>) -> PyResult<PyResponseRef> {
        let this = slf.get();
        let lent = blocking(slf.py(), timeout_arg(timeout)?, |d| {
            this.cell.owned(|c| Client::response_owned(c, |c| c.recv_response_for_timeout(id, d)))
        })?;
        Ok(PyResponseRef::new(slf.unbind(), lent))
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
        let r = blocking(py, timeout, |d| self.take(|c| c.recv_response_for_timeout(id, d)));
        let (data, last) = match r {
            Ok(r) => {
                let last = r.is_last();
                (r.into_bytes(py)?, last)
            }
            Err(e) => {
                // Given up (timed out, or interrupted): a late response is dropped.
                let _ = self.cell.with(|c| c.cancel(id));
                return Err(e);
            }
        };
        if !last {
            self.cell.with(|c| c.cancel(id))?;
        }
        Ok(data.unbind())
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
        // A response already there is copied once; only when there is none does the poll
        // below register the wake-up (and a response that races in is taken by it).
        if slf.get().one_copy {
            match slf.get().take(Client::try_recv_response_ref) {
                Ok(got) => return Ok(Some(got.into_response(py)?)),
                // Nothing yet (or nothing in flight, which the poll reports).
                Err(f) if f.is(ErrorKind::Empty) => {}
                Err(f) => return Err(f.into()),
            }
        }
        let r = aio::poll_endpoint(py, &slf.get().cell, reg, &wake, Fail::of)?;
        r.map(|r| Got::Copied { request_id: r.request_id(), last: r.is_last(), data: r.into_data() }.into_response(py))
            .transpose()
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
        let r = blocking(py, None, |d| match self.take(|c| c.recv_response_ref_timeout(d)) {
            Ok(r) => Ok(Some(r)),
            // Nothing in flight: the iteration is over.
            Err(f) if f.is(ErrorKind::Empty) => Ok(None),
            Err(f) => Err(f),
        })?;
        let r = r.ok_or_else(|| pyo3::exceptions::PyStopIteration::new_err(()))?;
        r.into_response(py)
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
    fn try_recv(slf: Bound<'_, Self>) -> PyResult<PyRequest> {
        let req = slf.get().cell.with(|s| s.try_recv())?.map_err(Fail::of)?;
        Ok(PyRequest::new(slf.unbind(), req))
    }

    /// The next request, waiting up to `timeout` seconds (None: for ever).
    #[pyo3(signature = (timeout=None))]
    fn recv(slf: Bound<'_, Self>, timeout: Option<f64>) -> PyResult<PyRequest> {
        let this = slf.get();
        let req = blocking(slf.py(), timeout_arg(timeout)?, |d| this.cell.with(|s| s.recv_timeout(d))?.map_err(Fail::of))?;
        Ok(PyRequest::new(slf.unbind(), req))
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(slf: Bound<'_, Self>) -> PyResult<PyRequest> {
        Self::recv(slf, None)
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
        let r = aio::poll_endpoint(slf.py(), &slf.get().cell, reg, &wake, Fail::of)?;
        Ok(r.map(|req| PyRequest::new(slf.unbind(), req)))
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

/// A request a server took: `id`, its bytes (`data`, a copy; or in place, zero-copy, through
/// the buffer protocol and DLPack: `memoryview(req)`, `numpy.frombuffer(req, numpy.uint8)`,
/// `numpy.from_dlpack(req)`), answered with `respond` (more may follow), `respond_last`,
/// `end` or `fail`, or in place with `loan()`. Its bytes stay in the client's slot, unchanged,
/// until the request is finished; so finishing it while views of them live raises
/// `BufferError`. A request garbage-collected unfinished is ended (its client reads an empty
/// last response); so is one `release()`d or left at the end of a `with` block.
#[pyclass(frozen, module = "shmbus", name = "Request")]
#[derive(Debug)]
pub(crate) struct PyRequest {
    /// The request, in a lender so that a response loan can hold it; the item is let go once
    /// the request is finished.
    held: Held<PyServer, Lender<ActiveRequest>>,
    /// The request's id, as its client numbered it.
    #[pyo3(get)]
    id: u64,
    /// `data`, copied at its first read.
    data: OnceLock<Py<PyBytes>>,
}

/// What a request is called in messages.
const REQUEST: Names = Names { what: "request", gone: "finished" };

/// A lender's refusal, in a request's words.
fn request_refused(e: LendError) -> Fail {
    match e {
        LendError::Busy => Fail::new("Busy", "a ResponseLoan of this request is out; send or release it first"),
        LendError::Closed => Fail::of(RespondError::Finished),
    }
}

impl PyRequest {
    fn new(server: Py<PyServer>, req: ActiveRequest) -> PyRequest {
        let (id, bytes) = (req.id(), req.data());
        let (ptr, len) = (bytes.as_ptr().cast_mut(), bytes.len());
        let held = Held::new(server, Lender::new(req), ptr, len, false, REQUEST);
        PyRequest { held, id, data: OnceLock::new() }
    }

    /// The request's lender (`Closed`, as `Finished`, once the request is finished).
    fn lender(&self) -> Result<Lender<ActiveRequest>, Fail> {
        self.held.with_item(Lender::clone).map_err(|_| Fail::of(RespondError::Finished))
    }

    fn respond_with(&self, py: Python<'_>, data: &Bound<'_, PyAny>, last: bool, timeout: Option<f64>) -> PyResult<()> {
        let bytes = Bytes::get(data)?;
        let timeout = timeout_arg(timeout)?;
        // Each slice waits for room with the request's lender locked, never the GIL or this
        // object's lock: another thread may end the request, view it, or (a client in this
        // process) read the responses meanwhile. A full ring is what a slice's wait ends on.
        let respond = |req: &Lender<ActiveRequest>| {
            blocking_while(
                py,
                timeout,
                |f| f.is(ErrorKind::Full),
                |d| match req.with(|r| r.respond_with(bytes.as_slice(), last, Wait::For(d))).map_err(request_refused)? {
                    Err(RespondError::Full) => Err(Fail::of(RespondError::Full)),
                    out => Ok(out),
                },
            )
        };
        if !last {
            let out = respond(&self.lender()?)?;
            self.over_if_gone(&out);
            return Ok(out.map_err(Fail::of)?);
        }
        // The end: not while the request's bytes are viewed (its slot is its client's after
        // it), and no view starts meanwhile.
        let mut end = self.held.settle()?.ok_or_else(|| Fail::of(RespondError::Finished))?;
        let out = respond(end.item())?;
        if matches!(out, Ok(()) | Err(RespondError::ClientGone)) {
            // Answered, or over (the client went): let go of it.
            end.done();
        }
        Ok(out.map_err(Fail::of)?)
    }

    /// Lets go of the request if `out` says its client went: the request is over (its bytes,
    /// if viewed, stay mapped).
    fn over_if_gone<T>(&self, out: &Result<T, RespondError>) {
        if matches!(out, Err(RespondError::ClientGone)) {
            let _ = self.held.release();
        }
    }

    /// `release()`: ends the request as `end()` does, and nothing if it is finished already.
    /// With a response loan out it is refused (`Busy`), as `end()` is: letting go of the
    /// request then would leave it to end whenever the loan went.
    fn release_request(&self, py: Python<'_>) -> PyResult<()> {
        self.finish(py, ActiveRequest::end).map(drop)
    }

    /// Ends the request with `end` (by value), unless its bytes are viewed or a loan is out;
    /// `false` if it was finished already.
    fn finish(&self, py: Python<'_>, end: impl FnOnce(ActiveRequest)) -> PyResult<bool> {
        let Some(mut settling) = self.held.settle()? else { return Ok(false) };
        // The lender's lock may be held by a response's wait (one slice at most).
        let req = py.detach(|| settling.item().take()).map_err(request_refused)?;
        end(req);
        settling.done();
        Ok(true)
    }

    /// [`finish`](Self::finish) for `end()` and `fail()`: `Closed` if it was finished already.
    fn finish_live(&self, py: Python<'_>, end: impl FnOnce(ActiveRequest)) -> PyResult<()> {
        match self.finish(py, end)? {
            true => Ok(()),
            false => Err(Fail::of(RespondError::Finished).into()),
        }
    }
}

lent_pymethods! {
impl PyRequest {
    /// The request's bytes, copied into `bytes` at the first read (before the request is
    /// finished; the copy stays readable after).
    #[getter]
    fn data(&self, py: Python<'_>) -> PyResult<Py<PyBytes>> {
        if let Some(d) = self.data.get() {
            return Ok(d.clone_ref(py));
        }
        let d = self.held.tobytes(py)?.unbind();
        Ok(self.data.get_or_init(|| d).clone_ref(py))
    }

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

    /// A response cell to write in place (zero copy), waiting up to `timeout` seconds (None:
    /// for ever) for room as `respond` does: a `ResponseLoan` exporting a writable buffer of
    /// `max_response_len` bytes. Send it with `loan.send(len)` or `loan.send_last(len)`;
    /// until then the request refuses other answers (`Busy`).
    #[pyo3(signature = (timeout=None))]
    fn loan(slf: Bound<'_, Self>, timeout: Option<f64>) -> PyResult<PyResponseLoan> {
        let this = slf.get();
        let req = this.lender()?;
        // As `respond` waits: in slices, with only the request's lender locked.
        let lent = blocking_while(slf.py(), timeout_arg(timeout)?, |f| f.is(ErrorKind::Full), |d| {
            match ActiveRequest::loan_owned(&req, Wait::For(d)) {
                Ok(l) => Ok(Ok(l)),
                Err(LendOr::Refused(r)) => Err(request_refused(r)),
                Err(LendOr::Failed(RespondError::Full)) => Err(Fail::of(RespondError::Full)),
                Err(LendOr::Failed(e)) => Ok(Err(e)),
            }
        })?;
        this.over_if_gone(&lent);
        Ok(PyResponseLoan::new(slf.unbind(), lent.map_err(Fail::of)?))
    }

    /// Finishes the request without another response (its client reads an empty last one).
    fn end(&self, py: Python<'_>) -> PyResult<()> {
        self.finish_live(py, ActiveRequest::end)
    }

    /// Finishes the request as failed: its client gets `RequestFailed`.
    fn fail(&self, py: Python<'_>) -> PyResult<()> {
        self.finish_live(py, ActiveRequest::fail)
    }

    /// Whether the request is finished (answered, ended, failed or released).
    #[getter]
    fn finished(&self) -> bool {
        !self.held.is_live()
    }

    fn __repr__(&self) -> String {
        format!("Request(id={}, len={})", self.id, self.held.len())
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        // SAFETY: called by Python as `bf_getbuffer` of `slf`, with the view to fill.
        unsafe { slf.get().held.export(slf.as_any(), view, flags) }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.held.unexport()
    }
}

/// Ends the request if it is not finished (as `end()`); `BufferError` while views of its
/// bytes live, `Busy` while a `ResponseLoan` of it is out (send or release that first).
/// Also what leaving a `with` block does.
fn release = PyRequest::release_request;
fn tobytes;
}

/// A response cell lent by `Request.loan()`: write the response into it through the buffer
/// protocol (`memoryview(loan)`, `numpy.frombuffer(loan, numpy.uint8)`), then `send(len)` or
/// `send_last(len)`. Every view must be gone before (else `BufferError`): once sent, the
/// client reads it.
#[pyclass(frozen, module = "shmbus", name = "ResponseLoan")]
#[derive(Debug)]
pub(crate) struct PyResponseLoan {
    held: Held<PyRequest, OwnedResponseLoan>,
}

impl PyResponseLoan {
    fn new(req: Py<PyRequest>, mut lent: OwnedResponseLoan) -> PyResponseLoan {
        let (ptr, len) = (lent.as_mut_ptr(), lent.len());
        PyResponseLoan { held: Held::new(req, lent, ptr, len, true, LOAN) }
    }
}

lent_pymethods! {
impl PyResponseLoan {
    /// Sends the first `len` bytes (default: all of them) as one response; more may follow.
    #[pyo3(signature = (len=None))]
    fn send(&self, len: Option<usize>) -> PyResult<()> {
        let len = self.held.fits(len)?;
        self.held.give_back(|loan| loan.send(len))
    }

    /// Sends the first `len` bytes (default: all of them) as the last response, finishing
    /// the request: `BufferError` while views of the request's bytes live.
    #[pyo3(signature = (len=None))]
    fn send_last(&self, len: Option<usize>) -> PyResult<()> {
        let len = self.held.fits(len)?;
        // The request's end: not while its bytes are viewed, and no view starts meanwhile.
        // A request released while its loan was out has no views left to wait for.
        let settling = self.held.owner().held.settle()?;
        self.held.give_back(|loan| loan.send_last(len))?;
        if let Some(mut s) = settling {
            s.done();
        }
        Ok(())
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        // SAFETY: called by Python as `bf_getbuffer` of `slf`, with the view to fill.
        unsafe { slf.get().held.export(slf.as_any(), view, flags) }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.held.unexport()
    }
}

/// Gives the cell back unsent (nothing is sent). Also what leaving a `with` block does.
fn release;
}

/// A request slot lent by `Client.loan_request()`: write the request into it through the
/// buffer protocol, then `send(len)` it (which returns its id). Every view must be gone
/// before (else `BufferError`). Until then the client refuses other calls (`Busy`).
#[pyclass(frozen, module = "shmbus", name = "RequestLoan")]
#[derive(Debug)]
pub(crate) struct PyRequestLoan {
    held: Held<PyClient, OwnedRequestLoan>,
}

lent_pymethods! {
impl PyRequestLoan {
    /// Sends the first `len` bytes (default: all of them) as a request; returns its id.
    #[pyo3(signature = (len=None))]
    fn send(&self, len: Option<usize>) -> PyResult<u64> {
        let len = self.held.fits(len)?;
        self.held.give_back(|loan| loan.send(len))
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        // SAFETY: called by Python as `bf_getbuffer` of `slf`, with the view to fill.
        unsafe { slf.get().held.export(slf.as_any(), view, flags) }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.held.unexport()
    }
}

/// Gives the slot back unsent (nothing is sent). Also what leaving a `with` block does.
fn release;
}

/// A response read in place, zero-copy, from `Client.recv_response_ref()`: `request_id`,
/// `last`, and its bytes through the buffer protocol and DLPack (read-only). Its cell is
/// handed back to the server when this object and every view of it are gone, or at
/// `release()`; until then the client refuses other calls (`Busy`).
#[pyclass(frozen, module = "shmbus", name = "ResponseRef")]
#[derive(Debug)]
pub(crate) struct PyResponseRef {
    held: Held<PyClient, OwnedResponseRef>,
    /// The id of the request this answers.
    #[pyo3(get)]
    request_id: u64,
    /// Whether this is the request's last response.
    #[pyo3(get)]
    last: bool,
}

impl PyResponseRef {
    fn new(client: Py<PyClient>, lent: OwnedResponseRef) -> PyResponseRef {
        let (request_id, last) = (lent.request_id(), lent.is_last());
        let (ptr, len) = (lent.data().as_ptr().cast_mut(), lent.data().len());
        let names = Names { what: "response", gone: "released" };
        PyResponseRef { held: Held::new(client, lent, ptr, len, false, names), request_id, last }
    }
}

lent_pymethods! {
impl PyResponseRef {
    /// The response's bytes, copied into `bytes`.
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.held.tobytes(py)
    }

    fn __repr__(&self) -> String {
        format!("ResponseRef(request_id={}, len={}, last={})", self.request_id, self.held.len(), self.last)
    }

    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        // SAFETY: called by Python as `bf_getbuffer` of `slf`, with the view to fill.
        unsafe { slf.get().held.export(slf.as_any(), view, flags) }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.held.unexport()
    }
}

/// Hands the cell back now. `BufferError` if views of the response are alive.
fn release;
fn tobytes;
}
