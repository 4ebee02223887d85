//! `shmbus demo`: the babus profile (seed 000) end to end, as real processes.
//!
//! Topology (rates and sizes as in the seed):
//!
//! | producer       | rate          | message                     | how                 |
//! |----------------|---------------|-----------------------------|---------------------|
//! | `imu`          | 1 kHz         | 64 B                        | `publish` (copy)    |
//! | `image`        | 30 Hz         | 6,220,800 B (`--image-bytes`) | `loan`, fill, `send` |
//! | `med01..med05` | 40..44 Hz     | 2 KiB                       | `publish` (copy)    |
//!
//! Consumers: `imu`, `image`, `image+med01`, `image+med0[1-5]`, `imu+image+med0[1-5]`, and
//! the last again sleeping 10 ms after each batch it wakes for. Each sleeps on its topics with one
//! [`WaitSet`] and takes each message as a pinned (zero-copy) sample.
//!
//! Measured, all against the publish timestamp (`CLOCK_MONOTONIC`, shared by all processes):
//! * **view**: the pinned sample is in hand;
//! * **view+copy**: its payload has been copied into a private buffer;
//! * **write** (producers): duration of the `publish` call, or of `loan` + `send` (not the
//!   time spent filling the loaned image).
//!
//! The parent creates a fresh domain `demo-<pid>`, starts each role by re-executing this
//! binary with the hidden `demo-role` subcommand, starts the producers once every consumer
//! has subscribed, collects one JSON line from each child, removes the domain and prints.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use shmbus::sys::monotonic_ns;
use shmbus::topic::{Topic, TopicConfig, TryRecvError};
use shmbus::{Domain, WaitError, WaitSet, Waitable};

use crate::output::{fmt_ns, print_json, Align, Table};
use crate::{CliError, Ctx, Result};

/// Default image size: one 1920x1080 RGB frame.
const IMAGE_BYTES: usize = 1920 * 1080 * 3;
const IMU_BYTES: usize = 64;
const MED_BYTES: usize = 2048;
/// How long consumers keep receiving after the producers' last message.
const DRAIN_NS: u64 = 300_000_000;
/// Head start for the producers to be spawned before the clock starts.
const START_NS: u64 = 200_000_000;

/// `shmbus demo [--seconds S] [--image-bytes B] [--json]`
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How long the producers publish.
    #[arg(long, default_value_t = 10.0, value_name = "S")]
    seconds: f64,
    /// Size of each `image` message.
    #[arg(long, default_value_t = IMAGE_BYTES, value_name = "B")]
    image_bytes: usize,
    /// One JSON object with every number instead of the table.
    #[arg(long)]
    json: bool,
}

/// One process of the demo (hidden `demo-role` subcommand).
#[derive(Debug, clap::Args)]
pub struct RoleArgs {
    /// The demo's domain.
    #[arg(long)]
    domain: String,
    /// `producer` or `consumer`.
    #[arg(long)]
    role: String,
    /// Label printed in the results.
    #[arg(long)]
    label: String,
    /// Topics: the one a producer writes, or those a consumer reads (comma-separated).
    #[arg(long, value_delimiter = ',')]
    topics: Vec<String>,
    /// Producer: messages per second.
    #[arg(long, default_value_t = 1.0)]
    rate_hz: f64,
    /// Producer: message size.
    #[arg(long, default_value_t = 64)]
    bytes: usize,
    /// Producer: write in place through `loan` instead of `publish`.
    #[arg(long)]
    loan: bool,
    /// Consumer: sleep this long after each batch of messages.
    #[arg(long, default_value_t = 0)]
    sleep_ms: u64,
    /// Producer: CLOCK_MONOTONIC ns of the first message.
    #[arg(long, default_value_t = 0)]
    start_ns: u64,
    /// Producer: CLOCK_MONOTONIC ns after which no message is sent. (Consumers read their
    /// deadline from stdin once every process is running.)
    #[arg(long, default_value_t = 0)]
    until_ns: u64,
}

