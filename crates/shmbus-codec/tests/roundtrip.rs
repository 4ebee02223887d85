//! Round trips through every codec, the error classes of encode, and byte-array summaries.

use serde_json::{json, Value};
use shmbus_codec::{supported, Codec, CodecError, DecodeError, DecodeOptions, EncodeError};

const FULL: DecodeOptions = DecodeOptions { full: true };
const SHORT: DecodeOptions = DecodeOptions { full: false };

const IMU_MSG: &str = "\
# An IMU sample, with a comment
std_msgs/Header header
geometry_msgs/Quaternion orientation
float64[9] orientation_covariance # row major
geometry_msgs/Vector3 angular_velocity
float64[9] angular_velocity_covariance
geometry_msgs/Vector3 linear_acceleration
float64[9] linear_acceleration_covariance
================================================================================
MSG: geometry_msgs/Quaternion
float64 x 0
float64 y 0
float64 z 0
float64 w 1
================================================================================
MSG: geometry_msgs/Vector3
float64 x
float64 y
float64 z
";

fn imu() -> Codec {
    Codec::new("cdr", "sensor_msgs/msg/Imu", "ros2msg", IMU_MSG.as_bytes()).unwrap()
}

fn imu_value() -> Value {
    json!({
        "header": {"stamp": {"sec": 12, "nanosec": 345}, "frame_id": "imu_link"},
        "orientation": {"x": 0.0, "y": 0.5, "z": -0.5, "w": 0.25},
        "orientation_covariance": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        "angular_velocity": {"x": 0.1, "y": 0.2, "z": 0.3},
        "angular_velocity_covariance": vec![0.0; 9],
        "linear_acceleration": {"x": 9.81, "y": -1.5, "z": 1e-3},
        "linear_acceleration_covariance": vec![2.0; 9],
    })
}

#[test]
fn cdr_ros2msg_round_trip_with_implicit_header() {
    let codec = imu();
    let v = imu_value();
    let bytes = codec.encode(&v).unwrap();
    assert_eq!(&bytes[..4], &[0, 1, 0, 0], "little-endian CDR header");
    // header: sec(4) nanosec(4) frame_id len(4)+"imu_link\0"(9) = 21, pad to 24, then 4
    // quaternion float64s, 9 covariances, ...
    assert_eq!(bytes.len(), 4 + 24 + 8 * (4 + 9 + 3 + 9 + 3 + 9));
    assert_eq!(codec.decode(&bytes, &FULL).unwrap(), v);
}

