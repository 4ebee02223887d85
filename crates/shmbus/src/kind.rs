//! The kind registry: what each channel kind tells tools about itself.
//!
//! `admin` (and through it `shmbus ls`, `info` and `clean`) iterates [`KINDS`] instead of
//! matching on [`Kind`] and reaching into each kind's internals. Each kind has one
//! [`KindInfo`] impl, next to its segment layout (`<kind>/layout.rs`; the journal, which is
//! not a segment, next to its participant roles): its participant role names, its header
//! parameters as tools name them, what it holds undelivered and its live state, by name.

use crate::admin::{Description, Pending};
use crate::domain::Domain;
use crate::error::OpenError;
use crate::segment::{Kind, Segment, PARAMS};
use crate::sys::{process_is_alive, Access, ReadOnly};

/// What one channel kind tells tools about itself (see the [module docs](self)).
pub(crate) trait KindInfo: Sync {
    /// The kind this describes.
    fn kind(&self) -> Kind;

    /// The name of participant role number `role` ("publisher", "worker", …); `None` for a
    /// number the kind does not use (a corrupt entry, or a newer shmbus).
    fn role_name(&self, role: u32) -> Option<&'static str>;

    /// The header's layout parameters as tools name them (the JSON keys of `shmbus info`), in
    /// header order. Parameters past the end of the list are not shown.
    fn param_keys(&self) -> &'static [&'static str];

    /// The header's layout parameters `raw`, by name ([`param_keys`](Self::param_keys)).
    fn params(&self, raw: &[u64; PARAMS]) -> Vec<(&'static str, u64)> {
        self.param_keys().iter().copied().zip(raw.iter().copied()).collect()
    }

    /// Committed data that no reader has taken yet in `seg`, a validated segment of this kind
    /// opened read-only (loads only); `None` for a kind that owes no delivery.
    fn pending(&self, seg: Segment<ReadOnly>) -> Result<Option<Pending>, OpenError>;

    /// What `seg` (a validated segment of this kind opened read-only) holds for a later
    /// reader: its [`pending`](Self::pending) data, and for a kind that keeps a history
    /// instead (the topic) the messages that history holds now.
    fn contents(&self, seg: Segment<ReadOnly>) -> Result<(Option<Pending>, Option<u64>), OpenError> {
        Ok((self.pending(seg)?, None))
    }

    /// The live state of channel `name` in `domain`, read through a read-only mapping (read
    /// permission suffices, nothing is written). `params` is left empty: the caller has the
    /// header.
    fn describe(&self, domain: &Domain, name: &str) -> Result<Description, OpenError>;
}

/// Every kind, in header-number order.
pub(crate) static KINDS: [&dyn KindInfo; 5] = [
    &crate::topic::TopicKind,
    &crate::queue::QueueKind,
    &crate::stream::StreamKind,
    &crate::pool::PoolKind,
    &crate::journal::JournalKind,
];

/// The registry entry of `kind`.
pub(crate) fn info(kind: Kind) -> &'static dyn KindInfo {
    match KINDS.iter().find(|k| k.kind() == kind) {
        Some(k) => *k,
        None => unreachable!("kind {kind} is not in the registry"),
    }
}

/// Live participants of `seg` in role number `role`.
pub(crate) fn live_in_role<A: Access>(seg: &Segment<A>, role: u32) -> usize {
    seg.participant_view().live_in_role(role, process_is_alive)
}

/// The raw keys of a kind whose parameters have no names (`param0` … `param7`).
pub(crate) const RAW_PARAM_KEYS: [&str; PARAMS] =
    ["param0", "param1", "param2", "param3", "param4", "param5", "param6", "param7"];

#[cfg(test)]
mod tests {
    use super::{info, KINDS, RAW_PARAM_KEYS};
    use crate::segment::{Kind, PARAMS};

    #[test]
    fn the_registry_holds_every_kind_once_in_header_order() {
        let kinds: Vec<Kind> = KINDS.iter().map(|k| k.kind()).collect();
        assert_eq!(kinds, [Kind::Topic, Kind::Queue, Kind::Stream, Kind::Pool, Kind::Journal]);
        for (n, k) in kinds.iter().enumerate() {
            assert_eq!(Kind::from_u32(n as u32 + 1), Some(*k));
            assert_eq!(info(*k).kind(), *k);
        }
    }

    /// The role names and parameter keys `shmbus info` and `ls --json` have always printed:
    /// changing one changes the CLI contract.
    #[test]
    fn role_names_and_param_keys_are_what_the_cli_prints() {
        let roles: Vec<_> =
            KINDS.iter().map(|k| (k.role_name(0), k.role_name(1), k.role_name(2), k.role_name(3))).collect();
        assert_eq!(
            roles,
            [
                (None, Some("publisher"), Some("subscriber"), None),
                (None, Some("producer"), Some("consumer"), None),
                (None, Some("writer"), Some("reader"), None),
                (None, Some("dispatcher"), Some("worker"), None),
                (None, Some("appender"), None, None),
            ]
        );
        let keys: Vec<&[&str]> = KINDS.iter().map(|k| k.param_keys()).collect();
        assert_eq!(
            keys,
            [
                &["slot_size", "history", "spare_slots", "policy", "reliable_timeout_ms"][..],
                &["capacity", "max_element_size", "stride"],
                &["capacity", "data_offset"],
                &["max_workers", "max_job_size"],
                &[],
            ]
        );
        let raw: [u64; PARAMS] = [64, 16, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            info(Kind::Topic).params(&raw),
            [("slot_size", 64), ("history", 16), ("spare_slots", 0), ("policy", 0), ("reliable_timeout_ms", 0)]
        );
        // The journal is not a segment: a segment claiming to be one shows its raw non-zero
        // parameters.
        let raw: [u64; PARAMS] = [7, 0, 9, 0, 0, 0, 0, 0];
        assert_eq!(info(Kind::Journal).params(&raw), [(RAW_PARAM_KEYS[0], 7), (RAW_PARAM_KEYS[2], 9)]);
        assert_eq!(RAW_PARAM_KEYS[2], "param2");
    }
}
