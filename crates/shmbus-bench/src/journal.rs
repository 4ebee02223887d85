//! `journal`: append→tail latency and throughput of shmbus journals (the reference journal sizes).
//!
//! For each size, two measurements in a temporary directory that is removed afterwards, then
//! two memcpy yardsticks:
//!
//! * **Latency**: the ping-pong driver over two journals (the `journal` transport): each
//!   process appends to one journal and live-tails the other, so a round trip is two
//!   append→tail hops and the recorded one-way latency is RTT/2, directly comparable with
//!   `pingpong --transport floor`. Both processes pinned to different CPUs, warm-up as in
//!   `pingpong`.
//! * **Throughput**: 1 or 2 appender processes (`--appenders`) each append `messages`
//!   entries as fast as they can while the measuring process live-tails all of them. After
//!   a warm-up (each appender appends `messages/10`, at most 1,000, entries which the tailer
//!   reads untimed) the clock starts when the tailer tells the appenders to go and stops
//!   when it has read the last entry. Each entry carries its appender's id and sequence
//!   number, checked in order by the tailer.
//! * **Yardsticks** (one core, this process, after the throughput run): `memcpy_cached` copies
//!   one entry-sized buffer into another over and over (inside the caches); `memcpy_stream`
//!   copies the run's total bytes in entry-sized pieces sequentially into one pre-faulted
//!   destination of that size (memory-bound, as a journal writing fresh pages is). The
//!   throughput target (≥ 0.5 × memcpy) is judged against the streaming one.
//!   `memcpy_fresh` is the streaming copy into never-touched memory (one page fault per
//!   4 KiB page, as for new file pages): context for what the faults alone cost;
//!   `memcpy_fresh_huge` the same into memory that asked for 2 MiB pages (the context for a
//!   journal on a huge-page tmpfs: how fast this machine hands out zeroed huge pages).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use shmbus::journal::{Durability, Journal, JournalRecvTimeoutError, JournalTryRecvError};

use crate::affinity;
use crate::cpus::CpuSet;
use crate::driver;
use crate::transports::journal::{open_existing, options, read_error, JournalTransport, TempDir};
use crate::transports::shmbus_kinds::policy;
use crate::transports::{Mode, Params, Payload};

/// The hidden subcommand an appender process of the throughput run is started with.
pub const APPENDER_ROLE: &str = "__journal-appender";

/// The reference journal's message sizes.
pub const REFERENCE_SIZES: &[usize] = &[40, 160, 220, 512, 1024, 16384, 32768];

/// Largest entry (the library's default `max_entry`).
const MAX_SIZE: usize = 16 << 20;

/// Every entry starts with the appender id and sequence number (u32 each).
const MIN_SIZE: usize = 8;

/// What `commit` guarantees (`--mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Sync {
    /// In the page cache (`Durability::None`).
    #[value(name = "none")]
    Off,
    /// `msync(MS_SYNC)` per commit (`Durability::Flush`).
    Flush,
    /// A background `fdatasync` every `--period-ms` (`Durability::Periodic`).
    Periodic,
}

impl Sync {
    fn as_str(self) -> &'static str {
        match self {
            Sync::Off => "none",
            Sync::Flush => "flush",
            Sync::Periodic => "periodic",
        }
    }
}

/// When the throughput run's tailer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TailerTiming {
    /// Along with the appenders.
    Live,
    /// Once they are done.
    After,
}

impl TailerTiming {
    fn as_str(self) -> &'static str {
        match self {
            TailerTiming::Live => "live",
            TailerTiming::After => "after",
        }
    }
}

