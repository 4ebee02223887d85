//! `shmbus clean` keeps idle channels (nobody uses them, they hold data) until `--all` and
//! removes stale ones, and `ls`/`info`/`clean` work for a user with read permission only.
//! Real processes against a scratch root (see `common`); a process that has exited is a dead
//! one.

mod common;

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use common::Root;
use serde_json::Value;

/// The uid and gid of `nobody`.
const NOBODY: u32 = 65534;

/// A queue `q` holding three messages and a queue `e` whose only message was received; every
/// process that touched them has exited.
fn stale_queues(r: &Root) {
    for m in ["one", "two", "three"] {
        r.ok(&["pub", "--domain", "d", "q", "--kind", "queue", "--capacity", "8", "--data", m]);
    }
    r.ok(&["pub", "--domain", "d", "e", "--kind", "queue", "--capacity", "8", "--data", "gone"]);
    r.ok(&["sub", "--domain", "d", "e", "--count", "1", "--timeout-ms", "10000"]);
}

#[test]
fn clean_keeps_a_stale_queue_with_messages_until_forced() {
    let r = Root::new();
    stale_queues(&r);

    let out = r.ok(&["clean", "--dry-run"]);
    assert!(out.contains("kept d/q: idle, holds 3 undelivered messages (--all removes it)"), "{out}");
    assert!(out.contains("would remove d/e (queue, stale;"), "an empty stale queue goes: {out}");
    assert!(out.contains("kept 0 in use, 1 idle"), "{out}");
    assert!(r.channel_file("d", "e").exists(), "--dry-run removed e");

    let out = r.ok(&["clean"]);
    assert!(out.contains("kept d/q: idle, holds 3 undelivered messages") && out.contains("removed d/e"), "{out}");
    assert!(r.channel_file("d", "q").exists() && !r.channel_file("d", "e").exists());
    // Nothing was lost: a consumer started now gets every message, in order.
    let got = r.ok(&["sub", "--domain", "d", "q", "--count", "3", "--timeout-ms", "10000"]);
    assert_eq!(got.lines().collect::<Vec<_>>(), ["one", "two", "three"]);

    for m in ["four", "five"] {
        r.ok(&["pub", "--domain", "d", "q", "--data", m]);
    }
    let out = r.ok(&["clean", "--force"]);
    assert!(out.contains("removed d/q (queue, idle;") && out.contains("2 undelivered messages discarded"), "{out}");
    assert!(!r.channel_file("d", "q").exists());
}

#[test]
fn ls_and_info_say_what_clean_will_keep() {
    let r = Root::new();
    stale_queues(&r);
    // A stream whose writer exited before any reader came: its record waits in the ring.
    r.ok(&["pub", "--domain", "d", "s", "--kind", "stream", "--capacity", "64K", "--data", "hello"]);
    // A topic with history and nobody left: idle, kept (a later `sub --latest` reads it).
    r.ok(&["pub", "--domain", "d", "t", "--data", "old news"]);

    let v = r.json(&["ls", "--domain", "d", "--json"]);
    let entry = |name: &str| v.as_array().unwrap().iter().find(|e| e["name"] == name).unwrap().clone();
    let q = entry("q");
    assert_eq!(
        (q["state"].as_str(), q["stale"].as_bool(), q["pending"].as_u64(), q["pending_unit"].as_str()),
        (Some("idle"), Some(false), Some(3), Some("messages"))
    );
    assert_eq!((entry("e")["state"].as_str(), entry("e")["stale"].as_bool()), (Some("stale"), Some(true)));
    assert_eq!((entry("s")["state"].as_str(), entry("t")["state"].as_str()), (Some("idle"), Some("idle")));
    assert_eq!((entry("e")["pending"].as_u64(), entry("s")["pending_unit"].as_str()), (Some(0), Some("bytes")));
    assert!(entry("s")["pending"].as_u64().unwrap() > 0, "{v}");
    assert_eq!((entry("t")["pending"].clone(), entry("t")["last_seq"].as_u64()), (Value::Null, Some(1)));

    let table = r.ok(&["ls", "--domain", "d"]);
    let row = |name: &str| table.lines().find(|l| l.split_whitespace().nth(1) == Some(name)).unwrap().to_owned();
    assert!(
        row("q").contains("idle (") && row("q").contains("3 undelivered messages: `shmbus clean` keeps it"),
        "{table}"
    );
    assert!(
        row("t").contains("holds 1 message in its history: `shmbus clean` keeps it, `--all` removes it"),
        "{table}"
    );
    assert!(row("e").contains("stale (") && row("e").contains("`shmbus clean` removes it"), "{table}");

    let info = r.json(&["info", "--domain", "d", "s", "--json"]);
    assert_eq!((info["pending_unit"].as_str(), info["writable"].as_bool()), (Some("bytes"), Some(true)));
    let text = r.ok(&["info", "--domain", "d", "q"]);
    assert!(text.contains("pending       3 undelivered messages"), "{text}");

    let text = r.ok(&["info", "--domain", "d", "e"]);
    assert!(text.contains("state         stale (creator and users dead, holds nothing"), "{text}");

    let out = r.ok(&["clean", "--domain", "d"]);
    assert!(out.contains("kept d/q: idle, holds 3 undelivered messages"), "{out}");
    assert!(out.contains("kept d/s: idle, holds 16 unread bytes"), "{out}");
    assert!(out.contains("kept d/t: idle, holds 1 message in its history"), "{out}");
    assert!(out.contains("removed d/e") && !out.contains("removed d/t"), "{out}");
    let got = r.ok(&["sub", "--domain", "d", "s", "--count", "1", "--timeout-ms", "10000"]);
    assert_eq!(got.trim_end(), "hello");
}

