//! `shmbus pool dispatch` and `shmbus pool worker`: try a pool from two terminals.
//!
//! `dispatch` becomes the pool's dispatcher and sends each line as a job to an idle worker
//! (return to sender: if every worker is busy the job comes back, and the tool retries with
//! a short sleep until `--timeout-ms`). `worker` joins the pool and prints each job it
//! takes. Either creates the pool if it is missing.

use std::io::Write;
use std::time::{Duration, Instant};

use shmbus::pool::{Dispatcher, Pool, PoolConfig, PoolRecvTimeoutError, PoolTrySendError};
use shmbus::Domain;

use crate::output::{JobHead, JsonLines, MessageLine};
use crate::payload::{InFormat, Input};
use crate::{CliError, Ctx, Result};

/// Sleep between two dispatch attempts while every worker is busy.
const RETRY_SLEEP: Duration = Duration::from_millis(1);

/// `shmbus pool dispatch|worker …`
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: PoolCommand,
}

#[derive(Debug, clap::Subcommand)]
enum PoolCommand {
    /// Be the pool's dispatcher: send --data, or each stdin line, as a job to an idle worker.
    Dispatch(DispatchArgs),
    /// Join the pool as a worker and print each job it receives.
    Worker(WorkerArgs),
}

/// The pool's layout, for creating it.
#[derive(Debug, Clone, clap::Args)]
struct LayoutArgs {
    /// Most workers attached at once, 1..=64. Used when creating the pool (default 8); if
    /// the pool exists with another value, the command fails.
    #[arg(long, value_name = "N")]
    max_workers: Option<usize>,
    /// Largest job in bytes (K, M, G suffixes: powers of 1024). Used when creating the pool
    /// (default 4096); if the pool exists with another value, the command fails.
    #[arg(long, value_name = "BYTES", value_parser = crate::units::size_usize)]
    max_job_size: Option<usize>,
}

/// `shmbus pool dispatch --domain D NAME [--max-workers N] [--max-job-size B] [--data TEXT | --file PATH]
/// [--format text|hex|base64] [--timeout-ms T]`
#[derive(Debug, Clone, clap::Args)]
struct DispatchArgs {
    /// The pool's domain (or give the pool as D/NAME). Default: $SHMBUS_DOMAIN.
    #[arg(long = "domain", id = "domain", value_name = "D")]
    domain_flag: Option<String>,
    /// The pool's name, or D/NAME.
    #[arg(value_name = "NAME")]
    channel: String,
    /// The domain, resolved from `--domain`, `D/NAME` or $SHMBUS_DOMAIN by `resolved()`.
    #[arg(skip)]
    domain: String,
    /// The name without its domain, resolved by `resolved()`.
    #[arg(skip)]
    name: String,
    #[command(flatten)]
    layout: LayoutArgs,
    /// Dispatch this one job. Without it (or --file), every line of stdin is one job
    /// (without its newline).
    #[arg(long, value_name = "TEXT", conflicts_with = "file")]
    data: Option<String>,
    /// Dispatch the whole content of this file as one job (binary or multi-line).
    #[arg(long, value_name = "PATH")]
    file: Option<std::path::PathBuf>,
    /// How --data and each stdin line are written: text (as they are), hex or base64
    /// (decoded before dispatching: any bytes, newlines included).
    #[arg(long, value_enum, default_value_t, conflicts_with = "file")]
    format: InFormat,
    /// How long to keep retrying a job while every worker is busy: milliseconds, or with a
    /// unit (`5s`).
    #[arg(long, value_name = "MS", default_value = "5000", value_parser = crate::units::millis)]
    timeout_ms: u64,
    /// One JSON line per job (`{"job_id","worker","lost"}`) instead of text.
    #[arg(long)]
    json: bool,
}

