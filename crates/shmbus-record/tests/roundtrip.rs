//! Recordings through real files: MCAP written and read back, journal recordings (record
//! entries of both versions, and plain journals) read and exported to MCAP, and the info of
//! each.

use std::path::PathBuf;

use shmbus::journal::{Journal, JournalConfig};
use shmbus::Schema;
use shmbus_record::journal::{Entry, EntryError, Recorded, TopicEntry};
use shmbus_record::{
    export_journal, read_info, Compression, JournalMessages, JournalRecorder, McapMessages, McapOptions, McapWriter,
    RecordingFormat,
};

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("shmbus-record-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn imu_schema() -> Schema {
    Schema::new("cdr", "demo_msgs/msg/Imu", "ros2msg", b"float64 x\nint32 y\nstring name\n".to_vec()).unwrap()
}

#[test]
fn record_entries_encode_decode_and_v1_bytes_are_unchanged() {
    let rec = Recorded { topic: "imu", seq: 7, ts_ns: 99, slot_size: 256, history: 8, payload: b"abc" };
    let mut b = Vec::new();
    rec.encode(&mut b);
    // The version-1 layout, byte for byte.
    let mut want = b"SBRC".to_vec();
    want.extend_from_slice(&1u16.to_le_bytes());
    want.extend_from_slice(&3u16.to_le_bytes());
    want.extend_from_slice(&7u64.to_le_bytes());
    want.extend_from_slice(&99u64.to_le_bytes());
    want.extend_from_slice(&256u32.to_le_bytes());
    want.extend_from_slice(&8u32.to_le_bytes());
    want.extend_from_slice(b"imuabc");
    assert_eq!(b, want);
    assert_eq!(Recorded::decode(&b).unwrap(), rec);

    let topic = TopicEntry { topic: "imu", slot_size: 256, history: 8, schema: Some(imu_schema()) };
    topic.encode(&mut b);
    assert_eq!(&b[4..6], &2u16.to_le_bytes());
    assert_eq!(Entry::decode(&b).unwrap(), Entry::Topic(topic.clone()));
    let bare = TopicEntry { schema: None, ..topic };
    bare.encode(&mut b);
    assert_eq!(Entry::decode(&b).unwrap(), Entry::Topic(bare));

    // Untrusted bytes: every cut of a topic entry is an error, never a panic.
    TopicEntry { topic: "imu", slot_size: 1, history: 1, schema: Some(imu_schema()) }.encode(&mut b);
    for cut in 0..b.len() {
        assert!(Entry::decode(&b[..cut]).is_err(), "cut at {cut} decoded");
    }
    assert_eq!(Entry::decode(b"hello, not a record entry at all!!"), Err(EntryError::NotARecordEntry));
    let mut v3 = b.clone();
    v3[4] = 3;
    assert_eq!(Entry::decode(&v3), Err(EntryError::UnknownVersion { version: 3 }));
}

