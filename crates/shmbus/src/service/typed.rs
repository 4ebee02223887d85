//! Typed services: [`Pod`] requests and responses instead of bytes, as thin wrappers over
//! [`Client`], [`Server`] and [`ActiveRequest`].
//!
//! A typed config ([`ServiceConfig::for_types`]) sizes the service for one `Req` and one
//! `Resp` and, when both types describe a struct (`#[derive(Pod)]`), stores their
//! `shmbus-pod` schemas as the service's request and response schemas, so tools
//! (`shmbus call`, `shmbus info`) read and write its messages as JSON. Every typed receive
//! checks that a message is exactly one `Req` (or `Resp`): one that is not (sent by a byte
//! client, or a hostile peer) is reported as the receive's `Corrupt` error with the values
//! `len` and `size`; a request of the wrong size is failed back to its client.

use std::marker::PhantomData;
use std::time::Duration;

use super::client::{Client, RequestLoan, ResponseRef};
use super::error::{
    CallError, RequestRecvError, RequestRecvTimeoutError, RequestTryRecvError, RespondError, ResponseRecvError,
    ResponseRecvTimeoutError, ResponseTryRecvError, ServiceTrySendError,
};
use super::handle::Service;
use super::layout::ServiceConfig;
use super::server::{ActiveRequest, ResponseLoan, Server};
use crate::endpoint::forms::wait_forms;
use crate::endpoint::receive::Waited;
use crate::error::{Corrupt, OpenError};
use crate::pod::{bytes_of, check_payload, read_from, ref_from, PayloadType, Pod};
use crate::wait::Wait;

use crate::typed::waitable_as_inner;

/// Requests and responses start 64-byte aligned in their slots.
const ALIGN: usize = 64;

/// What a typed receive reports for a message of `len` bytes that is not one `T`.
fn not_one<T: Pod>(what: &'static str, len: usize) -> Corrupt {
    Corrupt::new(crate::kind::Kind::Service, what).with("len", len as u64).with("size", std::mem::size_of::<T>() as u64)
}

/// `Deref` and `DerefMut` of a typed loan to its value, in place in the byte loan `inner`
/// (a slot's room or a cell: at least one `T` long and 64-byte aligned, checked at open).
macro_rules! value_in_place {
    ($loan:ident) => {
        impl<T: Pod> std::ops::Deref for $loan<'_, T> {
            type Target = T;
            fn deref(&self) -> &T {
                ref_from(&self.inner[..std::mem::size_of::<T>()]).expect("a typed loan holds an aligned value")
            }
        }

        impl<T: Pod> std::ops::DerefMut for $loan<'_, T> {
            fn deref_mut(&mut self) -> &mut T {
                let bytes = &mut self.inner[..std::mem::size_of::<T>()];
                assert_eq!(bytes.as_ptr().align_offset(std::mem::align_of::<T>()), 0, "a typed loan is aligned");
                // SAFETY: one T's bytes, aligned (asserted); every bit pattern is a valid T
                // (Pod), and the borrow of the loan is the only one.
                unsafe { &mut *(bytes.as_mut_ptr() as *mut T) }
            }
        }
    };
}

impl ServiceConfig {
    /// A config for a service of `Req` requests and `Resp` responses: `max_request_len` is
    /// `size_of::<Req>()` and `max_response_len` `size_of::<Resp>()` unless set after this,
    /// and a created service stores both types' `shmbus-pod` schemas when both describe a
    /// struct. Opening a service that carries other schemas fails with
    /// [`OpenError::SchemaMismatch`].
    pub fn for_types<Req: Pod, Resp: Pod>() -> ServiceConfig {
        ServiceConfig::default()
            .max_request_len(std::mem::size_of::<Req>())
            .max_response_len(std::mem::size_of::<Resp>())
            .implied_schemas::<Req, Resp>()
    }
}

