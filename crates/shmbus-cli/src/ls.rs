//! `shmbus ls`: one line (or JSON object) per channel.

use std::io::Write;

use serde::Serialize;
use shmbus::admin::{self, ChannelState, Pending, SegmentReport};
use shmbus::domain::DomainDir;
use shmbus::{Domain, OpenError};

use crate::output::{cell, print_json, Align, Table};
use crate::{kinds, Ctx, Result};

/// `shmbus ls [--domain D] [--json]`
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this domain (default: every domain under the root).
    #[arg(long)]
    domain: Option<String>,
    /// One JSON array of objects instead of a table.
    #[arg(long)]
    json: bool,
}

/// One channel as listed. A file that fails validation has kind `invalid`, state `broken`
/// and `error` set.
#[derive(Debug)]
struct Entry {
    domain: String,
    name: String,
    kind: String,
    summary: kinds::Summary,
    size_bytes: Option<u64>,
    creator_pid: Option<u32>,
    creator_alive: Option<bool>,
    stale: Option<bool>,
    /// `in-use`, `idle`, `stale` ([`ChannelState::as_str`]) or `broken` (`error` set).
    state: &'static str,
    /// Why it is idle or stale and what `clean` does with it; empty when in use.
    state_note: String,
    pending: Option<Pending>,
    writable: Option<bool>,
    error: Option<String>,
    /// The channel's schema, if it has one.
    schema: Option<std::sync::Arc<shmbus::Schema>>,
}

/// One object of `ls --json`, keys in this order (then [`kinds::KindFields`]).
#[derive(Debug, Serialize)]
struct EntryJson<'a> {
    domain: &'a str,
    name: &'a str,
    kind: &'a str,
    slot_size: Option<u64>,
    history: Option<u64>,
    last_seq: Option<u64>,
    publishers: Option<usize>,
    subscribers: Option<usize>,
    size_bytes: Option<u64>,
    creator_pid: Option<u32>,
    creator_alive: Option<bool>,
    stale: Option<bool>,
    state: &'static str,
    pending: Option<u64>,
    pending_unit: Option<&'static str>,
    writable: Option<bool>,
    error: Option<&'a str>,
    #[serde(flatten)]
    schema: SchemaKeys<'a>,
    #[serde(flatten)]
    kind_fields: kinds::KindFields,
}

/// The schema keys of `ls --json` and `info --json`: `null` when the channel has no schema.
#[derive(Debug, Serialize)]
pub struct SchemaKeys<'a> {
    message_encoding: Option<&'a str>,
    schema_name: Option<&'a str>,
    schema_encoding: Option<&'a str>,
}

impl<'a> SchemaKeys<'a> {
    /// The keys of `schema`.
    pub fn of(schema: Option<&'a shmbus::Schema>) -> SchemaKeys<'a> {
        SchemaKeys {
            message_encoding: schema.map(|s| s.message_encoding()),
            schema_name: schema.map(|s| s.name()),
            schema_encoding: schema.map(|s| s.encoding()),
        }
    }
}

impl Entry {
    fn json(&self) -> EntryJson<'_> {
        let s = &self.summary;
        EntryJson {
            domain: &self.domain,
            name: &self.name,
            kind: &self.kind,
            slot_size: s.slot_size,
            history: s.history,
            last_seq: s.last_seq,
            publishers: s.publishers,
            subscribers: s.subscribers,
            size_bytes: self.size_bytes,
            creator_pid: self.creator_pid,
            creator_alive: self.creator_alive,
            stale: self.stale,
            state: self.state,
            pending: self.pending.map(|p| p.count()),
            pending_unit: self.pending.map(|p| p.unit()),
            writable: self.writable,
            error: self.error.as_deref(),
            schema: SchemaKeys::of(self.schema.as_deref()),
            kind_fields: s.kind_fields(),
        }
    }

    /// The NOTE column: the kind's live state, then whether the channel is idle, stale or
    /// broken.
    fn note(&self) -> String {
        let state = match &self.error {
            Some(e) => format!("broken: {e}"),
            None => self.state_note.clone(),
        };
        [self.summary.detail.as_str(), &state].iter().filter(|s| !s.is_empty()).copied().collect::<Vec<_>>().join("; ")
    }
}

