//! `shmbus export`: the counters of every channel (and of the journals named) as a
//! Prometheus scrape target.
//!
//! A small HTTP/1.1 server on std threads ([`server`]) answers `GET /metrics` with the
//! Prometheus text exposition format, version 0.0.4. Every scrape takes a fresh snapshot: the
//! domains are listed again, every channel is read through a read-only mapping
//! ([`shmbus::stats::domain_stats`]), every journal through [`Journal::status`]. Nothing is
//! kept between scrapes, so rates are Prometheus's `rate()` over the counters. The server
//! bounds what one client can take (connections, time, memory, pipelined requests); its
//! module docs list the limits.
//!
//! A channel that cannot be read (removed between the listing and the read, corrupt, no
//! permission) is left out of that scrape; a journal that cannot be read shows as
//! `shmbus_journal_up 0`. The metric families are documented in `docs/observability.md`.

use std::fmt::Write as _;
mod server;

use std::io;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args as ClapArgs;
use shmbus::journal::{Journal, JournalStatus};
use shmbus::stats::{
    domain_stats, is_sender, latency_bucket_floor, spin_bucket_floor, ChannelStats, ParticipantStats, LATENCY_BUCKETS,
    SPIN_BUCKETS,
};
use shmbus::{Kind, Schema};

use crate::{CliError, Ctx, Result};

/// `shmbus export [--listen ADDR] [--domain D] [--journal DIR]…`
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// Address to serve on, HOST:PORT (port 0: any free port; the one bound is printed).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9464")]
    listen: String,
    /// Export only this domain (default: every domain under the root).
    #[arg(long, value_name = "D")]
    domain: Option<String>,
    /// A journal directory to export too (repeatable).
    #[arg(long = "journal", value_name = "DIR")]
    journals: Vec<PathBuf>,
}

/// The content type of the text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Runs the server until the process is killed; returns (an error) only if the listening
/// socket fails for good, so that the process exits non-zero and a supervisor restarts it.
pub fn run(ctx: &Ctx, args: &Args) -> Result<()> {
    if let Some(d) = &args.domain {
        ctx.domain(d)?; // a bad name fails now, not at every scrape
    }
    let listener = TcpListener::bind(&*args.listen).map_err(|e| listen_error(&args.listen, &e))?;
    let bound = listener.local_addr().map_err(|e| listen_error(&args.listen, &e))?;
    eprintln!("shmbus export: serving http://{bound}/metrics");
    let (ctx, args) = (ctx.clone(), args.clone());
    let handler = move |r: &server::Request| respond(&ctx, &args, r.method, r.target);
    let e = server::serve(listener, Arc::new(handler));
    Err(CliError::msg(format!("export stopped: cannot accept connections on {bound}: {e}")))
}

fn listen_error(addr: &str, e: &io::Error) -> CliError {
    match e.kind() {
        io::ErrorKind::AddrInUse => {
            CliError::msg(format!("cannot listen on {addr}: address in use; choose another with --listen"))
        }
        _ => CliError::msg(format!("cannot listen on {addr}: {e}")),
    }
}

/// The answer to `method target`: the metrics (`GET`, or `HEAD` for the headers alone),
/// 404 for another path, 405 for another method.
fn respond(ctx: &Ctx, args: &Args, method: &str, target: &str) -> server::Response {
    let path = target.split(['?', '#']).next().unwrap_or("");
    let text = |status: u16, body: &str| server::Response {
        status,
        content_type: "text/plain; charset=utf-8",
        allow: None,
        body: body.to_owned(),
    };
    if path != "/metrics" {
        return text(404, "not found: the metrics are at /metrics\n");
    }
    if method != "GET" && method != "HEAD" {
        return server::Response { allow: Some("GET, HEAD"), ..text(405, "method not allowed: use GET\n") };
    }
    match scrape(ctx, args) {
        Ok(body) => server::Response { status: 200, content_type: CONTENT_TYPE, allow: None, body },
        Err(e) => text(500, &format!("{e}\n")),
    }
}

/// One fresh snapshot of everything exported, in the text format.
fn scrape(ctx: &Ctx, args: &Args) -> Result<String> {
    let mut channels = Vec::new();
    for domain in ctx.domains(args.domain.as_deref())? {
        let Ok(list) = domain_stats(&domain) else { continue }; // an untrusted domain: skipped
                                                                // A channel that vanished or cannot be read is left out of this scrape.
        for (name, stats) in list {
            let Ok(stats) = stats else { continue };
            // The schema is not in the counters: read from the channel's header and record.
            let schema = shmbus::admin::inspect_channel(&domain, &name).ok().and_then(|r| r.schema);
            channels.push((stats, schema));
        }
    }
    let journals: Vec<(PathBuf, Option<JournalStatus>)> =
        args.journals.iter().map(|dir| (dir.clone(), Journal::status(dir).ok())).collect();
    Ok(render(&channels, &journals))
}

