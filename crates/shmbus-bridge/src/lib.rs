//! `shmbus bridge`: a domain's topics and chosen journals across hosts, over Zenoh.
//!
//! shmbus grows no network protocol of its own. A bridge is one process per host (and
//! domain) that joins a Zenoh network (peer mode by default; client or router where the
//! deployment has routers) and
//!
//! * **forwards topics** named by an allowlist ([`allow`]): every message a local publisher
//!   sends to an allowed topic is put on the key `PREFIX/NAME` (`PREFIX` is
//!   `shmbus/DOMAIN` unless set), and every sample on `PREFIX/NAME` from another bridge is
//!   published into the local topic `NAME`. The payload is untouched; the origin's sequence
//!   number, timestamps and topic parameters travel in the sample's attachment ([`wire`]).
//!   A topic missing on the receiving side is created with the sender's largest message,
//!   history and delivery policy.
//! * **serves journals** (`--journal NAME=DIR`): each new entry is put on
//!   `JPREFIX/@journal/NAME` (`JPREFIX` is `shmbus` unless set), and a queryable on that key answers `from=INDEX;max=N` with the
//!   entries from `INDEX` on.
//! * **mirrors journals** (`--mirror NAME=DIR`): appends a remote journal's entries to a
//!   local one, the same entries in the same order, never twice, resuming after either side
//!   restarts ([`journals`]).
//!
//! ## Loops
//! Two bridges never echo a message back: a bridge never forwards what it published itself
//! (it keeps the sequence numbers of its own local publishes and its forwarding subscriber
//! skips them), its Zenoh subscribers take only remote samples, and a sample whose
//! attachment names this bridge as origin is dropped. A message therefore crosses Zenoh
//! once, from the bridge of the host where it was published to every other bridge. Run one
//! bridge per domain and Zenoh network: two bridges attached to the same local topic would
//! each forward what the other published.
//!
//! ## Bad input
//! Remote samples are untrusted: a missing or malformed attachment, a key outside the
//! allowlist, a message larger than the local topic's slots, a topic that cannot be opened or
//! created here: each is counted ([`stats::Counters`]), reported once on stderr, and dropped.
//! Nothing a peer sends makes the bridge panic or stop.

#![warn(missing_docs)]

pub mod allow;
pub mod journals;
pub mod stats;
mod topics;
pub mod wire;

use std::fmt;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use shmbus::{Domain, OpenError};

pub use allow::Allow;
pub use stats::Stats;
pub use wire::BridgeId;

/// The default of [`Options::max_remote_topic_bytes`]: 1 GiB.
pub const DEFAULT_MAX_REMOTE_TOPIC_BYTES: u64 = 1 << 30;

/// Which way topics are forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// Local topics out to Zenoh and remote ones in.
    #[default]
    Both,
    /// Local topics out only.
    Out,
    /// Remote topics in only.
    In,
}

impl Direction {
    fn outgoing(self) -> bool {
        self != Direction::In
    }

    fn incoming(self) -> bool {
        self != Direction::Out
    }
}

/// What a bridge forwards, serves and mirrors.
#[derive(Debug, Clone)]
pub struct Options {
    /// The local domain.
    pub domain: Domain,
    /// The topics forwarded (both ways).
    pub topics: Allow,
    /// The key prefix; `None`: `shmbus/DOMAIN`.
    pub key_prefix: Option<String>,
    /// Which way topics go.
    pub direction: Direction,
    /// Journals served: `(name, directory)`.
    pub journals: Vec<(String, PathBuf)>,
    /// Remote journals mirrored: `(name, local directory)`.
    pub mirrors: Vec<(String, PathBuf)>,
    /// How often the domain is scanned for new topics.
    pub scan_interval: Duration,
    /// Zenoh express mode: each message is sent at once, never batched (lower latency for
    /// sparse messages, lower throughput for dense small ones).
    pub express: bool,
    /// The largest topic a remote sender may make this bridge create, in slot bytes
    /// (largest message × (history + 1)); larger ones are refused (`open_failed`).
    pub max_remote_topic_bytes: u64,
    /// The keys of encrypted journals (`--key-file`): served journals are read with them and
    /// mirrors seal their entries with the current one. `None`: journals are read and
    /// written as they are, and a served journal's sealed entries are skipped.
    pub keys: Option<shmbus::journal::Keyring>,
}

impl Options {
    /// Options for `domain` with nothing forwarded yet.
    pub fn new(domain: Domain) -> Options {
        Options {
            domain,
            topics: Allow::default(),
            key_prefix: None,
            direction: Direction::Both,
            journals: Vec::new(),
            mirrors: Vec::new(),
            scan_interval: Duration::from_millis(200),
            express: false,
            max_remote_topic_bytes: DEFAULT_MAX_REMOTE_TOPIC_BYTES,
            keys: None,
        }
    }

    /// The key prefix of topics in force: `--key-prefix`, else `shmbus/DOMAIN`.
    pub fn prefix(&self) -> String {
        self.key_prefix.clone().unwrap_or_else(|| format!("shmbus/{}", self.domain.name()))
    }

