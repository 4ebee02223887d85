//! A newcomer's first hour with the CLI: the surprises it used to hold, each pinned by a
//! test. Real `shmbus` processes on real channels in a scratch root; no assertion on a time.
//!
//! * `pub --file` sizes a topic it creates from the file, and a `pub` that fails before
//!   sending leaves no channel (nor domain) behind.
//! * `sub` prints a payload that is not UTF-8 as hex unless `--format raw` asks for bytes.
//! * `hz`, `bw` and `delay` can wait for their channel (`--wait`), and `bw` speaks IEC units.
//! * `rm` of a domain's last channel removes the domain directory too.
//! * `top` counts what a stuck subscriber lost past the history as drops, and names a CLI
//!   participant by its verb (`shmbus sub`), in `--once --json` and on a real terminal (tmux).
//! * Every verb that takes a channel takes it as `D/NAME` too, as listings show it.
//! * `ls --domain` of a domain that does not exist fails and names the ones that do.
//! * A missing channel is said in the same words by every verb.
//! * `sub --from -N` reads the last N messages, with no `-- -N` needed.
//! * `sub --json` and `journal dump --json` lines carry one timestamp each, named by its clock.
//! * `journal rm` removes a journal's own files and directory, refuses anything else, and
//!   names a live appender.

#![cfg(not(loom))]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{json_lines, one_error_line, Root};
use serde_json::Value;
use shmbus::topic::{Topic, TopicConfig};
use shmbus::Domain;

/// Whether domain `d` has a directory under the root.
fn domain_dir_exists(r: &Root, d: &str) -> bool {
    r.0.join(format!("shmbus.{d}")).exists()
}

