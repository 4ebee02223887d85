//! The multi-user threat model: symlinks, special files and squatting under a root every
//! user may write to (mode 1777, like `/dev/shm`), and the trust policy (docs/trust.md).
//!
//! Tests that need a second uid run only as root: the "attacker" steps run as uid 4242 (no
//! account needed) and a non-root victim as `nobody`, in children of this test binary
//! (`child_entry`) started with `CommandExt::uid/gid`. Without root they print why they are
//! skipped and pass. Every call that could hang runs under a watchdog.
#![cfg(not(loom))]

mod common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{child_command, child_role, wait_with_deadline, Scratch};
use shmbus::admin;
use shmbus::stream::{Stream, StreamConfig};
use shmbus::topic::{Topic, TopicConfig};
use shmbus::{Domain, FileKind, OpenError};

/// The attacker: any unused uid works, no account needed.
const ATTACKER: u32 = 4242;
/// A non-root victim.
const NOBODY: u32 = 65534;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A scratch root like `/dev/shm`: world-writable with the sticky bit.
fn sticky_root(tag: &str) -> Scratch {
    let s = Scratch::new(tag);
    std::fs::set_permissions(s.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    s
}

/// A victim directory outside the root with one precious file; returns it and its listing.
fn victim_dir(s: &Scratch) -> PathBuf {
    // Next to the root, not inside it.
    let v = PathBuf::from(format!("{}-victim", s.path().display()));
    let _ = std::fs::remove_dir_all(&v);
    std::fs::create_dir(&v).unwrap();
    std::fs::write(v.join("precious"), b"keep me").unwrap();
    std::fs::write(v.join("t"), b"a file named like a channel").unwrap();
    v
}

fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap_or_default())
        })
        .collect();
    v.sort();
    v
}

/// Runs `f` on another thread and fails the test if it does not return within 10 s.
fn within_10s<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| panic!("{what} did not return within 10 s (hung)"))
}

/// Runs this binary's `child_entry` as `role` under `uid`, with `SHMBUS_ROOT` = `root`; waits
/// for it and asserts success. Returns its stdout.
fn run_as(uid: u32, role: &str, root: &Path, env: &[(&str, String)]) -> String {
    let mut env = env.to_vec();
    env.push(("SHMBUS_ROOT", root.display().to_string()));
    let mut child = child_command("child_entry", role, &env).uid(uid).gid(uid).spawn().unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    let status = wait_with_deadline(&mut child, 30, role);
    assert!(status.success(), "child {role} as uid {uid} failed: {status}\n{out}");
    out
}

fn mkfifo(path: &Path) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0, "mkfifo {}", path.display());
}

// ------------------------------------------------------------------ child roles