impl Service {
    /// Checks that this service's rooms hold a `Req` and a `Resp`, aligned.
    fn check_types<Req: Pod, Resp: Pod>(&self) -> Result<(), OpenError> {
        let path = self.path();
        check_payload(path, None, &PayloadType::of::<Req>(), self.max_request_len(), ALIGN)?;
        check_payload(path, None, &PayloadType::of::<Resp>(), self.max_response_len(), ALIGN)
    }

    /// A new client sending `Req` requests and reading `Resp` responses. Fails with
    /// [`OpenError::TypeMismatch`] if the service's requests or responses cannot hold one
    /// (too small, or aligned to less than the type needs); otherwise as
    /// [`Service::client`].
    pub fn client_of<Req: Pod, Resp: Pod>(&self) -> Result<TypedClient<Req, Resp>, OpenError> {
        self.check_types::<Req, Resp>()?;
        Ok(TypedClient { inner: self.client()?, _types: PhantomData })
    }

    /// A new server reading `Req` requests and answering `Resp` responses. Fails as
    /// [`Service::client_of`] does; otherwise as [`Service::server`].
    pub fn server_of<Req: Pod, Resp: Pod>(&self) -> Result<TypedServer<Req, Resp>, OpenError> {
        self.check_types::<Req, Resp>()?;
        Ok(TypedServer { inner: self.server()?, _types: PhantomData })
    }
}

/// A [`Client`] of `Req` requests and `Resp` responses, from [`Service::client_of`]: a
/// response that is not exactly one `Resp` is reported as `Corrupt` (values `len` and `size`).
pub struct TypedClient<Req: Pod, Resp: Pod> {
    inner: Client,
    _types: PhantomData<fn(Req) -> Resp>,
}

impl<Req: Pod, Resp: Pod> std::fmt::Debug for TypedClient<Req, Resp> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedClient").field("inner", &self.inner).finish()
    }
}

/// A response of a [`TypedClient`]: its request's id, the value, and whether it is the
/// stream's last.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TypedResponse<Resp> {
    /// The id of the request it answers.
    pub request_id: u64,
    /// The response; `None` only for the empty last response that ends a stream (its server
    /// called `end`, or dropped the request unfinished).
    pub value: Option<Resp>,
    /// Whether it is the last response to its request.
    pub last: bool,
}

impl<Req: Pod, Resp: Pod> TypedClient<Req, Resp> {
    /// The byte client underneath.
    pub fn as_bytes(&mut self) -> &mut Client {
        &mut self.inner
    }

    /// Sends a copy of `request`; returns its id (as [`Client::try_send_request`]).
    pub fn try_send_request(&mut self, request: &Req) -> Result<u64, ServiceTrySendError> {
        self.inner.try_send_request(bytes_of(request))
    }

