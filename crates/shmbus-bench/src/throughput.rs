//! `throughput --transport stream`: bandwidth of a shmbus stream between two pinned
//! processes, next to a one-core memcpy measured in the same run.
//!
//! What is timed: the writer (this process) waits until the reader process is attached and
//! a warm-up has gone through the ring and been drained, reads the clock, writes `records`
//! records of `size` bytes, waits until the reader has consumed the last one (the ring is
//! empty again), and reads the clock. MB/s = records × size / elapsed / 10^6.

use std::time::{Duration, Instant};

use serde_json::json;
use shmbus::stream::{Stream, StreamConfig, StreamRecvTimeoutError, StreamSendTimeoutError, StreamWriter};

use crate::affinity;
use crate::child::{self, Helper};
use crate::memcpy::memcpy_bandwidth;
use crate::transports::shmbus_kinds::{policy, ScratchRoot, BLOCK_SLICE};
use crate::transports::{Mode, Payload};

/// The hidden subcommand of the reader process.
pub const READER_ROLE: &str = "__stream-reader";

/// One throughput run, as asked for.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Record payload size.
    pub size: usize,
    /// Payload bytes to move (rounded down to whole records, at least one).
    pub bytes: u64,
    /// Ring capacity (power of two), or 0 for the default.
    pub capacity: usize,
    /// Spin or block while the ring is full / empty.
    pub mode: Mode,
    /// copy: the writer copies a whole record in and the reader copies it out; touch: only
    /// the first and last byte are written and read.
    pub payload: Payload,
    /// How long the memcpy yardstick runs.
    pub memcpy_time: Duration,
    /// Give up when the reader makes no progress for this long.
    pub timeout: Duration,
}

/// What a run measured.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    /// The configuration (with the capacity really used).
    pub config: Config,
    /// Records moved in the timed part.
    pub records: u64,
    /// Timed seconds.
    pub secs: f64,
    /// Stream bandwidth, MB/s (10^6 bytes/s) of payload.
    pub mb_per_s: f64,
    /// One-core memcpy of `size`-byte buffers, MB/s.
    pub memcpy_mb_per_s: f64,
    /// Whether writer and reader were pinned to two different CPUs.
    pub pinned: bool,
    /// The cross-core copy floor right after the run: the same records, ring size and CPUs
    /// through a plain two-thread ring with nothing but the two copies (MB/s).
    pub copy_floor_mb_per_s: f64,
    /// The spin floor's p50 just before the run: where the two vCPUs sit (neighbouring or
    /// distant cores) decides the cross-core bandwidth as much as the stream does.
    pub floor_p50_ns: u64,
}

/// Default ring: at least 8 MiB and at least 8 records, a power of two.
///
/// Larger than the two cores' private caches on purpose: with a ring that fits them, the
/// writer keeps overwriting lines the reader has just read (still in the reader's cache) and
/// the pair runs at cache-to-cache transfer speed. On the reference machine (2 KVM vCPUs,
/// 1 MiB L2 each, shared L3) 64 KiB records ran at ~0.25× memcpy with a 1 MiB ring and
/// ~0.6× with 8 MiB. `--capacity` overrides it.
pub fn default_capacity(size: usize) -> usize {
    let record = (8 + size).next_multiple_of(8);
    (8 * record).next_power_of_two().max(8 << 20)
}

/// The tag written in the first and last byte of record `i`.
fn tag(i: u64) -> u8 {
    (i as u8) ^ 0xa5
}

