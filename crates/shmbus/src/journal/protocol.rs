//! The journal's lock-free protocol on plain atomics.
//!
//! Nothing here knows about files or mappings: each function takes the shared words it
//! works on (`&AtomicU64` from `crate::sync`), so the same code runs on a mapped cycle file
//! and, under `--cfg loom`, on heap atomics in `tests/loom_journal.rs`.
//!
//! Words and invariants (see `docs/journal-format.md`):
//! * the cycle's **position word** `SEALED:1 | n:31 | units:32` only grows; claims move it
//!   `(n, u) → (n+1, u+k)` by CAS, so every claimed index is unique and dense and claimed
//!   byte ranges never overlap; `SEALED` is set once and then nothing changes it;
//! * an entry's **word 0** goes `0 → COMMITTED` (owner, Release) and `0 | RESERVED →
//!   ABANDONED` (anyone who knows the owner is dead or late), each by CAS, so the owner's
//!   commit and an abandonment cannot both succeed; `COMMITTED` and `ABANDONED` are final.
//!   (`RESERVED` is written only by older versions, which went `0 → RESERVED → COMMITTED`.)

use super::format::*;
use crate::sync::{AtomicU64, Ordering};

/// Loads the position word. Acquire: pairs with the AcqRel CAS in [`try_claim`] and
/// [`seal`], so the claimer's earlier stores (its recovery record) are visible.
#[inline]
#[cfg(any(loom, feature = "internals"))]
pub fn load_pos(pos: &AtomicU64) -> u64 {
    pos.load(Ordering::Acquire)
}

/// One claim attempt: moves the position word from the observed `w` to `(n+1, u+units)`.
/// `true`: the caller owns in-cycle index `n` and units `u..u+units` of the data area.
/// The caller has checked that `w` is not sealed and that the entry fits.
#[inline]
pub fn try_claim(pos: &AtomicU64, w: u64, units: u64) -> bool {
    let (sealed, n, u) = pos_parts(w);
    debug_assert!(!sealed);
    // AcqRel: Release publishes the claimer's recovery record (stored before this CAS);
    // Acquire orders the following header CAS after the claim.
    pos.compare_exchange(w, pos_word(false, n + 1, u + units), Ordering::AcqRel, Ordering::Relaxed).is_ok()
}

/// Seals the cycle (idempotent). Returns the final position word; its `(n, units)` are
/// exact because claims are CASes that fail once the word has changed.
pub fn seal(pos: &AtomicU64) -> u64 {
    let mut w = pos.load(Ordering::Acquire);
    while w & POS_SEALED == 0 {
        match pos.compare_exchange(w, w | POS_SEALED, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return w | POS_SEALED,
            Err(x) => w = x,
        }
    }
    w
}

/// The owner publishes its entry: word 0 goes from 0 (unwritten: claimed, being written)
/// straight to COMMITTED. Release: pairs with the Acquire load in [`observe`]; every byte of
/// the entry written before this call is visible to a reader that sees COMMITTED. `false`:
/// readers abandoned the entry first (the owner stalled past the abandon timeout); its
/// bytes are then ignored by everyone (an abandoned entry is skipped by its size alone).
///
/// There is no separate "reserved" step: one locked instruction per entry on the line a
/// caught-up tailer polls, not two. (Writers of older versions went 0 → RESERVED →
/// COMMITTED; readers and abandoners treat RESERVED like 0, so both kinds of writer can
/// share a journal.)
#[inline]
pub fn commit_entry(word: &AtomicU64, units: u64, flags: u64) -> bool {
    word.compare_exchange(0, entry_word(ST_COMMITTED, flags, units), Ordering::AcqRel, Ordering::Relaxed).is_ok()
}

/// Abandons an entry that is unwritten (0) or reserved with `units`. `true` if this call did
/// it. Races with [`commit_entry`]: exactly one side wins the CAS.
pub fn abandon_entry(word: &AtomicU64, units: u64) -> bool {
    let cur = word.load(Ordering::Acquire);
    let (st, _, cu) = entry_word_parts(cur);
    if !(cur == 0 || (st == ST_RESERVED && cu == units)) {
        return false;
    }
    word.compare_exchange(cur, entry_word(ST_ABANDONED, 0, units), Ordering::AcqRel, Ordering::Acquire).is_ok()
}

/// What a reader sees in an entry's word 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryState {
    /// Claimed (maybe) but not yet marked by its owner.
    Unwritten,
    /// Reserved, being written.
    Reserved {
        /// Units the owner claimed.
        units: u64,
    },
    /// Committed: all fields final.
    Committed {
        /// Entry flags.
        flags: u64,
        /// Units it spans.
        units: u64,
    },
    /// Abandoned: skip `units`.
    Abandoned {
        /// Units it spans.
        units: u64,
    },
    /// Not a state this format defines.
    Junk,
}

/// Reads an entry's word 0. Acquire: pairs with the Release in [`commit_entry`].
#[inline]
pub fn observe(word: &AtomicU64) -> EntryState {
    let w = word.load(Ordering::Acquire);
    let (st, flags, units) = entry_word_parts(w);
    match st {
        _ if w == 0 => EntryState::Unwritten,
        ST_RESERVED => EntryState::Reserved { units },
        ST_COMMITTED => EntryState::Committed { flags, units },
        ST_ABANDONED => EntryState::Abandoned { units },
        _ => EntryState::Junk,
    }
}
