//! `shmbus snapshot`: the newest message of an image topic as a PNG file, checked with pypng
//! (a PNG decoder nobody here wrote) in the scratch virtualenv of `scripts/interop-venv.sh`.
//! Images are published by `shmbus pub` from JSON (`sensor_msgs/msg/Image`, CDR) or encoded
//! by Python's protobuf (`foxglove.RawImage`); real `shmbus` processes on real topics.
//!
//! The tests that decode PNG files skip with a reason when the virtualenv is missing, unless
//! `SHMBUS_REQUIRE_INTEROP=1`, when they fail. No assertion on a time.

mod common;

#[path = "../../../tests/support/interop.rs"]
mod interop;
#[path = "../../../tests/support/python_json.rs"]
mod python_json;

use std::path::{Path, PathBuf};

use common::{one_error_line, Root};
use serde_json::{json, Value};

// `sensor_msgs/msg/Image` with its dependencies, as ros2msg schema data: the demo camera's.
use shmbus_profile::camera::IMAGE_MSG;

/// Decodes the PNG file named on stdin with pypng: its size, channels, depth and rows.
const PYPNG_READ: &str = r#"
import json, sys, png
w, h, rows, info = png.Reader(filename=sys.stdin.read().strip()).read()
print(json.dumps({'width': w, 'height': h, 'planes': info['planes'], 'bitdepth': info['bitdepth'],
                  'greyscale': info['greyscale'], 'alpha': info['alpha'], 'rows': [list(r) for r in rows]}))
"#;

/// A foxglove.RawImage descriptor (its image fields) and one 3x2 rgb8 message with a
/// padded step, both made by Python's protobuf, as hex.
const PROTOBUF_RAW_IMAGE: &str = r#"
import json
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
F = descriptor_pb2.FieldDescriptorProto
fdp = descriptor_pb2.FileDescriptorProto(name='foxglove/RawImage.proto', package='foxglove', syntax='proto3')
m = fdp.message_type.add(name='RawImage')
for name, number, kind in [('frame_id', 7, F.TYPE_STRING), ('width', 2, F.TYPE_FIXED32),
                           ('height', 3, F.TYPE_FIXED32), ('encoding', 4, F.TYPE_STRING),
                           ('step', 5, F.TYPE_FIXED32), ('data', 6, F.TYPE_BYTES)]:
    m.field.add(name=name, number=number, type=kind, label=F.LABEL_OPTIONAL)
pool = descriptor_pool.DescriptorPool()
pool.Add(fdp)
cls = message_factory.GetMessageClass(pool.FindMessageTypeByName('foxglove.RawImage'))
msg = cls(frame_id='cam', width=3, height=2, encoding='bgr8', step=10,
          data=bytes([1, 2, 3, 4, 5, 6, 7, 8, 9, 0xEE, 11, 12, 13, 14, 15, 16, 17, 18, 19, 0xEE]))
fds = descriptor_pb2.FileDescriptorSet(file=[fdp])
print(json.dumps({'schema': fds.SerializeToString().hex(), 'msg': msg.SerializeToString().hex()}))
"#;

/// Creates topic `name` in domain `d` with the sensor_msgs/msg/Image schema.
fn image_topic(r: &Root, name: &str) {
    let schema = r.0.join("Image.msg");
    std::fs::write(&schema, IMAGE_MSG).unwrap();
    r.ok(&[
        "create",
        "--domain",
        "d",
        "--kind",
        "topic",
        name,
        "--slot-size",
        "4096",
        "--message-encoding",
        "cdr",
        "--schema-name",
        "sensor_msgs/msg/Image",
        "--schema-encoding",
        "ros2msg",
        "--schema-file",
        schema.to_str().unwrap(),
    ]);
}

/// An image message with these fields (stamp 1.2 s, frame_id `cam`), as JSON.
fn image(width: u32, height: u32, encoding: &str, big_endian: bool, step: u32, data: &[u8]) -> Value {
    json!({
        "header": {"stamp": {"sec": 1, "nanosec": 2}, "frame_id": "cam"},
        "height": height, "width": width, "encoding": encoding,
        "is_bigendian": u8::from(big_endian), "step": step, "data": data,
    })
}

/// Publishes one message on `name`, from JSON.
fn publish(r: &Root, name: &str, msg: Value) {
    r.ok(&["pub", "--domain", "d", name, "--data", &msg.to_string()]);
}

