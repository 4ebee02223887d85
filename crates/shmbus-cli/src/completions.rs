//! Shell completion, dynamic: the shell asks `shmbus` itself what can come next, so domain
//! and channel names complete from what is under the root right now.
//!
//! `shmbus completions SHELL` prints the shell's registration script (clap_complete's
//! `CompleteEnv`): on each TAB the shell runs `COMPLETE=SHELL shmbus -- <words>`, which
//! [`complete_if_asked`] answers before anything else runs. Verbs and flags come from the
//! command tree (hidden verbs are not offered); `--domain` values from the domains under the
//! root in effect (`--root` on the line, else `$SHMBUS_ROOT`, else `/dev/shm`); a channel
//! NAME argument from the channels of the domain on the line (`--domain`), else
//! `$SHMBUS_DOMAIN`, and as `D/NAME` from every domain.

use std::ffi::OsStr;
use std::path::PathBuf;

use clap_complete::engine::{ArgValueCompleter, CompletionCandidate};
use clap_complete::env::{EnvCompleter, Shells};
use shmbus::Domain;

use crate::{CliError, Result};

/// The environment variable that asks for completions, as the registration scripts set it.
const VAR: &str = "COMPLETE";

/// `shmbus completions SHELL`
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to complete in.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Prints the registration script of `args.shell`.
pub fn run(args: &Args) -> Result<()> {
    let name = args.shell.to_string();
    let shells = Shells::builtins();
    let shell: &dyn EnvCompleter =
        shells.completer(&name).ok_or_else(|| CliError::usage(format!("no completion for shell {name}")))?;
    // The program the script runs on each TAB: as this one was started (a bare name is
    // looked up on $PATH then, a relative path made absolute now).
    let argv0 = PathBuf::from(std::env::args_os().next().unwrap_or_else(|| "shmbus".into()));
    let completer = match (argv0.components().count() > 1, std::env::current_dir()) {
        (true, Ok(cwd)) => cwd.join(argv0),
        _ => argv0,
    };
    let mut out = std::io::stdout().lock();
    shell
        .write_registration(VAR, "shmbus", "shmbus", &completer.to_string_lossy(), &mut out)
        .map_err(|e| CliError::msg(format!("writing the completion script: {e}")))
}

/// Answers a completion request (`COMPLETE=SHELL shmbus -- <words>`) and exits, or returns
/// at once when there is none. Runs before anything is printed.
pub fn complete_if_asked(command: fn() -> clap::Command) {
    clap_complete::CompleteEnv::with_factory(command).var(VAR).complete();
}

/// `cmd` with value completers on every `--domain` and on every channel NAME (or TOPIC)
/// argument, in every verb.
pub fn with_name_completers(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        let names = a.get_value_names().unwrap_or_default();
        if a.get_long() == Some("domain") {
            a.add(ArgValueCompleter::new(domains))
        } else if a.is_positional() && names.iter().any(|n| n == "NAME" || n == "TOPIC") {
            a.add(ArgValueCompleter::new(channels))
        } else {
            a
        }
    })
    .mut_subcommands(with_name_completers)
}

/// The words of the command line being completed: those after `--`.
fn words() -> Vec<String> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--") {
        Some(i) => args[i + 1..].to_vec(),
        None => Vec::new(),
    }
}

/// The value of `--flag` on the command line being completed (`--flag V` or `--flag=V`).
fn flag(words: &[String], flag: &str) -> Option<String> {
    let eq = format!("{flag}=");
    words.iter().enumerate().rev().find_map(|(i, w)| match w.strip_prefix(&eq) {
        Some(v) => Some(v.to_owned()),
        None if w == flag => words.get(i + 1).cloned(),
        None => None,
    })
}

/// The root the completed command would use.
fn root(words: &[String]) -> PathBuf {
    flag(words, "--root").map(PathBuf::from).unwrap_or_else(shmbus::domain::default_root)
}

/// The names of the domains under `root`, sorted.
fn domain_names(root: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = Domain::list(root).unwrap_or_default().iter().map(|d| d.name().to_owned()).collect();
    names.sort();
    names
}

/// The names of the channels of domain `name` under `root`, sorted.
fn channel_names(root: &std::path::Path, name: &str) -> Vec<String> {
    let Ok(domain) = Domain::with_root(name, root) else { return Vec::new() };
    let Ok(dir) = domain.open_dir() else { return Vec::new() };
    let mut names = dir.channel_names().unwrap_or_default();
    names.sort();
    names
}

/// `--domain`: the domains under the root.
fn domains(current: &OsStr) -> Vec<CompletionCandidate> {
    let current = current.to_string_lossy();
    domain_names(&root(&words()))
        .into_iter()
        .filter(|d| d.starts_with(current.as_ref()))
        .map(CompletionCandidate::new)
        .collect()
}

/// A channel NAME: the channels of the domain given (`--domain`, else `$SHMBUS_DOMAIN`), and
/// `D/` for every domain, then `D/NAME` once a `D/` is typed.
fn channels(current: &OsStr) -> Vec<CompletionCandidate> {
    let current = current.to_string_lossy().into_owned();
    let words = words();
    let root = root(&words);
    if let Some((d, partial)) = current.split_once('/') {
        return channel_names(&root, d)
            .into_iter()
            .filter(|n| n.starts_with(partial))
            .map(|n| CompletionCandidate::new(format!("{d}/{n}")))
            .collect();
    }
    let domain = flag(&words, "--domain").or_else(|| std::env::var(crate::DOMAIN_ENV).ok().filter(|d| !d.is_empty()));
    let mut out: Vec<String> = domain.map(|d| channel_names(&root, &d)).unwrap_or_default();
    out.extend(domain_names(&root).into_iter().map(|d| format!("{d}/")));
    out.into_iter().filter(|n| n.starts_with(&current)).map(CompletionCandidate::new).collect()
}