/// Writer side: runs the measurement. Errors are one line.
pub fn run(mut config: Config) -> Result<Outcome, String> {
    if config.capacity == 0 {
        config.capacity = default_capacity(config.size);
    }
    let size = config.size;
    let cpu_set = crate::cpus::CpuSet::current()?;
    let floor_p50_ns = crate::cpus::floor_p50_ns(&cpu_set)?;
    // The floor run pins this thread: give it back every CPU before choosing the pair.
    cpu_set.restore()?;
    let cpus = affinity::pick_pair().map_err(|e| format!("cannot read CPU affinity: {e}"))?;
    if let Some((w, _)) = cpus {
        affinity::pin_current_thread(w).map_err(|e| format!("cannot pin to CPU {w}: {e}"))?;
    } else {
        eprintln!("shmbus-bench: note: only one CPU available; writer and reader are not pinned");
    }
    let (root, handoff) = ScratchRoot::create("throughput").map_err(|e| format!("cannot make a scratch root: {e}"))?;
    let domain = root.domain().map_err(|e| format!("cannot open the scratch domain: {e}"))?;
    let mut writer = Stream::create_or_open(&domain, "throughput", &StreamConfig::default().capacity(config.capacity))
        .and_then(|s| s.writer())
        .map_err(|e| format!("cannot create the stream: {e}"))?;
    writer.set_wait_policy(policy(config.mode));
    if size > writer.max_record_len() {
        return Err(format!(
            "--size {size} does not fit a ring of {} bytes; give a larger --capacity",
            config.capacity
        ));
    }
    // The yardstick, on the writer's CPU, before the reader exists.
    let memcpy = memcpy_bandwidth(size, config.memcpy_time);
    let records = (config.bytes / size as u64).max(1);
    let warmup = ((4 * config.capacity / size) as u64).clamp(16, 1 << 20).min(records);
    let mut args = vec![
        format!("--root={}", handoff.args[0]),
        format!("--size={size}"),
        format!("--records={}", warmup + records),
        format!("--mode={}", config.mode.as_str()),
        format!("--payload={}", config.payload.as_str()),
    ];
    if let Some((_, r)) = cpus {
        args.push(format!("--cpu={r}"));
    }
    let mut reader = child::spawn(READER_ROLE, &args).map_err(|e| format!("cannot start the reader process: {e}"))?;
    let result = write_all(&config, &mut writer, &mut reader, warmup, records);
    drop(writer);
    let result = result.and_then(|secs| {
        let last = reader.line().map_err(|e| format!("reader: {e}"))?;
        match reader.wait_exit(config.timeout) {
            Ok(Some(s)) if s.success() => {}
            Ok(Some(s)) => return Err(format!("the reader process failed ({s})")),
            _ => return Err("the reader process did not exit".into()),
        }
        if last != format!("done {}", warmup + records) {
            return Err(format!("the reader reported {last:?}"));
        }
        Ok(secs)
    });
    let secs = match result {
        Ok(s) => s,
        Err(e) => {
            reader.kill();
            return Err(e);
        }
    };
    let mb_per_s = (records as f64 * size as f64) / secs / 1e6;
    let copy_floor_mb_per_s =
        crate::memcpy::cross_core_copy_mb_per_s(size, config.capacity, (records * size as u64).min(1 << 30), cpus);
    Ok(Outcome {
        config,
        records,
        secs,
        mb_per_s,
        memcpy_mb_per_s: memcpy.mb_per_s,
        pinned: cpus.is_some(),
        copy_floor_mb_per_s,
        floor_p50_ns,
    })
}

/// Writes the warm-up and the timed records; returns the timed seconds.
fn write_all(
    config: &Config,
    writer: &mut StreamWriter,
    reader: &mut Helper,
    warmup: u64,
    records: u64,
) -> Result<f64, String> {
    let line = reader.line().map_err(|e| format!("reader: {e}"))?;
    if line != "ready" {
        return Err(format!("the reader said {line:?} instead of ready"));
    }
    if !writer.wait_for_reader_timeout(config.timeout) {
        return Err("the reader did not attach".into());
    }
    let mut src: Vec<u8> = (0..config.size).map(|i| (i * 7) as u8).collect();
    let mut write = |from: u64, to: u64, reader: &mut Helper| -> Result<(), String> {
        for i in from..to {
            write_one(config, writer, reader, &mut src, i)?;
        }
        drain(config, writer, reader)
    };
    write(0, warmup, reader)?;
    let t0 = Instant::now();
    write(warmup, warmup + records, reader)?;
    Ok(t0.elapsed().as_secs_f64())
}

#[inline]
fn write_one(
    config: &Config,
    writer: &mut StreamWriter,
    reader: &mut Helper,
    src: &mut [u8],
    i: u64,
) -> Result<(), String> {
    let n = config.size;
    let t = tag(i);
    let fill = |g: &mut [u8], src: &mut [u8]| match config.payload {
        Payload::Copy => {
            src[0] = t;
            src[n - 1] = t;
            g.copy_from_slice(src);
        }
        Payload::Touch => {
            g[0] = t;
            g[n - 1] = t;
        }
    };
    // Fast path: no clock read, no deadline. Only a full ring takes the waiting call.
    if let Ok(mut g) = writer.try_loan(n) {
        fill(&mut g, src);
        g.send();
        return Ok(());
    }
    let mut waited = Duration::ZERO;
    loop {
        match writer.loan_timeout(n, BLOCK_SLICE) {
            Ok(mut g) => {
                fill(&mut g, src);
                g.send();
                return Ok(());
            }
            Err(StreamSendTimeoutError::Timeout) => {
                waited += BLOCK_SLICE;
                check_reader(reader, waited, config.timeout)?;
            }
            Err(e) => return Err(format!("write {i}: {e}")),
        }
    }
}

/// Waits until the reader has consumed everything written.
fn drain(config: &Config, writer: &StreamWriter, reader: &mut Helper) -> Result<(), String> {
    let start = Instant::now();
    let mut spins = 0u32;
    while writer.free() != writer.capacity() {
        spins = spins.wrapping_add(1);
        if config.mode == Mode::Block {
            std::thread::sleep(Duration::from_micros(20));
        } else {
            std::hint::spin_loop();
        }
        if spins % 4096 == 0 {
            check_reader(reader, start.elapsed(), config.timeout)?;
        }
    }
    Ok(())
}