#[test]
fn child_entry() {
    let Some(role) = child_role() else { return };
    let root = PathBuf::from(std::env::var("SHMBUS_ROOT").unwrap());
    let target = std::env::var("SHMBUS_TEST_TARGET").map(PathBuf::from).unwrap_or_default();
    match role.as_str() {
        // Points the domain `d` at the victim directory.
        "plant_symlink" => std::os::unix::fs::symlink(&target, root.join("shmbus.d")).unwrap(),
        // Creates domain `p` and a world-readable/writable topic `secret` in it, as the attacker.
        "plant_domain" => {
            let d = Domain::with_root("p", &root).unwrap();
            Topic::create_or_open(&d, "secret", &TopicConfig::default().max_message_len(64).history(4).mode(0o666))
                .unwrap();
        }
        // Plants a topic `c` in root's shared (sticky, world-writable) domain `shared`.
        "plant_channel" => {
            let d = Domain::with_root("shared", &root).unwrap();
            Topic::create_or_open(&d, "c", &TopicConfig::default().max_message_len(64).history(4).mode(0o666)).unwrap();
        }
        // Reads topic `secret` of domain `p` from its history; prints what it finds.
        "read_secret" => {
            let d = Domain::with_root("p", &root).unwrap();
            let t = Topic::open(&d, "secret").unwrap();
            let sub = t.subscriber().unwrap();
            sub.seek_oldest();
            while let Ok(m) = sub.try_recv() {
                println!("@@read {}", String::from_utf8_lossy(m.data()));
            }
        }
        // A non-root victim: the planted domain is refused unless SHMBUS_TRUST_UIDS says.
        "victim_opens" => {
            let d = Domain::with_root("p", &root).unwrap();
            match Topic::open(&d, "secret") {
                Ok(_) => println!("@@opened"),
                Err(e @ OpenError::Untrusted { .. }) => println!("@@untrusted {e}"),
                Err(e) => panic!("unexpected: {e}"),
            }
        }
        // Tries to create a channel in root's domain `rootonly` (mode 0755).
        "create_in_rootonly" => {
            let d = Domain::with_root("rootonly", &root).unwrap();
            let e = Topic::create_or_open(&d, "new", &TopicConfig::default().max_message_len(64).history(4))
                .map(drop)
                .unwrap_err();
            println!("@@{e:?}");
            println!("@@{e}");
        }
        // Looks at topic `t` of domain `x` (mode 0711: search permission only).
        "inspect_search_only" => {
            let d = Domain::with_root("x", &root).unwrap();
            let r = admin::inspect_channel(&d, "t").unwrap();
            println!("@@inspected writable={}", r.writable);
        }
        // Swaps `shmbus.r` between an attacker directory and a symlink to the victim until
        // killed (or 200 000 swaps).
        "swapper" => swap_loop(&root, &target),
        other => panic!("unknown role {other}"),
    }
}

/// Exchanges `<root>/shmbus.r` and `<root>/other` (a directory and a symlink to `target`)
/// with `renameat2(RENAME_EXCHANGE)`, as fast as possible.
fn swap_loop(root: &Path, target: &Path) {
    let dir = root.join("shmbus.r");
    let other = root.join("other");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(target, &other).unwrap();
    let a = CString::new(dir.as_os_str().as_bytes()).unwrap();
    let b = CString::new(other.as_os_str().as_bytes()).unwrap();
    println!("@@swapping");
    for _ in 0..200_000 {
        // SAFETY: two valid C strings, AT_FDCWD.
        let r =
            unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
        assert_eq!(r, 0, "renameat2: {}", std::io::Error::last_os_error());
    }
}

// ------------------------------------------------------------------ special files (any user)

#[test]
fn special_files_under_a_channel_name_fail_fast_and_say_what_they_are() {
    let s = Scratch::new("special");
    let d = s.domain("d");
    Topic::create_or_open(&d, "real", &TopicConfig::default().max_message_len(64).history(4)).unwrap();
    let dir = d.dir();
    mkfifo(&dir.join("fifo"));
    let _sock = std::os::unix::net::UnixListener::bind(dir.join("sock")).unwrap();
    std::fs::create_dir(dir.join("subdir")).unwrap();
    std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
    for (name, kind, words) in [
        ("fifo", FileKind::Fifo, "FIFO"),
        ("sock", FileKind::Socket, "socket"),
        ("subdir", FileKind::Directory, "directory"),
        ("link", FileKind::Symlink, "symbolic link"),
    ] {
        let d2 = d.clone();
        let results = within_10s(name, move || {
            vec![
                Topic::open(&d2, name).map(drop),
                Topic::create_or_open(&d2, name, &TopicConfig::default().max_message_len(64).history(4)).map(drop),
                Stream::create_or_open(&d2, name, &StreamConfig::default().capacity(1 << 16))
                    .and_then(|s| s.writer())
                    .map(drop),
                admin::inspect_channel(&d2, name).map(drop),
                admin::inspect(&d2.channel_path(name).unwrap()).map(drop),
            ]
        });
        for r in results {
            match r {
                Err(ref e @ OpenError::UnexpectedFileType { found, .. }) => {
                    assert_eq!(found, kind, "{name}: {e}");
                    let text = e.to_string();
                    assert!(text.contains(words) && text.contains("not a shmbus channel file"), "{name}: {text}");
                }
                other => panic!("{name}: expected UnexpectedFileType, got {other:?}"),
            }
        }
    }
    // The FIFO is listed (so tools can report it), the directory is not a channel.
    let names = d.channel_names().unwrap();
    assert_eq!(names, ["fifo", "link", "real", "sock"]);
    // The symlink's target is untouched and still a working topic.
    Topic::open(&d, "real").unwrap();
}

