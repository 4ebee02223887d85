//! `shmbus demo`: the robotics profile end to end, as real processes.
//!
//! Topology:
//!
//! | producer       | rate      | message                                          | how                  |
//! |----------------|-----------|--------------------------------------------------|----------------------|
//! | `imu`          | 1 kHz     | 64 B                                             | `publish` (copy)     |
//! | `image`        | 30 Hz     | 52 B header + 6,220,800 B pixels (`--image-bytes`) | `loan`, fill, `send` |
//! | `med01..med05` | 40..44 Hz | 2 KiB                                            | `publish` (copy)     |
//!
//! The camera's messages are `sensor_msgs/msg/Image` (the `image` topic's schema: ros2msg,
//! message encoding `cdr`), 1920x1080 rgb8 by default, written in place: the CDR header
//! (stamp, `frame_id` `camera`, height, width, encoding, step, data length) and then the
//! pixels, a moving diagonal rainbow copied row by row from a pattern made once
//! ([`shmbus_profile::camera`]). `shmbus sub` and `shmbus snapshot` read them while it runs.
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
//! The profile, its summaries and the table are those of the `shmbus-profile` crate, shared
//! with `shmbus-bench demo-redis` (the same profile over Redis streams).
//!
//! The parent creates a fresh domain `demo-<pid>`, starts each role by re-executing this
//! binary with the hidden `demo-role` subcommand, starts the producers once every consumer
//! has subscribed, collects one JSON line from each child, removes the domain and prints the
//! table and, under it, [`shmbus_profile::write_notes`]: a legend, the rates achieved against
//! those configured, what each consumer received, failed publishes, and the machine's cores
//! and load average.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use shmbus::time::monotonic_ns;
use shmbus::topic::{Topic, TopicConfig, TopicTryRecvError};
use shmbus::{Domain, WaitSet, WaitTimeoutError, Waitable};

use shmbus_profile::camera::{self, Frame};
use shmbus_profile::{
    consumers, machine, producers, write_notes, write_table, PaceArgs, ProducerSpec, RunArgs, Samples,
};

use crate::output::print_json;
use crate::{CliError, Ctx, Result};

/// How long consumers keep receiving after the producers' last message.
const DRAIN_NS: u64 = 300_000_000;

/// `shmbus demo [--seconds S] [--image-bytes B] [--json]`: the profile's [`RunArgs`], read
/// with the CLI's units (`--seconds 1.5m`, `--image-bytes 6M`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How long the producers publish: seconds (fractions allowed), or with a unit (`90s`,
    /// `1.5m`).
    #[arg(long, default_value = "10", value_name = "S", value_parser = crate::units::secs_duration)]
    seconds: std::time::Duration,
    /// Size of each `image` message: bytes, or with K, M, G (powers of 1024).
    #[arg(long, default_value_t = shmbus_profile::IMAGE_BYTES, value_name = "B", value_parser = crate::units::size_usize)]
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
    /// Producer: message size in bytes, K, M, G suffixes allowed.
    #[arg(long, default_value = "64", value_name = "BYTES", value_parser = crate::units::size_usize)]
    bytes: usize,
    /// Producer: write in place through `loan` instead of `publish`.
    #[arg(long)]
    loan: bool,
    /// Consumer: sleep this long after each batch of messages.
    #[arg(long, default_value_t = 0)]
    sleep_ms: u64,
    // Producer: when and how often it publishes. (Consumers read their deadline from stdin
    // once every process is running.)
    #[command(flatten)]
    pace: PaceArgs,
}

