//! `shmbus-bench`: latency of shmbus channels against the shared-memory floor and peers.
//!
//! See the crate README for what each measurement times.

mod affinity;
mod child;
mod cpus;
mod demo_redis;
mod driver;
mod fanout;
mod journal;
mod memcpy;
mod plots;
mod pool;
mod queue_table;
mod rate_grid;
mod render;
mod report;
mod suite;
mod throughput;
mod transports;
mod waiter;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use transports::{Mode, Params, Payload};

/// Largest message a ping-pong accepts (1 GiB).
const MAX_SIZE: usize = 1 << 30;

/// Most subscriber processes `fanout` starts (a topic has 120 participant entries).
const MAX_SUBSCRIBERS: usize = 100;

#[derive(Debug, Parser)]
#[command(name = "shmbus-bench", version, about = "Latency and throughput benchmarks for shmbus")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Two pinned processes bounce a message; prints one-way latency (RTT/2) percentiles.
    Pingpong(PingpongArgs),
    /// One-core memcpy bandwidth in MB/s.
    ThroughputMemcpy(MemcpyArgs),
    /// Stream bandwidth between two pinned processes, next to memcpy measured in the same run.
    Throughput(ThroughputArgs),
    /// Bursts of jobs to worker processes through a shmbus pool, against a
    /// crossbeam-channel thread pool; enqueue→recv latency percentiles.
    Pool(PoolArgs),
    /// A worker of `pool` (started by `pool` itself).
    #[command(name = pool::WORKER_ROLE, hide = true)]
    PoolWorker(PoolWorkerArgs),
    /// ns per publish on a topic with K subscriber processes reading.
    Fanout(FanoutArgs),
    /// A subscriber of `fanout` (started by `fanout` itself).
    #[command(name = fanout::SUBSCRIBER_ROLE, hide = true)]
    FanoutSubscriber(FanoutSubscriberArgs),
    /// The reader side of `throughput` (started by `throughput` itself).
    #[command(name = throughput::READER_ROLE, hide = true)]
    StreamReader(StreamReaderArgs),
    /// 2,000,000 queue messages per size: wall time against a mutex-guarded shared-memory queue.
    QueueTable(queue_table::QueueTableArgs),
    /// Journal append→tail latency (RTT/2) and throughput, 40 B to 32 KiB entries.
    Journal(journal::JournalArgs),
    /// An appender process of `journal`'s throughput run (started by `journal` itself).
    #[command(name = journal::APPENDER_ROLE, hide = true)]
    JournalAppender(journal::AppenderArgs),
    /// Stream one-way latency against message rate and ring size (20–40 B records).
    RateGrid(rate_grid::RateGridArgs),
    /// The reader process of `rate-grid` (started by `rate-grid` itself).
    #[command(name = rate_grid::READER_ROLE, hide = true)]
    RateReader(rate_grid::ReaderArgs),
    /// The robotics profile of `shmbus demo` over Redis streams, TCP or Unix socket.
    DemoRedis(demo_redis::Args),
    /// One producer or consumer of `demo-redis` (started by `demo-redis` itself).
    #[command(name = demo_redis::ROLE, hide = true)]
    DemoRedisRole(demo_redis::RoleArgs),
    /// Everything against the peers in one run: results.json, summary.md and plots in DIR.
    Report(suite::ReportArgs),
    /// The echo side of a ping-pong (started by `pingpong` itself).
    #[command(name = driver::ECHO_ROLE, hide = true)]
    Echo(EchoArgs),
}

#[derive(Debug, Args)]
struct PingpongArgs {
    /// floor, futex-floor, topic, topic-lossless (block topics, reliable subscribers), stream,
    /// queue, service (a round trip is one call), journal, pipe, uds, tcp, redis-pubsub-tcp,
    /// redis-pubsub-uds, redis-stream-tcp or redis-stream-uds; built with the iceoryx2
    /// feature, also iceoryx2 (publish-subscribe) and iceoryx2-rr (request-response).
    #[arg(long, value_name = "T")]
    transport: String,
    /// Message size in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    size: usize,
    /// Recorded round trips.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    iters: u64,
    /// spin, block or async (topic and queue: both sides await `recv_async` in a
    /// current-thread tokio runtime; other transports run it as block). floor always spins
    /// and futex-floor always blocks; the output says the mode that really ran. Default:
    /// block (floor: spin).
    #[arg(long, value_enum)]
    mode: Option<Mode>,
    /// copy: full payload in and out; touch: first and last byte in place (zero-copy
    /// transports; byte streams always copy).
    #[arg(long, value_enum, default_value_t = Payload::Copy)]
    payload: Payload,
    /// Unrecorded round trips first. Default: iters/10, at least 1000, at most 10000, and
    /// no more than 256 MiB of messages take (but at least 100).
    #[arg(long, value_name = "N")]
    warmup: Option<u64>,
    /// Print one JSON object instead of a line.
    #[arg(long)]
    json: bool,
    /// Fail when the echo side does not answer for this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    timeout_secs: u64,
    /// Test hook: the echo process exits after receiving N messages.
    #[arg(long, value_name = "N", hide = true)]
    echo_exit_after: Option<u64>,
}

