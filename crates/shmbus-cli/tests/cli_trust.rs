//! `shmbus` under the multi-user threat model (docs/trust.md): special files under a
//! channel's name, symlinked and raced domain directories, and domains and channels planted
//! by another user, against `clean`, `pub`, `sub`, `info` and `ls`.
//!
//! The scratch root is world-writable with the sticky bit, like `/dev/shm`. Tests that need
//! a second uid run only as root: the "attacker" is uid 4242 (no account needed) running a
//! copy of `shmbus` (or of this test binary, for the swap loop), and a non-root victim is
//! `nobody`; without root they print why they are skipped and pass. Every command runs under
//! a watchdog, so a hang fails the test instead of blocking it.

mod common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::Root;
use serde_json::Value;

/// The attacker: any unused uid works, no account needed.
const ATTACKER: u32 = 4242;
/// A non-root victim.
const NOBODY: u32 = 65534;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn root_or_skip(what: &str) -> bool {
    if !is_root() {
        eprintln!(
            "skipped: {what} needs root (to act as uid {ATTACKER} and {NOBODY}); run the tests as root to cover it"
        );
        return false;
    }
    true
}

/// A scratch root like `/dev/shm`: world-writable, sticky.
fn sticky_root() -> Root {
    let r = Root::new();
    std::fs::set_permissions(&r.0, std::fs::Permissions::from_mode(0o1777)).unwrap();
    r
}

/// Waits for `cmd` with a 15 s watchdog: a command still running then is killed and fails
/// the test (a hang, not a slow machine: every command here returns in milliseconds).
fn watched(mut cmd: Command, what: &str) -> Output {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} hung (killed after 15 s)");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().unwrap()
}

/// `shmbus args` as root (this process), under the watchdog, with extra environment.
fn shmbus(r: &Root, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = r.cmd(args);
    c.envs(env.iter().copied());
    watched(c, &format!("shmbus {args:?}"))
}

/// `shmbus args` as `uid`, from a copy of the binary in the scratch root (so that user may
/// execute it wherever the build put it). `cp` makes the copy (see cli_clean.rs for why).
fn shmbus_as(r: &Root, uid: u32, args: &[&str], env: &[(&str, &str)]) -> Output {
    let exe = copy_into(r, env!("CARGO_BIN_EXE_shmbus"), "shmbus-copy");
    let mut c = Command::new(exe);
    c.args(args).env("SHMBUS_ROOT", &r.0).env_remove("RUST_BACKTRACE").envs(env.iter().copied()).uid(uid).gid(uid);
    watched(c, &format!("shmbus {args:?} as uid {uid}"))
}

fn copy_into(r: &Root, from: impl AsRef<Path>, name: &str) -> PathBuf {
    let exe = r.0.join(name);
    if !exe.exists() {
        let cp = Command::new("cp").arg(from.as_ref()).arg(&exe).status().unwrap();
        assert!(cp.success(), "cp failed: {cp}");
    }
    exe
}

fn ok(out: &Output, what: &str) -> String {
    assert!(out.status.success(), "{what} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The one `shmbus: …` error line of a failed command.
fn fails(out: &Output, what: &str) -> String {
    assert!(!out.status.success(), "{what} succeeded: {}", String::from_utf8_lossy(&out.stdout));
    common::one_error_line(out)
}

fn mkfifo(path: &Path) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0, "mkfifo {}", path.display());
}

