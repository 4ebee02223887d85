//! `shmbus journal … --key-file` (built-in XChaCha20-Poly1305 encryption) and retention set
//! by `journal append --retain-cycles/--max-age`, run as real processes against scratch
//! journal directories: round trip, no key, wrong key, rotation, a tampered byte, a key
//! file others can read, and retention applied by appenders and `journal gc`, and changed
//! on an existing journal by `journal config`.

mod common;

use std::io::Write;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{json_lines, one_error_line, Killed, Root};
use shmbus::journal::format::{entry_crc, CRC_FROM, ENTRY_HEADER, FLAG_KEYED, FLAG_SEALED, ST_COMMITTED};

/// Writes a key file of `(id, key byte)` pairs (each key is that byte 32 times) with `mode`.
fn key_file(r: &Root, name: &str, keys: &[(u32, u8)], mode: u32) -> String {
    let path = r.0.join(name);
    let text: String = keys.iter().map(|(id, b)| format!("{id} {}\n", format!("{b:02x}").repeat(32))).collect();
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path.to_str().unwrap().to_owned()
}

/// `dump --json` data, in order.
fn dumped(r: &Root, args: &[&str]) -> Vec<(u64, String)> {
    json_lines(&r.ok(args))
        .iter()
        .map(|e| (e["index"].as_u64().unwrap(), e["data"].as_str().unwrap().to_owned()))
        .collect()
}

/// Runs a read that must fail: stdout, the `skipped:` lines and the final error line.
fn failing(r: &Root, args: &[&str]) -> (String, Vec<String>, String) {
    let out = r.run(args);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    let mut lines: Vec<String> = err.lines().map(str::to_owned).collect();
    let last = lines.pop().unwrap();
    assert!(last.starts_with("shmbus: "), "{err}");
    (String::from_utf8(out.stdout).unwrap(), lines, last)
}

#[test]
fn encryption_round_trip_across_processes_with_compression() {
    let r = Root::new();
    let j = r.jdir("enc");
    let k = key_file(&r, "k", &[(7, 0x11)], 0o600);
    let long = "abc".repeat(100);
    r.ok(&["journal", "append", "--dir", &j, "--key-file", &k, "--data", "secret one"]);
    r.ok_stdin(&["journal", "append", "--dir", &j, "--key-file", &k, "--compress"], &format!("{long}\nsecret three"));
    assert_eq!(
        dumped(&r, &["journal", "dump", "--dir", &j, "--key-file", &k, "--json"]),
        [(0, "secret one".to_owned()), (1, long.clone()), (2, "secret three".to_owned())]
    );
    // Nothing of the plaintext is in the files (the long one was compressed, then sealed).
    for f in std::fs::read_dir(&j).unwrap() {
        let bytes = std::fs::read(f.unwrap().path()).unwrap();
        for needle in [&b"secret"[..], b"abcabc"] {
            assert!(!bytes.windows(needle.len()).any(|w| w == needle), "plaintext in a journal file");
        }
    }
    // tail with the key reads them too, from another process.
    let out = r.ok(&["journal", "tail", "--dir", &j, "--from", "0", "--count", "3", "--key-file", &k]);
    assert_eq!(out, format!("secret one\n{long}\nsecret three\n"));
}

#[test]
fn without_the_key_or_with_a_wrong_one_reads_fail_clearly() {
    let r = Root::new();
    let j = r.jdir("enc");
    let k = key_file(&r, "k", &[(7, 0x11)], 0o600);
    let wrong = key_file(&r, "wrong", &[(7, 0x22)], 0o600);
    let other = key_file(&r, "other", &[(8, 0x11)], 0o600);
    r.ok(&["journal", "append", "--dir", &j, "--key-file", &k, "--data", "a"]);
    r.ok(&["journal", "append", "--dir", &j, "--key-file", &k, "--data", "b"]);

    let (out, skipped, last) = failing(&r, &["journal", "dump", "--dir", &j]);
    assert_eq!(out, "");
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(
        skipped[0].contains("entry 0 is encrypted with key id 7") && skipped[0].contains("--key-file"),
        "{skipped:?}"
    );
    assert!(last.contains("2 encrypted entries could not be read"), "{last}");

    let (out, skipped, _) = failing(&r, &["journal", "dump", "--dir", &j, "--key-file", &wrong]);
    assert_eq!(out, "", "never garbage data");
    assert!(skipped.iter().all(|l| l.contains("failed authentication")), "{skipped:?}");
    assert!(skipped[1].contains("entry 1 "), "{skipped:?}");

    let (_, skipped, _) = failing(&r, &["journal", "dump", "--dir", &j, "--key-file", &other]);
    assert!(skipped[0].contains("key id 7, which is not in the key file"), "{skipped:?}");
}

