//! Domains: namespaces of channels, each a directory under the root, and the trust policy
//! that decides whose directories and files a process accepts.
//!
//! The root is `/dev/shm` unless `SHMBUS_ROOT` or [`Domain::with_root`] says otherwise; a
//! domain `robot1` keeps its channels in `<root>/shmbus.robot1/`, one file per channel.
//!
//! # Never through a symlink
//!
//! The root is the caller's configuration and is opened as given (symlinks followed). Every
//! thing *inside* it may have been put there by another local user (`/dev/shm` is writable by
//! everyone), so it is reached only through directory descriptors (the `*at` calls): the
//! domain directory is opened `O_DIRECTORY | O_NOFOLLOW` relative to the root and checked on
//! the open descriptor ([`DomainDir`]); channel files are opened, created, linked, listed and
//! removed relative to that descriptor, non-blocking and only if they are regular files. A
//! symlink, FIFO, socket or device under a domain's or a channel's name is refused with an
//! error that says what was found; a directory swapped for a symlink between two calls is
//! never followed, because the second call does not resolve the name again.
//!
//! # Trust
//!
//! A process accepts a domain directory and a channel file ([`TrustPolicy`]) only when it is
//! owned by the process's effective uid, by root, or by a uid it trusts explicitly
//! ([`Domain::trust_uid`], or the `SHMBUS_TRUST_UIDS` environment variable for programs that
//! do not say). A domain directory other users may write to must have the sticky bit. Anything
//! else is [`OpenError::Untrusted`], for creating, publishing and reading alike: a channel
//! planted by another user could feed the process forged messages or collect what it
//! publishes. The full policy, and how to share channels between users on purpose, is in
//! `docs/trust.md`.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::error::{OpenError, WaitForError};
use crate::name::{validate_name, DOMAIN_DIR_PREFIX};
use crate::sys::fs::{self, FileKind, OpenFileError, Stat};

/// Default root directory for segment files.
pub const DEFAULT_ROOT: &str = "/dev/shm";
/// Environment variable overriding the root directory.
pub const ROOT_ENV: &str = "SHMBUS_ROOT";
/// Environment variable listing further uids (or user names) to trust, separated by commas
/// or spaces: `SHMBUS_TRUST_UIDS=1001,svc-camera`. Read by [`Domain::new`] and
/// [`Domain::with_root`].
pub const TRUST_ENV: &str = "SHMBUS_TRUST_UIDS";
/// Mode of a domain directory shmbus creates (set exactly, whatever the umask): everyone may
/// look up channels in it, only the owner may add or remove them. Each channel file carries
/// its own mode (0600 by default), which is what protects its contents.
pub const DOMAIN_DIR_MODE: u32 = 0o755;

/// Whose domain directories and channel files a process accepts.
///
/// Trusted owners are: this process's effective uid, root (uid 0), and the uids added with
/// [`trust_uid`](Self::trust_uid). Root is trusted by everyone because root can do anything
/// to the process anyway; root itself trusts no other user unless told to.
///
/// * A **domain directory** is accepted if it is a real directory (never a symlink) owned by
///   a trusted uid, and, if others (not just its group) may write to it, it has the sticky
///   bit (like `/dev/shm`), so that nobody can remove or replace a file they do not own. A
///   group-writable directory is accepted: its trusted owner chose to share it with that
///   group.
/// * A **channel file** is accepted if it is a regular file owned by a trusted uid.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TrustPolicy {
    extra: Vec<u32>,
}

impl TrustPolicy {
    /// Trusts this process's effective uid and root only.
    pub fn new() -> TrustPolicy {
        TrustPolicy::default()
    }

