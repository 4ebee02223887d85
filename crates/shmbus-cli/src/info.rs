//! `shmbus info`: everything about one channel, or (`--file`) about one recording.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{json, Map, Value};
use shmbus::admin;
use shmbus::time::monotonic_ns;

use crate::output::print_json;
use crate::{kinds, CliError, Ctx, Result};

/// `shmbus info --domain D NAME [--json]` or `shmbus info --file PATH [--json]`
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The channel's domain (or give the channel as D/NAME). Default: $SHMBUS_DOMAIN.
    #[arg(long, value_name = "D", conflicts_with = "file")]
    domain: Option<String>,
    /// The channel's name, or D/NAME.
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    name: Option<String>,
    /// A recording instead of a channel: an MCAP file or a journal directory written by
    /// `shmbus record`. Shows its topics, schemas, message counts, start, end, duration and size.
    #[arg(long, value_name = "PATH")]
    file: Option<PathBuf>,
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
    /// A service's response schema (its `schema` keys are its request schema's); `null` for
    /// the other kinds and a service without schemas.
    response_schema: Option<crate::ls::SchemaKeys<'a>>,
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
    if let Some(file) = &args.file {
        return recording(file, args.json);
    }
    let Some(name) = &args.name else {
        return Err(CliError::usage("give a channel (--domain D NAME, or D/NAME) or --file PATH (a recording)"));
    };
    let ch = crate::target::channel(args.domain.as_deref(), name)?;
    let (domain, name) = (ctx.domain(&ch.domain)?, ch.name.as_str());
    crate::target::require(&domain, name, crate::target::WaitHint::None)?;
    let path = domain.channel_path(name)?;
    let first = admin::inspect_channel(&domain, name)?;
    let s = kinds::summarize(&domain, name, &first)?;
    // Participants and staleness from a second look, taken after the status: a participant
    // that registered before the status was read is then in both.
    let report = admin::inspect_channel(&domain, name)?;
    let h = &report.header;
    let role = |r| kinds::role_name(h.kind, r);
    let age_s = monotonic_ns().saturating_sub(h.created_ns) as f64 / 1e9;
    let participant =
        |p: &shmbus::ParticipantInfo| Participant { pid: p.process.pid, role: role(p.role), entry: p.index };
    if args.json {
        return Ok(print_json(&InfoJson {
            domain: domain.name(),
            name,
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
            response_schema: report.response_schema.as_deref().map(|s| crate::ls::SchemaKeys::of(Some(s))),
            kind_fields: s.kind_fields(),
        })?);
    }
    let mut out = std::io::stdout().lock();
    let alive = if report.creator_alive { "alive" } else { "dead" };
    writeln!(out, "channel       {}/{}", domain.name(), name)?;
    writeln!(out, "path          {}", path.display())?;
    writeln!(out, "kind          {} (format version {})", h.kind, h.version)?;
    writeln!(out, "size          {} bytes", h.total_size)?;
    writeln!(out, "layout        {}", kv(&s.params))?;
    writeln!(out, "creator       pid {} ({alive})", h.creator.pid)?;
    writeln!(out, "mode          {:04o}", h.mode)?;
    writeln!(out, "created       {age_s:.1} s ago")?;
    match (&report.schema, &report.response_schema) {
        (Some(req), Some(resp)) => {
            writeln!(out, "schema        requests  {}", crate::schema::summary(req))?;
            writeln!(out, "              responses {}", crate::schema::summary(resp))?;
        }
        (Some(schema), None) => writeln!(out, "schema        {}", crate::schema::summary(schema))?,
        _ => {}
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

/// `info --file --json`, keys in this order.
#[derive(Debug, Serialize)]
struct RecordingJson<'a> {
    path: String,
    /// `mcap` or `journal`.
    format: &'static str,
    size_bytes: u64,
    messages: u64,
    /// Log (receive) time of the first message, Unix-epoch ns; null without messages.
    start_ns: Option<u64>,
    /// Log time of the last message.
    end_ns: Option<u64>,
    duration_s: f64,
    /// Counts from the MCAP summary (true) or from reading every message (false).
    from_summary: bool,
    /// False when the file ends early (its recorder was killed): the counts are of what is
    /// readable.
    complete: bool,
    topics: Vec<RecordingTopicJson<'a>>,
}

