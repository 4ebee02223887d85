//! File glue for the journal: race-free creation, growth in chunks, locks, syncing, and the
//! mapped views of the metadata and cycle files.
//!
//! [`MetaFile`] and [`CycleFiles`] are generic over their mapping's [`Access`], as segments
//! and channels are: read-write (the default) for the journal's endpoints, read-only for
//! `Journal::status`, which opens every file `O_RDONLY` and maps it `PROT_READ`. The words a
//! store goes through (`current`, the reader table, a cycle's `pos`, …) are `AtomicU64`s of
//! the read-write types only; what only loads (the archive directory, the reader table's
//! contents, the participant view, a cycle's position) reads through load-only words
//! ([`RoArea`], [`Ro`]) on either, so a read-only journal cannot be written, by construction.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::domain::{TrustPolicy, TRUST_ENV};
use crate::error::OpenError;
use crate::sync::{AtomicU64, Ro, RoArea};
use crate::sys::fs::describe_uid;
use crate::sys::fs::{self, FlockOp};
use crate::sys::{Access, Mapping, ReadWrite};

use super::format::*;

/// Flags of every journal open: never through a symlink in the last component, never
/// blocking (a FIFO planted under a journal file's name must not hang the open), closed on
/// exec.
const OPEN_FLAGS: i32 = crate::sys::fs::NOFOLLOW_NONBLOCK_CLOEXEC;

/// Opens an existing journal file read-write: not through a symlink, without blocking, and
/// only if it is a regular file (anything else is an error that says what was found).
pub(crate) fn open_rw(path: &Path) -> io::Result<File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(OPEN_FLAGS)
        .open(path)
        .map_err(explain_open_error)?;
    require_regular(&f)?;
    Ok(f)
}

/// Opens an existing journal file as `A` maps it (`O_RDWR` for [`ReadWrite`], `O_RDONLY`
/// otherwise), with the checks of [`open_rw`].
fn open_file<A: Access>(path: &Path) -> io::Result<File> {
    if A::WRITABLE {
        return open_rw(path);
    }
    let f = std::fs::OpenOptions::new().read(true).custom_flags(OPEN_FLAGS).open(path).map_err(explain_open_error)?;
    require_regular(&f)?;
    Ok(f)
}

/// Opens the lock file `path`, creating it with `mode` if missing: not through a symlink,
/// without blocking, a regular file only.
pub(crate) fn open_lock_file(path: &Path, mode: u32, trust: &TrustPolicy) -> Result<File, OpenError> {
    let f = open_lock_file_unchecked(path, mode).map_err(|e| OpenError::io(path, e))?;
    check_owner(path, &f, trust)?;
    Ok(f)
}

fn open_lock_file_unchecked(path: &Path, mode: u32) -> io::Result<File> {
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(OPEN_FLAGS)
        .open(path)
    {
        Ok(f) => {
            // Created by us: exactly `mode`, whatever the umask.
            use std::os::unix::fs::PermissionsExt;
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
            Ok(f)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => open_rw(path),
        Err(e) => Err(explain_open_error(e)),
    }
}

/// Fails unless the opened journal file `f` (at `path`) is owned by a uid `trust` accepts
/// (see docs/trust.md, "Journals"): checked on the descriptor, so what is checked is what
/// is used.
pub(crate) fn check_owner(path: &Path, f: &File, trust: &TrustPolicy) -> Result<(), OpenError> {
    use std::os::unix::fs::MetadataExt;
    let uid = f.metadata().map_err(|e| OpenError::io(path, e))?.uid();
    if trust.trusts(uid) {
        return Ok(());
    }
    Err(OpenError::Untrusted {
        path: path.to_owned(),
        owner_uid: uid,
        why: format!(
            "the journal file belongs to {}, whom this process does not trust (a file planted in the journal's \
             directory could feed forged entries to readers or collect what is appended); if that user planted it, \
             remove it (`rm {}`, as its owner or root); to share the journal with that user on purpose, trust them: \
             `{TRUST_ENV}={uid}` or `JournalConfig::trust` (see docs/trust.md)",
            describe_uid(uid),
            path.display()
        ),
    })
}

/// Checks the journal directory `dir` (already known to exist): it is configuration, like
/// the root of domains, so it may be reached through symlinks in its path; but like a
/// domain directory it must be owned by a trusted uid, and if every user may write to it,
/// it must have the sticky bit (or anyone could remove or replace its files).
pub(crate) fn check_journal_dir(dir: &Path, trust: &TrustPolicy) -> Result<(), OpenError> {
    use std::os::unix::fs::MetadataExt;
    let st = std::fs::metadata(dir).map_err(|e| OpenError::io(dir, e))?;
    let (uid, mode) = (st.uid(), st.mode() & 0o7777);
    if !trust.trusts(uid) {
        return Err(OpenError::Untrusted {
            path: dir.to_owned(),
            owner_uid: uid,
            why: format!(
                "the journal directory belongs to {}, whom this process does not trust (its owner can replace the \
                 journal's files); use a directory of your own, or, to share the journal with that user on purpose, \
                 trust them: `{TRUST_ENV}={uid}` or `JournalConfig::trust` (see docs/trust.md)",
                describe_uid(uid)
            ),
        });
    }
    if mode & 0o002 != 0 && mode & 0o1000 == 0 {
        return Err(OpenError::Untrusted {
            path: dir.to_owned(),
            owner_uid: uid,
            why: format!(
                "the journal directory (mode {mode:04o}) is writable by every user and has no sticky bit, so anyone \
                 could replace the journal's files; `chmod o-w` or `chmod +t` it, or use another directory"
            ),
        });
    }
    Ok(())
}

/// `ELOOP` from `O_NOFOLLOW` means the name is a symlink: say so.
fn explain_open_error(e: io::Error) -> io::Error {
    if crate::sys::fs::is_symlink_loop(&e) {
        return io::Error::new(
            io::ErrorKind::InvalidInput,
            "is a symbolic link; journal files are never opened through one (someone may be redirecting \
             the journal): remove the link",
        );
    }
    e
}

/// Fails unless `f` is a regular file, naming what it is instead.
pub(crate) fn require_regular(f: &File) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let t = f.metadata()?.file_type();
    let what = if t.is_file() {
        return Ok(());
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("is {what}, not a regular file; a journal file must be a regular file: remove it"),
    ))
}

