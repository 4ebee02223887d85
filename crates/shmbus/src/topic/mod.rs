//! Topics: broadcast publish/subscribe with the last N messages kept for random access.
//!
//! A topic has a fixed slot size and history depth N, set at creation. Every message gets a
//! sequence number (1, 2, …), a `CLOCK_MONOTONIC` timestamp and a length. Any number of
//! [`Publisher`]s (up to the participant limit) share a topic; each [`Subscriber`] reads in
//! order with gap reports, reads the latest, or reads any of the last N by sequence number.
//!
//! Reads are either a validated **copy** (never torn: a seqlock check after the copy) or a
//! zero-copy **pinned** [`Sample`] that no publisher overwrites while it is held. On a topic
//! of the default [`DeliveryPolicy::Overwrite`], publishers never wait for subscribers:
//! pinned slots are skipped, and only when *every* slot is pinned does a send fail
//! ([`TopicSendError::AllPinned`]). Sending touches no per-subscriber state, so its cost does
//! not grow with the number of subscribers.
//!
//! **Lossless delivery.** A topic created with [`DeliveryPolicy::Block`] or
//! [`DeliveryPolicy::Fail`] never overwrites a message a *reliable* subscriber
//! ([`Topic::reliable_subscriber`]) has not read: [`Publisher::send`] waits (`block`) or
//! returns [`TopicSendError::Full`] (`fail`); [`Publisher::try_send`] never waits and
//! [`Publisher::send_timeout`] waits up to a timeout. A reliable subscriber that dies is
//! dropped within about 10 ms; one that stops reading is evicted after the topic's reliable
//! timeout and told by [`TopicTryRecvError::Evicted`].
//!
//! A [`Subscriber`] receives in order with three families, each with a `try_` form, a
//! blocking form and a `_timeout` form: owned ([`Subscriber::recv`] → [`Message`]), into a
//! caller's buffer ([`Subscriber::recv_into`] → [`MessageInfo`]) and zero-copy
//! ([`Subscriber::recv_ref`] → [`Sample`]). It also reads by sequence number
//! ([`Subscriber::get`], [`Subscriber::get_ref`], [`Subscriber::latest`]), iterates
//! ([`Subscriber::iter`], [`Subscriber::try_iter`]) and waits in a
//! [`WaitSet`](crate::WaitSet). Its receives take `&self`, so that several samples can be held
//! at once.
//!
//! The algorithm and its invariants are in the `protocol` module's docs.
//!
//! # Sizing
//! A topic has `history + spare_slots` slots. The last `history` messages stay readable as
//! long as at most `spare_slots` slots are pinned at once; pins beyond that shorten the
//! history instead of blocking the publisher.
//!
//! # Crash safety
//! * A publisher killed mid-write never exposes its partial message: the slot is reclaimed
//!   (by the next publisher that finds no free slot, a new participant, or `shmbus clean`),
//!   and the sequence number it had claimed — if any — is reported to subscribers as a gap
//!   ([`TopicTryRecvError::Lagged`]) once its death is noticed: at most about 1 ms plus one
//!   `/proc` lookup after a waiting subscriber first sees the later messages.
//! * A subscriber killed while holding pins: its pins are cleared when its participant
//!   entry is reclaimed (at the latest when a publisher finds every slot pinned).
//!
//! ```
//! use shmbus::{Domain, topic::{Topic, TopicConfig}};
//! # let dir = tempfile_dir();
//! let domain = Domain::with_root("example", &dir)?;
//! let config = TopicConfig::default().max_message_len(64).history(8);
//! let topic = Topic::create_or_open(&domain, "imu", &config)?;
//! let mut publisher = topic.publisher()?;
//! let subscriber = topic.subscriber()?;
//! let seq = publisher.send(b"hello")?;
//! let msg = subscriber.try_recv()?;
//! assert_eq!((msg.seq(), msg.data()), (seq, &b"hello"[..]));
//!
//! let mut loan = publisher.loan()?;
//! loan[..5].copy_from_slice(b"world");
//! loan.truncate(5);
//! loan.send()?;
//! let sample = subscriber.recv_ref()?;
//! assert_eq!(&*sample, b"world");
//! # fn tempfile_dir() -> std::path::PathBuf { let d = std::env::temp_dir().join(format!("shmbus-doc-{}", std::process::id())); std::fs::create_dir_all(&d).unwrap(); d }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// The lock-free core; public only to the loom models (`tests/loom_topic.rs`).
#[cfg(loom)]
pub mod protocol;
#[cfg(not(loom))]
pub(crate) mod protocol;

#[cfg(not(loom))]
mod config;
#[cfg(not(loom))]
mod describe;
#[cfg(not(loom))]
mod error;
#[cfg(not(loom))]
mod handle;
#[cfg(not(loom))]
mod layout;
#[cfg(not(loom))]
mod publisher;
#[cfg(not(loom))]
mod shared;
#[cfg(not(loom))]
mod subscriber;
#[cfg(not(loom))]
mod typed;

#[cfg(not(loom))]
pub use config::{
    DeliveryPolicy, TopicConfig, DEFAULT_HISTORY, DEFAULT_MAX_MESSAGE_LEN, DEFAULT_RELIABLE_TIMEOUT_MS,
    DEFAULT_SPARE_SLOTS,
};
#[cfg(not(loom))]
pub(crate) use describe::TopicKind;
#[cfg(not(loom))]
pub use error::{
    TopicGetError, TopicRecvError, TopicRecvTimeoutError, TopicSendError, TopicSendTimeoutError, TopicTryRecvError,
    TopicTrySendError,
};
#[cfg(not(loom))]
pub use handle::{Topic, TopicStatus};
#[cfg(not(loom))]
pub use publisher::{Loan, OwnedLoan, Publisher};
#[cfg(not(loom))]
pub use subscriber::{HoldsSubscriber, Iter, Message, MessageInfo, OwnedSample, Sample, Subscriber, TryIter};
#[cfg(not(loom))]
pub use typed::{TypedLoan, TypedPublisher, TypedSample, TypedSubscriber};
