//! Inspecting and cleaning segments, for tools (`shmbus ls`, `info`, `clean`).
//!
//! # Looking without touching
//!
//! [`inspect`] opens a segment `O_RDONLY` and maps it `PROT_READ`, whoever calls it: read
//! permission is enough (a monitoring account can list a 0644 segment it does not own), and
//! nothing it does can write to the segment: it does not register as a participant, reclaim
//! the dead or move an index. The header is validated exactly as a read-write open validates
//! it; what it then reads (participant table, ring indices) is untrusted and only ever
//! clamped or compared, never used to index without a bounds check. Whether the caller could
//! open the segment read-write is reported separately ([`SegmentReport::writable`]).
//!
//! # Undelivered data
//!
//! [`SegmentReport::pending`] is what removing the segment would lose: committed data that no
//! reader has taken yet, read from the kind's own indices by the kind's own readers.
//!
//! * **queue**: messages sent and not received ([`Pending::Messages`]);
//! * **stream**: bytes committed and not consumed ([`Pending::Bytes`]);
//! * **pool**: jobs dispatched and not taken, or lost with their worker (before or after
//!   it took them) and not yet reported by `Dispatcher::reap` ([`Pending::Jobs`]);
//! * **topic**: `None`, by decision. A topic promises its history as a window of the last N
//!   messages that publishers overwrite without waiting for anyone, and a new subscriber
//!   starts at new messages: no message in a topic is owed to any reader, so none is
//!   undelivered. What its history holds is reported apart
//!   ([`SegmentReport::history_len`]): a later `sub --from`/`--latest` can still read it.
//! * **journal**: `None`: journal data lives in its directory, which `clean` never touches.
//!
//! # In use, idle, stale
//!
//! [`SegmentReport::state`] is the one rule `shmbus ls`, `info` and `clean` (and the
//! bindings) apply, a [`ChannelState`]:
//!
//! * **in use**: the creator or some participant is alive;
//! * **idle**: nobody is alive, but the channel holds something a later reader can use: a
//!   topic with messages in its history, a queue, stream or pool with pending data. A
//!   producer may send and exit before its consumer starts, and `shmbus pub` then
//!   `shmbus sub --latest` is the quick start: an idle channel is a legitimate state, and
//!   `shmbus clean` keeps it unless told `--all`;
//! * **stale**: nobody is alive and there is nothing to give (a topic nobody ever published
//!   to, a drained queue or stream, a pool with no job outstanding): `shmbus clean` removes it.
//!
//! # Removing a channel
//!
//! [`Domain::remove`] removes one channel file through its checked domain directory
//! (`unlinkat` relative to the directory's descriptor: never through a symlink, only a
//! regular file). It refuses ([`RemoveError::InUse`]) while the channel's creator or any
//! participant is alive, listing them; [`Domain::remove_forced`] removes it anyway. Removing
//! takes only the name: processes that have the channel mapped keep their mapping and go on
//! working on it, unseen by anyone who opens the name afterwards (a new open creates a new
//! channel or fails with `NotFound`). The check and the unlink are two steps: a process that
//! attaches between them is in the same position as one attached during a forced removal.
//!
//! # Describing a channel
//!
//! [`describe`] reads a channel's live state through the kind's read-only status and gives
//! it, with the header's layout parameters, in one shape for every kind ([`Description`]):
//! what `shmbus ls` and `info` print. Each kind says its role names ([`role_name`]),
//! parameter names, undelivered data and status in one place next to its layout.
//!
//! # Inside the domain directory only
//!
//! Tools that walk a domain open it once ([`Domain::open_dir`]: no symlink followed, owner
//! checked against the trust policy) and do everything through that [`DomainDir`]:
//! [`inspect_in`] looks at a channel file relative to it, [`stale_temp_files_in`] lists
//! temporary files in it, and [`DomainDir::remove_file`] removes a regular file from it with
//! `unlinkat`. A domain directory replaced by a symlink, or owned by an untrusted user, is an
//! error when opened, and nothing is looked at or removed through it; swapping the name
//! afterwards does not redirect the descriptor. A FIFO, socket or device under a channel's
//! name is reported ([`OpenError::UnexpectedFileType`]) without blocking.

