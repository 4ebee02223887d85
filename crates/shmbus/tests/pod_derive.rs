//! `#[derive(shmbus::Pod)]`: the `shmbus-pod` schema JSON of derived structs (nested structs,
//! arrays, arrays of arrays and of structs, tuple structs, raw identifiers), offsets as the
//! compiler lays them out, and a derived struct through a typed topic. What the derive
//! refuses to compile is in the `compile_fail` examples of `shmbus::Pod`'s docs.
#![cfg(not(loom))]

mod common;

use std::mem::offset_of;
use std::time::Duration;

use common::Scratch;
use shmbus::pod::{pod_schema, PodElement, PodLayout, PodScalar};
use shmbus::topic::{Topic, TopicConfig, TopicTryRecvError};
use shmbus::{admin, PayloadType, Pod};

/// 24 + 4 + 4 = 32 bytes: the explicit pad keeps the size a multiple of the alignment 8.
#[derive(Debug, Clone, Copy, PartialEq, Pod)]
#[repr(C)]
struct Pose {
    xyz: [f64; 3],
    quality: u32,
    _pad: u32,
}

/// 8 + 12 + 12 + 32 = 64 bytes.
#[derive(Debug, Clone, Copy, PartialEq, shmbus::Pod)]
#[repr(C)]
struct Imu {
    t_ns: u64,
    accel: [f32; 3],
    gyro: [f32; 3],
    pose: Pose,
}

/// Arrays of arrays, an array of structs, a `usize` and a raw identifier: 24 + 64 + 8 = 96.
#[derive(Debug, Clone, Copy, shmbus::Pod)]
#[repr(C)]
struct Grid {
    cells: [[u16; 3]; 4],
    poses: [Pose; 2],
    r#type: usize,
}

/// A tuple struct, `repr(transparent)`.
#[derive(Debug, Clone, Copy, shmbus::Pod)]
#[repr(transparent)]
struct Meters(f64);

/// `repr(C)` with a larger alignment, no padding: 64 bytes of bytes.
#[derive(Debug, Clone, Copy, shmbus::Pod)]
#[repr(C, align(64))]
struct Line {
    bytes: [u8; 64],
}

/// A hand-written impl without a layout.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct Opaque {
    v: u64,
}
// SAFETY: repr(C), one u64.
unsafe impl Pod for Opaque {}

/// A derived struct with an undescribed field: still Pod, but without a schema.
#[derive(Debug, Clone, Copy, shmbus::Pod)]
#[repr(C)]
struct HoldsOpaque {
    t_ns: u64,
    opaque: Opaque,
}

const POSE_JSON: &str = concat!(
    r#"{"name":"pod_derive::Pose","size":32,"align":8,"fields":["#,
    r#"{"name":"xyz","offset":0,"type":"f64","shape":[3]},"#,
    r#"{"name":"quality","offset":24,"type":"u32"},"#,
    r#"{"name":"_pad","offset":28,"type":"u32"}]}"#,
);

fn imu(i: u32) -> Imu {
    Imu {
        t_ns: 1_000 + i as u64,
        accel: [i as f32, 0.5, -9.81],
        gyro: [0.0, -0.25, i as f32 * 2.0],
        pose: Pose { xyz: [1.0, 2.0, i as f64], quality: i, _pad: 0 },
    }
}

#[test]
fn imu_schema_is_the_exact_json_with_the_nested_pose() {
    let (name, json) = pod_schema::<Imu>().unwrap();
    assert_eq!(name, "pod_derive::Imu");
    let expected = format!(
        concat!(
            r#"{{"name":"pod_derive::Imu","size":64,"align":8,"fields":["#,
            r#"{{"name":"t_ns","offset":0,"type":"u64"}},"#,
            r#"{{"name":"accel","offset":8,"type":"f32","shape":[3]}},"#,
            r#"{{"name":"gyro","offset":20,"type":"f32","shape":[3]}},"#,
            r#"{{"name":"pose","offset":32,"type":{}}}]}}"#,
        ),
        POSE_JSON
    );
    assert_eq!(json, expected);
    assert_eq!(pod_schema::<Pose>().unwrap(), ("pod_derive::Pose".to_owned(), POSE_JSON.to_owned()));
}

