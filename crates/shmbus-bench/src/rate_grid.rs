//! `rate-grid`: one-way latency of a shmbus stream against the message rate and
//! the ring size, for small records (20–40 B by default), spinning and blocking.
//!
//! What is timed, per cell (rate × ring × mode): the writer (this process, pinned to the
//! first CPU) creates a stream with the cell's ring capacity and starts a reader process
//! (pinned to the second CPU). After the reader is attached, the writer sends records paced
//! by absolute deadlines (`clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`, start + i ×
//! period, so a late wake-up does not shift the later ones). Each record carries its
//! sequence number and the writer's `CLOCK_MONOTONIC` read just before `send`; its length
//! cycles through `size × 5/8 ..= size × 5/4` (20–40 B for `--size 32`). The reader takes
//! each record (`try_recv_ref` polled with `WaitPolicy::SPIN`, or `recv_ref_timeout` with
//! `WaitPolicy::BLOCK`), reads the clock, and records now − sent in an HDR histogram. The
//! first [`WARMUP`] records are not recorded. The writer's pacing sleep is outside the
//! timed span in both modes: the clock is read after it wakes.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{json, Value};
use shmbus::stream::{
    Stream, StreamConfig, StreamRecvTimeoutError, StreamSendTimeoutError, StreamTryRecvError, StreamWriter,
};

use crate::affinity;
use crate::child::{self, Helper};
use crate::transports::shmbus_kinds::{policy, ScratchRoot, BLOCK_SLICE};
use crate::transports::Mode;

/// The hidden subcommand of the reader process.
pub const READER_ROLE: &str = "__rate-reader";

/// The grid's message rates (msg/s).
pub const RATES: &[u64] = &[25, 50, 100, 200, 500, 750, 1000, 1500, 2000];

/// Records sent (paced) before the recorded ones.
pub const WARMUP: u64 = 4;

/// The sequence number of the last record, which tells the reader to report.
const END: u64 = u64::MAX;

/// The command line of `rate-grid`.
#[derive(Debug, clap::Args)]
pub struct RateGridArgs {
    /// Message rates (msg/s), comma-separated.
    #[arg(long, value_name = "R,R,…", value_delimiter = ',', default_values_t = RATES.to_vec())]
    rates: Vec<u64>,
    /// Ring capacities, comma-separated: bytes, or with K / M (KiB / MiB); powers of two of
    /// at least 4K.
    #[arg(long, value_name = "SIZE,…", value_delimiter = ',', default_value = "4K,16K,32K,256K,1M,8M,32M")]
    rings: Vec<String>,
    /// Mean record size in bytes; records cycle through size×5/8 ..= size×5/4 (at least 16).
    #[arg(long, value_name = "BYTES", default_value_t = 32)]
    size: usize,
    /// Seconds each cell sends for (plus the warm-up records).
    #[arg(long, value_name = "S", default_value_t = 0.5)]
    seconds_per_cell: f64,
    /// spin or block; both when not given.
    #[arg(long, value_enum)]
    mode: Option<Mode>,
    /// Fail when the reader makes no progress for this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    timeout_secs: u64,
    /// One JSON object per cell instead of the tables.
    #[arg(long)]
    json: bool,
}

