//! The trust policy for journals (docs/trust.md, "Journals"): files in a journal directory
//! (`journal.meta`, cycle data and index files, `readers.lock`, `recovery.log`) are used only when owned by
//! a trusted uid, and the directory must be owned by a trusted uid and, if every user may
//! write to it, be sticky. Files planted by another uid are refused with
//! `OpenError::Untrusted`, whose message names the owner and the fix; trusting that uid
//! (`SHMBUS_TRUST_UIDS`, or `JournalConfig::trust`) makes them usable.
//!
//! Giving a file to another uid needs root: run as another user, these tests print why
//! they are skipped and pass.

#![cfg(not(loom))]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::{child_command, child_role, env_str, wait_with_deadline, Scratch};
use shmbus::domain::TrustPolicy;
use shmbus::journal::{Journal, JournalConfig, RollCycle};
use shmbus::OpenError;

/// The uid that plays the other local user.
const OTHER: u32 = 4242;

fn opts() -> JournalConfig {
    JournalConfig::default().cycle_bytes(1 << 20).chunk_bytes(64 << 10).max_entry_len(4096).roll(RollCycle::Never)
}

fn root_or_skip(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    eprintln!("skipped: {what} needs root (to give files to uid {OTHER}); run the tests as root to cover it");
    false
}

/// A journal with one entry and a named reader's lock file, in a fresh directory.
fn journal(s: &Scratch) -> PathBuf {
    let dir = s.path().join("j");
    let j = Journal::create_or_open(&dir, &opts()).unwrap();
    j.appender().unwrap().send(b"entry 0").unwrap();
    drop(j.reader("r").unwrap());
    assert!(dir.join("readers.lock").exists());
    dir
}

fn data_file(dir: &Path) -> PathBuf {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sbjd"))
        .collect();
    v.sort();
    v.pop().expect("a data file")
}

fn give_away(p: &Path) {
    std::os::unix::fs::chown(p, Some(OTHER), Some(OTHER)).unwrap();
}

/// The trust error, with a message that names the owner and the fix.
fn assert_untrusted(what: &str, e: &OpenError, path: &Path) {
    match e {
        OpenError::Untrusted { path: p, owner_uid, .. } => {
            assert_eq!(*owner_uid, OTHER, "{what}: {e}");
            assert_eq!(p, path, "{what}: {e}");
        }
        other => panic!("{what}: expected Untrusted, got {other:?} ({other})"),
    }
    let msg = e.to_string();
    for part in [format!("uid {OTHER}"), "does not trust".to_owned(), format!("SHMBUS_TRUST_UIDS={OTHER}")] {
        assert!(msg.contains(&part), "{what}: the message does not say {part:?}: {msg}");
    }
}

/// Opens the journal, appends, tails and takes a named reader: the first error, if any.
fn use_journal(dir: &Path, trust: &TrustPolicy) -> Result<(), OpenError> {
    // The journal exists: its configuration is not applied, only the trust policy.
    let j = Journal::create_or_open(dir, &opts().trust(trust.clone()))?;
    j.appender()?;
    let mut t = j.tailer()?;
    assert_eq!(t.try_recv_ref().unwrap().data(), b"entry 0");
    match j.reader("r") {
        Ok(_) => Ok(()),
        Err(e) => Err(e),
    }
}

#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    if role == "nobody_status" {
        return child_nobody_status();
    }
    assert_eq!(role, "open");
    // Journal::open reads SHMBUS_TRUST_UIDS (set by the parent).
    let dir = PathBuf::from(env_str("T_DIR"));
    match Journal::open(&dir) {
        Ok(j) => {
            j.appender().unwrap().send(b"from the child").unwrap();
            println!("open: ok");
        }
        Err(e) => println!("open: error {e}"),
    }
}