/// Creates `path` with `contents` as its first bytes and total length `len`, race-free:
/// built under a hidden temporary name and linked into place (`sys::fs::create_race_free`),
/// relative to the parent directory opened without following a symlink. `Ok(false)`: the
/// file already existed (someone else won).
pub(crate) fn create_file_atomically(path: &Path, mode: u32, len: u64, contents: &[u8]) -> io::Result<bool> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{} names no file", path.display())))?;
    let dir = fs::open_dir(parent)?;
    let created = fs::create_race_free(dir.as_fd(), name, mode, |file, _| {
        grow(file, len)?;
        file.write_all_at(contents, 0)
    });
    match created {
        Ok(made) => Ok(made.is_some()),
        Err(fs::CreateError::Temp(e) | fs::CreateError::Build(e) | fs::CreateError::Link(e)) => Err(e),
    }
}

/// Extends `file` to at least `len` bytes; never shrinks it, so concurrent growers are safe.
pub(crate) fn grow(file: &File, len: u64) -> io::Result<()> {
    grow_from(file, 0, len)
}

/// [`grow`], allocating only `from..len` (`from` capped at the file's size): the caller
/// knows the file already holds `0..from` (a growing cycle file). On tmpfs `fallocate` visits every page of its range, so
/// reallocating the whole file at each growth made growing quadratic in the file size.
pub(crate) fn grow_from(file: &File, from: u64, len: u64) -> io::Result<()> {
    // `from` comes from a shared word: never skip past what the file really holds.
    let from = from.min(file.metadata()?.len());
    if from >= len {
        return Ok(());
    }
    // Mode 0 only allocates and extends, never shrinks.
    if fs::fallocate(file, from, len - from)? {
        return Ok(());
    }
    // No fallocate on this filesystem: extend under an exclusive lock so that two growers
    // can never shrink each other's extension.
    fs::flock(file, FlockOp::Exclusive)?;
    let res = (|| {
        if file.metadata()?.len() < len {
            file.set_len(len)?;
        }
        Ok(())
    })();
    let _ = fs::flock(file, FlockOp::Unlock);
    res
}

/// Bytes of the data area a new cycle's data file starts with (capped at the journal's
/// growth chunk): a journal holding a few entries stays this small.
pub(crate) const DATA_START_BYTES: u64 = 256 << 10;
/// Bytes a new cycle's index file starts with (capped likewise): 16,384 entries.
pub(crate) const INDEX_START_BYTES: u64 = 64 << 10;

/// The size a growing cycle file moves to so that it holds `need` bytes: sizes double from
/// `start` (capped at `chunk`) up to `chunk`, then move in whole chunks, so a small journal
/// stays small and a busy one grows in today's large steps (`chunk_bytes`); never more
/// than `cap`. Every size is a multiple of the page (`start` and `chunk` are powers of two
/// or page multiples).
pub(crate) fn growth_size(need: u64, start: u64, chunk: u64, cap: u64) -> u64 {
    let start = start.min(chunk);
    let size = if need <= chunk {
        need.max(start).checked_next_power_of_two().unwrap_or(u64::MAX).min(chunk)
    } else {
        need.div_ceil(chunk).saturating_mul(chunk)
    };
    size.min(cap)
}

