//! The WebSocket server: connections, their bounds, and each client's conversation.
//!
//! The protocol's messages are the `foxglove` crate's own (`foxglove::protocol::v1`: the
//! official implementation, used here for every message in and out); the WebSocket layer
//! is `tokio-tungstenite`'s (the handshake, and the frames clients send); the frames this
//! server sends go through each client's [`Outbox`], which writes them itself so that a
//! message reaches a client that keeps up without a hop through another thread.
//!
//! **Bounds.** A new connection first has `--handshake-timeout` (10 s) to send its whole WebSocket request
//! (the HTTP header, at most [`MAX_REQUEST`] bytes); one that is slower, or sends more, is
//! closed. At most [`PENDING`] connections wait so at once: a newer one closes the oldest,
//! so connections that never send their request cannot keep a client out (a client's
//! request comes within milliseconds of its connection). Only a connection whose request has
//! come takes one of the `--max-clients` places; one over the limit is answered
//! `503 Service Unavailable` and closed (at most [`REFUSING`] of those are answered at once;
//! beyond, a connection is closed unanswered). A client's frames are at most
//! [`MAX_CLIENT_MESSAGE`] bytes (a client sends only small JSON requests); a larger one
//! closes that client. What a client is sent is bounded by its outbox.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use foxglove::protocol::v1::client::ClientMessage;
use foxglove::protocol::v1::server::Status;
use foxglove::protocol::v1::JsonMessage;
use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use crate::outbox::{Limits, Outbox, Sent};
use crate::topics::Topics;

/// The longest WebSocket request (HTTP header) a connection may send.
const MAX_REQUEST: usize = 16 * 1024;
/// How often a connection's partial request is looked at again while it comes in.
const REQUEST_POLL: Duration = Duration::from_millis(10);
/// Connections whose request has not come yet; a newer one closes the oldest.
const PENDING: usize = 64;
/// Refused connections answered at once; more are closed unanswered.
const REFUSING: usize = 16;
/// How long a refused connection is given to send its request and take the answer.
const REFUSAL: Duration = Duration::from_secs(1);
/// The largest message (and frame) a client may send.
const MAX_CLIENT_MESSAGE: usize = 1 << 20;

/// The subprotocols of the protocol's v1 this server speaks, in order of preference: the
/// Foxglove SDK's name for it and the original one.
const SUBPROTOCOLS: [&str; 2] = ["foxglove.sdk.v1", "foxglove.websocket.v1"];

/// How many clients, and how long a connection may take to ask to be one.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// The most clients at once (`--max-clients`).
    pub max_clients: usize,
    /// How long a new connection has to send its whole WebSocket request
    /// (`--handshake-timeout`).
    pub handshake: Duration,
}

