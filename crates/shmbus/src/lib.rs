//! # shmbus
//!
//! Shared-memory messaging for Linux. Six channel kinds, one way to wait on any set of
//! them, and the guarantees that make them safe to run in robots and trading systems:
//! no torn message, no hang when a peer is SIGKILLed, no trust in what shared memory holds.
//!
//! # Quick start
//!
//! ```
//! use shmbus::{Domain, Topic, TopicConfig};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let scratch = std::env::temp_dir().join(format!("shmbus-quickstart-{}", std::process::id()));
//! # std::fs::create_dir_all(&scratch)?;
//! // A domain is a directory of channels. `Domain::new("robot1")` puts it under /dev/shm;
//! // this one lives in a scratch directory.
//! let domain = Domain::with_root("robot1", &scratch)?;
//! let topic = Topic::create_or_open(&domain, "imu", &TopicConfig::default().max_message_len(64))?;
//! let mut publisher = topic.publisher()?;
//! // Usually in another process, through `Topic::open(&domain, "imu")?.subscriber()?`.
//! let subscriber = topic.subscriber()?;
//!
//! let seq = publisher.send(b"hello")?;
//! let msg = subscriber.recv()?;
//! assert_eq!((msg.seq(), msg.data()), (seq, &b"hello"[..]));
//! # std::fs::remove_dir_all(&scratch)?;
//! # Ok(()) }
//! ```
//!
//! Every kind is made, opened, sent on and received from the same way (`docs/api.md`):
//! `<Kind>::create_or_open(&domain, name, &config)` or `<Kind>::open(&domain, name)`, an
//! endpoint from the handle, then crossbeam-channel's verbs (`try_send` / `send` /
//! `send_timeout`, `try_recv` / `recv` / `recv_timeout` / `recv_deadline`). Every receive is
//! one call that takes a [`Wait`], `recv_with(wait)` (the [`Receive`] contract every
//! receiver keeps); the named forms are it with each wait. Each kind's page has an example.
//!
//! # Kinds
//!
//! * [`topic`]: broadcast pub/sub with the last N messages kept for random access.
//! * [`queue`]: a bounded MPMC queue; each message goes to exactly one consumer.
//! * [`stream`]: an SPSC ring of variable-size records over a double-mapped buffer.
//! * [`pool`]: work dispatch to worker processes, handing the job back when all are busy.
//! * [`service`]: request/response between clients and competing servers, responses in place.
//! * [`journal`]: a persistent, replayable log in a directory, with durable named readers.
//!
//! Channels live in a [`Domain`]: a directory under `/dev/shm` (or `SHMBUS_ROOT`). Any set of
//! endpoints of any kinds can be waited on at once with a [`WaitSet`]; [`admin`] lists,
//! inspects and cleans channels (the `shmbus` tool's `ls`, `info` and `clean`).
//!
//! Layers, bottom up; no module imports one above it (a test checks that the modules import
//! each other in no circle):
//!
//! 1. `sys` (mmap, futex, files, process liveness, clocks; every OS call goes through it),
//!    with the leaves every layer uses: [`name`] (channel and domain names), [`Kind`], `sync`
//!    (the atomics loom swaps in), `crc`, `copy`.
//! 2. [`error`] (the errors shared by every kind, [`ErrorKind`], [`Failure`]), `event` (the
//!    futex words), [`lend`] (owned lending, for holders such as the bindings).
//! 3. [`domain`] (directories, trust) and `participants` (who holds what; reclaiming the
//!    dead), then [`pod`] and [`schema`] (what a channel carries), then [`stats`]' counter
//!    blocks.
//! 4. `segment` (header, race-free creation, validation), `wait` (spin, then sleep), and
//!    `describe` (what a kind tells tools about itself).
//! 5. `endpoint` (the machinery every kind's endpoints share, and the receive contract:
//!    [`Receive`], [`Waited`]).
//! 6. The kinds, each folder with the same roles: `config`, `layout`, `protocol` (the
//!    lock-free core), `shared` (the state its handle and endpoints share), the endpoints,
//!    `handle`, `describe`, `error`, `typed`.
//! 7. On top: [`admin`] (the kind registry; `ls`, `info`, `clean`), [`watch`] (discovery
//!    events), [`WaitSet`], [`typed`], async receive and [`stats`]' snapshots.
//!
//! Of `sys`, only the clock ([`time::monotonic_ns`]) and the SIGBUS handler's switch and
//! counters ([`disable_sigbus_handler`], [`sigbus`]) are public.

