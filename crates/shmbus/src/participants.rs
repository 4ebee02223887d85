//! The participant table: who is using a segment, and reclaiming what the dead held.
//!
//! Every endpoint (publisher, subscriber, producer, worker, …) claims one 64-byte entry.
//! The entry's first word packs `pid << 8 | state`, so an entry is claimed *with* its owner's
//! pid in one compare-and-swap: there is no instant at which an entry is taken but its owner
//! unknown. The owner then stores its start time and becomes `ACTIVE`.
//!
//! An entry whose owner is dead (pid gone, start time changed, or zombie) is reclaimed by
//! whoever notices first: it CASes the state to `RECLAIMING` (with its own pid), runs the
//! kind's cleanup (which must be idempotent: a reclaimer may itself die and be redone), and
//! frees the entry. Kinds keep their per-endpoint recovery state in `aux`.
//!
//! The table comes in two types over the same entries ([`Entry`] is generic over its
//! words): [`ParticipantTable`], the read-write one endpoints register in and reclaim
//! through, and [`ParticipantView`], whose words are load-only ([`Ro`]): all a read-only
//! segment gives (`Segment::participant_view`), for status and tools. What only loads
//! (`owner`, `state`, `list`, `raw_word`) is written once, for both.
//!
//! # Liveness across PID namespaces
//!
//! A pid means something only inside its PID namespace: containers that share `/dev/shm`
//! (`--ipc=host`) see each other's entries, but not each other's processes. So while an
//! entry is in use, its owner also holds an open-file-description lock on byte
//! `LOCK_BASE + index` of the segment file (see [`crate::sys::lock`]), taken before the
//! claim and dropped after the entry is freed, or by the kernel when the owner dies; and it
//! records its PID namespace (the inode number of `/proc/self/ns/pid`) in the entry. A
//! checker in the same namespace, or looking at an entry without one (0: written by a table
//! without a file, or left so by an owner that could not lock), checks pid and start time
//! (which handles pid reuse and forks); a checker in another namespace asks whether some
//! other open file description holds the entry's byte. A namespace word a hostile peer
//! overwrote only ever sends a checker to the lock, which no dead process holds. One caveat:
//! a process forked after its parent registered shares the parent's open file description,
//! so an owner in another namespace that died while such a child lives looks alive until the
//! child exits.
//!
//! Lock changes of one process on one description are serialised (a description's own
//! locks never conflict, so two threads claiming the same entry would otherwise both "get"
//! its byte and the loser's unlock would drop the winner's).
//!
//! Exposed to the loom models: under `--cfg loom` this module is public, and what a model
//! builds a heap-backed table with ([`Participant`], [`ParticipantTable`] and their `new`,
//! `from_slice`, `entry`, `register`) is `pub`; everything else stays crate-private.

use std::os::fd::BorrowedFd;

use crate::sync::{AtomicU32, AtomicU64, Load, Ordering, Ro};
use crate::sys::{lock, process_is_alive, ProcessId};

/// Entries per segment.
pub const PARTICIPANTS: usize = 128;
/// Bytes per entry.
pub const PARTICIPANT_SIZE: usize = 64;

const FREE: u64 = 0;
const CLAIMING: u64 = 1;
const ACTIVE: u64 = 2;
const RECLAIMING: u64 = 3;

/// One participant entry, with words of type `W64` and `W32`: the atomics themselves
/// ([`Participant`]) or load-only ones (in a [`ParticipantView`]); the layout is the same.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct Entry<W64, W32> {
    /// `pid << 8 | state`.
    word: W64,
    start_time: W64,
    role: W32,
    /// The owner's PID namespace (see the [module docs](self)); 0 when unknown.
    pidns: W32,
    /// Kind-specific recovery state (what this endpoint holds right now).
    pub aux: [W64; 5],
}

/// A read-write participant entry.
pub type Participant = Entry<AtomicU64, AtomicU32>;

#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Participant>() == PARTICIPANT_SIZE);
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<Entry<Ro<AtomicU64>, Ro<AtomicU32>>>() == PARTICIPANT_SIZE);

