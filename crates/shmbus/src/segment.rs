//! Segment files: the common header every channel kind starts with, and race-free creation.
//!
//! ```text
//! offset 0      SegmentHeader        magic, version, kind, ready, crc, size, params, creator,
//!                                    payload type (size, align, name; zero when untyped)
//! offset 4096   participant table    PARTICIPANTS entries of 64 bytes (see `participants`)
//! offset 12288  counter blocks       one 512-byte block per participant entry (see `stats`)
//! offset 77824  kind area            laid out by the channel kind from the header params
//! then          schema records       the channel's schema, if it has one (see `crate::schema`),
//!                                    in whole pages at the end of the file: one record, or a
//!                                    service's two (its requests', then its responses')
//! ```
//!
//! **Creation never exposes a half-built segment.** The creator builds the whole file under
//! a hidden temporary name (`.<name>.<pid>.<nanos>`; names never start with a dot), stores
//! `ready` last, and then `link(2)`s it to its final name, which fails with `EEXIST` if
//! another creator won the race. The loser discards its file and opens the winner's.
//!
//! **Nothing goes through a name twice.** Every open and create works relative to the
//! domain directory's descriptor ([`DomainDir`]), opened without following a symlink and
//! checked against the trust policy: the temporary file is created `O_CREAT | O_EXCL |
//! O_NOFOLLOW` with its exact mode (0600 unless asked otherwise, set with `fchmod` whatever
//! the umask), linked with `linkat` and removed with `unlinkat` in that directory, and a
//! channel file is opened non-blocking and used only if it is a regular file owned by a
//! trusted user (see [`crate::domain`]).
//!
//! **Opening trusts nothing.** The opener copies the header out of the mapping once,
//! checks magic, version, kind, checksum, that the layout parameters are valid for the kind
//! and that the file size is exactly what they imply, and from then on uses only its own
//! copy of the layout: a peer that later scribbles over the header cannot move any bound.
//!
//! **Read-only and read-write are different types.** A `Segment` is `Segment<ReadWrite>`
//! (the default: opened `O_RDWR`, mapped `PROT_READ | PROT_WRITE`, what endpoints are made
//! from) or `Segment<ReadOnly>` (opened `O_RDONLY`, mapped `PROT_READ`: every kind's
//! `status`, `admin` and the kind registry behind `shmbus ls`, `info` and `clean`). Both are
//! validated by the same code, so a user with read permission only can look at a segment.
//! Only a read-write segment hands out its kind area as a `*mut u8` (`kind_base`) and its
//! participant table read-write (`participants`). Any segment gives them through load-only
//! words: the kind area as a `RoArea` (`kind_area`, bounds-checked `Ro` words) and the table
//! as a `ParticipantView` (`participant_view`), which have `load` and nothing else. So
//! the channels built on a read-only segment (`endpoint::channel::Channel<L, ReadOnly>`)
//! have no endpoints, and the status views each kind builds from them cannot store: a
//! read-only view cannot be written, by construction, not only by the page protection.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::domain::{Domain, DomainDir};
use crate::error::OpenError;
use crate::kind::Kind;
use crate::name::validate_name;
use crate::participants::{ParticipantTable, ParticipantView, PARTICIPANTS, PARTICIPANT_SIZE};
use crate::pod::{PayloadType, StoredPayloadType, TYPE_NAME_LEN};
use crate::schema::Schema;
use crate::sync::RoArea;
use crate::sys::fs::CreateError;
use crate::sys::{monotonic_ns, Access, Mapping, ProcessId, ReadOnly, ReadWrite};

/// `b"SHMBUS\0\x01"` as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"SHMBUS\0\x01");
/// The segment format this library reads and writes. 5: a topic carries its delivery policy
/// (an older build would publish into a `block` topic as if it overwrote). 6: a topic keeps,
/// per reliable subscriber, since when publishers have been held back by it (an older build
/// would neither keep nor honour that clock, so a stuck subscriber could hold it for good).
/// 7: a channel may carry a schema, in a record at the end of the file whose length the
/// header gives (an older build would take the longer file for a corrupt one).
pub const FORMAT_VERSION: u32 = 7;
/// What every kind's `Truncated` error says: the cause, what it did, and how to recover.
pub(crate) const TRUNCATED_MSG: &str = "the channel's file was truncated by another process while this process had it mapped: what was read past the cut is zeros and what was written there is lost; stop every endpoint, remove the channel's file and create the channel again";

