//! `shmbus export` as a real process, scraped with curl, its output validated by Prometheus's
//! own parser (`promtool check metrics`; `make deps` installs both).
//!
//! Every test gets its own root (on tmpfs when there is one) through `SHMBUS_ROOT`. The
//! server listens on port 0 and prints the address it bound; waits poll with a generous
//! limit, and no timing is asserted.

mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{one_error_line, Killed, Root};

/// A running `shmbus export` and the URL of its metrics.
struct Exporter {
    child: Killed,
    url: String,
}

impl Exporter {
    fn start(r: &Root, extra: &[&str]) -> Exporter {
        let mut args = vec!["export", "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        Exporter::start_with(r.cmd(&args))
    }

    /// `shmbus export` under `prlimit --nofile=N:N`: at most `nofile` descriptors.
    fn start_with_nofile(r: &Root, nofile: u32) -> Exporter {
        let mut c = Command::new("prlimit");
        c.arg(format!("--nofile={nofile}:{nofile}"))
            .args([env!("CARGO_BIN_EXE_shmbus"), "export", "--listen", "127.0.0.1:0"])
            .env("SHMBUS_ROOT", &r.0)
            .stdin(Stdio::null());
        Exporter::start_with(c)
    }

    fn start_with(mut cmd: Command) -> Exporter {
        let mut child = Killed(Some(cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()));
        // The first stderr line names the URL it serves on; the later ones are drained, so
        // that the pipe stays open and never fills.
        let mut lines = BufReader::new(child.child().stderr.take().unwrap()).lines();
        let line = lines.next().unwrap().unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_owned();
        assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/metrics"), "{url}");
        std::thread::spawn(move || lines.map_while(|l| l.ok()).for_each(drop));
        Exporter { child, url }
    }

    /// `HOST:PORT` of the server.
    fn addr(&self) -> String {
        self.url.strip_prefix("http://").unwrap().strip_suffix("/metrics").unwrap().to_owned()
    }

    /// The server's resident memory, in KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// The server's open descriptors.
    fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id())).map(|d| d.count()).unwrap_or(0)
    }

    /// Waits until the server has at most `n` descriptors open (panics after 20 s).
    fn wait_fds_at_most(&self, n: usize) {
        let t0 = Instant::now();
        while self.open_fds() > n {
            assert!(t0.elapsed() < Duration::from_secs(20), "{} descriptors open, over {n}", self.open_fds());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Asserts the server is still running.
    fn assert_running(&mut self) {
        assert!(!self.child.exited(), "the exporter exited");
    }

    /// `curl` of `url`: (status code, content type, body).
    fn curl(url: &str, method: &str) -> (u16, String, String) {
        let out = Command::new("curl")
            // A generous limit: a scrape that hangs fails the test instead of stalling it.
            .args(["-sS", "--max-time", "20", "-X", method, "-o", "-", "-w", "\n%{http_code} %{content_type}", url])
            .output()
            .expect("curl is needed (make deps installs it)");
        assert!(out.status.success(), "curl {url}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let (body, meta) = text.rsplit_once('\n').unwrap();
        let (code, ctype) = meta.split_once(' ').unwrap();
        (code.parse().unwrap(), ctype.to_owned(), body.to_owned())
    }

    /// A scrape of `/metrics`, checked: 200, the 0.0.4 content type, and promtool's parser
    /// and linter find nothing to say.
    fn scrape(&self) -> Metrics {
        let (code, ctype, body) = Exporter::curl(&self.url, "GET");
        assert_eq!(code, 200, "{body}");
        assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
        promtool_check(&body);
        Metrics::parse(&body)
    }
}

/// `promtool check metrics` on `body`: it must parse and pass the lint without a remark.
fn promtool_check(body: &str) {
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool is needed (make deps installs it: Debian package prometheus)");
    p.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let out = p.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "promtool: {said}\n---\n{body}");
}

/// One sample: its name, its labels, its value.
type Sample = (String, Vec<(String, String)>, f64);

/// The samples of one scrape.
struct Metrics {
    body: String,
    samples: Vec<Sample>,
}

impl Metrics {
    /// Parses the sample lines (the label values our tests use need no unescaping), and
    /// checks that every series appears once and every family has HELP and TYPE.
    fn parse(body: &str) -> Metrics {
        let mut samples = Vec::new();
        let mut series = HashSet::new();
        for line in body.lines().filter(|l| !l.starts_with('#')) {
            let (series_text, value) = line.rsplit_once(' ').unwrap();
            assert!(series.insert(series_text.to_owned()), "series twice: {series_text}");
            let (name, labels) = match series_text.split_once('{') {
                Some((n, l)) => (n, l.strip_suffix('}').unwrap()),
                None => (series_text, ""),
            };
            let labels = labels
                .split("\",")
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once("=\"").unwrap();
                    (k.to_owned(), v.trim_end_matches('"').to_owned())
                })
                .collect();
            let value = if value == "+Inf" { f64::INFINITY } else { value.parse().unwrap() };
            samples.push((name.to_owned(), labels, value));
        }
        for (name, _, _) in &samples {
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|f| body.contains(&format!("# TYPE {f} histogram"))))
                .unwrap_or(name);
            assert!(body.contains(&format!("# HELP {family} ")), "no HELP for {family}");
            assert!(body.contains(&format!("# TYPE {family} ")), "no TYPE for {family}");
        }
        Metrics { body: body.to_owned(), samples }
    }

    /// The values of `name` whose labels include every one of `want`.
    fn values(&self, name: &str, want: &[(&str, &str)]) -> Vec<f64> {
        self.samples
            .iter()
            .filter(|(n, labels, _)| {
                n == name && want.iter().all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, _, v)| *v)
            .collect()
    }

    /// The one value of `name` with labels `want`.
    fn value(&self, name: &str, want: &[(&str, &str)]) -> f64 {
        let v = self.values(name, want);
        assert_eq!(v.len(), 1, "{name} {want:?}: {v:?} in\n{}", self.body);
        v[0]
    }
}