/// Which journal file behind `meta` or `cy` lost pages to a truncation by another process
/// while this process had it mapped (see [`Mapping::was_truncated`]): its path, and its
/// cycle (`None` for the metadata file). Costs one relaxed load of a process-wide counter
/// while no fault was ever contained in this process (always, on a sound host), so it may
/// be called on hot paths.
#[inline]
pub(crate) fn truncated_file(dir: &Path, meta: &MetaFile, cy: &CycleFiles) -> Option<(PathBuf, Option<u64>)> {
    if crate::sys::sigbus::contained_faults() == 0 {
        return None;
    }
    truncated_file_slow(dir, meta, cy)
}

#[cold]
fn truncated_file_slow(dir: &Path, meta: &MetaFile, cy: &CycleFiles) -> Option<(PathBuf, Option<u64>)> {
    if meta.map.was_truncated() {
        Some((dir.join(META_FILE), None))
    } else if cy.data.was_truncated() {
        Some((dir.join(data_file_name(cy.num)), Some(cy.num)))
    } else if cy.index.was_truncated() {
        Some((dir.join(index_file_name(cy.num)), Some(cy.num)))
    } else {
        None
    }
}

/// What a journal's `Truncated` errors say: the cause, what was lost, what is safe, and how
/// to recover. `appended`: the error of an appender (its last entry is lost).
pub(crate) fn truncated_message(path: &Path, cycle: Option<u64>, appended: bool) -> String {
    let what = match cycle {
        Some(c) => format!("cycle {c}'s file {}", path.display()),
        None => format!("the journal's metadata file {}", path.display()),
    };
    let lost = if appended {
        "the entry just appended landed past the cut, in memory private to this process, and is not in the journal \
         (nor is anything this appender would append through that file): it is lost"
    } else {
        "what this process read past the cut is zeros, and entries appended there by processes that had the file \
         mapped are lost"
    };
    format!(
        "{what} was truncated by another process while this process had it mapped; {lost}. The entries before the cut \
         are on disk. Stop whatever truncates journal files, then open the journal again (a new appender or tailer; \
         recovery repairs the cut cycle), or restore the file from a copy"
    )
}

/// The metadata file, mapped with `A`'s access (see the [module docs](self)).
#[derive(Debug)]
pub(crate) struct MetaFile<A: Access = ReadWrite> {
    pub(crate) file: File,
    pub(crate) map: Mapping<A>,
    pub(crate) hdr: MetaHeader,
    /// The journal's schema, read once at open (`None`: it has none).
    pub(crate) schema: Option<std::sync::Arc<crate::Schema>>,
}

impl MetaFile {
    /// Opens and maps the metadata file read-write.
    pub(crate) fn open(path: &Path, trust: &TrustPolicy) -> Result<MetaFile, OpenError> {
        MetaFile::open_as(path, trust)
    }
}

impl<A: Access> MetaFile<A> {
    /// Opens the metadata file `O_RDWR` or `O_RDONLY` and maps it with `A`'s access (a
    /// read-only one for status: nothing can be written through it).
    pub(crate) fn open_as(path: &Path, trust: &TrustPolicy) -> Result<MetaFile<A>, OpenError> {
        let file = open_file::<A>(path).map_err(|e| OpenError::io(path, e))?;
        check_owner(path, &file, trust)?;
        let size = file.metadata().map_err(|e| OpenError::io(path, e))?.len();
        let mut head = [0u8; META_IMMUTABLE_SIZE];
        let n = file.read_at(&mut head, 0).map_err(|e| OpenError::io(path, e))?;
        let hdr = match MetaHeader::decode(&head[..n]) {
            Ok(h) => h,
            Err(FormatError::BadMagic) | Err(FormatError::Short { .. })
                if n < 8 || head[..8] != META_MAGIC.to_le_bytes() =>
            {
                return Err(OpenError::NotASegment { path: path.to_owned() })
            }
            Err(FormatError::Version(v)) => {
                return Err(OpenError::VersionMismatch {
                    path: path.to_owned(),
                    found: v,
                    supported: JOURNAL_FORMAT_VERSION,
                })
            }
            Err(e) => return Err(OpenError::corrupt(path, e.to_string())),
        };
        if size != hdr.file_size() {
            return Err(OpenError::Truncated { path: path.to_owned(), size, expected: hdr.file_size() });
        }
        let schema = match hdr.schema_len {
            0 => None,
            // `decode` bounded the length; the size check put the record inside the file.
            len => {
                let mut record = vec![0u8; len as usize];
                file.read_exact_at(&mut record, META_SIZE as u64).map_err(|e| OpenError::io(path, e))?;
                let s = crate::Schema::decode(&record).map_err(|e| OpenError::corrupt(path, e.to_string()))?;
                Some(std::sync::Arc::new(s))
            }
        };
        let map = Mapping::map_as(file.as_fd(), META_SIZE).map_err(|e| OpenError::io(path, e))?;
        Ok(MetaFile { file, map, hdr, schema })
    }