/// Value of `ready` once the creator has finished.
const READY: u32 = 0x5245_4459; // "READY"
/// Offset of the participant table.
pub const PARTICIPANTS_OFFSET: usize = 4096;
/// Offset of the participants' counter blocks.
pub const COUNTERS_OFFSET: usize = PARTICIPANTS_OFFSET + PARTICIPANTS * PARTICIPANT_SIZE;
/// Offset of the kind-specific area (page aligned).
pub const KIND_OFFSET: usize = COUNTERS_OFFSET + PARTICIPANTS * crate::stats::COUNTERS_SIZE;
const _: () = assert!(KIND_OFFSET % 4096 == 0);
/// Where participant `index`'s counter block lies, from the start of the segment.
const fn counters_offset(index: usize) -> usize {
    COUNTERS_OFFSET + index * crate::stats::COUNTERS_SIZE
}
const _: () = assert!(counters_offset(PARTICIPANTS) == KIND_OFFSET);
/// Number of kind-specific layout parameters in the header.
pub const PARAMS: usize = 8;

/// The header at offset 0 of every segment file.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct SegmentHeader {
    magic: u64,
    version: u32,
    kind: u32,
    /// Stored last by the creator (Release); checked first by openers (Acquire).
    ready: AtomicU32,
    /// CRC32C of the header with `ready` and `header_crc` taken as zero.
    header_crc: u32,
    total_size: u64,
    params: [u64; PARAMS],
    creator_pid: u32,
    mode: u32,
    creator_start: u64,
    created_ns: u64,
    /// The payload type of a typed channel (all zero for an untyped one).
    payload_size: u64,
    payload_align: u32,
    _reserved: u32,
    payload_name: [u8; TYPE_NAME_LEN],
    /// Bytes of the schema records at the end of the file (0: no schema).
    schema_len: u64,
}

/// A plain copy of the header, taken once at open and validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderInfo {
    /// Channel kind.
    pub kind: Kind,
    /// Format version.
    pub version: u32,
    /// Total file size.
    pub total_size: u64,
    /// Kind-specific layout parameters.
    pub params: [u64; PARAMS],
    /// Process that created the segment.
    pub creator: ProcessId,
    /// File mode requested at creation.
    pub mode: u32,
    /// `CLOCK_MONOTONIC` time of creation.
    pub created_ns: u64,
    /// The payload type a typed `create_or_open` made the channel for (`None`: bytes).
    pub payload: Option<StoredPayloadType>,
    /// Bytes of the schema records (0: the channel has no schema).
    pub schema_len: u64,
}

impl HeaderInfo {
    /// Bytes the schema record takes at the end of the file: its length in whole pages.
    pub(crate) fn schema_area(&self) -> u64 {
        schema_area(self.schema_len)
    }
}

/// The whole pages a schema record of `len` bytes takes.
fn schema_area(len: u64) -> u64 {
    len.div_ceil(SCHEMA_PAGE) * SCHEMA_PAGE
}

/// The unit of the schema area.
const SCHEMA_PAGE: u64 = 4096;

/// Most schema records a channel stores: a service's request and response schemas.
pub(crate) const MAX_SCHEMAS: usize = 2;

