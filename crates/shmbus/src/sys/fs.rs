//! Filesystem access relative to directory descriptors, never through a symlink.
//!
//! Paths are resolved by the kernel one call at a time, so a directory that another user can
//! write to may change between two calls: a directory checked by one `stat(2)` can be a
//! symlink by the next `open(2)`. The functions here avoid that by working *relative to an
//! open directory descriptor*: open a directory once with [`open_dir_at`] (`O_NOFOLLOW`, so
//! a symlink in its place fails), check what was opened with [`fstat`] (the descriptor, not
//! the name), and then do everything inside it with the `*at` calls below. What the
//! descriptor refers to cannot be swapped afterwards, whatever happens to names.
//!
//! Rules every function follows:
//! * the last component is never followed if it is a symlink (`O_NOFOLLOW`,
//!   `AT_SYMLINK_NOFOLLOW`, `linkat` without `AT_SYMLINK_FOLLOW`);
//! * names are single components (no `/`): a name with a slash is refused with
//!   `InvalidInput` rather than resolved through intermediate directories;
//! * every descriptor is opened `O_CLOEXEC`;
//! * files are opened `O_NONBLOCK`: a FIFO or a device under an expected file name cannot
//!   block the caller in `open(2)`, and [`open_file_at`] looks (with `fstatat`) before it
//!   opens, so a device is never even opened.

use std::ffi::{CString, OsStr, OsString};
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use rustix::fs::{AtFlags, FallocateFlags, FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

/// What a directory entry is, from its mode bits (`S_IFMT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A FIFO (named pipe).
    Fifo,
    /// A Unix-domain socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// Anything else.
    Unknown,
}

impl FileKind {
    /// The kind encoded in `st_mode`.
    pub fn from_mode(mode: u32) -> FileKind {
        FileKind::from_type(FileType::from_raw_mode(mode))
    }

    /// The kind rustix reports (from `st_mode` or a directory entry's `d_type`).
    fn from_type(t: FileType) -> FileKind {
        match t {
            FileType::RegularFile => FileKind::Regular,
            FileType::Directory => FileKind::Directory,
            FileType::Symlink => FileKind::Symlink,
            FileType::Fifo => FileKind::Fifo,
            FileType::Socket => FileKind::Socket,
            FileType::CharacterDevice => FileKind::CharDevice,
            FileType::BlockDevice => FileKind::BlockDevice,
            _ => FileKind::Unknown,
        }
    }

    /// What it is in words, with an article: `a FIFO (named pipe)`, `a symbolic link`, ….
    pub fn describe(self) -> &'static str {
        match self {
            FileKind::Regular => "a regular file",
            FileKind::Directory => "a directory",
            FileKind::Symlink => "a symbolic link",
            FileKind::Fifo => "a FIFO (named pipe)",
            FileKind::Socket => "a socket",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Unknown => "a file of unknown type",
        }
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// The parts of `struct stat` shmbus decides on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// File type.
    pub kind: FileKind,
    /// Permission bits including set-id and sticky (`st_mode & 0o7777`).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// Number of hard links.
    pub nlink: u64,
    /// Device and inode: together they identify the file.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
}

impl Stat {
    fn from_raw(st: &rustix::fs::Stat) -> Stat {
        Stat {
            kind: FileKind::from_mode(st.st_mode),
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            size: st.st_size as u64,
            // `nlink_t` is u64 on x86-64 and u32 on AArch64.
            #[allow(clippy::unnecessary_cast)]
            nlink: st.st_nlink as u64,
            dev: st.st_dev,
            ino: st.st_ino,
        }
    }

    /// Whether `self` and `other` are the same file (same device and inode).
    #[cfg(any(test, feature = "internals"))]
    pub fn same_file(&self, other: &Stat) -> bool {
        self.dev == other.dev && self.ino == other.ino
    }
}

