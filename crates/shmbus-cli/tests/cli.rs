//! The `shmbus` binary, run as a real process against a scratch root (see `common`).

mod common;

use std::io::Write;
use std::process::Stdio;

use common::{json_lines, one_error_line, Killed, Root};

#[test]
fn pub_data_then_sub_from_start_as_json() {
    let r = Root::new();
    for word in ["alpha", "beta", "gamma"] {
        assert_eq!(r.ok(&["pub", "--domain", "d", "t", "--data", word]), "");
    }
    let lines = json_lines(&r.ok(&[
        "sub",
        "--domain",
        "d",
        "t",
        "--from",
        "1",
        "--count",
        "3",
        "--json",
        "--timeout-ms",
        "10000",
    ]));
    assert_eq!(lines.len(), 3);
    let mut last_ts = 0;
    for (i, (line, word)) in lines.iter().zip(["alpha", "beta", "gamma"]).enumerate() {
        let obj = line.as_object().unwrap();
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["data", "len", "seq", "ts_mono_ns"]);
        assert_eq!(obj["seq"], i as u64 + 1);
        assert_eq!(obj["data"], word);
        assert_eq!(obj["len"], word.len() as u64);
        let ts = obj["ts_mono_ns"].as_u64().unwrap();
        assert!(ts > 0 && ts >= last_ts, "timestamps are monotonic: {ts} after {last_ts}");
        last_ts = ts;
    }
    // --from in the middle; plain output is the payload per line.
    assert_eq!(
        r.ok(&["sub", "--domain", "d", "t", "--from", "2", "--count", "2", "--timeout-ms", "10000"]),
        "beta\ngamma\n"
    );
}

#[test]
fn pub_reads_stdin_lines() {
    let r = Root::new();
    let mut child =
        r.cmd(&["pub", "--domain", "d", "lines"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"one\ntwo words\n\nlast without newline").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&r.ok(&[
        "sub",
        "--domain",
        "d",
        "lines",
        "--from",
        "1",
        "--count",
        "4",
        "--json",
        "--timeout-ms",
        "10000",
    ]));
    let data: Vec<&str> = lines.iter().map(|l| l["data"].as_str().unwrap()).collect();
    assert_eq!(data, ["one", "two words", "", "last without newline"]);
    assert_eq!(lines[2]["len"], 0);
}

#[test]
fn sub_receives_only_new_messages_by_default_and_latest_on_request() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "t", "--data", "old1"]);
    r.ok(&["pub", "--domain", "d", "t", "--data", "old2"]);
    assert_eq!(r.ok(&["sub", "--domain", "d", "t", "--latest", "--count", "1", "--timeout-ms", "10000"]), "old2\n");

    let sub = r.spawn(&["sub", "--domain", "d", "t", "--count", "2", "--json", "--timeout-ms", "20000"]);
    r.wait_info("d", "t", |v| v["subscribers"] == 1);
    r.ok(&["pub", "--domain", "d", "t", "--data", "new1"]);
    r.ok(&["pub", "--domain", "d", "t", "--data", "new2"]);
    let out = sub.finish();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = json_lines(&String::from_utf8(out.stdout).unwrap());
    let got: Vec<(u64, &str)> =
        lines.iter().map(|l| (l["seq"].as_u64().unwrap(), l["data"].as_str().unwrap())).collect();
    assert_eq!(got, [(3, "new1"), (4, "new2")]);
}

#[test]
fn sub_timeout_fails_with_one_line() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "quiet", "--data", "x"]);
    let err = r.fails(&["sub", "--domain", "d", "quiet", "--timeout-ms", "100"]);
    assert!(err.contains("timed out") && err.contains("d/quiet"), "{err}");
    // Fewer than --count messages: also a timeout, and what arrived is still printed.
    let out = r.run(&["sub", "--domain", "d", "quiet", "--from", "1", "--count", "2", "--timeout-ms", "100"]);
    assert!(!out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "x\n");
    assert!(one_error_line(&out).contains("1 of 2"));
}