#[test]
fn offsets_sizes_and_alignments_are_the_compilers() {
    let Some(PodLayout { element: PodElement::Struct(s), shape }) = Imu::pod_layout() else {
        panic!("Imu is a described struct")
    };
    assert!(shape.is_empty());
    assert_eq!((s.size, s.align), (size_of::<Imu>(), align_of::<Imu>()));
    let offsets: Vec<(&str, usize)> = s.fields.iter().map(|f| (f.name, f.offset)).collect();
    assert_eq!(
        offsets,
        [
            ("t_ns", offset_of!(Imu, t_ns)),
            ("accel", offset_of!(Imu, accel)),
            ("gyro", offset_of!(Imu, gyro)),
            ("pose", offset_of!(Imu, pose)),
        ]
    );
    let PodElement::Struct(pose) = &s.fields[3].layout.element else { panic!("pose is a struct") };
    let pose_offsets: Vec<usize> = pose.fields.iter().map(|f| f.offset).collect();
    assert_eq!(pose_offsets, [offset_of!(Pose, xyz), offset_of!(Pose, quality), offset_of!(Pose, _pad)]);
    assert_eq!(pose.size, size_of::<Pose>());
}

#[test]
fn arrays_of_arrays_have_a_shape_and_arrays_of_structs_an_object_type() {
    let (name, json) = pod_schema::<Grid>().unwrap();
    assert_eq!(name, "pod_derive::Grid");
    let expected = format!(
        concat!(
            r#"{{"name":"pod_derive::Grid","size":96,"align":8,"fields":["#,
            r#"{{"name":"cells","offset":0,"type":"u16","shape":[4,3]}},"#,
            r#"{{"name":"poses","offset":24,"type":{},"shape":[2]}},"#,
            r#"{{"name":"type","offset":88,"type":"u64"}}]}}"#,
        ),
        POSE_JSON
    );
    assert_eq!(json, expected);
    assert_eq!(offset_of!(Grid, poses), 24);
    assert_eq!(offset_of!(Grid, r#type), 88);
}

#[test]
fn tuple_transparent_and_aligned_structs() {
    let (name, json) = pod_schema::<Meters>().unwrap();
    assert_eq!(name, "pod_derive::Meters");
    assert_eq!(
        json,
        r#"{"name":"pod_derive::Meters","size":8,"align":8,"fields":[{"name":"0","offset":0,"type":"f64"}]}"#
    );
    let (_, json) = pod_schema::<Line>().unwrap();
    assert_eq!(
        json,
        r#"{"name":"pod_derive::Line","size":64,"align":64,"fields":[{"name":"bytes","offset":0,"type":"u8","shape":[64]}]}"#
    );
}

#[test]
fn primitives_and_arrays_describe_themselves_but_have_no_schema_of_their_own() {
    assert_eq!(u32::pod_layout(), Some(PodLayout::scalar(PodScalar::U32)));
    assert_eq!(isize::pod_layout(), Some(PodLayout::scalar(PodScalar::I64)));
    let grid = <[[i8; 2]; 5]>::pod_layout().unwrap();
    assert_eq!((grid.element, grid.shape), (PodElement::Scalar(PodScalar::I8), vec![5, 2]));
    assert_eq!(pod_schema::<u64>(), None);
    assert_eq!(pod_schema::<[Pose; 2]>(), None, "an array is not a struct schema");
}

#[test]
fn an_undescribed_field_leaves_the_struct_without_a_schema() {
    assert_eq!(Opaque::pod_layout(), None);
    assert_eq!(HoldsOpaque::pod_layout(), None);
    assert_eq!(pod_schema::<HoldsOpaque>(), None);
}

#[test]
fn a_derived_struct_travels_through_a_typed_topic() {
    let s = Scratch::new("pod-derive-topic");
    let d = s.domain("t");
    let topic = Topic::create_or_open(&d, "imu", &TopicConfig::for_type::<Imu>().history(4)).unwrap();
    let mut tx = topic.publisher_of::<Imu>().unwrap();
    let rx = topic.subscriber_of::<Imu>().unwrap();

    tx.send(&imu(1)).unwrap();
    assert_eq!(rx.try_recv().unwrap(), imu(1));
    let mut loan = tx.loan().unwrap();
    *loan = imu(2);
    loan.pose.quality = 77;
    loan.send().unwrap();
    {
        let sample = rx.recv_ref_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(sample.pose, Pose { quality: 77, ..imu(2).pose });
        assert_eq!(sample.accel, imu(2).accel);
    }
    assert!(matches!(rx.try_recv(), Err(TopicTryRecvError::Empty)));

    // The header records the derived type as a typed channel of it.
    let header = admin::inspect(&d.channel_path("imu").unwrap()).unwrap().header;
    assert!(header.payload.unwrap().matches(&PayloadType::of::<Imu>()));
    // A byte subscriber sees the struct's exact bytes.
    let bytes = topic.subscriber().unwrap();
    tx.send(&imu(3)).unwrap();
    let msg = bytes.try_recv().unwrap();
    let msg = msg.data();
    assert_eq!(msg.len(), 64);
    assert_eq!(&msg[..8], &1_003u64.to_le_bytes());
    assert_eq!(&msg[32..40], &1.0f64.to_le_bytes(), "pose.xyz[0] at offset 32");
}
