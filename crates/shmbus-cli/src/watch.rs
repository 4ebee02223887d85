//! `shmbus watch`: a domain's (or every domain's) channels created and removed, and
//! participants joined and left, one line each as they happen (`shmbus::watch`).

use std::io::Write;
use std::time::Duration;

use serde::Serialize;
use shmbus::watch::DomainEvent;

use crate::output::JsonLines;
use crate::{Ctx, Result};

/// `shmbus watch [--domain D] [--json] [--count N] [--interval-ms MS]`
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this domain (default: $SHMBUS_DOMAIN, else every domain under the root, those
    /// made later too).
    #[arg(long)]
    domain: Option<String>,
    /// One JSON object per line: event, domain, name, kind, role, pid (role and pid null
    /// for a channel created or removed).
    #[arg(long)]
    json: bool,
    /// Exit after this many events.
    #[arg(long, value_name = "N", value_parser = crate::units::count)]
    count: Option<u64>,
    /// How often participant tables are read, in milliseconds: a join or leave (a process
    /// killed by SIGKILL included) shows within this. Channels created and removed show at
    /// once.
    #[arg(long, value_name = "MS", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    interval_ms: u64,
}

/// One event of `watch --json`, keys in this order (`role` and `pid` null for channels).
#[derive(Debug, Serialize)]
struct EventJson<'a> {
    event: &'static str,
    domain: &'a str,
    name: &'a str,
    kind: Option<&'static str>,
    role: Option<&'static str>,
    pid: Option<u32>,
}

/// Prints the domain's events until `--count` of them, or for ever.
pub fn run(ctx: &Ctx, a: &Args) -> Result<()> {
    let env = std::env::var(crate::DOMAIN_ENV).ok().filter(|d| !d.is_empty());
    let mut watch = match a.domain.as_deref().or(env.as_deref()) {
        Some(name) => ctx.domain(name)?.watch()?,
        None => shmbus::watch::DomainWatch::all(&ctx.root)?,
    };
    watch.set_participant_interval(Duration::from_millis(a.interval_ms));
    let mut json = JsonLines::new();
    let mut printed = 0;
    while a.count.is_none_or(|n| printed < n) {
        let Some(event) = watch.next().transpose()? else { break };
        let mut out = std::io::stdout().lock();
        if a.json {
            json.write(&mut out, &line(&event))?;
        } else {
            writeln!(out, "{event}")?;
        }
        // One line per event as it happens, also into a pipe.
        out.flush()?;
        printed += 1;
    }
    Ok(())
}

fn line(e: &DomainEvent) -> EventJson<'_> {
    EventJson {
        event: e.what.as_str(),
        domain: &e.domain,
        name: &e.channel,
        kind: e.kind.map(|k| k.as_str()),
        role: e.role,
        pid: e.process.map(|p| p.pid),
    }
}
