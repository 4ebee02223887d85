//! `shmbus journal`, `record`/`replay` and queues in `pub`/`sub`/`ls`/`info`, run as real
//! processes against a scratch root and scratch journal directories.
//!
//! Every test gets its own root (on tmpfs when there is one) through `SHMBUS_ROOT`, holding
//! its journal directories too, removed afterwards. Waits poll for a condition with a
//! generous limit; the only timing asserted is a lower bound (replay at the original pace
//! cannot be faster than the recorded spacing).

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{json_lines, one_error_line, Root};
use serde_json::Value;

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap_or_else(|| panic!("not an object: {v}")).keys().cloned().collect();
    k.sort();
    k
}

/// `(index, data)` of JSON entry lines, checking each has exactly the four keys and a
/// matching length.
fn entries(text: &str) -> Vec<(u64, String)> {
    json_lines(text)
        .iter()
        .map(|e| {
            assert_eq!(keys(e), ["data", "index", "len", "ts_real_ns"], "{e}");
            let data = e["data"].as_str().unwrap().to_owned();
            assert_eq!(e["len"], data.len() as u64);
            assert!(e["ts_real_ns"].as_u64().unwrap() > 0);
            (e["index"].as_u64().unwrap(), data)
        })
        .collect()
}

fn pairs(v: &[(u64, &str)]) -> Vec<(u64, String)> {
    v.iter().map(|(i, s)| (*i, s.to_string())).collect()
}

#[test]
fn append_data_and_stdin_then_dump_as_json() {
    let r = Root::new();
    let j = r.jdir("a");
    assert_eq!(r.ok(&["journal", "append", "--dir", &j, "--data", "first"]), "");
    // The last line has no newline: it is an entry too; an empty line is an empty entry.
    let appended = json_lines(&r.ok_stdin(&["journal", "append", "--dir", &j, "--json"], "two\n\nfour"));
    let idx: Vec<u64> = appended.iter().map(|v| v["index"].as_u64().unwrap()).collect();
    assert_eq!(idx, [1, 2, 3]);

    let all = r.ok(&["journal", "dump", "--dir", &j, "--json"]);
    assert_eq!(entries(&all), pairs(&[(0, "first"), (1, "two"), (2, ""), (3, "four")]));
    let ts: Vec<u64> = json_lines(&all).iter().map(|e| e["ts_real_ns"].as_u64().unwrap()).collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{ts:?}");

    assert_eq!(r.ok(&["journal", "dump", "--dir", &j]), "first\ntwo\n\nfour\n");
    assert_eq!(
        entries(&r.ok(&["journal", "dump", "--dir", &j, "--from", "2", "--json"])),
        pairs(&[(2, ""), (3, "four")])
    );
    let from_ts = ts[3].to_string();
    let tail = entries(&r.ok(&["journal", "dump", "--dir", &j, "--from-ts", &from_ts, "--json"]));
    assert_eq!(tail.last(), Some(&(3, "four".to_string())));
    assert!(tail.iter().all(|(i, _)| *i >= 1), "{tail:?}");
    // Past the end: nothing, and success.
    assert_eq!(r.ok(&["journal", "dump", "--dir", &j, "--from", "99"]), "");
}

