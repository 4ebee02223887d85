//! Journals across hosts: a source bridge serves a journal, a mirror bridge appends its
//! entries to a local journal.
//!
//! **Serving** (`--journal NAME=DIR`): every entry appended after the bridge started is put
//! on `JPREFIX/@journal/NAME` (`JPREFIX`: `--key-prefix`, else `shmbus`) with its index in the attachment, and a queryable on the same
//! key answers `from=INDEX;max=N` with up to `N` entries (and at most 8 MiB) from `INDEX`
//! on, one reply per entry, in order.
//!
//! **Mirroring** (`--mirror NAME=DIR`): the mirror asks for the entries from the next index
//! it lacks until the source has no more, then appends the live entries as they come, and
//! asks again whenever one arrives out of turn (it missed some) or nothing came for a
//! second. So the mirror holds the source's entries in the source's order, and resumes where
//! it stopped after either side restarts or the link drops.
//!
//! **Never twice.** The mirror owns its journal (its only appender). Before it commits an
//! entry it writes, to `DIR/bridge-mirror.state`, the source index it is copying and the
//! least index the copy can have in the mirror. After a restart it looks for the copy there
//! in the journal: committed, the copy is done and the mirror goes on after it; not
//! committed (the process died before), the entry is copied again. "Committed" is any
//! entry at that index or after it: the mirror is the journal's only appender, so a later
//! one can only be the same copy, moved on by an abandoned reservation. The state file is
//! one `pwrite` per entry and survives the process being killed at any instant; it has no
//! `fsync` (the journal's own durability decides what a power loss keeps).
//!
//! **One journal.** Entries carry their journal's identity ([`Journal::id`]); the state
//! file keeps the one the replica copies, and entries of any other (the source removed and
//! made again under the same name) are refused and counted (`journal_foreign`). A refused
//! source is asked again, one entry at a time, after 1 s, then after waits that double up
//! to [`REFUSED_WAIT_MAX`]; what it sends live meanwhile is dropped.
//!
//! **Encrypted journals** (`--key-file`, [`Options::keys`](crate::Options::keys)): the
//! serving bridge opens the entries with the keys, and the mirror seals each copy with the
//! current key (the mirror is a journal of its own: a sealed entry is bound to its journal
//! and position, so ciphertext cannot be copied as it is). Between the bridges the entries
//! travel as plaintext inside Zenoh: use Zenoh's TLS on that link. Without keys, a served
//! journal's sealed entries are skipped and counted (`journal_unreadable`).

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use shmbus::journal::EntryCipher;
use shmbus::{Journal, JournalConfig, JournalRecvTimeoutError, JournalTryRecvError};
use zenoh::qos::CongestionControl;
use zenoh::query::{ConsolidationMode, Query};
use zenoh::sample::Locality;
use zenoh::Wait;

use crate::stats::bump;
use crate::wire::{self, Attachment, EntryMeta};
use crate::{spawn, zerr, BridgeError, Shared};

/// The most entries one query reply carries.
pub const BATCH_ENTRIES: u64 = 256;

/// The longest a mirror waits before asking a refused source again.
pub const REFUSED_WAIT_MAX: Duration = Duration::from_secs(60);
/// The most payload bytes one query reply carries (at least one entry).
pub const BATCH_BYTES: usize = 8 << 20;
/// The mirror state file's name, in the mirror's journal directory.
pub const STATE_FILE: &str = "bridge-mirror.state";

fn key(shared: &Shared, name: &str) -> String {
    format!("{}/@journal/{name}", shared.options.journal_prefix())
}

