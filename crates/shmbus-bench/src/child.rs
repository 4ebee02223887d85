//! Helper processes for the multi-process scenarios (`throughput`, `pool`, `fanout`): the
//! binary re-executes itself with a hidden subcommand, the child dies with its parent
//! (`PR_SET_PDEATHSIG = SIGKILL`), and its stdout is a pipe the parent reads results from.

use std::io::{self, BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// A started helper process and the reading end of its stdout.
#[derive(Debug)]
pub struct Helper {
    /// The process.
    pub child: Child,
    /// Its stdout, line by line.
    pub out: BufReader<ChildStdout>,
}

/// Starts `current_exe() role args…` with stdout piped, stdin closed, stderr inherited.
pub fn spawn(role: &str, args: &[String]) -> io::Result<Helper> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.arg(role).args(args).stdin(Stdio::null()).stdout(Stdio::piped());
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (prctl, getppid); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) < 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl: then nobody would kill us.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        })
    };
    let mut child = cmd.spawn()?;
    let out = BufReader::new(child.stdout.take().expect("stdout is piped"));
    Ok(Helper { child, out })
}

impl Helper {
    /// Reads one line from the helper's stdout (without the newline). End of file (the
    /// helper exited) is an error naming its exit status.
    pub fn line(&mut self) -> io::Result<String> {
        let mut s = String::new();
        if self.out.read_line(&mut s)? == 0 {
            let status = self.wait_exit(Duration::from_millis(500))?;
            let why = status.map_or("still running".to_string(), |s| s.to_string());
            return Err(io::Error::other(format!("a helper process closed its output ({why})")));
        }
        Ok(s.trim_end().to_string())
    }

    /// Waits up to `limit` for the helper to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> io::Result<Option<std::process::ExitStatus>> {
        let start = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait()? {
                return Ok(Some(s));
            }
            if start.elapsed() > limit {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Kills the helper (if still running) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Kills and reaps every helper still running (on an error path or at the end of a run).
pub fn kill_all(helpers: &mut [Helper]) {
    for h in helpers {
        h.kill();
    }
}

/// Whether the parent that started this helper is still there (`ppid` read at start-up).
pub fn parent_alive(ppid: u32) -> bool {
    std::os::unix::process::parent_id() == ppid
}