#[test]
fn tail_follows_appends_from_another_process() {
    let r = Root::new();
    let j = r.jdir("t");
    r.ok(&["journal", "append", "--dir", &j, "--data", "seed"]);

    // A named reader makes the waiting tail visible: once it holds the reader at position 1
    // it has printed the seed and sleeps for the next entry.
    let tail = r.spawn(&[
        "journal",
        "tail",
        "--dir",
        &j,
        "--reader",
        "live",
        "--count",
        "4",
        "--json",
        "--timeout-ms",
        "20000",
    ]);
    let pid = tail.id();
    r.wait_json(&["journal", "readers", "--dir", &j, "--json"], |v| {
        v.as_array().unwrap().iter().any(|x| x["name"] == "live" && x["holder_pid"] == pid && x["position"] == 1)
    });
    let mut appender = r.cmd(&["journal", "append", "--dir", &j]).stdin(Stdio::piped()).spawn().unwrap();
    appender.stdin.take().unwrap().write_all(b"x1\nx2\nx3\n").unwrap();
    assert!(appender.wait().unwrap().success());
    assert_eq!(entries(&tail.finish_ok()), pairs(&[(0, "seed"), (1, "x1"), (2, "x2"), (3, "x3")]));

    // A plain tail starts at the end: it never prints what was there before it started.
    let mut plain = r.spawn(&["journal", "tail", "--dir", &j, "--count", "1", "--json", "--timeout-ms", "20000"]);
    let t0 = Instant::now();
    let mut k = 0;
    while !plain.exited() {
        assert!(t0.elapsed() < Duration::from_secs(20), "plain tail never saw an entry");
        r.ok(&["journal", "append", "--dir", &j, "--data", &format!("ping{k}")]);
        k += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    let got = entries(&plain.finish_ok());
    assert_eq!(got.len(), 1);
    assert!(got[0].0 >= 4 && got[0].1.starts_with("ping"), "{got:?}");
    assert_eq!(got[0].1, format!("ping{}", got[0].0 - 4));
}

#[test]
fn named_reader_resumes_where_it_stopped() {
    let r = Root::new();
    let j = r.jdir("n");
    r.ok_stdin(&["journal", "append", "--dir", &j], "e0\ne1\ne2\ne3\ne4\n");
    let tail = |n: &str| {
        entries(&r.ok(&[
            "journal",
            "tail",
            "--dir",
            &j,
            "--reader",
            "r",
            "--count",
            n,
            "--json",
            "--timeout-ms",
            "10000",
        ]))
    };

    assert_eq!(tail("2"), pairs(&[(0, "e0"), (1, "e1")]));
    let readers = r.json(&["journal", "readers", "--dir", &j, "--json"]);
    assert_eq!(readers, serde_json::json!([{"name": "r", "position": 2, "lag": 3, "pending": 3, "holder_pid": null}]));
    // No entry lost, none repeated.
    assert_eq!(tail("3"), pairs(&[(2, "e2"), (3, "e3"), (4, "e4")]));
    r.ok(&["journal", "append", "--dir", &j, "--data", "e5"]);
    assert_eq!(tail("1"), pairs(&[(5, "e5")]));
    // Another name has its own position, from the oldest entry.
    let other = entries(&r.ok(&["journal", "tail", "--dir", &j, "--reader", "other", "--count", "1", "--json"]));
    assert_eq!(other, pairs(&[(0, "e0")]));
    // Caught up: waiting for more runs out, and the position is kept.
    let err = r.fails(&["journal", "tail", "--dir", &j, "--reader", "r", "--count", "1", "--timeout-ms", "100"]);
    assert!(err.contains("timed out"), "{err}");
    let text = r.ok(&["journal", "readers", "--dir", &j]);
    assert!(text.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["r", "6", "0", "-"]), "{text}");
}

#[test]
fn info_readers_and_gc_json_shapes() {
    let r = Root::new();
    let j = r.jdir("g");
    // One cycle per second: three appends a second apart make three cycles.
    r.ok(&["journal", "append", "--dir", &j, "--roll", "1s", "--data", "c0"]);
    for d in ["c1", "c2"] {
        std::thread::sleep(Duration::from_millis(1100));
        r.ok(&["journal", "append", "--dir", &j, "--data", d]);
    }
    r.ok(&["journal", "tail", "--dir", &j, "--reader", "slow", "--count", "1"]);

    let info = r.json(&["journal", "info", "--dir", &j, "--json", "--rate-window", "0"]);
    assert_eq!(
        keys(&info),
        [
            "append_rate",
            "appenders",
            "archive_dir",
            "archive_file_bytes",
            "bytes",
            "cut_cycles",
            "cycles",
            "dir",
            "entries",
            "file_bytes",
            "first_index",
            "format_version",
            "hot_file_bytes",
            "lost_entries",
            "next_index",
            "readers",
            "recovery_log_error",
            "retention",
            "storage",
            "unreadable_cycles"
        ]
    );
    assert_eq!(info["entries"], 3);
    // The test root is on some real filesystem: the mount table names it.
    assert!(info["storage"]["fs_type"].as_str().is_some_and(|t| !t.is_empty()), "{info}");
    let on_tmpfs = info["storage"]["fs_type"] == "tmpfs";
    assert_eq!(info["storage"]["tmpfs_huge"].is_string(), on_tmpfs, "{info}");
    assert_eq!(info["first_index"], 0);
    assert_eq!(info["next_index"], 3);
    assert_eq!(info["appenders"], 0);
    assert!(info["append_rate"].is_null(), "a zero window measures no rate: {info}");
    assert_eq!(info["hot_file_bytes"], info["file_bytes"]);
    assert_eq!(info["archive_file_bytes"], 0);
    let cycles = info["cycles"].as_array().unwrap();
    assert!(cycles.len() >= 3, "{info}");
    assert_eq!(
        keys(&cycles[0]),
        ["archived", "bucket_start_ns", "bytes", "cycle", "entries", "file_bytes", "first_index", "sealed"]
    );
    assert_eq!(cycles[0]["sealed"], true);
    assert_eq!(cycles.last().unwrap()["sealed"], false);
    assert_eq!(
        info["readers"],
        serde_json::json!([{"name": "slow", "position": 1, "lag": 2, "pending": 2, "holder_pid": null}])
    );
    let text = r.ok(&["journal", "info", "--dir", &j, "--rate-window", "0"]);
    assert!(text.contains("entries       3 (indices 0..3)"), "{text}");
    assert!(text.contains("storage       "), "{text}");
    assert!(text.contains(" hot, 0 archive)"), "{text}");
    assert!(!text.contains("append rate"), "{text}");
    assert!(
        text.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["slow", "at", "1", "lag", "2"]),
        "{text}"
    );

    let gc = r.json(&["journal", "gc", "--dir", &j, "--keep-cycles", "1", "--json"]);
    assert_eq!(keys(&gc), ["removed_bytes", "removed_cycles"]);
    let removed = gc["removed_cycles"].as_array().unwrap();
    assert_eq!(removed.len(), cycles.len() - 1, "{gc}");
    assert!(gc["removed_bytes"].as_u64().unwrap() > 0);
    let after = r.json(&["journal", "info", "--dir", &j, "--json", "--rate-window", "0"]);
    assert_eq!(after["cycles"].as_array().unwrap().len(), 1);
    assert_eq!(after["first_index"], 2);
    assert_eq!(entries(&r.ok(&["journal", "dump", "--dir", &j, "--json"])), pairs(&[(2, "c2")]));
    // The reader behind the retained range is told about the gap and continues.
    let out = r.run(&["journal", "tail", "--dir", &j, "--reader", "slow", "--count", "1"]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "c2\n");
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("gap: entries 1..2"));
    // Nothing left to remove.
    assert_eq!(r.ok(&["journal", "gc", "--dir", &j]), "removed 0 cycle(s), 0 bytes\n");
}