#[test]
fn mcap_round_trip_with_every_compression() {
    let dir = scratch("mcap-rt");
    let imu = imu_schema();
    let json = Schema::new("json", "", "", Vec::new()).unwrap();
    for compression in [Compression::Zstd, Compression::Lz4, Compression::None] {
        let path = dir.join(format!("{}.mcap", compression.name()));
        let mut w = McapWriter::create_with(&path, McapOptions { compression, chunk_size: 4096 }).unwrap();
        let off = w.clock_offset_ns();
        w.add_topic("imu", Some(&imu)).unwrap();
        w.add_topic("log", Some(&json)).unwrap();
        w.add_topic("raw", None).unwrap();
        w.add_topic("imu", Some(&imu)).unwrap(); // again: nothing
        assert!(w.add_topic("imu", None).is_err(), "a topic's schema cannot change");
        assert!(w.write("nope", 1, 1, 1, b"x").is_err(), "unknown topic");
        for i in 0..1000u64 {
            let topic = ["imu", "log", "raw"][(i % 3) as usize];
            let payload = vec![i as u8; (i % 200) as usize];
            // The sequence wraps to u32: 2^32 + i is written as i.
            w.write(topic, (1 << 32) + i, 1_000 + i, 2_000 + i, &payload).unwrap();
        }
        w.finish().unwrap();

        let mut n = 0u64;
        for m in McapMessages::open(&path).unwrap() {
            let m = m.unwrap();
            let i = n;
            assert_eq!(m.topic, ["imu", "log", "raw"][(i % 3) as usize]);
            assert_eq!(m.sequence, i as u32);
            assert_eq!(m.publish_ns, 1_000 + i + off);
            assert_eq!(m.log_ns, 2_000 + i + off);
            assert_eq!(m.payload, vec![i as u8; (i % 200) as usize]);
            let want = match i % 3 {
                0 => Some(&imu),
                1 => Some(&json),
                _ => None,
            };
            assert_eq!(m.schema.as_deref(), want, "schema of {}", m.topic);
            n += 1;
        }
        assert_eq!(n, 1000);

        let info = read_info(&path).unwrap();
        assert_eq!(info.format, RecordingFormat::Mcap);
        assert!(info.from_summary && info.complete);
        assert_eq!(info.messages, 1000);
        assert_eq!((info.start_ns, info.end_ns), (Some(2_000 + off), Some(2_999 + off)));
        assert_eq!(info.duration_ns, 999);
        assert_eq!(info.size_bytes, std::fs::metadata(&path).unwrap().len());
        let names: Vec<(&str, &str, &str, u64)> = info
            .topics
            .iter()
            .map(|t| (t.name.as_str(), t.message_encoding.as_str(), t.schema_name.as_str(), t.messages))
            .collect();
        assert_eq!(names, [("imu", "cdr", "demo_msgs/msg/Imu", 334), ("log", "json", "", 333), ("raw", "", "", 333)]);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn flush_makes_every_message_readable_before_finish() {
    let dir = scratch("flush");
    let path = dir.join("live.mcap");
    let mut w = McapWriter::create(&path).unwrap();
    w.add_topic("a", None).unwrap();
    for i in 0..10u64 {
        w.write("a", i, i, i, &i.to_le_bytes()).unwrap();
    }
    w.flush().unwrap();
    w.write("a", 10, 10, 10, b"in the open chunk").unwrap();
    // The writer is still open: no summary, no footer; the first ten are whole on disk.
    let mut read = Vec::new();
    for m in McapMessages::open(&path).unwrap() {
        match m {
            Ok(m) => read.push(m.sequence),
            Err(_) => break,
        }
    }
    assert_eq!(read, (0..10).collect::<Vec<u32>>());
    let info = read_info(&path).unwrap();
    assert_eq!((info.messages, info.complete, info.from_summary), (10, false, false));
    w.finish().unwrap();
    assert_eq!(read_info(&path).unwrap().messages, 11);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Writes a recording journal of `imu` and `raw`, 10 messages each, interleaved: with
/// [`JournalRecorder`] (topic entries first) when `with_topics`, else message entries alone
/// as a recording made before topic entries existed.
fn write_recording(dir: &PathBuf, with_topics: bool) {
    let j = Journal::create_or_open(dir, &JournalConfig::default()).unwrap();
    let mut rec = with_topics.then(|| JournalRecorder::new(j.appender().unwrap()));
    let mut app = j.appender().unwrap();
    if let Some(rec) = rec.as_mut() {
        assert!(rec.add_topic("imu", 128, 4, Some(&imu_schema())).unwrap());
        assert!(!rec.add_topic("imu", 128, 4, Some(&imu_schema())).unwrap(), "added once");
        assert!(rec.write("nope", 1, 1, b"x").is_err(), "unknown topic");
        rec.add_topic("raw", 64, 2, None).unwrap();
    }
    let mut b = Vec::new();
    for i in 0..20u64 {
        let topic = if i % 2 == 0 { "imu" } else { "raw" };
        let ts = shmbus::time::monotonic_ns();
        let payload = format!("message {i}");
        match rec.as_mut() {
            Some(rec) => {
                rec.write(topic, 1 + i / 2, ts, payload.as_bytes()).unwrap();
            }
            None => {
                Recorded { topic, seq: 1 + i / 2, ts_ns: ts, slot_size: 128, history: 4, payload: payload.as_bytes() }
                    .encode(&mut b);
                app.send(&b).unwrap();
            }
        }
    }
}

#[test]
fn journal_recording_reads_and_exports_to_mcap() {
    for with_topics in [true, false] {
        let dir = scratch(&format!("journal-{with_topics}"));
        let jdir = dir.join("rec");
        write_recording(&jdir, with_topics);

        let mut msgs = JournalMessages::open(&jdir).unwrap();
        let all: Vec<_> = msgs.by_ref().map(Result::unwrap).collect();
        assert_eq!(all.len(), 20);
        for (i, m) in all.iter().enumerate() {
            assert_eq!(m.topic, if i % 2 == 0 { "imu" } else { "raw" });
            assert_eq!(m.seq, 1 + i as u64 / 2);
            assert_eq!(m.payload, format!("message {i}").as_bytes());
        }
        assert_eq!(msgs.schema("imu"), with_topics.then(imu_schema).as_ref());
        assert_eq!(msgs.schema("raw"), None);
        assert_eq!(msgs.topics().len(), 2);
        if with_topics {
            let raw = &msgs.topics()["raw"];
            assert_eq!((raw.slot_size, raw.history), (64, 2), "from the topic entry");
        }

        let info = read_info(&jdir).unwrap();
        assert_eq!(info.format, RecordingFormat::Journal);
        assert_eq!(info.messages, 20);
        assert_eq!(info.start_ns, Some(all[0].log_ns));
        assert_eq!(info.end_ns, Some(all[19].log_ns));
        assert_eq!(info.topics[0].schema_name, if with_topics { "demo_msgs/msg/Imu" } else { "" });

        let out = dir.join("rec.mcap");
        let report = export_journal(&jdir, &out, McapOptions::default()).unwrap();
        assert_eq!((report.messages, report.topics, report.skipped), (20, 2, 0));
        let back: Vec<_> = McapMessages::open(&out).unwrap().map(Result::unwrap).collect();
        assert_eq!(back.len(), 20);
        for (m, r) in back.iter().zip(&all) {
            assert_eq!((m.topic.as_str(), u64::from(m.sequence), m.log_ns), (r.topic.as_str(), r.seq, r.log_ns));
            assert_eq!(m.payload, r.payload);
            assert!(m.publish_ns <= m.log_ns, "publish after log: {} > {}", m.publish_ns, m.log_ns);
        }
        assert_eq!(back[0].schema.as_deref(), with_topics.then(imu_schema).as_ref());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn plain_journal_exports_as_one_channel_named_after_it() {
    let dir = scratch("plain");
    let jdir = dir.join("events");
    let j = Journal::create_or_open(&jdir, &JournalConfig::default()).unwrap();
    let mut app = j.appender().unwrap();
    for i in 0..5u32 {
        app.send(&i.to_le_bytes()).unwrap();
    }
    // Without plain_as, such an entry is an error.
    let first = JournalMessages::open(&jdir).unwrap().next().unwrap();
    assert!(first.is_err());

    let out = dir.join("events.mcap");
    let report = export_journal(&jdir, &out, McapOptions::default()).unwrap();
    assert_eq!((report.messages, report.topics), (5, 1));
    let back: Vec<_> = McapMessages::open(&out).unwrap().map(Result::unwrap).collect();
    assert_eq!(back.len(), 5);
    for (i, m) in back.iter().enumerate() {
        assert_eq!(m.topic, "events");
        assert_eq!(m.schema, None);
        assert_eq!(m.sequence, i as u32);
        assert_eq!(m.payload, (i as u32).to_le_bytes());
        assert_eq!(m.publish_ns, m.log_ns);
    }
    let info = read_info(&out).unwrap();
    assert_eq!(
        (info.topics.len(), info.topics[0].name.as_str(), info.topics[0].message_encoding.as_str()),
        (1, "events", "")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn encrypted_recording_reads_and_exports_with_its_cipher() {
    use shmbus::journal::{EntryCipher, Keyring, XChaCha20Poly1305Cipher};
    use std::sync::Arc;

    let dir = scratch("sealed");
    let jdir = dir.join("sealed");
    let cipher: Arc<dyn EntryCipher> = Arc::new(XChaCha20Poly1305Cipher::new(&Keyring::new(1, [7u8; 32])));
    let j = Journal::create_or_open(&jdir, &JournalConfig::default()).unwrap();
    let mut app = j.appender().unwrap();
    app.set_cipher(Some(cipher.clone()));
    let mut rec = JournalRecorder::new(app);
    rec.add_topic("imu", 64, 2, Some(&imu_schema())).unwrap();
    for i in 0..5u64 {
        rec.write("imu", i, i, &i.to_le_bytes()).unwrap();
    }
    // Without the cipher every entry is skipped, none misread.
    let mut blind = JournalMessages::open(&jdir).unwrap();
    assert_eq!(blind.by_ref().count(), 0);
    assert_eq!(blind.skipped(), 6);
    let mut seeing = JournalMessages::open(&jdir).unwrap().with_cipher(Some(cipher.clone()));
    assert_eq!(seeing.by_ref().map(|m| m.unwrap().seq).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    assert_eq!(seeing.schema("imu"), Some(&imu_schema()));

    let out = dir.join("sealed.mcap");
    let report = shmbus_record::export_journal_with(&jdir, Some(cipher), &out, McapOptions::default()).unwrap();
    assert_eq!((report.messages, report.skipped), (5, 0));
    assert_eq!(read_info(&out).unwrap().topics[0].schema_name, "demo_msgs/msg/Imu");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn info_of_something_else_is_an_error() {
    let dir = scratch("other");
    let f = dir.join("x.txt");
    std::fs::write(&f, b"not an mcap file").unwrap();
    assert!(matches!(read_info(&f), Err(shmbus_record::RecordError::UnknownFormat(_))));
    std::fs::remove_dir_all(&dir).unwrap();
}