/// A directory outside the root (next to it) holding what `clean --force` would remove if
/// it were a domain: a file that is not a segment, a stale topic and a dead creator's
/// temporary file. Returns it.
fn victim_dir(r: &Root) -> PathBuf {
    let v = PathBuf::from(format!("{}-victim", r.0.display()));
    let _ = std::fs::remove_dir_all(&v);
    std::fs::create_dir(&v).unwrap();
    std::fs::write(v.join("junk"), b"precious data, not a segment").unwrap();
    std::fs::write(v.join(".t.4194000.1"), b"named like a temporary file").unwrap();
    ok(&shmbus(r, &["pub", "--domain", "scratch", "stale", "--data", "x"], &[]), "pub");
    std::fs::copy(r.channel_file("scratch", "stale"), v.join("stale")).unwrap();
    std::fs::remove_dir_all(r.0.join("shmbus.scratch")).unwrap();
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

// ------------------------------------------------------------------ child role

/// Run as the attacker by `a_raced_domain_swap_touches_nothing_outside`: exchanges
/// `<root>/shmbus.r` (a directory) and `<root>/other` (a symlink to the victim directory)
/// with `renameat2(RENAME_EXCHANGE)` until killed.
#[test]
fn swapper_child() {
    let Ok(root) = std::env::var("SHMBUS_SWAP_ROOT") else { return };
    let root = PathBuf::from(root);
    let target = PathBuf::from(std::env::var("SHMBUS_SWAP_TARGET").unwrap());
    let dir = root.join("shmbus.r");
    let other = root.join("other");
    std::fs::create_dir(&dir).unwrap();
    // Not a channel name: `clean` never removes it, so the directory is never emptied and
    // removed, and root's `pub` never makes a domain of its own here that the attacker
    // could no longer swap (a sticky root).
    std::fs::write(dir.join(".attacker-keeps-this"), b"").unwrap();
    std::fs::write(dir.join("junk"), b"attacker's junk").unwrap();
    std::os::unix::fs::symlink(&target, &other).unwrap();
    let a = CString::new(dir.as_os_str().as_bytes()).unwrap();
    let b = CString::new(other.as_os_str().as_bytes()).unwrap();
    println!("@@swapping");
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(60) {
        // SAFETY: two valid C strings, AT_FDCWD.
        let r =
            unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
        let e = std::io::Error::last_os_error();
        if r != 0 && e.kind() == std::io::ErrorKind::NotFound {
            // `clean` removed the directory it emptied while it was in place: put it back.
            let _ = std::fs::create_dir(&dir);
            continue;
        }
        assert_eq!(r, 0, "renameat2: {e}");
    }
}

// ------------------------------------------------------------------ any user

#[test]
fn special_files_under_a_channel_name_fail_fast_and_say_what_they_are() {
    let r = Root::new();
    ok(&shmbus(&r, &["pub", "--domain", "d", "real", "--data", "x"], &[]), "pub");
    let dir = r.0.join("shmbus.d");
    mkfifo(&dir.join("fifo"));
    let _sock = std::os::unix::net::UnixListener::bind(dir.join("sock")).unwrap();
    std::fs::create_dir(dir.join("subdir")).unwrap();
    std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
    for (name, words) in
        [("fifo", "FIFO"), ("sock", "a socket"), ("subdir", "a directory"), ("link", "a symbolic link")]
    {
        for args in [
            &["info", "--domain", "d", name][..],
            &["pub", "--domain", "d", name, "--data", "x"],
            &["pub", "--domain", "d", name, "--kind", "stream", "--capacity", "64K", "--data", "x"],
            &["sub", "--domain", "d", name, "--count", "1", "--timeout-ms", "1000"],
        ] {
            let err = fails(&shmbus(&r, args, &[]), &format!("{args:?}"));
            assert!(err.contains(words) && err.contains("not a shmbus channel file"), "{args:?}: {err}");
        }
    }
    // `ls` lists what is in a channel's place and says what it is; it does not hang.
    let out = shmbus(&r, &["ls", "--json"], &[]);
    let v: Value = serde_json::from_str(&ok(&out, "ls")).unwrap();
    let entry = |n: &str| v.as_array().unwrap().iter().find(|e| e["name"] == n).cloned();
    assert_eq!(entry("real").unwrap()["kind"], "topic");
    for (name, words) in [("fifo", "FIFO"), ("sock", "socket"), ("link", "symbolic link")] {
        let e = entry(name).unwrap_or_else(|| panic!("{name} not listed: {v}"));
        assert!(e["kind"] == "invalid" && e["error"].as_str().unwrap().contains(words), "{e}");
    }
    assert!(entry("subdir").is_none(), "a directory is not a channel");
    // `clean --force` keeps them all, and never waits on one.
    let out = ok(&shmbus(&r, &["clean", "--force"], &[]), "clean");
    for name in ["fifo", "sock", "link"] {
        assert!(out.contains(&format!("kept unreadable d/{name}")), "{out}");
        assert!(std::fs::symlink_metadata(dir.join(name)).is_ok(), "clean removed {name}");
    }
    // The idle topic itself goes (--force is --all), by its own name; nothing else does.
    assert!(out.contains("removed d/real (topic, idle;") && out.contains("removed 1 file(s)"), "{out}");
}

#[test]
fn created_files_are_private_whatever_the_umask() {
    let r = Root::new();
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("umask 0 && exec \"$0\" pub --domain d t --data x")
        .arg(env!("CARGO_BIN_EXE_shmbus"))
        .env("SHMBUS_ROOT", &r.0);
    ok(&watched(c, "pub with umask 0"), "pub with umask 0");
    let mode = |p: PathBuf| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(r.channel_file("d", "t")), 0o600);
    assert_eq!(mode(r.0.join("shmbus.d")), 0o755);
}

// ------------------------------------------------------------------ a second uid