/// The append rate: entries appended during the window, per second; bytes per tier after
/// the library tiers old cycles to an archive.
#[test]
fn info_reports_append_rate_and_bytes_per_tier() {
    let r = Root::new();
    let j = r.jdir("rate");
    r.ok(&["journal", "append", "--dir", &j, "--data", "first"]);
    let mut info = r
        .cmd(&["journal", "info", "--dir", &j, "--json", "--rate-window", "2"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Append one entry every 50 ms for as long as `info` runs, so its window holds appends
    // however late a loaded machine starts it (no assumption about when its first snapshot is).
    let mut appended = 0;
    while info.try_wait().unwrap().is_none() {
        r.ok(&["journal", "append", "--dir", &j, "--data", &format!("entry-{appended:04}")]);
        appended += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = info.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rate = &v["append_rate"];
    assert_eq!(keys(rate), ["bytes_per_s", "entries_per_s", "window_s"], "{v}");
    assert_eq!(rate["window_s"], 2.0);
    // At most one entry per 50 ms was appended, and some were appended inside the window.
    let per_s = rate["entries_per_s"].as_f64().unwrap();
    assert!(per_s <= 20.0 && per_s > 0.0, "{appended} appended: {v}");
    let bytes_per_s = rate["bytes_per_s"].as_f64().unwrap();
    assert!(bytes_per_s >= per_s * "entry-0000".len() as f64, "{v}");
    let text = r.ok(&["journal", "info", "--dir", &j, "--rate-window", "0.2"]);
    assert!(text.contains("append rate   0.0 entries/s, 0 bytes/s (over 0.2 s)"), "{text}");

    // Tiered: the archive's bytes are the archived cycles' bytes.
    let tiered = r.jdir("tiered");
    let dir = Path::new(&tiered);
    let cfg = shmbus::journal::JournalConfig::default()
        .roll(shmbus::journal::RollCycle::Never)
        .cycle_bytes(64 << 10)
        .chunk_bytes(16 << 10)
        .max_entry_len(4096);
    let journal = shmbus::journal::Journal::create_or_open(dir, &cfg).unwrap();
    let mut a = journal.appender().unwrap();
    for i in 0..1000u32 {
        a.send(&[i as u8; 200]).unwrap();
    }
    let moved = journal.tier("cold", 1).unwrap();
    assert!(!moved.moved_cycles.is_empty());
    let d = dir.to_str().unwrap();
    let v = r.json(&["journal", "info", "--dir", d, "--json", "--rate-window", "0"]);
    assert_eq!(v["archive_file_bytes"], moved.moved_bytes, "{v}");
    let hot = v["hot_file_bytes"].as_u64().unwrap();
    assert!(hot > 0);
    assert_eq!(v["file_bytes"].as_u64().unwrap(), hot + moved.moved_bytes);
    let archived: Vec<u64> = v["cycles"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["archived"] == true)
        .map(|c| c["cycle"].as_u64().unwrap())
        .collect();
    assert_eq!(archived, moved.moved_cycles);
    let text = r.ok(&["journal", "info", "--dir", d, "--rate-window", "0"]);
    assert!(text.contains(&format!("({hot} hot, {} archive)", moved.moved_bytes)), "{text}");
    assert!(text.contains(" archived\n"), "{text}");

    for bad in ["--rate-window=-1", "--rate-window=soon", "--rate-window=NaN"] {
        let err = r.fails(&["journal", "info", "--dir", d, bad]);
        assert!(err.contains("seconds"), "{bad}: {err}");
    }
}

#[test]
fn record_two_topics_then_replay_into_another_domain() {
    let r = Root::new();
    let j = r.jdir("rec");
    for t in ["a", "b"] {
        r.ok(&["pub", "--domain", "src", t, "--slot-size", "256", "--history", "32", "--data", "before"]);
    }
    let rec = r.spawn(&["record", "--domain", "src", "a", "b", "--dir", &j, "--count", "6", "--json"]);
    for t in ["a", "b"] {
        r.wait_json(&["info", "--domain", "src", t, "--json"], |v| v["subscribers"] == 1);
    }
    let mut pa = r.cmd(&["pub", "--domain", "src", "a"]).stdin(Stdio::piped()).spawn().unwrap();
    pa.stdin.take().unwrap().write_all(b"a1\na2\na3\n").unwrap();
    assert!(pa.wait().unwrap().success());
    std::thread::sleep(Duration::from_millis(300));
    let mut pb = r.cmd(&["pub", "--domain", "src", "b"]).stdin(Stdio::piped()).spawn().unwrap();
    pb.stdin.take().unwrap().write_all(b"b1\nb2\nb3\n").unwrap();
    assert!(pb.wait().unwrap().success());
    let summary: Value = serde_json::from_str(&rec.finish_ok()).unwrap();
    assert_eq!(summary, serde_json::json!({"messages": 6, "gaps": 0, "topics": {"a": 3, "b": 3}}));
    // Six messages after one topic entry (slot size, history, schema) per topic.
    assert_eq!(r.json(&["journal", "info", "--dir", &j, "--json"])["entries"], 8);

    // Replay at full speed into a fresh domain: topics are created with the recorded sizes.
    let out: Value =
        serde_json::from_str(&r.ok(&["replay", "--dir", &j, "--domain", "dst", "--speed", "max", "--json"])).unwrap();
    assert_eq!(out, serde_json::json!({"messages": 6, "topics": {"a": 3, "b": 3}}));
    let ls = r.json(&["ls", "--domain", "dst", "--json"]);
    for t in ["a", "b"] {
        let e = ls.as_array().unwrap().iter().find(|e| e["name"] == t).unwrap();
        assert_eq!(
            (e["kind"].as_str(), e["slot_size"].as_u64(), e["history"].as_u64()),
            (Some("topic"), Some(256), Some(32))
        );
    }
    for t in ["a", "b"] {
        let got = json_lines(&r.ok(&[
            "sub",
            "--domain",
            "dst",
            t,
            "--from",
            "1",
            "--count",
            "3",
            "--json",
            "--timeout-ms",
            "10000",
        ]));
        let data: Vec<&str> = got.iter().map(|m| m["data"].as_str().unwrap()).collect();
        assert_eq!(data, [format!("{t}1"), format!("{t}2"), format!("{t}3")]);
    }

    // A live subscriber sees a second replay, in order, at the original pace (the 300 ms
    // between the two publishers is kept: a lower bound, so not flaky).
    let live = r.spawn(&["sub", "--domain", "dst", "b", "--count", "3", "--timeout-ms", "20000"]);
    r.wait_json(&["info", "--domain", "dst", "b", "--json"], |v| v["subscribers"] == 1);
    let t0 = Instant::now();
    r.ok(&["replay", "--dir", &j, "--domain", "dst", "--speed", "1"]);
    assert!(t0.elapsed() >= Duration::from_millis(250), "replay took {:?}", t0.elapsed());
    assert_eq!(live.finish_ok(), "b1\nb2\nb3\n");
    // Only some topics.
    let only: Value = serde_json::from_str(
        &r.ok(&["replay", "--dir", &j, "--domain", "x", "--speed", "max", "--topic", "b", "--json"]),
    )
    .unwrap();
    assert_eq!(only["topics"], serde_json::json!({"b": 3}));
    // A topic the recording never holds: an error naming the ones it does, before
    // anything is published (not even the topics that are there).
    let err = r.fails(&["replay", "--dir", &j, "--domain", "y", "--speed", "max", "--topic", "b", "--topic", "c"]);
    assert!(err.contains("--topic c not in the recording") && err.ends_with("it holds: a, b"), "{err}");
    assert!(r.fails(&["ls", "--domain", "y", "--json"]).contains("no domain y"), "nothing was created in y");
}

#[test]
fn queue_pub_sub_round_trip_and_depth_in_ls_and_info() {
    let r = Root::new();
    let q = ["--domain", "d", "q"];
    let with = |extra: &[&'static str]| -> Vec<&str> {
        let mut v = vec!["pub"];
        v.extend_from_slice(&q);
        v.extend_from_slice(extra);
        v
    };
    assert_eq!(r.ok(&with(&["--kind", "queue", "--capacity", "8", "--max-element-size", "64", "--data", "one"])), "");
    // An existing queue is pushed to without --kind.
    r.ok_stdin(&with(&[]), "two\nthree");

    let ls = r.json(&["ls", "--domain", "d", "--json"]);
    let e = &ls[0];
    assert_eq!(e["kind"], "queue");
    assert_eq!(e["depth"], 3);
    assert_eq!(e["slot_size"], 64);
    assert_eq!(e["history"], 8);
    let table = r.ok(&["ls", "--domain", "d"]);
    assert!(table.lines().next().unwrap().contains("DEPTH"), "{table}");
    let row: Vec<&str> = table.lines().find(|l| l.contains(" q ")).unwrap().split_whitespace().collect();
    assert_eq!(&row[..9], ["d", "q", "queue", "64", "8", "3", "0", "0", "3"]);
    let info = r.json(&["info", "--domain", "d", "q", "--json"]);
    assert_eq!(
        info["params"],
        serde_json::json!({"capacity": 8, "max_element_size": 64, "stride": info["params"]["stride"]})
    );
    assert_eq!(info["status"]["depth"], 3);
    assert_eq!(info["status"]["capacity"], 8);
    assert_eq!(info["status"]["max_element_size"], 64);

    let got = json_lines(&r.ok(&["sub", "--domain", "d", "q", "--count", "2", "--json", "--timeout-ms", "10000"]));
    for (i, (m, want)) in got.iter().zip(["one", "two"]).enumerate() {
        assert_eq!(keys(m), ["data", "len", "seq", "ts_mono_ns"]);
        assert_eq!(m["seq"], i as u64 + 1, "seq is the ordinal in this run");
        assert_eq!(m["data"], want);
        assert_eq!(m["len"], want.len());
    }
    assert_eq!(r.json(&["ls", "--domain", "d", "--json"])[0]["depth"], 1);
    // Each run counts from 1 again; each message went to one consumer only.
    let got = json_lines(&r.ok(&["sub", "--domain", "d", "q", "--count", "1", "--json", "--timeout-ms", "10000"]));
    assert_eq!((got[0]["seq"].as_u64(), got[0]["data"].as_str()), (Some(1), Some("three")));
    assert_eq!(r.json(&["ls", "--domain", "d", "--json"])[0]["depth"], 0);

    // A waiting consumer shows in info, and gets what a later pub pushes.
    let sub = r.spawn(&["sub", "--domain", "d", "q", "--count", "1", "--timeout-ms", "20000"]);
    let pid = sub.id();
    let info = r.wait_json(&["info", "--domain", "d", "q", "--json"], |v| v["subscribers"] == 1);
    assert_eq!(info["status"]["consumers"], 1);
    assert!(
        info["participants"].as_array().unwrap().iter().any(|p| p["pid"] == pid && p["role"] == "consumer"),
        "{info}"
    );
    r.ok(&with(&["--data", "late"]));
    assert_eq!(sub.finish_ok(), "late\n");

    let err = r.fails(&["sub", "--domain", "d", "q", "--count", "1", "--timeout-ms", "100"]);
    assert!(err.contains("timed out") && err.contains("d/q"), "{err}");
    let err = r.fails(&with(&["--kind", "queue", "--capacity", "16", "--data", "x"]));
    assert!(err.contains('8') && err.contains("16"), "{err}");
    let err = r.fails(&with(&["--max-element-size", "64", "--slot-size", "64", "--data", "x"]));
    assert!(err.contains("for topics"), "{err}");
    let long = "x".repeat(65);
    let err = r.fails(&["pub", "--domain", "d", "q", "--data", long.as_str()]);
    // (An over-long input is refused without being read whole, so its length may not be known.)
    assert!(err.contains("64"), "{err}");
}

#[test]
fn bad_input_fails_with_one_line() {
    let r = Root::new();
    // A directory that is not a journal.
    let plain = r.0.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    std::fs::write(plain.join("notes.txt"), "hello").unwrap();
    let plain = plain.to_str().unwrap();
    for verb in ["dump", "tail", "info", "readers", "gc"] {
        let err = r.fails(&["journal", verb, "--dir", plain]);
        assert!(err.contains("not a journal"), "{verb}: {err}");
    }
    let err = r.fails(&["journal", "append", "--dir", plain, "--data", "x"]);
    assert!(err.contains("not a journal directory"), "{err}");
    assert!(!Path::new(plain).join("journal.meta").exists(), "append must not fill a foreign directory");
    let missing = r.jdir("missing");
    let err = r.fails(&["journal", "dump", "--dir", &missing]);
    assert!(err.contains("no such directory"), "{err}");
    assert!(!Path::new(&missing).exists(), "reading must not create the journal");

    let j = r.jdir("ok");
    r.ok(&["journal", "append", "--dir", &j, "--data", "not a record"]);
    for bad in ["a/b", "../up", ".hidden", ""] {
        let err = r.fails(&["journal", "tail", "--dir", &j, "--reader", bad, "--count", "1"]);
        assert!(err.contains("reader") && err.contains("name"), "{bad}: {err}");
    }
    assert!(r.json(&["journal", "readers", "--dir", &j, "--json"]).as_array().unwrap().is_empty());
    let err = r.fails(&["replay", "--dir", &j, "--domain", "d"]);
    assert!(err.contains("not a record entry"), "{err}");
    let err = r.fails(&["record", "--domain", "d", "nosuch", "--dir", &r.jdir("rec"), "--count", "1"]);
    assert!(err.contains("no channel d/nosuch"), "{err}");
    assert!(!Path::new(&r.jdir("rec")).exists(), "a failed record leaves no journal");

    // Usage errors exit with 2.
    for args in [
        &["replay", "--dir", j.as_str(), "--domain", "d", "--speed", "fast"][..],
        &["journal", "append", "--dir", j.as_str(), "--roll", "weekly", "--data", "x"],
        &["journal", "tail", "--dir", j.as_str(), "--reader", "r", "--from", "0"],
        &["pub", "--domain", "d", "t", "--kind", "pipe", "--data", "x"],
    ] {
        let out = r.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        one_error_line(&out);
    }

    // Queue-only and topic-only options on the other kind.
    r.ok(&["pub", "--domain", "d", "t", "--data", "x"]);
    let err = r.fails(&["pub", "--domain", "d", "t", "--capacity", "4", "--data", "x"]);
    assert!(err.contains("--kind queue"), "{err}");
    r.ok(&["pub", "--domain", "d", "q", "--kind", "queue", "--data", "x"]);
    let err = r.fails(&["sub", "--domain", "d", "q", "--latest", "--count", "1"]);
    assert!(err.contains("is a queue"), "{err}");
    let err = r.fails(&["pub", "--domain", "d", "t", "--kind", "queue", "--data", "x"]);
    assert!(err.contains("not a queue"), "{err}");
}

/// 200 entries of ~100 bytes: "entry-NNN" padded.
fn fill(r: &Root, j: &str) -> Vec<String> {
    let lines: Vec<String> = (0..200).map(|i| format!("entry-{i:03}-{}", "x".repeat(90))).collect();
    r.ok_stdin(&["journal", "append", "--dir", j], &lines.join("\n"));
    lines
}

#[test]
fn dump_over_a_damaged_journal_reports_the_damage_and_prints_every_healthy_entry() {
    use std::os::unix::fs::FileExt;
    let r = Root::new();
    let j = r.jdir("damaged");
    let lines = fill(&r, &j);
    // Zero one page in the middle of the data (entries of 136 bytes: about 30 of them).
    let data = Path::new(&j).join("000000000000.sbjd");
    let f = std::fs::OpenOptions::new().write(true).open(&data).unwrap();
    f.write_all_at(&[0u8; 4096], 4096 + 8192).unwrap();
    drop(f);
    let out = r.run(&["journal", "dump", "--dir", &j]);
    assert!(!out.status.success(), "damage makes the exit status non-zero");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let printed: Vec<&str> = stdout.lines().collect();
    let err = String::from_utf8_lossy(&out.stderr);
    let err_lines: Vec<&str> = err.lines().collect();
    // One line per damaged range (an entry cut by the zeroed page is a checksum mismatch,
    // the entries inside it one range), then the final error line.
    let (last, ranges) = err_lines.split_last().unwrap();
    assert!((1..=3).contains(&ranges.len()), "{err}");
    assert!(ranges.iter().all(|l| l.starts_with("damaged: ") || l.starts_with("skipped: ")), "{err}");
    assert!(ranges.iter().any(|l| l.starts_with("damaged: journal entries ") && l.contains("of cycle 0")), "{err}");
    assert!(last.starts_with("shmbus: ") && last.contains(&format!("{} damaged range", ranges.len())), "{err}");
    // Healthy entries before and after, in order; only the ones in the page are missing.
    assert_eq!(printed.first(), Some(&lines[0].as_str()));
    assert_eq!(printed.last(), Some(&lines[199].as_str()));
    assert!(printed.len() >= 200 - 32 && printed.len() < 200, "{} printed", printed.len());
    let mut at = 0;
    for p in &printed {
        at += lines[at..].iter().position(|l| l == p).expect("in order, each once") + 1;
    }
    // Appending goes on after the damage, and the new entry is printed too.
    r.ok(&["journal", "append", "--dir", &j, "--data", "after"]);
    let out = r.run(&["journal", "dump", "--dir", &j]);
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().last(), Some("after"));
}

#[test]
fn entries_recovery_cuts_off_are_reported_by_every_reader_and_info() {
    let r = Root::new();
    let j = r.jdir("cut");
    let lines = fill(&r, &j);
    // Cut the data file in the middle of entry 150's payload, as a crash of the storage or a
    // careless copy leaves it.
    let data = Path::new(&j).join("000000000000.sbjd");
    let bytes = std::fs::read(&data).unwrap();
    let at = bytes.windows(10).position(|w| w == b"entry-150-").expect("entry 150 is in the data file");
    std::fs::OpenOptions::new().write(true).open(&data).unwrap().set_len(at as u64 + 20).unwrap();
    let lost_line = "lost: journal entries 150..200 of cycle 0 were lost (50 entries";

    // `info` first: read-only, it repairs nothing, but says the cycle is cut short.
    let out = r.run(&["journal", "info", "--dir", &j]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("lost: journal cycle 0 is cut short: its data file holds"), "{err}");
    assert!(String::from_utf8(out.stdout).unwrap().contains("CUT SHORT: "));
    let info = r.json(&["journal", "info", "--dir", &j, "--json"]);
    assert_eq!(info["cut_cycles"][0]["cycle"], 0, "{info}");
    assert_eq!(info["entries"], 200, "not recovered yet");

    // `dump` (the first to open it: it recovers) prints the 150 sound entries, one `lost:`
    // line, and exits 1 with the count.
    let dumped = |what: &str| {
        let out = r.run(&["journal", "dump", "--dir", &j]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{what}: lost entries make the exit status 1: {err}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert_eq!(stdout.lines().collect::<Vec<_>>(), lines[..150].iter().map(String::as_str).collect::<Vec<_>>());
        let err_lines: Vec<&str> = err.lines().collect();
        assert_eq!(err_lines.len(), 2, "{what}: {err}");
        assert!(err_lines[0].starts_with(lost_line), "{what}: {err}");
        assert!(
            err_lines[1].starts_with("shmbus: ") && err_lines[1].contains("1 range(s) of entries were lost"),
            "{err}"
        );
    };
    dumped("the recovering open");
    // Recovery is done, but the loss is not forgotten: a later reader reports it too.
    dumped("a later open");

    // `info` (read-only) says it too: on stderr, in its text and in its JSON; exit 0.
    let out = r.run(&["journal", "info", "--dir", &j]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with(lost_line), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("LOST in recovery: indices 150..200 (50 entries"), "{text}");
    let info = r.json(&["journal", "info", "--dir", &j, "--json"]);
    assert_eq!(info["entries"], 150);
    let lost = &info["lost_entries"][0];
    assert_eq!((lost["cycle"].as_u64(), lost["from"].as_u64(), lost["to"].as_u64()), (Some(0), Some(150), Some(200)));
    assert_eq!(lost["count"], 50, "{info}");
    assert_eq!(info["cut_cycles"], serde_json::json!([]), "recovered: no longer cut");
    assert!(info["recovery_log_error"].is_null(), "{info}");

    // Appending goes on at index 150; readers still say what was lost before.
    let out = r.ok(&["journal", "append", "--dir", &j, "--data", "after", "--json"]);
    assert_eq!(json_lines(&out)[0]["index"], 150);
    let out = r.run(&["journal", "tail", "--dir", &j, "--from", "150", "--count", "1", "--timeout-ms", "5000"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "after\n");
    assert!(String::from_utf8_lossy(&out.stderr).starts_with(lost_line));

    // A writer whose open is the one that recovers (`append` here; `record` opens the same
    // way) says so once and goes on.
    let j2 = r.jdir("cut-then-append");
    fill(&r, &j2);
    let data = Path::new(&j2).join("000000000000.sbjd");
    std::fs::OpenOptions::new().write(true).open(&data).unwrap().set_len(at as u64 + 20).unwrap();
    let out = r.run(&["journal", "append", "--dir", &j2, "--data", "y", "--json"]);
    assert!(out.status.success());
    assert_eq!(json_lines(&String::from_utf8(out.stdout).unwrap())[0]["index"], 150);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with(&format!("lost: {j2}: journal entries 150..200 of cycle 0 were lost")), "{err}");
    let out = r.run(&["journal", "append", "--dir", &j2, "--data", "z"]);
    assert!(out.status.success() && out.stderr.is_empty(), "said once: {out:?}");
}

#[test]
fn a_lost_index_file_is_rebuilt_and_every_verb_works() {
    let r = Root::new();
    let j = r.jdir("noindex");
    let lines = fill(&r, &j);
    std::fs::remove_file(Path::new(&j).join("000000000000.sbji")).unwrap();
    r.ok(&["journal", "append", "--dir", &j, "--data", "more"]);
    let all = r.ok(&["journal", "dump", "--dir", &j]);
    assert_eq!(all.lines().count(), 201);
    assert_eq!(all.lines().next(), Some(lines[0].as_str()));
    assert_eq!(r.ok(&["journal", "dump", "--dir", &j, "--from", "200"]), "more\n");
    r.ok(&["journal", "info", "--dir", &j]);
}

#[test]
fn special_files_and_symlinks_in_a_journal_give_a_clear_error_not_a_hang() {
    let r = Root::new();
    let j = r.jdir("special");
    fill(&r, &j);
    // A symlink planted as readers.lock: never followed (the target stays untouched).
    let target = r.0.join("victim");
    std::fs::write(&target, b"keep").unwrap();
    let lock = Path::new(&j).join("readers.lock");
    let _ = std::fs::remove_file(&lock);
    std::os::unix::fs::symlink(&target, &lock).unwrap();
    let start = Instant::now();
    let e = r.fails(&["journal", "tail", "--dir", &j, "--reader", "r1", "--count", "1"]);
    assert!(e.contains("symbolic link"), "{e}");
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    std::fs::remove_file(&lock).unwrap();
    // A FIFO as readers.lock and as the index: an immediate error that says what it is.
    let mkfifo = |p: &Path| {
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    };
    mkfifo(&lock);
    let e = r.fails(&["journal", "tail", "--dir", &j, "--reader", "r1", "--count", "1"]);
    assert!(e.contains("FIFO"), "{e}");
    std::fs::remove_file(&lock).unwrap();
    let index = Path::new(&j).join("000000000000.sbji");
    std::fs::remove_file(&index).unwrap();
    mkfifo(&index);
    let e = r.fails(&["journal", "append", "--dir", &j, "--data", "x"]);
    assert!(e.contains("FIFO") && !e.contains("shmbus clean") && !e.contains("no such channel"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(20), "no hang");
    // Files the journal creates are private.
    std::fs::remove_file(&index).unwrap();
    r.ok(&["journal", "tail", "--dir", &j, "--reader", "r2", "--count", "1"]);
    use std::os::unix::fs::PermissionsExt;
    for name in ["journal.meta", "readers.lock", "000000000000.sbjd", "000000000000.sbji"] {
        let m = std::fs::symlink_metadata(Path::new(&j).join(name)).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o600, "{name}");
    }
}

/// A journal file owned by another uid (given away as root) is refused by every verb with
/// one line that names the owner and the fix; trusting that uid makes the journal usable.
#[test]
fn a_journal_file_of_another_user_is_refused_unless_trusted() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: giving a journal file to another uid needs root; run the tests as root to cover it");
        return;
    }
    let r = Root::new();
    let j = r.jdir("foreign");
    fill(&r, &j);
    let data = Path::new(&j).join("000000000000.sbjd");
    std::os::unix::fs::chown(&data, Some(4242), Some(4242)).unwrap();
    for args in [
        &["journal", "dump", "--dir", &j][..],
        &["journal", "append", "--dir", &j, "--data", "x"][..],
        &["journal", "tail", "--dir", &j, "--count", "1", "--timeout-ms", "1000"][..],
    ] {
        let e = r.fails(args);
        assert!(
            e.contains("uid 4242") && e.contains("does not trust") && e.contains("SHMBUS_TRUST_UIDS=4242"),
            "{args:?}: {e}"
        );
    }
    let out = r.cmd(&["journal", "dump", "--dir", &j]).env("SHMBUS_TRUST_UIDS", "4242").output().unwrap();
    assert!(out.status.success(), "trusted: {}", String::from_utf8_lossy(&out.stderr));
    assert!(!out.stdout.is_empty());
}
