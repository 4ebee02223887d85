//! `shmbus pub` and `shmbus sub`: drive a topic or a stream from the shell.
//!
//! The verbs read stdin and print; what a channel kind does with a message is behind
//! [`Sink`] and [`Source`], opened by [`kinds::sink`] and [`kinds::source`] from the kind in
//! the channel's header (or `--kind` when `pub` creates one).

use std::io::Write;
use std::time::Duration;

use crate::input::for_each_input;
use crate::output::message_json;
use crate::{kinds, CliError, Ctx, Result};

/// The channel kinds `pub --kind` can create.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KindArg {
    /// Broadcast pub/sub with history (`--slot-size`, `--history`).
    Topic,
    /// SPSC ring of variable-size records (`--capacity`).
    Stream,
    /// Bounded MPMC queue.
    Queue,
}

/// `shmbus pub --domain D NAME [--kind K] [size flags] [--data TEXT] [--timeout-ms T]`
#[derive(Debug, clap::Args)]
pub struct PubArgs {
    /// The channel's domain. Default: $SHMBUS_DOMAIN.
    #[arg(long, env = "SHMBUS_DOMAIN", hide_env_values = true)]
    pub domain: String,
    /// The channel's name.
    pub name: String,
    /// Kind of channel to create if it does not exist (default: topic, or what the size
    /// flags given belong to). If it exists, it must be of this kind.
    #[arg(long, value_enum)]
    pub kind: Option<KindArg>,
    /// Topic: largest message in bytes. Used when creating the topic (default 4096); if
    /// the topic exists with another slot size, `pub` fails.
    #[arg(long, value_name = "BYTES")]
    pub slot_size: Option<usize>,
    /// Topic: messages kept for random access. Used when creating the topic (default 16);
    /// if the topic exists with another history, `pub` fails.
    #[arg(long, value_name = "N")]
    pub history: Option<usize>,
    /// Stream: ring size in bytes, a power of two of at least one page; K, M, G suffixes
    /// (powers of 1024) allowed. Used when creating the stream (default 1M); if the stream
    /// exists with another capacity, `pub` fails.
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub capacity: Option<usize>,
    /// Publish this one message. Without it, every line of stdin is one message (without
    /// its newline).
    #[arg(long, value_name = "TEXT")]
    pub data: Option<String>,
    /// Stream: fail if a record does not fit in the ring within this long (the reader is
    /// slow or stuck). Default: wait as long as a reader is attached.
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,
    /// Queue: largest message in bytes. Used when creating the queue (default 1024); with
    /// `--kind queue`, `--capacity` is the number of messages it holds (default 1024).
    #[arg(long, value_name = "BYTES")]
    pub max_element_size: Option<usize>,
}

/// Parses `4096`, `64K`, `1M`, `1G` (binary multiples).
pub(crate) fn parse_size(s: &str) -> std::result::Result<usize, String> {
    let t = s.trim();
    let (digits, mult) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        None => (t, 1usize),
        Some((i, _)) => {
            let mult = match t[i..].to_ascii_lowercase().as_str() {
                "k" | "kib" => 1 << 10,
                "m" | "mib" => 1 << 20,
                "g" | "gib" => 1 << 30,
                other => return Err(format!("unknown size suffix {other:?} (use K, M or G)")),
            };
            (&t[..i], mult)
        }
    };
    let n: usize = digits.parse().map_err(|_| format!("{s:?} is not a size in bytes"))?;
    n.checked_mul(mult).ok_or_else(|| format!("{s} is too large"))
}

/// Somewhere `pub` sends messages.
pub trait Sink {
    /// Sends one message.
    fn send(&mut self, data: &[u8]) -> Result<()>;
    /// The most bytes one message can hold.
    fn max_len(&self) -> usize;
}

/// What a [`Source`] produced.
#[derive(Debug)]
pub enum Recv {
    /// A message, now in the buffer.
    Msg {
        /// Its sequence number (topic) or ordinal in this session (stream).
        seq: u64,
        /// CLOCK_MONOTONIC at publish (topic) or receive (stream).
        ts_ns: u64,
    },
    /// This many messages were skipped.
    Gap(u64),
    /// No message within the timeout.
    Timeout,
}

