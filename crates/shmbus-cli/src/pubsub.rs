//! `shmbus pub` and `shmbus sub`: drive a topic or a stream from the shell.
//!
//! The verbs read stdin and print; what a channel kind does with a message is behind
//! [`Sink`] and [`Source`], opened by [`kinds::sink`] and [`kinds::source`] from the kind in
//! the channel's header (or `--kind` when `pub` creates one).

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::output::{JsonLines, Received};
use crate::payload::{Format, InFormat, Input};
use crate::schema::{Printer, SchemaArgs};
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

/// `shmbus pub --domain D NAME [--kind K] [size flags] [--data TEXT] [--timeout-ms T] [--count N] [--rate HZ]`
#[derive(Debug, Clone, clap::Args)]
pub struct PubArgs {
    /// The channel's domain (or give the channel as D/NAME). Default: $SHMBUS_DOMAIN.
    #[arg(long = "domain", id = "domain", value_name = "D")]
    pub domain_flag: Option<String>,
    /// The channel's name, or D/NAME.
    #[arg(value_name = "NAME")]
    pub channel: String,
    /// The domain, resolved from `--domain`, `D/NAME` or $SHMBUS_DOMAIN by `resolved()`.
    #[arg(skip)]
    pub domain: String,
    /// The name without its domain, resolved by `resolved()`.
    #[arg(skip)]
    pub name: String,
    /// Kind of channel to create if it does not exist (default: topic, or what the size
    /// flags given belong to). If it exists, it must be of this kind.
    #[arg(long, value_enum)]
    pub kind: Option<KindArg>,
    /// Topic: largest message in bytes (K, M, G suffixes: powers of 1024). Used when creating
    /// the topic (default 4096, or with --file the file's length if larger); if the topic
    /// exists with another slot size, `pub` fails.
    #[arg(long, value_name = "BYTES", value_parser = crate::units::size_usize)]
    pub slot_size: Option<usize>,
    /// Topic: messages kept for random access. Used when creating the topic (default 16);
    /// if the topic exists with another history, `pub` fails.
    #[arg(long, value_name = "N")]
    pub history: Option<usize>,
    /// Stream: ring size in bytes, a power of two of at least one page; K, M, G suffixes
    /// (powers of 1024) allowed. Used when creating the stream (default 1M); if the stream
    /// exists with another capacity, `pub` fails.
    #[arg(long, value_name = "BYTES", value_parser = crate::units::size_usize)]
    pub capacity: Option<usize>,
    /// Publish this one message. Without it (or --file), every line of stdin is one message
    /// (without its newline).
    #[arg(long, value_name = "TEXT", conflicts_with = "file")]
    pub data: Option<String>,
    /// Publish the whole content of this file as one message (binary or multi-line).
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// How --data and each stdin line are written: text or raw (as they are), hex or base64
    /// (decoded before sending: any bytes, newlines included). Default: text, or on a
    /// channel whose schema has a codec (cdr, protobuf, json, cbor, msgpack, shmbus-pod)
    /// JSON, encoded by the schema (a missing field takes its default; an unknown field, a
    /// value out of range or of the wrong type is an error and nothing of that line is sent).
    #[arg(long, value_enum, conflicts_with = "file")]
    pub format: Option<InFormat>,
    /// Fail if a message finds no room within this long: milliseconds, or with a unit
    /// (`2s`, `500ms`). Stream: the reader is slow or stuck (default: wait as long as a
    /// reader is attached). Queue: no consumer makes room (default: wait for ever). Topic of
    /// policy `block`: a reliable subscriber has not read the slot (default: wait, a stuck
    /// subscriber being evicted after the topic's reliable timeout); other topics never
    /// wait.
    #[arg(long, value_name = "MS", value_parser = crate::units::millis)]
    pub timeout_ms: Option<u64>,
    /// Send this many messages: the one message of --data or --file N times, or the first
    /// N lines of stdin. Default: --data/--file once (for ever with --rate), every line.
    #[arg(long, value_name = "N", value_parser = crate::units::count)]
    pub count: Option<u64>,
    /// Send at most HZ messages per second, on a fixed schedule (message i at start + i/HZ,
    /// so a late send does not delay the ones after it). With --data or --file and no
    /// --count, repeats the message until killed.
    #[arg(long, value_name = "HZ", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Queue: largest message in bytes (K, M, G suffixes allowed). Used when creating the
    /// queue (default 1024); with `--kind queue`, `--capacity` is the number of messages it
    /// holds (default 1024).
    #[arg(long, value_name = "BYTES", value_parser = crate::units::size_usize)]
    pub max_element_size: Option<usize>,
    /// When done, print one JSON line: the channel and how many messages were sent.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub schema: SchemaArgs,
}

