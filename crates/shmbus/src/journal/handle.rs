//! The journal handle: options, opening and recovery, cycles, retention, tiers, named
//! readers' table, `info`.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::error::OpenError;
use crate::name::validate_name;
use crate::sync::Ordering;
use crate::sys::{process_is_alive, ProcessId};

use super::files::{self, create_cycle, CycleFiles, MetaFile};
use super::format::*;
use super::protocol;

use super::appender::{AppendError, Appender};
use super::tailer::{ReadError, ReaderError, Tailer};

/// When a journal starts a new cycle (besides when the current one is full).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollCycle {
    /// Only when a cycle is full (`cycle_bytes`).
    Never,
    /// Every minute (UTC, aligned to the epoch).
    Minutely,
    /// Every hour.
    Hourly,
    /// Every day (UTC midnight).
    Daily,
    /// Every given period (whole seconds, at least 1).
    Every(Duration),
}

impl RollCycle {
    fn secs(self) -> u64 {
        match self {
            RollCycle::Never => 0,
            RollCycle::Minutely => 60,
            RollCycle::Hourly => 3600,
            RollCycle::Daily => 86400,
            RollCycle::Every(d) => d.as_secs(),
        }
    }
}

/// What a successful commit guarantees (see `docs/journal.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// In the page cache: survives the crash of any process, not of the machine.
    None,
    /// `msync(MS_SYNC)` of the entry's pages before `commit` returns: survives power loss.
    Flush,
    /// A background thread of each appender `fdatasync`s every period: at most one period
    /// of committed entries is lost on power loss.
    Periodic(Duration),
}

/// Which cycles [`Journal::gc`] deletes. The current cycle is never deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Retention {
    /// Keep at most this many cycles.
    pub max_cycles: Option<u64>,
    /// Delete cycles last written longer ago than this.
    pub max_age: Option<Duration>,
}

/// Options for [`Journal::open`]. They apply when the journal is created; an existing
/// journal keeps the configuration it was created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalOptions {
    /// Create the journal (and its directory) if missing. Default true.
    pub create: bool,
    /// Time-based roll cycle. Default `Daily`.
    pub roll: RollCycle,
    /// Capacity of one cycle's data area; a full cycle rolls. Default 1 GiB (virtual; the
    /// files grow in `chunk_bytes` steps).
    pub cycle_bytes: u64,
    /// Growth step of data and index files. Default 16 MiB.
    pub chunk_bytes: u64,
    /// Largest entry payload. Default 16 MiB.
    pub max_entry: u64,
    /// Durability of commits. Default `None`.
    pub durability: Durability,
    /// Retention applied at each roll and by [`Journal::gc`]. Default: keep everything.
    pub retention: Retention,
    /// How long an entry reserved by a *live* appender may stay uncommitted before readers
    /// abandon it. Default 10 s. (Dead appenders are detected at once.)
    pub abandon_timeout: Duration,
    /// File mode of every file the journal creates (metadata, data, index, `readers.lock`),
    /// set exactly whatever the umask. Default 0o600. Directories the journal creates get
    /// the matching search bits (0o700 for 0o600, 0o750 for 0o640, 0o755 for 0o644).
    pub mode: u32,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions {
            create: true,
            roll: RollCycle::Daily,
            cycle_bytes: 1 << 30,
            chunk_bytes: 16 << 20,
            max_entry: 16 << 20,
            durability: Durability::None,
            retention: Retention::default(),
            abandon_timeout: Duration::from_secs(10),
            mode: 0o600,
        }
    }
}

impl JournalOptions {
    fn to_header(self) -> MetaHeader {
        let (durability, periodic_ms) = match self.durability {
            Durability::None => (0, 0),
            Durability::Flush => (1, 0),
            Durability::Periodic(d) => (2, d.as_millis().min(u64::MAX as u128) as u64),
        };
        MetaHeader {
            version: JOURNAL_FORMAT_VERSION,
            roll_kind: if self.roll == RollCycle::Never { ROLL_NEVER } else { ROLL_TIME },
            roll_secs: self.roll.secs(),
            cycle_bytes: self.cycle_bytes,
            chunk_bytes: self.chunk_bytes.min(self.cycle_bytes),
            max_entry: self.max_entry,
            durability,
            periodic_ms,
            retain_cycles: self.retention.max_cycles.unwrap_or(0),
            retain_secs: self.retention.max_age.map_or(0, |d| d.as_secs().max(1)),
            abandon_ms: self.abandon_timeout.as_millis().clamp(1, u64::MAX as u128) as u64,
            created_ns: realtime_ns(),
            id: random_id(),
        }
    }
}

/// 16 random bytes (`getrandom(2)`, falling back to time and pid if it is unavailable).
fn random_id() -> [u8; 16] {
    let mut b = [0u8; 16];
    // SAFETY: `b` is a valid writable buffer of 16 bytes.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != 16 {
        b[..8].copy_from_slice(&realtime_ns().to_le_bytes());
        b[8..12].copy_from_slice(&ProcessId::current().pid.to_le_bytes());
        b[12..].copy_from_slice(&(crate::sys::monotonic_ns() as u32).to_le_bytes());
    }
    b
}

/// On-the-fly encryption of entry payloads, supplied by the application (shmbus picks no
/// cipher: use an AEAD such as XChaCha20-Poly1305 or AES-GCM-SIV from a crate you trust).
///
/// The journal guarantees a nonce that is unique for every entry of every journal
/// ([`entry_nonce`](super::format::entry_nonce): random journal id, cycle, in-cycle index) and passes the
/// entry's global index as associated data, so a sealed entry cannot be moved to another
/// position undetected. Sealing happens after compression.
pub trait EntryCipher: Send + Sync {
    /// Bytes `seal` adds (the authentication tag).
    fn overhead(&self) -> usize;
    /// Encrypts and authenticates `plain` with `aad` into `out` (`plain.len() +
    /// overhead()` bytes).
    fn seal(&self, nonce: &[u8; 24], aad: &[u8], plain: &[u8], out: &mut [u8]);
    /// Checks and decrypts `sealed` into `out` (`sealed.len() - overhead()` bytes).
    /// `false`: wrong key, or the entry was tampered with.
    fn open(&self, nonce: &[u8; 24], aad: &[u8], sealed: &[u8], out: &mut [u8]) -> bool;
}

impl fmt::Debug for dyn EntryCipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EntryCipher {{ overhead: {} }}", self.overhead())
    }
}

/// `CLOCK_REALTIME` in nanoseconds: the clock of journal timestamps (meaningful across
/// reboots and hosts, which replay needs).
pub fn realtime_ns() -> u64 {
    crate::sys::time::clock_ns(libc::CLOCK_REALTIME)
}

