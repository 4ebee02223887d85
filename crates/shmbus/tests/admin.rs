//! `admin::inspect`: a read-only look that needs read permission only, and the undelivered
//! data it reports per kind.
//!
//! The test binary re-executes itself as the child: `child_entry` does nothing unless
//! `SHMBUS_TEST_CHILD` names a role.
#![cfg(not(loom))]

mod common;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::{child_command, child_role, eventually, sigkill, wait_with_deadline, Scratch};
use shmbus::admin::{self, Pending};
use shmbus::pool::{Pool, PoolConfig};
use shmbus::queue::{Queue, QueueConfig};
use shmbus::stream::{Stream, StreamConfig};
use shmbus::topic::{Topic, TopicConfig};
use shmbus::{Domain, Kind, OpenError};

/// The uid and gid of `nobody`.
const NOBODY: u32 = 65534;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Makes `path` and its parent directories up to `root` traversable by everyone, as a domain
/// shared with a monitoring account would be.
fn open_up(root: &Path, path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut dir = path.parent();
    while let Some(d) = dir {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        if d == root {
            break;
        }
        dir = d.parent();
    }
}

// ------------------------------------------------------------------ child roles

#[test]
fn child_entry() {
    let Some(role) = child_role() else {
        return;
    };
    let root = PathBuf::from(std::env::var("SHMBUS_ROOT").unwrap());
    let d = Domain::with_root("t", &root).unwrap();
    match role.as_str() {
        "nobody_inspects" => child_nobody_inspects(&d),
        "nobody_statuses" => child_nobody_statuses(&d),
        "worker" => {
            let mut w = Pool::open(&d, "p").unwrap().worker().unwrap();
            while w.recv_ref().is_ok() {}
        }
        "holder" => {
            // Takes one job, says so, and holds it until killed.
            let mut w = Pool::open(&d, "p").unwrap().worker().unwrap();
            let _job = w.recv_ref().unwrap();
            println!("took");
            loop {
                std::thread::sleep(std::time::Duration::from_secs(60));
            }
        }
        other => panic!("unknown child role {other}"),
    }
}

/// Drops this (single-purpose child) process to nobody.
fn become_nobody() {
    // SAFETY: plain credential calls on this (single-purpose) process; order matters:
    // supplementary groups and gid while still privileged, uid last.
    unsafe {
        assert_eq!(libc::setgroups(0, std::ptr::null()), 0, "setgroups");
        assert_eq!(libc::setresgid(NOBODY, NOBODY, NOBODY), 0, "setresgid");
        assert_eq!(libc::setresuid(NOBODY, NOBODY, NOBODY), 0, "setresuid");
        // A credential change clears the parent-death signal: set it again.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
    }
}

/// Drops to nobody, checks that a read-write open is refused, then inspects read-only.
fn child_nobody_inspects(d: &Domain) {
    become_nobody();
    let path = d.channel_path("q").unwrap();
    // The premise: an endpoint (read-write) open is refused to this user.
    match Queue::open(d, "q") {
        Err(OpenError::PermissionDenied { .. }) => {}
        other => panic!("a read-write open as nobody should be refused, got {other:?}"),
    }
    let report = admin::inspect(&path).expect("inspect needs read permission only");
    assert_eq!(report.header.kind, Kind::Queue);
    assert!(!report.writable, "nobody may not open it read-write");
    assert_eq!(report.pending, Some(Pending::Messages(3)));
    assert_eq!(report.live.len(), 1, "the parent's producer is listed: {report:?}");
    assert_eq!(shmbus::segment::inspect(&path).unwrap().kind, Kind::Queue);
    println!("inspected as nobody: ok");
}