/// `shmbus-bench journal`.
#[derive(Debug, clap::Args)]
pub struct JournalArgs {
    /// Entry size in bytes (at least 8). Default: 40, 160, 220, 512, 1024,
    /// 16384 and 32768 bytes, one result each.
    #[arg(long, value_name = "BYTES")]
    size: Option<usize>,
    /// Durability: none (page cache), flush (msync per commit) or periodic (fdatasync
    /// every --period-ms in the background).
    #[arg(long, value_enum, default_value_t = Sync::Off)]
    mode: Sync,
    /// Period of --mode periodic.
    #[arg(long, value_name = "MS", default_value_t = 100)]
    period_ms: u64,
    /// Recorded latency round trips per size. Default 20,000 (flush: 2,000).
    #[arg(long, value_name = "N")]
    iters: Option<u64>,
    /// Unrecorded latency round trips first. Default: iters/10, at least 1000, at most
    /// 10000, and no more than 256 MiB of entries take (but at least 100).
    #[arg(long, value_name = "N")]
    warmup: Option<u64>,
    /// Entries each appender appends in the throughput run. Default: 256 MiB worth,
    /// between 10,000 and 1,000,000 (flush: 2,000).
    #[arg(long, value_name = "N")]
    messages: Option<u64>,
    /// Appender processes in the throughput run: 1 or 2.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    appenders: u8,
    /// How tailers wait: spin (busy-poll) or block (futex sleep at once).
    #[arg(long, value_enum, default_value_t = Mode::Spin)]
    wait: Mode,
    /// The throughput run's tailer: `live` reads along while the appenders append (the
    /// end-to-end rate); `after` reads everything once they are done (the append rate with no
    /// reader on the appenders' heels; every entry is still read and checked).
    #[arg(long, value_enum, default_value_t = TailerTiming::Live)]
    tailer: TailerTiming,
    /// Directory to make the temporary journals in. Default: the system's temporary
    /// directory (`TMPDIR`, else /tmp).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Fail when a peer does not make progress for this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    timeout_secs: u64,
    /// One JSON object per size instead of a line.
    #[arg(long)]
    json: bool,
}

/// The hidden appender process of the throughput run.
#[derive(Debug, clap::Args)]
pub struct AppenderArgs {
    #[arg(long)]
    dir: PathBuf,
    #[arg(long)]
    size: usize,
    #[arg(long)]
    id: u32,
    #[arg(long)]
    warmup: u32,
    #[arg(long)]
    count: u32,
    #[arg(long)]
    cpu: Option<usize>,
}

/// Throughput of one run.
#[derive(Debug, Clone, Copy)]
pub struct Throughput {
    /// Appender processes.
    pub appenders: u32,
    /// Entries per appender (timed).
    pub messages: u64,
    /// Seconds the rate is taken over: from "go" to the last entry read (live tailer), or
    /// the slowest appender's time from "go" to its last append (tailer after).
    pub secs: f64,
    /// The slowest appender's own time from "go" to its last append.
    pub append_secs: f64,
    /// Whether the tailer and each appender had a CPU of their own.
    pub pinned: bool,
}

impl Throughput {
    /// Entries appended per second by all appenders, as their own clocks saw it.
    pub fn append_msgs_per_s(&self) -> f64 {
        (self.messages * u64::from(self.appenders)) as f64 / self.append_secs
    }

    /// Entries per second through the journal (all appenders).
    pub fn msgs_per_s(&self) -> f64 {
        (self.messages * u64::from(self.appenders)) as f64 / self.secs
    }

    /// Payload MiB per second.
    pub fn mib_per_s(&self, size: usize) -> f64 {
        self.msgs_per_s() * size as f64 / (1u64 << 20) as f64
    }
}

fn durability(a: &JournalArgs) -> Durability {
    match a.mode {
        Sync::Off => Durability::None,
        Sync::Flush => Durability::Flush,
        Sync::Periodic => Durability::Periodic(Duration::from_millis(a.period_ms.max(1))),
    }
}

/// The filesystem under `dir`: "tmpfs" (then `flush` costs nothing), "tmpfs+huge" (tmpfs
/// with 2 MiB pages), or the disk filesystem's type ("ext4", …).
fn fs_kind(dir: &Path) -> String {
    shmbus::journal::Storage::of(dir).map_or_else(|_| "unknown".into(), |s| s.label())
}

struct Appenders {
    children: Vec<(Child, ChildStdin, BufReader<ChildStdout>)>,
}

impl Appenders {
    /// `Err` when an appender exited unsuccessfully.
    fn check(&mut self) -> Result<(), String> {
        for (c, _, _) in &mut self.children {
            if let Some(s) = c.try_wait().map_err(|e| format!("cannot wait for an appender: {e}"))? {
                if !s.success() {
                    return Err(format!("an appender process failed ({s})"));
                }
            }
        }
        Ok(())
    }
}

