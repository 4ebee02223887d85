//! Named durable readers: their table in the metadata file and its lock. What only reads
//! the table ([`readers_of`], [`reader_name`]) reads load-only words, on the read-write
//! metadata of an open journal and on the read-only one of `Journal::status` alike.
//!
//! **Holders in other PID namespaces.** The holder of reader `k` also holds an
//! open-file-description lock on byte `READERS + k` of the metadata file (see
//! [`crate::sys::lock`]), through the description its journal handle keeps open, taken
//! before its pid is stored and dropped before the pid is cleared; and it records its PID
//! namespace in word 6 of the entry (0: unknown, or no lock taken). A checker in the same
//! namespace (or of an entry with none) checks pid and start time; one in another namespace,
//! where the pid means nothing, asks whether the byte is held. So a live holder in a
//! container sharing the journal's directory is never taken for dead by the host, nor the
//! other way round.

use std::os::fd::AsFd;

use crate::error::OpenError;
use crate::name::validate_name;
use crate::sync::Ordering;
use crate::sys::fs::FlockOp;
use crate::sys::{lock, process_is_alive, Access, ProcessId};

use super::files::{self, MetaFile};
use super::format::{MAX_READERS, META_READERS_OFFSET, READERS_LOCK_FILE, READER_ENTRY_SIZE};
use super::shared::{realtime_ns, Inner};

/// A named reader in [`JournalStatus`](super::JournalStatus).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderInfo {
    /// Its name.
    pub name: String,
    /// Global index it resumes at.
    pub position: u64,
    /// The live process holding it, if any.
    pub holder_pid: Option<u32>,
}

impl Inner {
    // ---- named readers ----

    pub(super) fn lock_readers(&self) -> Result<std::fs::File, OpenError> {
        let p = self.dir.join(READERS_LOCK_FILE);
        let f = files::open_lock_file(&p, self.mode, &self.trust)?;
        crate::sys::fs::flock(&f, FlockOp::Exclusive).map_err(|e| OpenError::io(&p, e))?;
        Ok(f)
    }

    pub(super) fn find_reader(&self, name: &str) -> Option<usize> {
        (0..MAX_READERS).find(|&k| {
            self.meta.reader_word(k, 0).load(Ordering::Acquire) == 1
                && reader_name(&self.meta, k).as_deref() == Some(name)
        })
    }

    pub(super) fn check_holder(&self, k: usize) -> Result<(), OpenError> {
        match holder(&self.meta, k) {
            Some(pid) => Err(OpenError::Busy { path: self.dir.join(READERS_LOCK_FILE), holder_pid: pid }),
            None => Ok(()),
        }
    }

    pub(super) fn claim_reader(&self, name: &str) -> Result<usize, OpenError> {
        let _lock = self.lock_readers()?;
        let m = &self.meta;
        let k = match self.find_reader(name) {
            Some(k) => {
                self.check_holder(k)?;
                k
            }
            None => {
                let k =
                    (0..MAX_READERS).find(|&k| m.reader_word(k, 0).load(Ordering::Acquire) != 1).ok_or_else(|| {
                        OpenError::TooManyParticipants { path: self.dir.join(READERS_LOCK_FILE), max: MAX_READERS }
                    })?;
                let mut b = [0u8; 64];
                b[..name.len()].copy_from_slice(name.as_bytes());
                for w in 0..8 {
                    m.reader_word(k, 8 + w).store(
                        u64::from_le_bytes(b[w * 8..w * 8 + 8].try_into().unwrap_or_default()),
                        Ordering::Relaxed,
                    );
                }
                m.reader_word(k, 5).store(name.len() as u64, Ordering::Relaxed);
                let first = self.first_index()?;
                m.reader_word(k, 1).store(first, Ordering::Relaxed);
                // Pairs with the Acquire loads of the state word in `find_reader`/`readers`.
                m.reader_word(k, 0).store(1, Ordering::Release);
                k
            }
        };
        // The lock before the pid, so that the reader is never ours without it. Held through
        // another description: a live process holds the reader (one whose pid the check
        // above could not see, e.g. a forked child of a holder that died).
        let locked = match lock::try_lock_byte(m.file.as_fd(), lock::READERS + k as u64) {
            Ok(true) => true,
            Ok(false) => {
                let holder_pid = m.reader_word(k, 2).load(Ordering::Relaxed) as u32;
                return Err(OpenError::Busy { path: self.dir.join(READERS_LOCK_FILE), holder_pid });
            }
            // The file system refuses locks: no namespace recorded, the pid is all there is.
            Err(_) => false,
        };
        let me = ProcessId::current();
        m.reader_word(k, 6).store(if locked { u64::from(lock::pid_namespace()) } else { 0 }, Ordering::Relaxed);
        m.reader_word(k, 3).store(me.start_time, Ordering::Relaxed);
        // Pairs with the Acquire load of the pid in `holder`: the namespace and start time
        // are visible with it.
        m.reader_word(k, 2).store(me.pid as u64, Ordering::Release);
        Ok(k)
    }

