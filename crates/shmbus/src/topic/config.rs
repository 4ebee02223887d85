//! The topic's configuration: what `create_or_open` is asked for, and its defaults.

use std::time::Duration;

use crate::endpoint::channel::CommonConfig;

/// Default largest message of a created topic, in bytes.
pub const DEFAULT_MAX_MESSAGE_LEN: usize = 4096;
/// Default history of a created topic.
pub const DEFAULT_HISTORY: usize = 16;
/// Default number of spare slots of a created topic.
pub const DEFAULT_SPARE_SLOTS: usize = 4;

/// Default reliable timeout of a created topic, in milliseconds: how long a live reliable
/// subscriber may hold publishers back without reading before it is evicted.
pub const DEFAULT_RELIABLE_TIMEOUT_MS: u64 = 1000;

/// What a publisher does when the slot it would overwrite holds a message a *reliable*
/// subscriber has not read yet (see [`Topic::reliable_subscriber`](super::Topic::reliable_subscriber)). Set per topic at
/// creation ([`TopicConfig::policy`]); stored in the topic's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum DeliveryPolicy {
    /// Overwrite the oldest message, as always: publishers never wait and read no cursor;
    /// reliable subscribers are refused.
    #[default]
    Overwrite = 0,
    /// Wait until every reliable subscriber has read it (`send` waits; `send_timeout` up to
    /// its timeout; `try_send` returns `Full`).
    Block = 1,
    /// Return `Full` at once, from every send verb; the caller keeps its message.
    Fail = 2,
}

impl DeliveryPolicy {
    /// The policy stored as number `v` in a topic's header, if any.
    pub fn from_u64(v: u64) -> Option<DeliveryPolicy> {
        match v {
            0 => Some(DeliveryPolicy::Overwrite),
            1 => Some(DeliveryPolicy::Block),
            2 => Some(DeliveryPolicy::Fail),
            _ => None,
        }
    }

    /// `overwrite`, `block` or `fail`.
    pub fn name(self) -> &'static str {
        match self {
            DeliveryPolicy::Overwrite => "overwrite",
            DeliveryPolicy::Block => "block",
            DeliveryPolicy::Fail => "fail",
        }
    }
}

impl std::str::FromStr for DeliveryPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<DeliveryPolicy, String> {
        match s {
            "overwrite" => Ok(DeliveryPolicy::Overwrite),
            "block" => Ok(DeliveryPolicy::Block),
            "fail" => Ok(DeliveryPolicy::Fail),
            _ => Err(format!("unknown delivery policy {s:?}: expected overwrite, block or fail")),
        }
    }
}

impl std::fmt::Display for DeliveryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How to create or open a topic, built with setters:
/// `TopicConfig::default().max_message_len(64).history(16)`.
///
/// A setter that is not called accepts whatever an existing topic has; a value that is set
/// and differs from the existing topic fails with [`OpenError::LayoutMismatch`](crate::OpenError::LayoutMismatch). A topic
/// that is created takes the documented default of every value not set.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct TopicConfig {
    pub(super) max_message_len: Option<usize>,
    pub(super) history: Option<usize>,
    pub(super) spare_slots: Option<usize>,
    pub(super) policy: Option<DeliveryPolicy>,
    pub(super) reliable_timeout: Option<Duration>,
    pub(super) common: CommonConfig,
}

impl TopicConfig {
    /// The largest message in bytes (the slot size; default
    /// [`DEFAULT_MAX_MESSAGE_LEN`], 4096).
    pub fn max_message_len(mut self, len: usize) -> TopicConfig {
        self.max_message_len = Some(len);
        self
    }

    /// How many of the last messages stay readable by sequence number (default
    /// [`DEFAULT_HISTORY`], 16).
    pub fn history(mut self, history: usize) -> TopicConfig {
        self.history = Some(history);
        self
    }

    /// Extra slots, so that pinned samples do not shorten the history (default
    /// [`DEFAULT_SPARE_SLOTS`], 4).
    pub fn spare_slots(mut self, n: usize) -> TopicConfig {
        self.spare_slots = Some(n);
        self
    }

    /// The delivery policy (default [`DeliveryPolicy::Overwrite`]): what publishers do
    /// when a reliable subscriber has not read the slot they would overwrite.
    pub fn policy(mut self, policy: DeliveryPolicy) -> TopicConfig {
        self.policy = Some(policy);
        self
    }

    /// How long a live reliable subscriber may hold publishers back without reading before
    /// it is evicted (default [`DEFAULT_RELIABLE_TIMEOUT_MS`], 1 s; stored in milliseconds,
    /// 1 ms to one day). The clock is the topic's, not a publisher's: it runs from the first
    /// time any publisher was held back by the subscriber standing where it stands, across
    /// publishers that give up and new ones, in any process; and it runs for every stuck
    /// subscriber at once, so a publisher waits about this long in all, however many are
    /// stuck.
    pub fn reliable_timeout(mut self, timeout: Duration) -> TopicConfig {
        self.reliable_timeout = Some(timeout);
        self
    }

    crate::endpoint::channel::common_setters!("topic");
}
