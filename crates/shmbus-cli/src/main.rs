//! `shmbus`: see, drive and measure shmbus channels from the shell.
//!
//! One module per verb (`ls`, `info`, `pub`/`sub`, `pool`, `clean`, `demo`; `hz` for `hz`,
//! `bw` and `delay`); `kinds` is the one place that dispatches on the channel kind for
//! `pub`/`sub`, `topic` and `stream` are what `pub`/`sub` do on each kind, `input` reads the
//! messages to send, `payload` encodes and decodes them (`--format`, `--file`, JSON
//! `data_base64`), `units` parses sizes, durations and times, and `output` formats tables
//! and JSON.
//!
//! Errors: every failure exits non-zero with exactly one line on stderr, `shmbus: <message>`.
//! Usage errors (bad arguments, a verb given a kind it does not apply to) exit with 2,
//! everything else with 1.

mod clean;
mod completions;
mod create;
mod demo;
mod export;
mod hints;
mod hz;
mod info;
mod input;
mod journal;
mod kinds;
mod ls;
mod man;
mod output;
mod payload;
mod pool;
mod progress;
mod pubsub;
mod queue;
mod record;
mod rm;
mod schema;
mod service;
mod sibling;
mod snapshot;
mod stream;
mod target;
mod top;
mod topic;
mod units;
mod watch;

use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use shmbus::Domain;

/// Shared-memory messaging: list, inspect, publish, subscribe, dispatch, clean and demo channels.
#[derive(Debug, Parser)]
#[command(
    name = "shmbus",
    version,
    about = "Shared-memory messaging: list, inspect, publish, subscribe, dispatch, clean and demo channels",
    propagate_version = true
)]
struct Cli {
    /// Directory holding the domains (default: $SHMBUS_ROOT, else /dev/shm).
    #[arg(long, global = true, value_name = "DIR")]
    root: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List channels: kind, sizes, last sequence number, publishers and subscribers.
    Ls(ls::Args),
    /// Everything about one channel (header, creator, status, participants), or a recording (--file).
    Info(info::Args),
    /// Publish to a topic, queue or stream (a topic is created if missing, or --kind): --data
    /// once, or one message per stdin line.
    Pub(pubsub::PubArgs),
    /// Subscribe to a topic, or read a queue or stream, and print its messages, one per line
    /// (decoded by the channel's schema when it has a codec); also `shmbus echo`.
    // A hidden alias: completion offers one name per verb, and would pick `echo`.
    #[command(alias = "echo")]
    Sub(pubsub::SubArgs),
    /// Make an empty channel of any kind (topic, queue, stream, pool, or a journal with
    /// --dir); "exists" if it is there with the same kind and sizes.
    Create(create::Args),
    /// Print a channel's (or with --dir a journal's) schema data as it is; --json for its
    /// message encoding, name and schema encoding too.
    Schema(schema::Args),
    /// Dispatch jobs to a pool's workers, or be a worker.
    Pool(pool::Args),
    /// Answer a service's requests: --echo, or run CMD (after --) once per request with the
    /// request on its stdin and its stdout as the response. Creates the service if missing.
    Serve(service::ServeArgs),
    /// Send a service one request (--data, --file or a stdin line) and print its responses.
    Call(service::CallArgs),
    /// Remove one channel; refused while live processes use it (they are named) unless
    /// --force.
    Rm(rm::Args),
    /// Remove segments whose creator and users are all dead, and stale temporary files.
    ///
    /// A segment used by any live process is left alone. Files that are not valid segments
    /// (bad magic, truncated, corrupt header) are reported and kept unless --force is given.
    /// Files that cannot be checked (permission denied, another format version) are
    /// reported and never removed. Domains that are symlinks or belong to users this
    /// process does not trust (docs/trust.md) are skipped and reported, and only regular
    /// files are ever removed. Each removal is printed, then a summary line.
    Clean(clean::Args),
    /// Run the robotics profile (a camera, an IMU, five medium topics) as real processes and
    /// print latencies.
    Demo(demo::Args),
    /// A journal directory: append, dump, tail, info, readers, gc, config, tier, export, rm.
    Journal(journal::Args),
    /// Serve every channel's counters (and --journal directories') to Prometheus on
    /// http://ADDR/metrics.
    Export(export::Args),
    /// Record topics, with their schemas, into an MCAP file (--out FILE.mcap) or a journal (--dir).
    Record(record::RecordArgs),
    /// Republish a recording (--dir journal or --from FILE.mcap) to its topics, with the original spacing.
    Replay(record::ReplayArgs),
    /// Write the newest frame of an image topic (sensor_msgs/msg/Image in CDR, or
    /// foxglove.RawImage in protobuf) as a PNG file: --out FILE.png.
    Snapshot(snapshot::Args),
    /// A channel's message rate: mean, and min/max/std dev of the intervals (topic) or of
    /// the per-sample rates (queue, stream, pool, journal), over the last --window.
    ///
    /// A topic is watched through a subscriber of its own (it takes nothing from the other
    /// subscribers, but shows as one while it runs); queues, streams, pools and journals
    /// through their counters, sampled every 25 ms: nothing is taken or registered.
    Hz(hz::Args),
    /// A channel's bandwidth: bytes/s and message sizes over the last --window (observed as
    /// by `hz`; queues, streams, pools and journals give the mean size only).
    Bw(hz::Args),
    /// A topic's publish → receive latency: p50/p90/p99/max over the last --window messages,
    /// seen by a subscriber of its own. Other kinds carry no timestamps (exit 2).
    Delay(hz::Args),
    /// A live full-screen view of every channel's rates, lags, drops and latencies (q quits);
    /// --once prints one snapshot (--json for scripts).
    Top(top::Args),
    /// Forward a domain's topics (and serve or mirror journals) to other hosts over Zenoh:
    /// runs the separately built `shmbus-bridge` (`shmbus bridge --help` for its options).
    Bridge(sibling::Args),
    /// Print channels created and removed, and participants joined and left (a process
    /// killed by SIGKILL too), in one domain or all, one line each as they happen; --json for
    /// scripts.
    Watch(watch::Args),
    /// Show a domain's topics live in Foxglove (Open connection → Foxglove WebSocket →
    /// ws://127.0.0.1:8765): runs the separately built `shmbus-foxglove` (`shmbus foxglove
    /// --help` for its options).
    Foxglove(sibling::Args),
    /// Print a shell completion script that completes verbs, flags, domains and channel
    /// names: `shmbus completions bash > /etc/bash_completion.d/shmbus` (or zsh, fish,
    /// elvish, powershell).
    Completions(completions::Args),
    /// Print a manual page in roff: `shmbus man > shmbus.1; man ./shmbus.1`, `shmbus man pub`
    /// for a verb's, or `shmbus man --dir DIR` to write them all.
    Man(man::Args),
    /// One process of `shmbus demo` (internal).
    #[command(hide = true)]
    DemoRole(demo::RoleArgs),
}