/// Accepts clients on `listener` for `topics`, forever.
pub async fn run(listener: TcpListener, topics: Arc<Topics>, bounds: Bounds, limits: Limits) {
    let Bounds { max_clients, handshake } = bounds;
    let places = Arc::new(Semaphore::new(max_clients));
    let refusing = Arc::new(Semaphore::new(REFUSING));
    let pending = Arc::new(Pending::default());
    for id in 0u64.. {
        let (client, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of descriptors, say: wait a moment rather than spin on the error.
                eprintln!("shmbus-foxglove: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (topics, places, refusing, waiting) = (topics.clone(), places.clone(), refusing.clone(), pending.clone());
        pending.spawn(id, async move {
            let whole = tokio::time::timeout(handshake, whole_request(&client)).await;
            if !waiting.remove(id) {
                return; // Closed to make room for newer connections.
            }
            let Ok(Ok(Some(request_len))) = whole else {
                return; // Closed, failed, too long, or too slow: nothing to answer.
            };
            let Ok(_place) = places.try_acquire_owned() else {
                eprintln!(
                    "shmbus-foxglove: client {peer} refused: {max_clients} clients connected already (--max-clients)"
                );
                // Too many refusals under way: close this one at once (a flood must not run
                // the process out of descriptors).
                if let Ok(_answering) = refusing.try_acquire_owned() {
                    refuse(client, request_len).await;
                }
                return;
            };
            serve(client, peer, &topics, limits).await;
        });
    }
}

/// The connections whose request has not come yet, oldest first, and how many were closed
/// to make room.
#[derive(Default)]
struct Pending(Mutex<(VecDeque<(u64, tokio::task::AbortHandle)>, u64)>);

impl Pending {
    /// Runs connection `id`'s task, counted as waiting for its request until it calls
    /// [`Pending::remove`]; closes the oldest waiting connection if there are more than
    /// [`PENDING`]. The task is counted before it can run to its `remove` (which takes the
    /// same lock), so a count is never left behind for a task past its request.
    fn spawn(&self, id: u64, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let (oldest, closed) = {
            let mut g = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (q, closed) = &mut *g;
            q.push_back((id, tokio::spawn(task).abort_handle()));
            let oldest = if q.len() > PENDING { q.pop_front() } else { None };
            *closed += u64::from(oldest.is_some());
            (oldest, *closed)
        };
        if let Some((_, abort)) = oldest {
            abort.abort(); // its task drops the connection
                           // Said for the first one and then every 1,000th: a flood must not flood the log.
            if closed == 1 || closed % 1000 == 0 {
                eprintln!(
                    "shmbus-foxglove: {closed} connection(s) closed in all for not sending their request while \
                     {PENDING} newer ones waited"
                );
            }
        }
    }

    /// Connection `id` is no longer waiting for its request; `false` if it was closed to
    /// make room meanwhile (its task is being aborted: it must not go on to take a place).
    fn remove(&self, id: u64) -> bool {
        let mut g = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match g.0.iter().position(|&(k, _)| k == id) {
            Some(at) => {
                g.0.remove(at);
                true
            }
            None => false,
        }
    }
}

/// Answers a connection over the limit `503 Service Unavailable`; its request, of
/// `request_len` bytes, has come.
async fn refuse(mut client: TcpStream, request_len: usize) {
    // The request is read first: closing with any of it unread would reset the connection
    // before the client reads the answer.
    let mut request = vec![0u8; request_len];
    let _ = tokio::time::timeout(REFUSAL, client.read_exact(&mut request)).await;
    let busy = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    let _ = tokio::time::timeout(REFUSAL, async {
        client.write_all(busy).await?;
        client.shutdown().await
    })
    .await;
}

/// One client, from its whole request to its going.
async fn serve(tcp: TcpStream, peer: SocketAddr, topics: &Arc<Topics>, limits: Limits) {
    if let Err(e) = tcp.set_nodelay(true).and_then(|()| keep_alive(&tcp)) {
        eprintln!("shmbus-foxglove: client {peer}: {e}");
        return;
    }
    let (read, write) = tcp.into_split();
    let out = Arc::new(Outbox::new(write, peer, limits));
    let io = ClientIo { read, out: out.clone() };
    let config =
        WebSocketConfig::default().max_message_size(Some(MAX_CLIENT_MESSAGE)).max_frame_size(Some(MAX_CLIENT_MESSAGE));
    let conversation = async {
        let ws = match tokio_tungstenite::accept_hdr_async_with_config(io, negotiate, Some(config)).await {
            Ok(ws) => ws,
            Err(e) => {
                eprintln!("shmbus-foxglove: client {peer}: handshake failed: {e}");
                return;
            }
        };
        let Some(client) = topics.add_client(out.clone()) else { return };
        // Forgotten however the conversation ends (the writer may end it first).
        let _registered = Registered(topics, client);
        eprintln!("shmbus-foxglove: client {peer} connected");
        listen(ws, client, topics, &out).await;
    };
    // Said however the client ends, the server's stop included.
    let _going = Going(&out);
    // The outbox's writer runs beside the conversation (the handshake's answer goes through
    // it too); whichever ends first ends the client.
    tokio::select! {
        () = conversation => {}
        () = out.drain() => {}
    }
}

/// Closes a client's outbox and says the client went, with what was dropped for it.
struct Going<'a>(&'a Outbox);

impl Drop for Going<'_> {
    fn drop(&mut self) {
        self.0.close();
        let (peer, dropped) = (self.0.peer(), self.0.dropped());
        if dropped > 0 {
            eprintln!("shmbus-foxglove: client {peer} gone; {dropped} message(s) dropped for it in all");
        } else {
            eprintln!("shmbus-foxglove: client {peer} gone");
        }
    }
}

/// A registered client, forgotten when this is dropped.
struct Registered<'a>(&'a Topics, u64);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.remove_client(self.1);
    }
}