#[test]
fn foreign_journal_files_are_refused_unless_trusted() {
    if !root_or_skip("foreign-owned journal files") {
        return;
    }
    for which in ["journal.meta", "data", "index", "readers.lock"] {
        let s = Scratch::new("jtrust-file");
        let dir = journal(&s);
        let data = data_file(&dir);
        let file = match which {
            "data" => data,
            "index" => data.with_extension("sbji"),
            name => dir.join(name),
        };
        give_away(&file);
        let what = format!("a {which} file owned by uid {OTHER}");
        let e = use_journal(&dir, &TrustPolicy::new()).expect_err(&what);
        assert_untrusted(&what, &e, &file);
        // Trusted through the API, it is used.
        use_journal(&dir, &TrustPolicy::new().trust_uid(OTHER)).unwrap_or_else(|e| panic!("{what}, trusted: {e}"));
    }
}

#[test]
fn shmbus_trust_uids_makes_a_foreign_journal_usable() {
    if !root_or_skip("SHMBUS_TRUST_UIDS for journals") {
        return;
    }
    let s = Scratch::new("jtrust-env");
    let dir = journal(&s);
    give_away(&dir.join("journal.meta"));
    for (trust, expect) in [("", "open: error"), ("7, 4242", "open: ok")] {
        let env = [("T_DIR", dir.display().to_string()), ("SHMBUS_TRUST_UIDS", trust.to_owned())];
        let mut cmd = child_command("child_entry", "open", &env);
        if trust.is_empty() {
            cmd.env_remove("SHMBUS_TRUST_UIDS");
        }
        let mut child = cmd.spawn().unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
        assert!(wait_with_deadline(&mut child, 20, "open child").success(), "{out}");
        let line = out.lines().find(|l| l.contains("open: ")).unwrap_or_else(|| panic!("no result: {out}"));
        assert!(line.contains(expect), "SHMBUS_TRUST_UIDS={trust:?}: {line}");
        if !trust.is_empty() {
            continue;
        }
        assert!(line.contains("does not trust") && line.contains("SHMBUS_TRUST_UIDS=4242"), "{line}");
    }
}

#[test]
fn a_foreign_or_open_journal_directory_is_refused() {
    if !root_or_skip("a journal directory owned by another uid") {
        return;
    }
    let s = Scratch::new("jtrust-dir");
    let dir = journal(&s);
    give_away(&dir);
    let e = Journal::create_or_open(&dir, &opts()).expect_err("a directory owned by another uid");
    assert_untrusted("the journal directory", &e, &dir);
    Journal::create_or_open(&dir, &opts().trust(TrustPolicy::new().trust_uid(OTHER))).unwrap();

    // Ours but writable by every user without the sticky bit: refused; sticky: accepted.
    let s = Scratch::new("jtrust-dir-mode");
    let dir = journal(&s);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = Journal::create_or_open(&dir, &opts()).expect_err("a world-writable directory");
    assert!(matches!(e, OpenError::Untrusted { .. }) && e.to_string().contains("sticky"), "{e}");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    Journal::create_or_open(&dir, &opts()).unwrap();

    // A new journal in a world-writable directory is refused before anything is created.
    let s = Scratch::new("jtrust-dir-new");
    let dir = s.path().join("j");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    Journal::create_or_open(&dir, &opts()).expect_err("a world-writable directory");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "files were created in a refused directory");
}

/// A journal created with files every user may write (`0666`) gets a sticky directory, so
/// the trust policy accepts the directory it made itself.
#[test]
fn a_world_writable_journal_gets_a_sticky_directory() {
    let s = Scratch::new("jtrust-0666");
    let dir = s.path().join("j");
    let j = Journal::create_or_open(&dir, &opts().mode(0o666)).unwrap();
    j.appender().unwrap().send(b"x").unwrap();
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o7777;
    assert!(mode & 0o002 == 0 || mode & 0o1000 != 0, "directory mode {mode:04o}: writable by all, not sticky");
    drop(j);
    Journal::open(&dir).unwrap();
}

/// The uid and gid of `nobody`.
const NOBODY: u32 = 65534;

