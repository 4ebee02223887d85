//! `topic`, `queue`… : the shmbus channel kinds, each ping-ponged over two channels (one per
//! direction) in a scratch domain that the ping side creates and removes.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Handoff, Mode, Params};
use crate::waiter::Waiter;

/// A scratch root directory (on tmpfs) for one run, removed on drop by the side that made it.
#[derive(Debug)]
pub struct ScratchRoot {
    path: PathBuf,
    owner: bool,
}

impl ScratchRoot {
    /// Makes a fresh root and the handoff naming it.
    pub fn create(tag: &str) -> io::Result<(ScratchRoot, Handoff)> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let path =
            base.join(format!("shmbus-bench-{tag}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&path)?;
        let handoff = Handoff { fds: Vec::new(), args: vec![path.display().to_string()] };
        Ok((ScratchRoot { path, owner: true }, handoff))
    }

    /// The root named in `handoff` (not removed by this side).
    pub fn attach(handoff: &Handoff) -> io::Result<ScratchRoot> {
        let path = handoff.args.first().ok_or_else(|| io::Error::other("handoff lacks the scratch root"))?;
        Ok(ScratchRoot { path: PathBuf::from(path), owner: false })
    }

    /// The benchmark domain inside this root.
    pub fn domain(&self) -> io::Result<shmbus::Domain> {
        shmbus::Domain::with_root("bench", &self.path).map_err(io::Error::other)
    }
}

impl Drop for ScratchRoot {
    fn drop(&mut self) {
        if self.owner {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// The start of a benchmark child process: pins it to `cpu` (if given) and attaches to the
/// scratch root `root` its parent made. Keep the returned root alive as long as the domain.
pub fn child_domain(root: String, cpu: Option<usize>) -> Result<(ScratchRoot, shmbus::Domain), String> {
    if let Some(cpu) = cpu {
        crate::affinity::pin_current_thread(cpu).map_err(|e| format!("cannot pin to CPU {cpu}: {e}"))?;
    }
    let root = ScratchRoot::attach(&Handoff { fds: Vec::new(), args: vec![root] }).map_err(|e| e.to_string())?;
    let domain = root.domain().map_err(|e| e.to_string())?;
    Ok((root, domain))
}

/// The shmbus wait policy for a benchmark mode: spin for ever, or sleep at once (so
/// `block` measures the futex path, comparable with `futex-floor`).
pub fn policy(mode: Mode) -> shmbus::WaitPolicy {
    match mode {
        Mode::Spin => shmbus::WaitPolicy::SPIN,
        Mode::Block | Mode::Async => shmbus::WaitPolicy::BLOCK,
    }
}

/// How long one blocking receive sleeps before it asks the waiter whether the peer lives.
pub const BLOCK_SLICE: Duration = Duration::from_millis(250);

/// Waits with `mode` until `attempt` yields: busy-polling through the waiter, or by calling
/// `block(slice)` (a blocking receive with a timeout) and checking the peer between slices.
#[inline]
pub fn wait_for<T>(
    mode: Mode,
    waiter: &mut Waiter<'_>,
    mut attempt: impl FnMut() -> io::Result<Option<T>>,
    mut block: impl FnMut(Duration) -> io::Result<Option<T>>,
) -> io::Result<T> {
    match mode {
        Mode::Spin => loop {
            if let Some(v) = attempt()? {
                return Ok(v);
            }
            waiter.spin()?;
        },
        Mode::Block | Mode::Async => loop {
            if let Some(v) = block(BLOCK_SLICE)? {
                return Ok(v);
            }
            waiter.check()?;
        },
    }
}

/// For [`Mode::Async`]: the current-thread tokio runtime an endpoint's receives await in
/// (timers on, for the peer checks between slices; no I/O driver).
pub fn async_runtime(mode: Mode) -> io::Result<Option<tokio::runtime::Runtime>> {
    match mode {
        Mode::Async => tokio::runtime::Builder::new_current_thread().enable_time().build().map(Some),
        Mode::Spin | Mode::Block => Ok(None),
    }
}

/// Awaits `fut` in `rt` for at most [`BLOCK_SLICE`]; `None` when the slice ended first (then
/// check the peer, and await a fresh receive: dropping one at the end of a slice loses
/// nothing, the async receives are cancellation-safe).
pub fn await_slice<F: std::future::Future>(rt: &tokio::runtime::Runtime, fut: F) -> Option<F::Output> {
    // The timer is made inside the runtime (it needs its time driver).
    rt.block_on(async { tokio::time::timeout(BLOCK_SLICE, fut).await }).ok()
}

/// Checks the size fits a one-byte-minimum message.
pub fn check_size(params: &Params) -> io::Result<()> {
    if params.size == 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "size must be at least 1"));
    }
    Ok(())
}
