//! `shmbus man [VERB...] [--dir DIR]`: the manual pages, one per verb, in roff.
//!
//! The main page `shmbus(1)` lists the verbs as `shmbus-VERB(1)`, and a verb with verbs of
//! its own (`journal`, `pool`) lists them as `shmbus-journal-tail(1)`: each of those pages is
//! made here too (clap_mangen, from the same command tree as `--help`), so every page a page
//! names exists. Hidden verbs get no page and are named nowhere.

use std::path::PathBuf;

use crate::{CliError, Result};

/// `shmbus man [VERB...] [--dir DIR]`
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The verb whose page to print (`pub`, or `journal tail` for a journal verb). Default:
    /// the main page, shmbus(1).
    #[arg(value_name = "VERB", conflicts_with = "dir")]
    verb: Vec<String>,
    /// Write every page (shmbus.1, shmbus-pub.1, shmbus-journal-tail.1, …) into this existing
    /// directory instead, and print their paths: `shmbus man --dir /usr/local/share/man/man1`.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Every page: the command tree, built (so each verb's display name is `shmbus-VERB`), and
/// each visible command under it, the main one first.
fn pages(cmd: clap::Command) -> Vec<clap::Command> {
    fn no_help_verb(cmd: clap::Command) -> clap::Command {
        cmd.disable_help_subcommand(true).mut_subcommands(no_help_verb)
    }
    fn walk(cmd: &clap::Command, out: &mut Vec<clap::Command>) {
        out.push(cmd.clone());
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, out);
        }
    }
    let mut cmd = no_help_verb(cmd);
    cmd.build();
    let mut out = Vec::new();
    walk(&cmd, &mut out);
    out
}

/// The page's name: `shmbus`, `shmbus-pub`, `shmbus-journal-tail`.
fn page_name(cmd: &clap::Command) -> String {
    cmd.get_display_name().unwrap_or_else(|| cmd.get_name()).to_owned()
}

/// Prints the page asked for, or writes them all to `--dir`.
pub fn run(cmd: clap::Command, args: &Args) -> Result<()> {
    let pages = pages(cmd);
    let failed = |e: std::io::Error| CliError::msg(format!("writing the manual page: {e}"));
    if let Some(dir) = &args.dir {
        for page in pages {
            let path = clap_mangen::Man::new(page)
                .generate_to(dir)
                .map_err(|e| CliError::msg(format!("{}: {e}", dir.display())))?;
            println!("{}", path.display());
        }
        return Ok(());
    }
    let want = std::iter::once("shmbus").chain(args.verb.iter().map(String::as_str)).collect::<Vec<_>>().join("-");
    let Some(page) = pages.into_iter().find(|p| page_name(p) == want) else {
        return Err(CliError::usage(format!(
            "no manual page for `{}`: give a verb as `shmbus --help` lists it (`journal tail` for a journal verb)",
            args.verb.join(" ")
        )));
    };
    clap_mangen::Man::new(page).render(&mut std::io::stdout()).map_err(failed)
}
