//! MCAP from the shell: `record --out FILE.mcap`, `journal export`, `replay --from` and
//! `info --file`, with real `shmbus` processes on real channels and files.
//!
//! The files are read back by the official Python `mcap` reader (and CDR messages decoded by
//! mcap-ros2-support) in the scratch virtualenv of `scripts/interop-venv.sh`; those checks
//! skip with a reason when it is missing, unless `SHMBUS_REQUIRE_INTEROP=1`, when they fail.
//! No assertion on a time.

mod common;

#[path = "../../../tests/support/interop.rs"]
mod interop;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{json_lines, Root};
use serde_json::{json, Value};

/// A file of tests/data.
fn data(name: &str) -> String {
    format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `create` of a sensor_msgs/msg/Imu topic (CDR, ros2msg with its dependencies).
fn create_imu(r: &Root, domain: &str) {
    let imu = data("Imu.msg");
    r.ok(&[
        "create",
        "--domain",
        domain,
        "--kind",
        "topic",
        "imu",
        "--slot-size",
        "1024",
        "--history",
        "16",
        "--message-encoding",
        "cdr",
        "--schema-name",
        "sensor_msgs/msg/Imu",
        "--schema-encoding",
        "ros2msg",
        "--schema-file",
        &imu,
    ]);
}

/// `create` of a topic without a schema.
fn create_raw(r: &Root, domain: &str) {
    r.ok(&["create", "--domain", domain, "--kind", "topic", "raw", "--slot-size", "256", "--history", "16"]);
}

/// Publishes three IMU messages (frame ids f1..f3, encoded to CDR by `pub`) and three raw
/// ones (r1..r3).
fn publish_both(r: &Root, domain: &str) {
    let imu: String = (1..=3).map(|i| format!("{}\n", json!({"header": {"frame_id": format!("f{i}")}}))).collect();
    r.ok_stdin(&["pub", "--domain", domain, "imu"], &imu);
    r.ok_stdin(&["pub", "--domain", domain, "raw"], "r1\nr2\nr3\n");
}

/// Records `imu` and `raw` of `domain` with `target` (`--out x.mcap` or `--dir D`) while
/// both are published; returns the recorder's JSON summary.
fn record_both(r: &Root, domain: &str, target: &[&str]) -> Value {
    let mut args = vec!["record", "--domain", domain, "imu", "raw", "--count", "6", "--json"];
    args.extend_from_slice(target);
    let rec = r.spawn(&args);
    for t in ["imu", "raw"] {
        r.wait_json(&["info", "--domain", domain, t, "--json"], |v| v["subscribers"] == 1);
    }
    publish_both(r, domain);
    serde_json::from_str(&rec.finish_ok()).unwrap()
}

/// Reads an MCAP file with the official reader: summary (channels, schemas, statistics),
/// every message in file order, and the decoded frame ids of `imu` (CDR).
const READ_SCRIPT: &str = r#"
import json, sys, time
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

out = {"now": time.time_ns()}
with open(sys.argv[1], "rb") as f:
    reader = make_reader(f, decoder_factories=[DecoderFactory()])
    s = reader.get_summary()
    out["channels"] = {}
    for c in s.channels.values():
        sc = s.schemas.get(c.schema_id)
        out["channels"][c.topic] = {
            "message_encoding": c.message_encoding,
            "schema_id": c.schema_id,
            "schema": None if sc is None else [sc.name, sc.encoding, sc.data.decode()],
            "count": s.statistics.channel_message_counts.get(c.id, 0),
        }
    out["message_count"] = s.statistics.message_count
    out["messages"] = [
        {"topic": ch.topic, "seq": m.sequence, "log": m.log_time, "pub": m.publish_time, "data": m.data.hex()}
        for _, ch, m in reader.iter_messages(log_time_order=False)
    ]
    out["frames"] = [d.header.frame_id for _, _, _, d in reader.iter_decoded_messages(topics=["imu"])]
print(json.dumps(out))
"#;

/// The official reader's linear path (no summary needed): every message up to where the
/// file is cut, and what stopped it.
const STREAM_SCRIPT: &str = r#"
import json, sys
from mcap.reader import NonSeekingReader

msgs, err = [], None
with open(sys.argv[1], "rb") as f:
    try:
        for _, ch, m in NonSeekingReader(f).iter_messages(log_time_order=False):
            msgs.append([ch.topic, m.sequence, m.data.decode()])
    except Exception as e:
        err = type(e).__name__
print(json.dumps({"messages": msgs, "err": err}))
"#;

fn run_py(py: &Path, script: &str, file: &Path) -> Value {
    let out = Command::new(py).arg("-c").arg(script).arg(file).output().expect("start python");
    assert!(out.status.success(), "python failed: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("python printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// The checks on a file holding the three `imu` and three `raw` messages of
/// [`publish_both`] (sequence numbers 1..3 in each topic), as the official reader sees it.
fn check_with_python(file: &Path) {
    let Some(py) = interop::python() else { return };
    let v = run_py(&py, READ_SCRIPT, file);
    let imu_text = std::fs::read_to_string(data("Imu.msg")).unwrap();
    assert_eq!(v["channels"]["imu"]["message_encoding"], "cdr", "{v}");
    assert_eq!(v["channels"]["imu"]["schema"], json!(["sensor_msgs/msg/Imu", "ros2msg", imu_text]), "{v}");
    assert_eq!(v["channels"]["raw"]["schema_id"], 0, "{v}");
    assert_eq!(v["channels"]["raw"]["message_encoding"], "", "{v}");
    assert_eq!((&v["channels"]["imu"]["count"], &v["channels"]["raw"]["count"]), (&json!(3), &json!(3)), "{v}");
    assert_eq!(v["message_count"], 6);
    let msgs = v["messages"].as_array().unwrap();
    let of = |t: &str| msgs.iter().filter(|m| m["topic"] == t).cloned().collect::<Vec<_>>();
    for t in ["imu", "raw"] {
        let seqs: Vec<u64> = of(t).iter().map(|m| m["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, [1, 2, 3], "{t}: {v}");
    }
    let raw: Vec<String> = of("raw").iter().map(|m| m["data"].as_str().unwrap().to_owned()).collect();
    assert_eq!(raw, ["7231", "7232", "7233"], "raw payloads unchanged");
    // Unix-epoch times, receive after publish, both before the reader ran.
    let now = v["now"].as_u64().unwrap();
    for m in msgs {
        let (log, publish) = (m["log"].as_u64().unwrap(), m["pub"].as_u64().unwrap());
        assert!(publish <= log && log <= now, "{m}");
        assert!(now - publish < 3_600_000_000_000, "not an epoch time: {m}");
    }
    assert_eq!(v["frames"], json!(["f1", "f2", "f3"]), "CDR decoded by mcap-ros2-support");
}

#[test]
fn record_out_mcap_then_info_replay_and_the_official_reader() {
    let r = Root::new();
    create_imu(&r, "src");
    create_raw(&r, "src");
    let file = r.0.join("run.mcap");
    let summary = record_both(&r, "src", &["--out", file.to_str().unwrap()]);
    assert_eq!(summary, json!({"messages": 6, "gaps": 0, "topics": {"imu": 3, "raw": 3}}));
    check_with_python(&file);

    // info --file: from the summary, every topic with its schema and count.
    let f = file.to_str().unwrap();
    let info = r.json(&["info", "--file", f, "--json"]);
    assert_eq!(
        (&info["format"], &info["messages"], &info["complete"], &info["from_summary"]),
        (&json!("mcap"), &json!(6), &json!(true), &json!(true)),
        "{info}"
    );
    assert_eq!(info["size_bytes"], std::fs::metadata(&file).unwrap().len());
    let (start, end) = (info["start_ns"].as_u64().unwrap(), info["end_ns"].as_u64().unwrap());
    assert!(start <= end, "{info}");
    assert_eq!(
        info["topics"],
        json!([
            {"name": "imu", "messages": 3, "message_encoding": "cdr", "schema_name": "sensor_msgs/msg/Imu",
             "schema_encoding": "ros2msg"},
            {"name": "raw", "messages": 3, "message_encoding": "", "schema_name": "", "schema_encoding": ""},
        ])
    );
    let text = r.ok(&["info", "--file", f]);
    for want in ["format        mcap (counts from its summary)", "messages      6", "topics        2", "duration"] {
        assert!(text.contains(want), "{want:?} not in {text}");
    }
    assert!(
        text.lines().any(|l| l.contains("imu") && l.contains("3 msgs") && l.contains("sensor_msgs/msg/Imu")),
        "{text}"
    );
    assert!(text.lines().any(|l| l.contains("raw") && l.contains("3 msgs") && l.contains("no schema")), "{text}");

    // replay --from: topics made with the file's schemas; sub decodes the CDR messages.
    let out = r.json(&["replay", "--from", f, "--domain", "dst", "--speed", "max", "--json"]);
    assert_eq!(out, json!({"messages": 6, "topics": {"imu": 3, "raw": 3}}));
    let imu = r.json(&["info", "--domain", "dst", "imu", "--json"]);
    assert_eq!(
        (&imu["message_encoding"], &imu["schema_name"]),
        (&json!("cdr"), &json!("sensor_msgs/msg/Imu")),
        "{imu}"
    );
    let sub = ["sub", "--domain", "dst", "imu", "--from", "1", "--count", "3", "--timeout-ms", "20000"];
    let frames: Vec<Value> = json_lines(&r.ok(&sub)).iter().map(|v| v["header"]["frame_id"].clone()).collect();
    assert_eq!(frames, [json!("f1"), json!("f2"), json!("f3")]);
    let raw = r.ok(&["sub", "--domain", "dst", "raw", "--from", "1", "--count", "3", "--timeout-ms", "20000"]);
    assert_eq!(raw, "r1\nr2\nr3\n");

    // --topic picks; a topic the file does not hold is refused, naming what it holds.
    let out = r.json(&["replay", "--from", f, "--domain", "dst2", "--speed", "max", "--topic", "raw", "--json"]);
    assert_eq!(out, json!({"messages": 3, "topics": {"raw": 3}}));
    let e = r.fails(&["replay", "--from", f, "--domain", "dst2", "--topic", "nosuch"]);
    assert!(e.contains("nosuch") && e.contains("imu, raw"), "{e}");
    // --from-ts after the last message: nothing.
    let late = (end + 1).to_string();
    let out = r.json(&["replay", "--from", f, "--domain", "dst3", "--speed", "max", "--from-ts", &late, "--json"]);
    assert_eq!(out["messages"], 0);
}

#[test]
fn record_out_needs_an_mcap_name_or_format() {
    let r = Root::new();
    create_raw(&r, "d");
    let plain = r.0.join("run.bin");
    let out = r.run(&["record", "--domain", "d", "raw", "--out", plain.to_str().unwrap(), "--count", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--format mcap"));
    assert!(!plain.exists());
    let out = r.run(&["record", "--domain", "d", "raw", "--dir", &r.jdir("j"), "--format", "mcap", "--count", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    // --format mcap with any name, and lz4.
    let rec = r.spawn(&[
        "record",
        "--domain",
        "d",
        "raw",
        "--out",
        plain.to_str().unwrap(),
        "--format",
        "mcap",
        "--compression",
        "lz4",
        "--count",
        "2",
    ]);
    r.wait_json(&["info", "--domain", "d", "raw", "--json"], |v| v["subscribers"] == 1);
    r.ok_stdin(&["pub", "--domain", "d", "raw"], "a\nb\n");
    rec.finish_ok();
    let info = r.json(&["info", "--file", plain.to_str().unwrap(), "--json"]);
    assert_eq!((&info["format"], &info["messages"]), (&json!("mcap"), &json!(2)), "{info}");
}

#[test]
fn dir_recording_info_export_and_replay_keep_the_schemas() {
    let r = Root::new();
    create_imu(&r, "src");
    create_raw(&r, "src");
    let j = r.jdir("rec");
    let summary = record_both(&r, "src", &["--dir", &j]);
    assert_eq!(summary, json!({"messages": 6, "gaps": 0, "topics": {"imu": 3, "raw": 3}}));

    let info = r.json(&["info", "--file", &j, "--json"]);
    assert_eq!((&info["format"], &info["messages"]), (&json!("journal"), &json!(6)), "{info}");
    assert_eq!(info["topics"][0]["name"], "imu", "{info}");
    assert_eq!(info["topics"][0]["schema_name"], "sensor_msgs/msg/Imu", "{info}");
    assert_eq!(info["topics"][0]["messages"], 3, "{info}");
    assert_eq!((&info["topics"][1]["name"], &info["topics"][1]["schema_name"]), (&json!("raw"), &json!("")));
    let text = r.ok(&["info", "--file", &j]);
    assert!(text.contains("format        shmbus journal recording"), "{text}");
    assert!(
        text.lines().any(|l| l.contains("imu") && l.contains("3 msgs") && l.contains("sensor_msgs/msg/Imu")),
        "{text}"
    );

    // journal export: the same file as a recording to MCAP would be, for the official reader.
    let file = r.0.join("exported.mcap");
    let out = r.ok(&["journal", "export", "--dir", &j, "--out", file.to_str().unwrap(), "--json"]);
    let out: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((&out["messages"], &out["topics"], &out["skipped"]), (&json!(6), &json!(2), &json!(0)), "{out}");
    check_with_python(&file);

    // replay --dir creates the topics with the recorded schema too.
    let out = r.json(&["replay", "--dir", &j, "--domain", "dst", "--speed", "max", "--json"]);
    assert_eq!(out, json!({"messages": 6, "topics": {"imu": 3, "raw": 3}}));
    let imu = r.json(&["info", "--domain", "dst", "imu", "--json"]);
    assert_eq!(imu["schema_name"], "sensor_msgs/msg/Imu", "{imu}");
    // Also when --from-ts starts after the topic entries.
    let t0 = r.json(&["info", "--file", &j, "--json"])["start_ns"].as_u64().unwrap().to_string();
    let out = r.json(&["replay", "--dir", &j, "--domain", "dst4", "--speed", "max", "--from-ts", &t0, "--json"]);
    assert_eq!(out["messages"], 6);
    assert_eq!(r.json(&["info", "--domain", "dst4", "imu", "--json"])["schema_name"], "sensor_msgs/msg/Imu");
}

/// Waits (generously) until `info --file` reads at least `n` messages from the file.
fn wait_recorded(r: &Root, file: &str, n: u64) {
    let t0 = Instant::now();
    loop {
        let out = r.run(&["info", "--file", file, "--json"]);
        if out.status.success() {
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            if v["messages"].as_u64().unwrap_or(0) >= n {
                return;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "the recorder never wrote {n} messages");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_killed_recorder_leaves_a_file_readable_to_its_last_chunk() {
    let r = Root::new();
    // History for every message: the recorder misses none however it is scheduled.
    r.ok(&["create", "--domain", "d", "--kind", "topic", "raw", "--slot-size", "64", "--history", "256"]);
    let file = r.0.join("killed.mcap");
    let f = file.to_str().unwrap();
    // Small chunks: many in the file before the kill.
    let mut rec =
        r.spawn(&["record", "--domain", "d", "raw", "--out", f, "--chunk-size", "512", "--compression", "zstd"]);
    r.wait_json(&["info", "--domain", "d", "raw", "--json"], |v| v["subscribers"] == 1);
    let lines: String = (1..=200).map(|i| format!("message number {i:04}\n")).collect();
    r.ok_stdin(&["pub", "--domain", "d", "raw"], &lines);
    wait_recorded(&r, f, 100);
    rec.kill(); // SIGKILL: no summary, no footer.

    let info = r.json(&["info", "--file", f, "--json"]);
    assert_eq!((&info["complete"], &info["from_summary"]), (&json!(false), &json!(false)), "{info}");
    let n = info["messages"].as_u64().unwrap();
    assert!((100..=200).contains(&n), "{info}");
    // replay reads up to the cut, republishes everything before it, and says so (exit 1).
    let out = r.run(&["replay", "--from", f, "--domain", "dst", "--speed", "max", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ends early"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap()["messages"], n);

    let Some(py) = interop::python() else { return };
    let v = run_py(&py, STREAM_SCRIPT, &file);
    let msgs = v["messages"].as_array().unwrap();
    assert_eq!(msgs.len() as u64, n, "the official reader reads what info counted: {v}");
    for (i, m) in msgs.iter().enumerate() {
        let k = i + 1;
        assert_eq!(m, &json!(["raw", k, format!("message number {k:04}")]), "{v}");
    }
}

#[test]
fn sigint_stops_an_mcap_recording_cleanly() {
    let r = Root::new();
    create_raw(&r, "d");
    let file = r.0.join("stopped.mcap");
    let f = file.to_str().unwrap();
    let rec = r.spawn(&["record", "--domain", "d", "raw", "--out", f, "--json"]);
    r.wait_json(&["info", "--domain", "d", "raw", "--json"], |v| v["subscribers"] == 1);
    r.ok_stdin(&["pub", "--domain", "d", "raw"], "a\nb\nc\n");
    wait_recorded(&r, f, 3);
    // SAFETY: kill(2) on the pid of our own child process.
    assert_eq!(unsafe { libc::kill(rec.id() as libc::pid_t, libc::SIGINT) }, 0);
    let summary: Value = serde_json::from_str(&rec.finish_ok()).unwrap();
    assert_eq!(summary["messages"], 3);
    let info = r.json(&["info", "--file", f, "--json"]);
    assert_eq!((&info["complete"], &info["from_summary"], &info["messages"]), (&json!(true), &json!(true), &json!(3)));
}

#[test]
fn an_mcap_recorder_that_falls_behind_counts_what_it_missed() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "raw", "--slot-size", "64", "--history", "4"]);
    let file = r.0.join("behind.mcap");
    let f = file.to_str().unwrap();
    let rec = r.spawn(&["record", "--domain", "d", "raw", "--out", f, "--json"]);
    r.wait_json(&["info", "--domain", "d", "raw", "--json"], |v| v["subscribers"] == 1);
    // Stopped while 50 messages go by a history of 4: it must miss some.
    // SAFETY: kill(2) on the pid of our own child process.
    assert_eq!(unsafe { libc::kill(rec.id() as libc::pid_t, libc::SIGSTOP) }, 0);
    let lines: String = (1..=50).map(|i| format!("m{i}\n")).collect();
    r.ok_stdin(&["pub", "--domain", "d", "raw"], &lines);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(rec.id() as libc::pid_t, libc::SIGCONT) }, 0);
    wait_recorded(&r, f, 1);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(rec.id() as libc::pid_t, libc::SIGINT) }, 0);
    let out = rec.finish();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (messages, gaps) = (summary["messages"].as_u64().unwrap(), summary["gaps"].as_u64().unwrap());
    assert!(gaps > 0 && messages + gaps == 50, "{summary}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("gap: "), "{}", String::from_utf8_lossy(&out.stderr));
    // The file holds what was recorded: the newest messages, with their own sequence numbers.
    let info = r.json(&["info", "--file", f, "--json"]);
    assert_eq!(info["messages"], messages, "{info}");
    let Some(py) = interop::python() else { return };
    let v = run_py(&py, STREAM_SCRIPT, &file);
    let seqs: Vec<u64> = v["messages"].as_array().unwrap().iter().map(|m| m[1].as_u64().unwrap()).collect();
    assert_eq!(seqs, ((51 - messages)..=50).collect::<Vec<_>>(), "{v}");
}

/// A topic published faster than the recorder can write keeps neither `--seconds` nor the
/// other topics from it: it takes a batch at a time.
#[test]
fn a_flooding_topic_neither_starves_the_others_nor_outlasts_seconds() {
    let r = Root::new();
    let big = r.0.join("big.bin");
    // Incompressible, so that each message costs the recorder's zstd real work.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let bytes: Vec<u8> = (0..6 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&big, bytes).unwrap();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "flood", "--slot-size", "6M", "--history", "4"]);
    create_raw(&r, "d");
    let file = r.0.join("flood.mcap");
    let rec = r.spawn(&[
        "record",
        "--domain",
        "d",
        "flood",
        "raw",
        "--out",
        file.to_str().unwrap(),
        "--seconds",
        "1",
        "--json",
    ]);
    for t in ["flood", "raw"] {
        r.wait_json(&["info", "--domain", "d", t, "--json"], |v| v["subscribers"] == 1);
    }
    let _flood = r.spawn(&["pub", "--domain", "d", "flood", "--file", big.to_str().unwrap(), "--count", "1000000000"]);
    r.ok(&["pub", "--domain", "d", "raw", "--data", "slow", "--count", "20", "--rate", "50"]);
    let mut rec = rec;
    let t0 = Instant::now();
    while !rec.exited() {
        assert!(t0.elapsed() < Duration::from_secs(60), "record --seconds 1 went on under a flooding topic");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = rec.finish();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(summary["topics"]["flood"].as_u64().unwrap() > 0, "{summary}");
    assert!(summary["topics"]["raw"].as_u64().unwrap() > 0, "the slow topic was starved: {summary}");
}
