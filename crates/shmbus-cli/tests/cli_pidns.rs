//! Participants in another PID namespace, as containers sharing `/dev/shm` (`--ipc=host`)
//! run them: a live one is alive to everyone, a killed one is dead to everyone, though its
//! pid means nothing outside its namespace. Real `shmbus` processes, some started under
//! `unshare --pid --fork --mount-proc` (which needs root, or user namespaces), against a
//! scratch root (see `common`).

mod common;

use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{Killed, Root};

/// Whether this machine lets us start a process in a new PID namespace; if not, the tests
/// say so and pass without running.
fn pid_namespaces_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let ok = Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc", "--kill-child", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("SKIPPED: `unshare --pid --fork --mount-proc` is not possible here (needs util-linux and root or user namespaces)");
        }
        ok
    })
}

/// `shmbus args…` in a PID namespace of its own, with its own `/proc`. Killing the returned
/// child (the `unshare` process) kills the namespace's init, `shmbus`, with it.
fn in_pidns(r: &Root, args: &[&str]) -> Command {
    let mut c = Command::new("unshare");
    c.args(["--pid", "--fork", "--mount-proc", "--kill-child", env!("CARGO_BIN_EXE_shmbus")])
        .args(args)
        .env("SHMBUS_ROOT", &r.0)
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null());
    c
}