/// What open-time recovery found in a cycle after an unclean stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The cycle scanned.
    pub cycle: u64,
    /// Entries kept (committed or abandoned) in the cycle.
    pub kept_entries: u64,
    /// Claimed entries dropped (never committed, or corrupt, or cut off).
    pub dropped_entries: u64,
    /// Bytes of data dropped (zeroed).
    pub dropped_bytes: u64,
    /// Entries whose writer had died, turned into abandoned holes.
    pub abandoned_holes: u64,
    /// Damaged ranges found between sound entries (zeroed or overwritten bytes). They are
    /// left in place, not cut: readers report each as [`ReadError::Damaged`] and read on.
    pub damaged_ranges: u64,
    /// Why the scan stopped.
    pub reason: ScanStop,
}

/// The mode of a directory the journal creates: search permission for whoever may read
/// its files (0600 → 0700, 0640 → 0750, 0644 → 0755), sticky when every user may write it
/// (0666 → 1777).
pub(super) fn dir_mode(file_mode: u32) -> u32 {
    let m = file_mode & 0o777;
    let d = m | 0o700 | ((m & 0o044) >> 2);
    // Writable by every user: sticky, so nobody removes or replaces files they do not own
    // (the trust policy refuses such a directory without it).
    if d & 0o002 != 0 {
        d | 0o1000
    } else {
        d
    }
}

/// An open journal. Cheap to clone (`Arc`); appenders and tailers keep it alive.
#[derive(Debug, Clone)]
pub struct Journal {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) dir: PathBuf,
    pub(super) meta: MetaFile,
    pub(super) mode: u32,
    pub(super) recovery: Vec<RecoveryReport>,
    /// Whose journal files this process uses (see docs/trust.md, "Journals").
    pub(super) trust: crate::domain::TrustPolicy,
}

pub(super) const BUSY: u64 = 1 << 63;
pub(crate) const ROLE_APPENDER: u32 = 1;

pub(super) fn bucket_for(hdr: &MetaHeader, ts: u64) -> (u64, u64) {
    if hdr.roll_kind == ROLL_TIME {
        let p = hdr.roll_secs.saturating_mul(1_000_000_000);
        let start = ts / p * p;
        (start, start.saturating_add(p))
    } else {
        (0, u64::MAX)
    }
}

impl Journal {
    /// Opens (or, with `opts.create`, creates) the journal in directory `dir`.
    ///
    /// A directory that is not empty and has no `journal.meta` is refused
    /// ([`OpenError::NotASegment`]) rather than filled with journal files.
    ///
    /// Files in the directory are used only when owned by this process's user, by root, or
    /// by a uid listed in `SHMBUS_TRUST_UIDS`; the directory itself must be owned by one of
    /// them and, if every user may write to it, be sticky (see docs/trust.md, "Journals").
    /// Anything else is [`OpenError::Untrusted`].
    pub fn open(dir: impl AsRef<Path>, opts: &JournalOptions) -> Result<Journal, OpenError> {
        Journal::open_with_trust(dir, opts, &crate::domain::TrustPolicy::from_env()?)
    }

    /// [`Journal::open`] with an explicit trust policy (instead of the one
    /// `SHMBUS_TRUST_UIDS` gives): how a process deliberately uses a journal another user
    /// created, e.g. `&TrustPolicy::from_env()?.trust_uid(1001)`.
    pub fn open_with_trust(
        dir: impl AsRef<Path>,
        opts: &JournalOptions,
        trust: &crate::domain::TrustPolicy,
    ) -> Result<Journal, OpenError> {
        let dir = dir.as_ref().to_owned();
        let meta_path = dir.join(META_FILE);
        let hdr = opts.to_header();
        let mut made_dir = false;
        if opts.create {
            hdr.validate().map_err(|e| OpenError::InvalidConfig { what: e.to_string() })?;
            made_dir = dir.symlink_metadata().is_err();
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(dir_mode(opts.mode))
                .create(&dir)
                .map_err(|e| OpenError::io(&dir, e))?;
        }
        if opts.create || dir.symlink_metadata().is_ok() {
            files::check_journal_dir(&dir, trust)?;
        }
        let mut made_meta = false;
        if meta_path.symlink_metadata().is_err() {
            if !opts.create {
                return Err(OpenError::NotFound { path: meta_path });
            }
            let foreign = std::fs::read_dir(&dir).map_err(|e| OpenError::io(&dir, e))?.flatten().any(|e| {
                // Hidden files are our temporaries; journal files may be a concurrent
                // creator's, who just won the race.
                e.file_name().to_str().is_none_or(|n| {
                    !(n.starts_with('.')
                        || n == META_FILE
                        || n == READERS_LOCK_FILE
                        || n.ends_with(".sbjd")
                        || n.ends_with(".sbji"))
                })
            });
            if foreign {
                return Err(OpenError::NotASegment { path: dir });
            }
            let head = hdr.encode();
            made_meta = files::create_file_atomically(&meta_path, opts.mode, META_SIZE as u64, &head)
                .map_err(|e| OpenError::io(&meta_path, e))?;
        }
        let r = Journal::open_meta(dir.clone(), &meta_path, opts.mode, trust);
        if r.is_err() && made_meta {
            // The journal was being created by this call and its first cycle could not be:
            // leave nothing half made (no journal.meta pointing at nothing). Only if nobody
            // else got a cycle file in meanwhile.
            if dir.join(data_file_name(0)).symlink_metadata().is_err() {
                let _ = std::fs::remove_file(dir.join(index_file_name(0)));
                let _ = std::fs::remove_file(&meta_path);
                if made_dir {
                    let _ = std::fs::remove_dir(&dir);
                }
            }
        }
        r
    }

    fn open_meta(
        dir: PathBuf,
        meta_path: &Path,
        mode: u32,
        trust: &crate::domain::TrustPolicy,
    ) -> Result<Journal, OpenError> {
        let meta = MetaFile::open(meta_path, trust)?;
        let alone = files::flock(&meta.file, libc::LOCK_EX | libc::LOCK_NB).is_ok();
        let mut inner = Inner { dir, meta, mode, recovery: Vec::new(), trust: trust.clone() };
        let res = if alone { inner.recover() } else { Ok(Vec::new()) };
        // Downgrade (or take) the shared lock every open handle holds.
        let lock = files::flock(&inner.meta.file, libc::LOCK_SH);
        inner.recovery = res?;
        lock.map_err(|e| OpenError::io(meta_path, e))?;
        let j = Journal { inner: Arc::new(inner) };
        j.inner.reclaim();
        Ok(j)
    }

    /// The journal's directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// What open-time recovery dropped (empty after a clean stop or when other handles
    /// were open).
    pub fn recovery(&self) -> &[RecoveryReport] {
        &self.inner.recovery
    }

    /// A new appender (any number per process and across processes).
    pub fn appender(&self) -> Result<Appender, AppendError> {
        Appender::new(self.inner.clone())
    }

