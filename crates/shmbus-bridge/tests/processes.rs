//! Bridge processes on loopback. Zenoh's own options reach Zenoh through `--cfg`: two bridges with
//! user/password authentication link when the password is right and never when it is
//! wrong; over TLS they link when the connector trusts the listener's certificate authority
//! and never when it trusts another. Hostile samples are counted every time and reported
//! once on stderr. A bad option or a missing root is one line, exit 1. `--require-tls` links
//! over TLS and refuses to start with any other endpoint, from a flag or from Zenoh's options.

mod common;

use std::time::{Duration, Instant};

use common::procs::{bridge_exe, Proc};
use common::{free_port, Scratch};
use shmbus::{Domain, Topic, TopicConfig};

/// A bridge of topic `imu` on `endpoint` with Zenoh options `cfg` (`KEY`, JSON5 string).
fn bridge_with(root: &std::path::Path, endpoint: (&str, String), cfg: &[(&str, &str)]) -> Proc {
    bridge_flags(root, endpoint, cfg, &[])
}

/// [`bridge_with`] and more flags.
fn bridge_flags(root: &std::path::Path, endpoint: (&str, String), cfg: &[(&str, &str)], flags: &[&str]) -> Proc {
    let mut c = std::process::Command::new(bridge_exe());
    c.args(["--domain", "d", "--topics", "imu", "--no-multicast-scouting", "--scan-interval", "20ms"])
        .args(flags)
        .args(["--stats-interval", "0", "--json"])
        .args([endpoint.0, &endpoint.1])
        .env("SHMBUS_ROOT", root);
    for (k, v) in cfg {
        c.arg("--cfg").arg(format!("{k}:\"{v}\""));
    }
    Proc::spawn(c)
}

fn bridge(root: &std::path::Path, endpoint: (&str, String), user: &str, password: &str, dict: &str) -> Proc {
    let cfg = [
        ("transport/auth/usrpwd/user", user),
        ("transport/auth/usrpwd/password", password),
        ("transport/auth/usrpwd/dictionary_file", dict),
    ];
    bridge_with(root, endpoint, &cfg)
}

fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("openssl").args(args).current_dir(dir).output().expect("run openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn tls_options_pass_through() {
    let s = Scratch::new("tls");
    let (ra, rb) = (s.dir("a"), s.dir("b"));
    let d = s.dir("pki");
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    for ca in ["ca", "other-ca"] {
        let (key, pem, subj) = (format!("{ca}.key"), format!("{ca}.pem"), format!("/CN={ca}"));
        openssl(
            &d,
            &[&["req", "-x509"][..], &ec, &["-keyout", &key, "-out", &pem, "-days", "2", "-subj", &subj]].concat(),
        );
    }
    openssl(&d, &[&["req"][..], &ec, &["-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=localhost"]].concat());
    std::fs::write(d.join("san.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n").unwrap();
    openssl(
        &d,
        &[
            "x509",
            "-req",
            "-in",
            "srv.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "srv.pem",
            "-days",
            "2",
            "-extfile",
            "san.ext",
        ],
    );
    let p = |f: &str| d.join(f).display().to_string();
    let port = free_port();
    let listen = ("--listen", format!("tls/127.0.0.1:{port}"));
    let connect = ("--connect", format!("tls/127.0.0.1:{port}"));
    let (cert, key) = (p("srv.pem"), p("srv.key"));
    let tls_only = ["--require-tls"];
    let a = bridge_flags(
        &ra,
        listen,
        &[("transport/link/tls/listen_certificate", &cert), ("transport/link/tls/listen_private_key", &key)],
        &tls_only,
    );
    // Trusting another authority: no link.
    let other = p("other-ca.pem");
    let wrong = bridge_with(&rb, connect.clone(), &[("transport/link/tls/root_ca_certificate", &other)]);
    assert!(!crosses(&ra, &rb, Duration::from_secs(3)), "a message crossed a TLS link to an untrusted certificate");
    drop(wrong);
    let ca = p("ca.pem");
    let right = bridge_flags(&rb, connect, &[("transport/link/tls/root_ca_certificate", &ca)], &tls_only);
    assert!(crosses(&ra, &rb, Duration::from_secs(30)), "nothing crossed the TLS link");
    drop((a, right));
}

#[test]
fn require_tls_refuses_every_other_endpoint() {
    let s = Scratch::new("tlsonly");
    let tls = "tls/127.0.0.1:1";
    for (args, want) in [
        (vec!["--listen", "tcp/127.0.0.1:0"], "endpoint tcp/127.0.0.1:0 is not a TLS one"),
        (vec!["--listen", tls, "--connect", "udp/127.0.0.1:1"], "endpoint udp/127.0.0.1:1 is not"),
        // From Zenoh's own options, per mode or not, and after the flags.
        (vec!["--listen", tls, "--cfg", r#"connect/endpoints:["tcp/127.0.0.1:2"]"#], "endpoint tcp/127.0.0.1:2 is not"),
        (vec!["--cfg", r#"listen/endpoints:{peer:["tcp/127.0.0.1:3"],router:["tls/127.0.0.1:1"]}"#], "tcp/127.0.0.1:3"),
        // None at all (Zenoh's default listener, plain TCP, is not used).
        (vec![], "needs an endpoint"),
    ] {
        let tls_only = ["--domain", "d", "--topics", "x", "--no-multicast-scouting", "--require-tls"];
        fails_in_one_line(&[&tls_only[..], &args].concat(), s.path(), want);
    }
    // Per mode, the router's list is the one a router uses.
    let out = std::process::Command::new(bridge_exe())
        .args(["--domain", "d", "--topics", "x", "--no-multicast-scouting", "--require-tls", "--mode", "router"])
        .args(["--cfg", r#"listen/endpoints:{peer:["tcp/127.0.0.1:3"],router:["tcp/127.0.0.1:4"]}"#])
        .env("SHMBUS_ROOT", s.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("tcp/127.0.0.1:4"), "{out:?}");
}

/// Publishes on a's imu for up to `limit`; whether b's imu got a message.
fn crosses(ra: &std::path::Path, rb: &std::path::Path, limit: Duration) -> bool {
    let da = Domain::with_root("d", ra).unwrap();
    let imu = Topic::create_or_open(&da, "imu", &TopicConfig::default().max_message_len(16).history(4)).unwrap();
    let mut p = imu.publisher().unwrap();
    let db = Domain::with_root("d", rb).unwrap();
    let end = Instant::now() + limit;
    while Instant::now() < end {
        p.send(b"hi").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        if Topic::status(&db, "imu").is_ok_and(|st| st.last_seq > 0) {
            return true;
        }
    }
    false
}

#[test]
fn user_password_authentication_is_zenohs_and_passes_through() {
    let s = Scratch::new("auth");
    let (ra, rb) = (s.dir("a"), s.dir("b"));
    let dict = s.path().join("users.txt");
    std::fs::write(&dict, "robot:secret\nbase:other\n").unwrap();
    let dict = dict.to_str().unwrap();
    let port = free_port();
    let listen = ("--listen", format!("tcp/127.0.0.1:{port}"));
    let connect = ("--connect", format!("tcp/127.0.0.1:{port}"));
    let a = bridge(&ra, listen, "robot", "secret", dict);

    // A wrong password: Zenoh refuses the link, nothing crosses.
    let wrong = bridge(&rb, connect.clone(), "base", "wrong", dict);
    assert!(!crosses(&ra, &rb, Duration::from_secs(3)), "a message crossed with a wrong password");
    drop(wrong);

    // The right one: it crosses.
    let right = bridge(&rb, connect, "base", "other", dict);
    assert!(crosses(&ra, &rb, Duration::from_secs(30)), "nothing crossed with the right password");
    drop((a, right));
}

/// A bridge run with `args` (under `root`, no SHMBUS_DOMAIN) exits 1 with one line on
/// stderr, which says `want`.
fn fails_in_one_line(args: &[&str], root: &std::path::Path, want: &str) {
    let out = std::process::Command::new(bridge_exe())
        .args(args)
        .env("SHMBUS_ROOT", root)
        .env_remove("SHMBUS_DOMAIN")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(err.starts_with("shmbus bridge: ") && err.contains(want), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
}

#[test]
fn bad_options_are_one_line_and_exit_1() {
    let s = Scratch::new("badopt");
    // A key file others may read is refused, as the journal tools refuse it.
    let open_keys = s.path().join("keys");
    std::fs::write(&open_keys, format!("1 {}\n", "ab".repeat(32))).unwrap();
    std::fs::set_permissions(&open_keys, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let open_keys = open_keys.display().to_string();
    let missing_keys = s.path().join("no-keys").display().to_string();
    for (args, want) in [
        (vec!["--mirror", "orders=j", "--key-file", &open_keys], "--key-file"),
        (vec!["--mirror", "orders=j", "--key-file", &missing_keys], "--key-file"),
        (vec!["--domain", "d", "--topics", "x", "--cfg", "no/such/key:1"], "zenoh option"),
        (vec!["--domain", "d", "--topics", "x", "--cfg", "nocolon"], "write KEY:VALUE"),
        (vec!["--domain", "d", "--topics", "cam/[x]"], "can match no topic"),
        (vec!["--domain", "d", "--topics", "x", "--key-prefix", "a/*"], "key prefix"),
        (vec!["--domain", "d"], "nothing to bridge"),
        (vec!["--topics", "x"], "needs --domain"),
        (vec!["--mirror", "orders"], "write NAME=DIR"),
    ] {
        fails_in_one_line(
            &[&args[..], &["--no-multicast-scouting", "--listen", "tcp/127.0.0.1:0"]].concat(),
            s.path(),
            want,
        );
    }
    let out = std::process::Command::new(bridge_exe())
        .args(["--domain", "d", "--topics", "x", "--root", "/nonexistent/root"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
}

#[test]
fn hostile_samples_are_reported_once_and_counted_each_time() {
    use zenoh::Wait;
    let s = Scratch::new("once");
    let root = s.dir("r");
    let port = free_port();
    let b = bridge_with(&root, ("--listen", format!("tcp/127.0.0.1:{port}")), &[]);
    let evil = common::session(None, &[port]);
    let good = shmbus_bridge::wire::TopicMeta {
        origin: [9; 16],
        seq: 1,
        ts_mono_ns: 1,
        ts_real_ns: 1,
        max_message_len: 16,
        history: 4,
        policy: 0,
    }
    .encode()
    .to_vec();
    // Linked once a good message made the topic.
    let d = Domain::with_root("d", &root).unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    while Topic::status(&d, "imu").is_err() {
        assert!(Instant::now() < end, "the bridge never received");
        evil.put("shmbus/d/imu", b"ok".to_vec()).attachment(good.clone()).wait().unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..40 {
        evil.put("shmbus/d/imu", b"x".to_vec()).attachment(b"garbage".to_vec()).wait().unwrap();
        evil.put("shmbus/d/secret", b"x".to_vec()).attachment(good.clone()).wait().unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    let out = b.terminate();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let last: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!((last["bad_attachment"].as_u64(), last["not_allowed"].as_u64()), (Some(40), Some(40)), "{last}");
    let lines = |needle: &str| stderr.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(lines("remote key shmbus/d/imu"), 1, "{stderr}");
    assert_eq!(lines("remote key shmbus/d/secret"), 1, "{stderr}");
    assert!(stderr.contains("(reported once)"), "{stderr}");
}

/// The scheduling policy of each thread of process `pid` (field 41 of
/// /proc/PID/task/TID/stat), with the thread's name.
fn thread_policies(pid: u32) -> Vec<(String, i32)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else { continue };
        // The name may hold spaces and parentheses: the fields start after the last ')'.
        let (head, rest) = stat.rsplit_once(')').unwrap();
        let name = head.split_once('(').map_or("", |(_, n)| n).to_owned();
        let policy = rest.split_whitespace().nth(38).unwrap().parse().unwrap();
        out.push((name, policy));
    }
    out
}

/// Every thread of a linked bridge that forwards a topic: Zenoh's, the forwarding
/// thread's, the bridge's own.
/// `started_under`: a policy the bridges are started under (inherited from this thread,
/// which is set back to normal once they are started).
fn policies_of_a_forwarding_bridge(flags: &[&str], started_under: Option<i32>) -> Vec<(String, i32)> {
    let s = Scratch::new("sched");
    let (ra, rb) = (s.dir("a"), s.dir("b"));
    let port = free_port();
    let set = |policy: i32| {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: the calling thread's policy, with a parameter that lives across the call.
        assert_eq!(unsafe { libc::sched_setscheduler(0, policy, &param) }, 0, "set policy {policy}");
    };
    if let Some(p) = started_under {
        set(p);
    }
    let a = bridge_flags(&ra, ("--listen", format!("tcp/127.0.0.1:{port}")), &[], flags);
    let b = bridge_flags(&rb, ("--connect", format!("tcp/127.0.0.1:{port}")), &[], flags);
    if started_under.is_some() {
        set(libc::SCHED_OTHER);
    }
    assert!(crosses(&ra, &rb, Duration::from_secs(30)), "the bridges did not link");
    let policies = thread_policies(a.0.id());
    drop((a, b));
    assert!(policies.iter().any(|(n, _)| n.starts_with("bridge-out")), "no forwarding thread in {policies:?}");
    assert!(policies.len() > 3, "too few threads to be Zenoh's and the bridge's: {policies:?}");
    policies
}

#[test]
fn every_thread_is_batch_scheduled_unless_told_otherwise() {
    let batch = policies_of_a_forwarding_bridge(&[], None);
    assert!(batch.iter().all(|&(_, p)| p == libc::SCHED_BATCH), "not all SCHED_BATCH: {batch:?}");
    let normal = policies_of_a_forwarding_bridge(&["--sched-policy", "normal"], None);
    assert!(normal.iter().all(|&(_, p)| p == libc::SCHED_OTHER), "not all SCHED_OTHER: {normal:?}");
    // Started under another policy (the idle one: no privilege needed to enter it), the
    // bridge keeps it.
    let idle = policies_of_a_forwarding_bridge(&[], Some(libc::SCHED_IDLE));
    assert!(idle.iter().all(|&(_, p)| p == libc::SCHED_IDLE), "not all SCHED_IDLE: {idle:?}");
}