/// One topic (MCAP channel) in `info --file --json`.
#[derive(Debug, Serialize)]
struct RecordingTopicJson<'a> {
    name: &'a str,
    messages: u64,
    message_encoding: &'a str,
    schema_name: &'a str,
    schema_encoding: &'a str,
}

/// `info --file`: what a recording holds, as `mcap info` and `ros2 bag info` show it.
fn recording(file: &Path, json: bool) -> Result<()> {
    let info = shmbus_record::read_info(file)?;
    let format = match info.format {
        shmbus_record::RecordingFormat::Mcap => "mcap",
        _ => "journal",
    };
    let duration_s = info.duration_ns as f64 / 1e9;
    if json {
        return Ok(print_json(&RecordingJson {
            path: file.display().to_string(),
            format,
            size_bytes: info.size_bytes,
            messages: info.messages,
            start_ns: info.start_ns,
            end_ns: info.end_ns,
            duration_s,
            from_summary: info.from_summary,
            complete: info.complete,
            topics: info
                .topics
                .iter()
                .map(|t| RecordingTopicJson {
                    name: &t.name,
                    messages: t.messages,
                    message_encoding: &t.message_encoding,
                    schema_name: &t.schema_name,
                    schema_encoding: &t.schema_encoding,
                })
                .collect(),
        })?);
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "file          {}", file.display())?;
    let how = match (info.format, info.from_summary) {
        (shmbus_record::RecordingFormat::Mcap, true) => "mcap (counts from its summary)",
        (shmbus_record::RecordingFormat::Mcap, false) => "mcap (no summary: counts from reading it through)",
        _ => "shmbus journal recording",
    };
    writeln!(out, "format        {how}")?;
    writeln!(out, "size          {} bytes", info.size_bytes)?;
    if !info.complete {
        writeln!(
            out,
            "complete      no: the file ends early (its recorder was killed, or is still running); counts are of \
             what is readable"
        )?;
    }
    writeln!(out, "messages      {}", info.messages)?;
    let time = |t: Option<u64>| t.map(|ns| format!("{} ({}.{:09})", utc(ns), ns / 1_000_000_000, ns % 1_000_000_000));
    writeln!(out, "start         {}", time(info.start_ns).unwrap_or_else(|| "-".into()))?;
    writeln!(out, "end           {}", time(info.end_ns).unwrap_or_else(|| "-".into()))?;
    writeln!(out, "duration      {duration_s:.3} s")?;
    writeln!(out, "topics        {}", info.topics.len())?;
    let width = info.topics.iter().map(|t| t.name.len()).max().unwrap_or(0);
    let count_width = info.topics.iter().map(|t| t.messages.to_string().len()).max().unwrap_or(0);
    for t in &info.topics {
        let schema = match (t.message_encoding.as_str(), t.schema_name.as_str()) {
            ("", "") => "no schema".to_owned(),
            (me, "") => format!("{me}, no schema"),
            (me, name) if t.schema_encoding.is_empty() => format!("{} {name}", or_dash(me)),
            (me, name) => format!("{} {name} ({})", or_dash(me), t.schema_encoding),
        };
        writeln!(
            out,
            "  {:<width$}  {:>count_width$} msgs  {schema}",
            t.name,
            t.messages,
            width = width,
            count_width = count_width
        )?;
    }
    Ok(())
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() {
        "-"
    } else {
        s
    }
}

/// Unix-epoch ns as RFC 3339 UTC with milliseconds (`2026-12-04T22:58:02.123Z`).
fn utc(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Days to a civil date (proleptic Gregorian), after Howard Hinnant's `civil_from_days`.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        ns % 1_000_000_000 / 1_000_000
    )
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn utc_times_format() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (a leap day) 12:34:56.789
        assert_eq!(utc(951_827_696_789_000_000), "2000-02-29T12:34:56.789Z");
        assert_eq!(utc(1_764_889_082_123_456_789), "2025-12-04T22:58:02.123Z");
    }
}
