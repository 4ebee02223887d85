//! The core's files import each other in no circle: each layer (see the crate's front page)
//! uses only those below it, and a kind's files only those below them in the kind's own order
//! (`config` → `layout` → `shared` → endpoints → `handle`).
//!
//! A file "imports" another when its code (not its comments) names a path through it:
//! `crate::a::b::Item` or `super::b::Item`, in a `use` (groups included) or inline. A path
//! resolves to the deepest file it reaches (`crate::topic::shared::Inner` is
//! `topic/shared.rs`; `crate::topic::Topic`, a re-export, is `topic/mod.rs`, which only
//! declares and re-exports). The circles are found as strongly connected components.
#![cfg(not(loom))]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, by its path relative to `root`.
fn sources(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            out.insert(rel, std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// The module path of a file: `topic/shared.rs` → `[topic, shared]`, `topic/mod.rs` →
/// `[topic]`, `lib.rs` → `[]`.
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file.trim_end_matches(".rs").split('/').map(str::to_owned).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The code of a Rust file without its comments and string literals (which may hold paths).
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i += 2;
            while i < b.len() && !b[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // A char literal ('"', '\n'); a lifetime ('a) has no closing quote here.
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Reads `ident(::ident)*`, and a `::{ … }` group after it, from `b[*i..]`: every full path
/// it names, each prefixed with `prefix`.
fn read_paths(b: &[u8], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    loop {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
        if *i < b.len() && b[*i] == b'{' {
            *i += 1;
            loop {
                while *i < b.len() && (b[*i].is_ascii_whitespace() || b[*i] == b',') {
                    *i += 1;
                }
                if *i >= b.len() || b[*i] == b'}' {
                    *i += 1;
                    break;
                }
                let before = *i;
                read_paths(b, i, path.clone(), out);
                // Skip `as name` and anything else up to the next item.
                while *i < b.len() && b[*i] != b',' && b[*i] != b'}' {
                    *i += 1;
                }
                if *i == before {
                    *i += 1;
                }
            }
            return;
        }
        let start = *i;
        while *i < b.len() && is_ident(b[*i]) {
            *i += 1;
        }
        if *i == start {
            break;
        }
        let seg = std::str::from_utf8(&b[start..*i]).unwrap();
        if seg != "self" {
            path.push(seg.to_owned());
        }
        if b[*i..].starts_with(b"::") {
            *i += 2;
        } else {
            break;
        }
    }
    out.push(path);
}

/// The files `file`'s code names a path through.
fn imports(file: &str, src: &str, files: &BTreeMap<Vec<String>, String>) -> BTreeSet<String> {
    let me = module_of(file);
    let code = code_only(src);
    let b = code.as_bytes();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let boundary = i == 0 || !is_ident(b[i - 1]) && b[i - 1] != b':';
        let base = if boundary && b[i..].starts_with(b"crate::") {
            i += "crate::".len();
            Some(Vec::new())
        } else if boundary && b[i..].starts_with(b"super::") {
            i += "super::".len();
            // `super` of a `mod.rs` is its folder's parent; of `x/y.rs`, the folder `x`.
            Some(me[..me.len().saturating_sub(1)].to_vec())
        } else {
            None
        };
        match base {
            Some(base) => read_paths(b, &mut i, base, &mut paths),
            None => i += 1,
        }
    }
    let mut found = BTreeSet::new();
    for path in paths {
        // The deepest file the path reaches.
        if let Some(target) = (1..=path.len()).rev().find_map(|n| files.get(&path[..n])) {
            if target != file {
                found.insert(target.clone());
            }
        }
    }
    found
}

/// Tarjan's strongly connected components of size > 1.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in &s.edges[v] {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(w);
                component.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found
}

fn graph(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut srcs = BTreeMap::new();
    sources(root, root, &mut srcs);
    let files: BTreeMap<Vec<String>, String> = srcs.keys().map(|f| (module_of(f), f.clone())).collect();
    srcs.iter().map(|(f, src)| (f.clone(), imports(f, src, &files))).collect()
}

#[test]
fn the_core_imports_in_no_circle() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = graph(&root);
    // The reader sees what it must: a few imports every layer above them has.
    assert!(edges["topic/publisher.rs"].contains("topic/shared.rs"), "{:?}", edges["topic/publisher.rs"]);
    assert!(edges["admin.rs"].contains("describe.rs"), "{:?}", edges["admin.rs"]);
    assert!(edges["segment.rs"].contains("error.rs"), "{:?}", edges["segment.rs"]);
    let found = circles(&edges);
    let mut report = String::new();
    for c in &found {
        report.push_str(&format!("\n{}:", c.join(", ")));
        for a in c {
            for b in edges[a].iter().filter(|b| c.contains(b)) {
                report.push_str(&format!("\n  {a} -> {b}"));
            }
        }
    }
    assert!(found.is_empty(), "the core's files import each other in circles:{report}");
}

/// The check finds a circle where there is one, through a group, `super` and an inline path.
#[test]
fn a_circle_is_found() {
    let dir = std::env::temp_dir().join(format!("shmbus-circles-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("k")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod k;\n").unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::{k::{x::X, y}};\n// crate::b::B in a comment\n").unwrap();
    std::fs::write(dir.join("b.rs"), "const S: &str = \"crate::a::A\";\n").unwrap();
    std::fs::write(dir.join("k/mod.rs"), "mod x;\nmod y;\n").unwrap();
    std::fs::write(dir.join("k/x.rs"), "fn f() { super::y::g() }\n").unwrap();
    std::fs::write(dir.join("k/y.rs"), "pub fn g() { let _ = crate::a::A; }\n").unwrap();
    let edges = graph(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(edges["b.rs"].is_empty(), "a string names no module: {:?}", edges["b.rs"]);
    assert_eq!(circles(&edges), [vec!["a.rs".to_owned(), "k/x.rs".to_owned(), "k/y.rs".to_owned()]]);
}
