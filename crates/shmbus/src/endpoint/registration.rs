//! Taking an entry in a channel's participant table.
//!
//! Two shapes cover every role of every kind:
//! - [`register_shared`]: any free entry in a range (publishers, subscribers, producers,
//!   consumers, workers, appenders). When the range is full, the dead are reclaimed first and
//!   the registration is tried once more.
//! - [`claim_exclusive`]: one fixed entry (the stream's writer and reader, the pool's
//!   dispatcher). A live holder makes it [`OpenError::Busy`]; a dead holder, garbage written
//!   by a corrupt or hostile peer, or a claim or reclaim that stays unchanged for
//!   [`STALE_ENTRY`] (its owner died half-way) is taken over.
//!
//! Freeing an entry is the kind's job ([`ParticipantTable::release`]), after it has released
//! what the endpoint held.

use std::ops::Range;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::OpenError;
use crate::participants::{EntryState, Participant, ParticipantTable};
use crate::sys::{process_is_alive, ProcessId};

/// A claim or reclaim of an exclusive entry that stays unchanged this long is taken to be
/// dead half-way: an honest one completes in microseconds.
pub(crate) const STALE_ENTRY: Duration = super::liveness::STALLED;

/// How long [`claim_exclusive`] keeps trying before it reports the entry busy.
pub(crate) const CLAIM_BUDGET: Duration = Duration::from_millis(200);

/// Whether `holder` is this process: the same pid with the same start time (or one of them
/// unknown). The same pid with another start time is a dead predecessor whose pid was reused,
/// as when a container restarts; `process_is_alive` calls it dead.
pub(crate) fn is_us(holder: ProcessId, me: ProcessId) -> bool {
    holder.pid == me.pid && (holder.start_time == me.start_time || holder.start_time == 0 || me.start_time == 0)
}

/// Registers `me` with `role` in a free entry of `range`. If none is free, reclaims the dead
/// (`reclaim`, the kind's reclaim with its cleanup, returning how many it freed) and tries
/// once more; then the table is
/// full of live participants: [`OpenError::TooManyParticipants`] naming `path`.
pub(crate) fn register_shared(
    table: ParticipantTable<'_>,
    me: ProcessId,
    role: u32,
    range: Range<usize>,
    reclaim: impl FnOnce() -> usize,
    path: &Path,
) -> Result<usize, OpenError> {
    if let Some(i) = table.register(me, role, range.clone()) {
        return Ok(i);
    }
    reclaim();
    table
        .register(me, role, range.clone())
        .ok_or_else(|| OpenError::TooManyParticipants { path: path.to_owned(), max: range.len() })
}

