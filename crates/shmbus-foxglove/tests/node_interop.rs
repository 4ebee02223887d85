//! shmbus-foxglove against the Foxglove WebSocket protocol's own client,
//! `@foxglove/ws-protocol`'s `FoxgloveClient` over the `ws` package, in Node programs
//! (tests/node/), all real processes: the server binary, Node clients, topics published from
//! this test. The Node packages are pinned in a scratch directory that
//! `scripts/node-interop.sh` makes (`make node-interop`); without it these tests skip with
//! a reason, unless `SHMBUS_REQUIRE_INTEROP=1`, when they fail.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use shmbus::{Domain, Publisher, Schema, Topic, TopicConfig};

const WAIT: Duration = Duration::from_secs(30);

/// The scratch node_modules, or `None` (after saying why) when it is not there.
fn node_modules() -> Option<PathBuf> {
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"),
    };
    let dir = target.join("node-interop/node_modules");
    if dir.join("@foxglove/ws-protocol").exists() && dir.join("ws").exists() {
        return Some(dir);
    }
    let why = format!("{} is missing: run scripts/node-interop.sh (make node-interop)", dir.display());
    if std::env::var("SHMBUS_REQUIRE_INTEROP").as_deref() == Ok("1") {
        panic!("SHMBUS_REQUIRE_INTEROP=1 but {why}");
    }
    eprintln!("skipped: {why}");
    None
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/node").join(name)
}

