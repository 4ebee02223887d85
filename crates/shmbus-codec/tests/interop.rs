//! Interop with codecs shmbus did not write, through real Python processes: rosbags for CDR
//! with ros2msg schemas, Google's protobuf package for protobuf. The Python side runs in the
//! scratch virtualenv that `scripts/interop-venv.sh` makes (`make interop-venv`); without it
//! these tests skip with a reason, unless `SHMBUS_REQUIRE_INTEROP=1`, when they fail.

#[path = "../../../tests/support/interop.rs"]
mod interop;
#[path = "../../../tests/support/python_json.rs"]
mod python_json;

use serde_json::{json, Value};
use shmbus_codec::{Codec, DecodeOptions};

const FULL: DecodeOptions = DecodeOptions { full: true };

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() <= 1e-6 * b.abs().max(1.0))
}

const ROSBAGS_IMU: &str = r#"
import json, sys
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
text, _ = ts.generate_msgdef('sensor_msgs/msg/Imu', ros_version=2)
print(json.dumps({
    'schema': text,
    'le': bytes(ts.serialize_cdr(msg, 'sensor_msgs/msg/Imu', little_endian=True)).hex(),
    'be': bytes(ts.serialize_cdr(msg, 'sensor_msgs/msg/Imu', little_endian=False)).hex(),
}))
"#;

#[test]
fn rosbags_imu_decodes_with_the_right_values() {
    let Some(py) = interop::python() else { return };
    let out = python_json::run(&py, ROSBAGS_IMU, "");
    let schema = out["schema"].as_str().unwrap();
    let codec = Codec::new("cdr", "sensor_msgs/msg/Imu", "ros2msg", schema.as_bytes())
        .unwrap_or_else(|e| panic!("{e}\n{schema}"));
    for key in ["le", "be"] {
        let v = codec.decode(&unhex(out[key].as_str().unwrap()), &FULL).unwrap();
        assert_eq!(v["header"]["stamp"], json!({"sec": 42, "nanosec": 7}), "{key}");
        assert_eq!(v["header"]["frame_id"], json!("imu_link"));
        assert_eq!(v["orientation"], json!({"x": 0.1, "y": 0.2, "z": 0.3, "w": 0.9}));
        assert_eq!(v["orientation_covariance"], json!([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]));
        assert_eq!(v["angular_velocity"], json!({"x": 1.5, "y": -2.5, "z": 3.5}));
        assert_eq!(v["linear_acceleration"]["y"], json!(9.81));
        assert_eq!(v["linear_acceleration_covariance"], json!(vec![0.5; 9]));
    }
}

const ROSBAGS_READ_IMU: &str = r#"
import json, sys
from rosbags.typesys import Stores, get_typestore
ts = get_typestore(Stores.ROS2_HUMBLE)
m = ts.deserialize_cdr(bytes.fromhex(sys.stdin.read().strip()), 'sensor_msgs/msg/Imu')
print(json.dumps({
    'stamp': [m.header.stamp.sec, m.header.stamp.nanosec],
    'frame_id': m.header.frame_id,
    'orientation': [m.orientation.x, m.orientation.y, m.orientation.z, m.orientation.w],
    'orientation_covariance': m.orientation_covariance.tolist(),
    'linear_acceleration': [m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z],
}))
"#;