    /// [`new`](Self::new) plus the uids or user names listed in `SHMBUS_TRUST_UIDS` (commas
    /// or spaces between them). An unknown user name is an [`OpenError::InvalidTrustList`]:
    /// silently trusting fewer users would make a typo look like a planted channel.
    pub fn from_env() -> Result<TrustPolicy, OpenError> {
        match std::env::var_os(TRUST_ENV) {
            None => Ok(TrustPolicy::new()),
            Some(v) => TrustPolicy::parse(&v.to_string_lossy()).map_err(|e| match e {
                OpenError::InvalidTrustList { what } => {
                    OpenError::InvalidTrustList { what: format!("{TRUST_ENV}: {what}") }
                }
                e => e,
            }),
        }
    }

    /// Parses a list like `1001, svc-camera` (uids or user names, commas or spaces between).
    /// A name without an account is [`OpenError::InvalidTrustList`].
    pub fn parse(list: &str) -> Result<TrustPolicy, OpenError> {
        let mut p = TrustPolicy::new();
        for item in list.split(|c: char| c == ',' || c.is_whitespace()).filter(|s| !s.is_empty()) {
            let uid = match item.parse::<u32>() {
                Ok(uid) => uid,
                Err(_) => fs::user_uid(item).ok_or_else(|| OpenError::InvalidTrustList {
                    what: format!(
                        "no user named {item:?} in the list of users to trust; list uids or existing user names separated by commas"
                    ),
                })?,
            };
            p = p.trust_uid(uid);
        }
        Ok(p)
    }

    /// Also trusts `uid`: its domain directories and channel files are accepted as this
    /// process's own. Do this only for a user whose channels you mean to share.
    pub fn trust_uid(mut self, uid: u32) -> TrustPolicy {
        if !self.extra.contains(&uid) {
            self.extra.push(uid);
        }
        self
    }

    /// The uids trusted beyond this process's own and root.
    pub fn extra_uids(&self) -> &[u32] {
        &self.extra
    }

    /// Whether files owned by `uid` are accepted.
    pub fn trusts(&self, uid: u32) -> bool {
        uid == 0 || uid == fs::effective_uid() || self.extra.contains(&uid)
    }

    /// Checks an opened domain directory.
    pub(crate) fn check_dir(&self, path: &Path, st: &Stat) -> Result<(), OpenError> {
        if !self.trusts(st.uid) {
            return Err(OpenError::Untrusted {
                path: path.to_owned(),
                owner_uid: st.uid,
                why: format!(
                    "the domain directory belongs to {}, whom this process does not trust; {}",
                    fs::describe_uid(st.uid),
                    untrusted_fix(st.uid, "directory", path)
                ),
            });
        }
        if st.mode & 0o002 != 0 && st.mode & 0o1000 == 0 {
            return Err(OpenError::Untrusted {
                path: path.to_owned(),
                owner_uid: st.uid,
                why: format!(
                    "the domain directory (mode {:04o}) is writable by every user and has no sticky bit, so anyone could replace its channels; `chmod o-w` or `chmod +t` it",
                    st.mode
                ),
            });
        }
        Ok(())
    }

    /// Checks an opened channel file.
    pub(crate) fn check_file(&self, path: &Path, st: &Stat) -> Result<(), OpenError> {
        if self.trusts(st.uid) {
            return Ok(());
        }
        Err(OpenError::Untrusted {
            path: path.to_owned(),
            owner_uid: st.uid,
            why: format!(
                "the channel file belongs to {}, whom this process does not trust; {}",
                fs::describe_uid(st.uid),
                untrusted_fix(st.uid, "file", path)
            ),
        })
    }
}

/// What to do about a directory or file owned by an untrusted `uid`.
fn untrusted_fix(uid: u32, what: &str, path: &Path) -> String {
    format!(
        "if that user planted it, remove the {what} (`rm -r {}`, as its owner or root); to share channels with that user on purpose, trust them: `{TRUST_ENV}={uid}` or `Domain::trust_uid({uid})` (see docs/trust.md)",
        path.display()
    )
}

/// A namespace of channels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    name: String,
    root: PathBuf,
    trust: TrustPolicy,
}