// ------------------------------------------------------------------ in use, idle, stale

/// The `state` of channel `name` in `ls --json`.
fn ls_state(r: &Root, name: &str) -> String {
    let v = r.json(&["ls", "--json"]);
    let e = v.as_array().unwrap().iter().find(|e| e["name"] == name).unwrap_or_else(|| panic!("no {name}: {v}"));
    e["state"].as_str().unwrap().to_owned()
}

/// The quick start: `pub` exits, its topic holds the message; `clean` keeps it, `clean
/// --all` removes it and the domain directory it emptied.
#[test]
fn a_published_topic_is_idle_and_kept_until_clean_all() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "robot1", "chatter", "--data", "hello"]);
    assert_eq!(ls_state(&r, "chatter"), "idle");
    let table = r.ok(&["ls"]);
    assert!(table.contains("idle (creator and users dead; holds 1 message in its history"), "{table}");

    let out = r.ok(&["clean"]);
    assert!(out.contains("kept robot1/chatter: idle, holds 1 message in its history (--all removes it)"), "{out}");
    assert!(out.contains("removed 0 file(s); kept 0 in use, 1 idle"), "{out}");
    // Still readable: the history is there for a later reader.
    let got = r.ok(&["sub", "--domain", "robot1", "chatter", "--latest", "--count", "1", "--timeout-ms", "10000"]);
    assert_eq!(got.trim_end(), "hello");

    let out = r.ok(&["clean", "--all", "--dry-run"]);
    assert!(out.contains("would remove robot1/chatter (topic, idle;"), "{out}");
    assert!(r.channel_file("robot1", "chatter").exists() && r.0.join("shmbus.robot1").is_dir());

    let out = r.ok(&["clean", "--all"]);
    assert!(
        out.contains("removed robot1/chatter (topic, idle;") && out.contains("1 message in its history discarded"),
        "{out}"
    );
    assert!(out.contains("removed empty domain robot1"), "{out}");
    assert!(!r.0.join("shmbus.robot1").exists(), "the emptied domain directory is still there");
    assert!(r.0.is_dir(), "the root itself must stay");
}

