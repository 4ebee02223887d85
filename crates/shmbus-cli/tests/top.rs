//! `shmbus top`: the live view driven in a real terminal (tmux: `new-session`, `send-keys`,
//! `capture-pane`), and `--once` as a table and as JSON.
//!
//! Traffic comes from threads of this test process (a topic published about every 5 ms, a
//! subscriber reading it, a journal appended to), so the participants' pid is ours. Screens
//! are polled until they show what is expected, up to a generous deadline; nothing asserts
//! a time.

#![cfg(not(loom))]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::Root;
use serde_json::Value;
use shmbus::queue::QueueConfig;
use shmbus::topic::{Topic, TopicConfig};
use shmbus::{Domain, Journal, JournalConfig, Queue};

/// How long a screen may take to show what a test waits for.
const DEADLINE: Duration = Duration::from_secs(10);

/// A tmux server of its own (its own socket), killed with everything in it when dropped.
struct Tmux {
    socket: String,
    exit_file: PathBuf,
    /// The server's socket file, which `kill-server` leaves behind.
    socket_path: Option<PathBuf>,
}

impl Tmux {
    /// Starts `shmbus ARGS` in a `width` × `height` terminal. When it exits, its status is
    /// written to the exit file and the pane stays (so the screen can still be read).
    fn start(root: &Root, width: u16, height: u16, args: &str) -> Tmux {
        static N: AtomicUsize = AtomicUsize::new(0);
        let socket = format!("shmbus-top-test-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let exit_file = root.0.join(format!("{socket}.exit"));
        let bin = env!("CARGO_BIN_EXE_shmbus");
        let command = format!(
            "'{bin}' --root '{}' {args}; echo EXIT=$? > '{}'; sleep 600",
            root.0.display(),
            exit_file.display()
        );
        let mut t = Tmux { socket, exit_file, socket_path: None };
        t.tmux(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            &command,
        ]);
        let path = t.tmux(&["display-message", "-p", "#{socket_path}"]);
        t.socket_path = Some(PathBuf::from(path.trim()));
        t
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").arg("-L").arg(&self.socket).args(args).output().expect("tmux is installed");
        assert!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "top"])
    }

    /// Types keys (tmux key names: `Enter`, `Escape`, `C-c`, or literal text).
    fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.tmux(&["send-keys", "-t", "top", k]);
        }
    }

    /// The screen once `cond` holds for it; panics with the last screen after [`DEADLINE`].
    fn wait_for(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.screen();
            if cond(&s) {
                return s;
            }
            assert!(t0.elapsed() < DEADLINE, "the screen never showed {what}:\n{s}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the pane shows the alternate screen (what a full-screen program enters and
    /// must leave).
    fn alternate_screen(&self) -> bool {
        self.tmux(&["display-message", "-p", "-t", "top", "#{alternate_on}"]).trim() == "1"
    }

    /// The pid of `shmbus top`: the child of the pane's shell.
    fn top_pid(&self) -> u32 {
        let shell: u32 = self.tmux(&["display-message", "-p", "-t", "top", "#{pane_pid}"]).trim().parse().unwrap();
        let ppid = |pid: u32| -> Option<u32> {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // The command name can hold spaces: the fields after it start past the last ')'.
            stat[stat.rfind(')')? + 2..].split_whitespace().nth(1)?.parse().ok()
        };
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .find(|&pid| ppid(pid) == Some(shell))
            .expect("top runs under the pane's shell")
    }

    /// The exit status line `top` left, once it exited.
    fn wait_exit(&self) -> String {
        let t0 = Instant::now();
        loop {
            // The shell creates the file before it writes the line: an empty file is not yet
            // the answer.
            if let Ok(s) = std::fs::read_to_string(&self.exit_file) {
                if s.ends_with('\n') {
                    return s.trim().to_owned();
                }
            }
            assert!(t0.elapsed() < DEADLINE, "top did not exit; screen:\n{}", self.screen());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").arg("-L").arg(&self.socket).arg("kill-server").output();
        if let Some(p) = self.socket_path.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Threads making traffic until dropped.
struct Traffic {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Traffic {
    fn new() -> Traffic {
        Traffic { stop: Arc::new(AtomicBool::new(false)), threads: Vec::new() }
    }

    /// Publishes to `domain`/`name` about every 5 ms, and reads it with a subscriber.
    fn topic(&mut self, domain: &Domain, name: &str) {
        let topic = Topic::create_or_open(domain, name, &TopicConfig::default()).unwrap();
        let sub = topic.subscriber().unwrap();
        let mut publisher = topic.publisher().unwrap();
        let stop = self.stop.clone();
        self.threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                publisher.send(b"sixteen bytes...").unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
        }));
        let stop = self.stop.clone();
        self.threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = sub.recv_timeout(Duration::from_millis(50));
            }
        }));
    }

    /// Appends to the journal in `dir` about every 5 ms; a named reader `slow` reads two
    /// entries, acknowledges them (its position is then 2) and holds its place.
    fn journal(&mut self, dir: &Path) {
        let journal = Journal::create_or_open(dir, &JournalConfig::default()).unwrap();
        let mut appender = journal.appender().unwrap();
        for _ in 0..5 {
            appender.send(b"entry").unwrap();
        }
        let mut slow = journal.reader("slow").unwrap();
        slow.try_recv().unwrap();
        slow.try_recv().unwrap();
        slow.ack();
        let stop = self.stop.clone();
        self.threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                appender.send(b"entry").unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
            drop(slow);
        }));
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A queue `jobs` in `domain` holding one message.
fn queue(domain: &Domain) -> Queue {
    let q = Queue::create_or_open(domain, "jobs", &QueueConfig::default()).unwrap();
    q.producer().unwrap().try_send(b"job").unwrap();
    q
}

