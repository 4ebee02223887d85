//! `shmbus demo`: what its table comes with (a legend, rates achieved against those
//! configured, what each consumer received, failed publishes, the machine), and its camera,
//! whose frames are `sensor_msgs/msg/Image` messages that `shmbus sub` decodes, rosbags
//! deserialises and `shmbus snapshot` writes as a PNG file that pypng reads, taken from a
//! running demo by other `shmbus` processes.
//!
//! The rosbags and pypng checks run in the scratch virtualenv of `scripts/interop-venv.sh`;
//! they skip with a reason when it is missing, unless `SHMBUS_REQUIRE_INTEROP=1`, when they
//! fail. No assertion on a time.

mod common;

#[path = "../../../tests/support/interop.rs"]
mod interop;
#[path = "../../../tests/support/python_json.rs"]
mod python_json;

use common::{json_lines, Root};
use serde_json::{json, Value};

/// Deserialises one CDR message (hex on stdin) as sensor_msgs/msg/Image with rosbags.
const ROSBAGS_READ_IMAGE: &str = r#"
import json, sys
from rosbags.typesys import Stores, get_typestore
ts = get_typestore(Stores.ROS2_HUMBLE)
m = ts.deserialize_cdr(bytes.fromhex(sys.stdin.read().strip()), 'sensor_msgs/msg/Image')
data = bytes(m.data)
print(json.dumps({
    'frame_id': m.header.frame_id, 'sec': m.header.stamp.sec,
    'height': m.height, 'width': m.width, 'encoding': m.encoding,
    'is_bigendian': m.is_bigendian, 'step': m.step, 'len': len(data),
    'distinct_pixels': len({data[i:i + 3] for i in range(0, len(data), 3)}),
}))
"#;

/// The size of the PNG file named on stdin, and how many different pixels its first row has,
/// read with pypng.
const PYPNG_HEAD: &str = r#"
import json, sys, png
w, h, rows, info = png.Reader(filename=sys.stdin.read().strip()).read()
first = list(next(iter(rows)))
print(json.dumps({'width': w, 'height': h, 'planes': info['planes'],
                  'distinct': len({tuple(first[i:i + 3]) for i in range(0, len(first), 3)})}))
"#;

#[test]
fn the_table_comes_with_a_legend_rates_and_the_machine() {
    let r = Root::new();
    let out = r.ok(&["demo", "--seconds", "1", "--image-bytes", "1080"]);
    let table_end = out.find("\n\nColumns:\n").unwrap_or_else(|| panic!("no legend after the table:\n{out}"));
    assert!(out[..table_end].contains("ROLE") && out[..table_end].contains("producer  image =>"), "{out}");
    let notes = &out[table_end..];
    for want in [
        "  LATENCY OF  view: from the publish timestamp until the consumer holds the message",
        "view+copy: until it has also copied the payload out",
        "  MEAN P50 P99 MAX  mean, median, 99th percentile and slowest of the N messages measured",
        "Rates over 1 s, configured -> achieved:\n",
        "Received, of the messages published on the consumer's topics:\n",
        "Machine: ",
        "What a quiet machine gives: BENCHMARKS.md, \"The demo profile\".",
    ] {
        assert!(notes.contains(want), "no {want:?} in:\n{notes}");
    }
    let line = |start: &str| {
        notes.lines().find(|l| l.starts_with(start)).unwrap_or_else(|| panic!("no line {start:?} in:\n{notes}"))
    };
    assert!(line("  image ").contains(" 30 Hz -> "), "{notes}");
    assert!(line("  imu ").contains(" 1000 Hz -> "), "{notes}");
    assert!(line("  image+med01 ").contains(" of "), "{notes}");
    assert!(notes.contains("Failed publishes: none.") || notes.contains("Failed publishes: "), "{notes}");
    let cores = std::thread::available_parallelism().unwrap().get();
    assert!(line("Machine: ").starts_with(&format!("Machine: {cores} core(s), load average ")), "{notes}");
    // The first line names the camera's messages, header included.
    assert!(out.lines().next().unwrap().contains("image 1132 B (sensor_msgs/msg/Image 24x15 rgb8) @ 30 Hz"), "{out}");

    let v = r.json(&["demo", "--seconds", "0.5", "--image-bytes", "1080", "--json"]);
    assert_eq!(
        v["image"],
        json!({"schema": "sensor_msgs/msg/Image", "width": 24, "height": 15, "encoding": "rgb8", "message_bytes": 1132})
    );
    assert_eq!(v["machine"]["cores"].as_u64(), Some(cores as u64), "{v}");
    let image = v["producers"].as_array().unwrap().iter().find(|p| p["name"] == "image").unwrap();
    assert_eq!(image["rate_hz"].as_f64(), Some(30.0), "{image}");
    assert!(image["sent"].as_u64().unwrap() > 0, "{image}");
}

#[test]
fn a_running_demos_camera_frame_is_an_image_for_sub_rosbags_and_snapshot() {
    let r = Root::new();
    // The default frame, 1920x1080 rgb8, for long enough that the readers below find it
    // publishing.
    let mut demo = r.spawn(&["demo", "--seconds", "8"]);
    let domain = format!("demo-{}", demo.id());
    let read = |extra: &[&str]| {
        let mut args =
            vec!["sub", "--domain", &domain, "image", "--wait", "30", "--count", "1", "--timeout-ms", "30000"];
        args.extend(extra);
        r.ok(&args)
    };
    // Decoded by the topic's schema, the pixels summarised.
    let decoded = read(&[]);
    assert!(decoded.len() < 1000, "{}…", decoded.chars().take(300).collect::<String>());
    let msg = &json_lines(&decoded)[0];
    assert_eq!(msg["header"]["frame_id"], "camera", "{msg}");
    assert_eq!(
        (&msg["height"], &msg["width"], &msg["encoding"], &msg["is_bigendian"], &msg["step"], &msg["data"]),
        (&json!(1080), &json!(1920), &json!("rgb8"), &json!(0), &json!(5760), &json!("<6220800 bytes>")),
        "{msg}"
    );
    assert!(msg["header"]["stamp"]["sec"].as_i64().unwrap() > 1_600_000_000, "a wall-clock stamp: {msg}");

    let Some(py) = interop::python() else {
        demo.kill();
        return;
    };
    let hex = read(&["--format", "hex"]);
    let got: Value = python_json::run(&py, ROSBAGS_READ_IMAGE, &hex);
    assert_eq!(
        (
            &got["frame_id"],
            &got["height"],
            &got["width"],
            &got["encoding"],
            &got["is_bigendian"],
            &got["step"],
            &got["len"]
        ),
        (&json!("camera"), &json!(1080), &json!(1920), &json!("rgb8"), &json!(0), &json!(5760), &json!(6_220_800)),
        "{got}"
    );
    assert!(got["distinct_pixels"].as_u64().unwrap() > 100, "a picture, not a fill: {got}");

    let png = r.0.join("frame.png");
    r.ok(&["snapshot", "--domain", &domain, "image", "--wait", "30", "--out", png.to_str().unwrap()]);
    let v = python_json::run(&py, PYPNG_HEAD, png.to_str().unwrap());
    assert_eq!(
        (v["width"].as_u64(), v["height"].as_u64(), v["planes"].as_u64()),
        (Some(1920), Some(1080), Some(3)),
        "{v}"
    );
    assert!(v["distinct"].as_u64().unwrap() > 100, "{v}");
    let out = demo.finish_ok();
    assert!(out.contains("producer  image =>"), "{out}");
}
