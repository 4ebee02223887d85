//! Retention: deleting old cycles (`gc`), and the retention in force: the one stored at
//! creation in the immutable header, unless `Journal::set_retention` has set the
//! retention word since (one atomic word of the metadata's shared area, so appenders and
//! `gc` in other processes see the whole of an update or none of it).

use std::io;
use std::time::Duration;

use crate::sync::Ordering;

use super::format::{
    data_file_name, index_file_name, zstd_file_name, MetaHeader, RETENTION_MAX_CYCLES, RETENTION_MAX_SECS,
    RETENTION_SET,
};
use super::shared::Inner;

/// Which cycles [`Journal::gc`](super::Journal::gc) deletes. The current cycle is never deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Retention {
    /// Keep at most this many cycles.
    pub max_cycles: Option<u64>,
    /// Delete cycles last written longer ago than this.
    pub max_age: Option<Duration>,
}

/// What [`Journal::gc`](super::Journal::gc) removed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GcReport {
    /// Cycles deleted.
    pub removed_cycles: Vec<u64>,
    /// Bytes of files deleted.
    pub removed_bytes: u64,
}

impl Retention {
    /// The retention in force: the word's when it is set, else the header's.
    pub(super) fn in_force(hdr: &MetaHeader, word: u64) -> Retention {
        let (cycles, secs) = if word & RETENTION_SET != 0 {
            ((word >> 32) & RETENTION_MAX_CYCLES, word & RETENTION_MAX_SECS)
        } else {
            (hdr.retain_cycles, hdr.retain_secs)
        };
        Retention {
            max_cycles: (cycles != 0).then_some(cycles),
            max_age: (secs != 0).then(|| Duration::from_secs(secs)),
        }
    }

    /// The retention word for `self`, or what is out of range. A max age is counted in
    /// whole seconds (at least one); `Some(0)` cycles means keep one (the current cycle is
    /// never deleted), as in [`Journal::gc_with`](super::Journal::gc_with).
    pub(super) fn to_word(self) -> Result<u64, String> {
        let cycles = self.max_cycles.map_or(0, |c| c.max(1));
        if cycles > RETENTION_MAX_CYCLES {
            return Err(format!("retention of {cycles} cycles: at most {RETENTION_MAX_CYCLES} (or unlimited)"));
        }
        let secs = self.max_age.map_or(0, |d| d.as_secs().max(1));
        if secs > RETENTION_MAX_SECS {
            return Err(format!("retention max age of {secs} s: at most {RETENTION_MAX_SECS} s (or unlimited)"));
        }
        Ok(RETENTION_SET | cycles << 32 | secs)
    }
}

impl Inner {
    /// The retention in force now (see the [module docs](self)).
    pub(super) fn retention(&self) -> Retention {
        Retention::in_force(&self.meta.hdr, self.meta.retention_word())
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
            let zdpath = cdir.join(zstd_file_name(&data_file_name(c)));
            let by_age = r.max_age.is_some_and(|age| {
                // A compressed archived file keeps its source's modification time.
                std::fs::metadata(&dpath)
                    .or_else(|_| std::fs::metadata(&zdpath))
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
            let zipath = cdir.join(zstd_file_name(&index_file_name(c)));
            for p in [&dpath, &zdpath, &ipath, &zipath] {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(cycles: u64, secs: u64) -> MetaHeader {
        MetaHeader {
            version: super::super::format::JOURNAL_FORMAT_VERSION,
            roll_kind: 0,
            roll_secs: 0,
            cycle_bytes: 1 << 20,
            chunk_bytes: 1 << 16,
            max_entry: 1024,
            durability: 0,
            periodic_ms: 0,
            retain_cycles: cycles,
            retain_secs: secs,
            abandon_ms: 1,
            created_ns: 0,
            id: [0; 16],
            payload: None,
            schema_len: 0,
        }
    }

    #[test]
    fn the_word_overrides_the_header_and_round_trips() {
        let h = hdr(3, 60);
        let created = Retention { max_cycles: Some(3), max_age: Some(Duration::from_secs(60)) };
        assert_eq!(Retention::in_force(&h, 0), created, "never set: the header's");
        for r in [
            Retention::default(),
            Retention { max_cycles: Some(1), max_age: None },
            Retention { max_cycles: None, max_age: Some(Duration::from_secs(7 * 86400)) },
            Retention {
                max_cycles: Some(RETENTION_MAX_CYCLES),
                max_age: Some(Duration::from_secs(RETENTION_MAX_SECS)),
            },
        ] {
            let w = r.to_word().unwrap();
            assert_ne!(w, 0);
            assert_eq!(Retention::in_force(&h, w), r);
        }
        // Rounded as gc rounds: 0 cycles keeps one, a max age is at least a second.
        let w = Retention { max_cycles: Some(0), max_age: Some(Duration::from_millis(10)) }.to_word().unwrap();
        assert_eq!(
            Retention::in_force(&h, w),
            Retention { max_cycles: Some(1), max_age: Some(Duration::from_secs(1)) }
        );
        assert!(Retention { max_cycles: Some(RETENTION_MAX_CYCLES + 1), max_age: None }.to_word().is_err());
        assert!(Retention { max_cycles: None, max_age: Some(Duration::from_secs(RETENTION_MAX_SECS + 1)) }
            .to_word()
            .is_err());
    }
}
