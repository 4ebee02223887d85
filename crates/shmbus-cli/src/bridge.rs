//! `shmbus bridge`: runs the Zenoh bridge, a separate program (`shmbus-bridge`, crate
//! `shmbus-bridge`), so that Zenoh's dependencies stay out of this tool.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use crate::{CliError, Ctx, Result};

/// The bridge program's file name.
const PROGRAM: &str = "shmbus-bridge";

/// `shmbus bridge …`: every argument goes to the bridge.
#[derive(Debug, clap::Args)]
#[command(disable_help_flag = true)]
pub struct Args {
    /// The bridge's arguments (`shmbus bridge --help` lists them).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
    args: Vec<OsString>,
}

/// Where the bridge program is: beside this one, else on `PATH`.
fn program() -> Option<PathBuf> {
    let beside = std::env::current_exe().ok().map(|e| e.with_file_name(PROGRAM));
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join(PROGRAM)).collect::<Vec<_>>())
        .unwrap_or_default();
    beside.into_iter().chain(on_path).find(|p| p.is_file())
}

/// Replaces this process with the bridge (so signals and the exit status are its own).
pub fn run(ctx: &Ctx, root_given: bool, a: &Args) -> Result<()> {
    let Some(prog) = program() else {
        return Err(CliError::msg(format!(
            "the bridge is a separate program, {PROGRAM}, found neither beside shmbus nor on PATH; \
             build it with `cargo build --release -p shmbus-bridge` (or `cargo install --path crates/shmbus-bridge`)"
        )));
    };
    let mut cmd = std::process::Command::new(&prog);
    if root_given {
        cmd.arg("--root").arg(&ctx.root);
    }
    cmd.args(&a.args);
    let e = cmd.exec();
    Err(CliError::msg(format!("{}: {e}", prog.display())))
}
