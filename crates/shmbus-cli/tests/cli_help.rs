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

/// The `--help` of `verb`, or nothing for a verb that runs another program which is not
/// built (`bridge` shows the options of `shmbus-bridge`).
fn help(r: &Root, verb: &[&str]) -> String {
    let out = r.run(&[verb, &["--help"]].concat());
    String::from_utf8(out.stdout).unwrap()
}

/// Every verb path (`["ls"]`, `["journal", "append"]`, …): the leaves of the command tree.
fn verbs(r: &Root) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for verb in commands_in(&r.ok(&["--help"])) {
        let subs = commands_in(&help(r, &[&verb]));
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
    let args: Vec<&str> = verb.iter().map(String::as_str).collect();
    help(r, &args)
        .lines()
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

#[test]
fn every_verb_has_a_manual_page_and_every_page_named_exists() {
    let r = Root::new();
    let dir = r.0.join("man1");
    std::fs::create_dir(&dir).unwrap();
    let written = r.ok(&["man", "--dir", dir.to_str().unwrap()]);
    let pages: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .map(|f| f.strip_suffix(".1").unwrap_or_else(|| panic!("{f} is not a section 1 page")).to_owned())
        .collect();
    assert_eq!(written.lines().count(), pages.len(), "{written}");
    // A page per verb (and per verb with verbs: `journal`, `pool`), and the main page.
    let mut want: BTreeSet<String> = ["shmbus".to_owned()].into();
    for verb in verbs(&r) {
        want.insert(format!("shmbus-{}", verb[0]));
        want.insert(format!("shmbus-{}", verb.join("-")));
    }
    assert_eq!(pages, want);
    for page in &pages {
        let roff = std::fs::read_to_string(dir.join(format!("{page}.1"))).unwrap();
        // NAME names the page's verb.
        let name = roff.lines().skip_while(|l| *l != ".SH NAME").nth(1).unwrap_or_default();
        assert!(name.starts_with(&format!("{} \\- ", page.replace('-', "\\-"))), "{page}: NAME is {name:?}");
        // Every page it cites exists.
        for (i, _) in roff.match_indices("(1)") {
            let cited: String = roff[..i]
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '\\')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let cited = cited.replace("\\-", "-");
            assert!(pages.contains(&cited), "{page} cites {cited}(1), which does not exist");
        }
        // `shmbus man VERB...` prints the same page.
        let words: Vec<&str> = page.split('-').skip(1).collect();
        assert_eq!(r.ok(&[&["man"][..], &words].concat()), roff, "shmbus man {words:?}");
        // And it renders, where groff is installed.
        if let Ok(out) = std::process::Command::new("groff")
            .args(["-Kutf8", "-man", "-Tutf8", "-ww", "-z"])
            .arg(dir.join(format!("{page}.1")))
            .output()
        {
            assert!(out.status.success() && out.stderr.is_empty(), "{page}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    let out = r.run(&["man", "nosuch"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(one_error_line(&out).contains("no manual page"));
}

#[test]
fn bash_completes_domain_and_channel_names() {
    let r = Root::new();
    r.ok(&["create", "--domain", "robot1", "--kind", "topic", "chatter"]);
    r.ok(&["create", "--domain", "robot1", "--kind", "queue", "orders"]);
    r.ok(&["create", "--domain", "robot2", "--kind", "topic", "imu"]);
    // The script the user installs, sourced by a real bash; the function bash would call on
    // TAB, called with the words and index bash would give it.
    let script = r.ok(&["completions", "bash"]);
    let tab = |line: &[&str], env_domain: Option<&str>| -> Vec<String> {
        let words: Vec<String> = line.iter().map(|w| format!("'{w}'")).collect();
        let program = format!(
            "{script}\nCOMP_WORDS=({words}); COMP_CWORD={cword}; COMP_TYPE=9\n_clap_complete_shmbus shmbus '{cur}' '{prev}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"",
            words = words.join(" "),
            cword = line.len() - 1,
            cur = line[line.len() - 1],
            prev = line[line.len() - 2],
        );
        let mut bash = std::process::Command::new("bash");
        bash.args(["--norc", "--noprofile", "-c", &program]).env("SHMBUS_ROOT", &r.0).env_remove("SHMBUS_DOMAIN");
        if let Some(d) = env_domain {
            bash.env("SHMBUS_DOMAIN", d);
        }
        let out = bash.output().expect("bash is installed");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().lines().filter(|l| !l.is_empty()).map(str::to_owned).collect()
    };
    assert_eq!(tab(&["shmbus", "sub", "--domain", "rob"], None), ["robot1", "robot2"]);
    assert_eq!(tab(&["shmbus", "sub", "--domain", "robot1", ""], None)[..2], ["chatter", "orders"]);
    assert_eq!(tab(&["shmbus", "info", "--domain", "robot1", "ch"], None), ["chatter"]);
    assert_eq!(tab(&["shmbus", "sub", "robot2/"], None), ["robot2/imu"]);
    assert_eq!(tab(&["shmbus", "hz", "o"], Some("robot1")), ["orders"]);
    assert_eq!(tab(&["shmbus", "rm", "r"], None), ["robot1/", "robot2/"]);
    // Another root on the line: its domains.
    let other = Root::new();
    other.ok(&["create", "--domain", "lab", "--kind", "topic", "t"]);
    assert_eq!(tab(&["shmbus", "--root", other.0.to_str().unwrap(), "ls", "--domain", ""], None), ["lab"]);
}

/// The synopsis of every verb in the CLI README (its first code block): for each verb, the
/// long options its lines name (`--help` for a verb that runs another program, whose
/// options its own `--help` shows). `[schema flags]` stands for the four schema options, as the
/// block's own `schema flags:` line says; `--root` is global (the `Global:` paragraph).
fn documented() -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let block = readme.split("```\n").nth(1).expect("the README starts with a synopsis block");
    let schema_flags: Vec<String> = block
        .lines()
        .find_map(|l| l.trim().strip_prefix("schema flags:"))
        .expect("the synopsis defines `schema flags`")
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--"))
        .map(str::to_owned)
        .collect();
    let mut out: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    let mut verb = String::new();
    for line in block.lines() {
        if let Some(rest) = line.strip_prefix("shmbus ") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            let sub = words.get(1).filter(|w| w.chars().all(|c| c.is_ascii_lowercase()));
            verb = match (words[0], sub) {
                ("journal" | "pool", Some(s)) => format!("{} {s}", words[0]),
                (v, _) => v.to_owned(),
            };
        } else if line.trim_start().starts_with("schema flags:") {
            continue;
        }
        let options = out.entry(verb.clone()).or_default();
        if line.contains("[schema flags]") {
            options.extend(schema_flags.iter().cloned());
        }
        options.extend(
            line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .filter(|w| w.starts_with("--") && w.len() > 2)
                .map(str::to_owned),
        );
    }
    out
}

#[test]
fn the_readme_synopsis_lists_exactly_the_options_of_every_verb() {
    let r = Root::new();
    let documented = documented();
    let mut wrong = Vec::new();
    for verb in verbs(&r) {
        let name = verb.join(" ");
        let Some(listed) = documented.get(&name) else {
            wrong.push(format!("{name}: not in the README synopsis"));
            continue;
        };
        // A verb that runs another program (`bridge`) documents where its options are.
        if listed.contains("--help") {
            continue;
        }
        let mut shown = options(&r, &verb);
        // `--root` is global, shown where it means something: not where no root is used.
        let rootless = matches!(verb[0].as_str(), "journal" | "completions" | "man");
        if shown.remove("--root") == rootless {
            wrong.push(format!("{}: --root {} in --help", verb.join(" "), if rootless { "shown" } else { "missing" }));
        }
        let missing: Vec<&String> = shown.difference(listed).collect();
        let extra: Vec<&String> = listed.difference(&shown).collect();
        if !missing.is_empty() || !extra.is_empty() {
            wrong.push(format!(
                "{name}: --help shows {missing:?} not in the synopsis; the synopsis lists {extra:?} not in --help"
            ));
        }
    }
    assert!(wrong.is_empty(), "the README synopsis and --help disagree:\n{}", wrong.join("\n"));
}