    pub(super) fn release_reader(&self, k: usize) {
        let m = &self.meta;
        // Unlocked before the pid is cleared: a claimer in this process (which locks after it
        // sees the pid cleared) never has its fresh lock dropped by this release. A checker
        // elsewhere that sees the pid without the lock in between takes the reader, which
        // this process is letting go anyway.
        let _ = lock::unlock_byte(m.file.as_fd(), lock::READERS + k as u64);
        let me = ProcessId::current().pid as u64;
        // Only if it is still ours (a taker elsewhere may have stored its own pid).
        let _ = m.reader_word(k, 2).compare_exchange(me, 0, Ordering::Release, Ordering::Relaxed);
    }

    pub(super) fn store_reader_pos(&self, k: usize, pos: u64) {
        let m = &self.meta;
        // Pairs with the Acquire load in `Journal::reader`: one aligned 8-byte store, so the
        // persisted position is always a whole value, never torn, whenever the process dies.
        m.reader_word(k, 1).store(pos, Ordering::Release);
        m.reader_word(k, 4).store(realtime_ns(), Ordering::Relaxed);
        if m.hdr.durability == 1 {
            let _ = m.map.msync_range(META_READERS_OFFSET + k * READER_ENTRY_SIZE, READER_ENTRY_SIZE);
        }
    }
}

/// The name of named-reader entry `k` in `meta`, if it holds a valid one.
pub(super) fn reader_name<A: Access>(meta: &MetaFile<A>, k: usize) -> Option<String> {
    let len = meta.reader_view(k, 5).load(Ordering::Relaxed) as usize;
    if len == 0 || len > 64 {
        return None;
    }
    let mut b = [0u8; 64];
    for w in 0..8 {
        b[w * 8..w * 8 + 8].copy_from_slice(&meta.reader_view(k, 8 + w).load(Ordering::Relaxed).to_le_bytes());
    }
    let s = std::str::from_utf8(&b[..len]).ok()?;
    validate_name(s).ok()?;
    Some(s.to_owned())
}

/// Every named reader in `meta` and its persisted position.
pub(super) fn readers_of<A: Access>(meta: &MetaFile<A>) -> Vec<ReaderInfo> {
    (0..MAX_READERS)
        .filter(|&k| meta.reader_view(k, 0).load(Ordering::Acquire) == 1)
        .filter_map(|k| {
            let name = reader_name(meta, k)?;
            Some(ReaderInfo {
                name,
                position: meta.reader_view(k, 1).load(Ordering::Acquire),
                holder_pid: holder(meta, k),
            })
        })
        .collect()
}

/// The live holder of named reader `k` in `meta`, by its pid (as its own PID namespace
/// numbers it): checked by pid and start time in ours, by its lock byte in another (see the
/// [module docs](self)).
fn holder<A: Access>(meta: &MetaFile<A>, k: usize) -> Option<u32> {
    // Pairs with the Release store of the pid in `claim_reader`.
    let pid = meta.reader_view(k, 2).load(Ordering::Acquire);
    if pid == 0 {
        return None;
    }
    let process = ProcessId { pid: pid as u32, start_time: meta.reader_view(k, 3).load(Ordering::Relaxed) };
    // Any value a peer wrote: a wrong one only sends the check to the lock, which no dead
    // process holds (see `sys::lock`).
    let pidns = meta.reader_view(k, 6).load(Ordering::Relaxed) as u32;
    lock::owner_alive(meta.file.as_fd(), lock::READERS + k as u64, pidns, || process_is_alive(process))
        .then_some(pid as u32)
}
