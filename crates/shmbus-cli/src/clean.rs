//! `shmbus clean`: remove what dead processes left behind.
//!
//! Each channel is in use, idle or stale
//! ([`SegmentReport::state`](shmbus::admin::SegmentReport::state), the rule `ls` and `info`
//! show too):
//!
//! * A channel in use (its creator or a participant alive) is left alone.
//! * A stale channel (nobody alive, nothing held: a topic never published to, a drained
//!   queue or stream, a pool with no job outstanding) is removed.
//! * An idle channel (nobody alive, but a topic with history, or a queue, stream or pool with
//!   undelivered data) is kept and reported: a producer may send and exit before its
//!   consumer starts, and `shmbus pub` then `shmbus sub --latest` is the quick start.
//!   `--all` removes it too.
//! * `--older-than AGE` removes only channels last used at least AGE ago: their segment
//!   file's mtime, set at creation and by every process opening the channel to use it or
//!   letting go of it ([`SegmentReport::modified`](shmbus::admin::SegmentReport::modified)).
//! * A segment nobody uses that this user may not open read-write (e.g. a monitoring account
//!   with read permission only) is reported as one it cannot remove, and kept, whatever the
//!   flags.
//! * Temporary creation files (`.<name>.<pid>.<nanos>`) of dead creators are removed.
//! * A file that is not a valid segment (bad magic, truncated, corrupt header) is reported
//!   and kept: it may be someone's data. `--force` (which implies `--all`) removes it too.
//! * A domain directory that this run emptied is removed (`rmdir` relative to the root:
//!   never the root, never through a symlink, only when empty).
//! * A file that cannot be checked (permission denied, another format version, I/O error) is
//!   reported and never removed: a process of another user or shmbus version may be using it.
//!
//! What `clean` may touch, even as root and with `--force`: regular files with a valid
//! channel name, and shmbus's own temporary files, directly inside a domain directory under
//! the root, removed with `unlinkat` relative to that directory's descriptor. A domain is
//! opened once without following a symlink and checked against the trust policy
//! (`shmbus::domain::TrustPolicy`): a domain that is a symlink, not a directory, owned by an
//! untrusted user or writable by all without the sticky bit is reported and skipped whole. A
//! channel file owned by an untrusted user, or anything but a regular file under a channel's
//! name (FIFO, socket, device, symlink), is reported and kept.

use std::time::{Duration, SystemTime};

use serde::Serialize;
use shmbus::admin::{self, ChannelState, SegmentReport};
use shmbus::OpenError;

use crate::output::print_json;
use crate::{Ctx, Result};

/// `shmbus clean [--domain D] [--dry-run] [--all] [--older-than AGE] [--force] [--json]`
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this domain (default: every domain under the root).
    #[arg(long)]
    domain: Option<String>,
    /// Print what would be removed; remove nothing.
    #[arg(long)]
    dry_run: bool,
    /// Also remove idle channels: nobody uses them, but they hold data (a topic's history,
    /// undelivered queue, stream or pool data); and domain directories left empty, untouched
    /// for a minute (or --older-than).
    #[arg(long)]
    all: bool,
    /// Remove only channels last used (created, or opened or let go of by a process) at least
    /// AGE ago: `10m`, `7d` (a bare number is seconds).
    #[arg(long, value_name = "AGE", value_parser = crate::units::secs_duration)]
    older_than: Option<Duration>,
    /// `--all`, and also remove files that are not valid segments (bad magic, truncated,
    /// corrupt).
    #[arg(long)]
    force: bool,
    /// One JSON object when done (what was removed, kept, skipped) instead of a line each.
    #[arg(long)]
    json: bool,
}

/// `clean --json`: one object when done. Each list is in the order the files were met.
#[derive(Debug, Default, Serialize)]
struct CleanJson {
    dry_run: bool,
    /// Files removed (or, with `--dry-run`, that would be).
    removed: Vec<FileJson>,
    /// Idle, recent, invalid or foreign files kept, and why.
    kept: Vec<FileJson>,
    /// Segments left alone because a live process uses them.
    in_use: usize,
    /// Domain directories this run emptied and removed.
    removed_domains: Vec<String>,
    /// Domains not looked into (a symlink, not a directory, untrusted owner).
    skipped_domains: Vec<ProblemJson>,
    /// Files whose removal failed (the exit status is then 1).
    failed: Vec<ProblemJson>,
}

/// A file `clean` removed or kept.
#[derive(Debug, Serialize)]
struct FileJson {
    path: String,
    /// The channel's kind, or `invalid` (not a valid segment), `unreadable` (cannot be
    /// checked), `untrusted` (not ours to touch) or `temporary` (a creation file).
    kind: String,
    /// `in-use`, `idle` or `stale` for a channel (see `ls`); `null` for other files.
    state: Option<&'static str>,
    /// Undelivered data it held (kept, or discarded with `--all`), in `pending_unit`.
    pending: Option<u64>,
    pending_unit: Option<&'static str>,
    /// Why it was kept (`null` for a removed file).
    reason: Option<String>,
}

