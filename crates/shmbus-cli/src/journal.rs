//! `shmbus journal append|dump|tail|info|readers|gc|config|tier|export|rm --dir DIR`: a journal
//! from the shell (`rm` in [`rm`]).
//!
//! Entries print like `sub` messages: one payload per line as `--format` says (lossy UTF-8 by
//! default, [`crate::payload`]), or with `--json` one line per entry with exactly
//! `{"index","ts_real_ns","len","data"}` (`ts_real_ns`: the journal's CLOCK_REALTIME
//! nanoseconds at append; `data_base64` in place of `data` for a payload that is not UTF-8).
//!
//! `tail --reader NAME` uses the journal's named durable reader: the position is acknowledged
//! after each entry is written to stdout, so a later run resumes with the next entry. The
//! only duplicate possible is the one entry a `tail` was killed between printing and
//! acknowledging.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args as ClapArgs, Subcommand};
use serde::Serialize;
use shmbus::journal::{
    open_error_message, EntryCipher, Journal, JournalConfig, JournalRecvTimeoutError, JournalStatus,
    JournalTryRecvError, KeyFileError, Keyring, Retention, RollCycle, Tailer, XChaCha20Poly1305Cipher,
};
use shmbus::OpenError;

use crate::output::{cell, print_json, Align, EntryHead, JsonLines, Table};
use crate::payload::{Format, InFormat, Input};
use crate::schema::{Printer, SchemaArgs};
use crate::{CliError, Ctx, Result};

mod rm;

/// `shmbus journal <verb> --dir DIR …`
#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, Subcommand)]
enum Verb {
    /// Append --data or --file once, or one entry per stdin line (creates the journal if missing).
    Append(AppendArgs),
    /// Print every entry from the start (or --from / --from-ts) and exit.
    Dump(DumpArgs),
    /// Follow the journal: print entries as they are appended.
    Tail(TailArgs),
    /// Cycles, entries, first/next index, bytes per tier, appenders, readers and their lag,
    /// and the append rate over --rate-window seconds.
    Info(InfoArgs),
    /// The named readers, their positions and lag.
    Readers(ReadersArgs),
    /// Apply retention now and print the cycles removed.
    Gc(GcArgs),
    /// Show the journal's retention, or change it with --retain-cycles / --max-age (an
    /// existing journal, while appenders and readers run).
    Config(ConfigArgs),
    /// Move every cycle but the newest --keep-hot to an archive directory, optionally
    /// compressed with zstd (readers find archived cycles transparently).
    Tier(TierArgs),
    /// Write the journal as an MCAP file: a `shmbus record` recording as one channel per
    /// topic with its schema, any other journal as one channel named after its directory.
    Export(ExportArgs),
    /// Remove a journal directory: only the journal's own files, refused while a live
    /// appender holds it (named) unless --force.
    Rm(rm::Args),
}

/// `shmbus journal export --dir DIR --out FILE.mcap`
#[derive(Debug, ClapArgs)]
struct ExportArgs {
    #[command(flatten)]
    dir: DirArg,
    /// The MCAP file to write (replaced if it exists).
    #[arg(long, value_name = "FILE.mcap")]
    out: PathBuf,
    /// Chunk compression: zstd, lz4 or none.
    #[arg(long, default_value = "zstd", value_parser = parse_compression, value_name = "zstd|lz4|none")]
    compression: shmbus_record::Compression,
    /// Print the summary as one JSON object {"messages","topics","skipped","out"}.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    key: KeyArg,
}

fn parse_compression(s: &str) -> std::result::Result<shmbus_record::Compression, String> {
    s.parse()
}

/// `journal export --json`.
#[derive(Debug, serde::Serialize)]
struct ExportJson {
    messages: u64,
    topics: u64,
    skipped: u64,
    out: String,
}

fn export(a: &ExportArgs) -> Result<()> {
    // Opened as the other readers do (recovery said on stderr); the exporter reads it again.
    let (j, _lost) = open_to_read(&a.dir.dir)?;
    drop(j);
    let options = shmbus_record::McapOptions { compression: a.compression, ..Default::default() };
    let r = shmbus_record::export_journal_with(&a.dir.dir, a.key.cipher()?, &a.out, options)?;
    if a.json {
        let line =
            ExportJson { messages: r.messages, topics: r.topics, skipped: r.skipped, out: a.out.display().to_string() };
        JsonLines::new().write(&mut std::io::stdout().lock(), &line)?;
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "exported {} message(s) of {} topic(s) to {}", r.messages, r.topics, a.out.display())?;
    if r.skipped > 0 {
        writeln!(out, "skipped {} entr{} (retention gaps, damage or encryption)", r.skipped, plural_y(r.skipped))?;
    }
    Ok(())
}

fn plural_y(n: u64) -> &'static str {
    if n == 1 {
        "y"
    } else {
        "ies"
    }
}

/// The journal directory, common to every verb.
#[derive(Debug, ClapArgs)]
struct DirArg {
    /// The journal's directory.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
}

/// `--key-file`: the journal's keys, for appending (sealed with the last key) and reading.
#[derive(Debug, ClapArgs)]
pub(crate) struct KeyArg {
    /// Encrypt (append) or decrypt (read) entries with XChaCha20-Poly1305 using the keys in
    /// this file: one `<id> <64 hex digits>` per line, the last one sealing new entries. The
    /// file must not be readable by group or others.
    #[arg(long, value_name = "PATH")]
    key_file: Option<PathBuf>,
}

impl KeyArg {
    /// The cipher of `--key-file`, if given.
    pub(crate) fn cipher(&self) -> Result<Option<Arc<dyn EntryCipher>>> {
        let Some(path) = &self.key_file else { return Ok(None) };
        let keys = Keyring::load(path).map_err(|e| match e {
            // Names the file already.
            KeyFileError::TooLarge { .. } => CliError::msg(format!("--key-file: {e}")),
            e => CliError::msg(format!("--key-file {}: {e}", path.display())),
        })?;
        Ok(Some(Arc::new(XChaCha20Poly1305Cipher::new(&keys))))
    }
}

