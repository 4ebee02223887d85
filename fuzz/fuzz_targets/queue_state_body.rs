// The body of the `queue_state` fuzz target, shared with the test that replays its corpus
// (crates/shmbus/tests/hostile_queue.rs) through `include!`: one copy of the harness.

use shmbus::queue::{Queue, QueueConfig};
use shmbus::segment::{KIND_OFFSET, PARTICIPANTS_OFFSET};
use shmbus::waitset::Waitable;
use shmbus::Domain;

/// Capacity and largest message of the queue the input is written into.
const QUEUE_STATE_CAPACITY: u64 = 4;
const QUEUE_STATE_MAX: usize = 16;

/// `(file offset, width in bytes)` of every control word of that queue: the control block
/// (tail, head, the two event words, the crash counters), each cell's stamp and length, and
/// the owner word, start time, role and intent of the first participant entries.
fn queue_state_words() -> Vec<(u64, usize)> {
    let k = KIND_OFFSET as u64;
    let mut w = vec![(k, 8), (k + 128, 8), (k + 256, 4), (k + 384, 4), (k + 512, 8), (k + 520, 8)];
    let stride = (16 + QUEUE_STATE_MAX).div_ceil(64) as u64 * 64;
    for i in 0..QUEUE_STATE_CAPACITY {
        let cell = k + 1024 + i * stride;
        w.extend([(cell, 8), (cell + 8, 4)]);
    }
    for e in 0..3u64 {
        let entry = PARTICIPANTS_OFFSET as u64 + e * 64;
        w.extend([(entry, 8), (entry + 8, 8), (entry + 16, 4), (entry + 24, 8)]);
    }
    w
}

/// Creates a valid queue, registers a producer and a consumer, sends two messages, writes
/// `data` over the control words (in `queue_state_words` order; a word the input does not
/// reach keeps its value), then runs every send and receive verb with zero timeouts. Must
/// never panic, fault or hang, whatever `data` is.
pub fn exercise_queue_state(data: &[u8]) {
    use std::os::unix::fs::FileExt;
    use std::time::Duration;
    let root = std::env::temp_dir().join(format!("shmbus-fuzz-queue-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let d = Domain::with_root("fz", &root).expect("scratch domain");
    let config = QueueConfig::default().capacity(QUEUE_STATE_CAPACITY).max_message_len(QUEUE_STATE_MAX);
    let q = Queue::create_or_open(&d, "q", &config).expect("create queue");
    let mut tx = q.producer().expect("producer");
    let mut rx = q.consumer().expect("consumer");
    tx.try_send(b"one").expect("send");
    tx.try_send(b"two").expect("send");
    let file = std::fs::OpenOptions::new().write(true).open(q.path()).expect("open segment");
    let mut rest = data;
    for (offset, width) in queue_state_words() {
        if rest.is_empty() {
            break;
        }
        let n = width.min(rest.len());
        file.write_all_at(&rest[..n], offset).expect("write word");
        rest = &rest[n..];
    }
    let mut buf = Vec::new();
    for _ in 0..8 {
        let _ = rx.try_recv();
        let _ = rx.try_recv_into(&mut buf);
        let _ = rx.recv_timeout(Duration::ZERO);
        let _ = rx.recv_into_timeout(&mut buf, Duration::ZERO);
        let _ = rx.has_message();
        let _ = rx.is_ready();
        let _ = rx.recheck();
        let _ = rx.try_iter().count();
        let _ = tx.try_send(b"three");
        let _ = tx.send_timeout(b"four", Duration::ZERO);
        let _ = tx.has_room();
        let _ = tx.is_ready();
        let _ = tx.recheck();
    }
    let st = Queue::status(&d, "q").expect("status");
    assert!(st.depth <= st.capacity, "depth {} beyond capacity {}", st.depth, st.capacity);
    let _ = q.reclaim_dead();
    let _ = shmbus::admin::inspect(q.path());
    drop((tx, rx, q));
    let _ = std::fs::remove_dir_all(&root);
}
