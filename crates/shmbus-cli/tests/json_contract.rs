//! The `--json` contract: every verb's JSON output, produced by real processes on real
//! channels and journals in a scratch root, has exactly the keys, in exactly the order, that
//! the "JSON output" table of the CLI README lists. A change to either side fails here.
//!
//! The output is parsed with an order-keeping reader of its own ([`J`]): `serde_json::Value`
//! sorts keys and would hide the order.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use common::Root;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

// `sensor_msgs/msg/Image` with its dependencies, as ros2msg schema data: the demo camera's.
use shmbus_profile::camera::IMAGE_MSG;

/// A JSON value that keeps its keys in the order they were written.
#[derive(Debug)]
enum J {
    Obj(Vec<(String, J)>),
    Arr(Vec<J>),
    Null,
    Scalar,
}

impl J {
    fn get(&self, key: &str) -> Option<&J> {
        match self {
            J::Obj(kv) => kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for J {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<J, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = J;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<J, E> {
                Ok(J::Scalar)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<J, E> {
                Ok(J::Scalar)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<J, E> {
                Ok(J::Scalar)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<J, E> {
                Ok(J::Scalar)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<J, E> {
                Ok(J::Scalar)
            }
            fn visit_unit<E: de::Error>(self) -> Result<J, E> {
                Ok(J::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<J, E> {
                Ok(J::Null)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<J, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = a.next_element()? {
                    v.push(x);
                }
                Ok(J::Arr(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<J, A::Error> {
                let mut v = Vec::new();
                while let Some((k, x)) = a.next_entry::<String, J>()? {
                    v.push((k, x));
                }
                Ok(J::Obj(v))
            }
        }
        d.deserialize_any(V)
    }
}

fn parse(text: &str) -> J {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// One row of the README's table: its shape and keys.
#[derive(Debug)]
struct Row {
    shape: String,
    keys: Vec<String>,
}

/// The "JSON output" section of the CLI README: the rows of its tables by output name
/// (`ls`, `info.participants[]`, `hz (topic)`; shape `none` for the verbs without JSON).
fn contract() -> BTreeMap<String, Row> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme.find("\n## JSON output\n").expect("README has no \"## JSON output\" section");
    let section = &readme[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut rows = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 3, "README JSON table row without 3 cells: {line}");
        let name = cells[0].replace('`', "");
        let shape = cells[1].to_owned();
        let keys = if shape == "none" { Vec::new() } else { cells[2].split(", ").map(str::to_owned).collect() };
        assert!(rows.insert(name.clone(), Row { shape, keys }).is_none(), "README lists {name} twice");
    }
    assert!(rows.len() > 20, "README JSON table not found or too short: {rows:?}");
    rows
}

/// The output name without its qualifier: `hz (topic)` → `hz`.
fn base(name: &str) -> &str {
    name.split(" (").next().unwrap()
}

/// Checks outputs against the contract and remembers which rows it saw.
struct Checker {
    rows: BTreeMap<String, Row>,
    seen: BTreeSet<String>,
}

impl Checker {
    fn row(&self, name: &str) -> &Row {
        self.rows.get(name).unwrap_or_else(|| panic!("README's JSON table has no row {name:?}"))
    }

    /// Checks the whole stdout of output `name` by the row's shape; returns the values.
    fn output(&mut self, name: &str, stdout: &str) -> Vec<J> {
        let shape = self.row(name).shape.clone();
        let values: Vec<J> = match shape.as_str() {
            "lines" => {
                let v: Vec<J> = stdout.lines().map(parse).collect();
                assert!(!v.is_empty(), "{name}: no JSON lines");
                v
            }
            "line" => {
                assert_eq!(stdout.lines().count(), 1, "{name}: not one line: {stdout}");
                vec![parse(stdout)]
            }
            "object" => vec![parse(stdout)],
            "array" => match parse(stdout) {
                J::Arr(v) => {
                    assert!(!v.is_empty(), "{name}: an empty array proves nothing: {stdout}");
                    v
                }
                other => panic!("{name}: not an array: {other:?}"),
            },
            s => panic!("{name}: shape {s:?} is not one a verb prints"),
        };
        for v in &values {
            self.object(name, v);
        }
        values
    }

    /// Checks that `v` is an object with exactly the row's keys in order, then its nested
    /// objects that the table lists.
    fn object(&mut self, name: &str, v: &J) {
        let J::Obj(kv) = v else { panic!("{name}: not an object: {v:?}") };
        let want = self.row(name).keys.clone();
        let got: Vec<&str> = kv.iter().map(|(k, _)| k.as_str()).collect();
        let matches = got.len() == want.len() && got.iter().zip(&want).all(|(g, w)| w.split('/').any(|alt| alt == *g));
        assert!(
            matches,
            "{name}: keys differ from the README\n  README: {}\n  output: {}",
            want.join(", "),
            got.join(", ")
        );
        self.seen.insert(name.to_owned());
        let prefix = format!("{}.", base(name));
        let children: Vec<String> = self
            .rows
            .keys()
            .filter(|n| n.starts_with(&prefix) && !base(&n[prefix.len()..]).contains('.'))
            .filter(|n| !n.ends_with(')'))
            // Only the keys this object has: a journal's `top` row has `readers`, others not.
            .filter(|n| want.iter().any(|w| w == n[prefix.len()..].trim_end_matches("[]")))
            .cloned()
            .collect();
        for child in children {
            let key = child[prefix.len()..].trim_end_matches("[]");
            let value = v.get(key).unwrap_or_else(|| panic!("{name}: no key {key}"));
            if child.ends_with("[]") {
                let J::Arr(items) = value else { panic!("{child}: not an array: {value:?}") };
                for item in items {
                    // A journal's row in `top` has more keys: its own table row.
                    let journal = format!("{child} (journal)");
                    let is_journal = matches!(item.get("domain"), Some(J::Null));
                    let which = if is_journal && self.rows.contains_key(&journal) { journal } else { child.clone() };
                    self.object(&which, item);
                }
            } else {
                match value {
                    J::Null if self.row(&child).shape == "object or null" => {}
                    _ => self.object(&child, value),
                }
            }
        }
    }
}

/// The subcommands `shmbus VERB --help` lists (`help` left out).
fn subcommands(r: &Root, verb: &[&str]) -> Vec<String> {
    let help = r.ok(&[verb, &["--help"]].concat());
    let commands = help.split("Commands:").nth(1).expect("no Commands: in help");
    let commands = commands.split("\n\n").next().unwrap();
    commands
        .lines()
        // A verb's line is indented by two spaces; wrapped descriptions by more.
        .filter(|l| l.starts_with("  ") && !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|v| *v != "help")
        .map(|v| verb.iter().copied().chain([v]).collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn every_verbs_json_has_the_readme_keys_in_order() {
    let r = Root::new();
    let mut c = Checker { rows: contract(), seen: BTreeSet::new() };

    // Every verb is in the table: with its JSON, or as one without.
    let named: BTreeSet<&str> = c.rows.keys().map(|n| base(n).split('.').next().unwrap()).collect();
    let named: BTreeSet<&str> = named.iter().map(|n| n.strip_suffix(" --once").unwrap_or(n)).collect();
    let mut verbs = subcommands(&r, &[]);
    verbs.retain(|v| v != "pool" && v != "journal");
    verbs.extend(subcommands(&r, &["pool"]));
    verbs.extend(subcommands(&r, &["journal"]));
    for v in &verbs {
        assert!(named.contains(v.as_str()), "`shmbus {v}` is not in the README's JSON tables");
    }
    // The verbs listed without JSON refuse `--json` as a usage error.
    for (name, row) in &c.rows {
        let has_json = c.rows.iter().any(|(n, r)| r.shape != "none" && base(n).starts_with(name.as_str()));
        if row.shape == "none" && !has_json {
            let mut args: Vec<&str> = name.split(' ').collect();
            args.push("--json");
            let out = r.run(&args);
            assert_eq!(out.status.code(), Some(2), "shmbus {name} --json: {}", String::from_utf8_lossy(&out.stderr));
        }
    }

    let root = |args: &[&str]| r.ok(args);
    let j = r.jdir("j");
    let rec = r.jdir("rec");

    // Channels of every kind.
    for (kind, name) in [("topic", "t"), ("topic", "t2"), ("queue", "q"), ("stream", "s"), ("pool", "p")] {
        c.output("create", &root(&["create", "--domain", "d", "--kind", kind, name, "--json"]));
    }
    c.output("pub", &root(&["pub", "--domain", "d", "t", "--data", "hello", "--json"]));
    c.output("pub", &root(&["pub", "--domain", "d", "t", "--format", "hex", "--data", "ff00", "--json"]));

    // A journal with a UTF-8 entry, a binary one and a named reader.
    let out = r.run_stdin(&["journal", "append", "--dir", &j, "--json"], b"a\nb\xff\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(c.output("journal append", &String::from_utf8(out.stdout).unwrap()).len(), 2);
    let dump = root(&["journal", "dump", "--dir", &j, "--json"]);
    assert!(dump.contains("\"data\"") && dump.contains("\"data_base64\""), "{dump}");
    assert_eq!(c.output("journal dump", &dump).len(), 2);
    let tail = root(&["journal", "tail", "--dir", &j, "--from", "0", "--count", "2", "--json", "--timeout-ms", "5000"]);
    assert_eq!(c.output("journal tail", &tail).len(), 2);
    root(&["journal", "tail", "--dir", &j, "--reader", "r1", "--count", "1", "--timeout-ms", "5000"]);
    c.output("journal readers", &root(&["journal", "readers", "--dir", &j, "--json"]));
    c.output("journal info", &root(&["journal", "info", "--dir", &j, "--json", "--rate-window", "0.1"]));
    c.output("journal gc", &root(&["journal", "gc", "--dir", &j, "--json"]));
    c.output("journal config", &root(&["journal", "config", "--dir", &j, "--retain-cycles", "5", "--json"]));
    let archive = format!("{j}-archive");
    c.output("journal tier", &root(&["journal", "tier", "--dir", &j, "--archive", &archive, "--json"]));

    // Live and dead participants, seen by info, ls and top.
    let mut live = r.spawn(&["sub", "--domain", "d", "t", "--count", "1", "--timeout-ms", "60000"]);
    r.wait_info("d", "t", |v| v["subscribers"] == 1);
    let mut dead = r.spawn(&["sub", "--domain", "d", "t2", "--count", "1", "--timeout-ms", "60000"]);
    r.wait_info("d", "t2", |v| v["subscribers"] == 1);
    dead.kill(); // SIGKILL: its entry stays until reclaimed
    c.output("ls", &root(&["ls", "--json"]));
    let info = c.output("info", &root(&["info", "--domain", "d", "t", "--json"]));
    assert!(matches!(info[0].get("participants"), Some(J::Arr(p)) if !p.is_empty()));
    let info = c.output("info", &root(&["info", "--domain", "d", "t2", "--json"]));
    assert!(matches!(info[0].get("dead_participants"), Some(J::Arr(p)) if !p.is_empty()));
    let top = root(&["top", "--once", "--json", "--interval", "0.1", "--journal", &j]);
    c.output("top --once", &top);
    live.kill();

    // Messages of every kind `sub` reads, UTF-8 and not.
    let sub = root(&["sub", "--domain", "d", "t", "--from", "1", "--count", "2", "--json", "--timeout-ms", "5000"]);
    assert!(sub.contains("\"data\"") && sub.contains("\"data_base64\""), "{sub}");
    assert_eq!(c.output("sub", &sub).len(), 2);
    for ch in ["q", "s"] {
        c.output("pub", &root(&["pub", "--domain", "d", ch, "--data", "x", "--json"]));
        let out = root(&["sub", "--domain", "d", ch, "--count", "1", "--json", "--timeout-ms", "5000"]);
        assert_eq!(c.output("sub", &out).len(), 1);
    }

    // A channel with a schema: `sub --json` has the message decoded as `msg`, or `error`
    // for one that does not decode; `schema --json` its four fields.
    root(&["create", "--domain", "d", "--kind", "topic", "js", "--message-encoding", "json"]);
    root(&["pub", "--domain", "d", "js", "--data", "{\"a\":1}"]);
    root(&["pub", "--domain", "d", "js", "--format", "raw", "--data", "not json"]);
    let sub = root(&["sub", "--domain", "d", "js", "--from", "1", "--count", "2", "--json", "--timeout-ms", "5000"]);
    assert!(sub.contains("\"msg\"") && sub.contains("\"error\""), "{sub}");
    assert_eq!(c.output("sub", &sub).len(), 2);
    c.output("schema", &root(&["schema", "--domain", "d", "js", "--json"]));

    // A pool job.
    let worker = r.spawn(&["pool", "worker", "--domain", "d", "p", "--count", "1", "--json", "--timeout-ms", "60000"]);
    r.wait_info("d", "p", |v| v["workers_idle"] == 1);
    c.output("pool dispatch", &root(&["pool", "dispatch", "--domain", "d", "p", "--data", "job", "--json"]));
    assert_eq!(c.output("pool worker", &worker.finish_ok()).len(), 1);

    // A service call, answered and failed.
    let server =
        r.spawn(&["serve", "--domain", "d", "svc", "--count", "2", "--json", "--", "sh", "-c", "read x; test $x = ok"]);
    r.wait_info("d", "svc", |v| v["status"]["servers"] == 1);
    assert_eq!(c.output("call", &root(&["call", "--domain", "d", "svc", "--data", "ok", "--json"])).len(), 1);
    assert!(!r.run(&["call", "--domain", "d", "svc", "--data", "no", "--json"]).status.success());
    assert_eq!(c.output("serve", &server.finish_ok()).len(), 2);

    // Record and replay.
    let recorder = r.spawn(&["record", "--domain", "d", "t", "--dir", &rec, "--count", "1", "--json"]);
    r.wait_info("d", "t", |v| v["subscribers"] == 1);
    root(&["pub", "--domain", "d", "t", "--data", "recorded"]);
    c.output("record", &recorder.finish_ok());
    c.output("replay", &root(&["replay", "--dir", &rec, "--domain", "d2", "--speed", "max", "--json"]));
    // The recording as MCAP, and what it holds.
    let mcap = r.0.join("rec.mcap");
    let mcap = mcap.to_str().unwrap();
    c.output("journal export", &root(&["journal", "export", "--dir", &rec, "--out", mcap, "--json"]));
    c.output("info --file", &root(&["info", "--file", mcap, "--json"]));

    // Rates: a topic through a subscriber, a queue through its counters.
    for verb in ["hz", "bw", "delay"] {
        let out = root(&[verb, "--domain", "d", "t", "--count", "1", "--interval", "0.1", "--json"]);
        let name = if verb == "delay" { "delay".to_owned() } else { format!("{verb} (topic)") };
        c.output(&name, &out);
    }
    for verb in ["hz", "bw"] {
        let out = root(&[verb, "--domain", "d", "q", "--count", "1", "--interval", "0.1", "--json"]);
        c.output(&format!("{verb} (counters)"), &out);
    }

    // Removing a channel still in use.
    let mut user = r.spawn(&["sub", "--domain", "d", "t", "--count", "1", "--timeout-ms", "60000"]);
    r.wait_info("d", "t", |v| v["subscribers"] == 1);
    let rm = c.output("rm", &root(&["rm", "--domain", "d", "t", "--force", "--json"]));
    assert!(matches!(rm[0].get("still_mapped"), Some(J::Arr(p)) if !p.is_empty()));
    user.kill();

    c.output("demo", &root(&["demo", "--seconds", "1", "--image-bytes", "100000", "--json"]));

    // Discovery events: channels made until the watch (started before them) has seen two.
    let mut watch = r.spawn(&["watch", "--domain", "w", "--json", "--count", "2"]);
    let mut made = 0;
    while !watch.exited() {
        root(&["create", "--domain", "w", "--kind", "queue", &format!("w{made}")]);
        made += 1;
        assert!(made < 1000, "watch --count 2 did not end");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(c.output("watch", &watch.finish_ok()).len(), 2);

    // An image topic (sensor_msgs/msg/Image, CDR) with one 1x1 mono8 frame, as a PNG file.
    let image_msg = r.0.join("Image.msg");
    std::fs::write(&image_msg, IMAGE_MSG).unwrap();
    let mut create_image = vec!["create", "--domain", "d", "--kind", "topic", "cam", "--message-encoding", "cdr"];
    create_image.extend(["--schema-name", "sensor_msgs/msg/Image", "--schema-encoding", "ros2msg", "--schema-file"]);
    root(&[&create_image[..], &[image_msg.to_str().unwrap()]].concat());
    let frame = r#"{"height": 1, "width": 1, "encoding": "mono8", "step": 1, "data": [9]}"#;
    root(&["pub", "--domain", "d", "cam", "--data", frame]);
    let png = r.0.join("cam.png");
    c.output("snapshot", &root(&["snapshot", "--domain", "d", "cam", "--out", png.to_str().unwrap(), "--json"]));

    // The bridge (a program of its own, built beside this one by `cargo test --workspace`):
    // its last stats line, on SIGTERM, on loopback only.
    let bridge = r.spawn(&[
        "bridge",
        "--domain",
        "d",
        "--topics",
        "t*",
        "--no-multicast-scouting",
        "--listen",
        "tcp/127.0.0.1:0",
        "--json",
        "--stats-interval",
        "0",
    ]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: kill with our own child's pid.
    unsafe { libc::kill(bridge.id() as libc::pid_t, libc::SIGTERM) };
    c.output("bridge", &bridge.finish_ok());

    // Clean: stale channels (their creators exited), a queue holding a message, a file
    // that is not a segment, and a domain that is a symlink.
    root(&["pub", "--domain", "c", "q", "--kind", "queue", "--data", "undelivered"]);
    std::fs::write(r.channel_file("c", "junk"), b"not a segment").unwrap();
    std::os::unix::fs::symlink(&r.0, r.0.join("shmbus.evil")).unwrap();
    let clean = c.output("clean", &root(&["clean", "--json"]));
    for list in ["removed", "kept", "skipped_domains"] {
        assert!(matches!(clean[0].get(list), Some(J::Arr(v)) if !v.is_empty()), "clean: {list} is empty");
    }

    // Every row of the table was met in real output, but those that need a damaged journal
    // (cli_journal's damage tests cover it) or a removal that fails (cli_clean covers it as
    // a user without write permission; this test may run as root, whom nothing stops).
    let unseen: Vec<&String> = c
        .rows
        .iter()
        .filter(|(n, row)| row.shape != "none" && !c.seen.contains(*n))
        .map(|(n, _)| n)
        .filter(|n| {
            ![
                "journal info.unreadable_cycles[]",
                "journal info.lost_entries[]",
                "journal info.cut_cycles[]",
                "clean.failed[]",
            ]
            .contains(&n.as_str())
        })
        .collect();
    assert!(unseen.is_empty(), "README rows no output was checked against: {unseen:?}");
}
