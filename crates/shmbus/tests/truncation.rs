//! Truncating a channel's file under a live reader, for every kind, and SIGBUS chaining.
//!
//! A child process (this test binary re-executed, role in `SHMBUS_TEST_CHILD`) opens the
//! channel and receives in a loop with a short timeout until told to stop (a stop file) or
//! until its own deadline; the parent truncates the file (to 0, or to half its size) while
//! it runs and keeps publishing. Checked: the child exits with status 0 (a SIGBUS would kill
//! it with signal 7, exit status 135), prints its final line, and finishes well within the
//! watchdog's bound; after a truncation to 0 it reports contained faults, so the test knows
//! the truncated pages were really touched. The parent, which also touches the truncated
//! file when it publishes, must survive too.
//!
//! Chaining: a SIGBUS that is not a fault on a shmbus mapping still reaches whatever was
//! installed before shmbus (an `SA_SIGINFO` handler, a plain handler, `SIG_IGN`, or the
//! default action), with the outcome it would have had without shmbus; and opting out with
//! `SHMBUS_NO_SIGBUS_HANDLER=1` leaves the default behaviour (death by SIGBUS).

#![cfg(not(loom))]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{child_command, child_role, env_str, wait_with_deadline, Scratch};
use shmbus::{sigbus, Domain, WaitSet, WaitTimeoutError, Waitable};

/// The timeout of each receive in a child.
const RECV_TIMEOUT: Duration = Duration::from_millis(20);
/// A child stops by itself after this long even if never told to.
const CHILD_DEADLINE: Duration = Duration::from_secs(10);
/// The parent kills a child that has not exited after this long, and fails.
const WATCHDOG_SECS: u64 = 20;
/// A receive that takes longer than its timeout plus this is reported as a failure.
const CALL_SLACK: Duration = Duration::from_secs(3);
const NAME: &str = "ch";

// ---------------------------------------------------------------------------------------
// Children

#[test]
fn child_entry() {
    let Some(role) = child_role() else {
        return;
    };
    match role.as_str() {
        "topic" | "queue" | "stream" | "pool" | "journal" => reader_child(&role),
        "journal-appender" => journal::appender_child(),
        "chain-siginfo" => chain_siginfo_child(),
        "chain-plain" => chain_plain_child(),
        "chain-default" => chain_default_child(),
        "chain-ignored" => chain_ignored_child(),
        "chain-raise" => chain_raise_child(),
        other => panic!("unknown child role {other}"),
    }
}

/// What one receive call gave.
enum Got {
    Msg,
    Timeout,
    /// The kind's typed `Truncated` error, with its message.
    Truncated(String),
    Error(String),
}

/// The line a child prints the first time it gets a typed `Truncated` error.
const TRUNCATED_MARKER: &str = "typed truncated error: ";

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

fn reader_child(kind: &str) {
    let root = PathBuf::from(env_str("T_ROOT"));
    let stop = PathBuf::from(env_str("T_STOP"));
    let d = Domain::with_root("t", &root).unwrap();
    // With T_WAITSET set, each receive waits in a WaitSet first and then receives without
    // blocking only if the set said ready: a truncated file must make the endpoint ready.
    let waitset = std::env::var_os("T_WAITSET").is_some();
    let mut ws = WaitSet::new();
    // Waits for `ep` in the set: `false` on a timeout.
    let mut ready = |ep: &dyn Waitable| match ws.wait_timeout(&[ep], RECV_TIMEOUT) {
        Ok(_) => true,
        Err(WaitTimeoutError::Timeout) => false,
        Err(e) => panic!("waitset: {e}"),
    };
    // Each kind's receive loop, as a closure over its endpoint (in the kind's module).
    match kind {
        "topic" => topic::reader(&d, &stop, waitset, &mut ready),
        "queue" => queue::reader(&d, &stop, waitset, &mut ready),
        "stream" => stream::reader(&d, &stop, waitset, &mut ready),
        "pool" => pool::reader(&d, &stop, waitset, &mut ready),
        "journal" => journal::reader(&root, &stop, waitset, &mut ready),
        _ => unreachable!(),
    }
}

/// A WaitSet wait for one endpoint, as [`reader_child`] gives it to each kind's reader:
/// `false` on a timeout.
type Ready<'a> = &'a mut dyn FnMut(&dyn Waitable) -> bool;

