//! Queues in the generic verbs: `pub` pushes, `sub` pops.
//!
//! * `pub` on an existing queue pushes `--data` once (or `--count` times), or one message per
//!   stdin line. A push waits while the queue is full until a consumer makes room: for ever,
//!   or with `--timeout-ms` at most that long before failing. `pub --kind queue
//!   [--capacity N] [--max-element-size B]` creates the queue if missing (default 1024
//!   messages of up to 1024 bytes); sizes given must match an existing queue.
//! * `sub` on a queue pops: each message goes to exactly one consumer, so several `sub`s
//!   share the messages. `--json` lines are `{"seq","ts_mono_ns","len","data"}` with `seq`
//!   the ordinal of the message in this `sub` run (1, 2, …) and `ts_mono_ns` the CLOCK_MONOTONIC
//!   time it was received (a queue keeps neither a sequence number nor a timestamp).
//!   `--from`/`--latest` do not apply to queues.

use std::io::Write;
use std::time::Duration;

use shmbus::admin;
use shmbus::queue::{Queue, QueueConfig, QueueRecvTimeoutError, QueueSendTimeoutError};
use shmbus::time::monotonic_ns;
use shmbus::{Domain, Kind, OpenError};

use crate::output::Received;
use crate::payload::Input;
use crate::pubsub::{KindArg, Repeat};
use crate::schema::Printer;
use crate::{CliError, Result};

/// The kind of the existing channel `name`, if it exists and is valid.
pub fn existing_kind(domain: &Domain, name: &str) -> Result<Option<Kind>> {
    let path = domain.channel_path(name)?;
    match admin::inspect(&path) {
        Ok(r) => Ok(Some(r.header.kind)),
        Err(OpenError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Opens the queue, creating it when `create`. Sizes not given are taken from an existing
/// queue (or the defaults); sizes given must match an existing queue.
fn open_for_push(
    domain: &Domain,
    name: &str,
    create: bool,
    capacity: Option<u64>,
    max_element_size: Option<usize>,
    schema: Option<shmbus::Schema>,
) -> Result<Queue> {
    if !create {
        Queue::open(domain, name)?; // must exist: NotFound otherwise
    }
    let mut config = QueueConfig::default();
    if let Some(c) = capacity {
        config = config.capacity(c);
    }
    if let Some(m) = max_element_size {
        config = config.max_message_len(m);
    }
    if let Some(s) = schema {
        config = config.schema(s);
    }
    Ok(Queue::create_or_open(domain, name, &config)?)
}

/// `pub`'s queue options.
#[derive(Debug, Clone, Default)]
pub struct PubQueue {
    /// `--capacity`: messages the queue holds, when creating it.
    pub capacity: Option<u64>,
    /// `--max-element-size`: largest message, when creating it.
    pub max_element_size: Option<usize>,
    /// `--timeout-ms`: the longest a push waits for room.
    pub timeout_ms: Option<u64>,
    /// `--message-encoding` and the other schema flags: the schema, when creating it.
    pub schema: Option<shmbus::Schema>,
}

/// `pub` to a queue: pushes `data` once (or as `repeat` says), or one message per stdin line.
pub fn run_pub(
    domain: &Domain,
    name: &str,
    input: &Input,
    repeat: Repeat,
    create: bool,
    opts: PubQueue,
) -> Result<u64> {
    let queue = open_for_push(domain, name, create, opts.capacity, opts.max_element_size, opts.schema.clone())?;
    let mut tx = queue.producer()?;
    crate::pubsub::publish(input, tx.max_message_len(), repeat, |msg| {
        let r = match opts.timeout_ms {
            Some(ms) => tx.send_timeout(msg, Duration::from_millis(ms)),
            None => tx.send(msg).map_err(QueueSendTimeoutError::from),
        };
        r.map_err(|e| match e {
            QueueSendTimeoutError::Timeout => CliError::msg(format!(
                "push failed: queue {}/{name} stayed full for {} ms (no consumer made room)",
                domain.name(),
                opts.timeout_ms.unwrap_or(0)
            )),
            e => CliError::during("push failed", e),
        })
    })
}

/// `sub` on a queue: pops and prints messages.
pub fn run_sub(
    domain: &Domain,
    name: &str,
    count: Option<u64>,
    timeout_ms: Option<u64>,
    printer: &mut Printer,
) -> Result<()> {
    let queue = Queue::open(domain, name)?;
    let mut rx = queue.consumer()?;
    let mut buf = Vec::with_capacity(rx.max_message_len());
    let mut out = std::io::stdout().lock();
    let mut received = 0u64;
    while count.is_none_or(|n| received < n) {
        let r = match timeout_ms {
            Some(ms) => rx.recv_into_timeout(&mut buf, Duration::from_millis(ms)),
            None => rx.recv_into(&mut buf).map_err(QueueRecvTimeoutError::from),
        };
        match r {
            Ok(len) => {
                let ts = monotonic_ns();
                received += 1;
                let msg = &buf[..len];
                printer.write(&mut out, Received::new(received, ts), msg)?;
                out.flush()?;
            }
            Err(QueueRecvTimeoutError::Timeout) => {
                let of = count.map(|n| format!(" of {n}")).unwrap_or_default();
                return Err(CliError::msg(format!(
                    "timed out: no message in queue {}/{name} for {} ms ({received}{of} received)",
                    domain.name(),
                    timeout_ms.unwrap_or(0)
                )));
            }
            // Reported once: the receive that met the corruption repaired what it could, but
            // a `sub` that went on would print the same line for every bad cell it met.
            Err(e) => {
                return Err(CliError::msg(format!(
                    "receive from queue {}/{name} failed after {received} message(s): {e}",
                    domain.name()
                )))
            }
        }
    }
    Ok(())
}

/// `pub`'s queue part: `Some(result)` when the channel is (or is to be created as) a queue,
/// or when queue options are misused; `None` to go on as a topic.
pub fn pub_if_queue(
    domain: &Domain,
    name: &str,
    kind: Option<KindArg>,
    input: &Input,
    repeat: Repeat,
    topic_sizes: bool,
    opts: PubQueue,
) -> Option<Result<u64>> {
    let is_queue = match kind {
        Some(KindArg::Queue) => true,
        Some(KindArg::Stream | KindArg::Topic) => false,
        None => matches!(existing_kind(domain, name), Ok(Some(Kind::Queue))),
    };
    if is_queue && topic_sizes {
        return Some(Err(CliError::msg(format!(
            "{name} is a queue: --slot-size and --history are for topics; use --capacity and --max-element-size"
        ))));
    }
    // (`--capacity` without `--kind queue` is a stream's ring size: not ours to judge.)
    if !is_queue && opts.max_element_size.is_some() {
        return Some(Err(CliError::msg("--max-element-size is for queues; add --kind queue to create one")));
    }
    is_queue.then(|| run_pub(domain, name, input, repeat, kind == Some(KindArg::Queue), opts))
}

/// `sub`'s queue part: `Some(result)` when the channel is a queue, `None` otherwise.
pub fn sub_if_queue(
    domain: &Domain,
    name: &str,
    count: Option<u64>,
    timeout_ms: Option<u64>,
    printer: &mut Printer,
    topic_start: bool,
) -> Option<Result<()>> {
    if !matches!(existing_kind(domain, name), Ok(Some(Kind::Queue))) {
        return None;
    }
    if topic_start {
        return Some(Err(CliError::msg(format!(
            "{}/{name} is a queue: --from and --latest are for topics (a queue hands each message to one consumer, oldest first)",
            domain.name()
        ))));
    }
    Some(run_sub(domain, name, count, timeout_ms, printer))
}