/// What a channel kind tells the segment layer about its layout.
pub(crate) trait Layout: Sized {
    /// The kind written in the header.
    const KIND: Kind;
    /// Builds (and validates) the layout from header parameters. Every parameter comes from
    /// an untrusted file here: reject anything out of range with a message.
    fn from_params(params: &[u64; PARAMS]) -> Result<Self, String>;
    /// The parameters to store in the header.
    fn params(&self) -> [u64; PARAMS];
    /// Size of the kind area in bytes (file size = `KIND_OFFSET` + this).
    fn kind_area_size(&self) -> u64;
    /// Names of the parameters, for mismatch errors (`""` = not compared).
    fn param_names() -> [&'static str; PARAMS];
    /// Initializes a zero-filled kind area at `base` (the file is freshly created and private
    /// to the creator until linked).
    ///
    /// # Safety
    /// `base` points to `kind_area_size()` writable, zeroed bytes.
    unsafe fn init(&self, base: *mut u8);
}

/// Options for creating a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateOptions {
    /// File mode of a created segment (default `0o600`).
    pub mode: u32,
    /// Group to give a created segment (default: the creator's).
    pub gid: Option<u32>,
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions { mode: 0o600, gid: None }
    }
}

/// An open, validated segment mapping, read-write or read-only as `A` says (see the
/// [module docs](self)).
#[derive(Debug)]
pub(crate) struct Segment<A: Access = ReadWrite> {
    map: Mapping<A>,
    file: File,
    path: PathBuf,
    info: HeaderInfo,
    /// The schemas, read from the file once at open (empty: the channel has none; a
    /// service's are its requests' and its responses').
    schemas: Vec<Arc<Schema>>,
}

/// Sets the file's `mtime` to now: a segment opened read-write (an endpoint's channel) does
/// so when it is opened and when it is let go of, so that `mtime` says when the channel was
/// last used ([`SegmentReport::modified`](crate::admin::SegmentReport::modified), what
/// `shmbus clean --older-than` reads). Stores through the mapping move it only now and then
/// (the kernel marks a page's first write fault in a process), so a long-lived endpoint
/// would otherwise leave the time of its start. Best effort: a file system that refuses
/// leaves the time as it was.
fn mark_used(file: &File) {
    let _ = file.set_modified(std::time::SystemTime::now());
}

impl<A: Access> Drop for Segment<A> {
    fn drop(&mut self) {
        if A::WRITABLE {
            mark_used(&self.file);
        }
    }
}

