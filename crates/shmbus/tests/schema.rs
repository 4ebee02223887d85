//! Channel schemas on every kind: stored by the creator, read back by openers in other
//! processes' views (status, `admin::inspect`), checked on open (same: fine; another or none:
//! `SchemaMismatch` naming both; none asked for: any accepted), the 1 MiB limit, and a
//! scribbled schema record refused with a typed error, never a panic.
#![cfg(not(loom))]

mod common;

use std::os::unix::fs::FileExt;

use common::Scratch;
use shmbus::journal::{Journal, JournalConfig};
use shmbus::pool::{Pool, PoolConfig};
use shmbus::queue::{Queue, QueueConfig};
use shmbus::stream::{Stream, StreamConfig};
use shmbus::topic::{Topic, TopicConfig};
use shmbus::{admin, Domain, OpenError, Schema, SchemaError};

fn imu() -> Schema {
    let text = "std_msgs/Header header\nfloat64[3] linear_acceleration\n";
    Schema::new("cdr", "sensor_msgs/msg/Imu", "ros2msg", text.as_bytes().to_vec()).unwrap()
}

fn image() -> Schema {
    Schema::new("protobuf", "foxglove.RawImage", "protobuf", vec![0x0a, 0x03, b'a', b'b', b'c']).unwrap()
}

/// What every segment kind answers: its schema through the handle, its status and
/// `admin::inspect`.
fn seen(d: &Domain, name: &str, kind: &str) -> [Option<Schema>; 3] {
    let report = admin::inspect_channel(d, name).unwrap().schema.map(|s| (*s).clone());
    let (handle, status) = match kind {
        "topic" => {
            let t = Topic::open(d, name).unwrap();
            (t.schema().cloned(), Topic::status(d, name).unwrap().schema.map(|s| (*s).clone()))
        }
        "queue" => {
            let q = Queue::open(d, name).unwrap();
            (q.schema().cloned(), Queue::status(d, name).unwrap().schema.map(|s| (*s).clone()))
        }
        "stream" => {
            let s = Stream::open(d, name).unwrap();
            (s.schema().cloned(), Stream::status(d, name).unwrap().schema.map(|s| (*s).clone()))
        }
        "pool" => {
            let p = Pool::open(d, name).unwrap();
            (p.schema().cloned(), Pool::status(d, name).unwrap().schema.map(|s| (*s).clone()))
        }
        _ => unreachable!(),
    };
    [handle, status, report]
}

/// Creates `name` of `kind` with `schema` set (or none).
fn make(d: &Domain, name: &str, kind: &str, schema: Option<Schema>) -> Result<(), OpenError> {
    macro_rules! with {
        ($config:expr) => {
            match schema {
                Some(s) => $config.schema(s),
                None => $config,
            }
        };
    }
    match kind {
        "topic" => Topic::create_or_open(d, name, &with!(TopicConfig::default().max_message_len(256))).map(drop),
        "queue" => Queue::create_or_open(d, name, &with!(QueueConfig::default().capacity(8))).map(drop),
        "stream" => Stream::create_or_open(d, name, &with!(StreamConfig::default())).map(drop),
        "pool" => Pool::create_or_open(d, name, &with!(PoolConfig::default().max_workers(2))).map(drop),
        _ => unreachable!(),
    }
}

const KINDS: [&str; 4] = ["topic", "queue", "stream", "pool"];

#[test]
fn every_kind_stores_its_schema_and_checks_it_on_open() {
    let s = Scratch::new("schema-kinds");
    let d = s.domain("d");
    for kind in KINDS {
        let name = format!("{kind}-imu");
        make(&d, &name, kind, Some(imu())).unwrap();
        for got in seen(&d, &name, kind) {
            assert_eq!(got.as_ref(), Some(&imu()), "{kind}");
        }
        // The same schema, and none at all, open it.
        make(&d, &name, kind, Some(imu())).unwrap();
        make(&d, &name, kind, None).unwrap();
        // Another schema is refused, naming both.
        let e = make(&d, &name, kind, Some(image())).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, OpenError::SchemaMismatch { .. }), "{kind}: {msg}");
        assert!(msg.contains("sensor_msgs/msg/Imu") && msg.contains("foxglove.RawImage"), "{kind}: {msg}");

        // A channel made without a schema has none, and one asked for is a mismatch.
        let plain = format!("{kind}-plain");
        make(&d, &plain, kind, None).unwrap();
        assert_eq!(seen(&d, &plain, kind), [None, None, None], "{kind}");
        let e = make(&d, &plain, kind, Some(imu())).unwrap_err();
        assert!(matches!(e, OpenError::SchemaMismatch { .. }), "{kind}: {e}");
        assert!(e.to_string().contains("no schema"), "{kind}: {e}");
    }
}