/// The root in effect: `SHMBUS_ROOT` if set and non-empty, else `/dev/shm`.
pub fn default_root() -> PathBuf {
    match std::env::var_os(ROOT_ENV) {
        Some(r) if !r.is_empty() => PathBuf::from(r),
        _ => PathBuf::from(DEFAULT_ROOT),
    }
}

impl Domain {
    /// The domain `name` under the default root, trusting what `SHMBUS_TRUST_UIDS` lists.
    pub fn new(name: &str) -> Result<Domain, OpenError> {
        Domain::with_root(name, default_root())
    }

    /// The domain `name` under an explicit root directory, trusting what `SHMBUS_TRUST_UIDS`
    /// lists (see [`TrustPolicy::from_env`]).
    pub fn with_root(name: &str, root: impl Into<PathBuf>) -> Result<Domain, OpenError> {
        validate_name(name)?;
        Ok(Domain { name: name.to_owned(), root: root.into(), trust: TrustPolicy::from_env()? })
    }

    /// This domain, also trusting directories and channel files owned by `uid` (see
    /// [`TrustPolicy`]): how a process deliberately uses channels another user created.
    pub fn trust_uid(mut self, uid: u32) -> Domain {
        self.trust = self.trust.trust_uid(uid);
        self
    }

    /// This domain with exactly `policy` (replacing what the environment said).
    pub fn with_trust(mut self, policy: TrustPolicy) -> Domain {
        self.trust = policy;
        self
    }

    /// The trust policy in effect.
    pub fn trust(&self) -> &TrustPolicy {
        &self.trust
    }

    /// The domain's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory holding this domain's channel files.
    pub fn dir(&self) -> PathBuf {
        self.root.join(self.dir_name())
    }

    fn dir_name(&self) -> String {
        format!("{DOMAIN_DIR_PREFIX}{}", self.name)
    }

    /// The file of channel `name` (validated).
    pub fn channel_path(&self, name: &str) -> Result<PathBuf, OpenError> {
        validate_name(name)?;
        Ok(self.dir().join(name))
    }