#[test]
fn sub_reports_gaps_and_continues() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "small", "--history", "2", "--slot-size", "16", "--data", "1"]);
    for i in 2..=12 {
        r.ok(&["pub", "--domain", "d", "small", "--data", &i.to_string()]);
    }
    // 12 messages through 6 slots (history 2 + 4 spare): seq 1 is gone. One gap line, then
    // the oldest message kept.
    let out =
        r.run(&["sub", "--domain", "d", "small", "--from", "1", "--count", "1", "--json", "--timeout-ms", "10000"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("gap: ") && err.trim_end().ends_with("message(s) skipped") && err.lines().count() == 1,
        "{err}"
    );
    let first = json_lines(&String::from_utf8_lossy(&out.stdout))[0]["seq"].as_u64().unwrap();
    assert!(first > 1 && first <= 12);
    let skipped: u64 = err.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert_eq!(skipped, first - 1);
}

#[test]
fn layout_mismatch_names_both_values() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "sized", "--slot-size", "128", "--data", "x"]);
    // Same or unspecified sizes reuse the topic.
    r.ok(&["pub", "--domain", "d", "sized", "--slot-size", "128", "--data", "y"]);
    r.ok(&["pub", "--domain", "d", "sized", "--history", "16", "--data", "z"]);
    let err = r.fails(&["pub", "--domain", "d", "sized", "--slot-size", "256", "--data", "x"]);
    assert!(err.contains("128") && err.contains("256") && err.contains("slot size"), "{err}");
    let err = r.fails(&["pub", "--domain", "d", "sized", "--history", "3", "--data", "x"]);
    assert!(err.contains("16") && err.contains('3') && err.contains("history"), "{err}");
    let v = r.wait_info("d", "sized", |_| true);
    assert_eq!(v["last_seq"], 3);
}

#[test]
fn too_large_message_is_a_clear_error() {
    let r = Root::new();
    let err = r.fails(&["pub", "--domain", "d", "tiny", "--slot-size", "4", "--data", "12345"]);
    assert!(err.contains("5 bytes") && err.contains("slot size of 4"), "{err}");
    // The library says what is wrong; the tool names its own flag.
    assert!(err.contains("--slot-size"), "{err}");
}

#[test]
fn invalid_names_are_clear_errors() {
    let r = Root::new();
    for (domain, name) in
        [("d", "a/b"), ("d", "../escape"), ("d", ".hidden"), ("d", ""), ("bad domain", "t"), ("..", "t")]
    {
        // A name with a `/` is D/NAME: with another --domain, two domains.
        let clear = |e: &str| e.contains("invalid name") || e.contains("name two domains");
        let err = r.fails(&["pub", "--domain", domain, name, "--data", "x"]);
        assert!(clear(&err), "{domain}/{name}: {err}");
        let err = r.fails(&["sub", "--domain", domain, name, "--timeout-ms", "10"]);
        assert!(clear(&err), "{domain}/{name}: {err}");
    }
    let entries: Vec<_> = std::fs::read_dir(&r.0).unwrap().collect();
    assert!(entries.is_empty(), "nothing was created: {entries:?}");
    // Missing channel, missing arguments, unknown verb: one line each too.
    assert!(r.fails(&["sub", "--domain", "d", "nothing", "--timeout-ms", "10"]).contains("no channel d/nothing"));
    assert!(r.fails(&["info", "--domain", "d", "nothing"]).contains("no channel d/nothing"));
    assert!(r.fails(&["sub", "--domain", "d"]).contains("<NAME>"));
    assert!(r.fails(&["frobnicate"]).contains("frobnicate"));
    assert!(r.fails(&["sub", "--domain", "d", "x", "--from", "1", "--latest"]).contains("cannot be used"));
}