    /// A tailer from the oldest retained entry.
    pub fn tailer(&self) -> Result<Tailer, ReadError> {
        let (first, bad) = self.inner.first_start()?;
        let mut t = Tailer::at(self.inner.clone(), first, None)?;
        if let Some((cycle, what)) = bad {
            t.report_first(ReadError::Damaged { cycle, from: first, to: first, bytes: None, what });
        }
        Ok(t)
    }

    /// A tailer whose first entry is global index `index` (or the oldest retained entry, if
    /// `index` was deleted by retention; or the end, if `index` is in the future).
    pub fn tailer_at(&self, index: u64) -> Result<Tailer, ReadError> {
        Tailer::at(self.inner.clone(), index, None)
    }

    /// A tailer that sees only entries appended from now on.
    pub fn tailer_at_end(&self) -> Result<Tailer, ReadError> {
        let end = self.inner.next_index()?;
        Tailer::at(self.inner.clone(), end, None)
    }

    /// A tailer from the first entry whose timestamp is `>= ts_ns` (CLOCK_REALTIME ns), found
    /// by binary search. Timestamps of concurrent appenders can be out of order by their
    /// scheduling jitter; the search then lands on one of the candidates.
    pub fn tailer_at_time(&self, ts_ns: u64) -> Result<Tailer, ReadError> {
        let index = self.inner.search_time(ts_ns)?;
        Tailer::at(self.inner.clone(), index, None)
    }

    /// The named durable reader `name`: resumes at its persisted position (a new reader
    /// starts at the oldest retained entry). See [`Tailer::ack`] for the delivery guarantee.
    pub fn reader(&self, name: &str) -> Result<Tailer, ReaderError> {
        validate_name(name)?;
        let k = self.inner.claim_reader(name)?;
        let pos = self.inner.meta.reader_word(k, 1).load(Ordering::Acquire);
        match Tailer::named_at(self.inner.clone(), pos, k) {
            Ok(t) => Ok(t),
            Err(e) => {
                self.inner.release_reader(k);
                Err(ReaderError::Read(e))
            }
        }
    }

    /// Every named reader and its persisted position.
    pub fn readers(&self) -> Vec<ReaderInfo> {
        let m = &self.inner.meta;
        (0..MAX_READERS)
            .filter(|&k| m.reader_word(k, 0).load(Ordering::Acquire) == 1)
            .filter_map(|k| {
                let name = self.inner.reader_name(k)?;
                let pid = m.reader_word(k, 2).load(Ordering::Relaxed);
                let start = m.reader_word(k, 3).load(Ordering::Relaxed);
                let holder = (pid != 0 && process_is_alive(ProcessId { pid: pid as u32, start_time: start }))
                    .then_some(pid as u32);
                Some(ReaderInfo { name, position: m.reader_word(k, 1).load(Ordering::Acquire), holder_pid: holder })
            })
            .collect()
    }

    /// Deletes the named reader `name` (fails with `Busy` while a live process holds it).
    pub fn remove_reader(&self, name: &str) -> Result<bool, ReaderError> {
        validate_name(name)?;
        let lock = self.inner.lock_readers()?;
        let r = match self.inner.find_reader(name) {
            Some(k) => {
                self.inner.check_holder(k)?;
                self.inner.meta.reader_word(k, 0).store(0, Ordering::Release);
                Ok(true)
            }
            None => Ok(false),
        };
        drop(lock);
        r
    }

    /// A snapshot of cycles, entries, bytes, readers and appenders.
    pub fn info(&self) -> Result<JournalInfo, ReadError> {
        let inner = &self.inner;
        let mut cycles = Vec::new();
        let mut unreadable_cycles = Vec::new();
        for c in inner.list_cycles()? {
            let cy = match inner.open_cycle(c) {
                Ok(cy) => cy,
                Err(OpenError::NotFound { .. }) => continue, // deleted meanwhile
                Err(e) => {
                    unreadable_cycles.push((c, open_error_message(&e)));
                    continue;
                }
            };
            let (sealed, n, u) = pos_parts(cy.pos().load(Ordering::Acquire));
            let file_bytes = cy.data_file.metadata().map(|m| m.len()).unwrap_or(0)
                + cy.index_file.metadata().map(|m| m.len()).unwrap_or(0);
            cycles.push(CycleInfo {
                cycle: c,
                first_index: cy.hdr.first_index,
                entries: n,
                bytes: u * UNIT as u64,
                file_bytes,
                sealed,
                bucket_start_ns: cy.hdr.bucket_start,
            });
        }
        let first_index = cycles.first().map_or(0, |c| c.first_index);
        let next_index = cycles.last().map_or(0, |c| c.first_index + c.entries);
        let appenders = inner.meta.participants().list().into_iter().filter(|p| p.role == ROLE_APPENDER).count();
        Ok(JournalInfo {
            dir: inner.dir.clone(),
            format_version: JOURNAL_FORMAT_VERSION,
            first_index,
            next_index,
            bytes: cycles.iter().map(|c| c.bytes).sum(),
            file_bytes: cycles.iter().map(|c| c.file_bytes).sum(),
            cycles,
            unreadable_cycles,
            readers: self.readers(),
            appenders,
            storage: super::Storage::of(&inner.dir).ok(),
        })
    }

    /// Applies the configured retention now.
    pub fn gc(&self) -> Result<GcReport, io::Error> {
        let h = &self.inner.meta.hdr;
        let r = Retention {
            max_cycles: (h.retain_cycles != 0).then_some(h.retain_cycles),
            max_age: (h.retain_secs != 0).then(|| Duration::from_secs(h.retain_secs)),
        };
        self.gc_with(r)
    }

    /// Tiered storage: moves every cycle except the newest `keep_hot` to the `archive`
    /// directory (absolute, or relative to the journal directory; e.g. on a slower, larger
    /// disk). The archive is recorded in the metadata, so every tailer and named reader, in
    /// any process, finds archived cycles transparently; retention deletes from both tiers.
    /// Safe while tailers read: each cycle is complete in at least one tier at every
    /// instant. One archive per journal.
    pub fn tier(&self, archive: impl AsRef<Path>, keep_hot: u64) -> Result<TierReport, TierError> {
        self.inner.tier(archive.as_ref(), keep_hot)
    }

    /// The archive directory, if [`Journal::tier`] has set one.
    pub fn archive_dir(&self) -> Option<PathBuf> {
        self.inner.meta.archive_dir(&self.inner.dir)
    }

    /// Applies `retention` now (whatever the journal was configured with). Tailers still
    /// reading a deleted cycle keep their mapping; a tailer that later needs a deleted
    /// cycle reports [`ReadError::Gap`] and continues at the oldest retained entry.
    pub fn gc_with(&self, retention: Retention) -> Result<GcReport, io::Error> {
        self.inner.gc(retention)
    }
}

