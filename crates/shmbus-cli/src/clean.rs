//! `shmbus clean`: remove what dead processes left behind.
//!
//! * A segment is removed when its creator and every participant are dead
//!   ([`SegmentReport::is_stale`](shmbus::admin::SegmentReport::is_stale)). A segment any live
//!   process uses is left alone.
//! * Temporary creation files (`.<name>.<pid>.<nanos>`) of dead creators are removed.
//! * A file that is not a valid segment (bad magic, truncated, corrupt header) is reported
//!   and kept: it may be someone's data. `--force` removes it too.
//! * A file that cannot be checked (permission denied, another format version, I/O error) is
//!   reported and never removed: a process of another user or shmbus version may be using it.

use shmbus::{admin, OpenError};

use crate::{Ctx, Result};

/// `shmbus clean [--domain D] [--dry-run] [--force]`
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this domain (default: every domain under the root).
    #[arg(long)]
    domain: Option<String>,
    /// Print what would be removed; remove nothing.
    #[arg(long)]
    dry_run: bool,
    /// Also remove files that are not valid segments (bad magic, truncated, corrupt).
    #[arg(long)]
    force: bool,
}

/// Removes stale segments and temporary files; prints each removal.
pub fn run(ctx: &Ctx, args: &Args) -> Result<()> {
    let verb = if args.dry_run { "would remove" } else { "removed" };
    let remove = |path: &std::path::Path| -> Result<()> {
        if args.dry_run {
            return Ok(());
        }
        match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(crate::CliError::msg(format!("cannot remove {}: {e}", path.display()))),
        }
    };
    let (mut removed, mut in_use, mut kept_invalid) = (0usize, 0usize, 0usize);
    for domain in ctx.domains(args.domain.as_deref())? {
        let names =
            domain.channel_names().map_err(|e| crate::CliError::msg(format!("{}: {e}", domain.dir().display())))?;
        for name in names {
            let path = domain.channel_path(&name)?;
            let what = format!("{}/{name}", domain.name());
            match admin::inspect(&path) {
                Ok(report) if report.is_stale() => {
                    remove(&path)?;
                    removed += 1;
                    println!(
                        "{verb} {what} ({}; creator pid {} dead, no live users)",
                        report.header.kind, report.header.creator.pid
                    );
                }
                Ok(_) => in_use += 1,
                Err(OpenError::NotFound { .. }) => {} // removed meanwhile
                Err(e @ (OpenError::NotASegment { .. } | OpenError::Truncated { .. } | OpenError::Corrupt { .. })) => {
                    if args.force {
                        remove(&path)?;
                        removed += 1;
                        println!("{verb} invalid {what}: {e}");
                    } else {
                        kept_invalid += 1;
                        println!("kept invalid {what} (--force removes it): {e}");
                    }
                }
                Err(e) => {
                    kept_invalid += 1;
                    println!("kept unreadable {what}: {e}");
                }
            }
        }
        let temps = admin::stale_temp_files(&domain)
            .map_err(|e| crate::CliError::msg(format!("{}: {e}", domain.dir().display())))?;
        for t in temps {
            remove(&t.path)?;
            removed += 1;
            println!("{verb} temporary file {} (creator pid {} dead)", t.path.display(), t.pid);
        }
    }
    println!("{verb} {removed} file(s); kept {in_use} in use, {kept_invalid} invalid or unreadable");
    Ok(())
}
