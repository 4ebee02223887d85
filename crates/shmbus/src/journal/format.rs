//! The on-disk format (see `docs/journal-format.md`, which is the normative description).
//!
//! Everything here reads *untrusted* bytes: files may be truncated, zeroed, written by a
//! newer version or by something that is not shmbus at all. Parsers take plain byte slices,
//! check every bound before indexing, and return typed errors; they never panic. The same
//! parsers serve the open-time recovery scan and the fuzz targets.

use std::fmt;

pub use crate::crc::crc32c_append;
use crate::pod::{StoredPayloadType, TYPE_NAME_LEN};

/// Version of the journal on-disk format this library writes in the journals it creates.
/// Version 2 is version 1 plus entries sealed by a numbered-key cipher (`FLAG_KEYED`): a
/// library that reads only version 1 takes those for damage, and an opener of such a
/// library that finds itself alone would cut them off the current cycle in recovery, so it
/// must refuse the journal instead (it does: it reads only version 1).
pub const JOURNAL_FORMAT_VERSION: u32 = 2;
/// Oldest journal format version this library reads (and appends to, in that version: the
/// journal's cycles keep its version, and it never holds keyed entries).
pub const JOURNAL_FORMAT_VERSION_MIN: u32 = 1;
/// First format version whose journals may hold `FLAG_KEYED` entries.
pub const KEYED_FORMAT_VERSION: u32 = 2;

/// Whether this library reads journal format version `v`.
pub fn version_supported(v: u32) -> bool {
    (JOURNAL_FORMAT_VERSION_MIN..=JOURNAL_FORMAT_VERSION).contains(&v)
}

/// Magic of the metadata file: `b"SHMBJMT\x01"`.
pub const META_MAGIC: u64 = u64::from_le_bytes(*b"SHMBJMT\x01");
/// Magic of a cycle data file: `b"SHMBJCY\x01"`.
pub const CYCLE_MAGIC: u64 = u64::from_le_bytes(*b"SHMBJCY\x01");

/// Name of the metadata file inside the journal directory.
pub const META_FILE: &str = "journal.meta";
/// Lock file serialising reader-table edits.
pub const READERS_LOCK_FILE: &str = "readers.lock";

/// Page size the format is laid out in (independent of the machine's page size).
pub const PAGE: usize = 4096;

// ---- metadata file ---------------------------------------------------------------------

/// Offset of the mutable shared words in the metadata file.
pub const META_SHARED_OFFSET: usize = 512;
/// Offset of the participant (appender/tailer) table.
pub const META_PARTICIPANTS_OFFSET: usize = PAGE;
/// Offset of the named-reader table.
pub const META_READERS_OFFSET: usize =
    META_PARTICIPANTS_OFFSET + crate::participants::PARTICIPANTS * crate::participants::PARTICIPANT_SIZE;
/// Offset of the retention word set on an existing journal (`Journal::set_retention`): 0
/// while never set (the header's retention applies); else [`RETENTION_SET`] | max cycles
/// (31 bits) << 32 | max age in seconds (32 bits), 0 meaning unlimited in either field.
/// One atomic word, so readers never see half of an update.
pub const META_RETENTION_OFFSET: usize = META_SHARED_OFFSET + 128;
/// Bit of the retention word saying it is set.
pub const RETENTION_SET: u64 = 1 << 63;
/// Largest max-cycles value the retention word holds.
pub const RETENTION_MAX_CYCLES: u64 = (1 << 31) - 1;
/// Largest max-age value, seconds, the retention word holds (about 136 years).
pub const RETENTION_MAX_SECS: u64 = u32::MAX as u64;

/// Offset of the archive (cold tier) directory record: a u64 length (0 = none), then the
/// path bytes (absolute, or relative to the journal directory).
pub const META_ARCHIVE_OFFSET: usize = 1024;
/// Longest archive path.
pub const MAX_ARCHIVE_PATH: usize = 2048;
/// Named readers per journal.
pub const MAX_READERS: usize = 256;
/// Bytes per named-reader entry.
pub const READER_ENTRY_SIZE: usize = 128;
/// Total size of the metadata file.
pub const META_SIZE: usize = META_READERS_OFFSET + MAX_READERS * READER_ENTRY_SIZE;

