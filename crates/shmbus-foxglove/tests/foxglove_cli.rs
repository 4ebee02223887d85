//! `shmbus foxglove …` runs this program (the `shmbus` tool finds it beside itself), and the
//! program's own options: the listen warning, the missing domain, a clean exit on SIGINT.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn foxglove() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_shmbus-foxglove"))
}

/// The `shmbus` tool built beside this program (`cargo test --workspace` builds both).
fn shmbus() -> Option<PathBuf> {
    let p = foxglove().with_file_name("shmbus");
    if p.is_file() {
        return Some(p);
    }
    eprintln!("skipped: {} is not built (run the tests with --workspace)", p.display());
    None
}

fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from("/dev/shm").join(format!("shmbus-test-foxglove-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Starts `cmd`, waits for its line with `ws://`, sends `signal`: the stderr lines and
/// whether it exited 0.
fn serve_then_signal(mut cmd: Command, signal: i32) -> (Vec<String>, bool) {
    let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = Vec::new();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    loop {
        let mut l = String::new();
        assert!(err.read_line(&mut l).unwrap() > 0, "exited before serving: {lines:?}");
        let ready = l.contains("ws://");
        lines.push(l.trim_end().to_owned());
        if ready {
            break;
        }
    }
    // SAFETY: kill has no memory preconditions; the pid is our own live child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let end = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < end, "did not exit on signal {signal}");
        std::thread::sleep(Duration::from_millis(20));
    };
    lines.extend(err.lines().map_while(Result::ok));
    (lines, status.success())
}

#[test]
fn shmbus_foxglove_runs_the_program_with_the_root() {
    let Some(shmbus) = shmbus() else { return };
    let help = Command::new(&shmbus).args(["foxglove", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.status.success() && text.contains("Usage: shmbus foxglove") && text.contains("--max-clients"),
        "{text}"
    );
    let root = scratch("root");
    let mut cmd = Command::new(&shmbus);
    cmd.arg("--root").arg(&root).args(["foxglove", "--domain", "d", "--listen", "127.0.0.1:0"]);
    let (lines, ok) = serve_then_signal(cmd, libc::SIGINT);
    assert!(ok, "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("domain d on ws://127.0.0.1:")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("stopped")), "{lines:?}");
    // Loopback: no warning.
    assert!(!lines.iter().any(|l| l.contains("warning")), "{lines:?}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_non_loopback_address_is_warned_about() {
    let root = scratch("warn");
    let mut cmd = Command::new(foxglove());
    cmd.arg("--root").arg(&root).args(["--domain", "d", "--listen", "0.0.0.0:0"]);
    let (lines, ok) = serve_then_signal(cmd, libc::SIGTERM);
    assert!(ok, "{lines:?}");
    let warnings: Vec<_> = lines.iter().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{lines:?}");
    assert!(warnings[0].contains("no TLS") && warnings[0].contains("reverse proxy"), "{lines:?}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn no_domain_is_an_error() {
    let out = Command::new(foxglove()).env_remove("SHMBUS_DOMAIN").args(["--listen", "127.0.0.1:0"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--domain"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The program listens on `--listen` and nowhere else: no second port a local process could
/// reach past the connection bounds. Read from the kernel: the listening TCP sockets
/// (`/proc/net/tcp`, state 0A) whose inodes are among the program's descriptors.
#[test]
fn it_listens_on_its_address_only() {
    let root = scratch("one-port");
    let mut child = Command::new(foxglove())
        .arg("--root")
        .arg(&root)
        .args(["--domain", "d", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let url = loop {
        let mut l = String::new();
        assert!(err.read_line(&mut l).unwrap() > 0, "exited before serving");
        if let Some(at) = l.find("ws://") {
            break l[at..].split_whitespace().next().unwrap().to_owned();
        }
    };
    let port: u16 = url.rsplit(':').next().unwrap().trim_end_matches('/').parse().unwrap();
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", child.id()))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']').map(str::to_owned))
        .collect();
    let mut listening = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for line in std::fs::read_to_string(table).unwrap_or_default().lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9]) {
                let port = u16::from_str_radix(f[1].rsplit(':').next().unwrap(), 16).unwrap();
                listening.push(port);
            }
        }
    }
    // SAFETY: kill has no memory preconditions; the pid is our own live child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&root);
    assert_eq!(listening, vec![port], "listening sockets besides --listen");
}
