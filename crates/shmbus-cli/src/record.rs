//! `shmbus record` and `shmbus replay`: topics to a journal and back.
//!
//! # Record entry format (version 1)
//!
//! Each recorded message is one journal entry: a 32-byte little-endian header, the topic
//! name, then the payload unchanged.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0  | 4 | magic `SBRC` |
//! | 4  | 2 | format version, 1 |
//! | 6  | 2 | topic name length `n` (1..=64) |
//! | 8  | 8 | sequence number of the message in its topic |
//! | 16 | 8 | publish timestamp of the message (CLOCK_MONOTONIC ns, from the topic) |
//! | 24 | 4 | slot size of the source topic (bytes) |
//! | 28 | 4 | history of the source topic (messages) |
//! | 32 | n | topic name (UTF-8) |
//! | 32+n | … | payload |
//!
//! The journal's own entry timestamp (CLOCK_REALTIME at append) is when the message was
//! recorded; `replay --from-ts` selects by it. Replay spaces messages by the *original*
//! timestamps; where those go backwards or jump by more than a second beyond the recording
//! clock (a journal holding several recording sessions, maybe across reboots), it uses the
//! recording timestamps instead.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use shmbus::journal::{EntryCipher, Journal, JournalConfig, JournalTryRecvError};
use shmbus::time::monotonic_ns;
use shmbus::topic::{Publisher, Subscriber, Topic, TopicConfig, TopicTryRecvError};
use shmbus::{Domain, OpenError, WaitSet, WaitTimeoutError, Waitable};

use crate::journal::{open, open_to_read, KeyArg};
use crate::output::JsonLines;
use crate::{CliError, Ctx, Result};

/// Magic of a record entry.
pub const MAGIC: &[u8; 4] = b"SBRC";
/// Version of the record entry format.
pub const VERSION: u16 = 1;
/// Bytes before the topic name.
pub const HEADER: usize = 32;

/// One recorded message, as stored in a journal entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded<'a> {
    /// Source topic name.
    pub topic: &'a str,
    /// Its sequence number there.
    pub seq: u64,
    /// Its publish timestamp (CLOCK_MONOTONIC ns).
    pub ts_ns: u64,
    /// Slot size of the source topic.
    pub slot_size: u32,
    /// History of the source topic.
    pub history: u32,
    /// The payload.
    pub payload: &'a [u8],
}

impl<'a> Recorded<'a> {
    /// Appends the encoded entry to `out` (which is cleared first).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(self.topic.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.ts_ns.to_le_bytes());
        out.extend_from_slice(&self.slot_size.to_le_bytes());
        out.extend_from_slice(&self.history.to_le_bytes());
        out.extend_from_slice(self.topic.as_bytes());
        out.extend_from_slice(self.payload);
    }

    /// Parses an entry; says what is wrong with one that is not a record entry.
    pub fn decode(b: &'a [u8]) -> std::result::Result<Recorded<'a>, String> {
        if b.len() < HEADER || &b[..4] != MAGIC {
            return Err("not a record entry (no SBRC header); was this journal written by `shmbus record`?".into());
        }
        let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or_default());
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default());
        let version = u16_at(4);
        if version != VERSION {
            return Err(format!("record entry format version {version}, this tool reads {VERSION}"));
        }
        let n = u16_at(6) as usize;
        if n == 0 || b.len() < HEADER + n {
            return Err(format!("record entry with a bad topic name length {n}"));
        }
        let topic = std::str::from_utf8(&b[HEADER..HEADER + n]).map_err(|_| "record entry topic name is not UTF-8")?;
        Ok(Recorded {
            topic,
            seq: u64_at(8),
            ts_ns: u64_at(16),
            slot_size: u32_at(24),
            history: u32_at(28),
            payload: &b[HEADER + n..],
        })
    }
}

