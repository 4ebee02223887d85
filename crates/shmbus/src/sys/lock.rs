//! Byte locks that say a process is alive, whatever PID namespace it and the asker are in.
//!
//! An open-file-description lock (`fcntl(F_OFD_SETLK)`) belongs to the open file
//! description, not to a pid: the kernel drops it when the last descriptor of that
//! description closes, which at the latest is when the process holding it dies, however it
//! dies. Another process asks with `F_OFD_GETLK`, which reports a conflicting lock held
//! through any *other* description (locks of one description never conflict with each
//! other). Neither call involves a pid, so both work across PID namespaces, where a pid read
//! from shared memory means nothing to the reader.
//!
//! Locks are taken far past any data ([`LOCK_BASE`] and up): a lock past the end of a file
//! is allowed and changes nothing in it. `F_OFD_GETLK` needs only a descriptor open for
//! reading, so read-only tools can ask too; `F_OFD_SETLK` of a write lock needs one open for
//! writing.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Offset of the first lock byte: far past any file shmbus writes (`2^62`, below the largest
/// `off_t`).
pub const LOCK_BASE: u64 = 1 << 62;

/// Where, from [`LOCK_BASE`], the holder of a journal's named reader `k` holds its byte on the
/// journal's metadata file: `READERS + k`, apart from the appenders' participant bytes (`0..`
/// the participant count).
pub const READERS: u64 = 1 << 20;

/// Where, from [`LOCK_BASE`], a channel's creator holds its byte on the file it creates: from
/// the moment the temporary file exists, for as long as the creating handle keeps the file
/// open.
pub const CREATOR: u64 = 1 << 21;

fn flock_at(kind: i32, offset: u64) -> libc::flock {
    // SAFETY: `flock` is a plain C struct of integers, for which all zeros is a valid value
    // (and what `F_OFD_*` requires of `l_pid`).
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = (LOCK_BASE + offset) as libc::off_t;
    fl.l_len = 1;
    fl
}

fn fcntl_lock(fd: BorrowedFd<'_>, cmd: i32, fl: &mut libc::flock) -> io::Result<()> {
    // SAFETY: `fd` is an open descriptor for the duration of the call (borrowed), and `fl`
    // points to a valid `flock` that the kernel reads (and, for GETLK, writes) only during
    // the call.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), cmd, fl as *mut libc::flock) };
    if r == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Takes the write lock on byte `LOCK_BASE + offset` through `fd`'s open file description,
/// without waiting. `Ok(false)`: another description holds a lock on it.
pub fn try_lock_byte(fd: BorrowedFd<'_>, offset: u64) -> io::Result<bool> {
    let mut fl = flock_at(libc::F_WRLCK, offset);
    match fcntl_lock(fd, libc::F_OFD_SETLK, &mut fl) {
        Ok(()) => Ok(true),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Releases this description's lock on byte `LOCK_BASE + offset` (none held: no effect).
pub fn unlock_byte(fd: BorrowedFd<'_>, offset: u64) -> io::Result<()> {
    let mut fl = flock_at(libc::F_UNLCK, offset);
    fcntl_lock(fd, libc::F_OFD_SETLK, &mut fl)
}

/// Whether a description other than `fd`'s holds a lock on byte `LOCK_BASE + offset`.
pub fn byte_is_locked(fd: BorrowedFd<'_>, offset: u64) -> io::Result<bool> {
    let mut fl = flock_at(libc::F_WRLCK, offset);
    fcntl_lock(fd, libc::F_OFD_GETLK, &mut fl)?;
    Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
}

/// Whether an owner recorded in PID namespace `pidns` lives in another namespace than the
/// caller (0, unknown, never does: the pid is then all there is).
pub fn is_foreign(pidns: u32) -> bool {
    pidns != 0 && pidns != pid_namespace()
}

/// Whether the owner of byte `LOCK_BASE + offset` of `fd`'s file, recorded in PID namespace
/// `pidns`, is alive: `by_pid` (its pid and start time) in the caller's namespace or when the
/// namespace is unknown, whether another description holds the byte in another namespace
/// (where the pid means nothing). A file system that refuses locks leaves the pid.
pub fn owner_alive(fd: BorrowedFd<'_>, offset: u64, pidns: u32, by_pid: impl FnOnce() -> bool) -> bool {
    if !is_foreign(pidns) {
        return by_pid();
    }
    byte_is_locked(fd, offset).unwrap_or_else(|_| by_pid())
}

/// The calling process's PID namespace, as the inode number of `/proc/self/ns/pid` (inode
/// numbers of namespaces fit in 32 bits); 0 when it cannot be read (no `/proc`). Read once:
/// a process never changes PID namespace (`unshare(CLONE_NEWPID)` moves only its future
/// children).
pub fn pid_namespace() -> u32 {
    use std::os::unix::fs::MetadataExt;
    use std::sync::OnceLock;
    static NS: OnceLock<u32> = OnceLock::new();
    *NS.get_or_init(|| {
        std::fs::metadata("/proc/self/ns/pid").ok().and_then(|m| u32::try_from(m.ino()).ok()).unwrap_or(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn scratch() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("shmbus-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("f")
    }

    #[test]
    fn another_description_sees_the_lock_and_the_holder_does_not() {
        let path = scratch();
        std::fs::write(&path, b"x").unwrap();
        let holder = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        let other = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        let read_only = std::fs::File::open(&path).unwrap();
        assert!(try_lock_byte(holder.as_fd(), 3).unwrap());
        assert!(try_lock_byte(holder.as_fd(), 3).unwrap(), "a description's own lock never conflicts");
        assert!(!byte_is_locked(holder.as_fd(), 3).unwrap());
        assert!(byte_is_locked(other.as_fd(), 3).unwrap());
        assert!(byte_is_locked(read_only.as_fd(), 3).unwrap(), "a read-only descriptor can ask");
        assert!(!byte_is_locked(other.as_fd(), 4).unwrap(), "one byte only");
        assert!(!try_lock_byte(other.as_fd(), 3).unwrap());
        unlock_byte(holder.as_fd(), 3).unwrap();
        assert!(!byte_is_locked(other.as_fd(), 3).unwrap());
        assert!(try_lock_byte(holder.as_fd(), 3).unwrap());
        drop(holder);
        assert!(!byte_is_locked(other.as_fd(), 3).unwrap(), "closing the description drops its locks");
        assert_eq!(std::fs::read(&path).unwrap(), b"x", "the file is unchanged");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn pid_namespace_is_known() {
        assert_ne!(pid_namespace(), 0);
    }
}