/// Environment variable naming the domain of verbs that need one when `--domain` is not given.
pub const DOMAIN_ENV: &str = "SHMBUS_DOMAIN";

/// The command line as clap sees it, with `--root` hidden where it means nothing: the
/// journal verbs work on `--dir`, not on the domains under the root.
fn command() -> clap::Command {
    let cmd = Cli::command();
    let root = cmd.get_arguments().find(|a| a.get_id() == "root").cloned().expect("--root is declared on Cli");
    // clap copies a global argument into each subcommand that has none of that name when the
    // command is built: give the journal's commands a hidden copy first (still accepted, and
    // still propagated to `Cli::root`, but not shown).
    let hidden_root = root.hide(true);
    let cmd = cmd.mut_subcommand("journal", |journal| with_hidden(journal, &hidden_root));
    // The generators print text about the command line, whatever the root.
    let cmd = ["completions", "man"].iter().fold(cmd, |c, v| c.mut_subcommand(v, |g| g.arg(hidden_root.clone())));
    // `delay` takes no journal (`hz` and `bw` share its arguments): refused if given, not offered.
    let cmd = cmd.mut_subcommand("delay", |d| d.mut_arg("journal", |a| a.hide(true)));
    completions::with_name_completers(negative_numbers_are_values(cmd))
}

/// `cmd` and every verb under it taking `-1` (any negative number) as the value of an
/// option or argument, as `sub --from -1` needs, instead of as an unknown flag.
fn negative_numbers_are_values(cmd: clap::Command) -> clap::Command {
    cmd.allow_negative_numbers(true).mut_subcommands(negative_numbers_are_values)
}

/// `cmd` and its subcommands with `arg` added.
fn with_hidden(cmd: clap::Command, arg: &clap::Arg) -> clap::Command {
    let verbs: Vec<String> = cmd.get_subcommands().map(|v| v.get_name().to_string()).collect();
    let cmd = cmd.arg(arg.clone());
    verbs.iter().fold(cmd, |c, v| c.mut_subcommand(v, |verb| with_hidden(verb, arg)))
}

