//! `shmbus journal append` on a full filesystem, as real processes against a small tmpfs
//! mounted for each test: out of inodes it leaves nothing behind (no empty journal
//! directory), out of space it says how many entries went in before the failure, and they
//! are all there. Mounting needs root (or CAP_SYS_ADMIN); without it the tests say so and
//! pass without checking.

mod common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use common::{json_lines, Root};

/// A tmpfs mounted for the test's lifetime (unmounted on drop).
struct Mount(PathBuf);

impl Mount {
    /// Mounts a tmpfs with `options` on a new directory `at`, or `None` (said on stderr)
    /// where this process may not mount.
    fn tmpfs(at: &Path, options: &str) -> Option<Mount> {
        std::fs::create_dir_all(at).unwrap();
        let target = CString::new(at.as_os_str().as_bytes()).unwrap();
        let opts = CString::new(options).unwrap();
        // SAFETY: valid NUL-terminated strings; no other memory is passed.
        let r = unsafe { libc::mount(c"tmpfs".as_ptr(), target.as_ptr(), c"tmpfs".as_ptr(), 0, opts.as_ptr().cast()) };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            eprintln!("skipped: cannot mount a tmpfs here ({e}); needs root or CAP_SYS_ADMIN");
            return None;
        }
        Some(Mount(at.to_owned()))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let target = CString::new(self.0.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid path; MNT_DETACH lets it go even if something still holds it.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

#[test]
fn append_out_of_inodes_leaves_no_journal_directory_behind() {
    let r = Root::new();
    // Each inode count runs out at another step: the directory, journal.meta (its
    // temporary), the first cycle's index or data file.
    for inodes in 2..=5 {
        let at = r.0.join(format!("ino{inodes}"));
        let Some(_m) = Mount::tmpfs(&at, &format!("size=4m,nr_inodes={inodes}")) else { return };
        let j = at.join("j");
        let out = r.run(&["journal", "append", "--dir", j.to_str().unwrap(), "--data", "x"]);
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            // Enough inodes for a journal: it is whole and holds the entry.
            assert_eq!(r.ok(&["journal", "dump", "--dir", j.to_str().unwrap()]), "x\n");
            continue;
        }
        assert!(err.contains("No space left on device"), "nr_inodes={inodes}: {err}");
        let left: Vec<_> = std::fs::read_dir(&at).unwrap().flatten().map(|e| e.file_name()).collect();
        assert!(left.is_empty(), "nr_inodes={inodes}: a failed create left {left:?} behind ({err})");
    }
}

#[test]
fn append_out_of_space_says_how_many_entries_went_in() {
    let r = Root::new();
    let at = r.0.join("space");
    let Some(_m) = Mount::tmpfs(&at, "size=1m") else { return };
    let j = at.join("j");
    let j = j.to_str().unwrap();
    let lines: Vec<String> = (0..20_000).map(|i| format!("entry-{i:05}-{}", "x".repeat(100))).collect();
    // Stdin from a file: the appender writes as it reads, and the pipes of `run_stdin` would
    // fill both ways.
    let input = r.0.join("lines");
    std::fs::write(&input, lines.join("\n")).unwrap();
    let out = r
        .cmd(&["journal", "append", "--dir", j, "--json"])
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "1 MiB cannot hold 2 MiB of entries");
    let err = String::from_utf8_lossy(&out.stderr);
    let appended = json_lines(&String::from_utf8(out.stdout).unwrap()).len();
    assert!(appended > 0, "some entries fit: {err}");
    let said = format!("{appended} entries of this run were appended before it (indices 0 to {})", appended - 1);
    assert!(err.contains("No space left on device") && err.contains(&said), "{err}");
    // They are all there, in order.
    let dumped = r.ok(&["journal", "dump", "--dir", j]);
    assert_eq!(dumped.lines().collect::<Vec<_>>(), lines[..appended].iter().map(String::as_str).collect::<Vec<_>>());
}
