//! Untrusted input never panics: random bytes into every codec's decode, random mutations
//! of valid messages, and random and mutated schema data into `Codec::new`. A property test
//! over a fixed sequence of generator states, so a failure names its case and reruns the same.

use std::panic::{catch_unwind, AssertUnwindSafe};

use prost_reflect::prost::Message;
use prost_reflect::prost_types::{
    field_descriptor_proto::{Label, Type},
    DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet,
};
use serde_json::{json, Value};
use shmbus_codec::{Codec, DecodeOptions};

const CASES: u64 = 4000;

const ROS_SCHEMA: &str = "\
std_msgs/Header header
int8 small -3
uint16[<=4] bounded
string<=8 name
float32[3] xyz
bool flag
wstring w
int64[] big
string[] tags
demo/Point2[] points
uint8[] blob
Empty e
================================================================================
MSG: demo/Point2
float64 x
uint8 id
demo/Point2[] children
================================================================================
MSG: demo/Empty
";

const IDL_SCHEMA: &str = r#"
module demo { module msg {
  typedef double double__3[3];
  module Custom_Constants { const uint8 A = 1; };
  @verbatim (language="comment", text="a (comment)")
  struct Custom {
    std_msgs::msg::Header header;
    @default (value=-3)
    int8 small;
    sequence<uint16, 4> bounded;
    string<8> name;
    double__3 xyz;
    sequence<demo::msg::Custom> children;
  };
}; };
"#;

const POD_SCHEMA: &str = r#"{"name":"p","size":48,"align":8,"fields":[
  {"name":"a","offset":0,"type":"u64"},{"name":"b","offset":8,"type":"f32","shape":[2,2]},
  {"name":"c","offset":24,"type":{"name":"q","size":16,"align":8,"fields":[
    {"name":"x","offset":0,"type":"i128"}]}},{"name":"d","offset":40,"type":"u8","shape":[8]}]}"#;