impl PubArgs {
    /// These arguments with [`Self::domain`] and [`Self::name`] resolved
    /// ([`crate::target::channel`]).
    pub fn resolved(&self) -> Result<PubArgs> {
        let ch = crate::target::channel(self.domain_flag.as_deref(), &self.channel)?;
        Ok(PubArgs { domain: ch.domain, name: ch.name, ..self.clone() })
    }
}

/// `pub --json`: one line when done.
#[derive(Debug, serde::Serialize)]
struct PublishedJson<'a> {
    domain: &'a str,
    name: &'a str,
    kind: String,
    /// Messages sent.
    sent: u64,
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
    /// A reliable subscriber was evicted (topic): lossy from now on.
    Evicted,
}

/// Somewhere `sub` receives messages from.
pub trait Source {
    /// The next message into `buf`, waiting at most `timeout` (`None`: for ever).
    fn recv(&mut self, buf: &mut Vec<u8>, timeout: Option<Duration>) -> Result<Recv>;
}

/// Publishes `--data` (or `--file`) once or as `--count`/`--rate` say, or each stdin line.
///
/// A channel this call creates is removed again if the call fails before anything was
/// published to it (a missing file, a first line too long or that does not decode): a
/// failed `pub` leaves no channel behind that nobody asked for.
pub fn run_pub(ctx: &Ctx, args: &PubArgs) -> Result<()> {
    let args = &args.resolved()?;
    let domain = ctx.domain(&args.domain)?;
    let existed =
        !matches!(shmbus::admin::inspect_channel(&domain, &args.name), Err(shmbus::OpenError::NotFound { .. }));
    // Only a hint: the removal below goes through `rmdir`, which fails on a directory that
    // holds anything.
    let dir_existed = std::fs::symlink_metadata(domain.dir()).is_ok();
    let sized;
    let args = match sized_for_file(args, existed) {
        Some(a) => {
            sized = a;
            &sized
        }
        None => args,
    };
    let r = publish_to(&domain, args);
    if r.is_err() && !existed && remove_if_created_empty(&domain, &args.name) && !dir_existed {
        let _ = domain.remove_dir_if_empty();
    }
    r
}

/// `pub --file` creating a topic without `--slot-size`: the args with a slot that holds the
/// file (at least the default 4096 bytes). `None`: nothing to change (the channel exists, is
/// of another kind, has its size or schema given, or the file cannot be read: its read
/// fails later, in its own words).
fn sized_for_file(args: &PubArgs, existed: bool) -> Option<PubArgs> {
    let path = args.file.as_ref()?;
    let topic = matches!(args.kind, None | Some(KindArg::Topic))
        && args.capacity.is_none()
        && args.max_element_size.is_none()
        && args.slot_size.is_none();
    if existed || !topic || args.schema.message_encoding.is_some() {
        return None;
    }
    let len = usize::try_from(std::fs::metadata(path).ok()?.len()).ok()?;
    let slot = len.max(shmbus::topic::DEFAULT_MAX_MESSAGE_LEN);
    Some(PubArgs { slot_size: Some(slot), ..args.clone() })
}

