//! `shmbus-bridge-bench`: a topic bridged across a veth link against Zenoh's own publisher
//! to subscriber over the same link, in one run.
//!
//! It makes two network namespaces joined by a veth pair (root needed), then for each size:
//!
//! * **zenoh**: a Zenoh publisher process in namespace a, a Zenoh subscriber process in b;
//! * **bridged**: a shmbus publisher in a, `shmbus-bridge` in a and in b, a shmbus reliable
//!   subscriber in b (the topic is `block`: nothing is dropped anywhere; its history is 4096
//!   messages, at most 64 MiB of slots: 64 for 1 MiB).
//!
//! The sending side (publisher, and bridge a) is pinned to CPU 0, the receiving side to
//! CPU 1. Latency: the publisher sends one message every `--interval-us` (every
//! `--large-interval-us` over 64 KiB, a tenth as many), stamped with
//! CLOCK_MONOTONIC in its first 8 bytes (one clock for both namespaces); the receiver
//! records now − stamp. Throughput: the publisher sends `--count` messages as fast as it
//! can; the receiver's rate is messages between its first and last arrival over that time.
//! Both use Zenoh's default publisher settings (reliable, not express; the bridge's
//! forwarder of a `block` topic uses congestion control `block`, as the Zenoh publisher
//! here does).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use shmbus::{DeliveryPolicy, Domain, Topic, TopicConfig};
use zenoh::qos::CongestionControl;
use zenoh::Wait;

const IP_A: &str = "10.252.0.1";
const IP_B: &str = "10.252.0.2";

/// Bridged topic vs Zenoh over a veth link between two network namespaces (needs root).
#[derive(Debug, Parser)]
#[command(name = "shmbus-bridge-bench")]
struct Args {
    /// Payload sizes in bytes (at least 8).
    #[arg(long, value_delimiter = ',', default_values_t = [8usize, 1 << 20])]
    sizes: Vec<usize>,
    /// Latency messages per size.
    #[arg(long, default_value_t = 2000)]
    latency_count: u64,
    /// Microseconds between latency messages up to 64 KiB.
    #[arg(long, default_value_t = 1000)]
    interval_us: u64,
    /// Microseconds between latency messages over 64 KiB (a steady state, not a flood:
    /// 1 MiB every millisecond is near what either path carries at all).
    #[arg(long, default_value_t = 10_000)]
    large_interval_us: u64,
    /// Throughput messages of 8 B (fewer for larger sizes: the same bytes, at least 1000).
    #[arg(long, default_value_t = 200_000)]
    count: u64,
    /// Rounds of each measurement (alternating zenoh and bridged); the median is reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Extra arguments for both bridges (repeatable), e.g. `--bridge-arg=--express`.
    #[arg(long = "bridge-arg", value_name = "ARG", allow_hyphen_values = true)]
    bridge_args: Vec<String>,
    /// Extra arguments for the sending host's bridge only.
    #[arg(long = "bridge-a-arg", value_name = "ARG", allow_hyphen_values = true)]
    bridge_a_args: Vec<String>,
    /// Extra arguments for the receiving host's bridge only.
    #[arg(long = "bridge-b-arg", value_name = "ARG", allow_hyphen_values = true)]
    bridge_b_args: Vec<String>,
    /// One JSON object per measurement instead of the table.
    #[arg(long)]
    json: bool,
    /// Internal: the role of a child process.
    #[arg(long, hide = true)]
    role: Option<String>,
    #[arg(long, hide = true, default_value_t = 0)]
    size: usize,
    #[arg(long, hide = true, default_value_t = 0)]
    n: u64,
    #[arg(long, hide = true)]
    mode: Option<String>,
    #[arg(long, hide = true)]
    root: Option<PathBuf>,
}

