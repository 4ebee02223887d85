//! The command line itself: "did you mean" tips, shell completions, the manual page, what
//! the help shows, units in sizes, durations and times, and binary payloads.

mod common;

use common::{one_error_line, Root};

#[test]
fn a_misspelled_verb_or_flag_gets_a_tip_and_exit_2() {
    let r = Root::new();
    let out = r.run(&["lss"]);
    assert_eq!(out.status.code(), Some(2));
    let line = one_error_line(&out);
    assert!(line.contains("unrecognized subcommand 'lss'"), "{line}");
    assert!(line.contains("tip:") && line.contains("'ls'"), "{line}");

    let out = r.run(&["pub", "--domain", "d", "t", "--dta", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let line = one_error_line(&out);
    assert!(line.contains("tip:") && line.contains("'--data'"), "{line}");
}

#[test]
fn completions_name_the_verbs_in_every_shell() {
    let r = Root::new();
    // Each shell's script registers `shmbus` to be asked on every TAB.
    let bash = r.ok(&["completions", "bash"]);
    assert!(bash.contains("complete ") && bash.contains("_clap_complete_shmbus"), "not a bash completion script");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let script = r.ok(&["completions", shell]);
        assert!(script.contains("COMPLETE") && script.contains("shmbus"), "{shell}: {script}");
    }
    // What the scripts get when they ask, as bash asks (the words after `--`, the index of
    // the one being completed).
    let ask = |index: &str, words: &[&str]| {
        let out = r
            .cmd(&[&["--"][..], words].concat())
            .env("COMPLETE", "bash")
            .env("_CLAP_COMPLETE_INDEX", index)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect::<Vec<_>>()
    };
    let verbs = ask("1", &["shmbus", ""]);
    for verb in ["ls", "info", "pub", "sub", "pool", "journal", "record", "replay", "completions"] {
        assert!(verbs.iter().any(|v| v == verb), "no {verb} in {verbs:?}");
    }
    assert!(ask("2", &["shmbus", "journal", ""]).iter().any(|v| v == "append"));
    assert!(ask("2", &["shmbus", "pool", ""]).iter().any(|v| v == "dispatch"));
    // The hidden internal verb of `shmbus demo` is not offered, while the flags of visible
    // verbs, the global --root included, are.
    assert!(!verbs.iter().any(|v| v.contains("role")), "{verbs:?}");
    let flags = ask("2", &["shmbus", "clean", "--"]);
    assert!(flags.iter().any(|f| f == "--older-than") && flags.iter().any(|f| f == "--root"), "{flags:?}");
    let out = r.run(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(one_error_line(&out).contains("possible values"));
}

#[test]
fn man_prints_a_roff_page() {
    let r = Root::new();
    let man = r.ok(&["man"]);
    // clap_mangen starts with a roff preamble (quote macros), then the title line.
    let th = man.lines().find(|l| l.starts_with(".TH")).expect("no .TH line");
    assert!(th.starts_with(".TH shmbus 1"), "{th}");
    assert!(man.lines().take_while(|l| !l.starts_with(".TH")).all(|l| l.starts_with('.')), "not roff before .TH");
    assert!(man.contains(".SH NAME") && man.contains("journal"), "{man}");
}

#[test]
fn journal_help_does_not_show_root_but_the_others_do() {
    let r = Root::new();
    for verb in [
        &["journal"][..],
        &["journal", "dump"],
        &["journal", "tail"],
        &["journal", "append"],
        &["journal", "gc"],
        &["journal", "config"],
    ] {
        let help = r.ok(&[verb, &["--help"]].concat());
        assert!(!help.contains("--root"), "shmbus {verb:?} --help shows --root:\n{help}");
        assert!(help.contains("--") && help.contains("Usage"), "{help}");
    }
    assert!(r.ok(&["ls", "--help"]).contains("--root"));
    assert!(r.ok(&["--help"]).contains("--root"));
    // Still accepted there (scripts that pass it everywhere keep working).
    let j = r.jdir("j");
    r.ok(&["journal", "append", "--root", r.0.to_str().unwrap(), "--dir", &j, "--data", "x"]);
    assert_eq!(r.ok(&["journal", "dump", "--dir", &j, "--root", "/nonexistent"]), "x\n");
}

#[test]
fn help_texts_name_no_project_history() {
    let r = Root::new();
    let verbs: &[&[&str]] = &[
        &[],
        &["ls"],
        &["info"],
        &["pub"],
        &["sub"],
        &["pool", "dispatch"],
        &["pool", "worker"],
        &["clean"],
        &["demo"],
        &["journal", "append"],
        &["journal", "dump"],
        &["journal", "tail"],
        &["journal", "info"],
        &["journal", "gc"],
        &["journal", "config"],
        &["journal", "tier"],
        &["record"],
        &["replay"],
        &["hz"],
        &["top"],
        &["export"],
        &["bridge"],
    ];
    for verb in verbs {
        let help = r.ok(&[verb, &["--help"][..]].concat()).to_lowercase();
        for word in ["seed", "babus", "issue"] {
            assert!(!help.contains(word), "shmbus {verb:?} --help says {word:?}:\n{help}");
        }
    }
}

#[test]
fn sizes_take_binary_units() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "t", "--slot-size", "2KiB", "--history", "4", "--data", "x"]);
    assert_eq!(r.json(&["info", "--domain", "d", "t", "--json"])["params"]["slot_size"], 2048);
    r.ok(&["pub", "--domain", "d", "s", "--capacity", "64KiB", "--data", "x"]);
    let listed = r.json(&["ls", "--domain", "d", "--json"]);
    let stream = listed.as_array().unwrap().iter().find(|c| c["name"] == "s").unwrap().clone();
    assert_eq!(stream["capacity"], 65536, "{stream}");
    // The same size in another spelling matches the existing topic.
    r.ok(&["pub", "--domain", "d", "t", "--slot-size", "2048", "--data", "y"]);
    for bad in ["64KB", "1.5M", "lots"] {
        let out = r.run(&["pub", "--domain", "d", "t", "--slot-size", bad, "--data", "x"]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(one_error_line(&out).contains(bad), "{bad}");
    }
}