/// A domain under a scratch root of its own, removed at the end.
struct Scratch {
    root: PathBuf,
    domain: Domain,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let root = PathBuf::from("/dev/shm").join(format!("shmbus-test-foxglove-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let domain = Domain::with_root("fox", &root).unwrap();
        Scratch { root, domain }
    }

    fn topic(&self, name: &str, max: usize, schema: Option<Schema>) -> Topic {
        self.topic_with_history(name, max, 64, schema)
    }

    fn topic_with_history(&self, name: &str, max: usize, history: usize, schema: Option<Schema>) -> Topic {
        let mut config = TopicConfig::default().max_message_len(max).history(history);
        if let Some(s) = schema {
            config = config.schema(s);
        }
        Topic::create_or_open(&self.domain, name, &config).unwrap()
    }

    fn subscribers(&self, name: &str) -> usize {
        Topic::status(&self.domain, name).unwrap().subscribers
    }

    /// Waits until topic `name` has `n` subscribers (the server's, made on subscription).
    fn wait_subscribers(&self, name: &str, n: usize) {
        let end = Instant::now() + WAIT;
        while self.subscribers(name) != n {
            assert!(Instant::now() < end, "topic {name} never had {n} subscriber(s)");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The server process, its stderr lines collected.
struct Server {
    child: Child,
    url: String,
    port: u16,
    log: Receiver<String>,
}

impl Server {
    fn start(s: &Scratch, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shmbus-foxglove"))
            .arg("--root")
            .arg(&s.root)
            .args(["--domain", "fox", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .expect("start shmbus-foxglove");
        let (tx, log) = channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                eprintln!("[server] {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let end = Instant::now() + WAIT;
        let url = loop {
            let line = log
                .recv_timeout(end.saturating_duration_since(Instant::now()))
                .expect("server never said where it listens");
            if let Some(at) = line.find("ws://") {
                break line[at..].split_whitespace().next().unwrap().to_owned();
            }
        };
        let port = url.rsplit(':').next().unwrap().parse().unwrap();
        Server { child, url, port, log }
    }

    /// Stops the server with SIGTERM: it must exit 0.
    fn stop(mut self) -> Vec<String> {
        // SAFETY: kill has no memory preconditions; the pid is our own live child.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) }, 0);
        let end = Instant::now() + WAIT;
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            assert!(Instant::now() < end, "server did not exit on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "server exited with {status} on SIGTERM");
        self.log.try_iter().collect()
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Node client (tests/node/client.js).
struct Node {
    child: Child,
    stdin: ChildStdin,
    events: Receiver<Value>,
    /// Events read while waiting for another.
    seen: Vec<Value>,
    /// Every channel ever advertised, by topic (the latest advertisement of each).
    advertised: std::collections::HashMap<String, Value>,
}

impl Node {
    fn start(nm: &Path, url: &str) -> Node {
        Node::run(nm, "client.js", url)
    }

    fn run(nm: &Path, file: &str, url: &str) -> Node {
        let mut child = Command::new("node")
            .arg(script(file))
            .arg(url)
            .env("NODE_PATH", nm)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start node");
        let (tx, events) = channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("node printed {line:?}: {e}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        Node { child, stdin, events, seen: Vec::new(), advertised: Default::default() }
    }

    fn send(&mut self, cmd: Value) {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next event that `pred` accepts (others are kept in `seen`).
    fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.seen.iter().position(&pred) {
            return self.seen.remove(i);
        }
        let end = Instant::now() + WAIT;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let v = self
                .events
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("node client never saw {what}; saw {:?}", self.seen));
            self.note(&v);
            if pred(&v) {
                return v;
            }
            self.seen.push(v);
        }
    }

    fn note(&mut self, v: &Value) {
        if v["ev"] == "advertise" {
            for c in v["channels"].as_array().unwrap() {
                self.advertised.insert(c["topic"].as_str().unwrap().to_owned(), c.clone());
            }
        }
    }

    /// Waits until `topic` is advertised; its channel.
    fn advertised(&mut self, topic: &str) -> Value {
        if let Some(c) = self.advertised.get(topic) {
            return c.clone();
        }
        let ev = self.wait_for(&format!("advertise {topic}"), |v| {
            v["ev"] == "advertise" && v["channels"].as_array().unwrap().iter().any(|c| c["topic"] == topic)
        });
        self.seen.push(ev);
        self.advertised[topic].clone()
    }

    fn subscribe(&mut self, topic: &str) {
        self.send(json!({"cmd": "subscribe", "topic": topic}));
        self.wait_for(&format!("subscribed {topic}"), |v| v["ev"] == "subscribed" && v["topic"] == topic);
    }

    /// The next `n` messages of `topic`.
    fn messages(&mut self, topic: &str, n: usize) -> Vec<Value> {
        (0..n)
            .map(|i| self.wait_for(&format!("message {i} of {topic}"), |v| v["ev"] == "message" && v["topic"] == topic))
            .collect()
    }

    /// Every topic advertised so far.
    fn topics_seen(&mut self) -> Vec<String> {
        while let Ok(v) = self.events.try_recv() {
            self.note(&v);
            self.seen.push(v);
        }
        let mut t: Vec<String> = self.advertised.keys().cloned().collect();
        t.sort();
        t
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn json_schema() -> Schema {
    let data = br#"{"type":"object","properties":{"i":{"type":"integer"},"name":{"type":"string"}}}"#;
    Schema::new("json", "demo.Counter", "jsonschema", data.to_vec()).unwrap()
}

fn now_unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

fn send(p: &mut Publisher, data: &[u8]) {
    p.send(data).unwrap();
}

#[test]
fn advertises_schemas_and_streams_decoded_messages_in_order() {
    let Some(nm) = node_modules() else { return };
    let s = Scratch::new("stream");
    let counter = s.topic("counter", 256, Some(json_schema()));
    let raw = s.topic("raw", 64, None);
    let imu_text = "float64 x\nint32 y\n";
    let _imu = s.topic(
        "imu",
        64,
        Some(Schema::new("cdr", "demo_msgs/msg/Imu", "ros2msg", imu_text.as_bytes().to_vec()).unwrap()),
    );
    let proto = vec![0x0a, 0x03, b'a', 0x00, 0xff];
    let _img =
        s.topic("image", 64, Some(Schema::new("protobuf", "foxglove.RawImage", "protobuf", proto.clone()).unwrap()));
    // The burst below (100 messages) fits the client's backlog: none is dropped for being slow.
    let server = Server::start(&s, &["--client-backlog", "256"]);
    let mut node = Node::start(&nm, &server.url);
    node.wait_for("open", |v| v["ev"] == "open" && v["protocol"] == "foxglove.sdk.v1");

    let c = node.advertised("counter");
    assert_eq!(
        (c["encoding"].as_str(), c["schemaName"].as_str(), c["schemaEncoding"].as_str()),
        (Some("json"), Some("demo.Counter"), Some("jsonschema"))
    );
    assert_eq!(c["schema"].as_str().unwrap().as_bytes(), json_schema().data());
    let r = node.advertised("raw");
    assert_eq!(
        (r["encoding"].as_str(), r["schemaName"].as_str(), r["schema"].as_str()),
        (Some(""), Some(""), Some(""))
    );
    assert!(r["schemaEncoding"].is_null(), "a topic without a schema has no schema encoding: {r}");
    let i = node.advertised("imu");
    assert_eq!(
        (i["encoding"].as_str(), i["schemaEncoding"].as_str(), i["schema"].as_str()),
        (Some("cdr"), Some("ros2msg"), Some(imu_text))
    );
    // Binary schema data goes as base64, as the protocol says for protobuf.
    let p = node.advertised("image");
    assert_eq!(p["schema"].as_str(), Some("CgNhAP8="));

    // Nothing reads a topic nobody subscribed to.
    assert_eq!(s.subscribers("counter"), 0);
    node.subscribe("counter");
    node.subscribe("raw");
    s.wait_subscribers("counter", 1);
    s.wait_subscribers("raw", 1);
    let (mut pc, mut pr) = (counter.publisher().unwrap(), raw.publisher().unwrap());
    let before = now_unix_ns();
    for i in 0..50 {
        send(&mut pc, format!(r#"{{"i":{i},"name":"n{i}"}}"#).as_bytes());
        send(&mut pr, &[i as u8, 0xff, 0x00, 0x80]);
    }
    let msgs = node.messages("counter", 50);
    for (i, m) in msgs.iter().enumerate() {
        assert_eq!(m["json"], json!({"i": i, "name": format!("n{i}")}), "message {i} out of order or wrong");
        let t: u64 = m["time"].as_str().unwrap().parse().unwrap();
        // Publish time on the Unix epoch: after the test started publishing, not in the future
        // of its last look at the clock by more than clock skew could explain.
        assert!(t + 1_000_000_000 >= before && t <= now_unix_ns() + 1_000_000_000, "time {t} is not the publish time");
    }
    let raws = node.messages("raw", 50);
    for (i, m) in raws.iter().enumerate() {
        assert_eq!(m["hex"].as_str().unwrap(), format!("{:02x}ff0080", i as u8));
    }
    // The last unsubscribe lets go of the shmbus subscriber.
    node.send(json!({"cmd": "unsubscribe", "topic": "counter"}));
    s.wait_subscribers("counter", 0);
    assert_eq!(s.subscribers("raw"), 1);
    let log = server.stop();
    assert!(log.iter().any(|l| l.contains("stopped")), "no clean stop: {log:?}");
    assert_eq!(s.subscribers("raw"), 0, "the server left its subscriber behind");
    // The client was told the server is going (a WebSocket close, 1001 "going away").
    let closed = node.wait_for("the close", |v| v["ev"] == "close");
    assert_eq!(closed["code"], 1001, "{closed}");
}

#[test]
fn topics_appear_and_go_while_connected() {
    let Some(nm) = node_modules() else { return };
    let s = Scratch::new("appear");
    let _first = s.topic("first", 64, None);
    let server = Server::start(&s, &[]);
    let mut node = Node::start(&nm, &server.url);
    node.advertised("first");
    let later = s.topic("later", 64, Some(json_schema()));
    let c = node.advertised("later");
    assert_eq!(c["schemaName"], "demo.Counter");
    node.subscribe("later");
    s.wait_subscribers("later", 1);
    later.publisher().unwrap().send(br#"{"i":7}"#).unwrap();
    assert_eq!(node.messages("later", 1)[0]["json"], json!({"i": 7}));
    drop(later);
    s.domain.remove_forced("later").unwrap();
    node.wait_for("unadvertise later", |v| v["ev"] == "unadvertise" && v["topics"] == json!(["later"]));
    // The whole domain directory goes, then comes back with a new topic.
    drop(_first);
    std::fs::remove_dir_all(s.domain.dir()).unwrap();
    node.wait_for("unadvertise first", |v| v["ev"] == "unadvertise" && v["topics"] == json!(["first"]));
    let _again = s.topic("again", 64, None);
    node.advertised("again");
    server.stop();
}

#[test]
fn eight_clients_at_once() {
    let Some(nm) = node_modules() else { return };
    let s = Scratch::new("eight");
    // History for the whole burst below: the server's one subscriber must not lag.
    let t = s.topic_with_history("counter", 256, 1024, Some(json_schema()));
    // A backlog for the whole burst too: a client slower than the burst would lose the
    // oldest of it (what the backlog is for).
    let server = Server::start(&s, &["--client-backlog", "512"]);
    let mut nodes: Vec<Node> = (0..8).map(|_| Node::start(&nm, &server.url)).collect();
    for n in &mut nodes {
        n.advertised("counter");
        n.subscribe("counter");
    }
    // One shmbus subscriber for all of them.
    s.wait_subscribers("counter", 1);
    // Each client's subscription reaches the server on its own: send until every client
    // has had one, then the numbered run.
    let mut p = t.publisher().unwrap();
    for n in &mut nodes {
        let end = Instant::now() + WAIT;
        loop {
            p.send(br#"{"i":-1}"#).unwrap();
            let got = n.events.recv_timeout(Duration::from_millis(100));
            if let Ok(v) = got {
                if v["ev"] == "message" {
                    break;
                }
                n.seen.push(v);
            }
            assert!(Instant::now() < end, "a client never received");
        }
    }
    for i in 0..100 {
        p.send(format!(r#"{{"i":{i}}}"#).as_bytes()).unwrap();
    }
    for (k, n) in nodes.iter_mut().enumerate() {
        let mut next = 0;
        while next < 100 {
            let m = n.wait_for(&format!("client {k} message {next}"), |v| v["ev"] == "message");
            let i = m["json"]["i"].as_i64().unwrap();
            if i == -1 {
                continue;
            }
            assert_eq!(i, next, "client {k} out of order");
            next += 1;
        }
    }
    server.stop();
}

#[test]
fn stalled_and_hostile_clients_do_not_stop_another() {
    let Some(nm) = node_modules() else { return };
    let s = Scratch::new("stall");
    const BIG: usize = 256 * 1024;
    let t = s.topic("big", BIG, None);
    let server = Server::start(&s, &["--client-backlog", "8"]);
    let mut stalled = Node::start(&nm, &server.url);
    stalled.advertised("big");
    stalled.subscribe("big");
    s.wait_subscribers("big", 1);
    stalled.send(json!({"cmd": "stall"}));
    stalled.wait_for("stalled", |v| v["ev"] == "stalled");

    let mut hostile = Node::run(&nm, "hostile.js", &server.url);
    let mut good = Node::start(&nm, &server.url);
    good.advertised("big");
    good.subscribe("big");
    let mut p = t.publisher().unwrap();
    let mut payload = vec![0u8; BIG];
    // Far more than the stalled client's socket buffers and backlog hold (500 × 256 KiB).
    for i in 0..500u32 {
        payload[..4].copy_from_slice(&i.to_le_bytes());
        p.send(&payload).unwrap();
        while let Ok(v) = good.events.try_recv() {
            good.seen.push(v);
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    hostile.wait_for("hostile done", |v| v["ev"] == "done");
    // The hostile WebSocket was closed (its 24 MiB frame is over the limit).
    assert!(hostile.seen.iter().any(|v| v["ev"] == "closed"), "hostile client was not closed: {:?}", hostile.seen);
    // After all that the good client still receives, and the server still runs.
    let mut server = server;
    assert!(server.alive());
    payload[..4].copy_from_slice(&u32::MAX.to_le_bytes());
    let end = Instant::now() + WAIT;
    loop {
        p.send(&payload).unwrap();
        let m = good.wait_for("the marker", |v| v["ev"] == "message");
        if m["head"].as_str().unwrap()[..8] == *"ffffffff" {
            assert_eq!(m["len"], BIG);
            break;
        }
        assert!(Instant::now() < end);
    }
    let log = server.stop();
    // The server dropped messages for the stalled client, said so once, and counted them.
    let said = |what: &str| log.iter().filter(|l| l.contains(what)).count();
    assert!(said("reads too slowly") >= 1, "no drop reported: {log:?}");
    // "client ADDR gone; N message(s) dropped for it in all", at the latest when the server stops.
    let counted: Vec<u64> = log
        .iter()
        .filter(|l| l.contains("dropped for it in all"))
        .filter_map(|l| l.split("; ").nth(1)?.split(' ').next()?.parse().ok())
        .collect();
    assert!(counted.iter().any(|&n| n > 0), "no count of dropped messages: {log:?}");
    for l in log.iter().filter(|l| l.contains("reads too slowly")) {
        let client = l.split(": ").nth(1).unwrap();
        let times = log.iter().filter(|m| m.contains(client) && m.contains("reads too slowly")).count();
        assert_eq!(times, 1, "a client's drops said more than once: {log:?}");
    }
}

#[test]
fn allow_refuses_other_topics() {
    let Some(nm) = node_modules() else { return };
    let s = Scratch::new("allow");
    let _open = s.topic("open", 64, None);
    let secret = s.topic("secret", 64, None);
    let server = Server::start(&s, &["--allow", "open"]);
    let mut node = Node::start(&nm, &server.url);
    node.advertised("open");
    // Everything the server advertises has been seen once a later topic shows up.
    let _late = s.topic("late", 64, None);
    let _late_ok = s.topic("open2", 64, None);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(node.topics_seen(), vec!["open".to_owned()], "only the allowed topic may be advertised");
    // Subscribing to channel ids that were never advertised gets nothing, and opens no
    // subscriber on the topic.
    for id in 0..16 {
        node.send(json!({"cmd": "subscribe-id", "id": id}));
    }
    let mut p = secret.publisher().unwrap();
    for _ in 0..20 {
        p.send(b"secret").unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(s.subscribers("secret"), 0);
    std::thread::sleep(Duration::from_millis(300));
    node.topics_seen();
    assert!(!node.seen.iter().any(|v| v["ev"] == "message"), "a refused topic was streamed: {:?}", node.seen);
    server.stop();
}

/// A connection takes one of the `--max-clients` places only once its whole WebSocket
/// request has come: one that stalls half-way keeps nobody out, even with one place; one
/// that sends a request header over 16 KiB is closed at once. (A handshake time of 60 s, so
/// that the stalled one is surely still waiting while the client gets in.)
#[test]
fn a_request_that_never_ends_keeps_nobody_out() {
    let Some(nm) = node_modules() else { return };
    let s = Scratch::new("handshake");
    let _t = s.topic("t", 64, None);
    let server = Server::start(&s, &["--max-clients", "1", "--handshake-timeout", "60"]);
    let mut stalled = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stalled.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
    let mut huge = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    // Closed for its size, while the stalled one still waits.
    let _ = huge.write_all(&vec![b'a'; 20 * 1024]);
    assert_closed(&huge, "the over-long request");
    assert!(still_open(&stalled), "the over-long request was kept waiting until the stalled one ended");
    // The one place is free: a client gets in while the stalled request waits.
    let mut c = Node::start(&nm, &server.url);
    c.advertised("t");
    assert!(still_open(&stalled), "the stalled request was closed before its handshake time");
    drop(c);
    server.stop();
}

/// A connection that has not sent its whole request within `--handshake-timeout` is closed.
#[test]
fn a_request_that_never_ends_is_closed_after_the_handshake_time() {
    let s = Scratch::new("handshake-time");
    let server = Server::start(&s, &["--handshake-timeout", "1"]);
    let mut stalled = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stalled.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
    assert_closed(&stalled, "the stalled request");
    server.stop();
}

/// Waits (up to WAIT) for the server to close `conn`: an end of stream or a reset, never a
/// timeout, and nothing sent on it.
fn assert_closed(conn: &TcpStream, what: &str) {
    conn.set_read_timeout(Some(WAIT)).unwrap();
    let mut rest = Vec::new();
    match (&*conn).read_to_end(&mut rest) {
        Ok(_) => assert!(rest.is_empty(), "{what} was answered: {:?}", String::from_utf8_lossy(&rest)),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("{what} is still open ({e})"),
    }
}

/// Whether `conn` is still open: nothing to read and no end of stream.
fn still_open(conn: &TcpStream) -> bool {
    conn.set_nonblocking(true).unwrap();
    let mut probe = [0u8; 1];
    let open = matches!((&*conn).read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    conn.set_nonblocking(false).unwrap();
    open
}

/// More connections that never send their request than the server keeps waiting (64): each
/// newer one closes the oldest, said in the log, and a client still gets in while the newest
/// wait.
#[test]
fn a_flood_of_silent_connections_closes_the_oldest() {
    let Some(nm) = node_modules() else { return };
    let s = Scratch::new("flood");
    let _t = s.topic("t", 64, None);
    let server = Server::start(&s, &["--max-clients", "1", "--handshake-timeout", "60"]);
    let silent: Vec<TcpStream> = (0..72).map(|_| TcpStream::connect(("127.0.0.1", server.port)).unwrap()).collect();
    // The 8 oldest are closed to make room, long before their handshake time: the newest,
    // opened after them, are all still open once they are.
    for conn in &silent[..8] {
        assert_closed(conn, "an old silent connection");
    }
    let open = silent[8..].iter().filter(|c| still_open(c)).count();
    assert_eq!(open, 64, "the 64 newest silent connections are not all open");
    // A client connects (closing the oldest waiting one) and gets the place.
    let mut c = Node::start(&nm, &server.url);
    c.advertised("t");
    drop(c);
    drop(silent);
    let log = server.stop();
    assert!(
        log.iter().any(|l| l.contains("1 connection(s) closed in all for not sending their request")),
        "no closing said: {log:?}"
    );
}

#[test]
fn connections_over_max_clients_are_refused() {
    let Some(nm) = node_modules() else { return };
    let s = Scratch::new("max");
    let _t = s.topic("t", 64, None);
    let server = Server::start(&s, &["--max-clients", "2"]);
    let mut a = Node::start(&nm, &server.url);
    let mut b = Node::start(&nm, &server.url);
    a.advertised("t");
    b.advertised("t");
    let mut third = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    third.set_read_timeout(Some(WAIT)).unwrap();
    third
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: foxglove.sdk.v1\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    // Up to the close (or a reset after it).
    let _ = third.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 503"), "third client not refused: {answer:?}");
    // A place freed is a place taken again.
    drop(a);
    let end = Instant::now() + WAIT;
    loop {
        let mut c = Node::start(&nm, &server.url);
        let ok = c.wait_for("open or close", |v| v["ev"] == "open" || v["ev"] == "close" || v["ev"] == "error");
        if ok["ev"] == "open" {
            break;
        }
        assert!(Instant::now() < end, "the freed place was never given again");
        std::thread::sleep(Duration::from_millis(100));
    }
    server.stop();
}