/// A cycle in [`JournalInfo`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CycleInfo {
    /// Cycle number.
    pub cycle: u64,
    /// Global index of its first entry.
    pub first_index: u64,
    /// Entries claimed in it (committed, abandoned or in flight).
    pub entries: u64,
    /// Bytes of its data area in use.
    pub bytes: u64,
    /// Bytes of its data and index files on disk.
    pub file_bytes: u64,
    /// No more entries will be added.
    pub sealed: bool,
    /// Start of its time bucket (CLOCK_REALTIME ns; 0 when rolling by size only).
    pub bucket_start_ns: u64,
}

/// A named reader in [`JournalInfo`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderInfo {
    /// Its name.
    pub name: String,
    /// Global index it resumes at.
    pub position: u64,
    /// The live process holding it, if any.
    pub holder_pid: Option<u32>,
}

/// A snapshot from [`Journal::info`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalInfo {
    /// The directory.
    pub dir: PathBuf,
    /// On-disk format version.
    pub format_version: u32,
    /// Cycles present, oldest first.
    pub cycles: Vec<CycleInfo>,
    /// Cycles whose files are present but cannot be read (damaged header, wrong size, not
    /// a regular file), with what is wrong. Readers report them as
    /// [`ReadError::Damaged`] and read on after them.
    pub unreadable_cycles: Vec<(u64, String)>,
    /// Oldest retained global index.
    pub first_index: u64,
    /// Index the next entry will get.
    pub next_index: u64,
    /// Data bytes in use over all cycles.
    pub bytes: u64,
    /// Bytes of all cycle files on disk.
    pub file_bytes: u64,
    /// Named readers.
    pub readers: Vec<ReaderInfo>,
    /// Registered appenders.
    pub appenders: usize,
    /// The filesystem the journal is on (`None` if the mount table could not tell).
    pub storage: Option<super::Storage>,
}

/// What [`Journal::tier`] moved.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TierReport {
    /// Cycles moved to the archive.
    pub moved_cycles: Vec<u64>,
    /// Bytes moved.
    pub moved_bytes: u64,
}

/// Moving cycles to the archive failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum TierError {
    /// The journal already archives to another directory.
    OtherArchive {
        /// The archive in use.
        existing: PathBuf,
    },
    /// The archive path is empty, too long or contains a NUL byte.
    BadPath,
    /// A file operation failed.
    Io(io::Error),
}

impl fmt::Display for TierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TierError::OtherArchive { existing } => {
                write!(f, "this journal already archives to {}; use that directory", existing.display())
            }
            TierError::BadPath => write!(f, "archive path must be 1 to {MAX_ARCHIVE_PATH} bytes without NUL"),
            TierError::Io(e) => write!(f, "moving cycles to the archive failed: {e}; check space and permissions"),
        }
    }
}

impl std::error::Error for TierError {}

/// Moves `from` to `to` (rename, or copy + fsync + link + remove across filesystems).
/// Returns the bytes moved. The destination appears complete or not at all; the source is
/// left for the caller to remove.
/// A copied source must be owned by a uid `trust` accepts: the copy would be ours.
fn move_file(from: &Path, to: &Path, mode: u32, trust: &crate::domain::TrustPolicy) -> io::Result<u64> {
    let len = std::fs::symlink_metadata(from)?.len();
    if to.symlink_metadata().is_ok() {
        return Ok(0);
    }
    match std::fs::hard_link(from, to) {
        Ok(()) => return Ok(len),
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) || e.kind() == io::ErrorKind::PermissionDenied => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(0),
        Err(e) => return Err(e),
    }
    let tmp = to.with_extension(format!("moving-{}", ProcessId::current().pid));
    // Copied by hand: never through a symlink at either name, created with exactly `mode`.
    let mut src = files::open_rw(from)?;
    files::check_owner(from, &src, trust)
        .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, open_error_message(&e)))?;
    let mut f = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?
    };
    let copied = (|| {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        io::copy(&mut src, &mut f)?;
        f.sync_all()
    })();
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let r = std::fs::hard_link(&tmp, to);
    let _ = std::fs::remove_file(&tmp);
    match r {
        Ok(()) => Ok(len),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(0),
        Err(e) => Err(e),
    }
}

/// What [`Journal::gc`] removed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GcReport {
    /// Cycles deleted.
    pub removed_cycles: Vec<u64>,
    /// Bytes of files deleted.
    pub removed_bytes: u64,
}

impl Inner {
    pub(super) fn hdr(&self) -> &MetaHeader {
        &self.meta.hdr
    }

    /// Opens cycle `c` from the journal directory or, failing that, from the archive tier.
    /// A cycle whose data file is present but whose index file is missing gets its index
    /// rebuilt from the data file (after looking for the complete pair in the other tier).
    pub(super) fn open_cycle(&self, c: u64) -> Result<CycleFiles, OpenError> {
        let archive = self.meta.archive_dir(&self.dir);
        match CycleFiles::open(&self.dir, c, &self.meta.hdr, None, &self.trust) {
            Err(OpenError::NotFound { path }) => {
                if let Some(a) = &archive {
                    match CycleFiles::open(a, c, &self.meta.hdr, None, &self.trust) {
                        Err(OpenError::NotFound { .. }) => {}
                        r => return r,
                    }
                }
                // Not complete in either tier: rebuild the index where the data file is.
                for d in std::iter::once(&self.dir).chain(archive.as_ref()) {
                    if d.join(data_file_name(c)).symlink_metadata().is_ok() {
                        return CycleFiles::open(d, c, &self.meta.hdr, Some(self.mode), &self.trust);
                    }
                }
                Err(OpenError::NotFound { path })
            }
            r => r,
        }
    }

    /// The directory holding cycle `c`'s data file now (hot first, then the archive).
    pub(super) fn cycle_dir(&self, c: u64) -> Option<PathBuf> {
        std::iter::once(self.dir.clone())
            .chain(self.meta.archive_dir(&self.dir))
            .find(|d| d.join(data_file_name(c)).exists())
    }

    /// Whether cycle `c`'s data file is present in either tier.
    pub(super) fn cycle_present(&self, c: u64) -> bool {
        std::iter::once(self.dir.clone())
            .chain(self.meta.archive_dir(&self.dir))
            .any(|d| d.join(data_file_name(c)).symlink_metadata().is_ok())
    }

    /// The current cycle: the metadata's `current` word, checked against the files. The
    /// word is raised only after its cycle's file exists, so a `current` whose file is
    /// missing while older cycles are present is damaged or hostile: it is put back to the
    /// newest cycle present (one CAS; honest writers only ever raise it to a present cycle).
    pub(super) fn current_cycle(&self) -> u64 {
        let c = self.meta.current().load(Ordering::Acquire);
        if c == 0 || self.cycle_present(c) {
            return c;
        }
        let newest = self.list_cycles().ok().and_then(|v| v.last().copied()).unwrap_or(0);
        if newest < c && !self.cycle_present(c) {
            let _ = self.meta.current().compare_exchange(c, newest, Ordering::AcqRel, Ordering::Acquire);
        }
        self.meta.current().load(Ordering::Acquire)
    }

