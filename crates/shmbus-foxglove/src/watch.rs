//! Watching a domain for topics that come and go, with inotify (no polling).
//!
//! Two watches: the root directory (for the domain directory itself, which appears with
//! its first channel and goes with its last, `shmbus rm`) and, while it exists, the domain
//! directory (a channel appears when its file is linked to its name, once it is ready, and
//! goes when that name is unlinked). [`Watcher::changed`] returns after each batch of
//! events; the caller then scans the domain, which is what decides what is there: the
//! events only say when to look. Adding the domain's watch before the scan that follows
//! means no channel linked in between is missed.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// What the domain directory's watch reports: names linked, unlinked or moved, and the
/// directory's own removal.
const DOMAIN_EVENTS: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR;
/// What the root's watch reports: directories made, removed or moved.
const ROOT_EVENTS: u32 = libc::IN_CREATE | libc::IN_DELETE | libc::IN_MOVED_FROM | libc::IN_MOVED_TO | libc::IN_ONLYDIR;

/// An inotify instance watching one domain (see the module docs).
#[derive(Debug)]
pub struct Watcher {
    fd: AsyncFd<OwnedFd>,
    domain_dir: PathBuf,
    /// The domain directory's watch, while it exists.
    domain_wd: Option<i32>,
}

impl Watcher {
    /// Watches `root` and the domain directory `domain_dir` in it. Must be called within
    /// the tokio runtime.
    pub fn new(root: &Path, domain_dir: &Path) -> io::Result<Watcher> {
        // SAFETY: inotify_init1 takes flags only; it returns a new descriptor or -1.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a descriptor just returned to us, owned by nothing else.
        let owned = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: an `OwnedFd` keeps its descriptor open, and returns that same descriptor
        // from `as_raw_fd`, for as long as it is owned (here by the `AsyncFd`).
        let fd = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }.map_err(io::Error::from)?;
        let mut w = Watcher { fd, domain_dir: domain_dir.to_owned(), domain_wd: None };
        w.add(root, ROOT_EVENTS)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot watch {}: {e}", root.display())))?;
        w.watch_domain();
        Ok(w)
    }

    fn add(&self, path: &Path, mask: u32) -> io::Result<i32> {
        let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: the descriptor is our inotify instance and `c` a NUL-terminated path that
        // lives across the call.
        let wd = unsafe { libc::inotify_add_watch(self.fd.get_ref().as_raw_fd(), c.as_ptr(), mask) };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(wd)
    }

    /// Watches the domain directory if it exists and is not watched yet.
    fn watch_domain(&mut self) {
        if self.domain_wd.is_none() {
            self.domain_wd = self.add(&self.domain_dir, DOMAIN_EVENTS).ok();
        }
    }

    /// Waits for the next batch of events (and reads all of it).
    pub async fn changed(&mut self) -> io::Result<()> {
        let mut buf = [0u8; 16 * 1024];
        loop {
            let mut guard = self.fd.readable().await?;
            let read = guard.try_io(|fd| {
                // SAFETY: `buf` is writable for its whole length for the duration of the call.
                let n = unsafe { libc::read(fd.get_ref().as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match read {
                Ok(Ok(n)) => {
                    self.note(&buf[..n]);
                    self.watch_domain();
                    return Ok(());
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(Err(e)) => return Err(e),
                // Not readable after all: wait again.
                Err(_would_block) => continue,
            }
        }
    }

    /// Forgets the domain's watch when the kernel has removed it (the directory is gone).
    fn note(&mut self, mut events: &[u8]) {
        // struct inotify_event { int wd; uint32_t mask; uint32_t cookie; uint32_t len; char name[]; }
        const HEAD: usize = 16;
        while events.len() >= HEAD {
            let word = |i: usize| [events[i], events[i + 1], events[i + 2], events[i + 3]];
            let wd = i32::from_ne_bytes(word(0));
            let mask = u32::from_ne_bytes(word(4));
            let len = u32::from_ne_bytes(word(12)) as usize;
            if mask & libc::IN_IGNORED != 0 && Some(wd) == self.domain_wd {
                self.domain_wd = None;
            }
            events = events.get(HEAD + len..).unwrap_or_default();
        }
    }
}