/// Opening a file that must be a regular file failed.
#[derive(Debug)]
pub enum OpenFileError {
    /// Something other than a regular file is under that name (not opened, or closed again).
    NotRegular(FileKind),
    /// The system call failed (`NotFound`, `PermissionDenied`, …).
    Io(io::Error),
}

impl fmt::Display for OpenFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenFileError::NotRegular(k) => write!(f, "is {k}, not a regular file"),
            OpenFileError::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for OpenFileError {}

impl From<io::Error> for OpenFileError {
    fn from(e: io::Error) -> Self {
        OpenFileError::Io(e)
    }
}

/// A single path component as a C string: no `/`, no NUL, not empty, not `.` or `..`.
fn component(name: &OsStr) -> io::Result<CString> {
    let b = name.as_bytes();
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{name:?} is not a single file name")));
    }
    CString::new(b).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file name contains a NUL byte"))
}

/// Retries `f` while it fails with `EINTR`; the error as an [`io::Error`] (same raw code).
fn retry<T>(f: impl FnMut() -> rustix::io::Result<T>) -> io::Result<T> {
    Ok(rustix::io::retry_on_intr(f)?)
}

/// Opens the directory `path`, *following* symlinks: for a directory the caller configured
/// (the root), not for anything found inside one.
///
/// Directories are opened `O_PATH`: the descriptor serves as the base of the `*_at` calls
/// and for [`fstat`], and needs only search permission on the directory (as resolving a path
/// through it would), not read permission. [`list_dir`] opens a readable descriptor of the
/// same directory when it needs one.
pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    retry(|| rustix::fs::open(c.as_c_str(), flags, Mode::empty()))
}

/// Opens the directory `name` inside `dir` with `O_DIRECTORY | O_NOFOLLOW` (and `O_PATH`, see
/// [`open_dir`]): a symlink or anything else that is not a directory under that name fails
/// with `ENOTDIR` or `ELOOP`, never with `NotFound`. Check the result with [`fstat`]
/// (`kind == Directory`, owner, mode) before trusting it.
pub fn open_dir_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    let c = component(name)?;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    retry(|| rustix::fs::openat(dir, c.as_c_str(), flags, Mode::empty()))
}

/// A readable (`O_RDONLY`) descriptor of the directory `dir` refers to (which may be an
/// `O_PATH` descriptor): `openat(dir, ".")`, so no name is resolved again. Needs read
/// permission on the directory.
pub fn reopen_dir_readable(dir: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    retry(|| rustix::fs::openat(dir, c".", flags, Mode::empty()))
}