/// `idle (…)` or `stale (…)`: why nobody's channel is what it is and what `shmbus clean` does
/// with it (for `ls` and `info`); empty for a channel in use.
pub fn state_note(report: &SegmentReport) -> String {
    let state = report.state();
    let what = match state {
        ChannelState::InUse => return String::new(),
        ChannelState::Idle => {
            let held = match (report.pending, report.history_len) {
                (Some(p), _) if p.count() > 0 => p.to_string(),
                (_, Some(n)) => format!("{n} message{} in its history", if n == 1 { "" } else { "s" }),
                _ => "data".into(),
            };
            match report.writable {
                true => format!("creator and users dead; holds {held}: `shmbus clean` keeps it, `--all` removes it"),
                false => format!("creator and users dead; holds {held}; this user may not remove it"),
            }
        }
        ChannelState::Stale => match report.writable {
            true => "creator and users dead, holds nothing; `shmbus clean` removes it".into(),
            false => "creator and users dead, holds nothing; this user may not remove it".into(),
        },
    };
    format!("{state} ({what})")
}

/// `None` if the file vanished since the directory was read.
fn describe(domain: &Domain, dir: &DomainDir, name: &str) -> Option<Entry> {
    let mut e = Entry {
        domain: domain.name().to_owned(),
        name: name.to_owned(),
        kind: "invalid".into(),
        summary: kinds::Summary::default(),
        size_bytes: None,
        creator_pid: None,
        creator_alive: None,
        stale: None,
        state: "broken",
        state_note: String::new(),
        pending: None,
        writable: None,
        error: None,
        schema: None,
    };
    let report = match admin::inspect_in(dir, name) {
        Ok(r) => r,
        Err(OpenError::NotFound { .. }) => return None,
        Err(err) => {
            e.error = Some(err.to_string());
            return Some(e);
        }
    };
    e.size_bytes = Some(report.header.total_size);
    e.creator_pid = Some(report.header.creator.pid);
    e.creator_alive = Some(report.creator_alive);
    e.stale = Some(report.is_stale());
    e.state = report.state().as_str();
    e.state_note = state_note(&report);
    e.pending = report.pending;
    e.writable = Some(report.writable);
    e.schema = report.schema.clone();
    match kinds::summarize(domain, name, &report) {
        Ok(s) => {
            e.kind = report.header.kind.to_string();
            e.summary = s;
        }
        Err(err) => e.error = Some(err.to_string()),
    }
    Some(e)
}

/// Lists the channels of one domain or of all.
pub fn run(ctx: &Ctx, args: &Args) -> Result<()> {
    let mut entries = Vec::new();
    for domain in ctx.domains(args.domain.as_deref())? {
        let dir = match domain.open_dir() {
            Ok(d) => d,
            Err(OpenError::NotFound { .. }) if args.domain.is_some() => {
                return Err(crate::target::missing_domain(&ctx.root, domain.name()))
            }
            Err(OpenError::NotFound { .. }) => continue,
            Err(e) => {
                // A planted, untrusted or non-directory domain: say so, list nothing from it.
                eprintln!("shmbus ls: skipped domain {}: {e}", domain.name());
                continue;
            }
        };
        let names = dir.channel_names().map_err(|e| crate::CliError::msg(format!("{}: {e}", dir.path().display())))?;
        for name in names {
            entries.extend(describe(&domain, &dir, &name));
        }
    }
    if args.json {
        print_json(&entries.iter().map(Entry::json).collect::<Vec<_>>())?;
        return Ok(());
    }
    let mut t = Table::new(&[
        ("DOMAIN", Align::Left),
        ("NAME", Align::Left),
        ("KIND", Align::Left),
        ("SLOT", Align::Right),
        ("HISTORY", Align::Right),
        ("LAST_SEQ", Align::Right),
        ("PUBS", Align::Right),
        ("SUBS", Align::Right),
        ("DEPTH", Align::Right),
        ("NOTE", Align::Left),
    ]);
    for e in &entries {
        let s = &e.summary;
        t.row(vec![
            e.domain.clone(),
            e.name.clone(),
            e.kind.clone(),
            cell(s.slot_size),
            cell(s.history),
            cell(s.last_seq),
            cell(s.publishers),
            cell(s.subscribers),
            cell(s.status.get("depth")),
            e.note(),
        ]);
    }
    let mut out = std::io::stdout().lock();
    if entries.is_empty() {
        writeln!(out, "no channels under {}", ctx.root.display())?;
        return Ok(());
    }
    t.write(&mut out)?;
    Ok(())
}