/// Size of the immutable metadata header that the CRC covers.
pub const META_HEADER_SIZE: usize = 128;
/// Offset of the payload type record (after the header, immutable too): `u64` size (0: an
/// untyped journal, and then the whole record is zero), `u32` alignment, the type name
/// zero-padded to [`TYPE_NAME_LEN`] bytes, and the CRC32C of the record's bytes before it.
/// Journals made before typed entries have zeros here, so they read as untyped.
pub const META_PAYLOAD_OFFSET: usize = META_HEADER_SIZE;
/// Bytes of the payload type record.
pub const META_PAYLOAD_SIZE: usize = 16 + TYPE_NAME_LEN;
/// Offset of the schema record's descriptor (immutable too): `u64` length of the schema record
/// stored at [`META_SIZE`], right after the fixed metadata (0: no schema, and then the whole
/// descriptor is zero), `u32` zero, and the CRC32C of the descriptor's bytes before it. The
/// file is then `META_SIZE` plus the record's length rounded up to whole pages. Journals made
/// before schemas have zeros here, so they read as journals without one.
pub const META_SCHEMA_OFFSET: usize = META_PAYLOAD_OFFSET + META_PAYLOAD_SIZE;
/// Bytes of the schema record's descriptor.
pub const META_SCHEMA_SIZE: usize = 16;
/// Bytes of the immutable start of the metadata file: the header, the payload type record,
/// the schema descriptor, and reserved zeros.
pub const META_IMMUTABLE_SIZE: usize = 256;
const _: () = assert!(META_SCHEMA_OFFSET + META_SCHEMA_SIZE <= META_IMMUTABLE_SIZE);

/// Roll policy codes in the metadata header.
pub const ROLL_NEVER: u32 = 0;
/// Roll every `roll_secs` seconds of realtime, aligned to the epoch.
pub const ROLL_TIME: u32 = 1;

/// The immutable part of the metadata file, decoded and validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaHeader {
    /// Format version.
    pub version: u32,
    /// `ROLL_NEVER` or `ROLL_TIME`.
    pub roll_kind: u32,
    /// Roll period in seconds when `roll_kind == ROLL_TIME`.
    pub roll_secs: u64,
    /// Largest data area of one cycle, bytes (a multiple of 8); a full cycle rolls.
    pub cycle_bytes: u64,
    /// Largest growth step of data and index files, bytes (a multiple of the page).
    pub chunk_bytes: u64,
    /// Largest payload of one entry, bytes.
    pub max_entry: u64,
    /// Durability mode code (see `Durability`).
    pub durability: u32,
    /// Period of the `periodic` durability mode, ms.
    pub periodic_ms: u64,
    /// Keep at most this many cycles (0: unlimited).
    pub retain_cycles: u64,
    /// Delete cycles whose bucket ended more than this many seconds ago (0: unlimited).
    pub retain_secs: u64,
    /// After this many ms an entry reserved by a *live* appender is abandoned.
    pub abandon_ms: u64,
    /// CLOCK_REALTIME of creation.
    pub created_ns: u64,
    /// Random identity of this journal (nonces of encrypted entries start with it).
    pub id: [u8; 16],
    /// The entries' payload type, for a journal made by `JournalConfig::for_type`.
    pub payload: Option<StoredPayloadType>,
    /// Bytes of the schema record stored after the fixed metadata (0: no schema).
    pub schema_len: u64,
}

/// Why a file is not a usable journal file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// The file is shorter than its fixed header.
    Short {
        /// Bytes present.
        len: usize,
        /// Bytes needed.
        need: usize,
    },
    /// The magic number is not ours.
    BadMagic,
    /// Written by another format version.
    Version(u32),
    /// Header checksum mismatch.
    BadCrc,
    /// A header field is out of range.
    Field(&'static str),
    /// The payload type record is inconsistent (what is wrong).
    PayloadType(String),
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Short { len, need } => {
                write!(f, "file is {len} bytes, its header needs {need}")
            }
            FormatError::BadMagic => f.write_str("not a shmbus journal file (bad magic)"),
            FormatError::Version(v) => write!(
                f,
                "format version {v}, this library reads {JOURNAL_FORMAT_VERSION_MIN} to {JOURNAL_FORMAT_VERSION}"
            ),
            FormatError::BadCrc => f.write_str("header checksum mismatch"),
            FormatError::Field(what) => write!(f, "header field out of range: {what}"),
            FormatError::PayloadType(what) => write!(f, "payload type record: {what}"),
        }
    }
}

fn rd_u32(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes(s.try_into().ok()?))
}

fn rd_u64(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(8)?)?;
    Some(u64::from_le_bytes(s.try_into().ok()?))
}

/// Largest cycle data area: 2^32 units of 8 bytes would overflow the position word's units
/// field, so cap at 16 GiB.
pub const MAX_CYCLE_BYTES: u64 = 16 << 30;
/// Smallest cycle data area.
pub const MIN_CYCLE_BYTES: u64 = 64 << 10;