#[test]
fn a_schema_of_exactly_the_limit_is_stored_and_one_byte_more_is_refused() {
    let s = Scratch::new("schema-limit");
    let d = s.domain("d");
    let data: Vec<u8> = (0..Schema::MAX_DATA).map(|i| (i * 7 + 3) as u8).collect();
    let big = Schema::new("protobuf", "big.Message", "protobuf", data.clone()).unwrap();
    for kind in KINDS {
        make(&d, &format!("{kind}-big"), kind, Some(big.clone())).unwrap();
        assert_eq!(seen(&d, &format!("{kind}-big"), kind)[0].as_ref().map(|s| s.data()), Some(&data[..]), "{kind}");
    }
    let mut over = data;
    over.push(0);
    assert_eq!(
        Schema::new("protobuf", "big.Message", "protobuf", over),
        Err(SchemaError::DataTooLong { len: Schema::MAX_DATA + 1 })
    );
}

/// The byte offset of the schema record in a segment file: the start of its last pages.
fn record_offset(path: &std::path::Path, record_len: u64) -> u64 {
    let len = std::fs::metadata(path).unwrap().len();
    len - record_len.div_ceil(4096) * 4096
}

#[test]
fn a_scribbled_schema_record_is_a_typed_error_in_every_byte() {
    let s = Scratch::new("schema-scribble");
    let d = s.domain("d");
    make(&d, "t", "topic", Some(imu())).unwrap();
    let path = admin::inspect_channel(&d, "t").unwrap().path;
    let record_len = admin::inspect_channel(&d, "t").unwrap().header.schema_len;
    assert!(record_len > 0);
    let at = record_offset(&path, record_len);
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let mut original = vec![0u8; record_len as usize];
    f.read_exact_at(&mut original, at).unwrap();
    assert_eq!(&original[..8], b"SBSCHEMA");
    for i in 0..record_len {
        let mut b = [0u8];
        f.read_exact_at(&mut b, at + i).unwrap();
        f.write_all_at(&[b[0] ^ 0x5a], at + i).unwrap();
        match Topic::open(&d, "t") {
            Err(OpenError::Corrupt { what, .. }) => assert!(what.contains("schema"), "byte {i}: {what}"),
            other => panic!("byte {i}: {other:?}"),
        }
        assert!(matches!(admin::inspect_channel(&d, "t"), Err(OpenError::Corrupt { .. })), "byte {i}");
        f.write_all_at(&b, at + i).unwrap();
    }
    // Restored: it opens again.
    assert_eq!(Topic::open(&d, "t").unwrap().schema(), Some(&imu()));
}

#[test]
fn a_header_claiming_a_huge_schema_record_is_refused() {
    let s = Scratch::new("schema-huge");
    let d = s.domain("d");
    make(&d, "t", "topic", Some(imu())).unwrap();
    let path = admin::inspect_channel(&d, "t").unwrap().path;
    // The header's schema length is its last word before the reserved space: rewrite it (and
    // the header checksum, so only the length is wrong) to values past the limit and past
    // the file.
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let mut head = vec![0u8; 208];
    f.read_exact_at(&mut head, 0).unwrap();
    for bogus in [u64::MAX, 64 << 20, 1 << 40] {
        let mut h = head.clone();
        h[200..208].copy_from_slice(&bogus.to_le_bytes());
        h[20..24].copy_from_slice(&0u32.to_le_bytes());
        h[16..20].copy_from_slice(&0u32.to_le_bytes());
        let crc = crc32c::crc32c(&h);
        h[20..24].copy_from_slice(&crc.to_le_bytes());
        h[16..20].copy_from_slice(&head[16..20]);
        f.write_all_at(&h, 0).unwrap();
        let e = Topic::open(&d, "t").unwrap_err();
        assert!(matches!(e, OpenError::Corrupt { .. }), "{bogus}: {e}");
    }
    f.write_all_at(&head, 0).unwrap();
    Topic::open(&d, "t").unwrap();
}