struct ProducerSpec {
    topic: String,
    rate_hz: f64,
    bytes: usize,
    loan: bool,
}

struct ConsumerSpec {
    label: &'static str,
    topics: Vec<String>,
    sleep_ms: u64,
}

fn meds() -> Vec<String> {
    (1..=5).map(|i| format!("med0{i}")).collect()
}

fn producers(image_bytes: usize) -> Vec<ProducerSpec> {
    let mut v = vec![
        ProducerSpec { topic: "imu".into(), rate_hz: 1000.0, bytes: IMU_BYTES, loan: false },
        ProducerSpec { topic: "image".into(), rate_hz: 30.0, bytes: image_bytes, loan: true },
    ];
    for (i, m) in meds().into_iter().enumerate() {
        v.push(ProducerSpec { topic: m, rate_hz: 40.0 + i as f64, bytes: MED_BYTES, loan: false });
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
        ConsumerSpec { label: "imu", topics: s(&["imu"]), sleep_ms: 0 },
        ConsumerSpec { label: "image", topics: s(&["image"]), sleep_ms: 0 },
        ConsumerSpec { label: "image+med01", topics: s(&["image", "med01"]), sleep_ms: 0 },
        ConsumerSpec { label: "image+med0[1-5]", topics: with(s(&["image"]), meds()), sleep_ms: 0 },
        ConsumerSpec { label: "imu+image+med0[1-5]", topics: with(s(&["imu", "image"]), meds()), sleep_ms: 0 },
        ConsumerSpec {
            label: "imu+image+med0[1-5] & sleep(10ms)",
            topics: with(s(&["imu", "image"]), meds()),
            sleep_ms: 10,
        },
    ]
}

/// Sizes of each topic the demo creates: (slot size, history).
fn topic_config(p: &ProducerSpec) -> TopicConfig {
    // History: about 60 ms of messages for the small topics; 4 frames for the image (each
    // slot is a whole frame; 4 spare slots cover the pins of the 5 image consumers).
    let history = if p.loan { 4 } else { ((p.rate_hz * 0.06) as usize).max(16) };
    TopicConfig::new(p.bytes.max(1), history)
}

/// Child processes that are killed (by their handle) and reaped if the demo fails midway,
/// and the demo domain, removed in every case.
struct Run {
    domain: Domain,
    children: Vec<Child>,
}

impl Drop for Run {
    fn drop(&mut self) {
        for c in &mut self.children {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(self.domain.dir());
    }
}

fn fresh_domain(ctx: &Ctx) -> Result<Domain> {
    let pid = std::process::id();
    for n in 0..100 {
        let name = if n == 0 { format!("demo-{pid}") } else { format!("demo-{pid}-{n}") };
        let d = ctx.domain(&name)?;
        if !d.dir().exists() {
            return Ok(d);
        }
    }
    Err(CliError::msg(format!("no free demo domain name under {}; run `shmbus clean`", ctx.root.display())))
}

fn role_command(ctx: &Ctx, domain: &Domain, role: &str, label: &str, topics: &[String]) -> Result<Command> {
    let exe = std::env::current_exe().map_err(|e| CliError::msg(format!("cannot find the shmbus executable: {e}")))?;
    let mut cmd = Command::new(exe);
    cmd.arg("--root").arg(&ctx.root);
    cmd.args(["demo-role", "--domain", domain.name(), "--role", role, "--label", label, "--topics", &topics.join(",")]);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    Ok(cmd)
}

fn read_result(label: &str, out: &mut impl Read) -> Result<Value> {
    let mut text = String::new();
    out.read_to_string(&mut text).map_err(|e| CliError::msg(format!("demo process '{label}': {e}")))?;
    let line = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    serde_json::from_str(line)
        .map_err(|_| CliError::msg(format!("demo process '{label}' reported no result (see its error above)")))
}

/// Runs the profile and prints the latencies.
pub fn run(ctx: &Ctx, args: &Args) -> Result<()> {
    if !(args.seconds > 0.0 && args.seconds <= 86_400.0) {
        return Err(CliError::msg(format!("--seconds {} must be in (0, 86400]", args.seconds)));
    }
    let domain = fresh_domain(ctx)?;
    let mut run = Run { domain: domain.clone(), children: Vec::new() };
    let prods = producers(args.image_bytes);
    for p in &prods {
        Topic::create_or_open(&domain, &p.topic, &topic_config(p))?;
    }

    // Consumers first; each says "ready" once subscribed.
    let cons = consumers();
    let mut pipes: Vec<(ChildStdin, BufReader<ChildStdout>)> = Vec::new();
    for c in &cons {
        let mut cmd = role_command(ctx, &domain, "consumer", c.label, &c.topics)?;
        cmd.args(["--sleep-ms", &c.sleep_ms.to_string()]);
        let mut child = cmd.spawn().map_err(|e| CliError::msg(format!("cannot start a demo process: {e}")))?;
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        run.children.push(child);
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
            return Err(CliError::msg("demo process without pipes"));
        };
        pipes.push((stdin, BufReader::new(stdout)));
    }
    for ((_, out), c) in pipes.iter_mut().zip(&cons) {
        let mut line = String::new();
        out.read_line(&mut line).map_err(|e| CliError::msg(format!("demo consumer '{}': {e}", c.label)))?;
        if line.trim() != "ready" {
            return Err(CliError::msg(format!("demo consumer '{}' failed to start (see its error above)", c.label)));
        }
    }