/// Drops this (single-purpose child) process to nobody, checks that a read-write open of
/// the journal is refused, then prints its status on one line.
fn child_nobody_status() {
    // SAFETY: plain credential calls on this (single-purpose) process; order matters:
    // supplementary groups and gid while still privileged, uid last.
    unsafe {
        assert_eq!(libc::setgroups(0, std::ptr::null()), 0, "setgroups");
        assert_eq!(libc::setresgid(NOBODY, NOBODY, NOBODY), 0, "setresgid");
        assert_eq!(libc::setresuid(NOBODY, NOBODY, NOBODY), 0, "setresuid");
        // A credential change clears the parent-death signal: set it again.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
    }
    let dir = PathBuf::from(env_str("T_DIR"));
    // The premise: the journal's files cannot be opened for writing by this user.
    let e = Journal::open(&dir).expect_err("a read-write open as nobody should be refused");
    assert!(e.to_string().contains("ermission denied"), "{e}");
    let st = Journal::status(&dir).expect("journal status needs read permission only");
    println!("status as nobody: {st:?}");
}

/// Every file of the journal in `dir`, with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    v.sort();
    v
}

/// `Journal::status` reads a journal whose files are all 0444 and owned by another user
/// (root), as `nobody`: read permission is all it needs (every file opened and mapped
/// read-only), it reports what the owner's status reports, and it changes no byte of any
/// file.
#[test]
fn journal_status_needs_read_permission_only() {
    if child_role().is_some() {
        return;
    }
    if !root_or_skip("the journal status as nobody") {
        return;
    }
    let s = Scratch::new("jtrust-status-ro");
    let dir = journal(&s);
    let j = Journal::open(&dir).unwrap();
    // A live appender (listed by status), more entries, and a named reader that moved on.
    let mut a = j.appender().unwrap();
    for m in [b"one", b"two"] {
        a.send(m).unwrap();
    }
    let mut r = j.reader("r").unwrap();
    r.try_recv_ref().unwrap();
    r.ack();
    drop(r);
    let mut dirs = vec![dir.clone()];
    dirs.extend(dir.ancestors().skip(1).take_while(|d| d.starts_with(s.path())).map(Path::to_path_buf));
    for d in &dirs {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for (p, _) in snapshot(&dir) {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
    }
    let expected = Journal::status(&dir).unwrap();
    assert_eq!((expected.next_index, expected.appenders, expected.readers.len()), (3, 1, 1), "{expected:?}");
    assert_eq!(expected.readers[0].position, 1, "{expected:?}");
    let before = snapshot(&dir);

    let mut child =
        child_command("child_entry", "nobody_status", &[("T_DIR", dir.display().to_string())]).spawn().unwrap();
    let st = wait_with_deadline(&mut child, 60, "status as nobody");
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert!(st.success(), "child failed ({st}): {out}");
    let line = out.lines().find_map(|l| Some(l.split_once("status as nobody: ")?.1)).unwrap_or_else(|| panic!("{out}"));
    assert_eq!(line, format!("{expected:?}"), "nobody's status differs from the owner's");
    let after = snapshot(&dir);
    assert_eq!(after.len(), before.len(), "status created or removed a file");
    for ((p, b), (_, a)) in before.iter().zip(&after) {
        assert!(a == b, "status changed {}", p.display());
    }
    drop(a);
}

/// The recovery log is read like every journal file: a planted one owned by another uid is
/// an error naming it (the losses it claims are not believed), and one owned by this user
/// is read.
#[test]
fn a_foreign_recovery_log_is_refused() {
    let s = Scratch::in_temp_dir("jtrust-recovery-log");
    let dir = journal(&s);
    let log = dir.join(shmbus::journal::RECOVERY_LOG);
    std::fs::write(&log, "1 0 5 9 100 1 -\n").unwrap();
    let j = Journal::open(&dir).unwrap();
    assert_eq!(j.lost_entries().unwrap().iter().map(|l| (l.cycle, l.from, l.to)).collect::<Vec<_>>(), [(0, 5, 9)]);
    if !root_or_skip("a recovery log of another uid") {
        return;
    }
    give_away(&log);
    assert_untrusted("recovery log", &j.lost_entries().unwrap_err(), &log);
    let st = Journal::status(&dir).unwrap();
    assert!(st.lost_entries.is_empty());
    assert!(st.recovery_log_error.is_some_and(|e| e.contains(&format!("uid {OTHER}"))));
}