use std::fmt;
use std::path::{Path, PathBuf};

#[cfg(not(loom))]
use crate::describe::KindInfo;
pub use crate::describe::{Description, Pending, Scalar};
use crate::domain::{Domain, DomainDir};
use crate::error::OpenError;
use crate::participants::ParticipantInfo;
use crate::segment::{HeaderInfo, Segment};
use crate::sys::{process_is_alive, ReadOnly};

/// What a segment file holds and who uses it.
#[derive(Debug, Clone)]
pub struct SegmentReport {
    /// The file.
    pub path: PathBuf,
    /// Its validated header.
    pub header: HeaderInfo,
    /// Whether the creating process is still running.
    pub creator_alive: bool,
    /// Participants whose processes are alive.
    pub live: Vec<ParticipantInfo>,
    /// Participants whose processes are dead (their entries await reclaiming).
    pub dead: Vec<ParticipantInfo>,
    /// Whether this process may open the segment read-write: what an endpoint needs, and what
    /// `shmbus clean` requires before it removes a segment. (Inspection itself reads only.)
    pub writable: bool,
    /// Committed data no reader has taken yet (see the [module docs](self)); `None` for kinds
    /// that owe no delivery (topics, journals).
    pub pending: Option<Pending>,
    /// Topic: the messages its history holds now (the committed ones, at most `history`);
    /// `None` for the other kinds.
    pub history_len: Option<u64>,
    /// When the segment file was last modified (its `mtime`, read from the open file): when
    /// the channel was last used, since a process sets it when it opens the channel to use
    /// it (read-write) and when it lets go of it, besides creating it (a process killed by
    /// SIGKILL does not set it as it dies). `None` where the file system does not say.
    pub modified: Option<std::time::SystemTime>,
    /// The channel's schema (`None`: it has none); a service's request schema.
    pub schema: Option<std::sync::Arc<crate::Schema>>,
    /// A service's response schema (`None` for the other kinds, and a service without
    /// schemas).
    pub response_schema: Option<std::sync::Arc<crate::Schema>>,
}

/// Whether anyone uses a channel and, if not, whether it holds something for a later
/// reader: see the [module docs](self#in-use-idle-stale).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChannelState {
    /// The creator or some participant is alive.
    InUse,
    /// Nobody is alive; it holds messages, data or jobs a later reader can use.
    Idle,
    /// Nobody is alive and it holds nothing a reader could use.
    Stale,
}

impl ChannelState {
    /// The stable lowercase token tools print: `in-use`, `idle` or `stale`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelState::InUse => "in-use",
            ChannelState::Idle => "idle",
            ChannelState::Stale => "stale",
        }
    }
}

impl fmt::Display for ChannelState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl SegmentReport {
    /// Neither the creator nor any participant is alive (the channel is
    /// [idle or stale](Self::state)).
    pub fn is_unused(&self) -> bool {
        !self.creator_alive && self.live.is_empty()
    }

    /// Nobody uses the channel and it holds nothing for a later reader: `shmbus clean`
    /// removes it ([`ChannelState::Stale`]).
    pub fn is_stale(&self) -> bool {
        self.state() == ChannelState::Stale
    }

    /// In use, idle or stale: see the [module docs](self#in-use-idle-stale).
    pub fn state(&self) -> ChannelState {
        if !self.is_unused() {
            ChannelState::InUse
        } else if self.holds_data() {
            ChannelState::Idle
        } else {
            ChannelState::Stale
        }
    }

    /// The segment holds committed data no reader has taken yet (see [`Pending`]).
    pub fn has_pending(&self) -> bool {
        self.pending.is_some_and(|p| p.count() > 0)
    }

    /// The segment holds something a later reader can use: pending data, or messages in a
    /// topic's history.
    pub fn holds_data(&self) -> bool {
        self.has_pending() || self.history_len.is_some_and(|n| n > 0)
    }