#[test]
fn ls_shows_topics_with_counts() {
    let r = Root::new();
    for i in 0..3 {
        r.ok(&["pub", "--domain", "one", "imu", "--slot-size", "64", "--history", "8", "--data", &i.to_string()]);
    }
    r.ok(&["pub", "--domain", "two", "cam", "--data", "x"]);
    let mut sub = r.spawn(&["sub", "--domain", "one", "imu"]);
    r.wait_info("one", "imu", |v| v["subscribers"] == 1);

    let all = r.json(&["ls", "--json"]);
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 2);
    let imu = all.iter().find(|e| e["name"] == "imu").unwrap();
    assert_eq!(imu["domain"], "one");
    assert_eq!(imu["kind"], "topic");
    assert_eq!(imu["slot_size"], 64);
    assert_eq!(imu["history"], 8);
    assert_eq!(imu["last_seq"], 3);
    assert_eq!(imu["publishers"], 0);
    assert_eq!(imu["subscribers"], 1);
    let cam = all.iter().find(|e| e["name"] == "cam").unwrap();
    assert_eq!(
        (cam["domain"].as_str(), cam["last_seq"].as_u64(), cam["subscribers"].as_u64()),
        (Some("two"), Some(1), Some(0))
    );

    let only_two = r.json(&["ls", "--domain", "two", "--json"]);
    assert_eq!(only_two.as_array().unwrap().len(), 1);

    let table = r.ok(&["ls"]);
    let row = table.lines().find(|l| l.contains("imu")).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cells[..8], ["one", "imu", "topic", "64", "8", "3", "0", "1"]);
    sub.kill();

    // A file that is not a segment is listed as invalid, not hidden.
    std::fs::write(r.channel_file("two", "junk"), b"not a segment").unwrap();
    let v = r.json(&["ls", "--domain", "two", "--json"]);
    let junk = v.as_array().unwrap().iter().find(|e| e["name"] == "junk").unwrap().clone();
    assert_eq!(junk["kind"], "invalid");
    assert!(junk["error"].as_str().unwrap().contains("not a shmbus segment"));
    assert!(r.ok(&["ls"]).lines().any(|l| l.contains("junk") && l.contains("invalid")));
}

#[test]
fn info_json_describes_header_status_and_participants() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "t", "--slot-size", "100", "--history", "5", "--data", "x"]);
    let mut sub = r.spawn(&["sub", "--domain", "d", "t"]);
    let v = r.wait_info("d", "t", |v| v["subscribers"] == 1);
    assert_eq!(v["kind"], "topic");
    assert_eq!(v["version"], 7);
    assert_eq!(v["params"]["slot_size"], 100);
    assert_eq!(v["params"]["history"], 5);
    assert_eq!(v["last_seq"], 1);
    assert_eq!(v["creator_alive"], false, "the creating `pub` has exited");
    assert!(v["creator_pid"].as_u64().unwrap() > 0);
    assert_eq!(v["mode"], "0600");
    assert_eq!((v["stale"].as_bool(), v["state"].as_str()), (Some(false), Some("in-use")));
    let parts = v["participants"].as_array().unwrap();
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0]["pid"], sub.id());
    assert_eq!(parts[0]["role"], "subscriber");
    let text = r.ok(&["info", "--domain", "d", "t"]);
    assert!(
        text.contains("topic") && text.contains(&format!("pid {}", sub.id())) && text.contains("subscriber"),
        "{text}"
    );
    sub.kill();
    let v = r.wait_info("d", "t", |v| v["subscribers"] == 0);
    // Nobody uses it, but its history holds a message: idle, not stale.
    assert_eq!((v["stale"].as_bool(), v["state"].as_str()), (Some(false), Some("idle")));
}