impl Segment {
    /// Opens `name` in `domain` as a `L`, creating it with `layout` if it does not exist, with
    /// `payload` recorded in its header and `schemas` stored with it (an existing segment is
    /// returned as it is: the caller checks its payload type and schemas). Returns the
    /// segment, its layout and whether this call created it.
    pub(crate) fn create_or_open<L: Layout>(
        domain: &Domain,
        name: &str,
        layout: &L,
        opts: &CreateOptions,
        payload: Option<&PayloadType>,
        schemas: &[Arc<Schema>],
    ) -> Result<(Segment, L, bool), OpenError> {
        let path = domain.channel_path(name)?;
        let mut dir = domain.open_or_create_dir()?;
        for _ in 0..64 {
            match Segment::open_in(&dir, name).and_then(|seg| {
                let layout = seg.layout::<L>()?;
                Ok((seg, layout))
            }) {
                Ok((seg, existing)) => {
                    check_same_layout(&path, &existing, layout)?;
                    return Ok((seg, existing, false));
                }
                Err(OpenError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
            match Segment::create_new(&dir, name, layout, opts, payload, schemas) {
                Ok(Some(seg)) => {
                    let l = L::from_params(&layout.params()).map_err(|what| OpenError::InvalidConfig { what })?;
                    return Ok((seg, l, true));
                }
                Ok(None) => continue, // lost the race: open the winner's
                // The domain directory was removed under us (`shmbus clean` removes one it
                // emptied): nothing can be created in it any more; make it again.
                Err(_) if crate::sys::fs::fstat(dir.fd()).is_ok_and(|st| st.nlink == 0) => {
                    dir = domain.open_or_create_dir()?;
                }
                Err(e) => return Err(e),
            }
        }
        Err(OpenError::Io {
            path,
            source: io::Error::other("segment keeps appearing and disappearing; is something deleting it?"),
        })
    }

    /// Builds a new segment `name` in `dir` under a temporary name and links it into place
    /// (all relative to the directory's descriptor). `Ok(None)`: another creator won the race.
    fn create_new<L: Layout>(
        dir: &DomainDir,
        name: &str,
        layout: &L,
        opts: &CreateOptions,
        payload: Option<&PayloadType>,
        schemas: &[Arc<Schema>],
    ) -> Result<Option<Segment>, OpenError> {
        validate_name(name)?;
        if schemas.len() > MAX_SCHEMAS {
            return Err(OpenError::InvalidConfig { what: format!("{} schemas, at most {MAX_SCHEMAS}", schemas.len()) });
        }
        let path = &dir.channel_path(name);
        let record: Vec<u8> = schemas.iter().flat_map(|s| s.encode()).collect();
        let kind_end = KIND_OFFSET as u64 + layout.kind_area_size();
        let total = kind_end + schema_area(record.len() as u64);
        let total_usize =
            usize::try_from(total).map_err(|_| OpenError::InvalidConfig { what: "segment too large".into() })?;
        let me = ProcessId::current();
        let created = crate::sys::fs::create_race_free(dir.fd(), OsStr::new(name), opts.mode, |file, tmp_name| {
            let tmp = dir.path().join(tmp_name);
            // Says "creator alive" to checkers in other PID namespaces, where our pid means
            // nothing: held on the temporary file while we build it, and through the same
            // description on the channel once linked, until the creating handle closes it
            // (see `admin::stale_temp_files_in` and `SegmentReport::creator_alive`). Best
            // effort: a file system that refuses locks leaves the pid.
            let _ = crate::sys::lock::try_lock_byte(file.as_fd(), crate::sys::lock::CREATOR);
            if let Some(gid) = opts.gid {
                std::os::unix::fs::fchown(file, None, Some(gid)).map_err(|e| OpenError::io(&tmp, e))?;
            }
            file.set_len(total).map_err(|e| OpenError::io(&tmp, e))?;
            reserve(file, total).map_err(|e| match e {
                e if crate::sys::fs::is_no_space(&e) => OpenError::Io {
                    path: tmp.clone(),
                    source: io::Error::new(
                        io::ErrorKind::StorageFull,
                        format!("not enough space for {total} bytes in {}", dir.path().display()),
                    ),
                },
                _ => OpenError::io(&tmp, e),
            })?;
            let map = Mapping::map(file.as_fd(), total_usize).map_err(|e| OpenError::io(&tmp, e))?;
            let info = HeaderInfo {
                kind: L::KIND,
                version: FORMAT_VERSION,
                total_size: total,
                params: layout.params(),
                creator: me,
                mode: opts.mode,
                created_ns: monotonic_ns(),
                payload: payload.map(StoredPayloadType::from_type),
                schema_len: record.len() as u64,
            };
            // SAFETY: the file is fresh (zero-filled), private to us until linked, and the
            // mapping covers KIND_OFFSET + kind_area_size bytes and the schema area after them
            // (`total`), which holds the record.
            unsafe {
                layout.init(map.as_ptr().add(KIND_OFFSET));
                std::ptr::copy_nonoverlapping(record.as_ptr(), map.as_ptr().add(kind_end as usize), record.len());
                write_header(map.as_ptr(), &info);
            }
            Ok((map, info))
        });
        match created {
            Ok(Some((file, (map, info)))) => {
                Ok(Some(Segment { map, file, path: path.to_owned(), info, schemas: schemas.to_vec() }))
            }
            Ok(None) => Ok(None),
            // Not the temporary file's fault: the domain directory does not let us write.
            Err(CreateError::Temp(e)) if e.kind() == io::ErrorKind::PermissionDenied => Err(OpenError::CannotCreate {
                dir: dir.path().to_owned(),
                what: format!("channel {name}"),
                owner_uid: dir.stat().uid,
                mode: dir.stat().mode,
            }),
            Err(CreateError::Temp(e)) => Err(OpenError::io(dir.path(), e)),
            Err(CreateError::Build(e)) => Err(e),
            Err(CreateError::Link(e)) => Err(OpenError::io(path, e)),
        }
    }

    /// Maps the pages of the segment's first `len` bytes (clipped to it) into this process now
    /// (see `Channel::prefault`).
    pub(crate) fn prefault(&self, len: usize) {
        self.map.populate_write(0, len);
    }

    /// Start of the kind area, for loads and stores.
    #[inline]
    pub(crate) fn kind_base(&self) -> *mut u8 {
        // SAFETY: validated total_size >= KIND_OFFSET, so the offset is inside the mapping.
        unsafe { self.map.as_ptr().add(KIND_OFFSET) }
    }

    /// The participant table, read-write: endpoints register, release and reclaim through it,
    /// holding their entries' locks on this segment's open file (see [`crate::participants`]).
    #[inline]
    pub(crate) fn participants(&self) -> ParticipantTable<'_> {
        // SAFETY: the table lies at PARTICIPANTS_OFFSET inside the read-write mapping, which
        // lives as long as `self`; its entries are atomics, valid for any bit pattern.
        unsafe { ParticipantTable::from_raw(self.map.as_ptr().add(PARTICIPANTS_OFFSET), self.file.as_fd()) }
    }

    /// The counter block of participant entry `index` (`< PARTICIPANTS`), for its owner to
    /// count in.
    #[inline]
    pub(crate) fn counter(&self, index: usize) -> crate::stats::Counter {
        assert!(index < PARTICIPANTS, "participant {index} out of range");
        // SAFETY: the block lies inside the counter area of the read-write mapping (index
        // checked), 64-aligned (page-aligned area, 512-byte blocks), and the mapping lives as
        // long as `self`, which every endpoint holding the counter keeps alive.
        unsafe { crate::stats::Counter::from_raw(self.map.as_ptr().add(counters_offset(index))) }
    }
}

impl Segment<ReadOnly> {
    /// Opens and validates the common header of the segment file `path`, whatever its kind,
    /// with the file opened `O_RDONLY` and mapped `PROT_READ`,
    /// for tools that only look (`admin`): it needs read permission only, and nothing can
    /// write through it. Validated exactly as a read-write open.
    ///
    /// Read it only with atomic loads of at most 8 bytes: on the 64-bit Linux targets shmbus
    /// runs on these are single load instructions (x86-64 `mov`, AArch64 `ldr`/`ldar`), which
    /// read-only pages serve. (Rust documents this for `Relaxed` loads; the `Acquire` loads of
    /// the kinds' index readers rely on the same instructions.)
    #[cfg(any(test, feature = "internals"))]
    pub(crate) fn open_path_read_only(path: &Path) -> Result<Segment<ReadOnly>, OpenError> {
        let (dir, name) = match DomainDir::open_parent_of(path) {
            Ok(d) => d,
            Err(OpenError::NotFound { .. }) => return Err(OpenError::NotFound { path: path.to_owned() }),
            Err(e) => return Err(e),
        };
        Segment::open_in(&dir, &name)
    }
}

impl<A: Access> Segment<A> {
    /// The open segment file.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Opens the existing channel `name` of `domain` as a `L`, with `A`'s access, through the
    /// domain's checked directory descriptor. A missing root or domain directory is
    /// `NotFound` for the channel.
    pub(crate) fn open<L: Layout>(domain: &Domain, name: &str) -> Result<(Segment<A>, L), OpenError> {
        let path = domain.channel_path(name)?;
        let dir = match domain.open_dir() {
            Ok(d) => d,
            Err(OpenError::NotFound { .. }) => return Err(OpenError::NotFound { path }),
            Err(e) => return Err(e),
        };
        let seg = Segment::open_in(&dir, name)?;
        let layout = seg.layout::<L>()?;
        Ok((seg, layout))
    }