/// Receives until the stop file appears or the child's deadline passes, then prints
/// `done msgs=… timeouts=… errors=… truncated=… faults=… slow=… first_error=…`; the first
/// typed `Truncated` error is also printed on a line of its own, after [`TRUNCATED_MARKER`].
fn receive_loop(stop: &Path, mut recv: impl FnMut() -> Got) {
    say("ready");
    let start = Instant::now();
    let (mut msgs, mut timeouts, mut errors, mut truncated, mut slow) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut first_error = String::new();
    while !stop.exists() && start.elapsed() < CHILD_DEADLINE {
        let t0 = Instant::now();
        match recv() {
            Got::Msg => msgs += 1,
            Got::Timeout => timeouts += 1,
            Got::Truncated(e) => {
                truncated += 1;
                if truncated == 1 {
                    say(&format!("{TRUNCATED_MARKER}{e}"));
                }
                // Reported at once by every later call: do not spin flat out.
                std::thread::sleep(Duration::from_millis(1));
            }
            Got::Error(e) => {
                errors += 1;
                if first_error.is_empty() {
                    first_error = e;
                }
                // An error may come back at once every time: do not spin flat out.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        if t0.elapsed() > RECV_TIMEOUT + CALL_SLACK {
            slow += 1;
        }
    }
    let faults = sigbus::contained_faults();
    say(&format!(
        "done msgs={msgs} timeouts={timeouts} errors={errors} truncated={truncated} faults={faults} slow={slow} first_error={first_error:?}"
    ));
}

// ---------------------------------------------------------------------------------------
// The parent side of the truncation tests

#[derive(Clone, Copy, Debug)]
enum Cut {
    Zero,
    Half,
}

/// What a finished reader child left.
struct Outcome {
    status: ExitStatus,
    lines: Vec<String>,
}

impl Outcome {
    /// The child's final line (the test harness may have printed on the same line first).
    fn done_line(&self) -> Option<&str> {
        self.lines.iter().find_map(|l| l.find("done msgs=").map(|i| &l[i..]))
    }

    fn said(&self, what: &str) -> bool {
        self.lines.iter().any(|l| l.ends_with(what))
    }

    fn field(&self, name: &str) -> Option<u64> {
        let line = self.done_line()?;
        let key = format!("{name}=");
        let rest = &line[line.find(&key)? + key.len()..];
        rest.split(' ').next()?.parse().ok()
    }
}

/// Spawns a reader child of `kind`, waits for it to be ready, runs `publish(i)` a few times,
/// truncates `file` as `cut` says, publishes more (the parent's own mapping of the file is
/// truncated too), tells the child to stop and waits for it under the watchdog.
fn run_reader_case(
    scratch: &Scratch,
    kind: &str,
    file: &Path,
    cut: Cut,
    env: &[(&str, String)],
    mut publish: impl FnMut(u64),
) -> Outcome {
    static N: AtomicUsize = AtomicUsize::new(0);
    let stop = scratch.path().join(format!("stop-{}", N.fetch_add(1, Ordering::Relaxed)));
    let mut all_env = vec![("T_ROOT", scratch.path().display().to_string()), ("T_STOP", stop.display().to_string())];
    all_env.extend_from_slice(env);
    let mut child = child_command("child_entry", kind, &all_env).spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let lines_thread = std::thread::spawn(move || {
        let mut kept = Vec::new();
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line.clone());
            kept.push(line);
        }
        kept
    });
    // Wait for "ready" (or for the child to die first).
    let deadline = Instant::now() + Duration::from_secs(WATCHDOG_SECS);
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(l) if l.ends_with("ready") => break,
            Ok(_) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break, // died: judged below
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("{kind}: the reader child never became ready");
                }
            }
        }
    }
    for i in 0..20 {
        publish(i);
        std::thread::sleep(Duration::from_millis(5));
    }
    let len = std::fs::metadata(file).unwrap().len();
    let new_len = match cut {
        Cut::Zero => 0,
        Cut::Half => len / 2,
    };
    std::fs::OpenOptions::new().write(true).open(file).unwrap().set_len(new_len).unwrap();
    for i in 20..80 {
        publish(i);
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::write(&stop, b"").unwrap();
    let status = wait_with_deadline(&mut child, WATCHDOG_SECS, kind);
    let lines = lines_thread.join().unwrap();
    Outcome { status, lines }
}

/// The checks every truncation case makes. `must_fault`: the reader is known to touch the
/// truncated file while it waits, so with a cut to 0 it must report contained faults.
fn assert_survived(kind: &str, cut: Cut, o: &Outcome) {
    assert_survived_touching(kind, cut, o, true)
}

