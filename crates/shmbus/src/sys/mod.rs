//! The operating-system layer: everything that talks to the kernel lives here.
//!
//! Nothing above this module calls `libc` directly. Each function is a thin, safe wrapper
//! that turns `errno` into [`std::io::Error`] and documents the one kernel behaviour it
//! relies on. The system calls go through `rustix`; `libc` remains only where rustix has no
//! such call or the context forbids it (the SIGBUS handler in [`sigbus`], the password
//! database lookups in [`fs`]).

pub mod fs;
pub mod futex;
pub mod lock;
pub mod mmap;
pub mod process;
pub mod sigbus;
pub mod time;
pub mod watch;

pub use futex::{futex_wait, futex_waitv, futex_wake, waitv_supported, WaitOutcome, WaitvEntry};
// For the async waiter thread, which never dereferences a channel's word.
#[cfg(feature = "tokio")]
pub use futex::{futex_probe, Probe};
#[cfg(any(test, feature = "internals"))]
pub use mmap::ReadOnlyMapping;
pub use mmap::{Access, Mapping, ReadOnly, ReadWrite};
pub use process::{process_is_alive, ProcessId};
#[cfg(any(test, feature = "internals"))]
pub use time::coarse_monotonic_ns;
pub use time::monotonic_ns;

/// Opens the existing file `path` for reading (and writing, with `write`), never following a
/// symlink in its last component (`O_NOFOLLOW`), never blocking in `open(2)` on a FIFO or a
/// device (`O_NONBLOCK`, `O_NOCTTY`), closed on exec. The caller must still check that it got
/// a regular file (`metadata().is_file()`); [`fs::open_file_at`] does both, relative to a
/// directory descriptor, and is what segments use.
#[cfg(any(test, feature = "internals"))]
pub fn open_existing(path: &std::path::Path, write: bool) -> std::io::Result<std::fs::File> {
    use rustix::fs::OFlags;
    use std::os::unix::fs::OpenOptionsExt;
    let flags = OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    std::fs::OpenOptions::new().read(true).write(write).custom_flags(flags.bits() as i32).open(path)
}

/// The system page size, read once (from the auxiliary vector, cached by rustix).
pub fn page_size() -> usize {
    rustix::param::page_size()
}
