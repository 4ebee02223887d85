//! `shmbus rm`: remove one channel by name (`shmbus::Domain::remove`).
//!
//! Refused (exit 1, naming each live process and its role) while the channel's creator or
//! any participant is alive; `--force` removes it anyway, and those processes keep working
//! on their mapping. A file that is not a valid segment is refused unless `--force`. Only a
//! regular file of a trusted owner is ever removed, never through a symlink.
//!
//! A domain directory this call emptied goes too (`Domain::remove_dir_if_empty`: `rmdir`
//! relative to the root, so only when empty, never the root, never through a symlink), as
//! `shmbus clean` does (said on a line of its own; `--json` keeps its one line as it was).

use serde::Serialize;
use shmbus::admin::RemoveError;
use shmbus::OpenError;

use crate::output::JsonLines;
use crate::{CliError, Ctx, Result};

/// `shmbus rm --domain D NAME [--force] [--json]`
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The channel's domain (or give the channel as D/NAME). Default: $SHMBUS_DOMAIN.
    #[arg(long = "domain", id = "domain", value_name = "D")]
    pub domain_flag: Option<String>,
    /// The channel's name, or D/NAME.
    #[arg(value_name = "NAME")]
    pub channel: String,
    /// The domain, resolved from `--domain`, `D/NAME` or $SHMBUS_DOMAIN by `resolved()`.
    #[arg(skip)]
    pub domain: String,
    /// The name without its domain, resolved by `resolved()`.
    #[arg(skip)]
    pub name: String,
    /// Remove it even while live processes use it (they keep their mapping), or if it is not
    /// a valid segment.
    #[arg(long)]
    pub force: bool,
    /// One JSON line instead of text.
    #[arg(long)]
    pub json: bool,
}

impl Args {
    /// These arguments with [`Self::domain`] and [`Self::name`] resolved
    /// ([`crate::target::channel`]).
    pub fn resolved(&self) -> Result<Args> {
        let ch = crate::target::channel(self.domain_flag.as_deref(), &self.channel)?;
        Ok(Args { domain: ch.domain, name: ch.name, ..self.clone() })
    }
}

/// `rm --json`: one line.
#[derive(Debug, Serialize)]
struct RemovedJson<'a> {
    domain: &'a str,
    name: &'a str,
    path: String,
    /// The channel's kind, `"invalid"` for a file that was not a valid segment.
    kind: String,
    /// Live processes still mapping it (`--force` only).
    still_mapped: Vec<MappedJson>,
}

/// A live process still mapping a removed channel.
#[derive(Debug, Serialize)]
struct MappedJson {
    pid: u32,
    role: String,
}

/// Removes the channel and says what it removed.
pub fn run(ctx: &Ctx, args: &Args) -> Result<()> {
    let args = &args.resolved()?;
    let domain_name = args.domain.clone();
    let domain = ctx.domain(&domain_name)?;
    let what = format!("{domain_name}/{}", args.name);
    let r = if args.force { domain.remove_forced(&args.name) } else { domain.remove(&args.name) };
    // The channel removed, its domain directory too if that emptied it: `rmdir` fails on a
    // directory that is not empty, so a channel created meanwhile keeps it. The channel is
    // gone either way: a directory that cannot be removed is said, not failed.
    let removed_domain = r.is_ok()
        && domain.remove_dir_if_empty().unwrap_or_else(|e| {
            eprintln!("shmbus rm: cannot remove empty domain {domain_name}: {e}");
            false
        });
    match r {
        Ok(removed) if args.json => {
            let v = RemovedJson {
                domain: &domain_name,
                name: &args.name,
                path: removed.path.display().to_string(),
                kind: removed.kind.map_or_else(|| "invalid".to_owned(), |k| k.to_string()),
                still_mapped: removed
                    .attached
                    .iter()
                    .map(|a| MappedJson { pid: a.pid, role: a.role.to_string() })
                    .collect(),
            };
            JsonLines::new().write(&mut std::io::stdout().lock(), &v)?;
            Ok(())
        }
        Ok(removed) => {
            let kind = removed.kind.map_or_else(|| "invalid file".to_owned(), |k| k.to_string());
            let still = if removed.attached.is_empty() {
                String::new()
            } else {
                let who: Vec<String> = removed.attached.iter().map(|a| a.to_string()).collect();
                format!("; still mapped by {}", who.join(", "))
            };
            println!("removed {what} ({kind}{still})");
            if removed_domain {
                println!("removed empty domain {domain_name}");
            }
            Ok(())
        }
        Err(RemoveError::InUse { attached, .. }) => {
            let who: Vec<String> = attached.iter().map(|a| a.to_string()).collect();
            Err(CliError::msg(format!(
                "{what} is in use by {}; stop them first, or `--force` (they keep their mapping)",
                who.join(", ")
            )))
        }
        Err(RemoveError::Open(OpenError::NotFound { .. })) => {
            Err(crate::target::missing(&domain_name, &args.name, crate::target::WaitHint::None))
        }
        Err(
            e @ RemoveError::Open(
                OpenError::NotASegment { .. }
                | OpenError::Truncated { .. }
                | OpenError::Corrupt { .. }
                | OpenError::VersionMismatch { .. },
            ),
        ) => Err(CliError::msg(format!("{e} (--force removes it)"))),
        Err(e) => Err(e.into()),
    }
}
