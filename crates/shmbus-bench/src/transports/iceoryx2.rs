//! `iceoryx2`: the best-known shared-memory peer (crates.io `iceoryx2`, `ipc::Service`),
//! publish-subscribe. Built only with the `iceoryx2` cargo feature.
//!
//! Two services, `…/ping` and `…/pong` (names unique per run), of `[u8]` slices; each side
//! has a publisher on one (`initial_max_slice_len = size`) and a subscriber on the other
//! (no history, buffer 2). Polling only: `receive()` in a busy loop, so this transport
//! always runs in `spin` mode (iceoryx2's blocking path is a separate event service).
//!
//! * `copy`: `loan_slice_uninit` + `write_from_slice` + `send`; the receiver copies the
//!   payload out of the sample.
//! * `touch`: `loan_slice_uninit`, write the first and last byte in place, `send`; the
//!   receiver reads those two bytes of the sample.
//!
//! Before its first send the ping side waits until the echo's subscriber is registered
//! (`number_of_subscribers() ≥ 1`), since a sample sent before that is not delivered.

use std::io;
use std::mem::MaybeUninit;

use iceoryx2::port::publisher::Publisher;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::prelude::*;
use iceoryx2::service::port_factory::publish_subscribe::PortFactory as PubSubFactory;

use super::{Endpoint, Handoff, Mode, Params, Payload, Transport};
use crate::waiter::Waiter;

/// The iceoryx2 publish-subscribe transport.
#[derive(Debug)]
pub struct Iceoryx2;

fn other<E: std::fmt::Debug>(what: &str) -> impl FnOnce(E) -> io::Error + '_ {
    move |e| io::Error::other(format!("iceoryx2: {what}: {e:?}"))
}

struct End {
    publisher: Publisher<ipc::Service, [u8], ()>,
    subscriber: Subscriber<ipc::Service, [u8], ()>,
    out_service: PubSubFactory<ipc::Service, [u8], ()>,
    _in_service: PubSubFactory<ipc::Service, [u8], ()>,
    payload: Payload,
    /// Ping side, before its first send: wait for the echo's subscriber.
    await_peer: bool,
    _node: Node<ipc::Service>,
}

fn service(node: &Node<ipc::Service>, name: &str) -> io::Result<PubSubFactory<ipc::Service, [u8], ()>> {
    let name: ServiceName = name.try_into().map_err(other("service name"))?;
    node.service_builder(&name)
        .publish_subscribe::<[u8]>()
        .history_size(0)
        .subscriber_max_buffer_size(2)
        .max_publishers(1)
        .max_subscribers(1)
        .open_or_create()
        .map_err(other("open or create service"))
}

fn end(prefix: &str, ping: bool, params: &Params) -> io::Result<End> {
    set_log_level(LogLevel::Error);
    let node = NodeBuilder::new().create::<ipc::Service>().map_err(other("node"))?;
    let (out, inc) = if ping { ("ping", "pong") } else { ("pong", "ping") };
    let out_service = service(&node, &format!("{prefix}/{out}"))?;
    let in_service = service(&node, &format!("{prefix}/{inc}"))?;
    let publisher =
        out_service.publisher_builder().initial_max_slice_len(params.size).create().map_err(other("publisher"))?;
    let subscriber = in_service.subscriber_builder().create().map_err(other("subscriber"))?;
    Ok(End {
        publisher,
        subscriber,
        out_service,
        _in_service: in_service,
        payload: params.payload,
        await_peer: ping,
        _node: node,
    })
}

impl Endpoint for End {
    fn send(&mut self, msg: &[u8], waiter: &mut Waiter<'_>) -> io::Result<()> {
        if self.await_peer {
            while self.out_service.dynamic_config().number_of_subscribers() == 0 {
                waiter.spin()?;
            }
            self.await_peer = false;
        }
        let mut sample = self.publisher.loan_slice_uninit(msg.len()).map_err(other("loan"))?;
        let sample = match self.payload {
            Payload::Copy => sample.write_from_slice(msg),
            Payload::Touch => {
                let p: &mut [MaybeUninit<u8>] = sample.payload_mut();
                let last = msg.len() - 1;
                p[0].write(msg[0]);
                p[last].write(msg[last]);
                // SAFETY: the slice is shared memory mapped from a file (zero-filled by the
                // kernel when created, then only ever written with bytes), so every byte is
                // an initialized u8; the zero-copy pattern writes only the two bytes the
                // receiver reads.
                unsafe { sample.assume_init() }
            }
        };
        sample.send().map_err(other("send"))?;
        Ok(())
    }