/// Drops to nobody, checks that every kind refuses it a read-write open, then reads every
/// kind's status of the channels `every_status_needs_read_permission_only` made.
fn child_nobody_statuses(d: &Domain) {
    become_nobody();
    let refused = |r: Result<(), OpenError>, kind: &str| match r {
        Err(OpenError::PermissionDenied { .. }) => {}
        other => panic!("a read-write open of the {kind} as nobody should be refused, got {other:?}"),
    };
    refused(Topic::open(d, "t").map(drop), "topic");
    refused(Queue::open(d, "q").map(drop), "queue");
    refused(Stream::open(d, "s").map(drop), "stream");
    refused(Pool::open(d, "p").map(drop), "pool");

    let t = Topic::status(d, "t").expect("topic status needs read permission only");
    assert_eq!((t.last_seq, t.publishers, t.subscribers, t.pinned_slots), (2, 1, 1, 1), "{t:?}");
    let q = Queue::status(d, "q").expect("queue status needs read permission only");
    assert_eq!((q.depth, q.sent, q.received, q.producers, q.consumers), (3, 3, 0, 1, 0), "{q:?}");
    let st = Stream::status(d, "s").expect("stream status needs read permission only");
    assert_eq!((st.used, st.head, st.tail), (16, 16, 0), "{st:?}");
    assert!(st.writer.is_some_and(|w| w.alive) && st.reader.is_none(), "{st:?}");
    let p = Pool::status(d, "p").expect("pool status needs read permission only");
    assert!(p.dispatcher_alive && p.dispatcher_pid.is_some(), "{p:?}");
    assert_eq!((p.workers, p.dispatched, p.lost), (0, 0, 0), "{p:?}");
    println!("statuses as nobody: ok");
}

// ------------------------------------------------------------------ tests

/// Every kind's `status` reads a channel file of mode 0444 owned by another user (root):
/// the read-only mapping is all it needs, and it changes nothing.
#[test]
fn every_status_needs_read_permission_only() {
    if child_role().is_some() {
        return;
    }
    if !is_root() {
        eprintln!("skipped: needs root to create channels and read their status as uid {NOBODY}");
        return;
    }
    let s = Scratch::new("admin-status-ro");
    let d = s.domain("t");
    let t = Topic::create_or_open(&d, "t", &TopicConfig::default().max_message_len(64).history(4).mode(0o444)).unwrap();
    let mut publisher = t.publisher().unwrap();
    let sub = t.subscriber().unwrap();
    publisher.send(b"one").unwrap();
    publisher.send(b"two").unwrap();
    let pinned = sub.recv_ref().unwrap();
    let q =
        Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(8).max_message_len(16).mode(0o444)).unwrap();
    let mut tx = q.producer().unwrap();
    for m in [b"a", b"b", b"c"] {
        tx.try_send(m).unwrap();
    }
    let mut w = Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(1 << 16).mode(0o444))
        .and_then(|s| s.writer())
        .unwrap();
    w.try_send(b"hello").unwrap();
    let config = PoolConfig::default().max_workers(2).max_job_len(64).mode(0o444);
    let _dispatcher = Pool::create_or_open(&d, "p", &config).unwrap().dispatcher().unwrap();
    for name in ["t", "q", "s", "p"] {
        let path = d.channel_path(name).unwrap();
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!((meta.mode() & 0o777, meta.uid()), (0o444, 0), "{name}");
        open_up(s.path(), &path);
    }

    let mut child = child_command("child_entry", "nobody_statuses", &[("SHMBUS_ROOT", s.path().display().to_string())])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let st = wait_with_deadline(&mut child, 60, "status as nobody");
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert!(st.success() && out.contains("statuses as nobody: ok"), "child failed ({st}): {out}");
    // The statuses wrote nothing: the pin holds, the messages are all there, in order.
    assert_eq!(&*pinned, b"one");
    drop(pinned);
    assert_eq!(Topic::status(&d, "t").unwrap().pinned_slots, 0);
    let mut rx = q.consumer().unwrap();
    for m in [b"a", b"b", b"c"] {
        assert_eq!(rx.try_recv().unwrap(), m);
    }
    let mut r = Stream::open(&d, "s").and_then(|s| s.reader()).unwrap();
    assert_eq!(&*r.try_recv_ref().unwrap(), b"hello");
}

#[test]
fn inspect_needs_read_permission_only() {
    if child_role().is_some() {
        return;
    }
    if !is_root() {
        eprintln!("skipped: needs root to create a segment and inspect it as uid {NOBODY}");
        return;
    }
    let s = Scratch::new("admin-ro");
    let d = s.domain("t");
    let q = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(8).max_message_len(16)).unwrap();
    let mut tx = q.producer().unwrap();
    for m in [b"a", b"b", b"c"] {
        tx.try_send(m).unwrap();
    }
    let path = d.channel_path("q").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    }
    open_up(s.path(), &path);
    // Root itself may open anything read-write: the report says so.
    assert!(admin::inspect(&path).unwrap().writable);

    let mut child = child_command("child_entry", "nobody_inspects", &[("SHMBUS_ROOT", s.path().display().to_string())])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let st = wait_with_deadline(&mut child, 60, "inspect as nobody");
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert!(st.success() && out.contains("inspected as nobody: ok"), "child failed ({st}): {out}");
    // Inspection wrote nothing: the messages are all still there, in order.
    let mut rx = q.consumer().unwrap();
    for m in [b"a", b"b", b"c"] {
        assert_eq!(rx.try_recv().unwrap(), m);
    }
}

