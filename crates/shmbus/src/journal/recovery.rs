//! Recovery: reclaiming dead appenders' claims, and the open-time scan of the current
//! cycle after an unclean stop.

use std::path::Path;

use crate::error::OpenError;
use crate::sync::Ordering;
use crate::sys::{process_is_alive, ProcessId};

use super::cycles::{abandon_at, units_fit};
use super::format::{
    data_file_name, entry_word, find_next_entry, index_file_name, pos_parts, pos_word, read_entry, ScanStop,
    ScannedEntry, CYCLE_HEADER_PAGE, ST_ABANDONED, UNIT,
};
use super::shared::{realtime_ns, Inner, BUSY};

/// What open-time recovery found in a cycle after an unclean stop.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// The cycle scanned.
    pub cycle: u64,
    /// The global index of the cycle's first entry.
    pub first_index: u64,
    /// Entries kept (committed or abandoned) in the cycle.
    pub kept_entries: u64,
    /// Claimed entries dropped (never committed, or corrupt, or cut off).
    pub dropped_entries: u64,
    /// Bytes of data dropped (zeroed).
    pub dropped_bytes: u64,
    /// Entries whose writer had died, turned into abandoned holes.
    pub abandoned_holes: u64,
    /// Damaged ranges found between sound entries (zeroed or overwritten bytes). They are
    /// left in place, not cut: readers report each as [`JournalRecvError::Damaged`](super::JournalRecvError::Damaged) and read on.
    pub damaged_ranges: u64,
    /// Why the scan stopped.
    pub reason: ScanStop,
    /// The cycle's data file had no readable header: it was moved aside under this name (in
    /// the journal directory) and the cycle started again empty. Its entries are lost; how
    /// many is not known.
    pub moved_aside: Option<String>,
}

impl RecoveryReport {
    /// What this recovery lost, if anything: the entries it cut off (or the whole cycle it
    /// moved aside), with `at_ns` the time of this call. Recorded in the journal's recovery
    /// log when the journal is opened, so every later opener sees it too
    /// ([`Journal::lost_entries`](super::Journal::lost_entries)).
    pub fn lost(&self) -> Option<LostEntries> {
        (self.dropped_entries > 0 || self.moved_aside.is_some()).then(|| LostEntries {
            cycle: self.cycle,
            from: self.first_index + self.kept_entries,
            to: self.first_index + self.kept_entries + self.dropped_entries,
            bytes: self.dropped_bytes,
            at_ns: realtime_ns(),
            moved_aside: self.moved_aside.clone(),
        })
    }
}

/// The name of the journal's recovery log, in the journal directory: one line per loss
/// recovery made ([`LostEntries`]), kept while the cycle it is in exists.
pub const RECOVERY_LOG: &str = "recovery.log";

/// The most bytes the recovery log may hold (it keeps at most [`MAX_LOG_RECORDS`] lines of
/// well under 200 bytes); a larger file is refused as damaged, never read in part.
const MAX_LOG_LEN: u64 = 64 << 10;
/// The most records the recovery log keeps (the newest).
const MAX_LOG_RECORDS: usize = 64;

/// Entries that open-time recovery removed from a cycle (a data file cut mid-entry, junk
/// after the last sound entry, a current cycle whose header was gone): what every tool
/// that opens the journal reports, as it reports damaged ranges.
///
/// Their indices are given again to the entries appended after the recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LostEntries {
    /// The cycle they were in.
    pub cycle: u64,
    /// The first global index lost.
    pub from: u64,
    /// One past the last global index lost (`from == to`: a cycle moved aside, count unknown).
    pub to: u64,
    /// Data bytes cut off (0 when unknown).
    pub bytes: u64,
    /// When recovery removed them (CLOCK_REALTIME ns).
    pub at_ns: u64,
    /// The name the cycle's unreadable data file was moved aside to, if it was.
    pub moved_aside: Option<String>,
}

impl LostEntries {
    /// How many entries were lost (0 when unknown: a cycle moved aside).
    pub fn count(&self) -> u64 {
        self.to - self.from
    }

    /// One line of the recovery log.
    fn to_line(&self) -> String {
        let aside = self.moved_aside.as_deref().unwrap_or("-");
        format!("1 {} {} {} {} {} {aside}\n", self.cycle, self.from, self.to, self.bytes, self.at_ns)
    }

    /// A line of the recovery log, or `None` if it is not one this version writes.
    fn parse_line(line: &str) -> Option<LostEntries> {
        let w: Vec<&str> = line.split(' ').collect();
        let [version, cycle, from, to, bytes, at_ns, aside] = w[..] else { return None };
        let n = |s: &str| s.parse::<u64>().ok();
        let valid_name = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        let e = LostEntries {
            cycle: n(cycle)?,
            from: n(from)?,
            to: n(to)?,
            bytes: n(bytes)?,
            at_ns: n(at_ns)?,
            moved_aside: match aside {
                "-" => None,
                a if valid_name(a) => Some(a.to_owned()),
                _ => return None,
            },
        };
        (version == "1" && e.from <= e.to).then_some(e)
    }
}

impl std::fmt::Display for LostEntries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.moved_aside {
            Some(aside) => write!(
                f,
                "journal cycle {} had no readable header and recovery moved its data file aside as {aside}: its \
                 entries from index {} on are lost (how many is not known); restore the cycle from a copy if you \
                 have one",
                self.cycle, self.from
            ),
            None => write!(
                f,
                "journal entries {}..{} of cycle {} were lost ({} entr{}, {} bytes cut off by recovery after an \
                 unclean stop or a damaged file); later entries were given their indices again",
                self.from,
                self.to,
                self.cycle,
                self.count(),
                if self.count() == 1 { "y" } else { "ies" },
                self.bytes
            ),
        }
    }
}

