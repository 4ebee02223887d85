//! The topic handle: opening a topic, its status, and the endpoints it makes.

use std::sync::Arc;
use std::time::Duration;

use super::config::{DeliveryPolicy, TopicConfig};
use super::layout::TopicLayout;
use super::protocol::{ROLE_PUBLISHER, ROLE_SUBSCRIBER};
use super::publisher::Publisher;
use super::shared::Inner;
use super::subscriber::Subscriber;
use crate::domain::Domain;
use crate::endpoint::channel::Channel;
use crate::error::OpenError;
use crate::pod::PayloadType;
use crate::sys::{process_is_alive, ReadOnly};

/// An open topic: a shared handle to its mapping. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Topic {
    inner: Arc<Inner>,
}

/// A snapshot of a topic's state, from [`Topic::status`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicStatus {
    /// Largest message in bytes.
    pub max_message_len: u64,
    /// Guaranteed history depth.
    pub history: u64,
    /// Total slots (history + spare).
    pub slots: u64,
    /// Highest committed sequence number (0: none yet).
    pub last_seq: u64,
    /// Live publishers.
    pub publishers: usize,
    /// Live subscribers.
    pub subscribers: usize,
    /// Slots pinned right now.
    pub pinned_slots: usize,
    /// The delivery policy.
    pub policy: DeliveryPolicy,
    /// How long a live reliable subscriber may hold publishers back without reading.
    pub reliable_timeout: Duration,
    /// Live reliable subscribers (not evicted).
    pub reliable_subscribers: usize,
    /// The channel's schema (`None`: it has none).
    pub schema: Option<std::sync::Arc<crate::Schema>>,
}

impl Topic {
    /// Opens topic `name`, creating it with `config` if it does not exist. The values `config`
    /// sets must match an existing topic (else [`OpenError::LayoutMismatch`] names both);
    /// the values it leaves unset accept the existing topic's, or take their defaults when
    /// the topic is created.
    pub fn create_or_open(domain: &Domain, name: &str, config: &TopicConfig) -> Result<Topic, OpenError> {
        Ok(Topic { inner: Arc::new(Channel::create_or_open(domain, name, config)?) })
    }

    /// Opens an existing topic.
    pub fn open(domain: &Domain, name: &str) -> Result<Topic, OpenError> {
        Ok(Topic { inner: Arc::new(Channel::open(domain, name)?) })
    }

    /// Reads the status of topic `name` without joining it: the file is opened and mapped
    /// read-only, so read permission suffices, and nothing is registered or written.
    pub fn status(domain: &Domain, name: &str) -> Result<TopicStatus, OpenError> {
        let chan = Channel::<TopicLayout, ReadOnly>::open_read_only(domain, name)?;
        let (sv, layout) = (chan.status_view(), chan.layout());
        Ok(TopicStatus {
            max_message_len: layout.slot_size,
            history: layout.history,
            slots: layout.slots,
            last_seq: sv.committed_max(),
            publishers: sv.participants.live_in_role(ROLE_PUBLISHER, process_is_alive),
            subscribers: sv.participants.live_in_role(ROLE_SUBSCRIBER, process_is_alive),
            pinned_slots: sv.pinned_slots(),
            policy: DeliveryPolicy::from_u64(layout.policy).unwrap_or_default(),
            reliable_timeout: Duration::from_millis(layout.reliable_timeout_ms),
            reliable_subscribers: sv.reliable_subscribers(),
            schema: chan.schema().cloned(),
        })
    }

    /// Checks that this topic can carry `t` (see [`Channel::check_type`]).
    pub(super) fn check_type(&self, t: &PayloadType) -> Result<(), OpenError> {
        self.inner.check_type(t)
    }

    /// The topic's schema, set by its creator (`None`: it has none; see [`Schema`](crate::Schema)).
    pub fn schema(&self) -> Option<&crate::Schema> {
        self.inner.schema().map(|s| &**s)
    }

    /// Maps every page of this topic into this process now, so that no send or receive of
    /// this process takes a page fault the first time it touches a page.
    ///
    /// The topic's memory is allocated when it is made; what each process lacks is its own
    /// page-table entries, one fault per 4 KiB page at its first touch. With large slots that
    /// is hundreds of faults per message over the first pass through the history (a 1 MiB
    /// slot is 256 pages). Call it once after opening, in a long-lived process on a latency
    /// path: it takes a moment (milliseconds for tens of MiB) and the page tables of the
    /// whole file (about 2 KiB per MiB). Advisory: before Linux 5.14, or over a file cut
    /// short, it does nothing.
    pub fn prefault(&self) {
        self.inner.prefault();
    }

    /// The topic's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Largest message in bytes.
    pub fn max_message_len(&self) -> usize {
        self.inner.layout().slot_size as usize
    }

    /// Guaranteed history depth.
    pub fn history(&self) -> usize {
        self.inner.layout().history as usize
    }

    /// A new publisher. Fails with [`OpenError::TooManyParticipants`] when every participant
    /// entry is taken by a live process.
    pub fn publisher(&self) -> Result<Publisher, OpenError> {
        let id = self.inner.register(ROLE_PUBLISHER)?;
        Ok(Publisher::new(self.inner.clone(), id))
    }

    /// A new subscriber that receives messages published from now on. Fails with
    /// [`OpenError::TooManyParticipants`] when every participant entry is taken by a live
    /// process.
    pub fn subscriber(&self) -> Result<Subscriber, OpenError> {
        let id = self.inner.register(ROLE_SUBSCRIBER)?;
        Ok(Subscriber::new(self.inner.clone(), id))
    }

    /// A new *reliable* subscriber: on a `block` or `fail` topic, publishers do not overwrite
    /// a message it has not read (see [`DeliveryPolicy`]), unless it dies (dropped at once)
    /// or does not move for the topic's reliable timeout while publishers are held back (by
    /// it or by another; whichever publisher, in any process: evicted, it receives on as a lossy
    /// subscriber, and its next receive returns the `Evicted` error once). It starts with
    /// the messages published from now on; [`Subscriber::seek_oldest`] moves it back to the
    /// oldest message publishers still keep for it. Fails with [`OpenError::InvalidConfig`]
    /// on an `overwrite` topic, whose publishers read no cursor.
    pub fn reliable_subscriber(&self) -> Result<Subscriber, OpenError> {
        if self.inner.policy() == DeliveryPolicy::Overwrite {
            return Err(OpenError::InvalidConfig {
                what: format!(
                    "topic {} has delivery policy overwrite, which keeps no message for a reliable subscriber; create it with policy block or fail",
                    self.name()
                ),
            });
        }
        let id = self.inner.register(ROLE_SUBSCRIBER)?;
        let sub = Subscriber::new(self.inner.clone(), id);
        sub.make_reliable();
        Ok(sub)
    }

    /// The topic's delivery policy.
    pub fn policy(&self) -> DeliveryPolicy {
        self.inner.policy()
    }

    /// Highest committed sequence number (0: none yet).
    pub fn last_seq(&self) -> u64 {
        self.inner.shared().committed_max()
    }

    /// Reclaims what dead participants held (their slots, pins and entries). Returns how
    /// many entries were reclaimed. Runs automatically when needed; exposed for tools.
    pub fn reclaim_dead(&self) -> usize {
        self.inner.reclaim_dead()
    }
}
