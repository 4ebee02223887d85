// The body of the `stream_state` fuzz target, shared with the test that replays its corpus
// (crates/shmbus/tests/hostile_stream.rs) through `include!`: one copy of the harness.

use shmbus::segment::{KIND_OFFSET, PARTICIPANTS_OFFSET};
use shmbus::stream::{Stream, StreamConfig};
use shmbus::waitset::Waitable;
use shmbus::Domain;

/// `(file offset, width in bytes)` of every control word of a one-page stream, in the
/// order the input fills them: `head` and its event word, `tail` and its event word, the
/// writer's and the reader's participant entries (owner word, start time, role, first
/// recovery word), then the first record headers in the ring.
fn stream_state_words(page: u64) -> Vec<(u64, usize)> {
    let k = KIND_OFFSET as u64;
    let mut w = vec![(k, 8), (k + 8, 4), (k + 128, 8), (k + 136, 4)];
    for e in 0..2u64 {
        let entry = PARTICIPANTS_OFFSET as u64 + e * 64;
        w.extend([(entry, 8), (entry + 8, 8), (entry + 16, 4), (entry + 24, 8)]);
    }
    let ring = (k + 256).div_ceil(page) * page;
    w.extend((0..8).map(|i| (ring + 8 * i, 8)));
    w
}

/// Creates a valid one-page stream with its writer and reader, commits two records, writes
/// `data` over the control words (in `stream_state_words` order; a word the input does not
/// reach keeps its value), then runs every read and write verb with zero timeouts and
/// re-attaches both endpoints. Must never panic, fault or hang, whatever `data` is.
pub fn exercise_stream_state(data: &[u8]) {
    use std::os::unix::fs::FileExt;
    use std::time::Duration;
    let page = shmbus::sys::page_size() as u64;
    let root = std::env::temp_dir().join(format!("shmbus-fuzz-stream-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let d = Domain::with_root("fz", &root).expect("scratch domain");
    let mut w = Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(page as usize)).unwrap().writer().expect("create stream");
    let mut r = Stream::open(&d, "s").unwrap().reader().expect("reader");
    w.try_send(b"one").expect("write");
    w.try_send(b"two").expect("write");
    let file = std::fs::OpenOptions::new().write(true).open(w.path()).expect("open segment");
    let mut rest = data;
    for (offset, width) in stream_state_words(page) {
        if rest.is_empty() {
            break;
        }
        let n = width.min(rest.len());
        file.write_all_at(&rest[..n], offset).expect("write word");
        rest = &rest[n..];
    }
    let mut buf = Vec::new();
    for _ in 0..2 {
        for _ in 0..4 {
            if let Ok(rec) = r.try_recv_ref() {
                let _ = rec.len();
                rec.consume();
            }
            let _ = r.try_recv_into(&mut buf);
        }
        let _ = r.recv_ref_timeout(Duration::ZERO).map(|rec| rec.consume());
        let _ = r.recv_into_timeout(&mut buf, Duration::ZERO);
        let _ = (r.is_ready(), r.pending(), r.status(), r.writer_alive());
        for len in [0, 5, 100, page as usize - 8] {
            let _ = w.try_send(&vec![1u8; len]);
            let _ = w.send_timeout(&vec![2u8; len], Duration::ZERO);
            let _ = w.try_loan(len).map(|g| g.send());
        }
        let _ = (w.is_ready(), w.free(), w.status(), w.reader_alive());
    }
    drop(r);
    drop(w);
    if let Ok(mut r) = Stream::open(&d, "s").and_then(|s| s.reader()) {
        let _ = r.try_recv_ref().map(|rec| rec.consume());
    }
    if let Ok(mut w) = Stream::open(&d, "s").and_then(|s| s.writer()) {
        let _ = w.try_send(b"again");
    }
    let _ = std::fs::remove_dir_all(&root);
}