fn main() {
    let a = Args::parse();
    if let Some(role) = a.role.clone() {
        return child(&role, &a);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("shmbus-bridge-bench: needs root (it makes two network namespaces)");
        std::process::exit(2);
    }
    let net = Net::new();
    let mut rows = Vec::new();
    for &size in &a.sizes {
        let size = size.max(8);
        let tput_n = (a.count * 8 / size as u64).max(1000);
        // Large messages are sent ten times less often: a tenth as many, for the same time.
        let lat_n = if size > 64 << 10 { (a.latency_count / 10).max(100) } else { a.latency_count };
        for (what, n) in [("latency", lat_n), ("throughput", tput_n)] {
            let mut z = Vec::new();
            let mut b = Vec::new();
            for _ in 0..a.rounds {
                z.push(run_zenoh(&net, &a, what, size, n));
                b.push(run_bridged(&net, &a, what, size, n));
            }
            rows.push((what, size, median(z), median(b)));
        }
    }
    for (what, size, z, b) in &rows {
        if a.json {
            println!(
                "{}",
                serde_json::json!({"measure": what, "size": size, "zenoh": z, "bridged": b,
                    "ratio_p50": b.p50_ns as f64 / z.p50_ns.max(1) as f64,
                    "ratio_rate": b.rate / z.rate.max(1e-9)})
            );
        }
    }
    if !a.json {
        println!("| measure | size | zenoh p50 | bridged p50 | p50 ratio | zenoh p99 | bridged p99 | zenoh msg/s | bridged msg/s | rate ratio |");
        println!("|---|---|---|---|---|---|---|---|---|---|");
        for (what, size, z, b) in &rows {
            println!(
                "| {what} | {size} | {} | {} | {:.2} | {} | {} | {:.0} | {:.0} | {:.2} |",
                us(z.p50_ns),
                us(b.p50_ns),
                b.p50_ns as f64 / z.p50_ns.max(1) as f64,
                us(z.p99_ns),
                us(b.p99_ns),
                z.rate,
                b.rate,
                b.rate / z.rate.max(1e-9)
            );
        }
    }
}

fn us(ns: u64) -> String {
    format!("{:.1} µs", ns as f64 / 1000.0)
}

#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
struct Result {
    received: u64,
    p50_ns: u64,
    p99_ns: u64,
    rate: f64,
}

fn median(mut v: Vec<Result>) -> Result {
    v.sort_by(|a, b| a.p50_ns.cmp(&b.p50_ns).then(a.rate.total_cmp(&b.rate)));
    let mut m = v[v.len() / 2];
    let mut rates: Vec<f64> = v.iter().map(|r| r.rate).collect();
    rates.sort_by(f64::total_cmp);
    m.rate = rates[rates.len() / 2];
    m
}

struct Net {
    a: String,
    b: String,
}

fn ip(args: &[&str]) {
    let ok = Command::new("ip").args(args).status().is_ok_and(|s| s.success());
    assert!(ok, "ip {} failed", args.join(" "));
}

impl Net {
    fn new() -> Net {
        let tag = std::process::id() % 1_000_000;
        let net = Net { a: format!("sbbench{tag}a"), b: format!("sbbench{tag}b") };
        let (va, vb) = (format!("sbbv{tag}a"), format!("sbbv{tag}b"));
        ip(&["netns", "add", &net.a]);
        ip(&["netns", "add", &net.b]);
        ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb]);
        ip(&["link", "set", &va, "netns", &net.a]);
        ip(&["link", "set", &vb, "netns", &net.b]);
        ip(&["-n", &net.a, "addr", "add", &format!("{IP_A}/24"), "dev", &va]);
        ip(&["-n", &net.b, "addr", "add", &format!("{IP_B}/24"), "dev", &vb]);
        for (ns, dev) in [(&net.a, &va), (&net.b, &vb)] {
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        net
    }

    /// `program args` in namespace `ns`, pinned to `cpu`.
    fn cmd(&self, ns: &str, cpu: usize, program: &std::path::Path, args: &[String]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, "taskset", "-c", &cpu.to_string()]).arg(program).args(args);
        c
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.a]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.b]).status();
    }
}

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        // SAFETY: kill with our own child's pid.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

fn me() -> PathBuf {
    std::env::current_exe().expect("own path")
}

fn role_args(role: &str, what: &str, size: usize, n: u64, root: Option<&std::path::Path>, a: &Args) -> Vec<String> {
    let mut v = vec![
        "--role".into(),
        role.into(),
        "--mode".into(),
        what.into(),
        "--size".into(),
        size.to_string(),
        "--n".into(),
        n.to_string(),
        "--interval-us".into(),
        if size > 64 << 10 { a.large_interval_us } else { a.interval_us }.to_string(),
    ];
    if let Some(r) = root {
        v.extend(["--root".into(), r.display().to_string()]);
    }
    v
}

/// Starts the receiver, waits for its "ready" line, then the sender, and reads the
/// receiver's result line.
fn measure(mut receiver: Command, sender: Command) -> Result {
    let mut rx = receiver.stdout(Stdio::piped()).spawn().expect("spawn the receiver");
    let mut lines = BufReader::new(rx.stdout.take().expect("stdout")).lines();
    let ready = lines.next().and_then(|l| l.ok()).unwrap_or_default();
    assert_eq!(ready, "ready", "the receiver did not start");
    let mut sender = sender;
    let tx = Kill(sender.spawn().expect("spawn the sender"));
    let line = lines.next().and_then(|l| l.ok()).unwrap_or_default();
    drop(tx);
    let _ = rx.wait();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
    Result {
        received: v["received"].as_u64().unwrap_or(0),
        p50_ns: v["p50_ns"].as_u64().unwrap_or(0),
        p99_ns: v["p99_ns"].as_u64().unwrap_or(0),
        rate: v["rate"].as_f64().unwrap_or(0.0),
    }
}

