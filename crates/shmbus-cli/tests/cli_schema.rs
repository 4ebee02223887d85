//! Channel schemas from the shell: set by `create` (every kind, journals too) and `pub`,
//! shown by `info`, `ls --json`, `schema` and `export`; messages decoded by `sub` and
//! `journal dump|tail`, and encoded from JSON by `pub` and `journal append`, for JSON, CBOR,
//! MessagePack, CDR (a ros2msg IMU) and protobuf. Real `shmbus` processes on real channels.
//!
//! The schema files are checked in under tests/data (made once by tests/data/make_data.py).
//! The interop tests run rosbags in the scratch virtualenv of `scripts/interop-venv.sh`; they
//! skip with a reason when it is missing, unless `SHMBUS_REQUIRE_INTEROP=1`, when they fail.
//! No assertion on a time.

mod common;

#[path = "../../../tests/support/interop.rs"]
mod interop;
#[path = "../../../tests/support/python_json.rs"]
mod python_json;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

use base64::Engine as _;
use common::{json_lines, one_error_line, Root};
use serde_json::{json, Value};

/// A file of tests/data.
fn data(name: &str) -> String {
    format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The flags of a sensor_msgs/msg/Imu channel (CDR, ros2msg with its dependencies).
fn imu_flags() -> Vec<String> {
    let flags = ["--message-encoding", "cdr", "--schema-name", "sensor_msgs/msg/Imu", "--schema-encoding", "ros2msg"];
    let mut v: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    v.extend(["--schema-file".to_string(), data("Imu.msg")]);
    v
}

/// The flags of a demo.Imu protobuf channel.
fn protobuf_flags() -> Vec<String> {
    let flags = ["--message-encoding", "protobuf", "--schema-name", "demo.Imu", "--schema-encoding", "protobuf"];
    let mut v: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    v.extend(["--schema-file".to_string(), data("imu.desc")]);
    v
}

/// `args` then `flags`, as one argument list.
fn with<'a>(args: &[&'a str], flags: &'a [String]) -> Vec<&'a str> {
    args.iter().copied().chain(flags.iter().map(String::as_str)).collect()
}

/// The stdout and stderr of a run that succeeded.
fn ok_both(r: &Root, args: &[&str]) -> (String, String) {
    let out = r.run(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "shmbus {args:?} failed: {err}");
    assert!(!err.contains("panicked") && !err.contains("internal error"), "{err}");
    (String::from_utf8(out.stdout).unwrap(), err)
}