/// A metric family: its samples are written together, after its `# HELP` and `# TYPE`.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    samples: String,
}

impl Family {
    fn new(name: &'static str, kind: &'static str, help: &'static str) -> Family {
        Family { name, help, kind, samples: String::new() }
    }

    /// One sample `name{labels} value`; `suffix` for histograms (`_bucket`, `_sum`, `_count`).
    fn sample(&mut self, suffix: &str, labels: &Labels, value: impl std::fmt::Display) {
        let _ = writeln!(self.samples, "{}{suffix}{} {value}", self.name, labels.0);
    }

    /// A histogram: cumulative buckets at each upper bound in `bounds` (one fewer than
    /// `counts`: the last bucket is `+Inf`), the sum and the count.
    fn histogram(&mut self, labels: &Labels, counts: &[u64], bounds: &[f64], sum: f64) {
        let mut seen = 0u64;
        for (n, le) in counts.iter().zip(bounds) {
            seen = seen.saturating_add(*n);
            self.sample("_bucket", &labels.with("le", &le.to_string()), seen);
        }
        let total = counts.iter().fold(0u64, |a, &b| a.saturating_add(b));
        self.sample("_bucket", &labels.with("le", "+Inf"), total);
        self.sample("_sum", labels, sum);
        self.sample("_count", labels, total);
    }

    fn write(&self, out: &mut String) {
        if self.samples.is_empty() {
            return;
        }
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} {}", self.name, self.kind);
        out.push_str(&self.samples);
    }
}

/// A label set, rendered `{a="x",b="y"}` with the values escaped.
#[derive(Clone)]
struct Labels(String);

impl Labels {
    fn new(pairs: &[(&str, &str)]) -> Labels {
        let mut l = Labels(String::new());
        for (k, v) in pairs {
            l = l.with(k, v);
        }
        l
    }

    fn with(&self, key: &str, value: &str) -> Labels {
        let inner = self.0.strip_prefix('{').and_then(|s| s.strip_suffix('}')).unwrap_or("");
        let sep = if inner.is_empty() { "" } else { "," };
        Labels(format!("{{{inner}{sep}{key}=\"{}\"}}", escape(value)))
    }
}

/// A label value escaped per the text format: backslash, double quote and newline.
fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Upper bounds of the latency buckets but the last, in seconds.
fn latency_bounds() -> Vec<f64> {
    (1..LATENCY_BUCKETS).map(|b| latency_bucket_floor(b) as f64 / 1e9).collect()
}

/// The middle of latency bucket `b`, in seconds (the last one's like `latency_quantile`'s).
fn latency_mid(b: usize) -> f64 {
    let lo = latency_bucket_floor(b);
    let hi = if b + 1 < LATENCY_BUCKETS { latency_bucket_floor(b + 1) } else { lo + lo / 3 };
    (lo + (hi - lo) / 2) as f64 / 1e9
}

/// Upper bounds (inclusive, in failed tries) of the spin buckets but the last.
fn spin_bounds() -> Vec<f64> {
    (1..SPIN_BUCKETS).map(|b| (spin_bucket_floor(b) - 1) as f64).collect()
}

/// The middle of spin bucket `b`, in tries (the last one counted at its floor).
fn spin_mid(b: usize) -> f64 {
    let lo = spin_bucket_floor(b) as f64;
    if b + 1 < SPIN_BUCKETS {
        (lo + (spin_bucket_floor(b + 1) - 1) as f64) / 2.0
    } else {
        lo
    }
}