#[test]
fn a_symlinked_domain_is_never_followed() {
    if !root_or_skip("a domain symlink planted by another user") {
        return;
    }
    let r = sticky_root();
    let victim = victim_dir(&r);
    let before = listing(&victim);
    let mut ln = Command::new("ln");
    ln.arg("-s").arg(&victim).arg(r.0.join("shmbus.d")).uid(ATTACKER).gid(ATTACKER);
    ok(&watched(ln, "ln -s"), "ln -s as the attacker");

    let out = ok(&shmbus(&r, &["clean", "--force"], &[]), "clean --force");
    assert!(out.contains("skipped domain d:") && out.contains("symbolic link"), "{out}");
    assert!(out.contains("removed 0 file(s)") && out.contains("skipped 1 untrusted or invalid domain"), "{out}");
    for args in [
        &["pub", "--domain", "d", "stale", "--data", "secret"][..],
        &["pub", "--domain", "d", "new", "--data", "secret"],
        &["pub", "--domain", "d", "q", "--kind", "queue", "--capacity", "8", "--data", "secret"],
        &["sub", "--domain", "d", "stale", "--count", "1", "--timeout-ms", "500"],
        &["info", "--domain", "d", "stale"],
    ] {
        let err = fails(&shmbus(&r, args, &[]), &format!("{args:?}"));
        assert!(err.contains("symbolic link") && err.contains("not a domain directory"), "{args:?}: {err}");
        assert!(err.contains(&format!("uid {ATTACKER}")), "{err}");
    }
    let out = shmbus(&r, &["ls"], &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("skipped domain d"), "{out:?}");
    // Trusting the attacker does not make a symlink acceptable.
    let out = shmbus(&r, &["clean", "--force"], &[("SHMBUS_TRUST_UIDS", "4242")]);
    assert!(ok(&out, "clean").contains("skipped domain d:"));
    assert_eq!(listing(&victim), before, "something outside the root changed");
    let _ = std::fs::remove_dir_all(&victim);
}