    /// The layout of this segment as a `L`: the header's kind must be `L`'s, its parameters
    /// valid for it, and the file size exactly what they imply.
    pub(crate) fn layout<L: Layout>(&self) -> Result<L, OpenError> {
        let path = &self.path;
        if self.info.kind != L::KIND {
            return Err(OpenError::WrongKind { path: path.clone(), found: Some(self.info.kind), expected: L::KIND });
        }
        let layout = L::from_params(&self.info.params).map_err(|what| OpenError::corrupt(path, what))?;
        let expected = KIND_OFFSET as u64 + layout.kind_area_size() + self.info.schema_area();
        if self.info.total_size != expected {
            return Err(OpenError::corrupt(
                path,
                format!("total size {} does not match its layout ({expected})", self.info.total_size),
            ));
        }
        Ok(layout)
    }

    /// Opens and validates the file `name` in `dir` (a regular file owned by a trusted user,
    /// opened relative to the directory's descriptor: see [`DomainDir::open_channel`]).
    pub(crate) fn open_in(dir: &DomainDir, name: &str) -> Result<Segment<A>, OpenError> {
        let map = Mapping::<A>::map_as;
        let path = &dir.channel_path(name);
        let (file, st) = dir.open_channel(name, A::WRITABLE)?;
        let size = st.size;
        if size < KIND_OFFSET as u64 {
            // Too short even for the header: tell "not ours" from "ours but cut".
            let mut magic = [0u8; 8];
            use std::os::unix::fs::FileExt;
            let n = file.read_at(&mut magic, 0).unwrap_or(0);
            if n == 8 && u64::from_le_bytes(magic) == MAGIC {
                return Err(OpenError::Truncated { path: path.to_owned(), size, expected: KIND_OFFSET as u64 });
            }
            return Err(OpenError::NotASegment { path: path.to_owned() });
        }
        let head = map(file.as_fd(), KIND_OFFSET).map_err(|e| OpenError::io(path, e))?;
        // SAFETY: the mapping is KIND_OFFSET >= size_of::<SegmentHeader>() bytes and page
        // aligned; a volatile read copies it out without assuming anything about its contents
        // (every bit pattern is a valid SegmentHeader of plain integers).
        let raw = unsafe { std::ptr::read_volatile(head.as_const_ptr() as *const RawHeader) };
        let info = validate_header(path, &raw, size)?;
        drop(head);
        let len =
            usize::try_from(info.total_size).map_err(|_| OpenError::corrupt(path, "size exceeds address space"))?;
        let map = map(file.as_fd(), len).map_err(|e| OpenError::io(path, e))?;
        let schemas = read_schemas(path, &file, &info)?;
        if A::WRITABLE {
            mark_used(&file);
        }
        Ok(Segment { map, file, path: path.to_owned(), info, schemas })
    }