#[test]
fn a_domain_that_is_not_a_directory_is_refused() {
    let s = Scratch::new("notdir");
    let target = s.path().join("elsewhere");
    std::fs::create_dir(&target).unwrap();
    std::os::unix::fs::symlink(&target, s.path().join("shmbus.l")).unwrap();
    mkfifo(&s.path().join("shmbus.f"));
    for (dom, words) in [("l", "symbolic link"), ("f", "FIFO")] {
        let d = s.domain(dom);
        let d2 = d.clone();
        let e = within_10s(dom, move || {
            Topic::create_or_open(&d2, "t", &TopicConfig::default().max_message_len(64).history(4)).map(drop)
        })
        .unwrap_err();
        assert!(matches!(e, OpenError::UnexpectedFileType { expected: FileKind::Directory, .. }), "{e}");
        assert!(e.to_string().contains(words) && e.to_string().contains("not a domain directory"), "{e}");
        assert!(Topic::open(&d, "t").is_err() && admin::inspect_channel(&d, "t").is_err());
    }
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0, "something was created through the symlink");
}

#[test]
fn created_files_are_0600_and_domains_0755_whatever_the_umask() {
    let s = Scratch::new("modes");
    // SAFETY: umask has no preconditions. (Process-wide: other tests only get files with
    // wider default modes meanwhile, which they do not check.)
    let old = unsafe { libc::umask(0) };
    let d = s.domain("m");
    let t = Topic::create_or_open(&d, "t", &TopicConfig::default().max_message_len(64).history(4));
    let w = Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(1 << 16)).and_then(|s| s.writer());
    let g = Topic::create_or_open(&d, "g", &TopicConfig::default().max_message_len(64).history(4).mode(0o640));
    // SAFETY: as above.
    unsafe { libc::umask(0o077) };
    let d2 = s.domain("m2");
    let t2 = Topic::create_or_open(&d2, "t", &TopicConfig::default().max_message_len(64).history(4));
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    let (_t, _w, _g, _t2) = (t.unwrap(), w.unwrap(), g.unwrap(), t2.unwrap());
    let mode = |p: PathBuf| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(d.channel_path("t").unwrap()), 0o600);
    assert_eq!(mode(d.channel_path("s").unwrap()), 0o600);
    assert_eq!(mode(d.channel_path("g").unwrap()), 0o640);
    assert_eq!(mode(d.dir()), 0o755);
    assert_eq!(mode(d2.dir()), 0o755);
    // No temporary file is left behind.
    for dir in [d.dir(), d2.dir()] {
        let hidden: Vec<_> =
            std::fs::read_dir(&dir).unwrap().flatten().filter(|e| e.file_name().as_bytes()[0] == b'.').collect();
        assert!(hidden.is_empty(), "{hidden:?}");
    }
}