    /// Opens cycle `c`, creating it (as cycle 0 or as the successor of sealed `c-1`) if it
    /// does not exist yet and `c` is not older than the current cycle.
    pub(super) fn open_or_create_cycle(&self, c: u64, ts: u64) -> Result<CycleFiles, OpenError> {
        self.open_or_create_after(c, ts, None)
    }

    /// [`Inner::open_or_create_cycle`], with the predecessor already mapped by the caller
    /// (an appender or tailer moving on from it): its header was checked when it was
    /// opened, so damage to the file's header since then does not stop the journal.
    pub(super) fn open_or_create_after(
        &self,
        c: u64,
        ts: u64,
        prev: Option<&CycleFiles>,
    ) -> Result<CycleFiles, OpenError> {
        match self.open_cycle(c) {
            Err(OpenError::NotFound { .. }) if c >= self.current_cycle() => {}
            Ok(cy) => {
                // Its creator may have died between linking the file and publishing it.
                self.meta.current().fetch_max(c, Ordering::AcqRel);
                return Ok(cy);
            }
            r => return r,
        }
        let first_index = if c == 0 {
            0
        } else {
            let opened;
            let prev = match prev {
                Some(p) if p.num + 1 == c => p,
                _ => {
                    opened = self.open_cycle(c - 1)?;
                    &opened
                }
            };
            seal(prev);
            let (_, n, _) = pos_parts(prev.pos().load(Ordering::Acquire));
            prev.hdr.first_index + n
        };
        let (bucket_start, bucket_end) = bucket_for(self.hdr(), ts);
        let hdr = CycleHeader { cycle: c, first_index, bucket_start, bucket_end, cycle_bytes: self.hdr().cycle_bytes };
        create_cycle(&self.dir, self.hdr(), self.mode, &hdr, &self.trust)?;
        self.meta.current().fetch_max(c, Ordering::AcqRel);
        self.meta.event().notify();
        self.open_cycle(c)
    }

    pub(super) fn first_index(&self) -> Result<u64, ReadError> {
        self.first_start().map(|(first, _)| first)
    }

    /// The oldest retained entry, and the oldest cycle passed over because it cannot be
    /// read (with what is wrong), if any: an unreadable oldest cycle must not stop reading
    /// from the start, and must not be passed over silently.
    pub(super) fn first_start(&self) -> Result<(u64, Option<(u64, String)>), ReadError> {
        for _ in 0..16 {
            let f = self.meta.first().load(Ordering::Acquire);
            // Cycles below `first` are being deleted by retention. A `first` past every
            // cycle present is damaged or hostile (retention never removes the current
            // cycle): it must not hide the journal, so then every cycle present counts.
            let cycles = self.list_cycles()?;
            let from = if cycles.iter().any(|&c| c >= f) { f } else { 0 };
            let mut bad = None;
            for c in cycles.into_iter().filter(|&c| c >= from) {
                match self.open_cycle(c) {
                    Ok(cy) => return Ok((cy.hdr.first_index, bad)),
                    Err(OpenError::NotFound { .. }) => {} // deleted meanwhile
                    Err(e) => {
                        bad.get_or_insert((c, open_error_message(&e)));
                    }
                }
            }
            if self.meta.first().load(Ordering::Acquire) != f {
                continue; // gc moved it meanwhile
            }
            return Ok((self.next_index()?, bad));
        }
        Err(ReadError::Open(OpenError::Io {
            path: self.dir.clone(),
            source: io::Error::other("cycles keep disappearing"),
        }))
    }

    pub(super) fn next_index(&self) -> Result<u64, ReadError> {
        let c = self.current_cycle();
        let cy = self.open_or_create_cycle(c, realtime_ns())?;
        let (_, n, _) = pos_parts(cy.pos().load(Ordering::Acquire));
        Ok(cy.hdr.first_index + n)
    }

