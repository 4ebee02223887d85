//! The socket clients connect to, in front of the SDK's WebSocket server.
//!
//! The SDK's server accepts every connection it is offered; this gate bounds them: it
//! listens on `--listen`, and forwards each of at most `--max-clients` connections at once,
//! byte for byte, to the SDK's server on a loopback port of its own. A connection over the
//! limit is answered `503 Service Unavailable` and closed (at most [`REFUSING`] of those are
//! answered at once; beyond, a connection is closed unanswered). A connection is forwarded
//! only once its whole WebSocket request (the HTTP header, at most [`MAX_REQUEST`] bytes) has
//! come, within [`HANDSHAKE`]; one that is slower, or sends more, is closed without taking a
//! place from the others for longer (the SDK's server itself waits for a request for ever).
//!
//! Each direction is copied through a buffer of [`BUFFER`] bytes and never more: a client
//! that stops reading stops its own copy, its socket buffers fill, and the SDK's queue for
//! that client (its backlog, `--client-backlog` messages) drops its oldest messages. Nothing
//! else waits for it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// How long a new connection has to send its whole WebSocket request.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// The longest WebSocket request (HTTP header) a connection may send.
const MAX_REQUEST: usize = 16 * 1024;
/// How often a connection's partial request is looked at again while it comes in.
const REQUEST_POLL: Duration = Duration::from_millis(10);
/// Refused connections answered at once; more are closed unanswered.
const REFUSING: usize = 16;
/// How long a refused connection is given to send its request and take the answer.
const REFUSAL: Duration = Duration::from_secs(1);
/// The copy buffer of each direction of each connection.
const BUFFER: usize = 64 * 1024;

/// Accepts clients on `listener` for the SDK's server at `backend`, forever.
pub async fn run(listener: TcpListener, backend: SocketAddr, max_clients: usize) {
    let places = Arc::new(Semaphore::new(max_clients));
    let refusing = Arc::new(Semaphore::new(REFUSING));
    loop {
        let (mut client, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of descriptors, say: wait a moment rather than spin on the error.
                eprintln!("shmbus-foxglove: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(place) = places.clone().try_acquire_owned() else {
            eprintln!(
                "shmbus-foxglove: client {peer} refused: {max_clients} clients connected already (--max-clients)"
            );
            // Too many refusals under way: close this one at once (a flood must not run the
            // process out of descriptors).
            let Ok(answering) = refusing.clone().try_acquire_owned() else { continue };
            tokio::spawn(async move {
                let _answering = answering;
                // The request is read first: closing with it unread would reset the
                // connection before the client reads the answer.
                let mut request = [0u8; 4096];
                let _ = tokio::time::timeout(REFUSAL, client.read(&mut request)).await;
                let busy = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
                let _ = tokio::time::timeout(REFUSAL, async {
                    client.write_all(busy).await?;
                    client.shutdown().await
                })
                .await;
            });
            continue;
        };
        tokio::spawn(async move {
            let _place = place;
            if let Err(e) = forward(client, backend).await {
                eprintln!("shmbus-foxglove: client {peer}: {e}");
            }
        });
    }
}

async fn forward(mut client: TcpStream, backend: SocketAddr) -> std::io::Result<()> {
    match tokio::time::timeout(HANDSHAKE, whole_request(&client)).await {
        Ok(Ok(true)) => {}
        // Closed, failed, too long, or too slow: nothing to forward.
        _ => return Ok(()),
    }
    let mut server = TcpStream::connect(backend).await?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    match tokio::io::copy_bidirectional_with_sizes(&mut client, &mut server, BUFFER, BUFFER).await {
        Ok(_) => Ok(()),
        // A client that goes away mid-message is not worth a line.
        Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Waits until `client`'s request header (up to its blank line) has come, leaving it unread
/// for the SDK's server: `false` if the client closes first or sends more than
/// [`MAX_REQUEST`] bytes without ending it.
async fn whole_request(client: &TcpStream) -> std::io::Result<bool> {
    let mut head = vec![0u8; MAX_REQUEST];
    let mut seen = 0;
    loop {
        let n = client.peek(&mut head).await?;
        if n == 0 {
            return Ok(false);
        }
        if head[..n].windows(4).any(|w| w == b"\r\n\r\n") {
            return Ok(true);
        }
        if n == MAX_REQUEST {
            return Ok(false);
        }
        if n == seen {
            // Nothing new yet: `peek` returns at once while anything is unread.
            tokio::time::sleep(REQUEST_POLL).await;
        }
        seen = n;
    }
}
