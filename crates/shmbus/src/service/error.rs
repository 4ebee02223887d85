//! The service's errors: sending a request, a call, answering, and the two receive families
//! (a server's requests, a client's responses).

use std::fmt;

use crate::error::{error_family, Corrupt, ErrorKind, Failure};
use crate::segment::TRUNCATED_MSG;

/// [`Client::try_send_request`] sent nothing; the request stays with the caller.
///
/// [`Client::try_send_request`]: super::Client::try_send_request
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServiceTrySendError {
    /// This client already has `max_in_flight` requests unanswered (or given up on and still
    /// held by a server): read a response, or wait, first.
    Full,
    /// No server is attached to the service.
    NoServer,
    /// The request is larger than the service's `max_request_len`.
    TooLarge {
        /// Its length.
        len: usize,
        /// The service's limit.
        max: usize,
    },
    /// The service's file was truncated by another process while this one had it mapped.
    Truncated,
}

impl fmt::Display for ServiceTrySendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceTrySendError::Full => f.write_str(
                "this client has max_in_flight requests unanswered; read a response (or wait) before sending another",
            ),
            ServiceTrySendError::NoServer => f.write_str("the service has no server; start one (service.server()) first"),
            ServiceTrySendError::TooLarge { len, max } => write!(
                f,
                "request of {len} bytes exceeds the service's max_request_len of {max}; split it or recreate the service"
            ),
            ServiceTrySendError::Truncated => f.write_str(TRUNCATED_MSG),
        }
    }
}

impl std::error::Error for ServiceTrySendError {}

impl Failure for ServiceTrySendError {
    fn kind(&self) -> ErrorKind {
        match self {
            ServiceTrySendError::Full => ErrorKind::Full,
            ServiceTrySendError::NoServer => ErrorKind::NoWorkers,
            ServiceTrySendError::TooLarge { .. } => ErrorKind::TooLarge,
            ServiceTrySendError::Truncated => ErrorKind::Truncated,
        }
    }

    fn value(&self) -> Option<u64> {
        match self {
            ServiceTrySendError::TooLarge { max, .. } => Some(*max as u64),
            _ => None,
        }
    }
}

error_family! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    try
    /// [`Client::try_recv_response`] (or its `_ref` / `_for` forms) found no response yet.
    ///
    /// [`Client::try_recv_response`]: super::Client::try_recv_response
    ResponseTryRecvError {
        /// No response yet to a request in flight.
        Empty => [ErrorKind::Empty] ("no response yet; wait (recv_response, or a WaitSet) and try again"),
    }
    block
    /// A blocking [`Client::recv_response`] (or its `_ref` / `_for` forms) ended without a
    /// response.
    ///
    /// [`Client::recv_response`]: super::Client::recv_response
    ResponseRecvError;
    timeout
    /// [`Client::recv_response_timeout`] (or its `_ref` / `_for` forms) ended without a
    /// response.
    ///
    /// [`Client::recv_response_timeout`]: super::Client::recv_response_timeout
    ResponseRecvTimeoutError => "timed out waiting for a response";
    shared {
        /// The client has no request in flight (or not the one asked for): no response can
        /// come.
        NoneInFlight => [ErrorKind::Empty] ("no request in flight to wait for a response to"),
        /// The server that took request `request_id` died before finishing it; the responses
        /// it wrote before were delivered. The request is over (it may have had effects).
        ServerGone {
            /// The request's id.
            request_id: u64,
        } => [ErrorKind::Disconnected] ("the server answering request {request_id} died before it finished; the request may be sent again"),
        /// The server failed request `request_id` ([`ActiveRequest::fail`]): it could not
        /// answer it. The responses it sent before were delivered.
        ///
        /// [`ActiveRequest::fail`]: super::ActiveRequest::fail
        Failed {
            /// The request's id.
            request_id: u64,
        } => [ErrorKind::Failed] ("the server failed request {request_id}: it could not answer it"),
        /// A request slot holds something impossible (corrupt segment or misbehaving peer);
        /// the request is given up and its slot repaired.
        Corrupt(c: Corrupt) => [ErrorKind::Corrupt] ("{c}"),
        /// The service's file was truncated while this client had it mapped; recreate it.
        Truncated => [ErrorKind::Truncated] ("{}", TRUNCATED_MSG),
    }
}