#[test]
fn pending_counts_what_no_reader_took() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("admin-pending");
    let d = s.domain("t");
    let pending = |name: &str| admin::inspect(&d.channel_path(name).unwrap()).unwrap().pending;

    // Queue: messages sent and not received.
    let q = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(4).max_message_len(16)).unwrap();
    assert_eq!(pending("q"), Some(Pending::Messages(0)));
    let mut tx = q.producer().unwrap();
    for m in [b"1", b"2", b"3"] {
        tx.try_send(m).unwrap();
    }
    assert_eq!(pending("q"), Some(Pending::Messages(3)));
    let mut rx = q.consumer().unwrap();
    rx.try_recv().unwrap();
    assert_eq!(pending("q"), Some(Pending::Messages(2)));

    // Stream: bytes committed and not consumed, framing included.
    let mut w =
        Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(1 << 16)).and_then(|s| s.writer()).unwrap();
    assert_eq!(pending("s"), Some(Pending::Bytes(0)));
    w.try_send(b"hello").unwrap();
    assert_eq!(pending("s"), Some(Pending::Bytes(16))); // an 8-byte header, 5 bytes padded to 8
    let mut r = Stream::open(&d, "s").and_then(|s| s.reader()).unwrap();
    r.try_recv_ref().unwrap().consume();
    assert_eq!(pending("s"), Some(Pending::Bytes(0)));

    // Topic: history is owed to nobody, but it is there for a later reader: counted apart,
    // at most `history`.
    let t = Topic::create_or_open(&d, "t", &TopicConfig::default().max_message_len(64).history(4)).unwrap();
    let history_len = |name: &str| admin::inspect(&d.channel_path(name).unwrap()).unwrap().history_len;
    assert_eq!(history_len("t"), Some(0));
    let mut tp = t.publisher().unwrap();
    tp.send(b"x").unwrap();
    assert_eq!((pending("t"), history_len("t")), (None, Some(1)));
    for _ in 0..9 {
        tp.send(b"y").unwrap();
    }
    assert_eq!(history_len("t"), Some(4));
    assert_eq!(history_len("q"), None);
    // Its creator (this process) is alive: in use, whatever it holds.
    let report = admin::inspect(&d.channel_path("t").unwrap()).unwrap();
    assert_eq!(
        (report.state(), report.state().as_str(), report.holds_data()),
        (admin::ChannelState::InUse, "in-use", true)
    );

    // Pool: a job placed in the mailbox of a worker that then died before taking it is owed
    // to the next dispatcher as a loss report, until `reap` delivers that.
    let config = PoolConfig::default().max_workers(2).max_job_len(64);
    let mut disp = Pool::create_or_open(&d, "p", &config).unwrap().dispatcher().unwrap();
    assert_eq!(pending("p"), Some(Pending::Jobs(0)));
    let mut worker = child_command("child_entry", "worker", &[("SHMBUS_ROOT", s.path().display().to_string())])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    eventually("the worker waits for work", 20, || shmbus::pool::Pool::status(&d, "p").unwrap().idle == 1);
    // SAFETY: plain kill(2) on our own child's pid.
    unsafe { libc::kill(worker.id() as i32, libc::SIGSTOP) };
    // kill(2) returns before the worker has stopped: until it has, it could still take the job.
    let stat = format!("/proc/{}/stat", worker.id());
    eventually("the worker has stopped", 20, || {
        std::fs::read_to_string(&stat).is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('T')))
    });
    disp.try_send(b"job").unwrap();
    assert_eq!(pending("p"), Some(Pending::Jobs(1)));
    sigkill(&mut worker);
    worker.wait().unwrap();
    assert_eq!(pending("p"), Some(Pending::Jobs(1)), "a dead worker's untaken job is still owed");
    eventually("reap reports the lost job", 20, || !disp.reap().is_empty());
    assert_eq!(pending("p"), Some(Pending::Jobs(0)));

    // Pool: a job taken by a worker is its worker's while the worker lives, and owed as a
    // loss report once it has died holding it, until `reap` delivers that.
    let mut holder = child_command("child_entry", "holder", &[("SHMBUS_ROOT", s.path().display().to_string())])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    eventually("the holder waits for work", 20, || shmbus::pool::Pool::status(&d, "p").unwrap().idle == 1);
    disp.try_send(b"held").unwrap();
    // The child's stdout also carries the test harness's own words, on the same line too.
    let mut lines = std::io::BufReader::new(holder.stdout.take().unwrap()).lines();
    assert!(lines.any(|l| l.unwrap().ends_with("took")), "the holder ended without taking the job");
    assert_eq!(pending("p"), Some(Pending::Jobs(0)), "a live worker's taken job is in progress, not owed");
    sigkill(&mut holder);
    holder.wait().unwrap();
    assert_eq!(pending("p"), Some(Pending::Jobs(1)), "a dead worker's taken job is owed as a loss report");
    let lost = disp.reap();
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(pending("p"), Some(Pending::Jobs(0)));
}