//! # Cargo features
//!
//! * `internals` (off): makes `sys`, `segment`, the journal's `format` and `protocol`
//!   modules and test hooks public, hidden from the docs, for this workspace's tests,
//!   benchmarks and fuzz targets. It is not part of the API: anything under it may change in
//!   any release.
//! * `tokio` (off): async receive, `shmbus::r#async`: `recv_async().await` on every receiving
//!   endpoint, an async wait over many channels and `Stream` adapters. Runtime-agnostic
//!   (std wakers), tested under tokio; adds `futures-core`.

#![warn(missing_docs)]
// A loom build (`--cfg loom`) compiles only what the loom models need of the endpoints and
// leaves out the kinds' channel glue that calls the rest: dead code there is expected.
#![cfg_attr(loom, allow(dead_code))]

pub mod admin;
#[cfg(all(feature = "tokio", not(loom)))]
pub mod r#async;
mod copy;
mod crc;
pub mod domain;
// The machinery every kind's endpoints share.
pub(crate) mod endpoint;
pub mod error;
pub(crate) mod event;
pub mod journal;
// The channel kinds' identity, below everything that names a kind.
pub(crate) mod kind;
pub mod lend;
// What every kind tells tools about itself, below the kinds (`admin` holds the registry).
pub(crate) mod describe;
pub mod name;
// Public only to the loom models (`tests/loom_topic.rs`, `tests/loom_queue.rs`).
#[cfg(loom)]
pub mod participants;
#[cfg(not(loom))]
pub(crate) mod participants;
pub mod pool;
pub mod queue;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod segment;
#[cfg(not(feature = "internals"))]
pub(crate) mod segment;
pub mod service;
pub mod stats;
pub mod stream;
pub(crate) mod sync;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod sys;
#[cfg(not(feature = "internals"))]
pub(crate) mod sys;
pub mod topic;
#[cfg(not(loom))]
pub mod typed;
pub mod wait;
#[cfg(not(loom))]
pub mod watch;

pub use domain::Domain;
pub use error::{Corrupt, ErrorKind, Failure, OpenError, RecvIntoSliceError, WaitForError};
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
/// `#[derive(shmbus::Pod)]`: see the derive's own page and [`pod::Pod`].
#[cfg(feature = "derive")]
pub use shmbus_derive::Pod;
pub mod schema;
pub use endpoint::receive::{Receive, ReceiveInto, ReceiveRef, RecvErrors, Waited};
pub use endpoint::send::{Refusal, Refused, SendErrors, Transmit};
pub use kind::Kind;
pub use schema::{Schema, SchemaError};
pub use segment::HeaderInfo;
#[cfg(not(loom))]
pub use service::{ActiveRequest, Client, Response, Server, Service, ServiceConfig, ServiceStatus};
#[cfg(not(loom))]
pub use stream::{
    Stream, StreamConfig, StreamReader, StreamRecvError, StreamRecvTimeoutError, StreamSendError,
    StreamSendTimeoutError, StreamStatus, StreamTryRecvError, StreamTrySendError, StreamWriter,
};
pub use sys::fs::FileKind;
pub use sys::sigbus::disable_handler as disable_sigbus_handler;
pub use sys::ProcessId;
#[cfg(not(loom))]
pub use topic::{
    DeliveryPolicy, Publisher, Subscriber, Topic, TopicConfig, TopicGetError, TopicRecvError, TopicRecvTimeoutError,
    TopicSendError, TopicSendTimeoutError, TopicStatus, TopicTryRecvError, TopicTrySendError,
};
pub use wait::{Wait, WaitPolicy};
#[cfg(not(loom))]
pub use {
    journal::{TypedAppender, TypedTailer},
    pool::{TypedDispatcher, TypedWorker},
    queue::{TypedConsumer, TypedProducer},
    stream::{TypedStreamReader, TypedStreamWriter},
    topic::{TypedPublisher, TypedSubscriber},
};
#[cfg(not(loom))]
pub mod waitset;
#[cfg(not(loom))]
pub use waitset::{WaitError, WaitHandle, WaitSet, WaitTimeoutError, Waitable};

pub mod time {
    //! The clock shmbus stamps messages with.

    pub use crate::sys::monotonic_ns;
}

pub mod sigbus {
    //! Containing `SIGBUS` on shmbus mappings: the handler's counters, and the hook for an
    //! application that keeps its own handler.
    //!
    //! A channel file that another process truncates (or that tmpfs cannot back) would kill a
    //! process touching its mapping with `SIGBUS`. shmbus installs a process-wide handler,
    //! the first time a mapping is made, that replaces the lost page with zeros and lets the
    //! endpoint report the truncation as an error. Opt out with
    //! [`disable_sigbus_handler`](crate::disable_sigbus_handler) or by setting
    //! [`OPT_OUT_ENV`]; see `docs/robustness.md`.

    pub use crate::sys::sigbus::{contain_fault, contained_faults, handler_disabled, handler_installed, OPT_OUT_ENV};
}