#[test]
fn a_world_writable_domain_without_sticky_bit_is_refused() {
    let s = Scratch::new("sticky");
    let d = s.domain("w");
    Topic::create_or_open(&d, "t", &TopicConfig::default().max_message_len(64).history(4)).unwrap();
    std::fs::set_permissions(d.dir(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = Topic::open(&d, "t").unwrap_err();
    assert!(matches!(e, OpenError::Untrusted { .. }), "{e}");
    assert!(e.to_string().contains("sticky"), "{e}");
    std::fs::set_permissions(d.dir(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    Topic::open(&d, "t").unwrap();
    // Group-writable: the owner's deliberate grant to a group.
    std::fs::set_permissions(d.dir(), std::fs::Permissions::from_mode(0o2775)).unwrap();
    Topic::open(&d, "t").unwrap();
}

// ------------------------------------------------------------------ a second uid (root only)

fn root_or_skip(what: &str) -> bool {
    if !is_root() {
        eprintln!(
            "skipped: {what} needs root (to act as uid {ATTACKER} and {NOBODY}); run the tests as root to cover it"
        );
        return false;
    }
    true
}

#[test]
fn a_symlinked_domain_is_never_followed() {
    if !root_or_skip("a symlinked domain planted by another user") {
        return;
    }
    let s = sticky_root("symlink");
    let victim = victim_dir(&s);
    let before = listing(&victim);
    run_as(ATTACKER, "plant_symlink", s.path(), &[("SHMBUS_TEST_TARGET", victim.display().to_string())]);
    let d = s.domain("d");
    let e = Topic::create_or_open(&d, "new", &TopicConfig::default().max_message_len(64).history(4)).unwrap_err();
    assert!(matches!(e, OpenError::UnexpectedFileType { found: FileKind::Symlink, .. }), "{e}");
    assert!(e.to_string().contains(&format!("uid {ATTACKER}")), "{e}");
    assert!(Topic::open(&d, "t").is_err());
    assert!(Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(1 << 16))
        .and_then(|s| s.writer())
        .is_err());
    assert!(admin::inspect_channel(&d, "t").is_err());
    assert!(admin::inspect(&d.channel_path("t").unwrap()).is_err());
    assert!(d.channel_names().is_err());
    assert!(admin::stale_temp_files(&d).is_err());
    // Trusting the attacker does not make a symlink acceptable.
    let trusting = d.clone().trust_uid(ATTACKER);
    assert!(Topic::create_or_open(&trusting, "new", &TopicConfig::default().max_message_len(64).history(4)).is_err());
    assert_eq!(listing(&victim), before, "the victim directory changed");
    let _ = std::fs::remove_dir_all(&victim);
}

#[test]
fn a_planted_domain_and_channel_are_refused_until_trusted() {
    if !root_or_skip("a domain planted by another user") {
        return;
    }
    let s = sticky_root("planted");
    run_as(ATTACKER, "plant_domain", s.path(), &[]);
    let d = s.domain("p");
    // Root refuses to publish into it, or even to read it.
    let e = Topic::create_or_open(&d, "secret", &TopicConfig::default().max_message_len(64).history(4)).unwrap_err();
    match &e {
        OpenError::Untrusted { owner_uid, .. } => assert_eq!(*owner_uid, ATTACKER),
        other => panic!("{other}"),
    }
    let text = e.to_string();
    assert!(text.contains(&format!("uid {ATTACKER}")) && text.contains("SHMBUS_TRUST_UIDS=4242"), "{text}");
    assert!(matches!(Topic::open(&d, "secret").unwrap_err(), OpenError::Untrusted { .. }));
    assert!(matches!(
        Topic::create_or_open(&d, "other", &TopicConfig::default().max_message_len(64).history(4)).unwrap_err(),
        OpenError::Untrusted { .. }
    ));
    let out = run_as(ATTACKER, "read_secret", s.path(), &[]);
    assert!(!out.contains("@@read"), "the attacker read something: {out}");
    // A non-root victim refuses it too, unless told to trust the attacker.
    let out = run_as(NOBODY, "victim_opens", s.path(), &[]);
    assert!(out.contains("@@untrusted") && out.contains("4242"), "{out}");
    let out = run_as(NOBODY, "victim_opens", s.path(), &[("SHMBUS_TRUST_UIDS", ATTACKER.to_string())]);
    assert!(out.contains("@@opened"), "{out}");

    // Told explicitly, root uses it: a deliberate share.
    let trusting = d.clone().trust_uid(ATTACKER);
    let t = Topic::create_or_open(&trusting, "secret", &TopicConfig::default().max_message_len(64).history(4)).unwrap();
    t.publisher().unwrap().send(b"shared on purpose").unwrap();
    drop(t);
    let out = run_as(ATTACKER, "read_secret", s.path(), &[]);
    assert!(out.contains("@@read shared on purpose"), "{out}");
}

#[test]
fn a_channel_planted_in_a_shared_domain_is_refused() {
    if !root_or_skip("a channel planted by another user") {
        return;
    }
    let s = sticky_root("plantch");
    // Root's domain, shared with everyone like /dev/shm itself: world-writable and sticky.
    let d = s.domain("shared");
    Topic::create_or_open(&d, "mine", &TopicConfig::default().max_message_len(64).history(4)).unwrap();
    std::fs::set_permissions(d.dir(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    run_as(ATTACKER, "plant_channel", s.path(), &[]);
    let e = Topic::create_or_open(&d, "c", &TopicConfig::default().max_message_len(64).history(4)).unwrap_err();
    assert!(matches!(e, OpenError::Untrusted { owner_uid: ATTACKER, .. }), "{e}");
    assert!(e.to_string().contains("channel file belongs to uid 4242"), "{e}");
    assert!(admin::inspect_channel(&d, "c").is_err());
    Topic::open(&d, "mine").unwrap();
    Topic::open(&d.clone().trust_uid(ATTACKER), "c").unwrap();
}

#[test]
fn another_users_domain_blames_the_directory_not_the_temporary_file() {
    if !root_or_skip("a domain another user may not write to") {
        return;
    }
    let s = sticky_root("cannot");
    let d = s.domain("rootonly");
    Topic::create_or_open(&d, "t", &TopicConfig::default().max_message_len(64).history(4)).unwrap();
    let out = run_as(NOBODY, "create_in_rootonly", s.path(), &[]);
    assert!(out.contains("CannotCreate"), "{out}");
    assert!(out.contains(&d.dir().display().to_string()) && out.contains("uid 0") && out.contains("0755"), "{out}");
    assert!(!out.contains("/.new."), "the message blames the temporary file: {out}");
}

#[test]
fn a_raced_directory_symlink_swap_never_redirects_a_create() {
    if !root_or_skip("a directory/symlink swap race by another user") {
        return;
    }
    let s = sticky_root("race");
    let victim = victim_dir(&s);
    let before = listing(&victim);
    let mut swapper = child_command(
        "child_entry",
        "swapper",
        &[("SHMBUS_ROOT", s.path().display().to_string()), ("SHMBUS_TEST_TARGET", victim.display().to_string())],
    )
    .uid(ATTACKER)
    .gid(ATTACKER)
    .spawn()
    .unwrap();
    // Wait until it swaps (the test harness prints its own lines first); keep reading its
    // stdout open until it is killed.
    let mut out = std::io::BufReader::new(swapper.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("@@swapping") {
        line.clear();
        assert!(std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0, "the swapper did not start");
    }
    // Trust the attacker's directory, so that a create succeeds whenever the directory is in
    // place: the race is then between a real success and the symlink.
    let d = s.domain("r").trust_uid(ATTACKER);
    let (mut created, mut refused) = (0, 0);
    for i in 0..400 {
        let name = format!("t{}", i % 7);
        match Topic::create_or_open(&d, &name, &TopicConfig::default().max_message_len(64).history(4)) {
            Ok(_) => created += 1,
            // A symlink (or, if the swap is faster than the retries, whatever was seen).
            Err(OpenError::UnexpectedFileType { .. }) => refused += 1,
            Err(OpenError::NotFound { .. }) => refused += 1,
            Err(e) => panic!("{e}"),
        }
        let _ = admin::inspect_channel(&d, &name);
        let _ = d.channel_names();
    }
    common::sigkill(&mut swapper);
    let _ = swapper.wait();
    eprintln!("race: {created} creates or opens succeeded, {refused} were refused");
    assert_eq!(listing(&victim), before, "the victim directory changed ({created} created, {refused} refused)");
    assert!(created > 0 && refused > 0, "the race never happened ({created} created, {refused} refused)");
    let _ = std::fs::remove_dir_all(&victim);
}

#[test]
fn a_domain_with_search_permission_only_can_be_used() {
    if !root_or_skip("a domain another user may search but not list") {
        return;
    }
    let s = Scratch::new("search");
    std::fs::set_permissions(s.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let d = s.domain("x");
    Topic::create_or_open(&d, "t", &TopicConfig::default().max_message_len(64).history(4).mode(0o644)).unwrap();
    std::fs::set_permissions(d.dir(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let out = run_as(NOBODY, "inspect_search_only", s.path(), &[]);
    assert!(out.contains("@@inspected writable=false"), "{out}");
}
