//! Tiered storage: moving old cycles to the archive directory, optionally compressing them
//! with zstd on the way (`NNNNNNNNNNNN.sbjd.zst`, `.sbji.zst`: one frame each, recording its
//! decompressed size, with a checksum; readers decompress a cycle into memory when they
//! open it, see `files::decompress_bounded`).

use std::io;
use std::path::Path;

use crate::sys::ProcessId;

use super::error::{open_error_message, JournalTierError};
use super::files;
use super::format::{data_file_name, index_file_name, parse_data_file_name, zstd_file_name};
use super::shared::{dir_mode, Inner};

/// zstd levels `Journal::tier_zstd` takes.
pub(super) const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = 1..=22;

/// What [`Journal::tier`](super::Journal::tier) moved.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TierReport {
    /// Cycles moved to the archive.
    pub moved_cycles: Vec<u64>,
    /// Bytes moved.
    pub moved_bytes: u64,
}

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
        Err(e) if crate::sys::fs::is_cross_device(&e) || e.kind() == io::ErrorKind::PermissionDenied => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(0),
        Err(e) => return Err(e),
    }
    // Copied by hand: never through a symlink at either name, created with exactly `mode`.
    let mut src = files::open_rw(from)?;
    files::check_owner(from, &src, trust)
        .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, open_error_message(&e)))?;
    write_into_place(to, "moving", mode, |mut f| {
        io::copy(&mut src, &mut f)?;
        Ok(len)
    })
}

/// Writes `to` through `write` under a temporary name next to it (created anew, never
/// through a symlink, with exactly `mode` whatever the umask), synced, then linked into
/// place: `to` appears complete or not at all. Returns what `write` returned, or 0 if `to`
/// appeared meanwhile.
fn write_into_place(
    to: &Path,
    what: &str,
    mode: u32,
    write: impl FnOnce(&std::fs::File) -> io::Result<u64>,
) -> io::Result<u64> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let tmp = to.with_extension(format!("{what}-{}", ProcessId::current().pid));
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(crate::sys::fs::NOFOLLOW_CLOEXEC)
        .open(&tmp)?;
    let written = (|| {
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        let n = write(&f)?;
        f.sync_all()?;
        Ok::<u64, io::Error>(n)
    })();
    let n = match written {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    let r = std::fs::hard_link(&tmp, to);
    let _ = std::fs::remove_file(&tmp);
    match r {
        Ok(()) => Ok(n),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(0),
        Err(e) => Err(e),
    }
}

/// Writes `from` compressed with zstd at `level` as `to` (built under a temporary name,
/// synced, then linked into place: complete or absent), with `from`'s modification time
/// (retention by age reads it). Returns the bytes written; 0 if `to` already exists.
fn compress_file(from: &Path, to: &Path, level: i32, mode: u32, trust: &crate::domain::TrustPolicy) -> io::Result<u64> {
    if to.symlink_metadata().is_ok() {
        return Ok(0);
    }
    let src = files::open_rw(from)?;
    files::check_owner(from, &src, trust)
        .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, open_error_message(&e)))?;
    let meta = src.metadata()?;
    write_into_place(to, "compressing", mode, |f| {
        let mut enc = zstd::stream::write::Encoder::new(f, level)?;
        enc.include_checksum(true)?;
        enc.include_contentsize(true)?;
        enc.set_pledged_src_size(Some(meta.len()))?;
        {
            use std::io::Read;
            io::copy(&mut (&src).take(meta.len()), &mut enc)?;
        }
        enc.finish()?;
        if let Ok(t) = meta.modified() {
            f.set_modified(t)?;
        }
        f.metadata().map(|m| m.len())
    })
}

impl Inner {
    /// Moves every cycle but the newest `keep_hot` (and never the current one) to
    /// `archive`, data file last in, data file first out, so that at every instant each
    /// cycle is complete in at least one tier. With `zstd`, each file is written to the
    /// archive compressed at that level instead of moved.
    pub(super) fn tier(
        &self,
        archive: &Path,
        keep_hot: u64,
        zstd: Option<i32>,
    ) -> Result<TierReport, JournalTierError> {
        use std::os::unix::ffi::OsStrExt;
        if let Some(level) = zstd {
            if !ZSTD_LEVELS.contains(&level) {
                return Err(JournalTierError::BadLevel { level });
            }
        }
        let _lock = self.lock_readers().map_err(|e| JournalTierError::Io(io::Error::other(e.to_string())))?;
        if let Some(existing) = self.meta.archive_dir(&self.dir) {
            if existing != self.dir.join(archive) {
                return Err(JournalTierError::OtherArchive { existing });
            }
        } else if !self.meta.set_archive_dir(archive.as_os_str().as_bytes()) {
            return Err(JournalTierError::BadPath);
        }
        let adir = self.dir.join(archive);
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(dir_mode(self.mode))
                .create(&adir)
                .map_err(JournalTierError::Io)?;
        }
        let newest = self.list_cycles().map_err(JournalTierError::Io)?.last().copied().unwrap_or(0);
        let current = self.current_cycle().min(newest);
        let hot: Vec<u64> = std::fs::read_dir(&self.dir)
            .map_err(JournalTierError::Io)?
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
                let from = self.dir.join(&name);
                bytes += match zstd {
                    None => move_file(&from, &adir.join(&name), self.mode, &self.trust),
                    Some(level) => {
                        compress_file(&from, &adir.join(zstd_file_name(&name)), level, self.mode, &self.trust)
                    }
                }
                .map_err(JournalTierError::Io)?;
            }
            for name in [data_file_name(c), index_file_name(c)] {
                match std::fs::remove_file(self.dir.join(name)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(JournalTierError::Io(e)),
                }
            }
            rep.moved_cycles.push(c);
            rep.moved_bytes += bytes;
        }
        Ok(rep)
    }
}