#[test]
fn durations_take_units_and_bare_numbers_keep_their_unit() {
    let r = Root::new();
    r.ok(&["pub", "--domain", "d", "t", "--data", "x"]);
    // A bare number is milliseconds as before; a unit says what it is.
    for timeout in ["150", "150ms", "0.15s"] {
        let out = r.run(&["sub", "--domain", "d", "t", "--count", "1", "--timeout-ms", timeout]);
        assert_eq!(out.status.code(), Some(1), "{timeout}");
        assert!(one_error_line(&out).contains("150 ms"), "{timeout}: {}", one_error_line(&out));
    }
    let out = r.run(&["sub", "--domain", "d", "t", "--timeout-ms", "10 parsecs"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(one_error_line(&out).contains("not a duration"));
    let j = r.jdir("j");
    r.ok(&["journal", "append", "--dir", &j, "--data", "x"]);
    r.ok(&["journal", "gc", "--dir", &j, "--max-age-secs", "7d"]);
}

/// `ns` since the epoch as RFC 3339 in UTC with nanoseconds.
fn rfc3339(ns: u64) -> String {
    let (secs, frac) = (ns / 1_000_000_000, ns % 1_000_000_000);
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // H. Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{frac:09}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

#[test]
fn from_ts_takes_rfc3339_and_relative_times() {
    let r = Root::new();
    let j = r.jdir("j");
    for i in 0..3 {
        r.ok(&["journal", "append", "--dir", &j, "--data", &format!("e{i}")]);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let entries = common::json_lines(&r.ok(&["journal", "dump", "--dir", &j, "--json"]));
    let ts: Vec<u64> = entries.iter().map(|e| e["ts_real_ns"].as_u64().unwrap()).collect();
    assert!(ts[0] < ts[1] && ts[1] < ts[2], "{ts:?}");
    let dump = |from: &str| r.ok(&["journal", "dump", "--dir", &j, "--from-ts", from]);
    // The second entry's exact time, in nanoseconds and as RFC 3339 (UTC and with an offset).
    assert_eq!(dump(&ts[1].to_string()), "e1\ne2\n");
    let utc = rfc3339(ts[1]);
    assert_eq!(dump(&utc), "e1\ne2\n", "{utc}");
    let plus_two = rfc3339(ts[1] + 2 * 3_600_000_000_000).replace('Z', "+02:00");
    assert_eq!(dump(&plus_two), "e1\ne2\n", "{plus_two}");
    // One nanosecond later: the third only.
    assert_eq!(dump(&rfc3339(ts[1] + 1)), "e2\n");
    // Relative: an hour ago is before all of them; the future, none.
    assert_eq!(dump("-1h"), "e0\ne1\ne2\n");
    assert_eq!(dump("2500-01-01T00:00:00Z"), "");
    let out = r.run(&["journal", "dump", "--dir", &j, "--from-ts", "yesterday"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(one_error_line(&out).contains("RFC 3339"));
}

/// Deterministic bytes that cover newlines, CR, NUL and 0xFF, of lengths 0..=`max`.
fn binary_messages(n: usize, max: usize) -> Vec<Vec<u8>> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|i| {
            let len = if i == 3 { 0 } else { next() as usize % (max + 1) };
            let mut m: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            m.extend_from_slice(b"\n\xff\r\x00");
            let by = i % m.len();
            m.rotate_left(by);
            m
        })
        .collect()
}

fn b64(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn unb64(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text).unwrap()
}

#[test]
fn binary_messages_round_trip_through_base64_and_hex() {
    let r = Root::new();
    let messages = binary_messages(20, 300);
    assert!(messages.iter().any(|m| m.contains(&b'\n')) && messages.iter().any(|m| m.contains(&0xff)));
    r.ok(&["pub", "--domain", "d", "t", "--slot-size", "512", "--history", "64", "--data", "first"]);
    let input: String = messages.iter().map(|m| b64(m) + "\n").collect();
    let out = r.run_stdin(&["pub", "--domain", "d", "t", "--format", "base64"], input.as_bytes());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sub = |format: &str| {
        r.ok(&["sub", "--domain", "d", "t", "--from", "2", "--count", "20", "--timeout-ms", "5s", "--format", format])
    };
    let got: Vec<Vec<u8>> = sub("base64").lines().map(unb64).collect();
    assert_eq!(got, messages);
    // Hex prints the same bytes, one line each; and a hex stdin publishes them again.
    let hex = sub("hex");
    let out = r.run_stdin(&["pub", "--domain", "d", "t", "--format", "hex"], hex.as_bytes());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let again = r.ok(&[
        "sub",
        "--domain",
        "d",
        "t",
        "--from",
        "22",
        "--count",
        "20",
        "--timeout-ms",
        "5s",
        "--format",
        "base64",
    ]);
    assert_eq!(again.lines().map(unb64).collect::<Vec<_>>(), messages);
    // Raw: the bytes of every message, back to back.
    let raw =
        r.run(&["sub", "--domain", "d", "t", "--from", "2", "--count", "20", "--timeout-ms", "5s", "--format", "raw"]);
    assert_eq!(raw.stdout, messages.concat());
    // JSON of a message that is not UTF-8 carries it whole, in base64.
    let lines = common::json_lines(&r.ok(&["sub", "--domain", "d", "t", "--from", "1", "--count", "3", "--json"]));
    assert_eq!(lines[0]["data"], "first");
    for (line, m) in lines[1..].iter().zip(&messages) {
        assert_eq!(line.as_object().unwrap().len(), 4, "{line}");
        assert_eq!(unb64(line["data_base64"].as_str().unwrap()), *m);
        assert_eq!(line["len"], m.len());
    }
    // Bad encodings: one line naming the input line, nothing sent from it on.
    let out = r.run_stdin(&["pub", "--domain", "d", "t", "--format", "base64"], b"aGk=\nnot base64!\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(one_error_line(&out).contains("stdin line 2: not base64"), "{}", one_error_line(&out));
    let out = r.run(&["pub", "--domain", "d", "t", "--format", "hex", "--data", "abc"]);
    assert!(one_error_line(&out).contains("--data: 3 hex digits"), "{}", one_error_line(&out));
}

#[test]
fn pub_file_sends_the_whole_file_as_one_message() {
    let r = Root::new();
    let file = r.0.join("payload.bin");
    let content: Vec<u8> = binary_messages(8, 400).concat();
    std::fs::write(&file, &content).unwrap();
    let f = file.to_str().unwrap();
    // A stream and a queue: `sub` prints the one message, in JSON as base64.
    r.ok(&["pub", "--domain", "d", "s", "--capacity", "64K", "--file", f]);
    let v: serde_json::Value =
        serde_json::from_str(&r.ok(&["sub", "--domain", "d", "s", "--count", "1", "--json", "--timeout-ms", "5s"]))
            .unwrap();
    assert_eq!(unb64(v["data_base64"].as_str().unwrap()), content);
    assert!(v.get("data").is_none(), "{v}");
    r.ok(&["pub", "--domain", "d", "q", "--kind", "queue", "--max-element-size", "4K", "--file", f]);
    let raw = r.run(&["sub", "--domain", "d", "q", "--count", "1", "--format", "raw", "--timeout-ms", "5s"]);
    assert_eq!(raw.stdout, content);
    // Larger than the channel's message: one line, nothing sent.
    let line = r.fails(&[
        "pub",
        "--domain",
        "d",
        "q",
        "--max-element-size",
        "4K",
        "--kind",
        "queue",
        "--file",
        f,
        "--format",
        "hex",
    ]);
    assert!(line.contains("cannot be used with") || line.contains("--format"), "{line}");
    std::fs::write(&file, vec![7u8; 5000]).unwrap();
    let line = r.fails(&["pub", "--domain", "d", "q", "--file", f]);
    assert!(line.contains("longer than 4096 bytes"), "{line}");
    let line = r.fails(&["pub", "--domain", "d", "q", "--file", "/nonexistent/x"]);
    assert!(line.contains("/nonexistent/x"), "{line}");
}

#[test]
fn journal_dump_and_tail_print_payloads_in_every_format() {
    let r = Root::new();
    let j = r.jdir("j");
    let journal = shmbus::journal::Journal::create_or_open(
        std::path::Path::new(&j),
        &shmbus::journal::JournalConfig::default().roll(shmbus::journal::RollCycle::Never),
    )
    .unwrap();
    let mut a = journal.appender().unwrap();
    let messages = binary_messages(5, 100);
    for m in &messages {
        a.send(m).unwrap();
    }
    a.send(b"text").unwrap();
    drop(a);
    let dump = |format: &str| r.run(&["journal", "dump", "--dir", &j, "--format", format]).stdout;
    let expected: Vec<Vec<u8>> = messages.iter().cloned().chain([b"text".to_vec()]).collect();
    let b64_lines = String::from_utf8(dump("base64")).unwrap();
    assert_eq!(b64_lines.lines().map(unb64).collect::<Vec<_>>(), expected);
    assert_eq!(dump("raw"), expected.concat());
    let hex = String::from_utf8(dump("hex")).unwrap();
    assert_eq!(hex.lines().last(), Some("74657874"));
    let tail = r.ok(&["journal", "tail", "--dir", &j, "--from", "0", "--count", "6", "--format", "base64"]);
    assert_eq!(tail, b64_lines);
    let lines = common::json_lines(&r.ok(&["journal", "dump", "--dir", &j, "--json"]));
    for (line, m) in lines.iter().zip(&expected) {
        match line.get("data") {
            Some(text) => assert_eq!(text.as_str().unwrap().as_bytes(), &m[..]),
            None => assert_eq!(unb64(line["data_base64"].as_str().unwrap()), *m),
        }
    }
    assert_eq!(lines[5]["data"], "text");
    // --format and --json do not go together.
    let out = r.run(&["journal", "dump", "--dir", &j, "--json", "--format", "hex"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bridge_runs_the_bridge_program_or_says_where_it_is() {
    let r = Root::new();
    // `shmbus bridge --help` is the bridge's own help (the program beside shmbus).
    let help = r.ok(&["bridge", "--help"]);
    assert!(help.contains("--topics") && help.contains("--mirror") && help.contains("Usage: shmbus bridge"), "{help}");
    // Its usage errors come through, with its exit status.
    let out = r.run(&["bridge", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    // A shmbus with no bridge beside it and none on PATH says how to get one.
    let lone = r.0.join("lone");
    std::fs::create_dir_all(&lone).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_shmbus"), lone.join("shmbus")).unwrap();
    // A child another test thread forks while the copy is still open for writing holds that
    // descriptor until its own exec: running the copy then fails with ETXTBSY for a moment.
    let run_lone = || {
        std::process::Command::new(lone.join("shmbus"))
            .args(["bridge", "--domain", "d", "--topics", "t"])
            .env("PATH", "/nonexistent")
            .output()
    };
    let mut out = run_lone();
    for _ in 0..50 {
        match &out {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                out = run_lone();
            }
            _ => break,
        }
    }
    let out = out.unwrap();
    assert_eq!(out.status.code(), Some(1));
    let line = one_error_line(&out);
    assert!(line.contains("shmbus-bridge") && line.contains("cargo build --release -p shmbus-bridge"), "{line}");
}
