//! Waiting for names to appear in directories, without polling: inotify.
//!
//! A [`DirWatch`] is one inotify instance watching any number of directories for names that
//! come (`IN_CREATE`, `IN_MOVED_TO`: a channel is `link(2)`ed to its name fully built, a
//! domain directory is made with `mkdirat`) or go (`IN_DELETE`, `IN_MOVED_FROM`), and for the
//! directory itself going away. A directory is
//! watched through the descriptor the caller opened and checked (`/proc/self/fd/N`, which
//! the kernel resolves to that very directory, not by its name again), so a name swapped for
//! a symlink is never followed. [`DirWatch::wait`] sleeps in `poll(2)` until an event or the
//! timeout and discards the events: the caller looks again at what it waits for.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::inotify::{self, CreateFlags, WatchFlags};

/// One inotify instance (see the [module docs](self)).
#[derive(Debug)]
pub struct DirWatch {
    fd: OwnedFd,
}

impl AsFd for DirWatch {
    /// The inotify descriptor: readable while events are queued (for an event loop).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl DirWatch {
    /// A watch over no directory yet.
    pub fn new() -> io::Result<DirWatch> {
        Ok(DirWatch { fd: inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)? })
    }

    /// Also wakes [`wait`](Self::wait) when a name is created in, moved into, removed from or
    /// moved out of the open directory `dir`, or when `dir` is removed or moved. Adding the same directory twice
    /// is harmless (one watch per directory).
    pub fn add(&self, dir: BorrowedFd<'_>) -> io::Result<()> {
        let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        let flags = WatchFlags::CREATE
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR;
        inotify::add_watch(self.fd.as_fd(), path.as_str(), flags)?;
        Ok(())
    }

    /// Sleeps until an event on a watched directory or `timeout`; returns whether events
    /// came (they are consumed).
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        let ts = Timespec { tv_sec: timeout.as_secs() as i64, tv_nsec: i64::from(timeout.subsec_nanos()) };
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        let n = match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            return Ok(false);
        }
        self.drain()
    }

    /// Consumes the events there are now, without waiting; returns whether there were any.
    /// What happened does not matter, only that something did.
    pub fn drain(&self) -> io::Result<bool> {
        let mut any = false;
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(self.fd.as_fd(), &mut buf);
        loop {
            match reader.next() {
                Ok(_) => any = true,
                Err(rustix::io::Errno::AGAIN) => return Ok(any),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}
