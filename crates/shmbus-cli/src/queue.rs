//! Queues in the generic verbs: `pub` pushes, `sub` pops.
//!
//! * `pub` on an existing queue pushes `--data` once, or one message per stdin line. A push
//!   blocks while the queue is full (until a consumer makes room). `pub --kind queue
//!   [--capacity N] [--max-element-size B]` creates the queue if missing (default 1024
//!   messages of up to 1024 bytes); sizes given must match an existing queue.
//! * `sub` on a queue pops: each message goes to exactly one consumer, so several `sub`s
//!   share the messages. `--json` lines are `{"seq","ts_ns","ts_mono_ns","len","data"}` with `seq`
//!   the ordinal of the message in this `sub` run (1, 2, …) and `ts_mono_ns` the CLOCK_MONOTONIC
//!   time it was received (a queue keeps neither a sequence number nor a timestamp).
//!   `--from`/`--latest` do not apply to queues.

use std::io::Write;
use std::time::Duration;

use shmbus::admin;
use shmbus::queue::{Queue, QueueConfig, QueueRecvTimeoutError};
use shmbus::time::monotonic_ns;
use shmbus::{Domain, Kind, OpenError};

use crate::output::message_json;
use crate::payload::{Input, Print};
use crate::pubsub::KindArg;
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
    Ok(Queue::create_or_open(domain, name, &config)?)
}

/// `pub` to a queue: pushes `data` once, or one message per stdin line.
pub fn run_pub(
    domain: &Domain,
    name: &str,
    input: &Input,
    create: bool,
    capacity: Option<u64>,
    max_element_size: Option<usize>,
) -> Result<()> {
    let queue = open_for_push(domain, name, create, capacity, max_element_size)?;
    let mut tx = queue.producer()?;
    input.for_each(tx.max_message_len(), |msg| tx.send(msg).map_err(|e| CliError::msg(format!("push failed: {e}"))))
}

/// `sub` on a queue: pops and prints messages.
pub fn run_sub(domain: &Domain, name: &str, count: Option<u64>, timeout_ms: Option<u64>, print: Print) -> Result<()> {
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
                match print {
                    Print::Json => writeln!(out, "{}", message_json(received, ts, msg))?,
                    Print::Payload(format) => crate::payload::write(&mut out, format, msg)?,
                }
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
    topic_sizes: bool,
    (capacity, max_element_size): (Option<u64>, Option<usize>),
) -> Option<Result<()>> {
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
    if !is_queue && max_element_size.is_some() {
        return Some(Err(CliError::msg("--max-element-size is for queues; add --kind queue to create one")));
    }
    is_queue.then(|| run_pub(domain, name, input, kind == Some(KindArg::Queue), capacity, max_element_size))
}

/// `sub`'s queue part: `Some(result)` when the channel is a queue, `None` otherwise.
pub fn sub_if_queue(
    domain: &Domain,
    name: &str,
    count: Option<u64>,
    timeout_ms: Option<u64>,
    print: Print,
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
    Some(run_sub(domain, name, count, timeout_ms, print))
}
