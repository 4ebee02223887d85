//! The counters of the queue, stream and pool endpoints, read back through
//! `shmbus::stats`: exact counts after a known sequence in one process, the futex counts of
//! a receive that had to sleep, exact totals after a multi-process run (topic and queue),
//! and the counters of a SIGKILLed participant, shown dead and then cleaned.
//!
//! The multi-process tests run this binary again as children (`child_main`). A child says
//! what it did on stdout (`@@word`) and waits for a line on stdin before it exits, so its
//! participant entry (and counter block) is still there when the parent takes a snapshot.

#![cfg(not(loom))]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{child_command, child_role, env_str, env_u64, Scratch};
use shmbus::admin::Pending;
use shmbus::pool::{Pool, PoolConfig, PoolTryRecvError, PoolTrySendError};
use shmbus::queue::{Queue, QueueConfig, QueueSendTimeoutError, QueueTryRecvError, QueueTrySendError};
use shmbus::stats::{channel_stats, ChannelStats, ParticipantStats};
use shmbus::stream::{Stream, StreamConfig, StreamSendTimeoutError, StreamTrySendError};
use shmbus::topic::{Topic, TopicConfig, TopicRecvTimeoutError};
use shmbus::wait::WaitPolicy;
use shmbus::Domain;

/// Generous bound on anything a test waits for (a loaded CI machine), never asserted as a
/// time: only a hang runs into it.
const PATIENCE: Duration = Duration::from_secs(60);

/// The participants of `st` in role `role`.
fn in_role<'a>(st: &'a ChannelStats, role: &str) -> Vec<&'a ParticipantStats> {
    st.participants.iter().filter(|p| p.role_name == role).collect()
}

/// The one participant of `st` in role `role`.
fn one<'a>(st: &'a ChannelStats, role: &str) -> &'a ParticipantStats {
    let v = in_role(st, role);
    assert_eq!(v.len(), 1, "one {role} expected: {:?}", st.participants);
    v[0]
}

