//! The journal handle: its configuration, opening, the handle's public calls, `status`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::error::OpenError;
use crate::name::validate_name;
use crate::sync::Ordering;
use crate::sys::fs::FlockOp;
use crate::sys::{process_is_alive, ProcessId, ReadOnly};

use super::appender::Appender;
use super::cycles::{list_cycles_in, open_cycle_tier};
use super::error::{open_error_message, JournalRecvError, JournalTierError};
use super::files::{self, MetaFile};
use super::format::{
    data_file_name, index_file_name, pos_parts, MetaHeader, CYCLE_HEADER_PAGE, JOURNAL_FORMAT_VERSION, META_FILE,
    META_SIZE, READERS_LOCK_FILE, ROLL_NEVER, ROLL_TIME, UNIT,
};
use super::readers::ReaderInfo;
use super::recovery::{read_recovery_log, LostEntries, RecoveryReport};
use super::retention::{GcReport, Retention};
use super::shared::{dir_mode, realtime_ns, Inner, ROLE_APPENDER};
use super::tailer::Tailer;
use super::tier::TierReport;

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
    /// `msync(MS_SYNC)` of the entry's pages before `send` returns: survives power loss.
    Flush,
    /// A background thread of each appender `fdatasync`s every period: at most one period
    /// of committed entries is lost on power loss.
    Periodic(Duration),
}

/// How a journal is made, for [`Journal::create_or_open`]: built with the setters,
/// `JournalConfig::default().roll(RollCycle::Hourly).max_entry_len(1 << 20)`.
///
/// The configuration applies only when the journal is created. An existing journal keeps
/// the configuration it was created with: a value set here that differs from it is not an
/// error (there is no `LayoutMismatch` for journals), it is simply not used. The trust
/// policy ([`JournalConfig::trust`]) and the payload type ([`JournalConfig::for_type`]) apply
/// to every open.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JournalConfig {
    roll: RollCycle,
    cycle_bytes: u64,
    chunk_bytes: u64,
    pub(super) max_entry: u64,
    durability: Durability,
    retention: Retention,
    abandon_timeout: Duration,
    mode: u32,
    trust: Option<crate::domain::TrustPolicy>,
    pub(super) payload: Option<crate::pod::PayloadType>,
    pub(super) schema: Option<Arc<crate::Schema>>,
    /// The schema is the one `for_type` implies (see `CommonConfig::schema_implied`).
    pub(super) schema_implied: bool,
}

impl Default for JournalConfig {
    fn default() -> Self {
        JournalConfig {
            roll: RollCycle::Daily,
            cycle_bytes: 1 << 30,
            chunk_bytes: 16 << 20,
            max_entry: 16 << 20,
            durability: Durability::None,
            retention: Retention::default(),
            abandon_timeout: Duration::from_secs(10),
            mode: 0o600,
            trust: None,
            payload: None,
            schema: None,
            schema_implied: false,
        }
    }
}

impl JournalConfig {
    /// Time-based roll cycle. Default [`RollCycle::Daily`].
    pub fn roll(mut self, roll: RollCycle) -> Self {
        self.roll = roll;
        self
    }

    /// Capacity of one cycle's data area; a full cycle rolls. Default 1 GiB (virtual; the
    /// files start at a few hundred KiB and grow as entries arrive, see `chunk_bytes`).
    pub fn cycle_bytes(mut self, bytes: u64) -> Self {
        self.cycle_bytes = bytes;
        self
    }

    /// Largest growth step of data and index files. Default 16 MiB. A new cycle's data file
    /// starts with 256 KiB of data area, its index file at 64 KiB (each at most this); they
    /// double up to this size, then grow a step ahead of the appenders in steps of this size
    /// (docs/journal.md, "Sizes on disk").
    pub fn chunk_bytes(mut self, bytes: u64) -> Self {
        self.chunk_bytes = bytes;
        self
    }

    /// Largest entry payload, in bytes. Default 16 MiB.
    pub fn max_entry_len(mut self, len: u64) -> Self {
        self.max_entry = len;
        self
    }