    /// Live participants in the role named `role` (see [`role_name`]).
    #[cfg(not(loom))]
    pub fn live_in_role(&self, role: &str) -> usize {
        self.live.iter().filter(|p| role_name(self.header.kind, p.role) == Some(role)).count()
    }
}

/// The kind registry: every kind's [`KindInfo`], in header-number order.
#[cfg(not(loom))]
pub(crate) static KINDS: [&dyn KindInfo; 6] = [
    &crate::topic::TopicKind,
    &crate::queue::QueueKind,
    &crate::stream::StreamKind,
    &crate::pool::PoolKind,
    &crate::journal::JournalKind,
    &crate::service::ServiceKind,
];

/// The registry entry of `kind`.
#[cfg(not(loom))]
pub(crate) fn info(kind: crate::kind::Kind) -> &'static dyn KindInfo {
    match KINDS.iter().find(|k| k.kind() == kind) {
        Some(k) => *k,
        None => unreachable!("kind {kind} is not in the registry"),
    }
}

/// The name of participant role number `role` in a channel of `kind`: "publisher" or
/// "subscriber" (topic), "producer" or "consumer" (queue), "writer" or "reader" (stream),
/// "dispatcher" or "worker" (pool), "appender" (journal); `None` for a number the kind does
/// not use (a corrupt entry, or a newer shmbus).
#[cfg(not(loom))]
pub fn role_name(kind: crate::kind::Kind, role: u32) -> Option<&'static str> {
    info(kind).role_name(role)
}

/// Describes channel `name` of `domain`, which `report` is a look at: its layout parameters
/// from the report's header and its live state from the kind's read-only status (read
/// permission suffices; nothing is registered or written). Fails as the kind's `status`
/// fails, e.g. when the channel was removed or replaced since `report` was taken.
#[cfg(not(loom))]
pub fn describe(domain: &Domain, name: &str, report: &SegmentReport) -> Result<Description, OpenError> {
    let kind = info(report.header.kind);
    let mut d = kind.describe(domain, name)?;
    d.params = kind.params(&report.header.params);
    Ok(d)
}

/// Validates the segment at `path` and reports its users and its undelivered data, through a
/// read-only mapping (see the [module docs](self)): needs read permission only, writes nothing.
/// A queue, stream or pool whose layout parameters are invalid for its kind is
/// [`OpenError::Corrupt`], as it would be to an endpoint.
///
/// The path is resolved like every channel path: its domain directory (`shmbus.<name>`) is
/// opened without following a symlink and checked against the trust policy in
/// `SHMBUS_TRUST_UIDS`. Tools that walk a domain use [`inspect_in`].
pub fn inspect(path: &Path) -> Result<SegmentReport, OpenError> {
    let (dir, name) = match DomainDir::open_parent_of(path) {
        Ok(d) => d,
        Err(OpenError::NotFound { .. }) => return Err(OpenError::NotFound { path: path.to_owned() }),
        Err(e) => return Err(e),
    };
    report(&dir, &name)
}

/// [`inspect`] for channel `name` of an opened domain directory (see the
/// [module docs](self)).
pub fn inspect_in(dir: &DomainDir, name: &str) -> Result<SegmentReport, OpenError> {
    crate::name::validate_name(name)?;
    report(dir, name)
}

/// [`inspect_in`] for channel `name` of `domain`.
pub fn inspect_channel(domain: &Domain, name: &str) -> Result<SegmentReport, OpenError> {
    let path = domain.channel_path(name)?;
    match domain.open_dir() {
        Ok(dir) => inspect_in(&dir, name),
        Err(OpenError::NotFound { .. }) => Err(OpenError::NotFound { path }),
        Err(e) => Err(e),
    }
}