/// After a failed `pub`: removes channel `name` if this process created it and it holds
/// nothing (no history, no pending data) and no other process is attached. Any doubt keeps
/// it: a channel someone else created, or already uses, is never removed here. Returns
/// whether it removed it.
fn remove_if_created_empty(domain: &shmbus::Domain, name: &str) -> bool {
    let Ok(report) = shmbus::admin::inspect_channel(domain, name) else { return false };
    let ours = report.header.creator.pid == std::process::id();
    // Forced only past our own liveness as its creator: the checks here stand for the rest.
    // A failure leaves the empty channel, which `shmbus clean` removes.
    ours && report.live.is_empty() && !report.holds_data() && domain.remove_forced(name).is_ok()
}

/// [`run_pub`]'s work: opens (or creates) the channel and publishes.
fn publish_to(domain: &shmbus::Domain, args: &PubArgs) -> Result<()> {
    let topic_sizes = args.slot_size.is_some() || args.history.is_some();
    let schema = args.schema.schema()?;
    // The schema the messages are written in: the one given (an existing channel must have
    // it: the open checks), else the existing channel's.
    let in_effect = match &schema {
        Some(s) => Some(s.clone()),
        None => shmbus::admin::inspect_channel(domain, &args.name).ok().and_then(|r| r.schema).map(|s| (*s).clone()),
    };
    // JSON lines are encoded unless bytes were asked for (`--format`, `--file`).
    let codec = match (args.format, &args.file) {
        (None, None) => crate::schema::codec(in_effect.as_ref()),
        _ => None,
    };
    let input =
        Input { data: args.data.clone(), file: args.file.clone(), format: args.format.unwrap_or_default(), codec };
    let repeat = Repeat { count: args.count, rate: args.rate };
    let queue = crate::queue::PubQueue {
        capacity: args.capacity.map(|c| c as u64),
        max_element_size: args.max_element_size,
        timeout_ms: args.timeout_ms,
        schema: schema.clone(),
    };
    let sent = match crate::queue::pub_if_queue(domain, &args.name, args.kind, &input, repeat, topic_sizes, queue) {
        Some(r) => r?,
        None => {
            let mut sink = kinds::sink(domain, args, schema)?;
            publish(&input, sink.max_len(), repeat, |msg| sink.send(msg))?
        }
    };
    if args.json {
        let kind = shmbus::admin::inspect_channel(domain, &args.name)?.header.kind.to_string();
        let v = PublishedJson { domain: &args.domain, name: &args.name, kind, sent };
        JsonLines::new().write(&mut std::io::stdout().lock(), &v)?;
    }
    Ok(())
}

/// `pub --rate`: a positive, finite number of messages per second.
fn parse_rate(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(hz) if hz.is_finite() && hz >= 0.001 => Ok(hz),
        _ => Err(format!("{s:?} is not a rate: give messages per second, at least 0.001 (e.g. 10 or 0.5)")),
    }
}

/// How many times and how fast `pub` sends: `--count` and `--rate`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Repeat {
    /// `--count`: messages in all.
    pub count: Option<u64>,
    /// `--rate`: messages per second.
    pub rate: Option<f64>,
}

/// Sends the messages of `input` through `send`: `--data`/`--file` once, `--count` times or
/// (with `--rate` alone) until killed; stdin lines up to `--count`; paced by `--rate`.
///
/// When more than one message may be sent, a failure says how many were sent before it (a
/// script can resume after them). Returns how many were sent.
pub fn publish(
    input: &Input,
    max_len: usize,
    repeat: Repeat,
    mut send: impl FnMut(&[u8]) -> Result<()>,
) -> Result<u64> {
    let single = input.data.is_some() || input.file.is_some();
    let times = match (single, repeat.count, repeat.rate) {
        (true, Some(n), _) => n,
        (true, None, Some(_)) => u64::MAX, // until killed
        (true, None, None) => 1,
        (false, ..) => 1, // each line once; `--count` bounds the lines read
    };
    let mut pacer = Pacer::new(repeat.rate);
    let mut sent = 0u64;
    let line_limit = if single { None } else { repeat.count };
    let r = input.for_each(max_len, line_limit, |msg| {
        for _ in 0..times {
            pacer.wait_for_turn(sent);
            send(msg)?;
            sent += 1;
        }
        Ok(())
    });
    let many = !single || times > 1;
    r.map_err(|e| if many { e.append(&format!(" ({sent} message(s) sent before)")) } else { e })?;
    Ok(sent)
}