#[test]
fn key_rotation_keeps_old_entries_readable() {
    let r = Root::new();
    let j = r.jdir("rot");
    let k1 = key_file(&r, "k1", &[(1, 0x11)], 0o600);
    let k12 = key_file(&r, "k12", &[(1, 0x11), (2, 0x22)], 0o400);
    let k2 = key_file(&r, "k2", &[(2, 0x22)], 0o600);
    r.ok(&["journal", "append", "--dir", &j, "--key-file", &k1, "--data", "old"]);
    r.ok(&["journal", "append", "--dir", &j, "--key-file", &k12, "--data", "new"]);
    let both = dumped(&r, &["journal", "dump", "--dir", &j, "--key-file", &k12, "--json"]);
    assert_eq!(both, [(0, "old".to_owned()), (1, "new".to_owned())]);
    // The new entry was sealed with key 2 (the last line): key 1 alone cannot read it, key 2
    // alone cannot read the old one.
    let (out, skipped, _) = failing(&r, &["journal", "dump", "--dir", &j, "--key-file", &k1]);
    assert_eq!(out, "old\n");
    assert!(skipped.len() == 1 && skipped[0].contains("entry 1 is encrypted with key id 2"), "{skipped:?}");
    let (out, skipped, _) = failing(&r, &["journal", "dump", "--dir", &j, "--key-file", &k2]);
    assert_eq!(out, "new\n");
    assert!(skipped.len() == 1 && skipped[0].contains("entry 0 is encrypted with key id 1"), "{skipped:?}");
}

/// Offset in `data` of the header of the sealed entry with in-cycle index `idx` sealed with
/// key `key_id`, found by its bytes.
fn find_entry(data: &[u8], key_id: u32, idx: u32) -> usize {
    let id = key_id.to_le_bytes();
    (ENTRY_HEADER..data.len() - 4)
        .filter(|&p| data[p..p + 4] == id)
        .map(|p| p - ENTRY_HEADER)
        .find(|&h| {
            data[h] as u64 == ST_COMMITTED
                && data[h + 1] as u64 & (FLAG_SEALED | FLAG_KEYED) == FLAG_SEALED | FLAG_KEYED
                && data[h + 20..h + 24] == idx.to_le_bytes()
        })
        .expect("the entry's bytes are in the cycle file")
}

#[test]
fn a_tampered_byte_fails_authentication_at_that_index() {
    let r = Root::new();
    let j = r.jdir("tamper");
    let k = key_file(&r, "k", &[(0xDEAD_BEEF, 0x33)], 0o600);
    r.ok_stdin(&["journal", "append", "--dir", &j, "--key-file", &k], "zero\none\ntwo");
    let path = Path::new(&j).join("000000000000.sbjd");
    let mut data = std::fs::read(&path).unwrap();
    let h = find_entry(&data, 0xDEAD_BEEF, 1);
    let len = u32::from_le_bytes(data[h + 12..h + 16].try_into().unwrap()) as usize;
    // Flip a ciphertext byte and fix the entry's CRC, as someone changing the file on
    // purpose would: only authentication can catch it.
    let at = h + ENTRY_HEADER + 4 + 24 + 1;
    data[at] ^= 0x01;
    let crc = entry_crc(data[h + 1] as u64, &data[h + CRC_FROM..h + ENTRY_HEADER + len]);
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&data[at..at + 1], at as u64).unwrap();
    f.write_all_at(&crc.to_le_bytes(), h as u64 + 8).unwrap();
    drop(f);
    let (out, skipped, last) = failing(&r, &["journal", "dump", "--dir", &j, "--key-file", &k]);
    assert_eq!(out, "zero\ntwo\n");
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(skipped[0].contains("journal entry 1 failed authentication"), "{skipped:?}");
    assert!(last.contains("1 encrypted entry could not be read"), "{last}");
}

