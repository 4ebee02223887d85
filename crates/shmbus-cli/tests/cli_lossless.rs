//! Lossless topics from the shell: `create --policy`, `sub --reliable`, `sub --from
//! oldest|latest`, and `pub` into `block` and `fail` topics. Real `shmbus` processes on real
//! channels; no assertion on a time.

mod common;

use std::process::{Command, Stdio};

use common::{json_lines, one_error_line, Killed, Root};

/// A reliable `sub` that is alive but reads nothing: subscribed, then stopped (SIGSTOP).
fn stopped_reliable_sub(r: &Root) -> Killed {
    let sub = r.spawn(&["sub", "--domain", "d", "t", "--reliable", "--count", "1"]);
    r.wait_info("d", "t", |v| v["status"]["reliable_subscribers"] == 1);
    let st = Command::new("kill").args(["-STOP", &sub.id().to_string()]).status().unwrap();
    assert!(st.success());
    sub
}

/// The case: `seq 1 100000 | shmbus pub` into a `block` topic, with a `sub
/// --reliable --count 100000` started first, receives every line, in order.
#[test]
fn a_reliable_sub_receives_every_line_piped_into_a_block_topic() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t", "--policy", "block"]);
    // Its output goes to a file: a pipe nobody drains until the end would fill, stop the
    // subscriber from reading, and get it evicted.
    let out_path = r.0.join("received.txt");
    let mut sub = Killed(Some(
        r.cmd(&["sub", "--domain", "d", "t", "--reliable", "--count", "100000", "--timeout-ms", "60000"])
            .stdout(std::fs::File::create(&out_path).unwrap())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    // Subscribed (not just started): the topic says so.
    let info = r.wait_info("d", "t", |v| v["status"]["reliable_subscribers"] == 1);
    assert_eq!(info["params"]["policy"], "block", "{info}");
    let input: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
    r.ok_stdin(&["pub", "--domain", "d", "t"], &input);
    let st = sub.child().wait().unwrap();
    let out = std::fs::read_to_string(&out_path).unwrap();
    assert!(st.success(), "sub failed: {st}");
    assert!(out == input, "{} lines received, first difference at line {:?}", out.lines().count(), {
        out.lines().zip(input.lines()).position(|(a, b)| a != b)
    });
}

#[test]
fn pub_into_a_fail_topic_reports_full_and_how_many_were_sent() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t", "--policy", "fail", "--history", "4"]);
    let mut sub = stopped_reliable_sub(&r);
    let input: String = (1..=100).map(|i| format!("{i}\n")).collect();
    let out = r.run_stdin(&["pub", "--domain", "d", "t"], input.as_bytes());
    assert_eq!(out.status.code(), Some(1));
    let line = one_error_line(&out);
    assert!(line.contains("full") && line.contains("sent before"), "{line}");
    sub.kill();
}

#[test]
fn pub_into_a_block_topic_waits_up_to_timeout_ms() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t", "--policy", "block", "--history", "4"]);
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t", "--policy", "block"]); // same: exists
    let mut sub = stopped_reliable_sub(&r);
    let input: String = (1..=100).map(|i| format!("{i}\n")).collect();
    let out = r.run_stdin(&["pub", "--domain", "d", "t", "--timeout-ms", "200"], input.as_bytes());
    assert_eq!(out.status.code(), Some(1));
    let line = one_error_line(&out);
    assert!(line.contains("timed out") && line.contains("sent before"), "{line}");
    sub.kill();
}

/// One-shot `pub` invocations, each giving up after 200 ms, get a stopped reliable `sub`
/// evicted after about one reliable timeout (1 s) in all: the clock is the topic's, not one
/// `pub`'s. The `sub`, resumed, says it was evicted and goes on.
#[test]
fn one_shot_pubs_with_a_short_timeout_evict_a_stopped_reliable_sub() {
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
        "1000",
    ]);
    let mut sub = stopped_reliable_sub(&r);
    let input: String = (1..=100).map(|i| format!("{i}\n")).collect();
    let out = r.run_stdin(&["pub", "--domain", "d", "t", "--timeout-ms", "200"], input.as_bytes());
    assert_eq!(out.status.code(), Some(1), "the topic never filled");
    // Without a shared clock every `pub` starts it afresh and none ever gets through.
    let mut timeouts = 0;
    loop {
        let out = r.run_stdin(&["pub", "--domain", "d", "t", "--timeout-ms", "200"], b"once\n");
        if out.status.success() {
            break;
        }
        let line = one_error_line(&out);
        assert!(line.contains("timed out"), "{line}");
        timeouts += 1;
        assert!(timeouts < 15, "{timeouts} one-shot pubs of 200 ms each timed out; the reliable timeout is 1 s");
    }
    r.wait_info("d", "t", |v| v["status"]["reliable_subscribers"] == 0);
    let st = Command::new("kill").args(["-CONT", &sub.id().to_string()]).status().unwrap();
    assert!(st.success());
    let out = sub.0.take().unwrap().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sub: {err}");
    assert!(err.contains("evicted"), "the sub was not told: {err}");
}

#[test]
fn policy_flags_are_checked() {
    let r = Root::new();
    let out = r.run(&["create", "--domain", "d", "--kind", "topic", "t", "--policy", "sometimes"]);
    assert_eq!(out.status.code(), Some(2));
    one_error_line(&out);
    let out = r.run(&["create", "--domain", "d", "--kind", "queue", "q", "--policy", "block"]);
    assert_eq!(out.status.code(), Some(2));
    one_error_line(&out);
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t"]);
    let e = r.fails(&["create", "--domain", "d", "--kind", "topic", "t", "--policy", "fail"]);
    assert!(e.contains("policy"), "{e}");
    // Reliable subscribers need a block or fail topic.
    let e = r.fails(&["sub", "--domain", "d", "t", "--reliable", "--count", "1"]);
    assert!(e.contains("overwrite"), "{e}");
}

#[test]
fn sub_from_oldest_and_latest() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t", "--history", "8"]);
    let input: String = (1..=20).map(|i| format!("m{i}\n")).collect();
    r.ok_stdin(&["pub", "--domain", "d", "t"], &input);
    let out =
        r.ok(&["sub", "--domain", "d", "t", "--from", "oldest", "--count", "8", "--json", "--timeout-ms", "5000"]);
    let seqs: Vec<u64> = json_lines(&out).iter().map(|v| v["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (13..=20).collect::<Vec<_>>());
    let out = r.ok(&["sub", "--domain", "d", "t", "--from", "latest", "--count", "1", "--timeout-ms", "5000"]);
    assert_eq!(out, "m20\n");
    let out = r.run(&["sub", "--domain", "d", "t", "--from", "newest"]);
    assert_eq!(out.status.code(), Some(2));
    one_error_line(&out);
}
