//! `shmbus-foxglove`, run as `shmbus foxglove`: a live view of a domain's topics in Foxglove
//! (see README.md).
//!
//! The layers, bottom up: the library's domain watch (`Domain::watch`: channels created and
//! removed), [`outbox`] (what goes out to one client, within its bounds), [`topics`] (topics
//! as the protocol's channels, the clients that see them, and the threads that stream them
//! while clients subscribe), [`server`] (the listening socket, connections and their bounds,
//! each client's requests) and this file (options, start, signals).

mod outbox;
mod select;
mod server;
mod topics;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use shmbus::Domain;
use tokio::signal::unix::{signal, SignalKind};

use crate::outbox::Limits;
use crate::select::Selection;
use crate::topics::Topics;

/// Show a domain's topics live in Foxglove, over the Foxglove WebSocket protocol.
///
/// Every topic of the domain is advertised with its schema and message encoding, as topics
/// appear and go; a topic is read only while a client is subscribed to it. Open it in
/// Foxglove with Open connection → Foxglove WebSocket → ws://127.0.0.1:8765. Plain
/// WebSocket: no TLS, no authentication. Runs until SIGINT or SIGTERM.
#[derive(Debug, Parser)]
#[command(name = "shmbus foxglove", bin_name = "shmbus foxglove", version)]
struct Args {
    /// The domain whose topics are shown. Default: $SHMBUS_DOMAIN.
    #[arg(long, env = "SHMBUS_DOMAIN", hide_env_values = true)]
    domain: Option<String>,
    /// Directory holding the domains (default: $SHMBUS_ROOT, else /dev/shm).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Show only the topics whose names match GLOB (`*` any run of characters, `?` one);
    /// repeatable. Default: every topic.
    #[arg(long = "topics", value_name = "GLOB")]
    topics: Vec<String>,
    /// Only topic NAME may be seen and subscribed to (repeatable; with --topics, both must
    /// agree). Default: no such limit.
    #[arg(long, value_name = "NAME")]
    allow: Vec<String>,
    /// Address to listen on. Anything but a loopback address lets other hosts connect,
    /// without TLS or authentication: put a reverse proxy in front for those.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8765")]
    listen: SocketAddr,
    /// The most clients connected at once; more are refused (HTTP 503).
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    max_clients: u32,
    /// The most messages queued for one client; a client that reads slower loses the oldest
    /// (counted, and said once per client).
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    client_backlog: u32,
    /// The most bytes of messages queued for one client (one message is always let
    /// through, however large); past it the oldest are dropped as for --client-backlog.
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20, value_parser = clap::value_parser!(u64).range(1..))]
    client_backlog_bytes: u64,
    /// Seconds a new connection has to send its whole WebSocket request; a slower one is
    /// closed (it takes no place meanwhile).
    #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    handshake_timeout: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("shmbus-foxglove: cannot start its runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(serve(args));
    // Client tasks still draining to a stalled socket are not waited for.
    runtime.shutdown_timeout(Duration::from_millis(200));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shmbus-foxglove: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(args: Args) -> Result<(), String> {
    let mut sigint = signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT handler: {e}"))?;
    let mut sigterm = signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM handler: {e}"))?;
    let Some(name) = args.domain else {
        return Err("no domain: give --domain NAME or set SHMBUS_DOMAIN".into());
    };
    let domain = match &args.root {
        Some(root) => Domain::with_root(&name, root),
        None => Domain::new(&name),
    }
    .map_err(|e| e.to_string())?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    if !addr.ip().is_loopback() {
        eprintln!(
            "shmbus-foxglove: warning: listening on {addr}, not loopback, with no TLS and no authentication: put a reverse proxy with both in front"
        );
    }

    let topics = Topics::new(domain.clone(), Selection::new(args.topics, args.allow), format!("shmbus {name}"));
    // The watch first, then the scan: nothing linked in between is missed.
    let mut changes = watch_channels(&domain).map_err(|e| format!("watching domain {name}: {e}"))?;
    topics.scan();
    let limits = Limits {
        backlog: args.client_backlog as usize,
        backlog_bytes: usize::try_from(args.client_backlog_bytes).unwrap_or(usize::MAX),
    };
    let bounds = server::Bounds {
        max_clients: args.max_clients as usize,
        handshake: std::time::Duration::from_secs(args.handshake_timeout),
    };
    let server = tokio::spawn(server::run(listener, topics.clone(), bounds, limits));
    eprintln!("shmbus-foxglove: domain {name} on ws://{addr} (Foxglove: Open connection → Foxglove WebSocket)");

    let outcome = loop {
        tokio::select! {
            changed = changes.recv() => match changed {
                Some(()) => {
                    // It reads the domain's files: off the runtime's threads.
                    let t = topics.clone();
                    let _ = tokio::task::spawn_blocking(move || t.scan()).await;
                }
                None => break Err(format!("watching domain {name}: the watch ended")),
            },
            _ = sigint.recv() => break Ok(()),
            _ = sigterm.recv() => break Ok(()),
        }
    };
    server.abort();
    let t = topics.clone();
    let _ = tokio::task::spawn_blocking(move || t.stop()).await;
    // The clients were sent a close: a moment for it to reach them (a client that stopped
    // reading would hold it for ever).
    let closing = async {
        while topics.clients() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), closing).await;
    eprintln!("shmbus-foxglove: stopped");
    outcome
}

/// The domain's channels created and removed (`Domain::watch`, channels only: inotify, no
/// polling), as a wake-up for each batch: the caller then scans, which decides what is
/// there. A thread of its own waits on the watch; a wake-up not yet taken stands for any
/// number after it. A watch that fails (its root or domain directory removed and made
/// again, say) is said once and made again every [`REWATCH`], with a rescan each time: the
/// view goes on meanwhile.
fn watch_channels(domain: &Domain) -> Result<tokio::sync::mpsc::Receiver<()>, String> {
    let mut first = domain.watch().map_err(|e| e.to_string())?;
    first.channels_only();
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let domain = domain.clone();
    std::thread::Builder::new()
        .name("domain-watch".into())
        .spawn(move || {
            let mut watch = Some(first);
            // The last failure said, so that a lasting one is said once.
            let mut said = None;
            let say = |said: &mut Option<String>, e: shmbus::OpenError| {
                let e = e.to_string();
                if said.as_ref() != Some(&e) {
                    eprintln!("shmbus-foxglove: watching domain {}: {e}; trying again", domain.name());
                    *said = Some(e);
                }
            };
            loop {
                for event in watch.take().into_iter().flatten() {
                    match event {
                        Ok(_) => {
                            if let Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) = tx.try_send(()) {
                                return;
                            }
                        }
                        Err(e) => {
                            say(&mut said, e);
                            break;
                        }
                    }
                }
                std::thread::sleep(REWATCH);
                match domain.watch() {
                    Ok(mut w) => {
                        w.channels_only();
                        watch = Some(w);
                        said = None;
                    }
                    Err(e) => say(&mut said, e),
                }
                // What changed while nothing watched: one scan.
                if let Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) = tx.try_send(()) {
                    return;
                }
            }
        })
        .map_err(|e| format!("cannot start the watch's thread: {e}"))?;
    Ok(rx)
}

/// How long after a failed domain watch it is made again.
const REWATCH: Duration = Duration::from_secs(1);