/// `shmbus pool worker --domain D NAME [--count N] [--timeout-ms T] [--json]`
#[derive(Debug, Clone, clap::Args)]
struct WorkerArgs {
    /// The pool's domain (or give the pool as D/NAME). Default: $SHMBUS_DOMAIN.
    #[arg(long = "domain", id = "domain", value_name = "D")]
    domain_flag: Option<String>,
    /// The pool's name, or D/NAME.
    #[arg(value_name = "NAME")]
    channel: String,
    /// The domain, resolved from `--domain`, `D/NAME` or $SHMBUS_DOMAIN by `resolved()`.
    #[arg(skip)]
    domain: String,
    /// The name without its domain, resolved by `resolved()`.
    #[arg(skip)]
    name: String,
    #[command(flatten)]
    layout: LayoutArgs,
    /// Exit (with 0) after this many jobs (at least 1). Default: until the dispatcher goes.
    #[arg(long, value_name = "N", value_parser = crate::units::count)]
    count: Option<u64>,
    /// Fail if no job arrives for this long (per job, not in total): milliseconds, or with a
    /// unit (`2s`).
    #[arg(long, value_name = "MS", value_parser = crate::units::millis)]
    timeout_ms: Option<u64>,
    /// Print JSON lines {"job_id","worker","len","data"} instead of `job ID: PAYLOAD`
    /// (`data_base64` instead of `data` for a payload that is not UTF-8).
    #[arg(long)]
    json: bool,
    /// Wait up to SECS for the pool to be created (by `pool dispatch` or `create`) instead
    /// of creating it.
    #[arg(long, value_name = "SECS", value_parser = crate::parse_wait)]
    wait: Option<Duration>,
}

/// Runs `pool dispatch` or `pool worker`.
pub fn run(ctx: &Ctx, args: &Args) -> Result<()> {
    match &args.command {
        PoolCommand::Dispatch(a) => dispatch(ctx, a),
        PoolCommand::Worker(a) => work(ctx, a),
    }
}

/// Opens the pool, creating it if it is missing: the sizes given are checked against an
/// existing pool, those not given accept what it has (or the defaults when it is created).
fn open_pool(domain: &Domain, name: &str, layout: &LayoutArgs) -> Result<Pool> {
    let mut config = PoolConfig::default();
    if let Some(n) = layout.max_workers {
        config = config.max_workers(n);
    }
    if let Some(len) = layout.max_job_size {
        config = config.max_job_len(len);
    }
    Ok(Pool::create_or_open(domain, name, &config)?)
}

impl DispatchArgs {
    /// These arguments with `domain` and `name` resolved ([`crate::target::channel`]).
    fn resolved(&self) -> Result<DispatchArgs> {
        let ch = crate::target::channel(self.domain_flag.as_deref(), &self.channel)?;
        Ok(DispatchArgs { domain: ch.domain, name: ch.name, ..self.clone() })
    }
}

fn dispatch(ctx: &Ctx, args: &DispatchArgs) -> Result<()> {
    let args = &args.resolved()?;
    let domain = ctx.domain(&args.domain)?;
    let mut d = open_pool(&domain, &args.name, &args.layout)?.dispatcher()?;
    let mut out = std::io::stdout().lock();
    let mut lines = args.json.then(JsonLines::new);
    report_lost(&mut out, lines.as_mut(), &mut d)?;
    let mut job = Dispatch { args, d, sent: 0, lines };
    let input = Input { data: args.data.clone(), file: args.file.clone(), format: args.format, codec: None };
    input.for_each(job.d.max_job_len(), None, |msg| job.one(&mut out, msg))
}

/// A line of `pool dispatch --json`: a job given to a worker, or lost with it.
#[derive(Debug, serde::Serialize)]
struct DispatchJson {
    job_id: u64,
    /// The worker's index in the pool.
    worker: u64,
    /// The worker died (or left) holding the job: it was not done.
    lost: bool,
}

/// Prints the jobs of workers that died (or left) holding them.
fn report_lost(out: &mut impl Write, lines: Option<&mut JsonLines>, d: &mut Dispatcher) -> Result<()> {
    let mut lines = lines;
    for lost in d.reap() {
        match lines.as_deref_mut() {
            Some(l) => l.write(out, &DispatchJson { job_id: lost.job_id, worker: lost.worker as u64, lost: true })?,
            None => writeln!(
                out,
                "lost job {}: worker {} (pid {}) died or left holding it",
                lost.job_id, lost.worker, lost.pid
            )?,
        }
    }
    Ok(())
}

struct Dispatch<'a> {
    args: &'a DispatchArgs,
    d: Dispatcher,
    sent: u64,
    /// `--json`.
    lines: Option<JsonLines>,
}