fn assert_survived_touching(kind: &str, cut: Cut, o: &Outcome, must_fault: bool) {
    let what = format!("{kind} reader, file truncated ({cut:?})");
    if o.status.signal() == Some(libc::SIGBUS) {
        panic!("{what}: the reader was killed by SIGBUS; output: {:?}", o.lines);
    }
    assert!(o.status.success(), "{what}: the reader exited with {:?}; output: {:?}", o.status, o.lines);
    let done = o.done_line().unwrap_or_else(|| panic!("{what}: no final line; output: {:?}", o.lines));
    eprintln!("{what}: {done}");
    assert_eq!(o.field("slow"), Some(0), "{what}: a receive overran its timeout by seconds: {done}");
    if let (Cut::Zero, true) = (cut, must_fault) {
        // Every page is gone: the reader touched at least one of them.
        assert!(o.field("faults").unwrap_or(0) > 0, "{what}: the reader never touched the truncated file: {done}");
    }
}

/// After a cut to 0 the reader must have been told, with its kind's typed `Truncated`
/// error, whose message says what happened and what to do.
fn assert_typed_truncation(kind: &str, cut: Cut, o: &Outcome) {
    if let Cut::Half = cut {
        return; // the reader may never touch the cut half
    }
    let done = o.done_line().unwrap_or_default();
    assert!(
        o.field("truncated").unwrap_or(0) > 0,
        "{kind} reader, file truncated ({cut:?}): never got the typed Truncated error: {done}"
    );
    let msg = o
        .lines
        .iter()
        .find_map(|l| l.find(TRUNCATED_MARKER).map(|i| &l[i + TRUNCATED_MARKER.len()..]))
        .unwrap_or_else(|| panic!("{kind}: no `{TRUNCATED_MARKER}` line; output: {:?}", o.lines));
    for part in ["truncated by another process", "zeros", "remove the channel's file", "create the channel again"] {
        assert!(msg.contains(part), "{kind}: the Truncated message does not say {part:?}: {msg}");
    }
}

/// Creates a `kind` channel, runs a reader child of it while the parent publishes and
/// truncates the file as `cut` says.
fn kind_case(kind: &str, cut: Cut, env: &[(&str, String)]) -> Outcome {
    let s = Scratch::new(&format!("trunc-{kind}"));
    let d = s.domain("t");
    match kind {
        "topic" => topic::case(&s, &d, cut, env),
        "queue" => queue::case(&s, &d, cut, env),
        "stream" => stream::case(&s, &d, cut, env),
        "pool" => pool::case(&s, &d, cut, env),
        other => unreachable!("{other}"),
    }
}

fn topic_case(cut: Cut, env: &[(&str, String)]) -> Outcome {
    kind_case("topic", cut, env)
}

/// Both cuts for `kind`: the reader survives, and after a cut to 0 it gets the typed error.
fn survives_both_cuts(kind: &str) {
    for cut in [Cut::Zero, Cut::Half] {
        let o = kind_case(kind, cut, &[]);
        assert_survived(kind, cut, &o);
        assert_typed_truncation(kind, cut, &o);
    }
}

/// A reader asleep in a WaitSet is woken (its endpoint reports ready) once its file was
/// truncated, and the non-blocking receive then gives the typed error.
#[test]
fn a_truncated_endpoint_is_ready_in_a_waitset() {
    for kind in ["topic", "queue", "stream", "pool"] {
        let o = kind_case(kind, Cut::Zero, &[("T_WAITSET", "1".to_owned())]);
        let what = format!("{kind} in a WaitSet");
        assert_survived(&what, Cut::Zero, &o);
        assert_typed_truncation(&what, Cut::Zero, &o);
    }
}

// ---------------------------------------------------------------------------------------
// Topic

mod topic {
    use super::*;
    use shmbus::topic::{Topic, TopicConfig};

    const KIND: &str = "topic";

    pub(super) fn reader(d: &Domain, stop: &Path, waitset: bool, ready: Ready) {
        use shmbus::topic::{TopicRecvTimeoutError, TopicTryRecvError};
        let sub = Topic::open(d, NAME).unwrap().subscriber().unwrap();
        receive_loop(stop, || {
            if waitset {
                if !ready(&sub) {
                    return Got::Timeout;
                }
                return match sub.try_recv() {
                    Ok(_) => Got::Msg,
                    Err(TopicTryRecvError::Empty) => Got::Timeout,
                    Err(e @ TopicTryRecvError::Truncated) => Got::Truncated(e.to_string()),
                    Err(e) => Got::Error(e.to_string()),
                };
            }
            match sub.recv_timeout(RECV_TIMEOUT) {
                Ok(_) => Got::Msg,
                Err(TopicRecvTimeoutError::Timeout) => Got::Timeout,
                Err(e @ TopicRecvTimeoutError::Truncated) => Got::Truncated(e.to_string()),
                Err(e) => Got::Error(e.to_string()),
            }
        })
    }