#[test]
fn create_sets_a_schema_on_every_kind_and_info_ls_and_schema_show_it() {
    let r = Root::new();
    let imu = imu_flags();
    let text = std::fs::read(data("Imu.msg")).unwrap();
    for kind in ["topic", "queue", "stream", "pool"] {
        r.ok(&with(&["create", "--domain", "d", "--kind", kind, kind], &imu));
        let info = r.ok(&["info", "--domain", "d", kind]);
        let line = format!("schema        cdr sensor_msgs/msg/Imu ros2msg {} bytes", text.len());
        assert!(info.lines().any(|l| l == line), "{kind}: {info}");
        let v = r.json(&["info", "--domain", "d", kind, "--json"]);
        assert_eq!(
            (&v["message_encoding"], &v["schema_name"], &v["schema_encoding"]),
            (&json!("cdr"), &json!("sensor_msgs/msg/Imu"), &json!("ros2msg")),
            "{kind}"
        );
        // `schema` prints the data itself, byte for byte.
        let out = r.run(&["schema", "--domain", "d", kind]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.stdout, text, "{kind}");
        let v = r.json(&["schema", "--domain", "d", kind, "--json"]);
        assert_eq!(
            v,
            json!({"message_encoding": "cdr", "schema_name": "sensor_msgs/msg/Imu", "schema_encoding": "ros2msg",
                   "data": String::from_utf8(text.clone()).unwrap()})
        );
    }
    // A schema with no schema data, and a channel with none.
    r.ok(&["create", "--domain", "d", "--kind", "topic", "j", "--message-encoding", "json"]);
    r.ok(&["create", "--domain", "d", "--kind", "topic", "plain"]);
    let ls = r.json(&["ls", "--json"]);
    let ls = ls.as_array().unwrap();
    assert_eq!(ls.len(), 6);
    for e in ls {
        let keys = (&e["message_encoding"], &e["schema_name"], &e["schema_encoding"]);
        match e["name"].as_str().unwrap() {
            "plain" => assert_eq!(keys, (&Value::Null, &Value::Null, &Value::Null)),
            "j" => assert_eq!(keys, (&json!("json"), &json!(""), &json!(""))),
            _ => assert_eq!(keys, (&json!("cdr"), &json!("sensor_msgs/msg/Imu"), &json!("ros2msg")), "{e}"),
        }
    }
    let info = r.ok(&["info", "--domain", "d", "plain"]);
    assert!(!info.contains("schema"), "{info}");
    let e = r.fails(&["schema", "--domain", "d", "plain"]);
    assert!(e.contains("d/plain has no schema"), "{e}");

    // Binary schema data: as it is, and in base64 under --json.
    let desc = std::fs::read(data("imu.desc")).unwrap();
    r.ok(&with(&["create", "--domain", "d", "--kind", "topic", "pb"], &protobuf_flags()));
    assert_eq!(r.run(&["schema", "--domain", "d", "pb"]).stdout, desc);
    let v = r.json(&["schema", "--domain", "d", "pb", "--json"]);
    assert_eq!(v["data_base64"], json!(base64::engine::general_purpose::STANDARD.encode(&desc)));
    assert!(v.get("data").is_none(), "{v}");

    // A journal: made by `create --kind journal --dir`, its schema shown by `schema --dir`.
    let j = r.jdir("imu");
    assert_eq!(r.ok(&with(&["create", "--kind", "journal", "--dir", &j], &imu)), format!("created journal {j}\n"));
    assert_eq!(r.ok(&with(&["create", "--kind", "journal", "--dir", &j], &imu)), format!("exists: journal {j}\n"));
    assert_eq!(r.run(&["schema", "--dir", &j]).stdout, text);
    assert_eq!(r.json(&["schema", "--dir", &j, "--json"])["schema_name"], json!("sensor_msgs/msg/Imu"));
    let info = r.ok(&["journal", "info", "--dir", &j]);
    let line = format!("schema        cdr sensor_msgs/msg/Imu ros2msg {} bytes", text.len());
    assert!(info.lines().any(|l| l == line), "{info}");
}

#[test]
fn a_schema_file_of_one_mib_is_stored_and_one_byte_more_is_refused() {
    let r = Root::new();
    let big = r.0.join("big.desc");
    let bytes: Vec<u8> = (0..1usize << 20).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(&big, &bytes).unwrap();
    let flags = ["--message-encoding", "protobuf", "--schema-name", "big.M", "--schema-encoding", "protobuf"];
    let args = |name: &'static str| {
        let mut a = vec!["create", "--domain", "d", "--kind", "topic", name];
        a.extend(flags);
        a.extend(["--schema-file", big.to_str().unwrap()]);
        a.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let a = args("exact");
    r.ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(r.run(&["schema", "--domain", "d", "exact"]).stdout, bytes);

    let mut over = bytes;
    over.push(0);
    std::fs::write(&big, &over).unwrap();
    let a = args("over");
    let out = r.run(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(1));
    let e = one_error_line(&out);
    assert!(e.contains("--schema-file") && e.contains("longer than 1048576 bytes"), "{e}");
    assert!(!r.channel_file("d", "over").exists(), "a channel was made from a refused schema");
}

