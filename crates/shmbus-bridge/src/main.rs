//! `shmbus-bridge`, run as `shmbus bridge`: see the library docs and docs/bridge.md.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use shmbus::journal::Keyring;
use shmbus::Domain;
use shmbus_bridge::{Allow, Bridge, Direction, Options, Stats};
use zenoh::Wait;

// The `shmbus` tool's parser of durations, so that both read `10s` alike.
#[allow(dead_code)]
#[path = "../../shmbus-cli/src/units.rs"]
mod units;

/// Forward a domain's topics (and serve or mirror journals) to other hosts over Zenoh.
///
/// Each allowed local topic NAME is put on the Zenoh key PREFIX/NAME (PREFIX: shmbus/DOMAIN
/// unless --key-prefix), and samples other bridges put there are published into the local
/// topic, which is created with the sender's parameters if missing. Runs until SIGINT or
/// SIGTERM, then prints its counters.
#[derive(Debug, Parser)]
#[command(name = "shmbus bridge", bin_name = "shmbus bridge", version)]
struct Args {
    /// The domain whose topics are bridged. Default: $SHMBUS_DOMAIN.
    #[arg(long, env = "SHMBUS_DOMAIN", hide_env_values = true)]
    domain: Option<String>,
    /// Directory holding the domains (default: $SHMBUS_ROOT, else /dev/shm).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// The topics to forward, both ways: comma-separated patterns over topic names, `*` any
    /// run of characters, `?` one, `/` standing for `.` (e.g. 'cam/*,imu'). Nothing else is
    /// forwarded or accepted.
    #[arg(long, value_name = "PATTERNS")]
    topics: Option<String>,
    /// The Zenoh key prefix: topics are PREFIX/NAME, journals PREFIX/@journal/NAME.
    /// Default: shmbus/DOMAIN for topics, shmbus for journals.
    #[arg(long, value_name = "KEY")]
    key_prefix: Option<String>,
    /// Which way topics go: both, out (local to Zenoh) or in (Zenoh to local).
    #[arg(long, value_enum, default_value_t = DirectionArg::Both)]
    direction: DirectionArg,
    /// Serve journal DIR as NAME (repeatable): its new entries are sent, and mirrors may ask
    /// for older ones.
    #[arg(long, value_name = "NAME=DIR")]
    journal: Vec<String>,
    /// Mirror the remote journal NAME into DIR (repeatable): the same entries in the same
    /// order, resumed after restarts, never twice. DIR must be new or a mirror of NAME.
    #[arg(long, value_name = "NAME=DIR")]
    mirror: Vec<String>,
    /// The keys of encrypted journals (one `<id> <64 hex digits>` per line, mode 0600, the
    /// last one current): served journals are opened with them, mirrors seal their copies
    /// with the current key. The entries cross Zenoh opened: use TLS links (--require-tls).
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// Link over TLS only: refuse to start unless every endpoint to listen on or connect to
    /// is tls/…, and have Zenoh accept and open no other link. Given no endpoint to listen
    /// on, the bridge listens on none (not on Zenoh's default plain TCP one). Certificates
    /// and keys are Zenoh's TLS options (--config, --cfg 'transport/link/tls/…').
    #[arg(long)]
    require_tls: bool,
    /// Zenoh mode: peer (default), client (through a router) or router.
    #[arg(long, value_enum, default_value_t = Mode::Peer)]
    mode: Mode,
    /// Zenoh endpoint to listen on (repeatable), e.g. tcp/0.0.0.0:7447 or tls/host:7447.
    #[arg(long, value_name = "ENDPOINT")]
    listen: Vec<String>,
    /// Zenoh endpoint to connect to (repeatable), e.g. tcp/10.0.0.2:7447.
    #[arg(long, value_name = "ENDPOINT")]
    connect: Vec<String>,
    /// Do not look for peers by UDP multicast (only --connect and gossip find them).
    #[arg(long)]
    no_multicast_scouting: bool,
    /// A Zenoh configuration file (JSON5): TLS, authentication, access control and every
    /// other Zenoh option. The flags above are applied on top of it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// One Zenoh configuration value, as KEY:VALUE with VALUE in JSON5 (repeatable), e.g.
    /// 'transport/auth/usrpwd/user:"robot"'. Applied last.
    #[arg(long = "cfg", value_name = "KEY:VALUE")]
    cfg: Vec<String>,
    /// Send each message at once, never batched (lower latency for sparse messages, lower
    /// throughput for dense small ones).
    #[arg(long)]
    express: bool,
    /// The largest topic a remote sender may make this bridge create (its largest message ×
    /// (history + 1)); a remote message for a missing topic larger than this is dropped.
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = units::size)]
    max_remote_topic: u64,
    /// How the kernel schedules the bridge's threads: batch (default) or normal. A batch
    /// thread has the same share of the CPU as a normal one but does not preempt the thread
    /// that woke it; as normal threads, Zenoh's sender preempted a forwarding thread that
    /// still held one of Zenoh's locks, ran into that lock and slept again, two switches
    /// more per message. A bridge started under another policy (real-time, idle) keeps it.
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = SchedPolicy::Batch)]
    sched_policy: SchedPolicy,
    /// How often the domain is scanned for new topics.
    #[arg(long, value_name = "DURATION", default_value = "200ms", value_parser = millis)]
    scan_interval: Duration,
    /// How often the counters are printed (0: only at exit).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = secs)]
    stats_interval: Duration,
    /// Print the counters as JSON lines (one object per line).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum DirectionArg {
    Both,
    Out,
    In,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SchedPolicy {
    Batch,
    Normal,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    Peer,
    Client,
    Router,
}