    // Then the producers, on a common clock.
    let start_ns = monotonic_ns() + START_NS;
    let until_ns = start_ns + (args.seconds * 1e9) as u64;
    let first_producer = run.children.len();
    for p in &prods {
        let mut cmd = role_command(ctx, &domain, "producer", &p.topic, std::slice::from_ref(&p.topic))?;
        cmd.args(["--rate-hz", &p.rate_hz.to_string(), "--bytes", &p.bytes.to_string()]);
        cmd.args(["--start-ns", &start_ns.to_string(), "--until-ns", &until_ns.to_string()]);
        if p.loan {
            cmd.arg("--loan");
        }
        cmd.stdin(Stdio::null());
        run.children.push(cmd.spawn().map_err(|e| CliError::msg(format!("cannot start a demo process: {e}")))?);
    }
    for (stdin, _) in &mut pipes {
        // A consumer that died already shows up when its result is read.
        let _ = writeln!(stdin, "{}", until_ns + DRAIN_NS);
    }

    let mut consumer_results = Vec::new();
    for (i, ((stdin, mut out), c)) in pipes.into_iter().zip(&cons).enumerate() {
        drop(stdin);
        let v = read_result(c.label, &mut out)?;
        let status = run.children[i].wait()?;
        if !status.success() {
            return Err(CliError::msg(format!("demo consumer '{}' failed ({status})", c.label)));
        }
        consumer_results.push(v);
    }
    let mut producer_results = Vec::new();
    for (i, p) in prods.iter().enumerate() {
        let child = &mut run.children[first_producer + i];
        let mut out = child.stdout.take().ok_or_else(|| CliError::msg("demo process without pipes"))?;
        let v = read_result(&p.topic, &mut out)?;
        let status = child.wait()?;
        if !status.success() {
            return Err(CliError::msg(format!("demo producer '{}' failed ({status})", p.topic)));
        }
        producer_results.push(v);
    }
    drop(run); // removes the domain

    let result = json!({
        "domain": domain.name(),
        "root": domain.root().display().to_string(),
        "seconds": args.seconds,
        "image_bytes": args.image_bytes,
        "consumers": consumer_results,
        "producers": producer_results,
    });
    if args.json {
        print_json(&result)?;
    } else {
        print_table(&result, &domain, args)?;
    }
    Ok(())
}