#[test]
fn journals_store_their_schema_and_check_it_on_open() {
    let (dir, _s) = common::fresh_dir("schema-journal");
    let j = Journal::create_or_open(&dir, &JournalConfig::default().schema(imu())).unwrap();
    assert_eq!(j.schema(), Some(&imu()));
    let mut a = j.appender().unwrap();
    a.send(b"x").unwrap();
    drop((a, j));
    let j = Journal::open(&dir).unwrap();
    assert_eq!(j.schema(), Some(&imu()));
    assert_eq!(Journal::status(&dir).unwrap().schema.as_deref(), Some(&imu()));
    Journal::create_or_open(&dir, &JournalConfig::default()).unwrap();
    Journal::create_or_open(&dir, &JournalConfig::default().schema(imu())).unwrap();
    let e = Journal::create_or_open(&dir, &JournalConfig::default().schema(image())).unwrap_err();
    assert!(matches!(e, OpenError::SchemaMismatch { .. }), "{e}");
    assert!(e.to_string().contains("foxglove.RawImage"), "{e}");
    drop(j);

    // A scribbled record: a typed error on open.
    let meta = dir.join("journal.meta");
    let len = std::fs::metadata(&meta).unwrap().len();
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&meta).unwrap();
    let mut b = [0u8];
    let at = len - 4096 + 40;
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 1], at).unwrap();
    assert!(matches!(Journal::open(&dir), Err(OpenError::Corrupt { .. })));
    f.write_all_at(&b, at).unwrap();
    assert_eq!(Journal::open(&dir).unwrap().schema(), Some(&imu()));

    // A journal without one.
    let (plain, _p) = common::fresh_dir("schema-journal-plain");
    let j = Journal::create_or_open(&plain, &JournalConfig::default()).unwrap();
    assert_eq!(j.schema(), None);
    assert!(matches!(
        Journal::create_or_open(&plain, &JournalConfig::default().schema(imu())),
        Err(OpenError::SchemaMismatch { .. })
    ));
}

/// A derived struct: its typed configs store its `shmbus-pod` layout as the schema.
#[derive(Debug, Clone, Copy, PartialEq, shmbus::Pod)]
#[repr(C)]
struct Imu {
    t_ns: u64,
    accel: [f32; 3],
    gyro: [f32; 3],
}

#[test]
fn typed_configs_of_a_derived_struct_store_its_layout() {
    let s = Scratch::new("schema-pod");
    let d = s.domain("d");
    let t = Topic::create_or_open(&d, "imu", &TopicConfig::for_type::<Imu>()).unwrap();
    let schema = t.schema().expect("a derived struct has a schema").clone();
    assert_eq!((schema.message_encoding(), schema.encoding()), ("shmbus-pod", "shmbus-pod"));
    assert!(schema.name().ends_with("::Imu"), "{}", schema.name());
    let json = std::str::from_utf8(schema.data()).unwrap();
    assert!(json.contains(r#"{"name":"accel","offset":8,"type":"f32","shape":[3]}"#), "{json}");
    // The same again, a queue and a journal.
    Topic::create_or_open(&d, "imu", &TopicConfig::for_type::<Imu>()).unwrap();
    let q = Queue::create_or_open(&d, "q", &QueueConfig::for_type::<Imu>()).unwrap();
    assert_eq!(q.schema(), Some(&schema));
    let (dir, _j) = common::fresh_dir("schema-pod-journal");
    assert_eq!(Journal::create_or_open(&dir, &JournalConfig::for_type::<Imu>()).unwrap().schema(), Some(&schema));

    // A typed config opens an untyped channel made without a schema, as before (its type
    // fits), but not one whose schema says something else.
    Topic::create_or_open(&d, "plain", &TopicConfig::default().max_message_len(64)).unwrap();
    Topic::create_or_open(&d, "plain", &TopicConfig::for_type::<Imu>()).unwrap();
    Topic::create_or_open(&d, "other", &TopicConfig::default().max_message_len(64).schema(imu())).unwrap();
    let e = Topic::create_or_open(&d, "other", &TopicConfig::for_type::<Imu>()).unwrap_err();
    assert!(matches!(e, OpenError::SchemaMismatch { .. }), "{e}");
    // A schema set explicitly after `for_type` is what is stored.
    let t = Topic::create_or_open(&d, "explicit", &TopicConfig::for_type::<Imu>().schema(imu())).unwrap();
    assert_eq!(t.schema(), Some(&imu()));
}
