//! A `#[derive(shmbus::Pod)]` struct published from Rust is decoded by `shmbus sub`: the
//! typed config stores the struct's `shmbus-pod` layout as the channel's schema, and the CLI
//! prints each message as its fields (nested structs and arrays included), and encodes a
//! JSON line into the same bytes.

mod common;

use common::{json_lines, Root};
use serde_json::json;
use shmbus::topic::{Topic, TopicConfig};

#[derive(Debug, Clone, Copy, PartialEq, shmbus::Pod)]
#[repr(C)]
struct Pose {
    xyz: [f64; 3],
    frame: u32,
    _pad: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, shmbus::Pod)]
#[repr(C)]
struct Imu {
    t_ns: u64,
    accel: [f32; 3],
    gyro: [f32; 3],
    pose: Pose,
    grid: [[i16; 2]; 2],
}

#[test]
fn a_derived_struct_published_from_rust_decodes_in_sub_and_encodes_in_pub() {
    let r = Root::new();
    let d = shmbus::Domain::with_root("robot", &r.0).unwrap();
    let topic = Topic::create_or_open(&d, "imu", &TopicConfig::for_type::<Imu>().history(8)).unwrap();
    let mut publisher = topic.publisher_of::<Imu>().unwrap();
    let sent = Imu {
        t_ns: 1_700_000_000_123,
        accel: [0.5, -1.25, 9.75],
        gyro: [0.0, 0.125, -2.0],
        pose: Pose { xyz: [1.5, 2.5, -3.0], frame: 7, _pad: 0 },
        grid: [[1, -2], [300, -32768]],
    };
    publisher.send(&sent).unwrap();

    let info = r.ok(&["info", "--domain", "robot", "imu"]);
    assert!(info.contains("shmbus-pod"), "{info}");
    let out = r.ok(&["sub", "--domain", "robot", "imu", "--from", "1", "--count", "1"]);
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 1, "{out}");
    assert_eq!(
        lines[0],
        json!({
            "t_ns": 1_700_000_000_123u64,
            "accel": [0.5, -1.25, 9.75],
            "gyro": [0.0, 0.125, -2.0],
            "pose": {"xyz": [1.5, 2.5, -3.0], "frame": 7, "_pad": 0},
            "grid": [[1, -2], [300, -32768]],
        }),
        "{out}"
    );

    // And back: a JSON line encoded by the layout is the struct a typed subscriber reads.
    let sub = topic.subscriber_of::<Imu>().unwrap();
    let line = r#"{"t_ns": 42, "accel": [1, 2, 3], "gyro": [0, 0, 0], "pose": {"xyz": [0, 0, 1], "frame": 2, "_pad": 0}, "grid": [[0, 0], [0, 1]]}"#;
    r.ok(&["pub", "--domain", "robot", "imu", "--data", line]);
    let got = sub.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
    assert_eq!(
        got,
        Imu {
            t_ns: 42,
            accel: [1.0, 2.0, 3.0],
            gyro: [0.0; 3],
            pose: Pose { xyz: [0.0, 0.0, 1.0], frame: 2, _pad: 0 },
            grid: [[0, 0], [0, 1]],
        }
    );
}