    /// The channel's schema, as read at open (`None`: it has none; a service's first is its
    /// requests').
    pub(crate) fn schema(&self) -> Option<&Arc<Schema>> {
        self.schemas.first()
    }

    /// Every schema stored with the channel, in order (a service's: its requests', then its
    /// responses').
    pub(crate) fn schemas(&self) -> &[Arc<Schema>] {
        &self.schemas
    }

    /// The kind area through load-only words (a read-write segment's
    /// [`kind_base`](Segment::kind_base) is the same address, for stores too).
    #[inline]
    pub(crate) fn kind_area(&self) -> RoArea<'_> {
        // SAFETY: validated total_size >= KIND_OFFSET, so the area lies inside the mapping,
        // page aligned, and lives as long as `self`.
        unsafe { RoArea::new(self.map.as_const_ptr().add(KIND_OFFSET), self.map.len() - KIND_OFFSET) }
    }

    /// The participant table through load-only words: what a read-only segment gives, and
    /// what status reads on either kind of segment.
    #[inline]
    pub(crate) fn participant_view(&self) -> ParticipantView<'_> {
        // SAFETY: the table lies at PARTICIPANTS_OFFSET inside the mapping, which lives as long
        // as `self`; its entries are atomics, valid for any bit pattern.
        unsafe { ParticipantView::from_raw(self.map.as_const_ptr().add(PARTICIPANTS_OFFSET), self.file.as_fd()) }
    }

    /// The counter block of participant entry `index` (`< PARTICIPANTS`) through load-only
    /// words.
    pub(crate) fn counter_block(&self, index: usize) -> &crate::stats::RoBlock {
        assert!(index < PARTICIPANTS, "participant {index} out of range");
        // SAFETY: inside the mapping (index checked, the area precedes KIND_OFFSET <=
        // total_size), 64-aligned, lives as long as `self`; atomics are valid for any bit
        // pattern and the load-only words only load, which read-only pages serve.
        unsafe { &*(self.map.as_const_ptr().add(counters_offset(index)) as *const crate::stats::RoBlock) }
    }

    pub(crate) fn info(&self) -> &HeaderInfo {
        &self.info
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether an access to this segment's mapping faulted because another process truncated
    /// the file while this one had it mapped (see [`Mapping::was_truncated`]): the cut pages
    /// now read as zeros and stores there are private to this process, for the life of the
    /// mapping. One relaxed load, but still meant for slow paths only (before sleeping, on a
    /// timeout, when reporting corruption or a failed send).
    pub(crate) fn was_truncated(&self) -> bool {
        self.map.was_truncated()
    }
}