fn run_zenoh(net: &Net, a: &Args, what: &str, size: usize, n: u64) -> Result {
    let rx = net.cmd(&net.b, 1, &me(), &role_args("zsub", what, size, n, None, a));
    let tx = net.cmd(&net.a, 0, &me(), &role_args("zpub", what, size, n, None, a));
    measure(rx, tx)
}

fn run_bridged(net: &Net, a: &Args, what: &str, size: usize, n: u64) -> Result {
    // Where shmbus keeps topics by default ($SHMBUS_ROOT, else /dev/shm): memory, not a disk
    // whose page cache would write the slots back.
    let dir = shmbus::domain::default_root().join(format!("shmbus-bridge-bench-{}", std::process::id()));
    let (ra, rb) = (dir.join("a"), dir.join("b"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&ra).expect("scratch");
    std::fs::create_dir_all(&rb).expect("scratch");
    let config = TopicConfig::default().max_message_len(size).history(history(size)).policy(DeliveryPolicy::Block);
    for r in [&ra, &rb] {
        Topic::create_or_open(&Domain::with_root("bench", r).expect("domain"), "t", &config).expect("topic");
    }
    let bridge = me().with_file_name("shmbus-bridge");
    let args = |r: &PathBuf, flag: &str, ip: &str| -> Vec<String> {
        ["--root", &r.display().to_string(), "--domain", "bench", "--topics", "t", "--no-multicast-scouting"]
            .iter()
            .map(|s| s.to_string())
            .chain([flag.to_string(), format!("tcp/{ip}:7451"), "--stats-interval".into(), "0".into()])
            .collect()
    };
    let (mut aa, mut ab) = (args(&ra, "--listen", IP_A), args(&rb, "--connect", IP_A));
    aa.extend(a.bridge_args.iter().chain(&a.bridge_a_args).cloned());
    ab.extend(a.bridge_args.iter().chain(&a.bridge_b_args).cloned());
    let ba = Kill(net.cmd(&net.a, 0, &bridge, &aa).stdout(Stdio::null()).spawn().expect("bridge a"));
    let bb = Kill(net.cmd(&net.b, 1, &bridge, &ab).stdout(Stdio::null()).spawn().expect("bridge b"));
    // Linked when a probe crosses.
    probe_link(&ra, &rb);
    let rx = net.cmd(&net.b, 1, &me(), &role_args("ssub", what, size, n, Some(&rb), a));
    let tx = net.cmd(&net.a, 0, &me(), &role_args("spub", what, size, n, Some(&ra), a));
    let r = measure(rx, tx);
    drop((ba, bb));
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn probe_link(ra: &std::path::Path, rb: &std::path::Path) {
    let ta = Topic::open(&Domain::with_root("bench", ra).expect("domain"), "t").expect("topic a");
    let tb = Topic::open(&Domain::with_root("bench", rb).expect("domain"), "t").expect("topic b");
    let sub = tb.reliable_subscriber().expect("subscriber");
    let mut p = ta.publisher().expect("publisher");
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let mut l = p.loan().expect("loan");
        l[..8].fill(0);
        l.truncate(8);
        l.send().expect("send");
        if sub.recv_timeout(Duration::from_millis(50)).is_ok() {
            break;
        }
        assert!(Instant::now() < end, "the bridges did not link");
    }
    while sub.try_recv().is_ok() {}
}

/// The bridged topic's history: room for bursts (4096 messages), at most 64 MiB of slots.
fn history(size: usize) -> usize {
    ((64 << 20) / size.max(1)).clamp(64, 4096)
}

fn now() -> u64 {
    shmbus::time::monotonic_ns()
}

fn stamp(buf: &mut [u8]) {
    buf[..8].copy_from_slice(&now().to_le_bytes());
}

fn stamp_of(buf: &[u8]) -> u64 {
    u64::from_le_bytes(buf[..8].try_into().unwrap_or([0; 8]))
}

/// What a receiver collects.
struct Rx {
    n: u64,
    lat: Vec<u64>,
    first: Option<Instant>,
    last: Instant,
    got: u64,
}

impl Rx {
    fn new(n: u64) -> Rx {
        Rx { n, lat: Vec::with_capacity(n as usize), first: None, last: Instant::now(), got: 0 }
    }

    /// Records one message; true when all have come.
    fn take(&mut self, data: &[u8], latency: bool) -> bool {
        let t = now();
        if stamp_of(data) == 0 {
            return false; // a probe
        }
        if latency {
            self.lat.push(t.saturating_sub(stamp_of(data)));
        }
        self.last = Instant::now();
        self.first.get_or_insert(self.last);
        self.got += 1;
        self.got >= self.n
    }

    fn report(mut self) {
        self.lat.sort_unstable();
        let pct = |p: f64| self.lat.get(((self.lat.len() as f64 - 1.0) * p) as usize).copied().unwrap_or(0);
        let span = self.first.map_or(0.0, |f| (self.last - f).as_secs_f64());
        let rate = if span > 0.0 { (self.got.saturating_sub(1)) as f64 / span } else { 0.0 };
        println!(
            "{}",
            serde_json::json!({"received": self.got, "p50_ns": pct(0.5), "p99_ns": pct(0.99), "rate": rate})
        );
    }
}

fn zsession(listen: bool) -> zenoh::Session {
    let mut c = zenoh::Config::default();
    c.insert_json5("mode", "\"peer\"").expect("config");
    c.insert_json5("scouting/multicast/enabled", "false").expect("config");
    let ep = format!("[\"tcp/{IP_A}:7450\"]");
    if listen {
        c.insert_json5("listen/endpoints", &ep).expect("config");
    } else {
        c.insert_json5("listen/endpoints", "[]").expect("config");
        c.insert_json5("connect/endpoints", &ep).expect("config");
    }
    zenoh::open(c).wait().expect("zenoh session")
}

fn child(role: &str, a: &Args) {
    let latency = a.mode.as_deref() == Some("latency");
    let (size, n) = (a.size, a.n);
    let interval = Duration::from_micros(a.interval_us);
    let limit = Duration::from_secs(120);
    match role {
        "zsub" => {
            let s = zsession(false);
            let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
            let _sub = s.declare_subscriber("bench/z").callback(move |smp| {
                let _ = tx.send(smp.payload().to_bytes()[..8].to_vec());
            });
            let _sub = _sub.wait().expect("subscriber");
            // Probes until the publisher's first message: the publisher waits for a match.
            say("ready");
            let mut r = Rx::new(n);
            let end = Instant::now() + limit;
            while let Ok(d) = rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
                if r.take(&d, latency) {
                    break;
                }
            }
            r.report();
        }
        "zpub" => {
            let s = zsession(true);
            let p =
                s.declare_publisher("bench/z").congestion_control(CongestionControl::Block).wait().expect("publisher");
            // Wait until the subscriber is matched (probes are stamp 0).
            let end = Instant::now() + Duration::from_secs(30);
            while !p.matching_status().wait().is_ok_and(|m| m.matching()) && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(10));
            }
            std::thread::sleep(Duration::from_millis(200));
            let mut buf = vec![0u8; size];
            for _ in 0..n {
                stamp(&mut buf);
                p.put(buf.clone()).wait().expect("put");
                if latency {
                    // A sleep, not a spin: the bridge shares this CPU with the publisher.
                    std::thread::sleep(interval);
                }
            }
            std::thread::sleep(Duration::from_secs(5));
        }
        "ssub" => {
            let d = Domain::with_root("bench", a.root.as_ref().expect("--root")).expect("domain");
            let t = Topic::open(&d, "t").expect("topic");
            let sub = t.reliable_subscriber().expect("subscriber");
            say("ready");
            let mut r = Rx::new(n);
            let end = Instant::now() + limit;
            while Instant::now() < end {
                match sub.recv_ref_timeout(Duration::from_millis(100)) {
                    Ok(m) => {
                        if r.take(&m, latency) {
                            break;
                        }
                    }
                    Err(shmbus::TopicRecvTimeoutError::Timeout) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            r.report();
        }
        "spub" => {
            let d = Domain::with_root("bench", a.root.as_ref().expect("--root")).expect("domain");
            let t = Topic::open(&d, "t").expect("topic");
            let mut p = t.publisher().expect("publisher");
            for _ in 0..n {
                let mut l = p.loan().expect("loan");
                l.truncate(size);
                stamp(&mut l);
                l.send().expect("send");
                if latency {
                    // A sleep, not a spin: the bridge shares this CPU with the publisher.
                    std::thread::sleep(interval);
                }
            }
            std::thread::sleep(Duration::from_secs(5));
        }
        _ => panic!("unknown role {role}"),
    }
}

fn say(s: &str) {
    let mut o = std::io::stdout();
    let _ = writeln!(o, "{s}");
    let _ = o.flush();
}
