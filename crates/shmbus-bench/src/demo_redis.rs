//! `demo-redis`: seed 000's demo profile (what `shmbus demo` runs) over Redis streams, the
//! comparison the seed made against babus: the same producers, rates and consumers, with
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
//! The output is the table and the JSON object of `shmbus demo --json` (`consumers`,
//! `producers`, `seconds`, `image_bytes`), plus `backend` and `view_is_copy`.

use std::io::{self, Write};
use std::time::Duration;

use serde_json::{json, Value};
use shmbus::sys::monotonic_ns;

use crate::child::{self, Helper};
use crate::transports::redis::{self, Addr, Conn, Server};
use crate::waiter::{Waiter, Watch};

/// The hidden subcommand of one producer or consumer.
pub const ROLE: &str = "demo-redis-role";

/// Default image size: one 1920x1080 RGB frame.
const IMAGE_BYTES: usize = 1920 * 1080 * 3;
const IMU_BYTES: usize = 64;
const MED_BYTES: usize = 2048;
/// Head start for the producers to be spawned before the clock starts.
const START_NS: u64 = 200_000_000;
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
    /// How long the producers publish.
    #[arg(long, default_value_t = 10.0, value_name = "S")]
    seconds: f64,
    /// Size of each `image` message.
    #[arg(long, default_value_t = IMAGE_BYTES, value_name = "B")]
    image_bytes: usize,
    /// One JSON object (one line) with every number instead of the table.
    #[arg(long)]
    json: bool,
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
    /// Producer: messages per second.
    #[arg(long, default_value_t = 1.0)]
    rate_hz: f64,
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
    /// Producer: CLOCK_MONOTONIC ns of the first message.
    #[arg(long, default_value_t = 0)]
    start_ns: u64,
    /// Producer: CLOCK_MONOTONIC ns after which no message is sent.
    #[arg(long, default_value_t = 0)]
    until_ns: u64,
}

struct ProducerSpec {
    stream: String,
    rate_hz: f64,
    bytes: usize,
    /// The image: filled whole each time.
    fill: bool,
}

impl ProducerSpec {
    /// The history `shmbus demo` gives this topic: 4 frames for the image, about 60 ms of
    /// messages (at least 16) for the rest.
    fn maxlen(&self) -> usize {
        if self.fill {
            4
        } else {
            ((self.rate_hz * 0.06) as usize).max(16)
        }
    }
}

struct ConsumerSpec {
    label: &'static str,
    streams: Vec<String>,
    sleep_ms: u64,
}

fn meds() -> Vec<String> {
    (1..=5).map(|i| format!("med0{i}")).collect()
}

fn producers(image_bytes: usize) -> Vec<ProducerSpec> {
    let mut v = vec![
        ProducerSpec { stream: "imu".into(), rate_hz: 1000.0, bytes: IMU_BYTES, fill: false },
        ProducerSpec { stream: "image".into(), rate_hz: 30.0, bytes: image_bytes, fill: true },
    ];
    for (i, m) in meds().into_iter().enumerate() {
        v.push(ProducerSpec { stream: m, rate_hz: 40.0 + i as f64, bytes: MED_BYTES, fill: false });
    }
    v
}

fn consumers() -> Vec<ConsumerSpec> {
    let s = |v: &[&str]| v.iter().map(|t| t.to_string()).collect::<Vec<_>>();
    let with = |mut a: Vec<String>, b: Vec<String>| {
        a.extend(b);
        a
    };
    vec![
        ConsumerSpec { label: "imu", streams: s(&["imu"]), sleep_ms: 0 },
        ConsumerSpec { label: "image", streams: s(&["image"]), sleep_ms: 0 },
        ConsumerSpec { label: "image+med01", streams: s(&["image", "med01"]), sleep_ms: 0 },
        ConsumerSpec { label: "image+med0[1-5]", streams: with(s(&["image"]), meds()), sleep_ms: 0 },
        ConsumerSpec { label: "imu+image+med0[1-5]", streams: with(s(&["imu", "image"]), meds()), sleep_ms: 0 },
        ConsumerSpec {
            label: "imu+image+med0[1-5] & sleep(10ms)",
            streams: with(s(&["imu", "image"]), meds()),
            sleep_ms: 10,
        },
    ]
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
    if !(a.seconds > 0.0 && a.seconds <= 86_400.0) {
        return Err(format!("--seconds {} must be in (0, 86400]", a.seconds));
    }
    if a.image_bytes == 0 || a.image_bytes > crate::MAX_SIZE {
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
        "seconds": a.seconds,
        "image_bytes": a.image_bytes,
        "view_is_copy": true,
        "consumers": consumer_results,
        "producers": producer_results,
    });
    let mut out = io::stdout().lock();
    let written = if a.json { writeln!(out, "{result}") } else { write_table(&result, &mut out) };
    written.map_err(|e| format!("cannot write the results: {e}"))
}