/// Backs the whole file with memory now, so running out of space is an error at creation
/// rather than a SIGBUS on first touch.
fn reserve(file: &File, len: u64) -> io::Result<()> {
    // `Ok(false)`: a filesystem without fallocate; the sparse file still works.
    crate::sys::fs::fallocate(file, 0, len).map(|_| ())
}

/// The header as plain integers, for copying out of untrusted memory.
#[repr(C)]
#[derive(Clone, Copy)]
struct RawHeader {
    magic: u64,
    version: u32,
    kind: u32,
    ready: u32,
    header_crc: u32,
    total_size: u64,
    params: [u64; PARAMS],
    creator_pid: u32,
    mode: u32,
    creator_start: u64,
    created_ns: u64,
    payload_size: u64,
    payload_align: u32,
    _reserved: u32,
    payload_name: [u8; TYPE_NAME_LEN],
    schema_len: u64,
}

const _: () = assert!(std::mem::size_of::<RawHeader>() == std::mem::size_of::<SegmentHeader>());

fn header_crc(raw: &RawHeader) -> u32 {
    let mut copy = *raw;
    copy.ready = 0;
    copy.header_crc = 0;
    // SAFETY: RawHeader is repr(C) plain integers with no padding (checked below), so viewing
    // it as bytes is sound.
    let bytes =
        unsafe { std::slice::from_raw_parts(&copy as *const RawHeader as *const u8, std::mem::size_of::<RawHeader>()) };
    crate::crc::crc32c(bytes)
}

const _: () = assert!(
    std::mem::size_of::<RawHeader>()
        == 8 + 4 + 4 + 4 + 4 + 8 + 8 * PARAMS + 4 + 4 + 8 + 8 + 8 + 4 + 4 + TYPE_NAME_LEN + 8
);

/// # Safety
/// `base` points to at least `size_of::<SegmentHeader>()` writable bytes that no other
/// process can see yet.
unsafe fn write_header(base: *mut u8, info: &HeaderInfo) {
    let (payload_size, payload_align, payload_name) = info.payload.map_or((0, 0, [0; TYPE_NAME_LEN]), |p| p.raw());
    let mut raw = RawHeader {
        magic: MAGIC,
        version: info.version,
        kind: info.kind as u32,
        ready: 0,
        header_crc: 0,
        total_size: info.total_size,
        params: info.params,
        creator_pid: info.creator.pid,
        mode: info.mode,
        creator_start: info.creator.start_time,
        created_ns: info.created_ns,
        payload_size,
        payload_align,
        _reserved: 0,
        payload_name,
        schema_len: info.schema_len,
    };
    raw.header_crc = header_crc(&raw);
    // SAFETY: caller guarantees the space; nobody else can see the file yet.
    unsafe { std::ptr::write(base as *mut RawHeader, raw) };
    // SAFETY: `ready` is at the same offset in SegmentHeader; the memory is valid and aligned.
    let hdr = unsafe { &*(base as *const SegmentHeader) };
    // Pairs with the Acquire load in `validate_header` (via the opener's fresh mapping).
    hdr.ready.store(READY, Ordering::Release);
}

