//! `demo-redis`: the demo profile (what `shmbus demo` runs) over Redis streams, the
//! comparison the profile was first measured with: the same producers, rates and consumers, with
//! `XADD` / `XREAD BLOCK` over loopback TCP or a Unix socket instead of shared memory.
//!
//! | producer       | rate      | message                        |
//! |----------------|-----------|--------------------------------|
//! | `imu`          | 1 kHz     | 64 B                           |
//! | `image`        | 30 Hz     | 6,220,800 B (`--image-bytes`)  |
//! | `med01..med05` | 40..44 Hz | 2 KiB                          |
//!
//! Consumers: `imu`, `image`, `image+med01`, `image+med0[1-5]`, `imu+image+med0[1-5]`, and
//! the last again sleeping 10 ms after each reply it wakes for (as `shmbus demo` does).
//!
//! Every role is a process of its own (this binary re-executed with the hidden
//! [`ROLE`] subcommand, one connection each); the server is the harness's own
//! `redis-server` ([`Server`], started and stopped as for the Redis ping-pong peers).
//!
//! * A producer sends `XADD KEY MAXLEN ~ N * t TS s SEQ d PAYLOAD` and reads the reply;
//!   `TS` is `CLOCK_MONOTONIC` taken just before the command is built. **write** = the
//!   whole round trip. `N` is the history `shmbus demo` gives the same topic (4 frames for
//!   `image`, about 60 ms and at least 16 for the rest), so memory stays bounded with 6 MB
//!   frames; `~` lets Redis trim whole nodes (a 6 MB entry fills a node by itself).
//! * A consumer loops on `XREAD BLOCK 100 STREAMS K1 … ID1 …` (ids of the last entries it
//!   read, `0-0` at first: the streams are new). For each entry, once its payload has been
//!   read from the socket into the consumer's own buffer, **view** = now − `TS`. A socket
//!   client gets the payload only by copying it, so **view+copy** is the same number.
//!   Missing sequence numbers (entries trimmed before a slow consumer read them) are
//!   counted as `gaps`.
//! * After its last message each producer adds an `end` entry; a consumer stops when it
//!   has seen the end of every stream it reads, so everything sent is counted.
//!
//! The profile (rates, sizes, histories, consumers), the latency summaries and the table
//! come from the `shmbus-profile` crate, as in `shmbus demo`. The output is the table and the
//! JSON object of `shmbus demo --json` (`consumers`, `producers`, `seconds`, `image_bytes`),
//! plus `backend` and `view_is_copy`.

use std::io::{self, Write};
use std::time::Duration;

use serde_json::{json, Value};
use shmbus::time::monotonic_ns;
use shmbus_profile::{consumers, producers, write_table, PaceArgs, RunArgs, Samples, MED_BYTES};

use crate::child::{self, Helper};
use crate::transports::redis::{self, Addr, Conn, Server};
use crate::waiter::{Waiter, Watch};

/// The hidden subcommand of one producer or consumer.
pub const ROLE: &str = "demo-redis-role";

/// `XREAD BLOCK` timeout (ms): how often a waiting consumer looks at its parent.
const BLOCK_MS: &[u8] = b"100";
/// Longest one socket wait may last before a role gives up.
const STALL_LIMIT: Duration = Duration::from_secs(60);

/// Loopback TCP or the Unix socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Via {
    /// 127.0.0.1, a free port.
    Tcp,
    /// The server's Unix socket.
    Uds,
}

impl Via {
    fn backend(self) -> &'static str {
        match self {
            Via::Tcp => "redis-tcp",
            Via::Uds => "redis-uds",
        }
    }
}

/// `shmbus-bench demo-redis --transport tcp|uds [--seconds S] [--image-bytes B] [--json]`
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How clients reach the server: tcp or uds.
    #[arg(long, value_enum, value_name = "T")]
    transport: Via,
    #[command(flatten)]
    run: RunArgs,
}

/// A producer or a consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// `XADD`s to one stream at a rate.
    Producer,
    /// `XREAD BLOCK`s on its streams.
    Consumer,
}