/// Sizes of each topic the demo creates: a slot per message, the profile's history; the
/// camera's slot holds a whole `sensor_msgs/msg/Image`, and its topic says so in its schema.
fn topic_config(p: &ProducerSpec) -> Result<TopicConfig> {
    let config = TopicConfig::default().history(p.history);
    if !p.camera {
        return Ok(config.max_message_len(p.bytes.max(1)));
    }
    let schema = shmbus::Schema::new(
        camera::MESSAGE_ENCODING,
        camera::SCHEMA_NAME,
        camera::SCHEMA_ENCODING,
        camera::IMAGE_MSG.as_bytes().to_vec(),
    )?;
    Ok(config.max_message_len(Frame::for_bytes(p.bytes).message_len()).schema(schema))
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

/// `demo --json`: the run and every role's numbers.
#[derive(Debug, Serialize)]
struct DemoJson<'a> {
    domain: &'a str,
    root: String,
    seconds: f64,
    image_bytes: usize,
    consumers: Vec<ConsumerJson>,
    producers: Vec<ProducerJson>,
    /// What the camera's messages are.
    image: ImageJson,
    /// Cores and load average before the run ([`machine`]).
    machine: Value,
}

/// `demo --json`'s `image`: the camera's frames.
#[derive(Debug, Serialize)]
struct ImageJson {
    schema: &'static str,
    width: u32,
    height: u32,
    encoding: &'static str,
    /// The whole message: CDR header and `image_bytes` of pixels.
    message_bytes: usize,
}

/// What a consumer process reports (its one JSON line), and `demo --json` prints.
#[derive(Debug, Serialize, Deserialize)]
struct ConsumerJson {
    name: String,
    topics: Vec<String>,
    /// Publish → pinned sample in hand ([`Samples::summary`]).
    view: Value,
    /// Publish → payload copied out.
    view_copy: Value,
    gaps: u64,
}

/// What a producer process reports (its one JSON line), and `demo --json` prints.
#[derive(Debug, Serialize, Deserialize)]
struct ProducerJson {
    name: String,
    topic: String,
    /// The publish (or loan + send) call ([`Samples::summary`]).
    write: Value,
    failed: u64,
    /// The rate it was configured with.
    rate_hz: f64,
    /// Messages it published.
    sent: u64,
}

fn read_result<T: serde::de::DeserializeOwned>(label: &str, out: &mut impl Read) -> Result<T> {
    let mut text = String::new();
    out.read_to_string(&mut text).map_err(|e| CliError::msg(format!("demo process '{label}': {e}")))?;
    let line = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    serde_json::from_str(line)
        .map_err(|_| CliError::msg(format!("demo process '{label}' reported no result (see its error above)")))
}

