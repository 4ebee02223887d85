//! `journal`: two shmbus journals, `ping` and `pong` (one per direction), in a temporary
//! directory on a real filesystem that the ping side creates and removes. Each side appends
//! (copy) to one journal and live-tails the other, so one round trip is append → tail →
//! append → tail and RTT/2 is one append→tail hop. Spin mode busy-polls `Tailer::try_next`;
//! block mode sleeps in `Tailer::recv_ref_timeout` with [`shmbus::WaitPolicy::BLOCK`].
//!
//! The durability (`none`, `flush`, `periodic`) and the parent directory are properties of
//! the ping side's [`JournalTransport`]; the echo side opens the existing journals, which
//! keep the configuration they were created with, so it needs only the directory.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use shmbus::journal::{
    Appender, Durability, Journal, JournalConfig, JournalRecvTimeoutError, JournalTryRecvError, RollCycle, Tailer,
};

use super::shmbus_kinds::{check_size, policy, wait_for};
use super::{Endpoint, Handoff, Mode, Params, Transport};
use crate::waiter::Waiter;

/// shmbus journals.
#[derive(Debug)]
pub struct JournalTransport {
    /// Durability the ping side creates the journals with.
    pub durability: Durability,
    /// Where the temporary directory goes (`None`: `std::env::temp_dir()`).
    pub parent: Option<PathBuf>,
}

/// The transport in the list: durability `none`, in the system's temporary directory.
pub static JOURNAL: JournalTransport = JournalTransport { durability: Durability::None, parent: None };

/// A temporary directory for one run, removed on drop by the side that made it.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
    owner: bool,
}

impl TempDir {
    /// Makes `shmbus-bench-<tag>-<pid>-<n>` under `parent` (default: the system's
    /// temporary directory).
    pub fn create(parent: Option<&Path>, tag: &str) -> io::Result<TempDir> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let base = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let path =
            base.join(format!("shmbus-bench-{tag}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&path)?;
        Ok(TempDir { path, owner: true })
    }

    /// A directory made by the other side (not removed by this one).
    pub fn borrowed(path: PathBuf) -> TempDir {
        TempDir { path, owner: false }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.owner {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Journal options of every benchmark journal: no time-based roll (a roll at midnight in
/// the middle of a run would be noise), everything else the library's defaults.
pub fn options(durability: Durability) -> JournalConfig {
    JournalConfig::default().roll(RollCycle::Never).durability(durability)
}

/// Opens an existing journal (the echo side, appender processes).
pub fn open_existing(dir: &Path) -> io::Result<Journal> {
    Journal::open(dir).map_err(|e| io::Error::other(format!("{}: {e}", dir.display())))
}

fn end(dir: TempDir, params: &Params, tx: &str, rx: &str, create: Option<Durability>) -> io::Result<Box<dyn Endpoint>> {
    check_size(params)?;
    let open = |name: &str| match create {
        Some(d) => Journal::create_or_open(dir.path().join(name), &options(d)).map_err(io::Error::other),
        None => open_existing(&dir.path().join(name)),
    };
    let tx = open(tx)?;
    let rx = open(rx)?;
    let appender = tx.appender().map_err(io::Error::other)?;
    let mut tailer = rx.tailer().map_err(io::Error::other)?;
    tailer.set_wait_policy(policy(params.mode));
    Ok(Box::new(JournalEnd { appender, tailer, mode: params.mode, _journals: (tx, rx), _dir: dir }))
}

impl Transport for JournalTransport {
    fn name(&self) -> &'static str {
        "journal"
    }

    fn open(&self, params: &Params) -> io::Result<(Box<dyn Endpoint>, Handoff)> {
        let dir = TempDir::create(self.parent.as_deref(), "journal")?;
        let handoff = Handoff { fds: Vec::new(), args: vec![dir.path().display().to_string()] };
        Ok((end(dir, params, "ping", "pong", Some(self.durability))?, handoff))
    }

    fn attach(&self, params: &Params, handoff: Handoff) -> io::Result<Box<dyn Endpoint>> {
        let path = handoff.args.first().ok_or_else(|| io::Error::other("handoff lacks the journal directory"))?;
        end(TempDir::borrowed(PathBuf::from(path)), params, "pong", "ping", None)
    }
}

/// Field order matters: endpoints close before their journals, the directory goes last.
struct JournalEnd {
    appender: Appender,
    tailer: Tailer,
    mode: Mode,
    _journals: (Journal, Journal),
    _dir: TempDir,
}

/// A tailer error as an I/O error.
pub fn read_error(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl Endpoint for JournalEnd {
    #[inline]
    fn send(&mut self, msg: &[u8], _waiter: &mut Waiter<'_>) -> io::Result<()> {
        self.appender.send(msg).map(drop).map_err(io::Error::other)
    }

    #[inline]
    fn recv(&mut self, buf: &mut Vec<u8>, waiter: &mut Waiter<'_>) -> io::Result<()> {
        let buf = buf.as_mut_slice();
        let t = std::cell::RefCell::new(&mut self.tailer);
        let b = std::cell::RefCell::new(buf);
        let copy = |data: &[u8]| {
            let mut b = b.borrow_mut();
            if data.len() != b.len() {
                return Err(io::Error::other(format!("received {} bytes, expected {}", data.len(), b.len())));
            }
            b.copy_from_slice(data);
            Ok(Some(()))
        };
        wait_for(
            self.mode,
            waiter,
            || match t.borrow_mut().try_recv_ref() {
                Ok(e) => copy(e.data()),
                Err(JournalTryRecvError::Empty) => Ok(None),
                Err(e) => Err(read_error(e)),
            },
            |slice: Duration| match t.borrow_mut().recv_ref_timeout(slice) {
                Ok(e) => copy(e.data()),
                Err(JournalRecvTimeoutError::Timeout) => Ok(None),
                Err(e) => Err(read_error(e)),
            },
        )
    }
}