fn report(dir: &DomainDir, name: &str) -> Result<SegmentReport, OpenError> {
    let seg = Segment::<ReadOnly>::open_in(dir, name)?;
    let path = seg.path().to_owned();
    // Whether this user could open it read-write, probed in the same directory (opened and
    // closed at once).
    let writable = dir.open_channel(name, true).is_ok();
    let header = *seg.info();
    // By pid in this PID namespace, by entry lock in another (see `participants`).
    let view = seg.participant_view();
    let (live, dead) = view.list().into_iter().partition(|p| view.is_alive(p));
    let modified = seg.file().metadata().and_then(|m| m.modified()).ok();
    let creator_alive = creator_alive(seg.file(), header.creator);
    let (schema, response_schema) = (seg.schema().cloned(), seg.schemas().get(1).cloned());
    let (pending, history_len) = contents_of(seg)?;
    Ok(SegmentReport {
        path,
        creator_alive,
        header,
        live,
        dead,
        writable,
        pending,
        history_len,
        modified,
        schema,
        response_schema,
    })
}

/// What the segment's kind holds undelivered, and its history, by the kind's own index
/// readers.
#[cfg(not(loom))]
fn contents_of(seg: Segment<ReadOnly>) -> Result<(Option<Pending>, Option<u64>), OpenError> {
    info(seg.info().kind).contents(seg)
}

/// The kinds' segment code is not built under loom.
#[cfg(loom)]
fn contents_of(_seg: Segment<ReadOnly>) -> Result<(Option<Pending>, Option<u64>), OpenError> {
    Ok((None, None))
}

/// A live process attached to a channel, as [`RemoveError::InUse`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    /// Its process id.
    pub pid: u32,
    /// What it is to the channel: a role name ([`role_name`]), `"creator"` for a creator
    /// that holds no endpoint, or `"role N"` for a number this library does not know.
    pub role: String,
}

impl fmt::Display for Attached {
    /// `pid 4242 (subscriber)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {} ({})", self.pid, self.role)
    }
}

/// What [`Domain::remove`] removed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Removed {
    /// The file that was removed.
    pub path: PathBuf,
    /// The channel's kind, `None` if the file was not a valid segment (forced removal only).
    pub kind: Option<crate::kind::Kind>,
    /// Live processes that were attached when it was removed (forced removal only): they
    /// keep their mapping.
    pub attached: Vec<Attached>,
}

/// Removing a channel failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum RemoveError {
    /// Live processes use the channel; nothing was removed. Stop them, or remove it with
    /// [`Domain::remove_forced`].
    InUse {
        /// The channel file.
        path: PathBuf,
        /// Who is attached: every live participant, and the creator if alive.
        attached: Vec<Attached>,
    },
    /// The channel could not be found, checked or trusted ([`OpenError::NotFound`] if there
    /// is none). A file that is not a valid segment is this error unless forced.
    Open(OpenError),
    /// The unlink itself failed (e.g. the domain directory is not writable by this user).
    Io {
        /// The channel file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl fmt::Display for RemoveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoveError::InUse { path, attached } => {
                let who: Vec<String> = attached.iter().map(Attached::to_string).collect();
                write!(
                    f,
                    "{}: in use by {}; stop them first, or force the removal (they keep working on their mapping, but nobody can open it by name again)",
                    path.display(),
                    who.join(", ")
                )
            }
            RemoveError::Open(e) => e.fmt(f),
            RemoveError::Io { path, source } => write!(f, "{}: cannot remove: {source}", path.display()),
        }
    }
}

impl std::error::Error for RemoveError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RemoveError::Open(e) => Some(e),
            RemoveError::Io { source, .. } => Some(source),
            RemoveError::InUse { .. } => None,
        }
    }
}

impl crate::error::Failure for RemoveError {
    fn kind(&self) -> crate::error::ErrorKind {
        match self {
            RemoveError::InUse { .. } => crate::error::ErrorKind::Busy,
            RemoveError::Open(e) => crate::error::Failure::kind(e),
            RemoveError::Io { .. } => crate::error::ErrorKind::Io,
        }
    }
}

impl From<OpenError> for RemoveError {
    fn from(e: OpenError) -> Self {
        RemoveError::Open(e)
    }
}