#[test]
fn another_schema_on_an_existing_channel_is_refused_naming_both() {
    let r = Root::new();
    r.ok(&with(&["create", "--domain", "d", "--kind", "topic", "t"], &imu_flags()));
    let pb = protobuf_flags();
    for verb in
        [&["create", "--domain", "d", "--kind", "topic", "t"][..], &["pub", "--domain", "d", "t", "--data", "{}"]]
    {
        let out = r.run(&with(verb, &pb));
        assert_eq!(out.status.code(), Some(1), "{verb:?}");
        let e = one_error_line(&out);
        assert!(e.contains("sensor_msgs/msg/Imu") && e.contains("demo.Imu"), "{verb:?}: {e}");
    }
    // Nothing was published by the refused `pub`.
    assert_eq!(r.json(&["info", "--domain", "d", "t", "--json"])["last_seq"], json!(0));
    // The same schema, or none, opens it.
    r.ok(&with(&["create", "--domain", "d", "--kind", "topic", "t"], &imu_flags()));
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t"]);

    let j = r.jdir("j");
    r.ok(&["create", "--kind", "journal", "--dir", &j, "--message-encoding", "json", "--schema-name", "a.A"]);
    let out = r.run(&["journal", "append", "--dir", &j, "--message-encoding", "cbor", "--data", "{}"]);
    assert_eq!(out.status.code(), Some(1));
    let e = one_error_line(&out);
    assert!(e.contains("a.A") && e.contains("cbor"), "{e}");
}

/// Publishes `lines` (JSON) to a new channel `name` of `kind` with `flags`, and returns what
/// `sub` prints: decoded lines, `--json` lines, and `--format hex` lines.
fn pub_then_sub(r: &Root, kind: &str, name: &str, flags: &[String], lines: &[Value]) -> [Vec<Value>; 2] {
    r.ok(&with(&["create", "--domain", "d", "--kind", kind, name], flags));
    let input: String = lines.iter().map(|v| format!("{v}\n")).collect();
    let n = lines.len().to_string();
    // Twice, for the two forms: a queue or stream hands each message over once.
    let mut got = Vec::new();
    for json in [false, true] {
        r.ok_stdin(&["pub", "--domain", "d", name], &input);
        let mut args = vec!["sub", "--domain", "d", name, "--count", &n, "--timeout-ms", "20000"];
        if kind == "topic" {
            args.extend(["--from", if json { "oldest" } else { "1" }]);
        }
        if json {
            args.push("--json");
        }
        let (out, err) = ok_both(r, &args);
        assert!(err.is_empty(), "{err}");
        got.push(json_lines(&out));
    }
    let [decoded, enveloped] = <[Vec<Value>; 2]>::try_from(got).unwrap();
    // `--json` keeps the envelope, with the decoded value as `msg`.
    assert!(enveloped.iter().enumerate().all(|(i, v)| v["seq"] == json!(i + 1) && v["ts_mono_ns"].is_u64()));
    assert!(enveloped.iter().all(|v| v["len"].is_u64() && v.get("data").is_none()), "{enveloped:?}");
    [decoded, enveloped.iter().map(|v| v["msg"].clone()).collect()]
}

/// The payloads of a topic's first `n` messages in hex.
fn hex_of(r: &Root, name: &str, n: usize) -> Vec<String> {
    let n = n.to_string();
    let out =
        r.ok(&["sub", "--domain", "d", name, "--from", "1", "--count", &n, "--format", "hex", "--timeout-ms", "20000"]);
    out.lines().map(str::to_owned).collect()
}

#[test]
fn pub_encodes_json_and_sub_decodes_it_for_json_cbor_and_msgpack() {
    let r = Root::new();
    let values = [json!({"a": 1, "b": [true, null, "x"]}), json!({"a": -2.5})];
    for enc in ["json", "cbor", "msgpack"] {
        let flags = vec!["--message-encoding".to_string(), enc.to_string()];
        let [decoded, enveloped] = pub_then_sub(&r, "topic", enc, &flags, &values);
        assert_eq!(decoded, values, "{enc}");
        assert_eq!(enveloped, values, "{enc}");
    }
    // On the wire each is its own encoding, not the JSON text: {"a":1,…} starts with a map
    // of two entries.
    assert!(hex_of(&r, "json", 1)[0].starts_with(&b"{\"a\":1".iter().map(|b| format!("{b:02x}")).collect::<String>()));
    assert!(hex_of(&r, "cbor", 1)[0].starts_with("a2616101"), "{:?}", hex_of(&r, "cbor", 1));
    assert!(hex_of(&r, "msgpack", 1)[0].starts_with("82a16101"), "{:?}", hex_of(&r, "msgpack", 1));
    // Queues and streams decode too; `echo` is `sub`.
    for kind in ["queue", "stream"] {
        let flags = vec!["--message-encoding".to_string(), "cbor".to_string()];
        let [decoded, enveloped] = pub_then_sub(&r, kind, &format!("{kind}-cbor"), &flags, &values);
        assert_eq!((decoded, enveloped), (values.to_vec(), values.to_vec()), "{kind}");
    }
    let out = r.ok(&["echo", "--domain", "d", "cbor", "--from", "1", "--count", "1", "--timeout-ms", "20000"]);
    assert_eq!(json_lines(&out), vec![values[0].clone()]);
}

