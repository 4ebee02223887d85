//! Service: request/response between clients and competing servers.
//!
//! A [`Service`] handle is made with [`Service::create_or_open`] or [`Service::open`]; from
//! it, any number of [`Server`]s (up to `max_servers`) answer the requests of any number of
//! [`Client`]s (up to `max_clients`). Each request goes to one server (the first to claim
//! it); its responses reach the client that sent it, and no other. A client may have up to
//! `max_in_flight` requests in flight at once, each with its id; a server may answer one
//! request with a stream of responses and then end it.
//!
//! ```no_run
//! use std::time::Duration;
//! use shmbus::service::{Service, ServiceConfig};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let d = shmbus::Domain::new("robot1")?;
//! let svc = Service::create_or_open(&d, "plan", &ServiceConfig::default())?;
//! // In the server process:
//! let mut server = svc.server()?;
//! # std::thread::spawn(move || -> Result<(), shmbus::service::RespondError> {
//! while let Ok(req) = server.recv() {
//!     let answer = format!("{} bytes planned", req.len());
//!     req.respond_last(answer.as_bytes())?;
//! }
//! # Ok(()) });
//! // In a client process:
//! let mut client = svc.client()?;
//! let response = client.call(b"to the dock", Duration::from_secs(1))?;
//! println!("{}", String::from_utf8_lossy(&response));
//! # Ok(()) }
//! ```
//!
//! # Why a kind of its own
//!
//! A service could be two queues and a reply-queue naming scheme; it is not, because a
//! response is written once, in place, and read in place: each client owns a *lane* of
//! request slots, and each slot holds its request and a small ring of response cells
//! (`response_depth` of `max_response_len` bytes). A 6 MB camera frame answered by loan
//! crosses without a copy, and a response can only ever reach the slot of the request it
//! answers. The memory this takes is fixed at creation (see [`ServiceConfig`]).
//!
//! # Algorithm
//!
//! A slot has two words, each written by one side in a call. The client's *post word*
//! names the latest request it posted there (stored with Release after the request's
//! bytes); the servers' *claim word* says what became of it: claimed (`TAKEN`, naming the
//! taker's participant entry and pid, so a client can tell whether the server answering it
//! lives), `DONE`, `ABANDONED` (its client gave up while a server held it) or `FREE` (given
//! up before a claim, or taken back from a dead taker), each step one CAS that names the
//! request's number, so no stale CAS lands on a newer request. The slot's bit in a bitmap,
//! set on its first request, tells servers where to look. Servers scan the set bits
//! (round-robin), claim a request whose claim word still names an earlier one with one CAS,
//! and read the request in place. Responses go
//! through the slot's ring: the server writes cell `head % depth`, then the head (Release);
//! the client reads in place and moves the tail. See `protocol.rs`.
//!
//! Waiting: servers sleep on the service's request event, a client on its lane's response
//! event; a notifier makes the `FUTEX_WAKE` system call only when someone sleeps, so a
//! spinning pair makes none.
//!
//! # Crash semantics
//!
//! * **A server is SIGKILLed mid-request**: a client waiting on a request that server held
//!   gets [`ResponseRecvError::ServerGone`] within 50 ms (the peer check interval) plus one
//!   `/proc` read, after the responses written before the death; its slot is free again. A
//!   request no server had claimed stays pending and the next server (a restarted one)
//!   answers it. A server killed between announcing a request's end and handing back the
//!   claim word holds up the slot's next request until its client (within 50 ms) or a live
//!   server's rescan (within 100 ms) takes the word back. A server's entry is reclaimed by
//!   the next server that needs one.
//! * **A client is SIGKILLed with requests in flight**: its lane is reclaimed by the next
//!   client that finds the table full: requests not yet claimed are withdrawn, those a
//!   server holds are marked abandoned; the server's further responses are dropped (counted,
//!   [`RespondError::ClientGone`]) and the slot freed when it finishes. A server waiting for
//!   room in a ring the dead client no longer reads notices within 50 ms. Nothing leaks on
//!   the server.
//! * **A client gives up** (a [`Client::call`] that times out, [`Client::cancel`]): the same
//!   as above, for that request.
//! * **Hostile memory**: a state, length or ring position a slot cannot hold is reported
//!   once ([`ResponseRecvError::Corrupt`], [`RequestRecvError::Corrupt`]) and the slot
//!   repaired; a cleared bit delays a request by at most 100 ms (servers that find
//!   nothing look at every slot that often); every wait is bounded by its caller's.

// The slot protocol; public only to the loom models (`tests/loom_service.rs`).
#[cfg(loom)]
pub mod protocol;
#[cfg(not(loom))]
pub(crate) mod protocol;

#[cfg(not(loom))]
mod client;
#[cfg(not(loom))]
mod error;
#[cfg(not(loom))]
mod handle;
#[cfg(not(loom))]
mod layout;
#[cfg(not(loom))]
mod server;
#[cfg(not(loom))]
mod shared;
#[cfg(not(loom))]
mod typed;

#[cfg(all(feature = "tokio", not(loom)))]
pub use client::CallAsync;
#[cfg(not(loom))]
pub use client::{Client, OwnedRequestLoan, OwnedResponseRef, RequestLoan, Response, ResponseRef};
#[cfg(not(loom))]
pub use error::{
    CallError, RequestRecvError, RequestRecvTimeoutError, RequestTryRecvError, RespondError, ResponseRecvError,
    ResponseRecvTimeoutError, ResponseTryRecvError, ServiceTrySendError,
};
#[cfg(not(loom))]
pub use handle::Service;
#[cfg(not(loom))]
pub(crate) use handle::ServiceKind;
#[cfg(not(loom))]
pub use layout::{ServiceConfig, MAX_IN_FLIGHT, MAX_MESSAGE_LEN, MAX_SLOTS};
#[cfg(not(loom))]
pub use server::{ActiveRequest, OwnedResponseLoan, ResponseLoan, Server};
#[cfg(not(loom))]
pub use shared::ServiceStatus;
#[cfg(not(loom))]
pub use typed::{TypedClient, TypedRequest, TypedRequestLoan, TypedResponse, TypedResponseLoan, TypedServer};
