//! Across hosts on one machine: two network namespaces joined by a veth pair, each "host"
//! with its own shmbus root, its own `shmbus bridge` process and its own programs. Topics
//! cross in order, through a SIGKILL and restart of either bridge and through the link going
//! down and up; a journal is mirrored entry for entry through kills of both bridges.
//! Everything stays on the addresses these tests make; every wait is bounded.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::procs::{bridge_exe, can_make_namespaces, run_ok, shmbus_exe, Net, Proc, IP_A};
use common::Scratch;

const PORT: &str = "7447";

struct Hosts {
    net: Net,
    s: Scratch,
}

impl Hosts {
    fn new(tag: &str) -> Hosts {
        let s = Scratch::new(tag);
        s.dir("a");
        s.dir("b");
        Hosts { net: Net::new(), s }
    }

    fn root(&self, host: char) -> std::path::PathBuf {
        self.s.path().join(host.to_string())
    }

    fn ns(&self, host: char) -> &str {
        if host == 'a' {
            &self.net.a
        } else {
            &self.net.b
        }
    }

    /// `shmbus ARGS` on `host`, to completion.
    fn shmbus(&self, host: char, args: &[&str]) -> String {
        run_ok(self.net.cmd(self.ns(host), &self.root(host), &shmbus_exe(), args))
    }

    fn shmbus_spawn(&self, host: char, args: &[&str]) -> Proc {
        Proc::spawn(self.net.cmd(self.ns(host), &self.root(host), &shmbus_exe(), args))
    }

    /// Host a's bridge listens; host b's connects to it. Extra arguments after.
    fn bridge(&self, host: char, extra: &[&str]) -> Proc {
        let endpoint = format!("tcp/{IP_A}:{PORT}");
        let mut args = vec!["--no-multicast-scouting", "--scan-interval", "20ms", "--json", "--stats-interval", "0"];
        args.extend_from_slice(&[if host == 'a' { "--listen" } else { "--connect" }, &endpoint]);
        args.extend_from_slice(extra);
        Proc::spawn(self.net.cmd(self.ns(host), &self.root(host), &bridge_exe(), &args))
    }

