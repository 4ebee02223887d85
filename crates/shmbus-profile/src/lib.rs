//! The demo profile: the robotics workload that `shmbus demo` runs over shmbus
//! topics and `shmbus-bench demo-redis` runs over Redis streams, defined once here.
//!
//! | producer       | rate      | message                       | history                  |
//! |----------------|-----------|-------------------------------|--------------------------|
//! | `imu`          | 1 kHz     | 64 B                          | 60 messages (60 ms)      |
//! | `image`        | 30 Hz     | 6,220,800 B (`--image-bytes`) | 4 frames                 |
//! | `med01..med05` | 40..44 Hz | 2 KiB                         | 16 messages (at least)   |
//!
//! The `image` producer is the camera: it writes the whole frame each time (in place,
//! through a loan, over shmbus). Over shmbus a frame is a `sensor_msgs/msg/Image` message:
//! a 52-byte CDR header, then the `--image-bytes` of pixels ([`camera`]); over Redis it is
//! the pixel bytes alone. Six consumers: `imu`, `image`, `image+med01`,
//! `image+med0[1-5]`, `imu+image+med0[1-5]`, and the last again sleeping 10 ms after each
//! batch it wakes for. Every role is a process of its own: 13 in all.
//!
//! Both runs report the same JSON object: `seconds`, `image_bytes`, per consumer (`consumers`)
//! the [`Samples`] summaries `view` and `view_copy` of the latency from the producer's
//! `CLOCK_MONOTONIC` timestamp and the messages it missed (`gaps`), per producer (`producers`)
//! the `write` latency and the failed writes (`failed`). A Redis run adds `backend` and
//! `view_is_copy`; a shmbus run adds `domain` and `root`. [`write_table`] prints either.
//!
//! After the table, a shmbus run prints [`write_notes`]: what the columns mean, the rates
//! achieved against those configured, the messages each consumer got of those published on
//! its topics, and the machine (cores, load average), which `shmbus demo --json` reports too
//! ([`machine`]).
//!
//! The camera's frames are `sensor_msgs/msg/Image` messages (module [`camera`]).
//!
//! Both take the same arguments ([`RunArgs`]); their producers pace themselves with a
//! [`Ticker`] on `CLOCK_MONOTONIC`, the clock shmbus stamps messages with.

use std::io::{self, Write};
use std::time::Duration;

pub mod camera;

use serde_json::{json, Value};
use shmbus::time::monotonic_ns;

/// Default image size: one 1920x1080 RGB frame.
pub const IMAGE_BYTES: usize = 1920 * 1080 * 3;
/// Size of each `imu` message.
pub const IMU_BYTES: usize = 64;
/// Size of each `med0N` message.
pub const MED_BYTES: usize = 2048;
/// Head start for the producers to be spawned before the clock starts.
pub const START_NS: u64 = 200_000_000;

/// One producer: a topic (or stream) it writes at a fixed rate.
#[derive(Debug, Clone, PartialEq)]
pub struct ProducerSpec {
    /// The topic, also the producer's name.
    pub topic: String,
    /// Messages per second.
    pub rate_hz: f64,
    /// Size of each message.
    pub bytes: usize,
    /// The camera (`image`): writes the whole message each time (over shmbus in place,
    /// through a loan); the others write their sequence number into its first bytes.
    pub camera: bool,
    /// How many of the latest messages the topic keeps: 4 frames for the image (each slot is
    /// a whole frame; 4 spare slots cover the pins of the 5 image consumers), about 60 ms of
    /// messages and at least 16 for the rest.
    pub history: usize,
}

/// One consumer: the topics it reads, all in one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerSpec {
    /// Its name in the results.
    pub label: &'static str,
    /// The topics it reads.
    pub topics: Vec<String>,
    /// Milliseconds it sleeps after each batch of messages (a slow consumer), or 0.
    pub sleep_ms: u64,
}

fn meds() -> Vec<String> {
    (1..=5).map(|i| format!("med0{i}")).collect()
}