/// Starts the consumers, waits until each is connected, starts the producers on a common
/// clock and collects one JSON line from each.
fn run_roles(addr: &str, a: &Args) -> Result<(Vec<Value>, Vec<Value>), String> {
    let spawn = |args: Vec<String>, what: &str| {
        child::spawn(ROLE, &args).map_err(|e| format!("cannot start the demo-redis {what}: {e}"))
    };
    let cons = consumers();
    let prods = producers(a.image_bytes);
    let largest = a.image_bytes.max(MED_BYTES);
    let mut roles = Roles(Vec::new());
    for c in &cons {
        let mut args = role_args(addr, "consumer", c.label, &c.streams);
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

    let start_ns = monotonic_ns() + START_NS;
    let until_ns = start_ns + (a.seconds * 1e9) as u64;
    for p in &prods {
        let mut args = role_args(addr, "producer", &p.stream, std::slice::from_ref(&p.stream));
        args.extend([
            "--rate-hz".into(),
            p.rate_hz.to_string(),
            "--bytes".into(),
            p.bytes.to_string(),
            "--maxlen".into(),
            p.maxlen().to_string(),
            "--start-ns".into(),
            start_ns.to_string(),
            "--until-ns".into(),
            until_ns.to_string(),
        ]);
        if p.fill {
            args.push("--fill".into());
        }
        roles.0.push(spawn(args, &p.stream)?);
    }

    // Producers first: they end on their own; a failed one ends the run (its consumers
    // would wait for its end entry forever).
    let labels: Vec<&str> = cons.iter().map(|c| c.label).chain(prods.iter().map(|p| p.stream.as_str())).collect();
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

/// The `shmbus demo` table for a result object (of either `shmbus demo --json` or this).
pub fn write_table(r: &Value, out: &mut impl Write) -> io::Result<()> {
    let backend = r["backend"].as_str().unwrap_or("shmbus");
    let via = match backend {
        "redis-tcp" => "Redis streams over loopback TCP",
        "redis-uds" => "Redis streams over a Unix socket",
        other => other,
    };
    writeln!(
        out,
        "demo-redis (seed 000's profile, {via}): {} s; imu {IMU_BYTES} B @ 1 kHz, image {} B @ 30 Hz, \
         med01..05 {MED_BYTES} B @ 40..44 Hz",
        r["seconds"], r["image_bytes"]
    )?;
    writeln!(
        out,
        "{} processes and the harness's redis-server; latency = XADD timestamp -> payload read from the \
         XREAD reply into the consumer's buffer (view = view+copy: a socket client copies to read)",
        consumers().len() + producers(0).len()
    )?;
    writeln!(out)?;
    let titles = ["ROLE", "NAME", "LATENCY OF", "MEAN", "P50", "P99", "MAX", "N", "NOTE"];
    let right = [false, false, false, true, true, true, true, true, false];
    let mut rows: Vec<Vec<String>> = Vec::new();
    let num = |s: &Value, k: &str| s.get(k).and_then(Value::as_f64).map(fmt_ns).unwrap_or_else(|| "-".into());
    let row = |role: &str, name: String, what: &str, s: &Value, note: String| {
        let n = s.get("n").and_then(Value::as_u64).unwrap_or(0);
        vec![
            role.into(),
            name,
            what.into(),
            num(s, "mean_ns"),
            num(s, "p50_ns"),
            num(s, "p99_ns"),
            num(s, "max_ns"),
            n.to_string(),
            note,
        ]
    };
    for c in r["consumers"].as_array().into_iter().flatten() {
        let name = format!("=> {}", c["name"].as_str().unwrap_or("?"));
        let gaps = c["gaps"].as_u64().unwrap_or(0);
        let note = if gaps > 0 { format!("{gaps} message(s) skipped (lagged)") } else { String::new() };
        rows.push(row("consumer", name.clone(), "view", &c["view"], String::new()));
        rows.push(row("consumer", name, "view+copy", &c["view_copy"], note));
    }
    for p in r["producers"].as_array().into_iter().flatten() {
        let name = format!("{} =>", p["name"].as_str().unwrap_or("?"));
        let failed = p["failed"].as_u64().unwrap_or(0);
        let note = if failed > 0 { format!("{failed} publish(es) failed") } else { String::new() };
        rows.push(row("producer", name, "write", &p["write"], note));
    }
    let mut widths: Vec<usize> = titles.iter().map(|t| t.len()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let header: Vec<String> = titles.iter().map(|t| t.to_string()).collect();
    for r in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            let pad = " ".repeat(widths[i].saturating_sub(c.chars().count()));
            if i > 0 {
                line.push_str("  ");
            }
            if right[i] {
                line.push_str(&pad);
                line.push_str(c);
            } else {
                line.push_str(c);
                line.push_str(&pad);
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// A duration in nanoseconds, as `shmbus demo` prints it: `850ns`, `12.1us`, `3.2ms`, `1.20s`.
fn fmt_ns(ns: f64) -> String {
    if !ns.is_finite() {
        "-".into()
    } else if ns < 1_000.0 {
        format!("{ns:.0}ns")
    } else if ns < 1_000_000.0 {
        format!("{:.1}us", ns / 1e3)
    } else if ns < 1_000_000_000.0 {
        format!("{:.1}ms", ns / 1e6)
    } else {
        format!("{:.2}s", ns / 1e9)
    }
}

/// Latency samples in nanoseconds, summarized as `shmbus demo` does.
#[derive(Debug, Default)]
struct Samples(Vec<u64>);

impl Samples {
    fn push(&mut self, ns: u64) {
        self.0.push(ns);
    }

    fn summary(&mut self) -> Value {
        let v = &mut self.0;
        if v.is_empty() {
            return json!({"n": 0, "mean_ns": null, "p50_ns": null, "p99_ns": null, "max_ns": null});
        }
        v.sort_unstable();
        let n = v.len();
        // Nearest-rank percentile.
        let pct = |p: usize| v[((p * n).div_ceil(100)).clamp(1, n) - 1];
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        json!({"n": n, "mean_ns": mean, "p50_ns": pct(50), "p99_ns": pct(99), "max_ns": v[n - 1]})
    }
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

fn sleep_until(t_ns: u64) {
    let now = monotonic_ns();
    if t_ns > now {
        std::thread::sleep(Duration::from_nanos(t_ns - now));
    }
}

fn bad_reply(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("redis: {what}"))
}

fn produce(conn: &mut Conn, a: &RoleArgs, w: &mut Waiter<'_>) -> io::Result<Value> {
    let key = a.streams.first().ok_or_else(|| io::Error::other("a producer needs --streams NAME"))?.as_bytes();
    let maxlen = a.maxlen.to_string();
    let period = (1e9 / a.rate_hz.max(0.001)) as u64;
    let mut payload = vec![0u8; a.bytes];
    let mut write = Samples::default();
    let mut frame = 0u64;
    let mut next = a.start_ns;
    while next < a.until_ns {
        sleep_until(next);
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
        next += period;
        let now = monotonic_ns();
        if now > next + period {
            next = now; // fell behind (descheduled): resume the rate instead of bursting
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_matches_shmbus_demo() {
        assert_eq!(consumers().len(), 6);
        assert_eq!(consumers()[4].streams.len(), 7);
        assert_eq!(consumers()[5].sleep_ms, 10);
        let p = producers(IMAGE_BYTES);
        assert_eq!(p.len(), 7);
        assert_eq!(p.iter().map(ProducerSpec::maxlen).collect::<Vec<_>>(), [60, 4, 16, 16, 16, 16, 16]);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v = Samples((1..=100).rev().collect()).summary();
        assert_eq!((v["n"].as_u64(), v["p50_ns"].as_u64(), v["p99_ns"].as_u64()), (Some(100), Some(50), Some(99)));
        assert_eq!(v["mean_ns"].as_f64(), Some(50.5));
    }
}