    fn recv(&mut self, buf: &mut Vec<u8>, waiter: &mut Waiter<'_>) -> io::Result<()> {
        let buf = buf.as_mut_slice();
        loop {
            if let Some(sample) = self.subscriber.receive().map_err(other("receive"))? {
                let p = sample.payload();
                if p.len() != buf.len() {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("iceoryx2: sample of {} bytes, expected {}", p.len(), buf.len()),
                    ));
                }
                match self.payload {
                    Payload::Copy => buf.copy_from_slice(p),
                    Payload::Touch => {
                        let last = buf.len() - 1;
                        buf[0] = p[0];
                        buf[last] = p[last];
                    }
                }
                return Ok(());
            }
            waiter.spin()?;
        }
    }
}

impl Transport for Iceoryx2 {
    fn name(&self) -> &'static str {
        "iceoryx2"
    }

    fn mode(&self, _requested: Mode) -> Mode {
        Mode::Spin
    }

    fn payload(&self, requested: Payload) -> Payload {
        requested
    }

    fn open(&self, params: &Params) -> io::Result<(Box<dyn Endpoint>, Handoff)> {
        let prefix = format!("shmbus-bench/{}-{}", std::process::id(), shmbus::time::monotonic_ns());
        let ep = end(&prefix, true, params)?;
        Ok((Box::new(ep), Handoff { fds: Vec::new(), args: vec![prefix] }))
    }

    fn attach(&self, params: &Params, handoff: Handoff) -> io::Result<Box<dyn Endpoint>> {
        let prefix = handoff
            .args
            .first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "iceoryx2 needs the service prefix"))?;
        Ok(Box::new(end(prefix, false, params)?))
    }
}

// ===================================================================== request-response

/// iceoryx2's request-response (`iceoryx2-rr`): the ping side is a client, the echo side a
/// server, of one `[u8]` → `[u8]` service; a round trip is one request and its one response
/// (the server drops the active request after answering, which ends the stream). Polling
/// only, as the publish-subscribe transport: `spin` mode. `copy` writes with
/// `write_from_slice` and copies out; `touch` writes and reads the first and last byte.
#[derive(Debug)]
pub struct Iceoryx2Rr;

type RrFactory = iceoryx2::service::port_factory::request_response::PortFactory<ipc::Service, [u8], (), [u8], ()>;
type RrPending = iceoryx2::pending_response::PendingResponse<ipc::Service, [u8], (), [u8], ()>;
type RrActive = iceoryx2::active_request::ActiveRequest<ipc::Service, [u8], (), [u8], ()>;

fn rr_service(node: &Node<ipc::Service>, name: &str) -> io::Result<RrFactory> {
    let name: ServiceName = name.try_into().map_err(other("service name"))?;
    node.service_builder(&name)
        .request_response::<[u8], [u8]>()
        .max_clients(1)
        .max_servers(1)
        .max_active_requests_per_client(1)
        .max_response_buffer_size(1)
        .open_or_create()
        .map_err(other("open or create request-response service"))
}

struct RrClient {
    client: iceoryx2::port::client::Client<ipc::Service, [u8], (), [u8], ()>,
    pending: Option<RrPending>,
    service: RrFactory,
    payload: Payload,
    _node: Node<ipc::Service>,
}

struct RrServer {
    server: iceoryx2::port::server::Server<ipc::Service, [u8], (), [u8], ()>,
    held: Option<RrActive>,
    _service: RrFactory,
    payload: Payload,
    _node: Node<ipc::Service>,
}

/// Writes `msg` (or its first and last byte) into an uninitialized loaned slice.
fn fill(p: &mut [MaybeUninit<u8>], msg: &[u8], payload: Payload) {
    match payload {
        Payload::Copy => {
            for (d, s) in p.iter_mut().zip(msg) {
                d.write(*s);
            }
        }
        Payload::Touch => {
            let last = msg.len() - 1;
            p[0].write(msg[0]);
            p[last].write(msg[last]);
        }
    }
}

