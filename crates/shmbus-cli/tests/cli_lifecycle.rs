//! Channel lifecycle verbs across processes: `create`, `rm`, and the default domain from
//! `SHMBUS_DOMAIN`.

mod common;

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
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(r.channel_file("d", "s")).unwrap().permissions());
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

#[test]
fn rm_refuses_while_a_subscriber_process_is_attached_and_forced_leaves_it_running() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t"]);
    let mut sub = r.spawn(&["sub", "--domain", "d", "t", "--count", "1", "--timeout-ms", "2000"]);
    r.wait_info("d", "t", |v| v["subscribers"] == 1);
    let e = r.fails(&["rm", "--domain", "d", "t"]);
    assert!(e.contains(&format!("pid {} (subscriber)", sub.id())), "{e}");
    assert!(e.contains("--force"), "{e}");
    assert!(r.channel_file("d", "t").is_file(), "refused, yet removed");

    let out = r.ok(&["rm", "--domain", "d", "t", "--force"]);
    assert!(out.contains("removed d/t (topic; still mapped by") && out.contains(&sub.id().to_string()), "{out}");
    assert!(!r.channel_file("d", "t").exists());
    // The subscriber keeps its mapping: it runs on until its own timeout, and fails with its
    // own clear line (nothing will ever arrive on a channel nobody can open), not a signal.
    let out = sub.0.take().unwrap().wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(one_error_line(&out).contains("timed out"), "{out:?}");
    // The name is free again: a new topic, unrelated to the removed one.
    r.ok(&["pub", "--domain", "d", "t", "--data", "x"]);
    assert!(r.channel_file("d", "t").is_file());
}

#[test]
fn rm_removes_once_the_user_is_gone_and_says_so_for_every_kind() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "queue", "q"]);
    let mut worker = r.spawn(&["pool", "worker", "--domain", "d", "p"]);
    r.wait_info("d", "p", |v| v["status"]["workers"] == 1);
    let e = r.fails(&["rm", "--domain", "d", "p"]);
    assert!(e.contains("(worker)"), "{e}");
    worker.kill();
    assert!(r.ok(&["rm", "--domain", "d", "p"]).starts_with("removed d/p (pool)"));
    assert!(r.ok(&["rm", "--domain", "d", "q"]).starts_with("removed d/q (queue)"));
    assert!(r.fails(&["rm", "--domain", "d", "q"]).contains("no channel d/q"));
    assert_eq!(r.run(&["rm", "--domain", "d", "q"]).status.code(), Some(1));
}

#[test]
fn rm_keeps_invalid_files_unless_forced_and_never_follows_a_symlink() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t"]);
    std::fs::write(r.channel_file("d", "junk"), b"not a segment at all").unwrap();
    let e = r.fails(&["rm", "--domain", "d", "junk"]);
    assert!(e.contains("--force removes it"), "{e}");
    assert!(r.channel_file("d", "junk").exists());
    assert!(r.ok(&["rm", "--domain", "d", "junk", "--force"]).contains("invalid file"));
    assert!(!r.channel_file("d", "junk").exists());

    let target = r.0.join("target-file");
    std::fs::write(&target, b"x").unwrap();
    std::os::unix::fs::symlink(&target, r.channel_file("d", "link")).unwrap();
    r.fails(&["rm", "--domain", "d", "link", "--force"]);
    assert!(target.exists() && r.channel_file("d", "link").symlink_metadata().is_ok());
}