impl MetaHeader {
    /// Encodes the header (with its CRC) and the payload type record (with its own CRC;
    /// all zero for an untyped journal) into the first `META_IMMUTABLE_SIZE` bytes.
    pub fn encode(&self) -> [u8; META_IMMUTABLE_SIZE] {
        let mut b = [0u8; META_IMMUTABLE_SIZE];
        let mut put = |off: usize, v: &[u8]| b[off..off + v.len()].copy_from_slice(v);
        put(0, &META_MAGIC.to_le_bytes());
        put(8, &self.version.to_le_bytes());
        put(12, &self.roll_kind.to_le_bytes());
        put(16, &self.roll_secs.to_le_bytes());
        put(24, &self.cycle_bytes.to_le_bytes());
        put(32, &self.chunk_bytes.to_le_bytes());
        put(40, &self.max_entry.to_le_bytes());
        put(48, &self.durability.to_le_bytes());
        put(56, &self.periodic_ms.to_le_bytes());
        put(64, &self.retain_cycles.to_le_bytes());
        put(72, &self.retain_secs.to_le_bytes());
        put(80, &self.abandon_ms.to_le_bytes());
        put(88, &self.created_ns.to_le_bytes());
        put(96, &self.id);
        let crc = crate::crc::crc32c(&b[..120]);
        b[120..124].copy_from_slice(&crc.to_le_bytes());
        if let Some(p) = &self.payload {
            let (size, align, name) = p.raw();
            let r = &mut b[META_PAYLOAD_OFFSET..META_PAYLOAD_OFFSET + META_PAYLOAD_SIZE];
            r[0..8].copy_from_slice(&size.to_le_bytes());
            r[8..12].copy_from_slice(&align.to_le_bytes());
            r[12..12 + TYPE_NAME_LEN].copy_from_slice(&name);
            let crc = crate::crc::crc32c(&r[..META_PAYLOAD_SIZE - 4]);
            r[META_PAYLOAD_SIZE - 4..].copy_from_slice(&crc.to_le_bytes());
        }
        if self.schema_len != 0 {
            let r = &mut b[META_SCHEMA_OFFSET..META_SCHEMA_OFFSET + META_SCHEMA_SIZE];
            r[0..8].copy_from_slice(&self.schema_len.to_le_bytes());
            let crc = crate::crc::crc32c(&r[..META_SCHEMA_SIZE - 4]);
            r[META_SCHEMA_SIZE - 4..].copy_from_slice(&crc.to_le_bytes());
        }
        b
    }

    /// The metadata file's size: the fixed part and the schema record in whole pages.
    pub fn file_size(&self) -> u64 {
        META_SIZE as u64 + self.schema_len.div_ceil(PAGE as u64) * PAGE as u64
    }

    /// Decodes the schema descriptor at `META_SCHEMA_OFFSET` of untrusted bytes (0: none;
    /// bytes that end before it read as a journal without a schema).
    fn decode_schema_len(b: &[u8]) -> Result<u64, FormatError> {
        let Some(r) = b.get(META_SCHEMA_OFFSET..META_SCHEMA_OFFSET + META_SCHEMA_SIZE) else {
            return Ok(0);
        };
        if r.iter().all(|&x| x == 0) {
            return Ok(0);
        }
        let len = rd_u64(r, 0).unwrap_or(0);
        if crate::crc::crc32c(&r[..META_SCHEMA_SIZE - 4]) != rd_u32(r, META_SCHEMA_SIZE - 4).unwrap_or(0)
            || rd_u32(r, 8) != Some(0)
        {
            return Err(FormatError::Field("schema descriptor checksum mismatch"));
        }
        if len == 0 || len > crate::Schema::MAX_RECORD as u64 {
            return Err(FormatError::Field("schema record length out of range"));
        }
        Ok(len)
    }

    /// Decodes the payload type record at `META_PAYLOAD_OFFSET` of untrusted bytes
    /// (`None`: untyped; bytes that end before the record read as an untyped journal's).
    fn decode_payload(b: &[u8], max_entry: u64) -> Result<Option<StoredPayloadType>, FormatError> {
        let Some(r) = b.get(META_PAYLOAD_OFFSET..META_PAYLOAD_OFFSET + META_PAYLOAD_SIZE) else {
            return Ok(None);
        };
        let size = rd_u64(r, 0).unwrap_or(0);
        let stored_crc = rd_u32(r, META_PAYLOAD_SIZE - 4).unwrap_or(0);
        if size == 0 && stored_crc == 0 {
            // Untyped: every other field must be zero too (`from_raw` checks the rest).
        } else if crate::crc::crc32c(&r[..META_PAYLOAD_SIZE - 4]) != stored_crc {
            return Err(FormatError::PayloadType("checksum mismatch".into()));
        }
        let mut name = [0u8; TYPE_NAME_LEN];
        name.copy_from_slice(&r[12..12 + TYPE_NAME_LEN]);
        let p =
            StoredPayloadType::from_raw(size, rd_u32(r, 8).unwrap_or(0), &name).map_err(FormatError::PayloadType)?;
        if let Some(p) = &p {
            if p.size() > max_entry {
                return Err(FormatError::PayloadType(format!(
                    "type {p} is larger than the journal's max entry size of {max_entry}"
                )));
            }
        }
        Ok(p)
    }