fn millis(s: &str) -> Result<Duration, String> {
    units::duration(s, Duration::from_millis(1))
}

fn secs(s: &str) -> Result<Duration, String> {
    units::duration(s, Duration::from_secs(1))
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shmbus bridge: {e}");
            ExitCode::FAILURE
        }
    }
}

fn pairs(list: &[String], flag: &str) -> Result<Vec<(String, PathBuf)>, String> {
    list.iter()
        .map(|p| match p.split_once('=') {
            Some((n, d)) if !n.is_empty() && !d.is_empty() => Ok((n.to_owned(), PathBuf::from(d))),
            _ => Err(format!("--{flag} {p:?}: write NAME=DIR")),
        })
        .collect()
}

fn zenoh_config(args: &Args) -> Result<zenoh::Config, String> {
    let mut c = match &args.config {
        Some(f) => zenoh::Config::from_file(f).map_err(|e| format!("--config {}: {e}", f.display()))?,
        None => zenoh::Config::default(),
    };
    let json = |v: &[String]| serde_json::to_string(v).unwrap_or_default();
    let mode = match args.mode {
        Mode::Peer => "peer",
        Mode::Client => "client",
        Mode::Router => "router",
    };
    let mut set = |k: &str, v: String| c.insert_json5(k, &v).map_err(|e| format!("zenoh option {k}={v}: {e}"));
    set("mode", format!("{mode:?}"))?;
    if !args.listen.is_empty() {
        set("listen/endpoints", json(&args.listen))?;
    }
    if !args.connect.is_empty() {
        set("connect/endpoints", json(&args.connect))?;
    }
    if args.no_multicast_scouting {
        set("scouting/multicast/enabled", "false".into())?;
    }
    for kv in &args.cfg {
        let (k, v) = kv.split_once(':').ok_or_else(|| format!("--cfg {kv:?}: write KEY:VALUE (VALUE in JSON5)"))?;
        set(k, v.to_owned())?;
    }
    if args.require_tls {
        // Last, so that no --cfg undoes it: Zenoh then neither accepts nor opens any other
        // link (scouted peers' plain locators included).
        set("transport/link/protocols", r#"["tls"]"#.into())?;
        // Listening where nobody said to (Zenoh's default: plain TCP on every address):
        // not at all. A connecting bridge needs no listener.
        let listen = |c: &zenoh::Config| c.get_json("listen/endpoints").ok();
        if listen(&c) == listen(&zenoh::Config::default()) {
            c.insert_json5("listen/endpoints", "[]").map_err(|e| format!("zenoh option listen/endpoints: {e}"))?;
        }
        require_tls_endpoints(&c, mode)?;
    }
    Ok(c)
}

/// `--require-tls`: every endpoint of the final configuration that the bridge will listen
/// on or connect to (those of its mode, where the configuration gives one list per mode)
/// is a TLS one, and there is at least one.
fn require_tls_endpoints(c: &zenoh::Config, mode: &str) -> Result<(), String> {
    let mut all = Vec::new();
    for key in ["listen/endpoints", "connect/endpoints"] {
        let json = c.get_json(key).map_err(|e| format!("zenoh option {key}: {e}"))?;
        let value: serde_json::Value = serde_json::from_str(&json).map_err(|e| format!("zenoh option {key}: {e}"))?;
        endpoint_strings(mode_entry(&value, mode), &mut all);
    }
    if let Some(plain) = all.iter().find(|e| !e.starts_with("tls/")) {
        return Err(format!("--require-tls: endpoint {plain} is not a TLS one (write tls/HOST:PORT)"));
    }
    if all.is_empty() {
        return Err("--require-tls needs an endpoint: give --listen tls/HOST:PORT or --connect tls/HOST:PORT".into());
    }
    Ok(())
}

/// A Zenoh value that may be one per mode (`{router: …, peer: …, client: …}`): the entry
/// of `mode`, else the value itself.
fn mode_entry<'a>(v: &'a serde_json::Value, mode: &str) -> &'a serde_json::Value {
    match v.as_object() {
        Some(o) if o.keys().all(|k| matches!(k.as_str(), "router" | "peer" | "client")) => {
            o.get(mode).unwrap_or(&serde_json::Value::Null)
        }
        _ => v,
    }
}