/// `--max-age`: a duration (`10s`, `5m`, `2h`, `7d`; a bare number is seconds), more than
/// zero, rounded up to whole seconds (what the journal's metadata stores).
fn parse_age(s: &str) -> std::result::Result<Duration, String> {
    match crate::units::secs(s)? {
        0 => Err(format!("{s:?}: a max age must be more than 0")),
        secs => Ok(Duration::from_secs(secs)),
    }
}

/// `--retain-cycles`: at least 1.
fn parse_retain_cycles(s: &str) -> std::result::Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{s:?} is not a cycle count: use a whole number of at least 1")),
    }
}

/// `--roll`: `never`, `minutely`, `hourly`, `daily`, or `<N>s` (every N seconds).
fn parse_roll(s: &str) -> std::result::Result<RollCycle, String> {
    match s {
        "never" => Ok(RollCycle::Never),
        "minutely" => Ok(RollCycle::Minutely),
        "hourly" => Ok(RollCycle::Hourly),
        "daily" => Ok(RollCycle::Daily),
        _ => match s.strip_suffix('s').and_then(|n| n.parse::<u64>().ok()) {
            Some(n) if n > 0 => Ok(RollCycle::Every(Duration::from_secs(n))),
            _ => Err(format!("{s:?} is not a roll cycle: use never, minutely, hourly, daily or <N>s")),
        },
    }
}

#[derive(Debug, ClapArgs)]
struct AppendArgs {
    #[command(flatten)]
    dir: DirArg,
    /// Append this one entry. Without it (or --file), every line of stdin is one entry
    /// (without its newline).
    #[arg(long, value_name = "TEXT", conflicts_with = "file")]
    data: Option<String>,
    /// Append the whole content of this file as one entry (binary or multi-line).
    #[arg(long, value_name = "PATH")]
    file: Option<PathBuf>,
    /// How --data and each stdin line are written: text or raw (as they are), hex or base64
    /// (decoded before appending: any bytes, newlines included). Default: text, or on a
    /// journal whose schema has a codec JSON, encoded by the schema.
    #[arg(long, value_enum, conflicts_with = "file")]
    format: Option<InFormat>,
    #[command(flatten)]
    schema: SchemaArgs,
    /// Roll cycle when creating the journal: never, minutely, hourly, daily or <N>s (every N
    /// seconds). Default daily. An existing journal keeps its own.
    #[arg(long, value_parser = parse_roll, value_name = "CYCLE")]
    roll: Option<RollCycle>,
    /// Compress entries of 64 bytes or more with lz4 when that makes them smaller (readers
    /// decompress transparently).
    #[arg(long)]
    compress: bool,
    /// Retention when creating the journal: keep at most N cycles (stored in the journal;
    /// appenders rolling to a new cycle and `journal gc` apply it). An existing journal keeps
    /// its own: giving a different one is an error.
    #[arg(long, value_name = "N", value_parser = parse_retain_cycles)]
    retain_cycles: Option<u64>,
    /// Retention when creating the journal: delete cycles that ended longer ago than DUR
    /// (10s, 5m, 2h, 7d). Stored like --retain-cycles.
    #[arg(long, value_name = "DUR", value_parser = parse_age)]
    max_age: Option<Duration>,
    #[command(flatten)]
    key: KeyArg,
    /// Print one JSON line {"index","len"} per appended entry.
    #[arg(long)]
    json: bool,
}

/// Where reading starts.
#[derive(Debug, ClapArgs)]
struct FromArgs {
    /// Start at this global index (the oldest retained entry if it was removed).
    #[arg(long, value_name = "INDEX", conflicts_with = "from_ts")]
    from: Option<u64>,
    /// Start at the first entry appended at or after this wall-clock (CLOCK_REALTIME) time:
    /// nanoseconds since 1970, RFC 3339 (`2026-11-24T10:00:00Z`) or a time ago (`-10m`).
    #[arg(long, value_name = "TIME", value_parser = crate::units::time_ns, allow_hyphen_values = true)]
    from_ts: Option<u64>,
}

#[derive(Debug, ClapArgs)]
struct DumpArgs {
    #[command(flatten)]
    dir: DirArg,
    #[command(flatten)]
    from: FromArgs,
    #[command(flatten)]
    key: KeyArg,
    /// Print JSON lines {"index","ts_real_ns","len","data"} instead of payloads (`data_base64`
    /// instead of `data` for a payload that is not UTF-8; on a journal whose schema has a
    /// codec, `msg`: the entry decoded, or `error` when it does not decode).
    #[arg(long)]
    json: bool,
    /// How to print each payload: text (a line, lossy UTF-8), hex or base64 (one encoded
    /// line each, exact), raw (the bytes as they are, no separator). Default: text for a
    /// payload that is valid UTF-8 and hex for any other, or on a journal whose schema has a
    /// codec each entry decoded, one JSON object per line.
    #[arg(long, value_enum, conflicts_with = "json")]
    format: Option<Format>,
    /// Decoded entries: print byte arrays whole (by default those longer than 64 bytes show
    /// as "<N bytes>").
    #[arg(long)]
    full: bool,
    /// No progress bar (one is drawn on stderr for a large journal when stderr is a terminal
    /// and stdout is not).
    #[arg(long)]
    quiet: bool,
}