#[test]
fn pub_file_creates_a_topic_that_holds_the_file() {
    let r = Root::new();
    // Larger than the default 4 KiB slot, binary, newlines included.
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let file = r.0.join("payload.bin");
    std::fs::write(&file, &data).unwrap();
    r.ok(&["pub", "--domain", "d", "big", "--file", file.to_str().unwrap()]);
    let info = r.json(&["info", "--domain", "d", "big", "--json"]);
    assert!(info["slot_size"].as_u64().unwrap() >= data.len() as u64, "{info}");
    let out = r.run(&["sub", "--domain", "d", "big", "--from", "1", "--count", "1", "--format", "raw"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout == data, "the message is not the file ({} bytes)", out.stdout.len());
}

#[test]
fn a_pub_that_fails_before_sending_leaves_no_channel_behind() {
    let r = Root::new();
    let missing = r.0.join("no-such-file");
    let e = r.fails(&["pub", "--domain", "d", "t", "--file", missing.to_str().unwrap()]);
    assert!(e.contains("no-such-file"), "{e}");
    assert!(!r.channel_file("d", "t").exists() && !domain_dir_exists(&r, "d"), "missing file");

    let long = "x".repeat(5000) + "\n";
    let out = r.run_stdin(&["pub", "--domain", "d", "t"], long.as_bytes());
    assert_eq!(out.status.code(), Some(1));
    assert!(one_error_line(&out).contains("stdin line 1 is longer than 4096 bytes"));
    assert!(!r.channel_file("d", "t").exists() && !domain_dir_exists(&r, "d"), "too-long line");

    let out = r.run_stdin(&["pub", "--domain", "d", "t", "--format", "hex"], b"zz\n0a\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(one_error_line(&out).contains("not a hex byte"));
    assert!(!r.channel_file("d", "t").exists() && !domain_dir_exists(&r, "d"), "bad hex");

    let out = r.run_stdin(&["pub", "--domain", "d", "t", "--message-encoding", "json"], b"{not json\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(one_error_line(&out).contains("not JSON"));
    assert!(!r.channel_file("d", "t").exists() && !domain_dir_exists(&r, "d"), "bad JSON");

    // A domain directory that was there before stays (empty: someone made it for later).
    std::fs::create_dir(r.0.join("shmbus.d")).unwrap();
    r.fails(&["pub", "--domain", "d", "t", "--file", missing.to_str().unwrap()]);
    assert!(!r.channel_file("d", "t").exists() && domain_dir_exists(&r, "d"));
}

#[test]
fn a_failed_pub_never_removes_a_channel_it_did_not_create() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t"]);
    let missing = r.0.join("no-such-file");
    r.fails(&["pub", "--domain", "d", "t", "--file", missing.to_str().unwrap()]);
    assert!(r.channel_file("d", "t").exists());
    // Nor one it created and published to before failing: those messages are kept.
    let out = r.run_stdin(&["pub", "--domain", "d", "u", "--format", "hex"], b"6869\nzz\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(one_error_line(&out).contains("(1 message(s) sent before)"));
    let got = r.ok(&["sub", "--domain", "d", "u", "--from", "1", "--count", "1", "--timeout-ms", "20000"]);
    assert_eq!(got, "hi\n");
}

#[test]
fn sub_prints_binary_payloads_as_hex_and_text_as_text() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t"]);
    r.ok(&["pub", "--domain", "d", "t", "--format", "hex", "--data", "00ff0a41"]);
    r.ok(&["pub", "--domain", "d", "t", "--data", "héllo"]);
    let out = r.ok(&["sub", "--domain", "d", "t", "--from", "1", "--count", "2", "--timeout-ms", "20000"]);
    assert_eq!(out, "00ff0a41\nhéllo\n");
    // Bytes as they are when asked for.
    let out = r.run(&["sub", "--domain", "d", "t", "--from", "1", "--count", "1", "--format", "raw"]);
    assert_eq!(out.stdout, b"\x00\xff\x0aA");
    // `--format text` stays lossy text.
    let out = r.ok(&["sub", "--domain", "d", "t", "--from", "1", "--count", "1", "--format", "text"]);
    assert_eq!(out, "\0\u{fffd}\nA\n");
}

/// The class, not only `sub`: every verb that prints payloads prints binary ones as hex.
#[test]
fn journals_and_pool_workers_print_binary_payloads_as_hex_too() {
    let r = Root::new();
    let j = r.jdir("j");
    r.ok(&["journal", "append", "--dir", &j, "--format", "hex", "--data", "00ff0a41"]);
    r.ok(&["journal", "append", "--dir", &j, "--data", "héllo"]);
    assert_eq!(r.ok(&["journal", "dump", "--dir", &j]), "00ff0a41\nhéllo\n");
    assert_eq!(r.ok(&["journal", "tail", "--dir", &j, "--from", "0", "--count", "2"]), "00ff0a41\nhéllo\n");
    let out = r.run(&["journal", "dump", "--dir", &j, "--format", "raw"]);
    assert_eq!(out.stdout, [&[0x00, 0xff, 0x0a, b'A'][..], "héllo".as_bytes()].concat());

    let mut worker = r.spawn(&["pool", "worker", "--domain", "d", "jobs", "--count", "2"]);
    r.wait_info("d", "jobs", |v| v["workers"] == 1);
    // One dispatcher for both: a worker ends when its dispatcher is done.
    r.ok_stdin(&["pool", "dispatch", "--domain", "d", "jobs", "--format", "hex"], "00ff0a41\n74657874206a6f62\n");
    let out = worker.0.take().unwrap().wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].ends_with(": 00ff0a41") && lines[1].ends_with(": text job"), "{out}");
}

#[test]
fn hz_bw_and_delay_wait_for_a_channel_to_appear() {
    let r = Root::new();
    for verb in ["hz", "bw", "delay"] {
        let e = r.fails(&[verb, "--domain", "d", "later", "--count", "1"]);
        assert!(e.contains("no channel d/later") && e.contains("--wait"), "{e}");
        let e = r.fails(&[verb, "--domain", "d", "later", "--count", "1", "--wait", "0.2"]);
        assert!(e.contains("appeared within --wait"), "{e}");
    }
    let bw = r.spawn(&["bw", "--domain", "d", "later", "--wait", "20", "--interval", "0.2", "--count", "3"]);
    // Published until `bw` has printed its lines: whenever it attaches, it sees messages.
    let mut publisher =
        r.spawn(&["pub", "--domain", "d", "later", "--data", &"x".repeat(2000), "--rate", "200", "--history", "64"]);
    let out = bw.finish_ok();
    publisher.kill();
    assert!(out.lines().count() == 3, "{out}");
    assert!(out.contains("KiB/s"), "{out}");
    assert!(!out.contains("KB"), "{out}");
}

