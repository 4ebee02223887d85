//! Zenoh's own options reach Zenoh through `--cfg`: two bridge processes on loopback with
//! user/password authentication link when the password is right and never when it is
//! wrong. And a bridge reports a bad option or a missing root with one line, exit 1.

mod common;

use std::time::{Duration, Instant};

use common::procs::{bridge_exe, Proc};
use common::{free_port, Scratch};
use shmbus::{Domain, Topic, TopicConfig};

fn bridge(root: &std::path::Path, endpoint: (&str, String), user: &str, password: &str, dict: &str) -> Proc {
    let mut c = std::process::Command::new(bridge_exe());
    c.args(["--domain", "d", "--topics", "imu", "--no-multicast-scouting", "--scan-interval", "20ms"])
        .args(["--stats-interval", "0", "--json"])
        .args([endpoint.0, &endpoint.1])
        .arg("--cfg")
        .arg(format!("transport/auth/usrpwd/user:\"{user}\""))
        .arg("--cfg")
        .arg(format!("transport/auth/usrpwd/password:\"{password}\""))
        .arg("--cfg")
        .arg(format!("transport/auth/usrpwd/dictionary_file:\"{dict}\""))
        .env("SHMBUS_ROOT", root);
    Proc::spawn(c)
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

#[test]
fn bad_options_are_one_line_and_exit_1() {
    let s = Scratch::new("badopt");
    for (args, want) in [
        (vec!["--domain", "d", "--topics", "x", "--cfg", "no/such/key:1"], "zenoh option"),
        (vec!["--domain", "d", "--topics", "x", "--cfg", "nocolon"], "write KEY:VALUE"),
        (vec!["--domain", "d", "--topics", "cam/[x]"], "can match no topic"),
        (vec!["--domain", "d", "--topics", "x", "--key-prefix", "a/*"], "key prefix"),
        (vec!["--domain", "d"], "nothing to bridge"),
        (vec!["--topics", "x"], "needs --domain"),
        (vec!["--mirror", "orders"], "write NAME=DIR"),
    ] {
        let out = std::process::Command::new(bridge_exe())
            .args(&args)
            .args(["--no-multicast-scouting", "--listen", "tcp/127.0.0.1:0"])
            .env("SHMBUS_ROOT", s.path())
            .env_remove("SHMBUS_DOMAIN")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.starts_with("shmbus bridge: ") && err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
    let out = std::process::Command::new(bridge_exe())
        .args(["--domain", "d", "--topics", "x", "--root", "/nonexistent/root"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
}