    /// The whole file through load-only words.
    fn area(&self) -> RoArea<'_> {
        // SAFETY: the mapping is META_SIZE bytes, page aligned, and lives as long as `self`.
        unsafe { RoArea::new(self.map.as_const_ptr(), META_SIZE) }
    }

    /// The appenders' participant table through load-only words, on either mapping (status).
    pub(crate) fn participant_view(&self) -> crate::participants::ParticipantView<'_> {
        // SAFETY: the table lies at META_PARTICIPANTS_OFFSET, fully inside the mapping, which
        // lives as long as `self`; the view only loads.
        unsafe {
            crate::participants::ParticipantView::from_raw(
                self.map.as_const_ptr().add(META_PARTICIPANTS_OFFSET),
                std::os::fd::AsFd::as_fd(&self.file),
            )
        }
    }

    /// The archive directory recorded by `Journal::tier`, if any (validated: non-empty,
    /// no NUL, at most `MAX_ARCHIVE_PATH` bytes).
    pub(crate) fn archive_dir(&self, journal_dir: &Path) -> Option<PathBuf> {
        let word = |off| self.area().u64_at(off);
        // Pairs with the Release store of the length in `set_archive_dir`.
        let len = word(META_ARCHIVE_OFFSET).load(crate::sync::Ordering::Acquire) as usize;
        if len == 0 || len > MAX_ARCHIVE_PATH {
            return None;
        }
        let mut b = vec![0u8; len.div_ceil(8) * 8];
        for (k, chunk) in b.chunks_mut(8).enumerate() {
            let w = word(META_ARCHIVE_OFFSET + 8 + k * 8).load(crate::sync::Ordering::Relaxed);
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        b.truncate(len);
        if b.contains(&0) {
            return None;
        }
        use std::os::unix::ffi::OsStrExt;
        Some(journal_dir.join(std::ffi::OsStr::from_bytes(&b)))
    }

    /// The retention word (see [`META_RETENTION_OFFSET`]), load-only.
    pub(crate) fn retention_word(&self) -> u64 {
        // Pairs with the Release store in `set_retention_word`; one word, so never torn.
        self.area().u64_at(META_RETENTION_OFFSET).load(crate::sync::Ordering::Acquire)
    }

    /// Word `w` (0..16) of named-reader entry `k`, load-only.
    pub(crate) fn reader_view(&self, k: usize, w: usize) -> &Ro<AtomicU64> {
        self.area().u64_at(reader_word_offset(k, w))
    }
}

/// The byte offset of word `w` (0..16) of named-reader entry `k`.
fn reader_word_offset(k: usize, w: usize) -> usize {
    assert!(k < MAX_READERS && w < READER_ENTRY_SIZE / 8);
    META_READERS_OFFSET + k * READER_ENTRY_SIZE + w * 8
}

/// The read-write words, for the journal's endpoints.
impl MetaFile {
    fn word(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off % 8 == 0 && off + 8 <= META_SIZE);
        // SAFETY: `off` is a constant inside the META_SIZE mapping, 8-aligned (the mapping is
        // page aligned); atomics are valid for every bit pattern; the mapping lives as long
        // as `self`.
        unsafe { &*(self.map.as_const_ptr().add(off) as *const AtomicU64) }
    }

    /// Highest cycle number created so far.
    pub(crate) fn current(&self) -> &AtomicU64 {
        self.word(META_SHARED_OFFSET)
    }

    /// Oldest cycle not yet deleted by retention.
    pub(crate) fn first(&self) -> &AtomicU64 {
        self.word(META_SHARED_OFFSET + 8)
    }

    pub(crate) fn event(&self) -> &crate::event::EventWord {
        // SAFETY: offset 576 is inside the mapping, 4-aligned, and EventWord is a
        // repr(transparent) AtomicU32, valid for every bit pattern.
        unsafe { &*(self.map.as_const_ptr().add(META_SHARED_OFFSET + 64) as *const crate::event::EventWord) }
    }

    /// The appenders' participant table, read-write.
    pub(crate) fn participants(&self) -> crate::participants::ParticipantTable<'_> {
        // SAFETY: the table lies at META_PARTICIPANTS_OFFSET, fully inside the read-write
        // mapping, which lives as long as `self`.
        unsafe {
            crate::participants::ParticipantTable::from_raw(
                self.map.as_ptr().add(META_PARTICIPANTS_OFFSET),
                std::os::fd::AsFd::as_fd(&self.file),
            )
        }
    }

    /// Records the archive directory. The caller serialises writers (readers lock).
    pub(crate) fn set_archive_dir(&self, path: &[u8]) -> bool {
        if path.is_empty() || path.len() > MAX_ARCHIVE_PATH || path.contains(&0) {
            return false;
        }
        use crate::sync::Ordering::{Relaxed, Release};
        self.word(META_ARCHIVE_OFFSET).store(0, Release);
        let mut b = path.to_vec();
        b.resize(path.len().div_ceil(8) * 8, 0);
        for (k, chunk) in b.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            self.word(META_ARCHIVE_OFFSET + 8 + k * 8).store(u64::from_le_bytes(w), Relaxed);
        }
        self.word(META_ARCHIVE_OFFSET).store(path.len() as u64, Release);
        true
    }

    /// Stores the retention word (see [`META_RETENTION_OFFSET`]).
    pub(crate) fn set_retention_word(&self, w: u64) {
        // Pairs with the Acquire load in `retention_word`.
        self.word(META_RETENTION_OFFSET).store(w, crate::sync::Ordering::Release);
    }

    /// Word `w` (0..16) of named-reader entry `k`, read-write.
    pub(crate) fn reader_word(&self, k: usize, w: usize) -> &AtomicU64 {
        self.word(reader_word_offset(k, w))
    }
}

