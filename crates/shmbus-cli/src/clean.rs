//! `shmbus clean`: remove what dead processes left behind.
//!
//! * A segment is removed when its creator and every participant are dead
//!   ([`SegmentReport::is_stale`](shmbus::admin::SegmentReport::is_stale)). A segment any live
//!   process uses is left alone.
//! * A stale queue, stream or pool that still holds undelivered data (messages sent and not
//!   received, bytes not consumed, jobs not taken or not yet reported lost:
//!   [`SegmentReport::pending`](shmbus::admin::SegmentReport::pending)) is kept and reported:
//!   a producer may send and exit before its consumer starts, and nothing committed is lost.
//!   `--force` removes it. A stale topic is removed whatever its history holds: the history
//!   is a window of recent messages owed to no reader (see `shmbus::admin`).
//! * A stale segment this user may not open read-write (e.g. a monitoring account with read
//!   permission only) is reported as one it cannot remove, and kept, with or without
//!   `--force`.
//! * Temporary creation files (`.<name>.<pid>.<nanos>`) of dead creators are removed.
//! * A file that is not a valid segment (bad magic, truncated, corrupt header) is reported
//!   and kept: it may be someone's data. `--force` removes it too.
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

use serde::Serialize;
use shmbus::{admin, OpenError};

use crate::output::print_json;
use crate::{Ctx, Result};

/// `shmbus clean [--domain D] [--dry-run] [--force] [--json]`
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this domain (default: every domain under the root).
    #[arg(long)]
    domain: Option<String>,
    /// Print what would be removed; remove nothing.
    #[arg(long)]
    dry_run: bool,
    /// Also remove stale segments that hold undelivered data, and files that are not valid
    /// segments (bad magic, truncated, corrupt).
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
    /// Stale or invalid files kept, and why.
    kept: Vec<FileJson>,
    /// Segments left alone because a live process uses them.
    in_use: usize,
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
    /// Undelivered data it held (kept, or discarded with `--force`), in `pending_unit`.
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

/// Removes stale segments and temporary files; prints each removal.
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
        |path: &std::path::Path, kind: String, pending: Option<admin::Pending>, reason: Option<String>| FileJson {
            path: path.display().to_string(),
            kind,
            pending: pending.map(|p| p.count()),
            pending_unit: pending.map(|p| p.unit()),
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
    let (mut removed, mut in_use, mut kept_pending, mut kept_invalid, mut not_ours) = (0usize, 0, 0, 0, 0);
    let mut skipped_domains = 0usize;
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
        for name in names {
            let what = format!("{}/{name}", domain.name());
            let path = dir.path().join(&name);
            match admin::inspect_in(&dir, &name) {
                Ok(report) if !report.is_stale() => in_use += 1,
                Ok(report) if !report.writable => {
                    not_ours += 1;
                    let reason = "stale but this user may not open it read-write".to_owned();
                    json.borrow_mut().kept.push(file(
                        &path,
                        report.header.kind.to_string(),
                        report.pending,
                        Some(reason),
                    ));
                    say!(
                        "kept {what}: cannot check/remove it: stale ({}; creator pid {} dead, no live users) but this user may not open it read-write",
                        report.header.kind, report.header.creator.pid
                    );
                }
                Ok(report) if report.has_pending() && !args.force => {
                    kept_pending += 1;
                    let pending = report.pending.map(|p| p.to_string()).unwrap_or_default();
                    let reason = "holds undelivered data".to_owned();
                    json.borrow_mut().kept.push(file(
                        &path,
                        report.header.kind.to_string(),
                        report.pending,
                        Some(reason),
                    ));
                    say!("kept {what}: {pending} (--force removes it)");
                }
                Ok(report) => {
                    if !remove(&dir, &name) {
                        continue;
                    }
                    removed += 1;
                    json.borrow_mut().removed.push(file(&path, report.header.kind.to_string(), report.pending, None));
                    let lost = match report.pending {
                        Some(p) if p.count() > 0 => format!("; {p} discarded"),
                        _ => String::new(),
                    };
                    say!(
                        "{verb} {what} ({}; creator pid {} dead, no live users{lost})",
                        report.header.kind,
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
    }
    let skipped = match skipped_domains {
        0 => String::new(),
        n => format!("; skipped {n} untrusted or invalid domain(s)"),
    };
    json.borrow_mut().in_use = in_use;
    if args.json {
        print_json(&json.into_inner())?;
    }
    say!(
        "{verb} {removed} file(s); kept {in_use} in use, {kept_pending} with undelivered data, {not_ours} this user may not remove, {kept_invalid} invalid or unreadable{skipped}"
    );
    match failed.get() {
        0 => Ok(()),
        n => Err(crate::CliError::msg(format!("{n} file(s) could not be removed (see above)"))),
    }
}