    /// Decodes and validates a metadata header from untrusted bytes.
    pub fn decode(b: &[u8]) -> Result<MetaHeader, FormatError> {
        if b.len() < META_HEADER_SIZE {
            return Err(FormatError::Short { len: b.len(), need: META_HEADER_SIZE });
        }
        let g64 = |o| rd_u64(b, o).unwrap_or(0);
        let g32 = |o| rd_u32(b, o).unwrap_or(0);
        if g64(0) != META_MAGIC {
            return Err(FormatError::BadMagic);
        }
        let version = g32(8);
        if !version_supported(version) {
            return Err(FormatError::Version(version));
        }
        if crate::crc::crc32c(&b[..120]) != g32(120) {
            return Err(FormatError::BadCrc);
        }
        let h = MetaHeader {
            version,
            roll_kind: g32(12),
            roll_secs: g64(16),
            cycle_bytes: g64(24),
            chunk_bytes: g64(32),
            max_entry: g64(40),
            durability: g32(48),
            periodic_ms: g64(56),
            retain_cycles: g64(64),
            retain_secs: g64(72),
            abandon_ms: g64(80),
            created_ns: g64(88),
            id: b[96..112].try_into().unwrap_or([0; 16]),
            payload: None,
            schema_len: 0,
        };
        h.validate()?;
        Ok(MetaHeader {
            payload: MetaHeader::decode_payload(b, h.max_entry)?,
            schema_len: MetaHeader::decode_schema_len(b)?,
            ..h
        })
    }

    /// Checks every field's range (for decoding and for user-supplied options).
    pub fn validate(&self) -> Result<(), FormatError> {
        if self.roll_kind > ROLL_TIME {
            return Err(FormatError::Field("roll kind"));
        }
        if self.roll_kind == ROLL_TIME && (self.roll_secs == 0 || self.roll_secs > 366 * 86400) {
            return Err(FormatError::Field("roll period must be 1 s ..= 366 days"));
        }
        if !(MIN_CYCLE_BYTES..=MAX_CYCLE_BYTES).contains(&self.cycle_bytes) || self.cycle_bytes % PAGE as u64 != 0 {
            return Err(FormatError::Field("cycle size must be a multiple of 4096 in 64 KiB ..= 16 GiB"));
        }
        if self.chunk_bytes < PAGE as u64 || self.chunk_bytes % PAGE as u64 != 0 || self.chunk_bytes > self.cycle_bytes
        {
            return Err(FormatError::Field("growth chunk must be a multiple of 4096, at most the cycle size"));
        }
        if self.max_entry == 0
            || self.max_entry + ENTRY_HEADER as u64 > self.cycle_bytes / 2
            || self.max_entry > u32::MAX as u64 / 2
        {
            return Err(FormatError::Field("max entry size must be 1 ..= half the cycle size"));
        }
        if self.durability > 2 {
            return Err(FormatError::Field("durability mode"));
        }
        if self.durability == 2 && self.periodic_ms == 0 {
            return Err(FormatError::Field("periodic durability needs a period of at least 1 ms"));
        }
        if self.abandon_ms == 0 {
            return Err(FormatError::Field("abandon timeout must be at least 1 ms"));
        }
        Ok(())
    }

    /// Bytes of a cycle's index file at full size (4 bytes per possible entry).
    pub fn index_bytes(&self) -> u64 {
        max_entries(self.cycle_bytes) * 4
    }
}

/// Most entries a data area of `cycle_bytes` can hold (each takes at least a header).
pub fn max_entries(cycle_bytes: u64) -> u64 {
    cycle_bytes / ENTRY_HEADER as u64
}

// ---- cycle data file -------------------------------------------------------------------