#[test]
fn key_files_are_checked_strictly() {
    let r = Root::new();
    let j = r.jdir("keys");
    let open = key_file(&r, "open", &[(1, 0x11)], 0o644);
    let e = r.fails(&["journal", "append", "--dir", &j, "--key-file", &open, "--data", "x"]);
    assert!(e.contains("readable or writable by group or others") && e.contains("chmod 600"), "{e}");
    assert!(!Path::new(&j).exists(), "nothing appended with a refused key file");
    let bad = r.0.join("bad");
    std::fs::write(&bad, "1 0011\n").unwrap();
    std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o600)).unwrap();
    let e = r.fails(&["journal", "dump", "--dir", &j, "--key-file", bad.to_str().unwrap()]);
    assert!(e.contains("line 1") && e.contains("64 hex digits"), "{e}");
    let missing = r.0.join("missing");
    let out = r.run(&["journal", "tail", "--dir", &j, "--key-file", missing.to_str().unwrap()]);
    assert!(one_error_line(&out).contains("cannot read the key file"));
}

#[test]
fn a_key_file_of_another_user_or_not_a_file_is_refused() {
    let r = Root::new();
    let j = r.jdir("keys");
    // A FIFO: a clear error, not a hang.
    let fifo = r.0.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let e = r.fails(&["journal", "append", "--dir", &j, "--key-file", fifo.to_str().unwrap(), "--data", "x"]);
    assert!(e.contains("not a regular file"), "{e}");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: giving a key file to another uid needs root; run the tests as root to cover it");
        return;
    }
    let k = key_file(&r, "k", &[(1, 0x11)], 0o600);
    std::os::unix::fs::chown(&k, Some(4242), Some(4242)).unwrap();
    let e = r.fails(&["journal", "append", "--dir", &j, "--key-file", &k, "--data", "x"]);
    assert!(e.contains("uid 4242") && e.contains("does not trust") && e.contains("SHMBUS_TRUST_UIDS"), "{e}");
    let out = r
        .cmd(&["journal", "append", "--dir", &j, "--key-file", &k, "--data", "x"])
        .env("SHMBUS_TRUST_UIDS", "4242")
        .output()
        .unwrap();
    assert!(out.status.success(), "trusted: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn retention_set_at_append_is_applied_by_appenders_and_gc() {
    let r = Root::new();
    let j = r.jdir("ret");
    let info_cycles = |r: &Root| -> Vec<u64> {
        let v = r.json(&["journal", "info", "--dir", &j, "--json"]);
        v["cycles"].as_array().unwrap().iter().map(|c| c["cycle"].as_u64().unwrap()).collect()
    };
    // Cycles of one second; keep entries of cycles that ended at most 3 s ago.
    r.ok(&["journal", "append", "--dir", &j, "--roll", "1s", "--max-age", "3s", "--data", "a"]);
    std::thread::sleep(Duration::from_millis(1100));
    r.ok(&["journal", "append", "--dir", &j, "--data", "b"]);
    // Two cycles (three if b's appender crossed a second boundary between opening and
    // appending: an empty one between).
    let v = r.json(&["journal", "info", "--dir", &j, "--json"]);
    assert_eq!(v["retention"], serde_json::json!({"max_cycles": null, "max_age_secs": 3}), "{v}");
    let text = r.ok(&["journal", "info", "--dir", &j]);
    assert!(text.contains("retention     no cycle limit, a max age of 3s"), "{text}");
    let before = info_cycles(&r);
    assert!((2..=3).contains(&before.len()), "{before:?}");
    // A different retention on an existing journal is refused (the same one is accepted:
    // the --retain-cycles appends below).
    let e = r.fails(&["journal", "append", "--dir", &j, "--max-age", "7d", "--data", "c"]);
    assert!(e.contains("`append` does not change it: use `shmbus journal config"), "{e}");
    // gc never removes the newest cycle (being written); the older one is now past 3 s.
    std::thread::sleep(Duration::from_millis(4000));
    let gc = r.json(&["journal", "gc", "--dir", &j, "--json"]);
    let removed: Vec<u64> = gc["removed_cycles"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).collect();
    let (newest, older) = before.split_last().unwrap();
    assert_eq!(removed, older, "gc applies the stored max age to every cycle but the one being written");
    assert_eq!(info_cycles(&r), [*newest]);
    assert_eq!(r.ok(&["journal", "dump", "--dir", &j]), "b\n");

    // --retain-cycles: an appender rolling to a new cycle applies it.
    let j2 = r.jdir("ret2");
    for (i, d) in ["x", "y", "z"].iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(1100));
        }
        r.ok(&["journal", "append", "--dir", &j2, "--roll", "1s", "--retain-cycles", "2", "--data", d]);
    }
    let v = r.json(&["journal", "info", "--dir", &j2, "--json"]);
    assert_eq!(v["cycles"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["retention"], serde_json::json!({"max_cycles": 2, "max_age_secs": null}), "{v}");
    // y too, unless z's appender crossed a second boundary between opening and appending
    // (an empty cycle counted among the two).
    let text = r.ok(&["journal", "dump", "--dir", &j2]);
    assert!(text.ends_with("z\n") && !text.contains('x'), "{text}; {v}");

    // Bad values are usage errors.
    for bad in [["--max-age", "0s"], ["--max-age", "ten"], ["--max-age", "5w"], ["--retain-cycles", "0"]] {
        let out = r.run(&["journal", "append", "--dir", &j2, bad[0], bad[1], "--data", "q"]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
}

/// `journal config` changes the retention of an existing journal: `journal info` shows it,
/// `journal gc` and an appender already running in another process (rolling to a new
/// cycle) apply it.
#[test]
fn journal_config_changes_retention_of_an_existing_journal() {
    let r = Root::new();
    let j = r.jdir("cfg");
    let info_cycles = |r: &Root| -> usize {
        let v = r.json(&["journal", "info", "--dir", &j, "--json", "--rate-window", "0"]);
        v["cycles"].as_array().unwrap().len()
    };
    r.ok(&["journal", "append", "--dir", &j, "--roll", "1s", "--data", "a"]);
    std::thread::sleep(Duration::from_millis(1100));
    r.ok(&["journal", "append", "--dir", &j, "--data", "b"]);
    assert!(info_cycles(&r) >= 2);
    // No flag: prints the settings.
    assert_eq!(r.ok(&["journal", "config", "--dir", &j]), "retention     no cycle limit, no age limit\n");
    let none = serde_json::json!({"max_cycles": null, "max_age_secs": null});
    assert_eq!(r.json(&["journal", "config", "--dir", &j, "--json"]), none);

    // Set, in one process; info (another) shows it, gc (a third) applies it.
    let one = serde_json::json!({"max_cycles": 1, "max_age_secs": null});
    assert_eq!(r.json(&["journal", "config", "--dir", &j, "--retain-cycles", "1", "--json"]), one);
    let v = r.json(&["journal", "info", "--dir", &j, "--json", "--rate-window", "0"]);
    assert_eq!(v["retention"], one, "{v}");
    let text = r.ok(&["journal", "info", "--dir", &j, "--rate-window", "0"]);
    assert!(text.contains("retention     at most 1 cycle(s), no age limit"), "{text}");
    let gc = r.json(&["journal", "gc", "--dir", &j, "--json"]);
    assert!(!gc["removed_cycles"].as_array().unwrap().is_empty(), "{gc}");
    assert_eq!(info_cycles(&r), 1);
    assert_eq!(r.ok(&["journal", "dump", "--dir", &j]), "b\n");
    // `append` with the retention in force is accepted now.
    r.ok(&["journal", "append", "--dir", &j, "--retain-cycles", "1", "--data", "c"]);

    // One flag changes one limit, the other stays; `unlimited` lifts one.
    let both = serde_json::json!({"max_cycles": 1, "max_age_secs": 604800});
    assert_eq!(r.json(&["journal", "config", "--dir", &j, "--max-age", "7d", "--json"]), both);
    assert_eq!(
        r.json(&["journal", "config", "--dir", &j, "--retain-cycles", "unlimited", "--max-age", "unlimited", "--json"]),
        none
    );

    // An appender running in another process (reading stdin) applies a retention set
    // after it started when it rolls to a new cycle.
    let start =
        r.json(&["journal", "info", "--dir", &j, "--json", "--rate-window", "0"])["next_index"].as_u64().unwrap();
    let mut app = {
        let mut c = r.cmd(&["journal", "append", "--dir", &j]);
        c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        Killed(Some(c.spawn().unwrap()))
    };
    let mut w = app.child().stdin.take().unwrap();
    writeln!(w, "d").unwrap();
    r.wait_json(&["journal", "info", "--dir", &j, "--json", "--rate-window", "0"], |v| v["next_index"] == start + 1);
    r.ok(&["journal", "config", "--dir", &j, "--retain-cycles", "2"]);
    for line in ["e", "f", "g"] {
        std::thread::sleep(Duration::from_millis(1100));
        writeln!(w, "{line}").unwrap();
    }
    // Each of those rolled (a cycle per second), so the appender applied "keep 2".
    let v = r
        .wait_json(&["journal", "info", "--dir", &j, "--json", "--rate-window", "0"], |v| v["next_index"] == start + 4);
    drop(w);
    assert!(app.finish().status.success());
    assert_eq!(v["cycles"].as_array().unwrap().len(), 2, "{v}");
    assert!(r.ok(&["journal", "dump", "--dir", &j]).ends_with("g\n"));

    // Bad values are usage errors; a missing journal is an error naming it.
    for bad in [["--max-age", "0s"], ["--retain-cycles", "0"], ["--retain-cycles", "all"]] {
        let out = r.run(&["journal", "config", "--dir", &j, bad[0], bad[1]]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
    let e = r.fails(&["journal", "config", "--dir", &r.jdir("none")]);
    assert!(e.contains("no such directory"), "{e}");
}

/// `journal append --format hex|base64` decodes each line (or `--data`) before appending;
/// `--file` appends a whole file as one entry; both round-trip byte for byte.
#[test]
fn append_takes_encoded_lines_and_whole_files() {
    let r = Root::new();
    let j = r.jdir("fmt");
    let bytes: Vec<u8> = (0..=255u8).chain([b'\n', 0]).collect();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    r.ok(&["journal", "append", "--dir", &j, "--format", "hex", "--data", &hex]);
    let b64 = r.ok_stdin(&["journal", "dump", "--dir", &j, "--format", "base64"], "");
    r.ok_stdin(&["journal", "append", "--dir", &j, "--format", "base64", "--json"], &format!("{b64}aGk=\n"));
    let file = r.0.join("payload.bin");
    std::fs::write(&file, &bytes).unwrap();
    let out = r.ok(&["journal", "append", "--dir", &j, "--file", file.to_str().unwrap(), "--json"]);
    assert_eq!(json_lines(&out), [serde_json::json!({"index": 3, "len": bytes.len()})]);
    // Four entries: the bytes, the bytes again (base64), "hi", the file.
    let dumped = r.ok(&["journal", "dump", "--dir", &j, "--format", "hex"]);
    assert_eq!(dumped, format!("{hex}\n{hex}\n6869\n{hex}\n"));
    let raw = r.run(&["journal", "dump", "--dir", &j, "--from", "3", "--format", "raw"]);
    assert_eq!(raw.stdout, bytes);

    // Bad encodings name the line; a file larger than an entry is refused; --file with
    // --data or --format is a usage error.
    let e = r.fails(&["journal", "append", "--dir", &j, "--format", "hex", "--data", "zz"]);
    assert!(e.contains("--data") && e.contains("not a hex byte"), "{e}");
    let out = r.run_stdin(&["journal", "append", "--dir", &j, "--format", "base64"], b"aGk=\n$$$\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(one_error_line(&out).contains("stdin line 2"), "{}", one_error_line(&out));
    let big = r.0.join("big.bin");
    std::fs::write(&big, vec![1u8; (16 << 20) + 1]).unwrap();
    let e = r.fails(&["journal", "append", "--dir", &j, "--file", big.to_str().unwrap()]);
    assert!(e.contains("is longer than"), "{e}");
    let f = file.to_str().unwrap();
    for bad in [&["--data", "x", "--file", f][..], &["--format", "hex", "--file", f][..]] {
        let mut args = vec!["journal", "append", "--dir", &j];
        args.extend_from_slice(bad);
        assert_eq!(r.run(&args).status.code(), Some(2), "{bad:?}");
    }
    let missing = r.0.join("nope");
    let e = r.fails(&["journal", "append", "--dir", &j, "--file", missing.to_str().unwrap()]);
    assert!(e.contains("nope"), "{e}");
    // Nothing was appended by the failures (the first line of the bad stdin was).
    assert_eq!(r.json(&["journal", "info", "--dir", &j, "--json", "--rate-window", "0"])["entries"], 5);
}

/// `record --key-file` seals what it records; `replay --key-file` opens it. Without the key
/// the recording cannot be read: `replay` skips and says so, exit 1, nothing published.
#[test]
fn record_and_replay_with_a_key_file() {
    let r = Root::new();
    let j = r.jdir("recenc");
    let k = key_file(&r, "k", &[(3, 0x42)], 0o600);
    r.ok(&["pub", "--domain", "src", "t", "--slot-size", "128", "--data", "before"]);
    let rec = r.spawn(&["record", "--domain", "src", "t", "--dir", &j, "--count", "3", "--key-file", &k, "--json"]);
    r.wait_json(&["info", "--domain", "src", "t", "--json"], |v| v["subscribers"] == 1);
    r.ok_stdin(&["pub", "--domain", "src", "t"], "top secret 1\ntop secret 2\ntop secret 3\n");
    let summary: serde_json::Value = serde_json::from_str(&rec.finish_ok()).unwrap();
    assert_eq!(summary["messages"], 3);
    // Sealed on disk: the plaintext is nowhere in the files.
    for f in std::fs::read_dir(&j).unwrap() {
        let data = std::fs::read(f.unwrap().path()).unwrap();
        assert!(!data.windows(10).any(|w| w == b"top secret"), "plaintext on disk");
    }
    // With the key: every message, in order.
    let out: serde_json::Value = serde_json::from_str(&r.ok(&[
        "replay",
        "--dir",
        &j,
        "--domain",
        "dst",
        "--speed",
        "max",
        "--key-file",
        &k,
        "--json",
    ]))
    .unwrap();
    assert_eq!(out, serde_json::json!({"messages": 3, "topics": {"t": 3}}));
    let got = r.ok(&["sub", "--domain", "dst", "t", "--from", "1", "--count", "3", "--timeout-ms", "10000"]);
    assert_eq!(got, "top secret 1\ntop secret 2\ntop secret 3\n");
    // Without it, or with another key: skipped, said, exit 1, nothing published.
    let other = key_file(&r, "other", &[(3, 0x43)], 0o600);
    for extra in [&[][..], &["--key-file", other.as_str()][..]] {
        let mut args = vec!["replay", "--dir", &j, "--domain", "none", "--speed", "max", "--json"];
        args.extend_from_slice(extra);
        let (stdout, skipped, last) = failing(&r, &args);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&stdout).unwrap()["messages"], 0);
        // The topic entry (its schema) is sealed too: four entries.
        assert_eq!(skipped.len(), 4, "{skipped:?}");
        assert!(skipped.iter().all(|l| l.starts_with("skipped: ")), "{skipped:?}");
        assert!(last.contains("4 encrypted entries of the recording could not be read"), "{last}");
    }
    assert!(r.fails(&["ls", "--domain", "none", "--json"]).contains("no domain none"), "nothing was created");
    // A key file others may read is refused before anything is recorded.
    let loose = key_file(&r, "loose", &[(1, 1)], 0o644);
    let e = r.fails(&["record", "--domain", "src", "t", "--dir", &r.jdir("r2"), "--count", "1", "--key-file", &loose]);
    assert!(e.contains("--key-file"), "{e}");
    assert!(!Path::new(&r.jdir("r2")).exists(), "nothing recorded");
}

/// `journal tier --zstd`: old cycles go to the archive compressed; `dump` (another process)
/// reads lz4-compressed, encrypted entries back through them; `info` counts the compressed
/// bytes; a damaged `.zst` is reported as damage, never garbage.
#[test]
fn tier_with_zstd_then_every_reader_reads_through_it() {
    let r = Root::new();
    let j = r.jdir("zst");
    let k = key_file(&r, "k", &[(2, 0x77)], 0o600);
    let long = |c: char| c.to_string().repeat(300);
    r.ok(&["journal", "append", "--dir", &j, "--roll", "1s", "--compress", "--key-file", &k, "--data", &long('a')]);
    for c in ['b', 'c'] {
        std::thread::sleep(Duration::from_millis(1100));
        r.ok(&["journal", "append", "--dir", &j, "--compress", "--key-file", &k, "--data", &long(c)]);
    }
    let cycles =
        r.json(&["journal", "info", "--dir", &j, "--json", "--rate-window", "0"])["cycles"].as_array().unwrap().len();
    assert!(cycles >= 3);
    // A level without --zstd, or out of range: usage errors.
    for bad in [&["--zstd-level", "5"][..], &["--zstd", "--zstd-level", "23"][..]] {
        let mut args = vec!["journal", "tier", "--dir", &j, "--archive", "cold"];
        args.extend_from_slice(bad);
        assert_eq!(r.run(&args).status.code(), Some(2), "{bad:?}");
    }
    let rep = r.json(&["journal", "tier", "--dir", &j, "--archive", "cold", "--zstd", "--json"]);
    assert_eq!(rep["moved_cycles"].as_array().unwrap().len(), cycles - 1, "{rep}");
    let cold = Path::new(&j).join("cold");
    let files: Vec<String> =
        std::fs::read_dir(&cold).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(files.len(), 2 * (cycles - 1), "{files:?}");
    assert!(files.iter().all(|f| f.ends_with(".zst")), "{files:?}");
    let want = [(0, long('a')), (1, long('b')), (2, long('c'))];
    assert_eq!(dumped(&r, &["journal", "dump", "--dir", &j, "--key-file", &k, "--json"]), want);
    let info = r.json(&["journal", "info", "--dir", &j, "--json", "--rate-window", "0"]);
    let zst: u64 = files.iter().map(|f| std::fs::metadata(cold.join(f)).unwrap().len()).sum();
    assert_eq!(info["archive_file_bytes"], zst, "{info}");
    assert_eq!(info["unreadable_cycles"], serde_json::json!([]), "{info}");

    // One changed byte in the first archived cycle's data: that cycle is damage, the rest
    // is read.
    let first = files.iter().filter(|f| f.ends_with(".sbjd.zst")).min().unwrap();
    let path = cold.join(first);
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let (stdout, lines, last) = failing(&r, &["journal", "dump", "--dir", &j, "--key-file", &k]);
    assert_eq!(stdout, format!("{}\n{}\n", long('b'), long('c')));
    assert!(lines.iter().any(|l| l.starts_with("damaged: ")), "{lines:?}");
    assert!(last.contains("damaged range(s) were skipped"), "{last}");
}

#[test]
fn a_key_file_over_one_mib_is_refused_not_cut() {
    let r = Root::new();
    let j = r.jdir("keys");
    // Key 1, comment lines up to exactly 1 MiB, then the rotation key 2 (the one that must
    // seal new entries): read up to 1 MiB, the file would look valid with key 1 alone.
    let mut text = format!("1 {}\n", "11".repeat(32));
    while text.len() < 1 << 20 {
        let line = ((1 << 20) - text.len()).min(100);
        text.push_str(&"#".repeat(line - 1));
        text.push('\n');
    }
    text.push_str(&format!("2 {}\n", "22".repeat(32)));
    let path = r.0.join("big");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let k = path.to_str().unwrap();
    for args in [
        &["journal", "append", "--dir", &j, "--key-file", k, "--data", "x"][..],
        &["journal", "dump", "--dir", &j, "--key-file", k],
    ] {
        let e = r.fails(args);
        assert!(e.contains(k) && e.contains("1048576 bytes") && e.contains("larger than"), "{args:?}: {e}");
    }
    assert!(!Path::new(&j).exists(), "nothing appended with a refused key file");
}

/// `journal export --key-file` decrypts what it exports; without the key the sealed entries
/// are skipped and counted, never written as ciphertext.
#[test]
fn export_to_mcap_decrypts_with_the_key_and_skips_without() {
    let r = Root::new();
    let j = r.jdir("enc");
    let k = key_file(&r, "k", &[(3, 0x42)], 0o600);
    r.ok_stdin(&["journal", "append", "--dir", &j, "--key-file", &k], "secret one\nsecret two\n");
    let out = r.0.join("x.mcap");
    let o = out.to_str().unwrap();
    let export = |extra: &[&str]| {
        let mut args = vec!["journal", "export", "--dir", &j, "--out", o, "--json", "--compression", "none"];
        args.extend_from_slice(extra);
        let v = json_lines(&r.ok(&args));
        let plain = std::fs::read(&out).unwrap().windows(10).any(|w| w == b"secret one");
        (v[0]["messages"].as_u64().unwrap(), v[0]["skipped"].as_u64().unwrap(), plain)
    };
    assert_eq!(export(&["--key-file", &k]), (2, 0, true));
    assert_eq!(r.json(&["info", "--file", o, "--json"])["messages"], 2);
    assert_eq!(export(&[]), (0, 2, false));
}