/// The table line of channel `key` (`domain/name`), if shown.
fn table_line<'a>(screen: &'a str, key: &str) -> Option<&'a str> {
    screen.lines().find(|l| l.trim_start_matches(['>', ' ']).starts_with(&format!("{key} ")))
}

/// The MSG/s cell of channel `key`'s line.
fn rate_cell(screen: &str, key: &str) -> Option<String> {
    let line = table_line(screen, key)?;
    line.trim_start_matches(['>', ' ']).split_whitespace().nth(2).map(str::to_owned)
}

fn line_of(screen: &str, key: &str) -> usize {
    screen.lines().position(|l| l.trim_start_matches(['>', ' ']).starts_with(&format!("{key} "))).unwrap()
}

#[test]
fn the_live_view_lists_sorts_filters_and_opens_a_channel() {
    let root = Root::new();
    let domain = Domain::with_root("demo", &root.0).unwrap();
    let mut traffic = Traffic::new();
    traffic.topic(&domain, "imu");
    let _q = queue(&domain);
    let tmux = Tmux::start(&root, 80, 24, "top --interval 0.2");

    let s = tmux.wait_for("both channels with a rate for imu", |s| {
        rate_cell(s, "demo/imu").is_some_and(|r| r != "0" && r != "-") && table_line(s, "demo/jobs").is_some()
    });
    for title in ["CHANNEL", "KIND", "MSG/s", "B/s", "S/R", "LAG", "DROP/s", "FULL/s", "FTX/s", "P50", "P99"] {
        assert!(s.contains(title), "no column {title}:\n{s}");
    }
    assert!(s.contains("sort: CHANNEL asc"), "{s}");
    assert!(table_line(&s, "demo/imu").unwrap().contains("topic"), "{s}");
    assert!(table_line(&s, "demo/jobs").unwrap().contains("queue"), "{s}");
    assert!(table_line(&s, "demo/imu").unwrap().contains("1/1"), "one publisher, one subscriber:\n{s}");
    assert!(line_of(&s, "demo/imu") < line_of(&s, "demo/jobs"), "by name:\n{s}");

    // Sort by rate (KIND, then MSG/s): the busy topic first; `r` reverses.
    tmux.keys(&["s", ">"]);
    let s = tmux.wait_for("the rate sort", |s| s.contains("sort: MSG/s desc"));
    assert!(line_of(&s, "demo/imu") < line_of(&s, "demo/jobs"), "busiest first:\n{s}");
    tmux.keys(&["r"]);
    let s = tmux.wait_for("the reversed sort", |s| s.contains("sort: MSG/s asc"));
    assert!(line_of(&s, "demo/jobs") < line_of(&s, "demo/imu"), "reversed:\n{s}");

    // A filter hides the other channel; Esc in the filter clears it.
    tmux.keys(&["/", "jo", "Enter"]);
    let s = tmux.wait_for("the filter", |s| s.contains("filter: jo") && table_line(s, "demo/imu").is_none());
    assert!(table_line(&s, "demo/jobs").is_some(), "{s}");
    tmux.keys(&["/", "Escape"]);
    tmux.wait_for("both again", |s| table_line(s, "demo/imu").is_some() && table_line(s, "demo/jobs").is_some());

    // The detail pane of imu: its participants, with our pid and their roles.
    tmux.keys(&["/", "imu", "Enter", "Enter"]);
    let pid = std::process::id().to_string();
    let s = tmux.wait_for("imu's participants", |s| s.contains("demo/imu (topic)") && s.contains("subscriber"));
    let publisher = s.lines().find(|l| l.contains("publisher")).unwrap();
    let subscriber = s.lines().find(|l| l.contains("subscriber")).unwrap();
    for l in [publisher, subscriber] {
        assert!(l.starts_with(&pid), "pid {pid} in {l:?}:\n{s}");
        assert!(l.contains("yes"), "alive: {l:?}");
    }
    assert!(s.contains("msg/s") && s.contains("p50"), "the sparklines' labels:\n{s}");
    // Esc closes the pane, q quits with 0.
    tmux.keys(&["Escape"]);
    tmux.wait_for("the pane closed", |s| !s.contains("subscriber"));
    assert!(tmux.alternate_screen());
    tmux.keys(&["q"]);
    assert_eq!(tmux.wait_exit(), "EXIT=0");
    assert!(!tmux.alternate_screen(), "the terminal is given back");
}