    /// The schema of the journal's entries (see [`Schema`](crate::Schema)), stored when the
    /// journal is created. Unlike the other settings it is checked on every open with this
    /// config: an existing journal must carry the same schema, else
    /// [`OpenError::SchemaMismatch`]; with none set, any is accepted.
    pub fn schema(mut self, schema: crate::Schema) -> Self {
        self.schema = Some(Arc::new(schema));
        self.schema_implied = false;
        self
    }

    /// Durability of sends. Default [`Durability::None`].
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Retention applied at each roll and by [`Journal::gc`]. Default: keep everything.
    pub fn retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// How long an entry claimed by a *live* appender may stay unsent before readers
    /// abandon it. Default 10 s. (Dead appenders are detected at once.)
    pub fn abandon_timeout(mut self, timeout: Duration) -> Self {
        self.abandon_timeout = timeout;
        self
    }

    /// File mode of every file the journal creates (metadata, data, index, `readers.lock`),
    /// set exactly whatever the umask. Default 0o600. Directories the journal creates get
    /// the matching search bits (0o700 for 0o600, 0o750 for 0o640, 0o755 for 0o644).
    pub fn mode(mut self, mode: u32) -> Self {
        self.mode = mode;
        self
    }

    /// Whose journal files this process uses (see docs/trust.md, "Journals"). Default: the
    /// policy of `SHMBUS_TRUST_UIDS` ([`TrustPolicy::from_env`](crate::domain::TrustPolicy::from_env)).
    /// How a process deliberately uses a journal another user created:
    /// `.trust(TrustPolicy::from_env()?.trust_uid(1001))`.
    pub fn trust(mut self, trust: crate::domain::TrustPolicy) -> Self {
        self.trust = Some(trust);
        self
    }

    fn to_header(&self) -> MetaHeader {
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
            payload: self.payload.as_ref().map(crate::pod::StoredPayloadType::from_type),
            schema_len: self.schema.as_ref().map_or(0, |s| s.record_len() as u64),
        }
    }
}

/// 16 random bytes (`getrandom(2)`, falling back to time and pid if it is unavailable).
fn random_id() -> [u8; 16] {
    let mut b = [0u8; 16];
    if crate::sys::process::random_bytes(&mut b).is_err() {
        b[..8].copy_from_slice(&realtime_ns().to_le_bytes());
        b[8..12].copy_from_slice(&ProcessId::current().pid.to_le_bytes());
        b[12..].copy_from_slice(&(crate::sys::monotonic_ns() as u32).to_le_bytes());
    }
    b
}

/// An open journal. Cheap to clone (`Arc`); appenders and tailers keep it alive.
#[derive(Debug, Clone)]
pub struct Journal {
    pub(super) inner: Arc<Inner>,
    /// What open-time recovery dropped.
    recovery: Arc<[RecoveryReport]>,
}

/// The journal in the kind registry (`admin`). A journal lives in a directory, not in
/// a segment: this names its roles, and describes a segment file that claims to be a journal
/// (a corrupt or foreign file) by its raw parameters only.
pub(crate) struct JournalKind;

impl crate::describe::KindInfo for JournalKind {
    fn kind(&self) -> crate::kind::Kind {
        crate::kind::Kind::Journal
    }

    fn role_name(&self, role: u32) -> Option<&'static str> {
        (role == ROLE_APPENDER).then_some("appender")
    }

    fn param_keys(&self) -> &'static [&'static str] {
        &[]
    }

    /// The non-zero parameters, as `param<i>`.
    fn params(&self, raw: &[u64; crate::segment::PARAMS]) -> Vec<(&'static str, u64)> {
        crate::describe::RAW_PARAM_KEYS.iter().copied().zip(raw.iter().copied()).filter(|(_, v)| *v != 0).collect()
    }

    /// None: journal data lives in its directory, which `shmbus clean` never touches.
    fn pending(
        &self,
        _seg: crate::segment::Segment<crate::sys::ReadOnly>,
    ) -> Result<Option<crate::describe::Pending>, OpenError> {
        Ok(None)
    }

    fn describe(&self, _domain: &crate::Domain, _name: &str) -> Result<crate::describe::Description, OpenError> {
        Ok(crate::describe::Description::default())
    }
}