/// Size of a cycle file's header page; entries start here.
pub const CYCLE_HEADER_PAGE: usize = PAGE;
/// Bytes of the immutable cycle header covered by its CRC.
pub const CYCLE_HEADER_SIZE: usize = 64;
/// Offset of the position word (`SEALED | idx << 32 | units`).
pub const CYCLE_POS_OFFSET: usize = 256;
/// Offset of the allocation word (bytes of the data area backed by the file).
pub const CYCLE_ALLOC_OFFSET: usize = 320;
/// Offset of the index allocation word (bytes of the index file backed).
pub const CYCLE_IALLOC_OFFSET: usize = 384;

/// The immutable header of a cycle data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CycleHeader {
    /// Format version: the journal's (its metadata header's).
    pub version: u32,
    /// Cycle number (0, 1, …; the file name repeats it).
    pub cycle: u64,
    /// Global index of the cycle's first entry.
    pub first_index: u64,
    /// Start of the cycle's time bucket (CLOCK_REALTIME ns).
    pub bucket_start: u64,
    /// End of the bucket (exclusive); `u64::MAX` when rolling by size only.
    pub bucket_end: u64,
    /// Capacity of the data area (copied from the metadata).
    pub cycle_bytes: u64,
}

impl CycleHeader {
    /// Encodes the header with its CRC.
    pub fn encode(&self) -> [u8; CYCLE_HEADER_SIZE] {
        let mut b = [0u8; CYCLE_HEADER_SIZE];
        b[0..8].copy_from_slice(&CYCLE_MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[16..24].copy_from_slice(&self.cycle.to_le_bytes());
        b[24..32].copy_from_slice(&self.first_index.to_le_bytes());
        b[32..40].copy_from_slice(&self.bucket_start.to_le_bytes());
        b[40..48].copy_from_slice(&self.bucket_end.to_le_bytes());
        b[48..56].copy_from_slice(&self.cycle_bytes.to_le_bytes());
        let crc = crate::crc::crc32c(&b[..56]);
        b[56..60].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and validates a cycle header from untrusted bytes.
    pub fn decode(b: &[u8]) -> Result<CycleHeader, FormatError> {
        if b.len() < CYCLE_HEADER_SIZE {
            return Err(FormatError::Short { len: b.len(), need: CYCLE_HEADER_SIZE });
        }
        let g64 = |o| rd_u64(b, o).unwrap_or(0);
        if g64(0) != CYCLE_MAGIC {
            return Err(FormatError::BadMagic);
        }
        let v = rd_u32(b, 8).unwrap_or(0);
        if !version_supported(v) {
            return Err(FormatError::Version(v));
        }
        if crate::crc::crc32c(&b[..56]) != rd_u32(b, 56).unwrap_or(0) {
            return Err(FormatError::BadCrc);
        }
        let h = CycleHeader {
            version: v,
            cycle: g64(16),
            first_index: g64(24),
            bucket_start: g64(32),
            bucket_end: g64(40),
            cycle_bytes: g64(48),
        };
        if !(MIN_CYCLE_BYTES..=MAX_CYCLE_BYTES).contains(&h.cycle_bytes) || h.cycle_bytes % 8 != 0 {
            return Err(FormatError::Field("cycle size"));
        }
        if h.bucket_end <= h.bucket_start {
            return Err(FormatError::Field("time bucket"));
        }
        if h.first_index > (1u64 << 62) {
            return Err(FormatError::Field("first index"));
        }
        Ok(h)
    }
}

/// File name of cycle `c`'s data file.
pub fn data_file_name(c: u64) -> String {
    format!("{c:012}.sbjd")
}

/// File name of cycle `c`'s index file.
pub fn index_file_name(c: u64) -> String {
    format!("{c:012}.sbji")
}

/// Suffix of an archived cycle file compressed with zstd (`Journal::tier_zstd`):
/// `NNNNNNNNNNNN.sbjd.zst` and `NNNNNNNNNNNN.sbji.zst`.
pub const ZSTD_SUFFIX: &str = ".zst";

/// The name of cycle file `name` compressed with zstd.
pub fn zstd_file_name(name: &str) -> String {
    format!("{name}{ZSTD_SUFFIX}")
}

/// Parses a cycle number out of a data-file name, plain or zstd-compressed.
pub fn parse_archived_data_file_name(name: &str) -> Option<u64> {
    parse_data_file_name(name.strip_suffix(ZSTD_SUFFIX).unwrap_or(name))
}

/// Parses a cycle number out of a data-file name.
pub fn parse_data_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".sbjd")?;
    if digits.len() != 12 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

// ---- position word ---------------------------------------------------------------------

/// Bit of the position word set once the cycle is sealed (no more claims).
pub const POS_SEALED: u64 = 1 << 63;
/// Decodes a position word into (sealed, entries claimed, data units claimed).
#[inline]
pub fn pos_parts(w: u64) -> (bool, u64, u64) {
    (w & POS_SEALED != 0, (w >> 32) & 0x7fff_ffff, w & 0xffff_ffff)
}
/// Builds a position word.
#[inline]
pub fn pos_word(sealed: bool, n: u64, units: u64) -> u64 {
    (if sealed { POS_SEALED } else { 0 }) | ((n & 0x7fff_ffff) << 32) | (units & 0xffff_ffff)
}

// ---- entries ---------------------------------------------------------------------------

/// Bytes of an entry header.
pub const ENTRY_HEADER: usize = 32;
/// Entries are aligned to (and sized in units of) 8 bytes.
pub const UNIT: usize = 8;

/// Entry state: claimed and being written.
pub const ST_RESERVED: u64 = 0x52;
/// Entry state: committed, readable.
pub const ST_COMMITTED: u64 = 0x43;
/// Entry state: abandoned (its writer died or timed out), skipped by readers.
pub const ST_ABANDONED: u64 = 0x41;

/// Entry flag: payload is lz4 block-compressed; `raw_len` is the decompressed size.
pub const FLAG_LZ4: u64 = 1;
/// Entry flag: payload is sealed by the user's `EntryCipher` (after compression, if both).
pub const FLAG_SEALED: u64 = 2;
/// Entry flag (with `FLAG_SEALED`): the sealed payload starts with the 4-byte little-endian
/// id of the key that sealed it (the built-in cipher's layout).
pub const FLAG_KEYED: u64 = 4;
/// Every flag this version knows.
pub const KNOWN_FLAGS: u64 = FLAG_LZ4 | FLAG_SEALED | FLAG_KEYED;

/// The 24-byte nonce of an encrypted entry: the journal's id (12 bytes), the cycle (8) and
/// the in-cycle index (4). Unique for every entry of every journal (ids are random).
pub fn entry_nonce(id: &[u8; 16], cycle: u64, idx: u32) -> [u8; 24] {
    let mut n = [0u8; 24];
    n[..12].copy_from_slice(&id[..12]);
    n[12..20].copy_from_slice(&cycle.to_le_bytes());
    n[20..24].copy_from_slice(&idx.to_le_bytes());
    n
}

/// Builds word 0 of an entry header.
#[inline]
pub fn entry_word(state: u64, flags: u64, units: u64) -> u64 {
    state | (flags & 0xff) << 8 | (units & 0xffff_ffff) << 32
}
/// Decodes word 0 into (state, flags, units).
#[inline]
pub fn entry_word_parts(w: u64) -> (u64, u64, u64) {
    (w & 0xff, (w >> 8) & 0xff, w >> 32)
}

/// Units (8-byte) an entry with `payload` stored bytes takes, header included.
#[inline]
pub fn entry_units(payload: usize) -> u64 {
    (ENTRY_HEADER + payload).div_ceil(UNIT) as u64
}

/// Offset in an entry of the first byte the CRC covers (`len`, `raw_len`, index,
/// timestamp, then the payload: one contiguous range, one CRC call).
pub const CRC_FROM: usize = 12;

/// CRC of an entry: CRC32C, started from the flags, over bytes `CRC_FROM..32 + len` of the
/// entry (`len`, `raw_len`, index, timestamp, payload).
#[inline]
pub fn entry_crc(flags: u64, covered: &[u8]) -> u32 {
    crc32c_append(flags as u32, covered)
}

/// [`entry_crc`] computed from the parts instead of the entry's bytes: `head` is bytes
/// `CRC_FROM..32` (`len`, `raw_len`, index, timestamp, little-endian), `payload` the payload.
/// The writer uses it on its own copies, so it never reads back the lines it just wrote
/// (which a polling reader may have taken away in between).
#[inline]
pub fn entry_crc_parts(flags: u64, head: &[u8; ENTRY_HEADER - CRC_FROM], payload: &[u8]) -> u32 {
    crc32c_append(crc32c_append(flags as u32, head), payload)
}

/// One entry as found by the scanner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScannedEntry {
    /// A committed entry whose checksum holds.
    Committed {
        /// In-cycle index.
        idx: u64,
        /// Offset (bytes) of its header in the data area.
        offset: u64,
        /// Units it spans.
        units: u64,
        /// Timestamp.
        ts: u64,
    },
    /// An abandoned entry (skipped).
    Abandoned {
        /// In-cycle index.
        idx: u64,
        /// Offset of its header.
        offset: u64,
        /// Units it spans.
        units: u64,
    },
}

