//! # shmbus
//!
//! Shared-memory messaging for Linux. Five channel kinds, one way to wait on any set of
//! them, and the guarantees that make them safe to run in robots and trading systems:
//! no torn message, no hang when a peer is SIGKILLed, no trust in what shared memory holds.
//!
//! * [`topic`]: broadcast pub/sub with the last N messages kept for random access.
//! * [`queue`]: a bounded MPMC queue; each message goes to exactly one consumer.
//! * [`stream`]: an SPSC ring of variable-size records over a double-mapped buffer.
//! * [`pool`]: work dispatch to worker processes, handing the job back when all are busy.
//! * [`journal`]: a persistent, replayable log in a directory, with durable named readers.
//!
//! Channels live in a [`Domain`]: a directory under `/dev/shm` (or `SHMBUS_ROOT`).
//!
//! Layers, bottom up: [`sys`] (mmap, futex, process liveness) → `segment` (header, race-free
//! creation, validation) and `participants` (who holds what; reclaiming the dead) →
//! the channel kinds → [`WaitSet`].

#![warn(missing_docs)]

pub mod admin;
mod copy;
mod crc;
pub mod domain;
// The machinery every kind's endpoints share.
pub(crate) mod endpoint;
pub mod error;
pub(crate) mod event;
pub mod journal;
// The kind registry `admin` describes every kind through.
#[cfg(not(loom))]
pub(crate) mod kind;
pub mod name;
pub(crate) mod participants;
pub mod pool;
pub mod queue;
pub mod segment;
pub mod stream;
pub(crate) mod sync;
pub mod sys;
pub mod topic;
pub mod wait;

pub use domain::Domain;
pub use error::{Corrupt, OpenError};
#[cfg(not(loom))]
pub use journal::{
    Appender, Journal, JournalConfig, JournalRecvError, JournalRecvTimeoutError, JournalSendError, JournalStatus,
    JournalTierError, JournalTryRecvError, Tailer,
};
pub use name::{validate_name, NameError};
pub use participants::ParticipantInfo;
pub mod pod;
pub use pod::{PayloadType, Pod, StoredPayloadType};
#[cfg(not(loom))]
pub use pool::{
    Dispatcher, Job, JobInfo, JobRef, Pool, PoolConfig, PoolRecvError, PoolRecvTimeoutError, PoolStatus,
    PoolTryRecvError, PoolTrySendError, Worker,
};
#[cfg(not(loom))]
pub use queue::{
    Consumer, Producer, Queue, QueueConfig, QueueRecvError, QueueRecvTimeoutError, QueueSendError,
    QueueSendTimeoutError, QueueStatus, QueueTryRecvError, QueueTrySendError,
};
pub use segment::{CreateOptions, HeaderInfo, Kind};
#[cfg(not(loom))]
pub use stream::{
    Stream, StreamConfig, StreamReader, StreamRecvError, StreamRecvTimeoutError, StreamSendError,
    StreamSendTimeoutError, StreamStatus, StreamTryRecvError, StreamTrySendError, StreamWriter,
};
#[cfg(not(loom))]
pub use topic::{
    Publisher, Subscriber, Topic, TopicConfig, TopicGetError, TopicRecvError, TopicRecvTimeoutError, TopicSendError,
    TopicStatus, TopicTryRecvError,
};
pub use wait::WaitPolicy;
#[cfg(not(loom))]
pub use {
    pool::{TypedDispatcher, TypedWorker},
    queue::{TypedConsumer, TypedProducer},
    stream::{TypedStreamReader, TypedStreamWriter},
    topic::{TypedPublisher, TypedSubscriber},
};
#[cfg(not(loom))]
pub mod waitset;
#[cfg(not(loom))]
pub use waitset::{WaitError, WaitHandle, WaitSet, WaitTimeoutError, Waitable};