impl Dispatch<'_> {
    /// Dispatches one job, retrying while every worker is busy.
    fn one(&mut self, out: &mut impl Write, job: &[u8]) -> Result<()> {
        let (domain, name) = (&self.args.domain, &self.args.name);
        let timeout = Duration::from_millis(self.args.timeout_ms);
        let t0 = Instant::now();
        let mut said_busy = false;
        loop {
            match self.d.try_send(job) {
                Ok(sent) => {
                    self.sent += 1;
                    match &mut self.lines {
                        Some(l) => l.write(
                            out,
                            &DispatchJson { job_id: sent.job_id, worker: sent.worker as u64, lost: false },
                        )?,
                        None => writeln!(out, "job {} -> worker {}", sent.job_id, sent.worker)?,
                    }
                    out.flush()?;
                    return Ok(());
                }
                Err(PoolTrySendError::AllBusy) => {
                    if !said_busy {
                        // On stderr under --json, so stdout stays one job per line.
                        let line = format!("all busy; retrying for up to {} ms", self.args.timeout_ms);
                        if self.lines.is_some() {
                            eprintln!("{line}");
                        } else {
                            writeln!(out, "{line}")?;
                            out.flush()?;
                        }
                        said_busy = true;
                    }
                    // A dead worker looks busy until reaped.
                    report_lost(out, self.lines.as_mut(), &mut self.d)?;
                    if t0.elapsed() >= timeout {
                        let workers = self.d.status().workers;
                        return Err(CliError::msg(format!(
                            "all {workers} worker(s) of {domain}/{name} stayed busy for {} ms; job not dispatched ({} dispatched before it); start more workers or raise --timeout-ms",
                            self.args.timeout_ms, self.sent
                        )));
                    }
                    std::thread::sleep(RETRY_SLEEP);
                }
                Err(PoolTrySendError::NoWorkers) => {
                    return Err(CliError::msg(format!(
                        "pool {domain}/{name} has no workers; start one first (`shmbus pool worker --domain {domain} {name}`); {} job(s) dispatched",
                        self.sent
                    )));
                }
                Err(e) => return Err(CliError::during("dispatch failed", e)),
            }
        }
    }
}

impl WorkerArgs {
    /// These arguments with `domain` and `name` resolved ([`crate::target::channel`]).
    fn resolved(&self) -> Result<WorkerArgs> {
        let ch = crate::target::channel(self.domain_flag.as_deref(), &self.channel)?;
        Ok(WorkerArgs { domain: ch.domain, name: ch.name, ..self.clone() })
    }
}

fn work(ctx: &Ctx, args: &WorkerArgs) -> Result<()> {
    let args = &args.resolved()?;
    let domain = ctx.domain(&args.domain)?;
    ctx.wait_for(&domain, &[&args.name], args.wait)?;
    let mut w = open_pool(&domain, &args.name, &args.layout)?.worker()?;
    let index = w.index();
    let timeout = args.timeout_ms.map(Duration::from_millis);
    let mut out = std::io::stdout().lock();
    let mut lines = JsonLines::new();
    let mut received = 0u64;
    while args.count.is_none_or(|n| received < n) {
        let r = match timeout {
            Some(t) => w.recv_ref_timeout(t),
            None => w.recv_ref().map_err(PoolRecvTimeoutError::from),
        };
        let err = match r {
            Ok(job) => {
                if args.json {
                    let head = JobHead { job_id: job.id(), worker: index as u64 };
                    lines.write(&mut out, &MessageLine::new(head, job.data()))?;
                } else {
                    // Text when valid UTF-8, else hex, as `sub` prints.
                    write!(out, "job {}: ", job.id())?;
                    crate::payload::write(&mut out, crate::payload::Format::Auto, job.data())?;
                }
                out.flush()?;
                received += 1;
                continue;
            }
            Err(e) => e,
        };
        match err {
            PoolRecvTimeoutError::Orphaned if w.dispatcher_finished() => {
                // Its input ended and it detached: the work is done, not lost. Said on
                // stderr under --json, so stdout stays one job per line.
                let line = format!("dispatcher finished after {received} job(s)");
                if args.json {
                    eprintln!("{line}");
                } else {
                    writeln!(out, "{line}")?;
                    out.flush()?;
                }
                return Ok(());
            }
            PoolRecvTimeoutError::Orphaned => {
                return Err(CliError::msg(format!(
                    "the dispatcher of {}/{} died after {received} job(s)",
                    args.domain, args.name
                )));
            }
            PoolRecvTimeoutError::Timeout => {
                let of = args.count.map(|n| format!(" of {n}")).unwrap_or_default();
                return Err(CliError::msg(format!(
                    "timed out: no job on {}/{} for {} ms ({received}{of} received)",
                    args.domain,
                    args.name,
                    args.timeout_ms.unwrap_or(0)
                )));
            }
            e => return Err(CliError::during("receive failed", e)),
        }
    }
    Ok(())
}