#[test]
fn clean_removes_only_what_the_dead_left() {
    let r = Root::new();
    // `killed`: created by a `pub` that is then SIGKILLed while publishing from stdin.
    let mut creator =
        r.cmd(&["pub", "--domain", "d", "killed"]).stdin(Stdio::piped()).spawn().map(|c| Killed(Some(c))).unwrap();
    creator.child().stdin.as_mut().unwrap().write_all(b"m\n").unwrap();
    r.wait_info("d", "killed", |v| v["last_seq"] == 1 && v["publishers"] == 1);
    // `used`: its creator exited, but a live subscriber uses it.
    r.ok(&["pub", "--domain", "d", "used", "--data", "x"]);
    let mut sub = r.spawn(&["sub", "--domain", "d", "used"]);
    r.wait_info("d", "used", |v| v["subscribers"] == 1);
    // `done`: creator exited, nobody uses it.
    r.ok(&["pub", "--domain", "d", "done", "--data", "x"]);
    // Not a segment at all.
    std::fs::write(r.channel_file("d", "junk"), b"junk").unwrap();

    // While the creator of `killed` runs, it is left alone. (Every topic here holds a message:
    // nobody's is idle, and only `--all` removes it.)
    let out = r.ok(&["clean", "--dry-run", "--all"]);
    assert!(out.contains("would remove d/done") && !out.contains("d/killed") && !out.contains("d/used"), "{out}");
    creator.kill();

    let out = r.ok(&["clean", "--dry-run", "--all"]);
    assert!(out.contains("would remove d/killed") && out.contains("would remove d/done"), "{out}");
    assert!(!out.contains("d/used"), "{out}");
    assert!(out.contains("junk"), "invalid files are reported: {out}");
    for name in ["killed", "used", "done", "junk"] {
        assert!(r.channel_file("d", name).exists(), "--dry-run removed {name}");
    }

    let out = r.ok(&["clean"]);
    assert!(out.contains("kept d/killed: idle, holds 1 message in its history (--all removes it)"), "{out}");
    assert!(r.channel_file("d", "killed").exists() && r.channel_file("d", "done").exists());
    let out = r.ok(&["clean", "--all"]);
    assert!(out.contains("removed d/killed") && out.contains("removed d/done"), "{out}");
    assert!(!r.channel_file("d", "killed").exists());
    assert!(!r.channel_file("d", "done").exists());
    assert!(r.channel_file("d", "used").exists(), "a segment with a live subscriber stays");
    assert!(r.channel_file("d", "junk").exists(), "invalid files stay without --force");
    // The survivor still works.
    r.ok(&["pub", "--domain", "d", "used", "--data", "still here"]);

    sub.kill();
    let out = r.ok(&["clean", "--domain", "d", "--force"]);
    assert!(out.contains("removed d/used") && out.contains("removed invalid d/junk"), "{out}");
    assert!(!r.channel_file("d", "used").exists() && !r.channel_file("d", "junk").exists());
}