impl Drop for Appenders {
    fn drop(&mut self) {
        for (c, _, _) in &mut self.children {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

fn spawn_appender(a: &AppenderArgs) -> std::io::Result<Child> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg(APPENDER_ROLE)
        .arg("--dir")
        .arg(&a.dir)
        .args(["--size", &a.size.to_string()])
        .args(["--id", &a.id.to_string()])
        .args(["--warmup", &a.warmup.to_string()])
        .args(["--count", &a.count.to_string()]);
    if let Some(cpu) = a.cpu {
        cmd.args(["--cpu", &cpu.to_string()]);
    }
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    // SAFETY: the closure runs in the forked child before exec and only calls prctl, which
    // is async-signal-safe; it allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            // Die with the measuring process.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    cmd.spawn()
}

/// Reads `n` entries, checking each appender's sequence numbers arrive in order.
fn tail(
    t: &mut shmbus::journal::Tailer,
    mode: Mode,
    n: u64,
    size: usize,
    next: &mut [u32],
    apps: &mut Appenders,
    timeout: Duration,
) -> Result<(), String> {
    let mut got = 0u64;
    let mut spins = 0u32;
    let mut idle_since: Option<Instant> = None;
    while got < n {
        let entry = match mode {
            Mode::Spin => match t.try_recv_ref() {
                Ok(e) => Some(e),
                Err(JournalTryRecvError::Empty) => None,
                Err(e) => return Err(format!("tailer: {}", read_error(e))),
            },
            Mode::Block | Mode::Async => match t.recv_ref_timeout(Duration::from_millis(250)) {
                Ok(e) => Some(e),
                Err(JournalRecvTimeoutError::Timeout) => None,
                Err(e) => return Err(format!("tailer: {}", read_error(e))),
            },
        };
        match entry {
            Some(e) => {
                if e.data().len() != size {
                    return Err(format!("entry {} has {} bytes, expected {size}", e.index(), e.data().len()));
                }
                let id = u32::from_le_bytes(e.data()[0..4].try_into().expect("4 bytes")) as usize;
                let seq = u32::from_le_bytes(e.data()[4..8].try_into().expect("4 bytes"));
                match next.get_mut(id) {
                    Some(x) if *x == seq => *x += 1,
                    Some(x) => return Err(format!("appender {id}: entry {seq} arrived, expected {x}")),
                    None => return Err(format!("entry {} names appender {id}, which does not exist", e.index())),
                }
                got += 1;
                idle_since = None;
            }
            None => {
                spins = spins.wrapping_add(1);
                if mode != Mode::Spin || spins % (1 << 16) == 0 {
                    apps.check()?;
                    let since = *idle_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > timeout {
                        return Err(format!("no entry for {} s ({got} of {n} read)", timeout.as_secs()));
                    }
                }
                if mode == Mode::Spin {
                    std::hint::spin_loop();
                }
            }
        }
    }
    Ok(())
}

/// What one throughput run does.
#[derive(Debug, Clone, Copy)]
pub struct TputConfig<'a> {
    /// Parent of the temporary directory (`None`: the system's temporary directory).
    pub parent: Option<&'a Path>,
    /// Durability of the journal.
    pub durability: Durability,
    /// Entry size in bytes (at least 8).
    pub size: usize,
    /// Appender processes.
    pub appenders: u32,
    /// Timed entries per appender.
    pub messages: u64,
    /// How the tailer waits.
    pub mode: Mode,
    /// Longest wait for the next entry.
    pub timeout: Duration,
    /// Whether the tailer reads along (else after the appenders are done).
    pub live: bool,
}

/// The throughput run: `appenders` processes append `messages` entries each while this
/// process tails them all. `cpu_set`: the CPUs to spread the processes over.
pub fn throughput(c: &TputConfig<'_>, cpu_set: &CpuSet) -> Result<Throughput, String> {
    let TputConfig { parent, durability: dur, size, appenders, messages, mode, timeout, live } = *c;
    let count = u32::try_from(messages).map_err(|_| "--messages must fit in 32 bits".to_string())?;
    let warm = (count / 10).clamp(1, 1000);
    let dir = TempDir::create(parent, "journal-tput").map_err(|e| format!("cannot make a temporary directory: {e}"))?;
    let jdir = dir.path().join("tput");
    let j = Journal::create_or_open(&jdir, &options(dur)).map_err(|e| format!("cannot create the journal: {e}"))?;
    let mut tailer = j.tailer().map_err(|e| format!("cannot open a tailer: {e}"))?;
    tailer.set_wait_policy(policy(mode));

    let cpus = cpu_set.cpus();
    let pinned = cpus.len() > appenders as usize;
    // The tailer gets the first CPU, appender i the (i+2)th; with too few CPUs nobody is
    // pinned (undo the ping-pong's pinning of this thread, which children would inherit).
    cpu_set.restore()?;
    let mut apps = Appenders { children: Vec::new() };
    for id in 0..appenders {
        let a = AppenderArgs {
            dir: jdir.clone(),
            size,
            id,
            warmup: warm,
            count,
            cpu: pinned.then(|| cpus[1 + id as usize]),
        };
        let mut child = spawn_appender(&a).map_err(|e| format!("cannot start an appender process: {e}"))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        apps.children.push((child, stdin, stdout));
    }
    if pinned {
        affinity::pin_current_thread(cpus[0]).map_err(|e| format!("cannot pin to CPU {}: {e}", cpus[0]))?;
    }
    for (c, _, out) in &mut apps.children {
        let mut line = String::new();
        out.read_line(&mut line).map_err(|e| format!("appender: {e}"))?;
        if line.trim() != "ready" {
            let status = c.wait().map(|s| s.to_string()).unwrap_or_default();
            return Err(format!("an appender process did not start ({status})"));
        }
    }
    let mut next = vec![0u32; appenders as usize];
    tail(&mut tailer, mode, u64::from(warm) * u64::from(appenders), size, &mut next, &mut apps, timeout)?;
    let start = Instant::now();
    for (_, stdin, _) in &mut apps.children {
        stdin.write_all(b"go\n").and_then(|()| stdin.flush()).map_err(|e| format!("appender: {e}"))?;
    }
    let total = messages * u64::from(appenders);
    let mut secs = 0.0;
    if live {
        tail(&mut tailer, mode, total, size, &mut next, &mut apps, timeout)?;
        secs = start.elapsed().as_secs_f64();
    }
    // Each appender reports its own time from "go" to its last append.
    let mut append_secs = 0.0f64;
    for (c, _, out) in &mut apps.children {
        let mut line = String::new();
        out.read_line(&mut line).map_err(|e| format!("appender: {e}"))?;
        let ns = line.trim().strip_prefix("done ").and_then(|n| n.parse::<u64>().ok()).ok_or_else(|| {
            let status = c.wait().map(|s| s.to_string()).unwrap_or_default();
            format!("an appender reported {line:?} ({status})")
        })?;
        append_secs = append_secs.max(ns as f64 / 1e9);
    }
    if !live {
        // Not timed: every entry is still read and checked.
        tail(&mut tailer, mode, total, size, &mut next, &mut apps, timeout)?;
        secs = append_secs;
    }
    for (c, _, _) in &mut apps.children {
        let s = c.wait().map_err(|e| format!("cannot wait for an appender: {e}"))?;
        if !s.success() {
            return Err(format!("an appender process failed ({s})"));
        }
    }
    drop(apps);
    drop(tailer);
    drop(j);
    drop(dir);
    Ok(Throughput { appenders, messages, secs, append_secs, pinned })
}

/// An appender process of the throughput run: warm-up entries, "ready", wait for "go",
/// the timed entries.
pub fn appender_main(a: AppenderArgs) -> Result<(), String> {
    // Before pinning: the CPUs this process may use, for the pretoucher.
    let allowed = affinity::allowed_cpus().map_err(|e| format!("cannot read the CPU affinity: {e}"))?;
    if let Some(cpu) = a.cpu {
        affinity::pin_current_thread(cpu).map_err(|e| format!("cannot pin to CPU {cpu}: {e}"))?;
    }
    if a.size < MIN_SIZE {
        return Err(format!("--size must be at least {MIN_SIZE}"));
    }
    let j = open_existing(&a.dir).map_err(|e| format!("appender: {e}"))?;
    let mut app = j.appender().map_err(|e| format!("appender: {e}"))?;
    if a.cpu.is_some() {
        // The appender is pinned; its pretoucher may use any CPU this process was given.
        app.set_pretouch_cpus(&allowed);
    }
    let mut msg: Vec<u8> = (0..a.size).map(|i| (i * 7) as u8).collect();
    msg[0..4].copy_from_slice(&a.id.to_le_bytes());
    for seq in 0..a.warmup {
        msg[4..8].copy_from_slice(&seq.to_le_bytes());
        app.send(&msg).map_err(|e| format!("appender {}: {e}", a.id))?;
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").and_then(|()| out.flush()).map_err(|e| e.to_string())?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).map_err(|e| e.to_string())?;
    if line.trim() != "go" {
        return Err("appender: the measuring process went away".into());
    }
    let start = Instant::now();
    for seq in a.warmup..a.warmup.saturating_add(a.count) {
        msg[4..8].copy_from_slice(&seq.to_le_bytes());
        app.send(&msg).map_err(|e| format!("appender {}: {e}", a.id))?;
    }
    let ns = start.elapsed().as_nanos();
    writeln!(out, "done {ns}").and_then(|()| out.flush()).map_err(|e| e.to_string())?;
    Ok(())
}

/// The two one-core memcpy yardsticks of a throughput run, MiB/s.
#[derive(Debug, Clone, Copy)]
struct Yardsticks {
    /// One entry-sized buffer copied into another over and over (stays in L1/L2).
    cached: f64,
    /// The run's bytes copied in entry-sized pieces sequentially into one pre-faulted
    /// destination of that size (bound by memory bandwidth): the one a journal writing
    /// fresh pages is judged against.
    stream: f64,
    /// As `stream`, into fresh (never touched) anonymous memory: includes one page fault per
    /// 4 KiB page, as writing new file pages does.
    fresh: f64,
    /// As `fresh`, into memory that asked for 2 MiB pages.
    fresh_huge: f64,
}

impl Yardsticks {
    fn measure(size: usize, total: u64) -> Yardsticks {
        let cached =
            crate::memcpy::memcpy_bandwidth(size, Duration::from_millis(200)).mb_per_s * 1e6 / (1u64 << 20) as f64;
        // The better of two passes: the first may be disturbed by the allocator returning memory.
        let stream = (0..2).map(|_| crate::memcpy::memcpy_streaming(size, total).mib_per_s()).fold(0.0, f64::max);
        let fresh = crate::memcpy::memcpy_streaming_fresh(size, total).mib_per_s();
        let fresh_huge = crate::memcpy::memcpy_streaming_fresh_huge(size, total).mib_per_s();
        Yardsticks { cached, stream, fresh, fresh_huge }
    }
}

/// Default entries per appender in the throughput run.
fn default_messages(sync: Sync, size: usize) -> u64 {
    match sync {
        Sync::Flush => 2_000,
        _ => ((256u64 << 20) / size as u64).clamp(10_000, 1_000_000),
    }
}

/// `shmbus-bench journal`.
pub fn run(a: JournalArgs) -> Result<(), String> {
    let sizes: Vec<usize> = a.size.map_or_else(|| REFERENCE_SIZES.to_vec(), |s| vec![s]);
    for &s in &sizes {
        if !(MIN_SIZE..=MAX_SIZE).contains(&s) {
            return Err(format!("--size must be between {MIN_SIZE} and {MAX_SIZE} bytes"));
        }
    }
    crate::transports::sync_only(a.wait)?;
    let iters = a.iters.unwrap_or(if a.mode == Sync::Flush { 2_000 } else { 20_000 });
    if iters == 0 || a.messages == Some(0) {
        return Err("--iters and --messages must be at least 1".into());
    }
    if a.timeout_secs == 0 {
        return Err("--timeout-secs must be at least 1".into());
    }
    let dur = durability(&a);
    let parent = a.dir.clone().unwrap_or_else(std::env::temp_dir);
    if !parent.is_dir() {
        return Err(format!("--dir {}: not a directory", parent.display()));
    }
    let fs = fs_kind(&parent);
    let timeout = Duration::from_secs(a.timeout_secs);
    // The ping side's transport carries the durability and directory; the echo side finds
    // the `journal` transport by name and opens the journals it is handed.
    let cpu_set = CpuSet::current()?;
    let transport: &'static JournalTransport =
        Box::leak(Box::new(JournalTransport { durability: dur, parent: Some(parent.clone()) }));
    for size in sizes {
        let floor = crate::cpus::floor_p50_ns(&cpu_set)?;
        cpu_set.restore()?;
        let config = driver::Config {
            transport,
            params: Params { size, mode: a.wait, payload: Payload::Copy },
            iters,
            warmup: a.warmup.unwrap_or_else(|| driver::default_warmup(iters, size)),
            timeout,
            echo_exit_after: None,
        };
        let o = driver::run(config)?;
        let h = &o.hist;
        let messages = a.messages.unwrap_or_else(|| default_messages(a.mode, size));
        let tc = TputConfig {
            parent: Some(&parent),
            durability: dur,
            size,
            appenders: u32::from(a.appenders),
            messages,
            mode: a.wait,
            timeout,
            live: a.tailer == TailerTiming::Live,
        };
        let t = throughput(&tc, &cpu_set).map_err(|e| format!("journal throughput ({size} B): {e}"))?;
        let y = Yardsticks::measure(size, t.messages * u64::from(t.appenders) * size as u64);
        let tput = t.mib_per_s(size);
        let (p50, p90, p99, p999) =
            (h.value_at_quantile(0.5), h.value_at_quantile(0.9), h.value_at_quantile(0.99), h.value_at_quantile(0.999));
        if a.json {
            let mut v = json!({
                "transport": "journal",
                "durability": a.mode.as_str(),
                "mode": a.wait.as_str(),
                "fs": fs,
                "size": size,
                "latency": "rtt/2",
                "iters": iters,
                "warmup": config.warmup,
                "pinned": o.cpus.is_some(),
                "p50_ns": p50,
                "p90_ns": p90,
                "p99_ns": p99,
                "p999_ns": p999,
                "max_ns": h.max(),
                "min_ns": h.min(),
                "mean_ns": h.mean().round() as u64,
                "floor_p50_ns": floor,
                "appenders": t.appenders,
                "messages": t.messages,
                "tput_secs": t.secs,
                "tput_pinned": t.pinned,
                "msgs_per_s": t.msgs_per_s().round() as u64,
                "tailer": a.tailer.as_str(),
                "append_msgs_per_s": t.append_msgs_per_s().round() as u64,
                "mib_per_s": tput,
                "memcpy_cached_mib_per_s": y.cached,
                "memcpy_stream_mib_per_s": y.stream,
                "memcpy_fresh_mib_per_s": y.fresh,
                "memcpy_fresh_huge_mib_per_s": y.fresh_huge,
                "x_memcpy_cached": tput / y.cached,
                "x_memcpy_stream": tput / y.stream,
            });
            if a.mode == Sync::Periodic {
                v["period_ms"] = json!(a.period_ms.max(1));
            }
            println!("{v}");
        } else {
            println!(
                "journal {:<8} {:<5} {:>6} B on {fs}  one-way (RTT/2) ns: p50 {p50}  p90 {p90}  p99 {p99}  p99.9 {p999}  max {} (floor p50 {floor})  |  \
                 {} appender{}, tailer {}: {:.0} msg/s (appending {:.0}/s)  {:.1} MiB/s ({} x {} entries, {:.3} s) = {:.3} x streaming memcpy {:.0} MiB/s, \
                 {:.3} x cached memcpy {:.0} MiB/s (memcpy into fresh pages {:.0} MiB/s, fresh 2 MiB pages {:.0} MiB/s)",
                a.mode.as_str(),
                a.wait.as_str(),
                size,
                h.max(),
                t.appenders,
                if t.appenders == 1 { "" } else { "s" },
                a.tailer.as_str(),
                t.msgs_per_s(),
                t.append_msgs_per_s(),
                t.mib_per_s(size),
                t.appenders,
                t.messages,
                t.secs,
                tput / y.stream,
                y.stream,
                tput / y.cached,
                y.cached,
                y.fresh,
                y.fresh_huge,
            );
        }
    }
    Ok(())
}
