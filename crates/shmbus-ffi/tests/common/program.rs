//! What the C and C++ tests share: compiling a program against `include/` and the freshly
//! built `libshmbus.a`, running it (plain or under the sanitizers), and checking the outcome.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{lib_dir, MANIFEST};

/// Plain, or with AddressSanitizer and UndefinedBehaviorSanitizer (aborting on any report).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Build {
    Plain,
    Sanitized,
}

/// Compiles `sources` (paths relative to the package) into an executable with `compiler`: the
/// program then its language flags (`["cc", "-std=c11"]`), warnings as errors.
pub fn compile(compiler: &[&str], name: &str, sources: &[&str], build: Build) -> PathBuf {
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("c-tests");
    std::fs::create_dir_all(&out_dir).expect("create the output directory");
    let (program, std_flags) = compiler.split_first().expect("a compiler");
    let tool = Path::new(program).file_name().and_then(|n| n.to_str()).unwrap_or("cc");
    let exe = out_dir.join(format!("{name}-{tool}-{build:?}").to_lowercase());
    let mut cc = Command::new(program);
    cc.args(std_flags)
        .args(["-Wall", "-Wextra", "-Werror", "-g", "-O1"])
        .arg("-I")
        .arg(Path::new(MANIFEST).join("../../include"))
        .arg("-I")
        .arg(Path::new(MANIFEST).join("tests/c"));
    if build == Build::Sanitized {
        cc.args(["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]);
    }
    for s in sources {
        cc.arg(Path::new(MANIFEST).join(s));
    }
    cc.arg("-o").arg(&exe).arg(lib_dir().join("libshmbus.a"));
    // The native libraries the Rust standard library needs (`--print native-static-libs`).
    cc.args(["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl", "-lc"]);
    let out = cc
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} ({e}): `make deps` installs the C and C++ compilers"));
    assert!(out.status.success(), "compiling {name} with {program} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// A command running `exe`, with the sanitizers' options for a sanitized build.
pub fn command(exe: &Path, build: Build) -> Command {
    let mut c = Command::new(exe);
    if build == Build::Sanitized {
        c.env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0:halt_on_error=1")
            .env("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1");
    }
    c
}

pub fn assert_success(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