    /// The key prefix of journals in force: `--key-prefix`, else `shmbus` (journals belong
    /// to no domain).
    pub fn journal_prefix(&self) -> String {
        self.key_prefix.clone().unwrap_or_else(|| "shmbus".to_owned())
    }
}

/// Why a bridge could not start.
#[derive(Debug)]
pub enum BridgeError {
    /// Zenoh refused (a configuration, an endpoint, a key).
    Zenoh(String),
    /// A local channel or journal could not be opened.
    Open(OpenError),
    /// The options do not make sense.
    Invalid(String),
    /// The random id could not be read.
    Io(std::io::Error),
}

impl fmt::Display for BridgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BridgeError::Zenoh(e) => write!(f, "zenoh: {e}"),
            BridgeError::Open(e) => write!(f, "{e}"),
            BridgeError::Invalid(e) => write!(f, "{e}"),
            BridgeError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for BridgeError {}

impl From<OpenError> for BridgeError {
    fn from(e: OpenError) -> Self {
        BridgeError::Open(e)
    }
}

pub(crate) fn zerr(e: impl fmt::Display) -> BridgeError {
    BridgeError::Zenoh(e.to_string())
}

/// What every thread of a bridge shares.
pub(crate) struct Shared {
    pub(crate) id: BridgeId,
    pub(crate) session: zenoh::Session,
    pub(crate) options: Options,
    pub(crate) prefix: String,
    pub(crate) counters: stats::Counters,
    pub(crate) log: stats::LogOnce,
    pub(crate) stop: AtomicBool,
    /// The cipher of [`Options::keys`], made once for every journal served and mirrored.
    pub(crate) cipher: Option<Arc<dyn shmbus::journal::EntryCipher>>,
}

impl Shared {
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// A running bridge. Dropping it (or [`stop`](Bridge::stop)) stops its threads.
pub struct Bridge {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    // Zenoh entities live as long as the bridge.
    _zenoh: Vec<Box<dyn std::any::Any + Send>>,
}

impl fmt::Debug for Bridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bridge").field("prefix", &self.shared.prefix).finish_non_exhaustive()
    }
}

impl Bridge {
    /// Starts a bridge on an open Zenoh session.
    pub fn start(session: zenoh::Session, options: Options) -> Result<Bridge, BridgeError> {
        let prefix = options.prefix();
        check_prefix(&prefix)?;
        for (name, _) in options.journals.iter().chain(&options.mirrors) {
            shmbus::validate_name(name).map_err(|e| BridgeError::Invalid(format!("journal name {name:?}: {e}")))?;
        }
        let cipher = options.keys.as_ref().map(|k| {
            Arc::new(shmbus::journal::XChaCha20Poly1305Cipher::new(k)) as Arc<dyn shmbus::journal::EntryCipher>
        });
        let shared = Arc::new(Shared {
            cipher,
            id: random_id()?,
            session,
            prefix,
            options,
            counters: stats::Counters::default(),
            log: stats::LogOnce::default(),
            stop: AtomicBool::new(false),
        });
        let mut bridge = Bridge { shared: shared.clone(), threads: Vec::new(), _zenoh: Vec::new() };
        topics::start(&shared, &mut bridge.threads, &mut bridge._zenoh)?;
        for (name, dir) in &shared.options.journals {
            journals::serve(&shared, name, dir, &mut bridge.threads, &mut bridge._zenoh)?;
        }
        for (name, dir) in &shared.options.mirrors {
            journals::mirror(&shared, name, dir, &mut bridge.threads)?;
        }
        Ok(bridge)
    }

    /// This bridge's id (the origin in what it forwards).
    pub fn id(&self) -> BridgeId {
        self.shared.id
    }

    /// The key prefix in force.
    pub fn prefix(&self) -> &str {
        &self.shared.prefix
    }

    /// A reading of the counters.
    pub fn stats(&self) -> Stats {
        self.shared.counters.snapshot()
    }

    /// Stops every thread and returns the last reading of the counters.
    pub fn stop(mut self) -> Stats {
        self.halt();
        self.stats()
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.halt();
    }
}

fn check_prefix(prefix: &str) -> Result<(), BridgeError> {
    let bad = prefix.is_empty()
        || prefix.split('/').any(|c| c.is_empty() || c.contains(['*', '$', '?', '#', '@']))
        || zenoh::key_expr::KeyExpr::try_from(prefix.to_owned()).is_err();
    if bad {
        return Err(BridgeError::Invalid(format!(
            "key prefix {prefix:?}: give a Zenoh key without wildcards, '@' or empty parts (e.g. shmbus/robot1)"
        )));
    }
    Ok(())
}

fn random_id() -> Result<BridgeId, BridgeError> {
    let mut id = [0u8; wire::ID_LEN];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut id)).map_err(BridgeError::Io)?;
    Ok(id)
}

/// Spawns a named bridge thread.
pub(crate) fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    std::thread::Builder::new().name(name).spawn(f).expect("spawn a bridge thread")
}