/// What every verb gets: where the domains live.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The root directory in effect.
    pub root: PathBuf,
}

impl Ctx {
    /// Domain `name` under the root in effect.
    pub fn domain(&self, name: &str) -> Result<Domain> {
        Ok(Domain::with_root(name, &self.root)?)
    }

    /// With `--wait SECS` given, waits until every channel of `names` exists in `domain`
    /// (`Domain::wait_for`, one deadline for all), else returns at once. Returns the names
    /// that did not exist when it started: every message in them was published after this
    /// listener started, so a topic subscriber reads them from their first message.
    pub fn wait_for<'n>(&self, domain: &Domain, names: &[&'n str], wait: Option<Duration>) -> Result<Vec<&'n str>> {
        let Some(wait) = wait else { return Ok(Vec::new()) };
        let deadline = std::time::Instant::now() + wait;
        let mut appeared = Vec::new();
        for name in names {
            // Only a hint for where to start reading: the wait itself goes through the
            // checked directory.
            if std::fs::symlink_metadata(domain.channel_path(name)?).is_err() {
                appeared.push(*name);
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match domain.wait_for(name, left) {
                Ok(()) => {}
                Err(shmbus::WaitForError::Timeout { .. }) => {
                    return Err(target::missing_after_wait(domain.name(), name, wait))
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(appeared)
    }

    /// Fails when the root directory is missing (or not a directory). The root is
    /// configuration, like a mount point: no verb creates it, and a typo in `--root` or
    /// `SHMBUS_ROOT` is said at once instead of showing as an empty listing or as channels
    /// that another process cannot find.
    pub fn check_root(&self) -> Result<()> {
        let root = self.root.display();
        match std::fs::metadata(&self.root) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(CliError::msg(format!("root directory {root} does not exist; create it or fix --root/SHMBUS_ROOT")))
            }
            Ok(m) if !m.is_dir() => {
                Err(CliError::msg(format!("root {root} is not a directory; fix --root/SHMBUS_ROOT")))
            }
            // Anything else (no permission, …) is for the verb to report where it matters.
            _ => Ok(()),
        }
    }

    /// The named domain, or every domain under the root.
    pub fn domains(&self, name: Option<&str>) -> Result<Vec<Domain>> {
        match name {
            Some(n) => Ok(vec![self.domain(n)?]),
            None => Domain::list(&self.root).map_err(|e| CliError::msg(format!("{}: {e}", self.root.display()))),
        }
    }
}

/// Parses `--wait SECS`: seconds, fractions allowed (`0.5`), or a duration with a unit
/// (`500ms`, `2m`), at most a day.
pub fn parse_wait(s: &str) -> std::result::Result<Duration, String> {
    match units::secs_duration(s)? {
        d if d <= Duration::from_secs(86_400) => Ok(d),
        _ => Err(format!("{s:?}: --wait is at most a day (86400 s)")),
    }
}

/// An error for the user: one line, said once, at the top, and the exit status.
#[derive(Debug)]
pub struct CliError(String, u8);

impl CliError {
    /// An error with this message (exit status 1).
    pub fn msg(m: impl Into<String>) -> CliError {
        CliError(m.into(), 1)
    }

    /// A usage error (exit status 2): the verb does not apply to what it was given.
    pub fn usage(m: impl Into<String>) -> CliError {
        CliError(m.into(), 2)
    }

    /// `e` while doing `what` (`"publish failed"`): the library's message after it, and the
    /// tool's hint.
    pub fn during<E: std::error::Error + 'static>(what: &str, e: E) -> CliError {
        let CliError(text, code) = CliError::from(e);
        CliError(format!("{what}: {text}"), code)
    }

    /// The same error with `more` at the end of its line.
    pub fn append(mut self, more: &str) -> CliError {
        self.0.push_str(more);
        self
    }
}

impl<E: std::error::Error + 'static> From<E> for CliError {
    /// The library's message, and the tool's hint (its verbs and flags) where it has one.
    fn from(e: E) -> Self {
        CliError::msg(e.to_string()).append(hints::hint(&e).unwrap_or(""))
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, whatever the message held.
        f.write_str(&self.0.trim().replace('\n', "; "))
    }
}

