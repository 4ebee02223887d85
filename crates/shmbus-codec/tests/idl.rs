//! `cdr` with `ros2idl` schemas: the IDL rosidl generates for a message, read as the same
//! wire layout as its `.msg` form.

use serde_json::json;
use shmbus_codec::{Codec, CodecError, DecodeOptions};

const FULL: DecodeOptions = DecodeOptions { full: true };

/// What rosidl_adapter writes for sensor_msgs/msg/Imu-like types, MCAP-concatenated.
const IMU_IDL: &str = r#"// generated from rosidl_adapter/resource/msg.idl.em
// with input from demo_msgs/msg/Imu.msg

#include "geometry_msgs/msg/Vector3.idl"
#include "std_msgs/msg/Header.idl"

module demo_msgs {
  module msg {
    typedef double double__9[9];
    module Imu_Constants {
      const uint8 MODE_A = 1;
      const string NAME = "imu; // not a comment";
    };
    @verbatim (language="comment", text=
      "An IMU sample." "\n"
      "With (parentheses) inside.")
    struct Imu {
      std_msgs::msg::Header header;

      geometry_msgs::msg::Vector3 linear_acceleration;

      double__9 linear_acceleration_covariance;

      @default (value=-3)
      int8 small;

      sequence<uint16, 4> bounded;

      string<8> name;

      sequence<string> tags;

      sequence<geometry_msgs::msg::Vector3> path;

      @default (value="hi")
      string greeting;

      boolean flag, other_flag;

      @default (value=TRUE)
      boolean on;

      Empty nothing;
    };
    struct Empty {
      uint8 structure_needs_at_least_one_member;
    };
  };
};

================================================================================
IDL: geometry_msgs/msg/Vector3
module geometry_msgs {
  module msg {
    struct Vector3 {
      double x;
      double y;
      double z;
    };
  };
};
"#;

const IMU_MSG: &str = "\
std_msgs/Header header
geometry_msgs/Vector3 linear_acceleration
float64[9] linear_acceleration_covariance
int8 small -3
uint16[<=4] bounded
string<=8 name
string[] tags
geometry_msgs/Vector3[] path
string greeting \"hi\"
bool flag
bool other_flag
bool on true
Empty nothing
================================================================================
MSG: geometry_msgs/Vector3
float64 x
float64 y
float64 z
================================================================================
MSG: demo_msgs/Empty
";

#[test]
fn idl_and_msg_forms_of_a_type_share_the_wire_layout() {
    let idl = Codec::new("cdr", "demo_msgs/msg/Imu", "ros2idl", IMU_IDL.as_bytes()).unwrap();
    let msg = Codec::new("cdr", "demo_msgs/msg/Imu", "ros2msg", IMU_MSG.as_bytes()).unwrap();
    let v = json!({
        "header": {"stamp": {"sec": 5, "nanosec": 6}, "frame_id": "imu"},
        "linear_acceleration": {"x": 1.0, "y": 2.0, "z": 3.0},
        "linear_acceleration_covariance": [1, 2, 3, 4, 5, 6, 7, 8, 9.0],
        "bounded": [1, 2], "name": "n", "tags": ["a", "b"],
        "path": [{"x": 0.5, "y": 0.25, "z": 0.125}], "flag": true,
    });
    let from_idl = idl.encode(&v).unwrap();
    assert_eq!(from_idl, msg.encode(&v).unwrap());
    let decoded = idl.decode(&from_idl, &FULL).unwrap();
    assert_eq!(decoded, msg.decode(&from_idl, &FULL).unwrap());
    assert_eq!(decoded["small"], json!(-3));
    assert_eq!(decoded["greeting"], json!("hi"));
    assert_eq!(decoded["on"], json!(true));
    assert_eq!(decoded["other_flag"], json!(false));
    assert_eq!(decoded["nothing"], json!({}));
    assert!(idl.encode(&json!({"name": "123456789"})).is_err(), "string<8> is bounded");
    assert!(idl.encode(&json!({"bounded": [1, 2, 3, 4, 5]})).is_err());
    // The scoped form of the name works too.
    assert!(Codec::new("cdr", "demo_msgs::msg::Imu", "ros2idl", IMU_IDL.as_bytes()).is_ok());
}

#[test]
fn idl_outside_the_subset_is_unsupported_and_broken_idl_is_bad() {
    let union = "module a { module msg { union U switch (long) { case 1: long x; }; }; };";
    let e = Codec::new("cdr", "a/msg/U", "ros2idl", union.as_bytes()).unwrap_err();
    assert!(matches!(e, CodecError::Unsupported { .. }), "{e:?}");
    let matrix = "module a { module msg { struct M { double m[3][3]; }; }; };";
    let e = Codec::new("cdr", "a/msg/M", "ros2idl", matrix.as_bytes()).unwrap_err();
    assert!(matches!(e, CodecError::Unsupported { .. }), "{e:?}");
    for bad in [
        "module a { module msg { struct M { double x; }; };",
        "module a { module msg { struct M { double x }; }; };",
        "module a { module msg { struct M { b::msg::Nope x; }; }; };",
        "module a { module msg { struct Other { double x; }; }; };",
        "module a { \"unterminated",
    ] {
        let e = Codec::new("cdr", "a/msg/M", "ros2idl", bad.as_bytes()).unwrap_err();
        assert!(matches!(e, CodecError::BadSchema { .. }), "{bad}: {e:?}");
    }
}
