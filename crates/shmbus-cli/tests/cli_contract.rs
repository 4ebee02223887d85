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
    let bash = r.ok(&["completions", "bash"]);
    for verb in ["ls", "info", "pub", "sub", "pool", "journal", "record", "replay", "completions"] {
        assert!(bash.contains(verb), "bash completion lacks {verb}");
    }
    assert!(bash.contains("complete -F _shmbus"), "not a bash completion script");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let script = r.ok(&["completions", shell]);
        assert!(script.contains("journal") && script.contains("dispatch"), "{shell}: {script}");
    }
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
    for verb in [&["journal"][..], &["journal", "dump"], &["journal", "tail"], &["journal", "append"], &["journal", "gc"]] {
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
        &["record"],
        &["replay"],
        &["hz"],
        &["top"],
        &["export"],
    ];
    for verb in verbs {
        let help = r.ok(&[verb, &["--help"][..]].concat()).to_lowercase();
        for word in ["seed", "babus", "issue"] {
            assert!(!help.contains(word), "shmbus {verb:?} --help says {word:?}:\n{help}");
        }
    }
}
