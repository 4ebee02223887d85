//! A newcomer's first hour with the CLI: the surprises it used to hold, each pinned by a
//! test. Real `shmbus` processes on real channels in a scratch root; no assertion on a time.
//!
//! * `sub` prints a payload that is not UTF-8 as hex unless `--format raw` asks for bytes.
//! * `rm` of a domain's last channel removes the domain directory too.

mod common;

use common::{json_lines, Root};

/// Whether domain `d` has a directory under the root.
fn domain_dir_exists(r: &Root, d: &str) -> bool {
    r.0.join(format!("shmbus.{d}")).exists()
}

#[test]
fn sub_prints_binary_payloads_as_hex_and_text_as_text() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t"]);
    r.ok(&["pub", "--domain", "d", "t", "--format", "hex", "--data", "00ff0a41"]);
    r.ok(&["pub", "--domain", "d", "t", "--data", "héllo"]);
    let out = r.ok(&["sub", "--domain", "d", "t", "--from", "1", "--count", "2", "--timeout-ms", "20000"]);
    assert_eq!(out, "00ff0a41\nhéllo\n");
    // Bytes as they are when asked for.
    let out = r.run(&["sub", "--domain", "d", "t", "--from", "1", "--count", "1", "--format", "raw"]);
    assert_eq!(out.stdout, b"\x00\xff\x0aA");
    // `--format text` stays lossy text.
    let out = r.ok(&["sub", "--domain", "d", "t", "--from", "1", "--count", "1", "--format", "text"]);
    assert_eq!(out, "\0\u{fffd}\nA\n");
}

#[test]
fn rm_of_the_last_channel_removes_the_domain_directory() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "a"]);
    r.ok(&["create", "--domain", "d", "--kind", "topic", "b"]);
    let out = r.ok(&["rm", "--domain", "d", "a"]);
    assert!(!out.contains("empty domain"), "{out}");
    assert!(domain_dir_exists(&r, "d"), "b is still in d");
    let v = &json_lines(&r.ok(&["rm", "--domain", "d", "b", "--json"]))[0];
    assert_eq!(v["name"], "b", "{v}");
    assert!(!domain_dir_exists(&r, "d"));

    r.ok(&["create", "--domain", "e", "--kind", "topic", "c"]);
    let out = r.ok(&["rm", "--domain", "e", "c"]);
    assert!(out.contains("removed empty domain e"), "{out}");
    assert!(!domain_dir_exists(&r, "e"));
}

#[test]
fn clean_all_removes_the_domain_it_emptied() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "idle", "--data", "x"]);
    let out = r.ok(&["clean", "--all"]);
    assert!(out.contains("removed empty domain d"), "{out}");
    assert!(!domain_dir_exists(&r, "d"));
}