/// Every family, in a fixed order, filled from the snapshots.
fn render(channels: &[(ChannelStats, Option<Arc<Schema>>)], journals: &[(PathBuf, Option<JournalStatus>)]) -> String {
    let counter = |name, help| Family::new(name, "counter", help);
    let gauge = |name, help| Family::new(name, "gauge", help);
    let mut messages = counter(
        "shmbus_messages_total",
        "Messages sent (senders) or received (receivers) since the participant registered.",
    );
    let mut bytes = counter("shmbus_bytes_total", "Payload bytes of those messages.");
    let mut drops =
        counter("shmbus_drops_total", "Messages this receiver lost (overwritten before it read them, or abandoned).");
    let mut full = counter("shmbus_full_total", "Sends that found the channel full.");
    let mut blocked = counter("shmbus_blocked_total", "Calls that found nothing to do at once and waited.");
    let mut futex_waits = counter("shmbus_futex_waits_total", "FUTEX_WAIT system calls entered.");
    let mut futex_wakes = counter("shmbus_futex_wakes_total", "FUTEX_WAKE system calls issued.");
    let mut pins = gauge("shmbus_pins", "Samples this receiver pins now.");
    let mut alive = gauge("shmbus_participant_alive", "1 if the participant's process is alive, 0 if it died.");
    let mut lag = gauge("shmbus_lag_messages", "Messages this topic receiver is behind the newest.");
    let mut latency = Family::new(
        "shmbus_latency_seconds",
        "histogram",
        "Publish to receive latency, sampled 1 message in 64; _sum is approximate (bucket midpoints).",
    );
    let mut spins = Family::new(
        "shmbus_spins",
        "histogram",
        "Waits by failed tries before success; _sum is approximate (bucket midpoints).",
    );
    let mut participants = gauge("shmbus_channel_participants", "Live participants of the channel.");
    let mut pending =
        gauge("shmbus_pending", "Committed data no reader has taken yet (queues, streams, pools), in unit.");
    let mut last_seq = gauge("shmbus_last_seq", "The highest committed sequence number of the topic.");
    // A service's own counters (its lanes', over its life) and its requests now.
    let mut svc_counters = [
        ("requests", counter("shmbus_service_requests_total", "Requests clients sent to the service.")),
        ("responses", counter("shmbus_service_responses_total", "Responses clients read (a stream's end included).")),
        (
            "timeouts",
            counter("shmbus_service_timeouts_total", "Requests their clients gave up on (timed out, cancelled)."),
        ),
        ("server_gone", counter("shmbus_service_server_gone_total", "Requests whose server died holding them.")),
        ("failed", counter("shmbus_service_failed_total", "Requests their server failed.")),
        ("requests_in_flight", gauge("shmbus_service_requests_in_flight", "Requests a server is answering now.")),
        ("requests_pending", gauge("shmbus_service_requests_pending", "Requests waiting for a server now.")),
    ];
    let mut schema_info = gauge(
        "shmbus_channel_schema_info",
        "1 for a channel with a schema, labelled with its message encoding and schema name.",
    );

    let (lat_bounds, spin_bounds) = (latency_bounds(), spin_bounds());
    for (ch, schema) in channels {
        let kind = ch.kind.as_str();
        let base = [("domain", ch.domain.as_str()), ("channel", ch.name.as_str()), ("kind", kind)];
        let chl = Labels::new(&base);
        if let Some(s) = schema {
            schema_info.sample(
                "",
                &chl.with("message_encoding", s.message_encoding()).with("schema_name", s.name()),
                1,
            );
        }
        participants.sample("", &chl, ch.participants.iter().filter(|p| p.alive).count());
        if let Some(p) = ch.pending {
            pending.sample("", &chl.with("unit", p.unit()), p.count());
        }
        if ch.kind == Kind::Topic {
            if let Some(s) = ch.description.last_seq {
                last_seq.sample("", &chl, s);
            }
        }
        if ch.kind == Kind::Service {
            for (key, family) in &mut svc_counters {
                let value = ch.description.status.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
                if let Some(shmbus::admin::Scalar::Int(n)) = value {
                    family.sample("", &chl, n);
                }
            }
        }
        for p in &ch.participants {
            let l = participant_labels(&chl, p);
            let c = &p.counters;
            messages.sample("", &l, c.messages);
            bytes.sample("", &l, c.bytes);
            drops.sample("", &l, c.drops);
            full.sample("", &l, c.full);
            blocked.sample("", &l, c.blocked);
            futex_waits.sample("", &l, c.futex_waits);
            futex_wakes.sample("", &l, c.futex_wakes);
            pins.sample("", &l, c.pins);
            alive.sample("", &l, u8::from(p.alive));
            if let Some(n) = ch.lag(p) {
                lag.sample("", &l, n);
            }
            if !is_sender(p.role_name) {
                let sum = c.latency.iter().enumerate().map(|(b, &n)| n as f64 * latency_mid(b)).sum();
                latency.histogram(&l, &c.latency, &lat_bounds, sum);
            }
            let sum = c.spins.iter().enumerate().map(|(b, &n)| n as f64 * spin_mid(b)).sum();
            spins.histogram(&l, &c.spins, &spin_bounds, sum);
        }
    }

    let mut up = gauge("shmbus_journal_up", "1 if the journal could be read at this scrape, 0 if not.");
    let mut next_index = gauge(
        "shmbus_journal_next_index",
        "Index the next entry will get; rate() of it is the append rate in entries/s.",
    );
    let mut appended = gauge("shmbus_journal_appended_bytes", "Data bytes in use over all retained cycles.");
    let mut disk = gauge("shmbus_journal_disk_bytes", "Bytes of cycle files on disk, by tier (hot or archive).");
    let mut position = gauge("shmbus_journal_reader_position", "Global index a named reader resumes at.");
    let mut reader_lag = gauge("shmbus_journal_reader_lag", "Entries a named reader is behind the newest.");
    let mut appenders = gauge("shmbus_journal_appenders", "Live appenders registered in the journal.");
    let mut journal_schema = gauge(
        "shmbus_journal_schema_info",
        "1 for a journal with a schema, labelled with its message encoding and schema name.",
    );
    for (dir, status) in journals {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let path = dir.display().to_string();
        let l = Labels::new(&[("journal", &name), ("path", &path)]);
        up.sample("", &l, u8::from(status.is_some()));
        let Some(st) = status else { continue };
        next_index.sample("", &l, st.next_index);
        appended.sample("", &l, st.bytes);
        disk.sample("", &l.with("tier", "hot"), st.hot_file_bytes);
        disk.sample("", &l.with("tier", "archive"), st.archive_file_bytes);
        appenders.sample("", &l, st.appenders);
        if let Some(s) = &st.schema {
            journal_schema.sample(
                "",
                &l.with("message_encoding", s.message_encoding()).with("schema_name", s.name()),
                1,
            );
        }
        for r in &st.readers {
            let rl = l.with("reader", &r.name);
            position.sample("", &rl, r.position);
            reader_lag.sample("", &rl, st.reader_lag(r));
        }
    }

    let mut out = String::new();
    for f in [
        &messages,
        &bytes,
        &drops,
        &full,
        &blocked,
        &futex_waits,
        &futex_wakes,
        &pins,
        &alive,
        &lag,
        &latency,
        &spins,
        &participants,
        &pending,
        &last_seq,
        &schema_info,
        &up,
        &next_index,
        &appended,
        &disk,
        &position,
        &reader_lag,
        &appenders,
        &journal_schema,
    ] {
        f.write(&mut out);
    }
    for (_, f) in &svc_counters {
        f.write(&mut out);
    }
    out
}

