//! `shmbus journal rm --dir DIR [--force]`: remove a journal directory.
//!
//! Only a journal's own files go: `journal.meta`, `readers.lock`, `recovery.log`, the cycle
//! files `NNNNNNNNNNNN.sbjd`/`.sbji` (with `.zst` and the `.corrupt-…` copies recovery sets
//! aside) and the hidden temporaries the library builds them under (`.NAME.PID.N`). Before
//! anything is removed, the directory must be a real directory (not a symlink) holding
//! nothing else, every entry a regular file: otherwise nothing is removed and the strangers
//! are named. Removal goes through the directory's descriptor (`unlinkat`), so a path
//! component swapped for a symlink meanwhile cannot redirect it, and unlinking never
//! follows a symlink. An archive directory set by `journal tier` is left alone: it is
//! named, for its owner to remove.
//!
//! A journal with a live appender is refused, naming its pid, unless `--force` (the
//! appender keeps its mapping and writes into files no longer in any directory).

use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::PathBuf;

use clap::Args as ClapArgs;
use shmbus::journal::{Journal, RECOVERY_LOG};

use crate::{CliError, Result};

/// `shmbus journal rm --dir DIR [--force]`
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The journal's directory.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Remove it even while a live appender holds it (it keeps its mapping), or when its
    /// journal.meta cannot be read.
    #[arg(long)]
    force: bool,
}

/// Whether `name` is one of the files a journal keeps in its directory.
fn journal_file(name: &str) -> bool {
    // The library's temporaries: `.` + a journal file's name + `.PID.N`.
    let (name, temporary) = match name.strip_prefix('.') {
        Some(rest) => (rest, true),
        None => (name, false),
    };
    let is = |base: &str| name == base || (temporary && name.strip_prefix(base).is_some_and(|t| t.starts_with('.')));
    if ["journal.meta", "readers.lock", RECOVERY_LOG].into_iter().any(is) {
        return true;
    }
    // NNNNNNNNNNNN.sbjd / .sbji, then `.zst`, `.corrupt-…` or a temporary's suffix.
    let (digits, rest) = name.split_at(name.len().min(12));
    digits.len() == 12
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (rest.starts_with(".sbjd") || rest.starts_with(".sbji"))
        && (rest.len() == 5 || rest[5..].starts_with('.'))
}

/// Removes the journal in `args.dir`.
pub fn run(args: &Args) -> Result<()> {
    let dir = &args.dir;
    let shown = dir.display();
    match std::fs::symlink_metadata(dir) {
        Err(e) => return Err(CliError::msg(format!("{shown}: {e}; check --dir"))),
        Ok(m) if m.file_type().is_symlink() => {
            return Err(CliError::msg(format!("{shown} is a symlink; give the journal's directory itself")))
        }
        Ok(m) if !m.is_dir() => return Err(CliError::msg(format!("{shown} is not a directory"))),
        Ok(_) => {}
    }
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .map_err(|e| CliError::msg(format!("{shown}: {e}")))?;
    let mut names = Vec::new();
    let mut strangers = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| CliError::msg(format!("{shown}: {e}")))? {
        let entry = entry.map_err(|e| CliError::msg(format!("{shown}: {e}")))?;
        let name = entry.file_name();
        let regular = entry.file_type().is_ok_and(|t| t.is_file() && !t.is_symlink() && !t.is_fifo());
        match name.to_str() {
            Some(n) if regular && journal_file(n) => names.push(name),
            _ => strangers.push(name.to_string_lossy().into_owned()),
        }
    }
    if !names.iter().any(|n| n == "journal.meta") {
        return Err(CliError::msg(format!("{shown}: not a journal (no journal.meta); nothing removed")));
    }
    if !strangers.is_empty() {
        strangers.sort();
        return Err(CliError::msg(format!(
            "{shown} holds files that are not the journal's ({}); nothing removed: move them out first",
            strangers.join(", ")
        )));
    }
    let archive = match Journal::status(dir) {
        Ok(status) if !status.appender_pids.is_empty() && !args.force => {
            let pids: Vec<String> = status.appender_pids.iter().map(|p| format!("pid {p}")).collect();
            return Err(CliError::msg(format!(
                "{shown} is in use by a live appender ({}); stop it first, or `--force` (it keeps its mapping)",
                pids.join(", ")
            )));
        }
        Ok(status) => status.archive_dir,
        Err(e) if args.force => {
            eprintln!("shmbus: {shown}: {}; removed anyway (--force)", shmbus::journal::open_error_message(&e));
            None
        }
        Err(e) => {
            return Err(CliError::msg(format!(
                "{shown}: {}; nothing removed (--force removes it)",
                shmbus::journal::open_error_message(&e)
            )))
        }
    };
    // journal.meta last: until then the directory is still seen as a journal.
    names.sort_by_key(|n| n == "journal.meta");
    for name in &names {
        let c = CString::new(name.as_bytes()).expect("a directory entry's name holds no NUL");
        // SAFETY: `handle` is an open directory descriptor for the duration of the call and
        // `c` a NUL-terminated name; unlinkat reads both and keeps neither.
        if unsafe { libc::unlinkat(handle.as_raw_fd(), c.as_ptr(), 0) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(CliError::msg(format!("{shown}/{}: {e}", name.to_string_lossy())));
            }
        }
    }
    drop(handle);
    std::fs::remove_dir(dir).map_err(|e| {
        CliError::msg(format!("{shown}: {e} (the journal's files are removed; something else appeared in it)"))
    })?;
    let files = names.len();
    match archive {
        Some(a) => println!("removed journal {shown} ({files} files); its archive {} is left", a.display()),
        None => println!("removed journal {shown} ({files} files)"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::journal_file;

    #[test]
    fn knows_a_journals_files_and_nothing_else() {
        for ours in [
            "journal.meta",
            "readers.lock",
            "recovery.log",
            "000000000003.sbjd",
            "000000000003.sbji",
            "000000000003.sbjd.zst",
            "000000000003.sbji.corrupt-1700000000",
            ".journal.meta.123.4",
            ".000000000004.sbjd.99.1",
        ] {
            assert!(journal_file(ours), "{ours}");
        }
        for other in ["notes.txt", "journal.meta2", ".gitkeep", "3.sbjd", "000000000003.sbjdx", "00000000000a.sbjd", ""]
        {
            assert!(!journal_file(other), "{other}");
        }
    }
}
