//! `shmbus info`: everything about one channel.

use std::io::Write;

use serde::Serialize;
use serde_json::{json, Map, Value};
use shmbus::admin;
use shmbus::time::monotonic_ns;

use crate::output::print_json;
use crate::{kinds, Ctx, Result};

/// `shmbus info --domain D NAME [--json]`
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The channel's domain. Default: $SHMBUS_DOMAIN.
    #[arg(long, env = "SHMBUS_DOMAIN", hide_env_values = true)]
    domain: String,
    /// The channel's name.
    name: String,
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// `info --json`, keys in this order (then [`kinds::KindFields`]).
#[derive(Debug, Serialize)]
struct InfoJson<'a> {
    domain: &'a str,
    name: &'a str,
    path: String,
    kind: String,
    version: u32,
    size_bytes: u64,
    /// The header's layout parameters, by name (per kind).
    params: &'a Map<String, Value>,
    creator_pid: u32,
    creator_alive: bool,
    mode: String,
    created_ns: u64,
    age_s: f64,
    stale: bool,
    state: &'static str,
    pending: Option<u64>,
    pending_unit: Option<&'static str>,
    writable: bool,
    slot_size: Option<u64>,
    history: Option<u64>,
    last_seq: Option<u64>,
    publishers: Option<usize>,
    subscribers: Option<usize>,
    /// The kind's live state, by name (per kind).
    status: &'a Map<String, Value>,
    participants: Vec<Participant>,
    dead_participants: Vec<Participant>,
    #[serde(flatten)]
    schema: crate::ls::SchemaKeys<'a>,
    #[serde(flatten)]
    kind_fields: kinds::KindFields,
}

/// A live or dead participant in `info --json`.
#[derive(Debug, Serialize)]
struct Participant {
    pid: u32,
    role: String,
    entry: usize,
}

fn kv(map: &Map<String, Value>) -> String {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    map.iter().map(|(k, v)| format!("{k}={}", text(v))).collect::<Vec<_>>().join(" ")
}

/// Prints the header, creator, status and participants of one channel.
pub fn run(ctx: &Ctx, args: &Args) -> Result<()> {
    let domain = ctx.domain(&args.domain)?;
    let path = domain.channel_path(&args.name)?;
    let first = admin::inspect_channel(&domain, &args.name)?;
    let s = kinds::summarize(&domain, &args.name, &first)?;
    // Participants and staleness from a second look, taken after the status: a participant
    // that registered before the status was read is then in both.
    let report = admin::inspect_channel(&domain, &args.name)?;
    let h = &report.header;
    let role = |r| kinds::role_name(h.kind, r);
    let age_s = monotonic_ns().saturating_sub(h.created_ns) as f64 / 1e9;
    let participant =
        |p: &shmbus::ParticipantInfo| Participant { pid: p.process.pid, role: role(p.role), entry: p.index };
    if args.json {
        return Ok(print_json(&InfoJson {
            domain: domain.name(),
            name: &args.name,
            path: path.display().to_string(),
            kind: h.kind.to_string(),
            version: h.version,
            size_bytes: h.total_size,
            params: &s.params,
            creator_pid: h.creator.pid,
            creator_alive: report.creator_alive,
            mode: format!("{:04o}", h.mode),
            created_ns: h.created_ns,
            age_s,
            stale: report.is_stale(),
            state: report.state().as_str(),
            pending: report.pending.map(|p| p.count()),
            pending_unit: report.pending.map(|p| p.unit()),
            writable: report.writable,
            slot_size: s.slot_size,
            history: s.history,
            last_seq: s.last_seq,
            publishers: s.publishers,
            subscribers: s.subscribers,
            status: &s.status,
            participants: report.live.iter().map(participant).collect(),
            dead_participants: report.dead.iter().map(participant).collect(),
            schema: crate::ls::SchemaKeys::of(report.schema.as_deref()),
            kind_fields: s.kind_fields(),
        })?);
    }
    let mut out = std::io::stdout().lock();
    let alive = if report.creator_alive { "alive" } else { "dead" };
    writeln!(out, "channel       {}/{}", domain.name(), args.name)?;
    writeln!(out, "path          {}", path.display())?;
    writeln!(out, "kind          {} (format version {})", h.kind, h.version)?;
    writeln!(out, "size          {} bytes", h.total_size)?;
    writeln!(out, "layout        {}", kv(&s.params))?;
    writeln!(out, "creator       pid {} ({alive})", h.creator.pid)?;
    writeln!(out, "mode          {:04o}", h.mode)?;
    writeln!(out, "created       {age_s:.1} s ago")?;
    if let Some(schema) = &report.schema {
        writeln!(out, "schema        {}", crate::schema::summary(schema))?;
    }
    let mut status = Map::new();
    for (k, v) in
        [("last_seq", json!(s.last_seq)), ("publishers", json!(s.publishers)), ("subscribers", json!(s.subscribers))]
    {
        if !v.is_null() {
            status.insert(k.into(), v);
        }
    }
    status.extend(s.status.into_iter().filter(|(_, v)| !v.is_null()));
    writeln!(out, "status        {}", kv(&status))?;
    if let Some(p) = report.pending {
        writeln!(out, "pending       {p}")?;
    }
    let state = match crate::ls::state_note(&report) {
        n if n.is_empty() => report.state().to_string(),
        n => n,
    };
    writeln!(out, "state         {state}")?;
    writeln!(out, "participants  {} live, {} dead (awaiting reclaim)", report.live.len(), report.dead.len())?;
    for p in &report.live {
        writeln!(out, "  pid {:<8} {:<11} entry {}", p.process.pid, role(p.role), p.index)?;
    }
    for p in &report.dead {
        writeln!(out, "  pid {:<8} {:<11} entry {} (dead)", p.process.pid, role(p.role), p.index)?;
    }
    Ok(())
}