#[derive(Debug, ClapArgs)]
struct TailArgs {
    #[command(flatten)]
    dir: DirArg,
    /// Start here instead of at the end (only entries appended from now on).
    #[command(flatten)]
    from: FromArgs,
    /// Read as the named durable reader NAME: resume where its last run stopped (a new
    /// reader starts at the oldest entry) and record progress after each entry printed.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["from", "from_ts"])]
    reader: Option<String>,
    #[command(flatten)]
    key: KeyArg,
    /// Exit (with 0) after this many entries (at least 1). Default: run until killed.
    #[arg(long, value_name = "N", value_parser = crate::units::count)]
    count: Option<u64>,
    /// Fail if no entry arrives for this long (per entry, not in total): milliseconds, or
    /// with a unit (`2s`).
    #[arg(long, value_name = "MS", value_parser = crate::units::millis)]
    timeout_ms: Option<u64>,
    /// Print JSON lines {"index","ts_real_ns","len","data"} instead of payloads (`data_base64`
    /// instead of `data` for a payload that is not UTF-8; on a journal whose schema has a
    /// codec, `msg`: the entry decoded, or `error` when it does not decode).
    #[arg(long)]
    json: bool,
    /// How to print each payload: text (a line, lossy UTF-8), hex or base64 (one encoded
    /// line each, exact), raw (the bytes as they are, no separator). Default: text for a
    /// payload that is valid UTF-8 and hex for any other, or on a journal whose schema has a
    /// codec each entry decoded, one JSON object per line.
    #[arg(long, value_enum, conflicts_with = "json")]
    format: Option<Format>,
    /// Decoded entries: print byte arrays whole (by default those longer than 64 bytes show
    /// as "<N bytes>").
    #[arg(long)]
    full: bool,
}

#[derive(Debug, ClapArgs)]
struct InfoArgs {
    #[command(flatten)]
    dir: DirArg,
    /// JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Measure the append rate over this many seconds (two snapshots that far apart);
    /// 0 reports at once, without a rate.
    #[arg(long, value_name = "SECS", default_value = "1", value_parser = parse_window)]
    rate_window: Duration,
}

#[derive(Debug, ClapArgs)]
struct ReadersArgs {
    #[command(flatten)]
    dir: DirArg,
    /// JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `--rate-window`: a duration (bare number: seconds, fractions allowed), at most an hour.
fn parse_window(s: &str) -> std::result::Result<Duration, String> {
    match crate::units::secs_duration(s)? {
        d if d <= Duration::from_secs(3600) => Ok(d),
        _ => Err(format!("{s} is longer than an hour")),
    }
}

#[derive(Debug, ClapArgs)]
struct GcArgs {
    #[command(flatten)]
    dir: DirArg,
    /// Keep at most this many cycles (the current one is never removed).
    #[arg(long, value_name = "K")]
    keep_cycles: Option<u64>,
    /// Remove cycles last written longer ago than this: seconds, or with a unit (`7d`, `12h`).
    #[arg(long, value_name = "S", value_parser = crate::units::secs)]
    max_age_secs: Option<u64>,
    /// One JSON object {"removed_cycles","removed_bytes"} instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, ClapArgs)]
struct ConfigArgs {
    #[command(flatten)]
    dir: DirArg,
    /// Keep at most N cycles (at least 1), or `unlimited`. Appenders rolling to a new cycle
    /// and `journal gc` apply it from now on.
    #[arg(long, value_name = "N|unlimited", value_parser = parse_limit_cycles)]
    retain_cycles: Option<Limit<u64>>,
    /// Delete cycles that ended longer ago than DUR (10s, 5m, 2h, 7d), or `unlimited`.
    #[arg(long, value_name = "DUR|unlimited", value_parser = parse_limit_age)]
    max_age: Option<Limit<Duration>>,
    /// One JSON object {"max_cycles","max_age_secs"} (each null when unlimited) instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, ClapArgs)]
struct TierArgs {
    #[command(flatten)]
    dir: DirArg,
    /// The archive directory (created if missing; relative paths are taken from the journal
    /// directory). A journal has one archive: another one than it has is an error.
    #[arg(long, value_name = "PATH")]
    archive: PathBuf,
    /// Cycles to keep in the journal directory, the current one included (at least 1).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    keep_hot: u64,
    /// Compress each archived cycle file with zstd (every reader decompresses it into
    /// memory when it opens the cycle).
    #[arg(long)]
    zstd: bool,
    /// zstd level, 1 to 22.
    #[arg(long, value_name = "LEVEL", default_value_t = 3, requires = "zstd",
          value_parser = clap::value_parser!(i32).range(1..=22))]
    zstd_level: i32,
    /// One JSON object {"moved_cycles","moved_bytes"} instead of text.
    #[arg(long)]
    json: bool,
}

/// A retention limit given to `journal config`: a value, or `unlimited`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Limit<T> {
    Unlimited,
    At(T),
}

impl<T> Limit<T> {
    fn value(self) -> Option<T> {
        match self {
            Limit::Unlimited => None,
            Limit::At(v) => Some(v),
        }
    }
}

fn parse_limit_cycles(s: &str) -> std::result::Result<Limit<u64>, String> {
    if s == "unlimited" {
        return Ok(Limit::Unlimited);
    }
    parse_retain_cycles(s).map(Limit::At).map_err(|e| format!("{e}, or `unlimited`"))
}

fn parse_limit_age(s: &str) -> std::result::Result<Limit<Duration>, String> {
    if s == "unlimited" {
        return Ok(Limit::Unlimited);
    }
    parse_age(s).map(Limit::At).map_err(|e| format!("{e}, or `unlimited`"))
}

/// Runs a `journal` verb.
pub fn run(_ctx: &Ctx, args: &Args) -> Result<()> {
    match &args.verb {
        Verb::Append(a) => append(a),
        Verb::Dump(a) => dump(a),
        Verb::Tail(a) => tail(a),
        Verb::Info(a) => info(a),
        Verb::Readers(a) => readers(a),
        Verb::Gc(a) => gc(a),
        Verb::Config(a) => config(a),
        Verb::Tier(a) => tier(a),
        Verb::Export(a) => export(a),
        Verb::Rm(a) => rm::run(a),
    }
}