#[test]
fn shmbus_domain_is_the_default_domain_of_the_verbs_that_need_one() {
    let r = Root::new();
    let with_env = |args: &[&str]| {
        let out = r.cmd(args).env("SHMBUS_DOMAIN", "envd").output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    with_env(&["create", "--kind", "topic", "t"]);
    assert!(r.channel_file("envd", "t").is_file());
    with_env(&["pub", "t", "--data", "from env"]);
    assert_eq!(with_env(&["sub", "t", "--from", "1", "--count", "1"]), "from env\n");
    assert!(with_env(&["info", "t"]).contains("envd/t"));
    // --domain wins over the environment.
    let out =
        r.cmd(&["create", "--domain", "other", "--kind", "queue", "q"]).env("SHMBUS_DOMAIN", "envd").output().unwrap();
    assert!(out.status.success());
    assert!(r.channel_file("other", "q").is_file() && !r.channel_file("envd", "q").exists());
    // A journal watch is not refused because the environment names a domain.
    let out = r
        .cmd(&["hz", "--journal", "/nonexistent-journal", "--count", "1"])
        .env("SHMBUS_DOMAIN", "envd")
        .output()
        .unwrap();
    assert!(!one_error_line(&out).contains("cannot be used with"), "{out:?}");
    with_env(&["rm", "t"]);
    assert!(!r.channel_file("envd", "t").exists());

    // Neither: a usage error naming both.
    for args in [&["create", "--kind", "topic", "t"][..], &["rm", "t"], &["sub", "t"], &["pub", "t", "--data", "x"]] {
        let out = r.cmd(args).env_remove("SHMBUS_DOMAIN").output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let e = one_error_line(&out);
        assert!(e.contains("--domain") && e.contains("SHMBUS_DOMAIN"), "{e}");
    }
}

/// Waits until process `pid` holds an inotify instance: it is in its `--wait`, watching.
fn wait_until_watching(pid: u32) {
    let t0 = std::time::Instant::now();
    loop {
        let watching = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|fds| {
                fds.flatten()
                    .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy().contains("inotify")))
            })
            .unwrap_or(false);
        if watching {
            return;
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(20), "pid {pid} never started watching");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn sub_wait_started_before_the_topic_exists_gets_what_pub_then_sends() {
    let r = Root::new();
    let sub = r.spawn(&["sub", "--domain", "w", "t", "--wait", "20", "--count", "2", "--timeout-ms", "20000"]);
    wait_until_watching(sub.id());
    assert!(!r.0.join("shmbus.w").exists(), "sub --wait created something");
    // pub creates the domain and the topic, sends at once and exits.
    r.ok_stdin(&["pub", "--domain", "w", "t"], "first\nsecond\n");
    assert_eq!(sub.finish_ok(), "first\nsecond\n");
}

#[test]
fn wait_times_out_with_one_clear_line_and_a_present_channel_needs_no_wait() {
    let r = Root::new();
    let out = r.run(&["sub", "--domain", "w", "nope", "--wait", "0.3"]);
    assert_eq!(out.status.code(), Some(1));
    let e = one_error_line(&out);
    assert!(e.contains("no channel w/nope appeared within --wait 0.3 s"), "{e}");
    let out = r.run(&["pool", "worker", "--domain", "w", "p", "--wait", "0.2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(one_error_line(&out).contains("w/p"));
    assert!(!r.channel_file("w", "p").exists(), "worker --wait created the pool");
    assert_eq!(r.run(&["sub", "--domain", "w", "t", "--wait", "soon"]).status.code(), Some(2));
    // Already there: --wait returns at once and sub starts at new messages as usual.
    r.ok(&["create", "--domain", "w", "--kind", "queue", "q"]);
    r.ok(&["pub", "--domain", "w", "q", "--data", "queued"]);
    assert_eq!(r.ok(&["sub", "--domain", "w", "q", "--wait", "5", "--count", "1"]), "queued\n");
}

#[test]
fn pool_worker_and_record_wait_for_their_channels() {
    let r = Root::new();
    let worker =
        r.spawn(&["pool", "worker", "--domain", "w", "p", "--wait", "20", "--count", "1", "--timeout-ms", "20000"]);
    let jdir = r.jdir("rec");
    let record = r.spawn(&["record", "--domain", "w", "t", "--dir", &jdir, "--wait", "20", "--count", "1", "--json"]);
    wait_until_watching(worker.id());
    wait_until_watching(record.id());
    r.ok(&["create", "--domain", "w", "--kind", "pool", "p"]);
    // The worker wakes, opens the pool and joins it (a dispatch before that finds no worker).
    r.wait_info("w", "p", |v| v["status"]["workers"] == 1);
    r.ok(&["pool", "dispatch", "--domain", "w", "p", "--data", "job-one", "--timeout-ms", "20000"]);
    assert!(worker.finish_ok().contains("job-one"));
    r.ok(&["pub", "--domain", "w", "t", "--data", "recorded"]);
    let v: serde_json::Value = serde_json::from_str(&record.finish_ok()).unwrap();
    assert_eq!(v["messages"], 1, "{v}");
}
