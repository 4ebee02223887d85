//! `shmbus pub` and `shmbus sub`: drive a topic from the shell.

use std::io::{BufRead, Write};
use std::time::Duration;

use shmbus::topic::{Publisher, RecvError, Topic, TopicConfig};
use shmbus::{Domain, OpenError};

use crate::output::message_json;
use crate::{CliError, Ctx, Result};

/// Slot size of a topic `pub` creates when none is given.
pub const DEFAULT_SLOT_SIZE: usize = 4096;
/// History of a topic `pub` creates when none is given.
pub const DEFAULT_HISTORY: usize = 16;

/// `shmbus pub --domain D NAME [--slot-size BYTES] [--history N] [--data TEXT]`
#[derive(Debug, clap::Args)]
pub struct PubArgs {
    /// The topic's domain.
    #[arg(long)]
    domain: String,
    /// The topic's name.
    name: String,
    /// Largest message in bytes. Used when creating the topic (default 4096); if the topic
    /// exists with another slot size, `pub` fails.
    #[arg(long, value_name = "BYTES")]
    slot_size: Option<usize>,
    /// Messages kept for random access. Used when creating the topic (default 16); if the
    /// topic exists with another history, `pub` fails.
    #[arg(long, value_name = "N")]
    history: Option<usize>,
    /// Publish this one message. Without it, every line of stdin is one message (without
    /// its newline).
    #[arg(long, value_name = "TEXT")]
    data: Option<String>,
    /// Kind of channel to create if missing (default: topic; an existing channel is used as
    /// what it is).
    #[arg(long, value_enum, value_name = "KIND")]
    kind: Option<KindArg>,
    /// Queue: messages it holds. Used when creating the queue (default 1024).
    #[arg(long, value_name = "N")]
    capacity: Option<u64>,
    /// Queue: largest message in bytes. Used when creating the queue (default 1024).
    #[arg(long, value_name = "BYTES")]
    max_element_size: Option<usize>,
}

/// The kind of channel `pub --kind` creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KindArg {
    /// Broadcast pub/sub with history.
    Topic,
    /// Bounded MPMC queue: each message to one consumer.
    Queue,
    /// SPSC ring of variable-size records.
    Stream,
}

/// Opens the topic, creating it if missing. Sizes not given are taken from an existing
/// topic (or the defaults); sizes given must match an existing topic.
fn open_for_publish(domain: &Domain, args: &PubArgs) -> Result<Topic> {
    let config = match Topic::open(domain, &args.name) {
        Ok(t) => {
            let st = t.status();
            TopicConfig::new(
                args.slot_size.unwrap_or(st.slot_size as usize),
                args.history.unwrap_or(st.history as usize),
            )
            .spare_slots(st.slots.saturating_sub(st.history) as usize)
        }
        Err(OpenError::NotFound { .. }) => {
            TopicConfig::new(args.slot_size.unwrap_or(DEFAULT_SLOT_SIZE), args.history.unwrap_or(DEFAULT_HISTORY))
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Topic::create_or_open(domain, &args.name, &config)?)
}

fn publish(publisher: &mut Publisher, data: &[u8]) -> Result<u64> {
    publisher.publish(data).map_err(|e| CliError::msg(format!("publish failed: {e}")))
}

/// Publishes `--data` once, or each stdin line.
pub fn run_pub(ctx: &Ctx, args: &PubArgs) -> Result<()> {
    let domain = ctx.domain(&args.domain)?;
    let topic_sizes = args.slot_size.is_some() || args.history.is_some();
    let queue_sizes = (args.capacity, args.max_element_size);
    if let Some(r) =
        crate::queue::pub_if_queue(&domain, &args.name, args.kind, args.data.as_deref(), topic_sizes, queue_sizes)
    {
        return r;
    }
    let topic = open_for_publish(&domain, args)?;
    let mut publisher = topic.publisher()?;
    if let Some(data) = &args.data {
        publish(&mut publisher, data.as_bytes())?;
        return Ok(());
    }
    let mut stdin = std::io::stdin().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = stdin.read_until(b'\n', &mut line).map_err(|e| CliError::msg(format!("reading stdin: {e}")))?;
        if n == 0 {
            return Ok(());
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        publish(&mut publisher, &line)?;
    }
}

/// `shmbus sub --domain D NAME [--count N] [--from SEQ | --latest] [--timeout-ms T] [--json]`
#[derive(Debug, clap::Args)]
pub struct SubArgs {
    /// The topic's domain.
    #[arg(long)]
    domain: String,
    /// The topic's name.
    name: String,
    /// Exit (with 0) after this many messages. Default: run until killed.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Start at this sequence number (gaps are reported if it is no longer kept).
    /// Default: only messages published from now on.
    #[arg(long, value_name = "SEQ", conflicts_with = "latest")]
    from: Option<u64>,
    /// Start with the newest message already published.
    #[arg(long)]
    latest: bool,
    /// Fail if no message arrives for this long (per message, not in total).
    #[arg(long, value_name = "MS")]
    timeout_ms: Option<u64>,
    /// Print JSON lines {"seq","ts_ns","len","data"} instead of payloads.
    #[arg(long)]
    json: bool,
}

/// Prints messages of a topic as they arrive.
pub fn run_sub(ctx: &Ctx, args: &SubArgs) -> Result<()> {
    let domain = ctx.domain(&args.domain)?;
    let topic_start = args.from.is_some() || args.latest;
    if let Some(r) =
        crate::queue::sub_if_queue(&domain, &args.name, args.count, args.timeout_ms, args.json, topic_start)
    {
        return r;
    }
    let sub = Topic::open(&domain, &args.name)?.subscriber()?;
    if let Some(seq) = args.from {
        sub.seek(seq);
    } else if args.latest {
        sub.seek_latest();
    }
    let timeout = args.timeout_ms.map(Duration::from_millis);
    let mut out = std::io::stdout().lock();
    let mut buf = Vec::new();
    let mut received = 0u64;
    while args.count.is_none_or(|n| received < n) {
        match sub.recv_into_timeout(&mut buf, timeout) {
            Ok(m) => {
                if args.json {
                    writeln!(out, "{}", message_json(m.seq, m.ts_ns, &buf))?;
                } else {
                    out.write_all(String::from_utf8_lossy(&buf).as_bytes())?;
                    out.write_all(b"\n")?;
                }
                out.flush()?;
                received += 1;
            }
            Err(RecvError::Lagged { missed }) => eprintln!("gap: {missed} message(s) skipped"),
            Err(RecvError::Timeout) => {
                let of = args.count.map(|n| format!(" of {n}")).unwrap_or_default();
                return Err(CliError::msg(format!(
                    "timed out: no message on {}/{} for {} ms ({received}{of} received)",
                    args.domain,
                    args.name,
                    args.timeout_ms.unwrap_or(0)
                )));
            }
            Err(e) => return Err(CliError::msg(format!("receive failed: {e}"))),
        }
    }
    Ok(())
}