/// `shmbus record --domain D TOPIC... --dir DIR [--count N] [--seconds S] [--timeout-ms T]`
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// The topics' domain. Default: $SHMBUS_DOMAIN.
    #[arg(long, env = "SHMBUS_DOMAIN", hide_env_values = true)]
    domain: String,
    /// Topics to record (they must exist). Only messages published from now on are recorded.
    #[arg(required = true, value_name = "TOPIC")]
    topics: Vec<String>,
    /// The journal directory (created if missing).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Stop (with 0) after this many messages in total.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Stop (with 0) after this long: seconds (fractions allowed), or with a unit (`5m`).
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    seconds: Option<f64>,
    /// Fail (exit 1) when no message arrives on any topic for this long (default: wait for
    /// ever); what was recorded before stays committed.
    #[arg(long, value_name = "MS", value_parser = crate::units::millis)]
    timeout_ms: Option<u64>,
    /// Print the summary as one JSON object {"messages","gaps","topics":{name: count}}.
    #[arg(long)]
    json: bool,
    /// No progress on stderr (shown for a large recording when stderr is a terminal).
    #[arg(long)]
    quiet: bool,
    /// Wait up to SECS for every topic to be created instead of failing when it does not
    /// exist yet (listeners may start first).
    #[arg(long, value_name = "SECS", value_parser = crate::parse_wait)]
    wait: Option<std::time::Duration>,
    #[command(flatten)]
    key: KeyArg,
}

/// Records messages of topics into a journal until `--count` or `--seconds` (or killed:
/// every message recorded so far is committed).
pub fn run_record(ctx: &Ctx, args: &RecordArgs) -> Result<()> {
    let domain = ctx.domain(&args.domain)?;
    // Checked before anything is subscribed or created.
    let cipher = args.key.cipher()?;
    let names: Vec<&str> = args.topics.iter().map(String::as_str).collect();
    // Topics that appeared while waiting are recorded from their first message (all of
    // them published since `record` started).
    let appeared = ctx.wait_for(&domain, &names, args.wait)?;
    let mut subs: Vec<(String, Subscriber, u32, u32)> = Vec::new();
    for name in &args.topics {
        if subs.iter().any(|s| &s.0 == name) {
            continue;
        }
        let t = Topic::open(&domain, name)?;
        let (slot, hist) = (t.max_message_len() as u32, t.history() as u32);
        let sub = t.subscriber()?;
        if appeared.contains(&name.as_str()) {
            sub.seek(1);
        }
        subs.push((name.clone(), sub, slot, hist));
    }
    // Subscribed first: a missing topic leaves no journal behind.
    let j = open(&args.dir, &JournalConfig::default())?;
    let mut app = j.appender().map_err(|e| CliError::msg(format!("{}: {e}", args.dir.display())))?;
    app.set_cipher(cipher);
    let until = args.seconds.map(|s| monotonic_ns().saturating_add((s.max(0.0) * 1e9) as u64));
    let waitables: Vec<&dyn Waitable> = subs.iter().map(|s| &s.1 as &dyn Waitable).collect();
    let mut ws = WaitSet::new();
    let mut counts = vec![0u64; subs.len()];
    let (mut total, mut gaps) = (0u64, 0u64);
    let (mut buf, mut entry) = (Vec::new(), Vec::new());
    let mut ready = Vec::new();
    let per_message = args.timeout_ms.map(Duration::from_millis);
    let mut progress = crate::progress::Counter::new(crate::progress::allowed(args.quiet, args.json), args.count);
    'run: while args.count.is_none_or(|n| total < n) {
        let left = match until {
            Some(u) => {
                let now = monotonic_ns();
                if now >= u {
                    break;
                }
                Some(Duration::from_nanos(u - now))
            }
            None => None,
        };
        // The wait ends at `--seconds` (done) or `--timeout-ms` (an error), whichever is first.
        let (timeout, timing_out) = match (left, per_message) {
            (Some(l), Some(p)) if p < l => (Some(p), true),
            (None, Some(p)) => (Some(p), true),
            (l, _) => (l, false),
        };
        let waited = match timeout {
            Some(t) => ws.wait_timeout(&waitables, t),
            None => ws.wait(&waitables).map_err(WaitTimeoutError::from),
        };
        match waited {
            Ok(r) => {
                ready.clear();
                ready.extend_from_slice(r);
            }
            Err(WaitTimeoutError::Timeout) if timing_out => {
                return Err(CliError::msg(format!(
                    "no message on {} within --timeout-ms {} ms ({total} message(s) recorded before, committed in {})",
                    names.join(", "),
                    args.timeout_ms.unwrap_or(0),
                    args.dir.display()
                )));
            }
            Err(WaitTimeoutError::Timeout) => break,
            Err(e) => return Err(e.into()),
        }
        for &i in &ready {
            let (name, sub, slot, hist) = &subs[i];
            loop {
                if args.count.is_some_and(|n| total >= n) {
                    break 'run;
                }
                match sub.try_recv_into(&mut buf) {
                    Ok(m) => {
                        let rec = Recorded {
                            topic: name,
                            seq: m.seq(),
                            ts_ns: m.ts_ns(),
                            slot_size: *slot,
                            history: *hist,
                            payload: &buf,
                        };
                        rec.encode(&mut entry);
                        app.send(&entry).map_err(|e| CliError::msg(format!("append failed: {e}")))?;
                        counts[i] += 1;
                        total += 1;
                        progress.add(buf.len());
                    }
                    Err(TopicTryRecvError::Empty) => break,
                    Err(TopicTryRecvError::Lagged { missed }) => {
                        progress.suspend(|| eprintln!("gap: {missed} message(s) of {name} skipped (not recorded)"));
                        gaps += missed;
                    }
                    Err(e) => return Err(CliError::msg(format!("receive from {name} failed: {e}"))),
                }
            }
        }
    }
    drop(progress);
    let mut out = std::io::stdout().lock();
    if args.json {
        let topics = subs.iter().zip(&counts).map(|(s, c)| (s.0.as_str(), *c)).collect();
        JsonLines::new().write(&mut out, &RecordJson { messages: total, gaps, topics })?;
    } else {
        writeln!(out, "recorded {total} message(s) from {} topic(s) into {}", subs.len(), args.dir.display())?;
    }
    Ok(())
}