#[test]
fn the_detail_pane_shows_the_channels_schema() {
    let root = Root::new();
    let msg = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/Imu.msg");
    let len = std::fs::metadata(msg).unwrap().len();
    root.ok(&[
        "create",
        "--domain",
        "demo",
        "--kind",
        "topic",
        "imu",
        "--message-encoding",
        "cdr",
        "--schema-name",
        "sensor_msgs/msg/Imu",
        "--schema-encoding",
        "ros2msg",
        "--schema-file",
        msg,
    ]);
    let tmux = Tmux::start(&root, 80, 24, "top --interval 0.2");
    tmux.wait_for("the channel", |s| table_line(s, "demo/imu").is_some());
    tmux.keys(&["/", "imu", "Enter", "Enter"]);
    let line = format!("schema     cdr sensor_msgs/msg/Imu ros2msg {len} bytes");
    tmux.wait_for("imu's schema in its detail pane", |s| s.contains("demo/imu (topic)") && s.contains(&line));
    tmux.keys(&["q"]);
    assert_eq!(tmux.wait_exit(), "EXIT=0");
}

#[test]
fn sigterm_gives_the_terminal_back() {
    let root = Root::new();
    let tmux = Tmux::start(&root, 80, 24, "top --interval 0.2");
    tmux.wait_for("the view", |s| s.contains("shmbus top"));
    assert!(tmux.alternate_screen());
    // SAFETY: kill(2) on a pid of our own tmux pane; no memory is involved.
    assert_eq!(unsafe { libc::kill(tmux.top_pid() as libc::pid_t, libc::SIGTERM) }, 0);
    assert_eq!(tmux.wait_exit(), "EXIT=0");
    assert!(!tmux.alternate_screen(), "the terminal is given back");
    let s = tmux.screen();
    assert!(!s.contains("CHANNEL"), "the view's screen is gone:\n{s}");
}

