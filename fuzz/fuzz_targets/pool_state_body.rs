// The body of the `pool_state` fuzz target, shared with the test that replays its corpus
// (crates/shmbus/tests/hostile_pool.rs) through `include!`: one copy of the harness.

use shmbus::pool::{Pool, PoolConfig};
use shmbus::segment::{KIND_OFFSET, PARTICIPANTS_OFFSET};
use shmbus::waitset::Waitable;
use shmbus::Domain;

/// Workers and largest job of the pool the input is written into.
const POOL_STATE_WORKERS: usize = 2;
const POOL_STATE_MAX_JOB: usize = 32;

/// `(file offset, width in bytes)` of every control word of that pool: the header (idle and
/// present bits, idle event, dispatcher state, next job id, counters), each mailbox's state,
/// event, owner pid, job id and length, and the owner word, start time and role of the
/// dispatcher's and the workers' participant entries.
fn pool_state_words() -> Vec<(u64, usize)> {
    let k = KIND_OFFSET as u64;
    let mut w = vec![(k, 8), (k + 8, 8), (k + 16, 4), (k + 128, 8), (k + 136, 8), (k + 144, 8), (k + 152, 8)];
    let stride = 64 + POOL_STATE_MAX_JOB.div_ceil(64) as u64 * 64;
    for i in 0..POOL_STATE_WORKERS as u64 {
        let mb = k + 256 + i * stride;
        w.extend([(mb, 4), (mb + 4, 4), (mb + 8, 4), (mb + 16, 8), (mb + 24, 8)]);
    }
    for e in 0..=POOL_STATE_WORKERS as u64 {
        let entry = PARTICIPANTS_OFFSET as u64 + e * 64;
        w.extend([(entry, 8), (entry + 8, 8), (entry + 16, 4)]);
    }
    // Each mailbox's loss report moved aside by an adopting worker: flag, pid, job id.
    for i in 0..POOL_STATE_WORKERS as u64 {
        let mb = k + 256 + i * stride;
        w.extend([(mb + 32, 4), (mb + 36, 4), (mb + 40, 8)]);
    }
    w
}

/// Creates a valid pool with its dispatcher and a worker holding a job, writes `data` over
/// the control words (in `pool_state_words` order), then runs every receive and dispatch
/// verb with zero timeouts. Must never panic, fault or hang, whatever `data` is.
pub fn exercise_pool_state(data: &[u8]) {
    use std::os::unix::fs::FileExt;
    use std::time::Duration;
    let root = std::env::temp_dir().join(format!("shmbus-fuzz-pool-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let d = Domain::with_root("fz", &root).expect("scratch domain");
    let config = PoolConfig::default().max_workers(POOL_STATE_WORKERS).max_job_len(POOL_STATE_MAX_JOB);
    let pool = Pool::create_or_open(&d, "p", &config).expect("create pool");
    let mut disp = pool.dispatcher().expect("dispatcher");
    let mut w = pool.worker().expect("join");
    w.done();
    disp.try_send(b"job").expect("dispatch");
    let path = d.channel_path("p").expect("valid name");
    let file = std::fs::OpenOptions::new().write(true).open(&path).expect("open segment");
    let mut rest = data;
    for (offset, width) in pool_state_words() {
        if rest.is_empty() {
            break;
        }
        let n = width.min(rest.len());
        file.write_all_at(&rest[..n], offset).expect("write word");
        rest = &rest[n..];
    }
    let mut sent = Vec::new();
    for _ in 0..4 {
        if let Ok(job) = w.try_recv_ref() {
            assert!(job.len() <= POOL_STATE_MAX_JOB);
        }
        if let Ok(job) = w.recv_ref_timeout(Duration::ZERO) {
            assert!(job.len() <= POOL_STATE_MAX_JOB);
        }
        if let Ok(job) = w.try_recv() {
            assert!(job.len() <= POOL_STATE_MAX_JOB);
        }
        let mut buf = Vec::new();
        if let Ok(info) = w.recv_into_timeout(&mut buf, Duration::ZERO) {
            assert!(info.len() <= POOL_STATE_MAX_JOB && info.len() == buf.len());
        }
        let _ = w.is_ready();
        let _ = w.recheck();
        let _ = w.dispatcher_alive();
        w.done();
        let _ = disp.is_ready();
        let _ = disp.try_send(b"more");
        let _ = disp.try_send_with_id(7, b"seven");
        sent.clear();
        let _ = disp.try_send_batch(&[b"a".as_slice(), b"b".as_slice()], &mut sent);
        let _ = disp.reap();
        let st = disp.status();
        assert!(st.idle <= st.workers && st.workers <= POOL_STATE_WORKERS, "{st:?}");
    }
    let _ = Pool::status(&d, "p");
    let _ = shmbus::admin::inspect(&path);
    drop(w);
    drop(disp);
    drop(pool);
    let _ = std::fs::remove_dir_all(&root);
}
