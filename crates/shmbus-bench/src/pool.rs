//! `pool`: bursts of jobs to workers. A dispatcher sends bursts of `jobs` jobs to `workers` worker
//! processes through a shmbus pool; each job carries its dispatch timestamp and the worker
//! records enqueue → recv latency. Next to it, in the same run, the baseline: `workers`
//! threads receiving from one crossbeam channel, fed the same bursts.
//!
//! What is timed, per job: from the `CLOCK_MONOTONIC` read just before `try_send` (or
//! `send` on the crossbeam channel) to the read just after the worker's `recv` returned.
//! The pool hands back jobs when every worker is busy (`AllBusy`, counted as `returned`);
//! the crossbeam channel queues them (the "5/3" bimodal case). Between bursts the
//! dispatcher waits until every worker is waiting again, then `--gap-us` more.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{json, Value};
use shmbus::pool::{Dispatcher, Pool, PoolConfig, PoolRecvTimeoutError, PoolTrySendError};
use shmbus::time::monotonic_ns;

use crate::child::{self, Helper};
use crate::transports::shmbus_kinds::{policy, ScratchRoot, BLOCK_SLICE};
use crate::transports::Mode;

/// The hidden subcommand of a worker process.
pub const WORKER_ROLE: &str = "__pool-worker";

/// Job payload: dispatch timestamp (u64 LE) and whether it is recorded (1) or warm-up (0).
const JOB_LEN: usize = 9;

/// One run, as asked for.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Jobs per burst.
    pub jobs: usize,
    /// Worker processes (and baseline threads).
    pub workers: usize,
    /// Recorded bursts.
    pub rounds: u64,
    /// Unrecorded bursts first.
    pub warmup: u64,
    /// How workers wait for a job.
    pub mode: Mode,
    /// Pause between bursts, after every worker is waiting again.
    pub gap: Duration,
    /// Busy work per job in the worker, before it asks for the next.
    pub work: Duration,
    /// Give up when workers do not come back for this long.
    pub timeout: Duration,
}

/// Latency statistics of one side, in nanoseconds.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Jobs received (and recorded).
    pub count: u64,
    /// Jobs handed back to the dispatcher (all workers busy).
    pub returned: u64,
    /// 1st, 10th, 50th, 90th, 99th percentile.
    pub p: [u64; 5],
    /// Mean.
    pub mean: f64,
    /// Standard deviation.
    pub stddev: f64,
    /// Largest.
    pub max: u64,
}

impl Stats {
    fn of(lat: &[u64], returned: u64) -> Result<Stats, String> {
        let mut h = Histogram::<u64>::new(3).expect("3 significant figures is valid");
        for &v in lat {
            h.record(v.max(1)).map_err(|e| format!("histogram: {e:?}"))?;
        }
        if h.is_empty() {
            return Err("no job was received".into());
        }
        let p = [0.01, 0.10, 0.50, 0.90, 0.99].map(|q| h.value_at_quantile(q));
        Ok(Stats { count: h.len(), returned, p, mean: h.mean(), stddev: h.stdev(), max: h.max() })
    }

    fn json(&self) -> Value {
        json!({
            "count": self.count,
            "returned": self.returned,
            "p1_ns": self.p[0],
            "p10_ns": self.p[1],
            "p50_ns": self.p[2],
            "p90_ns": self.p[3],
            "p99_ns": self.p[4],
            "max_ns": self.max,
            "mean_ns": self.mean.round() as u64,
            "stddev_ns": self.stddev.round() as u64,
        })
    }
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The configuration.
    pub config: Config,
    /// The shmbus pool.
    pub pool: Stats,
    /// The crossbeam-channel thread pool.
    pub crossbeam: Stats,
}

fn job(ts: u64, recorded: bool) -> [u8; JOB_LEN] {
    let mut j = [0u8; JOB_LEN];
    j[..8].copy_from_slice(&ts.to_le_bytes());
    j[8] = recorded as u8;
    j
}