#[cfg(not(loom))]
impl Domain {
    /// Removes channel `name` of this domain, refusing while it is in use: see the
    /// [module docs](self#removing-a-channel). [`RemoveError::InUse`] lists the live
    /// creator and participants; a file that is not a valid segment is refused with its
    /// [`OpenError`] (e.g. `NotASegment`), as is an untrusted or non-regular file.
    pub fn remove(&self, name: &str) -> Result<Removed, RemoveError> {
        self.remove_with(name, false)
    }

    /// [`remove`](Self::remove) even while live processes are attached (they keep their
    /// mapping, listed in [`Removed::attached`]), and even if the file is not a valid
    /// segment (bad magic, truncated, corrupt, another format version). Never removes an
    /// untrusted file or anything but a regular file.
    pub fn remove_forced(&self, name: &str) -> Result<Removed, RemoveError> {
        self.remove_with(name, true)
    }

    fn remove_with(&self, name: &str, force: bool) -> Result<Removed, RemoveError> {
        let path = self.channel_path(name)?;
        let dir = match self.open_dir() {
            Ok(d) => d,
            Err(OpenError::NotFound { .. }) => return Err(OpenError::NotFound { path }.into()),
            Err(e) => return Err(e.into()),
        };
        let (kind, attached) = match inspect_in(&dir, name) {
            Ok(r) => {
                let mut attached: Vec<Attached> = r
                    .live
                    .iter()
                    .map(|p| Attached {
                        pid: p.process.pid,
                        role: role_name(r.header.kind, p.role)
                            .map_or_else(|| format!("role {}", p.role), str::to_owned),
                    })
                    .collect();
                if r.creator_alive && !attached.iter().any(|a| a.pid == r.header.creator.pid) {
                    attached.push(Attached { pid: r.header.creator.pid, role: "creator".to_owned() });
                }
                if !attached.is_empty() && !force {
                    return Err(RemoveError::InUse { path, attached });
                }
                (Some(r.header.kind), attached)
            }
            Err(
                OpenError::NotASegment { .. }
                | OpenError::Truncated { .. }
                | OpenError::Corrupt { .. }
                | OpenError::VersionMismatch { .. },
            ) if force => {
                // Still only a regular file owned by a trusted user.
                dir.open_channel(name, false)?;
                (None, Vec::new())
            }
            Err(e) => return Err(e.into()),
        };
        dir.remove_file(name).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => RemoveError::Open(OpenError::NotFound { path: path.clone() }),
            _ => RemoveError::Io { path: path.clone(), source },
        })?;
        Ok(Removed { path, kind, attached })
    }
}

/// A leftover temporary file of a creator that died mid-creation (`.<name>.<pid>.<nanos>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleTemp {
    /// The file.
    pub path: PathBuf,
    /// Its name in the domain directory (remove it with [`DomainDir::remove_file`]).
    pub name: String,
    /// The pid in its name.
    pub pid: u32,
}

/// Temporary creation files in `domain` whose creating process is gone (none if the domain
/// directory does not exist). See [`stale_temp_files_in`].
pub fn stale_temp_files(domain: &Domain) -> std::io::Result<Vec<StaleTemp>> {
    match domain.open_dir() {
        Ok(dir) => stale_temp_files_in(&dir),
        Err(OpenError::NotFound { .. }) => Ok(Vec::new()),
        Err(e) => Err(std::io::Error::other(e.to_string())),
    }
}

