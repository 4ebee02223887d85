//! The `shmbus` binary on streams and pools (and the queue hook), as real processes against
//! a scratch root (see `common`).

mod common;

use std::io::Write;
use std::process::Stdio;

use common::{json_lines, one_error_line, Killed, Root};
use serde_json::Value;

/// Sends `sig` to a child of ours.
fn signal(child: &Killed, sig: i32) {
    // SAFETY: kill(2) on the pid of a child we have not reaped yet (Killed reaps on drop).
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

#[test]
fn stream_pub_sub_round_trip() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "s", "--kind", "stream", "--capacity", "64K", "--data", "alpha"]);
    let out = r.run_stdin(&["pub", "--domain", "d", "s"], b"beta\n\nlast without newline");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // The records wait in the ring for the reader; seq counts this reader's records.
    let lines = json_lines(&r.ok(&["sub", "--domain", "d", "s", "--count", "4", "--json", "--timeout-ms", "10000"]));
    let got: Vec<(u64, u64, &str)> = lines
        .iter()
        .map(|l| (l["seq"].as_u64().unwrap(), l["len"].as_u64().unwrap(), l["data"].as_str().unwrap()))
        .collect();
    assert_eq!(got, [(1, 5, "alpha"), (2, 4, "beta"), (3, 0, ""), (4, 20, "last without newline")]);
    for l in &lines {
        assert_eq!(l.as_object().unwrap().len(), 4, "{l}");
    }
    let ts: Vec<u64> = lines.iter().map(|l| l["ts_mono_ns"].as_u64().unwrap()).collect();
    assert!(ts[0] > 0 && ts.windows(2).all(|w| w[0] <= w[1]), "receive times are monotonic: {ts:?}");

    // Consumed: a second reader finds nothing.
    let out = r.run(&["sub", "--domain", "d", "s", "--timeout-ms", "100"]);
    assert!(!out.status.success() && out.stdout.is_empty());
    assert!(one_error_line(&out).contains("timed out"));

    // A reader started first waits for a writer; plain output is one record per line.
    let sub = r.spawn(&["sub", "--domain", "d", "s", "--count", "2", "--timeout-ms", "20000"]);
    r.wait_info("d", "s", |v| v["reader_alive"] == true);
    r.ok(&["pub", "--domain", "d", "s", "--data", "late 1"]);
    r.ok(&["pub", "--domain", "d", "s", "--data", "late 2"]);
    let out = sub.finish();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "late 1\nlate 2\n");
}

