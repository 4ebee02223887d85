//! The ping-pong driver: starts the echo process, pins both sides, runs warm-up and timed
//! round trips over any [`Transport`], and fills the latency histogram.
//!
//! What is timed: for each round trip the ping process reads `CLOCK_MONOTONIC`, sends
//! `size` bytes, receives the `size`-byte echo, and reads the clock again. Half of that
//! round-trip time is recorded as the one-way latency. Warm-up round trips run the same
//! code and are not recorded.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use shmbus::time::monotonic_ns;

use crate::affinity;
use crate::transports::{Endpoint, Handoff, Mode, Params, Payload, Transport};
use crate::waiter::{Waiter, Watch};

/// The hidden subcommand the binary re-executes itself with for the echo side.
pub const ECHO_ROLE: &str = "__echo";

/// Bytes of messages, each way, past which the default warm-up stops growing.
const WARMUP_BYTES: u64 = 256 << 20;

/// Unrecorded round trips when none are asked for: a tenth of the recorded ones, within
/// 1,000..=10,000, but no more round trips than [`WARMUP_BYTES`] of messages each way take
/// (and at least 100, so above about 2.7 MB a message the floor of 100 decides). Without the byte bound a 6 MiB journal row wrote a thousand entries each way
/// before its first recorded one: many GiB into a tmpfs, which then measured the machine's
/// memory pressure (a 6,220,800-byte journal row at 12 ms p50 instead of 3.7 ms).
pub fn default_warmup(iters: u64, size: usize) -> u64 {
    let by_bytes = (WARMUP_BYTES / (size as u64).max(1)).max(100);
    (iters / 10).clamp(1000, 10_000).min(by_bytes)
}

/// One ping-pong run, as asked for.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// What to measure.
    pub transport: &'static dyn Transport,
    /// Size, effective mode and payload.
    pub params: Params,
    /// Recorded round trips.
    pub iters: u64,
    /// Unrecorded round trips before them.
    pub warmup: u64,
    /// How long one round trip may wait for the echo before the run fails.
    pub timeout: Duration,
    /// Test hook: the echo process exits after receiving this many messages.
    pub echo_exit_after: Option<u64>,
}

/// What a run measured.
#[derive(Debug)]
pub struct Outcome {
    /// The run's configuration.
    pub config: Config,
    /// One-way latencies (RTT/2) in nanoseconds.
    pub hist: Histogram<u64>,
    /// (ping, echo) CPUs, or `None` when only one CPU was available.
    pub cpus: Option<(usize, usize)>,
}

/// Watches the echo process from the ping side.
struct ChildWatch<'a> {
    child: &'a mut Child,
    limit: Duration,
}

impl Watch for ChildWatch<'_> {
    fn check(&mut self, waited: Duration) -> io::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            return Err(io::Error::other(format!("the echo process exited ({status}) without answering")));
        }
        if waited > self.limit {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the echo process has not answered for {} s", self.limit.as_secs_f64()),
            ));
        }
        Ok(())
    }
}

/// Watches the ping process from the echo side (which is also killed by `PDEATHSIG`).
struct ParentWatch {
    ppid: u32,
}

impl Watch for ParentWatch {
    fn check(&mut self, _waited: Duration) -> io::Result<()> {
        if std::os::unix::process::parent_id() != self.ppid {
            return Err(io::Error::other("the ping process is gone"));
        }
        Ok(())
    }
}