fn burn(d: Duration) {
    if d.is_zero() {
        return;
    }
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Runs both sides. Errors are one line.
pub fn run(config: Config) -> Result<Outcome, String> {
    let pool = run_pool(&config)?;
    let crossbeam = run_crossbeam(&config)?;
    Ok(Outcome { config, pool, crossbeam })
}

fn run_pool(config: &Config) -> Result<Stats, String> {
    let (root, handoff) = ScratchRoot::create("pool").map_err(|e| format!("cannot make a scratch root: {e}"))?;
    let domain = root.domain().map_err(|e| format!("cannot open the scratch domain: {e}"))?;
    let pool_config = PoolConfig::default().max_workers(config.workers).max_job_len(JOB_LEN);
    let mut dispatcher = Pool::create_or_open(&domain, "bench", &pool_config)
        .and_then(|p| p.dispatcher())
        .map_err(|e| format!("cannot create the pool: {e}"))?;
    let args = [
        format!("--root={}", handoff.args[0]),
        format!("--mode={}", config.mode.as_str()),
        format!("--work-ns={}", config.work.as_nanos()),
    ];
    let mut helpers = Vec::with_capacity(config.workers);
    for _ in 0..config.workers {
        match child::spawn(WORKER_ROLE, &args) {
            Ok(h) => helpers.push(h),
            Err(e) => {
                child::kill_all(&mut helpers);
                return Err(format!("cannot start a worker process: {e}"));
            }
        }
    }
    let result = dispatch_rounds(config, &mut dispatcher, &mut helpers);
    // A clean drop tells every waiting worker at once (Orphaned): they report and exit.
    drop(dispatcher);
    let result = result.and_then(|returned| {
        let mut lat = Vec::new();
        for h in &mut helpers {
            let line = h.line().map_err(|e| format!("worker: {e}"))?;
            let rest = line.strip_prefix("lat").ok_or_else(|| format!("a worker reported {line:?}"))?;
            for v in rest.split_whitespace() {
                lat.push(v.parse::<u64>().map_err(|e| format!("a worker reported {v:?}: {e}"))?);
            }
            match h.wait_exit(config.timeout) {
                Ok(Some(s)) if s.success() => {}
                Ok(Some(s)) => return Err(format!("a worker process failed ({s})")),
                _ => return Err("a worker process did not exit".into()),
            }
        }
        Ok((lat, returned))
    });
    match result {
        Ok((lat, returned)) => Stats::of(&lat, returned),
        Err(e) => {
            child::kill_all(&mut helpers);
            Err(e)
        }
    }
}

/// Waits until all workers wait for work. Sleeps first: right after a burst the CPU belongs
/// to the woken workers (`status()` reads `/proc`, which a worker woken onto this CPU would
/// otherwise wait behind).
fn all_idle(config: &Config, d: &Dispatcher, helpers: &mut [Helper]) -> Result<(), String> {
    let start = Instant::now();
    loop {
        std::thread::sleep(Duration::from_micros(50));
        let s = d.status();
        if s.workers == config.workers && s.idle == config.workers {
            return Ok(());
        }
        for h in helpers.iter_mut() {
            if let Ok(Some(st)) = h.child.try_wait() {
                return Err(format!("a worker process exited ({st})"));
            }
        }
        if start.elapsed() > config.timeout {
            return Err(format!(
                "workers not all waiting after {} s ({} of {} joined, {} idle)",
                config.timeout.as_secs(),
                s.workers,
                config.workers,
                s.idle
            ));
        }
    }
}

/// Returns the number of jobs handed back in recorded rounds.
fn dispatch_rounds(config: &Config, d: &mut Dispatcher, helpers: &mut [Helper]) -> Result<u64, String> {
    for h in helpers.iter_mut() {
        let l = h.line().map_err(|e| format!("worker: {e}"))?;
        if l != "ready" {
            return Err(format!("a worker said {l:?} instead of ready"));
        }
    }
    let mut returned = 0;
    for round in 0..config.warmup + config.rounds {
        all_idle(config, d, helpers)?;
        std::thread::sleep(config.gap);
        let recorded = round >= config.warmup;
        for _ in 0..config.jobs {
            let j = job(monotonic_ns(), recorded);
            match d.try_send(&j) {
                Ok(_) => {}
                Err(PoolTrySendError::AllBusy) => returned += recorded as u64,
                Err(e) => return Err(format!("dispatch: {e}")),
            }
        }
    }
    all_idle(config, d, helpers)?;
    Ok(returned)
}

/// Worker process arguments.
#[derive(Debug)]
pub struct WorkerConfig {
    /// Scratch root holding the pool.
    pub root: String,
    /// How to wait.
    pub mode: Mode,
    /// Busy work per job.
    pub work: Duration,
}

/// Worker side: receives until the dispatcher leaves, then prints `lat v v v …`.
pub fn worker(config: WorkerConfig) -> Result<(), String> {
    let ppid = std::os::unix::process::parent_id();
    let (_root, domain) = crate::transports::shmbus_kinds::child_domain(config.root, None)?;
    let mut w =
        Pool::open(&domain, "bench").and_then(|p| p.worker()).map_err(|e| format!("worker: cannot join: {e}"))?;
    w.set_wait_policy(policy(config.mode));
    let mut lat: Vec<u64> = Vec::with_capacity(1 << 16);
    println!("ready");
    loop {
        match w.recv_ref_timeout(BLOCK_SLICE) {
            Ok(job) => {
                let t = monotonic_ns();
                let data = job.data();
                if data.len() != JOB_LEN {
                    return Err(format!("worker: job of {} bytes", data.len()));
                }
                let ts = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
                if data[8] == 1 {
                    lat.push(t.saturating_sub(ts));
                }
                burn(config.work);
            }
            Err(PoolRecvTimeoutError::Timeout) => {
                if !child::parent_alive(ppid) {
                    return Err("worker: the dispatcher process is gone".into());
                }
            }
            Err(PoolRecvTimeoutError::Orphaned) => break,
            Err(e) => return Err(format!("worker: {e}")),
        }
    }
    let mut line = String::with_capacity(lat.len() * 8 + 4);
    line.push_str("lat");
    for v in lat {
        line.push(' ');
        line.push_str(&v.to_string());
    }
    println!("{line}");
    Ok(())
}

fn run_crossbeam(config: &Config) -> Result<Stats, String> {
    let (tx, rx) = crossbeam_channel::unbounded::<[u8; JOB_LEN]>();
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<()>();
    let mode = config.mode;
    let work = config.work;
    let threads: Vec<_> = (0..config.workers)
        .map(|_| {
            let rx = rx.clone();
            let done = done_tx.clone();
            std::thread::spawn(move || {
                let mut lat = Vec::with_capacity(1 << 16);
                loop {
                    let j = match mode {
                        Mode::Block | Mode::Async => match rx.recv() {
                            Ok(j) => j,
                            Err(_) => break,
                        },
                        Mode::Spin => match rx.try_recv() {
                            Ok(j) => j,
                            Err(crossbeam_channel::TryRecvError::Empty) => {
                                std::hint::spin_loop();
                                continue;
                            }
                            Err(crossbeam_channel::TryRecvError::Disconnected) => break,
                        },
                    };
                    let t = monotonic_ns();
                    let ts = u64::from_le_bytes(j[..8].try_into().expect("8 bytes"));
                    if j[8] == 1 {
                        lat.push(t.saturating_sub(ts));
                    }
                    burn(work);
                    if done.send(()).is_err() {
                        break;
                    }
                }
                lat
            })
        })
        .collect();
    drop(rx);
    drop(done_tx);
    let mut failed = None;
    'rounds: for round in 0..config.warmup + config.rounds {
        std::thread::sleep(config.gap);
        let recorded = round >= config.warmup;
        for _ in 0..config.jobs {
            if tx.send(job(monotonic_ns(), recorded)).is_err() {
                failed = Some("a baseline thread is gone".to_string());
                break 'rounds;
            }
        }
        for _ in 0..config.jobs {
            if done_rx.recv_timeout(config.timeout).is_err() {
                failed = Some("the baseline threads stopped answering".to_string());
                break 'rounds;
            }
        }
    }
    drop(tx);
    let mut lat = Vec::new();
    for t in threads {
        lat.extend(t.join().map_err(|_| "a baseline thread panicked".to_string())?);
    }
    if let Some(e) = failed {
        return Err(e);
    }
    Stats::of(&lat, 0)
}