#[test]
fn stream_options_are_checked() {
    let r = Root::new();
    // Bad capacities: one clear line each, nothing created.
    for (cap, expect) in [("1000", "power of two"), ("0", "0 bytes"), ("12288", "8192 or 16384")] {
        let err = r.fails(&["pub", "--domain", "d", "bad", "--kind", "stream", "--capacity", cap, "--data", "x"]);
        assert!(err.contains("capacity") && err.contains(cap) && err.contains(expect), "{cap}: {err}");
        assert!(!r.channel_file("d", "bad").exists());
    }
    let out = r.run(&["pub", "--domain", "d", "bad", "--kind", "stream", "--capacity", "lots", "--data", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(one_error_line(&out).contains("lots"));

    // --capacity alone creates a stream; other sizes than the existing one fail.
    r.ok(&["pub", "--domain", "d", "s", "--capacity", "8192", "--data", "x"]);
    assert_eq!(r.wait_info("d", "s", |_| true)["kind"], "stream");
    let err = r.fails(&["pub", "--domain", "d", "s", "--capacity", "16384", "--data", "x"]);
    assert!(err.contains("8192") && err.contains("16384"), "{err}");
    let err = r.fails(&["pub", "--domain", "d", "s", "--slot-size", "64", "--data", "x"]);
    assert!(err.contains("--slot-size") && err.contains("stream"), "{err}");
    let err = r.fails(&["pub", "--domain", "d", "s", "--kind", "topic", "--data", "x"]);
    assert!(err.contains("is a stream, not a topic"), "{err}");
    let err = r.fails(&["sub", "--domain", "d", "s", "--from", "1", "--timeout-ms", "10"]);
    assert!(err.contains("--from") && err.contains("stream"), "{err}");
    // A record larger than the ring.
    let big = "y".repeat(9000);
    let err = r.fails(&["pub", "--domain", "d", "s", "--data", &big]);
    assert!(err.contains("9000 bytes") && err.contains("maximum of 8184"), "{err}");
    // Full ring and no reader: an error, not a hang.
    let big_half = "z".repeat(5000);
    r.ok(&["pub", "--domain", "d", "s", "--data", &big_half]);
    let err = r.fails(&["pub", "--domain", "d", "s", "--data", &big_half]);
    assert!(err.contains("full") && err.contains("no reader"), "{err}");

    // Queue: --kind queue creates one; queue flags on a topic are refused.
    r.ok(&["pub", "--domain", "d", "q", "--kind", "queue", "--capacity", "8", "--data", "x"]);
    let err = r.fails(&["pub", "--domain", "d", "t2", "--max-element-size", "64", "--data", "x"]);
    assert!(err.contains("--max-element-size is for queues"), "{err}");
}

#[test]
fn ls_and_info_show_stream_and_pool_state() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "s", "--capacity", "16K", "--data", "hello"]);
    r.ok(&["pub", "--domain", "d", "t", "--data", "x"]);
    let v = r.json(&["ls", "--json"]);
    let s = v.as_array().unwrap().iter().find(|e| e["name"] == "s").unwrap();
    assert_eq!(s["kind"], "stream");
    assert_eq!(s["capacity"], 16384);
    assert_eq!(s["bytes_used"], 16, "an 8-byte record header + 5 bytes padded to 8");
    assert_eq!((s["writer_pid"].clone(), s["reader_pid"].clone()), (Value::Null, Value::Null));

    // A live writer (pub reading a stdin we hold open) and a live reader (which drains).
    let mut writer =
        r.cmd(&["pub", "--domain", "d", "s"]).stdin(Stdio::piped()).spawn().map(|c| Killed(Some(c))).unwrap();
    let reader = r.spawn(&["sub", "--domain", "d", "s"]);
    let info =
        r.wait_info("d", "s", |v| v["writer_alive"] == true && v["reader_alive"] == true && v["bytes_used"] == 0);
    assert_eq!(info["writer_pid"], writer.id());
    assert_eq!(info["reader_pid"], reader.id());
    assert_eq!((info["publishers"].as_u64(), info["subscribers"].as_u64()), (Some(1), Some(1)));
    assert_eq!(info["params"]["capacity"], 16384);
    let mut roles: Vec<&str> =
        info["participants"].as_array().unwrap().iter().map(|p| p["role"].as_str().unwrap()).collect();
    roles.sort();
    assert_eq!(roles, ["reader", "writer"]);
    let text = r.ok(&["info", "--domain", "d", "s"]);
    assert!(
        text.contains("stream") && text.contains(&format!("pid {}", writer.id())) && text.contains("writer"),
        "{text}"
    );

    // A pool with one idle worker, then one busy (stopped, with a job in its mailbox).
    let worker = r.spawn(&["pool", "worker", "--domain", "d", "p", "--max-workers", "3", "--max-job-size", "100"]);
    let info = r.wait_info("d", "p", |v| v["workers_idle"] == 1);
    assert_eq!(info["kind"], "pool");
    assert_eq!((info["max_workers"].as_u64(), info["max_job_size"].as_u64()), (Some(3), Some(100)));
    assert_eq!((info["workers"].as_u64(), info["workers_busy"].as_u64()), (Some(1), Some(0)));
    assert_eq!(info["dispatcher_pid"], Value::Null);
    assert_eq!(info["participants"][0]["role"], "worker");
    signal(&worker, libc::SIGSTOP);
    r.ok(&["pool", "dispatch", "--domain", "d", "p", "--data", "held"]);

    let v = r.json(&["ls", "--domain", "d", "--json"]);
    let all = v.as_array().unwrap();
    assert_eq!(all.len(), 3);
    let keys = |e: &Value| {
        let mut k: Vec<String> = e.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert!(all.iter().all(|e| keys(e) == keys(&all[0])), "every entry has the same keys: {v}");
    let p = all.iter().find(|e| e["name"] == "p").unwrap();
    assert_eq!(
        (p["workers"].as_u64(), p["workers_idle"].as_u64(), p["workers_busy"].as_u64()),
        (Some(1), Some(0), Some(1))
    );
    assert_eq!(p["capacity"], Value::Null);
    let s = all.iter().find(|e| e["name"] == "s").unwrap();
    assert_eq!((s["writer_alive"].as_bool(), s["workers"].clone()), (Some(true), Value::Null));
    let t = all.iter().find(|e| e["name"] == "t").unwrap();
    assert_eq!(
        (t["kind"].as_str(), t["capacity"].clone(), t["last_seq"].as_u64()),
        (Some("topic"), Value::Null, Some(1))
    );

    let table = r.ok(&["ls", "--domain", "d"]);
    let row = table.lines().find(|l| l.split_whitespace().nth(1) == Some("p")).unwrap();
    assert!(row.contains("pool") && row.contains("workers 1/3 (0 idle, 1 busy)"), "{table}");
    let row = table.lines().find(|l| l.split_whitespace().nth(1) == Some("s")).unwrap();
    assert!(row.contains(&format!("writer {} (alive)", writer.id())), "{table}");

    // The stopped worker still gets its job when it runs again.
    signal(&worker, libc::SIGCONT);
    drop(writer.child().stdin.take());
    let out = writer.finish();
    assert!(out.status.success());
    let info = r.wait_info("d", "s", |v| v["writer_pid"].is_null());
    assert_eq!(info["reader_alive"], true);
    drop(reader);
    // Its dispatcher (`dispatch --data`) finished normally: the worker stops with 0.
    assert_eq!(worker.finish_ok(), "job 1: held\ndispatcher finished after 1 job(s)\n");
}