/// The README's shell quick start, run as written (but for the lines that need a terminal or
/// a journal directory, or run until stopped), then `clean`: its topic is idle and stays.
#[test]
fn the_readme_quick_start_leaves_its_topic_idle() {
    let r = Root::new();
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let section = readme.split("### From the shell").nth(1).expect("README has a shell quick start");
    let section = section.split("### ").next().unwrap();
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_shmbus")).parent().unwrap().to_owned();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut ran = 0;
    for line in section.lines().filter(|l| l.starts_with("shmbus ") || l.starts_with("printf ")) {
        let cmd = line.split("  #").next().unwrap().trim();
        if ["journal", "top", "hz", "watch"].iter().any(|v| cmd.contains(&format!("shmbus {v}"))) {
            continue;
        }
        let out = Command::new("sh").args(["-c", cmd]).env("PATH", &path).env("SHMBUS_ROOT", &r.0).output().unwrap();
        assert!(out.status.success(), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
        ran += 1;
    }
    assert!(ran >= 6, "only {ran} quick start lines found");
    assert_eq!(ls_state(&r, "chatter"), "idle");
    let out = r.ok(&["clean"]);
    assert!(out.contains("kept robot1/chatter: idle"), "{out}");
    assert!(r.channel_file("robot1", "chatter").exists());
}

/// A topic nobody ever published to, whose only subscriber was killed, holds nothing: stale,
/// and plain `clean` removes it; a domain directory holding something else stays.
#[test]
fn an_empty_topic_whose_users_died_is_stale() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "empty"]);
    r.ok(&["pub", "--domain", "d", "kept", "--data", "x"]);
    let mut sub = r.spawn(&["sub", "--domain", "d", "empty"]);
    r.wait_info("d", "empty", |v| v["subscribers"] == 1);
    assert_eq!(ls_state(&r, "empty"), "in-use");
    sub.kill();
    r.wait_info("d", "empty", |v| v["subscribers"] == 0);
    assert_eq!(ls_state(&r, "empty"), "stale");
    let info = r.json(&["info", "--domain", "d", "empty", "--json"]);
    assert_eq!((info["state"].as_str(), info["stale"].as_bool()), (Some("stale"), Some(true)));

    let out = r.ok(&["clean"]);
    assert!(out.contains("removed d/empty (topic, stale;") && out.contains("kept d/kept: idle"), "{out}");
    assert!(!r.channel_file("d", "empty").exists() && r.channel_file("d", "kept").exists());
    assert!(!out.contains("empty domain"), "d still holds a channel: {out}");
    assert!(r.0.join("shmbus.d").is_dir());
}