#[test]
fn hz_with_wait_reports_the_channel_that_appeared() {
    let r = Root::new();
    let hz = r.spawn(&["hz", "--domain", "d", "t", "--wait", "20", "--interval", "0.2", "--count", "2", "--json"]);
    let mut publisher = r.spawn(&["pub", "--domain", "d", "t", "--data", "x", "--rate", "100"]);
    let out = hz.finish_ok();
    publisher.kill();
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines.iter().all(|l| l["verb"] == "hz" && l["kind"] == "topic"), "{out}");
}

#[test]
fn rm_of_the_last_channel_removes_the_domain_directory() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "a"]);
    r.ok(&["create", "--domain", "d", "--kind", "topic", "b"]);
    let out = r.ok(&["rm", "--domain", "d", "a"]);
    assert!(!out.contains("empty domain"), "{out}");
    assert!(domain_dir_exists(&r, "d"), "b is still in d");
    let v = &json_lines(&r.ok(&["rm", "--domain", "d", "b", "--json"]))[0];
    assert_eq!(v["name"], "b", "{v}");
    assert!(!domain_dir_exists(&r, "d"));

    r.ok(&["create", "--domain", "e", "--kind", "topic", "c"]);
    let out = r.ok(&["rm", "--domain", "e", "c"]);
    assert!(out.contains("removed empty domain e"), "{out}");
    assert!(!domain_dir_exists(&r, "e"));
}

#[test]
fn clean_all_removes_the_domain_it_emptied() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "idle", "--data", "x"]);
    let out = r.ok(&["clean", "--all"]);
    assert!(out.contains("removed empty domain d"), "{out}");
    assert!(!domain_dir_exists(&r, "d"));
}

/// A domain directory found empty (left by an `rm` of another tool, a crashed creator) goes
/// with `clean --all` once untouched for a while; a fresh one stays (a channel may be coming).
#[test]
fn clean_all_removes_a_domain_left_empty_for_a_while() {
    let r = Root::new();
    r.ok(&["create", "--domain", "old", "--kind", "topic", "t"]);
    r.ok(&["create", "--domain", "new", "--kind", "topic", "t"]);
    for d in ["old", "new"] {
        // Emptied behind shmbus's back, so no verb removed the directory.
        std::fs::remove_file(r.channel_file(d, "t")).unwrap();
    }
    let old = r.channel_file("old", "t").parent().unwrap().to_owned();
    let two_minutes_ago = std::time::SystemTime::now() - Duration::from_secs(120);
    std::fs::File::open(&old).unwrap().set_modified(two_minutes_ago).unwrap();
    let out = r.ok(&["clean"]);
    assert!(!out.contains("empty domain"), "without --all nothing empty goes: {out}");
    let out = r.ok(&["clean", "--all", "--dry-run"]);
    assert!(out.contains("would remove empty domain old"), "{out}");
    assert!(domain_dir_exists(&r, "old"));
    let out = r.ok(&["clean", "--all"]);
    assert!(out.contains("removed empty domain old") && !out.contains("domain new"), "{out}");
    assert!(!domain_dir_exists(&r, "old") && domain_dir_exists(&r, "new"));
}

/// The participants of channel `name` in one `top --once --json` snapshot.
fn top_participants(r: &Root, name: &str) -> Vec<Value> {
    let v = r.json(&["top", "--once", "--json", "--interval", "0.1", "--domain", "d"]);
    let channel = v["channels"].as_array().unwrap().iter().find(|c| c["name"] == name).cloned();
    channel.unwrap_or_else(|| panic!("no {name}: {v}"))["participants"].as_array().unwrap().clone()
}