/// The endpoints in an endpoint list (strings, or `{strategy, locators: [...]}` groups).
fn endpoint_strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(e) => out.push(e.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|e| endpoint_strings(e, out)),
        serde_json::Value::Object(o) => {
            o.iter().filter(|(k, _)| *k != "strategy").for_each(|(_, e)| endpoint_strings(e, out))
        }
        _ => {}
    }
}

fn run(args: Args) -> Result<(), String> {
    let domain_name = args.domain.clone();
    if domain_name.is_none() && args.topics.is_some() {
        return Err("--topics needs --domain (or SHMBUS_DOMAIN)".into());
    }
    if args.topics.is_none() && args.journal.is_empty() && args.mirror.is_empty() {
        return Err("nothing to bridge: give --topics, --journal or --mirror".into());
    }
    let root = args.root.clone().unwrap_or_else(shmbus::domain::default_root);
    if !root.is_dir() {
        return Err(format!("root directory {} does not exist; create it or fix --root/SHMBUS_ROOT", root.display()));
    }
    // Journals belong to no domain: without topics the domain is never used.
    let domain = Domain::with_root(domain_name.as_deref().unwrap_or("journals"), &root).map_err(|e| e.to_string())?;
    let mut options = Options::new(domain);
    options.topics = Allow::parse(args.topics.as_deref().unwrap_or("")).map_err(|e| e.to_string())?;
    options.key_prefix = args.key_prefix.clone();
    options.direction = match args.direction {
        DirectionArg::Both => Direction::Both,
        DirectionArg::Out => Direction::Out,
        DirectionArg::In => Direction::In,
    };
    options.journals = pairs(&args.journal, "journal")?;
    options.mirrors = pairs(&args.mirror, "mirror")?;
    options.scan_interval = args.scan_interval.max(Duration::from_millis(1));
    options.express = args.express;
    options.max_remote_topic_bytes = args.max_remote_topic;
    if let Some(f) = &args.key_file {
        options.keys = Some(Keyring::load(f).map_err(|e| format!("--key-file {}: {e}", f.display()))?);
        let has_journals = !options.journals.is_empty() || !options.mirrors.is_empty();
        if has_journals && !args.require_tls {
            eprintln!(
                "shmbus bridge: warning: journal entries cross Zenoh opened; without --require-tls a link may be plain"
            );
        }
    }
    let config = zenoh_config(&args)?;
    if args.sched_policy == SchedPolicy::Batch {
        // Before Zenoh starts its runtimes and before any bridge thread: threads inherit
        // the policy of the thread that creates them.
        if let Err(e) = schedule_as_batch() {
            eprintln!("shmbus bridge: warning: cannot use the batch scheduling policy ({e}); running as normal");
        }
    }
    let session = zenoh::open(config).wait().map_err(|e| format!("zenoh: {e}"))?;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
    let bridge = Bridge::start(session.clone(), options).map_err(|e| e.to_string())?;
    eprintln!("shmbus bridge: running as {} on {} (zenoh id {})", hex(&bridge.id()), bridge.prefix(), session.zid());
    let mut last = Instant::now();
    while !STOP.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        if !args.stats_interval.is_zero() && last.elapsed() >= args.stats_interval {
            last = Instant::now();
            print_stats(&bridge.stats(), args.json, false);
        }
    }
    let stats = bridge.stop();
    print_stats(&stats, args.json, true);
    let _ = session.close().wait();
    Ok(())
}

/// Moves the calling thread from the normal (`SCHED_OTHER`) to the batch policy, at the
/// same nice value; any other policy (real-time, idle) is left as it is.
fn schedule_as_batch() -> std::io::Result<()> {
    // SAFETY: sched_getscheduler and sched_setscheduler of the calling thread (pid 0), with
    // a parameter that lives across the call.
    unsafe {
        if libc::sched_getscheduler(0) != libc::SCHED_OTHER {
            return Ok(());
        }
        let param = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

fn print_stats(s: &Stats, json: bool, last: bool) {
    if json {
        #[derive(serde::Serialize)]
        struct Line<'a> {
            #[serde(rename = "final")]
            last: bool,
            #[serde(flatten)]
            stats: &'a Stats,
        }
        println!("{}", serde_json::to_string(&Line { last, stats: s }).unwrap_or_default());
    } else {
        println!(
            "{}forwarded {} ({} B), received {} ({} B), echoes skipped {}, lagged {}, bad attachment {}, not allowed {}, too large {}, open failed {}, full {}, send failed {}, journal served {}, mirrored {}, unreadable {}, foreign {}",
            if last { "final: " } else { "" },
            s.forwarded,
            s.forwarded_bytes,
            s.received,
            s.received_bytes,
            s.echoes_skipped,
            s.local_lagged,
            s.bad_attachment,
            s.not_allowed,
            s.too_large,
            s.open_failed,
            s.full,
            s.send_failed,
            s.journal_served,
            s.journal_mirrored,
            s.journal_unreadable,
            s.journal_foreign
        );
    }
}