    /// Cycle numbers present in the journal directory and the archive, ascending.
    pub(super) fn list_cycles(&self) -> io::Result<Vec<u64>> {
        let mut v: Vec<u64> = std::fs::read_dir(&self.dir)?
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(parse_data_file_name))
            .collect();
        if let Some(a) = self.meta.archive_dir(&self.dir) {
            if let Ok(rd) = std::fs::read_dir(a) {
                v.extend(rd.flatten().filter_map(|e| e.file_name().to_str().and_then(parse_data_file_name)));
            }
        }
        v.sort_unstable();
        v.dedup();
        Ok(v)
    }

    /// Moves every cycle but the newest `keep_hot` (and never the current one) to
    /// `archive`, data file last in, data file first out, so that at every instant each
    /// cycle is complete in at least one tier.
    pub(super) fn tier(&self, archive: &Path, keep_hot: u64) -> Result<TierReport, TierError> {
        use std::os::unix::ffi::OsStrExt;
        let _lock = self.lock_readers().map_err(|e| TierError::Io(io::Error::other(e.to_string())))?;
        if let Some(existing) = self.meta.archive_dir(&self.dir) {
            if existing != self.dir.join(archive) {
                return Err(TierError::OtherArchive { existing });
            }
        } else if !self.meta.set_archive_dir(archive.as_os_str().as_bytes()) {
            return Err(TierError::BadPath);
        }
        let adir = self.dir.join(archive);
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(dir_mode(self.mode))
                .create(&adir)
                .map_err(TierError::Io)?;
        }
        let newest = self.list_cycles().map_err(TierError::Io)?.last().copied().unwrap_or(0);
        let current = self.current_cycle().min(newest);
        let hot: Vec<u64> = std::fs::read_dir(&self.dir)
            .map_err(TierError::Io)?
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(parse_data_file_name))
            .filter(|&c| c < current)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let keep = keep_hot.saturating_sub(1) as usize; // the current cycle counts as hot
        let mut rep = TierReport::default();
        for &c in hot.iter().take(hot.len().saturating_sub(keep)) {
            let mut bytes = 0;
            for name in [index_file_name(c), data_file_name(c)] {
                bytes += move_file(&self.dir.join(&name), &adir.join(&name), self.mode, &self.trust)
                    .map_err(TierError::Io)?;
            }
            for name in [data_file_name(c), index_file_name(c)] {
                match std::fs::remove_file(self.dir.join(name)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(TierError::Io(e)),
                }
            }
            rep.moved_cycles.push(c);
            rep.moved_bytes += bytes;
        }
        Ok(rep)
    }

    /// Reclaims participant entries of dead processes, abandoning what they had claimed.
    pub(super) fn reclaim(&self) {
        let table = self.meta.participants();
        table.reclaim_dead(ProcessId::current(), process_is_alive, |index, entry| {
            let a0 = entry.aux[0].load(Ordering::Acquire);
            if a0 & BUSY != 0 {
                let w = entry.aux[1].load(Ordering::Relaxed);
                let units = entry.aux[2].load(Ordering::Relaxed);
                self.abandon_dead_claim(index, a0 & !BUSY, w, units);
            }
            entry.aux[0].store(0, Ordering::Release);
        });
    }

    /// Whether a participant other than `except` records a pending claim of `w` in cycle `c`.
    pub(super) fn claim_recorded_elsewhere(&self, except: usize, c: u64, w: u64) -> Option<u64> {
        let table = self.meta.participants();
        (0..table.len()).filter(|&i| i != except && table.owner(i).is_some()).find_map(|i| {
            let e = table.entry(i);
            let a0 = e.aux[0].load(Ordering::Acquire);
            (a0 == BUSY | c && e.aux[1].load(Ordering::Relaxed) == w).then(|| e.aux[2].load(Ordering::Relaxed))
        })
    }

    /// The first claim in flight in cycle `c` with an in-cycle index in `i+1..j`, as
    /// recorded by live appenders: (index, unit offset).
    pub(super) fn earliest_claim_between(&self, c: u64, i: u64, j: u64) -> Option<(u64, u64)> {
        let table = self.meta.participants();
        (0..table.len())
            .filter(|&k| table.owner(k).is_some())
            .filter_map(|k| {
                let e = table.entry(k);
                if e.aux[0].load(Ordering::Acquire) != BUSY | c {
                    return None;
                }
                let (_, n, u) = pos_parts(e.aux[1].load(Ordering::Relaxed));
                (n > i && n < j).then_some((n, u))
            })
            .min()
    }

    pub(super) fn abandon_dead_claim(&self, index: usize, c: u64, w: u64, units: u64) {
        let Ok(cy) = self.open_cycle(c) else { return };
        let (_, wn, wu) = pos_parts(w);
        let (_, n, u) = pos_parts(cy.pos().load(Ordering::Acquire));
        if wn >= n || self.claim_recorded_elsewhere(index, c, w).is_some() {
            return; // the claim never happened, or a live appender holds it
        }
        if !units_fit(&cy, wu, units, u) {
            return;
        }
        // Consistency with the next entry's index slot, when it is known.
        if wn + 1 < n {
            if let Some(s) = cy.index_slot(wn + 1) {
                let v = s.load(Ordering::Relaxed) as u64;
                if v != 0 && v - 1 != wu + units {
                    return;
                }
            }
        }
        abandon_at(&cy, wu, units);
        self.meta.event().notify();
    }

    pub(super) fn recover(&self) -> Result<Vec<RecoveryReport>, OpenError> {
        self.reclaim();
        // The newest cycle file present is current, even if its creator died before
        // publishing it in the metadata.
        let newest = self.list_cycles().map_err(|e| OpenError::io(&self.dir, e))?.last().copied().unwrap_or(0);
        self.meta.current().fetch_max(newest, Ordering::AcqRel);
        let c = self.current_cycle();
        let now = realtime_ns();
        let cy = match self.open_or_create_cycle(c, now) {
            Ok(cy) => cy,
            Err(OpenError::Truncated { .. } | OpenError::Corrupt { .. }) => {
                // The current cycle's header is gone: move the wreck aside and start the
                // cycle again from its predecessor's end.
                let d = self.dir.join(data_file_name(c));
                let aside = self.dir.join(format!("{}.corrupt-{}", data_file_name(c), now));
                std::fs::rename(&d, &aside).map_err(|e| OpenError::io(&d, e))?;
                let _ = std::fs::remove_file(self.dir.join(index_file_name(c)));
                self.open_or_create_cycle(c, now)?;
                return Ok(vec![RecoveryReport {
                    cycle: c,
                    kept_entries: 0,
                    dropped_entries: 0,
                    dropped_bytes: 0,
                    abandoned_holes: 0,
                    damaged_ranges: 0,
                    reason: ScanStop::BadHeader,
                }]);
            }
            Err(e) => return Err(e),
        };
        let max = self.hdr().max_entry;
        let dsize = cy
            .data_file
            .metadata()
            .map_err(|e| OpenError::io(&self.dir, e))?
            .len()
            .saturating_sub(CYCLE_HEADER_PAGE as u64);
        let isize = cy.index_file.metadata().map_err(|e| OpenError::io(&self.dir, e))?.len();
        let avail = dsize.min(cy.cap_units * UNIT as u64) / UNIT as u64 * UNIT as u64;
        let (sealed, n, u) = pos_parts(cy.pos().load(Ordering::Acquire));
        cy.alloc().store(cy.alloc().load(Ordering::Relaxed).min(avail), Ordering::Release);
        cy.ialloc().store(cy.ialloc().load(Ordering::Relaxed).min(isize.min(cy.index.len() as u64)), Ordering::Release);
        let claimed = (u * UNIT as u64).min(avail);
        // SAFETY: we hold the exclusive lock: no other process has the journal open, so the
        // bytes do not change while this slice lives; `claimed <= avail <=` the file size
        // and the mapping length.
        let data = unsafe { std::slice::from_raw_parts(cy.data_ptr(0) as *const u8, claimed as usize) };
        let (mut i, mut off, mut holes, mut damaged) = (0u64, 0u64, 0u64, 0u64);
        let mut reason = ScanStop::End;
        // Past a damaged range (a zeroed page, junk headers) the walk goes on at the next
        // sound entry, which carries its own index: the damage stays where it is (readers
        // report and skip it) and nothing healthy after it is cut.
        let resume = |i: u64, off: u64| find_next_entry(data, off, i + 1, n, max);
        while off < claimed && i < n {
            match read_entry(data, off, i, max) {
                Ok((ScannedEntry::Committed { units, .. } | ScannedEntry::Abandoned { units, .. }, ..)) => {
                    // The index is a hint: repair a damaged slot while we are here.
                    if let Some(s) = cy.index_slot(i) {
                        let v = (off / UNIT as u64 + 1) as u32;
                        if s.load(Ordering::Relaxed) != v {
                            s.store(v, Ordering::Relaxed);
                        }
                    }
                    i += 1;
                    off += units * UNIT as u64;
                }
                Err(ScanStop::Unfinished) => {
                    // A hole left by a dead writer: its end is the next entry's start.
                    let next = if i + 1 == n {
                        Some(u)
                    } else {
                        cy.index_slot(i + 1)
                            .map(|s| s.load(Ordering::Relaxed) as u64)
                            .filter(|&v| v != 0)
                            .map(|v| v - 1)
                    };
                    let units = next.map(|nu| nu.saturating_sub(off / UNIT as u64)).unwrap_or(0);
                    let ok = units_fit(&cy, off / UNIT as u64, units, u)
                        && (off + units * UNIT as u64) <= claimed
                        && (i + 1 == n || read_entry(data, off + units * UNIT as u64, i + 1, max).is_ok());
                    if !ok {
                        if let Some((j, o)) = resume(i, off) {
                            damaged += 1;
                            (i, off) = (j, o);
                            continue;
                        }
                        reason = ScanStop::Unfinished;
                        break;
                    }
                    cy.entry_word(off).store(entry_word(ST_ABANDONED, 0, units), Ordering::Release);
                    holes += 1;
                    i += 1;
                    off += units * UNIT as u64;
                }
                Err(stop) => {
                    if let Some((j, o)) = resume(i, off) {
                        damaged += 1;
                        (i, off) = (j, o);
                        continue;
                    }
                    reason = stop;
                    break;
                }
            }
        }
        // Entries committed past the position word (flush mode after a power loss: the
        // entries' pages were synced, the header page with the position word was not).
        let (n, u) = if i == n && off == u * UNIT as u64 && !sealed {
            // Up to the file's real size: after a power loss the `alloc` word (in the unsynced
            // header page) may be stale too.
            // SAFETY: we are alone (exclusive lock), and `avail` lies inside both the file
            // and the mapping.
            let all = unsafe { std::slice::from_raw_parts(cy.data_ptr(0) as *const u8, avail as usize) };
            while let Ok((ScannedEntry::Committed { units, .. }, ..)) = read_entry(all, off, i, max) {
                if let Some(s) = cy.index_slot(i) {
                    s.store((off / UNIT as u64 + 1) as u32, Ordering::Relaxed);
                }
                i += 1;
                off += units * UNIT as u64;
            }
            if i > n {
                cy.alloc().fetch_max(off, Ordering::AcqRel);
                cy.pos().store(pos_word(false, i, off / UNIT as u64), Ordering::Release);
            }
            (i, off / UNIT as u64)
        } else {
            (n, u)
        };
        if i == n && off < u * UNIT as u64 {
            reason = ScanStop::PastEnd;
        }
        if i == n && off == u * UNIT as u64 {
            return Ok(if holes > 0 || damaged > 0 {
                vec![RecoveryReport {
                    cycle: c,
                    kept_entries: n,
                    dropped_entries: 0,
                    dropped_bytes: 0,
                    abandoned_holes: holes,
                    damaged_ranges: damaged,
                    reason,
                }]
            } else {
                Vec::new()
            });
        }
        // Cut: zero the junk (within the backed file) so it is never read as a header.
        let junk_end = (u * UNIT as u64).min(avail);
        if junk_end > off {
            // SAFETY: `off..junk_end` lies inside the backed data area; we are alone.
            unsafe { std::ptr::write_bytes(cy.data_ptr(off), 0, (junk_end - off) as usize) };
        }
        for k in i..n {
            match cy.index_slot(k) {
                Some(s) => s.store(0, Ordering::Relaxed),
                None => break,
            }
        }
        cy.pos().store(pos_word(false, i, off / UNIT as u64), Ordering::Release);
        let _ = sealed;
        let _ = files::fdatasync(&cy.data_file);
        Ok(vec![RecoveryReport {
            cycle: c,
            kept_entries: i,
            dropped_entries: n - i,
            dropped_bytes: (u * UNIT as u64).saturating_sub(off),
            abandoned_holes: holes,
            damaged_ranges: damaged,
            reason,
        }])
    }

    pub(super) fn gc(&self, r: Retention) -> io::Result<GcReport> {
        self.reclaim();
        let cycles = self.list_cycles()?;
        // Checked against the files, and never past the newest cycle present: a damaged
        // `current` word must not make retention delete the cycle being written.
        let current = self.current_cycle().min(cycles.last().copied().unwrap_or(0));
        let mut rep = GcReport::default();
        let older: Vec<u64> = cycles.iter().copied().filter(|&c| c < current).collect();
        let total = cycles.len() as u64;
        for (k, &c) in older.iter().enumerate() {
            let remaining = total - k as u64;
            let by_count = r.max_cycles.is_some_and(|m| remaining > m.max(1));
            let cdir = self.cycle_dir(c).unwrap_or_else(|| self.dir.clone());
            let dpath = cdir.join(data_file_name(c));
            let by_age = r.max_age.is_some_and(|age| {
                std::fs::metadata(&dpath)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|e| e > age)
            });
            if !by_count && !by_age {
                break;
            }
            // Publish first, then delete: tailers that miss the file see `first` moved.
            self.meta.first().fetch_max(c + 1, Ordering::AcqRel);
            let ipath = cdir.join(index_file_name(c));
            for p in [&dpath, &ipath] {
                if let Ok(m) = std::fs::symlink_metadata(p) {
                    rep.removed_bytes += m.len();
                }
                match std::fs::remove_file(p) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            rep.removed_cycles.push(c);
        }
        Ok(rep)
    }

    /// First global index whose entry has a timestamp `>= ts`.
    pub(super) fn search_time(&self, ts: u64) -> Result<u64, ReadError> {
        let max = self.hdr().max_entry;
        for c in self.list_cycles()? {
            let Ok(cy) = self.open_cycle(c) else { continue };
            let (_, n, _) = pos_parts(cy.pos().load(Ordering::Acquire));
            let ts_at = |i: u64| -> Option<u64> {
                // The first readable entry at or after i (bounded probe).
                (i..n.min(i + 64)).find_map(|k| entry_ts(&cy, k, max))
            };
            let last_ts = (0..n).rev().take(64).find_map(|k| entry_ts(&cy, k, max));
            if n == 0 || last_ts.is_some_and(|t| t < ts) {
                continue;
            }
            let (mut lo, mut hi) = (0u64, n);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                match ts_at(mid) {
                    Some(t) if t < ts => lo = mid + 1,
                    _ => hi = mid,
                }
            }
            if lo < n {
                return Ok(cy.hdr.first_index + lo);
            }
        }
        self.next_index()
    }

    // ---- named readers ----

    pub(super) fn lock_readers(&self) -> Result<std::fs::File, ReaderError> {
        let p = self.dir.join(READERS_LOCK_FILE);
        let f = files::open_lock_file(&p, self.mode, &self.trust).map_err(ReaderError::Io)?;
        files::flock(&f, libc::LOCK_EX).map_err(|e| ReaderError::Io(OpenError::io(&p, e)))?;
        Ok(f)
    }

    pub(super) fn reader_name(&self, k: usize) -> Option<String> {
        let m = &self.meta;
        let len = m.reader_word(k, 5).load(Ordering::Relaxed) as usize;
        if len == 0 || len > 64 {
            return None;
        }
        let mut b = [0u8; 64];
        for w in 0..8 {
            b[w * 8..w * 8 + 8].copy_from_slice(&m.reader_word(k, 8 + w).load(Ordering::Relaxed).to_le_bytes());
        }
        let s = std::str::from_utf8(&b[..len]).ok()?;
        validate_name(s).ok()?;
        Some(s.to_owned())
    }

    pub(super) fn find_reader(&self, name: &str) -> Option<usize> {
        (0..MAX_READERS).find(|&k| {
            self.meta.reader_word(k, 0).load(Ordering::Acquire) == 1 && self.reader_name(k).as_deref() == Some(name)
        })
    }

    pub(super) fn check_holder(&self, k: usize) -> Result<(), ReaderError> {
        let m = &self.meta;
        let pid = m.reader_word(k, 2).load(Ordering::Acquire);
        let start = m.reader_word(k, 3).load(Ordering::Relaxed);
        if pid != 0 && process_is_alive(ProcessId { pid: pid as u32, start_time: start }) {
            return Err(ReaderError::Busy { holder_pid: pid as u32 });
        }
        Ok(())
    }

    pub(super) fn claim_reader(&self, name: &str) -> Result<usize, ReaderError> {
        let _lock = self.lock_readers()?;
        let m = &self.meta;
        let k = match self.find_reader(name) {
            Some(k) => {
                self.check_holder(k)?;
                k
            }
            None => {
                let k = (0..MAX_READERS)
                    .find(|&k| m.reader_word(k, 0).load(Ordering::Acquire) != 1)
                    .ok_or(ReaderError::TableFull { max: MAX_READERS })?;
                let mut b = [0u8; 64];
                b[..name.len()].copy_from_slice(name.as_bytes());
                for w in 0..8 {
                    m.reader_word(k, 8 + w).store(
                        u64::from_le_bytes(b[w * 8..w * 8 + 8].try_into().unwrap_or_default()),
                        Ordering::Relaxed,
                    );
                }
                m.reader_word(k, 5).store(name.len() as u64, Ordering::Relaxed);
                let first = self.first_index().map_err(ReaderError::Read)?;
                m.reader_word(k, 1).store(first, Ordering::Relaxed);
                // Pairs with the Acquire loads of the state word in `find_reader`/`readers`.
                m.reader_word(k, 0).store(1, Ordering::Release);
                k
            }
        };
        let me = ProcessId::current();
        m.reader_word(k, 3).store(me.start_time, Ordering::Relaxed);
        m.reader_word(k, 2).store(me.pid as u64, Ordering::Release);
        Ok(k)
    }

    pub(super) fn release_reader(&self, k: usize) {
        let m = &self.meta;
        if m.reader_word(k, 2).load(Ordering::Relaxed) == ProcessId::current().pid as u64 {
            m.reader_word(k, 2).store(0, Ordering::Release);
        }
    }

    pub(super) fn store_reader_pos(&self, k: usize, pos: u64) {
        let m = &self.meta;
        // Pairs with the Acquire load in `Journal::reader`: one aligned 8-byte store, so the
        // persisted position is always a whole value, never torn, whenever the process dies.
        m.reader_word(k, 1).store(pos, Ordering::Release);
        m.reader_word(k, 4).store(realtime_ns(), Ordering::Relaxed);
        if m.hdr.durability == 1 {
            let _ = files::msync_range(&m.map, META_READERS_OFFSET + k * READER_ENTRY_SIZE, READER_ENTRY_SIZE);
        }
    }
}