#[test]
fn our_imu_encoding_reads_back_in_rosbags() {
    let Some(py) = interop::python() else { return };
    let schema = python_json::run(
        &py,
        "import json\nfrom rosbags.typesys import Stores, get_typestore\n\
         print(json.dumps(get_typestore(Stores.ROS2_HUMBLE).generate_msgdef('sensor_msgs/msg/Imu', ros_version=2)[0]))",
        "",
    );
    let codec = Codec::new("cdr", "sensor_msgs/msg/Imu", "ros2msg", schema.as_str().unwrap().as_bytes()).unwrap();
    // Missing fields (angular_velocity, two covariances) take zero.
    let bytes = codec
        .encode(&json!({
            "header": {"stamp": {"sec": 1700000000, "nanosec": 999}, "frame_id": "base"},
            "orientation": {"x": 0.5, "y": -0.5, "z": 0.25, "w": 1.0},
            "orientation_covariance": [1, 2, 3, 4, 5, 6, 7, 8, 9.5],
            "linear_acceleration": {"x": 0.1, "y": 9.81, "z": -3.0},
        }))
        .unwrap();
    let got = python_json::run(&py, ROSBAGS_READ_IMU, &hex(&bytes));
    assert_eq!(got["stamp"], json!([1700000000, 999]));
    assert_eq!(got["frame_id"], json!("base"));
    assert_eq!(got["orientation"], json!([0.5, -0.5, 0.25, 1.0]));
    assert_eq!(got["orientation_covariance"], json!([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.5]));
    assert_eq!(got["linear_acceleration"], json!([0.1, 9.81, -3.0]));
}

/// A custom definition with the awkward cases: alignment after small fields, bounded and
/// unbounded sequences, bounded strings, a sequence of nested structs, constants, defaults.
const CUSTOM: &str = "\
uint8 MODE_A=1
std_msgs/Header header
int8 small -3
uint16[<=4] bounded
string<=8 name
float32[3] xyz
bool flag
int64[] big
string[] tags
demo_msgs/Point2[] points
uint8[] blob
float64 tail 2.5
";
const POINT2: &str = "float64 x\nuint8 id\n";

const ROSBAGS_CUSTOM: &str = r#"
import json, sys
import numpy as np
from rosbags.typesys import Stores, get_typestore, get_types_from_msg
inp = json.loads(sys.stdin.read())
ts = get_typestore(Stores.ROS2_HUMBLE)
types = {}
types.update(get_types_from_msg(inp['custom'], 'demo_msgs/msg/Custom'))
types.update(get_types_from_msg(inp['point'], 'demo_msgs/msg/Point2'))
ts.register(types)
T = ts.types
if inp['mode'] == 'write':
    P = T['demo_msgs/msg/Point2']
    msg = T['demo_msgs/msg/Custom'](
        header=T['std_msgs/msg/Header'](stamp=T['builtin_interfaces/msg/Time'](sec=-5, nanosec=6), frame_id='f'),
        small=-100, bounded=np.array([1, 65535], dtype=np.uint16), name='abcdefgh',
        xyz=np.array([0.5, -1.25, 3.0], dtype=np.float32), flag=True,
        big=np.array([-(2**63), 2**63 - 1], dtype=np.int64), tags=['x', '', 'yz'],
        points=[P(x=1.5, id=7), P(x=-2.0, id=255)], blob=np.arange(100, dtype=np.uint8), tail=0.125)
    print(json.dumps({'cdr': bytes(ts.serialize_cdr(msg, 'demo_msgs/msg/Custom')).hex()}))
else:
    m = ts.deserialize_cdr(bytes.fromhex(inp['cdr']), 'demo_msgs/msg/Custom')
    print(json.dumps({
        'stamp': [m.header.stamp.sec, m.header.stamp.nanosec], 'small': m.small,
        'bounded': m.bounded.tolist(), 'name': m.name, 'xyz': m.xyz.tolist(), 'flag': m.flag,
        'big': m.big.tolist(), 'tags': m.tags, 'points': [[p.x, p.id] for p in m.points],
        'blob': m.blob.tolist(), 'tail': m.tail,
    }))
"#;

fn custom_codec() -> Codec {
    let sep = "=".repeat(80);
    let schema = format!("{CUSTOM}{sep}\nMSG: demo_msgs/Point2\n{POINT2}");
    Codec::new("cdr", "demo_msgs/msg/Custom", "ros2msg", schema.as_bytes()).unwrap()
}