/// One cycle's data and index files, mapped at their full virtual size with `A`'s access
/// (see the [module docs](self)).
#[derive(Debug)]
pub(crate) struct CycleFiles<A: Access = ReadWrite> {
    pub(crate) num: u64,
    pub(crate) hdr: CycleHeader,
    pub(crate) data_file: File,
    pub(crate) index_file: File,
    /// `CYCLE_HEADER_PAGE + cycle_bytes` bytes; only the part below the file size is touched.
    pub(crate) data: Mapping<A>,
    /// `index_bytes` bytes; likewise.
    pub(crate) index: Mapping<A>,
    pub(crate) cap_units: u64,
    pub(crate) max_entries: u64,
    /// Whether the data file is on tmpfs, where `fallocate` allocates and zeroes every page
    /// under the inode lock (growth is then done in small steps; see the appender).
    pub(crate) tmpfs: bool,
    /// Bytes of both files on disk when they were decompressed from zstd-compressed
    /// archive files (the `.zst` files' sizes); `None` for plain files.
    pub(crate) compressed_bytes: Option<u64>,
    /// Bytes of the data area this process has seen the file actually hold (`fstat`): the
    /// shared `alloc` word is not trusted for memory safety, this is.
    data_seen: std::sync::atomic::AtomicU64,
    /// Likewise for the index file.
    index_seen: std::sync::atomic::AtomicU64,
}

impl CycleFiles {
    /// Opens cycle `c` of the journal in `dir` read-write and validates its header against
    /// `meta`. With `rebuild` (a file mode), a missing index file is rebuilt from the data
    /// file. Both files must be owned by a uid `trust` accepts.
    pub(crate) fn open(
        dir: &Path,
        c: u64,
        meta: &MetaHeader,
        rebuild: Option<u32>,
        trust: &TrustPolicy,
    ) -> Result<CycleFiles, OpenError> {
        CycleFiles::open_as(dir, c, meta, rebuild, trust)
    }
}