    pub(super) fn case(s: &Scratch, d: &Domain, cut: Cut, env: &[(&str, String)]) -> Outcome {
        let t = Topic::create_or_open(d, NAME, &TopicConfig::default().max_message_len(256).history(64)).unwrap();
        let mut p = t.publisher().unwrap();
        let file = d.channel_path(NAME).unwrap();
        run_reader_case(s, KIND, &file, cut, env, |i| {
            let _ = p.send(format!("message {i}").as_bytes());
        })
    }

    #[test]
    fn topic_subscriber_survives_truncation() {
        survives_both_cuts("topic");
    }
}

// ---------------------------------------------------------------------------------------
// Queue

mod queue {
    use super::*;
    use shmbus::queue::{Queue, QueueConfig};

    const KIND: &str = "queue";

    pub(super) fn reader(d: &Domain, stop: &Path, waitset: bool, ready: Ready) {
        use shmbus::queue::{QueueRecvTimeoutError, QueueTryRecvError};
        let q = Queue::open(d, NAME).unwrap();
        let mut c = q.consumer().unwrap();
        receive_loop(stop, || {
            if waitset {
                if !ready(&c) {
                    return Got::Timeout;
                }
                return match c.try_recv() {
                    Ok(_) => Got::Msg,
                    Err(QueueTryRecvError::Empty) => Got::Timeout,
                    Err(e @ QueueTryRecvError::Truncated) => Got::Truncated(e.to_string()),
                    Err(e) => Got::Error(e.to_string()),
                };
            }
            match c.recv_timeout(RECV_TIMEOUT) {
                Ok(_) => Got::Msg,
                Err(QueueRecvTimeoutError::Timeout) => Got::Timeout,
                Err(e @ QueueRecvTimeoutError::Truncated) => Got::Truncated(e.to_string()),
                Err(e) => Got::Error(e.to_string()),
            }
        })
    }

    pub(super) fn case(s: &Scratch, d: &Domain, cut: Cut, env: &[(&str, String)]) -> Outcome {
        let q = Queue::create_or_open(d, NAME, &QueueConfig::default().capacity(64).max_message_len(256)).unwrap();
        let mut p = q.producer().unwrap();
        let file = d.channel_path(NAME).unwrap();
        run_reader_case(s, KIND, &file, cut, env, |i| {
            let _ = p.try_send(format!("message {i}").as_bytes());
        })
    }

    #[test]
    fn queue_consumer_survives_truncation() {
        survives_both_cuts("queue");
    }
}

// ---------------------------------------------------------------------------------------
// Stream

mod stream {
    use super::*;
    use shmbus::stream::{Stream, StreamConfig};

    const KIND: &str = "stream";

    pub(super) fn reader(d: &Domain, stop: &Path, waitset: bool, ready: Ready) {
        use shmbus::stream::{Stream, StreamRecvTimeoutError, StreamTryRecvError};
        let mut r = Stream::open(d, NAME).and_then(|s| s.reader()).unwrap();
        receive_loop(stop, || {
            if waitset {
                if !ready(&r) {
                    return Got::Timeout;
                }
                return match r.try_recv_ref() {
                    Ok(rec) => {
                        rec.consume();
                        Got::Msg
                    }
                    Err(StreamTryRecvError::Empty) => Got::Timeout,
                    Err(e @ StreamTryRecvError::Truncated) => Got::Truncated(e.to_string()),
                    Err(e) => Got::Error(e.to_string()),
                };
            }
            match r.recv_ref_timeout(RECV_TIMEOUT) {
                Ok(rec) => {
                    rec.consume();
                    Got::Msg
                }
                Err(StreamRecvTimeoutError::Timeout) => Got::Timeout,
                Err(e @ StreamRecvTimeoutError::Truncated) => Got::Truncated(e.to_string()),
                Err(e) => Got::Error(e.to_string()),
            }
        })
    }

    pub(super) fn case(s: &Scratch, d: &Domain, cut: Cut, env: &[(&str, String)]) -> Outcome {
        let mut w = Stream::create_or_open(d, NAME, &StreamConfig::default().capacity(64 << 10))
            .and_then(|s| s.writer())
            .unwrap();
        let file = d.channel_path(NAME).unwrap();
        run_reader_case(s, KIND, &file, cut, env, |i| {
            // Records big enough that 80 of them wrap the ring, crossing the cut.
            let _ = w.try_send(&[i as u8; 1500]);
        })
    }

    #[test]
    fn stream_reader_survives_truncation() {
        survives_both_cuts("stream");
    }
}

// ---------------------------------------------------------------------------------------
// Pool

mod pool {
    use super::*;
    use shmbus::pool::{Pool, PoolConfig};