fn print_table(r: &Value, domain: &Domain, args: &Args) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "shmbus demo (babus profile, seed 000): {} s; imu {IMU_BYTES} B @ 1 kHz, image {} B @ 30 Hz (loaned), med01..05 {MED_BYTES} B @ 40..44 Hz",
        args.seconds, args.image_bytes
    )?;
    writeln!(
        out,
        "{} processes in domain {} under {} (removed); latency = publish timestamp -> sample in hand (view) / payload copied (view+copy)",
        consumers().len() + producers(0).len(),
        domain.name(),
        domain.root().display()
    )?;
    writeln!(out)?;
    let mut t = Table::new(&[
        ("ROLE", Align::Left),
        ("NAME", Align::Left),
        ("LATENCY OF", Align::Left),
        ("MEAN", Align::Right),
        ("P50", Align::Right),
        ("P99", Align::Right),
        ("MAX", Align::Right),
        ("N", Align::Right),
        ("NOTE", Align::Left),
    ]);
    let num = |s: &Value, k: &str| s.get(k).and_then(Value::as_f64).map(fmt_ns).unwrap_or_else(|| "-".into());
    let row = |t: &mut Table, role: &str, name: String, what: &str, s: &Value, note: String| {
        let n = s.get("n").and_then(Value::as_u64).unwrap_or(0);
        t.row(vec![
            role.into(),
            name,
            what.into(),
            num(s, "mean_ns"),
            num(s, "p50_ns"),
            num(s, "p99_ns"),
            num(s, "max_ns"),
            n.to_string(),
            note,
        ]);
    };
    for c in r["consumers"].as_array().into_iter().flatten() {
        let name = format!("=> {}", c["name"].as_str().unwrap_or("?"));
        let gaps = c["gaps"].as_u64().unwrap_or(0);
        let note = if gaps > 0 { format!("{gaps} message(s) skipped (lagged)") } else { String::new() };
        row(&mut t, "consumer", name.clone(), "view", &c["view"], String::new());
        row(&mut t, "consumer", name, "view+copy", &c["view_copy"], note);
    }
    for p in r["producers"].as_array().into_iter().flatten() {
        let name = format!("{} =>", p["name"].as_str().unwrap_or("?"));
        let failed = p["failed"].as_u64().unwrap_or(0);
        let note = if failed > 0 { format!("{failed} publish(es) failed") } else { String::new() };
        row(&mut t, "producer", name, "write", &p["write"], note);
    }
    t.write(&mut out)?;
    Ok(())
}

/// Latency samples in nanoseconds.
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

/// Runs one producer or consumer of the demo and prints its numbers as one JSON line.
pub fn run_role(ctx: &Ctx, args: &RoleArgs) -> Result<()> {
    // Die with the demo: a killed parent must not leave its children publishing.
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number and has no memory effects.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    let domain = ctx.domain(&args.domain)?;
    let result = match args.role.as_str() {
        "producer" => produce(&domain, args)?,
        "consumer" => consume(&domain, args)?,
        other => return Err(CliError::msg(format!("unknown demo role {other:?}"))),
    };
    println!("{result}");
    Ok(())
}

fn sleep_until(t_ns: u64) {
    let now = monotonic_ns();
    if t_ns > now {
        std::thread::sleep(Duration::from_nanos(t_ns - now));
    }
}

