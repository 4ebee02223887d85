//! `shmbus create`: make an empty channel of any kind, before any endpoint attaches.
//!
//! Each kind takes the size flags its creating verbs take (`pub` for topics, streams and
//! queues, `pool` for pools); a flag another kind owns is a usage error. Creating a channel
//! that exists with the same kind and every size given succeeds and says "exists"
//! (idempotent, for scripts); another kind or another size given fails as the library's
//! open does (wrong kind, layout mismatch, another schema). Journals are directories
//! anywhere, not files in a domain: `create --kind journal --dir DIR` makes one there (as
//! `shmbus journal append --dir DIR` does on its first entry).
//!
//! Every kind takes a schema (`--message-encoding`, `--schema-name`, `--schema-encoding`,
//! `--schema-file`), stored with the channel for its life.

use std::time::Duration;

use shmbus::journal::JournalConfig;
use shmbus::pool::{Pool, PoolConfig};
use shmbus::queue::{Queue, QueueConfig};
use shmbus::stream::{Stream, StreamConfig};
use shmbus::topic::{DeliveryPolicy, Topic, TopicConfig};
use shmbus::{admin, Domain};

use crate::schema::SchemaArgs;
use crate::{CliError, Ctx, Result};

/// The kinds `create` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CreateKind {
    /// Broadcast pub/sub with history (`--slot-size`, `--history`).
    Topic,
    /// Bounded MPMC queue (`--capacity` messages, `--max-element-size`).
    Queue,
    /// SPSC ring of variable-size records (`--capacity` bytes).
    Stream,
    /// Worker pool (`--max-workers`, `--max-job-size`).
    Pool,
    /// Journal: a directory anywhere (`--dir DIR`, no domain or name).
    Journal,
}

/// `shmbus create --domain D --kind K NAME [size flags] [schema flags] [--mode M] [--group GID] [--json]`,
/// `shmbus create --kind journal --dir DIR [schema flags] [--json]`
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The channel's domain (or give the channel as D/NAME). Default: $SHMBUS_DOMAIN.
    #[arg(long, value_name = "D")]
    pub domain: Option<String>,
    /// The kind of channel to create.
    #[arg(long, value_enum)]
    pub kind: CreateKind,
    /// The channel's name, or D/NAME.
    #[arg(required_unless_present = "dir")]
    pub name: Option<String>,
    /// Journal: its directory (created if missing).
    #[arg(long, value_name = "DIR", conflicts_with = "name")]
    pub dir: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub schema: SchemaArgs,
    /// Topic: largest message in bytes, K, M, G suffixes allowed (powers of 1024; default
    /// 4096).
    #[arg(long, value_name = "BYTES", value_parser = crate::units::size_usize)]
    pub slot_size: Option<usize>,
    /// Topic: messages kept for random access (default 16).
    #[arg(long, value_name = "N")]
    pub history: Option<usize>,
    /// Topic: what publishers do when a reliable subscriber (`sub --reliable`) has not read
    /// the slot they would overwrite: overwrite (default; reliable subscribers are refused),
    /// block (wait) or fail (report it). An existing topic must have the same policy.
    #[arg(long, value_name = "POLICY", value_parser = parse_policy)]
    pub policy: Option<DeliveryPolicy>,
    /// Topic of policy block or fail: how long a reliable subscriber that stops reading may
    /// hold publishers back before it is evicted: milliseconds, or with a unit (`2s`);
    /// default 1s.
    #[arg(long, value_name = "MS", value_parser = crate::units::millis)]
    pub reliable_timeout_ms: Option<u64>,
    /// Queue: messages it holds (default 1024). Stream: ring size in bytes, a power of two
    /// of at least one page, K/M/G suffixes allowed (default 1M).
    #[arg(long, value_name = "N", value_parser = crate::units::size_usize)]
    pub capacity: Option<usize>,
    /// Queue: largest message in bytes, K, M, G suffixes allowed (default 1024).
    #[arg(long, value_name = "BYTES", value_parser = crate::units::size_usize)]
    pub max_element_size: Option<usize>,
    /// Pool: most workers attached at once, 1..=64 (default 8).
    #[arg(long, value_name = "N")]
    pub max_workers: Option<usize>,
    /// Pool: largest job in bytes, K, M, G suffixes allowed (default 4096).
    #[arg(long, value_name = "BYTES", value_parser = crate::units::size_usize)]
    pub max_job_size: Option<usize>,
    /// File mode of the created channel, in octal (default 600). An existing channel keeps
    /// its own.
    #[arg(long, value_name = "OCTAL", value_parser = parse_mode)]
    pub mode: Option<u32>,
    /// Group (numeric gid) of the created channel (default: the creator's). An existing
    /// channel keeps its own.
    #[arg(long, value_name = "GID")]
    pub group: Option<u32>,
    /// Print one JSON line {"domain","name","kind","path","created"} (`created`: false when
    /// it existed).
    #[arg(long)]
    pub json: bool,
}

