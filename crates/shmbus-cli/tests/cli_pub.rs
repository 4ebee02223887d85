//! `pub --count` and `--rate`, `pub --timeout-ms` on a full queue, and how many messages a
//! `pub` that fails part-way says it sent. Real `shmbus` processes on real channels; no
//! assertion on a time.

mod common;

use common::{json_lines, one_error_line, Root};

/// `sub --json` lines' `seq` values.
fn seqs(stdout: &str) -> Vec<u64> {
    json_lines(stdout).iter().map(|v| v["seq"].as_u64().expect("seq")).collect()
}

#[test]
fn data_with_count_and_rate_reaches_a_subscriber_that_many_times_in_order() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t", "--history", "64"]);
    // `--from 1`: the subscriber misses none, whenever it attaches.
    let sub =
        r.spawn(&["sub", "--domain", "d", "t", "--from", "1", "--count", "20", "--json", "--timeout-ms", "20000"]);
    r.ok(&["pub", "--domain", "d", "t", "--data", "x", "--count", "20", "--rate", "200"]);
    let out = sub.finish_ok();
    assert_eq!(seqs(&out), (1..=20).collect::<Vec<_>>());
    assert!(json_lines(&out).iter().all(|v| v["data"] == "x"), "{out}");
}

#[test]
fn count_bounds_the_stdin_lines_read() {
    let r = Root::new();
    let input: String = (1..=30).map(|i| format!("m{i}\n")).collect();
    r.ok_stdin(&["pub", "--domain", "d", "t", "--count", "5"], &input);
    let out = r.ok(&["sub", "--domain", "d", "t", "--from", "1", "--count", "5", "--timeout-ms", "20000"]);
    assert_eq!(out, "m1\nm2\nm3\nm4\nm5\n");
    // Nothing beyond the fifth line was published: a sixth message never comes.
    let e = r.fails(&["sub", "--domain", "d", "t", "--from", "6", "--count", "1", "--timeout-ms", "200"]);
    assert!(e.contains("timed out"), "{e}");
}

#[test]
fn rate_alone_with_data_repeats_until_killed() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t", "--history", "64"]);
    let sub = r.spawn(&["sub", "--domain", "d", "t", "--from", "1", "--count", "3", "--json", "--timeout-ms", "20000"]);
    let mut publisher = r.spawn(&["pub", "--domain", "d", "t", "--data", "again", "--rate", "50"]);
    let out = sub.finish_ok();
    assert_eq!(seqs(&out), vec![1, 2, 3]);
    assert!(!publisher.exited(), "pub --rate without --count stopped by itself");
    publisher.kill();
}

#[test]
fn rate_and_count_must_be_positive() {
    let r = Root::new();
    for bad in [["--rate", "0"], ["--rate", "-3"], ["--rate", "nan"], ["--count", "0"]] {
        let mut args = vec!["pub", "--domain", "d", "t", "--data", "x"];
        args.extend(bad);
        let out = r.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        one_error_line(&out);
    }
}

#[test]
fn pub_to_a_full_queue_gives_up_after_timeout_and_says_how_many_it_sent() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "queue", "q", "--capacity", "4"]);
    let out = r.run(&["pub", "--domain", "d", "q", "--data", "x", "--count", "10", "--timeout-ms", "200"]);
    assert_eq!(out.status.code(), Some(1));
    let e = one_error_line(&out);
    assert!(e.contains("stayed full for 200 ms"), "{e}");
    assert!(e.contains("(4 message(s) sent before)"), "{e}");
    // The four are really there, and no more.
    let got = r.ok(&["sub", "--domain", "d", "q", "--count", "4", "--timeout-ms", "20000"]);
    assert_eq!(got, "x\nx\nx\nx\n");
    r.fails(&["sub", "--domain", "d", "q", "--count", "1", "--timeout-ms", "100"]);
}

#[test]
fn pub_to_a_queue_with_room_and_a_timeout_succeeds() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "queue", "q", "--capacity", "8"]);
    r.ok(&["pub", "--domain", "d", "q", "--data", "y", "--count", "8", "--timeout-ms", "200"]);
    assert_eq!(r.ok(&["sub", "--domain", "d", "q", "--count", "8", "--timeout-ms", "20000"]), "y\n".repeat(8));
}

#[test]
fn a_stream_pub_that_fails_part_way_says_how_many_it_sent() {
    let r = Root::new();
    // A one-page ring and no reader: a few 1000-byte records fill it.
    r.ok(&["create", "--domain", "d", "--kind", "stream", "s", "--capacity", "4096"]);
    let big = "a".repeat(1000);
    let input: String = (0..50).map(|_| format!("{big}\n")).collect();
    let out = r.run_stdin(&["pub", "--domain", "d", "s", "--timeout-ms", "100"], input.as_bytes());
    assert_eq!(out.status.code(), Some(1));
    let e = one_error_line(&out);
    let sent: u64 = e
        .rsplit_once(" (")
        .and_then(|(_, tail)| tail.strip_suffix(" message(s) sent before)"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of messages sent in {e:?}"));
    assert!((1..50).contains(&sent), "{e}");
    // Exactly that many records are in the stream.
    let got = r.ok(&["sub", "--domain", "d", "s", "--count", &sent.to_string(), "--timeout-ms", "20000"]);
    assert_eq!(got.lines().count() as u64, sent);
    r.fails(&["sub", "--domain", "d", "s", "--count", "1", "--timeout-ms", "100"]);
}

#[test]
fn a_too_large_message_after_good_ones_says_how_many_were_sent() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t", "--slot-size", "64"]);
    let input = format!("one\ntwo\n{}\nnot sent\n", "z".repeat(100));
    let out = r.run_stdin(&["pub", "--domain", "d", "t"], input.as_bytes());
    assert_eq!(out.status.code(), Some(1));
    let e = one_error_line(&out);
    assert!(e.contains("stdin line 3") && e.contains("(2 message(s) sent before)"), "{e}");
}

#[test]
fn timeout_on_a_topic_is_accepted_since_a_topic_never_waits() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "t", "--data", "x", "--timeout-ms", "10"]);
    let v = r.json(&["info", "--domain", "d", "t", "--json"]);
    assert_eq!(v["last_seq"], 1, "{v}");
}