/// The seven producers, with `image_bytes` per image.
pub fn producers(image_bytes: usize) -> Vec<ProducerSpec> {
    let spec = |topic: String, rate_hz: f64, bytes: usize, camera: bool| {
        let history = if camera { 4 } else { ((rate_hz * 0.06) as usize).max(16) };
        ProducerSpec { topic, rate_hz, bytes, camera, history }
    };
    let mut v = vec![spec("imu".into(), 1000.0, IMU_BYTES, false), spec("image".into(), 30.0, image_bytes, true)];
    for (i, m) in meds().into_iter().enumerate() {
        v.push(spec(m, 40.0 + i as f64, MED_BYTES, false));
    }
    v
}

/// The six consumers.
pub fn consumers() -> Vec<ConsumerSpec> {
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

/// Producers and consumers: the processes of one run.
pub fn process_count() -> usize {
    consumers().len() + producers(0).len()
}

/// The arguments of a run: `[--seconds S] [--image-bytes B] [--json]` (flattened into
/// `shmbus demo` and `shmbus-bench demo-redis`).
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// How long the producers publish.
    #[arg(long, default_value_t = 10.0, value_name = "S")]
    pub seconds: f64,
    /// Size of each `image` message.
    #[arg(long, default_value_t = IMAGE_BYTES, value_name = "B")]
    pub image_bytes: usize,
    /// One JSON object with every number instead of the table.
    #[arg(long)]
    pub json: bool,
}

impl RunArgs {
    /// `--seconds` must be in (0, 86400]: the error message otherwise.
    pub fn check(&self) -> Result<(), String> {
        if self.seconds > 0.0 && self.seconds <= 86_400.0 {
            Ok(())
        } else {
            Err(format!("--seconds {} must be in (0, 86400]", self.seconds))
        }
    }

    /// When the producers publish, on `CLOCK_MONOTONIC`: (first message, end) in ns, the
    /// first [`START_NS`] from now so that every producer is running by then.
    pub fn window(&self) -> (u64, u64) {
        let start_ns = monotonic_ns() + START_NS;
        (start_ns, start_ns + (self.seconds * 1e9) as u64)
    }
}

/// How a producer process paces itself: `--rate-hz R --start-ns T0 --until-ns T1`, passed by
/// the parent (flattened into the hidden role subcommands of both runs).
#[derive(Debug, Clone, clap::Args)]
pub struct PaceArgs {
    /// Producer: messages per second.
    #[arg(long, default_value_t = 1.0)]
    pub rate_hz: f64,
    /// Producer: CLOCK_MONOTONIC ns of the first message.
    #[arg(long, default_value_t = 0)]
    pub start_ns: u64,
    /// Producer: CLOCK_MONOTONIC ns after which no message is sent.
    #[arg(long, default_value_t = 0)]
    pub until_ns: u64,
}

impl PaceArgs {
    /// The command-line arguments that give a producer process this pace.
    pub fn to_args(&self) -> Vec<String> {
        let (rate, start, until) = (self.rate_hz.to_string(), self.start_ns.to_string(), self.until_ns.to_string());
        ["--rate-hz", &rate, "--start-ns", &start, "--until-ns", &until].map(String::from).to_vec()
    }

    /// The producer's clock.
    pub fn ticker(&self) -> Ticker {
        Ticker::new(self.rate_hz, self.start_ns, self.until_ns)
    }
}

/// Sleeps until `CLOCK_MONOTONIC` reaches `t_ns` (returns at once if it has).
pub fn sleep_until(t_ns: u64) {
    let now = monotonic_ns();
    if t_ns > now {
        std::thread::sleep(Duration::from_nanos(t_ns - now));
    }
}

/// A producer's pace: `rate_hz` ticks on `CLOCK_MONOTONIC` from `start_ns` until `until_ns`.
/// A producer that falls more than a period behind (descheduled) resumes the rate from now
/// instead of bursting.
#[derive(Debug)]
pub struct Ticker {
    next: u64,
    period: u64,
    until: u64,
    started: bool,
}