/// `record --json`: one line when it stops.
#[derive(Debug, Serialize)]
struct RecordJson<'a> {
    /// Messages recorded.
    messages: u64,
    /// Messages skipped because the recorder lagged (not recorded).
    gaps: u64,
    /// Messages recorded per topic, by name.
    topics: BTreeMap<&'a str, u64>,
}

/// `replay --json`: one line when it ends.
#[derive(Debug, Serialize)]
struct ReplayJson<'a> {
    /// Messages republished.
    messages: u64,
    /// Messages republished per topic, by name.
    topics: BTreeMap<&'a str, u64>,
}

/// Replay speed: a factor of the original pace, or as fast as possible.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Speed {
    /// Original spacing divided by this factor.
    Factor(f64),
    /// No waiting.
    Max,
}

/// `--seconds`: a duration, a bare number being seconds.
fn parse_seconds(s: &str) -> std::result::Result<f64, String> {
    Ok(crate::units::secs_duration(s)?.as_secs_f64())
}

fn parse_speed(s: &str) -> std::result::Result<Speed, String> {
    if s.eq_ignore_ascii_case("max") {
        return Ok(Speed::Max);
    }
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 => Ok(Speed::Factor(f)),
        _ => Err(format!("{s:?} is not a speed: give a positive factor (1.0 = original pace) or `max`")),
    }
}

/// `shmbus replay --dir DIR --domain D [--speed 1.0|max] [--from-ts T]`
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The journal directory written by `shmbus record`.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Domain to publish into (topics keep their recorded names; missing ones are created
    /// with the recorded slot size and history, or larger if a message needs it). Default:
    /// $SHMBUS_DOMAIN.
    #[arg(long, env = "SHMBUS_DOMAIN", hide_env_values = true)]
    domain: String,
    /// Pace: a factor of the original (2.0 = twice as fast) or `max` (no waiting).
    #[arg(long, default_value = "1.0", value_parser = parse_speed, value_name = "FACTOR|max")]
    speed: Speed,
    /// Start at the first message recorded at or after this wall-clock (CLOCK_REALTIME) time:
    /// nanoseconds since 1970, RFC 3339 (`2026-11-24T10:00:00Z`) or a time ago (`-10m`).
    #[arg(long, value_name = "TIME", value_parser = crate::units::time_ns, allow_hyphen_values = true)]
    from_ts: Option<u64>,
    /// Only these topics (default: every recorded topic).
    #[arg(long = "topic", value_name = "NAME")]
    topics: Vec<String>,
    /// Print the summary as one JSON object {"messages","topics":{name: count}}.
    #[arg(long)]
    json: bool,
    /// No progress bar on stderr (shown for a large recording when stderr is a terminal).
    #[arg(long)]
    quiet: bool,
    #[command(flatten)]
    key: KeyArg,
}

/// Opens the topic for replay, creating it if missing with room for `min_slot` bytes.
fn replay_topic(domain: &Domain, rec: &Recorded<'_>) -> Result<Publisher> {
    let topic = match Topic::open(domain, rec.topic) {
        Ok(t) => t,
        Err(OpenError::NotFound { .. }) => {
            let slot = (rec.slot_size as usize).max(rec.payload.len()).max(1);
            let history = (rec.history as usize).max(1);
            Topic::create_or_open(domain, rec.topic, &TopicConfig::default().max_message_len(slot).history(history))?
        }
        Err(e) => return Err(e.into()),
    };
    Ok(topic.publisher()?)
}