#[test]
fn pool_dispatch_reaches_a_running_worker() {
    let r = Root::new();
    let worker = r.spawn(&["pool", "worker", "--domain", "d", "p", "--count", "3", "--json", "--timeout-ms", "20000"]);
    r.wait_info("d", "p", |v| v["workers_idle"] == 1);
    let out =
        r.run_stdin(&["pool", "dispatch", "--domain", "d", "p", "--timeout-ms", "20000"], b"first\nsecond\nthird");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let sent: Vec<&str> = text.lines().filter(|l| !l.starts_with("all busy")).collect();
    assert_eq!(sent, ["job 1 -> worker 0", "job 2 -> worker 0", "job 3 -> worker 0"], "{text}");

    let out = worker.finish();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let jobs = json_lines(&String::from_utf8(out.stdout).unwrap());
    let got: Vec<(u64, &str)> =
        jobs.iter().map(|j| (j["job_id"].as_u64().unwrap(), j["data"].as_str().unwrap())).collect();
    assert_eq!(got, [(1, "first"), (2, "second"), (3, "third")]);
    assert!(jobs.iter().all(|j| j["worker"] == 0 && j["len"] == j["data"].as_str().unwrap().len()));
}

/// `pool dispatch --format hex|base64` decodes each line (any bytes, newlines included) and
/// `--file PATH` sends a whole file as one job, as `pub` does.
#[test]
fn pool_dispatch_takes_formats_and_files_like_pub() {
    let r = Root::new();
    let worker = r.spawn(&["pool", "worker", "--domain", "d", "p", "--count", "2", "--json", "--timeout-ms", "20000"]);
    r.wait_info("d", "p", |v| v["workers_idle"] == 1);
    // "a\nb" and the bytes 00 ff.
    let out = r.run_stdin(
        &["pool", "dispatch", "--domain", "d", "p", "--format", "base64", "--timeout-ms", "20000"],
        b"YQpi\nAP8=\n",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let jobs = json_lines(&worker.finish_ok());
    assert_eq!((jobs[0]["data"].as_str(), jobs[0]["len"].as_u64()), (Some("a\nb"), Some(3)));
    assert_eq!((jobs[1]["data_base64"].as_str(), jobs[1]["len"].as_u64()), (Some("AP8="), Some(2)));

    // A worker stops when its dispatcher finishes: one worker per `dispatch`.
    let file = r.0.join("job.bin");
    std::fs::write(&file, b"line 1\nline 2\n\x00").unwrap();
    let file = file.to_str().unwrap();
    let mut got = Vec::new();
    for how in [&["--file", file][..], &["--format", "hex", "--data", "6869"]] {
        let worker =
            r.spawn(&["pool", "worker", "--domain", "d", "p", "--count", "1", "--json", "--timeout-ms", "20000"]);
        r.wait_info("d", "p", |v| v["workers_idle"] == 1);
        let mut args = vec!["pool", "dispatch", "--domain", "d", "p", "--timeout-ms", "20000"];
        args.extend_from_slice(how);
        r.ok(&args);
        got.extend(json_lines(&worker.finish_ok()));
    }
    assert_eq!((got[0]["data"].as_str(), got[0]["len"].as_u64()), (Some("line 1\nline 2\n\u{0}"), Some(15)));
    assert_eq!(got[1]["data"].as_str(), Some("hi"));

    // As for `pub`: a line that does not decode is named; --file excludes --data and --format.
    let e = r.fails(&["pool", "dispatch", "--domain", "d", "p", "--format", "hex", "--data", "zz"]);
    assert!(e.contains("--data"), "{e}");
    let out = r.run(&["pool", "dispatch", "--domain", "d", "p", "--file", file, "--data", "x"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn pool_dispatch_errors_are_clear() {
    let r = Root::new();
    // No workers: the pool is created, the job is refused at once.
    let err = r.fails(&["pool", "dispatch", "--domain", "d", "p", "--max-job-size", "8", "--data", "x"]);
    assert!(err.contains("no workers") && err.contains("shmbus pool worker --domain d p"), "{err}");
    assert_eq!(r.wait_info("d", "p", |_| true)["max_job_size"], 8);

    // The only worker busy (stopped holding a job): "all busy", retried, then an error.
    let worker = r.spawn(&["pool", "worker", "--domain", "d", "p"]);
    r.wait_info("d", "p", |v| v["workers_idle"] == 1);
    signal(&worker, libc::SIGSTOP);
    let out = r.run_stdin(&["pool", "dispatch", "--domain", "d", "p", "--timeout-ms", "200"], b"one\ntwo\n");
    assert!(!out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "job 1 -> worker 0\nall busy; retrying for up to 200 ms\n");
    let err = one_error_line(&out);
    assert!(err.contains("busy for 200 ms") && err.contains("1 dispatched"), "{err}");

    // Too large for the pool, and layouts that differ from the existing pool.
    signal(&worker, libc::SIGCONT);
    let err = r.fails(&["pool", "dispatch", "--domain", "d", "p", "--data", "123456789"]);
    assert!(err.contains("9 bytes") && err.contains("max_job_size of 8"), "{err}");
    let err = r.fails(&["pool", "worker", "--domain", "d", "p", "--max-job-size", "16"]);
    assert!(err.contains("max_job_size") && err.contains("16") && err.contains('8'), "{err}");
    // Not a pool, and pub/sub on a pool.
    r.ok(&["pub", "--domain", "d", "t", "--data", "x"]);
    assert!(r.fails(&["pool", "dispatch", "--domain", "d", "t", "--data", "x"]).contains("is a topic, not a pool"));
    assert!(r.fails(&["pub", "--domain", "d", "p", "--data", "x"]).contains("shmbus pool dispatch"));
    assert!(r.fails(&["sub", "--domain", "d", "p"]).contains("shmbus pool worker"));
}

#[test]
fn sub_on_a_queue_with_a_corrupt_head_fails_once_and_in_time() {
    use std::os::unix::fs::FileExt;
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "q", "--kind", "queue", "--capacity", "8", "--data", "kept"]);
    // The head counter overwritten with a position no cell agrees with.
    let f = std::fs::OpenOptions::new().write(true).open(r.channel_file("d", "q")).unwrap();
    let head = shmbus::segment::KIND_OFFSET as u64 + 128;
    f.write_all_at(&12_345u64.to_le_bytes(), head).unwrap();
    // Spawned and watched: a `sub` that loops on the error must fail the test, not hang it.
    let t0 = std::time::Instant::now();
    let mut sub = r.spawn(&["sub", "--domain", "d", "q", "--timeout-ms", "300"]);
    while !sub.exited() {
        assert!(t0.elapsed() < std::time::Duration::from_secs(10), "sub did not return within its timeout");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let out = sub.finish();
    assert!(!out.status.success());
    assert!(out.stderr.len() < 1024, "{} bytes of stderr", out.stderr.len());
    let err = one_error_line(&out);
    assert!(err.contains("corrupt") && err.contains("head"), "{err}");
    // The receive that reported it rebuilt the head from the cells: the message is there.
    assert_eq!(r.ok(&["sub", "--domain", "d", "q", "--count", "1", "--timeout-ms", "5000"]), "kept\n");
    // Far beyond any position: the same, within the timeout.
    f.write_all_at(&u64::MAX.to_le_bytes(), head).unwrap();
    let out = r.run(&["sub", "--domain", "d", "q", "--timeout-ms", "300"]);
    assert!(!out.status.success() && out.stderr.len() < 1024);
    assert!(one_error_line(&out).contains("corrupt"));
    let out = r.run(&["sub", "--domain", "d", "q", "--timeout-ms", "300"]);
    assert!(one_error_line(&out).contains("timed out"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn pool_worker_started_after_a_dispatcher_was_killed_waits_for_the_next_one() {
    let r = Root::new();
    // A dispatcher that holds the pool (its stdin stays open), killed.
    let mut cmd = r.cmd(&["pool", "dispatch", "--domain", "d", "p"]);
    let mut dispatcher = Killed(Some(cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap()));
    r.wait_info("d", "p", |v| v["dispatcher_alive"] == true);
    dispatcher.kill();
    r.wait_info("d", "p", |v| v["dispatcher_alive"] == false);

    // The first worker started after the crash waits; it does not report the dead one.
    let mut worker = r.spawn(&["pool", "worker", "--domain", "d", "p", "--count", "1", "--timeout-ms", "20000"]);
    r.wait_info("d", "p", |v| v["workers_idle"] == 1);
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert!(!worker.exited(), "the worker gave up on a dispatcher it never had");
    // The next dispatcher takes over and the worker serves it.
    let out = r.ok(&["pool", "dispatch", "--domain", "d", "p", "--data", "after the crash", "--timeout-ms", "20000"]);
    assert!(out.contains("-> worker 0"), "{out}");
    let text = worker.finish_ok();
    assert!(text.ends_with(": after the crash\n"), "{text}");
}

#[test]
fn pool_worker_exits_0_when_its_dispatcher_finished_and_1_when_it_died() {
    let r = Root::new();
    // `dispatch --data` sends its one job and detaches: the worker takes the job, then
    // stops with 0 although it asked for 5.
    let worker = r.spawn(&["pool", "worker", "--domain", "d", "p", "--count", "5", "--timeout-ms", "20000"]);
    r.wait_info("d", "p", |v| v["workers_idle"] == 1);
    r.ok(&["pool", "dispatch", "--domain", "d", "p", "--data", "x", "--timeout-ms", "20000"]);
    assert_eq!(worker.finish_ok(), "job 1: x\ndispatcher finished after 1 job(s)\n");

    // Under --json stdout stays jobs only; the last line goes to stderr.
    let worker = r.spawn(&["pool", "worker", "--domain", "d", "p", "--count", "5", "--json", "--timeout-ms", "20000"]);
    r.wait_info("d", "p", |v| v["workers_idle"] == 1);
    r.ok(&["pool", "dispatch", "--domain", "d", "p", "--data", "y", "--timeout-ms", "20000"]);
    let out = worker.finish();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let jobs = json_lines(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["data"], "y");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "dispatcher finished after 1 job(s)\n");

    // A dispatcher SIGKILLed while holding the pool: the worker fails, after its one job.
    let worker = r.spawn(&["pool", "worker", "--domain", "d", "p", "--count", "5", "--timeout-ms", "20000"]);
    r.wait_info("d", "p", |v| v["workers_idle"] == 1);
    let mut cmd = r.cmd(&["pool", "dispatch", "--domain", "d", "p", "--timeout-ms", "20000"]);
    let mut dispatcher = Killed(Some(cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap()));
    dispatcher.child().stdin.as_mut().unwrap().write_all(b"z\n").unwrap();
    // The job is taken (the worker is idle again, waiting for the next) before the kill.
    r.wait_info("d", "p", |v| v["dispatcher_alive"] == true && v["status"]["jobs_dispatched"] == 3);
    r.wait_info("d", "p", |v| v["workers_idle"] == 1);
    dispatcher.kill();
    let out = worker.finish();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "job 3: z\n");
    let err = one_error_line(&out);
    assert!(err.contains("dispatcher of d/p died after 1 job(s)"), "{err}");
}

/// `create` takes the size suffixes `pub` takes, and they mean the same bytes: a channel
/// made by `create --slot-size 4K` is the one `pub --slot-size 4096` expects.
#[test]
fn create_size_flags_take_the_suffixes_pub_takes() {
    let r = Root::new();
    r.ok(&["create", "--domain", "d", "--kind", "topic", "t", "--slot-size", "4K"]);
    assert_eq!(r.json(&["info", "--domain", "d", "t", "--json"])["params"]["slot_size"], 4096);
    r.ok(&["pub", "--domain", "d", "t", "--slot-size", "4096", "--data", "x"]);
    r.ok(&["create", "--domain", "d", "--kind", "queue", "q", "--max-element-size", "2KiB", "--capacity", "8"]);
    assert_eq!(r.json(&["info", "--domain", "d", "q", "--json"])["params"]["max_element_size"], 2048);
    r.ok(&["create", "--domain", "d", "--kind", "pool", "p", "--max-job-size", "1M"]);
    assert_eq!(r.json(&["info", "--domain", "d", "p", "--json"])["max_job_size"], 1 << 20);
    let e = r.fails(&["create", "--domain", "d", "--kind", "topic", "u", "--slot-size", "4KB"]);
    assert!(e.contains("powers of 1024"), "{e}");
}