#[test]
fn pub_encodes_json_and_sub_decodes_it_for_a_cdr_imu_and_a_protobuf_message() {
    let r = Root::new();
    let imu = json!({"header": {"stamp": {"sec": 42, "nanosec": 7}, "frame_id": "imu_link"},
                     "linear_acceleration": {"x": 0.5, "y": 9.81}, "orientation_covariance": [1, 2, 3, 4, 5, 6, 7, 8, 9]});
    let [decoded, enveloped] = pub_then_sub(&r, "topic", "imu", &imu_flags(), std::slice::from_ref(&imu));
    for v in [&decoded[0], &enveloped[0]] {
        assert_eq!(v["header"], json!({"stamp": {"sec": 42, "nanosec": 7}, "frame_id": "imu_link"}));
        assert_eq!(v["linear_acceleration"], json!({"x": 0.5, "y": 9.81, "z": 0.0}));
        // Missing fields take their defaults.
        assert_eq!(v["orientation"], json!({"x": 0.0, "y": 0.0, "z": 0.0, "w": 0.0}));
        assert_eq!(v["angular_velocity_covariance"], json!(vec![0.0; 9]));
        assert_eq!(v["orientation_covariance"], json!([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]));
    }
    // On the wire: CDR, little-endian encapsulation header, then sec = 42.
    assert!(hex_of(&r, "imu", 1)[0].starts_with("000100002a000000"), "{:?}", hex_of(&r, "imu", 1));

    let pb = json!({"frameId": "imu", "stampNs": "12345678901234", "count": -7, "samples": [0.5, 1.5],
                    "linearAcceleration": {"y": -9.81}});
    let [decoded, enveloped] = pub_then_sub(&r, "topic", "pb", &protobuf_flags(), std::slice::from_ref(&pb));
    for v in [&decoded[0], &enveloped[0]] {
        assert_eq!(v["frameId"], json!("imu"), "{v}");
        assert_eq!(v["count"], json!(-7), "{v}");
        assert_eq!(v["samples"], json!([0.5, 1.5]), "{v}");
        assert_eq!(v["linearAcceleration"]["y"], json!(-9.81), "{v}");
        assert!(v["stampNs"] == json!("12345678901234") || v["stampNs"] == json!(12345678901234u64), "{v}");
    }
    // Protobuf on the wire: field 1 (frame_id), length 3, "imu".
    assert!(hex_of(&r, "pb", 1)[0].starts_with("0a03696d75"), "{:?}", hex_of(&r, "pb", 1));
}

