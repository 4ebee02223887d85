//! Runs a Python script of an interop test and reads the JSON it prints (for the test files
//! that exchange JSON with the interop virtualenv's clients; included with `#[path]`).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `script` with `py` and `input` on its stdin; its stdout parsed as JSON.
pub fn run(py: &Path, script: &str, input: &str) -> serde_json::Value {
    let mut child = Command::new(py)
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "python failed: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("python printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}