/// The result of every verb.
pub type Result<T> = std::result::Result<T, CliError>;

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`shmbus sub … | head`) like other Unix tools, instead of
    // failing on the next write.
    // SAFETY: resetting a signal disposition to its default has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    // A TAB in a shell with the registration script of `shmbus completions`: answer it, exit.
    completions::complete_if_asked(command);
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        eprintln!("shmbus: internal error: {}{at}; please report it", msg.replace('\n', "; "));
    }));

    let cli = match command().try_get_matches().and_then(|m| Cli::from_arg_matches(&m)) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                    ExitCode::from(2)
                } else {
                    ExitCode::SUCCESS
                };
            }
            let error = one_line_usage_error(&e.to_string());
            // A verb that needs a domain takes it from the environment too: say so.
            let env_hint = if e.kind() == ErrorKind::MissingRequiredArgument && error.contains("--domain") {
                format!(" (or set {DOMAIN_ENV})")
            } else {
                String::new()
            };
            eprintln!("shmbus: {error}{env_hint}");
            return ExitCode::from(2);
        }
    };
    let ctx = Ctx { root: cli.root.clone().unwrap_or_else(shmbus::domain::default_root) };
    // The journal verbs work on `--dir`, and the generators on nothing: only the others
    // need the root.
    if !matches!(
        cli.command,
        Command::Journal(_)
            | Command::Completions(_)
            | Command::Man(_)
            | Command::Bridge(_)
            | Command::Foxglove(_)
            | Command::Schema(schema::Args { dir: Some(_), .. })
    ) {
        if let Err(e) = ctx.check_root() {
            eprintln!("shmbus: {e}");
            return ExitCode::from(e.1);
        }
    }
    let result = match cli.command {
        Command::Ls(a) => ls::run(&ctx, &a),
        Command::Info(a) => info::run(&ctx, &a),
        Command::Pub(a) => pubsub::run_pub(&ctx, &a),
        Command::Sub(a) => pubsub::run_sub(&ctx, &a),
        Command::Create(a) => create::run(&ctx, &a),
        Command::Schema(a) => schema::run(&ctx, &a),
        Command::Pool(a) => pool::run(&ctx, &a),
        Command::Serve(a) => service::serve(&ctx, &a),
        Command::Call(a) => service::call(&ctx, &a),
        Command::Rm(a) => rm::run(&ctx, &a),
        Command::Clean(a) => clean::run(&ctx, &a),
        Command::Demo(a) => demo::run(&ctx, &a),
        Command::DemoRole(a) => demo::run_role(&ctx, &a),
        Command::Journal(a) => journal::run(&ctx, &a),
        Command::Export(a) => export::run(&ctx, &a),
        Command::Record(a) => record::run_record(&ctx, &a),
        Command::Replay(a) => record::run_replay(&ctx, &a),
        Command::Snapshot(a) => snapshot::run(&ctx, &a),
        Command::Hz(a) => hz::run(&ctx, &a, hz::Verb::Hz),
        Command::Bw(a) => hz::run(&ctx, &a, hz::Verb::Bw),
        Command::Delay(a) => hz::run(&ctx, &a, hz::Verb::Delay),
        Command::Top(a) => top::run(&ctx, &a),
        Command::Watch(a) => watch::run(&ctx, &a),
        Command::Bridge(a) => sibling::BRIDGE.run(&ctx, cli.root.is_some(), &a),
        Command::Foxglove(a) => sibling::FOXGLOVE.run(&ctx, cli.root.is_some(), &a),
        Command::Completions(a) => completions::run(&a),
        Command::Man(a) => man::run(command(), &a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shmbus: {e}");
            ExitCode::from(e.1)
        }
    }
}

/// clap's message is several paragraphs (error, tips, usage): keep the error and its tips
/// (`did you mean …`), on one line.
fn one_line_usage_error(text: &str) -> String {
    let mut parts = text.split("\n\n");
    let error = parts.next().unwrap_or("invalid arguments");
    let error = error.split_whitespace().collect::<Vec<_>>().join(" ");
    let error = error.strip_prefix("error: ").unwrap_or(&error).to_string();
    let tips: Vec<String> = parts
        .filter(|p| p.trim_start().starts_with("tip:"))
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    if tips.is_empty() {
        format!("{error} (see `shmbus --help`)")
    } else {
        format!("{error} ({}; see `shmbus --help`)", tips.join("; "))
    }
}

#[cfg(test)]
mod negative_values {
    //! Every option of every verb that takes a value takes a negative number as that value
    //! (its parser then says whether it means anything): found by walking clap's command
    //! tree, so an option added later is checked without being listed here.

    use super::command;