impl Journal {
    /// Opens the journal in directory `dir`, creating it (and the directory) with `config` if
    /// it does not exist. `config` applies only when the journal is created: an existing
    /// journal keeps its own configuration (see [`JournalConfig`]).
    ///
    /// A directory that is not empty and has no `journal.meta` is refused
    /// ([`OpenError::NotASegment`]) rather than filled with journal files.
    ///
    /// Files in the directory are used only when owned by this process's user, by root, or
    /// by a uid the trust policy lists ([`JournalConfig::trust`], by default
    /// `SHMBUS_TRUST_UIDS`); the directory itself must be owned by one of them and, if every
    /// user may write to it, be sticky (see docs/trust.md, "Journals"). Anything else is
    /// [`OpenError::Untrusted`].
    pub fn create_or_open(dir: impl AsRef<Path>, config: &JournalConfig) -> Result<Journal, OpenError> {
        let trust = match &config.trust {
            Some(t) => t.clone(),
            None => crate::domain::TrustPolicy::from_env()?,
        };
        config.check_creatable()?;
        Journal::open_inner(dir.as_ref(), Some(config), &trust)?.checked_for(config)
    }

    /// Opens the existing journal in directory `dir`; never creates one
    /// ([`OpenError::NotFound`] for `journal.meta` when there is none). Files it creates
    /// later (new cycles) get the mode of the journal's `journal.meta`. The trust policy is
    /// `SHMBUS_TRUST_UIDS`'s; for another one use [`Journal::create_or_open`] with
    /// [`JournalConfig::trust`].
    pub fn open(dir: impl AsRef<Path>) -> Result<Journal, OpenError> {
        Journal::open_inner(dir.as_ref(), None, &crate::domain::TrustPolicy::from_env()?)
    }