impl Participant {
    /// A free entry (for heap-backed tables in models and tests).
    #[allow(dead_code)]
    pub fn new() -> Participant {
        Participant {
            word: AtomicU64::new(0),
            start_time: AtomicU64::new(0),
            role: AtomicU32::new(0),
            pidns: AtomicU32::new(0),
            aux: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// What an entry's owner word says, checked (see [`ParticipantTable::state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryState {
    /// Nobody holds it.
    Free,
    /// Being claimed (the owner has not finished registering).
    Claiming,
    /// Held, with this role.
    Active {
        /// The kind's role number.
        role: u32,
    },
    /// A reclaimer is cleaning up after a dead owner.
    Reclaiming,
    /// Garbage (a corrupt or hostile peer wrote the word), or no such entry.
    Invalid,
}

/// A snapshot of one entry, for listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParticipantInfo {
    /// Entry index.
    pub index: usize,
    /// Owner process.
    pub process: ProcessId,
    /// Kind-specific role number.
    pub role: u32,
    /// The owner's PID namespace (inode number of its `/proc/self/ns/pid`), 0 when unknown.
    /// When it is not the reader's, `process.pid` is only for display: it names the owner
    /// in its own namespace.
    pub pid_namespace: u32,
}

/// A segment's participant table, with words of type `W64` and `W32` (see the
/// [module docs](self)).
#[derive(Debug)]
pub struct Table<'a, W64, W32> {
    entries: &'a [Entry<W64, W32>],
    /// The segment file the entries' locks are on (none for heap-backed tables).
    locks: Option<BorrowedFd<'a>>,
}

/// Serialises this process's lock changes (see the [module docs](self)).
static LOCKING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serialise() -> std::sync::MutexGuard<'static, ()> {
    LOCKING.lock().unwrap_or_else(|e| e.into_inner())
}

impl<W64, W32> Clone for Table<'_, W64, W32> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<W64, W32> Copy for Table<'_, W64, W32> {}

/// The read-write participant table: registration, release and reclaiming.
pub type ParticipantTable<'a> = Table<'a, AtomicU64, AtomicU32>;

/// The participant table through load-only words (a read-only segment's): who is there,
/// in which state and role, and nothing that stores.
pub(crate) type ParticipantView<'a> = Table<'a, Ro<AtomicU64>, Ro<AtomicU32>>;