fn spawn_echo(config: &Config, handoff: &Handoff, cpu: Option<usize>) -> io::Result<Child> {
    let exe = std::env::current_exe()?;
    let p = &config.params;
    let raw: Vec<RawFd> = handoff.fds.iter().map(AsRawFd::as_raw_fd).collect();
    let mut cmd = Command::new(exe);
    cmd.arg(ECHO_ROLE)
        .args(["--transport", config.transport.name()])
        .args(["--size", &p.size.to_string()])
        .args(["--mode", p.mode.as_str()])
        .args(["--payload", p.payload.as_str()])
        .args(["--count", &(config.warmup.saturating_add(config.iters)).to_string()]);
    if !raw.is_empty() {
        let list: Vec<String> = raw.iter().map(|fd| fd.to_string()).collect();
        cmd.args(["--fds", &list.join(",")]);
    }
    for a in &handoff.args {
        cmd.arg(format!("--arg={a}"));
    }
    if let Some(cpu) = cpu {
        cmd.args(["--cpu", &cpu.to_string()]);
    }
    if let Some(n) = config.echo_exit_after {
        cmd.args(["--exit-after", &n.to_string()]);
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::null());
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (fcntl, prctl, getppid) on data captured before the fork;
    // it allocates nothing (last_os_error / from_raw_os_error do not allocate).
    unsafe {
        cmd.pre_exec(move || {
            // The handed-off descriptors were made close-on-exec so no other child could
            // inherit them; let exactly these survive this exec.
            for &fd in &raw {
                if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            // Die with the ping process instead of spinning forever.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) < 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        })
    };
    cmd.spawn()
}

/// Waits up to `limit` for `child` to exit on its own.
fn wait_exit(child: &mut Child, limit: Duration) -> io::Result<Option<ExitStatus>> {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(Some(s));
        }
        if start.elapsed() > limit {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Ping side: runs one ping-pong and returns the histogram. Errors are one line.
pub fn run(config: Config) -> Result<Outcome, String> {
    let cpus = affinity::pick_pair().map_err(|e| format!("cannot read CPU affinity: {e}"))?;
    if let Some((ping_cpu, _)) = cpus {
        affinity::pin_current_thread(ping_cpu).map_err(|e| format!("cannot pin to CPU {ping_cpu}: {e}"))?;
    } else {
        eprintln!("shmbus-bench: note: only one CPU available; the two processes are not pinned");
    }
    let name = config.transport.name();
    let (mut ep, handoff) =
        config.transport.open(&config.params).map_err(|e| format!("cannot open transport {name}: {e}"))?;
    let mut child =
        spawn_echo(&config, &handoff, cpus.map(|c| c.1)).map_err(|e| format!("cannot start the echo process: {e}"))?;
    // The echo process has its copies now; ours must go, or a dead echo would not show as
    // end-of-file on the byte streams.
    drop(handoff);

    let mut hist = Histogram::<u64>::new(3).expect("3 significant figures is valid");
    let result = {
        let mut watch = ChildWatch { child: &mut child, limit: config.timeout };
        let mut waiter = Waiter::new(&mut watch);
        ping_loop(&config, ep.as_mut(), &mut waiter, &mut hist)
    };
    drop(ep);
    match result {
        Ok(()) => match wait_exit(&mut child, config.timeout) {
            Ok(Some(s)) if s.success() => Ok(Outcome { config, hist, cpus }),
            Ok(Some(s)) => Err(format!("the echo process failed ({s})")),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                Err("the echo process did not exit after the last round trip".into())
            }
            Err(e) => Err(format!("cannot wait for the echo process: {e}")),
        },
        Err(e) => {
            // A dead echo often shows first as end-of-file or a broken pipe; say why.
            let status = wait_exit(&mut child, Duration::from_millis(200)).ok().flatten();
            match status {
                // The watch already names the exit; other errors (end of file, broken
                // pipe) get the reason added.
                Some(_) if e.to_string().starts_with("the echo process exited") => Err(format!("{name}: {e}")),
                Some(s) => Err(format!("{name}: the echo process exited ({s}): {e}")),
                None => {
                    let _ = child.kill();
                    let _ = child.wait();
                    Err(format!("{name}: {e} (echo process killed)"))
                }
            }
        }
    }
}

fn ping_loop(
    config: &Config,
    ep: &mut dyn Endpoint,
    waiter: &mut Waiter<'_>,
    hist: &mut Histogram<u64>,
) -> io::Result<()> {
    let size = config.params.size;
    let mut msg: Vec<u8> = (0..size).map(|i| (i * 31) as u8).collect();
    let mut reply = vec![0u8; size];
    for i in 0..config.warmup.saturating_add(config.iters) {
        // The first and last byte change every round trip, and must come back.
        let tag = (i as u8) ^ 0x5a;
        msg[0] = tag;
        msg[size - 1] = tag;
        waiter.reset();
        let t0 = monotonic_ns();
        ep.send(&msg, waiter)?;
        ep.recv(&mut reply, waiter)?;
        debug_assert_eq!(reply.len(), size);
        let t1 = monotonic_ns();
        if reply[0] != tag || reply[size - 1] != tag {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("round trip {i} came back with the wrong bytes"),
            ));
        }
        if i >= config.warmup {
            hist.record(t1.saturating_sub(t0) / 2).map_err(|e| io::Error::other(format!("histogram: {e:?}")))?;
        }
    }
    Ok(())
}

/// What the echo process is told on its command line.
#[derive(Debug)]
pub struct EchoConfig {
    /// The transport to attach to.
    pub transport: &'static dyn Transport,
    /// Size, effective mode and payload (as the ping side decided).
    pub params: Params,
    /// Messages to echo before exiting (warm-up + recorded).
    pub count: u64,
    /// Descriptors inherited from the ping process.
    pub fds: Vec<RawFd>,
    /// Extra strings from the transport's handoff.
    pub args: Vec<String>,
    /// CPU to pin to.
    pub cpu: Option<usize>,
    /// Test hook: exit (status 3) after receiving this many messages, without answering.
    pub exit_after: Option<u64>,
}

/// Echo side: answers `count` messages. Errors are one line.
pub fn echo(config: EchoConfig) -> Result<(), String> {
    let ppid = std::os::unix::process::parent_id();
    if let Some(cpu) = config.cpu {
        affinity::pin_current_thread(cpu).map_err(|e| format!("cannot pin to CPU {cpu}: {e}"))?;
    }
    let mut fds = Vec::with_capacity(config.fds.len());
    for &raw in &config.fds {
        // SAFETY: F_GETFD only inspects the descriptor table.
        if raw < 3 || unsafe { libc::fcntl(raw, libc::F_GETFD) } < 0 {
            return Err(format!("descriptor {raw} was not inherited"));
        }
        // SAFETY: the ping process cleared close-on-exec on exactly these descriptors for
        // us and passed their numbers; nothing else in this process owns them (checked open
        // above, and each number is taken once by the ping side's construction).
        fds.push(unsafe { OwnedFd::from_raw_fd(raw) });
    }
    let handoff = Handoff { fds, args: config.args };
    let name = config.transport.name();
    let mut ep =
        config.transport.attach(&config.params, handoff).map_err(|e| format!("echo: cannot attach to {name}: {e}"))?;
    let mut buf = vec![0u8; config.params.size];
    let mut watch = ParentWatch { ppid };
    let mut waiter = Waiter::new(&mut watch);
    for i in 0..config.count {
        waiter.reset();
        ep.recv(&mut buf, &mut waiter).map_err(|e| format!("echo: {name}: receive {i}: {e}"))?;
        if config.exit_after == Some(i + 1) {
            std::process::exit(3);
        }
        ep.send(&buf, &mut waiter).map_err(|e| format!("echo: {name}: send {i}: {e}"))?;
    }
    Ok(())
}

/// The mode and payload a transport really uses for the requested ones.
pub fn effective(t: &dyn Transport, mode: Option<Mode>, payload: Payload) -> (Mode, Payload) {
    let requested = mode.unwrap_or(Mode::Block);
    (t.mode(requested), t.payload(payload))
}

#[cfg(test)]
mod tests {
    use super::default_warmup;

    #[test]
    fn the_default_warmup_is_bounded_by_bytes() {
        // Small messages: a tenth of the recorded round trips, within 1,000..=10,000.
        assert_eq!(default_warmup(100_000, 64), 10_000);
        assert_eq!(default_warmup(2_000, 64), 1_000);
        assert_eq!(default_warmup(1_000_000, 64), 10_000);
        // Large ones: no more than 256 MiB each way, and at least 100.
        assert_eq!(default_warmup(100_000, 1 << 20), 256);
        assert_eq!(default_warmup(300, 6_220_800), 100);
        assert_eq!(default_warmup(300, 0), 1_000);
    }
}