    const KIND: &str = "pool";

    pub(super) fn reader(d: &Domain, stop: &Path, waitset: bool, ready: Ready) {
        use shmbus::pool::{PoolRecvTimeoutError, PoolTryRecvError};
        let mut w = Pool::open(d, NAME).and_then(|p| p.worker()).unwrap();
        receive_loop(stop, || {
            if waitset {
                // Only an idle worker gets jobs: declare it before waiting.
                w.done();
                if !ready(&w) {
                    return Got::Timeout;
                }
                return match w.try_recv_ref() {
                    Ok(_) => Got::Msg,
                    Err(PoolTryRecvError::Empty) => Got::Timeout,
                    Err(e @ PoolTryRecvError::Truncated) => Got::Truncated(e.to_string()),
                    Err(e) => Got::Error(e.to_string()),
                };
            }
            let got = match w.recv_ref_timeout(RECV_TIMEOUT) {
                Ok(_) => Got::Msg,
                Err(PoolRecvTimeoutError::Timeout) => Got::Timeout,
                Err(e @ PoolRecvTimeoutError::Truncated) => Got::Truncated(e.to_string()),
                Err(e) => Got::Error(e.to_string()),
            };
            if matches!(got, Got::Msg) {
                w.done();
            }
            got
        })
    }

    pub(super) fn case(s: &Scratch, d: &Domain, cut: Cut, env: &[(&str, String)]) -> Outcome {
        let config = PoolConfig::default().max_workers(4).max_job_len(256);
        let mut disp = Pool::create_or_open(d, NAME, &config).and_then(|p| p.dispatcher()).unwrap();
        let file = d.channel_path(NAME).unwrap();
        run_reader_case(s, KIND, &file, cut, env, |i| {
            let _ = disp.try_send(format!("job {i}").as_bytes());
            let _ = disp.reap();
        })
    }

    #[test]
    fn pool_worker_survives_truncation() {
        survives_both_cuts("pool");
    }
}

// ---------------------------------------------------------------------------------------
// Journal

mod journal {
    use super::*;
    use shmbus::journal::{Journal, JournalConfig, RollCycle};

    fn journal_opts() -> JournalConfig {
        JournalConfig::default().cycle_bytes(1 << 20).chunk_bytes(64 << 10).max_entry_len(4096).roll(RollCycle::Never)
    }

    pub(super) fn reader(root: &Path, stop: &Path, waitset: bool, ready: Ready) {
        let j = Journal::open(root.join("journal")).unwrap();
        let mut t = j.tailer().unwrap();
        let named = std::env::var_os("T_NAMED").is_some();
        let mut r = named.then(|| j.reader("r").unwrap());
        receive_loop(stop, || {
            use shmbus::journal::{JournalRecvTimeoutError, JournalTryRecvError};
            let t = r.as_mut().unwrap_or(&mut t);
            if waitset {
                if !ready(&*t) {
                    return Got::Timeout;
                }
                return match t.try_recv_ref() {
                    Ok(_) => Got::Msg,
                    Err(JournalTryRecvError::Empty) => Got::Timeout,
                    Err(e @ JournalTryRecvError::Truncated { .. }) => Got::Truncated(e.to_string()),
                    Err(e) => Got::Error(e.to_string()),
                };
            }
            match t.recv_ref_timeout(RECV_TIMEOUT) {
                Ok(_) => Got::Msg,
                Err(JournalRecvTimeoutError::Timeout) => Got::Timeout,
                Err(e @ JournalRecvTimeoutError::Truncated { .. }) => Got::Truncated(e.to_string()),
                Err(e) => Got::Error(e.to_string()),
            }
        })
    }