impl Ticker {
    /// Ticks at `rate_hz` (at least one every 1000 s) in `[start_ns, until_ns)`.
    pub fn new(rate_hz: f64, start_ns: u64, until_ns: u64) -> Ticker {
        Ticker { next: start_ns, period: (1e9 / rate_hz.max(0.001)) as u64, until: until_ns, started: false }
    }

    /// Sleeps until the next tick and returns true, or returns false once the window is over.
    pub fn wait(&mut self) -> bool {
        if self.started {
            self.next += self.period;
            let now = monotonic_ns();
            if now > self.next + self.period {
                self.next = now;
            }
        }
        self.started = true;
        if self.next >= self.until {
            return false;
        }
        sleep_until(self.next);
        true
    }
}

/// Latency samples in nanoseconds.
#[derive(Debug, Default)]
pub struct Samples(Vec<u64>);

impl Samples {
    /// Records one latency.
    pub fn push(&mut self, ns: u64) {
        self.0.push(ns);
    }

    /// `{"n", "mean_ns", "p50_ns", "p99_ns", "max_ns"}`; percentiles by nearest rank, every
    /// number `null` when there is no sample.
    pub fn summary(&mut self) -> Value {
        let v = &mut self.0;
        if v.is_empty() {
            return json!({"n": 0, "mean_ns": null, "p50_ns": null, "p99_ns": null, "max_ns": null});
        }
        v.sort_unstable();
        let n = v.len();
        let pct = |p: usize| v[((p * n).div_ceil(100)).clamp(1, n) - 1];
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        json!({"n": n, "mean_ns": mean, "p50_ns": pct(50), "p99_ns": pct(99), "max_ns": v[n - 1]})
    }
}