    fn open_inner(
        dir: &Path,
        config: Option<&JournalConfig>,
        trust: &crate::domain::TrustPolicy,
    ) -> Result<Journal, OpenError> {
        let create = config.is_some();
        let config = config.cloned().unwrap_or_default();
        let opts = &config;
        let dir = dir.to_owned();
        let meta_path = dir.join(META_FILE);
        let hdr = opts.to_header();
        let mut made_dir = false;
        if create {
            hdr.validate().map_err(|e| OpenError::InvalidConfig { what: e.to_string() })?;
            made_dir = dir.symlink_metadata().is_err();
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(dir_mode(opts.mode))
                .create(&dir)
                .map_err(|e| OpenError::io(&dir, e))?;
        }
        if create || dir.symlink_metadata().is_ok() {
            files::check_journal_dir(&dir, trust)?;
        }
        let mut made_meta = false;
        if meta_path.symlink_metadata().is_err() {
            if !create {
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
            let mut head = hdr.encode().to_vec();
            if let Some(schema) = &opts.schema {
                // The schema record right after the fixed metadata, written with it.
                head.resize(META_SIZE, 0);
                head.extend_from_slice(&schema.encode());
            }
            made_meta = files::create_file_atomically(&meta_path, opts.mode, hdr.file_size(), &head).map_err(|e| {
                // No journal.meta (out of inodes or space): leave no empty directory behind
                // either, if this call made it (`remove_dir` removes only an empty one, so
                // a concurrent creator's files stay).
                if made_dir {
                    let _ = std::fs::remove_dir(&dir);
                }
                OpenError::io(&meta_path, e)
            })?;
        }
        let r = Journal::open_meta(dir.clone(), &meta_path, create.then_some(opts.mode), trust);
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

    /// `mode`: of the files this handle creates; `None`: that of `journal.meta`.
    fn open_meta(
        dir: PathBuf,
        meta_path: &Path,
        mode: Option<u32>,
        trust: &crate::domain::TrustPolicy,
    ) -> Result<Journal, OpenError> {
        let meta = MetaFile::open(meta_path, trust)?;
        let mode = match mode {
            Some(m) => m,
            None => {
                use std::os::unix::fs::PermissionsExt;
                meta.file.metadata().map_err(|e| OpenError::io(meta_path, e))?.permissions().mode() & 0o777
            }
        };
        let alone = crate::sys::fs::flock(&meta.file, FlockOp::ExclusiveNonBlocking).is_ok();
        let inner = Inner { dir, meta, mode, trust: trust.clone() };
        let res = if alone { inner.recover() } else { Ok(Vec::new()) };
        // Downgrade (or take) the shared lock every open handle holds.
        let lock = crate::sys::fs::flock(&inner.meta.file, FlockOp::Shared);
        let recovery = res?;
        if alone {
            // Every later opener reports these losses too (`lost_entries`). Not being able
            // to record them (no space) does not fail the open: this handle reports them.
            let _ = inner.record_losses(&recovery);
        }
        lock.map_err(|e| OpenError::io(meta_path, e))?;
        let j = Journal { inner: Arc::new(inner), recovery: recovery.into() };
        j.inner.reclaim();
        Ok(j)
    }

    /// The journal's directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The journal's random identity, drawn when it was created: a journal removed and made
    /// again in the same directory has another one (a replica uses it to tell them apart).
    pub fn id(&self) -> [u8; 16] {
        self.inner.meta.hdr.id
    }

    /// What open-time recovery dropped (empty after a clean stop or when other handles
    /// were open).
    pub fn recovery(&self) -> &[RecoveryReport] {
        &self.recovery
    }

    /// The entries open-time recovery has removed from the cycles still present, by this
    /// open or an earlier one in any process (read from the journal's recovery log; oldest
    /// first). Tools report them the way they report damaged ranges.
    pub fn lost_entries(&self) -> Result<Vec<LostEntries>, OpenError> {
        let cycles = self.inner.list_cycles().map_err(|e| OpenError::io(&self.inner.dir, e))?;
        read_recovery_log(&self.inner.dir, &self.inner.trust, &cycles)
    }

    /// A new appender (any number per process and across processes).
    pub fn appender(&self) -> Result<Appender, OpenError> {
        Appender::new(self.inner.clone())
    }

    /// A tailer from the oldest retained entry.
    pub fn tailer(&self) -> Result<Tailer, OpenError> {
        let (first, bad) = self.inner.first_start()?;
        let mut t = Tailer::at(self.inner.clone(), first, None)?;
        if let Some((cycle, what)) = bad {
            t.report_first(JournalRecvError::Damaged { cycle, from: first, to: first, bytes: None, what });
        }
        Ok(t)
    }

    /// A tailer whose first entry is global index `index` (or the oldest retained entry, if
    /// `index` was deleted by retention; or the end, if `index` is in the future).
    pub fn tailer_at(&self, index: u64) -> Result<Tailer, OpenError> {
        Tailer::at(self.inner.clone(), index, None)
    }

    /// A tailer that sees only entries appended from now on.
    pub fn tailer_at_end(&self) -> Result<Tailer, OpenError> {
        let end = self.inner.next_index()?;
        Tailer::at(self.inner.clone(), end, None)
    }

    /// A tailer from the first entry whose timestamp is `>= ts_ns` (CLOCK_REALTIME ns), found
    /// by binary search. Timestamps of concurrent appenders can be out of order by their
    /// scheduling jitter; the search then lands on one of the candidates.
    pub fn tailer_at_time(&self, ts_ns: u64) -> Result<Tailer, OpenError> {
        let index = self.inner.search_time(ts_ns)?;
        Tailer::at(self.inner.clone(), index, None)
    }

    /// The named durable reader `name`: resumes at its persisted position (a new reader
    /// starts at the oldest retained entry). See [`Tailer::ack`] for the delivery guarantee.
    pub fn reader(&self, name: &str) -> Result<Tailer, OpenError> {
        validate_name(name)?;
        let k = self.inner.claim_reader(name)?;
        let pos = self.inner.meta.reader_word(k, 1).load(Ordering::Acquire);
        match Tailer::named_at(self.inner.clone(), pos, k) {
            Ok(t) => Ok(t),
            Err(e) => {
                self.inner.release_reader(k);
                Err(e)
            }
        }
    }

    /// Every named reader and its persisted position.
    pub fn readers(&self) -> Vec<ReaderInfo> {
        super::readers::readers_of(&self.inner.meta)
    }

    /// Deletes the named reader `name` (fails with `Busy` while a live process holds it).
    pub fn remove_reader(&self, name: &str) -> Result<bool, OpenError> {
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

    /// A snapshot of the journal in `dir`: cycles, entries, bytes, readers and appenders.
    ///
    /// Read-only: it needs read permission only, opens and maps every file read-only, and
    /// never creates, locks, registers, reclaims or repairs anything (so it does not run
    /// recovery, and an index file that is missing makes its cycle unreadable here). The
    /// trust policy is `SHMBUS_TRUST_UIDS`'s, as for [`Journal::open`].
    pub fn status(dir: impl AsRef<Path>) -> Result<JournalStatus, OpenError> {
        let dir = dir.as_ref().to_owned();
        let trust = crate::domain::TrustPolicy::from_env()?;
        if dir.symlink_metadata().is_ok() {
            files::check_journal_dir(&dir, &trust)?;
        }
        // Typed read-only: the metadata and every cycle file are opened `O_RDONLY`, mapped
        // `PROT_READ` and read through load-only words, so nothing here can store.
        let meta = MetaFile::<ReadOnly>::open_as(&dir.join(META_FILE), &trust)?;
        let archive_dir = meta.archive_dir(&dir);
        let mut cycles = Vec::new();
        let mut unreadable_cycles = Vec::new();
        let mut cut_cycles = Vec::new();
        for c in list_cycles_in(&dir, archive_dir.as_deref()).map_err(|e| OpenError::io(&dir, e))? {
            let (cy, archived) = match open_cycle_tier::<ReadOnly>(&dir, archive_dir.as_deref(), c, &meta.hdr, &trust) {
                Ok(opened) => opened,
                Err(OpenError::NotFound { .. }) => continue, // deleted meanwhile
                Err(e) => {
                    unreadable_cycles.push((c, open_error_message(&e)));
                    continue;
                }
            };
            let (sealed, n, u) = pos_parts(cy.pos_view().load(Ordering::Acquire));
            if cy.compressed_bytes.is_none() {
                // Read-only, status repairs nothing: a data file cut short of what its
                // entries claim is said here, before an open's recovery removes the rest.
                let have = cy.data_file.metadata().map_or(0, |m| m.len()).saturating_sub(CYCLE_HEADER_PAGE as u64);
                let claimed = u * UNIT as u64;
                if have < claimed {
                    cut_cycles.push((
                        c,
                        format!(
                            "its data file holds {have} of the {claimed} data bytes its {n} entries use: the entries \
                             past the cut are lost; the next open that may write (any journal verb but info) recovers \
                             the cycle and records what it removed"
                        ),
                    ));
                }
            }
            let file_bytes = cy.compressed_bytes.unwrap_or_else(|| {
                cy.data_file.metadata().map(|m| m.len()).unwrap_or(0)
                    + cy.index_file.metadata().map(|m| m.len()).unwrap_or(0)
            });
            cycles.push(CycleInfo {
                cycle: c,
                first_index: cy.hdr.first_index,
                entries: n,
                bytes: u * UNIT as u64,
                file_bytes,
                archived,
                sealed,
                bucket_start_ns: cy.hdr.bucket_start,
            });
        }
        let present: Vec<u64> = cycles.iter().map(|c| c.cycle).chain(unreadable_cycles.iter().map(|u| u.0)).collect();
        let (lost_entries, recovery_log_error) = match read_recovery_log(&dir, &trust, &present) {
            Ok(lost) => (lost, None),
            Err(e) => (Vec::new(), Some(open_error_message(&e))),
        };
        let first_index = cycles.first().map_or(0, |c| c.first_index);
        let next_index = cycles.last().map_or(0, |c| c.first_index + c.entries);
        // Live ones: status reclaims nothing, so a dead appender's entry may still be there.
        let appender_pids = meta.participant_view().live_pids_in_role(ROLE_APPENDER, process_is_alive);
        Ok(JournalStatus {
            format_version: meta.hdr.version,
            first_index,
            next_index,
            bytes: cycles.iter().map(|c| c.bytes).sum(),
            file_bytes: cycles.iter().map(|c| c.file_bytes).sum(),
            hot_file_bytes: cycles.iter().filter(|c| !c.archived).map(|c| c.file_bytes).sum(),
            archive_file_bytes: cycles.iter().filter(|c| c.archived).map(|c| c.file_bytes).sum(),
            cycles,
            unreadable_cycles,
            lost_entries,
            recovery_log_error,
            cut_cycles,
            readers: super::readers::readers_of(&meta),
            appenders: appender_pids.len(),
            appender_pids,
            storage: super::Storage::of(&dir).ok(),
            archive_dir: meta.archive_dir(&dir),
            retention: Retention::in_force(&meta.hdr, meta.retention_word()),
            schema: meta.schema.clone(),
            dir,
        })
    }

    /// The retention in force: what [`Journal::gc`] and appenders rolling to a new cycle
    /// apply. The one stored when the journal was created ([`JournalConfig::retention`]),
    /// until [`Journal::set_retention`] changes it.
    pub fn retention(&self) -> Retention {
        self.inner.retention()
    }

    /// Changes the journal's retention (stored in its metadata, so it outlives this handle):
    /// every appender rolling to a new cycle and every [`Journal::gc`], in any process,
    /// applies it from now on. Safe while appenders and tailers run: the setting is one
    /// atomic word. `Retention::default()` keeps everything. Limits: at most 2^31 − 1
    /// cycles, a max age of at most 2^32 − 1 seconds, counted in whole seconds (at least
    /// one); beyond them [`OpenError::InvalidConfig`]. Nothing is deleted by this call
    /// (call [`Journal::gc`] to apply it at once). Concurrent setters: the last store wins.
    pub fn set_retention(&self, retention: Retention) -> Result<(), OpenError> {
        let word = retention.to_word().map_err(|what| OpenError::InvalidConfig { what })?;
        self.inner.meta.set_retention_word(word);
        Ok(())
    }

    /// Applies the configured retention now.
    pub fn gc(&self) -> Result<GcReport, io::Error> {
        self.gc_with(self.retention())
    }

    /// Tiered storage: moves every cycle except the newest `keep_hot` to the `archive`
    /// directory (absolute, or relative to the journal directory; e.g. on a slower, larger
    /// disk). The archive is recorded in the metadata, so every tailer and named reader, in
    /// any process, finds archived cycles transparently; retention deletes from both tiers.
    /// Safe while tailers read: each cycle is complete in at least one tier at every
    /// instant. One archive per journal.
    pub fn tier(&self, archive: impl AsRef<Path>, keep_hot: u64) -> Result<TierReport, JournalTierError> {
        self.inner.tier(archive.as_ref(), keep_hot, None)
    }

    /// [`Journal::tier`], compressing each cycle file with zstd at `level` (1..=22; 3 is a
    /// good default) as it goes to the archive (`NNNNNNNNNNNN.sbjd.zst`, `.sbji.zst`). Every
    /// reader (tailers, named readers, [`Journal::status`], time search) reads such a cycle
    /// transparently: it is decompressed into memory (an anonymous file, at most the cycle
    /// file's size) when a reader opens it, so reading an archived cycle costs that memory
    /// while it is open. Compressed and encrypted entries stay as they are inside. Cycles
    /// already in the archive are left as they are. A damaged `.zst` (any changed byte: the
    /// frame has a checksum and records its size) makes the cycle unreadable, reported like
    /// any unreadable cycle file, never garbage.
    pub fn tier_zstd(
        &self,
        archive: impl AsRef<Path>,
        keep_hot: u64,
        level: i32,
    ) -> Result<TierReport, JournalTierError> {
        self.inner.tier(archive.as_ref(), keep_hot, Some(level))
    }

    /// The archive directory, if [`Journal::tier`] has set one.
    pub fn archive_dir(&self) -> Option<PathBuf> {
        self.inner.meta.archive_dir(&self.inner.dir)
    }

    /// Applies `retention` now (whatever the journal was configured with). Tailers still
    /// reading a deleted cycle keep their mapping; a tailer that later needs a deleted
    /// cycle reports [`JournalRecvError::Gap`] and continues at the oldest retained entry.
    pub fn gc_with(&self, retention: Retention) -> Result<GcReport, io::Error> {
        self.inner.gc(retention)
    }
}

impl JournalStatus {
    /// How many entries named reader `reader` is behind the newest: `next_index` minus its
    /// position (0 for a reader at or past the end).
    pub fn reader_lag(&self, reader: &ReaderInfo) -> u64 {
        self.next_index.saturating_sub(reader.position)
    }

    /// What was appended between the snapshot `earlier` and this one: `(entries, bytes)`,
    /// entries from `next_index`, bytes from each cycle's data bytes in use (a cycle new
    /// since `earlier` counts whole). Retention removing cycles in between does not count
    /// as negative appends.
    pub fn appended_since(&self, earlier: &JournalStatus) -> (u64, u64) {
        let entries = self.next_index.saturating_sub(earlier.next_index);
        let bytes = self
            .cycles
            .iter()
            .map(|c| {
                let before = earlier.cycles.iter().find(|e| e.cycle == c.cycle).map_or(0, |e| e.bytes);
                c.bytes.saturating_sub(before)
            })
            .fold(0u64, u64::saturating_add);
        (entries, bytes)
    }
}

/// A cycle in [`JournalStatus`].
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
    /// Whether its files are in the archive tier ([`Journal::tier`]) rather than the
    /// journal directory.
    pub archived: bool,
    /// No more entries will be added.
    pub sealed: bool,
    /// Start of its time bucket (CLOCK_REALTIME ns; 0 when rolling by size only).
    pub bucket_start_ns: u64,
}

/// A snapshot from [`Journal::status`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JournalStatus {
    /// The directory.
    pub dir: PathBuf,
    /// The journal's schema (`None`: it has none).
    pub schema: Option<Arc<crate::Schema>>,
    /// On-disk format version.
    pub format_version: u32,
    /// Cycles present, oldest first.
    pub cycles: Vec<CycleInfo>,
    /// Cycles whose files are present but cannot be read (damaged header, wrong size, not
    /// a regular file), with what is wrong. Readers report them as
    /// [`JournalRecvError::Damaged`] and read on after them.
    pub unreadable_cycles: Vec<(u64, String)>,
    /// Entries open-time recovery removed from the cycles present ([`Journal::lost_entries`]).
    pub lost_entries: Vec<LostEntries>,
    /// Why the recovery log could not be read, if it could not (then `lost_entries` is empty
    /// and unknown).
    pub recovery_log_error: Option<String>,
    /// Cycles whose data file is shorter than their entries claim (cut by a crash of the
    /// storage or a careless copy), with what that means: not yet recovered, so the count of
    /// `cycles` still includes the entries past the cut, which the next read-write open
    /// removes (and records in `lost_entries`).
    pub cut_cycles: Vec<(u64, String)>,
    /// Oldest retained global index.
    pub first_index: u64,
    /// Index the next entry will get.
    pub next_index: u64,
    /// Data bytes in use over all cycles.
    pub bytes: u64,
    /// Bytes of all cycle files on disk (`hot_file_bytes + archive_file_bytes`).
    pub file_bytes: u64,
    /// Bytes of the cycle files in the journal directory (the hot tier).
    pub hot_file_bytes: u64,
    /// Bytes of the cycle files in the archive tier (0 without one).
    pub archive_file_bytes: u64,
    /// Named readers.
    pub readers: Vec<ReaderInfo>,
    /// Registered appenders.
    pub appenders: usize,
    /// The live appenders' pids (each as recorded in its PID namespace), to name them.
    pub appender_pids: Vec<u32>,
    /// The filesystem the journal is on (`None` if the mount table could not tell).
    pub storage: Option<super::Storage>,
    /// The archive directory, if [`Journal::tier`] has set one.
    pub archive_dir: Option<PathBuf>,
    /// The retention in force ([`Journal::retention`]).
    pub retention: Retention,
}