/// Temporary creation files in `dir` whose creating process is gone: regular files named
/// like shmbus's own (`.<channel>.<pid>.<nanos>`) and owned by a trusted user. Anything else
/// with a dot name is not ours and is never reported for removal.
pub fn stale_temp_files_in(dir: &DomainDir) -> std::io::Result<Vec<StaleTemp>> {
    use crate::sys::fs;
    let mut out = Vec::new();
    for entry in fs::list_dir(dir.fd())? {
        let Some(name) = entry.name.to_str().map(str::to_owned) else { continue };
        let Some(pid) = temp_file_pid(&name) else { continue };
        match fs::stat_at(dir.fd(), &entry.name) {
            Ok(st) if st.kind == fs::FileKind::Regular && dir.trust().trusts(st.uid) => {}
            _ => continue,
        }
        // A creator in another PID namespace names itself by a pid that means nothing here:
        // its lock on the file says it is alive (see `creator_alive`).
        let held = || match fs::open_file_at(dir.fd(), &entry.name, false) {
            Ok((file, _)) => creator_lock_held(&file),
            // Gone (linked and removed, or discarded): nothing to remove.
            Err(_) => true,
        };
        if !process_is_alive(crate::sys::ProcessId { pid, start_time: 0 }) && !held() {
            out.push(StaleTemp { path: dir.path().join(&name), name, pid });
        }
    }
    Ok(out)
}

/// Whether the creator `creator` (from the header of the channel open as `file`) is alive:
/// by its pid and start time, or, since the header records no PID namespace and the pid means
/// nothing in another one, by the lock a creating handle holds on the file while it keeps it
/// open (see `segment`). Alive if either says so.
fn creator_alive(file: &std::fs::File, creator: crate::sys::ProcessId) -> bool {
    process_is_alive(creator) || creator_lock_held(file)
}

/// Whether another open file description holds the creator's byte of `file` (false when the
/// file system refuses to say).
fn creator_lock_held(file: &std::fs::File) -> bool {
    use std::os::fd::AsFd;
    crate::sys::lock::byte_is_locked(file.as_fd(), crate::sys::lock::CREATOR).unwrap_or(false)
}

/// The pid in a temporary file name `.<channel>.<pid>.<nanos>`, if `name` is one.
fn temp_file_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix('.')?;
    let mut parts = rest.rsplitn(3, '.');
    let nanos = parts.next()?;
    let pid = parts.next()?.parse::<u32>().ok()?;
    let channel = parts.next()?;
    (nanos.bytes().all(|b| b.is_ascii_digit()) && !nanos.is_empty() && crate::name::validate_name(channel).is_ok())
        .then_some(pid)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::{role_name, temp_file_pid};
    use crate::kind::Kind;

    /// A creator in another PID namespace names its temporary file with a pid that means
    /// nothing here (one no process has, below): while it holds its creator lock on the file
    /// (here through another open file description, as another process would), the file is
    /// not stale; once the lock is gone (the creator died), it is.
    #[test]
    fn a_temporary_file_whose_creator_holds_its_lock_is_not_stale() {
        use crate::sys::lock;
        use std::os::fd::AsFd;
        let root = std::env::temp_dir().join(format!("shmbus-admin-temp-{}", std::process::id()));
        let domain = crate::Domain::with_root("d", &root).unwrap();
        std::fs::create_dir_all(domain.dir()).unwrap();
        let dir = domain.open_dir().unwrap();
        let name = ".c.4294967290.12345";
        assert_eq!(temp_file_pid(name), Some(4294967290));
        let path = domain.dir().join(name);
        let creator = std::fs::File::create(&path).unwrap();
        assert!(lock::try_lock_byte(creator.as_fd(), lock::CREATOR).unwrap());
        assert_eq!(super::stale_temp_files_in(&dir).unwrap(), vec![], "its creator holds the lock");
        drop(creator);
        let stale = super::stale_temp_files_in(&dir).unwrap();
        assert_eq!(stale.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), [name]);

        // The same rule for a channel's creator, whose header pid means nothing here.
        let stranger = crate::sys::ProcessId { pid: 4294967290, start_time: 1 };
        let creator = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        let checker = std::fs::File::open(&path).unwrap();
        assert!(!super::creator_alive(&checker, stranger));
        assert!(lock::try_lock_byte(creator.as_fd(), lock::CREATOR).unwrap());
        assert!(super::creator_alive(&checker, stranger), "its creator holds the lock");
        drop(creator);
        assert!(!super::creator_alive(&checker, stranger));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn only_shmbus_temporary_names_are_temporary_files() {
        assert_eq!(temp_file_pid(".imu.123.456789"), Some(123));
        assert_eq!(temp_file_pid(".a.b.7.1"), Some(7));
        for n in [".bashrc", ".x.y", ".imu.12a.5", ".imu.1.", "..1.2", ".imu.1.2x", "imu.1.2"] {
            assert_eq!(temp_file_pid(n), None, "{n}");
        }
    }

    #[test]
    fn every_kind_names_its_roles_and_nothing_else() {
        let names: Vec<_> = [Kind::Topic, Kind::Queue, Kind::Stream, Kind::Pool, Kind::Journal, Kind::Service]
            .into_iter()
            .map(|k| (role_name(k, 1), role_name(k, 2), role_name(k, 0), role_name(k, 99)))
            .collect();
        assert_eq!(
            names,
            [
                (Some("publisher"), Some("subscriber"), None, None),
                (Some("producer"), Some("consumer"), None, None),
                (Some("writer"), Some("reader"), None, None),
                (Some("dispatcher"), Some("worker"), None, None),
                (Some("appender"), None, None, None),
                (Some("server"), Some("client"), None, None),
            ]
        );
    }
}