/// Something `clean` could not look into or remove, and why.
#[derive(Debug, Serialize)]
struct ProblemJson {
    path: String,
    error: String,
}

/// How long ago `report`'s segment file was last modified; `None` if unknown (or in the future).
/// How long a domain directory found empty must have been untouched before `clean --all`
/// removes it (unless `--older-than` says otherwise).
const EMPTY_DOMAIN_AGE: Duration = Duration::from_secs(60);

/// Whether the directory at `path` was last changed at least `age` ago (its mtime changes
/// when an entry is made or removed in it).
fn untouched_for(path: &std::path::Path, age: Duration) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|e| e >= age)
}

fn age(report: &SegmentReport) -> Option<Duration> {
    SystemTime::now().duration_since(report.modified?).ok()
}

/// `d 3 h` style: the largest unit that fits, for the `kept … (modified … ago)` line.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        7200..=172_799 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86_400),
    }
}

/// What an idle channel holds, for the `kept` line: `3 undelivered messages`, `2 messages in
/// its history`.
fn held(report: &SegmentReport) -> String {
    match (report.pending, report.history_len) {
        (Some(p), _) if p.count() > 0 => p.to_string(),
        (_, Some(n)) => format!("{n} message{} in its history", if n == 1 { "" } else { "s" }),
        _ => "data".into(),
    }
}