fn produce(domain: &Domain, args: &RoleArgs) -> Result<Value> {
    let name = args.topics.first().ok_or_else(|| CliError::msg("producer needs --topics NAME"))?;
    let topic = Topic::open(domain, name)?;
    let mut publisher = topic.publisher()?;
    if args.bytes > topic.slot_size() {
        return Err(CliError::msg(format!("--bytes {} exceeds the slot size {}", args.bytes, topic.slot_size())));
    }
    let period = (1e9 / args.rate_hz.max(0.001)) as u64;
    let mut payload = vec![0u8; args.bytes];
    let mut write = Samples::default();
    let (mut failed, mut frame) = (0u64, 0u64);
    let mut next = args.start_ns;
    while next < args.until_ns {
        sleep_until(next);
        frame += 1;
        let ok = if args.loan {
            let t0 = monotonic_ns();
            match publisher.loan() {
                Ok(mut loan) => {
                    let t1 = monotonic_ns();
                    // The "camera" writes the frame straight into shared memory.
                    loan[..args.bytes].fill(frame as u8);
                    let t2 = monotonic_ns();
                    let sent = loan.send(args.bytes).is_ok();
                    write.push((t1 - t0) + (monotonic_ns() - t2));
                    sent
                }
                Err(_) => false,
            }
        } else {
            let n = payload.len().min(8);
            payload[..n].copy_from_slice(&frame.to_le_bytes()[..n]);
            let t0 = monotonic_ns();
            let r = publisher.publish(&payload);
            write.push(monotonic_ns() - t0);
            r.is_ok()
        };
        failed += u64::from(!ok);
        next += period;
        let now = monotonic_ns();
        if now > next + period {
            next = now; // fell behind (descheduled): resume the rate instead of bursting
        }
    }
    Ok(json!({"name": args.label, "topic": name, "write": write.summary(), "failed": failed}))
}

fn consume(domain: &Domain, args: &RoleArgs) -> Result<Value> {
    let mut subs = Vec::new();
    let mut max_len = 0;
    for t in &args.topics {
        let s = Topic::subscribe(domain, t)?;
        max_len = max_len.max(s.slot_size());
        subs.push(s);
    }
    // A private buffer to copy into, touched up front so copies do not page-fault.
    let mut buf = vec![0u8; max_len];
    println!("ready");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let until: u64 = line.trim().parse().map_err(|_| CliError::msg("demo consumer: no deadline on stdin"))?;

    let waitables: Vec<&dyn Waitable> = subs.iter().map(|s| s as &dyn Waitable).collect();
    let mut ws = WaitSet::new();
    let (mut view, mut view_copy) = (Samples::default(), Samples::default());
    let mut gaps = 0u64;
    let mut ready = Vec::new();
    loop {
        let now = monotonic_ns();
        if now >= until {
            break;
        }
        match ws.wait(&waitables, Some(Duration::from_nanos(until - now))) {
            Ok(r) => {
                ready.clear();
                ready.extend_from_slice(r);
            }
            Err(WaitError::Timeout) => break,
            Err(e) => return Err(e.into()),
        }
        for &i in &ready {
            loop {
                match subs[i].try_recv_pinned() {
                    Ok(sample) => {
                        let t_view = monotonic_ns();
                        let n = sample.len().min(buf.len());
                        buf[..n].copy_from_slice(&sample[..n]);
                        let t_copy = monotonic_ns();
                        std::hint::black_box(&buf);
                        let ts = sample.ts_ns();
                        drop(sample);
                        view.push(t_view.saturating_sub(ts));
                        view_copy.push(t_copy.saturating_sub(ts));
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Lagged { missed }) => gaps += missed,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        if args.sleep_ms > 0 {
            // A slow consumer: busy elsewhere for a while after each batch. The history holds
            // what arrives meanwhile; publishers never wait for it.
            std::thread::sleep(Duration::from_millis(args.sleep_ms));
        }
    }
    Ok(
        json!({"name": args.label, "topics": args.topics, "view": view.summary(), "view_copy": view_copy.summary(), "gaps": gaps}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut s = Samples((1..=100).rev().collect());
        let v = s.summary();
        assert_eq!(
            (v["n"].as_u64(), v["p50_ns"].as_u64(), v["p99_ns"].as_u64(), v["max_ns"].as_u64()),
            (Some(100), Some(50), Some(99), Some(100))
        );
        assert_eq!(v["mean_ns"].as_f64(), Some(50.5));
        assert_eq!(Samples::default().summary()["n"].as_u64(), Some(0));
    }

    #[test]
    fn the_profile_matches_the_seed() {
        let labels: Vec<_> = consumers().iter().map(|c| c.label).collect();
        assert_eq!(labels.len(), 6);
        assert_eq!(consumers()[4].topics.len(), 7);
        assert_eq!(producers(IMAGE_BYTES).len(), 7);
    }
}