#[test]
fn rosbags_custom_definition_decodes() {
    let Some(py) = interop::python() else { return };
    let input = json!({"mode": "write", "custom": CUSTOM, "point": POINT2}).to_string();
    let out = python_json::run(&py, ROSBAGS_CUSTOM, &input);
    let bytes = unhex(out["cdr"].as_str().unwrap());
    let v = custom_codec().decode(&bytes, &FULL).unwrap();
    assert_eq!(v["header"]["stamp"], json!({"sec": -5, "nanosec": 6}));
    assert_eq!(v["small"], json!(-100));
    assert_eq!(v["bounded"], json!([1, 65535]));
    assert_eq!(v["name"], json!("abcdefgh"));
    assert_eq!(v["xyz"], json!([0.5, -1.25, 3.0]));
    assert_eq!(v["flag"], json!(true));
    assert_eq!(v["big"], json!([i64::MIN, i64::MAX]));
    assert_eq!(v["tags"], json!(["x", "", "yz"]));
    assert_eq!(v["points"], json!([{"x": 1.5, "id": 7}, {"x": -2.0, "id": 255}]));
    assert_eq!(v["blob"], json!((0..100).collect::<Vec<u8>>()));
    assert_eq!(v["tail"], json!(0.125));
    let short = custom_codec().decode(&bytes, &DecodeOptions::default()).unwrap();
    assert_eq!(short["blob"], json!("<100 bytes>"));
}

#[test]
fn our_custom_encoding_reads_back_in_rosbags() {
    let Some(py) = interop::python() else { return };
    // `small` and `tail` are missing: their declared defaults (-3, 2.5) are written.
    let bytes = custom_codec()
        .encode(&json!({
            "header": {"stamp": {"sec": 3, "nanosec": 4}, "frame_id": "odom"},
            "bounded": [9, 8, 7], "name": "n", "xyz": [0.1, 0.2, 0.3], "flag": true,
            "big": [1, -1], "tags": ["a", "bc"], "points": [{"x": 0.5, "id": 1}],
            "blob": [1, 2, 3],
        }))
        .unwrap();
    let input = json!({"mode": "read", "custom": CUSTOM, "point": POINT2, "cdr": hex(&bytes)});
    let got = python_json::run(&py, ROSBAGS_CUSTOM, &input.to_string());
    assert_eq!(got["stamp"], json!([3, 4]));
    assert_eq!(got["small"], json!(-3));
    assert_eq!(got["bounded"], json!([9, 8, 7]));
    assert_eq!(got["name"], json!("n"));
    let xyz = got["xyz"].as_array().unwrap();
    assert!(close(&xyz[0], 0.1) && close(&xyz[1], 0.2) && close(&xyz[2], 0.3), "{xyz:?}");
    assert_eq!(got["flag"], json!(true));
    assert_eq!(got["big"], json!([1, -1]));
    assert_eq!(got["tags"], json!(["a", "bc"]));
    assert_eq!(got["points"], json!([[0.5, 1]]));
    assert_eq!(got["blob"], json!([1, 2, 3]));
    assert_eq!(got["tail"], json!(2.5));
}