    /// Lends a request slot to build a `Req` in place (as [`Client::loan_request`]): a
    /// 6 MB request is written once, where its server reads it.
    pub fn loan_request(&mut self) -> Result<TypedRequestLoan<'_, Req>, ServiceTrySendError> {
        Ok(TypedRequestLoan { inner: self.inner.loan_request()?, _type: PhantomData })
    }

    /// Sends `request` and waits at most `timeout` for its response (as [`Client::call`]).
    /// A server that ends the request without a response is
    /// `CallError::Recv(ResponseRecvError::Failed)`; a response that is not one `Resp` is
    /// `CallError::Recv(ResponseRecvError::Corrupt)`.
    pub fn call(&mut self, request: &Req, timeout: Duration) -> Result<Resp, CallError> {
        let typed = self.inner.call_ref(bytes_of(request), timeout, Self::typed)?;
        let r = typed.map_err(CallError::Recv)?;
        r.value.ok_or(CallError::Recv(ResponseRecvError::Failed { request_id: r.request_id }))
    }

    /// The response `r`, checked to be one `Resp` (or a stream's empty end), else its
    /// `Corrupt`.
    fn typed(r: &ResponseRef<'_>) -> Result<TypedResponse<Resp>, ResponseRecvError> {
        let (request_id, last) = (r.request_id(), r.is_last());
        match read_from::<Resp>(r.data()) {
            Some(value) => Ok(TypedResponse { request_id, value: Some(value), last }),
            None if last && r.data().is_empty() => Ok(TypedResponse { request_id, value: None, last }),
            None => Err(ResponseRecvError::Corrupt(not_one::<Resp>(
                "response is not one value of the type",
                r.data().len(),
            ))),
        }
    }

    /// The next response to any request in flight, waiting as `wait` says (as
    /// [`Client::recv_response_with`]).
    pub fn recv_response_with(&mut self, wait: Wait) -> Result<TypedResponse<Resp>, Waited<ResponseRecvError>> {
        // Checked in place, then let go (a corrupt one too, so the next receive goes on).
        Self::typed(&self.inner.recv_response_ref_with(wait)?).map_err(Waited::Failed)
    }

    wait_forms! {
        /// The next response to any request in flight if one is there, without waiting.
        /// `NoneInFlight` when no request is in flight.
        fn try_recv_response, recv_response, recv_response_timeout, recv_response_deadline (&mut self)
            = recv_response_with -> TypedResponse<Resp>;
        errors (ResponseTryRecvError, ResponseRecvError, ResponseRecvTimeoutError)
    }

    /// The next response to request `id`, waiting as `wait` says (as
    /// [`Client::recv_response_for_with`]).
    pub fn recv_response_for_with(
        &mut self,
        id: u64,
        wait: Wait,
    ) -> Result<TypedResponse<Resp>, Waited<ResponseRecvError>> {
        Self::typed(&self.inner.recv_response_for_with(id, wait)?).map_err(Waited::Failed)
    }

    wait_forms! {
        /// The next response to request `id` if it is there, without waiting.
        fn try_recv_response_for, recv_response_for, recv_response_for_timeout, recv_response_for_deadline
            (&mut self, id: u64) = recv_response_for_with -> TypedResponse<Resp>;
        errors (ResponseTryRecvError, ResponseRecvError, ResponseRecvTimeoutError)
    }

    /// Gives request `id` up (as [`Client::cancel`]).
    pub fn cancel(&mut self, id: u64) -> bool {
        self.inner.cancel(id)
    }
}

waitable_as_inner!([Req: Pod, Resp: Pod] TypedClient<Req, Resp>);

/// A request slot lent by [`TypedClient::loan_request`]: a `Req` to write in place
/// (`DerefMut<Target = Req>`; the slot is not cleared), sent by [`send`](Self::send).
#[derive(Debug)]
pub struct TypedRequestLoan<'a, Req: Pod> {
    inner: RequestLoan<'a>,
    _type: PhantomData<fn(Req)>,
}

impl<Req: Pod> TypedRequestLoan<'_, Req> {
    /// Sends the request; returns its id.
    pub fn send(self) -> u64 {
        self.inner.send(std::mem::size_of::<Req>())
    }
}

value_in_place!(TypedRequestLoan);

/// A [`Server`] of `Req` requests and `Resp` responses, from [`Service::server_of`]: a request
/// that is not exactly one `Req` is failed back to its client and reported as `Corrupt`.
pub struct TypedServer<Req: Pod, Resp: Pod> {
    inner: Server,
    _types: PhantomData<fn(Req) -> Resp>,
}

impl<Req: Pod, Resp: Pod> std::fmt::Debug for TypedServer<Req, Resp> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedServer").field("inner", &self.inner).finish()
    }
}

impl<Req: Pod, Resp: Pod> TypedServer<Req, Resp> {
    /// The byte server underneath.
    pub fn as_bytes(&mut self) -> &mut Server {
        &mut self.inner
    }

    /// The next request, waiting as `wait` says (as [`Server::recv_with`]). A request that
    /// is not one `Req` is failed back to its client and reported as `Corrupt`.
    pub fn recv_with(&mut self, wait: Wait) -> Result<TypedRequest<Req, Resp>, Waited<RequestRecvError>> {
        let req = self.inner.recv_with(wait)?;
        if ref_from::<Req>(req.data()).is_none() {
            let len = req.len();
            req.fail();
            return Err(Waited::Failed(RequestRecvError::Corrupt(not_one::<Req>(
                "request is not one value of the type",
                len,
            ))));
        }
        Ok(TypedRequest { inner: req, _types: PhantomData })
    }

