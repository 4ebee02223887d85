//! `shmbus journal … --key-file` (built-in XChaCha20-Poly1305 encryption) and retention set
//! by `journal append --retain-cycles/--max-age`, run as real processes against scratch
//! journal directories: round trip, no key, wrong key, rotation, a tampered byte, a key
//! file others can read, and retention applied by appenders and `journal gc`.

mod common;

use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use common::{json_lines, one_error_line, Root};
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
    assert!(e.contains("keeps its retention from creation"), "{e}");
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
