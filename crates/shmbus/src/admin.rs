//! Inspecting and cleaning segments, for tools (`shmbus ls`, `info`, `clean`).

use std::path::{Path, PathBuf};

use crate::domain::Domain;
use crate::error::OpenError;
use crate::participants::ParticipantInfo;
use crate::segment::{HeaderInfo, Segment};
use crate::sys::process_is_alive;

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
}

impl SegmentReport {
    /// Neither the creator nor any participant is alive: `shmbus clean` may remove it.
    pub fn is_stale(&self) -> bool {
        !self.creator_alive && self.live.is_empty()
    }
}

/// Validates the segment at `path` and reports its users.
pub fn inspect(path: &Path) -> Result<SegmentReport, OpenError> {
    let seg = Segment::open_path(path)?;
    let header = *seg.info();
    let (live, dead) = seg.participants().list().into_iter().partition(|p| process_is_alive(p.process));
    Ok(SegmentReport { path: path.to_owned(), creator_alive: process_is_alive(header.creator), header, live, dead })
}

/// A leftover temporary file of a creator that died mid-creation (`.<name>.<pid>.<nanos>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleTemp {
    /// The file.
    pub path: PathBuf,
    /// The pid in its name.
    pub pid: u32,
}

/// Temporary creation files in `domain` whose creating process is gone.
pub fn stale_temp_files(domain: &Domain) -> std::io::Result<Vec<StaleTemp>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(domain.dir()) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
        let Some(rest) = name.strip_prefix('.') else { continue };
        let mut parts = rest.rsplitn(3, '.');
        let (_nanos, pid) = (parts.next(), parts.next().and_then(|p| p.parse::<u32>().ok()));
        if let Some(pid) = pid {
            if !process_is_alive(crate::sys::ProcessId { pid, start_time: 0 }) {
                out.push(StaleTemp { path: entry.path(), pid });
            }
        }
    }
    Ok(out)
}