fn protobuf_schema() -> Vec<u8> {
    let field = |name: &str, number: i32, ty: Type, label: Label, type_name: Option<&str>| FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number),
        r#type: Some(ty as i32),
        label: Some(label as i32),
        type_name: type_name.map(Into::into),
        ..Default::default()
    };
    let node = DescriptorProto {
        name: Some("Node".into()),
        field: vec![
            field("name", 1, Type::String, Label::Optional, None),
            field("value", 2, Type::Double, Label::Optional, None),
            field("ids", 3, Type::Sint64, Label::Repeated, None),
            field("blob", 4, Type::Bytes, Label::Optional, None),
            field("children", 5, Type::Message, Label::Repeated, Some(".demo.Node")),
        ],
        ..Default::default()
    };
    FileDescriptorSet {
        file: vec![FileDescriptorProto {
            name: Some("demo.proto".into()),
            package: Some("demo".into()),
            message_type: vec![node],
            syntax: Some("proto3".into()),
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

/// Every codec, with one valid value for it.
fn codecs() -> Vec<(&'static str, Codec, Value)> {
    vec![
        (
            "cdr",
            Codec::new("cdr", "demo/msg/Custom", "ros2msg", ROS_SCHEMA.as_bytes()).unwrap(),
            json!({"name": "abc", "tags": ["x", "yz"], "w": "wide", "big": [1, -2],
                   "points": [{"x": 1.0, "id": 2, "children": [{"x": 3.0}]}], "blob": [1, 2, 3]}),
        ),
        (
            "protobuf",
            Codec::new("protobuf", "demo.Node", "protobuf", &protobuf_schema()).unwrap(),
            json!({"name": "n", "value": 2.5, "ids": [1, -5], "blob": "AQID",
                   "children": [{"name": "c", "children": [{"value": 1.0}]}]}),
        ),
        ("json", Codec::new("json", "", "", b"").unwrap(), json!({"a": [1, 2, {"b": null}], "c": "d"})),
        ("cbor", Codec::new("cbor", "", "", b"").unwrap(), json!({"a": [1, 2, {"b": null}], "c": "d", "e": -1.5})),
        (
            "msgpack",
            Codec::new("msgpack", "", "", b"").unwrap(),
            json!({"a": [1, 2, {"b": null}], "c": "d", "e": -1.5}),
        ),
        (
            "shmbus-pod",
            Codec::new("shmbus-pod", "p", "shmbus-pod", POD_SCHEMA.as_bytes()).unwrap(),
            json!({"a": 5, "b": [[1.0, 2.0], [3.0, 4.0]], "c": {"x": -9}, "d": [1, 2, 3, 4, 5, 6, 7, 8]}),
        ),
    ]
}

fn random_bytes(rng: &mut fastrand::Rng, max: usize) -> Vec<u8> {
    let len = rng.usize(0..=max);
    (0..len).map(|_| rng.u8(..)).collect()
}

/// Flips, overwrites, inserts, removes or truncates a few bytes.
fn mutate(rng: &mut fastrand::Rng, data: &mut Vec<u8>) {
    for _ in 0..rng.usize(1..=4) {
        if data.is_empty() {
            data.push(rng.u8(..));
            continue;
        }
        let at = rng.usize(..data.len());
        match rng.u8(0..6) {
            0 => data[at] ^= 1 << rng.u8(0..8),
            1 => data[at] = rng.u8(..),
            2 => data[at] = [0, 0xff, 0x7f, 0x80][rng.usize(0..4)],
            3 => data.insert(at, rng.u8(..)),
            4 => {
                data.remove(at);
            }
            _ => data.truncate(at),
        }
    }
}

/// Runs `f` for every case; a panic fails the test naming the case.
fn each_case(what: &str, mut f: impl FnMut(&mut fastrand::Rng)) {
    for case in 0..CASES {
        let mut rng = fastrand::Rng::with_seed(case);
        if catch_unwind(AssertUnwindSafe(|| f(&mut rng))).is_err() {
            panic!("{what}: case {case} panicked");
        }
    }
}

#[test]
fn random_bytes_never_panic_any_decoder() {
    for (name, codec, _) in codecs() {
        each_case(name, |rng| {
            let mut msg = random_bytes(rng, 300);
            if name == "cdr" && msg.len() >= 2 && rng.bool() {
                // Mostly a valid header, so the body is exercised too.
                msg[0] = 0;
                msg[1] = rng.u8(0..2);
            }
            for full in [false, true] {
                if let Ok(v) = codec.decode(&msg, &DecodeOptions { full }) {
                    let _ = codec.encode(&v);
                }
            }
        });
    }
}

#[test]
fn mutated_valid_messages_never_panic() {
    for (name, codec, value) in codecs() {
        let valid = codec.encode(&value).unwrap();
        assert!(codec.decode(&valid, &DecodeOptions::default()).is_ok(), "{name}: the valid message decodes");
        each_case(name, |rng| {
            let mut msg = valid.clone();
            mutate(rng, &mut msg);
            if let Ok(v) = codec.decode(&msg, &DecodeOptions { full: true }) {
                let _ = codec.encode(&v);
            }
        });
    }
}

#[test]
fn random_and_mutated_schemas_never_panic() {
    let pairs: [(&str, &str, Vec<u8>); 4] = [
        ("cdr", "ros2msg", ROS_SCHEMA.as_bytes().to_vec()),
        ("cdr", "ros2idl", IDL_SCHEMA.as_bytes().to_vec()),
        ("protobuf", "protobuf", protobuf_schema()),
        ("shmbus-pod", "shmbus-pod", POD_SCHEMA.as_bytes().to_vec()),
    ];
    for (enc, schema_enc, valid) in pairs {
        let name = if enc == "protobuf" { "demo.Node" } else { "demo/msg/Custom" };
        if let Err(e) = Codec::new(enc, name, schema_enc, &valid) {
            panic!("{schema_enc}: the valid schema parses: {e}");
        }
        each_case(schema_enc, |rng| {
            let mut data = if rng.bool() { random_bytes(rng, 200) } else { valid.clone() };
            mutate(rng, &mut data);
            if let Ok(codec) = Codec::new(enc, name, schema_enc, &data) {
                let msg = random_bytes(rng, 100);
                let _ = codec.decode(&msg, &DecodeOptions::default());
                let _ = codec.encode(&json!({}));
            }
        });
    }
}