/// The run as one JSON object.
pub fn json(o: &Outcome) -> String {
    let c = &o.config;
    json!({
        "jobs": c.jobs,
        "workers": c.workers,
        "rounds": c.rounds,
        "warmup": c.warmup,
        "mode": c.mode.as_str(),
        "gap_us": c.gap.as_micros() as u64,
        "work_us": c.work.as_micros() as u64,
        "pool": o.pool.json(),
        "crossbeam": o.crossbeam.json(),
    })
    .to_string()
}

/// The run as a small table like the reference's (nanoseconds).
pub fn table(o: &Outcome) -> String {
    let c = &o.config;
    let mut s = format!(
        "{} jobs to {} workers ({}, {} rounds) | 1% | 10% | 50% | 90% | 99% | mean | stddev | received | returned\n",
        c.jobs,
        c.workers,
        c.mode.as_str(),
        c.rounds
    );
    for (name, st) in [("shmbus pool", &o.pool), ("crossbeam threads", &o.crossbeam)] {
        s.push_str(&format!(
            "{name:<18} | {} | {} | {} | {} | {} | {:.0} | {:.0} | {} | {}\n",
            st.p[0], st.p[1], st.p[2], st.p[3], st.p[4], st.mean, st.stddev, st.count, st.returned
        ));
    }
    s.pop();
    s
}