/// Runs the profile and prints the latencies.
pub fn run(ctx: &Ctx, args: &Args) -> Result<()> {
    let args = &RunArgs { seconds: args.seconds.as_secs_f64(), image_bytes: args.image_bytes, json: args.json };
    args.check().map_err(CliError::msg)?;
    let machine = machine();
    let domain = fresh_domain(ctx)?;
    let mut run = Run { domain: domain.clone(), children: Vec::new() };
    let prods = producers(args.image_bytes);
    for p in &prods {
        Topic::create_or_open(&domain, &p.topic, &topic_config(p)?)?;
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
    let (start_ns, until_ns) = args.window();
    let first_producer = run.children.len();
    for p in &prods {
        let mut cmd = role_command(ctx, &domain, "producer", &p.topic, std::slice::from_ref(&p.topic))?;
        cmd.args(["--bytes", &p.bytes.to_string()]);
        cmd.args(PaceArgs { rate_hz: p.rate_hz, start_ns, until_ns }.to_args());
        if p.camera {
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

    let frame = Frame::for_bytes(args.image_bytes);
    let result = DemoJson {
        domain: domain.name(),
        root: domain.root().display().to_string(),
        seconds: args.seconds,
        image_bytes: args.image_bytes,
        consumers: consumer_results,
        producers: producer_results,
        image: ImageJson {
            schema: camera::SCHEMA_NAME,
            width: frame.width,
            height: frame.height,
            encoding: frame.encoding,
            message_bytes: frame.message_len(),
        },
        machine,
    };
    if args.json {
        print_json(&result)?;
    } else {
        let r = serde_json::to_value(&result)?;
        let mut out = std::io::stdout().lock();
        write_table(&r, &mut out)?;
        write_notes(&r, &mut out)?;
    }
    Ok(())
}

/// Runs one producer or consumer of the demo and prints its numbers as one JSON line.
pub fn run_role(ctx: &Ctx, args: &RoleArgs) -> Result<()> {
    // Die with the demo: a killed parent must not leave its children publishing.
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number and has no memory effects.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    let domain = ctx.domain(&args.domain)?;
    let result = match args.role.as_str() {
        "producer" => serde_json::to_string(&produce(&domain, args)?)?,
        "consumer" => serde_json::to_string(&consume(&domain, args)?)?,
        other => return Err(CliError::msg(format!("unknown demo role {other:?}"))),
    };
    println!("{result}");
    Ok(())
}

fn produce(domain: &Domain, args: &RoleArgs) -> Result<ProducerJson> {
    let name = args.topics.first().ok_or_else(|| CliError::msg("producer needs --topics NAME"))?;
    let topic = Topic::open(domain, name)?;
    let mut publisher = topic.publisher()?;
    // The camera sends whole `sensor_msgs/msg/Image` messages of `--bytes` pixels.
    let camera = args.loan.then(|| Frame::for_bytes(args.bytes));
    let pattern = camera.as_ref().map(Frame::pattern).unwrap_or_default();
    let len = camera.as_ref().map_or(args.bytes, Frame::message_len);
    if len > topic.max_message_len() {
        return Err(CliError::msg(format!(
            "a message of {len} bytes exceeds the slot size {}",
            topic.max_message_len()
        )));
    }
    let mut payload = vec![0u8; args.bytes];
    let mut write = Samples::default();
    let (mut failed, mut sent, mut frame) = (0u64, 0u64, 0u64);
    let mut ticker = args.pace.ticker();
    while ticker.wait() {
        frame += 1;
        let ok = if let Some(camera) = &camera {
            let t0 = monotonic_ns();
            match publisher.loan() {
                Ok(mut loan) => {
                    let t1 = monotonic_ns();
                    // The camera writes the frame straight into shared memory: the image
                    // message's header, stamped now, then the pixels.
                    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                    let sec = i32::try_from(now.as_secs()).unwrap_or(i32::MAX);
                    camera.write_header(&mut loan[..len], sec, now.subsec_nanos());
                    camera.write_pixels(&mut loan[camera.header_len()..len], &pattern, frame);
                    let t2 = monotonic_ns();
                    loan.truncate(len);
                    let done = loan.send().is_ok();
                    write.push((t1 - t0) + (monotonic_ns() - t2));
                    done
                }
                Err(_) => false,
            }
        } else {
            let n = payload.len().min(8);
            payload[..n].copy_from_slice(&frame.to_le_bytes()[..n]);
            let t0 = monotonic_ns();
            let r = publisher.send(&payload);
            write.push(monotonic_ns() - t0);
            r.is_ok()
        };
        failed += u64::from(!ok);
        sent += u64::from(ok);
    }
    Ok(ProducerJson {
        name: args.label.clone(),
        topic: name.clone(),
        write: write.summary(),
        failed,
        rate_hz: args.pace.rate_hz,
        sent,
    })
}

fn consume(domain: &Domain, args: &RoleArgs) -> Result<ConsumerJson> {
    let mut subs = Vec::new();
    let mut max_len = 0;
    for t in &args.topics {
        let s = Topic::open(domain, t)?.subscriber()?;
        max_len = max_len.max(s.max_message_len());
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
        match ws.wait_timeout(&waitables, Duration::from_nanos(until - now)) {
            Ok(r) => {
                ready.clear();
                ready.extend_from_slice(r);
            }
            Err(WaitTimeoutError::Timeout) => break,
            Err(e) => return Err(e.into()),
        }
        for &i in &ready {
            loop {
                match subs[i].try_recv_ref() {
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
                    Err(TopicTryRecvError::Empty) => break,
                    Err(TopicTryRecvError::Lagged { missed }) => gaps += missed,
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
    Ok(ConsumerJson {
        name: args.label.clone(),
        topics: args.topics.clone(),
        view: view.summary(),
        view_copy: view_copy.summary(),
        gaps,
    })
}