/// Opens the journal in `dir`, creating it with `config` if it does not exist. Errors name
/// the directory and say what to do.
pub fn open(dir: &Path, config: &JournalConfig) -> Result<Journal> {
    let j = Journal::create_or_open(dir, config).map_err(|e| open_failed(dir, e))?;
    say_recovered(&j);
    Ok(j)
}

/// Says on stderr, one `lost:` line each, what the recovery this open ran removed from the
/// journal (a data file cut mid-entry, junk after a crash): the verbs that write or manage
/// a journal report it once, when it happens; the verbs that read it report every loss
/// recorded ([`open_to_read`]).
fn say_recovered(j: &Journal) {
    for lost in j.recovery().iter().filter_map(|r| r.lost()) {
        eprintln!("lost: {}: {lost}", j.dir().display());
    }
}

/// Opens an existing journal to read it (`dump`, `tail`, `replay`) and says on stderr, one
/// `lost:` line each, every loss recovery has recorded for its cycles (by this open or an
/// earlier one, in any process), as damaged ranges are reported. Returns how many, for the
/// exit status: reading a journal that lost entries exits non-zero, after every remaining
/// entry.
pub fn open_to_read(dir: &Path) -> Result<(Journal, u64)> {
    let j = Journal::open(dir).map_err(|e| open_failed(dir, e))?;
    let mut lost = match j.lost_entries() {
        Ok(lost) => lost,
        Err(e) => {
            eprintln!("lost: {}: unknown: {}", dir.display(), open_error_message(&e));
            vec![]
        }
    };
    // A loss this open could not record (no space for the log) is reported all the same.
    for now in j.recovery().iter().filter_map(|r| r.lost()) {
        if !lost.iter().any(|l| (l.cycle, l.from, l.to) == (now.cycle, now.from, now.to)) {
            lost.push(now);
        }
    }
    for l in &lost {
        eprintln!("lost: {l}");
    }
    Ok((j, lost.len() as u64))
}

/// What a failed open of the journal in `dir` means, in the CLI's words.
fn open_failed(dir: &Path, e: OpenError) -> CliError {
    match e {
        OpenError::NotFound { .. } if !dir.is_dir() => {
            CliError::msg(format!("{}: no such directory; check --dir", dir.display()))
        }
        OpenError::NotFound { ref path } if path.file_name().is_some_and(|n| n == "journal.meta") => CliError::msg(
            format!("{}: not a journal (no journal.meta); `shmbus journal append --dir` creates one", dir.display()),
        ),
        OpenError::NotASegment { ref path } if path.is_dir() => CliError::msg(format!(
            "{}: not a journal directory (it holds other files); use a new or empty directory",
            dir.display()
        )),
        e => CliError::msg(open_error_message(&e)),
    }
}

/// Opens an existing journal.
pub fn open_existing(dir: &Path) -> Result<Journal> {
    let j = Journal::open(dir).map_err(|e| open_failed(dir, e))?;
    say_recovered(&j);
    Ok(j)
}

/// One appended entry as a line of output.
fn appended(out: &mut impl Write, json: bool, index: u64, len: usize) -> Result<()> {
    if json {
        JsonLines::new().write(out, &AppendedJson { index, len })?;
        out.flush()?;
    }
    Ok(())
}

/// A retention in words, for errors.
fn retention_words(r: &Retention) -> String {
    let cycles = r.max_cycles.map_or("no cycle limit".to_owned(), |n| format!("at most {n} cycle(s)"));
    let age = r.max_age.map_or("no age limit".to_owned(), |d| format!("a max age of {}s", d.as_secs()));
    format!("{cycles}, {age}")
}

fn append(a: &AppendArgs) -> Result<()> {
    let cipher = a.key.cipher()?;
    let roll = a.roll.unwrap_or(RollCycle::Daily);
    let wanted = Retention { max_cycles: a.retain_cycles, max_age: a.max_age };
    let mut config = JournalConfig::default().roll(roll).retention(wanted);
    if let Some(s) = a.schema.schema()? {
        config = config.schema(s);
    }
    let j = open(&a.dir.dir, &config)?;
    if a.retain_cycles.is_some() || a.max_age.is_some() {
        let have = j.retention();
        if have != wanted {
            return Err(CliError::msg(format!(
                "{}: the journal's retention is {}, not {}; `append` does not change it: use `shmbus journal config \
                 --dir {} --retain-cycles N --max-age DUR`",
                a.dir.dir.display(),
                retention_words(&have),
                retention_words(&wanted),
                a.dir.dir.display()
            )));
        }
    }
    let mut app = j.appender().map_err(|e| CliError::msg(format!("{}: {e}", a.dir.dir.display())))?;
    app.set_compression(a.compress);
    app.set_cipher(cipher);
    let mut out = std::io::stdout().lock();
    // JSON lines are encoded by the journal's schema unless bytes were asked for.
    let codec = match (a.format, &a.file) {
        (None, None) => crate::schema::codec(j.schema()),
        _ => None,
    };
    let input = Input { data: a.data.clone(), file: a.file.clone(), format: a.format.unwrap_or_default(), codec };
    // The entries this run appended (first and last index, count): a failure part way (no
    // space left) says how many went in before it, and which.
    let mut done: Option<(u64, u64, u64)> = None;
    input.for_each(app.max_entry_len(), None, |data| {
        let index = app.send(data).map_err(|e| {
            let before = match done {
                Some((first, last, n)) => format!(
                    "{n} entr{} of this run were appended before it (indices {first} to {last})",
                    if n == 1 { "y" } else { "ies" }
                ),
                None => "no entry of this run was appended".to_owned(),
            };
            CliError::msg(format!("append failed: {e}; {before}"))
        })?;
        done = Some(done.map_or((index, index, 1), |(first, _, n)| (first, index, n + 1)));
        appended(&mut out, a.json, index, data.len())
    })
}