/// `shmbus snapshot` of `name` into a file of the scratch root; the file's path.
fn snapshot(r: &Root, name: &str) -> PathBuf {
    let out = r.0.join(format!("{name}.png"));
    let said = r.ok(&["snapshot", "--domain", "d", name, "--out", out.to_str().unwrap()]);
    assert!(said.starts_with(&format!("wrote {}: ", out.display())), "{said}");
    out
}

/// The PNG file decoded by pypng.
fn decode(py: &Path, png: &Path) -> Value {
    python_json::run(py, PYPNG_READ, png.to_str().unwrap())
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn rgb8_with_row_padding_is_its_pixels() {
    let Some(py) = interop::python() else { return };
    let r = Root::new();
    image_topic(&r, "cam");
    // 3x2 rgb8, each row padded from 9 to 12 bytes with bytes that must not show.
    let mut data = Vec::new();
    for y in 0..2u8 {
        data.extend((0..9).map(|i| 10 * y + i));
        data.extend([0xEE; 3]);
    }
    publish(&r, "cam", image(3, 2, "rgb8", false, 12, &data));
    let v = decode(&py, &snapshot(&r, "cam"));
    assert_eq!((v["width"].as_u64(), v["height"].as_u64()), (Some(3), Some(2)), "{v}");
    assert_eq!(
        (v["planes"].as_u64(), v["bitdepth"].as_u64(), &v["greyscale"], &v["alpha"]),
        (Some(3), Some(8), &json!(false), &json!(false))
    );
    assert_eq!(v["rows"], json!([[0, 1, 2, 3, 4, 5, 6, 7, 8], [10, 11, 12, 13, 14, 15, 16, 17, 18]]));
}

#[test]
fn bgr8_and_bgra8_come_out_as_rgb() {
    let Some(py) = interop::python() else { return };
    let r = Root::new();
    image_topic(&r, "bgr");
    publish(&r, "bgr", image(2, 1, "bgr8", false, 6, &[1, 2, 3, 4, 5, 6]));
    let v = decode(&py, &snapshot(&r, "bgr"));
    assert_eq!(v["rows"], json!([[3, 2, 1, 6, 5, 4]]), "{v}");
    image_topic(&r, "bgra");
    publish(&r, "bgra", image(1, 2, "bgra8", false, 4, &[1, 2, 3, 4, 5, 6, 7, 8]));
    let v = decode(&py, &snapshot(&r, "bgra"));
    assert_eq!((v["planes"].as_u64(), &v["alpha"]), (Some(4), &json!(true)), "{v}");
    assert_eq!(v["rows"], json!([[3, 2, 1, 4], [7, 6, 5, 8]]), "{v}");
}

#[test]
fn mono8_and_mono16_of_either_byte_order_are_grey() {
    let Some(py) = interop::python() else { return };
    let r = Root::new();
    image_topic(&r, "m8");
    publish(&r, "m8", image(4, 3, "mono8", false, 4, &(0..12).map(|i| i * 20).collect::<Vec<u8>>()));
    let v = decode(&py, &snapshot(&r, "m8"));
    assert_eq!((v["width"].as_u64(), v["height"].as_u64(), v["planes"].as_u64()), (Some(4), Some(3), Some(1)), "{v}");
    assert_eq!((&v["greyscale"], v["bitdepth"].as_u64()), (&json!(true), Some(8)), "{v}");
    assert_eq!(v["rows"], json!([[0, 20, 40, 60], [80, 100, 120, 140], [160, 180, 200, 220]]));

    let values = [0x1234u16, 65535, 1, 256];
    image_topic(&r, "m16le");
    let le: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    publish(&r, "m16le", image(2, 2, "mono16", false, 4, &le));
    image_topic(&r, "m16be");
    let be: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
    publish(&r, "m16be", image(2, 2, "mono16", true, 4, &be));
    for name in ["m16le", "m16be"] {
        let v = decode(&py, &snapshot(&r, name));
        assert_eq!((&v["greyscale"], v["bitdepth"].as_u64()), (&json!(true), Some(16)), "{name}: {v}");
        assert_eq!(v["rows"], json!([[0x1234, 65535], [1, 256]]), "{name}");
    }
}

#[test]
fn a_foxglove_raw_image_in_protobuf_is_its_pixels() {
    let Some(py) = interop::python() else { return };
    let r = Root::new();
    let made = python_json::run(&py, PROTOBUF_RAW_IMAGE, "");
    let schema = r.0.join("RawImage.desc");
    std::fs::write(&schema, hex(made["schema"].as_str().unwrap())).unwrap();
    r.ok(&[
        "create",
        "--domain",
        "d",
        "--kind",
        "topic",
        "raw",
        "--message-encoding",
        "protobuf",
        "--schema-name",
        "foxglove.RawImage",
        "--schema-encoding",
        "protobuf",
        "--schema-file",
        schema.to_str().unwrap(),
    ]);
    r.ok(&["pub", "--domain", "d", "raw", "--format", "hex", "--data", made["msg"].as_str().unwrap()]);
    let v = decode(&py, &snapshot(&r, "raw"));
    assert_eq!((v["width"].as_u64(), v["height"].as_u64(), v["planes"].as_u64()), (Some(3), Some(2), Some(3)), "{v}");
    assert_eq!(v["rows"], json!([[3, 2, 1, 6, 5, 4, 9, 8, 7], [13, 12, 11, 16, 15, 14, 19, 18, 17]]));
}

#[test]
fn bad_images_are_one_clear_line_and_no_file() {
    let r = Root::new();
    let cases: [(&str, u32, u32, &str, u32, usize, &str); 4] = [
        ("short", 4, 4, "rgb8", 12, 47, "data is 47 bytes, too short for 4 rows of step 12"),
        ("yuv", 2, 2, "yuv422", 4, 8, "pixel encoding \"yuv422\" is not one snapshot writes"),
        ("step", 4, 2, "rgb8", 11, 22, "step 11 is less than a row of 4 rgb8 pixels (12 bytes)"),
        ("empty", 0, 3, "mono8", 0, 0, "the image is empty (0x3)"),
    ];
    for (name, w, h, enc, step, len, want) in cases {
        image_topic(&r, name);
        publish(&r, name, image(w, h, enc, false, step, &vec![7; len]));
        let out = r.0.join(format!("{name}.png"));
        let o = r.run(&["snapshot", "--domain", "d", name, "--out", out.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        let line = one_error_line(&o);
        assert!(line.starts_with(&format!("shmbus: message 1 of d/{name}: ")) && line.contains(want), "{name}: {line}");
        assert!(!out.exists(), "{name}: a file was written");
    }
    // A message cut short inside its fields.
    image_topic(&r, "cut");
    r.ok(&["pub", "--domain", "d", "cut", "--format", "hex", "--data", "000100000100000002000000"]);
    let line = r.fails(&["snapshot", "--domain", "d", "cut", "--out", r.0.join("cut.png").to_str().unwrap()]);
    assert!(line.contains("the message ends inside header.frame_id"), "{line}");
}

#[test]
fn a_topic_that_is_not_an_image_is_a_usage_error() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "plain", "--data", "hello"]);
    let out = r.0.join("plain.png");
    let o = r.run(&["snapshot", "--domain", "d", "plain", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(one_error_line(&o).contains("topic plain has no schema: snapshot reads sensor_msgs/msg/Image (cdr)"));
}

#[test]
fn without_a_message_it_fails_or_waits_for_one() {
    let Some(py) = interop::python() else { return };
    let r = Root::new();
    image_topic(&r, "cam");
    let out = r.0.join("cam.png");
    let line = r.fails(&["snapshot", "--domain", "d", "cam", "--out", out.to_str().unwrap()]);
    assert_eq!(line, "shmbus: no message on d/cam yet; publish one, or pass --wait SECS to wait for it");
    // Waiting: for the topic to exist (it does not yet) and then for its first message.
    let waiting =
        r.spawn(&["snapshot", "--domain", "d", "later", "--wait", "60", "--out", out.to_str().unwrap(), "--json"]);
    image_topic(&r, "later");
    publish(&r, "later", image(1, 1, "mono8", false, 1, &[42]));
    let printed: Value = serde_json::from_str(&waiting.finish_ok()).unwrap();
    assert_eq!(
        (printed["seq"].as_u64(), printed["width"].as_u64(), &printed["encoding"]),
        (Some(1), Some(1), &json!("mono8"))
    );
    assert_eq!(decode(&py, &out)["rows"], json!([[42]]));
}