/// Builds a FileDescriptorSet with descriptor_pb2 and a message class from it.
const PROTOBUF_SETUP: &str = r#"
import json, sys
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
F = descriptor_pb2.FieldDescriptorProto
fd = descriptor_pb2.FileDescriptorProto(name='demo/imu.proto', package='demo', syntax='proto3')
vec = fd.message_type.add(name='Vector3')
for i, n in enumerate(['x', 'y', 'z']):
    vec.field.add(name=n, number=i + 1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
imu = fd.message_type.add(name='Imu')
imu.field.add(name='frame_id', number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
imu.field.add(name='stamp_ns', number=2, type=F.TYPE_UINT64, label=F.LABEL_OPTIONAL)
imu.field.add(name='linear_acceleration', number=3, type=F.TYPE_MESSAGE, type_name='.demo.Vector3', label=F.LABEL_OPTIONAL)
imu.field.add(name='samples', number=4, type=F.TYPE_FLOAT, label=F.LABEL_REPEATED)
imu.field.add(name='blob', number=5, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
imu.field.add(name='count', number=6, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
fds = descriptor_pb2.FileDescriptorSet(file=[fd])
pool = descriptor_pool.DescriptorPool()
pool.Add(fd)
Imu = message_factory.GetMessageClass(pool.FindMessageTypeByName('demo.Imu'))
"#;

const PROTOBUF_WRITE: &str = r#"
m = Imu(frame_id='imu', stamp_ns=2**63 + 5, count=-7, samples=[0.5, 1.5], blob=bytes(range(100)))
m.linear_acceleration.x = 1.0
m.linear_acceleration.y = -9.81
print(json.dumps({'fds': fds.SerializeToString().hex(), 'msg': m.SerializeToString().hex()}))
"#;

const PROTOBUF_READ: &str = r#"
m = Imu()
m.ParseFromString(bytes.fromhex(sys.stdin.read().strip()))
print(json.dumps({'frame_id': m.frame_id, 'stamp_ns': m.stamp_ns, 'count': m.count,
    'samples': list(m.samples), 'blob': list(m.blob),
    'acc': [m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z]}))
"#;

#[test]
fn protobuf_interop_both_ways() {
    let Some(py) = interop::python() else { return };
    let out = python_json::run(&py, &format!("{PROTOBUF_SETUP}{PROTOBUF_WRITE}"), "");
    let fds = unhex(out["fds"].as_str().unwrap());
    let codec = Codec::new("protobuf", "demo.Imu", "protobuf", &fds).unwrap();
    let v = codec.decode(&unhex(out["msg"].as_str().unwrap()), &FULL).unwrap();
    assert_eq!(v["frameId"], json!("imu"));
    assert_eq!(v["stampNs"], json!(9223372036854775813u64));
    assert_eq!(v["count"], json!(-7));
    assert_eq!(v["samples"], json!([0.5, 1.5]));
    assert_eq!(v["linearAcceleration"]["y"], json!(-9.81));
    assert!(v["blob"].as_str().is_some_and(|b64| b64.len() > 100), "{v}");
    let short = codec.decode(&unhex(out["msg"].as_str().unwrap()), &DecodeOptions::default()).unwrap();
    assert_eq!(short["blob"], json!("<100 bytes>"));

    let bytes = codec
        .encode(&json!({
            "frameId": "base", "stampNs": 12345678901234u64, "count": 3,
            "samples": [2.0, -0.25], "blob": "AQID",
            "linearAcceleration": {"x": 0.5, "z": 4.0},
        }))
        .unwrap();
    let got = python_json::run(&py, &format!("{PROTOBUF_SETUP}{PROTOBUF_READ}"), &hex(&bytes));
    assert_eq!(got["frame_id"], json!("base"));
    assert_eq!(got["stamp_ns"], json!(12345678901234u64));
    assert_eq!(got["count"], json!(3));
    assert_eq!(got["samples"], json!([2.0, -0.25]));
    assert_eq!(got["blob"], json!([1, 2, 3]));
    assert_eq!(got["acc"], json!([0.5, 0.0, 4.0]));

    let e = codec.encode(&json!({"linearAcceleration": {"w": 1}})).unwrap_err();
    assert!(matches!(&e, shmbus_codec::EncodeError::UnknownField { path } if path == "linearAcceleration.w"), "{e:?}");
    let e = codec.encode(&json!({"count": "abc"})).unwrap_err();
    assert!(matches!(e, shmbus_codec::EncodeError::WrongType { .. }), "{e:?}");
    assert_eq!(e.to_string(), "count: expected an integer, found \"abc\"");
    let e = codec.encode(&json!({"samples": [1.0, true]})).unwrap_err();
    assert!(matches!(e, shmbus_codec::EncodeError::WrongType { .. }), "{e:?}");
    assert!(e.to_string().starts_with("samples[1]: "), "{e}");
    let e = codec.encode(&json!({"count": 5000000000u64})).unwrap_err();
    assert!(matches!(e, shmbus_codec::EncodeError::OutOfRange { .. }), "{e:?}");
}