#[test]
fn a_terminal_that_hangs_up_ends_the_view() {
    let root = Root::new();
    let tmux = Tmux::start(&root, 80, 24, "top --interval 0.2");
    tmux.wait_for("the view", |s| s.contains("shmbus top"));
    let pid = tmux.top_pid();
    // The whole terminal goes away (a closed window, an ended ssh session): top must end too,
    // not spin on a terminal nobody reads.
    tmux.tmux(&["kill-server"]);
    // Once its shell is gone top is nobody's child here: exited means gone or a zombie.
    let state = |pid: u32| -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat[stat.rfind(')')? + 2..].chars().next()
    };
    let t0 = Instant::now();
    while let Some(s) = state(pid).filter(|&s| s != 'Z') {
        if t0.elapsed() > DEADLINE {
            // SAFETY: kill(2) on the pid of the top this test started; no memory is involved.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            panic!("top (pid {pid}, state {s}) went on after its terminal hung up");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_terminal_too_small_says_so_and_the_view_comes_back_when_it_grows() {
    let root = Root::new();
    let domain = Domain::with_root("demo", &root.0).unwrap();
    let _q = queue(&domain);
    let tmux = Tmux::start(&root, 40, 10, "top --interval 0.2");
    tmux.wait_for("the too-small message", |s| s.contains("terminal too small") && s.contains("need 80x16"));
    tmux.tmux(&["resize-window", "-t", "top", "-x", "80", "-y", "24"]);
    tmux.wait_for("the table", |s| s.contains("CHANNEL") && table_line(s, "demo/jobs").is_some());
    tmux.keys(&["C-c"]);
    assert_eq!(tmux.wait_exit(), "EXIT=0");
}

#[test]
fn a_channel_removed_while_watched_leaves_the_screen_and_top_goes_on() {
    let root = Root::new();
    let domain = Domain::with_root("demo", &root.0).unwrap();
    for name in ["doomed", "stays"] {
        Topic::create_or_open(&domain, name, &TopicConfig::default()).unwrap();
    }
    let tmux = Tmux::start(&root, 80, 24, "top --interval 0.2");
    tmux.wait_for("both", |s| table_line(s, "demo/doomed").is_some() && table_line(s, "demo/stays").is_some());
    // Open doomed's detail pane, then remove its file.
    tmux.keys(&["/", "doomed", "Enter", "Enter"]);
    tmux.wait_for("doomed's pane", |s| s.contains("demo/doomed (topic)"));
    std::fs::remove_file(root.channel_file("demo", "doomed")).unwrap();
    let s = tmux.wait_for("the message", |s| s.contains("channel demo/doomed is gone"));
    assert!(table_line(&s, "demo/doomed").is_none() && !s.contains("(topic)"), "row and pane gone:\n{s}");
    // Still running: the filter clears and the other channel shows.
    tmux.keys(&["/", "Escape"]);
    let s = tmux.wait_for("the other channel", |s| table_line(s, "demo/stays").is_some());
    assert!(table_line(&s, "demo/doomed").is_none(), "{s}");
    tmux.keys(&["q"]);
    assert_eq!(tmux.wait_exit(), "EXIT=0");
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn once_json_gives_rates_participants_and_journal_readers() {
    let root = Root::new();
    let domain = Domain::with_root("demo", &root.0).unwrap();
    let mut traffic = Traffic::new();
    traffic.topic(&domain, "imu");
    let _q = queue(&domain);
    let jdir = root.jdir("log");
    traffic.journal(Path::new(&jdir));
    let v = root.json(&["top", "--once", "--json", "--interval", "0.5", "--journal", &jdir]);
    assert_eq!(v["interval_s"], 0.5);
    let channels = v["channels"].as_array().unwrap();
    let find = |name: &str| channels.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no {name}: {v}"));

    let imu = find("imu");
    for key in [
        "domain",
        "name",
        "kind",
        "rate_msgs_per_s",
        "sent_per_s",
        "received_per_s",
        "bandwidth_bytes_per_s",
        "senders",
        "receivers",
        "max_lag",
        "drops_per_s",
        "full_per_s",
        "blocked_per_s",
        "futex_per_s",
        "latency_p50_ns",
        "latency_p99_ns",
        "participants",
    ] {
        assert!(imu.get(key).is_some(), "no {key} in {imu}");
    }
    assert_eq!((imu["domain"].as_str(), imu["kind"].as_str()), (Some("demo"), Some("topic")));
    // About 200 a second; anything above none will do.
    assert!(num(&imu["rate_msgs_per_s"]) > 0.0, "{imu}");
    assert!(num(&imu["bandwidth_bytes_per_s"]) > 0.0, "{imu}");
    assert_eq!((imu["senders"].as_u64(), imu["receivers"].as_u64()), (Some(1), Some(1)));
    let parts = imu["participants"].as_array().unwrap();
    let mut roles: Vec<&str> = parts.iter().map(|p| p["role"].as_str().unwrap()).collect();
    roles.sort();
    assert_eq!(roles, ["publisher", "subscriber"]);
    for p in parts {
        assert_eq!(p["pid"].as_u64(), Some(u64::from(std::process::id())), "{p}");
        assert_eq!(p["alive"], true);
        assert!(p["process"].as_str().is_some_and(|s| !s.is_empty()), "{p}");
        assert!(p["messages"].as_u64().unwrap() > 0, "{p}");
        for key in [
            "index",
            "messages_per_s",
            "bytes_per_s",
            "lag",
            "drops",
            "full",
            "blocked",
            "futex_waits",
            "futex_wakes",
            "pins",
            "latency_p50_ns",
            "latency_p99_ns",
            "bytes",
        ] {
            assert!(p.get(key).is_some(), "no {key} in {p}");
        }
    }

    let jobs = find("jobs");
    assert_eq!(jobs["kind"], "queue");
    assert!(jobs["error"].is_null());

    let log = find(&jdir);
    assert_eq!(log["kind"], "journal");
    assert!(log["domain"].is_null());
    assert!(num(&log["rate_msgs_per_s"]) > 0.0, "{log}");
    assert!(log["file_bytes"].as_u64().unwrap() > 0, "{log}");
    let readers = log["readers"].as_array().unwrap();
    assert_eq!(readers.len(), 1, "{log}");
    assert_eq!(readers[0]["name"], "slow");
    assert_eq!(readers[0]["position"], 2);
    let lag = readers[0]["lag"].as_u64().unwrap();
    assert_eq!(lag, log["next_index"].as_u64().unwrap() - 2);
    assert!(lag >= 3, "{log}");
    assert_eq!(log["max_lag"].as_u64(), Some(lag));
}

#[test]
fn once_prints_a_table_and_bad_uses_fail_clearly() {
    let root = Root::new();
    let domain = Domain::with_root("demo", &root.0).unwrap();
    let _q = queue(&domain);
    let out = root.ok(&["top", "--once", "--interval", "0.1"]);
    let header = out.lines().next().unwrap();
    for title in ["DOMAIN", "NAME", "KIND", "MSG/S", "BYTES/S", "MAX_LAG", "P99"] {
        assert!(header.contains(title), "{out}");
    }
    assert!(out.lines().any(|l| l.starts_with("demo") && l.contains("jobs") && l.contains("queue")), "{out}");

    // Not a terminal (stdout is a pipe here): exit 2, pointing at --once.
    let out = root.run(&["top"]);
    assert_eq!(out.status.code(), Some(2));
    let err = common::one_error_line(&out);
    assert!(err.contains("--once"), "{err}");

    for bad in
        [&["top", "--interval", "0"][..], &["top", "--interval", "-1"], &["top", "--json"], &["top", "--interval", "x"]]
    {
        let out = root.run(bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        common::one_error_line(&out);
    }
    // A journal that is not there is a row with its error, not a failure.
    let v = root.json(&["top", "--once", "--json", "--interval", "0.1", "--journal", &root.jdir("none")]);
    let row = v["channels"].as_array().unwrap().iter().find(|c| c["kind"].is_null()).unwrap().clone();
    assert!(row["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
}

/// The view refreshes when a channel is created or removed, not only on its clock (here an
/// hour): the domain watch wakes it, and its status line names the latest event.
#[test]
fn a_channel_created_or_removed_shows_at_once() {
    let root = Root::new();
    let domain = Domain::with_root("demo", &root.0).unwrap();
    let _q = queue(&domain);
    let tmux = Tmux::start(&root, 100, 24, "top --interval 3600");
    tmux.wait_for("the queue", |s| table_line(s, "demo/jobs").is_some());
    root.ok(&["create", "--domain", "demo", "--kind", "topic", "fresh"]);
    let s = tmux.wait_for("the new topic", |s| table_line(s, "demo/fresh").is_some());
    assert!(s.contains("created topic demo/fresh"), "the event on the status line:\n{s}");
    root.ok(&["rm", "--domain", "demo", "fresh"]);
    let s = tmux.wait_for("the topic gone", |s| table_line(s, "demo/fresh").is_none());
    assert!(s.contains("removed topic demo/fresh"), "{s}");
    tmux.keys(&["q"]);
    assert_eq!(tmux.wait_exit(), "EXIT=0");
}
