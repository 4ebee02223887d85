//! `shmbus ls`: one line (or JSON object) per channel.

use std::io::Write;

use serde::Serialize;
use shmbus::admin::{self, Pending};
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

/// One channel as listed. A file that fails validation has kind `invalid` and `error` set.
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
    pending: Option<Pending>,
    writable: Option<bool>,
    error: Option<String>,
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
    pending: Option<u64>,
    pending_unit: Option<&'static str>,
    writable: Option<bool>,
    error: Option<&'a str>,
    #[serde(flatten)]
    kind_fields: kinds::KindFields,
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
            pending: self.pending.map(|p| p.count()),
            pending_unit: self.pending.map(|p| p.unit()),
            writable: self.writable,
            error: self.error.as_deref(),
            kind_fields: s.kind_fields(),
        }
    }

    /// The NOTE column: the kind's live state, then whether the channel is stale or broken.
    fn note(&self) -> String {
        let state = match (&self.error, self.stale) {
            (Some(e), _) => e.clone(),
            (None, Some(true)) => format!("stale ({})", stale_note(self.pending, self.writable == Some(true))),
            (None, _) => String::new(),
        };
        [self.summary.detail.as_str(), &state].iter().filter(|s| !s.is_empty()).copied().collect::<Vec<_>>().join("; ")
    }
}

/// Why a channel is stale and what `shmbus clean` would do with it (for `ls` and `info`).
pub fn stale_note(pending: Option<Pending>, writable: bool) -> String {
    match pending {
        _ if !writable => "creator and users dead; this user may not remove it".into(),
        Some(p) if p.count() > 0 => {
            format!("creator and users dead; holds {p}: `shmbus clean` keeps it, `--force` removes it")
        }
        _ => "creator and users dead; `shmbus clean` removes it".into(),
    }
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
        pending: None,
        writable: None,
        error: None,
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
    e.pending = report.pending;
    e.writable = Some(report.writable);
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
