//! Progress bars of `journal dump`, `replay` and `record`: bytes on stderr only when it is a
//! terminal and the journal is large, none for a pipe, `--quiet` or `--json`. The terminal is
//! a real pseudo-terminal made by `script(1)` (skipped, saying so, where it is missing).

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::Root;

/// More entries than the large-journal threshold (10,000).
const LARGE: usize = 10_001;

/// A journal of `n` small entries at `dir`.
fn journal_of(r: &Root, dir: &str, n: usize) {
    let input: String = (0..n).map(|i| format!("entry {i}\n")).collect();
    let out = r.run_stdin(&["journal", "append", "--dir", dir], input.as_bytes());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Whether `bytes` hold anything a bar draws: a carriage return or an escape sequence.
fn has_bar_bytes(bytes: &[u8]) -> bool {
    bytes.iter().any(|&b| b == b'\r' || b == 0x1b)
}

fn have_script() -> bool {
    let ok = Command::new("script").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: needs script(1) for a pseudo-terminal");
    }
    ok
}

/// Runs `shmbus args` with stderr on a pseudo-terminal and stdout to /dev/null; returns what
/// the terminal received.
fn on_terminal(r: &Root, args: &[&str]) -> Output {
    let exe = env!("CARGO_BIN_EXE_shmbus");
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let cmd = format!("{exe} {} > /dev/null", quoted.join(" "));
    Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("SHMBUS_ROOT", &r.0)
        .env("TERM", "xterm")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn dump_of_a_large_journal_draws_nothing_on_a_pipe_and_a_bar_on_a_terminal() {
    let r = Root::new();
    let (big, small) = (r.jdir("big"), r.jdir("small"));
    journal_of(&r, &big, LARGE);
    journal_of(&r, &small, 10);

    // stderr a pipe: not one byte, whatever the size.
    let out = r.run(&["journal", "dump", "--dir", &big]);
    assert!(out.status.success());
    assert_eq!(out.stdout.iter().filter(|&&b| b == b'\n').count(), LARGE);
    assert!(out.stderr.is_empty(), "{:?}", String::from_utf8_lossy(&out.stderr));

    if !have_script() {
        return;
    }
    let t = on_terminal(&r, &["journal", "dump", "--dir", &big]);
    assert!(t.status.success(), "{t:?}");
    let seen = String::from_utf8_lossy(&t.stdout);
    assert!(seen.contains("dump [") && seen.contains("entries"), "{seen:?}");
    for quiet in [
        &["journal", "dump", "--dir", &big, "--quiet"][..],
        &["journal", "dump", "--dir", &big, "--json"],
        &["journal", "dump", "--dir", &small],
    ] {
        let t = on_terminal(&r, quiet);
        assert!(t.status.success(), "{quiet:?}: {t:?}");
        assert!(!has_bar_bytes(&t.stdout), "{quiet:?} drew: {:?}", String::from_utf8_lossy(&t.stdout));
    }
}

#[test]
fn record_and_replay_of_a_large_recording_are_quiet_on_a_pipe() {
    let r = Root::new();
    // A history as long as the recording: the recorder never loses a message however far
    // it lags.
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t", "--slot-size", "64", "--history", "16384"]);
    let j = r.jdir("rec");
    let rec = r
        .cmd(&["record", "--domain", "d", "t", "--dir", &j, "--count", &LARGE.to_string(), "--timeout-ms", "60s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    r.wait_info("d", "t", |v| v["subscribers"] == 1);
    let input: String = (0..LARGE).map(|i| format!("m{i}\n")).collect();
    let out = r.run_stdin(&["pub", "--domain", "d", "t"], input.as_bytes());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = rec.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "record drew on a pipe: {:?}", String::from_utf8_lossy(&out.stderr));

    let out = r.run(&["replay", "--dir", &j, "--domain", "copy", "--speed", "max"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "replay drew on a pipe: {:?}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("replayed {LARGE} message(s)")));

    if !have_script() {
        return;
    }
    let t = on_terminal(&r, &["replay", "--dir", &j, "--domain", "copy2", "--speed", "max"]);
    assert!(t.status.success(), "{t:?}");
    assert!(String::from_utf8_lossy(&t.stdout).contains("replay ["), "{:?}", String::from_utf8_lossy(&t.stdout));
    let t = on_terminal(&r, &["replay", "--dir", &j, "--domain", "copy3", "--speed", "max", "--quiet"]);
    assert!(!has_bar_bytes(&t.stdout), "{:?}", String::from_utf8_lossy(&t.stdout));
}

#[test]
fn record_draws_its_counter_on_a_terminal() {
    if !have_script() {
        return;
    }
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t", "--slot-size", "64", "--history", "16384"]);
    let j = r.jdir("rec");
    let exe = env!("CARGO_BIN_EXE_shmbus");
    let cmd = format!("{exe} record --domain d t --dir '{j}' --count {LARGE} --timeout-ms 60s > /dev/null");
    let mut term = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("SHMBUS_ROOT", &r.0)
        .env("TERM", "xterm")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    r.wait_info("d", "t", |v| v["subscribers"] == 1);
    let input: String = (0..LARGE).map(|i| format!("m{i}\n")).collect();
    assert!(r.run_stdin(&["pub", "--domain", "d", "t"], input.as_bytes()).status.success());
    let end = Instant::now() + Duration::from_secs(60);
    while term.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = term.kill();
            panic!("record did not finish");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = term.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("recording ["), "{:?}", String::from_utf8_lossy(&out.stdout));
}