fn spawn_in_pidns(r: &Root, args: &[&str]) -> Killed {
    Killed(Some(in_pidns(r, args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()))
}

/// The number of participant entries in use in channel `name`, alive or not (so that a test
/// can wait for a registration whatever this process makes of its owner).
fn entries(r: &Root, name: &str) -> usize {
    let v = r.json(&["info", "--domain", "d", name, "--json"]);
    let n = |key: &str| v[key].as_array().map_or(0, |a| a.len());
    n("participants") + n("dead_participants")
}

fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(20), "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A reliable subscriber in another PID namespace holds back a publisher on this host: it
/// receives every line of a `block` topic much smaller than what is published, in order;
/// and once killed, it is reclaimed (no longer counted, no longer holding anyone back).
#[test]
fn a_reliable_subscriber_in_another_pid_namespace_is_alive_and_reclaimed_once_killed() {
    if !pid_namespaces_available() {
        return;
    }
    let r = Root::new();
    r.ok(&[
        "create",
        "--domain",
        "d",
        "--kind",
        "topic",
        "t",
        "--policy",
        "block",
        "--history",
        "4",
        "--reliable-timeout-ms",
        "600000",
    ]);
    let sub = in_pidns(&r, &["sub", "--domain", "d", "t", "--reliable", "--count", "200", "--timeout-ms", "60000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sub = Killed(Some(sub));
    wait_for("the subscriber registers", || entries(&r, "t") == 1);
    // Alive to this host, in the count `info` and publishers go by.
    let info = r.json(&["info", "--domain", "d", "t", "--json"]);
    assert_eq!(info["status"]["reliable_subscribers"], 1, "{info}");
    let lines: String = (1..=200).map(|i| format!("{i}\n")).collect();
    let out = r.run_stdin(&["pub", "--domain", "d", "t", "--timeout-ms", "30000"], lines.as_bytes());
    assert!(out.status.success(), "pub failed: {}", String::from_utf8_lossy(&out.stderr));
    let out = sub.finish();
    let got = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the subscriber failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(got, lines, "the subscriber lost or reordered messages");

    // Killed: reclaimed, and a publisher is no longer held back by it.
    let mut stuck = spawn_in_pidns(&r, &["sub", "--domain", "d", "t", "--reliable", "--count", "1000"]);
    r.wait_info("d", "t", |v| v["status"]["reliable_subscribers"] == 1);
    stuck.kill();
    let lines: String = (1..=20).map(|i| format!("after {i}\n")).collect();
    let out = r.run_stdin(&["pub", "--domain", "d", "t", "--timeout-ms", "20000"], lines.as_bytes());
    assert!(
        out.status.success(),
        "a killed subscriber still holds the topic: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    r.wait_info("d", "t", |v| v["status"]["reliable_subscribers"] == 0);
}

/// `rm` without `--force` refuses a channel whose only live participant is in another PID
/// namespace, and removes it once that participant is killed.
#[test]
fn rm_refuses_a_channel_used_from_another_pid_namespace() {
    if !pid_namespaces_available() {
        return;
    }
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t"]);
    let mut sub = spawn_in_pidns(&r, &["sub", "--domain", "d", "t"]);
    wait_for("the subscriber registers", || entries(&r, "t") == 1);
    let info = r.json(&["info", "--domain", "d", "t", "--json"]);
    assert_eq!(info["state"], "in-use", "{info}");
    let e = r.fails(&["rm", "--domain", "d", "t"]);
    assert!(e.contains("in use") || e.contains("attached"), "{e}");
    assert!(r.channel_file("d", "t").exists());
    sub.kill();
    wait_for("rm succeeds once the subscriber is killed", || r.run(&["rm", "--domain", "d", "t"]).status.success());
    assert!(!r.channel_file("d", "t").exists());
}

/// `clean` keeps a queue whose live consumer is in another PID namespace, and removes it
/// (empty, nobody alive: stale) once that consumer is killed.
#[test]
fn clean_keeps_a_queue_consumed_from_another_pid_namespace_until_the_consumer_dies() {
    if !pid_namespaces_available() {
        return;
    }
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "queue", "q"]);
    let mut consumer = spawn_in_pidns(&r, &["sub", "--domain", "d", "q"]);
    wait_for("the consumer registers", || entries(&r, "q") == 1);
    let out = r.ok(&["clean"]);
    assert!(r.channel_file("d", "q").exists(), "clean removed a queue with a live consumer: {out}");
    let info = r.json(&["info", "--domain", "d", "q", "--json"]);
    assert_eq!(info["state"], "in-use", "{info}");
    consumer.kill();
    wait_for("the queue is stale once its consumer is killed", || {
        r.json(&["info", "--domain", "d", "q", "--json"])["state"] == "stale"
    });
    let out = r.ok(&["clean"]);
    assert!(!r.channel_file("d", "q").exists(), "clean kept a queue nobody uses: {out}");
}

/// The other direction: the participant on this host, the checker in a PID namespace of
/// its own (where this host's pids do not exist). `rm` there refuses; `info` there says in
/// use; after the participant is killed, `rm` there removes the channel.
#[test]
fn a_checker_in_another_pid_namespace_sees_a_participant_here_alive() {
    if !pid_namespaces_available() {
        return;
    }
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t"]);
    let mut sub = r.spawn(&["sub", "--domain", "d", "t"]);
    r.wait_info("d", "t", |v| v["subscribers"] == 1);
    let out = in_pidns(&r, &["info", "--domain", "d", "t", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&info["state"], &info["subscribers"]), (&"in-use".into(), &1.into()), "{info}");
    let out = in_pidns(&r, &["rm", "--domain", "d", "t"]).output().unwrap();
    assert!(!out.status.success(), "rm in another namespace removed a channel in use");
    assert!(r.channel_file("d", "t").exists());
    sub.kill();
    let out = in_pidns(&r, &["rm", "--domain", "d", "t"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!r.channel_file("d", "t").exists());
}

/// A journal's named reader held by a `journal tail --reader` in another PID namespace cannot
/// be taken by a process on this host while that tail lives, and can once it is
/// killed; `journal readers` names it held meanwhile.
#[test]
fn a_named_journal_reader_held_from_another_pid_namespace_is_not_taken_over() {
    if !pid_namespaces_available() {
        return;
    }
    let r = Root::new();
    let j = r.jdir("j");
    r.ok(&["journal", "append", "--dir", &j, "--data", "seed"]);
    let mut tail = spawn_in_pidns(
        &r,
        &["journal", "tail", "--dir", &j, "--reader", "held", "--count", "100", "--json", "--timeout-ms", "60000"],
    );
    // Once it holds the reader at position 1, it has printed the seed and waits for more.
    wait_for("the tail holds the reader", || {
        r.json(&["journal", "readers", "--dir", &j, "--json"])
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x["name"] == "held" && x["position"] == 1))
    });
    let readers = r.json(&["journal", "readers", "--dir", &j, "--json"]);
    assert!(readers[0]["holder_pid"].is_u64(), "the live holder looks dead: {readers}");
    let e = r.fails(&["journal", "tail", "--dir", &j, "--reader", "held", "--count", "1", "--timeout-ms", "2000"]);
    assert!(e.contains("held by live process"), "{e}");

    // Killing `unshare` kills the namespace, and the tail in it, a moment later.
    tail.kill();
    r.ok(&["journal", "append", "--dir", &j, "--data", "after"]);
    wait_for("the reader is taken once its holder is killed", || {
        let out = r.run(&["journal", "tail", "--dir", &j, "--reader", "held", "--count", "1", "--json"]);
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("after")
    });
}

/// The other direction: the named reader held on this host, the taker in a PID namespace of
/// its own (where this host's pids do not exist, or name other processes).
#[test]
fn a_named_journal_reader_held_here_is_not_taken_from_another_pid_namespace() {
    if !pid_namespaces_available() {
        return;
    }
    let r = Root::new();
    let j = r.jdir("j");
    r.ok(&["journal", "append", "--dir", &j, "--data", "seed"]);
    let mut tail = r.spawn(&[
        "journal",
        "tail",
        "--dir",
        &j,
        "--reader",
        "held",
        "--count",
        "100",
        "--json",
        "--timeout-ms",
        "60000",
    ]);
    let pid = tail.id();
    r.wait_json(&["journal", "readers", "--dir", &j, "--json"], |v| {
        v.as_array().unwrap().iter().any(|x| x["name"] == "held" && x["holder_pid"] == pid && x["position"] == 1)
    });
    let take = || {
        in_pidns(&r, &["journal", "tail", "--dir", &j, "--reader", "held", "--count", "1", "--json"]).output().unwrap()
    };
    let out =
        in_pidns(&r, &["journal", "tail", "--dir", &j, "--reader", "held", "--count", "1", "--timeout-ms", "2000"])
            .output()
            .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && e.contains("held by live process"), "{e}");
    tail.kill();
    r.ok(&["journal", "append", "--dir", &j, "--data", "after"]);
    wait_for("the reader is taken once its holder is killed", || {
        let out = take();
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("after")
    });
}