    /// Every `(verb path, option)` taking a value in the tree under `cmd`.
    fn walk(cmd: &clap::Command, path: &mut Vec<String>, out: &mut Vec<(String, String)>) {
        for arg in cmd.get_arguments() {
            if let (Some(long), true) = (arg.get_long(), arg.get_action().takes_values()) {
                out.push((path.join(" "), long.to_owned()));
            }
        }
        for sub in cmd.get_subcommands() {
            path.push(sub.get_name().to_owned());
            walk(sub, path, out);
            path.pop();
        }
    }

    #[test]
    fn every_option_takes_a_negative_number_as_its_value() {
        let mut options = Vec::new();
        walk(&command(), &mut Vec::new(), &mut options);
        assert!(options.iter().any(|(v, o)| v == "sub" && o == "from"), "{options:?}");
        for (verb, option) in &options {
            let mut argv = vec!["shmbus".to_owned()];
            argv.extend(verb.split(' ').filter(|w| !w.is_empty()).map(str::to_owned));
            argv.extend([format!("--{option}"), "-1".to_owned()]);
            if let Err(e) = command().try_get_matches_from(&argv) {
                let text = e.to_string();
                assert!(!text.contains("-- -1") && !text.contains("unexpected argument '-1'"), "{argv:?}: {text}");
            }
        }
    }
}

#[cfg(test)]
mod size_flags {
    //! Every size flag of every verb goes through [`units::size`]: found by walking clap's
    //! command tree, so a size flag added later is checked without being listed here.

    use super::command;

    /// Whether `arg` takes a size in bytes: by its name or its value name.
    fn is_size_flag(arg: &clap::Arg) -> bool {
        let long = arg.get_long().unwrap_or_default();
        let value_names = arg.get_value_names().unwrap_or_default();
        long.split('-').any(|w| matches!(w, "size" | "bytes" | "capacity" | "len" | "length"))
            || value_names.iter().any(|v| matches!(v.as_str(), "BYTES" | "B" | "SIZE"))
    }

    /// Every `(verb path, flag)` in the tree under `cmd`, hidden verbs included.
    fn walk(cmd: &clap::Command, path: &mut Vec<String>, out: &mut Vec<(String, clap::Arg)>) {
        for arg in cmd.get_arguments().filter(|a| is_size_flag(a)) {
            out.push((path.join(" "), arg.clone()));
        }
        for sub in cmd.get_subcommands() {
            path.push(sub.get_name().to_owned());
            walk(sub, path, out);
            path.pop();
        }
    }

    /// The value `--flag text` parses to, in bytes, through `arg`'s own parser (the flag alone
    /// in a command, so the verb's other required arguments do not matter).
    fn parsed(arg: &clap::Arg, text: &str) -> Result<u64, String> {
        let id = arg.get_id().as_str().to_owned();
        let long = format!("--{}", arg.get_long().expect("size flags are long flags"));
        let cmd = clap::Command::new("t").arg(arg.clone().required(false).num_args(1).action(clap::ArgAction::Set));
        let m = cmd.try_get_matches_from(["t", long.as_str(), text]).map_err(|e| e.kind().to_string())?;
        if let Ok(Some(v)) = m.try_get_one::<usize>(&id) {
            return Ok(*v as u64);
        }
        if let Ok(Some(v)) = m.try_get_one::<u64>(&id) {
            return Ok(*v);
        }
        panic!("{long}: parsed to neither usize nor u64 bytes")
    }

    #[test]
    fn every_size_flag_takes_the_same_suffixes() {
        let mut flags = Vec::new();
        walk(&command(), &mut Vec::new(), &mut flags);
        let names: Vec<String> =
            flags.iter().map(|(verb, a)| format!("{verb} --{}", a.get_long().unwrap_or_default())).collect();
        // The walk finds the flags the issue named (and so is not vacuous).
        for must in ["create --slot-size", "create --max-element-size", "create --max-job-size", "pub --slot-size"] {
            assert!(names.iter().any(|n| n == must), "{must} not found among {names:?}");
        }
        for ((_, arg), name) in flags.iter().zip(&names) {
            for (text, bytes) in [
                ("4096", 4096u64),
                ("4K", 4096),
                ("4KiB", 4096),
                ("4k", 4096),
                ("64KiB", 65536),
                ("1M", 1 << 20),
                ("1MiB", 1 << 20),
                ("2G", 2 << 30),
                ("512B", 512),
            ] {
                assert_eq!(parsed(arg, text), Ok(bytes), "{name} {text}");
            }
            for bad in ["4KB", "four", "4X", "-4K"] {
                assert!(parsed(arg, bad).is_err(), "{name} {bad} must be refused");
            }
        }
    }
}