#[cfg(all(test, not(loom)))]
mod registry_tests {
    use super::{info, KINDS};
    use crate::describe::RAW_PARAM_KEYS;
    use crate::kind::Kind;
    use crate::segment::PARAMS;

    #[test]
    fn the_registry_holds_every_kind_once_in_header_order() {
        let kinds: Vec<Kind> = KINDS.iter().map(|k| k.kind()).collect();
        assert_eq!(kinds, [Kind::Topic, Kind::Queue, Kind::Stream, Kind::Pool, Kind::Journal, Kind::Service]);
        for (n, k) in kinds.iter().enumerate() {
            assert_eq!(Kind::from_u32(n as u32 + 1), Some(*k));
            assert_eq!(info(*k).kind(), *k);
        }
    }

    /// The role names and parameter keys `shmbus info` and `ls --json` have always printed:
    /// changing one changes the CLI contract.
    #[test]
    fn role_names_and_param_keys_are_what_the_cli_prints() {
        let roles: Vec<_> =
            KINDS.iter().map(|k| (k.role_name(0), k.role_name(1), k.role_name(2), k.role_name(3))).collect();
        assert_eq!(
            roles,
            [
                (None, Some("publisher"), Some("subscriber"), None),
                (None, Some("producer"), Some("consumer"), None),
                (None, Some("writer"), Some("reader"), None),
                (None, Some("dispatcher"), Some("worker"), None),
                (None, Some("appender"), None, None),
                (None, Some("server"), Some("client"), None),
            ]
        );
        let keys: Vec<&[&str]> = KINDS.iter().map(|k| k.param_keys()).collect();
        assert_eq!(
            keys,
            [
                &["slot_size", "history", "spare_slots", "policy", "reliable_timeout_ms"][..],
                &["capacity", "max_element_size", "stride"],
                &["capacity", "data_offset"],
                &["max_workers", "max_job_size"],
                &[],
                &[
                    "max_servers",
                    "max_clients",
                    "max_in_flight",
                    "max_request_len",
                    "max_response_len",
                    "response_depth"
                ],
            ]
        );
        let raw: [u64; PARAMS] = [64, 16, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            info(Kind::Topic).params(&raw),
            [("slot_size", 64), ("history", 16), ("spare_slots", 0), ("policy", 0), ("reliable_timeout_ms", 0)]
        );
        // The journal is not a segment: a segment claiming to be one shows its raw non-zero
        // parameters.
        let raw: [u64; PARAMS] = [7, 0, 9, 0, 0, 0, 0, 0];
        assert_eq!(info(Kind::Journal).params(&raw), [(RAW_PARAM_KEYS[0], 7), (RAW_PARAM_KEYS[2], 9)]);
        assert_eq!(RAW_PARAM_KEYS[2], "param2");
    }
}