/// Whether an entry of `units` at unit offset `at` fits before the claimed end `end`.
pub(super) fn units_fit(cy: &CycleFiles, at: u64, units: u64, end: u64) -> bool {
    let Some(e) = at.checked_add(units) else {
        return false;
    };
    units >= (ENTRY_HEADER / UNIT) as u64 && e <= end && e <= cy.cap_units && cy.backed(e * UNIT as u64)
}

/// Marks the entry at unit offset `at` abandoned if it is unwritten or reserved.
pub(super) fn abandon_at(cy: &CycleFiles, at: u64, units: u64) -> bool {
    protocol::abandon_entry(cy.entry_word(at * UNIT as u64), units)
}

pub(super) fn seal(cy: &CycleFiles) {
    protocol::seal(cy.pos());
}

/// Timestamp of in-cycle entry `i` if it is committed and valid.
pub(super) fn entry_ts(cy: &CycleFiles, i: u64, max: u64) -> Option<u64> {
    let off = (cy.index_slot(i)?.load(Ordering::Relaxed) as u64).checked_sub(1)? * UNIT as u64;
    let (_, _, u) = pos_parts(cy.pos().load(Ordering::Acquire));
    if off + ENTRY_HEADER as u64 > u * UNIT as u64 {
        return None;
    }
    let w = cy.entry_word(off).load(Ordering::Acquire);
    let (st, _, units) = entry_word_parts(w);
    if st != ST_COMMITTED || !units_fit(cy, off / UNIT as u64, units, u) {
        return None;
    }
    // SAFETY: committed (Acquire above pairs with the Release CAS in `commit`), so the
    // entry's bytes are final; `units_fit` checked they lie in the claimed, backed area.
    let bytes = unsafe { std::slice::from_raw_parts(cy.data_ptr(off) as *const u8, (units * UNIT as u64) as usize) };
    match read_entry(bytes, 0, i, max) {
        Ok((ScannedEntry::Committed { ts, .. }, ..)) => Some(ts),
        _ => None,
    }
}