/// A tailer positioned by `--from` / `--from-ts`, else by `default`.
fn positioned(
    j: &Journal,
    from: &FromArgs,
    default: impl FnOnce(&Journal) -> std::result::Result<Tailer, OpenError>,
) -> Result<Tailer> {
    let t = match (from.from, from.from_ts) {
        (Some(i), _) => j.tailer_at(i),
        (None, Some(ts)) => j.tailer_at_time(ts),
        (None, None) => default(j),
    };
    t.map_err(|e| CliError::msg(format!("{}: {}", j.dir().display(), open_error_message(&e))))
}

/// How `dump` and `tail` print the entries of `j`: decoded by its schema, as `--format`
/// says, or with `--json` as a JSON line with exactly `index`, `ts_real_ns`, `len`,
/// and `data` (or `data_base64`, `msg`, `error`; [`Printer`]).
fn printer(j: &Journal, json: bool, format: Option<Format>, full: bool) -> Printer {
    Printer::new(j.schema(), json, format, full)
}

/// Defines a function wording a read error about a missing key in the CLI's terms.
macro_rules! keyless {
    ($name:ident, $ty:ident) => {
        fn $name(e: &$ty) -> String {
            match e {
                $ty::Encrypted { index, key_id } => format!(
                    "journal entry {index} is encrypted{}; give --key-file with its key",
                    key_id.map(|k| format!(" with key id {k}")).unwrap_or_default()
                ),
                $ty::UnknownKey { index, key_id } => {
                    format!("journal entry {index} is encrypted with key id {key_id}, which is not in the key file")
                }
                e => e.to_string(),
            }
        }
    };
}

/// Defines a function saying whether a read error of type `$ty` is one the tailer survives
/// (it has moved past the problem): said on stderr, one line each. Damaged ranges are
/// counted in `damaged`: `dump` and `tail` exit non-zero at the end when there were any
/// (after printing every healthy entry). One per error type of the journal's receive family.
macro_rules! survivable {
    ($name:ident, $ty:ident, $key_message:ident) => {
        fn $name(e: &$ty, skipped: &mut Skipped) -> bool {
            match e {
                $ty::Gap { from, to } => {
                    eprintln!("gap: entries {from}..{to} were removed by retention before they were read");
                    true
                }
                $ty::Damaged { .. } => {
                    skipped.damaged += 1;
                    eprintln!("damaged: {e}");
                    true
                }
                $ty::Corrupt(_) => {
                    skipped.damaged += 1;
                    eprintln!("skipped: {e}");
                    true
                }
                $ty::Encrypted { .. } | $ty::UnknownKey { .. } | $ty::Unauthenticated { .. } => {
                    skipped.undecrypted += 1;
                    eprintln!("skipped: {}", $key_message(e));
                    true
                }
                $ty::PositionReset { .. } => {
                    eprintln!("skipped: {e}");
                    true
                }
                _ => false,
            }
        }
    };
}
survivable!(survivable, JournalRecvTimeoutError, key_message);
keyless!(key_message, JournalRecvTimeoutError);
keyless!(key_message_now, JournalTryRecvError);
survivable!(survivable_now, JournalTryRecvError, key_message_now);

/// What `dump` and `tail` skipped (each said on stderr as it happened).
#[derive(Default)]
struct Skipped {
    /// Damaged ranges and corrupt entries.
    damaged: u64,
    /// Ranges of entries recovery removed ([`open_to_read`]).
    lost: u64,
    /// Encrypted entries without their key, or failing authentication.
    undecrypted: u64,
}

impl Skipped {
    /// The error `dump` and `tail` end with when they skipped anything.
    fn check(&self, dir: &Path) -> Result<()> {
        if self.lost > 0 {
            let damaged = match self.damaged {
                0 => String::new(),
                n => format!(" and {n} damaged range(s) were skipped"),
            };
            return Err(CliError::msg(format!(
                "{}: {} range(s) of entries were lost in recovery{damaged} (listed above); every remaining entry was \
                 printed. Restore the cycle files from a copy if you have one",
                dir.display(),
                self.lost
            )));
        }
        if self.damaged > 0 {
            return Err(CliError::msg(format!(
                "{}: {} damaged range(s) were skipped (listed above); every healthy entry was printed. \
                 Restore the damaged cycle files from a copy if you have one",
                dir.display(),
                self.damaged
            )));
        }
        if self.undecrypted > 0 {
            return Err(CliError::msg(format!(
                "{}: {} encrypted entr{} could not be read (listed above: no key, an unknown key id, or failed \
                 authentication); every other entry was printed",
                dir.display(),
                self.undecrypted,
                if self.undecrypted == 1 { "y" } else { "ies" }
            )));
        }
        Ok(())
    }
}

fn dump(a: &DumpArgs) -> Result<()> {
    let cipher = a.key.cipher()?;
    let (j, lost) = open_to_read(&a.dir.dir)?;
    let mut t = positioned(&j, &a.from, Journal::tailer)?;
    t.set_cipher(cipher);
    let progress = match crate::progress::allowed(a.quiet, a.json) && !std::io::stdout().is_terminal() {
        true => {
            let st = journal_info(&a.dir.dir)?;
            crate::progress::Progress::over_journal(true, "dump", st.first_index, st.next_index, st.bytes)
        }
        false => crate::progress::Progress::over_journal(false, "", 0, 0, 0),
    };
    let mut out = std::io::stdout().lock();
    let mut print = printer(&j, a.json, a.format, a.full);
    let mut skipped = Skipped { lost, ..Skipped::default() };
    loop {
        match t.try_recv_ref() {
            Ok(e) => {
                print.write(&mut out, EntryHead::new(e.index(), e.ts_ns()), e.data())?;
                progress.at(e.index());
            }
            Err(JournalTryRecvError::Empty) => break,
            Err(e) if progress.suspend(|| survivable_now(&e, &mut skipped)) => {}
            Err(e) => return Err(CliError::msg(format!("reading {}: {e}", a.dir.dir.display()))),
        }
    }
    out.flush()?;
    skipped.check(&a.dir.dir)
}

