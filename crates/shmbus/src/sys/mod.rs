//! The operating-system layer: everything that talks to the kernel lives here.
//!
//! Nothing above this module calls `libc` directly. Each function is a thin, safe wrapper
//! that turns `errno` into [`std::io::Error`] and documents the one kernel behaviour it
//! relies on.

pub mod fs;
pub mod futex;
pub mod mmap;
pub mod process;
pub mod sigbus;
pub mod time;

pub use futex::{futex_wait, futex_waitv, futex_wake, waitv_supported, WaitOutcome, WaitvEntry};
pub use mmap::Mapping;
pub use process::{process_is_alive, ProcessId};
pub use time::{coarse_monotonic_ns, monotonic_ns};

/// Opens the existing file `path` for reading (and writing, with `write`), never following a
/// symlink in its last component (`O_NOFOLLOW`), never blocking in `open(2)` on a FIFO or a
/// device (`O_NONBLOCK`, `O_NOCTTY`), closed on exec. The caller must still check that it got
/// a regular file (`metadata().is_file()`); [`fs::open_file_at`] does both, relative to a
/// directory descriptor, and is what segments use.
pub fn open_existing(path: &std::path::Path, write: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
}

/// The system page size, read once.
pub fn page_size() -> usize {
    use std::sync::OnceLock;
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if v <= 0 {
            4096
        } else {
            v as usize
        }
    })
}