/// Claims the exclusive entry `slot` for `me` with `role`, within [`CLAIM_BUDGET`].
///
/// A live holder (or this process itself) makes it [`OpenError::Busy`] at once. A dead
/// holder's entry is reclaimed with `cleanup` (which must be idempotent, as every reclaim
/// cleanup is) and claimed. An entry left claiming or reclaiming by a live-looking pid is
/// watched, and taken over with `cleanup` once it has not moved for [`STALE_ENTRY`].
pub(crate) fn claim_exclusive(
    table: ParticipantTable<'_>,
    me: ProcessId,
    slot: usize,
    role: u32,
    path: &Path,
    mut cleanup: impl FnMut(usize, &Participant),
) -> Result<(), OpenError> {
    let mut holder = 0;
    let mut watched: Option<(u64, Instant)> = None;
    let give_up = Instant::now() + CLAIM_BUDGET;
    while Instant::now() < give_up {
        if table.register(me, role, slot..slot + 1).is_some() {
            return Ok(());
        }
        let word = table.raw_word(slot);
        match (table.state(slot), table.owner(slot)) {
            (_, None) => continue, // released meanwhile
            (EntryState::Active { .. }, Some(o)) => {
                holder = o.process.pid;
                if is_us(o.process, me) || table.is_alive(&o) {
                    return Err(OpenError::Busy { path: path.to_owned(), holder_pid: holder });
                }
            }
            (EntryState::Claiming | EntryState::Reclaiming, Some(o)) if table.is_alive(&o) => {
                // Someone is claiming or reclaiming it right now, or died doing so long ago
                // (and its pid was reused), or a hostile peer wrote a live pid here: wait a
                // little, then take it over if the word has not moved.
                holder = o.process.pid;
                match watched {
                    Some((w, since)) if w == word => {
                        if since.elapsed() >= STALE_ENTRY {
                            table.take_over_stale(slot, word, me, &mut cleanup);
                        }
                    }
                    _ => watched = Some((word, Instant::now())),
                }
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            _ => {}
        }
        // The holder is dead, or the entry is garbage: reclaim it and try again.
        table.reclaim_dead_in(slot..slot + 1, me, process_is_alive, &mut cleanup);
        std::thread::yield_now();
    }
    Err(OpenError::Busy { path: path.to_owned(), holder_pid: holder })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn table(entries: &[Participant]) -> ParticipantTable<'_> {
        ParticipantTable::from_slice(entries)
    }

    /// A process that has exited (a start time no process of that pid can have, should the
    /// pid be reused).
    fn dead_process() -> ProcessId {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        ProcessId { pid, start_time: 1 }
    }

    #[test]
    fn shared_registration_reclaims_the_dead_when_full() {
        let entries: Vec<Participant> = (0..2).map(|_| Participant::new()).collect();
        let t = table(&entries);
        let dead = dead_process();
        assert_eq!(t.register(dead, 1, 0..2), Some(0));
        assert_eq!(t.register(dead, 1, 0..2), Some(1));
        let me = ProcessId::current();
        let mut reclaimed = 0;
        let reclaim = || {
            reclaimed = t.reclaim_dead(me, process_is_alive, |_, _| {});
            reclaimed
        };
        let i = register_shared(t, me, 2, 0..2, reclaim, Path::new("x")).unwrap();
        assert_eq!((i, reclaimed), (0, 2));
        assert_eq!(t.owner(0).unwrap().process, me);
    }

    #[test]
    fn shared_registration_reports_a_table_full_of_the_living() {
        let entries: Vec<Participant> = (0..2).map(|_| Participant::new()).collect();
        let t = table(&entries);
        let me = ProcessId::current();
        t.register(me, 1, 0..2).unwrap();
        t.register(me, 1, 0..2).unwrap();
        let e = register_shared(t, me, 1, 0..2, || 0, Path::new("seg")).unwrap_err();
        assert!(matches!(e, OpenError::TooManyParticipants { max: 2, .. }), "{e:?}");
    }

    #[test]
    fn exclusive_claim_is_busy_while_held_and_taken_from_the_dead() {
        let entries: Vec<Participant> = (0..1).map(|_| Participant::new()).collect();
        let t = table(&entries);
        let me = ProcessId::current();
        claim_exclusive(t, me, 0, 3, Path::new("s"), |_, _| {}).unwrap();
        let e = claim_exclusive(t, me, 0, 3, Path::new("s"), |_, _| {}).unwrap_err();
        assert!(matches!(e, OpenError::Busy { holder_pid, .. } if holder_pid == me.pid), "{e:?}");
        t.release(0);

        let dead = dead_process();
        t.register(dead, 3, 0..1).unwrap();
        let mut cleaned = Vec::new();
        claim_exclusive(t, me, 0, 3, Path::new("s"), |i, _| cleaned.push(i)).unwrap();
        assert_eq!(cleaned, [0]);
        assert_eq!(t.owner(0).unwrap().process, me);
    }

    #[test]
    fn exclusive_claim_takes_over_a_stale_claim() {
        let entries: Vec<Participant> = (0..1).map(|_| Participant::new()).collect();
        let t = table(&entries);
        // A live pid (init) left in the CLAIMING state, as a claimer that died half-way
        // and whose pid was reused would leave it.
        t.force_claiming(0, ProcessId { pid: 1, start_time: 0 });
        let me = ProcessId::current();
        claim_exclusive(t, me, 0, 3, Path::new("s"), |_, _| {}).unwrap();
        assert_eq!(t.owner(0).unwrap().process, me);
    }
}