    /// The journal's files, newest cycle's data and index, and its meta file.
    fn journal_files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
        let mut data: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "sbjd"))
            .collect();
        data.sort();
        let data = data.pop().expect("the journal has a data file");
        let index = data.with_extension("sbji");
        assert!(index.exists(), "no index file next to {}", data.display());
        (data, index, dir.join("journal.meta"))
    }

    /// The journal's typed `Truncated` error, with what it must say.
    fn assert_journal_truncation(what: &str, o: &Outcome) {
        let done = o.done_line().unwrap_or_default();
        assert!(o.field("truncated").unwrap_or(0) > 0, "{what}: never got the typed Truncated error: {done}");
        let msg = o
            .lines
            .iter()
            .find_map(|l| l.find(TRUNCATED_MARKER).map(|i| &l[i + TRUNCATED_MARKER.len()..]))
            .unwrap_or_else(|| panic!("{what}: no `{TRUNCATED_MARKER}` line; output: {:?}", o.lines));
        for part in
            ["truncated by another process", "zeros", "lost", "before the cut are on disk", "open the journal again"]
        {
            assert!(msg.contains(part), "{what}: the Truncated message does not say {part:?}: {msg}");
        }
    }

    /// A tailer (plain, named, or asleep in a WaitSet) whose current data file is cut to 0
    /// gets the typed error, within its timeout, and survives.
    #[test]
    fn journal_truncation_is_a_typed_read_error() {
        for env in [vec![], vec![("T_NAMED", "1".to_owned())], vec![("T_WAITSET", "1".to_owned())]] {
            let s = Scratch::new("trunc-journal-typed");
            let dir = s.path().join("journal");
            let j = Journal::create_or_open(&dir, &journal_opts()).unwrap();
            let mut a = j.appender().unwrap();
            a.send(b"first").unwrap();
            let (data, _, _) = journal_files(&dir);
            let o = run_reader_case(&s, "journal", &data, Cut::Zero, &env, |i| {
                let _ = a.send(format!("entry {i}").as_bytes());
            });
            let what = format!("journal tailer {env:?}");
            assert_survived(&what, Cut::Zero, &o);
            assert_journal_truncation(&what, &o);
        }
    }

    /// An appender in its own process: appends until told the file was cut, then appends
    /// again and prints what each call gave.
    pub(super) fn appender_child() {
        let root = PathBuf::from(env_str("T_ROOT"));
        let go = PathBuf::from(env_str("T_STOP"));
        let j = Journal::open(root.join("journal")).unwrap();
        let mut a = j.appender().unwrap();
        // Without the background pretoucher: it may grow the cut file again (fallocate)
        // before the next append touches it, and that append then lands in the file itself,
        // not in a private page (see docs/robustness.md). This case is the other one.
        a.set_pretouch(false);
        for i in 0..10 {
            a.send(format!("before {i}").as_bytes()).unwrap();
        }
        say("ready");
        let start = Instant::now();
        while !go.exists() {
            assert!(start.elapsed() < CHILD_DEADLINE, "never told to go on");
            std::thread::sleep(Duration::from_millis(5));
        }
        for k in 0..3 {
            match a.send(format!("after {k}").as_bytes()) {
                Ok(i) => say(&format!("append {k}: ok {i}")),
                Err(e @ shmbus::journal::JournalSendError::Truncated { .. }) => {
                    say(&format!("append {k}: {TRUNCATED_MARKER}{e}"))
                }
                Err(e) => say(&format!("append {k}: error {e}")),
            }
        }
        say(&format!("done faults={}", sigbus::contained_faults()));
    }

    /// An appender whose current data file is cut to 0 by another process gets the typed
    /// error on its next append (its entry landed in a private page: never reported as
    /// appended), on every append after, and survives.
    #[test]
    fn a_truncated_journal_appender_gets_the_typed_error() {
        let s = Scratch::new("trunc-journal-appender");
        let dir = s.path().join("journal");
        drop(Journal::create_or_open(&dir, &journal_opts()).unwrap());
        let go = s.path().join("go");
        let env = [("T_ROOT", s.path().display().to_string()), ("T_STOP", go.display().to_string())];
        let mut child = child_command("child_entry", "journal-appender", &env).spawn().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut lines = Vec::new();
        let mut line = String::new();
        while out.read_line(&mut line).unwrap() > 0 {
            let ready = line.trim_end().ends_with("ready");
            lines.push(std::mem::take(&mut line));
            if ready {
                break;
            }
        }
        let (data, _, _) = journal_files(&dir);
        std::fs::OpenOptions::new().write(true).open(&data).unwrap().set_len(0).unwrap();
        std::fs::write(&go, b"").unwrap();
        let status = wait_with_deadline(&mut child, WATCHDOG_SECS, "journal appender");
        for l in out.lines() {
            lines.push(l.unwrap());
        }
        assert!(status.success(), "the appender exited with {status:?} (135: SIGBUS); output: {lines:?}");
        for k in 0..3 {
            let l = lines
                .iter()
                .find(|l| l.contains(&format!("append {k}: ")))
                .unwrap_or_else(|| panic!("no result for append {k}: {lines:?}"));
            assert!(l.contains(TRUNCATED_MARKER), "append {k} after the cut did not give the typed error: {l}");
        }
        let msg = lines[lines.iter().position(|l| l.contains("append 0: ")).unwrap()].clone();
        for part in ["truncated by another process", "is lost", "before the cut are on disk", "open the journal again"]
        {
            assert!(msg.contains(part), "the appender's Truncated message does not say {part:?}: {msg}");
        }
    }

    #[test]
    fn journal_tailer_survives_truncation() {
        // (which file, how much): the current cycle's data file both ways, then its index and
        // the meta file. A tailer reading in order does not look at the index, so only the data
        // and meta cases must fault.
        for (which, cut) in [(0, Cut::Zero), (0, Cut::Half), (1, Cut::Zero), (2, Cut::Zero)] {
            let s = Scratch::new("trunc-journal");
            let dir = s.path().join("journal");
            let j = Journal::create_or_open(&dir, &journal_opts()).unwrap();
            let mut a = j.appender().unwrap();
            a.send(b"first").unwrap();
            let (data, index, meta) = journal_files(&dir);
            let file = [data, index, meta][which].clone();
            let o = run_reader_case(&s, "journal", &file, cut, &[], |i| {
                let _ = a.send(format!("entry {i}").as_bytes());
            });
            let what = format!("journal ({})", file.file_name().unwrap().to_string_lossy());
            assert_survived_touching(&what, cut, &o, which != 1);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Opting out of the handler

/// Without the handler (opted out), the same truncation kills the reader: the cases above
/// would fail without the containment.
#[test]
fn opting_out_leaves_the_default_death_by_sigbus() {
    let o = topic_case(Cut::Zero, &[(sigbus::OPT_OUT_ENV, "1".to_owned())]);
    assert_eq!(
        o.status.signal(),
        Some(libc::SIGBUS),
        "with {} set the reader should die by SIGBUS; got {:?}, output {:?}",
        sigbus::OPT_OUT_ENV,
        o.status,
        o.lines
    );
    assert!(o.done_line().is_none());
}

// ---------------------------------------------------------------------------------------
// Chaining: SIGBUS that is not shmbus's

/// A one-page file mapped shared and read-write with plain `mmap` (not a shmbus mapping),
/// then truncated to 0: touching it faults.
fn foreign_truncated_page(dir: &Path) -> *mut u8 {
    use std::os::fd::AsRawFd;
    let path = dir.join("foreign");
    let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
    f.set_len(4096).unwrap();
    // SAFETY: a fresh shared mapping of our own file at an address of the kernel's choice.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, f.as_raw_fd(), 0)
    };
    assert_ne!(p, libc::MAP_FAILED);
    f.set_len(0).unwrap();
    p.cast()
}

/// Installs shmbus's handler by making a shmbus mapping (kept alive, and truncated so that a
/// fault on it can be checked to be contained, not chained).
fn shmbus_mapping(dir: &Path) -> (shmbus::sys::Mapping, std::fs::File) {
    use std::os::fd::AsFd;
    let path = dir.join("ours");
    let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
    f.set_len(4096).unwrap();
    let m = shmbus::sys::Mapping::map(f.as_fd(), 4096).unwrap();
    assert!(sigbus::handler_installed(), "making a mapping installs the handler");
    (m, f)
}

fn touch(p: *mut u8) -> u8 {
    // SAFETY: `p` is a mapped page (whose file may be gone: that is the point).
    unsafe { p.read_volatile() }
}

fn set_action(handler: libc::sighandler_t, flags: libc::c_int) {
    // SAFETY: a zeroed sigaction is valid; handler and flags set below.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler;
    sa.sa_flags = flags;
    // SAFETY: installs a fully initialized action for SIGBUS.
    assert_eq!(unsafe { libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut()) }, 0);
}