/// Polls channel `name` until `done` holds for a snapshot; panics after `PATIENCE`.
fn stats_until(domain: &Domain, name: &str, what: &str, done: impl Fn(&ChannelStats) -> bool) -> ChannelStats {
    let start = Instant::now();
    loop {
        let st = channel_stats(domain, name).unwrap();
        if done(&st) {
            return st;
        }
        assert!(start.elapsed() < PATIENCE, "still waiting for {what}: {:?}", st.participants);
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits until the endpoint in role `role` has entered a `FUTEX_WAIT` (so a notify now
/// finds it asleep, or about to be: its waiters flag is set before the wait is counted).
fn asleep(domain: &Domain, name: &str, role: &str) {
    stats_until(domain, name, &format!("the {role} to sleep"), |st| {
        in_role(st, role).iter().any(|p| p.counters.futex_waits >= 1)
    });
}

// ------------------------------------------------------------------ in one process

#[test]
fn a_queue_counts_sends_receives_full_and_waits_exactly() {
    let s = Scratch::new("stats-queue");
    let d = s.domain("d");
    let q = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(4).max_message_len(16)).unwrap();
    let mut tx = q.producer().unwrap();
    let mut rx = q.consumer().unwrap();
    for len in 1..=4 {
        tx.try_send(&vec![len as u8; len]).unwrap();
    }
    assert_eq!(tx.try_send(b"x"), Err(QueueTrySendError::Full));
    assert!(matches!(tx.send_timeout(b"x", Duration::from_millis(5)), Err(QueueSendTimeoutError::Timeout)));
    let mut got = 0;
    while let Ok(m) = rx.try_recv() {
        got += m.len();
    }
    assert_eq!(got, 10);
    assert!(matches!(rx.try_recv(), Err(QueueTryRecvError::Empty)));

    let st = channel_stats(&d, "q").unwrap();
    let (p, c) = (one(&st, "producer"), one(&st, "consumer"));
    assert!(p.alive && c.alive);
    let pc = &p.counters;
    assert_eq!((pc.messages, pc.bytes, pc.full), (4, 10, 2), "{pc:?}");
    assert_eq!(pc.blocked, 1, "the timed send found the queue full and waited: {pc:?}");
    assert_eq!(pc.spins.iter().sum::<u64>(), 0, "a wait that timed out is not in the histogram: {pc:?}");
    let cc = &c.counters;
    assert_eq!((cc.messages, cc.bytes, cc.drops, cc.position, cc.full), (4, 10, 0, 0, 0), "{cc:?}");
    assert_eq!(cc.blocked, 0, "{cc:?}");
    assert_eq!(cc.latency_samples(), 0, "queues carry no timestamps");
    assert_eq!(st.pending, Some(Pending::Messages(0)));

    // A receive that has to sleep: it counts one wait, its futex wait and its tries; the
    // send that ends it counts the wake.
    rx.set_wait_policy(WaitPolicy::BLOCK);
    let waiter = std::thread::spawn(move || {
        let m = rx.recv().unwrap();
        (rx, m)
    });
    asleep(&d, "q", "consumer");
    tx.send(b"hello").unwrap();
    let (rx, m) = waiter.join().unwrap();
    assert_eq!(m, b"hello");
    let st = channel_stats(&d, "q").unwrap();
    let (pc, cc) = (&one(&st, "producer").counters, &one(&st, "consumer").counters);
    assert_eq!((pc.messages, pc.bytes, pc.full, pc.blocked), (5, 15, 2, 1), "an untroubled send: {pc:?}");
    assert!(pc.futex_wakes >= 1, "the send woke the sleeping consumer: {pc:?}");
    assert_eq!((cc.messages, cc.bytes, cc.blocked), (5, 15, 1), "{cc:?}");
    assert!(cc.futex_waits >= 1, "{cc:?}");
    assert_eq!(cc.spins.iter().sum::<u64>(), 1, "one wait that succeeded: {cc:?}");
    drop(rx);
    let st = channel_stats(&d, "q").unwrap();
    assert!(in_role(&st, "consumer").is_empty(), "a dropped endpoint leaves the snapshot");
}

#[test]
fn a_stream_counts_records_bytes_full_and_the_read_position() {
    let s = Scratch::new("stats-stream");
    let d = s.domain("d");
    let stream = Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(4096)).unwrap();
    let mut r = stream.reader().unwrap();
    let mut w = stream.writer().unwrap();
    // 8-byte header, payload rounded up to 8: 4008 ring bytes, 88 left.
    w.try_send(&[1; 4000]).unwrap();
    assert!(matches!(w.try_send(&[2; 100]), Err(StreamTrySendError::Full { .. })));
    assert!(matches!(w.send_timeout(&[2; 100], Duration::from_millis(5)), Err(StreamSendTimeoutError::Timeout)));
    drop(r.try_recv_ref().unwrap()); // read in place, not consumed: not counted
    let st = channel_stats(&d, "s").unwrap();
    assert_eq!((one(&st, "reader").counters.messages, one(&st, "reader").counters.position), (0, 0));
    assert_eq!(r.try_recv().unwrap().len(), 4000);
    w.try_send(&[2; 100]).unwrap();
    assert_eq!(r.try_recv().unwrap().len(), 100);

    let st = channel_stats(&d, "s").unwrap();
    let (wc, rc) = (&one(&st, "writer").counters, &one(&st, "reader").counters);
    assert_eq!((wc.messages, wc.bytes, wc.full, wc.blocked), (2, 4100, 2, 1), "{wc:?}");
    assert_eq!((rc.messages, rc.bytes, rc.position, rc.drops), (2, 4100, 4008 + 112, 0), "{rc:?}");
    assert_eq!(rc.position, Stream::status(&d, "s").unwrap().head, "the reader is at the write position");
    assert_eq!(st.pending, Some(Pending::Bytes(0)));

    r.set_wait_policy(WaitPolicy::BLOCK);
    let waiter = std::thread::spawn(move || {
        let m = r.recv().unwrap();
        (r, m)
    });
    asleep(&d, "s", "reader");
    w.send(b"wake up").unwrap();
    let (r, m) = waiter.join().unwrap();
    assert_eq!(m, b"wake up");
    let st = channel_stats(&d, "s").unwrap();
    let (wc, rc) = (&one(&st, "writer").counters, &one(&st, "reader").counters);
    assert!(wc.futex_wakes >= 1, "the send woke the sleeping reader: {wc:?}");
    assert_eq!((rc.messages, rc.blocked, rc.position), (3, 1, 4120 + 16), "{rc:?}");
    assert!(rc.futex_waits >= 1, "{rc:?}");
    assert_eq!(rc.spins.iter().sum::<u64>(), 1, "{rc:?}");
    drop(r);
}

#[test]
fn a_pool_counts_jobs_dispatched_taken_and_refused() {
    let s = Scratch::new("stats-pool");
    let d = s.domain("d");
    let pool = Pool::create_or_open(&d, "p", &PoolConfig::default().max_workers(2).max_job_len(64)).unwrap();
    let mut disp = pool.dispatcher().unwrap();
    let mut worker = pool.worker().unwrap();
    assert!(matches!(worker.try_recv(), Err(PoolTryRecvError::Empty))); // now idle
    disp.try_send(b"abc").unwrap();
    assert_eq!(disp.try_send(b"no room"), Err(PoolTrySendError::AllBusy));
    assert_eq!(worker.try_recv().unwrap().data(), b"abc");
    assert!(matches!(worker.try_recv(), Err(PoolTryRecvError::Empty))); // idle again
    let mut sent = Vec::new();
    assert_eq!(disp.try_send_batch(&[&b"de"[..], b"fgh", b"ijkl"], &mut sent).unwrap(), 1);
    assert_eq!(worker.try_recv().unwrap().data(), b"de");

    let st = channel_stats(&d, "p").unwrap();
    let (dc, wc) = (&one(&st, "dispatcher").counters, &one(&st, "worker").counters);
    assert_eq!((dc.messages, dc.bytes, dc.full), (2, 5, 2), "{dc:?}");
    assert_eq!((wc.messages, wc.bytes, wc.full, wc.drops), (2, 5, 0, 0), "{wc:?}");

    worker.set_wait_policy(WaitPolicy::BLOCK);
    let waiter = std::thread::spawn(move || {
        let j = worker.recv().unwrap();
        (worker, j)
    });
    asleep(&d, "p", "worker");
    disp.try_send(b"wake").unwrap();
    let (worker, j) = waiter.join().unwrap();
    assert_eq!(j.data(), b"wake");
    let st = channel_stats(&d, "p").unwrap();
    let (dc, wc) = (&one(&st, "dispatcher").counters, &one(&st, "worker").counters);
    assert_eq!((dc.messages, dc.bytes), (3, 9), "{dc:?}");
    assert!(dc.futex_wakes >= 1, "the dispatch woke the sleeping worker: {dc:?}");
    assert_eq!((wc.messages, wc.bytes, wc.blocked), (3, 9, 1), "{wc:?}");
    assert!(wc.futex_waits >= 1, "{wc:?}");
    assert_eq!(wc.spins.iter().sum::<u64>(), 1, "{wc:?}");
    drop(worker);
}

// ------------------------------------------------------------------ child processes

const ROOT: &str = "SHMBUS_STATS_ROOT";

fn say(what: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "@@{what}").unwrap();
    out.flush().unwrap();
}