/// The handshake's choice of subprotocol: the first of [`SUBPROTOCOLS`] the client offers.
#[allow(clippy::result_large_err)] // The shape tungstenite's callback has.
fn negotiate(req: &Request, mut res: Response) -> Result<Response, ErrorResponse> {
    let offered: Vec<&str> = req
        .headers()
        .get_all("sec-websocket-protocol")
        .iter()
        .flat_map(|h| h.to_str().unwrap_or_default().split(','))
        .map(str::trim)
        .collect();
    let Some(chosen) = SUBPROTOCOLS.iter().find(|p| offered.contains(p)) else {
        let mut refusal = ErrorResponse::new(Some(format!(
            "no subprotocol this server speaks was offered (it speaks {})",
            SUBPROTOCOLS.join(", ")
        )));
        *refusal.status_mut() = tokio_tungstenite::tungstenite::http::StatusCode::BAD_REQUEST;
        return Err(refusal);
    };
    res.headers_mut().insert("sec-websocket-protocol", HeaderValue::from_static(chosen));
    Ok(res)
}

/// Reads the client's requests until it goes (or its outbox closes).
async fn listen(mut ws: tokio_tungstenite::WebSocketStream<ClientIo>, client: u64, topics: &Arc<Topics>, out: &Outbox) {
    while let Some(frame) = ws.next().await {
        let msg = match frame {
            Ok(m) => m,
            Err(e) => {
                eprintln!("shmbus-foxglove: client {}: closed: {e}", out.peer());
                return;
            }
        };
        let parsed = match &msg {
            Message::Text(t) => ClientMessage::parse_json(t),
            Message::Binary(b) => ClientMessage::parse_binary(b),
            // Answered by the WebSocket library at the next read, which then ends the
            // stream; pings likewise.
            _ => continue,
        };
        let refused = match parsed {
            Ok(ClientMessage::Subscribe(s)) => topics.subscribe(client, &s.subscriptions),
            Ok(ClientMessage::Unsubscribe(u)) => topics.unsubscribe(client, &u.subscription_ids),
            Ok(_) => vec!["this server does not offer that (it advertises no capabilities)".to_owned()],
            Err(e) => vec![format!("not a message of the protocol: {e}")],
        };
        if !refused.is_empty() && out.send_json(&Status::error(one_status(&refused)).to_string()) == Sent::Closed {
            return;
        }
    }
}

/// The refusals of one request as one status: the first [`REFUSALS_SAID`] and how many more.
fn one_status(refused: &[String]) -> String {
    let mut said = refused.iter().take(REFUSALS_SAID).cloned().collect::<Vec<_>>().join("; ");
    if refused.len() > REFUSALS_SAID {
        said.push_str(&format!("; and {} more", refused.len() - REFUSALS_SAID));
    }
    said
}

/// Refusals named in one status; more are counted.
const REFUSALS_SAID: usize = 16;

/// Keeps a connection whose peer vanished from holding its place: TCP keepalive probes
/// after [`KEEPALIVE_IDLE`] of silence, and an end to a connection whose sent bytes go
/// unacknowledged for [`UNACKED`].
fn keep_alive(tcp: &TcpStream) -> std::io::Result<()> {
    let sock = socket2::SockRef::from(tcp);
    sock.set_tcp_keepalive(
        &socket2::TcpKeepalive::new().with_time(KEEPALIVE_IDLE).with_interval(Duration::from_secs(10)).with_retries(3),
    )?;
    sock.set_tcp_user_timeout(Some(UNACKED))
}

/// Silence on a connection before TCP keepalive probes it.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
/// How long sent bytes may go unacknowledged before the connection is dropped.
const UNACKED: Duration = Duration::from_secs(60);

/// Waits until `client`'s request header (up to its blank line) has come, leaving it unread
/// for the handshake, and returns its length: `None` if the client closes first or sends
/// more than [`MAX_REQUEST`] bytes without ending it.
async fn whole_request(client: &TcpStream) -> std::io::Result<Option<usize>> {
    let mut head = vec![0u8; MAX_REQUEST];
    let mut seen = 0;
    loop {
        let n = client.peek(&mut head).await?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(at) = head[..n].windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(Some(at + 4));
        }
        if n == MAX_REQUEST {
            return Ok(None);
        }
        if n == seen {
            // Nothing new yet: `peek` returns at once while anything is unread.
            tokio::time::sleep(REQUEST_POLL).await;
        }
        seen = n;
    }
}

/// A client's socket as the WebSocket library sees it: reads from the socket, writes into
/// the client's outbox (so its frames keep their place among the server's).
struct ClientIo {
    read: OwnedReadHalf,
    out: Arc<Outbox>,
}

impl AsyncRead for ClientIo {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.read).poll_read(cx, buf)
    }
}

impl AsyncWrite for ClientIo {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::Poll::Ready(match self.out.send_raw(buf) {
            Sent::Taken => Ok(buf.len()),
            Sent::Closed => Err(std::io::ErrorKind::BrokenPipe.into()),
        })
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
