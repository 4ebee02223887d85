//! Request/reply over two kinds of queue: one shared request queue that any number of
//! servers compete on, and one reply queue per client, named in each request.
//!
//! ```text
//! client A ──┐                         ┌── server 1 ──┐
//!            ├──► "rr.requests" ───────┤              ├──► "rr.reply.<client>"  ──► its client
//! client B ──┘   [reply queue][id][body] └── server 2 ──┘   [id][body]
//! ```
//!
//! Servers and clients are threads here so the example runs on its own; each of them opens
//! the queues by name exactly as a separate process would.
//!
//! Run: `cargo run --example queue_request_reply` (uses `/dev/shm` or `SHMBUS_ROOT`).

use std::collections::HashMap;
use std::error::Error;
use std::time::Duration;

use shmbus::queue::{Producer, Queue, QueueConfig, QueueRecvTimeoutError};
use shmbus::Domain;

const REQUESTS: &str = "rr.requests";
const MAX: usize = 256;
/// A request whose body is this asks the server to stop.
const SHUTDOWN: &[u8] = b"\0shutdown";

/// `[name length][reply queue name][request id][body]`
fn encode_request(reply_to: &str, id: u64, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(1 + reply_to.len() + 8 + body.len());
    m.push(reply_to.len() as u8);
    m.extend_from_slice(reply_to.as_bytes());
    m.extend_from_slice(&id.to_le_bytes());
    m.extend_from_slice(body);
    m
}

fn decode_request(m: &[u8]) -> Option<(&str, u64, &[u8])> {
    let n = *m.first()? as usize;
    let name = std::str::from_utf8(m.get(1..1 + n)?).ok()?;
    let id = u64::from_le_bytes(m.get(1 + n..9 + n)?.try_into().ok()?);
    Some((name, id, &m[9 + n..]))
}

/// Serves requests until it receives a shutdown request. Returns how many it served.
fn server(domain: &Domain) -> Result<usize, Box<dyn Error>> {
    let mut requests = Queue::open(domain, REQUESTS)?.consumer()?;
    let mut replies: HashMap<String, Producer> = HashMap::new();
    let mut buf = Vec::with_capacity(requests.max_message_len());
    let mut served = 0;
    loop {
        let n = requests.recv_into(&mut buf)?;
        let Some((reply_to, id, body)) = decode_request(&buf[..n]) else {
            eprintln!("server: malformed request dropped");
            continue;
        };
        if body == SHUTDOWN {
            return Ok(served);
        }
        // The work: upper-case the body.
        let mut reply = id.to_le_bytes().to_vec();
        reply.extend(body.iter().map(u8::to_ascii_uppercase));
        if !replies.contains_key(reply_to) {
            replies.insert(reply_to.to_owned(), Queue::open(domain, reply_to)?.producer()?);
        }
        replies.get_mut(reply_to).expect("inserted above").send_timeout(&reply, Duration::from_secs(5))?;
        served += 1;
    }
}

/// Sends `n` requests and checks every reply. Returns the replies in request order.
fn client(domain: &Domain, name: &str, n: u64) -> Result<Vec<String>, Box<dyn Error>> {
    let cfg = QueueConfig::default().capacity(16).max_message_len(MAX);
    let reply_q = Queue::create_or_open(domain, name, &cfg)?;
    let mut replies = reply_q.consumer()?;
    let mut requests = Queue::open(domain, REQUESTS)?.producer()?;
    let mut out = Vec::new();
    for id in 0..n {
        let body = format!("{name} request {id}");
        requests.send_timeout(&encode_request(name, id, body.as_bytes()), Duration::from_secs(5))?;
        // One outstanding request at a time keeps the example simple; a pipelined client
        // would match replies to requests by id instead.
        let reply = match replies.recv_timeout(Duration::from_secs(5)) {
            Ok(r) => r,
            Err(QueueRecvTimeoutError::Timeout) => {
                return Err(format!("{name}: no reply to request {id} within 5 s; is a server running?").into())
            }
            Err(e) => return Err(e.into()),
        };
        let got_id = u64::from_le_bytes(reply[..8].try_into()?);
        assert_eq!(got_id, id, "replies come back in order on a private queue");
        let text = String::from_utf8(reply[8..].to_vec())?;
        assert_eq!(text, body.to_uppercase());
        out.push(text);
    }
    std::fs::remove_file(reply_q.path())?;
    Ok(out)
}

/// Runs two servers and three clients in `domain`. Returns the total replies received.
pub fn run(domain: &Domain) -> Result<usize, Box<dyn Error>> {
    let cfg = QueueConfig::default().capacity(64).max_message_len(MAX);
    let requests = Queue::create_or_open(domain, REQUESTS, &cfg)?;
    let total = std::thread::scope(|s| -> Result<usize, Box<dyn Error>> {
        let servers: Vec<_> = (0..2).map(|_| s.spawn(|| server(domain).map_err(|e| e.to_string()))).collect();
        let clients: Vec<_> = (0..3)
            .map(|c| {
                s.spawn(move || {
                    client(domain, &format!("rr.reply.{}.{c}", std::process::id()), 50).map_err(|e| e.to_string())
                })
            })
            .collect();
        let mut total = 0;
        for c in clients {
            let replies = c.join().expect("client panicked")?;
            println!("client got {} replies, last: {:?}", replies.len(), replies.last());
            total += replies.len();
        }
        let mut tx = requests.producer()?;
        for _ in &servers {
            tx.send_timeout(&encode_request("-", 0, SHUTDOWN), Duration::from_secs(5))?;
        }
        for (i, srv) in servers.into_iter().enumerate() {
            println!("server {i} served {}", srv.join().expect("server panicked")?);
        }
        Ok(total)
    })?;
    std::fs::remove_file(requests.path())?;
    Ok(total)
}

fn main() -> Result<(), Box<dyn Error>> {
    let domain = Domain::new("example")?;
    let total = run(&domain)?;
    println!("{total} requests answered");
    Ok(())
}