#[test]
fn top_counts_what_a_stuck_subscriber_lost_past_the_history() {
    let r = Root::new();
    let domain = Domain::with_root("d", &r.0).unwrap();
    let topic = Topic::create_or_open(&domain, "t", &TopicConfig::default().history(8)).unwrap();
    // Reads one message, then never again.
    let stuck = topic.subscriber().unwrap();
    r.ok(&["pub", "--domain", "d", "t", "--data", "first"]);
    stuck.recv_timeout(Duration::from_secs(20)).unwrap();
    r.ok(&["pub", "--domain", "d", "t", "--data", "x", "--count", "50"]);
    let parts = top_participants(&r, "t");
    let sub = parts.iter().find(|p| p["role"] == "subscriber").unwrap_or_else(|| panic!("{parts:?}"));
    let lag = sub["lag"].as_u64().expect("a lag");
    assert_eq!(lag, 50, "{sub}");
    // 50 behind with 8 kept: 42 are gone, though the subscriber has not read to find out.
    assert_eq!(sub["drops"].as_u64(), Some(42), "{sub}");
    drop(stuck);
}

#[test]
fn top_names_a_cli_participant_by_its_verb() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t"]);
    let _sub = r.spawn(&["--root", r.0.to_str().unwrap(), "sub", "--domain", "d", "t"]);
    r.wait_info("d", "t", |v| v["subscribers"] == 1);
    let parts = top_participants(&r, "t");
    assert_eq!(parts.len(), 1, "{parts:?}");
    assert_eq!(parts[0]["process"], "shmbus sub", "{parts:?}");

    // On a terminal: the detail pane of the channel names it the same.
    let tmux = Tmux::start(&r, 120, 30, "top --domain d");
    tmux.wait_for("the channel", |s| s.contains("d/t"));
    tmux.keys(&["Enter"]);
    let s = tmux.wait_for("its participant", |s| s.contains("d/t (topic)") && s.contains("subscriber"));
    let line = s.lines().find(|l| l.contains("subscriber")).unwrap();
    assert!(line.contains("shmbus sub"), "{line:?}:\n{s}");
    tmux.keys(&["q"]);
}

#[test]
fn every_verb_takes_a_channel_as_d_slash_name() {
    let r = Root::new();
    r.ok(&["create", "--kind", "topic", "r1/made"]);
    r.ok(&["pub", "r1/chatter", "--data", "hi", "--message-encoding", "json"]);
    assert!(r.ok(&["info", "r1/chatter"]).contains("r1/chatter"));
    assert_eq!(r.ok(&["sub", "r1/chatter", "--from", "1", "--count", "1"]), "\"hi\"\n");
    assert!(r.ok(&["schema", "r1/chatter", "--json"]).contains("json"));
    for verb in ["hz", "bw", "delay"] {
        let e = r.fails(&[verb, "r1/nothing", "--count", "1"]);
        assert!(e.contains("no channel r1/nothing"), "{verb}: {e}");
    }
    let e = r.fails(&["record", "r1/chatter", "r1/nothing", "--dir", &r.jdir("rec"), "--count", "1"]);
    assert!(e.contains("no channel r1/nothing"), "{e}");
    let e = r.fails(&["snapshot", "r1/nothing", "--out", &r.jdir("x.png")]);
    assert!(e.contains("no channel r1/nothing"), "{e}");
    let e = r.fails(&["snapshot", "r1/chatter", "--out", &r.jdir("x.png")]);
    assert!(e.contains("not an image"), "the topic was found: {e}");
    let mut worker = r.spawn(&["pool", "worker", "r1/jobs", "--count", "1"]);
    r.wait_info("r1", "jobs", |v| v["workers"] == 1);
    r.ok(&["pool", "dispatch", "r1/jobs", "--data", "job"]);
    assert!(worker.child().wait().unwrap().success());
    // The same domain twice is no conflict, and D/NAME overrides $SHMBUS_DOMAIN.
    r.ok(&["rm", "--domain", "r1", "r1/made"]);
    let out = r.cmd(&["rm", "r1/jobs"]).env("SHMBUS_DOMAIN", "other").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Two different domains: a usage error naming both.
    let out = r.run(&["info", "--domain", "r2", "r1/chatter"]);
    assert_eq!(out.status.code(), Some(2));
    let e = one_error_line(&out);
    assert!(e.contains("--domain r2") && e.contains("r1/chatter"), "{e}");
    // Listings name the channel so that it pastes back.
    let ls = r.json(&["ls", "--json"]);
    let listed: Vec<String> = ls
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{}/{}", c["domain"].as_str().unwrap(), c["name"].as_str().unwrap()))
        .collect();
    assert_eq!(listed, ["r1/chatter"]);
    assert!(r.ok(&["info", &listed[0]]).contains("topic"));
}

