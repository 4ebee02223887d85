// The body of the `topic_state` fuzz target, shared with the test that replays its corpus
// (crates/shmbus/tests/hostile_topic.rs) through `include!`: one copy of the harness.

use shmbus::segment::{KIND_OFFSET, PARTICIPANTS_OFFSET};
use shmbus::topic::{Topic, TopicConfig};
use shmbus::waitset::Waitable;
use shmbus::Domain;

/// The topic the input is written into: 32-byte slots (stored inline), history 8, 4 spare:
/// 12 slots and 64 index words.
const TOPIC_STATE_SLOTS: u64 = 12;
const TOPIC_STATE_INDEX: u64 = 64;

/// `(file offset, width in bytes)` of every control word of that topic, in the order the
/// input fills them: the control block (tail, committed max, next slot, event word), each
/// slot's guard line (writer, two pin words) and reader line (seq, len, ts), the index, and
/// the owner word, start time, role and five recovery words of the first participant entries.
fn topic_state_words() -> Vec<(u64, usize)> {
    let k = KIND_OFFSET as u64;
    let mut w = vec![(k, 8), (k + 128, 8), (k + 256, 8), (k + 384, 4)];
    let headers = k + 512 + 8 * TOPIC_STATE_INDEX;
    for s in 0..TOPIC_STATE_SLOTS {
        let h = headers + 128 * s;
        w.extend([(h, 8), (h + 8, 8), (h + 16, 8), (h + 64, 8), (h + 72, 8), (h + 80, 8)]);
    }
    for e in 0..4u64 {
        let entry = PARTICIPANTS_OFFSET as u64 + e * 64;
        w.extend([(entry, 8), (entry + 8, 8), (entry + 16, 4)]);
        w.extend((0..5).map(|a| (entry + 24 + 8 * a, 8)));
    }
    w.extend((0..TOPIC_STATE_INDEX).map(|i| (k + 512 + 8 * i, 8)));
    w
}

/// Creates a valid topic, registers a publisher and a subscriber, publishes three messages,
/// writes `data` over the control words (in `topic_state_words` order; a word the input
/// does not reach keeps its value), then runs every receive verb with zero timeouts and
/// publishes. Must never panic, fault or hang, whatever `data` is.
pub fn exercise_topic_state(data: &[u8]) {
    use std::os::unix::fs::FileExt;
    use std::time::Duration;
    let root = std::env::temp_dir().join(format!("shmbus-fuzz-topic-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let d = Domain::with_root("fz", &root).expect("scratch domain");
    let t = Topic::create_or_open(&d, "t", &TopicConfig::default().max_message_len(32).history(8).spare_slots(4)).expect("create topic");
    let mut p = t.publisher().expect("publisher");
    let sub = t.subscriber().expect("subscriber");
    for m in [&b"one"[..], b"two", b"three"] {
        p.send(m).expect("publish");
    }
    let file = std::fs::OpenOptions::new().write(true).open(d.channel_path("t").expect("path")).expect("open segment");
    let mut rest = data;
    for (offset, width) in topic_state_words() {
        if rest.is_empty() {
            break;
        }
        let n = width.min(rest.len());
        file.write_all_at(&rest[..n], offset).expect("write word");
        rest = &rest[n..];
    }
    let mut buf = Vec::new();
    for round in 0..2 {
        for _ in 0..8 {
            let _ = sub.try_recv();
            let _ = sub.try_recv_into(&mut buf);
            let _ = sub.try_recv_ref().map(|s| s.len());
        }
        let _ = sub.recv_timeout(Duration::ZERO);
        let _ = sub.recv_into_timeout(&mut buf, Duration::ZERO);
        let _ = sub.recv_ref_timeout(Duration::ZERO).map(|s| s.len());
        for seq in [0, 1, 3, t.last_seq(), t.last_seq().wrapping_add(1), u64::MAX] {
            let _ = sub.get(seq);
            let _ = sub.get_ref(seq).map(|s| s.len());
        }
        let _ = sub.latest();
        let _ = sub.is_ready();
        let _ = sub.recheck_interval();
        let _ = sub.recheck();
        let _ = (sub.lag(), Topic::status(&d, "t"));
        if round == 0 {
            sub.seek_oldest();
        } else {
            sub.seek_latest();
        }
        sub.seek(u64::MAX);
        // Publishing fails (every slot pinned or busy) or works; it never hangs.
        for _ in 0..4 {
            let _ = p.send(b"four");
            let _ = p.loan().and_then(|mut l| {
                l.truncate(3);
                l.send()
            });
        }
    }
    let _ = t.reclaim_dead();
    if let Ok(s2) = t.subscriber() {
        let _ = s2.try_recv();
    }
    drop((sub, p, t));
    let _ = std::fs::remove_dir_all(&root);
}