crate::endpoint::receive::waited!(ResponseTryRecvError::Empty, ResponseRecvError, ResponseRecvTimeoutError);

error_family! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    try
    /// [`Server::try_recv`] found no request.
    ///
    /// [`Server::try_recv`]: super::Server::try_recv
    RequestTryRecvError {
        /// No request is waiting.
        Empty => [ErrorKind::Empty] ("no request waiting; wait (recv, or a WaitSet) and try again"),
    }
    block
    /// A blocking [`Server::recv`] ended without a request.
    ///
    /// [`Server::recv`]: super::Server::recv
    RequestRecvError;
    timeout
    /// [`Server::recv_timeout`] ended without a request.
    ///
    /// [`Server::recv_timeout`]: super::Server::recv_timeout
    RequestRecvTimeoutError => "timed out waiting for a request";
    shared {
        /// A request claims more bytes than `max_request_len` (corrupt segment or
        /// misbehaving client); it is finished unanswered.
        Corrupt(c: Corrupt) => [ErrorKind::Corrupt] ("{c}"),
        /// The service's file was truncated while this server had it mapped; recreate it.
        Truncated => [ErrorKind::Truncated] ("{}", TRUNCATED_MSG),
    }
}

crate::endpoint::receive::waited!(RequestTryRecvError::Empty, RequestRecvError, RequestRecvTimeoutError);

/// A response was not delivered ([`ActiveRequest::respond`] and its forms).
///
/// [`ActiveRequest::respond`]: super::ActiveRequest::respond
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RespondError {
    /// The client gave up on the request (timed out, cancelled, or went away): the response
    /// was dropped and counted. Finish the request (drop it) and go on.
    ClientGone,
    /// The response is larger than the service's `max_response_len`; nothing was sent.
    TooLarge {
        /// Its length.
        len: usize,
        /// The service's limit.
        max: usize,
    },
    /// The client has `response_depth` responses unread and read none within the wait.
    Full,
    /// The request was already finished (its last response sent, or `end` called).
    Finished,
}

impl fmt::Display for RespondError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RespondError::ClientGone => {
                f.write_str("the client gave up on this request or went away; the response was dropped")
            }
            RespondError::TooLarge { len, max } => write!(
                f,
                "response of {len} bytes exceeds the service's max_response_len of {max}; split it or recreate the service"
            ),
            RespondError::Full => f.write_str("the client has response_depth responses unread; it is not reading"),
            RespondError::Finished => f.write_str("the request was already finished"),
        }
    }
}

impl std::error::Error for RespondError {}

impl Failure for RespondError {
    fn kind(&self) -> ErrorKind {
        match self {
            RespondError::ClientGone => ErrorKind::Disconnected,
            RespondError::TooLarge { .. } => ErrorKind::TooLarge,
            RespondError::Full => ErrorKind::Full,
            RespondError::Finished => ErrorKind::Closed,
        }
    }
}

/// [`Client::call`] got no response.
///
/// [`Client::call`]: super::Client::call
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    /// The request could not be sent (see [`ServiceTrySendError`]).
    Send(ServiceTrySendError),
    /// No response within the timeout (the request is given up: a response that comes later
    /// is dropped).
    Timeout,
    /// The response could not be had (the server died, or the slot was corrupt).
    Recv(ResponseRecvError),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Send(e) => e.fmt(f),
            CallError::Timeout => f.write_str("timed out waiting for the service's response"),
            CallError::Recv(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for CallError {}

impl Failure for CallError {
    fn kind(&self) -> ErrorKind {
        match self {
            CallError::Send(e) => e.kind(),
            CallError::Timeout => ErrorKind::Timeout,
            CallError::Recv(e) => e.kind(),
        }
    }

    fn value(&self) -> Option<u64> {
        match self {
            CallError::Send(e) => e.value(),
            _ => None,
        }
    }
}

impl From<ServiceTrySendError> for CallError {
    fn from(e: ServiceTrySendError) -> CallError {
        CallError::Send(e)
    }
}