/// A duration in nanoseconds, human-sized: `850ns`, `12.1us`, `3.2ms`, `1.20s`.
pub fn fmt_ns(ns: f64) -> String {
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

/// The table of a run's result object (see the crate documentation): two heading lines that
/// say what ran (shmbus when there is no `backend`, else Redis over TCP or a Unix socket,
/// where view and view+copy are one number), a blank line, then one row per consumer and
/// latency (view, view+copy) and one per producer (write).
pub fn write_table(r: &Value, out: &mut impl Write) -> io::Result<()> {
    match r["backend"].as_str().unwrap_or("shmbus") {
        "shmbus" => {
            // The camera's whole message when the run says what its frames are.
            let image = match r["image"]["message_bytes"].as_u64() {
                Some(bytes) => format!(
                    "{bytes} B ({} {}x{} {})",
                    r["image"]["schema"].as_str().unwrap_or("?"),
                    r["image"]["width"],
                    r["image"]["height"],
                    r["image"]["encoding"].as_str().unwrap_or("?")
                ),
                None => format!("{} B", r["image_bytes"]),
            };
            writeln!(
                out,
                "shmbus demo (robotics profile): {} s; imu {IMU_BYTES} B @ 1 kHz, image {image} @ 30 Hz \
                 (loaned), med01..05 {MED_BYTES} B @ 40..44 Hz",
                r["seconds"].as_f64().unwrap_or(f64::NAN),
            )?;
            writeln!(
                out,
                "{} processes in domain {} under {} (removed); latency = publish timestamp -> sample in hand \
                 (view) / payload copied (view+copy)",
                process_count(),
                r["domain"].as_str().unwrap_or("?"),
                r["root"].as_str().unwrap_or("?")
            )?;
        }
        backend => {
            let via = match backend {
                "redis-tcp" => "Redis streams over loopback TCP",
                "redis-uds" => "Redis streams over a Unix socket",
                other => other,
            };
            writeln!(
                out,
                "demo-redis (the demo's robotics profile, {via}): {} s; imu {IMU_BYTES} B @ 1 kHz, image {} B @ 30 Hz, \
                 med01..05 {MED_BYTES} B @ 40..44 Hz",
                r["seconds"], r["image_bytes"]
            )?;
            writeln!(
                out,
                "{} processes and the harness's redis-server; latency = XADD timestamp -> payload read from the \
                 XREAD reply into the consumer's buffer (view = view+copy: a socket client copies to read)",
                process_count()
            )?;
        }
    }
    writeln!(out)?;

    const TITLES: [&str; 9] = ["ROLE", "NAME", "LATENCY OF", "MEAN", "P50", "P99", "MAX", "N", "NOTE"];
    const RIGHT: [bool; 9] = [false, false, false, true, true, true, true, true, false];
    let num = |s: &Value, k: &str| s.get(k).and_then(Value::as_f64).map(fmt_ns).unwrap_or_else(|| "-".into());
    let row = |role: &str, name: String, what: &str, s: &Value, note: String| {
        let n = s.get("n").and_then(Value::as_u64).unwrap_or(0);
        let stats = ["mean_ns", "p50_ns", "p99_ns", "max_ns"].map(|k| num(s, k));
        let mut cells = vec![role.to_string(), name, what.to_string()];
        cells.extend(stats);
        cells.extend([n.to_string(), note]);
        cells
    };
    let mut rows = vec![TITLES.map(String::from).to_vec()];
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
    let mut widths = [0usize; 9];
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    for r in &rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            let pad = " ".repeat(widths[i] - c.chars().count());
            if i > 0 {
                line.push_str("  ");
            }
            if RIGHT[i] {
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

/// The machine a run ran on: `{"cores": N, "loadavg": [1, 5, 15 min]}`, the cores this
/// process may use and the load average of `/proc/loadavg` (`null` where it cannot be read).
pub fn machine() -> Value {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let load = std::fs::read_to_string("/proc/loadavg").ok().and_then(|s| {
        let v: Vec<f64> = s.split_whitespace().take(3).filter_map(|x| x.parse().ok()).collect();
        (v.len() == 3).then_some(v)
    });
    json!({"cores": cores, "loadavg": load})
}

/// What to read under the table: a legend of its columns, the rates the producers achieved
/// against those configured (from each producer's `sent`, else its `write.n`), what each
/// consumer received of the messages published on its topics (its `view.n`, its `gaps`), the
/// failed publishes, the machine (`machine`: cores, load average before the run) and where
/// to find the figures of a quiet machine. Keys a run does not report are left out.
pub fn write_notes(r: &Value, out: &mut impl Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(out, "Columns:")?;
    writeln!(out, "  LATENCY OF  view: from the publish timestamp until the consumer holds the message (a zero-copy")?;
    writeln!(out, "              view of shared memory); view+copy: until it has also copied the payload out;")?;
    writeln!(out, "              write: a producer's publish call (the camera's loan + send, not filling the frame)")?;
    writeln!(out, "  MEAN P50 P99 MAX  mean, median, 99th percentile and slowest of the N messages measured")?;
    writeln!(
        out,
        "  NOTE        messages a consumer skipped (it lagged behind the topic's history), failed publishes"
    )?;

    let seconds = r["seconds"].as_f64().unwrap_or(f64::NAN);
    let configured = producers(0);
    let mut sent = std::collections::BTreeMap::new();
    let prods: Vec<&Value> = r["producers"].as_array().into_iter().flatten().collect();
    writeln!(out, "Rates over {seconds} s, configured -> achieved:")?;
    let width = prods.iter().map(|p| p["name"].as_str().unwrap_or("?").len()).max().unwrap_or(0);
    let mut failed_total = 0;
    for p in &prods {
        let name = p["name"].as_str().unwrap_or("?");
        let topic = p["topic"].as_str().unwrap_or(name);
        let failed = p["failed"].as_u64().unwrap_or(0);
        failed_total += failed;
        let n = p["sent"].as_u64().unwrap_or_else(|| p["write"]["n"].as_u64().unwrap_or(0).saturating_sub(failed));
        sent.insert(topic.to_string(), n);
        let rate = p["rate_hz"].as_f64().or_else(|| configured.iter().find(|c| c.topic == topic).map(|c| c.rate_hz));
        let rate = rate.map(|r| format!("{r} Hz")).unwrap_or_else(|| "?".into());
        let achieved = n as f64 / seconds;
        let fail = if failed > 0 { format!(", {failed} failed") } else { String::new() };
        writeln!(out, "  {name:<width$}  {rate:>7} -> {achieved:.1} Hz ({n} sent{fail})")?;
    }
    writeln!(out, "Received, of the messages published on the consumer's topics:")?;
    let cons: Vec<&Value> = r["consumers"].as_array().into_iter().flatten().collect();
    let width = cons.iter().map(|c| c["name"].as_str().unwrap_or("?").len()).max().unwrap_or(0);
    for c in &cons {
        let name = c["name"].as_str().unwrap_or("?");
        let got = c["view"]["n"].as_u64().unwrap_or(0);
        let published: u64 =
            c["topics"].as_array().into_iter().flatten().filter_map(|t| t.as_str()).filter_map(|t| sent.get(t)).sum();
        let gaps = c["gaps"].as_u64().unwrap_or(0);
        let skipped = if gaps > 0 { format!(" ({gaps} skipped: it lagged)") } else { String::new() };
        writeln!(out, "  {name:<width$}  {got} of {published}{skipped}")?;
    }
    if failed_total > 0 {
        writeln!(out, "Failed publishes: {failed_total} (see NOTE).")?;
    } else {
        writeln!(out, "Failed publishes: none.")?;
    }
    let m = &r["machine"];
    if let Some(cores) = m["cores"].as_u64() {
        let load = match m["loadavg"].as_array() {
            Some(l) => {
                let l: Vec<String> = l.iter().map(|x| format!("{:.2}", x.as_f64().unwrap_or(f64::NAN))).collect();
                format!("load average {} (1, 5, 15 min) before the run", l.join(" "))
            }
            None => "load average unknown".into(),
        };
        writeln!(
            out,
            "Machine: {cores} core(s), {load}; {} processes share them, so a load near or above the core count \
             shows as longer tails (P99, MAX).",
            process_count()
        )?;
    }
    writeln!(out, "What a quiet machine gives: BENCHMARKS.md, \"The demo profile\".")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_matches_the_reference() {
        let c = consumers();
        assert_eq!(c.len(), 6);
        assert_eq!(c[4].topics.len(), 7);
        assert_eq!((c[5].topics.len(), c[5].sleep_ms), (7, 10));
        let p = producers(IMAGE_BYTES);
        assert_eq!(
            p.iter().map(|p| p.topic.as_str()).collect::<Vec<_>>(),
            ["imu", "image", "med01", "med02", "med03", "med04", "med05"]
        );
        assert_eq!(p.iter().map(|p| p.rate_hz).collect::<Vec<_>>(), [1000.0, 30.0, 40.0, 41.0, 42.0, 43.0, 44.0]);
        assert_eq!(p.iter().map(|p| p.history).collect::<Vec<_>>(), [60, 4, 16, 16, 16, 16, 16]);
        assert_eq!((p[1].bytes, p[1].camera), (IMAGE_BYTES, true));
        assert_eq!(process_count(), 13);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v = Samples((1..=100).rev().collect()).summary();
        assert_eq!(
            (v["n"].as_u64(), v["p50_ns"].as_u64(), v["p99_ns"].as_u64(), v["max_ns"].as_u64()),
            (Some(100), Some(50), Some(99), Some(100))
        );
        assert_eq!(v["mean_ns"].as_f64(), Some(50.5));
        // Three samples: the 50th percentile is the 2nd, the 99th the 3rd.
        let mut s = Samples::default();
        for ns in [30, 10, 20] {
            s.push(ns);
        }
        assert_eq!(s.summary(), json!({"n": 3, "mean_ns": 20.0, "p50_ns": 20, "p99_ns": 30, "max_ns": 30}));
    }

    #[test]
    fn no_samples_is_n_0_and_nulls() {
        assert_eq!(
            Samples::default().summary(),
            json!({"n": 0, "mean_ns": null, "p50_ns": null, "p99_ns": null, "max_ns": null})
        );
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(fmt_ns(850.0), "850ns");
        assert_eq!(fmt_ns(12_100.0), "12.1us");
        assert_eq!(fmt_ns(3_200_000.0), "3.2ms");
        assert_eq!(fmt_ns(1_200_000_000.0), "1.20s");
        assert_eq!(fmt_ns(f64::NAN), "-");
    }

    #[test]
    fn a_ticker_ticks_at_its_rate_within_its_window() {
        // 1 MHz for 20 us: 20 ticks, each 1 us after the one before unless this thread was
        // descheduled for more than a period (then the next tick is now).
        let start = monotonic_ns();
        let mut t = Ticker::new(1e6, start, start + 20_000);
        let mut ticks = Vec::new();
        while t.wait() {
            ticks.push(t.next);
        }
        assert!(!ticks.is_empty() && ticks.len() <= 20, "{ticks:?}");
        assert_eq!(ticks[0], start);
        assert!(ticks.windows(2).all(|w| w[1] >= w[0] + 1000), "{ticks:?}");
        assert!(ticks.iter().all(|&n| n < start + 20_000), "{ticks:?}");
        assert!(!t.wait(), "the window is over");
        let mut none = Ticker::new(30.0, start, start);
        assert!(!none.wait(), "an empty window has no tick");
    }

    #[test]
    fn a_pace_goes_through_the_command_line() {
        #[derive(Debug, clap::Parser)]
        struct Role {
            #[command(flatten)]
            pace: PaceArgs,
        }
        let pace = PaceArgs { rate_hz: 41.5, start_ns: 7, until_ns: 9 };
        let args = pace.to_args();
        assert_eq!(args, ["--rate-hz", "41.5", "--start-ns", "7", "--until-ns", "9"]);
        let back = <Role as clap::Parser>::parse_from(std::iter::once("role".to_string()).chain(args)).pace;
        assert_eq!((back.rate_hz, back.start_ns, back.until_ns), (41.5, 7, 9));
    }

    #[test]
    fn seconds_are_checked() {
        let a = |seconds| RunArgs { seconds, image_bytes: IMAGE_BYTES, json: false };
        assert_eq!(a(0.5).check(), Ok(()));
        assert_eq!(a(86_400.0).check(), Ok(()));
        for bad in [0.0, -1.0, 86_401.0, f64::NAN] {
            assert_eq!(a(bad).check(), Err(format!("--seconds {bad} must be in (0, 86400]")));
        }
    }

    /// One consumer and one producer, as a run reports them (plus `extra` keys).
    fn result(extra: Value) -> Value {
        let mut r = json!({
            "seconds": 2.0,
            "image_bytes": 1080,
            "consumers": [{
                "name": "imu",
                "topics": ["imu"],
                "view": {"n": 3, "mean_ns": 850.0, "p50_ns": 800, "p99_ns": 1200, "max_ns": 1200},
                "view_copy": {"n": 3, "mean_ns": 1500.0, "p50_ns": 1400, "p99_ns": 2_500_000, "max_ns": 1_200_000_000},
                "gaps": 2,
            }],
            "producers": [{
                "name": "imu",
                "topic": "imu",
                "write": {"n": 0, "mean_ns": null, "p50_ns": null, "p99_ns": null, "max_ns": null},
                "failed": 1,
            }],
        });
        for (k, v) in extra.as_object().unwrap() {
            r[k] = v.clone();
        }
        r
    }

    fn table(r: &Value) -> Vec<String> {
        let mut out = Vec::new();
        write_table(r, &mut out).unwrap();
        String::from_utf8(out).unwrap().lines().map(String::from).collect()
    }

    const ROWS: [&str; 4] = [
        "ROLE      NAME    LATENCY OF   MEAN    P50    P99    MAX  N  NOTE",
        "consumer  => imu  view        850ns  800ns  1.2us  1.2us  3",
        "consumer  => imu  view+copy   1.5us  1.4us  2.5ms  1.20s  3  2 message(s) skipped (lagged)",
        "producer  imu =>  write           -      -      -      -  0  1 publish(es) failed",
    ];

    #[test]
    fn a_shmbus_run_prints_the_demo_table() {
        let lines = table(&result(json!({"domain": "demo-42", "root": "/dev/shm/shmbus"})));
        let head = [
            "shmbus demo (robotics profile): 2 s; imu 64 B @ 1 kHz, image 1080 B @ 30 Hz (loaned), \
             med01..05 2048 B @ 40..44 Hz",
            "13 processes in domain demo-42 under /dev/shm/shmbus (removed); latency = publish timestamp -> \
             sample in hand (view) / payload copied (view+copy)",
            "",
        ];
        assert_eq!(lines, head.iter().chain(&ROWS).copied().collect::<Vec<_>>());
    }

    #[test]
    fn the_notes_explain_the_columns_rates_and_machine() {
        let mut r = result(json!({
            "image": {"schema": "sensor_msgs/msg/Image", "width": 24, "height": 15, "encoding": "rgb8", "message_bytes": 1132},
            "machine": {"cores": 2, "loadavg": [0.5, 0.25, 1.0]},
        }));
        r["producers"][0]["sent"] = json!(1990);
        r["producers"][0]["rate_hz"] = json!(1000.0);
        let mut out = Vec::new();
        write_notes(&r, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "");
        assert_eq!(lines[1], "Columns:");
        assert!(lines.contains(&"Rates over 2 s, configured -> achieved:"), "{text}");
        assert!(lines.contains(&"  imu  1000 Hz -> 995.0 Hz (1990 sent, 1 failed)"), "{text}");
        assert!(lines.contains(&"  imu  3 of 1990 (2 skipped: it lagged)"), "{text}");
        assert!(lines.contains(&"Failed publishes: 1 (see NOTE)."), "{text}");
        assert!(
            text.contains(
                "Machine: 2 core(s), load average 0.50 0.25 1.00 (1, 5, 15 min) before the run; 13 processes"
            ),
            "{text}"
        );
        assert_eq!(lines.last(), Some(&"What a quiet machine gives: BENCHMARKS.md, \"The demo profile\"."));
        // A run that reports neither `sent` nor `rate_hz` nor `machine` (demo-redis): the
        // profile's rate, the measured writes, no machine line.
        let mut out = Vec::new();
        write_notes(&result(json!({})), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("  imu  1000 Hz -> 0.0 Hz (0 sent, 1 failed)"), "{text}");
        assert!(!text.contains("Machine:"), "{text}");
        // The first line names the camera's whole message.
        let head = &table(&r)[0];
        assert!(head.contains("image 1132 B (sensor_msgs/msg/Image 24x15 rgb8) @ 30 Hz (loaned)"), "{head}");
    }

    #[test]
    fn a_redis_run_prints_its_backend() {
        let lines = table(&result(json!({"backend": "redis-uds", "view_is_copy": true})));
        let head = [
            "demo-redis (the demo's robotics profile, Redis streams over a Unix socket): 2.0 s; imu 64 B @ 1 kHz, \
             image 1080 B @ 30 Hz, med01..05 2048 B @ 40..44 Hz",
            "13 processes and the harness's redis-server; latency = XADD timestamp -> payload read from the \
             XREAD reply into the consumer's buffer (view = view+copy: a socket client copies to read)",
            "",
        ];
        assert_eq!(lines, head.iter().chain(&ROWS).copied().collect::<Vec<_>>());
        let tcp = table(&result(json!({"backend": "redis-tcp", "view_is_copy": true})));
        assert!(
            tcp[0].starts_with("demo-redis (the demo's robotics profile, Redis streams over loopback TCP): "),
            "{}",
            tcp[0]
        );
    }
}
