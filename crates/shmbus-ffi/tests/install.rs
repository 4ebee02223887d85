//! The installed C API: `install/install.sh` (what `make install-c` runs) into a scratch
//! prefix, then a consumer program built against it with `pkg-config --cflags --libs shmbus`
//! and with a CMake project's `find_package(shmbus)` (shared and static targets), each run.
//! Needs `cc`, `pkg-config` and `cmake` (`make deps` installs them).

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{lib_dir, Scratch, MANIFEST};

fn check(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn run(what: &str, cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: cannot run it ({e}); `make deps` installs the tools"));
    check(what, &out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Installs into `<scratch>/prefix` and returns the prefix.
fn install(scratch: &Scratch) -> std::path::PathBuf {
    let prefix = scratch.0.join("prefix");
    run("install.sh", Command::new(Path::new(MANIFEST).join("install/install.sh")).arg(&prefix).arg(lib_dir()));
    for f in [
        "lib/libshmbus.so",
        "lib/libshmbus.a",
        "include/shmbus.h",
        "include/shmbus.hpp",
        "include/shmbus/topic.hpp",
        "lib/pkgconfig/shmbus.pc",
        "lib/cmake/shmbus/shmbusConfig.cmake",
        "lib/cmake/shmbus/shmbusConfigVersion.cmake",
    ] {
        assert!(prefix.join(f).is_file(), "{f} was not installed");
    }
    prefix
}

fn run_consumer(exe: &Path, prefix: &Path, scratch: &Scratch) {
    let domains = scratch.0.join(format!("domains-{}", exe.file_name().unwrap().to_string_lossy()));
    std::fs::create_dir_all(&domains).unwrap();
    let out = run("the consumer", Command::new(exe).arg(&domains).env("LD_LIBRARY_PATH", prefix.join("lib")));
    assert_eq!(out.trim(), "consumer: ok");
}

#[test]
fn pkg_config_builds_a_consumer() {
    let scratch = Scratch::new("pkgconfig");
    let prefix = install(&scratch);
    let pc_path = prefix.join("lib/pkgconfig");
    let version = run(
        "pkg-config --modversion",
        Command::new("pkg-config").args(["--modversion", "shmbus"]).env("PKG_CONFIG_PATH", &pc_path),
    );
    assert_eq!(version.trim(), env!("CARGO_PKG_VERSION"));
    let flags = run(
        "pkg-config --cflags --libs",
        Command::new("pkg-config").args(["--cflags", "--libs", "shmbus"]).env("PKG_CONFIG_PATH", &pc_path),
    );
    assert!(flags.contains(&format!("-I{}", prefix.join("include").display())), "{flags}");
    let exe = scratch.0.join("consumer-pkgconfig");
    run(
        "cc with pkg-config's flags",
        Command::new("cc")
            .args(["-std=c11", "-Wall", "-Werror"])
            .arg(Path::new(MANIFEST).join("tests/install/consumer.c"))
            .arg("-o")
            .arg(&exe)
            .args(flags.split_whitespace()),
    );
    run_consumer(&exe, &prefix, &scratch);
}

#[test]
fn cmake_find_package_builds_a_consumer() {
    let scratch = Scratch::new("cmake");
    let prefix = install(&scratch);
    let build = scratch.0.join("build");
    run(
        "cmake configure",
        Command::new("cmake")
            .arg("-S")
            .arg(Path::new(MANIFEST).join("tests/install"))
            .arg("-B")
            .arg(&build)
            .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display())),
    );
    run("cmake --build", Command::new("cmake").arg("--build").arg(&build));
    run_consumer(&build.join("consumer"), &prefix, &scratch);
    run_consumer(&build.join("consumer_static"), &prefix, &scratch);
}
