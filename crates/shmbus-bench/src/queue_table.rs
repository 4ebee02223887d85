//! `queue-table`: the mutex-queue reference's ping-pong table over shmbus queues.
//!
//! The reference (a shared-memory queue guarded by an adaptive `pthread_mutex`) bounces 2,000,000
//! messages (1,000,000 round trips) of each size between two processes that spin on
//! try-enqueue / try-dequeue, and prints the wall time. Here the same ping-pong runs over two
//! shmbus queues (the `queue` transport, spin mode, payload copied in and out) through the
//! ping-pong driver: two processes pinned to different CPUs, 1,000 unrecorded warm-up round
//! trips, then `messages / 2` timed round trips (65536 B: a tenth of the messages).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::cpus::CpuSet;
use crate::driver;
use crate::transports::{queue::QueueTransport, Mode, Params, Payload};

/// The reference's sizes and wall seconds for 2,000,000 messages (adaptive mutex).
pub const REFERENCE: &[(usize, f64)] =
    &[(16, 0.739), (128, 0.737), (256, 0.754), (1024, 0.949), (8192, 3.221), (65536, 59.469)];

/// The reference's message count per size.
pub const REFERENCE_MESSAGES: u64 = 2_000_000;

/// The reference's headline: 256 B, adaptive mutex.
pub const REFERENCE_256_S: f64 = 0.754;

/// Unrecorded round trips before each size.
const WARMUP: u64 = 1000;

/// One row of the table.
#[derive(Debug, Clone)]
pub struct Row {
    /// Message size in bytes.
    pub size: usize,
    /// Messages timed (two per round trip).
    pub messages: u64,
    /// Seconds spent in the timed round trips (sum of round-trip times).
    pub wall_s: f64,
    /// The whole run including echo start-up and warm-up (like the reference's `real`).
    pub total_s: f64,
    /// One-way latency: mean, p50, p99 (ns).
    pub mean_ns: f64,
    /// Median one-way latency.
    pub p50_ns: u64,
    /// 99th percentile one-way latency.
    pub p99_ns: u64,
    /// Whether the two processes were pinned.
    pub pinned: bool,
    /// The reference's wall seconds for 2,000,000 messages of this size.
    pub reference_s: f64,
    /// The spin floor's p50 (64 B) measured just before this size.
    pub floor_p50_ns: u64,
}

impl Row {
    /// `wall_s` scaled to the reference's 2,000,000 messages.
    pub fn wall_s_per_2m(&self) -> f64 {
        self.wall_s * REFERENCE_MESSAGES as f64 / self.messages as f64
    }

    /// Reference seconds / ours, both for 2,000,000 messages.
    pub fn speedup(&self) -> f64 {
        self.reference_s / self.wall_s_per_2m()
    }

    /// 2,000,000 messages at the median one-way latency: the wall time without the few
    /// round trips that were preempted (on a loaded machine those dominate the mean).
    pub fn p50_s_per_2m(&self) -> f64 {
        self.p50_ns as f64 * REFERENCE_MESSAGES as f64 / 1e9
    }
}

/// Messages for `size` when `messages` are asked for (65536 B gets a tenth), at least 2.
pub fn messages_for(size: usize, messages: u64) -> u64 {
    let m = if size >= 65536 { messages / 10 } else { messages };
    (m / 2).max(1) * 2
}

/// Runs one size.
pub fn run_size(size: usize, messages: u64, cpu_set: &CpuSet) -> Result<Row, String> {
    let floor_p50_ns = crate::cpus::floor_p50_ns(cpu_set)?;
    cpu_set.restore()?;
    let messages = messages_for(size, messages);
    let config = driver::Config {
        transport: &QueueTransport,
        params: Params { size, mode: Mode::Spin, payload: Payload::Copy },
        iters: messages / 2,
        warmup: WARMUP,
        timeout: Duration::from_secs(10),
        echo_exit_after: None,
    };
    let start = Instant::now();
    let o = driver::run(config)?;
    let total_s = start.elapsed().as_secs_f64();
    let h = &o.hist;
    // The histogram holds RTT/2 per round trip, so its sum is half the timed round trips'
    // time, i.e. mean × messages is their whole time (to the histogram's 3 figures).
    let mean_ns = h.mean();
    let reference_s = REFERENCE.iter().find(|(s, _)| *s == size).map_or(f64::NAN, |(_, t)| *t);
    Ok(Row {
        size,
        messages,
        wall_s: mean_ns * messages as f64 / 1e9,
        total_s,
        mean_ns,
        p50_ns: h.value_at_quantile(0.5),
        p99_ns: h.value_at_quantile(0.99),
        pinned: o.cpus.is_some(),
        reference_s,
        floor_p50_ns,
    })
}