fn check_reader(reader: &mut Helper, waited: Duration, limit: Duration) -> Result<(), String> {
    if let Ok(Some(s)) = reader.child.try_wait() {
        return Err(format!("the reader process exited ({s})"));
    }
    if waited > limit {
        return Err(format!("the reader made no progress for {} s", limit.as_secs()));
    }
    Ok(())
}

/// Reader process arguments.
#[derive(Debug)]
pub struct ReaderConfig {
    /// Scratch root holding the stream.
    pub root: String,
    /// Record size.
    pub size: usize,
    /// Records to read before exiting.
    pub records: u64,
    /// Spin or block.
    pub mode: Mode,
    /// Copy out or look at two bytes.
    pub payload: Payload,
    /// CPU to pin to.
    pub cpu: Option<usize>,
}

/// Reader side: reads and checks `records` records, then prints `done N`.
pub fn reader(config: ReaderConfig) -> Result<(), String> {
    let ppid = std::os::unix::process::parent_id();
    let (_root, domain) = crate::transports::shmbus_kinds::child_domain(config.root, config.cpu)?;
    let mut r = Stream::open(&domain, "throughput")
        .and_then(|s| s.reader())
        .map_err(|e| format!("reader: cannot open: {e}"))?;
    r.set_wait_policy(policy(config.mode));
    println!("ready");
    let n = config.size;
    let mut dst = vec![0u8; n];
    for i in 0..config.records {
        let look = |rec: &[u8], dst: &mut [u8]| match config.payload {
            Payload::Copy if rec.len() == n => {
                dst.copy_from_slice(rec);
                (n, dst[0], dst[n - 1])
            }
            _ => (rec.len(), rec.first().copied().unwrap_or(0), rec.last().copied().unwrap_or(0)),
        };
        // Fast path: no clock read, no deadline. Only an empty ring takes the waiting call.
        let fast = match r.try_recv_ref() {
            Ok(rec) => {
                let v = look(&rec, &mut dst);
                rec.consume();
                Some(v)
            }
            Err(_) => None,
        };
        let (len, first, last) = match fast {
            Some(v) => v,
            None => loop {
                match r.recv_ref_timeout(BLOCK_SLICE) {
                    Ok(rec) => {
                        let v = look(&rec, &mut dst);
                        rec.consume();
                        break v;
                    }
                    Err(StreamRecvTimeoutError::Timeout) => {
                        if !child::parent_alive(ppid) {
                            return Err("reader: the writer process is gone".into());
                        }
                    }
                    Err(e) => return Err(format!("reader: record {i}: {e}")),
                }
            },
        };
        if len != n || first != tag(i) || last != tag(i) {
            return Err(format!("reader: record {i} is wrong: {len} bytes, tags {first:#x} {last:#x}"));
        }
    }
    std::hint::black_box(&dst);
    println!("done {}", config.records);
    Ok(())
}

/// The run as one JSON object.
pub fn json(o: &Outcome) -> String {
    json!({
        "transport": "stream",
        "mode": o.config.mode.as_str(),
        "payload": o.config.payload.as_str(),
        "size": o.config.size,
        "capacity": o.config.capacity,
        "bytes": o.records * o.config.size as u64,
        "records": o.records,
        "pinned": o.pinned,
        "mb_per_s": o.mb_per_s.round() as u64,
        "memcpy_mb_per_s": o.memcpy_mb_per_s.round() as u64,
        "ratio": (o.mb_per_s / o.memcpy_mb_per_s * 1000.0).round() / 1000.0,
        "copy_floor_mb_per_s": o.copy_floor_mb_per_s.round() as u64,
        "x_copy_floor": (o.mb_per_s / o.copy_floor_mb_per_s * 1000.0).round() / 1000.0,
        "floor_p50_ns": o.floor_p50_ns,
    })
    .to_string()
}

/// The run as one readable line.
pub fn line(o: &Outcome) -> String {
    format!(
        "stream {} {} {} B records, {} MiB in {:.3} s: {:.0} MB/s; memcpy {:.0} MB/s (one core); ratio {:.3}; cross-core copy floor {:.0} MB/s ({:.2} x); floor {} ns{}",
        o.config.mode.as_str(),
        o.config.payload.as_str(),
        o.config.size,
        (o.records * o.config.size as u64) >> 20,
        o.secs,
        o.mb_per_s,
        o.memcpy_mb_per_s,
        o.mb_per_s / o.memcpy_mb_per_s,
        o.copy_floor_mb_per_s,
        o.mb_per_s / o.copy_floor_mb_per_s,
        o.floor_p50_ns,
        if o.pinned { "" } else { " (unpinned)" },
    )
}
