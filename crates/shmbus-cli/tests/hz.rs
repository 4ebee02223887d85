//! `shmbus hz`, `bw` and `delay` against channels fed at a known pace by a thread of the
//! test. Tolerances are wide (the machine may be loaded): the pace is 200 messages/s of 100
//! bytes, and the checks accept 10 to 400 messages/s (a loaded machine paces the feeder
//! slower, never faster).

mod common;

use std::process::{Child, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::Root;
use serde_json::Value;
use shmbus::journal::{Journal, JournalConfig, RollCycle};
use shmbus::queue::{Queue, QueueConfig};
use shmbus::topic::{Topic, TopicConfig};
use shmbus::Domain;

const PACE: Duration = Duration::from_millis(5);
const SIZE: usize = 100;

/// A thread sending 100-byte messages every 5 ms until dropped; counts what it sent.
struct Feeder {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Feeder {
    fn start(mut send: impl FnMut(&[u8]) + Send + 'static) -> Feeder {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (s, n) = (stop.clone(), sent.clone());
        let thread = thread::spawn(move || {
            let msg = [7u8; SIZE];
            let mut next = Instant::now();
            while !s.load(Ordering::Relaxed) {
                send(&msg);
                n.fetch_add(1, Ordering::Relaxed);
                next += PACE;
                thread::sleep(next.saturating_duration_since(Instant::now()));
            }
        });
        Feeder { stop, sent, thread: Some(thread) }
    }

    /// Stops the thread; returns how many messages it sent.
    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        self.sent.load(Ordering::Relaxed)
    }
}

impl Drop for Feeder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn domain(root: &Root) -> Domain {
    Domain::with_root("d", &root.0).unwrap()
}

/// The JSON lines of a successful run.
fn json_lines(root: &Root, args: &[&str]) -> Vec<Value> {
    let text = root.ok(args);
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect()
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

fn topic_feeder(root: &Root) -> Feeder {
    let topic = Topic::create_or_open(&domain(root), "t", &TopicConfig::default()).unwrap();
    let mut publisher = topic.publisher().unwrap();
    Feeder::start(move |m| {
        publisher.send(m).unwrap();
    })
}

#[test]
fn hz_bw_and_delay_measure_a_paced_topic() {
    let root = Root::new();
    let feeder = topic_feeder(&root);
    let base = ["--domain", "d", "t", "--count", "2", "--interval", "0.5", "--json"];

    let hz = json_lines(&root, &[&["hz"][..], &base].concat());
    assert_eq!(hz.len(), 2);
    let last = &hz[1];
    assert_eq!(last["kind"], "topic");
    let rate = f(last, "rate_per_s");
    assert!((10.0..=400.0).contains(&rate), "rate {rate} in {last}");
    assert!(last["window"].as_u64().unwrap() >= 2, "{last}");
    let (min, max, mean) = (f(last, "interval_min_ns"), f(last, "interval_max_ns"), f(last, "interval_mean_ns"));
    assert!(min > 0.0 && min <= mean && mean <= max, "{last}");
    assert!(mean > 1e6 && mean < 100e6, "mean interval {mean} ns in {last}");

    let bw = json_lines(&root, &[&["bw"][..], &base].concat());
    let last = &bw[1];
    let bytes = f(last, "bytes_per_s");
    assert!((10.0 * SIZE as f64..=400.0 * SIZE as f64).contains(&bytes), "bw {bytes} in {last}");
    assert_eq!(f(last, "size_mean"), SIZE as f64);
    assert_eq!(last["size_min"], SIZE);
    assert_eq!(last["size_max"], SIZE);

    let delay = json_lines(&root, &[&["delay"][..], &base].concat());
    let last = &delay[1];
    let (p50, p99, max) = (f(last, "p50_ns"), f(last, "p99_ns"), f(last, "max_ns"));
    assert!(p50 > 0.0 && p50 < 1e9, "p50 {p50} in {last}");
    assert!(p50 <= p99 && p99 <= max, "{last}");
    feeder.stop();

    // Text: one line per interval, in human units.
    let text = root.ok(&["hz", "--domain", "d", "t", "--count", "1", "--interval", "0.2"]);
    assert_eq!(text, "no messages yet\n");
}

#[test]
fn a_topic_without_messages_gives_nulls_and_keeps_waiting() {
    let root = Root::new();
    Topic::create_or_open(&domain(&root), "t", &TopicConfig::default()).unwrap();
    let lines = json_lines(&root, &["delay", "--domain", "d", "t", "--count", "2", "--interval", "0.2", "--json"]);
    assert_eq!(lines.len(), 2);
    for l in &lines {
        assert_eq!(l["window"], 0);
        assert!(l["p50_ns"].is_null(), "{l}");
    }
    // A queue nobody sends to: samples, but no rate.
    Queue::create_or_open(&domain(&root), "q", &QueueConfig::default()).unwrap();
    let lines = json_lines(&root, &["hz", "--domain", "d", "q", "--count", "1", "--interval", "0.2", "--json"]);
    assert!(lines[0]["window"].as_u64().unwrap() > 0, "{}", lines[0]);
    assert!(lines[0]["rate_per_s"].is_null(), "{}", lines[0]);
    let text = root.ok(&["bw", "--domain", "d", "q", "--count", "1", "--interval", "0.2"]);
    assert!(text.starts_with("no messages yet"), "{text}");
}

#[test]
fn hz_on_a_queue_reads_counters_and_takes_nothing() {
    let root = Root::new();
    let queue = Queue::create_or_open(&domain(&root), "q", &QueueConfig::default().capacity(4096)).unwrap();
    let mut producer = queue.producer().unwrap();
    let feeder = Feeder::start(move |m| producer.send(m).unwrap());
    let hz = json_lines(&root, &["hz", "--domain", "d", "q", "--count", "2", "--interval", "0.5", "--json"]);
    let bw = json_lines(&root, &["bw", "--domain", "d", "q", "--count", "1", "--interval", "0.5", "--json"]);
    let sent = feeder.stop();

    let last = &hz[1];
    assert_eq!(last["kind"], "queue");
    let rate = f(last, "rate_per_s");
    assert!((10.0..=400.0).contains(&rate), "rate {rate} in {last}");
    assert!(f(last, "sample_rate_max_per_s") >= rate, "{last}");
    assert!(last.get("interval_min_ns").is_none(), "a counter sample is not a message interval: {last}");
    // Bytes come from the producers' counters: when they are counted, they match the pace.
    let b = &bw[0];
    assert!(b["messages"].as_u64().unwrap() > 0, "{b}");
    if let Some(bytes) = b["bytes_per_s"].as_f64() {
        assert!((10.0 * SIZE as f64..=400.0 * SIZE as f64).contains(&bytes), "bw {bytes} in {b}");
        assert_eq!(f(b, "size_mean"), SIZE as f64);
    }

    // Every message sent is still there: hz and bw took none.
    assert_eq!(Queue::status(&domain(&root), "q").unwrap().depth, sent);
    let mut consumer = queue.consumer().unwrap();
    let mut received = 0;
    while consumer.try_recv().is_ok() {
        received += 1;
    }
    assert_eq!(received, sent);
}

#[test]
fn hz_on_a_journal_follows_its_appends() {
    let root = Root::new();
    let dir = root.jdir("j");
    let config = JournalConfig::default()
        .cycle_bytes(1 << 20)
        .chunk_bytes(64 << 10)
        .max_entry_len(64 << 10)
        .roll(RollCycle::Never);
    let journal = Journal::create_or_open(&dir, &config).unwrap();
    let mut appender = journal.appender().unwrap();
    let feeder = Feeder::start(move |m| {
        appender.send(m).unwrap();
    });
    let hz = json_lines(&root, &["hz", "--journal", &dir, "--count", "2", "--interval", "0.5", "--json"]);
    let bw = json_lines(&root, &["bw", "--journal", &dir, "--count", "1", "--interval", "0.5", "--json"]);
    feeder.stop();
    let rate = f(&hz[1], "rate_per_s");
    assert!((10.0..=400.0).contains(&rate), "rate {rate} in {}", hz[1]);
    // Data bytes include each entry's framing: at least the payload, at most a few times it.
    let bytes = f(&bw[0], "bytes_per_s");
    assert!((10.0 * SIZE as f64..=4.0 * 400.0 * SIZE as f64).contains(&bytes), "bw {bytes} in {}", bw[0]);

    let out = root.run(&["delay", "--journal", &dir]);
    assert_eq!(out.status.code(), Some(2));
    assert!(common::one_error_line(&out).contains("wall-clock"));
}

#[test]
fn delay_refuses_kinds_without_timestamps() {
    let root = Root::new();
    Queue::create_or_open(&domain(&root), "q", &QueueConfig::default()).unwrap();
    let out = root.run(&["delay", "--domain", "d", "q", "--count", "1"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let line = common::one_error_line(&out);
    assert!(line.contains("queue 'q' carries no timestamps"), "{line}");
}

#[test]
fn a_missing_channel_is_one_clear_line() {
    let root = Root::new();
    for verb in ["hz", "bw", "delay"] {
        let out = root.run(&[verb, "--domain", "d", "nope", "--count", "1"]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let line = common::one_error_line(&out);
        assert!(line.contains("no channel d/nope"), "{line}");
        assert!(!line.contains(root.0.to_str().unwrap()), "{line}");
    }
    let out = root.run(&["hz", "--journal", &root.jdir("none"), "--count", "1"]);
    assert_eq!(out.status.code(), Some(1));
    common::one_error_line(&out);
    // Neither a channel nor a journal: a usage error.
    assert_eq!(root.run(&["hz", "--count", "1"]).status.code(), Some(2));
}

/// Waits for `child` to exit (killing it after 20 s), with its output.
fn wait_output(mut child: Child) -> Output {
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_channel_removed_while_watched_ends_the_watch_with_one_line() {
    let root = Root::new();
    Queue::create_or_open(&domain(&root), "q", &QueueConfig::default()).unwrap();
    Topic::create_or_open(&domain(&root), "t", &TopicConfig::default()).unwrap();
    for name in ["q", "t"] {
        let child = root
            .cmd(&["hz", "--domain", "d", name, "--interval", "0.1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        thread::sleep(Duration::from_millis(300));
        std::fs::remove_file(root.channel_file("d", name)).unwrap();
        let out = wait_output(child);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let line = common::one_error_line(&out);
        assert!(line.contains("disappeared while watched"), "{line}");
    }
}