/// Messages the publisher sends: fewer than the topic keeps (16), so a slow subscriber loses none.
const N: usize = 12;

#[test]
fn serves_topic_counters_and_journal_metrics_that_prometheus_parses() {
    let r = Root::new();
    // The topic (one message from a publisher that is gone), a subscriber, then a publisher
    // that sends N messages and stays (its stdin open).
    r.ok(&["pub", "--domain", "obs", "cam", "--data", "before"]);
    let mut sub = r.spawn(&["sub", "--domain", "obs", "cam", "--timeout-ms", "60000"]);
    r.wait_info("obs", "cam", |v| v["subscribers"] == 1);
    let mut publisher = Killed(Some(
        r.cmd(&["pub", "--domain", "obs", "cam"]).stdin(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap(),
    ));
    let mut stdin = publisher.child().stdin.take().unwrap();
    for i in 0..N {
        writeln!(stdin, "frame-{i:03}").unwrap();
    }
    stdin.flush().unwrap();
    let mut lines = BufReader::new(sub.child().stdout.take().unwrap()).lines();
    for i in 0..N {
        assert_eq!(lines.next().unwrap().unwrap(), format!("frame-{i:03}"));
    }
    // A journal with a named reader 2 entries in, of 5.
    let j = r.jdir("events");
    for e in 0..5 {
        r.ok(&["journal", "append", "--dir", &j, "--data", &format!("e{e}")]);
    }
    r.ok(&["journal", "tail", "--dir", &j, "--reader", "slow", "--count", "2"]);
    let missing = r.jdir("missing");

    let ex = Exporter::start(&r, &["--journal", &j, "--journal", &missing]);
    let m = ex.scrape();
    let (pub_pid, sub_pid) = (publisher.id().to_string(), sub.id().to_string());
    let ch = [("domain", "obs"), ("channel", "cam"), ("kind", "topic")];
    let p = [ch[0], ch[1], ch[2], ("role", "publisher"), ("pid", pub_pid.as_str())];
    let s = [ch[0], ch[1], ch[2], ("role", "subscriber"), ("pid", sub_pid.as_str())];
    let bytes = (N * "frame-000".len()) as f64;
    assert_eq!(m.value("shmbus_messages_total", &p), N as f64);
    assert_eq!(m.value("shmbus_bytes_total", &p), bytes);
    assert_eq!(m.value("shmbus_messages_total", &s), N as f64);
    assert_eq!(m.value("shmbus_bytes_total", &s), bytes);
    assert_eq!(m.value("shmbus_drops_total", &s), 0.0);
    assert_eq!(m.value("shmbus_participant_alive", &p), 1.0);
    assert_eq!(m.value("shmbus_participant_alive", &s), 1.0);
    assert_eq!(m.value("shmbus_lag_messages", &s), 0.0);
    assert!(m.values("shmbus_lag_messages", &p).is_empty(), "a publisher has no lag");
    let last_seq = r.json(&["info", "--domain", "obs", "cam", "--json"])["last_seq"].as_f64().unwrap();
    assert_eq!(last_seq, (N + 1) as f64, "sequence numbers count from 1");
    assert_eq!(m.value("shmbus_last_seq", &ch), last_seq);
    assert_eq!(m.value("shmbus_channel_participants", &ch), 2.0);
    // Latency: the first message is sampled (1 in 64); buckets are cumulative up to +Inf.
    let count = m.value("shmbus_latency_seconds_count", &s);
    assert!(count >= 1.0, "{count}");
    let inf = [&s[..], &[("le", "+Inf")]].concat();
    assert_eq!(m.value("shmbus_latency_seconds_bucket", &inf), count);
    let buckets = m.values("shmbus_latency_seconds_bucket", &s);
    assert_eq!(buckets.len(), 64);
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
    assert!(m.value("shmbus_latency_seconds_sum", &s) > 0.0);
    assert!(m.values("shmbus_latency_seconds_count", &p).is_empty(), "a publisher samples no latency");
    assert_eq!(m.values("shmbus_spins_bucket", &s).len(), 16);
    // The journal.
    let jl = [("journal", "journal-events"), ("path", j.as_str())];
    assert_eq!(m.value("shmbus_journal_up", &jl), 1.0);
    assert_eq!(m.value("shmbus_journal_next_index", &jl), 5.0);
    assert!(m.value("shmbus_journal_appended_bytes", &jl) > 0.0);
    assert!(m.value("shmbus_journal_disk_bytes", &[jl[0], ("tier", "hot")]) > 0.0);
    assert_eq!(m.value("shmbus_journal_disk_bytes", &[jl[0], ("tier", "archive")]), 0.0);
    assert_eq!(m.value("shmbus_journal_reader_position", &[jl[0], ("reader", "slow")]), 2.0);
    assert_eq!(m.value("shmbus_journal_reader_lag", &[jl[0], ("reader", "slow")]), 3.0);
    assert_eq!(m.value("shmbus_journal_appenders", &jl), 0.0);
    assert_eq!(m.value("shmbus_journal_up", &[("journal", "journal-missing")]), 0.0);
    assert!(m.values("shmbus_journal_next_index", &[("journal", "journal-missing")]).is_empty());

    // Each scrape is a fresh snapshot: more messages and entries show at once.
    for i in N..N + 5 {
        writeln!(stdin, "frame-{i:03}").unwrap();
    }
    stdin.flush().unwrap();
    for _ in 0..5 {
        lines.next().unwrap().unwrap();
    }
    r.ok(&["journal", "append", "--dir", &j, "--data", "e5"]);
    let m = ex.scrape();
    assert_eq!(m.value("shmbus_messages_total", &p), (N + 5) as f64);
    assert_eq!(m.value("shmbus_messages_total", &s), (N + 5) as f64);
    assert_eq!(m.value("shmbus_journal_next_index", &jl), 6.0);
    assert_eq!(m.value("shmbus_journal_reader_lag", &[jl[0], ("reader", "slow")]), 4.0);

    // A subscriber killed: its entry stays, marked dead, until the channel reclaims it.
    sub.kill();
    let m = ex.scrape();
    assert_eq!(m.value("shmbus_participant_alive", &s), 0.0);
    assert_eq!(m.value("shmbus_messages_total", &s), (N + 5) as f64, "a dead participant keeps its counts");
    assert_eq!(m.value("shmbus_participant_alive", &p), 1.0);
    drop(stdin);
}

#[test]
fn other_paths_and_methods_and_a_removed_channel() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "kept", "--data", "x"]);
    r.ok(&["pub", "--domain", "d", "--kind", "queue", "gone", "--data", "x"]);
    let ex = Exporter::start(&r, &["--domain", "d"]);
    let base = ex.url.strip_suffix("/metrics").unwrap();
    assert_eq!(Exporter::curl(&format!("{base}/other"), "GET").0, 404);
    assert_eq!(Exporter::curl(&format!("{base}/"), "GET").0, 404);
    assert_eq!(Exporter::curl(&ex.url, "POST").0, 405);
    assert_eq!(Exporter::curl(&format!("{}?x=1", ex.url), "GET").0, 200);
    // HEAD: the headers of GET, no body; the 405 says what is allowed.
    let head = answer(&ex, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"), "{head}");
    assert!(head.contains("\r\nContent-Type: text/plain; version=0.0.4"), "{head}");
    let put = answer(&ex, b"PUT /metrics HTTP/1.0\r\n\r\n");
    assert!(put.starts_with("HTTP/1.1 405 ") && put.contains("\r\nAllow: GET, HEAD\r\n"), "{put}");

    let m = ex.scrape();
    let gone = [("domain", "d"), ("channel", "gone"), ("kind", "queue")];
    assert_eq!(m.value("shmbus_pending", &[gone[0], gone[1], ("unit", "messages")]), 1.0);
    assert_eq!(m.value("shmbus_channel_participants", &gone), 0.0);
    assert_eq!(m.value("shmbus_last_seq", &[("channel", "kept")]), 1.0);
    // The channel removed between two scrapes: the next one is fine without it.
    std::fs::remove_file(r.channel_file("d", "gone")).unwrap();
    let m = ex.scrape();
    assert!(m.values("shmbus_channel_participants", &[("channel", "gone")]).is_empty());
    assert_eq!(m.value("shmbus_channel_participants", &[("channel", "kept")]), 0.0);
    // A garbage file where a channel was: skipped too, never a 500.
    std::fs::write(r.channel_file("d", "gone"), b"not a segment").unwrap();
    let m = ex.scrape();
    assert!(m.values("shmbus_channel_participants", &[("channel", "gone")]).is_empty());
}