// Under loom the models use none of these, and `Load` stays crate-private: the table is
// public there only for `from_slice`, `entry` and `register`.
#[cfg_attr(loom, allow(dead_code, private_bounds))]
impl<'a, W64: Load<Value = u64>, W32: Load<Value = u32>> Table<'a, W64, W32> {
    /// # Safety
    /// `base` points to `PARTICIPANTS` entries that stay mapped (readable, and writable for
    /// a read-write table) for `'a`. `locks` is the open file they are mapped from (open for
    /// writing, for a read-write table), where owners hold their entries' locks.
    pub(crate) unsafe fn from_raw(base: *const u8, locks: BorrowedFd<'a>) -> Table<'a, W64, W32> {
        // SAFETY: per the contract; entries are atomics, valid for every bit pattern.
        let entries = unsafe { std::slice::from_raw_parts(base as *const Entry<W64, W32>, PARTICIPANTS) };
        Table { entries, locks: Some(locks) }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The owner and role of an entry in use. An entry whose state byte is none of the four
    /// states (garbage written by a corrupt or hostile peer) is reported with pid 0, which
    /// no liveness check calls alive, so it is reclaimed like a dead one.
    pub(crate) fn owner(&self, index: usize) -> Option<ParticipantInfo> {
        let e = &self.entries[index];
        let w = e.word.load(Ordering::Acquire);
        if w & 0xff == FREE {
            return None;
        }
        let start = if w & 0xff == ACTIVE { e.start_time.load(Ordering::Relaxed) } else { 0 };
        let garbage = w & 0xff > RECLAIMING;
        let pid = if garbage { 0 } else { (w >> 8) as u32 };
        Some(ParticipantInfo {
            index,
            process: ProcessId { pid, start_time: start },
            role: e.role.load(Ordering::Relaxed),
            pid_namespace: if garbage { 0 } else { e.pidns.load(Ordering::Relaxed) },
        })
    }

    /// Whether the owner `info` (from [`owner`](Self::owner) or [`list`](Self::list)) is
    /// alive: by pid and start time in the reader's PID namespace, by its entry's lock in
    /// another (see the [module docs](self)).
    pub(crate) fn is_alive(&self, info: &ParticipantInfo) -> bool {
        self.owner_alive(info.index, info.process, info.pid_namespace, process_is_alive)
    }

    /// [`is_alive`](Self::is_alive) with `is_alive` the check by pid (models pass their own).
    pub(crate) fn alive_with(&self, info: &ParticipantInfo, is_alive: impl Fn(ProcessId) -> bool) -> bool {
        self.owner_alive(info.index, info.process, info.pid_namespace, is_alive)
    }

    /// Whether the owner of entry `index`, `process` in PID namespace `pidns`, is alive,
    /// with `is_alive` the check by pid (see [`is_alive`](Self::is_alive)).
    fn owner_alive(&self, index: usize, process: ProcessId, pidns: u32, is_alive: impl Fn(ProcessId) -> bool) -> bool {
        match self.locks {
            Some(fd) if lock::is_foreign(pidns) => match lock::byte_is_locked(fd, index as u64) {
                Ok(held) => held,
                // Unexpected (the file system refuses locks): the pid is all there is.
                Err(_) => is_alive(process),
            },
            _ => is_alive(process),
        }
    }

    /// The state of entry `index` as one value, for checks against what shared words claim
    /// (a pin bit or a writer mark is only possible for an entry in a matching state).
    pub(crate) fn state(&self, index: usize) -> EntryState {
        let Some(e) = self.entries.get(index) else { return EntryState::Invalid };
        // Acquire: pairs with the Release store (CAS) of ACTIVE in `register`, so the role
        // read next is the registered one.
        let w = e.word.load(Ordering::Acquire);
        match w & 0xff {
            FREE => EntryState::Free,
            CLAIMING => EntryState::Claiming,
            ACTIVE => EntryState::Active { role: e.role.load(Ordering::Relaxed) },
            RECLAIMING => EntryState::Reclaiming,
            _ => EntryState::Invalid,
        }
    }

    /// The raw owner word of entry `index` (`pid << 8 | state`), for staleness checks.
    pub(crate) fn raw_word(&self, index: usize) -> u64 {
        self.entries.get(index).map_or(FREE, |e| e.word.load(Ordering::Acquire))
    }

    /// Aux word `i` of entry `index` (0 for an index out of range), for status views.
    pub(crate) fn aux(&self, index: usize, i: usize) -> u64 {
        self.entries.get(index).and_then(|e| e.aux.get(i)).map_or(0, |w| w.load(Ordering::Acquire))
    }

    /// Every entry in use.
    pub(crate) fn list(&self) -> Vec<ParticipantInfo> {
        (0..self.entries.len()).filter_map(|i| self.owner(i)).collect()
    }

    /// How many entries in use hold role `role` for a live owner, `is_alive` checking by pid
    /// (see [`is_alive`](Self::is_alive)).
    pub(crate) fn live_in_role(&self, role: u32, is_alive: impl Fn(ProcessId) -> bool) -> usize {
        self.live_pids_in_role(role, is_alive).len()
    }

    /// The pids of the live owners of the entries that hold role `role` (each as recorded in
    /// its owner's PID namespace).
    pub(crate) fn live_pids_in_role(&self, role: u32, is_alive: impl Fn(ProcessId) -> bool) -> Vec<u32> {
        self.list()
            .iter()
            .filter(|p| p.role == role && self.owner_alive(p.index, p.process, p.pid_namespace, &is_alive))
            .map(|p| p.process.pid)
            .collect()
    }
}

/// Whether the owner `pid`, recorded in PID namespace `pidns`, is the caller (pid equality
/// means nothing across namespaces).
fn is_me(pid: u32, pidns: u32, me: ProcessId) -> bool {
    pid == me.pid && !lock::is_foreign(pidns)
}

impl<'a> ParticipantTable<'a> {
    /// A table over heap entries (models and unit tests).
    #[allow(dead_code)]
    pub fn from_slice(entries: &'a [Participant]) -> ParticipantTable<'a> {
        Table { entries, locks: None }
    }

    /// Takes the lock of entry `index` (the caller holds [`serialise`]). `Some(false)`: a
    /// live process (another open file description) holds it; `None`: no file, or the file
    /// system refuses locks.
    fn lock_entry(&self, index: usize) -> Option<bool> {
        lock::try_lock_byte(self.locks?, index as u64).ok()
    }

    /// Drops the lock of entry `index` (the caller holds [`serialise`]). Best effort: the
    /// kernel drops it anyway when the file closes.
    fn unlock_entry(&self, index: usize) {
        if let Some(fd) = self.locks {
            let _ = lock::unlock_byte(fd, index as u64);
        }
    }

    /// Frees entry `index`, which the caller holds in a state of its own (ACTIVE, or
    /// RECLAIMING), and drops its lock if `locked`.
    fn free(&self, index: usize, locked: bool) {
        let e = &self.entries[index];
        if !locked {
            e.pidns.store(0, Ordering::Relaxed);
            // Pairs with the Acquire loads of `word`: the clean-up happens-before reuse.
            e.word.store(FREE, Ordering::Release);
            return;
        }
        let _serial = serialise();
        // Pairs with the Acquire loads of `word`: the clean-up happens-before reuse. Freed
        // before unlocking, so no checker ever sees the entry in use without its lock; the
        // namespace word is cleared before unlocking too, and no claimer (which locks first)
        // can have written it since.
        e.word.store(FREE, Ordering::Release);
        e.pidns.store(0, Ordering::Relaxed);
        self.unlock_entry(index);
    }

    /// Moves entry `index` from `seen` to RECLAIMING for `me`, with the entry's lock taken
    /// first when it can be (a dead owner's lock is gone with it; a forked child of the owner
    /// may still hold it). Returns whether it moved and whether the lock is ours.
    fn start_reclaim(&self, index: usize, seen: u64, me: ProcessId) -> Option<bool> {
        let e = &self.entries[index];
        let _serial = self.locks.map(|_| serialise());
        let locked = self.lock_entry(index) == Some(true);
        let mine = ((me.pid as u64) << 8) | RECLAIMING;
        if e.word.compare_exchange(seen, mine, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            if locked {
                self.unlock_entry(index);
            }
            return None;
        }
        // Whoever checks on this reclaim sees either the previous owner's namespace word
        // (then, if foreign to it, this lock) or ours.
        e.pidns.store(if locked { lock::pid_namespace() } else { 0 }, Ordering::Relaxed);
        Some(locked)
    }

    /// Entry `index` (panics if out of range).
    pub fn entry(&self, index: usize) -> &'a Participant {
        &self.entries[index]
    }

    /// Claims a free entry for `me` with `role`; `None` if all are taken.
    /// `first` lets a kind reserve low indices (e.g. for pin bits) by searching from there.
    pub fn register(&self, me: ProcessId, role: u32, range: std::ops::Range<usize>) -> Option<usize> {
        let _serial = self.locks.map(|_| serialise());
        let claimed = ((me.pid as u64) << 8) | CLAIMING;
        for i in range.start..range.end.min(self.entries.len()) {
            let e = &self.entries[i];
            if e.word.load(Ordering::Relaxed) != FREE {
                continue;
            }
            // The lock first, so that the entry is never ours without it. Held elsewhere: a
            // live peer is claiming this entry or has just freed it; look further.
            let locked = match self.lock_entry(i) {
                Some(true) => true,
                Some(false) => continue,
                None => false,
            };
            if e.word.compare_exchange(FREE, claimed, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                // Without the lock, no namespace: a checker elsewhere must not look for it.
                e.pidns.store(if locked { lock::pid_namespace() } else { 0 }, Ordering::Relaxed);
                e.start_time.store(me.start_time, Ordering::Relaxed);
                e.role.store(role, Ordering::Relaxed);
                for a in &e.aux {
                    a.store(0, Ordering::Relaxed);
                }
                // Pairs with the Acquire loads in `owner` and `reclaim_dead`. A CAS, not a
                // store: a peer may have taken over an entry left CLAIMING (see
                // `take_over_stale`); then it is not ours and we look further.
                let active = ((me.pid as u64) << 8) | ACTIVE;
                if e.word.compare_exchange(claimed, active, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                    return Some(i);
                }
                // Taken over: the taker frees it.
            }
            if locked {
                self.unlock_entry(i);
            }
        }
        None
    }

    /// Frees our own entry (the kind has already released what it held).
    pub(crate) fn release(&self, index: usize) {
        self.free(index, self.locks.is_some());
    }

    /// Takes over entry `index` if its word still equals `seen`, a CLAIMING or RECLAIMING
    /// word the caller has watched stay unchanged far longer than an honest claim or
    /// reclaim takes (its owner died in that window, or a hostile peer wrote it). Runs
    /// `cleanup` and frees the entry. A registrant that was merely slow then fails its final
    /// CAS in `register` and looks further, so no entry ever has two owners.
    pub(crate) fn take_over_stale(
        &self,
        index: usize,
        seen: u64,
        me: ProcessId,
        cleanup: impl FnOnce(usize, &Participant),
    ) -> bool {
        let Some(e) = self.entries.get(index) else { return false };
        if !matches!(seen & 0xff, CLAIMING | RECLAIMING) {
            return false;
        }
        let Some(locked) = self.start_reclaim(index, seen, me) else { return false };
        cleanup(index, e);
        self.free(index, locked);
        true
    }

    /// Leaves entry `index` in the CLAIMING state for `who`, as a claimer that died half-way
    /// leaves it (tests of the takeover).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn force_claiming(&self, index: usize, who: ProcessId) {
        self.entries[index].word.store(((who.pid as u64) << 8) | CLAIMING, Ordering::Release);
    }

    /// Reclaims every entry whose owner `is_alive` says is dead, calling `cleanup(index,
    /// entry)` before freeing it. Returns the number reclaimed.
    pub(crate) fn reclaim_dead(
        &self,
        me: ProcessId,
        is_alive: impl Fn(ProcessId) -> bool,
        cleanup: impl FnMut(usize, &Participant),
    ) -> usize {
        self.reclaim_dead_in(0..self.entries.len(), me, is_alive, cleanup)
    }

    /// [`reclaim_dead`](Self::reclaim_dead) restricted to the entries in `range`, for kinds
    /// that reserve index ranges by role (the pool's dispatcher entry 0 and worker entries).
    pub(crate) fn reclaim_dead_in(
        &self,
        range: std::ops::Range<usize>,
        me: ProcessId,
        is_alive: impl Fn(ProcessId) -> bool,
        mut cleanup: impl FnMut(usize, &Participant),
    ) -> usize {
        let mut n = 0;
        let end = range.end.min(self.entries.len());
        for (i, e) in self.entries.iter().enumerate().take(end).skip(range.start) {
            let w = e.word.load(Ordering::Acquire);
            let state = w & 0xff;
            if state == FREE {
                continue;
            }
            // A state byte that is none of the four is garbage from a corrupt or hostile
            // peer: no process owns the entry, whatever pid the word names.
            let garbage = state > RECLAIMING;
            let pid = (w >> 8) as u32;
            let start = if state == ACTIVE { e.start_time.load(Ordering::Relaxed) } else { 0 };
            let pidns = e.pidns.load(Ordering::Relaxed);
            // Our own entries are never dead to us, but an ACTIVE entry with our pid and
            // another start time is a predecessor's that died (its pid reused, as when a
            // container restarts): `is_alive` below says so.
            let predecessor = state == ACTIVE && me.start_time != 0 && start != 0 && start != me.start_time;
            if !garbage && is_me(pid, pidns, me) && state != RECLAIMING && !predecessor {
                continue;
            }
            if !garbage && self.owner_alive(i, ProcessId { pid, start_time: start }, pidns, &is_alive) {
                continue;
            }
            // Someone else got there first: not ours to clean.
            let Some(locked) = self.start_reclaim(i, w, me) else { continue };
            cleanup(i, e);
            self.free(i, locked);
            n += 1;
        }
        n
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// Two open file descriptions of one scratch file: as two processes would have.
    fn two_descriptions() -> (std::path::PathBuf, std::fs::File, std::fs::File) {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("shmbus-participants-{}-{n}", std::process::id()));
        std::fs::write(&path, b"").unwrap();
        let open = || std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        (path.clone(), open(), open())
    }

    fn locked<'a>(entries: &'a [Participant], file: &'a std::fs::File) -> ParticipantTable<'a> {
        Table { entries, locks: Some(file.as_fd()) }
    }

    #[test]
    fn an_owner_in_another_namespace_is_alive_while_it_holds_its_lock() {
        let (path, owner_file, checker_file) = two_descriptions();
        let entries: Vec<Participant> = (0..4).map(|_| Participant::new()).collect();
        // The owner: a pid that means nothing here (as one from another namespace would).
        let stranger = ProcessId { pid: u32::MAX >> 9, start_time: 1 };
        let owner = locked(&entries, &owner_file);
        let i = owner.register(stranger, 7, 0..4).unwrap();
        assert_eq!(entries[i].pidns.load(Ordering::Relaxed), lock::pid_namespace());
        // Recorded in another namespace than the checker's.
        entries[i].pidns.store(lock::pid_namespace() ^ 1, Ordering::Relaxed);
        let checker = locked(&entries, &checker_file);
        let info = checker.owner(i).unwrap();
        assert!(checker.is_alive(&info), "its lock is held");
        assert!(!process_is_alive(info.process), "its pid says nothing");
        assert_eq!(checker.reclaim_dead(ProcessId::current(), process_is_alive, |_, _| {}), 0);
        assert_eq!(checker.live_in_role(7, process_is_alive), 1);

        drop(owner_file); // the owner dies: the kernel drops its locks
        assert!(!checker.is_alive(&info));
        assert_eq!(checker.live_in_role(7, process_is_alive), 0);
        let mut cleaned = vec![];
        assert_eq!(checker.reclaim_dead(ProcessId::current(), process_is_alive, |k, _| cleaned.push(k)), 1);
        assert_eq!((cleaned, checker.owner(i)), (vec![i], None));
        assert_eq!(entries[i].pidns.load(Ordering::Relaxed), 0, "a freed entry names no namespace");
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn in_the_same_namespace_the_pid_decides_and_release_drops_the_lock() {
        let (path, owner_file, checker_file) = two_descriptions();
        let entries: Vec<Participant> = (0..2).map(|_| Participant::new()).collect();
        let owner = locked(&entries, &owner_file);
        let checker = locked(&entries, &checker_file);
        // A dead pid in our namespace is dead even while some description holds the byte
        // (a forked child of a dead owner): pid reuse and forks are the pid check's business.
        let dead = ProcessId { pid: u32::MAX >> 9, start_time: 1 };
        let i = owner.register(dead, 1, 0..2).unwrap();
        assert!(!checker.is_alive(&checker.owner(i).unwrap()));
        assert_eq!(checker.reclaim_dead(ProcessId::current(), process_is_alive, |_, _| {}), 1);
        // Our own entry, released: its byte is free for the next claimer at once.
        let j = owner.register(ProcessId::current(), 1, 0..1).unwrap();
        assert!(lock::byte_is_locked(checker_file.as_fd(), j as u64).unwrap());
        assert!(checker.is_alive(&checker.owner(j).unwrap()));
        owner.release(j);
        assert!(!lock::byte_is_locked(checker_file.as_fd(), j as u64).unwrap());
        assert_eq!(checker.register(ProcessId::current(), 1, 0..1), Some(j));
        std::fs::remove_file(path).unwrap();
    }
}