#[test]
fn cdr_missing_fields_take_declared_and_zero_defaults() {
    let codec = imu();
    let bytes = codec.encode(&json!({"linear_acceleration": {"x": 1.0}})).unwrap();
    let v = codec.decode(&bytes, &FULL).unwrap();
    assert_eq!(v["orientation"], json!({"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}));
    assert_eq!(v["linear_acceleration"], json!({"x": 1.0, "y": 0.0, "z": 0.0}));
    assert_eq!(v["header"]["frame_id"], json!(""));
    assert_eq!(v["orientation_covariance"], json!(vec![0.0; 9]));
}

const ALL_TYPES: &str = "\
bool flag true
byte b
char c
int8 i8 -5
uint8 u8
int16 i16
uint16 u16
int32 i32 5
uint32 u32
int64 i64
uint64 u64
float32 f32 1.5
float64 f64
string s \"hello # not a comment\"
string<=5 bounded_s
wstring w
int32[3] fixed [1, 2, 3]
int32[<=3] bounded
int32[] unbounded
uint8[] data
string[] names [\"a\", 'b']
Inner[2] inners
Inner[] more
Empty nothing
builtin_interfaces/Time stamp
int32 CONSTANT=7
string TEXT_CONSTANT=a # b
================================================================================
MSG: demo/Inner
uint8 x
float64 y
================================================================================
MSG: demo/msg/Empty
";

fn all_types() -> Codec {
    Codec::new("cdr", "demo/msg/All", "ros2msg", ALL_TYPES.as_bytes()).unwrap()
}

#[test]
fn cdr_every_builtin_type_round_trips() {
    let codec = all_types();
    let v = json!({
        "flag": false, "b": 255, "c": 65, "i8": -128, "u8": 200, "i16": -30000, "u16": 65535,
        "i32": -2147483648i64, "u32": 4294967295u32, "i64": i64::MIN, "u64": u64::MAX,
        "f32": 0.1, "f64": -2.5e300, "s": "héllo", "bounded_s": "12345", "w": "wide ☃",
        "fixed": [7, 8, 9], "bounded": [1, 2], "unbounded": [], "data": [1, 2, 3],
        "names": ["x"], "inners": [{"x": 1, "y": 2.0}, {"x": 3, "y": 4.0}],
        "more": [{"x": 5, "y": 6.0}], "nothing": {}, "stamp": {"sec": -1, "nanosec": 2},
    });
    let bytes = codec.encode(&v).unwrap();
    assert_eq!(codec.decode(&bytes, &FULL).unwrap(), v);
}

#[test]
fn cdr_declared_defaults_apply_and_constants_are_not_fields() {
    let codec = all_types();
    let v = codec.decode(&codec.encode(&json!({})).unwrap(), &FULL).unwrap();
    assert_eq!(v["flag"], json!(true));
    assert_eq!(v["i8"], json!(-5));
    assert_eq!(v["i32"], json!(5));
    assert_eq!(v["f32"], json!(1.5));
    assert_eq!(v["s"], json!("hello # not a comment"));
    assert_eq!(v["fixed"], json!([1, 2, 3]));
    assert_eq!(v["names"], json!(["a", "b"]));
    assert_eq!(v["inners"], json!([{"x": 0, "y": 0.0}, {"x": 0, "y": 0.0}]));
    assert!(v.get("CONSTANT").is_none() && v.get("TEXT_CONSTANT").is_none());
}

#[test]
fn cdr_big_endian_messages_decode() {
    let codec = Codec::new("cdr", "demo/msg/P", "ros2msg", b"uint8 a\nint32 b\nfloat64 c\nstring s").unwrap();
    let mut be = vec![0, 0, 0, 0, 7, 0, 0, 0];
    be.extend_from_slice(&(-2i32).to_be_bytes());
    be.extend_from_slice(&1.25f64.to_be_bytes());
    be.extend_from_slice(&3u32.to_be_bytes());
    be.extend_from_slice(b"hi\0");
    assert_eq!(codec.decode(&be, &FULL).unwrap(), json!({"a": 7, "b": -2, "c": 1.25, "s": "hi"}));
}

#[test]
fn encode_errors_name_the_field_and_class() {
    let codec = imu();
    let e = codec.encode(&json!({"linear_acceleration": {"x": "abc"}})).unwrap_err();
    assert!(matches!(e, EncodeError::WrongType { .. }), "{e:?}");
    assert_eq!(e.to_string(), "linear_acceleration.x: expected a number, found \"abc\"");

    let e = codec.encode(&json!({"orientation": {"q": 1.0}})).unwrap_err();
    assert_eq!(e, EncodeError::UnknownField { path: "orientation.q".into() });

    let e = codec.encode(&json!({"orientation_covariance": [1.0]})).unwrap_err();
    assert!(matches!(e, EncodeError::WrongLength { expected: 9, found: 1, .. }), "{e:?}");
    assert!(e.to_string().starts_with("orientation_covariance: "), "{e}");

    let all = all_types();
    let e = all.encode(&json!({"u8": 300})).unwrap_err();
    assert!(matches!(&e, EncodeError::OutOfRange { path, .. } if path == "u8"), "{e:?}");
    let e = all.encode(&json!({"i8": -129})).unwrap_err();
    assert!(matches!(e, EncodeError::OutOfRange { .. }), "{e:?}");
    let e = all.encode(&json!({"bounded_s": "123456"})).unwrap_err();
    assert!(matches!(e, EncodeError::OutOfRange { .. }), "{e:?}");
    let e = all.encode(&json!({"bounded": [1, 2, 3, 4]})).unwrap_err();
    assert!(matches!(e, EncodeError::OutOfRange { .. }), "{e:?}");
    let e = all.encode(&json!({"inners": [{"x": 1}, {"x": 256}]})).unwrap_err();
    assert_eq!(e.to_string(), "inners[1].x: 256 does not fit uint8");
    let e = all.encode(&json!({"f32": 1e39})).unwrap_err();
    assert!(matches!(e, EncodeError::OutOfRange { .. }), "{e:?}");
    let e = all.encode(&json!({"u32": 1.5})).unwrap_err();
    assert!(matches!(e, EncodeError::WrongType { .. }), "{e:?}");
    let e = all.encode(&json!({"flag": 1})).unwrap_err();
    assert!(matches!(e, EncodeError::WrongType { .. }), "{e:?}");
    let e = all.encode(&json!([1])).unwrap_err();
    assert!(matches!(e, EncodeError::WrongType { .. }), "{e:?}");
}

#[test]
fn byte_arrays_are_summarised_unless_full() {
    let codec = all_types();
    let data: Vec<u8> = (0..=255).collect();
    let bytes = codec.encode(&json!({"data": data, "fixed": [1, 2, 3]})).unwrap();
    assert_eq!(codec.decode(&bytes, &SHORT).unwrap()["data"], json!("<256 bytes>"));
    assert_eq!(codec.decode(&bytes, &FULL).unwrap()["data"], json!(data));
    // 64 is not summarised.
    let bytes = codec.encode(&json!({"data": vec![1; 64]})).unwrap();
    assert_eq!(codec.decode(&bytes, &SHORT).unwrap()["data"], json!(vec![1; 64]));
}

#[test]
fn bad_schemas_and_unsupported_pairs_are_errors() {
    for (schema, why) in [
        ("foo/Bar x\n", "undefined type"),
        ("int32[ x\n", "unclosed"),
        ("uint8 x 300\n", "default out of range"),
        ("int32 x\nint32 x\n", "duplicate"),
        ("string<=abc s\n", "bad bound"),
        ("int32\n", "no name"),
    ] {
        let e = Codec::new("cdr", "a/msg/B", "ros2msg", schema.as_bytes()).unwrap_err();
        assert!(matches!(e, CodecError::BadSchema { .. }), "{why}: {e:?}");
    }
    let e = Codec::new("flatbuffer", "x", "flatbuffer", b"").unwrap_err();
    assert!(matches!(e, CodecError::Unsupported { .. }), "{e:?}");
    assert!(supported("cdr", "ros2msg") && supported("json", "") && supported("cbor", ""));
    assert!(!supported("ros1", "ros1msg") && !supported("cdr", "protobuf"));
}

#[test]
fn cdr_decode_errors_are_classified() {
    let codec = imu();
    let bytes = codec.encode(&imu_value()).unwrap();
    let e = codec.decode(&bytes[..bytes.len() - 1], &FULL).unwrap_err();
    assert_eq!(e, DecodeError::Truncated { path: "linear_acceleration_covariance".into() });
    let mut long = bytes.clone();
    long.extend_from_slice(&[0; 8]);
    assert_eq!(codec.decode(&long, &FULL).unwrap_err(), DecodeError::TrailingBytes { count: 8 });
    let mut xcdr2 = bytes.clone();
    xcdr2[1] = 0x07;
    assert!(matches!(codec.decode(&xcdr2, &FULL).unwrap_err(), DecodeError::Invalid { .. }));
    // A sequence length far past the bytes there are.
    let seq = Codec::new("cdr", "a/msg/S", "ros2msg", b"float64[] v").unwrap();
    let e = seq.decode(&[0, 1, 0, 0, 0xff, 0xff, 0xff, 0x7f], &FULL).unwrap_err();
    assert_eq!(e, DecodeError::Truncated { path: "v".into() });
}

#[test]
fn cdr_recursive_types_stop_at_the_depth_cap() {
    let schema = "demo/Node next\n";
    let codec = Codec::new("cdr", "demo/msg/Node", "ros2msg", schema.as_bytes()).unwrap();
    assert!(matches!(codec.encode(&json!({})).unwrap_err(), EncodeError::TooDeep { .. }));
    assert!(matches!(codec.decode(&[0, 1, 0, 0, 0], &FULL).unwrap_err(), DecodeError::TooDeep { .. }));
}

#[test]
fn json_cbor_msgpack_round_trip() {
    let v = json!({"a": 1, "b": [true, null, "x", -2.5], "c": {"d": u64::MAX}});
    for enc in ["json", "cbor", "msgpack"] {
        let codec = Codec::new(enc, "", "", b"").unwrap();
        let bytes = codec.encode(&v).unwrap();
        assert_eq!(codec.decode(&bytes, &SHORT).unwrap(), v, "{enc}");
        assert!(codec.decode(b"\xff\xfe{", &SHORT).is_err(), "{enc}");
    }
    let json = Codec::new("json", "x", "jsonschema", b"{}").unwrap();
    assert_eq!(json.encode(&v).unwrap(), serde_json::to_vec(&v).unwrap());
}

#[test]
fn cbor_and_msgpack_byte_strings_are_summarised_unless_full() {
    let long = ciborium::Value::Map(vec![(ciborium::Value::Text("blob".into()), ciborium::Value::Bytes(vec![7; 100]))]);
    let mut cbor = Vec::new();
    ciborium::ser::into_writer(&long, &mut cbor).unwrap();
    let codec = Codec::new("cbor", "", "", b"").unwrap();
    assert_eq!(codec.decode(&cbor, &SHORT).unwrap(), json!({"blob": "<100 bytes>"}));
    assert_eq!(codec.decode(&cbor, &FULL).unwrap(), json!({"blob": vec![7; 100]}));

    // msgpack: fixmap 1, "blob", bin8 of 100 bytes.
    let mut mp = vec![0x81, 0xa4, b'b', b'l', b'o', b'b', 0xc4, 100];
    mp.extend_from_slice(&[7; 100]);
    let codec = Codec::new("msgpack", "", "", b"").unwrap();
    assert_eq!(codec.decode(&mp, &SHORT).unwrap(), json!({"blob": "<100 bytes>"}));
    assert_eq!(codec.decode(&mp, &FULL).unwrap(), json!({"blob": vec![7; 100]}));
}

const POD: &str = r#"{"name":"demo::Imu","size":72,"align":8,"fields":[
  {"name":"t_ns","offset":0,"type":"u64"},
  {"name":"accel","offset":8,"type":"f32","shape":[3]},
  {"name":"grid","offset":20,"type":"i16","shape":[2,2]},
  {"name":"pose","offset":32,"type":{"name":"demo::Pose","size":16,"align":8,"fields":[
     {"name":"x","offset":0,"type":"f64"},{"name":"id","offset":8,"type":"i32"}]}},
  {"name":"big","offset":48,"type":"u128"},
  {"name":"raw","offset":64,"type":"u8","shape":[8]}
]}"#;

#[test]
fn shmbus_pod_round_trip_and_errors() {
    let codec = Codec::new("shmbus-pod", "demo::Imu", "shmbus-pod", POD.as_bytes()).unwrap();
    let v = json!({
        "t_ns": 123456789u64, "accel": [0.5, "NaN", "-inf"], "grid": [[1, -2], [3, -4]],
        "pose": {"x": 2.5, "id": -7}, "big": "340282366920938463463374607431768211455",
        "raw": [1, 2, 3, 4, 5, 6, 7, 8],
    });
    let bytes = codec.encode(&v).unwrap();
    assert_eq!(bytes.len(), 72);
    assert_eq!(&bytes[0..8], &123456789u64.to_le_bytes());
    assert_eq!(&bytes[32..40], &2.5f64.to_le_bytes());
    assert_eq!(codec.decode(&bytes, &FULL).unwrap(), v);
    assert_eq!(codec.decode(&bytes[..71], &FULL).unwrap_err(), DecodeError::WrongSize { expected: 72, actual: 71 });
    let e = codec.encode(&json!({"grid": [[1, 2], [3, 40000]]})).unwrap_err();
    assert_eq!(e.to_string(), "grid[1][1]: 40000 does not fit i16");
    let e = codec.encode(&json!({"pose": {"z": 1}})).unwrap_err();
    assert_eq!(e, EncodeError::UnknownField { path: "pose.z".into() });
    let e = codec.encode(&json!({"accel": [1, 2]})).unwrap_err();
    assert!(matches!(e, EncodeError::WrongLength { expected: 3, found: 2, .. }), "{e:?}");
    let e = codec.encode(&json!({"t_ns": "abc"})).unwrap_err();
    assert!(matches!(e, EncodeError::WrongType { .. }), "{e:?}");
    // Missing fields are zero.
    let zero = codec.decode(&codec.encode(&json!({})).unwrap(), &FULL).unwrap();
    assert_eq!(zero["pose"], json!({"x": 0.0, "id": 0}));

    let long = r#"{"name":"L","size":100,"align":1,"fields":[{"name":"d","offset":0,"type":"u8","shape":[100]}]}"#;
    let codec = Codec::new("shmbus-pod", "L", "shmbus-pod", long.as_bytes()).unwrap();
    assert_eq!(codec.decode(&[9; 100], &SHORT).unwrap(), json!({"d": "<100 bytes>"}));
    assert_eq!(codec.decode(&[9; 100], &FULL).unwrap(), json!({"d": vec![9; 100]}));
}

#[test]
fn shmbus_pod_schemas_are_checked() {
    for bad in [
        r#"{"size":8,"fields":[{"name":"a","offset":4,"type":"u64"}]}"#,
        r#"{"size":8,"fields":[{"name":"a","offset":0,"type":"u8","shape":[4294967296,4294967296,4294967296]}]}"#,
        r#"{"size":8,"fields":[{"name":"a","offset":0,"type":"u9"}]}"#,
        r#"{"size":8,"fields":[{"name":"a","offset":0,"type":{"size":16,"fields":[]}}]}"#,
        r#"[1,2]"#,
        "not json",
    ] {
        let e = Codec::new("shmbus-pod", "x", "shmbus-pod", bad.as_bytes()).unwrap_err();
        assert!(matches!(e, CodecError::BadSchema { .. }), "{bad}: {e:?}");
    }
}

#[test]
fn cdr_encode_work_is_bounded_for_zero_size_nested_arrays() {
    // Neither level writes a byte, so only a bound on the values visited stops the encode
    // of a missing field (2^40 elements).
    let schema = "demo/Mid[1048576] mids\n\
        ================================================================================\n\
        MSG: demo/Mid\ndemo/Leaf[1048576] leaves\n\
        ================================================================================\n\
        MSG: demo/Leaf\nint32[0] nothing\n";
    let codec = Codec::new("cdr", "demo/msg/Top", "ros2msg", schema.as_bytes()).unwrap();
    let e = codec.encode(&json!({})).unwrap_err();
    assert!(matches!(e, EncodeError::OutOfRange { .. }), "{e:?}");
}

#[test]
fn idl_nested_sequences_are_refused_not_recursed() {
    let deep = format!(
        "module a {{ module msg {{ struct M {{ {}double{} x; }}; }}; }};",
        "sequence<".repeat(100_000),
        ">".repeat(100_000)
    );
    let e = Codec::new("cdr", "a/msg/M", "ros2idl", deep.as_bytes()).unwrap_err();
    assert!(matches!(e, CodecError::Unsupported { .. }), "{e:?}");
}

#[test]
fn codec_is_send_sync_and_debug() {
    fn shareable<T: Send + Sync + std::fmt::Debug + 'static>(_: &T) {}
    let codec = imu();
    shareable(&codec);
    // One codec decodes from several threads at once.
    let bytes = codec.encode(&imu_value()).unwrap();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| assert_eq!(codec.decode(&bytes, &FULL).unwrap(), imu_value()));
        }
    });
}
