//! `shmbus-foxglove-bench`: one-way latency from a shmbus publisher to a WebSocket client
//! through `shmbus-foxglove`, against a plain tokio-tungstenite server sending the same
//! payload to the same client.
//!
//! Both paths are measured in one process of this program on one clock (CLOCK_MONOTONIC):
//! the sender writes the time into the payload's first 8 bytes, the client reads it when the
//! whole message has arrived. One message at a time (the next is sent when the previous
//! one arrived), so the figures are latency, not throughput.
//!
//! - **shmbus-foxglove**: the real program (beside this one) serves a scratch domain; this
//!   process publishes on a topic and its client subscribes to the topic's channel.
//! - **plain WebSocket**: a tokio-tungstenite server in this process, its own runtime; the
//!   sender hands the payload to it over a tokio channel and it sends it as one binary
//!   message, as a minimal hand-written bridge would.
//!
//! Usage: shmbus-foxglove-bench [--iters N] [--sizes 8,6220800]
//! Prints one JSON line per (path, size): p50, p90, p99 in microseconds.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use shmbus::{Domain, Topic, TopicConfig};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// Bytes before the payload in the protocol's binary message data: opcode, subscription
/// id, timestamp.
const MESSAGE_DATA_HEAD: usize = 1 + 4 + 8;

fn now() -> u64 {
    shmbus::time::monotonic_ns()
}

fn stamp(payload: &mut [u8]) {
    payload[..8].copy_from_slice(&now().to_le_bytes());
}

fn latency_of(payload: &[u8]) -> u64 {
    now().saturating_sub(u64::from_le_bytes(payload[..8].try_into().unwrap_or_default()))
}

fn percentiles(mut ns: Vec<u64>) -> (f64, f64, f64) {
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q).round() as usize] as f64 / 1000.0;
    (at(0.5), at(0.9), at(0.99))
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next binary message's bytes.
async fn next_binary(ws: &mut Ws) -> Vec<u8> {
    loop {
        match ws.next().await {
            Some(Ok(Message::Binary(b))) => return b.to_vec(),
            Some(Ok(_)) => continue,
            other => panic!("websocket ended: {other:?}"),
        }
    }
}

fn through_foxglove(rt: &tokio::runtime::Runtime, size: usize, iters: usize) -> Vec<u64> {
    let root = PathBuf::from("/dev/shm").join(format!("shmbus-foxglove-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("scratch root");
    let domain = Domain::with_root("bench", &root).expect("domain");
    let topic = Topic::create_or_open(&domain, "payload", &TopicConfig::default().max_message_len(size).history(4))
        .expect("topic");
    topic.prefault();
    let program: PathBuf = std::env::current_exe().expect("own path").with_file_name("shmbus-foxglove");
    let mut server = Command::new(&program)
        .arg("--root")
        .arg(&root)
        .args(["--domain", "bench", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e} (build it: cargo build --release -p shmbus-foxglove)", program.display()));
    let mut err = BufReader::new(server.stderr.take().expect("stderr"));
    let url = loop {
        let mut l = String::new();
        assert!(err.read_line(&mut l).expect("server output") > 0, "server exited");
        if let Some(at) = l.find("ws://") {
            break l[at..].split_whitespace().next().expect("url").to_owned();
        }
    };
    std::thread::spawn(move || for _ in err.lines() {});
    let mut publisher = topic.publisher().expect("publisher");
    let lat = rt.block_on(async {
        let mut req = url.into_client_request().expect("request");
        req.headers_mut().insert("sec-websocket-protocol", "foxglove.sdk.v1".parse().expect("header"));
        let (mut ws, _) = tokio_tungstenite::connect_async(req).await.expect("connect");
        // serverInfo, then the advertisement of the one topic.
        let channel = loop {
            if let Some(Ok(Message::Text(t))) = ws.next().await {
                if t.contains("\"advertise\"") {
                    let at = t.find("\"id\":").expect("channel id") + 5;
                    let id: u64 =
                        t[at..].split(|c: char| !c.is_ascii_digit()).next().unwrap_or("0").parse().unwrap_or(0);
                    break id;
                }
            }
        };
        let sub = format!(r#"{{"op":"subscribe","subscriptions":[{{"id":1,"channelId":{channel}}}]}}"#);
        ws.send(Message::text(sub)).await.expect("subscribe");
        let end = Instant::now() + Duration::from_secs(30);
        while Topic::status(&domain, "payload").map(|s| s.subscribers).unwrap_or(0) == 0 {
            assert!(Instant::now() < end, "the server never subscribed");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut payload = vec![0x5au8; size];
        let mut lat = Vec::with_capacity(iters);
        for _ in 0..iters + iters / 10 {
            stamp(&mut payload);
            publisher.send(&payload).expect("publish");
            let m = next_binary(&mut ws).await;
            assert_eq!(m.len(), MESSAGE_DATA_HEAD + size);
            lat.push(latency_of(&m[MESSAGE_DATA_HEAD..]));
        }
        lat.drain(..iters / 10); // warm-up
        lat
    });
    // SAFETY: kill has no memory preconditions; the pid is our own live child.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let _ = server.wait();
    drop(topic);
    let _ = std::fs::remove_dir_all(&root);
    lat
}

fn through_plain(rt: &tokio::runtime::Runtime, size: usize, iters: usize) -> Vec<u64> {
    // The server: its own runtime (as the program above has its own process), sending what
    // it is handed.
    let server_rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
    let listener = server_rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    server_rt.spawn(async move {
        let (tcp, _) = listener.accept().await.expect("accept");
        tcp.set_nodelay(true).expect("nodelay");
        let mut ws = tokio_tungstenite::accept_async(tcp).await.expect("handshake");
        while let Some(p) = rx.recv().await {
            if ws.send(Message::binary(p)).await.is_err() {
                break;
            }
        }
    });
    let lat = rt.block_on(async {
        let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}")).await.expect("connect");
        let mut payload = vec![0x5au8; size];
        let mut lat = Vec::with_capacity(iters);
        for _ in 0..iters + iters / 10 {
            stamp(&mut payload);
            // The server's copy, as the other path copies out of the topic.
            tx.send(payload.clone()).await.expect("hand over");
            let m = next_binary(&mut ws).await;
            assert_eq!(m.len(), size);
            lat.push(latency_of(&m));
        }
        lat.drain(..iters / 10);
        lat
    });
    drop(tx);
    server_rt.shutdown_timeout(Duration::from_millis(200));
    lat
}

fn main() {
    let mut iters = 2000usize;
    let mut sizes = vec![8usize, 6_220_800];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--iters", Some(n)) => iters = n.parse().expect("--iters N"),
            ("--sizes", Some(s)) => sizes = s.split(',').map(|x| x.parse().expect("--sizes a,b")).collect(),
            _ => {
                eprintln!("usage: shmbus-foxglove-bench [--iters N] [--sizes 8,6220800]");
                std::process::exit(2);
            }
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    for &size in &sizes {
        // Big messages: fewer of them.
        let n = if size > 1 << 20 { (iters / 10).max(20) } else { iters };
        for (path, lat) in
            [("shmbus-foxglove", through_foxglove(&rt, size, n)), ("plain-websocket", through_plain(&rt, size, n))]
        {
            let (p50, p90, p99) = percentiles(lat);
            println!(
                r#"{{"path":"{path}","size":{size},"iters":{n},"p50_us":{p50:.1},"p90_us":{p90:.1},"p99_us":{p99:.1}}}"#
            );
        }
    }
}