#[test]
fn an_address_in_use_is_one_clear_error() {
    let r = Root::new();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = r.run(&["export", "--listen", &addr]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        one_error_line(&out),
        format!("shmbus: cannot listen on {addr}: address in use; choose another with --listen")
    );
    let out = r.run(&["export", "--listen", "not-an-address"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(one_error_line(&out).starts_with("shmbus: cannot listen on not-an-address: "));
}

/// A journal directory whose name needs escaping in a label value still gives output that
/// Prometheus parses.
#[test]
fn label_values_are_escaped() {
    let r = Root::new();
    let j = r.0.join("odd \"name\" \\ here");
    let j = j.to_str().unwrap();
    r.ok(&["journal", "append", "--dir", j, "--data", "x"]);
    let ex = Exporter::start(&r, &["--journal", j]);
    let (code, _, body) = Exporter::curl(&ex.url, "GET");
    assert_eq!(code, 200);
    promtool_check(&body);
    assert!(body.contains(r#"shmbus_journal_next_index{journal="odd \"name\" \\ here",path=""#), "{body}");
}

#[test]
fn a_service_s_requests_responses_and_timeouts_are_counted() {
    let r = Root::new();
    let server = r.spawn(&[
        "serve",
        "--domain",
        "d",
        "svc",
        "--count",
        "2",
        "--",
        "sh",
        "-c",
        "read x; test $x = ok && echo yes",
    ]);
    r.wait_info("d", "svc", |v| v["status"]["servers"] == 1);
    r.ok(&["call", "--domain", "d", "svc", "--data", "ok"]);
    assert!(!r.run(&["call", "--domain", "d", "svc", "--data", "no"]).status.success());
    server.finish_ok();
    let ex = Exporter::start(&r, &[]);
    let (code, _, body) = Exporter::curl(&ex.url, "GET");
    assert_eq!(code, 200);
    promtool_check(&body);
    let l = r#"{domain="d",channel="svc",kind="service"}"#;
    for (family, n) in [
        ("shmbus_service_requests_total", 2),
        ("shmbus_service_responses_total", 1),
        ("shmbus_service_failed_total", 1),
        ("shmbus_service_timeouts_total", 0),
        ("shmbus_service_requests_in_flight", 0),
    ] {
        assert!(body.contains(&format!("{family}{l} {n}\n")), "{family} {n}: {body}");
    }
}

// A hostile local client must not freeze, exhaust or balloon the exporter: while each kind
// below is at work, another client's scrape succeeds (curl gives up after 20 s, which fails
// the test), and the server's memory and descriptors stay bounded.

/// A few channels, so that a scrape has some size.
fn some_channels(r: &Root) {
    for i in 0..4 {
        r.ok(&["pub", "--domain", "d", &format!("t{i}"), "--data", "x"]);
    }
}

/// A scrape that must succeed.
fn scrape_ok(ex: &Exporter) {
    let (code, _, body) = Exporter::curl(&ex.url, "GET");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("shmbus_last_seq{domain=\"d\",channel=\"t3\""), "{body}");
}

fn connect(ex: &Exporter) -> TcpStream {
    TcpStream::connect(ex.addr()).unwrap()
}

/// Everything `s` receives until the server closes it, which must happen within `within`.
fn read_until_closed(s: &mut TcpStream, within: Duration) -> String {
    let deadline = Instant::now() + within;
    let (mut out, mut buf) = (Vec::new(), [0u8; 4096]);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "the server kept the connection open; got {:?}", String::from_utf8_lossy(&out));
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => panic!("{e}"),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The answer to `request` sent whole on a fresh connection, read until the server closes.
fn answer(ex: &Exporter, request: &[u8]) -> String {
    let mut s = connect(ex);
    s.write_all(request).unwrap();
    read_until_closed(&mut s, Duration::from_secs(60))
}

/// Resident memory the hostile clients may add to the server, at most.
const RSS_SLACK_KIB: u64 = 32 * 1024;

#[test]
fn a_client_that_pipelines_without_reading_blocks_no_scrape() {
    let r = Root::new();
    some_channels(&r);
    let mut ex = Exporter::start(&r, &[]);
    scrape_ok(&ex);
    let rss0 = ex.rss_kib();
    let stop = Arc::new(AtomicBool::new(false));
    let requests = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(1000);
    // Four connections that send requests as fast as they can and never read an answer.
    let pushers: Vec<_> = (0..4)
        .map(|_| {
            let mut s = connect(&ex);
            s.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
            let (stop, requests) = (Arc::clone(&stop), requests.clone());
            std::thread::spawn(move || {
                let mut sent = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    match s.write(requests.as_bytes()) {
                        Ok(n) => sent += n,
                        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                        }
                        Err(_) => break, // the server closed it
                    }
                }
                sent
            })
        })
        .collect();
    // While they keep pushing:
    for _ in 0..5 {
        scrape_ok(&ex);
    }
    let rss = ex.rss_kib();
    assert!(rss < rss0 + RSS_SLACK_KIB, "resident memory grew from {rss0} KiB to {rss} KiB");
    stop.store(true, Ordering::Relaxed);
    let sent: usize = pushers.into_iter().map(|p| p.join().unwrap()).sum();
    assert!(sent > 0);
    scrape_ok(&ex);
    ex.assert_running();
}

#[test]
fn a_huge_header_is_refused_and_blocks_no_scrape() {
    let r = Root::new();
    some_channels(&r);
    let mut ex = Exporter::start(&r, &[]);
    scrape_ok(&ex);
    let rss0 = ex.rss_kib();
    // One endless header line, 1 MiB at a time, up to 256 MiB: the server must close the
    // connection long before.
    let mut s = connect(&ex);
    s.write_all(b"GET /metrics HTTP/1.1\r\nX-Long: ").unwrap();
    let pusher = std::thread::spawn(move || {
        let mib = vec![b'a'; 1 << 20];
        let mut sent = 0usize;
        while sent < 256 << 20 {
            match s.write(&mib) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        sent
    });
    for _ in 0..3 {
        scrape_ok(&ex);
    }
    let sent = pusher.join().unwrap();
    assert!(sent < 64 << 20, "the server read {sent} bytes of one header line");
    let rss = ex.rss_kib();
    assert!(rss < rss0 + RSS_SLACK_KIB, "resident memory grew from {rss0} KiB to {rss} KiB");

    // What such clients are told, when they stop to listen.
    let long = "a".repeat(20 << 10);
    let reply = answer(&ex, format!("GET /metrics HTTP/1.1\r\nX-Long: {long}\r\n\r\n").as_bytes());
    assert!(reply.starts_with("HTTP/1.1 431 "), "{reply}");
    let many = "X-Some: header\r\n".repeat(500);
    let reply = answer(&ex, format!("GET /metrics HTTP/1.1\r\n{many}\r\n").as_bytes());
    assert!(reply.starts_with("HTTP/1.1 431 "), "{reply}");
    let reply = answer(&ex, format!("GET /metrics?{long} HTTP/1.1\r\n\r\n").as_bytes());
    assert!(reply.starts_with("HTTP/1.1 414 "), "{reply}");
    scrape_ok(&ex);
    ex.assert_running();
}

#[test]
fn a_promised_body_that_never_comes_blocks_no_scrape() {
    let r = Root::new();
    some_channels(&r);
    let mut ex = Exporter::start(&r, &[]);
    // A Content-Length larger than what is sent.
    let mut short = connect(&ex);
    short.write_all(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789").unwrap();
    // Expect: 100-continue, told to go on, and then nothing.
    let mut expect = connect(&ex);
    expect
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n")
        .unwrap();
    let mut interim = [0u8; 25];
    expect.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    expect.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    // A body over the limit is refused at once, unread.
    let reply = answer(
        &ex,
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\nExpect: 100-continue\r\n\r\n",
    );
    assert!(reply.starts_with("HTTP/1.1 413 "), "{reply}");
    let reply = answer(&ex, b"POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert!(reply.starts_with("HTTP/1.1 501 "), "{reply}");
    // While both wait for their bodies:
    for _ in 0..3 {
        scrape_ok(&ex);
    }
    // And they do not wait for ever.
    let reply = read_until_closed(&mut short, Duration::from_secs(60));
    assert!(reply.starts_with("HTTP/1.1 408 "), "{reply}");
    let reply = read_until_closed(&mut expect, Duration::from_secs(60));
    assert!(reply.starts_with("HTTP/1.1 408 "), "{reply}");
    // A small body that does come is read and the connection goes on.
    let mut s = connect(&ex);
    s.write_all(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello").unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let reply = read_until_closed(&mut s, Duration::from_secs(60));
    assert!(reply.starts_with("HTTP/1.1 405 "), "{reply}");
    assert!(reply.contains("\r\n\r\nmethod not allowed: use GET\nHTTP/1.1 200 OK\r\n"), "{reply}");
    ex.assert_running();
}

#[test]
fn clients_that_connect_and_never_send_block_no_scrape_and_are_closed() {
    let r = Root::new();
    some_channels(&r);
    let mut ex = Exporter::start(&r, &[]);
    let mut silent: Vec<TcpStream> = (0..8).map(|_| connect(&ex)).collect();
    for _ in 0..3 {
        scrape_ok(&ex);
    }
    for s in &mut silent {
        assert_eq!(read_until_closed(s, Duration::from_secs(60)), "");
    }
    scrape_ok(&ex);
    ex.assert_running();
}

#[test]
fn held_connections_and_exhausted_descriptors_block_no_scrape() {
    let r = Root::new();
    some_channels(&r);
    let mut ex = Exporter::start_with_nofile(&r, 64);
    let addr = ex.addr().parse().unwrap();
    let hold = |n: usize| -> Vec<TcpStream> {
        // Connections past the listen backlog may time out: the ones made are held.
        (0..n).filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()).collect()
    };
    // Many more connections than the exporter may have descriptors, all held open.
    let held = hold(200);
    for _ in 0..2 {
        scrape_ok(&ex);
    }
    // The server kept accepting (past the listen backlog) all along.
    assert!(held.len() > 64, "{}", held.len());
    // Connections take what the limit leaves after the 32 kept for scrapes, and no more.
    ex.wait_fds_at_most(32 + 8);

    // The limit lowered below what is open now (fresh connections, so that none has timed
    // out yet): accepting fails (EMFILE) whenever no descriptor number under the limit is
    // free, until idle connections are shed; either way, the connections come down within
    // the new limit.
    let fresh = hold(60);
    let open = ex.open_fds();
    assert!(open > 24, "{open} descriptors open");
    let out = Command::new("prlimit").args(["--pid", &ex.child.id().to_string(), "--nofile=20:20"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let more = hold(100);
    for _ in 0..2 {
        scrape_ok(&ex);
    }
    ex.assert_running();
    ex.wait_fds_at_most(20);
    drop((held, fresh, more));
    scrape_ok(&ex);
}