/// One process of the demo (hidden [`ROLE`] subcommand).
#[derive(Debug, clap::Args)]
pub struct RoleArgs {
    /// The server: `tcp:PORT` or `unix:PATH`.
    #[arg(long)]
    addr: String,
    #[arg(long, value_enum)]
    role: Role,
    /// Label printed in the results.
    #[arg(long)]
    label: String,
    /// The stream a producer writes, or those a consumer reads.
    #[arg(long, value_delimiter = ',')]
    streams: Vec<String>,
    /// Producer: message size. Consumer: the largest message (its buffer).
    #[arg(long, default_value_t = 64)]
    bytes: usize,
    /// Producer: `XADD … MAXLEN ~ N`.
    #[arg(long, default_value_t = 16)]
    maxlen: usize,
    /// Producer: write the whole message each time (the camera), not only its first bytes.
    #[arg(long)]
    fill: bool,
    /// Consumer: sleep this long after each reply with messages.
    #[arg(long, default_value_t = 0)]
    sleep_ms: u64,
    // Producer: when and how often it writes.
    #[command(flatten)]
    pace: PaceArgs,
}

/// The role processes; any still running when this is dropped (an error midway) are killed
/// and reaped.
struct Roles(Vec<Helper>);

impl Drop for Roles {
    fn drop(&mut self) {
        child::kill_all(&mut self.0);
    }
}

fn role_args(addr: &str, role: &str, label: &str, streams: &[String]) -> Vec<String> {
    let mut v: Vec<String> =
        ["--addr", addr, "--role", role, "--label", label, "--streams"].iter().map(|s| s.to_string()).collect();
    v.push(streams.join(","));
    v
}

/// Runs the profile against a fresh `redis-server` and prints the latencies.
pub fn run(a: Args) -> Result<(), String> {
    a.run.check()?;
    if a.run.image_bytes == 0 || a.run.image_bytes > crate::MAX_SIZE {
        return Err(format!("--image-bytes must be 1..={}", crate::MAX_SIZE));
    }
    if !redis::available() {
        // The one line a missing peer gets; an explicit run of it fails.
        eprintln!("{}", redis::NOT_FOUND);
        std::process::exit(1);
    }
    let server = Server::start().map_err(|e| format!("redis-server: {e}"))?;
    let addr = server.addr(a.transport == Via::Uds).to_arg();
    let (consumer_results, producer_results) = run_roles(&addr, &a)?;
    drop(server);
    let result = json!({
        "backend": a.transport.backend(),
        "seconds": a.run.seconds,
        "image_bytes": a.run.image_bytes,
        "view_is_copy": true,
        "consumers": consumer_results,
        "producers": producer_results,
    });
    let mut out = io::stdout().lock();
    let written = if a.run.json { writeln!(out, "{result}") } else { write_table(&result, &mut out) };
    written.map_err(|e| format!("cannot write the results: {e}"))
}

/// Starts the consumers, waits until each is connected, starts the producers on a common
/// clock and collects one JSON line from each.
fn run_roles(addr: &str, a: &Args) -> Result<(Vec<Value>, Vec<Value>), String> {
    let spawn = |args: Vec<String>, what: &str| {
        child::spawn(ROLE, &args).map_err(|e| format!("cannot start the demo-redis {what}: {e}"))
    };
    let cons = consumers();
    let prods = producers(a.run.image_bytes);
    let largest = a.run.image_bytes.max(MED_BYTES);
    let mut roles = Roles(Vec::new());
    for c in &cons {
        let mut args = role_args(addr, "consumer", c.label, &c.topics);
        args.extend(["--bytes".into(), largest.to_string(), "--sleep-ms".into(), c.sleep_ms.to_string()]);
        roles.0.push(spawn(args, c.label)?);
    }
    for (h, c) in roles.0.iter_mut().zip(&cons) {
        match h.line() {
            Ok(l) if l == "ready" => {}
            Ok(l) => return Err(format!("demo-redis consumer '{}' said {l:?} instead of ready", c.label)),
            Err(e) => return Err(format!("demo-redis consumer '{}' failed to start: {e}", c.label)),
        }
    }

    let (start_ns, until_ns) = a.run.window();
    for p in &prods {
        let mut args = role_args(addr, "producer", &p.topic, std::slice::from_ref(&p.topic));
        args.extend(["--bytes".into(), p.bytes.to_string(), "--maxlen".into(), p.history.to_string()]);
        args.extend(PaceArgs { rate_hz: p.rate_hz, start_ns, until_ns }.to_args());
        if p.camera {
            args.push("--fill".into());
        }
        roles.0.push(spawn(args, &p.topic)?);
    }

    // Producers first: they end on their own; a failed one ends the run (its consumers
    // would wait for its end entry forever).
    let labels: Vec<&str> = cons.iter().map(|c| c.label).chain(prods.iter().map(|p| p.topic.as_str())).collect();
    let mut results = vec![Value::Null; labels.len()];
    for i in (cons.len()..labels.len()).chain(0..cons.len()) {
        let h = &mut roles.0[i];
        let line = h.line().map_err(|e| format!("demo-redis '{}': {e}", labels[i]))?;
        let v: Value =
            serde_json::from_str(&line).map_err(|_| format!("demo-redis '{}' printed {line:?}", labels[i]))?;
        match h.wait_exit(Duration::from_secs(10)) {
            Ok(Some(s)) if s.success() => {}
            Ok(Some(s)) => return Err(format!("demo-redis '{}' failed ({s})", labels[i])),
            _ => return Err(format!("demo-redis '{}' did not exit", labels[i])),
        }
        results[i] = v;
    }
    let producer_results = results.split_off(cons.len());
    Ok((results, producer_results))
}