fn current_action() -> libc::sighandler_t {
    // SAFETY: reads the current action into a zeroed local.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads.
    assert_eq!(unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut sa) }, 0);
    sa.sa_sigaction
}

static OWN_CALLS: AtomicUsize = AtomicUsize::new(0);
static OWN_ADDR: AtomicUsize = AtomicUsize::new(0);

/// An application's SA_SIGINFO handler: records the call and maps a zero page over the
/// fault so that the access completes.
extern "C" fn own_siginfo_handler(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    OWN_CALLS.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the kernel's siginfo for a SIGBUS fault.
    let addr = unsafe { (*info).si_addr() } as usize;
    OWN_ADDR.store(addr, Ordering::SeqCst);
    let page = addr & !4095;
    // SAFETY: the faulting page belongs to the test's own foreign mapping.
    unsafe {
        libc::mmap(
            page as *mut libc::c_void,
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
            -1,
            0,
        )
    };
}

extern "C" fn own_plain_handler(_sig: libc::c_int) {
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(42) };
}

fn chain_siginfo_child() {
    let dir = PathBuf::from(env_str("T_ROOT"));
    set_action(own_siginfo_handler as *const () as libc::sighandler_t, libc::SA_SIGINFO);
    let (ours, ours_file) = shmbus_mapping(&dir);
    let foreign = foreign_truncated_page(&dir);
    assert_eq!(touch(foreign), 0);
    assert_eq!(OWN_CALLS.load(Ordering::SeqCst), 1, "the application's handler was called once");
    assert_eq!(OWN_ADDR.load(Ordering::SeqCst), foreign as usize, "with the kernel's siginfo");
    // A fault on the shmbus mapping is contained and does not reach the application.
    ours_file.set_len(0).unwrap();
    assert_eq!(touch(ours.as_ptr()), 0);
    assert!(ours.was_truncated());
    assert_eq!(OWN_CALLS.load(Ordering::SeqCst), 1, "a shmbus fault is not chained");
    // Opting out afterwards puts the application's handler back.
    shmbus::disable_sigbus_handler();
    assert!(!sigbus::handler_installed());
    assert_eq!(current_action(), own_siginfo_handler as *const () as libc::sighandler_t);
    say("chain-siginfo ok");
}