/// Serves journal `dir` as `name`.
pub(crate) fn serve(
    shared: &Arc<Shared>,
    name: &str,
    dir: &Path,
    threads: &mut Vec<JoinHandle<()>>,
    zenoh: &mut Vec<Box<dyn std::any::Any + Send>>,
) -> Result<(), BridgeError> {
    let journal = Journal::open(dir)?;
    let key = key(shared, name);
    let (sh, j, k) = (shared.clone(), journal.clone(), key.clone());
    let queryable =
        shared.session.declare_queryable(&key).callback(move |q| answer(&sh, &j, &k, &q)).wait().map_err(zerr)?;
    zenoh.push(Box::new(queryable));
    let zpub = shared
        .session
        .declare_publisher(key.clone())
        .congestion_control(CongestionControl::Block)
        .express(shared.options.express)
        .allowed_destination(Locality::Remote)
        .wait()
        .map_err(zerr)?;
    let mut tailer = journal.tailer_at_end()?;
    tailer.set_cipher(shared.cipher.clone());
    let id = journal.id();
    let sh = shared.clone();
    let name = name.to_owned();
    threads.push(spawn(format!("bridge-journal-{name}"), move || {
        while !sh.stopping() {
            let e = match tailer.recv_timeout(Duration::from_millis(100)) {
                Ok(e) => e,
                Err(JournalRecvTimeoutError::Timeout) => continue,
                Err(e) => {
                    bump(&sh.counters.journal_unreadable);
                    sh.log.warn(format!("journal {name}"), || format!("journal {name}: {e}; entry not served"));
                    continue;
                }
            };
            let meta = EntryMeta { origin: sh.id, index: e.index(), ts_ns: e.ts_ns(), journal: id };
            match zpub.put(e.into_data()).attachment(meta.encode().to_vec()).wait() {
                Ok(()) => bump(&sh.counters.journal_served),
                Err(err) => {
                    bump(&sh.counters.send_failed);
                    sh.log.warn(format!("journal put {name}"), || format!("journal {name}: zenoh put: {err}"));
                }
            }
        }
    }));
    Ok(())
}

/// Answers one query for entries.
fn answer(sh: &Shared, journal: &Journal, key: &str, q: &Query) {
    let params = q.parameters();
    let from = params.get("from").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let max = params.get("max").and_then(|v| v.parse::<u64>().ok()).unwrap_or(BATCH_ENTRIES).clamp(1, BATCH_ENTRIES);
    let mut tailer = match journal.tailer_at(from) {
        Ok(t) => t,
        Err(e) => return sh.log.warn(format!("query {key}"), || format!("{key}: cannot read: {e}")),
    };
    tailer.set_cipher(sh.cipher.clone());
    let id = journal.id();
    let (mut n, mut bytes) = (0, 0);
    while n < max && bytes < BATCH_BYTES {
        let e = match tailer.try_recv() {
            Ok(e) => e,
            Err(JournalTryRecvError::Empty) => break,
            Err(e) => {
                bump(&sh.counters.journal_unreadable);
                sh.log.warn(format!("query read {key}"), || format!("{key}: {e}; entry not served"));
                continue;
            }
        };
        let meta = EntryMeta { origin: sh.id, index: e.index(), ts_ns: e.ts_ns(), journal: id };
        bytes += e.len();
        n += 1;
        if let Err(err) = q.reply(key, e.into_data()).attachment(meta.encode().to_vec()).wait() {
            bump(&sh.counters.send_failed);
            return sh.log.warn(format!("reply {key}"), || format!("{key}: reply: {err}"));
        }
        bump(&sh.counters.journal_served);
    }
}

/// The mirror's state file: the entry being copied (see the module docs).
#[derive(Debug)]
pub struct MirrorState {
    file: File,
    path: PathBuf,
    /// The identity of the source journal copied ([`Journal::id`]); `None` until the first
    /// entry arrives.
    source: Option<[u8; 16]>,
}

const STATE_MAGIC: [u8; 8] = *b"SBMIRR01";
/// Magic, source index, mirror index, 8 zero bytes, name (64), source journal id (16).
const STATE_LEN: usize = 112;
const NONE: u64 = u64::MAX;