/// One row as a JSON object on one line.
pub fn json(r: &Row) -> String {
    json!({
        "transport": "queue",
        "mode": "spin",
        "size": r.size,
        "messages": r.messages,
        "round_trips": r.messages / 2,
        "wall_s": r.wall_s,
        "wall_s_per_2m": r.wall_s_per_2m(),
        "total_s": r.total_s,
        "one_way_mean_ns": r.mean_ns.round() as u64,
        "p50_ns": r.p50_ns,
        "p99_ns": r.p99_ns,
        "pinned": r.pinned,
        "reference_wall_s": r.reference_s,
        "speedup": r.speedup(),
        "p50_s_per_2m": r.p50_s_per_2m(),
        "speedup_p50": r.reference_s / r.p50_s_per_2m(),
        "floor_p50_ns": r.floor_p50_ns,
    })
    .to_string()
}

/// The header of the text table.
pub fn header() -> String {
    format!(
        "{:>6} {:>9} {:>9} {:>10} {:>12} {:>8} {:>8} {:>9} {:>8} {:>11} {:>12} {:>9}",
        "bytes",
        "messages",
        "wall s",
        "s per 2M",
        "one-way ns",
        "p50 ns",
        "p99 ns",
        "reference s",
        "speed-up",
        "p50 x 2M s",
        "p50 speed-up",
        "floor ns"
    )
}

/// One row of the text table.
pub fn line(r: &Row) -> String {
    format!(
        "{:>6} {:>9} {:>9.3} {:>10.3} {:>12.0} {:>8} {:>8} {:>9.3} {:>7.1}x {:>11.3} {:>11.1}x {:>9}",
        r.size,
        r.messages,
        r.wall_s,
        r.wall_s_per_2m(),
        r.mean_ns,
        r.p50_ns,
        r.p99_ns,
        r.reference_s,
        r.speedup(),
        r.p50_s_per_2m(),
        r.reference_s / r.p50_s_per_2m(),
        r.floor_p50_ns
    )
}

/// The whole table: every reference size, one line (or JSON object) each as it finishes, then
/// the comparison with the reference's headline figure.
pub fn run(messages: u64, json_out: bool) -> Result<(), String> {
    if messages < 2 {
        return Err("--messages must be at least 2".into());
    }
    if !json_out {
        println!("{}", header());
    }
    let cpu_set = CpuSet::current()?;
    let mut at_256 = None;
    for &(size, _) in REFERENCE {
        let r = run_size(size, messages, &cpu_set)?;
        if json_out {
            println!("{}", json(&r));
        } else {
            println!("{}", line(&r));
        }
        if size == 256 {
            at_256 = Some(r);
        }
    }
    if let (false, Some(r)) = (json_out, at_256) {
        println!(
            "256 B: {:.3} s for 2,000,000 messages ({:.0} ns one-way mean; {:.3} s at the p50 of {} ns) vs the reference's \
             {REFERENCE_256_S} s with an adaptive mutex: {:.2}x ({:.2}x at p50)",
            r.wall_s_per_2m(),
            r.mean_ns,
            r.p50_s_per_2m(),
            r.p50_ns,
            r.speedup(),
            REFERENCE_256_S / r.p50_s_per_2m()
        );
    }
    Ok(())
}

/// `shmbus-bench queue-table`.
#[derive(Debug, clap::Args)]
pub struct QueueTableArgs {
    /// Messages per size (two per round trip; 65536 B runs a tenth of them).
    #[arg(long, value_name = "N", default_value_t = REFERENCE_MESSAGES)]
    pub messages: u64,
    /// One JSON object per size instead of the table.
    #[arg(long)]
    pub json: bool,
}