#[test]
fn invalid_layout_is_corrupt_not_a_guess() {
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("admin-corrupt");
    let d = s.domain("t");
    Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(4).max_message_len(16)).unwrap();
    let path = d.channel_path("q").unwrap();
    // A well-formed lie: the queue's cell stride (parameter 2, header bytes 48..56) changed
    // and the header checksum recomputed. The common header is valid; the layout is not.
    let mut h = std::fs::read(&path).unwrap()[..208].to_vec();
    h[48..56].copy_from_slice(&4096u64.to_le_bytes());
    let mut zeroed = h.clone();
    zeroed[16..24].fill(0);
    h[20..24].copy_from_slice(&crc32c::crc32c(&zeroed).to_le_bytes());
    std::os::unix::fs::FileExt::write_all_at(&std::fs::OpenOptions::new().write(true).open(&path).unwrap(), &h, 0)
        .unwrap();
    assert!(matches!(admin::inspect(&path), Err(OpenError::Corrupt { .. })));
    assert!(shmbus::segment::inspect(&path).is_ok(), "the common header alone is valid");
}

#[test]
fn describe_gives_every_kind_by_name() {
    use shmbus::admin::Scalar::{Bool, Int, Null};
    if child_role().is_some() {
        return;
    }
    let s = Scratch::new("admin-describe");
    let d = s.domain("t");
    let describe = |name: &str| {
        let report = admin::inspect_channel(&d, name).unwrap();
        admin::describe(&d, name, &report).unwrap()
    };

    let q = Queue::create_or_open(&d, "q", &QueueConfig::default().capacity(4).max_message_len(100)).unwrap();
    let mut tx = q.producer().unwrap();
    tx.try_send(b"1").unwrap();
    let q = describe("q");
    assert_eq!(q.params, [("capacity", 4), ("max_element_size", 100), ("stride", 128)]);
    assert_eq!(
        (q.max_message_len, q.history, q.last_seq, q.senders, q.receivers),
        (Some(100), Some(4), Some(1), Some(1), Some(0))
    );
    assert_eq!(&q.status[..2], [("depth", Int(1)), ("capacity", Int(4))]);
    assert_eq!(q.detail, "depth 1/4, 1 producer(s), 0 consumer(s)");

    let w =
        Stream::create_or_open(&d, "s", &StreamConfig::default().capacity(1 << 16)).and_then(|s| s.writer()).unwrap();
    let st = describe("s");
    assert_eq!(st.params.iter().map(|p| p.0).collect::<Vec<_>>(), ["capacity", "data_offset"]);
    assert_eq!((st.max_message_len, st.senders, st.receivers), (Some((1 << 16) - 8), Some(1), Some(0)));
    let pid = std::process::id();
    assert_eq!(
        &st.status[2..6],
        [("writer_pid", Int(pid.into())), ("writer_alive", Bool(true)), ("reader_pid", Null), ("reader_alive", Null)]
    );
    assert_eq!(st.detail, format!("used 0/65536 B, writer {pid} (alive), reader -"));
    drop(w);

    Topic::create_or_open(&d, "t", &TopicConfig::default().max_message_len(64).history(4)).unwrap();
    let t = describe("t");
    assert_eq!(
        t.params,
        [
            ("slot_size", 64),
            ("history", 4),
            ("spare_slots", t.params[2].1),
            ("policy", 0),
            ("reliable_timeout_ms", 1000)
        ]
    );
    assert_eq!((t.max_message_len, t.history, t.senders, t.receivers), (Some(64), Some(4), Some(0), Some(0)));
    assert_eq!(t.status.iter().map(|p| p.0).collect::<Vec<_>>(), ["slots", "pinned_slots", "reliable_subscribers"]);
    assert_eq!(t.detail, "");

    Pool::create_or_open(&d, "p", &PoolConfig::default().max_workers(2).max_job_len(64)).unwrap();
    let p = describe("p");
    assert_eq!(p.params, [("max_workers", 2), ("max_job_size", 64)]);
    let value = |key: &str| p.status.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    assert_eq!(
        (value("dispatcher_pid"), value("dispatcher_alive"), value("workers")),
        (Some(Null), Some(Null), Some(Int(0)))
    );
    assert_eq!(p.detail, "workers 0/2 (0 idle, 0 busy), dispatcher -");
}