impl MirrorState {
    /// Opens (or starts) the state of mirror `name` in `journal`'s directory and works out
    /// the next source index to copy. A directory whose journal already holds entries but
    /// has no state file, or whose state names another source, is refused. `cipher` opens
    /// the mirror's own entries (to tell whether the last copy was committed).
    pub fn open(
        journal: &Journal,
        name: &str,
        cipher: Option<Arc<dyn EntryCipher>>,
    ) -> Result<(MirrorState, u64), BridgeError> {
        let dir = journal.dir();
        let path = dir.join(STATE_FILE);
        let meta = std::fs::symlink_metadata(&path);
        if meta.as_ref().is_ok_and(|m| !m.file_type().is_file()) {
            return Err(BridgeError::Invalid(format!("{}: not a regular file", path.display())));
        }
        if meta.is_err() {
            let status = Journal::status(dir)?;
            if status.next_index > status.first_index {
                return Err(BridgeError::Invalid(format!(
                    "{} already holds entries that are not a mirror of {name:?} (no {STATE_FILE}); mirror into a new directory",
                    dir.display()
                )));
            }
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&path)
            .map_err(|e| BridgeError::Invalid(format!("{}: {e}", path.display())))?;
        let mut state = MirrorState { file, path, source: None };
        // One byte more than a state file holds, to tell a longer file.
        let mut b = [0u8; STATE_LEN + 1];
        let n = state.file.read_at(&mut b, 0).map_err(|e| state.io(e))?;
        if n == 0 {
            state.write(name, 0, NONE)?;
            return Ok((state, 0));
        }
        if n != STATE_LEN || b[..8] != STATE_MAGIC {
            return Err(BridgeError::Invalid(format!("{}: not a mirror state file", state.path.display())));
        }
        let stored = &b[32..32 + 64];
        let stored = &stored[..stored.iter().position(|&c| c == 0).unwrap_or(64)];
        if stored != name.as_bytes() {
            return Err(BridgeError::Invalid(format!(
                "{}: this directory mirrors {:?}, not {name:?}",
                state.path.display(),
                String::from_utf8_lossy(stored)
            )));
        }
        let mut id = [0u8; 16];
        id.copy_from_slice(&b[96..112]);
        state.source = (id != [0; 16]).then_some(id);
        let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
        let (src, mirror_index) = (word(8), word(16));
        if mirror_index == NONE {
            return Ok((state, src));
        }
        // Was the last copy committed? Any entry at its index or after is that copy (the
        // mirror is the only appender; an abandoned reservation moves an entry on), even one
        // that cannot be opened here.
        let mut tailer = journal.tailer_at(mirror_index)?;
        tailer.set_cipher(cipher);
        let committed = match tailer.recv_timeout(Duration::from_secs(1)) {
            Ok(e) => e.index() >= mirror_index,
            Err(
                JournalRecvTimeoutError::Encrypted { index, .. }
                | JournalRecvTimeoutError::UnknownKey { index, .. }
                | JournalRecvTimeoutError::Unauthenticated { index },
            ) => index >= mirror_index,
            Err(_) => false,
        };
        let next = if committed { src.saturating_add(1) } else { src };
        state.write(name, next, NONE)?;
        Ok((state, next))
    }

    fn io(&self, e: std::io::Error) -> BridgeError {
        BridgeError::Invalid(format!("{}: {e}", self.path.display()))
    }

    /// Records that source entry `src` is being copied as a mirror entry at `mirror_index` or
    /// after it (`NONE`: nothing is; `src` is then the next to copy).
    fn write(&self, name: &str, src: u64, mirror_index: u64) -> Result<(), BridgeError> {
        let mut b = [0u8; STATE_LEN];
        b[..8].copy_from_slice(&STATE_MAGIC);
        b[8..16].copy_from_slice(&src.to_le_bytes());
        b[16..24].copy_from_slice(&mirror_index.to_le_bytes());
        let n = name.len().min(64);
        b[32..32 + n].copy_from_slice(&name.as_bytes()[..n]);
        b[96..112].copy_from_slice(&self.source.unwrap_or_default());
        self.file.write_all_at(&b, 0).map_err(|e| self.io(e))
    }
}