/// "4K", "1M", "4096" → bytes.
pub fn parse_ring(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (num, mult) = match t.as_bytes().last() {
        Some(b'K' | b'k') => (&t[..t.len() - 1], 1usize << 10),
        Some(b'M' | b'm') => (&t[..t.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let n: usize = num.parse().map_err(|_| format!("--rings: '{s}' is not a size (like 4K, 1M or 65536)"))?;
    let bytes = n.checked_mul(mult).ok_or_else(|| format!("--rings: '{s}' is too large"))?;
    if !bytes.is_power_of_two() || bytes < 4096 {
        return Err(format!("--rings: '{s}' must be a power of two of at least 4K"));
    }
    Ok(bytes)
}

/// The record lengths of a run: (shortest, longest).
pub fn lengths(size: usize) -> (usize, usize) {
    let lo = (size * 5 / 8).max(16);
    (lo, (size * 5 / 4).max(lo))
}

/// One cell's configuration.
#[derive(Debug, Clone, Copy)]
pub struct Cell {
    /// Messages per second.
    pub rate: u64,
    /// Ring capacity in bytes.
    pub ring: usize,
    /// Mean record size.
    pub size: usize,
    /// Spin or block.
    pub mode: Mode,
    /// Sending time.
    pub seconds: f64,
    /// Give up after this long without progress.
    pub timeout: Duration,
}

/// One cell's result (latencies in ns).
#[derive(Debug, Clone)]
pub struct CellResult {
    /// The cell.
    pub cell: Cell,
    /// Recorded records sent.
    pub sent: u64,
    /// The reader's JSON summary (count and percentiles).
    pub reader: Value,
    /// Records whose send found the ring full.
    pub writer_waits: u64,
    /// Pinned to two CPUs.
    pub pinned: bool,
}

/// Runs the subcommand. Errors are one line.
pub fn run(a: RateGridArgs) -> Result<(), String> {
    if a.rates.is_empty() || a.rates.iter().any(|&r| r == 0 || r > 1_000_000) {
        return Err("--rates must be 1..=1000000 msg/s each".into());
    }
    let rings = a.rings.iter().map(|s| parse_ring(s)).collect::<Result<Vec<_>, _>>()?;
    if rings.is_empty() {
        return Err("--rings needs at least one ring size".into());
    }
    if a.size < 16 || a.size > 4096 {
        return Err("--size must be 16..=4096 bytes (a record carries a 16-byte header)".into());
    }
    if !(a.seconds_per_cell > 0.0 && a.seconds_per_cell <= 3600.0) {
        return Err("--seconds-per-cell must be above 0 and at most 3600".into());
    }
    if a.timeout_secs == 0 {
        return Err("--timeout-secs must be at least 1".into());
    }
    let modes = match a.mode {
        Some(m) => vec![crate::transports::sync_only(m)?],
        None => vec![Mode::Spin, Mode::Block],
    };
    let cpu_set = crate::cpus::CpuSet::current()?;
    let mut results = Vec::new();
    for &mode in &modes {
        for &rate in &a.rates {
            for &ring in &rings {
                cpu_set.restore()?;
                let cell = Cell {
                    rate,
                    ring,
                    size: a.size,
                    mode,
                    seconds: a.seconds_per_cell,
                    timeout: Duration::from_secs(a.timeout_secs),
                };
                let r = run_cell(cell)?;
                if a.json {
                    println!("{}", cell_json(&r));
                }
                results.push(r);
            }
        }
    }
    cpu_set.restore()?;
    if !a.json {
        print!("{}", tables(&results, &a.rates, &rings, &modes));
    }
    Ok(())
}

/// A cell as one JSON object.
pub fn cell_json(r: &CellResult) -> Value {
    let (lo, hi) = lengths(r.cell.size);
    let g = |k: &str| r.reader.get(k).cloned().unwrap_or(Value::Null);
    json!({
        "experiment": "rate_grid",
        "mode": r.cell.mode.as_str(),
        "rate": r.cell.rate,
        "ring": r.cell.ring,
        "size_min": lo,
        "size_max": hi,
        "seconds": r.cell.seconds,
        "sent": r.sent,
        "received": g("count"),
        "writer_waits": r.writer_waits,
        "pinned": r.pinned,
        "p50_ns": g("p50_ns"),
        "p90_ns": g("p90_ns"),
        "p99_ns": g("p99_ns"),
        "p999_ns": g("p999_ns"),
        "max_ns": g("max_ns"),
        "min_ns": g("min_ns"),
        "mean_ns": g("mean_ns"),
    })
}

/// "4K", "256K", "32M".
pub fn ring_label(b: usize) -> String {
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{}M", b >> 20)
    } else if b >= 1024 && b % 1024 == 0 {
        format!("{}K", b >> 10)
    } else {
        b.to_string()
    }
}

fn us(v: Option<u64>) -> String {
    v.map_or("–".into(), |ns| format!("{:.1}", ns as f64 / 1e3))
}

/// The text tables: per mode, p50 and p99 (µs), rows = rate, columns = ring.
fn tables(results: &[CellResult], rates: &[u64], rings: &[usize], modes: &[Mode]) -> String {
    let mut s = String::new();
    for &mode in modes {
        for (name, key) in [("p50", "p50_ns"), ("p99", "p99_ns")] {
            s.push_str(&format!(
                "stream one-way latency, {} µs, mode {} (rows: msg/s, columns: ring)\n",
                name,
                mode.as_str()
            ));
            s.push_str(&format!("{:>8}", "rate"));
            for &ring in rings {
                s.push_str(&format!(" {:>8}", ring_label(ring)));
            }
            s.push('\n');
            for &rate in rates {
                s.push_str(&format!("{rate:>8}"));
                for &ring in rings {
                    let v = results
                        .iter()
                        .find(|r| r.cell.mode == mode && r.cell.rate == rate && r.cell.ring == ring)
                        .and_then(|r| r.reader.get(key).and_then(Value::as_u64));
                    s.push_str(&format!(" {:>8}", us(v)));
                }
                s.push('\n');
            }
            s.push('\n');
        }
    }
    s
}

/// Runs one cell: writer here, reader in a child process.
pub fn run_cell(cell: Cell) -> Result<CellResult, String> {
    let cpus = affinity::pick_pair().map_err(|e| format!("cannot read CPU affinity: {e}"))?;
    if let Some((w, _)) = cpus {
        affinity::pin_current_thread(w).map_err(|e| format!("cannot pin to CPU {w}: {e}"))?;
    }
    let (root, handoff) = ScratchRoot::create("rate").map_err(|e| format!("cannot make a scratch root: {e}"))?;
    let domain = root.domain().map_err(|e| format!("cannot open the scratch domain: {e}"))?;
    let mut writer = Stream::create_or_open(&domain, "rate", &StreamConfig::default().capacity(cell.ring))
        .and_then(|s| s.writer())
        .map_err(|e| format!("cannot create a {} B stream: {e}", cell.ring))?;
    writer.set_wait_policy(policy(cell.mode));
    let (_, hi) = lengths(cell.size);
    if hi > writer.max_record_len() {
        return Err(format!("{hi} B records do not fit a {} B ring", cell.ring));
    }
    let mut args = vec![format!("--root={}", handoff.args[0]), format!("--mode={}", cell.mode.as_str())];
    if let Some((_, r)) = cpus {
        args.push(format!("--cpu={r}"));
    }
    let mut reader = child::spawn(READER_ROLE, &args).map_err(|e| format!("cannot start the reader process: {e}"))?;
    let result = write_cell(&cell, &mut writer, &mut reader).and_then(|(sent, waits)| {
        let line = reader.line().map_err(|e| format!("reader: {e}"))?;
        let v: Value = serde_json::from_str(&line).map_err(|e| format!("the reader said {line:?} ({e})"))?;
        match reader.wait_exit(cell.timeout) {
            Ok(Some(s)) if s.success() => {}
            Ok(Some(s)) => return Err(format!("the reader process failed ({s})")),
            _ => return Err("the reader process did not exit".into()),
        }
        Ok((sent, waits, v))
    });
    drop(writer);
    match result {
        Ok((sent, writer_waits, reader_v)) => {
            if reader_v.get("count").and_then(Value::as_u64) != Some(sent) {
                return Err(format!("sent {sent} records but the reader reports {reader_v}"));
            }
            Ok(CellResult { cell, sent, reader: reader_v, writer_waits, pinned: cpus.is_some() })
        }
        Err(e) => {
            reader.kill();
            Err(e)
        }
    }
}

fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; a null remainder is allowed with TIMER_ABSTIME.
    // EINTR: the loop below just sleeps again until the deadline.
    while unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) }
        == libc::EINTR
    {}
}