#[test]
fn demo_flags_take_units() {
    let r = Root::new();
    let v = r.json(&["demo", "--seconds", "500ms", "--image-bytes", "64K", "--json"]);
    assert_eq!((v["seconds"].as_f64(), v["image_bytes"].as_u64()), (Some(0.5), Some(65536)), "{v}");
    for bad in [&["demo", "--seconds", "soon"][..], &["demo", "--image-bytes", "64KB"]] {
        let out = r.run(bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        one_error_line(&out);
    }
}

#[test]
fn demo_prints_every_consumer_and_producer() {
    let r = Root::new();
    let out = r.ok(&["demo", "--seconds", "2"]);
    let consumers =
        ["imu", "image", "image+med01", "image+med0[1-5]", "imu+image+med0[1-5]", "imu+image+med0[1-5] & sleep(10ms)"];
    for c in consumers {
        for what in ["view", "view+copy"] {
            let line = out
                .lines()
                .find(|l| {
                    l.starts_with("consumer")
                        && l.contains(&format!("=> {c} "))
                        && l.split_whitespace().any(|w| w == what)
                })
                .unwrap_or_else(|| panic!("no {what} line for consumer {c}:\n{out}"));
            if c == "imu" {
                let n: u64 = line.split_whitespace().nth(8).unwrap().parse().unwrap();
                assert!(n > 0, "{line}");
            }
        }
    }
    for p in ["imu", "image", "med01", "med02", "med03", "med04", "med05"] {
        let line = out
            .lines()
            .find(|l| l.starts_with("producer") && l.contains(&format!(" {p} =>")))
            .unwrap_or_else(|| panic!("no line for producer {p}:\n{out}"));
        let n: u64 = line.split_whitespace().nth(8).unwrap().parse().unwrap();
        assert!(n > 0, "{line}");
    }
    // The demo cleans up after itself.
    assert_eq!(std::fs::read_dir(&r.0).unwrap().count(), 0, "demo left files behind");
}

#[test]
fn demo_json_has_the_same_numbers() {
    let r = Root::new();
    let v = r.json(&["demo", "--seconds", "1", "--image-bytes", "100000", "--json"]);
    assert_eq!(v["image_bytes"], 100000);
    let consumers = v["consumers"].as_array().unwrap();
    assert_eq!(consumers.len(), 6);
    let imu = consumers.iter().find(|c| c["name"] == "imu").unwrap();
    assert!(imu["view"]["n"].as_u64().unwrap() > 0);
    assert_eq!(imu["view"]["n"], imu["view_copy"]["n"]);
    assert!(imu["view"]["p50_ns"].as_u64().unwrap() <= imu["view"]["p99_ns"].as_u64().unwrap());
    let producers = v["producers"].as_array().unwrap();
    assert_eq!(producers.len(), 7);
    for p in producers {
        assert!(p["write"]["n"].as_u64().unwrap() > 0, "{p}");
    }
    assert_eq!(std::fs::read_dir(&r.0).unwrap().count(), 0, "demo left files behind");
}

#[test]
fn root_option_overrides_the_environment() {
    let env_root = Root::new();
    let other = Root::new();
    let dir = other.0.to_str().unwrap();
    env_root.ok(&["--root", dir, "pub", "--domain", "d", "elsewhere", "--data", "x"]);
    assert!(other.channel_file("d", "elsewhere").exists());
    assert!(!env_root.channel_file("d", "elsewhere").exists());
    assert_eq!(env_root.json(&["ls", "--json"]), serde_json::json!([]));
    let listed = env_root.json(&["ls", "--json", "--root", dir]);
    assert_eq!(listed[0]["name"], "elsewhere");
    assert_eq!(
        env_root.ok(&[
            "sub",
            "--root",
            dir,
            "--domain",
            "d",
            "elsewhere",
            "--latest",
            "--count",
            "1",
            "--timeout-ms",
            "10000"
        ]),
        "x\n"
    );
}

/// Runs `shmbus args` with a watchdog: panics if it has not exited within `secs` seconds
/// (a hang, or a reader spinning on what a hostile peer wrote).
fn run_within(r: &Root, args: &[&str], secs: u64) -> std::process::Output {
    let mut child = r.cmd(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > end {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("shmbus {args:?} still running after {secs} s; stderr so far: {} bytes", out.stderr.len());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn sub_from_far_past_the_end_waits_for_new_messages_and_times_out() {
    let r = Root::new();
    for i in 1..=3 {
        r.ok(&["pub", "--domain", "d", "t", "--data", &format!("m{i}")]);
    }
    let out =
        run_within(&r, &["sub", "--domain", "d", "t", "--from", "18446744073709551610", "--timeout-ms", "300"], 20);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let err = one_error_line(&out);
    assert!(err.contains("timed out") && !err.contains("gap"), "{err}");
    // And a message published meanwhile is the first one printed.
    let mut sub = r.spawn(&[
        "sub",
        "--domain",
        "d",
        "t",
        "--from",
        "18446744073709551610",
        "--count",
        "1",
        "--timeout-ms",
        "20000",
    ]);
    r.wait_info("d", "t", |v| v.to_string().contains("subscriber"));
    let end = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !sub.exited() {
        assert!(std::time::Instant::now() < end, "sub never printed a new message");
        r.ok(&["pub", "--domain", "d", "t", "--data", "later"]);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(sub.finish_ok(), "later\n");
}

#[test]
fn sub_on_a_corrupt_topic_exits_with_one_line_and_no_huge_gap() {
    let r = Root::new();
    for i in 1..=3 {
        r.ok(&["pub", "--domain", "d", "t", "--data", &format!("m{i}")]);
    }
    // The topic's `tail` word (first word of the kind area: after the 4 KiB header and 128
    // participant entries of 64 bytes) overwritten with a value near the end of the range.
    let path = r.channel_file("d", "t");
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &(u64::MAX - 10).to_le_bytes(), 4096 + 128 * 64 + 128 * 512).unwrap();
    let out = run_within(&r, &["sub", "--domain", "d", "t", "--from", "1", "--timeout-ms", "300"], 20);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = one_error_line(&out);
    assert!(err.contains("corrupt"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("gap"), "{out:?}");
    // What was committed before the damage may be printed first; nothing more.
    assert!(String::from_utf8_lossy(&out.stdout).lines().count() <= 3, "{out:?}");
}

#[test]
fn sub_on_a_corrupt_stream_exits_with_one_line() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "s", "--kind", "stream", "--capacity", "64K", "--data", "hello"]);
    let path = r.channel_file("d", "s");
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    // The first record's header (the ring starts at the first page boundary after the
    // 4 KiB header, 128 participant entries of 64 bytes and the 256-byte control block).
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    let ring = (4096 + 128 * 64 + 128 * 512 + 256u64).div_ceil(page) * page;
    std::os::unix::fs::FileExt::write_all_at(&f, &u64::MAX.to_le_bytes(), ring).unwrap();
    let out = run_within(&r, &["sub", "--domain", "d", "s", "--timeout-ms", "300"], 20);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(one_error_line(&out).contains("corrupt"), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    // Positions that break the ring's invariant: refused when the reader attaches.
    std::os::unix::fs::FileExt::write_all_at(&f, &13u64.to_le_bytes(), 4096 + 128 * 64 + 128 * 512).unwrap();
    let out = run_within(&r, &["sub", "--domain", "d", "s", "--timeout-ms", "300"], 20);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(one_error_line(&out).contains("corrupt"), "{out:?}");
}

#[test]
fn a_missing_root_is_an_error_for_every_verb_that_uses_it() {
    let r = Root::new();
    let missing = r.0.join("no-such-root");
    let dir = missing.to_str().unwrap();
    let expected = format!("root directory {dir} does not exist; create it or fix --root/SHMBUS_ROOT");
    let cases: [&[&str]; 5] = [
        &["--root", dir, "ls"],
        &["--root", dir, "pub", "--domain", "d", "t", "--data", "x"],
        &["--root", dir, "create", "--domain", "d", "--kind", "topic", "t"],
        &["--root", dir, "top", "--once"],
        &["--root", dir, "pool", "worker", "--domain", "d", "p", "--timeout-ms", "10"],
    ];
    for args in cases {
        let out = r.run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(one_error_line(&out), format!("shmbus: {expected}"), "{args:?}");
    }
    // The same through SHMBUS_ROOT; the root is configuration: nothing created it.
    let out = r.cmd(&["ls"]).env("SHMBUS_ROOT", &missing).output().unwrap();
    assert_eq!(one_error_line(&out), format!("shmbus: {expected}"));
    assert!(!missing.exists());
    // A file is not a root.
    let file = r.0.join("a-file");
    std::fs::write(&file, b"").unwrap();
    let err = r.fails(&["--root", file.to_str().unwrap(), "ls"]);
    assert!(err.contains("is not a directory"), "{err}");
    // The journal verbs do not use the root.
    let j = r.jdir("j");
    r.ok(&["--root", dir, "journal", "append", "--dir", &j, "--data", "x"]);
}