/// A role's socket waits go on while the parent is there, for at most [`STALL_LIMIT`].
struct ParentWatch {
    ppid: u32,
}

impl Watch for ParentWatch {
    fn check(&mut self, waited: Duration) -> io::Result<()> {
        if !child::parent_alive(self.ppid) {
            return Err(io::Error::other("the demo-redis parent is gone"));
        }
        if waited > STALL_LIMIT {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "redis-server does not answer"));
        }
        Ok(())
    }
}

/// Runs one producer or consumer and prints its numbers as one JSON line.
pub fn role_main(a: RoleArgs) -> Result<(), String> {
    let ppid = std::os::unix::process::parent_id();
    let fail = |e: io::Error| format!("demo-redis {:?} '{}': {e}", a.role, a.label);
    let addr = Addr::parse(&a.addr).map_err(fail)?;
    let mut conn = Conn::connect(&addr).map_err(fail)?;
    let mut watch = ParentWatch { ppid };
    let mut w = Waiter::new(&mut watch);
    let v = match a.role {
        Role::Producer => produce(&mut conn, &a, &mut w),
        Role::Consumer => consume(&mut conn, &a, &mut w),
    }
    .map_err(fail)?;
    println!("{v}");
    Ok(())
}

fn bad_reply(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("redis: {what}"))
}

fn produce(conn: &mut Conn, a: &RoleArgs, w: &mut Waiter<'_>) -> io::Result<Value> {
    let key = a.streams.first().ok_or_else(|| io::Error::other("a producer needs --streams NAME"))?.as_bytes();
    let maxlen = a.maxlen.to_string();
    let mut payload = vec![0u8; a.bytes];
    let mut write = Samples::default();
    let mut frame = 0u64;
    let mut ticker = a.pace.ticker();
    while ticker.wait() {
        frame += 1;
        if a.fill {
            // The "camera" writes the frame into the producer's own buffer (not timed).
            payload.fill(frame as u8);
        } else {
            let n = payload.len().min(8);
            payload[..n].copy_from_slice(&frame.to_le_bytes()[..n]);
        }
        let ts = monotonic_ns();
        let (ts_arg, seq_arg) = (ts.to_string(), frame.to_string());
        w.reset();
        conn.command(
            &[
                b"XADD",
                key,
                b"MAXLEN",
                b"~",
                maxlen.as_bytes(),
                b"*",
                b"t",
                ts_arg.as_bytes(),
                b"s",
                seq_arg.as_bytes(),
                b"d",
                &payload,
            ],
            w,
        )?;
        let _id = conn.read_bulk(w)?;
        write.push(monotonic_ns() - ts);
    }
    // The end of the stream for its consumers.
    w.reset();
    conn.command(&[b"XADD", key, b"MAXLEN", b"~", maxlen.as_bytes(), b"*", b"end", b"1"], w)?;
    let _id = conn.read_bulk(w)?;
    Ok(json!({
        "name": a.label,
        "topic": a.streams[0],
        "write": write.summary(),
        "failed": 0,
        "maxlen": a.maxlen,
    }))
}