fn reader_error(dir: &Path, name: &str, e: OpenError) -> CliError {
    CliError::msg(format!("{}: reader {name:?}: {}", dir.display(), reader_message(&e)))
}

/// What went wrong with a named reader, in the words of the journal.
fn reader_message(e: &OpenError) -> String {
    match e {
        OpenError::InvalidName(n) => format!("reader name: {n}"),
        e => open_error_message(e),
    }
}

fn tail(a: &TailArgs) -> Result<()> {
    let cipher = a.key.cipher()?;
    let (j, lost) = open_to_read(&a.dir.dir)?;
    let mut t = match &a.reader {
        Some(name) => j.reader(name).map_err(|e| reader_error(&a.dir.dir, name, e))?,
        None => positioned(&j, &a.from, Journal::tailer_at_end)?,
    };
    t.set_cipher(cipher);
    let timeout = a.timeout_ms.map(Duration::from_millis);
    let mut out = std::io::stdout().lock();
    let mut print = printer(&j, a.json, a.format, a.full);
    let mut received = 0u64;
    let mut skipped = Skipped { lost, ..Skipped::default() };
    while a.count.is_none_or(|n| received < n) {
        let got = match timeout {
            Some(d) => t.recv_ref_timeout(d),
            None => t.recv_ref().map_err(JournalRecvTimeoutError::from),
        };
        match got {
            Ok(e) => {
                print.write(&mut out, EntryHead::new(e.index(), e.ts_ns()), e.data())?;
                out.flush()?;
                received += 1;
                // Printed: the named reader may move past it.
                t.ack();
            }
            Err(JournalRecvTimeoutError::Timeout) => {
                let of = a.count.map(|n| format!(" of {n}")).unwrap_or_default();
                return Err(CliError::msg(format!(
                    "timed out: no entry in {} for {} ms ({received}{of} received)",
                    a.dir.dir.display(),
                    a.timeout_ms.unwrap_or(0)
                )));
            }
            Err(e) if survivable(&e, &mut skipped) => {}
            Err(e) => return Err(CliError::msg(format!("reading {}: {e}", a.dir.dir.display()))),
        }
    }
    skipped.check(&a.dir.dir)
}

fn journal_info(dir: &Path) -> Result<JournalStatus> {
    Journal::status(dir).map_err(|e| open_failed(dir, e))
}

/// One named reader in `journal readers --json` and `journal info --json`.
#[derive(Debug, Serialize)]
struct ReaderJson<'a> {
    name: &'a str,
    /// The index it resumes at.
    position: u64,
    /// Entries after its position (`next_index − position`).
    lag: u64,
    /// `lag` under its older name, kept for one release.
    pending: u64,
    /// The live process holding it.
    holder_pid: Option<u32>,
}

/// The named readers of `info`.
fn readers_json(info: &JournalStatus) -> Vec<ReaderJson<'_>> {
    info.readers
        .iter()
        .map(|r| ReaderJson {
            name: &r.name,
            position: r.position,
            lag: info.reader_lag(r),
            pending: info.reader_lag(r),
            holder_pid: r.holder_pid,
        })
        .collect()
}

/// `journal info --json`.
#[derive(Debug, Serialize)]
struct InfoJson<'a> {
    dir: String,
    format_version: u32,
    first_index: u64,
    next_index: u64,
    entries: u64,
    bytes: u64,
    file_bytes: u64,
    hot_file_bytes: u64,
    archive_file_bytes: u64,
    append_rate: Option<RateJson>,
    appenders: usize,
    archive_dir: Option<String>,
    storage: Option<StorageJson<'a>>,
    cycles: Vec<CycleJson>,
    unreadable_cycles: Vec<UnreadableCycleJson<'a>>,
    /// What recovery removed from the cycles present.
    lost_entries: Vec<LostJson>,
    /// Why the recovery log could not be read (`lost_entries` is then unknown).
    recovery_log_error: Option<&'a str>,
    /// Cycles cut short of their entries, not yet recovered.
    cut_cycles: Vec<UnreadableCycleJson<'a>>,
    readers: Vec<ReaderJson<'a>>,
    retention: RetentionJson,
}

/// Entries recovery removed, in `journal info --json`: global indices `from..to` (`count`
/// of them; 0 when a cycle was moved aside and the count is unknown).
#[derive(Debug, Serialize)]
struct LostJson {
    cycle: u64,
    from: u64,
    to: u64,
    count: u64,
    bytes: u64,
    at_ns: u64,
    moved_aside: Option<String>,
}

/// `append_rate` of `journal info --json`.
#[derive(Debug, Serialize)]
struct RateJson {
    window_s: f64,
    entries_per_s: f64,
    bytes_per_s: f64,
}

/// `storage` of `journal info --json`.
#[derive(Debug, Serialize)]
struct StorageJson<'a> {
    fs_type: &'a str,
    tmpfs_huge: Option<&'a str>,
    huge_pages: Option<bool>,
}

/// One cycle of `journal info --json`.
#[derive(Debug, Serialize)]
struct CycleJson {
    cycle: u64,
    first_index: u64,
    entries: u64,
    bytes: u64,
    file_bytes: u64,
    archived: bool,
    sealed: bool,
    bucket_start_ns: u64,
}

