//! What a bridge counts, and its log-once rule for bad input.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use serde::Serialize;

macro_rules! counters {
    ($($(#[doc = $doc:literal])* $name:ident),* $(,)?) => {
        /// The bridge's counters, shared by its threads.
        #[derive(Debug, Default)]
        pub struct Counters {
            $($(#[doc = $doc])* pub $name: AtomicU64,)*
        }

        /// One reading of [`Counters`] (the `--json` stats line, keys in this order).
        #[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
        pub struct Stats {
            $($(#[doc = $doc])* pub $name: u64,)*
        }

        impl Counters {
            /// Reads every counter.
            pub fn snapshot(&self) -> Stats {
                Stats { $($name: self.$name.load(Relaxed),)* }
            }
        }
    };
}

counters! {
    /// Local topic messages sent to Zenoh.
    forwarded,
    /// Their payload bytes.
    forwarded_bytes,
    /// Remote topic messages published into local topics.
    received,
    /// Their payload bytes.
    received_bytes,
    /// Messages this bridge published itself, seen again by its local subscriber and not sent
    /// back (loop prevention).
    echoes_skipped,
    /// Local messages overwritten before the bridge read them (a lossy topic outran it).
    local_lagged,
    /// Remote samples whose attachment was missing or malformed.
    bad_attachment,
    /// Remote samples on keys outside the allowlist (or naming no valid topic).
    not_allowed,
    /// Remote messages larger than the local topic's largest message.
    too_large,
    /// Remote messages for a topic that could not be opened or created here.
    open_failed,
    /// Remote messages a local `block`/`fail` topic had no room for within its reliable timeout.
    full,
    /// Sends to Zenoh, or local publishes, that failed otherwise.
    send_failed,
    /// Journal entries served to Zenoh (live and on request).
    journal_served,
    /// Journal entries appended to local mirrors.
    journal_mirrored,
    /// Journal entries a source could not read (damaged or encrypted), skipped.
    journal_unreadable,
    /// Journal entries a mirror refused because they come from another journal than the one
    /// its replica copies (the source was removed and made again under the same name).
    journal_foreign,
}

/// Logs each distinct problem once (the counters count every occurrence).
#[derive(Debug, Default)]
pub struct LogOnce {
    seen: Mutex<HashSet<String>>,
}

impl LogOnce {
    /// Prints `message` to stderr the first time `key` is seen.
    pub fn warn(&self, key: String, message: impl FnOnce() -> String) {
        let first = self.seen.lock().unwrap_or_else(|e| e.into_inner()).insert(key);
        if first {
            eprintln!("shmbus bridge: {} (reported once)", message());
        }
    }
}

/// Adds one to a counter.
pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Relaxed);
}

/// Adds `n` to a counter.
pub(crate) fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Relaxed);
}
