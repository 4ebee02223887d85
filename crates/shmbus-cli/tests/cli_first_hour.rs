//! A newcomer's first hour with the CLI: the surprises it used to hold, each pinned by a
//! test. Real `shmbus` processes on real channels in a scratch root; no assertion on a time.
//!
//! * `pub --file` sizes a topic it creates from the file, and a `pub` that fails before
//!   sending leaves no channel (nor domain) behind.
//! * `sub` prints a payload that is not UTF-8 as hex unless `--format raw` asks for bytes.
//! * `hz`, `bw` and `delay` can wait for their channel (`--wait`), and `bw` speaks IEC units.
//! * `rm` of a domain's last channel removes the domain directory too.

mod common;

use common::{json_lines, one_error_line, Root};

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

#[test]
fn hz_bw_and_delay_wait_for_a_channel_to_appear() {
    let r = Root::new();
    for verb in ["hz", "bw", "delay"] {
        let e = r.fails(&[verb, "--domain", "d", "later", "--count", "1"]);
        assert!(e.contains("no channel 'later'") && e.contains("--wait"), "{e}");
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