/// A cycle file that could not be read, in `journal info --json`.
#[derive(Debug, Serialize)]
struct UnreadableCycleJson<'a> {
    cycle: u64,
    error: &'a str,
}

/// `retention` of `journal info --json`, and `journal config --json`: `null` is unlimited.
#[derive(Debug, Serialize)]
struct RetentionJson {
    max_cycles: Option<u64>,
    max_age_secs: Option<u64>,
}

/// `journal gc --json`.
#[derive(Debug, Serialize)]
struct GcJson<'a> {
    removed_cycles: &'a [u64],
    removed_bytes: u64,
}

/// A line of `journal append --json`: the entry appended.
#[derive(Debug, Serialize)]
struct AppendedJson {
    index: u64,
    len: usize,
}

/// Entries and bytes appended per second between two snapshots `window` apart.
struct AppendRate {
    window: Duration,
    entries_per_s: f64,
    bytes_per_s: f64,
}

/// Two snapshots `window` apart, the later one and the append rate between them (`None` for
/// a zero window: one snapshot).
fn snapshots(dir: &Path, window: Duration) -> Result<(JournalStatus, Option<AppendRate>)> {
    let earlier = journal_info(dir)?;
    if window.is_zero() {
        return Ok((earlier, None));
    }
    let start = std::time::Instant::now();
    std::thread::sleep(window);
    let later = journal_info(dir)?;
    let secs = start.elapsed().as_secs_f64();
    let (entries, bytes) = later.appended_since(&earlier);
    let rate = AppendRate { window, entries_per_s: entries as f64 / secs, bytes_per_s: bytes as f64 / secs };
    Ok((later, Some(rate)))
}

fn info(a: &InfoArgs) -> Result<()> {
    let (info, rate) = snapshots(&a.dir.dir, a.rate_window)?;
    // Said on stderr too, as readers say them, so that a script reading only the numbers
    // still shows them.
    for l in &info.lost_entries {
        eprintln!("lost: {l}");
    }
    if let Some(e) = &info.recovery_log_error {
        eprintln!("lost: {}: unknown: {e}", a.dir.dir.display());
    }
    for (c, why) in &info.cut_cycles {
        eprintln!("lost: journal cycle {c} is cut short: {why}");
    }
    let entries: u64 = info.cycles.iter().map(|c| c.entries).sum();
    if a.json {
        print_json(&InfoJson {
            dir: info.dir.display().to_string(),
            format_version: info.format_version,
            first_index: info.first_index,
            next_index: info.next_index,
            entries,
            bytes: info.bytes,
            file_bytes: info.file_bytes,
            hot_file_bytes: info.hot_file_bytes,
            archive_file_bytes: info.archive_file_bytes,
            append_rate: rate.as_ref().map(|r| RateJson {
                window_s: r.window.as_secs_f64(),
                entries_per_s: r.entries_per_s,
                bytes_per_s: r.bytes_per_s,
            }),
            appenders: info.appenders,
            archive_dir: info.archive_dir.as_ref().map(|p| p.display().to_string()),
            storage: info.storage.as_ref().map(|s| StorageJson {
                fs_type: &s.fs_type,
                tmpfs_huge: s.tmpfs_huge.as_deref(),
                huge_pages: s.huge_pages(),
            }),
            cycles: info
                .cycles
                .iter()
                .map(|c| CycleJson {
                    cycle: c.cycle,
                    first_index: c.first_index,
                    entries: c.entries,
                    bytes: c.bytes,
                    file_bytes: c.file_bytes,
                    archived: c.archived,
                    sealed: c.sealed,
                    bucket_start_ns: c.bucket_start_ns,
                })
                .collect(),
            unreadable_cycles: info
                .unreadable_cycles
                .iter()
                .map(|(c, why)| UnreadableCycleJson { cycle: *c, error: why })
                .collect(),
            lost_entries: info
                .lost_entries
                .iter()
                .map(|l| LostJson {
                    cycle: l.cycle,
                    from: l.from,
                    to: l.to,
                    count: l.count(),
                    bytes: l.bytes,
                    at_ns: l.at_ns,
                    moved_aside: l.moved_aside.clone(),
                })
                .collect(),
            recovery_log_error: info.recovery_log_error.as_deref(),
            cut_cycles: info.cut_cycles.iter().map(|(c, why)| UnreadableCycleJson { cycle: *c, error: why }).collect(),
            readers: readers_json(&info),
            retention: RetentionJson {
                max_cycles: info.retention.max_cycles,
                max_age_secs: info.retention.max_age.map(|d| d.as_secs()),
            },
        })?;
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "journal       {}", info.dir.display())?;
    writeln!(out, "format        version {}", info.format_version)?;
    if let Some(schema) = &info.schema {
        writeln!(out, "schema        {}", crate::schema::summary(schema))?;
    }
    writeln!(out, "entries       {entries} (indices {}..{})", info.first_index, info.next_index)?;
    writeln!(
        out,
        "bytes         {} in entries, {} on disk ({} hot, {} archive)",
        info.bytes, info.file_bytes, info.hot_file_bytes, info.archive_file_bytes
    )?;
    if let Some(r) = &rate {
        writeln!(
            out,
            "append rate   {:.1} entries/s, {:.0} bytes/s (over {} s)",
            r.entries_per_s,
            r.bytes_per_s,
            r.window.as_secs_f64()
        )?;
    }
    writeln!(out, "appenders     {} live", info.appenders)?;
    if let Some(s) = &info.storage {
        let pages = match s.huge_pages() {
            Some(true) => " (2 MiB pages)",
            Some(false) => " (4 KiB pages: mount with huge=within_size for faster appends, see docs/journal.md)",
            None => "",
        };
        let huge = s.tmpfs_huge.as_deref().map(|h| format!(", huge={h}")).unwrap_or_default();
        writeln!(out, "storage       {}{huge}{pages}", s.fs_type)?;
    }
    if let Some(a) = &info.archive_dir {
        writeln!(out, "archive       {}", a.display())?;
    }
    writeln!(out, "retention     {}", retention_words(&info.retention))?;
    writeln!(out, "cycles        {}", info.cycles.len())?;
    for c in &info.cycles {
        let sealed = if c.sealed { " sealed" } else { "" };
        let tier = if c.archived { " archived" } else { "" };
        writeln!(
            out,
            "  cycle {:<8} first {:<8} entries {:<8} bytes {}{sealed}{tier}",
            c.cycle, c.first_index, c.entries, c.bytes
        )?;
    }
    for (c, why) in &info.unreadable_cycles {
        writeln!(out, "  cycle {c:<8} UNREADABLE: {why}")?;
    }
    for l in &info.lost_entries {
        let count = match l.moved_aside {
            Some(_) => "an unknown number of entries (data file moved aside)".to_owned(),
            None => format!("{} entries, {} bytes", l.count(), l.bytes),
        };
        writeln!(out, "  cycle {:<8} LOST in recovery: indices {}..{} ({count})", l.cycle, l.from, l.to)?;
    }
    for (c, why) in &info.cut_cycles {
        writeln!(out, "  cycle {c:<8} CUT SHORT: {why}")?;
    }
    writeln!(out, "readers       {}", info.readers.len())?;
    for r in &info.readers {
        let holder = r.holder_pid.map(|p| format!(" (held by pid {p})")).unwrap_or_default();
        writeln!(out, "  {:<16} at {:<8} lag {}{holder}", r.name, r.position, info.reader_lag(r))?;
    }
    Ok(())
}