#[test]
fn a_raced_domain_swap_touches_nothing_outside() {
    if !root_or_skip("a directory/symlink swap race by another user") {
        return;
    }
    let r = sticky_root();
    let victim = victim_dir(&r);
    let before = listing(&victim);
    let exe = copy_into(&r, std::env::current_exe().unwrap(), "test-copy");
    let mut swapper = Command::new(exe)
        .args(["swapper_child", "--exact", "--nocapture", "--test-threads=1"])
        .env("SHMBUS_SWAP_ROOT", &r.0)
        .env("SHMBUS_SWAP_TARGET", &victim)
        .uid(ATTACKER)
        .gid(ATTACKER)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(swapper.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("@@swapping") {
        line.clear();
        assert!(std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0, "the swapper did not start");
    }
    // Root trusts the attacker's directory here, so that whenever the directory is in place
    // clean and pub really work in it: the race is between real work and the symlink.
    let trust = [("SHMBUS_TRUST_UIDS", "4242")];
    let (mut cleaned, mut published) = (0, 0);
    for i in 0..25 {
        let c = shmbus(&r, &["clean", "--force"], &trust);
        cleaned += usize::from(String::from_utf8_lossy(&c.stdout).contains("removed r/"));
        let name = ["stale", "junk", "new"][i % 3];
        published +=
            usize::from(shmbus(&r, &["pub", "--domain", "r", name, "--data", "secret"], &trust).status.success());
    }
    let _ = swapper.kill();
    let _ = swapper.wait();
    eprintln!("race: {cleaned} clean runs removed something, {published} publishes succeeded");
    assert_eq!(listing(&victim), before, "something outside the root changed");
    let _ = std::fs::remove_dir_all(&victim);
}

#[test]
fn a_planted_domain_or_channel_gets_no_secret_until_trusted() {
    if !root_or_skip("a domain planted by another user") {
        return;
    }
    let r = sticky_root();
    // The attacker plants domain p with channel `secret`, readable by them.
    ok(&shmbus_as(&r, ATTACKER, &["pub", "--domain", "p", "secret", "--data", "bait"], &[]), "plant");
    let file = r.channel_file("p", "secret");
    assert_eq!(std::fs::metadata(&file).unwrap().uid(), ATTACKER);

    let err = fails(&shmbus(&r, &["pub", "--domain", "p", "secret", "--data", "TOPSECRET"], &[]), "root pub");
    assert!(err.contains("refused") && err.contains("uid 4242") && err.contains("SHMBUS_TRUST_UIDS=4242"), "{err}");
    for args in [
        &["sub", "--domain", "p", "secret", "--count", "1", "--timeout-ms", "500"][..],
        &["info", "--domain", "p", "secret"],
    ] {
        let err = fails(&shmbus(&r, args, &[]), &format!("{args:?}"));
        assert!(err.contains("refused") && err.contains("uid 4242"), "{err}");
    }
    let out = ok(&shmbus(&r, &["clean", "--force"], &[]), "clean");
    assert!(out.contains("skipped domain p:") && out.contains("refused"), "{out}");
    assert!(file.exists(), "clean removed the planted channel instead of reporting it");
    // A non-root victim refuses it too.
    let err =
        fails(&shmbus_as(&r, NOBODY, &["pub", "--domain", "p", "secret", "--data", "TOPSECRET"], &[]), "nobody pub");
    assert!(err.contains("refused") && err.contains("uid 4242"), "{err}");
    let bytes = std::fs::read(&file).unwrap();
    assert!(!bytes.windows(9).any(|w| w == b"TOPSECRET"), "the secret reached the planted channel");

    // A channel planted in root's own shared domain (world-writable, sticky like /dev/shm).
    ok(&shmbus(&r, &["pub", "--domain", "s", "mine", "--data", "x"], &[]), "pub");
    std::fs::set_permissions(r.0.join("shmbus.s"), std::fs::Permissions::from_mode(0o1777)).unwrap();
    ok(&shmbus_as(&r, ATTACKER, &["pub", "--domain", "s", "c", "--data", "bait"], &[]), "plant");
    let err = fails(&shmbus(&r, &["pub", "--domain", "s", "c", "--data", "TOPSECRET"], &[]), "root pub");
    assert!(err.contains("channel file belongs to uid 4242"), "{err}");
    let out = ok(&shmbus(&r, &["clean", "--force"], &[]), "clean");
    assert!(out.contains("kept s/c:") && out.contains("refused"), "{out}");
    assert!(r.channel_file("s", "c").exists());
    assert!(!std::fs::read(r.channel_file("s", "c")).unwrap().windows(9).any(|w| w == b"TOPSECRET"));

    // Told to trust the attacker, root shares with them on purpose.
    let trust = [("SHMBUS_TRUST_UIDS", "4242")];
    ok(&shmbus(&r, &["pub", "--domain", "p", "secret", "--data", "TOPSECRET"], &trust), "trusted pub");
    let got = ok(
        &shmbus_as(
            &r,
            ATTACKER,
            &["sub", "--domain", "p", "secret", "--from", "0", "--count", "2", "--timeout-ms", "5000"],
            &[],
        ),
        "sub",
    );
    assert!(got.contains("TOPSECRET"), "{got}");
}

#[test]
fn another_users_domain_blames_the_directory() {
    if !root_or_skip("a domain another user may not write to") {
        return;
    }
    let r = sticky_root();
    ok(&shmbus(&r, &["pub", "--domain", "d", "t", "--data", "x"], &[]), "pub");
    let err = fails(&shmbus_as(&r, NOBODY, &["pub", "--domain", "d", "new", "--data", "x"], &[]), "nobody pub");
    let dir = r.0.join("shmbus.d").display().to_string();
    assert!(err.contains(&format!("cannot create channel new in {dir}")), "{err}");
    assert!(err.contains("uid 0 (root)") && err.contains("0755"), "{err}");
    assert!(!err.contains("/.new."), "blames the temporary file: {err}");
}

// ------------------------------------------------------------------ watching as another user

#[test]
fn another_user_with_read_permission_sees_the_counters_and_changes_nothing() {
    if !root_or_skip("reading counters as another user") {
        return;
    }
    use shmbus::topic::{Topic, TopicConfig};
    let r = sticky_root();
    let domain = shmbus::Domain::with_root("mon", &r.0).unwrap();
    let topic = Topic::create_or_open(&domain, "t", &TopicConfig::default().mode(0o644)).unwrap();
    let sub = topic.subscriber().unwrap();
    let mut publisher = topic.publisher().unwrap();
    for _ in 0..5 {
        publisher.send(b"hello").unwrap();
        sub.try_recv().unwrap();
    }
    let file = domain.channel_path("t").unwrap();
    let before = std::fs::read(&file).unwrap();
    let out = ok(&shmbus_as(&r, NOBODY, &["top", "--once", "--json", "--interval", "0.1"], &[]), "top as nobody");
    let v: Value = serde_json::from_str(&out).unwrap();
    let ch = &v["channels"][0];
    assert_eq!(
        (ch["domain"].as_str(), ch["name"].as_str(), ch["error"].as_str()),
        (Some("mon"), Some("t"), None),
        "{v}"
    );
    let parts = ch["participants"].as_array().unwrap();
    for role in ["publisher", "subscriber"] {
        let p = parts.iter().find(|p| p["role"] == role).unwrap_or_else(|| panic!("no {role} in {v}"));
        assert_eq!((p["messages"].as_u64(), p["bytes"].as_u64()), (Some(5), Some(25)), "{role}: {p}");
    }
    assert_eq!(std::fs::read(&file).unwrap(), before, "watching wrote to the channel");
}