#[test]
fn ls_of_a_domain_that_does_not_exist_says_so() {
    let r = Root::new();
    let out = r.run(&["ls", "--domain", "nosuch"]);
    assert_eq!(out.status.code(), Some(1));
    let e = one_error_line(&out);
    assert!(e.contains("no domain nosuch") && e.contains("there are no domains"), "{e}");
    r.ok(&["create", "--domain", "a", "--kind", "topic", "t"]);
    r.ok(&["create", "--domain", "b", "--kind", "queue", "q"]);
    let out = r.run(&["ls", "--domain", "nosuch", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let e = one_error_line(&out);
    assert!(e.contains("no domain nosuch") && e.contains(": a, b"), "{e}");
    assert!(r.ok(&["ls", "--domain", "a"]).contains("t"));
}

#[test]
fn a_missing_channel_is_said_the_same_on_every_verb() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "other"]);
    let with_wait: &[&[&str]] = &[
        &["sub", "--domain", "d", "nope"],
        &["hz", "--domain", "d", "nope"],
        &["bw", "--domain", "d", "nope"],
        &["delay", "--domain", "d", "nope"],
        &["record", "--domain", "d", "nope", "--dir", &r.jdir("x")],
    ];
    let without: &[&[&str]] =
        &[&["info", "--domain", "d", "nope"], &["schema", "--domain", "d", "nope"], &["rm", "--domain", "d", "nope"]];
    for (args, wait) in with_wait.iter().map(|a| (a, true)).chain(without.iter().map(|a| (a, false))) {
        let out = r.run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let e = one_error_line(&out);
        assert!(e.starts_with("shmbus: no channel d/nope ("), "{args:?}: {e}");
        assert_eq!(e.contains("--wait SECS"), wait, "{args:?}: {e}");
    }
    for args in
        [&["sub", "--domain", "d", "nope", "--wait", "0.1"][..], &["hz", "--domain", "d", "nope", "--wait", "0.1"]]
    {
        let e = r.fails(args);
        assert!(e.starts_with("shmbus: no channel d/nope appeared within --wait 0.1 s"), "{e}");
    }
}

#[test]
fn sub_from_a_negative_number_reads_the_last_messages() {
    let r = Root::new();
    r.ok_stdin(&["pub", "--domain", "d", "t"], "a\nb\nc\n");
    assert_eq!(r.ok(&["sub", "--domain", "d", "t", "--from", "-1", "--count", "1"]), "c\n");
    assert_eq!(r.ok(&["sub", "--domain", "d", "t", "--from", "-2", "--count", "2"]), "b\nc\n");
    // More than were published: from the first.
    assert_eq!(r.ok(&["sub", "--domain", "d", "t", "--from", "-9", "--count", "3"]), "a\nb\nc\n");
    let out = r.run(&["sub", "--domain", "d", "t", "--from", "-0"]);
    assert_eq!(out.status.code(), Some(2));
    let e = one_error_line(&out);
    assert!(e.contains("-N") && !e.contains("-- -"), "{e}");
}

#[test]
fn json_lines_carry_one_timestamp_named_by_its_clock() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "t", "--data", "x"]);
    let sub = r.ok(&["sub", "--domain", "d", "t", "--from", "1", "--count", "1", "--json"]);
    let keys: Vec<String> = json_lines(&sub)[0].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys.iter().filter(|k| k.starts_with("ts_")).collect::<Vec<_>>(), ["ts_mono_ns"], "{sub}");
    let j = r.jdir("j");
    r.ok(&["journal", "append", "--dir", &j, "--data", "x"]);
    let dump = r.ok(&["journal", "dump", "--dir", &j, "--json"]);
    let keys: Vec<String> = json_lines(&dump)[0].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys.iter().filter(|k| k.starts_with("ts_")).collect::<Vec<_>>(), ["ts_real_ns"], "{dump}");
}