/// Why the scan of a data area stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanStop {
    /// Reached the claimed end (the position word) cleanly.
    End,
    /// An entry is reserved or unwritten (in flight, or its writer died).
    Unfinished,
    /// The header is junk: unknown state, impossible size, wrong index.
    BadHeader,
    /// The checksum of a committed entry does not hold.
    BadCrc,
    /// The entry runs past the bytes present (file cut short).
    PastEnd,
}

/// Result of scanning a data area.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg(any(test, feature = "internals"))]
pub struct Scan {
    /// Entries accepted, in order (committed and abandoned).
    pub entries: u64,
    /// Committed entries among them.
    pub committed: u64,
    /// Offset (bytes) just past the last accepted entry.
    pub end: u64,
    /// Why the scan stopped.
    pub stop: ScanStop,
}

/// Reads one entry at byte `offset` of `data` (the data area), expecting in-cycle index
/// `idx`. Never reads outside `data`.
pub fn read_entry(
    data: &[u8],
    offset: u64,
    idx: u64,
    max_entry: u64,
) -> Result<(ScannedEntry, &[u8], u64, u64), ScanStop> {
    let off = usize::try_from(offset).map_err(|_| ScanStop::PastEnd)?;
    let Some(w0) = rd_u64(data, off) else {
        return Err(ScanStop::PastEnd);
    };
    let (state, flags, units) = entry_word_parts(w0);
    if w0 == 0 || state == ST_RESERVED {
        return Err(ScanStop::Unfinished);
    }
    if units < (ENTRY_HEADER / UNIT) as u64 || units > entry_units(max_entry as usize) {
        return Err(ScanStop::BadHeader);
    }
    let span = (units as usize) * UNIT;
    if off.checked_add(span).is_none_or(|e| e > data.len()) {
        return Err(ScanStop::PastEnd);
    }
    match state {
        ST_ABANDONED => Ok((ScannedEntry::Abandoned { idx, offset, units }, &[][..], 0, 0)),
        ST_COMMITTED => {
            let crc = rd_u32(data, off + 8).ok_or(ScanStop::PastEnd)?;
            let len = rd_u32(data, off + 12).ok_or(ScanStop::PastEnd)?;
            let raw_len = rd_u32(data, off + 16).ok_or(ScanStop::PastEnd)?;
            let eidx = rd_u32(data, off + 20).ok_or(ScanStop::PastEnd)?;
            let ts = rd_u64(data, off + 24).ok_or(ScanStop::PastEnd)?;
            if eidx as u64 != idx || flags & !KNOWN_FLAGS != 0 {
                return Err(ScanStop::BadHeader);
            }
            if entry_units(len as usize) != units || raw_len as u64 > max_entry || (flags == 0 && raw_len != len) {
                return Err(ScanStop::BadHeader);
            }
            let payload = &data[off + ENTRY_HEADER..off + ENTRY_HEADER + len as usize];
            if entry_crc(flags, &data[off + CRC_FROM..off + ENTRY_HEADER + len as usize]) != crc {
                return Err(ScanStop::BadCrc);
            }
            Ok((ScannedEntry::Committed { idx, offset, units, ts }, payload, flags, raw_len as u64))
        }
        _ => Err(ScanStop::BadHeader),
    }
}