/// `--rate`: an absolute schedule, message `i` no earlier than `start + i/HZ`. A send that
/// ran late is followed by the next ones at once until the schedule is met again, so the
/// average rate does not drift; the wait is a sleep, never a spin.
struct Pacer {
    hz: Option<f64>,
    start: Option<Instant>,
}

impl Pacer {
    fn new(hz: Option<f64>) -> Pacer {
        Pacer { hz, start: None }
    }

    /// Sleeps until message number `i` (from 0) is due.
    fn wait_for_turn(&mut self, i: u64) {
        let Some(hz) = self.hz else { return };
        let start = *self.start.get_or_insert_with(Instant::now);
        let offset = Duration::try_from_secs_f64(i as f64 / hz).ok();
        match offset.and_then(|o| start.checked_add(o)) {
            Some(due) => std::thread::sleep(due.saturating_duration_since(Instant::now())),
            // Beyond what an Instant holds (years from now): one period at a time.
            None => std::thread::sleep(Duration::from_secs_f64(1.0 / hz)),
        }
    }
}

/// `shmbus sub --domain D NAME [--count N] [--from SEQ | --latest] [--timeout-ms T] [--json] [--wait SECS]`
#[derive(Debug, Clone, clap::Args)]
pub struct SubArgs {
    /// The channel's domain (or give the channel as D/NAME). Default: $SHMBUS_DOMAIN.
    #[arg(long = "domain", id = "domain", value_name = "D")]
    pub domain_flag: Option<String>,
    /// The channel's name, or D/NAME.
    #[arg(value_name = "NAME")]
    pub channel: String,
    /// The domain, resolved from `--domain`, `D/NAME` or $SHMBUS_DOMAIN by `resolved()`.
    #[arg(skip)]
    pub domain: String,
    /// The name without its domain, resolved by `resolved()`.
    #[arg(skip)]
    pub name: String,
    /// Exit (with 0) after this many messages (at least 1). Default: run until killed.
    #[arg(long, value_name = "N", value_parser = crate::units::count)]
    pub count: Option<u64>,
    /// Topic: start at this sequence number (gaps are reported if it is no longer kept; a
    /// number beyond the next message to be published starts at that next message), at -N
    /// (the last N messages published; -1: the newest), at `oldest` (the oldest message
    /// kept) or at `latest` (as --latest). Default: only messages published from now on.
    #[arg(long, value_name = "SEQ|-N|oldest|latest", conflicts_with = "latest", value_parser = parse_from)]
    pub from: Option<From>,
    /// Topic: subscribe reliably, so that publishers of a `block` or `fail` topic never
    /// overwrite a message this subscriber has not read (see `create --policy`). Refused on
    /// an `overwrite` topic. A reliable subscriber that stops reading is evicted after the
    /// topic's reliable timeout (said on stderr; it goes on as a lossy one).
    #[arg(long)]
    pub reliable: bool,
    /// Topic: start with the newest message already published.
    #[arg(long)]
    pub latest: bool,
    /// Fail if no message arrives for this long (per message, not in total): milliseconds,
    /// or with a unit (`2s`, `1m`).
    #[arg(long, value_name = "MS", value_parser = crate::units::millis)]
    pub timeout_ms: Option<u64>,
    /// Print JSON lines {"seq","ts_mono_ns","len","data"} instead of payloads (`data_base64`
    /// instead of `data` for a payload that is not UTF-8; on a channel whose schema has a
    /// codec, `msg`: the message decoded, or `error` when it does not decode).
    #[arg(long)]
    pub json: bool,
    /// Wait up to SECS for the channel to be created instead of failing when it does not
    /// exist yet (listeners may start first).
    #[arg(long, value_name = "SECS", value_parser = crate::parse_wait)]
    pub wait: Option<std::time::Duration>,
    /// How to print each payload: text (a line, lossy UTF-8), hex or base64 (one encoded
    /// line each, exact), raw (the bytes as they are, no separator). Default: text for a
    /// payload that is valid UTF-8 and hex for any other (binary bytes never reach the
    /// terminal as they are), or on a channel whose schema has a codec each message decoded,
    /// one JSON object per line (a message that does not decode is said on stderr with its
    /// seq, and the others go on).
    #[arg(long, value_enum, conflicts_with = "json")]
    pub format: Option<Format>,
    /// Decoded messages: print byte arrays whole (by default those longer than 64 bytes show
    /// as "<N bytes>").
    #[arg(long)]
    pub full: bool,
}

