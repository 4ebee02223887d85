//! The verbs that run a separate program, built from a crate of its own so that its
//! dependencies stay out of this tool: `shmbus bridge` (the Zenoh bridge, `shmbus-bridge`)
//! and `shmbus foxglove` (the Foxglove WebSocket view, `shmbus-foxglove`).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use crate::{CliError, Ctx, Result};

/// A program that a verb runs.
#[derive(Debug)]
pub struct Program {
    /// Its file name, which is also its crate's name (under `crates/`).
    file: &'static str,
    /// What it is, as the error names it ("the bridge").
    what: &'static str,
}

/// `shmbus bridge`.
pub const BRIDGE: Program = Program { file: "shmbus-bridge", what: "the bridge" };
/// `shmbus foxglove`.
pub const FOXGLOVE: Program = Program { file: "shmbus-foxglove", what: "the Foxglove view" };

/// `shmbus bridge …`, `shmbus foxglove …`: every argument goes to the program.
#[derive(Debug, clap::Args)]
#[command(disable_help_flag = true)]
pub struct Args {
    /// The program's arguments (`--help` lists them).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
    args: Vec<OsString>,
}

impl Program {
    /// Where the program is: beside this one, else on `PATH`.
    fn find(&self) -> Option<PathBuf> {
        let beside = std::env::current_exe().ok().map(|e| e.with_file_name(self.file));
        let on_path = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).map(|d| d.join(self.file)).collect::<Vec<_>>())
            .unwrap_or_default();
        beside.into_iter().chain(on_path).find(|p| p.is_file())
    }

    /// Replaces this process with the program (so signals and the exit status are its own),
    /// passing it the root when one was given.
    pub fn run(&self, ctx: &Ctx, root_given: bool, a: &Args) -> Result<()> {
        let Some(prog) = self.find() else {
            let (what, file) = (self.what, self.file);
            return Err(CliError::msg(format!(
                "{what} is a separate program, {file}, found neither beside shmbus nor on PATH; \
                 build it with `cargo build --release -p {file}` (or `cargo install --path crates/{file}`)"
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
}
