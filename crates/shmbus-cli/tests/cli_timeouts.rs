//! `--timeout-ms` on every verb that waits: running out is one `shmbus:` line and exit 1,
//! never a hang. Each command runs under an outer limit far above its timeout (a hang fails
//! the test instead of blocking CI); no test asserts how long anything took.

mod common;

use std::io::Write;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::{one_error_line, Killed, Root};

/// The outer limit: generous, so that only a hang reaches it.
const LIMIT: Duration = Duration::from_secs(60);

/// Runs `shmbus args` with `input` on stdin, killing it (and failing) if it is still running
/// after [`LIMIT`].
fn run_within(r: &Root, args: &[&str], input: &[u8]) -> Output {
    let mut child = r.cmd(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // A full pipe must not block the test: write from a thread, ignore EPIPE.
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let end = Instant::now() + LIMIT;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("shmbus {args:?} still running after {LIMIT:?}: it does not honour --timeout-ms");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    let _ = writer.join();
    out
}

/// Expects exit 1 and one error line; returns it.
fn times_out(r: &Root, args: &[&str], input: &[u8]) -> String {
    let out = run_within(r, args, input);
    assert_eq!(out.status.code(), Some(1), "shmbus {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    one_error_line(&out)
}

/// Stops (SIGSTOP) a child of ours; it is SIGKILLed when dropped.
fn stop(child: &Killed) {
    // SAFETY: kill(2) on the pid of a child we have not reaped yet (Killed reaps on drop).
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGSTOP) }, 0);
}

#[test]
fn pub_to_a_full_queue_times_out() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "queue", "q", "--capacity", "2"]);
    let e = times_out(&r, &["pub", "--domain", "d", "q", "--data", "x", "--count", "5", "--timeout-ms", "200"], b"");
    assert!(e.contains("stayed full for 200 ms") && e.contains("(2 message(s) sent before)"), "{e}");
}

#[test]
fn pub_to_a_full_stream_whose_reader_is_stuck_times_out() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "stream", "s", "--capacity", "4096"]);
    // A reader that is attached but never reads: without --timeout-ms `pub` would wait for it.
    let reader = r.spawn(&["sub", "--domain", "d", "s"]);
    r.wait_info("d", "s", |v| v["subscribers"] == 1);
    stop(&reader);
    let line = format!("{}\n", "a".repeat(1000));
    let e = times_out(&r, &["pub", "--domain", "d", "s", "--timeout-ms", "200"], line.repeat(20).as_bytes());
    assert!(e.contains("no room for a 1000 byte record in the stream within 200 ms"), "{e}");
    assert!(e.contains("message(s) sent before)"), "{e}");
}

#[test]
fn pool_dispatch_to_busy_workers_times_out() {
    let r = Root::new();
    let worker = r.spawn(&["pool", "worker", "--domain", "d", "p"]);
    r.wait_info("d", "p", |v| v["workers"] == 1 && v["workers_idle"] == 1);
    // The worker is idle in shared memory but never takes a job: the first job waits in its
    // mailbox, the second finds every worker busy.
    stop(&worker);
    let e = times_out(&r, &["pool", "dispatch", "--domain", "d", "p", "--timeout-ms", "300"], b"one\ntwo\n");
    assert!(e.contains("stayed busy for 300 ms") && e.contains("(1 dispatched before it)"), "{e}");
}

#[test]
fn pool_worker_without_jobs_times_out() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "pool", "p"]);
    let e = times_out(&r, &["pool", "worker", "--domain", "d", "p", "--timeout-ms", "200"], b"");
    assert!(e.contains("200"), "{e}");
}

#[test]
fn sub_on_every_kind_times_out() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t"]);
    r.ok(&["create", "--domain", "d", "--kind", "queue", "q"]);
    r.ok(&["create", "--domain", "d", "--kind", "stream", "s"]);
    for name in ["t", "q", "s"] {
        times_out(&r, &["sub", "--domain", "d", name, "--timeout-ms", "200"], b"");
    }
}

#[test]
fn journal_tail_times_out() {
    let r = Root::new();
    let j = r.jdir("j");
    r.ok(&["journal", "append", "--dir", &j, "--data", "x"]);
    times_out(&r, &["journal", "tail", "--dir", &j, "--timeout-ms", "200"], b"");
}

#[test]
fn record_times_out_when_no_message_comes_and_keeps_what_it_recorded() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t"]);
    let j = r.jdir("rec");
    let e = times_out(&r, &["record", "--domain", "d", "t", "--dir", &j, "--timeout-ms", "200"], b"");
    assert!(e.contains("no message on t within --timeout-ms 200 ms (0 message(s) recorded before"), "{e}");

    // A message within the timeout is recorded, and then the timeout ends the run.
    let mut rec = r.spawn(&["record", "--domain", "d", "t", "--dir", &j, "--timeout-ms", "3s"]);
    r.wait_info("d", "t", |v| v["subscribers"] == 1);
    r.ok(&["pub", "--domain", "d", "t", "--data", "kept"]);
    let end = Instant::now() + LIMIT;
    while !rec.exited() {
        assert!(Instant::now() < end, "record --timeout-ms 3s still running after {LIMIT:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = rec.finish();
    assert_eq!(out.status.code(), Some(1));
    assert!(one_error_line(&out).contains("(1 message(s) recorded before"));
    // --seconds ends a run normally even with a longer --timeout-ms.
    let out =
        run_within(&r, &["record", "--domain", "d", "t", "--dir", &j, "--seconds", "0.2", "--timeout-ms", "60s"], b"");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dumped = r.ok(&["journal", "dump", "--dir", &j, "--json"]);
    // One message, after the topic entry (its shape and schema) each of the three runs wrote.
    assert_eq!(dumped.lines().count(), 4, "{dumped}");
}