/// The next line from the parent (EOF: the parent is gone, so exit).
fn hear() -> String {
    let mut line = String::new();
    if std::io::stdin().read_line(&mut line).unwrap_or(0) == 0 {
        std::process::exit(0);
    }
    line.trim().to_owned()
}

/// Child entry point: does nothing unless run as a child.
#[test]
fn child_main() {
    let Some(role) = child_role() else { return };
    let d = Domain::with_root("d", env_str(ROOT)).unwrap();
    match role.as_str() {
        "publisher" => {
            let t = Topic::open(&d, "t").unwrap();
            let mut p = t.publisher().unwrap();
            say("ready");
            assert_eq!(hear(), "go");
            for i in 0..env_u64("N") {
                p.send(&vec![i as u8; msg_len(i)]).unwrap();
            }
            say("done");
            hear();
        }
        "subscriber" => {
            let t = Topic::open(&d, "t").unwrap();
            let sub = t.subscriber().unwrap();
            say("ready");
            assert_eq!(hear(), "go");
            let n = env_u64("N");
            // Until the last message is received or skipped.
            while sub.next_seq() <= n {
                match sub.recv_timeout(PATIENCE) {
                    Ok(_) | Err(TopicRecvTimeoutError::Lagged { .. }) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            say("done");
            hear();
        }
        "producer" => {
            let q = Queue::open(&d, "q").unwrap();
            let mut tx = q.producer().unwrap();
            say("ready");
            assert_eq!(hear(), "go");
            for i in 0..env_u64("N") {
                tx.send(&vec![i as u8; msg_len(i)]).unwrap();
            }
            say("done");
            hear();
        }
        "consumer" => {
            let q = Queue::open(&d, "q").unwrap();
            let mut rx = q.consumer().unwrap();
            say("ready");
            assert_eq!(hear(), "go");
            for _ in 0..env_u64("N") {
                rx.recv_timeout(PATIENCE).unwrap();
            }
            say("done");
            hear();
        }
        other => panic!("unknown child role {other}"),
    }
}

/// The length of message `i` a child sends: 1 to 32 bytes.
fn msg_len(i: u64) -> usize {
    (i % 32) as usize + 1
}

/// A child process with its stdin, and its `@@` lines arriving on a channel.
struct Kid {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Kid {
    fn spawn(scratch: &Scratch, role: &str, n: u64) -> Kid {
        let env = [(ROOT, scratch.path().display().to_string()), ("N", n.to_string())];
        let mut child = child_command("child_main", role, &env).stdin(Stdio::piped()).spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // libtest may print "test child_main ... " before the child's first words.
                if let Some(at) = line.find("@@") {
                    if tx.send(line[at + 2..].to_owned()).is_err() {
                        return;
                    }
                }
            }
        });
        Kid { child, stdin, lines }
    }

    fn expect(&mut self, what: &str) {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(line) => assert_eq!(line, what),
            Err(e) => {
                let _ = self.child.kill();
                panic!("child did not say {what:?} ({e}); exit: {:?}", self.child.wait());
            }
        }
    }

    fn tell(&mut self, what: &str) {
        writeln!(self.stdin, "{what}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Lets the child exit and checks that it succeeded.
    fn finish(mut self) {
        self.tell("exit");
        let st = common::wait_with_deadline(&mut self.child, PATIENCE.as_secs(), "child");
        assert!(st.success(), "child failed: {st:?}");
    }

    /// SIGKILLs the child and reaps it.
    fn kill(mut self) {
        self.child.kill().unwrap();
        let st = self.child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(st.signal(), Some(libc::SIGKILL));
    }
}

/// The participant of `st` whose process is `pid`.
fn of_pid(st: &ChannelStats, pid: u32) -> Option<&ParticipantStats> {
    st.participants.iter().find(|p| p.process.pid == pid)
}

#[test]
fn topic_counters_are_exact_after_a_multi_process_run() {
    const N: u64 = 1000;
    let s = Scratch::new("stats-topic-procs");
    let d = s.domain("d");
    let history = 16;
    Topic::create_or_open(&d, "t", &TopicConfig::default().max_message_len(64).history(history)).unwrap();
    let mut fast = Kid::spawn(&s, "subscriber", N);
    let mut slow = Kid::spawn(&s, "subscriber", N);
    fast.expect("ready");
    slow.expect("ready");
    let mut publisher = Kid::spawn(&s, "publisher", N);
    publisher.expect("ready");
    fast.tell("go");
    publisher.tell("go");
    publisher.expect("done");
    // The slow one starts reading only now: everything but the history is gone.
    slow.tell("go");
    fast.expect("done");
    slow.expect("done");

    let st = channel_stats(&d, "t").unwrap();
    let p = of_pid(&st, publisher.pid()).unwrap();
    let bytes: u64 = (0..N).map(|i| msg_len(i) as u64).sum();
    assert!(p.alive);
    assert_eq!((p.counters.messages, p.counters.bytes), (N, bytes), "{:?}", p.counters);
    for (who, kid) in [("fast", &fast), ("slow", &slow)] {
        let c = &of_pid(&st, kid.pid()).unwrap().counters;
        assert_eq!(c.messages + c.drops, N, "{who} subscriber: sent = received + dropped: {c:?}");
        assert_eq!(c.position, N + 1, "{who}: {c:?}");
        assert_eq!(st.lag(of_pid(&st, kid.pid()).unwrap()), Some(0));
    }
    let c = &of_pid(&st, slow.pid()).unwrap().counters;
    assert!(c.drops >= N - history as u64 - 64, "the slow subscriber lost all but the history: {c:?}");
    assert!(c.messages >= 1, "{c:?}");
    for k in [fast, slow, publisher] {
        k.finish();
    }
}

#[test]
fn queue_counters_are_exact_after_a_multi_process_run() {
    // Two producers send 500 each; two consumers take 480 each; 40 stay in the queue.
    const SENT: u64 = 500;
    const TAKEN: u64 = 480;
    let s = Scratch::new("stats-queue-procs");
    let d = s.domain("d");
    Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(64).max_message_len(64)).unwrap();
    let mut kids: Vec<(Kid, bool)> = Vec::new();
    for _ in 0..2 {
        kids.push((Kid::spawn(&s, "consumer", TAKEN), false));
        kids.push((Kid::spawn(&s, "producer", SENT), true));
    }
    for (k, _) in &mut kids {
        k.expect("ready");
    }
    for (k, _) in &mut kids {
        k.tell("go");
    }
    for (k, _) in &mut kids {
        k.expect("done");
    }

    let st = channel_stats(&d, "q").unwrap();
    let (mut sent, mut received) = (0, 0);
    for (k, producer) in &kids {
        let p = of_pid(&st, k.pid()).unwrap();
        assert!(p.alive);
        if *producer {
            assert_eq!(p.role_name, "producer");
            assert_eq!(p.counters.messages, SENT, "{:?}", p.counters);
            sent += p.counters.messages;
        } else {
            assert_eq!(p.role_name, "consumer");
            assert_eq!(p.counters.messages, TAKEN, "{:?}", p.counters);
            received += p.counters.messages;
        }
    }
    let pending = st.pending.map(Pending::count).unwrap();
    assert_eq!(pending, 2 * (SENT - TAKEN));
    assert_eq!(sent, received + pending, "sent = received + pending");
    assert_eq!(st.total("producer").bytes, 2 * (0..SENT).map(|i| msg_len(i) as u64).sum::<u64>());
    assert_eq!(st.total("consumer").drops, 0);
    for (k, _) in kids {
        k.finish();
    }
}