/// `Domain::remove` refuses while this process holds an endpoint (and created the channel),
/// naming it; `remove_forced` takes the name while the endpoint keeps working on its mapping.
#[test]
fn remove_refuses_while_in_use_and_forced_keeps_the_mapping() {
    let s = Scratch::new("admin-remove");
    let d = s.domain("t");
    let topic = Topic::create_or_open(&d, "imu", &TopicConfig::default()).unwrap();
    let mut publisher = topic.publisher().unwrap();
    let me = std::process::id();
    match d.remove("imu") {
        Err(admin::RemoveError::InUse { attached, .. }) => {
            assert!(attached.iter().any(|a| a.pid == me && a.role == "publisher"), "{attached:?}");
        }
        other => panic!("expected InUse, got {other:?}"),
    }
    assert!(d.channel_path("imu").unwrap().is_file());
    let removed = d.remove_forced("imu").unwrap();
    assert_eq!(removed.kind, Some(Kind::Topic));
    assert!(removed.attached.iter().any(|a| a.pid == me));
    assert!(!d.channel_path("imu").unwrap().exists());
    publisher.send(b"still mapped").unwrap();
    assert!(matches!(d.remove("imu"), Err(admin::RemoveError::Open(OpenError::NotFound { .. }))));
}

/// `Domain::remove_dir_if_empty` removes only an empty domain directory, and a channel can be
/// created in the domain again afterwards.
#[test]
fn an_empty_domain_directory_is_removed_and_made_again() {
    let s = Scratch::new("admin-rmdir");
    let d = s.domain("t");
    let topic = Topic::create_or_open(&d, "a", &TopicConfig::default()).unwrap();
    assert!(!d.remove_dir_if_empty().unwrap(), "it holds a channel");
    assert!(d.dir().is_dir());
    drop(topic);
    d.remove_forced("a").unwrap();
    assert!(d.remove_dir_if_empty().unwrap());
    assert!(!d.dir().exists());
    assert!(!d.remove_dir_if_empty().unwrap(), "already gone");
    Topic::create_or_open(&d, "a", &TopicConfig::default()).unwrap();
    assert!(d.channel_path("a").unwrap().is_file());
}

/// `Domain::wait_for`: returns once another process creates the channel (domain directory
/// included), times out with `Timeout`, and refuses a symlink under the name at once.
#[test]
fn wait_for_sees_a_channel_another_process_creates_and_times_out_otherwise() {
    use std::time::Duration;
    if let Some(role) = child_role() {
        if role == "create-topic" {
            // Most likely after the parent started waiting (either order must work).
            std::thread::sleep(Duration::from_millis(300));
            let d = Domain::with_root("w", std::env::var("WAIT_ROOT").unwrap()).unwrap();
            Topic::create_or_open(&d, "late", &TopicConfig::default()).unwrap();
        }
        return;
    }
    let s = Scratch::new("admin-wait");
    let d = s.domain("w");
    match d.wait_for("never", Duration::from_millis(200)) {
        Err(shmbus::WaitForError::Timeout { waited, .. }) => assert_eq!(waited, Duration::from_millis(200)),
        other => panic!("expected Timeout, got {other:?}"),
    }
    let root = s.path().to_str().unwrap().to_owned();
    let entry = "wait_for_sees_a_channel_another_process_creates_and_times_out_otherwise";
    let mut child = child_command(entry, "create-topic", &[("WAIT_ROOT", root)]).spawn().unwrap();
    d.wait_for("late", Duration::from_secs(20)).unwrap();
    Topic::open(&d, "late").unwrap();
    assert!(child.wait().unwrap().success());

    std::os::unix::fs::symlink("/etc/passwd", d.channel_path("link").unwrap()).unwrap();
    assert!(matches!(d.wait_for("link", Duration::from_secs(20)), Err(shmbus::WaitForError::Open(_))));
}