/// `--policy`: overwrite, block or fail.
fn parse_policy(s: &str) -> std::result::Result<DeliveryPolicy, String> {
    s.parse()
}

/// Parses an octal file mode like `600` or `0640`.
fn parse_mode(s: &str) -> std::result::Result<u32, String> {
    match u32::from_str_radix(s.trim(), 8) {
        Ok(m) if m <= 0o777 => Ok(m),
        _ => Err(format!("{s:?} is not a file mode (octal, 000 to 777, e.g. 640)")),
    }
}

/// `create --json`: one line.
#[derive(Debug, serde::Serialize)]
struct CreateJson<'a> {
    domain: &'a str,
    name: &'a str,
    kind: &'static str,
    path: String,
    /// False when the channel was there already (`exists:`).
    created: bool,
}

/// Creates the channel, or accepts an existing one of the same kind and sizes.
pub fn run(ctx: &Ctx, args: &Args) -> Result<()> {
    check_flags(args)?;
    let schema = args.schema.schema()?;
    if args.kind == CreateKind::Journal {
        return create_journal(args, schema);
    }
    let Some(name) = args.name.as_deref() else {
        return Err(CliError::usage("give a channel (--domain D NAME, or D/NAME), or --kind journal --dir DIR"));
    };
    let ch = crate::target::channel(args.domain.as_deref(), name)?;
    let (domain_name, name) = (ch.domain, ch.name.as_str());
    let domain = ctx.domain(&domain_name)?;
    let (kind, path) = create(&domain, name, args, schema)?;
    // Created by this process, not by another that won the race for the name: the header
    // names its creator.
    let created = admin::inspect_channel(&domain, name)?.header.creator.pid == std::process::id();
    if args.json {
        let v = CreateJson { domain: &domain_name, name, kind, path: path.display().to_string(), created };
        crate::output::JsonLines::new().write(&mut std::io::stdout().lock(), &v)?;
    } else {
        let verb = if created { "created" } else { "exists:" };
        println!("{verb} {kind} {domain_name}/{name}");
    }
    Ok(())
}

/// `create --kind journal --dir DIR`: the journal, made as `journal append` makes it, with
/// the schema given.
fn create_journal(args: &Args, schema: Option<shmbus::Schema>) -> Result<()> {
    let Some(dir) = &args.dir else { return Err(journal_usage()) };
    let existed = dir.join("journal.meta").exists();
    let mut config = JournalConfig::default();
    if let Some(s) = schema {
        config = config.schema(s);
    }
    crate::journal::open(dir, &config)?;
    let created = !existed;
    if args.json {
        let v = CreateJson { domain: "", name: "", kind: "journal", path: dir.display().to_string(), created };
        crate::output::JsonLines::new().write(&mut std::io::stdout().lock(), &v)?;
    } else {
        let verb = if created { "created" } else { "exists:" };
        println!("{verb} journal {}", dir.display());
    }
    Ok(())
}