/// Reads the recovery log of the journal in `dir`: its records whose cycle is in `cycles`
/// (a cycle removed since took its losses with it). No log: none. A log that is not a
/// regular file, belongs to a user `trust` refuses, is larger than its limit or holds a line
/// this version does not write is an error saying so (never a partial read).
pub(crate) fn read_recovery_log(
    dir: &Path,
    trust: &crate::domain::TrustPolicy,
    cycles: &[u64],
) -> Result<Vec<LostEntries>, OpenError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(RECOVERY_LOG);
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(crate::sys::fs::NOFOLLOW_NONBLOCK_CLOEXEC)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(OpenError::io(&path, e)),
    };
    super::files::require_regular(&f).map_err(|e| OpenError::io(&path, e))?;
    super::files::check_owner(&path, &f, trust)?;
    let mut text = String::new();
    (&f).take(MAX_LOG_LEN + 1).read_to_string(&mut text).map_err(|e| OpenError::io(&path, e))?;
    if text.len() as u64 > MAX_LOG_LEN {
        return Err(OpenError::corrupt(
            &path,
            format!("larger than {MAX_LOG_LEN} bytes, the most a recovery log holds; it was not read (move it aside)"),
        ));
    }
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let e = LostEntries::parse_line(line).ok_or_else(|| {
            OpenError::corrupt(&path, format!("line {} is not a recovery record; move the file aside", i + 1))
        })?;
        if cycles.contains(&e.cycle) {
            out.push(e);
        }
    }
    Ok(out)
}

impl Inner {
    /// Reclaims participant entries of dead processes, abandoning what they had claimed.
    pub(super) fn reclaim(&self) -> usize {
        let table = self.meta.participants();
        table.reclaim_dead(ProcessId::current(), process_is_alive, |index, entry| {
            let a0 = entry.aux[0].load(Ordering::Acquire);
            if a0 & BUSY != 0 {
                let w = entry.aux[1].load(Ordering::Relaxed);
                let units = entry.aux[2].load(Ordering::Relaxed);
                self.abandon_dead_claim(index, a0 & !BUSY, w, units);
            }
            entry.aux[0].store(0, Ordering::Release);
        })
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
                let cy = self.open_or_create_cycle(c, now)?;
                return Ok(vec![RecoveryReport {
                    cycle: c,
                    first_index: cy.hdr.first_index,
                    kept_entries: 0,
                    dropped_entries: 0,
                    dropped_bytes: 0,
                    abandoned_holes: 0,
                    damaged_ranges: 0,
                    reason: ScanStop::BadHeader,
                    moved_aside: aside.file_name().and_then(|n| n.to_str()).map(str::to_owned),
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
        let data = unsafe { std::slice::from_raw_parts(cy.data_ptr(0), claimed as usize) };
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
            let all = unsafe { std::slice::from_raw_parts(cy.data_ptr(0), avail as usize) };
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
                    first_index: cy.hdr.first_index,
                    kept_entries: n,
                    dropped_entries: 0,
                    dropped_bytes: 0,
                    abandoned_holes: holes,
                    damaged_ranges: damaged,
                    reason,
                    moved_aside: None,
                }]
            } else {
                Vec::new()
            });
        }
        // Cut: zero the junk (within the backed file) so it is never read as a header.
        let junk_end = (u * UNIT as u64).min(avail);
        if junk_end > off {
            // SAFETY: `off..junk_end` lies inside the backed data area; we are alone.
            unsafe { std::ptr::write_bytes(cy.data_ptr_mut(off), 0, (junk_end - off) as usize) };
        }
        for k in i..n {
            match cy.index_slot(k) {
                Some(s) => s.store(0, Ordering::Relaxed),
                None => break,
            }
        }
        cy.pos().store(pos_word(false, i, off / UNIT as u64), Ordering::Release);
        let _ = sealed;
        let _ = crate::sys::fs::fdatasync(&cy.data_file);
        Ok(vec![RecoveryReport {
            cycle: c,
            first_index: cy.hdr.first_index,
            kept_entries: i,
            dropped_entries: n - i,
            dropped_bytes: (u * UNIT as u64).saturating_sub(off),
            abandoned_holes: holes,
            damaged_ranges: damaged,
            reason,
            moved_aside: None,
        }])
    }

    /// Adds what `reports` lost to the recovery log (keeping the newest records of cycles
    /// that still exist), replacing it atomically. Called by recovery, alone (exclusive lock).
    pub(super) fn record_losses(&self, reports: &[RecoveryReport]) -> std::io::Result<()> {
        let lost: Vec<LostEntries> = reports.iter().filter_map(RecoveryReport::lost).collect();
        if lost.is_empty() {
            return Ok(());
        }
        let cycles = self.list_cycles()?;
        // An unreadable old log is replaced: the losses it held are no longer known.
        let mut all = read_recovery_log(&self.dir, &self.trust, &cycles).unwrap_or_default();
        all.extend(lost);
        let keep = all.len().saturating_sub(MAX_LOG_RECORDS);
        let text: String = all[keep..].iter().map(LostEntries::to_line).collect();
        let tmp = self.dir.join(format!(".{RECOVERY_LOG}.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        super::files::create_file_atomically(&tmp, self.mode, text.len() as u64, text.as_bytes())?;
        let _ = crate::sys::fs::fdatasync(&std::fs::File::open(&tmp)?);
        std::fs::rename(&tmp, self.dir.join(RECOVERY_LOG)).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }
}