/// `--older-than AGE` removes only channels last used at least AGE ago (the file's mtime,
/// which a process opening or letting go of the channel sets).
#[test]
fn older_than_keeps_a_fresh_channel() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "fresh", "--data", "x"]);
    r.ok(&["pub", "--domain", "d", "old", "--data", "x"]);
    r.ok(&["pub", "--domain", "d", "reused", "--data", "x"]);
    let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    let age = |name: &str| {
        let f = std::fs::File::options().write(true).open(r.channel_file("d", name)).unwrap();
        f.set_modified(two_hours_ago).unwrap();
    };
    // `old` was last used two hours ago. `reused` has a subscriber that attached two hours
    // ago (as far as the file says) and has just let go of it: used now.
    age("old");
    let sub = r.spawn(&["sub", "--domain", "d", "reused", "--timeout-ms", "3s"]);
    r.wait_info("d", "reused", |v| v["subscribers"] == 1);
    age("reused");
    let done = sub.finish();
    assert!(!done.status.success(), "the subscriber got a message nobody sent");

    let out = r.ok(&["clean", "--all", "--older-than", "1h"]);
    let fresh = out.lines().find(|l| l.starts_with("kept d/fresh: ")).unwrap_or_else(|| panic!("{out}"));
    assert!(
        fresh.starts_with("kept d/fresh: idle, but modified ") && fresh.ends_with(" s ago (--older-than)"),
        "{out}"
    );
    assert!(out.contains("removed d/old (topic, idle;"), "{out}");
    assert!(out.contains("kept d/reused: idle, but modified "), "{out}");
    assert!(out.contains("2 more recent than --older-than"), "{out}");
    assert!(r.channel_file("d", "fresh").exists() && !r.channel_file("d", "old").exists());
    assert!(r.channel_file("d", "reused").exists());
    // A bad age is a usage error.
    let out = r.run(&["clean", "--older-than", "soon"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

// ------------------------------------------------------------------ read permission only

/// `shmbus args` as uid/gid nobody, from a copy of the binary in
/// the scratch root (so nobody may execute it wherever the build put it).
///
/// `cp` makes the copy, not this process: a file this process held open for writing could
/// leak into a child another test thread forks at that moment, and executing the copy while
/// that child lives fails with "Text file busy".
fn run_as_nobody(r: &Root, args: &[&str]) -> Output {
    let exe = r.0.join("shmbus-copy");
    if !exe.exists() {
        let cp = Command::new("cp").arg(env!("CARGO_BIN_EXE_shmbus")).arg(&exe).status().unwrap();
        assert!(cp.success(), "cp of the shmbus binary failed: {cp}");
    }
    let mut c = Command::new(&exe);
    c.args(args).env("SHMBUS_ROOT", &r.0).env_remove("RUST_BACKTRACE").stdin(Stdio::null()).uid(NOBODY).gid(NOBODY); // dropping from root, std also clears the supplementary groups
    c.output().unwrap()
}

fn ok_as_nobody(r: &Root, args: &[&str]) -> String {
    let out = run_as_nobody(r, args);
    assert!(out.status.success(), "shmbus {args:?} as nobody failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A fresh root when this test runs as root; `None` (and a note saying what it needs root
/// for) otherwise.
fn root_or_skip(needs: &str) -> Option<Root> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to {needs}");
        return None;
    }
    Some(Root::new())
}

fn chmod(path: &PathBuf, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_read_only_user_sees_segments_and_removes_nothing() {
    let Some(r) = root_or_skip(&format!("create segments and look at them as uid {NOBODY}")) else { return };
    stale_queues(&r);
    r.ok(&["pub", "--domain", "d", "t", "--data", "x"]);
    r.ok(&["pub", "--domain", "d", "s", "--kind", "stream", "--capacity", "64K", "--data", "hello"]);
    chmod(&r.0, 0o755);
    chmod(&r.0.join("shmbus.d"), 0o755);
    for name in ["q", "e", "t", "s"] {
        chmod(&r.channel_file("d", name), 0o644);
    }

    let v: Value = serde_json::from_str(&ok_as_nobody(&r, &["ls", "--json"])).unwrap();
    let entry = |name: &str| v.as_array().unwrap().iter().find(|e| e["name"] == name).unwrap().clone();
    for (name, kind) in [("q", "queue"), ("e", "queue"), ("t", "topic"), ("s", "stream")] {
        let e = entry(name);
        assert_eq!(
            (e["kind"].as_str(), e["writable"].as_bool(), e["error"].clone()),
            (Some(kind), Some(false), Value::Null),
            "{v}"
        );
    }
    assert_eq!((entry("q")["pending"].as_u64(), entry("q")["depth"].as_u64()), (Some(3), Some(3)));
    // A stream's status needs only read permission: all of it is there.
    assert_eq!(entry("s")["capacity"].as_u64(), Some(65536));
    // Every kind's status is read through a read-only mapping: the table shows it all.
    let table = ok_as_nobody(&r, &["ls"]);
    assert!(!table.contains("read-only to this user") && table.contains("depth 3/8, 0 producer(s)"), "{table}");

    let info: Value = serde_json::from_str(&ok_as_nobody(&r, &["info", "--domain", "d", "q", "--json"])).unwrap();
    assert_eq!((info["kind"].as_str(), info["pending"].as_u64()), (Some("queue"), Some(3)));
    // A topic's status needs only read permission too (a read-only mapping): all of it is there.
    let text = ok_as_nobody(&r, &["info", "--domain", "d", "t"]);
    assert!(text.contains("kind          topic") && !text.contains("read-only to this user"), "{text}");

    for args in [&["clean", "--dry-run"][..], &["clean"], &["clean", "--force"]] {
        let out = ok_as_nobody(&r, args);
        for name in ["q", "e", "t", "s"] {
            assert!(out.contains(&format!("kept d/{name}: cannot check/remove it")), "{args:?}: {out}");
        }
        assert!(out.contains("removed 0 file(s)") || out.contains("would remove 0 file(s)"), "{out}");
    }
    for name in ["q", "e", "t", "s"] {
        assert!(r.channel_file("d", name).exists(), "a read-only user removed {name}");
    }
}

#[test]
fn a_file_that_cannot_be_removed_is_reported_and_the_rest_still_cleaned() {
    let Some(r) = root_or_skip("set up segments another user may open but not unlink") else { return };
    // Two stale, empty queues in a domain nobody may not write to (so not unlink in), and
    // one in a domain nobody owns.
    for (domain, name) in [("d", "a"), ("d", "b"), ("own", "c")] {
        r.ok(&["pub", "--domain", domain, name, "--kind", "queue", "--capacity", "8", "--data", "x"]);
        r.ok(&["sub", "--domain", domain, name, "--count", "1", "--timeout-ms", "10000"]);
        chmod(&r.channel_file(domain, name), 0o666);
    }
    chmod(&r.0, 0o755);
    chmod(&r.0.join("shmbus.d"), 0o755);
    let own = r.channel_file("own", "c").parent().unwrap().to_owned();
    std::os::unix::fs::chown(&own, Some(NOBODY), Some(NOBODY)).unwrap();

    let out = run_as_nobody(&r, &["clean"]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "leaving files behind must not look like success: {stdout}");
    for name in ["a", "b"] {
        assert!(stderr.contains(&format!("cannot remove {}", r.channel_file("d", name).display())), "{stderr}");
        assert!(r.channel_file("d", name).exists());
    }
    assert!(stderr.contains("2 file(s) could not be removed"), "{stderr}");
    // The failures did not stop the run: the removable one went.
    assert!(stdout.contains("removed own/c (queue, stale;") && stdout.contains("removed 1 file(s)"), "{stdout}");
    assert!(!r.channel_file("own", "c").exists());
}
