//! The transports a ping-pong runs over, one file each.
//!
//! A transport is a factory ([`Transport`]) that makes the two ends ([`Endpoint`]) of a
//! two-way channel between the *ping* process (which measures) and the *echo* process
//! (which answers). The ping side calls [`Transport::open`], which returns its own endpoint
//! and a [`Handoff`]: file descriptors and strings that the driver passes to the echo
//! process across `exec`. The echo process rebuilds its endpoint with [`Transport::attach`].
//!
//! To add a transport: write a type implementing [`Transport`] in a new file here, declare
//! the module below and list the type in [`ALL`]. The driver, the CLI, the output and the
//! tests pick it up from that list.

use std::io;
use std::os::fd::OwnedFd;

use crate::waiter::Waiter;

mod fd_stream;
pub mod floor;
pub mod futex_floor;
#[cfg(feature = "iceoryx2")]
pub mod iceoryx2;
pub mod journal;
pub mod pipe;
pub mod queue;
pub mod redis;
pub mod service;
mod shm_lanes;
pub mod shmbus_kinds;
pub mod stream;
pub mod tcp;
pub mod topic;
pub mod uds;

/// How a waiting side waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Busy-poll: lowest latency, burns a core.
    Spin,
    /// Sleep in the kernel until woken.
    Block,
    /// pingpong over `topic` or `queue` only: each side receives with `recv_async().await`
    /// in a current-thread tokio runtime (shmbus feature `tokio`) and sends as in `block`.
    /// Other transports run it as `block`; other subcommands refuse it.
    Async,
}

impl Mode {
    /// The name used on the command line and in the output.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Spin => "spin",
            Mode::Block => "block",
            Mode::Async => "async",
        }
    }
}

/// `mode`, refused if it is [`Mode::Async`]: for the subcommands that have no async
/// receive (only `pingpong` over topic and queue has).
pub fn sync_only(mode: Mode) -> Result<Mode, String> {
    match mode {
        Mode::Async => Err("--mode async is only for pingpong over topic or queue".into()),
        m => Ok(m),
    }
}

/// How the payload moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Payload {
    /// Zero-copy: the sender writes only the first and last byte in place, the receiver
    /// reads only those.
    Touch,
    /// The full payload is copied in on send and out on receive.
    Copy,
}

impl Payload {
    /// The name used on the command line and in the output.
    pub fn as_str(self) -> &'static str {
        match self {
            Payload::Touch => "touch",
            Payload::Copy => "copy",
        }
    }
}

/// What one run asks of a transport. `mode` and `payload` are the effective ones (after
/// [`Transport::mode`] and [`Transport::payload`]).
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// Message size in bytes, at least 1.
    pub size: usize,
    /// How the waiting sides wait.
    pub mode: Mode,
    /// How the payload moves.
    pub payload: Payload,
}

/// What the ping side hands to the echo process.
///
/// The file descriptors are inherited across `exec` under the same numbers; the strings are
/// passed as arguments. Order is kept.
#[derive(Debug, Default)]
pub struct Handoff {
    /// Descriptors the echo process takes ownership of.
    pub fds: Vec<OwnedFd>,
    /// Extra strings (names, ports, …) the transport needs to attach.
    pub args: Vec<String>,
}

/// One kind of channel that can be measured.
pub trait Transport: Sync {
    /// The name given to `--transport` and printed in the output.
    fn name(&self) -> &'static str;

    /// The mode this transport really runs in when `requested` is asked for. Transports
    /// whose waiting is fixed (the floors) override this; only those that have an async
    /// receive (topic, queue) keep [`Mode::Async`].
    fn mode(&self, requested: Mode) -> Mode {
        match requested {
            Mode::Async => Mode::Block,
            m => m,
        }
    }

    /// The payload handling this transport really does when `requested` is asked for.
    /// Byte streams always copy.
    fn payload(&self, _requested: Payload) -> Payload {
        Payload::Copy
    }

    /// Ping side: creates the channel; returns the ping endpoint and what the echo process
    /// needs to attach.
    fn open(&self, params: &Params) -> io::Result<(Box<dyn Endpoint>, Handoff)>;

    /// Echo side: attaches to the channel that [`Transport::open`] created.
    fn attach(&self, params: &Params, handoff: Handoff) -> io::Result<Box<dyn Endpoint>>;
}

/// Prints the transport's name.
impl std::fmt::Debug for dyn Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One end of a two-way channel. Messages are exactly `params.size` bytes.
pub trait Endpoint {
    /// Sends `msg` to the peer.
    fn send(&mut self, msg: &[u8], waiter: &mut Waiter<'_>) -> io::Result<()>;

    /// Receives the peer's next message into `buf`, which holds `params.size` bytes on entry
    /// and must on return. A `Vec` rather than a slice so that the shmbus kinds whose copying
    /// receive fills a caller's `Vec` (topic `try_recv_into`, stream `try_read_into`) copy
    /// the payload once, straight into the caller's buffer, as a user of them would; the
    /// other transports write into `buf.as_mut_slice()`. With [`Payload::Touch`] only the
    /// first and last byte of `buf` are written.
    fn recv(&mut self, buf: &mut Vec<u8>, waiter: &mut Waiter<'_>) -> io::Result<()>;
}

/// Every transport, in the order they are listed in help and errors.
pub static ALL: &[&dyn Transport] = &[
    &floor::Floor,
    &futex_floor::FutexFloor,
    &topic::TopicTransport { lossless: false },
    &topic::TopicTransport { lossless: true },
    &stream::StreamTransport,
    &queue::QueueTransport,
    &service::ServiceTransport,
    &journal::JOURNAL,
    &pipe::Pipe,
    &uds::Uds,
    &tcp::Tcp,
    &redis::PUBSUB_TCP,
    &redis::PUBSUB_UDS,
    &redis::STREAM_TCP,
    &redis::STREAM_UDS,
    #[cfg(feature = "iceoryx2")]
    &iceoryx2::Iceoryx2,
    #[cfg(feature = "iceoryx2")]
    &iceoryx2::Iceoryx2Rr,
];

/// The transport called `name`.
pub fn by_name(name: &str) -> Option<&'static dyn Transport> {
    ALL.iter().copied().find(|t| t.name() == name)
}

/// The names of all transports, comma-separated (for messages).
pub fn names() -> String {
    ALL.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
}