#[derive(Debug, Args)]
struct MemcpyArgs {
    /// Bytes per copy.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    size: usize,
    /// Measure for at least this long.
    #[arg(long, value_name = "MS", default_value_t = 500)]
    millis: u64,
    /// Print one JSON object instead of a line.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ThroughputArgs {
    /// Only stream.
    #[arg(long, value_name = "T", default_value = "stream")]
    transport: String,
    /// Record payload size in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 65536)]
    size: usize,
    /// Payload bytes to move in the timed part (whole records; default 1 GiB).
    #[arg(long, value_name = "TOTAL", default_value_t = 1 << 30)]
    bytes: u64,
    /// Ring capacity in bytes, a power of two of at least a page. Default: at least 1 MiB
    /// and 8 records.
    #[arg(long, value_name = "BYTES")]
    capacity: Option<usize>,
    /// spin or block while the ring is full (writer) or empty (reader).
    #[arg(long, value_enum, default_value_t = Mode::Spin)]
    mode: Mode,
    /// copy: whole record in and out; touch: first and last byte only.
    #[arg(long, value_enum, default_value_t = Payload::Copy)]
    payload: Payload,
    /// How long the memcpy yardstick runs.
    #[arg(long, value_name = "MS", default_value_t = 300)]
    memcpy_millis: u64,
    /// Fail when the reader makes no progress for this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    timeout_secs: u64,
    /// Print one JSON object instead of a line.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct PoolArgs {
    /// Jobs per burst.
    #[arg(long, value_name = "N", default_value_t = 3)]
    jobs: usize,
    /// Worker processes (and baseline threads), 1..=64.
    #[arg(long, value_name = "M", default_value_t = 3)]
    workers: usize,
    /// Recorded bursts.
    #[arg(long, value_name = "R", default_value_t = 1000)]
    rounds: u64,
    /// Unrecorded bursts first. Default: rounds/10, at least 10.
    #[arg(long, value_name = "R")]
    warmup: Option<u64>,
    /// How workers wait: spin, or sleep at once (block).
    #[arg(long, value_enum, default_value_t = Mode::Block)]
    mode: Mode,
    /// Pause between bursts (after every worker is waiting again), microseconds.
    #[arg(long, value_name = "US", default_value_t = 200)]
    gap_us: u64,
    /// Busy work per job in the worker, microseconds.
    #[arg(long, value_name = "US", default_value_t = 0)]
    work_us: u64,
    /// Fail when workers stop answering for this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    timeout_secs: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct PoolWorkerArgs {
    #[arg(long)]
    root: String,
    #[arg(long, value_enum)]
    mode: Mode,
    #[arg(long)]
    work_ns: u64,
}

#[derive(Debug, Args)]
struct FanoutArgs {
    /// Subscriber processes.
    #[arg(long, value_name = "K", default_value_t = 1)]
    subscribers: usize,
    /// Message size in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    size: usize,
    /// Recorded publishes.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    iters: u64,
    /// Unrecorded publishes first. Default: iters/10, at least 1000, at most 10000, and no
    /// more than 256 MiB of messages take (but at least 100).
    #[arg(long, value_name = "N")]
    warmup: Option<u64>,
    /// How subscribers wait: spin (try_recv in a loop) or block (sleep at once).
    #[arg(long, value_enum, default_value_t = Mode::Spin)]
    mode: Mode,
    /// copy: publish + copying reads; touch: loan/send + pinned reads.
    #[arg(long, value_enum, default_value_t = Payload::Copy)]
    payload: Payload,
    /// Lossless: a topic of policy block, every subscriber reliable (the publisher waits
    /// for the slowest; its checks of their cursors are in the timed publish).
    #[arg(long)]
    reliable: bool,
    /// Fail when subscribers do not finish for this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    timeout_secs: u64,
    /// Print one JSON object instead of a line.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct FanoutSubscriberArgs {
    #[arg(long)]
    root: String,
    #[arg(long)]
    size: usize,
    #[arg(long)]
    last: u64,
    #[arg(long, value_enum)]
    mode: Mode,
    #[arg(long, value_enum)]
    payload: Payload,
    #[arg(long)]
    cpu: Option<usize>,
    #[arg(long)]
    reliable: bool,
}