/// Sends the warm-up, the paced records and the end marker; returns (recorded records sent,
/// records that found the ring full).
fn write_cell(cell: &Cell, writer: &mut StreamWriter, reader: &mut Helper) -> Result<(u64, u64), String> {
    let line = reader.line().map_err(|e| format!("reader: {e}"))?;
    if line != "ready" {
        return Err(format!("the reader said {line:?} instead of ready"));
    }
    if !writer.wait_for_reader_timeout(cell.timeout) {
        return Err("the reader did not attach".into());
    }
    let (lo, hi) = lengths(cell.size);
    let span = (hi - lo + 1) as u64;
    let period_ns = 1_000_000_000 / cell.rate;
    let recorded = ((cell.seconds * cell.rate as f64).round() as u64).max(1);
    let total = WARMUP + recorded;
    let mut waits = 0u64;
    let start = shmbus::time::monotonic_ns() + period_ns.min(1_000_000);
    for i in 0..total {
        sleep_until(start + i * period_ns);
        let len = lo + (i % span) as usize;
        waits += u64::from(send(cell, writer, reader, i, len)?);
    }
    send(cell, writer, reader, END, 16)?;
    Ok((recorded, waits))
}

/// Writes one record stamped just before commit; whether the ring was full first.
fn send(cell: &Cell, writer: &mut StreamWriter, reader: &mut Helper, seq: u64, len: usize) -> Result<bool, String> {
    let fill = |g: &mut [u8]| {
        g[..8].copy_from_slice(&seq.to_le_bytes());
        for (j, b) in g[16..].iter_mut().enumerate() {
            *b = (seq as u8).wrapping_add(j as u8);
        }
        g[8..16].copy_from_slice(&shmbus::time::monotonic_ns().to_le_bytes());
    };
    if let Ok(mut g) = writer.try_loan(len) {
        fill(&mut g);
        g.send();
        return Ok(false);
    }
    let started = Instant::now();
    loop {
        match writer.loan_timeout(len, BLOCK_SLICE) {
            Ok(mut g) => {
                fill(&mut g);
                g.send();
                return Ok(true);
            }
            Err(StreamSendTimeoutError::Timeout) => {
                if let Ok(Some(s)) = reader.child.try_wait() {
                    return Err(format!("the reader process exited ({s})"));
                }
                if started.elapsed() > cell.timeout {
                    return Err(format!("the reader made no progress for {} s", cell.timeout.as_secs()));
                }
            }
            Err(e) => return Err(format!("record {seq}: {e}")),
        }
    }
}