/// Removes stale (with --all, idle) channels and temporary files; prints each removal.
pub fn run(ctx: &Ctx, args: &Args) -> Result<()> {
    let verb = if args.dry_run { "would remove" } else { "removed" };
    // With --json the lines are collected into one object, printed at the end.
    let json = std::cell::RefCell::new(CleanJson { dry_run: args.dry_run, ..CleanJson::default() });
    macro_rules! say {
        ($($t:tt)*) => {
            if !args.json {
                println!($($t)*);
            }
        };
    }
    let file =
        |path: &std::path::Path, kind: String, report: Option<&SegmentReport>, reason: Option<String>| FileJson {
            path: path.display().to_string(),
            kind,
            state: report.map(|r| r.state().as_str()),
            pending: report.and_then(|r| r.pending).map(|p| p.count()),
            pending_unit: report.and_then(|r| r.pending).map(|p| p.unit()),
            reason,
        };
    // A file that cannot be removed is reported and skipped: the rest still gets cleaned,
    // and the exit status says that something was left.
    let failed = std::cell::Cell::new(0usize);
    let remove = |dir: &shmbus::domain::DomainDir, name: &str| -> bool {
        if args.dry_run {
            return true;
        }
        let path = dir.path().join(name);
        match dir.remove_file(name) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => {
                eprintln!("shmbus clean: cannot remove {}: {e}", path.display());
                json.borrow_mut().failed.push(ProblemJson { path: path.display().to_string(), error: e.to_string() });
                failed.set(failed.get() + 1);
                false
            }
        }
    };
    let (mut removed, mut in_use, mut kept_idle, mut kept_invalid, mut not_ours) = (0usize, 0, 0, 0, 0);
    let (mut kept_recent, mut removed_dirs, mut skipped_domains) = (0usize, 0usize, 0usize);
    let all = args.all || args.force;
    for domain in ctx.domains(args.domain.as_deref())? {
        let dir = match domain.open_dir() {
            Ok(d) => d,
            Err(OpenError::NotFound { .. }) => continue,
            Err(e) => {
                // Planted, untrusted or not a directory: nothing in it is looked at.
                skipped_domains += 1;
                say!("skipped domain {}: {e}", domain.name());
                json.borrow_mut()
                    .skipped_domains
                    .push(ProblemJson { path: domain.dir().display().to_string(), error: e.to_string() });
                continue;
            }
        };
        let names = dir.channel_names().map_err(|e| crate::CliError::msg(format!("{}: {e}", dir.path().display())))?;
        let removed_before = removed;
        for name in names {
            let what = format!("{}/{name}", domain.name());
            let path = dir.path().join(&name);
            match admin::inspect_in(&dir, &name) {
                Ok(report) if report.state() == ChannelState::InUse => in_use += 1,
                Ok(report) if !report.writable => {
                    not_ours += 1;
                    let reason = "nobody uses it, but this user may not open it read-write".to_owned();
                    json.borrow_mut().kept.push(file(
                        &path,
                        report.header.kind.to_string(),
                        Some(&report),
                        Some(reason),
                    ));
                    say!(
                        "kept {what}: cannot check/remove it: {} ({}; creator pid {} dead, no live users) but this user may not open it read-write",
                        report.state(),
                        report.header.kind,
                        report.header.creator.pid
                    );
                }
                Ok(report) if report.state() == ChannelState::Idle && !all => {
                    kept_idle += 1;
                    let reason = format!("idle, holds {}", held(&report));
                    json.borrow_mut().kept.push(file(
                        &path,
                        report.header.kind.to_string(),
                        Some(&report),
                        Some(reason),
                    ));
                    say!("kept {what}: idle, holds {} (--all removes it)", held(&report));
                }
                Ok(report) if args.older_than.is_some_and(|min| age(&report).is_none_or(|a| a < min)) => {
                    kept_recent += 1;
                    let ago =
                        age(&report).map_or_else(|| "at an unknown time".to_owned(), |a| format!("{} ago", human(a)));
                    let reason = format!("{}, but modified {ago} (--older-than)", report.state());
                    json.borrow_mut().kept.push(file(
                        &path,
                        report.header.kind.to_string(),
                        Some(&report),
                        Some(reason),
                    ));
                    say!("kept {what}: {}, but modified {ago} (--older-than)", report.state());
                }
                Ok(report) => {
                    if !remove(&dir, &name) {
                        continue;
                    }
                    removed += 1;
                    json.borrow_mut().removed.push(file(&path, report.header.kind.to_string(), Some(&report), None));
                    let lost =
                        if report.holds_data() { format!("; {} discarded", held(&report)) } else { String::new() };
                    say!(
                        "{verb} {what} ({}, {}; creator pid {} dead, no live users{lost})",
                        report.header.kind,
                        report.state(),
                        report.header.creator.pid
                    );
                }
                Err(OpenError::NotFound { .. }) => {} // removed meanwhile
                Err(e @ (OpenError::NotASegment { .. } | OpenError::Truncated { .. } | OpenError::Corrupt { .. })) => {
                    if args.force {
                        if remove(&dir, &name) {
                            removed += 1;
                            json.borrow_mut().removed.push(file(&path, "invalid".into(), None, None));
                            say!("{verb} invalid {what}: {e}");
                        }
                    } else {
                        kept_invalid += 1;
                        json.borrow_mut().kept.push(file(&path, "invalid".into(), None, Some(e.to_string())));
                        say!("kept invalid {what} (--force removes it): {e}");
                    }
                }
                Err(e @ OpenError::Untrusted { .. }) => {
                    not_ours += 1;
                    json.borrow_mut().kept.push(file(&path, "untrusted".into(), None, Some(e.to_string())));
                    say!("kept {what}: {e}");
                }
                Err(e) => {
                    kept_invalid += 1;
                    json.borrow_mut().kept.push(file(&path, "unreadable".into(), None, Some(e.to_string())));
                    say!("kept unreadable {what}: {e}");
                }
            }
        }
        let temps = admin::stale_temp_files_in(&dir)
            .map_err(|e| crate::CliError::msg(format!("{}: {e}", dir.path().display())))?;
        for t in temps {
            if !remove(&dir, &t.name) {
                continue;
            }
            removed += 1;
            json.borrow_mut().removed.push(file(&t.path, "temporary".into(), None, None));
            say!("{verb} temporary file {} (creator pid {} dead)", t.path.display(), t.pid);
        }
        // A domain this run emptied goes too. One that was empty before goes only with
        // --all and when it has been untouched for a while: someone may have made it for a
        // channel about to come. With --dry-run nothing is removed.
        let emptied = removed > removed_before;
        let long_empty = args.all && untouched_for(&domain.dir(), args.older_than.unwrap_or(EMPTY_DOMAIN_AGE));
        if long_empty && args.dry_run {
            say!("would remove empty domain {}", domain.name());
        }
        if (emptied || long_empty) && !args.dry_run {
            drop(dir);
            match domain.remove_dir_if_empty() {
                Ok(true) => {
                    removed_dirs += 1;
                    json.borrow_mut().removed_domains.push(domain.name().to_owned());
                    say!("removed empty domain {}", domain.name());
                }
                Ok(false) => {}
                Err(e) => eprintln!("shmbus clean: cannot remove empty domain {}: {e}", domain.name()),
            }
        }
    }
    let skipped = match skipped_domains {
        0 => String::new(),
        n => format!("; skipped {n} untrusted or invalid domain(s)"),
    };
    let dirs = match removed_dirs {
        0 => String::new(),
        n => format!(" and {n} empty domain(s)"),
    };
    let recent = match args.older_than {
        Some(_) => format!(", {kept_recent} more recent than --older-than"),
        None => String::new(),
    };
    json.borrow_mut().in_use = in_use;
    if args.json {
        print_json(&json.into_inner())?;
    }
    say!(
        "{verb} {removed} file(s){dirs}; kept {in_use} in use, {kept_idle} idle, {not_ours} this user may not remove, {kept_invalid} invalid or unreadable{recent}{skipped}"
    );
    match failed.get() {
        0 => Ok(()),
        n => Err(crate::CliError::msg(format!("{n} file(s) could not be removed (see above)"))),
    }
}