#[test]
fn journal_rm_removes_a_journal_and_nothing_else() {
    let r = Root::new();
    // Removes: every file of the journal, then the directory.
    let j = r.jdir("gone");
    r.ok_stdin(&["journal", "append", "--dir", &j], "a\nb\n");
    r.ok(&["journal", "tail", "--dir", &j, "--reader", "billing", "--count", "1"]);
    assert!(r.ok(&["journal", "rm", "--dir", &j]).contains("removed journal"));
    assert!(!std::path::Path::new(&j).exists());

    // Not a journal: an empty directory, one with other files, a journal with a stranger in
    // it, a symlink to a journal. Nothing is removed from any of them.
    let plain = r.0.join("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("notes.txt"), "keep me").unwrap();
    let e = r.fails(&["journal", "rm", "--dir", plain.to_str().unwrap()]);
    assert!(e.contains("not a journal"), "{e}");
    assert!(plain.join("notes.txt").exists());
    let mixed = r.jdir("mixed");
    r.ok(&["journal", "append", "--dir", &mixed, "--data", "x"]);
    std::fs::write(std::path::Path::new(&mixed).join("notes.txt"), "keep me").unwrap();
    let e = r.fails(&["journal", "rm", "--dir", &mixed, "--force"]);
    assert!(e.contains("notes.txt") && e.contains("nothing removed"), "{e}");
    assert!(std::path::Path::new(&mixed).join("journal.meta").exists());
    std::fs::remove_file(std::path::Path::new(&mixed).join("notes.txt")).unwrap();
    let link = r.0.join("link");
    std::os::unix::fs::symlink(&mixed, &link).unwrap();
    let e = r.fails(&["journal", "rm", "--dir", link.to_str().unwrap()]);
    assert!(e.contains("symlink"), "{e}");
    assert!(std::path::Path::new(&mixed).join("journal.meta").exists());

    // A live appender (a real process, appending stdin lines as they come) is named; --force
    // removes the journal all the same.
    let mut appender = common::Killed(Some(
        r.cmd(&["journal", "append", "--dir", &mixed])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    r.wait_json(&["journal", "info", "--dir", &mixed, "--json", "--rate-window", "0"], |v| v["appenders"] == 1);
    let e = r.fails(&["journal", "rm", "--dir", &mixed]);
    assert!(e.contains(&format!("pid {}", appender.id())), "{e}");
    assert!(std::path::Path::new(&mixed).join("journal.meta").exists());
    r.ok(&["journal", "rm", "--dir", &mixed, "--force"]);
    assert!(!std::path::Path::new(&mixed).exists());
    appender.kill();
}

/// A tmux server of its own (its own socket) running `shmbus ARGS`, killed when dropped.
struct Tmux {
    socket: String,
    /// The server's socket file, which `kill-server` leaves behind.
    socket_path: Option<std::path::PathBuf>,
}

impl Tmux {
    fn start(root: &Root, width: u16, height: u16, args: &str) -> Tmux {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = format!("shmbus-first-hour-{}-{n}", std::process::id());
        let bin = env!("CARGO_BIN_EXE_shmbus");
        let command = format!("'{bin}' --root '{}' {args}; sleep 600", root.0.display());
        let mut t = Tmux { socket, socket_path: None };
        let (w, h) = (width.to_string(), height.to_string());
        t.tmux(&["-f", "/dev/null", "new-session", "-d", "-s", "top", "-x", &w, "-y", &h, &command]);
        let path = t.tmux(&["display-message", "-p", "#{socket_path}"]);
        t.socket_path = Some(path.trim().into());
        t
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").arg("-L").arg(&self.socket).args(args).output().expect("tmux is installed");
        assert!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.tmux(&["send-keys", "-t", "top", k]);
        }
    }

    /// The screen once `cond` holds for it; panics with the last screen after 10 s.
    fn wait_for(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.tmux(&["capture-pane", "-p", "-t", "top"]);
            if cond(&s) {
                return s;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "the screen never showed {what}:\n{s}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").arg("-L").arg(&self.socket).arg("kill-server").output();
        if let Some(p) = self.socket_path.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}
