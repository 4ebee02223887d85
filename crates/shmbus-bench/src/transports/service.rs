//! `service`: one shmbus service; the ping side is its client, the echo side its server. A
//! ping-pong's round trip is one call: the request out, the response back.
//!
//! * `copy`: `try_send_request` (the request copied into the client's slot) and
//!   `respond_last` (the response copied into its cell); each side copies what it receives
//!   out of the slot or cell.
//! * `touch`: `loan_request` and `loan` (a response cell): the sender writes the first and
//!   last byte in place, the receiver reads those two bytes in place.
//!
//! Spin mode busy-polls the `try_` receives; block mode sets [`shmbus::WaitPolicy::BLOCK`]
//! and receives with `_timeout` slices. The service has one server, one client, one request
//! in flight and one response cell: what a ping-pong needs.

use std::io;

use shmbus::service::{
    ActiveRequest, Client, RequestRecvTimeoutError, RequestTryRecvError, ResponseRecvTimeoutError, ResponseRef,
    ResponseTryRecvError, Server, Service, ServiceConfig, ServiceTrySendError,
};

use super::shmbus_kinds::{check_size, policy, wait_for, ScratchRoot, BLOCK_SLICE};
use super::{Endpoint, Handoff, Params, Payload, Transport};
use crate::waiter::Waiter;

/// shmbus services.
#[derive(Debug)]
pub struct ServiceTransport;

const NAME: &str = "svc";

impl Transport for ServiceTransport {
    fn name(&self) -> &'static str {
        "service"
    }

    fn payload(&self, requested: Payload) -> Payload {
        requested
    }

    fn open(&self, params: &Params) -> io::Result<(Box<dyn Endpoint>, Handoff)> {
        check_size(params)?;
        let (root, handoff) = ScratchRoot::create("service")?;
        let cfg = ServiceConfig::default()
            .max_servers(1)
            .max_clients(1)
            .max_in_flight(1)
            .max_request_len(params.size)
            .max_response_len(params.size)
            .response_depth(1);
        let svc = Service::create_or_open(&root.domain()?, NAME, &cfg).map_err(io::Error::other)?;
        let mut client = svc.client().map_err(io::Error::other)?;
        client.set_wait_policy(policy(params.mode));
        Ok((Box::new(ClientEnd { _root: root, client, params: *params }), handoff))
    }

    fn attach(&self, params: &Params, handoff: Handoff) -> io::Result<Box<dyn Endpoint>> {
        let root = ScratchRoot::attach(&handoff)?;
        let svc = Service::open(&root.domain()?, NAME).map_err(io::Error::other)?;
        let mut server = svc.server().map_err(io::Error::other)?;
        server.set_wait_policy(policy(params.mode));
        Ok(Box::new(ServerEnd { _root: root, server, held: None, params: *params }))
    }
}

/// Copies (or, touching, the first and last byte of) `data` into `buf`, which holds
/// `size` bytes.
fn take(data: &[u8], buf: &mut [u8], payload: Payload) -> io::Result<()> {
    if data.len() != buf.len() {
        return Err(io::Error::other(format!("received {} bytes, expected {}", data.len(), buf.len())));
    }
    match payload {
        Payload::Copy => buf.copy_from_slice(data),
        Payload::Touch => {
            let last = buf.len() - 1;
            buf[0] = data[0];
            buf[last] = data[last];
        }
    }
    Ok(())
}

/// Writes `msg` (or its first and last byte) into the start of a loaned `room`.
fn put(msg: &[u8], room: &mut [u8], payload: Payload) {
    match payload {
        Payload::Copy => room[..msg.len()].copy_from_slice(msg),
        Payload::Touch => {
            let last = msg.len() - 1;
            room[0] = msg[0];
            room[last] = msg[last];
        }
    }
}

struct ClientEnd {
    _root: ScratchRoot,
    client: Client,
    params: Params,
}

impl Endpoint for ClientEnd {
    #[inline]
    fn send(&mut self, msg: &[u8], waiter: &mut Waiter<'_>) -> io::Result<()> {
        let payload = self.params.payload;
        // The server may not be attached yet: wait for it as for room.
        loop {
            let r = match payload {
                Payload::Copy => self.client.try_send_request(msg).map(drop),
                Payload::Touch => self.client.loan_request().map(|mut loan| {
                    put(msg, &mut loan, payload);
                    loan.send(msg.len());
                }),
            };
            match r {
                Ok(()) => return Ok(()),
                Err(ServiceTrySendError::NoServer | ServiceTrySendError::Full) => waiter.spin()?,
                Err(e) => return Err(io::Error::other(e)),
            }
        }
    }

    #[inline]
    fn recv(&mut self, buf: &mut Vec<u8>, waiter: &mut Waiter<'_>) -> io::Result<()> {
        let payload = self.params.payload;
        let c = std::cell::RefCell::new(&mut self.client);
        let b = std::cell::RefCell::new(buf);
        let read = |r: ResponseRef<'_>| take(r.data(), &mut b.borrow_mut(), payload).map(Some);
        wait_for(
            self.params.mode,
            waiter,
            || match c.borrow_mut().try_recv_response_ref() {
                Ok(r) => read(r),
                Err(ResponseTryRecvError::Empty) => Ok(None),
                Err(e) => Err(io::Error::other(e)),
            },
            |slice| match c.borrow_mut().recv_response_ref_timeout(slice) {
                Ok(r) => read(r),
                Err(ResponseRecvTimeoutError::Timeout) => Ok(None),
                Err(e) => Err(io::Error::other(e)),
            },
        )
    }
}

struct ServerEnd {
    _root: ScratchRoot,
    server: Server,
    /// The request received and not answered yet.
    held: Option<ActiveRequest>,
    params: Params,
}

impl Endpoint for ServerEnd {
    #[inline]
    fn send(&mut self, msg: &[u8], _waiter: &mut Waiter<'_>) -> io::Result<()> {
        let mut req = self.held.take().ok_or_else(|| io::Error::other("a response with no request"))?;
        match self.params.payload {
            Payload::Copy => req.respond_last(msg).map_err(io::Error::other),
            Payload::Touch => {
                let mut loan = req.loan().map_err(io::Error::other)?;
                put(msg, &mut loan, Payload::Touch);
                loan.send_last(msg.len());
                Ok(())
            }
        }
    }

    #[inline]
    fn recv(&mut self, buf: &mut Vec<u8>, waiter: &mut Waiter<'_>) -> io::Result<()> {
        let s = std::cell::RefCell::new(&mut self.server);
        let req = wait_for(
            self.params.mode,
            waiter,
            || match s.borrow_mut().try_recv() {
                Ok(r) => Ok(Some(r)),
                Err(RequestTryRecvError::Empty) => Ok(None),
                Err(e) => Err(io::Error::other(e)),
            },
            |slice| match s.borrow_mut().recv_timeout(slice.min(BLOCK_SLICE)) {
                Ok(r) => Ok(Some(r)),
                Err(RequestRecvTimeoutError::Timeout) => Ok(None),
                Err(e) => Err(io::Error::other(e)),
            },
        )?;
        take(req.data(), buf, self.params.payload)?;
        self.held = Some(req);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transports::Mode;

    #[test]
    fn the_mode_requested_is_the_mode_run() {
        assert_eq!(ServiceTransport.mode(Mode::Spin), Mode::Spin);
        assert_eq!(ServiceTransport.mode(Mode::Async), Mode::Block);
        assert_eq!(ServiceTransport.payload(Payload::Touch), Payload::Touch);
    }
}