#[derive(Debug, Args)]
struct StreamReaderArgs {
    #[arg(long)]
    root: String,
    #[arg(long)]
    size: usize,
    #[arg(long)]
    records: u64,
    #[arg(long, value_enum)]
    mode: Mode,
    #[arg(long, value_enum)]
    payload: Payload,
    #[arg(long)]
    cpu: Option<usize>,
}

#[derive(Debug, Args)]
struct EchoArgs {
    #[arg(long)]
    transport: String,
    #[arg(long)]
    size: usize,
    #[arg(long, value_enum)]
    mode: Mode,
    #[arg(long, value_enum)]
    payload: Payload,
    #[arg(long)]
    count: u64,
    #[arg(long, value_delimiter = ',')]
    fds: Vec<i32>,
    #[arg(long = "arg")]
    args: Vec<String>,
    #[arg(long)]
    cpu: Option<usize>,
    #[arg(long)]
    exit_after: Option<u64>,
}

fn transport(name: &str) -> Result<&'static dyn transports::Transport, String> {
    transports::by_name(name).ok_or_else(|| format!("unknown transport '{name}' (known: {})", transports::names()))
}

fn check_size(size: usize) -> Result<(), String> {
    if size == 0 {
        return Err("--size must be at least 1 byte".into());
    }
    if size > MAX_SIZE {
        return Err(format!("--size must be at most {MAX_SIZE} bytes"));
    }
    Ok(())
}

fn pingpong(a: PingpongArgs) -> Result<(), String> {
    let t = transport(&a.transport)?;
    if transports::redis::is_redis(t.name()) && !transports::redis::available() {
        // The one line a missing peer gets; an explicit run of it fails.
        eprintln!("{}", transports::redis::NOT_FOUND);
        std::process::exit(1);
    }
    check_size(a.size)?;
    at_least_one("--iters", a.iters)?;
    at_least_one("--timeout-secs", a.timeout_secs)?;
    let (mode, payload) = driver::effective(t, a.mode, a.payload);
    if !a.json {
        if a.mode.is_some_and(|m| m != mode) {
            eprintln!("shmbus-bench: note: {} always runs in {} mode", t.name(), mode.as_str());
        }
        if payload != a.payload {
            eprintln!("shmbus-bench: note: {} always moves the payload by {}", t.name(), payload.as_str());
        }
    }
    let config = driver::Config {
        transport: t,
        params: Params { size: a.size, mode, payload },
        iters: a.iters,
        warmup: a.warmup.unwrap_or_else(|| driver::default_warmup(a.iters, a.size)),
        timeout: Duration::from_secs(a.timeout_secs),
        echo_exit_after: a.echo_exit_after,
    };
    let outcome = driver::run(config)?;
    if a.json {
        println!("{}", report::json(&outcome));
    } else {
        println!("{}", report::line(&outcome));
    }
    Ok(())
}

fn throughput_memcpy(a: MemcpyArgs) -> Result<(), String> {
    check_size(a.size)?;
    if let Some((cpu, _)) = affinity::pick_pair().ok().flatten() {
        affinity::pin_current_thread(cpu).map_err(|e| format!("cannot pin to CPU {cpu}: {e}"))?;
    }
    let r = memcpy::memcpy_bandwidth(a.size, Duration::from_millis(a.millis.max(1)));
    if a.json {
        println!("{}", report::memcpy_json(&r));
    } else {
        println!("{}", report::memcpy_line(&r));
    }
    Ok(())
}

fn throughput(a: ThroughputArgs) -> Result<(), String> {
    if a.transport != "stream" {
        return Err(format!("throughput measures only the stream transport, not '{}'", a.transport));
    }
    check_size(a.size)?;
    at_least_one("--bytes", a.bytes)?;
    at_least_one("--timeout-secs", a.timeout_secs)?;
    let o = throughput::run(throughput::Config {
        size: a.size,
        bytes: a.bytes,
        capacity: a.capacity.unwrap_or(0),
        mode: transports::sync_only(a.mode)?,
        payload: a.payload,
        memcpy_time: Duration::from_millis(a.memcpy_millis.max(1)),
        timeout: Duration::from_secs(a.timeout_secs),
    })?;
    if a.json {
        println!("{}", throughput::json(&o));
    } else {
        println!("{}", throughput::line(&o));
    }
    Ok(())
}