/// Walks the data area from its start, accepting entries while they are valid, up to
/// `claimed_units` (the position word) or the end of `data`, whichever is first. This is
/// the open-time recovery scan and the fuzzed parser.
#[cfg(any(test, feature = "internals"))]
pub fn scan_data(data: &[u8], claimed_units: u64, max_entry: u64) -> Scan {
    let limit = claimed_units.saturating_mul(UNIT as u64).min(data.len() as u64);
    let mut s = Scan { entries: 0, committed: 0, end: 0, stop: ScanStop::End };
    while s.end < limit {
        match read_entry(&data[..limit as usize], s.end, s.entries, max_entry) {
            Ok((e, ..)) => {
                let units = match e {
                    ScannedEntry::Committed { units, .. } => {
                        s.committed += 1;
                        units
                    }
                    ScannedEntry::Abandoned { units, .. } => units,
                };
                s.entries += 1;
                s.end += units * UNIT as u64;
            }
            Err(stop) => {
                s.stop = stop;
                return s;
            }
        }
    }
    if claimed_units.saturating_mul(UNIT as u64) > data.len() as u64 {
        s.stop = ScanStop::PastEnd;
    }
    s
}

/// Decompresses an lz4 payload into `out` (cleared first), refusing anything that does
/// not decode to exactly `raw_len` bytes.
pub fn decompress_into(payload: &[u8], raw_len: usize, out: &mut Vec<u8>) -> bool {
    out.clear();
    out.resize(raw_len, 0);
    matches!(lz4_flex::block::decompress_into(payload, out), Ok(n) if n == raw_len)
}

