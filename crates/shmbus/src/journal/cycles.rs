//! Cycle files: opening and creating them, the current cycle, first and next index,
//! listing, time search, and helpers on a mapped cycle.

use std::io;
use std::path::{Path, PathBuf};

use crate::domain::TrustPolicy;
use crate::error::OpenError;
use crate::sync::Ordering;
use crate::sys::Access;

use super::error::open_error_message;
use super::files::{create_cycle, CycleFiles};
use super::format::{
    data_file_name, entry_word_parts, parse_archived_data_file_name, parse_data_file_name, pos_parts, read_entry,
    zstd_file_name, CycleHeader, MetaHeader, ScannedEntry, ENTRY_HEADER, ROLL_TIME, ST_COMMITTED, UNIT,
};
use super::protocol;
use super::shared::{realtime_ns, Inner};

pub(super) fn bucket_for(hdr: &MetaHeader, ts: u64) -> (u64, u64) {
    if hdr.roll_kind == ROLL_TIME {
        let p = hdr.roll_secs.saturating_mul(1_000_000_000);
        let start = ts / p * p;
        (start, start.saturating_add(p))
    } else {
        (0, u64::MAX)
    }
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
        match open_cycle_in(&self.dir, archive.as_deref(), c, &self.meta.hdr, &self.trust) {
            Err(OpenError::NotFound { path }) => {
                // Not complete in either tier: rebuild the index where the data file is.
                let name = data_file_name(c);
                for d in std::iter::once(&self.dir).chain(archive.as_ref()) {
                    if d.join(&name).symlink_metadata().is_ok()
                        || d.join(zstd_file_name(&name)).symlink_metadata().is_ok()
                    {
                        return CycleFiles::open(d, c, &self.meta.hdr, Some(self.mode), &self.trust);
                    }
                }
                Err(OpenError::NotFound { path })
            }
            r => r,
        }
    }

    /// The directory holding cycle `c`'s data file now, plain or zstd-compressed (hot
    /// first, then the archive).
    pub(super) fn cycle_dir(&self, c: u64) -> Option<PathBuf> {
        let name = data_file_name(c);
        std::iter::once(self.dir.clone())
            .chain(self.meta.archive_dir(&self.dir))
            .find(|d| d.join(&name).exists() || d.join(zstd_file_name(&name)).exists())
    }

    /// Whether cycle `c`'s data file is present in either tier.
    pub(super) fn cycle_present(&self, c: u64) -> bool {
        std::iter::once(self.dir.clone())
            .chain(self.meta.archive_dir(&self.dir))
            .any(|d| d.join(data_file_name(c)).symlink_metadata().is_ok())
    }

    /// The current cycle: the metadata's `current` word, checked against the files. The
    /// word is raised only after its cycle's file exists, and retention never removes the
    /// current cycle, so a `current` whose file is missing while other cycles are present is
    /// damaged or hostile, whether it points past them or below the newest: it is put back
    /// to the newest cycle present (one CAS; honest writers only ever raise it to a present
    /// cycle). Following a lowered word instead would create a cycle whose predecessor is
    /// gone (appending fails) or a second cycle 0 (indices restart).
    pub(super) fn current_cycle(&self) -> u64 {
        let c = self.meta.current().load(Ordering::Acquire);
        if self.cycle_present(c) {
            return c;
        }
        // Nothing present at all: a new journal (or one emptied by hand); its next cycle is `c`.
        let Some(newest) = self.list_cycles().ok().and_then(|v| v.last().copied()) else { return c };
        // A creator that linked `c` meanwhile makes it the newest: the CAS then changes nothing.
        let _ = self.meta.current().compare_exchange(c, newest, Ordering::AcqRel, Ordering::Acquire);
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
        let hdr = CycleHeader {
            version: self.hdr().version,
            cycle: c,
            first_index,
            bucket_start,
            bucket_end,
            cycle_bytes: self.hdr().cycle_bytes,
        };
        create_cycle(&self.dir, self.hdr(), self.mode, &hdr, &self.trust)?;
        self.meta.current().fetch_max(c, Ordering::AcqRel);
        self.meta.event().notify();
        self.open_cycle(c)
    }

    pub(super) fn first_index(&self) -> Result<u64, OpenError> {
        self.first_start().map(|(first, _)| first)
    }

    /// The oldest retained entry, and the oldest cycle passed over because it cannot be
    /// read (with what is wrong), if any: an unreadable oldest cycle must not stop reading
    /// from the start, and must not be passed over silently.
    pub(super) fn first_start(&self) -> Result<(u64, Option<(u64, String)>), OpenError> {
        for _ in 0..16 {
            let f = self.meta.first().load(Ordering::Acquire);
            // Cycles below `first` are being deleted by retention. A `first` past every
            // cycle present is damaged or hostile (retention never removes the current
            // cycle): it must not hide the journal, so then every cycle present counts.
            let cycles = self.list_cycles().map_err(|e| OpenError::io(&self.dir, e))?;
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
        Err(OpenError::Io { path: self.dir.clone(), source: io::Error::other("cycles keep disappearing") })
    }

    pub(super) fn next_index(&self) -> Result<u64, OpenError> {
        let c = self.current_cycle();
        let cy = self.open_or_create_cycle(c, realtime_ns())?;
        let (_, n, _) = pos_parts(cy.pos().load(Ordering::Acquire));
        Ok(cy.hdr.first_index + n)
    }

    /// Cycle numbers present in the journal directory and the archive, ascending.
    pub(super) fn list_cycles(&self) -> io::Result<Vec<u64>> {
        list_cycles_in(&self.dir, self.meta.archive_dir(&self.dir).as_deref())
    }

    /// First global index whose entry has a timestamp `>= ts`.
    pub(super) fn search_time(&self, ts: u64) -> Result<u64, OpenError> {
        let max = self.hdr().max_entry;
        for c in self.list_cycles().map_err(|e| OpenError::io(&self.dir, e))? {
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
}

/// Cycle `c` of the journal in `dir` whose metadata header is `hdr`, opened with `A`'s
/// access from `dir` or, failing that, from the archive tier `archive`. Rebuilds nothing:
/// `NotFound` (for `dir`) if the cycle is complete in neither tier.
pub(super) fn open_cycle_in<A: Access>(
    dir: &Path,
    archive: Option<&Path>,
    c: u64,
    hdr: &MetaHeader,
    trust: &TrustPolicy,
) -> Result<CycleFiles<A>, OpenError> {
    open_cycle_tier(dir, archive, c, hdr, trust).map(|(cy, _)| cy)
}

/// [`open_cycle_in`], also saying which tier the cycle was opened from: `true` for the
/// archive.
pub(super) fn open_cycle_tier<A: Access>(
    dir: &Path,
    archive: Option<&Path>,
    c: u64,
    hdr: &MetaHeader,
    trust: &TrustPolicy,
) -> Result<(CycleFiles<A>, bool), OpenError> {
    match CycleFiles::open_as(dir, c, hdr, None, trust) {
        Err(OpenError::NotFound { path }) => {
            if let Some(a) = archive {
                match CycleFiles::open_as(a, c, hdr, None, trust) {
                    Err(OpenError::NotFound { .. }) => {}
                    r => return r.map(|cy| (cy, true)),
                }
            }
            Err(OpenError::NotFound { path })
        }
        r => r.map(|cy| (cy, false)),
    }
}

/// Cycle numbers present in the journal directory `dir` and the archive, ascending.
pub(super) fn list_cycles_in(dir: &Path, archive: Option<&Path>) -> io::Result<Vec<u64>> {
    let mut v: Vec<u64> = std::fs::read_dir(dir)?
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(parse_data_file_name))
        .collect();
    if let Some(a) = archive {
        if let Ok(rd) = std::fs::read_dir(a) {
            // Archived cycles may be zstd-compressed (`NNNNNNNNNNNN.sbjd.zst`).
            v.extend(rd.flatten().filter_map(|e| e.file_name().to_str().and_then(parse_archived_data_file_name)));
        }
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
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
    let off = (cy.index_slot(i)?.load(Ordering::Relaxed) as u64).checked_sub(1)?.checked_mul(UNIT as u64)?;
    let (_, _, u) = pos_parts(cy.pos().load(Ordering::Acquire));
    // The index slot and the position word are shared bytes: the header must lie inside the
    // claimed area, the cycle's capacity and the backed part of the file before it is read.
    let header_end = off.checked_add(ENTRY_HEADER as u64)?;
    if header_end > u.saturating_mul(UNIT as u64) || header_end > cy.cap_units * UNIT as u64 || !cy.backed(header_end) {
        return None;
    }
    let w = cy.entry_word(off).load(Ordering::Acquire);
    let (st, _, units) = entry_word_parts(w);
    if st != ST_COMMITTED || !units_fit(cy, off / UNIT as u64, units, u) {
        return None;
    }
    // SAFETY: committed (Acquire above pairs with the Release CAS in `commit`), so the
    // entry's bytes are final; `units_fit` checked they lie in the claimed, backed area.
    let bytes = unsafe { std::slice::from_raw_parts(cy.data_ptr(off), (units * UNIT as u64) as usize) };
    match read_entry(bytes, 0, i, max) {
        Ok((ScannedEntry::Committed { ts, .. }, ..)) => Some(ts),
        _ => None,
    }
}
