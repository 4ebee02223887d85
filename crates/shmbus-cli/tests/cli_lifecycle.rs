//! Channel lifecycle verbs across processes: `create`, `rm`, and the default domain from
//! `SHMBUS_DOMAIN`.

mod common;

use std::time::{Duration, Instant};

use common::{one_error_line, Root};

#[test]
fn create_makes_each_kind_and_is_idempotent() {
    let r = Root::new();
    let v = r.json(&["create", "--domain", "d", "--kind", "topic", "t", "--history", "8", "--json"]);
    assert_eq!(v["created"], true, "{v}");
    assert_eq!(v["kind"], "topic");
    assert_eq!(v["name"], "t");
    assert!(r.channel_file("d", "t").is_file());
    // Same kind and sizes again: success, not created.
    let v = r.json(&["create", "--domain", "d", "--kind", "topic", "t", "--history", "8", "--json"]);
    assert_eq!(v["created"], false, "{v}");
    assert!(r.ok(&["create", "--domain", "d", "--kind", "topic", "t"]).starts_with("exists"));
    // Another size, another kind: the library's errors, exit 1.
    let e = r.fails(&["create", "--domain", "d", "--kind", "topic", "t", "--history", "4"]);
    assert!(e.contains("history") && e.contains('8') && e.contains('4'), "{e}");
    let e = r.fails(&["create", "--domain", "d", "--kind", "queue", "t"]);
    assert!(e.contains("is a topic, not a queue"), "{e}");

    r.ok(&["create", "--domain", "d", "--kind", "queue", "q", "--capacity", "16", "--max-element-size", "64"]);
    r.ok(&["create", "--domain", "d", "--kind", "stream", "s", "--capacity", "64K", "--mode", "640"]);
    r.ok(&["create", "--domain", "d", "--kind", "pool", "p", "--max-workers", "2"]);
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(r.channel_file("d", "s")).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o640);
    let info = |n: &str| r.json(&["info", "--domain", "d", n, "--json"]);
    assert_eq!(info("q")["kind"], "queue");
    assert_eq!(info("q")["params"]["capacity"], 16);
    assert_eq!(info("s")["params"]["capacity"], 65536);
    assert_eq!(info("p")["params"]["max_workers"], 2);

    // A message published by another process goes through the created topic.
    r.ok(&["pub", "--domain", "d", "t", "--data", "hello"]);
    assert_eq!(r.ok(&["sub", "--domain", "d", "t", "--from", "1", "--count", "1"]), "hello\n");
}

#[test]
fn create_refuses_flags_of_other_kinds_and_journals_as_usage_errors() {
    let r = Root::new();
    for args in [
        &["create", "--domain", "d", "--kind", "pool", "p", "--history", "3"][..],
        &["create", "--domain", "d", "--kind", "topic", "t", "--capacity", "3"],
        &["create", "--domain", "d", "--kind", "journal", "j"],
        &["create", "--domain", "d", "--kind", "topic", "t", "--mode", "999"],
    ] {
        let out = r.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        one_error_line(&out);
    }
    assert!(!r.0.join("shmbus.d").join("p").exists());
    assert!(!r.0.join("shmbus.d").join("t").exists());
}