fn pool(a: PoolArgs) -> Result<(), String> {
    at_least_one("--jobs", a.jobs as u64)?;
    if !(1..=shmbus::pool::MAX_WORKERS).contains(&a.workers) {
        return Err(format!("--workers must be 1..={}", shmbus::pool::MAX_WORKERS));
    }
    at_least_one("--rounds", a.rounds)?;
    at_least_one("--timeout-secs", a.timeout_secs)?;
    let o = pool::run(pool::Config {
        jobs: a.jobs,
        workers: a.workers,
        rounds: a.rounds,
        warmup: a.warmup.unwrap_or((a.rounds / 10).max(10)),
        mode: transports::sync_only(a.mode)?,
        gap: Duration::from_micros(a.gap_us),
        work: Duration::from_micros(a.work_us),
        timeout: Duration::from_secs(a.timeout_secs),
    })?;
    if a.json {
        println!("{}", pool::json(&o));
    } else {
        println!("{}", pool::table(&o));
    }
    Ok(())
}

fn fanout(a: FanoutArgs) -> Result<(), String> {
    if a.subscribers == 0 || a.subscribers > MAX_SUBSCRIBERS {
        return Err(format!("--subscribers must be 1..={MAX_SUBSCRIBERS}"));
    }
    check_size(a.size)?;
    at_least_one("--iters", a.iters)?;
    at_least_one("--timeout-secs", a.timeout_secs)?;
    let o = fanout::run(fanout::Config {
        subscribers: a.subscribers,
        size: a.size,
        iters: a.iters,
        warmup: a.warmup.unwrap_or_else(|| driver::default_warmup(a.iters, a.size)),
        mode: transports::sync_only(a.mode)?,
        payload: a.payload,
        reliable: a.reliable,
        timeout: Duration::from_secs(a.timeout_secs),
    })?;
    if a.json {
        println!("{}", fanout::json(&o));
    } else {
        println!("{}", fanout::line(&o));
    }
    Ok(())
}

fn echo(a: EchoArgs) -> Result<(), String> {
    let t = transport(&a.transport)?;
    check_size(a.size)?;
    driver::echo(driver::EchoConfig {
        transport: t,
        params: Params { size: a.size, mode: a.mode, payload: a.payload },
        count: a.count,
        fds: a.fds,
        args: a.args,
        cpu: a.cpu,
        exit_after: a.exit_after,
    })
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                e.exit();
            }
            // Bad input is one line on stderr, like every other error: clap's message lines
            // (before its usage and "for more information" tips) joined.
            let text = e.render().to_string();
            let message: Vec<&str> = text
                .lines()
                .map(str::trim)
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .filter(|l| !l.is_empty() && !l.starts_with("tip:"))
                .collect();
            let message = message.join(" ");
            let message = message.strip_prefix("error: ").unwrap_or(&message);
            eprintln!("shmbus-bench: error: {message} (see --help)");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Pingpong(a) => pingpong(a),
        Command::ThroughputMemcpy(a) => throughput_memcpy(a),
        Command::QueueTable(a) => queue_table::run(a.messages, a.json),
        Command::Journal(a) => journal::run(a),
        Command::Report(a) => suite::run(a),
        Command::DemoRedis(a) => demo_redis::run(a),
        Command::DemoRedisRole(a) => demo_redis::role_main(a),
        Command::RateGrid(a) => rate_grid::run(a),
        Command::RateReader(a) => rate_grid::reader_main(a),
        Command::JournalAppender(a) => journal::appender_main(a),
        Command::Echo(a) => echo(a),
        Command::Throughput(a) => throughput(a),
        Command::Pool(a) => pool(a),
        Command::Fanout(a) => fanout(a),
        Command::FanoutSubscriber(a) => fanout::subscriber(fanout::SubscriberConfig {
            root: a.root,
            size: a.size,
            last: a.last,
            mode: a.mode,
            payload: a.payload,
            cpu: a.cpu,
            reliable: a.reliable,
        }),
        Command::PoolWorker(a) => {
            pool::worker(pool::WorkerConfig { root: a.root, mode: a.mode, work: Duration::from_nanos(a.work_ns) })
        }
        Command::StreamReader(a) => throughput::reader(throughput::ReaderConfig {
            root: a.root,
            size: a.size,
            records: a.records,
            mode: a.mode,
            payload: a.payload,
            cpu: a.cpu,
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("shmbus-bench: error: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// `Err("FLAG must be at least 1")` when `value` is 0.
fn at_least_one(flag: &str, value: u64) -> Result<(), String> {
    if value == 0 {
        return Err(format!("{flag} must be at least 1"));
    }
    Ok(())
}