    /// Opens the existing domain directory without following a symlink and checks it against
    /// the trust policy. [`OpenError::NotFound`] if the root or the directory does not exist.
    pub fn open_dir(&self) -> Result<DomainDir, OpenError> {
        let root = match fs::open_dir(&self.root) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(OpenError::NotFound { path: self.dir() }),
            Err(e) => return Err(OpenError::io(&self.root, e)),
        };
        self.open_dir_in(root.as_fd())
    }

    fn open_dir_in(&self, root: BorrowedFd<'_>) -> Result<DomainDir, OpenError> {
        let path = self.dir();
        let name = self.dir_name();
        let mut attempts = 0;
        let fd = loop {
            attempts += 1;
            match fs::open_dir_at(root, OsStr::new(&name)) {
                Ok(fd) => break fd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(OpenError::NotFound { path }),
                Err(e) if fs::is_symlink_loop(&e) || fs::is_not_directory(&e) => {
                    // Something other than a directory: say what. If a directory is back by
                    // the time we look, the name is being swapped: try again a few times.
                    let st = fs::stat_at(root, OsStr::new(&name)).map_err(|e| OpenError::io(&path, e))?;
                    if st.kind == FileKind::Directory && attempts < 8 {
                        continue;
                    }
                    let found = if st.kind == FileKind::Directory { FileKind::Symlink } else { st.kind };
                    return Err(OpenError::UnexpectedFileType {
                        path,
                        found,
                        expected: FileKind::Directory,
                        owner_uid: st.uid,
                    });
                }
                Err(e) => return Err(OpenError::io(&path, e)),
            }
        };
        let st = fs::fstat(fd.as_fd()).map_err(|e| OpenError::io(&path, e))?;
        if st.kind != FileKind::Directory {
            return Err(OpenError::UnexpectedFileType {
                path,
                found: st.kind,
                expected: FileKind::Directory,
                owner_uid: st.uid,
            });
        }
        self.trust.check_dir(&path, &st)?;
        Ok(DomainDir { fd, path, trust: self.trust.clone(), stat: st })
    }

    /// [`open_dir`](Self::open_dir), creating the root (as configured) and the domain
    /// directory ([`DOMAIN_DIR_MODE`]) if missing. A directory this call creates is made with
    /// `mkdirat` relative to the root, re-opened `O_NOFOLLOW`, and checked like any other.
    pub(crate) fn open_or_create_dir(&self) -> Result<DomainDir, OpenError> {
        let root = match fs::open_dir(&self.root) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // The root is the caller's configuration: create it as a plain path.
                std::fs::create_dir_all(&self.root).map_err(|e| OpenError::io(&self.root, e))?;
                fs::open_dir(&self.root).map_err(|e| OpenError::io(&self.root, e))?
            }
            Err(e) => return Err(OpenError::io(&self.root, e)),
        };
        for _ in 0..8 {
            match self.open_dir_in(root.as_fd()) {
                Err(OpenError::NotFound { .. }) => {}
                other => return other,
            }
            // Private until checked: nobody else can use it before its final mode is set.
            match fs::mkdir_at(root.as_fd(), OsStr::new(&self.dir_name()), 0o700) {
                Ok(()) => {
                    let dir = self.open_dir_in(root.as_fd())?;
                    if dir.stat.uid == fs::effective_uid() {
                        let readable = fs::reopen_dir_readable(dir.fd()).map_err(|e| OpenError::io(&dir.path, e))?;
                        fs::fchmod(readable.as_fd(), DOMAIN_DIR_MODE).map_err(|e| OpenError::io(&dir.path, e))?;
                    }
                    return self.open_dir_in(root.as_fd());
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    let st = fs::fstat(root.as_fd()).map_err(|e| OpenError::io(&self.root, e))?;
                    return Err(OpenError::CannotCreate {
                        dir: self.root.clone(),
                        what: format!("domain directory {}", self.dir_name()),
                        owner_uid: st.uid,
                        mode: st.mode,
                    });
                }
                Err(e) => return Err(OpenError::io(self.dir(), e)),
            }
        }
        Err(OpenError::Io {
            path: self.dir(),
            source: io::Error::other(
                "the domain directory keeps appearing and disappearing; is something removing it?",
            ),
        })
    }

    /// Every domain under `root`: each entry named `shmbus.<valid name>`, whatever it is
    /// (a symlink or a file in a domain's place is listed too, so that the tools can report
    /// it: opening it with [`open_dir`](Self::open_dir) says what is wrong).
    pub fn list(root: &Path) -> io::Result<Vec<Domain>> {
        let trust = TrustPolicy::from_env().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let dir = match fs::open_dir(root) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for entry in fs::list_dir(dir.as_fd())? {
            let Some(s) = entry.name.to_str() else { continue };
            let Some(name) = s.strip_prefix(DOMAIN_DIR_PREFIX) else { continue };
            if validate_name(name).is_ok() {
                out.push(Domain { name: name.to_owned(), root: root.to_owned(), trust: trust.clone() });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Waits until channel `name` exists in this domain, at most `timeout`: how a listener
    /// that starts before its channel's creator waits for it (then opens it as usual).
    ///
    /// No polling: the root and the domain directory (once it exists) are watched with
    /// inotify, through the descriptors opened and checked as [`open_dir`](Self::open_dir)
    /// does, and each event is followed by one more look. A channel is linked to its name
    /// only once fully built (see `segment`), so a name that exists is a channel ready to
    /// open. The wait ends early with [`WaitForError::Open`] for anything an open would
    /// refuse for good (an untrusted or non-directory domain, a symlink or FIFO under the
    /// channel's name); [`WaitForError::Timeout`] if nothing came. The root must exist.
    pub fn wait_for(&self, name: &str, timeout: std::time::Duration) -> Result<(), WaitForError> {
        let path = self.channel_path(name)?;
        let deadline = std::time::Instant::now() + timeout;
        let root = fs::open_dir(&self.root).map_err(|e| OpenError::io(&self.root, e))?;
        let watch = crate::sys::watch::DirWatch::new().map_err(|e| OpenError::io(&self.root, e))?;
        // Watches are added before each look, so that nothing created in between is missed.
        watch.add(root.as_fd()).map_err(|e| OpenError::io(&self.root, e))?;
        loop {
            match self.open_dir_in(root.as_fd()) {
                Ok(dir) => {
                    watch.add(dir.fd()).map_err(|e| OpenError::io(dir.path(), e))?;
                    match dir.open_channel(name, false) {
                        Ok(_) => return Ok(()),
                        Err(OpenError::NotFound { .. }) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(OpenError::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(WaitForError::Timeout { path, waited: timeout });
            }
            watch.wait(left).map_err(|e| OpenError::io(&self.root, e))?;
        }
    }

    /// Removes the domain directory if it is empty (`unlinkat` with `AT_REMOVEDIR` relative to
    /// the root's descriptor: never the root itself, never through a symlink). Returns whether
    /// it removed it: `false` when the directory is missing, not empty, or not a directory.
    /// A creator that opened the directory just before may then fail to create its channel
    /// in it (`NotFound`) and should retry; `shmbus clean` calls this only for a directory it
    /// has just emptied.
    pub fn remove_dir_if_empty(&self) -> io::Result<bool> {
        let root = fs::open_dir(&self.root)?;
        match fs::remove_dir_at(root.as_fd(), OsStr::new(&self.dir_name())) {
            Ok(()) => Ok(true),
            Err(e)
                if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::DirectoryNotEmpty)
                    || fs::is_not_directory(&e) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Names of the channels in this domain (validated names, sorted): see
    /// [`DomainDir::channel_names`]. Empty if the domain directory does not exist; an
    /// untrusted or non-directory domain is an error.
    pub fn channel_names(&self) -> io::Result<Vec<String>> {
        match self.open_dir() {
            Ok(d) => d.channel_names(),
            Err(OpenError::NotFound { .. }) => Ok(Vec::new()),
            Err(OpenError::Io { source, .. }) => Err(source),
            Err(e) => Err(io::Error::other(e.to_string())),
        }
    }
}

/// An open, checked domain directory: everything inside it is reached relative to this
/// descriptor, so renaming or replacing the directory's name afterwards changes nothing.
#[derive(Debug)]
pub struct DomainDir {
    fd: OwnedFd,
    path: PathBuf,
    trust: TrustPolicy,
    stat: Stat,
}

impl DomainDir {
    /// Opens the directory that holds the file `path` for the path-based entry points
    /// (`admin::inspect`, `segment::inspect`): if the parent is named like a domain
    /// (`<root>/shmbus.<name>`), exactly as [`Domain::open_dir`]; otherwise the parent is a
    /// directory the caller named and is opened as given. Returns the file's name too.
    pub(crate) fn open_parent_of(path: &Path) -> Result<(DomainDir, String), OpenError> {
        let bad = || OpenError::Io {
            path: path.to_owned(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "not a path to a file in a directory"),
        };
        let file = path.file_name().and_then(OsStr::to_str).ok_or_else(bad)?.to_owned();
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let domain_name = parent.file_name().and_then(OsStr::to_str).and_then(|n| n.strip_prefix(DOMAIN_DIR_PREFIX));
        if let (Some(name), Some(root)) = (domain_name, parent.parent()) {
            if validate_name(name).is_ok() {
                let root = if root.as_os_str().is_empty() { Path::new(".") } else { root };
                return Ok((Domain::with_root(name, root)?.open_dir()?, file));
            }
        }
        let fd = fs::open_dir(parent).map_err(|e| OpenError::io(parent, e))?;
        let stat = fs::fstat(fd.as_fd()).map_err(|e| OpenError::io(parent, e))?;
        Ok((DomainDir { fd, path: parent.to_owned(), trust: TrustPolicy::from_env()?, stat }, file))
    }

    /// The directory's path (for messages: nothing resolves it again).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open descriptor (`O_PATH`: a base for the `*at` system calls and for `fstat`; to
    /// read the directory or `fchmod` it, reopen it with `openat(fd, ".", O_RDONLY)`).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The directory's owner, mode and identity, as checked when it was opened.
    pub(crate) fn stat(&self) -> &Stat {
        &self.stat
    }

    /// The trust policy it was opened with.
    pub fn trust(&self) -> &TrustPolicy {
        &self.trust
    }

    /// The path of channel `name` in it (for messages).
    pub fn channel_path(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Names of the channels in this directory, sorted: every entry with a valid channel
    /// name except directories (a journal may live there; channels are never directories).
    /// Regular files and anything odd in a channel's place (a FIFO, socket, device or
    /// symlink) are listed, so that tools can report what they find there; hidden
    /// temporary files are not (their names start with a dot).
    pub fn channel_names(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in fs::list_dir(self.fd())? {
            let Some(s) = entry.name.to_str() else { continue };
            if validate_name(s).is_err() {
                continue;
            }
            let kind = match entry.kind {
                Some(k) => k,
                None => match fs::stat_at(self.fd(), &entry.name) {
                    Ok(st) => st.kind,
                    Err(_) => continue, // gone meanwhile
                },
            };
            if kind != FileKind::Directory {
                out.push(s.to_owned());
            }
        }
        out.sort();
        Ok(out)
    }

    /// Opens channel file `name`: a regular file (never through a symlink, never blocking)
    /// owned by a trusted uid. Returns it with its `fstat`.
    pub(crate) fn open_channel(&self, name: &str, write: bool) -> Result<(std::fs::File, Stat), OpenError> {
        let path = self.channel_path(name);
        let (file, st) = match fs::open_file_at(self.fd(), OsStr::new(name), write) {
            Ok(r) => r,
            Err(OpenFileError::NotRegular(found)) => {
                let owner_uid = fs::stat_at(self.fd(), OsStr::new(name)).map(|s| s.uid).unwrap_or(u32::MAX);
                return Err(OpenError::UnexpectedFileType { path, found, expected: FileKind::Regular, owner_uid });
            }
            Err(OpenFileError::Io(e)) => return Err(OpenError::io(path, e)),
        };
        self.trust.check_file(&path, &st)?;
        Ok((file, st))
    }

    /// Removes channel file `name` from this directory (`unlinkat` relative to it): only a
    /// regular file, never a symlink, FIFO, device or directory (`InvalidInput` saying what
    /// it is). Use it after checking what the file holds; nothing outside the directory is
    /// ever touched.
    pub fn remove_file(&self, name: &str) -> io::Result<()> {
        let st = fs::stat_at(self.fd(), OsStr::new(name))?;
        if st.kind != FileKind::Regular {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is {}, not a regular file; not removed", self.channel_path(name).display(), st.kind),
            ));
        }
        fs::unlink_at(self.fd(), OsStr::new(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_root() {
        let d = Domain::with_root("robot1", "/r").unwrap();
        assert_eq!(d.dir(), PathBuf::from("/r/shmbus.robot1"));
        assert_eq!(d.channel_path("imu").unwrap(), PathBuf::from("/r/shmbus.robot1/imu"));
        assert!(d.channel_path("../x").is_err());
        assert!(Domain::with_root("a/b", "/r").is_err());
    }

    #[test]
    fn trust_list_parses_uids_and_names() {
        let p = TrustPolicy::parse("1001, 1002 root").unwrap();
        assert_eq!(p.extra_uids(), [1001, 1002, 0]);
        assert!(p.trusts(1001) && p.trusts(0) && p.trusts(fs::effective_uid()));
        assert!(!TrustPolicy::new().trusts(if fs::effective_uid() == 4242 { 4243 } else { 4242 }));
        let e = TrustPolicy::parse("no-such-user-here").unwrap_err().to_string();
        assert!(e.contains("no-such-user-here"), "{e}");
    }
}