/// Somewhere `sub` receives messages from.
pub trait Source {
    /// The next message into `buf`, waiting at most `timeout` (`None`: for ever).
    fn recv(&mut self, buf: &mut Vec<u8>, timeout: Option<Duration>) -> Result<Recv>;
}

/// Publishes `--data` once, or each stdin line.
pub fn run_pub(ctx: &Ctx, args: &PubArgs) -> Result<()> {
    let domain = ctx.domain(&args.domain)?;
    let topic_sizes = args.slot_size.is_some() || args.history.is_some();
    let queue_sizes = (args.capacity.map(|c| c as u64), args.max_element_size);
    if let Some(r) =
        crate::queue::pub_if_queue(&domain, &args.name, args.kind, args.data.as_deref(), topic_sizes, queue_sizes)
    {
        return r;
    }
    let mut sink = kinds::sink(&domain, args)?;
    for_each_input(args.data.as_deref(), sink.max_len(), |msg| sink.send(msg))
}

/// `shmbus sub --domain D NAME [--count N] [--from SEQ | --latest] [--timeout-ms T] [--json] [--wait SECS]`
#[derive(Debug, Clone, clap::Args)]
pub struct SubArgs {
    /// The channel's domain. Default: $SHMBUS_DOMAIN.
    #[arg(long, env = "SHMBUS_DOMAIN", hide_env_values = true)]
    pub domain: String,
    /// The channel's name.
    pub name: String,
    /// Exit (with 0) after this many messages. Default: run until killed.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Topic: start at this sequence number (gaps are reported if it is no longer kept; a
    /// number beyond the next message to be published starts at that next message).
    /// Default: only messages published from now on.
    #[arg(long, value_name = "SEQ", conflicts_with = "latest")]
    pub from: Option<u64>,
    /// Topic: start with the newest message already published.
    #[arg(long)]
    pub latest: bool,
    /// Fail if no message arrives for this long (per message, not in total).
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,
    /// Print JSON lines {"seq","ts_ns","len","data"} instead of payloads.
    #[arg(long)]
    pub json: bool,
    /// Wait up to SECS for the channel to be created instead of failing when it does not
    /// exist yet (listeners may start first).
    #[arg(long, value_name = "SECS", value_parser = crate::parse_wait)]
    pub wait: Option<std::time::Duration>,
}

/// Prints messages of a topic or records of a stream as they arrive.
pub fn run_sub(ctx: &Ctx, args: &SubArgs) -> Result<()> {
    let domain = ctx.domain(&args.domain)?;
    let appeared = !ctx.wait_for(&domain, &[&args.name], args.wait)?.is_empty();
    // A topic that appeared while `sub` waited holds only messages published since `sub`
    // started: read them from the first (the default start, new messages only, would lose
    // what its creator published at once).
    let from_start;
    let args = if appeared && args.from.is_none() && !args.latest {
        from_start = SubArgs { from: Some(1), ..args.clone() };
        &from_start
    } else {
        args
    };
    let topic_start = args.from.is_some() || args.latest;
    if let Some(r) =
        crate::queue::sub_if_queue(&domain, &args.name, args.count, args.timeout_ms, args.json, topic_start)
    {
        return r;
    }
    let mut source = kinds::source(&domain, args)?;
    let timeout = args.timeout_ms.map(Duration::from_millis);
    let mut out = std::io::stdout().lock();
    let mut buf = Vec::new();
    let mut received = 0u64;
    while args.count.is_none_or(|n| received < n) {
        match source.recv(&mut buf, timeout)? {
            Recv::Msg { seq, ts_ns } => {
                if args.json {
                    writeln!(out, "{}", message_json(seq, ts_ns, &buf))?;
                } else {
                    out.write_all(String::from_utf8_lossy(&buf).as_bytes())?;
                    out.write_all(b"\n")?;
                }
                out.flush()?;
                received += 1;
            }
            Recv::Gap(missed) => eprintln!("gap: {missed} message(s) skipped"),
            Recv::Timeout => {
                let of = args.count.map(|n| format!(" of {n}")).unwrap_or_default();
                return Err(CliError::msg(format!(
                    "timed out: no message on {}/{} for {} ms ({received}{of} received)",
                    args.domain,
                    args.name,
                    args.timeout_ms.unwrap_or(0)
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert!(parse_size("12x").unwrap_err().contains("suffix"));
        assert!(parse_size("K").is_err());
        assert!(parse_size("-1").is_err());
    }
}