/// Fails with a usage error if a size flag of another kind was given.
fn check_flags(args: &Args) -> Result<()> {
    let given = [
        ("--slot-size", args.slot_size.is_some(), &[CreateKind::Topic][..]),
        ("--history", args.history.is_some(), &[CreateKind::Topic]),
        ("--policy", args.policy.is_some(), &[CreateKind::Topic]),
        ("--reliable-timeout-ms", args.reliable_timeout_ms.is_some(), &[CreateKind::Topic]),
        ("--capacity", args.capacity.is_some(), &[CreateKind::Queue, CreateKind::Stream]),
        ("--max-element-size", args.max_element_size.is_some(), &[CreateKind::Queue]),
        ("--max-workers", args.max_workers.is_some(), &[CreateKind::Pool]),
        ("--max-job-size", args.max_job_size.is_some(), &[CreateKind::Pool]),
    ];
    if args.kind == CreateKind::Journal {
        if args.dir.is_none() {
            return Err(journal_usage());
        }
        if args.mode.is_some() || args.group.is_some() {
            return Err(CliError::usage("--mode and --group do not apply to a journal (its directory keeps its own)"));
        }
    } else if args.dir.is_some() {
        return Err(CliError::usage("--dir is for journals (--kind journal); other channels live in a domain"));
    }
    for (flag, set, kinds) in given {
        if set && !kinds.contains(&args.kind) {
            return Err(CliError::usage(format!(
                "{flag} does not apply to a {} (topics take --slot-size/--history/--policy/--reliable-timeout-ms, queues --capacity/--max-element-size, streams --capacity, pools --max-workers/--max-job-size)",
                kind_name(args.kind)
            )));
        }
    }
    Ok(())
}

/// `create --kind journal` without `--dir`.
fn journal_usage() -> CliError {
    CliError::usage(
        "journals are directories, not channels of a domain: give --dir DIR (`shmbus create --kind journal --dir DIR`)",
    )
}

fn kind_name(k: CreateKind) -> &'static str {
    match k {
        CreateKind::Topic => "topic",
        CreateKind::Queue => "queue",
        CreateKind::Stream => "stream",
        CreateKind::Pool => "pool",
        CreateKind::Journal => "journal",
    }
}

/// Creates or opens the channel through the library, with the sizes, mode and group given.
fn create(
    domain: &Domain,
    name: &str,
    args: &Args,
    schema: Option<shmbus::Schema>,
) -> Result<(&'static str, std::path::PathBuf)> {
    let path = domain.channel_path(name)?;
    macro_rules! common {
        ($config:expr) => {{
            let mut c = $config;
            if let Some(s) = schema {
                c = c.schema(s);
            }
            if let Some(m) = args.mode {
                c = c.mode(m);
            }
            if let Some(g) = args.group {
                c = c.group(g);
            }
            c
        }};
    }
    match args.kind {
        CreateKind::Topic => {
            let mut c = common!(TopicConfig::default());
            if let Some(n) = args.slot_size {
                c = c.max_message_len(n);
            }
            if let Some(n) = args.history {
                c = c.history(n);
            }
            if let Some(p) = args.policy {
                c = c.policy(p);
            }
            if let Some(ms) = args.reliable_timeout_ms {
                c = c.reliable_timeout(Duration::from_millis(ms));
            }
            Topic::create_or_open(domain, name, &c)?;
        }
        CreateKind::Queue => {
            let mut c = common!(QueueConfig::default());
            if let Some(n) = args.capacity {
                c = c.capacity(n as u64);
            }
            if let Some(n) = args.max_element_size {
                c = c.max_message_len(n);
            }
            Queue::create_or_open(domain, name, &c)?;
        }
        CreateKind::Stream => {
            let mut c = common!(StreamConfig::default());
            if let Some(n) = args.capacity {
                c = c.capacity(n);
            }
            Stream::create_or_open(domain, name, &c)?;
        }
        CreateKind::Pool => {
            let mut c = common!(PoolConfig::default());
            if let Some(n) = args.max_workers {
                c = c.max_workers(n);
            }
            if let Some(n) = args.max_job_size {
                c = c.max_job_len(n);
            }
            Pool::create_or_open(domain, name, &c)?;
        }
        CreateKind::Journal => return Err(journal_usage()),
    }
    Ok((kind_name(args.kind), path))
}