/// A participant's labels: the channel's, its role and pid, and its entry in the participant
/// table (two endpoints of one process in the same role are two series).
fn participant_labels(channel: &Labels, p: &ParticipantStats) -> Labels {
    channel.with("role", p.role_name).with("pid", &p.process.pid.to_string()).with("entry", &p.index.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape("x\ny"), "x\\ny");
        let l = Labels::new(&[("journal", "q\"\n\\")]).with("reader", "r");
        assert_eq!(l.0, "{journal=\"q\\\"\\n\\\\\",reader=\"r\"}");
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_end_at_inf() {
        let mut f = Family::new("h", "histogram", "help");
        f.histogram(&Labels::new(&[("a", "b")]), &[1, 0, 2], &[1.0, 3.0], 7.0);
        assert_eq!(
            f.samples,
            "h_bucket{a=\"b\",le=\"1\"} 1\nh_bucket{a=\"b\",le=\"3\"} 1\nh_bucket{a=\"b\",le=\"+Inf\"} 3\n\
             h_sum{a=\"b\"} 7\nh_count{a=\"b\"} 3\n"
        );
    }

    #[test]
    fn bucket_bounds_rise_and_match_the_buckets() {
        let lat = latency_bounds();
        assert_eq!(lat.len(), LATENCY_BUCKETS - 1);
        assert!(lat.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(lat[0], 24e-9, "bucket 0 ends where bucket 1 starts");
        let spin = spin_bounds();
        assert_eq!(&spin[..4], &[0.0, 1.0, 3.0, 7.0]);
        assert!(spin.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(spin_mid(2), 2.5);
    }

    #[test]
    fn empty_snapshots_render_nothing_but_a_journal_marked_down() {
        assert_eq!(render(&[], &[]), "");
        let out = render(&[], &[(PathBuf::from("/x/j"), None)]);
        assert!(out.contains("shmbus_journal_up{journal=\"j\",path=\"/x/j\"} 0\n"), "{out}");
        assert!(!out.contains("shmbus_journal_next_index"), "{out}");
    }
}