    /// Publishes on topic `ready` on `from` until a subscriber on the other host gets one:
    /// both bridges are up and linked.
    fn until_linked(&self, from: char) {
        let to = if from == 'a' { 'b' } else { 'a' };
        let sub = self.shmbus_spawn(to, &["sub", "--domain", "d", "ready", "--count", "1", "--wait", "30"]);
        let end = Instant::now() + Duration::from_secs(60);
        let mut sub = sub;
        loop {
            self.shmbus(from, &["pub", "--domain", "d", "ready", "--data", "ping"]);
            if sub.0.try_wait().unwrap().is_some() {
                break;
            }
            assert!(Instant::now() < end, "the bridges did not link within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        let out = sub.finish(Duration::from_secs(5));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    /// Sends `first..first+n` through the `block` topic `imu` from a, read on b by a reliable
    /// `shmbus sub`; checks every one arrived once, in order.
    fn send_batch(&self, first: u64, n: u64, between: impl FnOnce()) {
        let count = n.to_string();
        let sub = self.shmbus_spawn('b', &["sub", "--domain", "d", "imu", "--reliable", "--count", &count]);
        // The reliable subscriber has joined when b's topic shows it.
        wait_subscribed(self, 'b', "imu", 2);
        let lines: String = (first..first + n).map(|i| format!("{i}\n")).collect();
        let mut publisher = self.net.cmd(&self.net.a, &self.root('a'), &shmbus_exe(), &["pub", "--domain", "d", "imu"]);
        publisher.stdin(std::process::Stdio::piped());
        let mut p = Proc::spawn(publisher);
        let mut stdin = p.0.stdin.take().unwrap();
        let half = lines.len() / 2;
        let cut = lines[..half].rfind('\n').map_or(0, |i| i + 1);
        std::io::Write::write_all(&mut stdin, &lines.as_bytes()[..cut]).unwrap();
        between();
        std::io::Write::write_all(&mut stdin, &lines.as_bytes()[cut..]).unwrap();
        drop(stdin);
        let out = p.finish(Duration::from_secs(120));
        assert!(out.status.success(), "pub: {}", String::from_utf8_lossy(&out.stderr));
        let out = sub.finish(Duration::from_secs(120));
        assert!(out.status.success(), "sub: {}", String::from_utf8_lossy(&out.stderr));
        let got: Vec<u64> = String::from_utf8(out.stdout).unwrap().lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(got, (first..first + n).collect::<Vec<_>>(), "every message once, in order");
    }
}

/// Waits until topic `name` on `host` has at least `n` subscribers (its bridge's and ours).
fn wait_subscribed(h: &Hosts, host: char, name: &str, n: u64) {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let info = h.shmbus(host, &["info", "--domain", "d", name, "--json"]);
        let v: serde_json::Value = serde_json::from_str(&info).unwrap();
        if v["subscribers"].as_u64().unwrap_or(0) >= n {
            return;
        }
        assert!(Instant::now() < end, "{name} on {host} never had {n} subscribers: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn final_stats(p: Proc) -> serde_json::Value {
    let out = p.terminate();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let last = stdout.lines().last().unwrap_or_else(|| panic!("no stats: {}", String::from_utf8_lossy(&out.stderr)));
    let v: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(v["final"], true);
    v
}

#[test]
fn topics_cross_hosts_through_kills_and_link_loss() {
    if !can_make_namespaces() {
        return;
    }
    let h = Hosts::new("netns-topics");
    for host in ['a', 'b'] {
        h.shmbus(host, &["create", "--domain", "d", "--kind", "topic", "imu", "--policy", "block", "--history", "16"]);
    }
    // A short lease: a link down for seconds ends the Zenoh session, as a real outage does.
    let lease = ["--domain", "d", "--topics", "imu,ready,cam/*", "--cfg", "transport/link/tx/lease:1000"];
    let mut a = h.bridge('a', &lease);
    let mut b = h.bridge('b', &lease);
    h.until_linked('a');
    h.send_batch(1, 2000, || {});

    // Host b's bridge is killed mid-stream (the publisher on a waits: the topic is lossless
    // and b's bridge was its reliable subscriber), restarted, and delivery goes on.
    b.sigkill();
    b = h.bridge('b', &lease);
    h.until_linked('a');
    h.send_batch(2001, 2000, || {});

    // Host a's bridge too.
    a.sigkill();
    a = h.bridge('a', &lease);
    h.until_linked('a');
    h.send_batch(4001, 2000, || {});

    // The link drops for half a second mid-batch: TCP and Zenoh carry on, nothing lost.
    h.send_batch(6001, 2000, || {
        h.net.link(false);
        std::thread::sleep(Duration::from_millis(500));
        h.net.link(true);
    });

    // A long outage ends the session (lease 1 s); b reconnects when the link is back, and
    // the topic flows again.
    h.net.link(false);
    std::thread::sleep(Duration::from_secs(3));
    h.net.link(true);
    h.until_linked('a');
    h.send_batch(8001, 2000, || {});

    // And from b to a, into a topic a does not have: made there with b's parameters.
    h.shmbus('b', &["create", "--domain", "d", "--kind", "topic", "cam.rear", "--slot-size", "512", "--history", "5"]);
    let sub = h.shmbus_spawn('a', &["sub", "--domain", "d", "cam.rear", "--count", "1", "--wait", "30", "--json"]);
    let end = Instant::now() + Duration::from_secs(30);
    let mut sub = sub;
    while sub.0.try_wait().unwrap().is_none() {
        h.shmbus('b', &["pub", "--domain", "d", "cam.rear", "--data", "frame"]);
        assert!(Instant::now() < end, "cam.rear never reached a");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = sub.finish(Duration::from_secs(5));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("\"data\":\"frame\""), "{stdout} {stderr}");
    let info: serde_json::Value =
        serde_json::from_str(&h.shmbus('a', &["info", "--domain", "d", "cam.rear", "--json"])).unwrap();
    assert_eq!((info["slot_size"].as_u64(), info["history"].as_u64()), (Some(512), Some(5)), "{info}");

    let (sa, sb) = (final_stats(a), final_stats(b));
    for s in [&sa, &sb] {
        for k in ["bad_attachment", "not_allowed", "too_large", "open_failed", "send_failed"] {
            assert_eq!(s[k], 0, "{k}: {s}");
        }
    }
    // Nothing came back: a received only cam.rear, b forwarded only cam.rear (and `ready`
    // from b never was published).
    assert!(sa["received"].as_u64().unwrap() <= sb["forwarded"].as_u64().unwrap(), "{sa} {sb}");
}

/// The entries of journal `dir` on `host`, opened with `keys` (the `--key-file` arguments).
fn dump(h: &Hosts, host: char, dir: &Path, keys: &[&str]) -> Vec<String> {
    let mut args = vec!["journal", "dump", "--dir", dir.to_str().unwrap(), "--json"];
    args.extend_from_slice(keys);
    let out = h.shmbus(host, &args);
    out.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["data"].as_str().unwrap().to_owned()
        })
        .collect()
}

fn mirrored(dir: &Path) -> u64 {
    shmbus::Journal::status(dir).map(|s| s.next_index - s.first_index).unwrap_or(0)
}

fn wait_mirrored(dir: &Path, at_least: u64) {
    let end = Instant::now() + Duration::from_secs(120);
    while mirrored(dir) < at_least {
        assert!(Instant::now() < end, "the mirror has {} of {at_least}", mirrored(dir));
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn journal_mirror_across_hosts_through_kills() {
    mirror_through_kills("netns-journal", false);
}

/// The same with an encrypted source: both bridges and the journal tools have `--key-file`
/// (the mirror seals its copies again), and nothing is readable without it.
#[test]
fn encrypted_journal_mirror_across_hosts_through_kills() {
    mirror_through_kills("netns-sealed", true);
}

fn mirror_through_kills(name: &str, sealed: bool) {
    if !can_make_namespaces() {
        return;
    }
    let h = Hosts::new(name);
    let (src, dst) = (h.root('a').join("orders"), h.root('b').join("orders-mirror"));
    let (src_s, dst_s) = (src.to_str().unwrap().to_owned(), dst.to_str().unwrap().to_owned());
    let key_file = h.root('a').join("keys");
    std::fs::write(&key_file, format!("3 {}\n", "5a".repeat(32))).unwrap();
    std::fs::set_permissions(&key_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let key_file = key_file.to_str().unwrap().to_owned();
    let keys: Vec<&str> = if sealed { vec!["--key-file", &key_file] } else { vec![] };
    let append = |from: u64, n: u64| {
        let lines: String = (from..from + n).map(|i| format!("order {i}\n")).collect();
        let mut args = vec!["journal", "append", "--dir", &src_s];
        args.extend_from_slice(&keys);
        let mut c = h.net.cmd(&h.net.a, &h.root('a'), &shmbus_exe(), &args);
        c.stdin(std::process::Stdio::piped());
        let mut p = Proc::spawn(c);
        std::io::Write::write_all(&mut p.0.stdin.take().unwrap(), lines.as_bytes()).unwrap();
        let out = p.finish(Duration::from_secs(60));
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    append(0, 20_000);
    let (serve, mirror) = (format!("orders={src_s}"), format!("orders={dst_s}"));
    let (serve, mirror) =
        ([&["--journal", serve.as_str()][..], &keys].concat(), [&["--mirror", mirror.as_str()][..], &keys].concat());
    let mut a = h.bridge('a', &serve);
    let mut b = h.bridge('b', &mirror);
    // Killed while copying, at least once past the first entries.
    wait_mirrored(&dst, 3000);
    b.sigkill();
    b = h.bridge('b', &mirror);
    wait_mirrored(&dst, 12_000);
    b.sigkill();
    append(20_000, 5000);
    b = h.bridge('b', &mirror);
    wait_mirrored(&dst, 22_000);
    // The source's bridge is killed and comes back while entries keep coming.
    a.sigkill();
    append(25_000, 5000);
    a = h.bridge('a', &serve);
    let want: Vec<String> = (0..30_000).map(|i| format!("order {i}")).collect();
    assert_eq!(dump(&h, 'a', &src, &keys), want);
    // The mirror's index may count an entry a killed bridge claimed and never committed
    // (it is never delivered): compare what readers see.
    wait_mirrored(&dst, 30_000);
    let end = Instant::now() + Duration::from_secs(60);
    while dump(&h, 'b', &dst, &keys).len() < want.len() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(dump(&h, 'b', &dst, &keys), want, "the mirror holds the same entries in the same order, none twice");
    if sealed {
        let c = h.net.cmd(h.ns('b'), &h.root('b'), &shmbus_exe(), &["journal", "dump", "--dir", &dst_s, "--json"]);
        let out = Proc::spawn(c).finish(Duration::from_secs(60));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.contains("order 1"),
            "the sealed mirror is readable without its key: {}",
            &text[..200.min(text.len())]
        );
    }
    let (sa, sb) = (final_stats(a), final_stats(b));
    assert_eq!(sa["journal_unreadable"], 0, "{sa}");
    assert_eq!(sb["bad_attachment"], 0, "{sb}");
}
