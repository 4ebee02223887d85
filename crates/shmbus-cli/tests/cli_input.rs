//! Input bounds: every verb that reads messages from stdin reads at most what one message can
//! hold, so a huge line to a small channel fails with one clear line and never makes
//! `shmbus` hold the line in memory.

mod common;

use std::io::Write;
use std::process::Stdio;

use common::Root;

/// Size of the one oversized stdin line: far more than any channel below takes, and far more
/// than the memory limit asserted.
const HUGE_LINE: usize = 192 << 20;
/// The largest resident size `shmbus` may reach while refusing it.
const MAX_RSS_BYTES: u64 = 64 << 20;

/// Runs `shmbus args` with one line of `HUGE_LINE` bytes (after a first short line) on
/// stdin; returns its stderr, exit status and peak resident size in bytes.
// The child is reaped by `wait4` (for its resource usage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run_with_huge_line(root: &Root, args: &[&str]) -> (String, std::process::ExitStatus, u64) {
    let mut child = root.cmd(args).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        // The child may stop reading once it has refused the line: a broken pipe then ends
        // the writing, which is fine.
        let _ = stdin.write_all(b"first\n");
        for _ in 0..HUGE_LINE / chunk.len() {
            if stdin.write_all(&chunk).is_err() {
                return;
            }
        }
        let _ = stdin.write_all(b"\nnot sent\n");
    });
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let (status, rss) = wait_with_rusage(child.id());
    writer.join().unwrap();
    (reader.join().unwrap(), status, rss)
}

/// Waits for the child `pid` and returns its exit status and peak resident size (bytes).
fn wait_with_rusage(pid: u32) -> (std::process::ExitStatus, u64) {
    use std::os::unix::process::ExitStatusExt;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for the kernel to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own child, not yet reaped; both out-pointers are valid.
    let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(r, pid as libc::pid_t, "wait4: {}", std::io::Error::last_os_error());
    (std::process::ExitStatus::from_raw(status), usage.ru_maxrss as u64 * 1024)
}

fn assert_refused(what: &str, r: (String, std::process::ExitStatus, u64), max: usize) {
    assert_refused_within(what, r, max, MAX_RSS_BYTES)
}

fn assert_refused_within(
    what: &str,
    (stderr, status, rss): (String, std::process::ExitStatus, u64),
    max: usize,
    max_rss: u64,
) {
    assert!(!status.success(), "{what}: a {HUGE_LINE}-byte line was accepted: {stderr}");
    assert_eq!(status.code(), Some(1), "{what}: not a plain error exit: {status:?} {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: expected one stderr line, got {stderr:?}");
    assert!(lines[0].contains(&format!("stdin line 2 is longer than {max} bytes")), "{what}: {stderr}");
    assert!(rss < max_rss, "{what}: resident size reached {rss} bytes reading one line");
}

#[test]
fn topic_pub_refuses_a_huge_line_without_reading_it_whole() {
    let root = Root::new();
    let r = run_with_huge_line(&root, &["pub", "--domain", "d", "t", "--slot-size", "4096"]);
    assert_refused("topic", r, 4096);
    // The line before it was published.
    let out = root.ok(&["sub", "--domain", "d", "t", "--from", "1", "--count", "1", "--timeout-ms", "2000"]);
    assert!(out.contains("first"), "{out}");
}

#[test]
fn queue_pub_refuses_a_huge_line() {
    let root = Root::new();
    let r = run_with_huge_line(&root, &["pub", "--domain", "d", "q", "--kind", "queue", "--max-element-size", "512"]);
    assert_refused("queue", r, 512);
}

#[test]
fn stream_pub_refuses_a_huge_line() {
    let root = Root::new();
    let r = run_with_huge_line(&root, &["pub", "--domain", "d", "s", "--kind", "stream", "--capacity", "64K"]);
    let (stderr, _, _) = &r;
    let max: usize = stderr
        .split("longer than ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no limit in {stderr:?}"));
    assert!(max < 64 << 10, "a stream's record limit is below its capacity, got {max}");
    assert_refused("stream", r, max);
}

#[test]
fn pool_dispatch_refuses_a_huge_line() {
    let root = Root::new();
    let r = run_with_huge_line(
        &root,
        &["pool", "dispatch", "--domain", "d", "p", "--max-job-size", "256", "--timeout-ms", "10"],
    );
    let (stderr, status, rss) = r;
    // With no worker the first job may fail to dispatch before the long line is reached;
    // either way the line is never held whole.
    assert!(!status.success(), "{stderr}");
    assert!(rss < MAX_RSS_BYTES, "pool: resident size reached {rss} bytes");
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
}

#[test]
fn journal_append_refuses_a_huge_line() {
    let root = Root::new();
    let dir = root.jdir("j");
    // The default max entry (16 MiB) is far below the line. The journal's own mapped cycle
    // files (a 64 MiB data file, partly touched) count in its resident size too, so the
    // bound is that plus the largest entry: still well below the line held whole.
    let r = run_with_huge_line(&root, &["journal", "append", "--dir", &dir]);
    assert_refused_within("journal", r, 16 << 20, (64 << 20) + (16 << 20) + (32 << 20));
}

#[test]
fn data_longer_than_a_message_is_refused_in_the_kinds_own_words() {
    let root = Root::new();
    let long = "y".repeat(5000);
    let line = root.fails(&["pub", "--domain", "d", "t", "--slot-size", "4096", "--data", &long]);
    assert!(line.contains("5000") && line.contains("4096"), "{line}");
}