/// Copies (or touches) a received payload into `buf`.
fn read_into(p: &[u8], buf: &mut [u8], payload: Payload) -> io::Result<()> {
    if p.len() != buf.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("iceoryx2: payload of {} bytes, expected {}", p.len(), buf.len()),
        ));
    }
    match payload {
        Payload::Copy => buf.copy_from_slice(p),
        Payload::Touch => {
            let last = buf.len() - 1;
            buf[0] = p[0];
            buf[last] = p[last];
        }
    }
    Ok(())
}

impl Endpoint for RrClient {
    fn send(&mut self, msg: &[u8], waiter: &mut Waiter<'_>) -> io::Result<()> {
        while self.service.dynamic_config().number_of_servers() == 0 {
            waiter.spin()?;
        }
        // The previous round trip's pending response is done with.
        self.pending = None;
        let mut request = self.client.loan_slice_uninit(msg.len()).map_err(other("loan request"))?;
        fill(request.payload_mut(), msg, self.payload);
        // SAFETY: as for the publish-subscribe loan: the slice is shared memory that only
        // ever holds bytes, and the receiver reads only the bytes written.
        let request = unsafe { request.assume_init() };
        self.pending = Some(request.send().map_err(other("send request"))?);
        Ok(())
    }

    fn recv(&mut self, buf: &mut Vec<u8>, waiter: &mut Waiter<'_>) -> io::Result<()> {
        let pending = self.pending.as_ref().ok_or_else(|| io::Error::other("iceoryx2: no request in flight"))?;
        loop {
            if let Some(response) = pending.receive().map_err(other("receive response"))? {
                return read_into(response.payload(), buf, self.payload);
            }
            waiter.spin()?;
        }
    }
}

impl Endpoint for RrServer {
    fn send(&mut self, msg: &[u8], _waiter: &mut Waiter<'_>) -> io::Result<()> {
        let active = self.held.take().ok_or_else(|| io::Error::other("iceoryx2: a response with no request"))?;
        let mut response = active.loan_slice_uninit(msg.len()).map_err(other("loan response"))?;
        fill(response.payload_mut(), msg, self.payload);
        // SAFETY: as in `RrClient::send`.
        let response = unsafe { response.assume_init() };
        response.send().map_err(other("send response"))?;
        // Dropping `active` ends the request's stream.
        Ok(())
    }

    fn recv(&mut self, buf: &mut Vec<u8>, waiter: &mut Waiter<'_>) -> io::Result<()> {
        loop {
            if let Some(active) = self.server.receive().map_err(other("receive request"))? {
                read_into(active.payload(), buf, self.payload)?;
                self.held = Some(active);
                return Ok(());
            }
            waiter.spin()?;
        }
    }
}

impl Transport for Iceoryx2Rr {
    fn name(&self) -> &'static str {
        "iceoryx2-rr"
    }

    fn mode(&self, _requested: Mode) -> Mode {
        Mode::Spin
    }

    fn payload(&self, requested: Payload) -> Payload {
        requested
    }

    fn open(&self, params: &Params) -> io::Result<(Box<dyn Endpoint>, Handoff)> {
        set_log_level(LogLevel::Error);
        let prefix = format!("shmbus-bench/{}-{}/rr", std::process::id(), shmbus::time::monotonic_ns());
        let node = NodeBuilder::new().create::<ipc::Service>().map_err(other("node"))?;
        let service = rr_service(&node, &prefix)?;
        let client = service.client_builder().initial_max_slice_len(params.size).create().map_err(other("client"))?;
        let ep = RrClient { client, pending: None, service, payload: params.payload, _node: node };
        Ok((Box::new(ep), Handoff { fds: Vec::new(), args: vec![prefix] }))
    }

    fn attach(&self, params: &Params, handoff: Handoff) -> io::Result<Box<dyn Endpoint>> {
        set_log_level(LogLevel::Error);
        let prefix = handoff
            .args
            .first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "iceoryx2-rr needs the service name"))?;
        let node = NodeBuilder::new().create::<ipc::Service>().map_err(other("node"))?;
        let service = rr_service(&node, prefix)?;
        let server = service.server_builder().initial_max_slice_len(params.size).create().map_err(other("server"))?;
        Ok(Box::new(RrServer { server, held: None, _service: service, payload: params.payload, _node: node }))
    }
}