/// What an [`OpenError`] from a journal call means for a journal: the shared messages of
/// [`OpenError`] speak of channels (and of `shmbus clean`, which does not touch journals).
/// Every journal error message goes through this; use it for errors of [`Journal::open`].
pub fn open_error_message(e: &OpenError) -> String {
    match e {
        OpenError::NotFound { path } if path.file_name().is_some_and(|n| n == META_FILE) => format!(
            "{}: not a journal (no {META_FILE}); `Journal::open` with `create` (or `shmbus journal append`) creates one",
            path.display()
        ),
        OpenError::NotFound { path } => format!(
            "{}: a journal file is missing (deleted while in use, or by hand); the journal skips what it cannot read",
            path.display()
        ),
        OpenError::NotASegment { path } if path.is_dir() => format!(
            "{}: not a journal directory (it holds other files); use a new or empty directory",
            path.display()
        ),
        OpenError::NotASegment { path } => format!(
            "{}: not a shmbus journal file (bad magic); the journal directory holds a foreign or damaged file: move it away",
            path.display()
        ),
        OpenError::VersionMismatch { path, found, supported } => format!(
            "{}: journal format version {found}, this library reads {supported}; use a shmbus that reads version {found}",
            path.display()
        ),
        OpenError::Truncated { path, size, expected } => format!(
            "{}: journal file is {size} bytes, its header needs {expected}: it is damaged; restore it from a copy, or move the journal directory aside and start a new one",
            path.display()
        ),
        OpenError::Corrupt { path, what } => format!(
            "{}: damaged journal file ({what}); restore it from a copy, or move the journal directory aside and start a new one",
            path.display()
        ),
        OpenError::InvalidConfig { what } => format!("invalid journal configuration: {what}"),
        e => e.to_string(),
    }
}