/// One stream a consumer reads.
struct Inbound<'a> {
    key: &'a [u8],
    /// Id of the last entry read (`0-0`: from the start).
    last_id: Vec<u8>,
    last_seq: u64,
    ended: bool,
}

fn consume(conn: &mut Conn, a: &RoleArgs, w: &mut Waiter<'_>) -> io::Result<Value> {
    if a.streams.is_empty() {
        return Err(io::Error::other("a consumer needs --streams A,B,…"));
    }
    let mut streams: Vec<Inbound<'_>> = a
        .streams
        .iter()
        .map(|s| Inbound { key: s.as_bytes(), last_id: b"0-0".to_vec(), last_seq: 0, ended: false })
        .collect();
    // The consumer's own buffer, touched up front so reads into it do not page-fault.
    let mut buf = vec![1u8; a.bytes.max(1)];
    // Connected (the server answered PING before any role started).
    println!("ready");
    io::stdout().flush()?;

    let (mut view, mut view_copy) = (Samples::default(), Samples::default());
    let mut gaps = 0u64;
    while streams.iter().any(|s| !s.ended) {
        {
            let mut args: Vec<&[u8]> = vec![b"XREAD", b"BLOCK", BLOCK_MS, b"STREAMS"];
            args.extend(streams.iter().map(|s| s.key));
            args.extend(streams.iter().map(|s| s.last_id.as_slice()));
            w.reset();
            conn.command(&args, w)?;
        }
        // [[key, [[id, [field, value, …]], …]], …], or nil when BLOCK timed out.
        let keys = conn.header(b'*', w)?;
        if keys < 0 {
            w.check()?;
            continue;
        }
        for _ in 0..keys {
            conn.expect_array(2, w)?;
            let key = conn.read_bulk(w)?;
            let s = streams
                .iter_mut()
                .find(|s| s.key == key.as_slice())
                .ok_or_else(|| bad_reply("XREAD returned a stream it was not asked for"))?;
            let entries = conn.header(b'*', w)?;
            for _ in 0..entries.max(0) {
                conn.expect_array(2, w)?;
                s.last_id = conn.read_bulk(w)?;
                match conn.header(b'*', w)? {
                    6 => {
                        let ts = field_u64(conn, b"t", w)?;
                        let seq = field_u64(conn, b"s", w)?;
                        if conn.read_bulk(w)? != b"d" {
                            return Err(bad_reply("entry without its d field"));
                        }
                        let _len = conn.read_bulk_to(&mut buf, w)?;
                        // The payload is in this process's buffer: viewed and copied at once.
                        let t = monotonic_ns();
                        std::hint::black_box(&buf);
                        view.push(t.saturating_sub(ts));
                        view_copy.push(t.saturating_sub(ts));
                        gaps += seq.saturating_sub(s.last_seq + 1);
                        s.last_seq = seq;
                    }
                    2 => {
                        let _end = conn.read_bulk(w)?;
                        let _one = conn.read_bulk(w)?;
                        s.ended = true;
                    }
                    n => return Err(bad_reply(format!("entry with {n} fields"))),
                }
            }
        }
        if a.sleep_ms > 0 {
            // A slow consumer: busy elsewhere for a while after each reply. The stream holds
            // what arrives meanwhile (up to its MAXLEN); producers never wait for it.
            std::thread::sleep(Duration::from_millis(a.sleep_ms));
        }
    }
    Ok(json!({
        "name": a.label,
        "topics": a.streams,
        "view": view.summary(),
        "view_copy": view_copy.summary(),
        "gaps": gaps,
    }))
}

/// A `name value` pair of an entry, the value a decimal number.
fn field_u64(conn: &mut Conn, name: &[u8], w: &mut Waiter<'_>) -> io::Result<u64> {
    if conn.read_bulk(w)? != name {
        return Err(bad_reply(format!("entry without its {} field", String::from_utf8_lossy(name))));
    }
    let v = conn.read_bulk(w)?;
    std::str::from_utf8(&v).ok().and_then(|s| s.parse().ok()).ok_or_else(|| bad_reply("a field is not a number"))
}