#[test]
fn a_message_that_does_not_decode_is_one_line_and_the_others_go_on() {
    let r = Root::new();
    r.ok(&with(&["create", "--domain", "d", "--kind", "topic", "imu"], &imu_flags()));
    r.ok(&["pub", "--domain", "d", "imu", "--data", r#"{"header":{"frame_id":"a"}}"#]);
    // Bytes as they are (`--format hex`, or `raw`/`text`): sent without encoding.
    r.ok(&["pub", "--domain", "d", "imu", "--format", "hex", "--data", "0001000001"]);
    r.ok(&["pub", "--domain", "d", "imu", "--format", "raw", "--data", "not cdr"]);
    r.ok(&["pub", "--domain", "d", "imu", "--data", r#"{"header":{"frame_id":"b"}}"#]);
    let sub = ["sub", "--domain", "d", "imu", "--from", "1", "--count", "4", "--timeout-ms", "20000"];
    let (out, err) = ok_both(&r, &sub);
    let frames: Vec<Value> = json_lines(&out).iter().map(|v| v["header"]["frame_id"].clone()).collect();
    assert_eq!(frames, vec![json!("a"), json!("b")]);
    let said: Vec<&str> = err.lines().collect();
    assert_eq!(said.len(), 2, "{err}");
    assert!(said[0].starts_with("undecodable: seq 2 (5 bytes) does not decode as sensor_msgs/msg/Imu"), "{err}");
    assert!(said[1].starts_with("undecodable: seq 3 (7 bytes)"), "{err}");

    let (out, err) = ok_both(&r, &[&sub[..], &["--json"]].concat());
    assert!(err.is_empty(), "{err}");
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["msg"]["header"]["frame_id"], json!("a"));
    for (i, seq) in [(1, 2), (2, 3)] {
        assert_eq!(lines[i]["seq"], json!(seq));
        assert!(lines[i]["error"].as_str().is_some_and(|e| e.contains("sensor_msgs/msg/Imu")), "{}", lines[i]);
        assert!(lines[i].get("msg").is_none());
    }
    assert_eq!(lines[3]["msg"]["header"]["frame_id"], json!("b"));

    // `--format` prints the bytes as before.
    let out = r.ok(&[&sub[..], &["--format", "text"]].concat());
    assert_eq!(out.lines().nth(2), Some("not cdr"));
}

#[test]
fn full_prints_byte_arrays_whole() {
    let r = Root::new();
    let msg = r.0.join("Blob.msg");
    std::fs::write(&msg, "uint8[] blob\nstring name\n").unwrap();
    let flags: Vec<String> = [
        "--message-encoding",
        "cdr",
        "--schema-name",
        "demo/msg/Blob",
        "--schema-encoding",
        "ros2msg",
        "--schema-file",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([msg.to_str().unwrap().to_string()])
    .collect();
    r.ok(&with(&["create", "--domain", "d", "--kind", "topic", "b"], &flags));
    let blob: Vec<u8> = (0..100).collect();
    r.ok(&["pub", "--domain", "d", "b", "--data", &json!({"blob": blob, "name": "n"}).to_string()]);
    let sub = ["sub", "--domain", "d", "b", "--from", "1", "--count", "1", "--timeout-ms", "20000"];
    assert_eq!(json_lines(&r.ok(&sub)), vec![json!({"blob": "<100 bytes>", "name": "n"})]);
    assert_eq!(json_lines(&r.ok(&[&sub[..], &["--full"]].concat())), vec![json!({"blob": blob, "name": "n"})]);
}

#[test]
fn pub_refuses_a_line_that_does_not_fit_the_schema_naming_the_field_and_sends_none_of_it() {
    let r = Root::new();
    r.ok(&with(&["create", "--domain", "d", "--kind", "topic", "imu", "--history", "64"], &imu_flags()));
    let good = r#"{"header":{"frame_id":"ok"}}"#;
    let mut sent = 0u64;
    for (bad, says) in [
        (r#"{"linear_acceleration":{"w":1}}"#, "linear_acceleration.w"),
        (r#"{"header":{"stamp":{"nanosec":-1}}}"#, "header.stamp.nanosec"),
        (r#"{"header":{"stamp":{"sec":4294967296}}}"#, "header.stamp.sec"),
        (r#"{"orientation":{"x":"abc"}}"#, "orientation.x"),
        (r#"{"orientation_covariance":[1,2]}"#, "orientation_covariance"),
        (r#"{"header": oops"#, "not JSON"),
    ] {
        let input = format!("{good}\n{bad}\n{good}\n");
        let out = r.run_stdin(&["pub", "--domain", "d", "imu"], input.as_bytes());
        assert_eq!(out.status.code(), Some(1), "{bad}");
        let e = one_error_line(&out);
        assert!(e.starts_with(&format!("shmbus: stdin line 2: {says}")), "{bad}: {e}");
        assert!(e.contains("nothing of it was sent") && e.ends_with("(1 message(s) sent before)"), "{e}");
        // The line before it was sent; it and the lines after it were not (the same as a
        // line too long for the channel: `pub` stops there).
        sent += 1;
        assert_eq!(r.json(&["info", "--domain", "d", "imu", "--json"])["last_seq"], json!(sent), "{bad}");
    }
    // --data: one message, refused the same way.
    let out = r.run(&["pub", "--domain", "d", "imu", "--data", r#"{"nope":1}"#]);
    assert_eq!(out.status.code(), Some(1));
    assert!(one_error_line(&out).starts_with("shmbus: --data: nope"), "{}", one_error_line(&out));
    assert_eq!(r.json(&["info", "--domain", "d", "imu", "--json"])["last_seq"], json!(sent));
}

#[test]
fn journal_append_encodes_and_dump_and_tail_decode() {
    let r = Root::new();
    let j = r.jdir("imu");
    r.ok(&with(&["create", "--kind", "journal", "--dir", &j], &imu_flags()));
    r.ok_stdin(&["journal", "append", "--dir", &j], "{\"header\":{\"frame_id\":\"a\"}}\n");
    r.ok(&["journal", "append", "--dir", &j, "--format", "hex", "--data", "00010000ff"]);
    r.ok(&["journal", "append", "--dir", &j, "--data", r#"{"header":{"frame_id":"b"}}"#]);
    let out = r.run(&["journal", "append", "--dir", &j, "--data", r#"{"header":{"frame_id":7}}"#]);
    assert!(one_error_line(&out).contains("header.frame_id"), "{}", one_error_line(&out));

    let (out, err) = ok_both(&r, &["journal", "dump", "--dir", &j]);
    let frames: Vec<Value> = json_lines(&out).iter().map(|v| v["header"]["frame_id"].clone()).collect();
    assert_eq!(frames, vec![json!("a"), json!("b")]);
    assert!(err.starts_with("undecodable: entry 1 (5 bytes)") && err.lines().count() == 1, "{err}");

    let (out, _) = ok_both(&r, &["journal", "dump", "--dir", &j, "--json"]);
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 3);
    assert_eq!((&lines[0]["index"], &lines[0]["msg"]["header"]["frame_id"]), (&json!(0), &json!("a")));
    assert_eq!(lines[1]["index"], json!(1));
    assert!(lines[1]["error"].is_string() && lines[1].get("msg").is_none(), "{}", lines[1]);
    assert!(lines.iter().all(|l| l["ts_real_ns"].is_u64()));

    let tail = ["journal", "tail", "--dir", &j, "--from", "0", "--count", "3", "--json", "--timeout-ms", "20000"];
    assert_eq!(json_lines(&r.ok(&tail)), lines);
    assert_eq!(r.ok(&["journal", "dump", "--dir", &j, "--format", "hex"]).lines().nth(1), Some("00010000ff"));
}

/// A running `shmbus export` and the URL of its metrics.
fn exporter(r: &Root, j: &str) -> (common::Killed, String) {
    let mut child = r.spawn(&["export", "--listen", "127.0.0.1:0", "--journal", j]);
    let mut lines = BufReader::new(child.child().stderr.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    let url = line.split_whitespace().find(|w| w.starts_with("http://")).unwrap().to_owned();
    std::thread::spawn(move || lines.map_while(|l| l.ok()).for_each(drop));
    (child, url)
}

/// The body of a GET of `url` (`http://HOST:PORT/metrics`).
fn get(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    let (addr, path) = rest.split_at(rest.find('/').unwrap());
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}

#[test]
fn export_labels_each_schema_with_an_info_metric_that_promtool_accepts() {
    let r = Root::new();
    r.ok(&with(&["create", "--domain", "d", "--kind", "topic", "imu"], &imu_flags()));
    r.ok(&["create", "--domain", "d", "--kind", "queue", "plain"]);
    let j = r.jdir("j");
    r.ok(&with(&["create", "--kind", "journal", "--dir", &j], &protobuf_flags()));
    let (_child, url) = exporter(&r, &j);
    let body = get(&url);
    assert!(
        body.contains(
            "shmbus_channel_schema_info{domain=\"d\",channel=\"imu\",kind=\"topic\",message_encoding=\"cdr\",schema_name=\"sensor_msgs/msg/Imu\"} 1\n"
        ),
        "{body}"
    );
    assert!(!body.lines().any(|l| l.starts_with("shmbus_channel_schema_info{") && l.contains("\"plain\"")), "{body}");
    let name = std::path::Path::new(&j).file_name().unwrap().to_str().unwrap();
    let journal_line = format!(
        "shmbus_journal_schema_info{{journal=\"{name}\",path=\"{j}\",message_encoding=\"protobuf\",schema_name=\"demo.Imu\"}} 1\n"
    );
    assert!(body.contains(&journal_line), "{body}");
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool is needed (make deps installs it: Debian package prometheus)");
    p.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let out = p.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "promtool: {said}\n---\n{body}");
}

/// Decoding `sub` keeps up with a 1 kHz IMU topic for 2 s: every message printed, no gap.
#[test]
fn a_decoding_sub_keeps_up_with_a_1khz_imu_topic() {
    let r = Root::new();
    r.ok(&with(&["create", "--domain", "d", "--kind", "topic", "imu"], &imu_flags()));
    let mut sub = r.spawn(&["sub", "--domain", "d", "imu", "--count", "2000", "--timeout-ms", "20000"]);
    // Read as it prints: a pipe left full would hold the subscriber back, not its decoding.
    let drain = |mut from: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            from.read_to_string(&mut text).unwrap();
            text
        })
    };
    let stdout = drain(Box::new(sub.child().stdout.take().unwrap()));
    let stderr = drain(Box::new(sub.child().stderr.take().unwrap()));
    r.wait_info("d", "imu", |v| v["subscribers"] == 1);
    let input: String = (0..2000)
        .map(|i| {
            format!(
                "{}\n",
                json!({"header": {"stamp": {"sec": i / 1000, "nanosec": (i % 1000) * 1_000_000}, "frame_id": "imu"},
                       "angular_velocity": {"z": i}, "linear_acceleration": {"z": 9.81}})
            )
        })
        .collect();
    r.ok_stdin(&["pub", "--domain", "d", "imu", "--rate", "1000"], &input);
    let status = sub.finish().status;
    let (out, err) = (stdout.join().unwrap(), stderr.join().unwrap());
    assert!(status.success(), "{err}");
    assert!(err.is_empty(), "the subscriber fell behind: {err}");
    let seen: Vec<f64> = json_lines(&out).iter().map(|v| v["angular_velocity"]["z"].as_f64().unwrap()).collect();
    assert_eq!(seen, (0..2000).map(f64::from).collect::<Vec<_>>());
}

const ROSBAGS_WRITE_IMU: &str = r#"
import json
import numpy as np
from rosbags.typesys import Stores, get_typestore
ts = get_typestore(Stores.ROS2_HUMBLE)
T = ts.types
msg = T['sensor_msgs/msg/Imu'](
    header=T['std_msgs/msg/Header'](stamp=T['builtin_interfaces/msg/Time'](sec=42, nanosec=7), frame_id='imu_link'),
    orientation=T['geometry_msgs/msg/Quaternion'](x=0.1, y=0.2, z=0.3, w=0.9),
    orientation_covariance=np.arange(9, dtype=np.float64),
    angular_velocity=T['geometry_msgs/msg/Vector3'](x=1.5, y=-2.5, z=3.5),
    angular_velocity_covariance=np.zeros(9, dtype=np.float64),
    linear_acceleration=T['geometry_msgs/msg/Vector3'](x=0.0, y=9.81, z=-1.0),
    linear_acceleration_covariance=np.full(9, 0.5),
)
print(json.dumps(bytes(ts.serialize_cdr(msg, 'sensor_msgs/msg/Imu')).hex()))
"#;

const ROSBAGS_READ_IMU: &str = r#"
import json, sys
from rosbags.typesys import Stores, get_typestore
ts = get_typestore(Stores.ROS2_HUMBLE)
m = ts.deserialize_cdr(bytes.fromhex(sys.stdin.read().strip()), 'sensor_msgs/msg/Imu')
print(json.dumps({
    'stamp': [m.header.stamp.sec, m.header.stamp.nanosec],
    'frame_id': m.header.frame_id,
    'orientation': [m.orientation.x, m.orientation.y, m.orientation.z, m.orientation.w],
    'linear_acceleration': [m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z],
    'linear_acceleration_covariance': m.linear_acceleration_covariance.tolist(),
}))
"#;

#[test]
fn an_imu_serialised_by_rosbags_is_printed_by_sub_with_the_right_fields() {
    let Some(py) = interop::python() else { return };
    let r = Root::new();
    r.ok(&with(&["create", "--domain", "d", "--kind", "topic", "imu"], &imu_flags()));
    let hex = python_json::run(&py, ROSBAGS_WRITE_IMU, "");
    r.ok(&["pub", "--domain", "d", "imu", "--format", "hex", "--data", hex.as_str().unwrap()]);
    let out = r.ok(&["sub", "--domain", "d", "imu", "--from", "1", "--count", "1", "--timeout-ms", "20000"]);
    let v = &json_lines(&out)[0];
    assert_eq!(v["header"], json!({"stamp": {"sec": 42, "nanosec": 7}, "frame_id": "imu_link"}));
    assert_eq!(v["orientation"], json!({"x": 0.1, "y": 0.2, "z": 0.3, "w": 0.9}));
    assert_eq!(v["orientation_covariance"], json!([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]));
    assert_eq!(v["angular_velocity"], json!({"x": 1.5, "y": -2.5, "z": 3.5}));
    assert_eq!(v["linear_acceleration"], json!({"x": 0.0, "y": 9.81, "z": -1.0}));
    assert_eq!(v["linear_acceleration_covariance"], json!(vec![0.5; 9]));
}

#[test]
fn an_imu_published_from_json_is_read_by_rosbags_with_the_right_fields() {
    let Some(py) = interop::python() else { return };
    let r = Root::new();
    r.ok(&with(&["create", "--domain", "d", "--kind", "topic", "imu"], &imu_flags()));
    let imu = json!({"header": {"stamp": {"sec": 1700000000, "nanosec": 999}, "frame_id": "base"},
                     "orientation": {"w": 1.0}, "linear_acceleration": {"x": -0.25, "z": 9.81},
                     "linear_acceleration_covariance": [0.01, 0, 0, 0, 0.01, 0, 0, 0, 0.01]});
    r.ok(&["pub", "--domain", "d", "imu", "--data", &imu.to_string()]);
    let hex = r.ok(&[
        "sub",
        "--domain",
        "d",
        "imu",
        "--from",
        "1",
        "--count",
        "1",
        "--format",
        "hex",
        "--timeout-ms",
        "20000",
    ]);
    let got = python_json::run(&py, ROSBAGS_READ_IMU, &hex);
    assert_eq!(got["stamp"], json!([1700000000, 999]));
    assert_eq!(got["frame_id"], json!("base"));
    assert_eq!(got["orientation"], json!([0.0, 0.0, 0.0, 1.0]));
    assert_eq!(got["linear_acceleration"], json!([-0.25, 0.0, 9.81]));
    assert_eq!(got["linear_acceleration_covariance"], json!([0.01, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.01]));
}

#[test]
fn pub_takes_one_line_flow_yaml_as_ros2_topic_pub_does() {
    let r = Root::new();
    r.ok(&with(&["create", "--domain", "d", "--kind", "topic", "imu", "--history", "8"], &imu_flags()));
    r.ok(&[
        "pub",
        "--domain",
        "d",
        "imu",
        "--data",
        "{header: {frame_id: base_link}, linear_acceleration: {x: 1.5, z: -9.81}}",
    ]);
    r.ok_stdin(&["pub", "--domain", "d", "imu"], "{angular_velocity: {y: 0.25}}\n");
    let out = r.ok(&["sub", "--domain", "d", "imu", "--from", "1", "--count", "2"]);
    let msgs = json_lines(&out);
    assert_eq!(msgs[0]["header"]["frame_id"], json!("base_link"), "{out}");
    assert_eq!(msgs[0]["linear_acceleration"], json!({"x": 1.5, "y": 0.0, "z": -9.81}), "{out}");
    assert_eq!(msgs[1]["angular_velocity"]["y"], json!(0.25), "{out}");
    // YAML that names a field the schema lacks is refused like JSON that does.
    let out = r.run(&["pub", "--domain", "d", "imu", "--data", "{linear_acceleration: {w: 1}}"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(one_error_line(&out).starts_with("shmbus: --data: linear_acceleration.w"), "{}", one_error_line(&out));
}