/// Parses a whole journal file image (metadata or cycle data file) without trusting any
/// byte of it: the fuzz targets and the corpus test call this.
#[cfg(any(test, feature = "internals"))]
pub fn fuzz_parse(bytes: &[u8]) -> u64 {
    let mut acc = 0u64;
    if let Ok(h) = MetaHeader::decode(bytes) {
        acc += h.cycle_bytes;
    }
    if let Ok(h) = CycleHeader::decode(bytes) {
        acc += h.first_index;
    }
    // Treat the rest as a data area whatever the header said.
    let data = bytes.get(CYCLE_HEADER_PAGE.min(bytes.len())..).unwrap_or(&[]);
    let pos = rd_u64(bytes, CYCLE_POS_OFFSET).unwrap_or(u64::MAX);
    let (_, _, units) = pos_parts(pos);
    for max_entry in [1u64 << 20, 64] {
        acc += index_from_data(data, max_entry, 1 << 31).len() as u64;
        let s = scan_data(data, units, max_entry);
        acc += s.entries + s.end;
        let s = scan_data(bytes, u64::MAX >> 3, max_entry);
        acc += s.committed;
        let mut out = Vec::new();
        let mut off = 0;
        for i in 0..s.entries {
            if let Ok((ScannedEntry::Committed { units, .. }, payload, flags, raw)) =
                read_entry(bytes, off, i, max_entry)
            {
                if flags & FLAG_LZ4 != 0 {
                    acc += decompress_into(payload, raw as usize, &mut out) as u64;
                }
                off += units * UNIT as u64;
            } else if let Ok((ScannedEntry::Abandoned { units, .. }, ..)) = read_entry(bytes, off, i, max_entry) {
                off += units * UNIT as u64;
            }
        }
    }
    acc
}

/// Finds the first valid committed entry at or after byte `from` of `data` (a data area or
/// a part of one), scanning in 8-byte steps: a committed header whose stored in-cycle index
/// is in `min_idx..max_idx` and whose checksum holds. Returns (in-cycle index, offset).
///
/// This is how readers get past a damaged range (a zeroed page, junk headers) and how a
/// missing index file is rebuilt: every entry carries its own index and checksum, so the
/// data file alone says where the healthy entries are. Never reads outside `data`; the
/// work is linear in the bytes scanned (the checksum is computed only for headers that
/// pass the cheap checks).
pub fn find_next_entry(data: &[u8], from: u64, min_idx: u64, max_idx: u64, max_entry: u64) -> Option<(u64, u64)> {
    let mut off = from.div_ceil(UNIT as u64) * UNIT as u64;
    let len = data.len() as u64;
    while off.checked_add(ENTRY_HEADER as u64).is_some_and(|e| e <= len) {
        let o = off as usize;
        let w0 = rd_u64(data, o).unwrap_or(0);
        let (state, _, units) = entry_word_parts(w0);
        if state == ST_COMMITTED && units >= (ENTRY_HEADER / UNIT) as u64 && units <= entry_units(max_entry as usize) {
            let eidx = rd_u32(data, o + 20).unwrap_or(0) as u64;
            if eidx >= min_idx && eidx < max_idx {
                if let Ok((ScannedEntry::Committed { .. }, ..)) = read_entry(data, off, eidx, max_entry) {
                    return Some((eidx, off));
                }
            }
        }
        off += UNIT as u64;
    }
    None
}

/// The index slots of a data area, rebuilt from the entries themselves: (in-cycle index,
/// offset) of every entry found, in order. Walks entries while they are valid; past a
/// damaged range it resumes at the next valid committed entry ([`find_next_entry`]), so
/// one bad page hides only the entries inside it. Abandoned entries right after a damaged
/// range cannot be placed (they carry no index) and get no slot; the index is a hint.
pub fn index_from_data(data: &[u8], max_entry: u64, max_idx: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let (mut i, mut off) = (0u64, 0u64);
    while i < max_idx && off.checked_add(ENTRY_HEADER as u64).is_some_and(|e| e <= data.len() as u64) {
        match read_entry(data, off, i, max_entry) {
            Ok((ScannedEntry::Committed { units, .. } | ScannedEntry::Abandoned { units, .. }, ..)) => {
                out.push((i, off));
                i += 1;
                off += units * UNIT as u64;
            }
            Err(_) => match find_next_entry(data, off, i + 1, max_idx, max_entry) {
                Some((j, o)) => {
                    i = j;
                    off = o;
                }
                None => break,
            },
        }
    }
    out
}