impl SubArgs {
    /// These arguments with [`Self::domain`] and [`Self::name`] resolved
    /// ([`crate::target::channel`]).
    pub fn resolved(&self) -> Result<SubArgs> {
        let ch = crate::target::channel(self.domain_flag.as_deref(), &self.channel)?;
        Ok(SubArgs { domain: ch.domain, name: ch.name, ..self.clone() })
    }
}

/// Where `sub --from` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    /// This sequence number.
    Seq(u64),
    /// The oldest message kept.
    Oldest,
    /// The newest message published (as `--latest`).
    Latest,
    /// This many messages back from the newest (`-1`: the newest).
    Back(u64),
}

/// `--from`: a sequence number, `oldest` or `latest`.
fn parse_from(s: &str) -> std::result::Result<From, String> {
    match s {
        "oldest" => Ok(From::Oldest),
        "latest" => Ok(From::Latest),
        _ => match s.strip_prefix('-') {
            Some(back) => match back.parse() {
                Ok(n) if n > 0 => Ok(From::Back(n)),
                _ => Err(format!("{s:?}: give -N for the last N messages (-1: the newest), N at least 1")),
            },
            None => s
                .parse()
                .map(From::Seq)
                .map_err(|_| format!("{s:?} is not a sequence number, -N (the last N messages), oldest or latest")),
        },
    }
}

/// Prints messages of a topic or records of a stream as they arrive.
pub fn run_sub(ctx: &Ctx, args: &SubArgs) -> Result<()> {
    let args = &args.resolved()?;
    let domain = ctx.domain(&args.domain)?;
    let appeared = !ctx.wait_for(&domain, &[&args.name], args.wait)?.is_empty();
    crate::target::require(&domain, &args.name, crate::target::WaitHint::Offer)?;
    // A topic that appeared while `sub` waited holds only messages published since `sub`
    // started: read them from the first (the default start, new messages only, would lose
    // what its creator published at once).
    let from_start;
    let args = if appeared && args.from.is_none() && !args.latest {
        from_start = SubArgs { from: Some(From::Seq(1)), ..args.clone() };
        &from_start
    } else {
        args
    };
    let topic_start = args.from.is_some() || args.latest || args.reliable;
    // A missing channel is for the open below to report, in its kind's words.
    let schema = shmbus::admin::inspect_channel(&domain, &args.name).ok().and_then(|r| r.schema);
    // No `--format`: a channel with a codec prints decoded, any other text or hex by payload.
    let mut printer = Printer::new(schema.as_deref(), args.json, args.format, args.full);
    if let Some(r) =
        crate::queue::sub_if_queue(&domain, &args.name, args.count, args.timeout_ms, &mut printer, topic_start)
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
                printer.write(&mut out, Received::new(seq, ts_ns), &buf)?;
                out.flush()?;
                received += 1;
            }
            Recv::Gap(missed) => eprintln!("gap: {missed} message(s) skipped"),
            Recv::Evicted => eprintln!(
                "evicted: this reliable subscriber stopped reading for longer than the topic's reliable timeout; it goes on as a lossy one"
            ),
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