impl<A: Access> CycleFiles<A> {
    /// [`CycleFiles::open`] with `A`'s access: a read-only one (status) opens and maps both
    /// files read-only, and never rebuilds a missing index (`rebuild` is ignored).
    pub(crate) fn open_as(
        dir: &Path,
        c: u64,
        meta: &MetaHeader,
        rebuild: Option<u32>,
        trust: &TrustPolicy,
    ) -> Result<CycleFiles<A>, OpenError> {
        let rebuild = rebuild.filter(|_| A::WRITABLE);
        let map = |f: &File, len: usize| Mapping::<A>::map_as(f.as_fd(), len);
        let dpath = dir.join(data_file_name(c));
        let ipath = dir.join(index_file_name(c));
        let dlimit = CYCLE_HEADER_PAGE as u64 + meta.cycle_bytes;
        let (data_file, dzst) = open_cycle_file::<A>(&dpath, dlimit, trust)?;
        let size = data_file.metadata().map_err(|e| OpenError::io(&dpath, e))?.len();
        if size < CYCLE_HEADER_PAGE as u64 {
            return Err(OpenError::Truncated { path: dpath, size, expected: CYCLE_HEADER_PAGE as u64 });
        }
        let mut head = [0u8; CYCLE_HEADER_SIZE];
        data_file.read_exact_at(&mut head, 0).map_err(|e| OpenError::io(&dpath, e))?;
        let hdr = match CycleHeader::decode(&head) {
            Ok(h) => h,
            Err(FormatError::Version(v)) => {
                return Err(OpenError::VersionMismatch { path: dpath, found: v, supported: JOURNAL_FORMAT_VERSION })
            }
            Err(e) => return Err(OpenError::corrupt(&dpath, e.to_string())),
        };
        if hdr.cycle != c || hdr.cycle_bytes != meta.cycle_bytes || hdr.version != meta.version {
            return Err(OpenError::corrupt(
                &dpath,
                "cycle header does not match its file name or the journal's cycle size or format version",
            ));
        }
        let dlen = usize::try_from(CYCLE_HEADER_PAGE as u64 + meta.cycle_bytes)
            .map_err(|_| OpenError::corrupt(&dpath, "cycle too large"))?;
        let ilen = usize::try_from(meta.index_bytes()).map_err(|_| OpenError::corrupt(&ipath, "cycle too large"))?;
        let data = map(&data_file, dlen).map_err(|e| OpenError::io(&dpath, e))?;
        // A data file without its index: the index was lost (tier moves and retention
        // never leave one alone). Without `rebuild` NotFound, so the caller can look in the
        // other tier first.
        let index_file = match open_cycle_file::<A>(&ipath, meta.index_bytes(), trust) {
            Err(OpenError::NotFound { .. }) => match rebuild {
                Some(mode) => {
                    let area = size.saturating_sub(CYCLE_HEADER_PAGE as u64).min(meta.cycle_bytes);
                    // SAFETY: `area` bytes after the header page are inside the file (its size
                    // was read above) and inside the mapping (capped at `cycle_bytes`). A peer
                    // that truncates a journal file under us is the documented SIGBUS case.
                    let bytes = unsafe {
                        std::slice::from_raw_parts(data.as_const_ptr().add(CYCLE_HEADER_PAGE), area as usize)
                    };
                    rebuild_index(&ipath, bytes, &data_file, meta, mode).map_err(|e| OpenError::io(&ipath, e))?;
                    let f = open_rw(&ipath).map_err(|e| OpenError::io(&ipath, e))?;
                    check_owner(&ipath, &f, trust)?;
                    (f, None)
                }
                None => return Err(OpenError::NotFound { path: ipath }),
            },
            r => r?,
        };
        let (index_file, izst) = index_file;
        let compressed_bytes = match (dzst, izst) {
            (None, None) => None,
            (d, i) => Some(d.unwrap_or(size) + i.unwrap_or_else(|| index_file.metadata().map_or(0, |m| m.len()))),
        };
        let index = map(&index_file, ilen).map_err(|e| OpenError::io(&ipath, e))?;
        data.advise_huge();
        let tmpfs = fs::is_tmpfs(&data_file);
        Ok(CycleFiles {
            num: c,
            hdr,
            data_file,
            index_file,
            data,
            index,
            cap_units: meta.cycle_bytes / UNIT as u64,
            max_entries: max_entries(meta.cycle_bytes),
            tmpfs,
            compressed_bytes,
            data_seen: std::sync::atomic::AtomicU64::new(0),
            index_seen: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The header page through load-only words.
    fn header(&self) -> RoArea<'_> {
        // SAFETY: the data mapping starts with the header page, which the file always has
        // (checked at open); page aligned; it lives as long as `self`.
        unsafe { RoArea::new(self.data.as_const_ptr(), CYCLE_HEADER_PAGE) }
    }

    /// The position word (`SEALED | entries << 32 | units`), load-only: what status reads.
    pub(crate) fn pos_view(&self) -> &Ro<AtomicU64> {
        self.header().u64_at(CYCLE_POS_OFFSET)
    }
}

/// The read-write words and pointers, for appenders, tailers and recovery.
impl CycleFiles {
    /// Whether the first `end` bytes of the data area are inside the file (so touching them
    /// cannot fault). Costs an `fstat` only when the file grew past what we saw last.
    pub(crate) fn backed(&self, end: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        if end <= self.data_seen.load(Relaxed) {
            return true;
        }
        let cap = self.cap_units * UNIT as u64;
        let size = self.data_file.metadata().map_or(0, |m| m.len().saturating_sub(CYCLE_HEADER_PAGE as u64)).min(cap);
        self.data_seen.fetch_max(size, Relaxed);
        end <= size
    }

    /// Bytes of the data area last seen inside the file (what [`CycleFiles::backed`] learnt).
    pub(crate) fn backed_bytes(&self) -> u64 {
        self.data_seen.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn index_backed(&self, end: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        if end <= self.index_seen.load(Relaxed) {
            return true;
        }
        let size = self.index_file.metadata().map_or(0, |m| m.len()).min(self.index.len() as u64);
        self.index_seen.fetch_max(size, Relaxed);
        end <= size
    }

    fn hword(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is one of the constant word offsets inside the header page, which the
        // file always has (checked at open); 8-aligned; atomics accept every bit pattern.
        unsafe { &*(self.data.as_const_ptr().add(off) as *const AtomicU64) }
    }

    /// The position word: `SEALED | entries << 32 | units`.
    pub(crate) fn pos(&self) -> &AtomicU64 {
        self.hword(CYCLE_POS_OFFSET)
    }

    /// Bytes of the data area backed by the file (grows in chunks).
    pub(crate) fn alloc(&self) -> &AtomicU64 {
        self.hword(CYCLE_ALLOC_OFFSET)
    }

    /// Bytes of the index file backed.
    pub(crate) fn ialloc(&self) -> &AtomicU64 {
        self.hword(CYCLE_IALLOC_OFFSET)
    }

    /// Word 0 of the entry at data-area byte offset `off`. The caller has checked
    /// `off + ENTRY_HEADER <= backed bytes` and `off % 8 == 0`.
    pub(crate) fn entry_word(&self, off: u64) -> &AtomicU64 {
        debug_assert!(off % 8 == 0 && off + ENTRY_HEADER as u64 <= self.cap_units * UNIT as u64);
        // SAFETY: per the caller's check the word lies inside the mapped and backed data
        // area; 8-aligned; atomics accept every bit pattern.
        unsafe { &*(self.data.as_const_ptr().add(CYCLE_HEADER_PAGE + off as usize) as *const AtomicU64) }
    }

    /// Raw pointer to data-area byte `off`, for loads (caller checks bounds).
    pub(crate) fn data_ptr(&self, off: u64) -> *const u8 {
        debug_assert!(off <= self.cap_units * UNIT as u64);
        // SAFETY: callers pass offsets inside the data area, which is inside the mapping.
        unsafe { self.data.as_const_ptr().add(CYCLE_HEADER_PAGE + off as usize) }
    }

    /// Raw pointer to data-area byte `off`, for stores (caller checks bounds).
    pub(crate) fn data_ptr_mut(&self, off: u64) -> *mut u8 {
        debug_assert!(off <= self.cap_units * UNIT as u64);
        // SAFETY: callers pass offsets inside the data area, which is inside the mapping.
        unsafe { self.data.as_ptr().add(CYCLE_HEADER_PAGE + off as usize) }
    }

    /// Index slot `i` (`offset_units + 1`, 0 = not written), if backed.
    pub(crate) fn index_slot(&self, i: u64) -> Option<&crate::sync::AtomicU32> {
        let end = i.checked_add(1)?.checked_mul(4)?;
        // Pairs with the Release fetch_max of `ialloc` in `grow_index`: the file is that long.
        if i >= self.max_entries
            || end > self.ialloc().load(crate::sync::Ordering::Acquire)
            || end > self.index.len() as u64
            || !self.index_backed(end)
        {
            return None;
        }
        // SAFETY: checked: the slot is inside the mapping and the backed part of the file;
        // 4-aligned; atomics accept every bit pattern.
        Some(unsafe { &*(self.index.as_const_ptr().add(i as usize * 4) as *const crate::sync::AtomicU32) })
    }
}

/// Opens cycle file `path` as `A` maps it, owned by a uid `trust` accepts. Where it is
/// missing but `path.zst` is there (a cycle archived by `Journal::tier_zstd`), that file is
/// decompressed into an anonymous memory file (`memfd_create`) instead, and its size on
/// disk returned with it. `limit`: the most the decompressed file may hold (a cycle file's
/// full size): a hostile `.zst` cannot make this process hold more. `NotFound` when neither
/// is there.
fn open_cycle_file<A: Access>(path: &Path, limit: u64, trust: &TrustPolicy) -> Result<(File, Option<u64>), OpenError> {
    match open_file::<A>(path) {
        Ok(f) => {
            check_owner(path, &f, trust)?;
            Ok((f, None))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let mut zpath = path.as_os_str().to_owned();
            zpath.push(ZSTD_SUFFIX);
            let zpath = PathBuf::from(zpath);
            let z = match open_file::<crate::sys::ReadOnly>(&zpath) {
                Ok(z) => z,
                Err(ze) if ze.kind() == io::ErrorKind::NotFound => return Err(OpenError::io(path, e)),
                Err(ze) => return Err(OpenError::io(&zpath, ze)),
            };
            check_owner(&zpath, &z, trust)?;
            let zlen = z.metadata().map_err(|e| OpenError::io(&zpath, e))?.len();
            let f = decompress_bounded(&z, limit).map_err(|what| OpenError::corrupt(&zpath, what))?;
            Ok((f, Some(zlen)))
        }
        Err(e) => Err(OpenError::io(path, e)),
    }
}

/// Decompresses the zstd file `z` into a new anonymous memory file. It must be one frame
/// that records its decompressed size (as `Journal::tier_zstd` writes it, with a checksum),
/// of at most `limit` bytes, and decompress to exactly that size; anything else is an
/// error saying what (never more than `limit + 1` bytes are decompressed).
pub(crate) fn decompress_bounded(z: &File, limit: u64) -> Result<File, String> {
    let damaged = "the archived cycle file is damaged (restore it from a copy, or delete it: its entries are lost)";
    let mut head = [0u8; 18];
    let n = z.read_at(&mut head, 0).map_err(|e| format!("cannot be read: {e}"))?;
    let recorded = match zstd::zstd_safe::get_frame_content_size(&head[..n]) {
        Ok(Some(size)) => size,
        Ok(None) => return Err(format!("its zstd frame records no decompressed size; {damaged}")),
        Err(_) => return Err(format!("not a zstd frame; {damaged}")),
    };
    if recorded > limit {
        return Err(format!(
            "its zstd frame says {recorded} bytes, more than a cycle file of this journal holds ({limit}); {damaged}"
        ));
    }
    let mut out = crate::sys::fs::anonymous_file("shmbus-archived-cycle")
        .map_err(|e| format!("cannot make memory to decompress it into: {e}"))?;
    let mut dec =
        zstd::stream::read::Decoder::new(z).map_err(|e| format!("cannot be decompressed ({e}); {damaged}"))?;
    let got = {
        use std::io::Read;
        io::copy(&mut (&mut dec).take(recorded + 1), &mut out)
            .map_err(|e| format!("cannot be decompressed ({e}); {damaged}"))?
    };
    if got != recorded {
        return Err(format!("decompresses to {got} bytes, its zstd frame says {recorded}; {damaged}"));
    }
    Ok(out)
}

/// Creates cycle `c`'s index and data files if missing. `Ok(true)` if this call created it.
/// An index file left in place (by a creator that died, or planted) is grown only when owned
/// by a uid `trust` accepts.
pub(crate) fn create_cycle(
    dir: &Path,
    meta: &MetaHeader,
    mode: u32,
    hdr: &CycleHeader,
    trust: &TrustPolicy,
) -> Result<bool, OpenError> {
    let ipath = dir.join(index_file_name(hdr.cycle));
    let dpath = dir.join(data_file_name(hdr.cycle));
    if dpath.exists() {
        return Ok(false);
    }
    // The index first, so a data file's existence implies its index file's. A stale index
    // file left by a creator that died before linking the data file is all zeros: reuse it.
    // Both files start small (`DATA_START_BYTES`, `INDEX_START_BYTES`) and grow
    // geometrically up to the chunk size (`growth_size`).
    let ichunk = INDEX_START_BYTES.min(meta.chunk_bytes).min(meta.index_bytes());
    let _ = create_file_atomically(&ipath, mode, ichunk, &[]).map_err(|e| OpenError::io(&ipath, e))?;
    let index = open_rw(&ipath).map_err(|e| OpenError::io(&ipath, e))?;
    check_owner(&ipath, &index, trust)?;
    grow(&index, ichunk).map_err(|e| OpenError::io(&ipath, e))?;
    let mut page = vec![0u8; CYCLE_HEADER_PAGE];
    page[..CYCLE_HEADER_SIZE].copy_from_slice(&hdr.encode());
    let dalloc = DATA_START_BYTES.min(meta.chunk_bytes).min(meta.cycle_bytes);
    page[CYCLE_ALLOC_OFFSET..CYCLE_ALLOC_OFFSET + 8].copy_from_slice(&dalloc.to_le_bytes());
    page[CYCLE_IALLOC_OFFSET..CYCLE_IALLOC_OFFSET + 8].copy_from_slice(&ichunk.to_le_bytes());
    create_file_atomically(&dpath, mode, CYCLE_HEADER_PAGE as u64 + dalloc, &page).map_err(|e| OpenError::io(&dpath, e))
}

/// Rebuilds a missing index file from its data file: every entry carries its in-cycle
/// index and checksum, so a scan of the data file finds them (past damaged ranges too, see
/// [`index_from_data`]). `data` is the data area present in the file. Created race-free
/// like every journal file (a concurrent rebuilder wins or loses whole).
pub(crate) fn rebuild_index(
    ipath: &Path,
    data: &[u8],
    data_file: &File,
    meta: &MetaHeader,
    mode: u32,
) -> io::Result<()> {
    let mut head = [0u8; PAGE];
    let n = data_file.read_at(&mut head, 0)?;
    let ialloc = if n >= CYCLE_IALLOC_OFFSET + 8 {
        u64::from_le_bytes(head[CYCLE_IALLOC_OFFSET..CYCLE_IALLOC_OFFSET + 8].try_into().unwrap_or([0; 8]))
    } else {
        0
    };
    let slots = index_from_data(data, meta.max_entry, max_entries(meta.cycle_bytes));
    let needed = slots.last().map_or(0, |&(i, _)| (i + 1) * 4);
    // At least what the data file says the index had (appenders grow it from there), a
    // whole number of pages and at least a new index's start size, at most the index's full size.
    let len = needed
        .max(ialloc.min(meta.index_bytes()))
        .max(INDEX_START_BYTES.min(meta.chunk_bytes))
        .div_ceil(PAGE as u64)
        .saturating_mul(PAGE as u64)
        .min(meta.index_bytes());
    let mut bytes = vec![0u8; needed.min(len) as usize];
    for &(i, off) in &slots {
        let at = (i * 4) as usize;
        if let Some(s) = bytes.get_mut(at..at + 4) {
            s.copy_from_slice(&((off / UNIT as u64 + 1) as u32).to_le_bytes());
        }
    }
    create_file_atomically(ipath, mode, len, &bytes)?;
    Ok(())
}