/// Mirrors remote journal `name` into `dir`.
pub(crate) fn mirror(
    shared: &Arc<Shared>,
    name: &str,
    dir: &Path,
    threads: &mut Vec<JoinHandle<()>>,
) -> Result<(), BridgeError> {
    let journal = Journal::create_or_open(dir, &JournalConfig::default())?;
    let (state, next) = MirrorState::open(&journal, name, shared.cipher.clone())?;
    let mut appender = journal.appender()?;
    appender.set_cipher(shared.cipher.clone());
    // The index the next copy will have: after every entry there is (see the module docs).
    let next_copy = Journal::status(dir)?.next_index;
    let key = key(shared, name);
    // Live entries reach the mirror thread through a bounded channel; when it is full they
    // are dropped here and fetched by the next query.
    let (tx, rx) = sync_channel::<(EntryMeta, Vec<u8>)>(4096);
    let sub = shared
        .session
        .declare_subscriber(&key)
        .allowed_origin(Locality::Remote)
        .callback(move |s| live(&tx, &s))
        .wait()
        .map_err(zerr)?;
    let sh = shared.clone();
    let name = name.to_owned();
    threads.push(spawn(format!("bridge-mirror-{name}"), move || {
        let _sub = sub;
        let mut m = Mirror { sh: &sh, name: &name, key: &key, state, appender, next, next_copy, refused: None };
        m.run(&rx);
    }));
    Ok(())
}

fn live(tx: &SyncSender<(EntryMeta, Vec<u8>)>, s: &zenoh::sample::Sample) {
    if let Some(Ok(Attachment::Entry(e))) = s.attachment().map(|a| wire::decode(&a.to_bytes())) {
        let _ = tx.try_send((e, s.payload().to_bytes().into_owned()));
    }
}

struct Mirror<'a> {
    sh: &'a Shared,
    name: &'a str,
    key: &'a str,
    state: MirrorState,
    appender: shmbus::Appender,
    /// The next source index to copy.
    next: u64,
    /// The least index the next copy can have in the mirror.
    next_copy: u64,
    /// The source serves another journal: how long to wait before asking it again.
    refused: Option<Duration>,
}