fn validate_header(path: &Path, raw: &RawHeader, file_size: u64) -> Result<HeaderInfo, OpenError> {
    std::sync::atomic::fence(Ordering::Acquire);
    if raw.magic != MAGIC {
        return Err(OpenError::NotASegment { path: path.to_owned() });
    }
    if raw.version != FORMAT_VERSION {
        return Err(OpenError::VersionMismatch {
            path: path.to_owned(),
            found: raw.version,
            supported: FORMAT_VERSION,
        });
    }
    if raw.ready != READY {
        return Err(OpenError::corrupt(path, "segment was never marked ready"));
    }
    if header_crc(raw) != raw.header_crc {
        return Err(OpenError::corrupt(path, "header checksum mismatch (fields were overwritten)"));
    }
    let Some(kind) = Kind::from_u32(raw.kind) else {
        return Err(OpenError::corrupt(path, format!("unknown kind number {}", raw.kind)));
    };
    if raw.total_size != file_size {
        return Err(OpenError::Truncated { path: path.to_owned(), size: file_size, expected: raw.total_size });
    }
    if raw._reserved != 0 {
        return Err(OpenError::corrupt(path, format!("reserved header word is {}, expected 0", raw._reserved)));
    }
    let payload = StoredPayloadType::from_raw(raw.payload_size, raw.payload_align, &raw.payload_name)
        .map_err(|what| OpenError::corrupt(path, what))?;
    if raw.schema_len > (MAX_SCHEMAS * Schema::MAX_RECORD) as u64
        || schema_area(raw.schema_len) > raw.total_size - KIND_OFFSET as u64
    {
        return Err(OpenError::corrupt(path, format!("schema record of {} bytes", raw.schema_len)));
    }
    Ok(HeaderInfo {
        kind,
        version: raw.version,
        total_size: raw.total_size,
        params: raw.params,
        creator: ProcessId { pid: raw.creator_pid, start_time: raw.creator_start },
        mode: raw.mode,
        created_ns: raw.created_ns,
        payload,
        schema_len: raw.schema_len,
    })
}

/// Reads and parses the schema records at the start of the schema area, with `pread` into
/// memory of its own: nothing a peer writes to the file later changes them.
fn read_schemas(path: &Path, file: &File, info: &HeaderInfo) -> Result<Vec<Arc<Schema>>, OpenError> {
    if info.schema_len == 0 {
        return Ok(Vec::new());
    }
    use std::os::unix::fs::FileExt;
    // validate_header checked the length against the limit and the file's size.
    let mut record = vec![0u8; info.schema_len as usize];
    file.read_exact_at(&mut record, info.total_size - info.schema_area()).map_err(|e| OpenError::io(path, e))?;
    let schemas = Schema::decode_all(&record, MAX_SCHEMAS).map_err(|e| OpenError::corrupt(path, e.to_string()))?;
    Ok(schemas.into_iter().map(Arc::new).collect())
}

fn check_same_layout<L: Layout>(path: &Path, existing: &L, requested: &L) -> Result<(), OpenError> {
    let (e, r) = (existing.params(), requested.params());
    for (i, field) in L::param_names().iter().enumerate() {
        if !field.is_empty() && e[i] != r[i] {
            return Err(OpenError::LayoutMismatch { path: path.to_owned(), field, existing: e[i], requested: r[i] });
        }
    }
    Ok(())
}

/// Reads the validated header of any segment file (for `ls`, `info`, `clean`). Needs read
/// permission only: the file is opened and mapped read-only.
#[cfg(any(test, feature = "internals"))]
pub fn inspect(path: &Path) -> Result<HeaderInfo, OpenError> {
    Segment::open_path_read_only(path).map(|s| s.info)
}