/// `fstat(2)` of an open descriptor.
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<Stat> {
    Ok(Stat::from_raw(&rustix::fs::fstat(fd)?))
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`: what is under `name` itself (a symlink is
/// reported as [`FileKind::Symlink`], not as its target).
pub fn stat_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Stat> {
    let c = component(name)?;
    let st = retry(|| rustix::fs::statat(dir, c.as_c_str(), AtFlags::SYMLINK_NOFOLLOW))?;
    Ok(Stat::from_raw(&st))
}

/// Opens the existing *regular* file `name` inside `dir`, read-only or read-write, and
/// returns it with its [`Stat`] (taken from the open descriptor).
///
/// Never blocks and never follows a symlink: it looks first (`fstatat`, no follow) and
/// refuses anything but a regular file without opening it (so a device's open routine never
/// runs), then opens with `O_NOFOLLOW | O_NONBLOCK | O_NOCTTY` and checks the descriptor
/// again with `fstat`, which catches a swap between the two calls.
pub fn open_file_at(dir: BorrowedFd<'_>, name: &OsStr, write: bool) -> Result<(File, Stat), OpenFileError> {
    let before = stat_at(dir, name)?;
    if before.kind != FileKind::Regular {
        return Err(OpenFileError::NotRegular(before.kind));
    }
    let c = component(name)?;
    let access = if write { OFlags::RDWR } else { OFlags::RDONLY };
    let flags = access | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = match retry(|| rustix::fs::openat(dir, c.as_c_str(), flags, Mode::empty())) {
        Ok(fd) => fd,
        // O_NOFOLLOW on a symlink: swapped in since the look.
        Err(e) if is_symlink_loop(&e) => return Err(OpenFileError::NotRegular(FileKind::Symlink)),
        Err(e) => return Err(e.into()),
    };
    let st = fstat(fd.as_fd())?;
    if st.kind != FileKind::Regular {
        return Err(OpenFileError::NotRegular(st.kind));
    }
    Ok((File::from(fd), st))
}

/// Creates the new file `name` inside `dir` (`O_CREAT | O_EXCL | O_NOFOLLOW`, read-write) and
/// sets its mode to exactly `mode` with `fchmod`, whatever the umask. Fails with
/// `AlreadyExists` if anything (a symlink included) has that name.
pub fn create_file_at(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> io::Result<File> {
    let c = component(name)?;
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    // Created with no permission bits at all: nobody else can open it before the fchmod.
    let file = File::from(retry(|| rustix::fs::openat(dir, c.as_c_str(), flags, Mode::empty()))?);
    if let Err(e) = fchmod(file.as_fd(), mode) {
        let _ = unlink_at(dir, name);
        return Err(e);
    }
    Ok(file)
}

/// Where [`create_race_free`] failed.
#[derive(Debug)]
pub enum CreateError<E> {
    /// Creating the hidden temporary file failed (the directory does not let us write, …).
    Temp(io::Error),
    /// The caller's `build` step failed; the temporary file is removed.
    Build(E),
    /// Publishing the file under its name failed (other than "it exists").
    Link(io::Error),
}

/// Creates the file `name` in `dir` race-free: a hidden temporary file is created with
/// exactly `mode` ([`create_file_at`]), filled by `build` (sized, initialised, whatever the
/// caller needs), and only then linked under `name` ([`link_at`]). Readers therefore never
/// see a half-built file, and nothing is followed through a symlink. `Ok(None)`: `name`
/// already existed (someone else won the race; the temporary is removed). `build` gets the
/// open file and the temporary's name (for messages).
pub fn create_race_free<T, E>(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    mode: u32,
    build: impl FnOnce(&File, &OsStr) -> Result<T, E>,
) -> Result<Option<(File, T)>, CreateError<E>> {
    static UNIQUE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let unique = super::monotonic_ns().wrapping_add(UNIQUE.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let mut tmp = OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".{}.{unique}", std::process::id()));
    let file = create_file_at(dir, &tmp, mode).map_err(CreateError::Temp)?;
    struct Unlink<'a>(BorrowedFd<'a>, &'a OsStr);
    impl Drop for Unlink<'_> {
        fn drop(&mut self) {
            let _ = unlink_at(self.0, self.1);
        }
    }
    // Removes the temporary on every path: once linked, the file lives on under `name`.
    let _tmp = Unlink(dir, &tmp);
    let built = build(&file, &tmp).map_err(CreateError::Build)?;
    match link_at(dir, &tmp, dir, name) {
        Ok(()) => Ok(Some((file, built))),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(CreateError::Link(e)),
    }
}

/// Sets the mode of an open file exactly (`fchmod(2)`; not on an `O_PATH` descriptor: see
/// [`reopen_dir_readable`] for a directory).
pub fn fchmod(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    // Every bit as given (`from_bits_retain`), as the C call would pass it.
    retry(|| rustix::fs::fchmod(fd, Mode::from_bits_retain(mode)))
}

/// Creates the directory `name` inside `dir` (`mkdirat(2)`; the umask applies: set the exact
/// mode on the opened directory with [`fchmod`] if it matters). `AlreadyExists` if the name
/// is taken, by anything.
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> io::Result<()> {
    let c = component(name)?;
    retry(|| rustix::fs::mkdirat(dir, c.as_c_str(), Mode::from_bits_retain(mode)))
}

/// Gives the file `old` in `old_dir` the additional name `new` in `new_dir` (`linkat(2)`
/// without `AT_SYMLINK_FOLLOW`: a symlink is linked as itself, never its target). Fails with
/// `AlreadyExists` if `new` exists: the atomic "publish under a final name" step.
pub fn link_at(old_dir: BorrowedFd<'_>, old: &OsStr, new_dir: BorrowedFd<'_>, new: &OsStr) -> io::Result<()> {
    let (o, n) = (component(old)?, component(new)?);
    retry(|| rustix::fs::linkat(old_dir, o.as_c_str(), new_dir, n.as_c_str(), AtFlags::empty()))
}

/// Renames `old` in `old_dir` to `new` in `new_dir` (`renameat2(2)`), replacing `new` if it
/// exists, or failing with `AlreadyExists` instead when `no_replace` (`RENAME_NOREPLACE`).
/// A symlink is renamed as itself; neither name is resolved through a symlink.
#[cfg(any(test, feature = "internals"))]
pub fn rename_at(
    old_dir: BorrowedFd<'_>,
    old: &OsStr,
    new_dir: BorrowedFd<'_>,
    new: &OsStr,
    no_replace: bool,
) -> io::Result<()> {
    let (o, n) = (component(old)?, component(new)?);
    use rustix::fs::RenameFlags;
    let flags = if no_replace { RenameFlags::NOREPLACE } else { RenameFlags::empty() };
    retry(|| rustix::fs::renameat_with(old_dir, o.as_c_str(), new_dir, n.as_c_str(), flags))
}

/// Removes the name `name` (not a directory) from `dir` (`unlinkat(2)`). A symlink is removed
/// as itself; nothing outside `dir` is touched.
pub fn unlink_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let c = component(name)?;
    retry(|| rustix::fs::unlinkat(dir, c.as_c_str(), AtFlags::empty()))
}

/// Removes the empty directory `name` from `dir` (`unlinkat(2)` with `AT_REMOVEDIR`; a
/// symlink under `name` is not followed: `ENOTDIR`).
pub fn remove_dir_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let c = component(name)?;
    retry(|| rustix::fs::unlinkat(dir, c.as_c_str(), AtFlags::REMOVEDIR))
}

/// One entry of [`list_dir`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name (never `.` or `..`).
    pub name: OsString,
    /// Its type as the directory reports it (`d_type`), `None` where the filesystem does not
    /// say: ask [`stat_at`]. Either way it is a hint about a name that may change: decide on
    /// what an `*_at` call finds, not on this.
    pub kind: Option<FileKind>,
}

/// The entries of the open directory `dir` (`O_PATH` or readable; read through a fresh
/// readable descriptor of the same directory, from the start). Needs read permission on
/// the directory.
pub fn list_dir(dir: BorrowedFd<'_>) -> io::Result<Vec<DirEntry>> {
    // `getdents64` through rustix's directory stream, which owns (and closes) the descriptor.
    let stream = rustix::fs::Dir::new(reopen_dir_readable(dir)?)?;
    let mut out = Vec::new();
    for ent in stream {
        let ent = ent?;
        let name = ent.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        // `DT_UNKNOWN` (the filesystem does not say) is `FileType::Unknown`.
        let kind = match ent.file_type() {
            FileType::Unknown => None,
            t => Some(FileKind::from_type(t)),
        };
        out.push(DirEntry { name: OsString::from_vec(name.to_vec()), kind });
    }
    Ok(out)
}

/// The effective uid of this process.
pub fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The name of user `uid` from the password database, if it has one.
pub fn user_name(uid: u32) -> Option<String> {
    // libc: the password database is glibc's NSS (`getpwuid_r`), not a system call rustix has.
    let mut buf = vec![0u8; 4096];
    // SAFETY: an all-zero passwd is a valid value of the plain C struct.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; getpwuid_r writes strings into `buf` only.
    let r = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut result) };
    if r != 0 || result.is_null() || pw.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name points into `buf`, NUL-terminated, and `buf` is still alive.
    let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) };
    Some(name.to_string_lossy().into_owned())
}

/// The uid of the user called `name` in the password database, if there is one.
pub fn user_uid(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // libc: the password database is glibc's NSS (`getpwnam_r`), not a system call rustix has.
    let mut buf = vec![0u8; 4096];
    // SAFETY: an all-zero passwd is a valid value of the plain C struct.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; getpwnam_r writes strings into `buf` only.
    let r = unsafe { libc::getpwnam_r(c.as_ptr(), &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut result) };
    if r != 0 || result.is_null() {
        return None;
    }
    Some(pw.pw_uid)
}

/// Open flags that never follow a symlink in the last component and close on exec, for
/// `OpenOptionsExt::custom_flags` on a path the caller builds itself.
pub const NOFOLLOW_CLOEXEC: i32 = OFlags::NOFOLLOW.union(OFlags::CLOEXEC).bits() as i32;

/// [`NOFOLLOW_CLOEXEC`] plus `O_NONBLOCK`: a FIFO planted under the name cannot block the
/// open.
pub const NOFOLLOW_NONBLOCK_CLOEXEC: i32 =
    OFlags::NOFOLLOW.union(OFlags::NONBLOCK).union(OFlags::CLOEXEC).bits() as i32;

/// Allocates `offset..offset+len` of `file` (`fallocate(2)` mode 0: only allocates and
/// extends, never shrinks), so running out of space is an error now rather than a SIGBUS on
/// first touch. `Ok(false)`: the filesystem has no `fallocate` (`EOPNOTSUPP`); the file is
/// unchanged and still usable sparse, or the caller extends it another way. Any other
/// failure (such as `ENOSPC`, see [`is_no_space`]) is an error.
pub fn fallocate(file: &File, offset: u64, len: u64) -> io::Result<bool> {
    match rustix::fs::fallocate(file, FallocateFlags::empty(), offset, len) {
        Ok(()) => Ok(true),
        Err(Errno::OPNOTSUPP) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// A `flock(2)` operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlockOp {
    /// `LOCK_SH`: a shared lock, waiting for it.
    Shared,
    /// `LOCK_EX`: an exclusive lock, waiting for it.
    Exclusive,
    /// `LOCK_EX | LOCK_NB`: an exclusive lock, or `WouldBlock` at once if someone holds one.
    ExclusiveNonBlocking,
    /// `LOCK_UN`: releases the lock.
    Unlock,
}

/// `flock(2)` on `file`, retrying when a signal interrupts the wait (`EINTR`).
pub fn flock(file: &File, op: FlockOp) -> io::Result<()> {
    let op = match op {
        FlockOp::Shared => FlockOperation::LockShared,
        FlockOp::Exclusive => FlockOperation::LockExclusive,
        FlockOp::ExclusiveNonBlocking => FlockOperation::NonBlockingLockExclusive,
        FlockOp::Unlock => FlockOperation::Unlock,
    };
    retry(|| rustix::fs::flock(file, op))
}

/// Whether `file` is on tmpfs (`fstatfs(2)`; `false` if that fails).
pub fn is_tmpfs(file: &File) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let Ok(s) = rustix::fs::fstatfs(file) else { return false };
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let magic = i64::from(s.f_type);
    magic == TMPFS_MAGIC
}

/// `fdatasync(2)`: the file's data (and the metadata needed to read it back) reach the disk.
pub fn fdatasync(file: &File) -> io::Result<()> {
    Ok(rustix::fs::fdatasync(file)?)
}

/// Whether `e` is `ELOOP`: with `O_NOFOLLOW` (every open here), the last component is a
/// symlink.
pub fn is_symlink_loop(e: &io::Error) -> bool {
    e.raw_os_error() == Some(Errno::LOOP.raw_os_error())
}

/// Whether `e` is `ENOTDIR`: a name opened as a directory is something else.
pub fn is_not_directory(e: &io::Error) -> bool {
    e.raw_os_error() == Some(Errno::NOTDIR.raw_os_error())
}

/// Whether `e` is `EXDEV`: a link or rename across filesystems, which needs a copy instead.
pub fn is_cross_device(e: &io::Error) -> bool {
    e.raw_os_error() == Some(Errno::XDEV.raw_os_error())
}

/// Whether `e` is `ENOSPC`: the filesystem is full.
pub fn is_no_space(e: &io::Error) -> bool {
    e.raw_os_error() == Some(Errno::NOSPC.raw_os_error())
}

/// A file in memory with no name (`memfd_create`, close-on-exec), `name` shown only in
/// `/proc/<pid>/fd`.
pub fn anonymous_file(name: &str) -> io::Result<File> {
    Ok(File::from(rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::CLOEXEC)?))
}

/// Opens `path` for reading without blocking (a FIFO opens at once instead of waiting for a
/// writer; the caller refuses what is not a regular file), close-on-exec. A symlink is
/// followed.
pub fn open_read_nonblocking(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC).open(path)
}

/// `uid 1001 (alice)`, or `uid 4242` for a uid without an account.
pub(crate) fn describe_uid(uid: u32) -> String {
    match user_name(uid) {
        Some(n) => format!("uid {uid} ({n})"),
        None => format!("uid {uid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("shmbus-fs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    #[test]
    fn finds_without_following_and_without_blocking() {
        let p = scratch("kinds");
        std::fs::write(p.join("f"), b"x").unwrap();
        std::os::unix::fs::symlink(p.join("f"), p.join("l")).unwrap();
        std::fs::create_dir(p.join("d")).unwrap();
        let dir = open_dir(&p).unwrap();
        let d = dir.as_fd();
        rustix::fs::mknodat(d, "p", FileType::Fifo, Mode::from_bits_retain(0o600), 0).unwrap();
        assert!(open_file_at(d, OsStr::new("f"), true).is_ok());
        for (name, kind) in [("l", FileKind::Symlink), ("d", FileKind::Directory), ("p", FileKind::Fifo)] {
            match open_file_at(d, OsStr::new(name), true) {
                Err(OpenFileError::NotRegular(k)) => assert_eq!(k, kind, "{name}"),
                other => panic!("{name}: {other:?}"),
            }
        }
        assert!(open_dir_at(d, OsStr::new("d")).is_ok());
        assert!(is_not_directory(&open_dir_at(d, OsStr::new("l")).unwrap_err()));
        assert!(open_file_at(d, OsStr::new("a/b"), false).is_err());
        let mut names: Vec<_> = list_dir(d).unwrap().into_iter().map(|e| e.name).collect();
        names.sort();
        assert_eq!(names, ["d", "f", "l", "p"]);
        assert_eq!(list_dir(d).unwrap().len(), 4, "listing twice sees everything twice");

        let old = rustix::process::umask(Mode::from_bits_retain(0o077));
        let f = create_file_at(d, OsStr::new("new"), 0o640).unwrap();
        rustix::process::umask(old);
        assert_eq!(fstat(f.as_fd()).unwrap().mode, 0o640);
        assert_eq!(create_file_at(d, OsStr::new("l"), 0o600).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        link_at(d, OsStr::new("new"), d, OsStr::new("new2")).unwrap();
        unlink_at(d, OsStr::new("l")).unwrap();
        rename_at(d, OsStr::new("new2"), d, OsStr::new("new3"), true).unwrap();
        let e = rename_at(d, OsStr::new("new3"), d, OsStr::new("new"), true).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        rename_at(d, OsStr::new("new3"), d, OsStr::new("new"), false).unwrap();
        assert!(p.join("f").exists(), "unlinking a symlink removed its target");
        let _ = std::fs::remove_dir_all(&p);
    }
}