impl Mirror<'_> {
    fn run(&mut self, rx: &std::sync::mpsc::Receiver<(EntryMeta, Vec<u8>)>) {
        while !self.sh.stopping() {
            // Catch up: ask until the source has nothing more.
            while !self.sh.stopping() && self.fetch() > 0 {}
            if let Some(wait) = self.refused {
                if !self.pause(rx, wait) {
                    return;
                }
                continue;
            }
            // Then the live entries, until one comes out of turn or a second passes quietly.
            loop {
                match rx.recv_timeout(Duration::from_secs(1)) {
                    Ok((e, data)) if e.index == self.next => {
                        if !self.append(&e, &data) {
                            break;
                        }
                    }
                    Ok((e, _)) if e.index < self.next => {}
                    Ok(_) | Err(RecvTimeoutError::Timeout) => break,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
                if self.sh.stopping() {
                    return;
                }
            }
        }
    }

    /// Waits `wait` (a refused source), dropping the live entries meanwhile; false if the
    /// bridge stops or the live entries' channel is gone.
    fn pause(&self, rx: &std::sync::mpsc::Receiver<(EntryMeta, Vec<u8>)>, wait: Duration) -> bool {
        let end = std::time::Instant::now() + wait;
        while !self.sh.stopping() {
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return true;
            }
            if let Err(RecvTimeoutError::Disconnected) = rx.recv_timeout(left.min(Duration::from_millis(100))) {
                return false;
            }
        }
        false
    }

    /// One query from `next` (of one entry while the source is refused); appends what it
    /// brings, returns how many.
    fn fetch(&mut self) -> usize {
        let max = if self.refused.is_some() { 1 } else { BATCH_ENTRIES };
        let sel = format!("{}?from={};max={max}", self.key, self.next);
        // Every reply has the same key: no consolidation, or Zenoh would keep only one.
        let replies = match self
            .sh
            .session
            .get(&sel)
            .consolidation(ConsolidationMode::None)
            .timeout(Duration::from_secs(5))
            .wait()
        {
            Ok(r) => r,
            Err(e) => {
                self.sh.log.warn(format!("get {}", self.key), || format!("{}: query: {e}", self.key));
                return 0;
            }
        };
        let mut got: Vec<(EntryMeta, Vec<u8>)> = Vec::new();
        while let Ok(reply) = replies.recv() {
            let Ok(s) = reply.result() else { continue };
            match s.attachment().map(|a| wire::decode(&a.to_bytes())) {
                Some(Ok(Attachment::Entry(e))) if e.origin != self.sh.id => {
                    got.push((e, s.payload().to_bytes().into_owned()))
                }
                _ => {
                    bump(&self.sh.counters.bad_attachment);
                    self.sh.log.warn(format!("reply {}", self.key), || {
                        format!("{}: a reply without a valid entry attachment; dropped", self.key)
                    });
                }
            }
        }
        got.sort_by_key(|(e, _)| e.index);
        let mut n = 0;
        for (e, data) in got {
            if e.index < self.next {
                continue;
            }
            if !self.append(&e, &data) {
                break;
            }
            n += 1;
        }
        n
    }

    /// Copies source entry `index`; false if it could not (reported; tried again later).
    fn append(&mut self, e: &EntryMeta, data: &[u8]) -> bool {
        let (sh, name, index) = (self.sh, self.name, e.index);
        match self.state.source {
            // The first entry names the journal this replica copies (kept with the state below).
            None => self.state.source = Some(e.journal),
            Some(id) if id != e.journal => {
                bump(&sh.counters.journal_foreign);
                self.refused = Some(self.refused.map_or(Duration::from_secs(1), |w| (w * 2).min(REFUSED_WAIT_MAX)));
                sh.log.warn(format!("foreign {name}"), || {
                    format!(
                        "mirror {name}: the source serves another journal than the one this replica copies \
                         (was it removed and made again?); nothing more is appended. Mirror it into a new directory"
                    )
                });
                return false;
            }
            Some(_) => {}
        }
        if let Err(e) = self.state.write(name, index, self.next_copy) {
            sh.log.warn(format!("state {name}"), || format!("mirror {name}: {e}"));
            return false;
        }
        // A copy (sealed when the bridge has keys), committed at `next_copy` or after.
        match self.appender.send(data) {
            Ok(at) => self.next_copy = at + 1,
            Err(e) => {
                bump(&sh.counters.send_failed);
                sh.log.warn(format!("append {name}"), || format!("mirror {name}: {e}"));
                return false;
            }
        }
        self.next = index + 1;
        self.refused = None;
        bump(&sh.counters.journal_mirrored);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh journal in a directory of its own, removed at the end.
    struct Dir(PathBuf);
    impl Dir {
        fn new(tag: &str) -> (Dir, Journal) {
            let path = std::env::temp_dir().join(format!("shmbus-mirror-state-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir(&path).unwrap();
            let journal = Journal::create_or_open(&path, &JournalConfig::default()).unwrap();
            (Dir(path), journal)
        }
        fn state(&self) -> PathBuf {
            self.0.join(STATE_FILE)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn refusal(journal: &Journal, name: &str) -> String {
        match MirrorState::open(journal, name, None) {
            Err(BridgeError::Invalid(why)) => why,
            other => panic!("{name}: expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_state_file_is_made_kept_and_resumed() {
        let (d, journal) = Dir::new("resume");
        let (state, next) = MirrorState::open(&journal, "j", None).unwrap();
        assert_eq!(next, 0);
        state.write("j", 7, NONE).unwrap();
        drop(state);
        assert_eq!(std::fs::metadata(d.state()).unwrap().len(), STATE_LEN as u64);
        assert_eq!(MirrorState::open(&journal, "j", None).unwrap().1, 7);
    }

    #[test]
    fn a_state_file_that_is_not_this_mirrors_is_refused() {
        let (d, journal) = Dir::new("refuse");
        drop(MirrorState::open(&journal, "j", None).unwrap());
        let good = std::fs::read(d.state()).unwrap();
        assert!(refusal(&journal, "other").contains("mirrors \"j\""));
        // Cut short (the layout before the source's identity was kept is one of these),
        // grown, or with another magic.
        for bad in [good[..96].to_vec(), [&good[..], &[0; 8]].concat(), [b"SBMIRR00", &good[8..]].concat()] {
            std::fs::write(d.state(), &bad).unwrap();
            assert!(refusal(&journal, "j").contains("not a mirror state file"), "{} bytes", bad.len());
        }
        // A symlink in its place is not followed, whatever it points at.
        std::fs::remove_file(d.state()).unwrap();
        let target = d.0.join("elsewhere");
        std::fs::write(&target, &good).unwrap();
        std::os::unix::fs::symlink(&target, d.state()).unwrap();
        assert!(refusal(&journal, "j").contains("not a regular file"));
    }
}