    wait_forms! {
        /// The next request if one is pending, without waiting.
        fn try_recv, recv, recv_timeout, recv_deadline (&mut self)
            = recv_with -> TypedRequest<Req, Resp>;
        errors (RequestTryRecvError, RequestRecvError, RequestRecvTimeoutError)
    }
}

waitable_as_inner!([Req: Pod, Resp: Pod] TypedServer<Req, Resp>);

/// A request a [`TypedServer`] claimed: its `Req` in place ([`value`](Self::value)),
/// answered with `Resp`s as an [`ActiveRequest`] is with bytes. Dropping it unfinished ends
/// it.
pub struct TypedRequest<Req: Pod, Resp: Pod> {
    inner: ActiveRequest,
    _types: PhantomData<fn(Req) -> Resp>,
}

impl<Req: Pod, Resp: Pod> std::fmt::Debug for TypedRequest<Req, Resp> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedRequest").field("inner", &self.inner).finish()
    }
}

impl<Req: Pod, Resp: Pod> TypedRequest<Req, Resp> {
    /// The request, in its client's slot (no copy).
    ///
    /// # Panics
    /// Once the request is finished: `respond_last`, `end` and `fail` take it by value, so
    /// only the byte request's forms reached through [`as_bytes`](Self::as_bytes)
    /// (`try_respond` or `respond_timeout` with `last`) can leave it so.
    pub fn value(&self) -> &Req {
        ref_from(self.inner.data()).expect("a typed request is one Req until it is finished")
    }

    /// The request's id, as its client numbered it.
    pub fn id(&self) -> u64 {
        self.inner.id()
    }

    /// The pid of the client that sent it (0 if it has left).
    pub fn client_pid(&self) -> u32 {
        self.inner.client_pid()
    }

    /// The byte request underneath.
    pub fn as_bytes(&mut self) -> &mut ActiveRequest {
        &mut self.inner
    }

    /// Sends a copy of `value` as a response; more may follow (as [`ActiveRequest::respond`]).
    pub fn respond(&mut self, value: &Resp) -> Result<(), RespondError> {
        self.inner.respond(bytes_of(value))
    }

    /// Sends a copy of `value` as the last response (as [`ActiveRequest::respond_last`]).
    pub fn respond_last(self, value: &Resp) -> Result<(), RespondError> {
        self.inner.respond_last(bytes_of(value))
    }

    /// Lends a response cell to build a `Resp` in place (as [`ActiveRequest::loan`]).
    pub fn loan(&mut self) -> Result<TypedResponseLoan<'_, Resp>, RespondError> {
        Ok(TypedResponseLoan { inner: self.inner.loan()?, _type: PhantomData })
    }

    /// Ends the request without another response (as [`ActiveRequest::end`]).
    pub fn end(self) {
        self.inner.end()
    }

    /// Fails the request: its client reads `Failed` (as [`ActiveRequest::fail`]).
    pub fn fail(self) {
        self.inner.fail()
    }
}

/// A response cell lent by [`TypedRequest::loan`]: a `Resp` to write in place
/// (`DerefMut<Target = Resp>`; the cell is not cleared), sent by [`send`](Self::send) or
/// [`send_last`](Self::send_last).
#[derive(Debug)]
pub struct TypedResponseLoan<'a, Resp: Pod> {
    inner: ResponseLoan<'a>,
    _type: PhantomData<fn(Resp)>,
}

impl<Resp: Pod> TypedResponseLoan<'_, Resp> {
    /// Sends the response; more may follow.
    pub fn send(self) {
        self.inner.send(std::mem::size_of::<Resp>())
    }

    /// Sends the response as the last, finishing the request.
    pub fn send_last(self) {
        self.inner.send_last(std::mem::size_of::<Resp>())
    }
}

value_in_place!(TypedResponseLoan);