fn chain_plain_child() {
    let dir = PathBuf::from(env_str("T_ROOT"));
    set_action(own_plain_handler as *const () as libc::sighandler_t, 0);
    let (_ours, _f) = shmbus_mapping(&dir);
    let foreign = foreign_truncated_page(&dir);
    say("touching");
    touch(foreign);
    say("not reached: the plain handler exits with 42");
}

fn chain_default_child() {
    let dir = PathBuf::from(env_str("T_ROOT"));
    set_action(libc::SIG_DFL, 0);
    let (_ours, _f) = shmbus_mapping(&dir);
    let foreign = foreign_truncated_page(&dir);
    say("touching");
    touch(foreign);
    say("not reached: the default action kills");
}

fn chain_ignored_child() {
    let dir = PathBuf::from(env_str("T_ROOT"));
    set_action(libc::SIG_IGN, 0);
    let (_ours, _f) = shmbus_mapping(&dir);
    // A sent SIGBUS is ignored, as before…
    // SAFETY: raise has no preconditions.
    unsafe { libc::raise(libc::SIGBUS) };
    say("survived raise");
    // …but a fault cannot be ignored: the kernel kills, and so does the chained handler.
    let foreign = foreign_truncated_page(&dir);
    touch(foreign);
    say("not reached: a fault is never ignored");
}

fn chain_raise_child() {
    let dir = PathBuf::from(env_str("T_ROOT"));
    set_action(libc::SIG_DFL, 0);
    let (_ours, _f) = shmbus_mapping(&dir);
    say("raising");
    // SAFETY: raise has no preconditions.
    unsafe { libc::raise(libc::SIGBUS) };
    say("not reached: a sent SIGBUS with the default action kills");
}

fn run_chain_child(role: &str) -> Outcome {
    let s = Scratch::new("trunc-chain");
    let mut child = child_command("child_entry", role, &[("T_ROOT", s.path().display().to_string())]).spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let lines_thread = std::thread::spawn(move || BufReader::new(out).lines().map_while(Result::ok).collect());
    let status = wait_with_deadline(&mut child, WATCHDOG_SECS, role);
    Outcome { status, lines: lines_thread.join().unwrap() }
}

#[test]
fn a_foreign_fault_reaches_a_previous_siginfo_handler() {
    let o = run_chain_child("chain-siginfo");
    assert!(o.status.success(), "{:?}: {:?}", o.status, o.lines);
    assert!(o.said("chain-siginfo ok"), "{:?}", o.lines);
}

#[test]
fn a_foreign_fault_reaches_a_previous_plain_handler() {
    let o = run_chain_child("chain-plain");
    assert_eq!(o.status.code(), Some(42), "{:?}: {:?}", o.status, o.lines);
    assert!(o.said("touching"), "{:?}", o.lines);
}

#[test]
fn a_foreign_fault_still_kills_with_the_default_action() {
    let o = run_chain_child("chain-default");
    assert_eq!(o.status.signal(), Some(libc::SIGBUS), "{:?}: {:?}", o.status, o.lines);
    assert!(o.said("touching"), "{:?}", o.lines);
}

#[test]
fn an_ignored_sigbus_stays_ignored_when_sent_and_fatal_on_a_fault() {
    let o = run_chain_child("chain-ignored");
    assert_eq!(o.status.signal(), Some(libc::SIGBUS), "{:?}: {:?}", o.status, o.lines);
    assert!(o.said("survived raise"), "{:?}", o.lines);
}

#[test]
fn a_sent_sigbus_is_not_contained() {
    let o = run_chain_child("chain-raise");
    assert_eq!(o.status.signal(), Some(libc::SIGBUS), "{:?}: {:?}", o.status, o.lines);
    assert!(o.said("raising"), "{:?}", o.lines);
}
