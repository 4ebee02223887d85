//! The C++ programs of `tests/cpp/` and `examples/cpp/`, written against the header-only
//! `include/shmbus.hpp`: each compiled with `g++` and with `clang++` (`-std=c++17 -Wall
//! -Wextra -Werror -pedantic`) and run, and once more built with g++ under AddressSanitizer
//! and UndefinedBehaviorSanitizer and run; the benchmark's `bench/pingpong.cpp` under the
//! sanitizers only. The library is the `libshmbus.a` of `tests/c.rs`.

mod common;
#[path = "common/program.rs"]
mod program;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Stdio;

use common::Scratch;
use program::{assert_success, command, compile, Build};

const GXX: &[&str] = &["g++", "-std=c++17", "-pedantic"];
const CLANGXX: &[&str] = &["clang++", "-std=c++17", "-pedantic"];

fn compile_cpp(compiler: &[&str], name: &str, source: &str, build: Build) -> PathBuf {
    compile(compiler, name, &[source], build)
}

/// Compiles and runs the single-process test `tests/cpp/<name>.cpp` with a scratch root.
fn run_cpp_test(name: &str, compiler: &[&str], build: Build) {
    let exe = compile_cpp(compiler, name, &format!("tests/cpp/{name}.cpp"), build);
    let scratch = Scratch::new(&format!("cpp-{name}"));
    let out = command(&exe, build).arg(&scratch.0).output().expect("run the C++ test");
    assert_success(name, &out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&format!("{name}: ok")), "{name} did not finish: {stdout}");
}

macro_rules! cpp_tests {
    ($($name:ident),*) => {
        mod gxx {
            $(#[test] fn $name() { super::run_cpp_test(stringify!($name), super::GXX, super::Build::Plain); })*
        }
        mod clangxx {
            $(#[test] fn $name() { super::run_cpp_test(stringify!($name), super::CLANGXX, super::Build::Plain); })*
        }
        mod sanitized {
            $(#[test] fn $name() { super::run_cpp_test(stringify!($name), super::GXX, super::Build::Sanitized); })*
        }
    };
}

cpp_tests!(topic, queue, stream, pool, service, journal, waitset, recv_into, schema);

/// The camera frame pipeline as two processes: 1920x1080x3 frames written in place in loaned
/// slots, read in place from pinned samples, every frame's checksum checked.
fn camera_example(compiler: &[&str], build: Build) {
    let sub_exe = compile_cpp(compiler, "camera_subscriber", "examples/cpp/camera_subscriber.cpp", build);
    let pub_exe = compile_cpp(compiler, "camera_publisher", "examples/cpp/camera_publisher.cpp", build);
    let scratch = Scratch::new("cpp-camera");
    let root = scratch.0.to_str().expect("a UTF-8 temp path");
    let frames = 24;
    let args = [root, "camera", "front", &frames.to_string()];
    let mut sub = command(&sub_exe, build)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the subscriber");
    let mut lines = BufReader::new(sub.stdout.take().expect("the subscriber's stdout")).lines();
    let first = lines.next().map(|l| l.unwrap_or_default()).unwrap_or_default();
    if first != "ready" {
        let out = sub.wait_with_output().expect("wait for the subscriber");
        panic!("the subscriber did not get ready: {first:?}\n{}", String::from_utf8_lossy(&out.stderr));
    }
    let publisher = command(&pub_exe, build).args(args).output().expect("run the publisher");
    assert_success("camera_publisher", &publisher);
    assert_eq!(String::from_utf8_lossy(&publisher.stdout).trim(), format!("published {frames}"));
    let rest: Vec<String> = lines.map(|l| l.unwrap_or_default()).collect();
    let out = sub.wait_with_output().expect("wait for the subscriber");
    assert_success("camera_subscriber", &out);
    // Every frame either checked (checksum and order) or reported skipped, never lost silently;
    // the last one is always read (nothing overwrites it).
    let [line] = rest.as_slice() else { panic!("the subscriber said {rest:?}") };
    let words: Vec<&str> = line.split(' ').collect();
    let ["checked", checked, "skipped", skipped, "last", last] = words.as_slice() else {
        panic!("the subscriber said {line:?}")
    };
    let (checked, skipped): (u64, u64) = (checked.parse().expect("a count"), skipped.parse().expect("a count"));
    assert!(checked >= 1, "{line}");
    assert_eq!(checked + skipped, frames, "{line}");
    assert_eq!(*last, (frames - 1).to_string(), "{line}");
}

#[test]
fn camera_example_gxx() {
    camera_example(GXX, Build::Plain);
}

#[test]
fn camera_example_clangxx() {
    camera_example(CLANGXX, Build::Plain);
}

#[test]
fn camera_example_sanitized() {
    camera_example(GXX, Build::Sanitized);
}

/// The text publisher (the C++ side of the Python package's cross-language test), twice on
/// one topic: the second run's sequence numbers go on from the first's.
fn text_publisher(compiler: &[&str], build: Build) {
    let exe = compile_cpp(compiler, "text_publisher", "examples/cpp/text_publisher.cpp", build);
    let scratch = Scratch::new("cpp-text");
    let root = scratch.0.to_str().expect("a UTF-8 temp path");
    for last in ["10", "20"] {
        let out = command(&exe, build).args([root, "text", "lines", "10"]).output().expect("run the publisher");
        assert_success("text_publisher", &out);
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("published 10 last seq {last}"));
    }
}

#[test]
fn text_publisher_gxx() {
    text_publisher(GXX, Build::Plain);
}

#[test]
fn text_publisher_clangxx() {
    text_publisher(CLANGXX, Build::Plain);
}

#[test]
fn text_publisher_sanitized() {
    text_publisher(GXX, Build::Sanitized);
}

/// The benchmark's C++ ping-pong program (`bench/pingpong.cpp`, run by `make bench-bindings`
/// beside `bench/pingpong.c`) builds against the header and completes 200 round trips of both
/// payloads, as two processes, under the sanitizers, printing the same JSON keys as the C one.
/// No figure is checked.
#[test]
fn bench_pingpong_sanitized() {
    let exe = compile_cpp(GXX, "pingpong", "bench/pingpong.cpp", Build::Sanitized);
    for args in [&["--payload", "copy", "--size", "8"][..], &["--payload", "touch", "--size", "4096"][..]] {
        let out = command(&exe, Build::Sanitized)
            .args(args)
            .args(["--iters", "200", "--warmup", "20", "--json"])
            .output()
            .expect("run the ping-pong");
        assert_success("pingpong (C++)", &out);
        let json = String::from_utf8_lossy(&out.stdout);
        let payload = format!("\"payload\":\"{}\"", args[1]);
        let size = format!("\"size\":{},", args[3]);
        for key in [
            "\"transport\":\"topic\"",
            "\"binding\":\"cpp\"",
            "\"mode\":\"spin\"",
            payload.as_str(),
            size.as_str(),
            "\"iters\":200,",
            "\"warmup\":20,",
            "\"pinned\":",
            "\"p50_ns\":",
            "\"p90_ns\":",
            "\"p99_ns\":",
            "\"p999_ns\":",
            "\"max_ns\":",
            "\"min_ns\":",
        ] {
            assert!(json.contains(key), "{key} missing from the C++ ping-pong's output: {json}");
        }
        assert_eq!(json.trim().lines().count(), 1, "one JSON line expected: {json}");
    }
}