#[test]
fn a_sigkilled_subscribers_counters_are_shown_dead_then_cleaned() {
    let s = Scratch::new("stats-topic-kill");
    let d = s.domain("d");
    let topic = Topic::create_or_open(&d, "t", &TopicConfig::default().max_message_len(64).history(64)).unwrap();
    let mut victim = Kid::spawn(&s, "subscriber", 5);
    victim.expect("ready");
    let mut p = topic.publisher().unwrap();
    for i in 0..5 {
        p.send(&vec![0; msg_len(i)]).unwrap();
    }
    victim.tell("go");
    victim.expect("done");
    let pid = victim.pid();
    victim.kill();

    let st = channel_stats(&d, "t").unwrap();
    let v = of_pid(&st, pid).expect("the dead subscriber is still listed");
    assert!(!v.alive);
    assert_eq!(v.role_name, "subscriber");
    assert_eq!((v.counters.messages, v.counters.bytes, v.counters.position), (5, 15, 6), "{:?}", v.counters);
    assert!(one(&st, "publisher").alive);

    assert_eq!(topic.reclaim_dead(), 1);
    let st = channel_stats(&d, "t").unwrap();
    assert!(of_pid(&st, pid).is_none(), "reclaimed: {:?}", st.participants);
    assert_eq!(one(&st, "publisher").counters.messages, 5);
}

#[test]
fn a_sigkilled_consumers_counters_are_shown_dead_then_cleaned() {
    let s = Scratch::new("stats-queue-kill");
    let d = s.domain("d");
    let q = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(8).max_message_len(64)).unwrap();
    let mut victim = Kid::spawn(&s, "consumer", 3);
    victim.expect("ready");
    let mut tx = q.producer().unwrap();
    for i in 0..5 {
        tx.send(&vec![0; msg_len(i)]).unwrap();
    }
    victim.tell("go");
    victim.expect("done");
    let pid = victim.pid();
    victim.kill();

    let st = channel_stats(&d, "q").unwrap();
    let v = of_pid(&st, pid).expect("the dead consumer is still listed");
    assert!(!v.alive);
    assert_eq!(v.role_name, "consumer");
    assert_eq!((v.counters.messages, v.counters.bytes), (3, 6), "{:?}", v.counters);
    assert_eq!(st.pending, Some(Pending::Messages(2)));

    assert_eq!(q.reclaim_dead(), 1);
    let st = channel_stats(&d, "q").unwrap();
    assert!(of_pid(&st, pid).is_none(), "reclaimed: {:?}", st.participants);
    assert_eq!(one(&st, "producer").counters.messages, 5);
}
