//! MCAP interop with the format's official Python implementation, through real processes:
//! files shmbus writes read by `mcap` (and a CDR topic decoded by `mcap-ros2-support`), and
//! a file `mcap`'s writer makes read by shmbus. The Python side runs in the scratch
//! virtualenv that `scripts/interop-venv.sh` makes (`make interop-venv`); without it these
//! tests skip with a reason, unless `SHMBUS_REQUIRE_INTEROP=1`, when they fail.

#[path = "../../../tests/support/interop.rs"]
mod interop;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use shmbus::Schema;
use shmbus_record::{read_info, Compression, McapMessages, McapOptions, McapWriter};

/// Runs `script` with `args`; its stdout parsed as JSON.
fn run(py: &Path, script: &str, args: &[&Path]) -> Value {
    let out = Command::new(py).arg("-c").arg(script).args(args).output().expect("start python");
    assert!(out.status.success(), "python failed: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("python printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("shmbus-record-interop-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const IMU_MSG: &str = "float64 x\nint32 y\nstring name\n";

/// A `demo_msgs/msg/Imu` message in CDR (little-endian), by hand: the encapsulation header,
/// `x` at 0, `y` at 8, then the string as a u32 length with its NUL, then its bytes.
fn imu_cdr(x: f64, y: i32, name: &str) -> Vec<u8> {
    let mut b = vec![0x00, 0x01, 0x00, 0x00];
    b.extend_from_slice(&x.to_le_bytes());
    b.extend_from_slice(&y.to_le_bytes());
    b.extend_from_slice(&(name.len() as u32 + 1).to_le_bytes());
    b.extend_from_slice(name.as_bytes());
    b.push(0);
    b
}

const READ_SCRIPT: &str = r#"
import json, sys
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

with open(sys.argv[1], "rb") as f:
    reader = make_reader(f, decoder_factories=[DecoderFactory()])
    summary = reader.get_summary()
    channels = {}
    for cid, ch in summary.channels.items():
        s = summary.schemas.get(ch.schema_id)
        channels[ch.topic] = {
            "message_encoding": ch.message_encoding,
            "schema_id": ch.schema_id,
            "schema_name": s.name if s else None,
            "schema_encoding": s.encoding if s else None,
            "schema_data": s.data.hex() if s else None,
            "count": summary.statistics.channel_message_counts.get(cid, 0),
        }
    messages = []
    for schema, ch, m in reader.iter_messages(log_time_order=False):
        messages.append({"topic": ch.topic, "seq": m.sequence, "log": m.log_time,
                         "pub": m.publish_time, "data": m.data.hex()})
    decoded = []
    for d in reader.iter_decoded_messages(topics=["imu"], log_time_order=False):
        decoded.append({"x": d.decoded_message.x, "y": d.decoded_message.y, "name": d.decoded_message.name})
    indexed = all(len(ci.message_index_offsets) > 0 for ci in summary.chunk_indexes)
    # A time range is answered from the chunk and message indexes.
    late = sum(1 for _ in reader.iter_messages(starting_at=int(sys.argv[2])))
    print(json.dumps({"channels": channels, "total": summary.statistics.message_count,
                      "chunks": len(summary.chunk_indexes), "indexed": indexed, "late": late,
                      "messages": messages, "decoded": decoded}))
"#;

#[test]
fn python_reads_what_shmbus_writes() {
    let Some(py) = interop::python() else { return };
    let dir = scratch("read");
    let imu = Schema::new("cdr", "demo_msgs/msg/Imu", "ros2msg", IMU_MSG.as_bytes().to_vec()).unwrap();
    let json = Schema::new("json", "demo.Event", "jsonschema", br#"{"type":"object"}"#.to_vec()).unwrap();
    for compression in [Compression::Zstd, Compression::Lz4, Compression::None] {
        let path = dir.join(format!("{}.mcap", compression.name()));
        let mut w = McapWriter::create_with(&path, McapOptions { compression, chunk_size: 2048 }).unwrap();
        let off = w.clock_offset_ns();
        w.add_topic("imu", Some(&imu)).unwrap();
        w.add_topic("events", Some(&json)).unwrap();
        w.add_topic("raw", None).unwrap();
        let mut sent = Vec::new();
        for i in 0..300u64 {
            let (topic, payload) = match i % 3 {
                0 => ("imu", imu_cdr(i as f64 * 0.5, -(i as i32), &format!("imu-{i}"))),
                1 => ("events", format!(r#"{{"i":{i}}}"#).into_bytes()),
                _ => ("raw", vec![i as u8; (i % 50) as usize]),
            };
            let seq = 5 + i / 3;
            w.write(topic, seq, 10_000 + i, 20_000 + i, &payload).unwrap();
            sent.push((topic, seq, 10_000 + i + off, 20_000 + i + off, payload));
        }
        w.finish().unwrap();

        let from = PathBuf::from((20_000 + 200 + off).to_string());
        let v = run(&py, READ_SCRIPT, &[&path, &from]);
        assert_eq!(v["indexed"], true, "every chunk has its message indexes");
        assert_eq!(v["late"], 100, "messages logged at or after the 200th");
        let ch = &v["channels"];
        assert_eq!(ch["imu"]["message_encoding"], "cdr");
        assert_eq!(ch["imu"]["schema_name"], "demo_msgs/msg/Imu");
        assert_eq!(ch["imu"]["schema_encoding"], "ros2msg");
        assert_eq!(ch["imu"]["schema_data"], hex(IMU_MSG.as_bytes()));
        assert_eq!(ch["events"]["message_encoding"], "json");
        assert_eq!(ch["events"]["schema_encoding"], "jsonschema");
        assert_eq!(ch["raw"]["schema_id"], 0);
        assert_eq!(ch["raw"]["message_encoding"], "");
        assert_eq!(ch["raw"]["schema_name"], Value::Null);
        for t in ["imu", "events", "raw"] {
            assert_eq!(ch[t]["count"], 100, "count of {t}");
        }
        assert_eq!(v["total"], 300);
        assert!(v["chunks"].as_u64().unwrap() > 1, "chunk size 2048 makes several chunks: {}", v["chunks"]);
        let got = v["messages"].as_array().unwrap();
        assert_eq!(got.len(), sent.len());
        for (g, (topic, seq, publish, log, payload)) in got.iter().zip(&sent) {
            assert_eq!(g["topic"], *topic);
            assert_eq!(g["seq"], *seq);
            assert_eq!(g["pub"], *publish);
            assert_eq!(g["log"], *log);
            assert_eq!(g["data"], hex(payload));
        }
        let decoded = v["decoded"].as_array().unwrap();
        assert_eq!(decoded.len(), 100);
        for (k, d) in decoded.iter().enumerate() {
            let i = 3 * k as u64;
            assert_eq!(d["x"].as_f64().unwrap(), i as f64 * 0.5);
            assert_eq!(d["y"].as_i64().unwrap(), -(i as i64));
            assert_eq!(d["name"], format!("imu-{i}"));
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

const WRITE_SCRIPT: &str = r#"
import json, sys
from mcap.writer import Writer, CompressionType

with open(sys.argv[1], "wb") as f:
    w = Writer(f, chunk_size=1024, compression=CompressionType.LZ4)
    w.start(profile="", library="python-test")
    sid = w.register_schema("demo_msgs/msg/Imu", "ros2msg", b"float64 x\n")
    imu = w.register_channel("imu", "cdr", sid)
    raw = w.register_channel("raw", "", 0)
    for i in range(200):
        ch = imu if i % 2 == 0 else raw
        w.add_message(ch, log_time=1_700_000_000_000_000_000 + i, data=bytes([i % 256]) * (i % 7),
                      publish_time=1_600_000_000_000_000_000 + i, sequence=1000 + i)
    w.finish()
print(json.dumps({"ok": True}))
"#;

#[test]
fn shmbus_reads_what_python_writes() {
    let Some(py) = interop::python() else { return };
    let dir = scratch("write");
    let path = dir.join("py.mcap");
    assert_eq!(run(&py, WRITE_SCRIPT, &[&path])["ok"], true);

    let msgs: Vec<_> = McapMessages::open(&path).unwrap().map(Result::unwrap).collect();
    assert_eq!(msgs.len(), 200);
    let imu = Schema::new("cdr", "demo_msgs/msg/Imu", "ros2msg", b"float64 x\n".to_vec()).unwrap();
    for (i, m) in msgs.iter().enumerate() {
        let i64 = i as u64;
        assert_eq!(m.topic, if i % 2 == 0 { "imu" } else { "raw" });
        assert_eq!(m.schema.as_deref(), if i % 2 == 0 { Some(&imu) } else { None });
        assert_eq!(m.sequence, 1000 + i as u32);
        assert_eq!(m.log_ns, 1_700_000_000_000_000_000 + i64);
        assert_eq!(m.publish_ns, 1_600_000_000_000_000_000 + i64);
        assert_eq!(m.payload, vec![(i % 256) as u8; i % 7]);
    }
    let info = read_info(&path).unwrap();
    assert!(info.from_summary && info.complete);
    assert_eq!(info.messages, 200);
    assert_eq!(info.start_ns, Some(1_700_000_000_000_000_000));
    assert_eq!(info.duration_ns, 199);
    let topics: Vec<(&str, &str, u64)> =
        info.topics.iter().map(|t| (t.name.as_str(), t.schema_name.as_str(), t.messages)).collect();
    assert_eq!(topics, [("imu", "demo_msgs/msg/Imu", 100), ("raw", "", 100)]);
    std::fs::remove_dir_all(&dir).unwrap();
}