fn readers(a: &ReadersArgs) -> Result<()> {
    let info = journal_info(&a.dir.dir)?;
    if a.json {
        print_json(&readers_json(&info))?;
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    if info.readers.is_empty() {
        writeln!(out, "no named readers in {}", info.dir.display())?;
        return Ok(());
    }
    let mut t = Table::new(&[
        ("NAME", Align::Left),
        ("POSITION", Align::Right),
        ("LAG", Align::Right),
        ("HOLDER", Align::Right),
    ]);
    for r in &info.readers {
        t.row(vec![r.name.clone(), r.position.to_string(), info.reader_lag(r).to_string(), cell(r.holder_pid)]);
    }
    t.write(&mut out)?;
    Ok(())
}

fn gc(a: &GcArgs) -> Result<()> {
    let j = open_existing(&a.dir.dir)?;
    let report = if a.keep_cycles.is_none() && a.max_age_secs.is_none() {
        j.gc()
    } else {
        j.gc_with(Retention { max_cycles: a.keep_cycles, max_age: a.max_age_secs.map(Duration::from_secs) })
    }
    .map_err(|e| CliError::msg(format!("{}: gc failed: {e}", a.dir.dir.display())))?;
    if a.json {
        print_json(&GcJson { removed_cycles: &report.removed_cycles, removed_bytes: report.removed_bytes })?;
        return Ok(());
    }
    print_cycles("removed", &report.removed_cycles, report.removed_bytes)
}

/// `removed cycle 3` … then `removed 2 cycle(s), N bytes` (`gc`, `tier`).
fn print_cycles(verb: &str, cycles: &[u64], bytes: u64) -> Result<()> {
    let mut out = std::io::stdout().lock();
    for c in cycles {
        writeln!(out, "{verb} cycle {c}")?;
    }
    writeln!(out, "{verb} {} cycle(s), {bytes} bytes", cycles.len())?;
    Ok(())
}

/// `journal config`: prints the retention in force, after changing what the flags name (the
/// other limit stays as it is).
fn config(a: &ConfigArgs) -> Result<()> {
    let j = open_existing(&a.dir.dir)?;
    if a.retain_cycles.is_some() || a.max_age.is_some() {
        let have = j.retention();
        let wanted = Retention {
            max_cycles: a.retain_cycles.map_or(have.max_cycles, Limit::value),
            max_age: a.max_age.map_or(have.max_age, Limit::value),
        };
        j.set_retention(wanted)
            .map_err(|e| CliError::msg(format!("{}: {}", a.dir.dir.display(), open_error_message(&e))))?;
    }
    let r = j.retention();
    if a.json {
        print_json(&RetentionJson { max_cycles: r.max_cycles, max_age_secs: r.max_age.map(|d| d.as_secs()) })?;
    } else {
        writeln!(std::io::stdout().lock(), "retention     {}", retention_words(&r))?;
    }
    Ok(())
}

/// `journal tier --json`: the cycles moved to the archive and their bytes.
#[derive(Debug, serde::Serialize)]
struct TierJson<'a> {
    moved_cycles: &'a [u64],
    moved_bytes: u64,
}

/// `journal tier`: moves (or compresses) old cycles to the archive and says which.
fn tier(a: &TierArgs) -> Result<()> {
    let j = open_existing(&a.dir.dir)?;
    let report =
        if a.zstd { j.tier_zstd(&a.archive, a.keep_hot, a.zstd_level) } else { j.tier(&a.archive, a.keep_hot) }
            .map_err(|e| CliError::msg(format!("{}: {e}", a.dir.dir.display())))?;
    if a.json {
        print_json(&TierJson { moved_cycles: &report.moved_cycles, moved_bytes: report.moved_bytes })?;
        return Ok(());
    }
    print_cycles("moved", &report.moved_cycles, report.moved_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roll_cycles_parse() {
        assert_eq!(parse_roll("hourly"), Ok(RollCycle::Hourly));
        assert_eq!(parse_roll("5s"), Ok(RollCycle::Every(Duration::from_secs(5))));
        assert!(parse_roll("0s").is_err());
        assert!(parse_roll("weekly").is_err());
    }
}
