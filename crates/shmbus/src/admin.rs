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

    /// Live participants in the role named `role` (see [`role_name`]).
    #[cfg(not(loom))]
    pub fn live_in_role(&self, role: &str) -> usize {
        self.live.iter().filter(|p| role_name(self.header.kind, p.role) == Some(role)).count()
    }
}

/// The name of participant role number `role` in a channel of `kind`: "publisher" or
/// "subscriber" (topic), "producer" or "consumer" (queue), "writer" or "reader" (stream),
/// "dispatcher" or "worker" (pool), "appender" (journal); `None` for a number the kind does
/// not use (a corrupt entry, or a newer shmbus).
#[cfg(not(loom))]
pub fn role_name(kind: crate::segment::Kind, role: u32) -> Option<&'static str> {
    use crate::segment::Kind;
    use crate::{journal, pool, queue, stream, topic};
    Some(match (kind, role) {
        (Kind::Topic, topic::ROLE_PUBLISHER) => "publisher",
        (Kind::Topic, topic::ROLE_SUBSCRIBER) => "subscriber",
        (Kind::Queue, queue::ROLE_PRODUCER) => "producer",
        (Kind::Queue, queue::ROLE_CONSUMER) => "consumer",
        (Kind::Stream, stream::ROLE_WRITER) => "writer",
        (Kind::Stream, stream::ROLE_READER) => "reader",
        (Kind::Pool, pool::ROLE_DISPATCHER) => "dispatcher",
        (Kind::Pool, pool::ROLE_WORKER) => "worker",
        (Kind::Journal, journal::ROLE_APPENDER) => "appender",
        _ => return None,
    })
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::role_name;
    use crate::segment::Kind;

    #[test]
    fn every_kind_names_its_roles_and_nothing_else() {
        let names: Vec<_> = [Kind::Topic, Kind::Queue, Kind::Stream, Kind::Pool, Kind::Journal]
            .into_iter()
            .map(|k| (role_name(k, 1), role_name(k, 2), role_name(k, 0), role_name(k, 99)))
            .collect();
        assert_eq!(
            names,
            [
                (Some("publisher"), Some("subscriber"), None, None),
                (Some("producer"), Some("consumer"), None, None),
                (Some("writer"), Some("reader"), None, None),
                (Some("dispatcher"), Some("worker"), None, None),
                (Some("appender"), None, None, None),
            ]
        );
    }
}