/// Reader process arguments.
#[derive(Debug, clap::Args)]
pub struct ReaderArgs {
    #[arg(long)]
    root: String,
    #[arg(long, value_enum)]
    mode: Mode,
    #[arg(long)]
    cpu: Option<usize>,
}

/// What the reader takes out of one record: (seq, sent ns, length).
fn parse(rec: &[u8]) -> Option<(u64, u64)> {
    let seq = u64::from_le_bytes(rec.get(..8)?.try_into().ok()?);
    let sent = u64::from_le_bytes(rec.get(8..16)?.try_into().ok()?);
    Some((seq, sent))
}

/// Reader side: records now − sent for every record after the warm-up until the end marker,
/// then prints one JSON line (count and percentiles in ns).
pub fn reader_main(a: ReaderArgs) -> Result<(), String> {
    let ppid = std::os::unix::process::parent_id();
    let (_root, domain) = crate::transports::shmbus_kinds::child_domain(a.root, a.cpu)?;
    let mut r =
        Stream::open(&domain, "rate").and_then(|s| s.reader()).map_err(|e| format!("reader: cannot open: {e}"))?;
    r.set_wait_policy(policy(a.mode));
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).map_err(|e| e.to_string())?;
    println!("ready");
    let mut expect = 0u64;
    let mut spins = 0u32;
    loop {
        // Take the record and read the clock at once; parse after.
        let got = match a.mode {
            Mode::Spin => match r.try_recv_ref() {
                Ok(rec) => {
                    let now = shmbus::time::monotonic_ns();
                    let v = parse(&rec);
                    rec.consume();
                    Some((now, v))
                }
                Err(StreamTryRecvError::Empty) => {
                    spins = spins.wrapping_add(1);
                    if spins % (1 << 16) == 0 && !child::parent_alive(ppid) {
                        return Err("reader: the writer process is gone".into());
                    }
                    std::hint::spin_loop();
                    None
                }
                Err(e) => return Err(format!("reader: {e}")),
            },
            Mode::Block | Mode::Async => match r.recv_ref_timeout(BLOCK_SLICE) {
                Ok(rec) => {
                    let now = shmbus::time::monotonic_ns();
                    let v = parse(&rec);
                    rec.consume();
                    Some((now, v))
                }
                Err(StreamRecvTimeoutError::Timeout) => {
                    if !child::parent_alive(ppid) {
                        return Err("reader: the writer process is gone".into());
                    }
                    None
                }
                Err(e) => return Err(format!("reader: {e}")),
            },
        };
        let Some((now, v)) = got else { continue };
        let (seq, sent) = v.ok_or("reader: a record shorter than 16 bytes")?;
        if seq == END {
            break;
        }
        if seq != expect {
            return Err(format!("reader: record {seq} where {expect} was due"));
        }
        expect += 1;
        if seq >= WARMUP {
            hist.saturating_record(now.saturating_sub(sent).max(1));
        }
    }
    let q = |x: f64| if hist.is_empty() { 0 } else { hist.value_at_quantile(x) };
    println!(
        "{}",
        json!({
            "count": hist.len(),
            "p50_ns": q(0.5),
            "p90_ns": q(0.9),
            "p99_ns": q(0.99),
            "p999_ns": q(0.999),
            "max_ns": hist.max(),
            "min_ns": hist.min(),
            "mean_ns": hist.mean().round() as u64,
        })
    );
    Ok(())
}