/// Fails when a `--topic` names a topic the recording never holds, with the topics it does
/// hold. One pass over the entries' headers (the journal bounds it); entries that cannot be
/// read are left to the replay to report.
fn check_topics_recorded(j: &Journal, args: &ReplayArgs, cipher: &Option<Arc<dyn EntryCipher>>) -> Result<()> {
    if args.topics.is_empty() {
        return Ok(());
    }
    let mut t = j.tailer().map_err(|e| CliError::msg(format!("{}: {e}", args.dir.display())))?;
    t.set_cipher(cipher.clone());
    let mut held: BTreeSet<String> = BTreeSet::new();
    loop {
        match t.try_recv_ref() {
            Ok(e) => {
                if let Ok(rec) = Recorded::decode(e.data()) {
                    if !held.contains(rec.topic) {
                        held.insert(rec.topic.to_owned());
                    }
                }
            }
            Err(JournalTryRecvError::Empty) => break,
            Err(
                JournalTryRecvError::Gap { .. }
                | JournalTryRecvError::Corrupt(_)
                | JournalTryRecvError::Damaged { .. }
                | JournalTryRecvError::Encrypted { .. }
                | JournalTryRecvError::UnknownKey { .. }
                | JournalTryRecvError::Unauthenticated { .. }
                | JournalTryRecvError::PositionReset { .. },
            ) => continue,
            // Unreadable from here on: the replay says why.
            Err(_) => return Ok(()),
        }
    }
    let missing: Vec<&str> = args.topics.iter().map(String::as_str).filter(|n| !held.contains(*n)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let holds = if held.is_empty() {
        "it holds no topics".to_owned()
    } else {
        format!("it holds: {}", held.into_iter().collect::<Vec<_>>().join(", "))
    };
    Err(CliError::msg(format!("--topic {} not in the recording {}; {holds}", missing.join(", "), args.dir.display())))
}

/// Republishes the recorded messages in journal order, with their original spacing scaled
/// by `--speed`.
pub fn run_replay(ctx: &Ctx, args: &ReplayArgs) -> Result<()> {
    let domain = ctx.domain(&args.domain)?;
    let cipher = args.key.cipher()?;
    let (j, lost) = open_to_read(&args.dir)?;
    check_topics_recorded(&j, args, &cipher)?;
    let mut t = match args.from_ts {
        Some(ts) => j.tailer_at_time(ts),
        None => j.tailer(),
    }
    .map_err(|e| CliError::msg(format!("{}: {e}", args.dir.display())))?;
    let progress = match crate::progress::allowed(args.quiet, args.json) {
        true => match Journal::status(&args.dir) {
            Ok(st) => crate::progress::Progress::over_journal(true, "replay", st.first_index, st.next_index, st.bytes),
            Err(_) => crate::progress::Progress::over_journal(false, "", 0, 0, 0),
        },
        false => crate::progress::Progress::over_journal(false, "", 0, 0, 0),
    };
    t.set_cipher(cipher);
    let mut pubs: HashMap<String, Publisher> = HashMap::new();
    let mut counts: Vec<(String, u64)> = Vec::new();
    let mut total = 0u64;
    // (original ts, journal ts, scheduled monotonic time) of the previous message.
    let mut prev: Option<(u64, u64, u64)> = None;
    let mut damaged = 0u64;
    let mut undecrypted = 0u64;
    loop {
        let e = match t.try_recv_ref() {
            Ok(e) => e,
            Err(JournalTryRecvError::Empty) => break,
            Err(JournalTryRecvError::Gap { from, to }) => {
                progress
                    .suspend(|| eprintln!("gap: entries {from}..{to} were removed by retention before they were read"));
                continue;
            }
            Err(e @ (JournalTryRecvError::Corrupt(_) | JournalTryRecvError::Damaged { .. })) => {
                // Reported and skipped; the exit status says so at the end.
                damaged += 1;
                progress.suspend(|| eprintln!("damaged: {e}"));
                continue;
            }
            Err(
                e @ (JournalTryRecvError::Encrypted { .. }
                | JournalTryRecvError::UnknownKey { .. }
                | JournalTryRecvError::Unauthenticated { .. }),
            ) => {
                // Reported and skipped (no --key-file, a key file without its key, or a
                // wrong key); the exit status says so at the end.
                undecrypted += 1;
                progress.suspend(|| eprintln!("skipped: {e}"));
                continue;
            }
            Err(e @ JournalTryRecvError::PositionReset { .. }) => {
                progress.suspend(|| eprintln!("skipped: {e}"));
                continue;
            }
            Err(e) => return Err(CliError::msg(format!("reading {}: {e}", args.dir.display()))),
        };
        progress.at(e.index());
        let rec = Recorded::decode(e.data())
            .map_err(|what| CliError::msg(format!("{} entry {}: {what}", args.dir.display(), e.index())))?;
        if !args.topics.is_empty() && !args.topics.iter().any(|n| n == rec.topic) {
            continue;
        }
        let now = monotonic_ns();
        let at = match (prev, args.speed) {
            (None, _) | (_, Speed::Max) => now,
            (Some((pts, pj, pat)), Speed::Factor(f)) => {
                let recorded_gap = e.ts_ns().saturating_sub(pj);
                let gap = match rec.ts_ns.checked_sub(pts) {
                    Some(g) if g <= recorded_gap.saturating_add(1_000_000_000) => g,
                    _ => recorded_gap,
                };
                pat.saturating_add((gap as f64 / f) as u64)
            }
        };
        if at > now {
            std::thread::sleep(Duration::from_nanos(at - now));
        }
        prev = Some((rec.ts_ns, e.ts_ns(), at));
        if !pubs.contains_key(rec.topic) {
            pubs.insert(rec.topic.to_owned(), replay_topic(&domain, &rec)?);
            counts.push((rec.topic.to_owned(), 0));
        }
        let publisher = pubs.get_mut(rec.topic).ok_or_else(|| CliError::msg("internal: publisher missing"))?;
        publisher
            .send(rec.payload)
            .map_err(|err| CliError::msg(format!("publish to {}/{} failed: {err}", args.domain, rec.topic)))?;
        if let Some(c) = counts.iter_mut().find(|c| c.0 == rec.topic) {
            c.1 += 1;
        }
        total += 1;
    }
    drop(progress);
    let mut out = std::io::stdout().lock();
    if args.json {
        let topics = counts.iter().map(|(n, c)| (n.as_str(), *c)).collect();
        JsonLines::new().write(&mut out, &ReplayJson { messages: total, topics })?;
    } else {
        writeln!(out, "replayed {total} message(s) to {} topic(s) in domain {}", counts.len(), args.domain)?;
    }
    if lost > 0 {
        return Err(CliError::msg(format!(
            "{}: {lost} range(s) of the recording were lost in recovery (listed above); everything else was replayed",
            args.dir.display()
        )));
    }
    if damaged > 0 {
        return Err(CliError::msg(format!(
            "{}: {damaged} damaged range(s) of the recording were skipped (listed above); everything else was replayed",
            args.dir.display()
        )));
    }
    if undecrypted > 0 {
        return Err(CliError::msg(format!(
            "{}: {undecrypted} encrypted entr{} of the recording could not be read (listed above: no --key-file, a key \
             file without its key id, or failed authentication); everything else was replayed",
            args.dir.display(),
            if undecrypted == 1 { "y" } else { "ies" }
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_entries_round_trip() {
        let rec = Recorded { topic: "imu", seq: 9, ts_ns: 123, slot_size: 64, history: 8, payload: b"hello" };
        let mut buf = Vec::new();
        rec.encode(&mut buf);
        assert_eq!(buf.len(), HEADER + 3 + 5);
        assert_eq!(&buf[..4], b"SBRC");
        assert_eq!(Recorded::decode(&buf).unwrap(), rec);
    }

    #[test]
    fn foreign_entries_are_refused() {
        assert!(Recorded::decode(b"hello").is_err());
        let mut buf = Vec::new();
        Recorded { topic: "t", seq: 1, ts_ns: 1, slot_size: 1, history: 1, payload: b"" }.encode(&mut buf);
        buf[6] = 200; // name longer than the entry
        assert!(Recorded::decode(&buf).is_err());
        buf[6] = 1;
        buf[4] = 2; // another version
        assert!(Recorded::decode(&buf).unwrap_err().contains("version 2"));
    }

    #[test]
    fn speeds_parse() {
        assert_eq!(parse_speed("max"), Ok(Speed::Max));
        assert_eq!(parse_speed("2.5"), Ok(Speed::Factor(2.5)));
        assert!(parse_speed("0").is_err());
        assert!(parse_speed("fast").is_err());
    }
}
