// The body of the `segment_open` fuzz target, shared with the test that replays its corpus
// (crates/shmbus/tests/segment_corrupt.rs) through `include!`: one copy of the harness.

use shmbus::queue::Queue;
use shmbus::stream::Stream;
use shmbus::topic::Topic;
use shmbus::{admin, pool, Domain};

/// Bytes of the segment header the checksum covers (with `ready` and the checksum zeroed).
const HEADER_LEN: usize = 208;

/// Writes `data` (a switch byte, then the file) as a channel file in a scratch domain and
/// opens, inspects and reads it as every kind. Must never panic or fault, whatever `data` is.
pub fn exercise_segment(data: &[u8]) {
    let Some((&switch, body)) = data.split_first() else { return };
    let mut bytes = body.to_vec();
    if switch & 1 == 1 && bytes.len() >= HEADER_LEN {
        let mut zeroed = bytes[..HEADER_LEN].to_vec();
        zeroed[16..24].fill(0);
        let crc = crc32c::crc32c(&zeroed);
        bytes[20..24].copy_from_slice(&crc.to_le_bytes());
    }
    let root = std::env::temp_dir().join(format!("shmbus-fuzz-segment-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let d = Domain::with_root("fz", &root).expect("scratch domain");
    let path = d.channel_path("ch").expect("valid name");
    std::fs::create_dir_all(path.parent().expect("domain dir")).expect("domain dir");
    std::fs::write(&path, &bytes).expect("write segment");

    let _ = admin::inspect(&path);
    if let Ok(t) = Topic::open(&d, "ch") {
        let _ = Topic::status(&d, "ch");
        if let Ok(s) = t.subscriber() {
            s.seek_oldest();
            for _ in 0..64 {
                let _ = s.try_recv();
            }
            let _ = s.latest();
            let _ = s.get(1);
        }
    }
    let _ = Queue::status(&d, "ch");
    if let Ok(q) = Queue::open(&d, "ch") {
        if let Ok(mut c) = q.consumer() {
            for _ in 0..64 {
                let _ = c.try_recv();
            }
        }
    }
    let _ = Stream::status(&d, "ch");
    if let Ok(mut r) = Stream::open(&d, "ch").and_then(|s| s.reader()) {
        for _ in 0..64 {
            match r.try_recv_ref() {
                Ok(rec) => rec.consume(),
                Err(_) => break,
            }
        }
    }
    let _ = pool::Pool::status(&d, "ch");
    let _ = std::fs::remove_dir_all(&root);
}
