//! The installed C API: `install/install.sh` (what `make install-c` runs) into a scratch
//! prefix, then programs built against it, out of tree, each run: a consumer program and the
//! C (`examples/c`) and C++ (`examples/cpp`) examples, once with `pkg-config --cflags --libs
//! shmbus` and once with CMake's `find_package(shmbus)` (the examples' own CMakeLists.txt; the
//! consumer also against the static target). The shared library carries the soname
//! `libshmbus.so.0` and every program records that name, so it keeps loading the major
//! version it was linked with.
//! Needs `cc`, `c++`, `pkg-config`, `cmake` and `readelf` (`make deps` installs them).

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{lib_dir, Scratch, MANIFEST};

const VERSION: &str = env!("CARGO_PKG_VERSION");
const MAJOR: &str = env!("CARGO_PKG_VERSION_MAJOR");

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

/// The soname the shared library carries and the programs linked with it record.
fn soname() -> String {
    format!("libshmbus.so.{MAJOR}")
}

/// The values of the `tag` entries (`SONAME`, `NEEDED`) of `file`'s dynamic section, as
/// `readelf -d` prints them: `0x... (NEEDED)  Shared library: [libshmbus.so.0]`.
fn dynamic(file: &Path, tag: &str) -> Vec<String> {
    let out = run(&format!("readelf -d {}", file.display()), Command::new("readelf").arg("-d").arg(file));
    out.lines()
        .filter(|l| l.contains(&format!("({tag})")))
        .filter_map(|l| Some(l[l.find('[')? + 1..l.rfind(']')?].to_string()))
        .collect()
}

/// `exe` needs the shared library by its soname only.
fn assert_needs_soname(exe: &Path) {
    let shmbus: Vec<String> = dynamic(exe, "NEEDED").into_iter().filter(|n| n.contains("shmbus")).collect();
    assert_eq!(shmbus, vec![soname()], "the NEEDED entries of {} that name shmbus", exe.display());
}

/// Installs into `<scratch>/prefix` and returns the prefix.
fn install(scratch: &Scratch) -> PathBuf {
    let prefix = scratch.0.join("prefix");
    run("install.sh", Command::new(Path::new(MANIFEST).join("install/install.sh")).arg(&prefix).arg(lib_dir()));
    let real = format!("libshmbus.so.{VERSION}");
    for f in [
        &format!("lib/{real}"),
        "lib/libshmbus.a",
        "include/shmbus.h",
        "include/shmbus.hpp",
        "include/shmbus/topic.hpp",
        "lib/pkgconfig/shmbus.pc",
        "lib/cmake/shmbus/shmbusConfig.cmake",
        "lib/cmake/shmbus/shmbusConfigVersion.cmake",
    ] {
        let meta = std::fs::symlink_metadata(prefix.join(f)).unwrap_or_else(|e| panic!("{f} was not installed: {e}"));
        assert!(meta.file_type().is_file(), "{f} is not a regular file");
    }
    // The links: the soname (what the loader looks for) to the file, the development name
    // (what the linker's -lshmbus finds) to the soname.
    let lib = prefix.join("lib");
    for (link, target) in [(soname(), real.clone()), ("libshmbus.so".to_string(), soname())] {
        let to = std::fs::read_link(lib.join(&link)).unwrap_or_else(|e| panic!("lib/{link} is not a link: {e}"));
        assert_eq!(to, Path::new(&target), "where lib/{link} points");
    }
    assert_eq!(dynamic(&lib.join(&real), "SONAME"), vec![soname()], "the soname of lib/{real}");
    prefix
}

/// Runs `exe` with `env` (the loader's path for the pkg-config builds) and returns its output.
fn run_program(what: &str, exe: &Path, args: &[&str], env: &[(&str, &Path)]) -> String {
    let mut cmd = Command::new(exe);
    cmd.args(args).env_remove("LD_LIBRARY_PATH");
    for (k, v) in env {
        cmd.env(k, v);
    }
    run(what, &mut cmd)
}

fn run_consumer(exe: &Path, scratch: &Scratch, env: &[(&str, &Path)]) {
    let domains = scratch.0.join(format!("domains-{}", exe.file_name().unwrap().to_string_lossy()));
    std::fs::create_dir_all(&domains).unwrap();
    let out = run_program("the consumer", exe, &[domains.to_str().expect("a UTF-8 temp path")], env);
    assert_eq!(out.trim(), "consumer: ok");
}

/// Starts the subscriber `sub`, waits for its "ready", runs the publisher `publisher` with
/// the same arguments; returns the publisher's output and the subscriber's lines after
/// "ready".
fn run_pair(sub: &Path, publisher: &Path, args: &[&str], env: &[(&str, &Path)]) -> (String, Vec<String>) {
    let mut cmd = Command::new(sub);
    cmd.args(args).env_remove("LD_LIBRARY_PATH").stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("start {}: {e}", sub.display()));
    let mut lines = BufReader::new(child.stdout.take().expect("the subscriber's stdout")).lines();
    let first = lines.next().map(|l| l.unwrap_or_default()).unwrap_or_default();
    if first != "ready" {
        let out = child.wait_with_output().expect("wait for the subscriber");
        panic!("{} did not get ready: {first:?}\n{}", sub.display(), String::from_utf8_lossy(&out.stderr));
    }
    let published = run_program("the publisher", publisher, args, env);
    let rest: Vec<String> = lines.map(|l| l.unwrap_or_default()).collect();
    let out = child.wait_with_output().expect("wait for the subscriber");
    check(&sub.display().to_string(), &out);
    (published, rest)
}

/// Runs the examples built into `bin_c` (`topic_publisher`, `topic_subscriber`) and `bin_cpp`
/// (`camera_publisher`, `camera_subscriber`, `text_publisher`), and checks that each needs
/// the shared library by its soname.
fn run_examples(bin_c: &Path, bin_cpp: &Path, scratch: &Scratch, env: &[(&str, &Path)]) {
    for exe in ["topic_publisher", "topic_subscriber"]
        .map(|e| bin_c.join(e))
        .into_iter()
        .chain(["camera_publisher", "camera_subscriber", "text_publisher"].map(|e| bin_cpp.join(e)))
    {
        assert_needs_soname(&exe);
    }
    let root = scratch.0.join("example-domains");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.to_str().expect("a UTF-8 temp path");

    let (published, rest) =
        run_pair(&bin_c.join("topic_subscriber"), &bin_c.join("topic_publisher"), &[root, "c", "imu", "100"], env);
    assert_eq!(published.trim(), "published 100");
    assert_eq!(rest, vec!["received 100".to_string()]);

    let (published, rest) = run_pair(
        &bin_cpp.join("camera_subscriber"),
        &bin_cpp.join("camera_publisher"),
        &[root, "cpp", "front", "4"],
        env,
    );
    assert_eq!(published.trim(), "published 4");
    let [line] = rest.as_slice() else { panic!("the camera subscriber said {rest:?}") };
    assert!(line.starts_with("checked ") && line.ends_with(" last 3"), "the camera subscriber said {line:?}");

    let out = run_program("text_publisher", &bin_cpp.join("text_publisher"), &[root, "cpp", "lines", "10"], env);
    assert_eq!(out.trim(), "published 10 last seq 10");
}

#[test]
fn pkg_config_builds_the_consumer_and_the_examples() {
    let scratch = Scratch::new("pkgconfig");
    let prefix = install(&scratch);
    let pc_path = prefix.join("lib/pkgconfig");
    let version = run(
        "pkg-config --modversion",
        Command::new("pkg-config").args(["--modversion", "shmbus"]).env("PKG_CONFIG_PATH", &pc_path),
    );
    assert_eq!(version.trim(), VERSION);
    let flags = run(
        "pkg-config --cflags --libs",
        Command::new("pkg-config").args(["--cflags", "--libs", "shmbus"]).env("PKG_CONFIG_PATH", &pc_path),
    );
    assert!(flags.contains(&format!("-I{}", prefix.join("include").display())), "{flags}");
    let flags: Vec<&str> = flags.split_whitespace().collect();
    let bin = scratch.0.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // `cc SOURCE -o EXE $(pkg-config --cflags --libs shmbus)`, the way the docs say it.
    let build = |compiler: &[&str], source: &str, name: &str| {
        let exe = bin.join(name);
        run(
            &format!("{} {source} with pkg-config's flags", compiler[0]),
            Command::new(compiler[0])
                .args(&compiler[1..])
                .args(["-Wall", "-Werror", "-O2"])
                .arg(Path::new(MANIFEST).join(source))
                .arg("-o")
                .arg(&exe)
                .args(&flags),
        );
        exe
    };
    let consumer = build(&["cc", "-std=c11"], "tests/install/consumer.c", "consumer");
    for e in ["topic_publisher", "topic_subscriber"] {
        build(&["cc", "-std=c11"], &format!("examples/c/{e}.c"), e);
    }
    for e in ["camera_publisher", "camera_subscriber", "text_publisher"] {
        build(&["c++", "-std=c++17"], &format!("examples/cpp/{e}.cpp"), e);
    }
    // No rpath here: the loader finds libshmbus.so.0 through LD_LIBRARY_PATH.
    let lib = prefix.join("lib");
    let env = [("LD_LIBRARY_PATH", lib.as_path())];
    assert_needs_soname(&consumer);
    run_consumer(&consumer, &scratch, &env);
    run_examples(&bin, &bin, &scratch, &env);
}

/// Configures and builds the CMake project in `source` out of tree, against the install.
fn cmake_build(source: &Path, build: &Path, prefix: &Path) {
    run(
        &format!("cmake configure {}", source.display()),
        Command::new("cmake")
            .arg("-S")
            .arg(source)
            .arg("-B")
            .arg(build)
            .arg("-DCMAKE_BUILD_TYPE=Release")
            .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display())),
    );
    run(&format!("cmake --build {}", build.display()), Command::new("cmake").arg("--build").arg(build));
}

#[test]
fn cmake_find_package_builds_the_consumer_and_the_examples() {
    let scratch = Scratch::new("cmake");
    let prefix = install(&scratch);
    let build = scratch.0.join("build");
    cmake_build(&Path::new(MANIFEST).join("tests/install"), &build.join("consumer"), &prefix);
    cmake_build(&Path::new(MANIFEST).join("examples/c"), &build.join("c"), &prefix);
    cmake_build(&Path::new(MANIFEST).join("examples/cpp"), &build.join("cpp"), &prefix);
    // No LD_LIBRARY_PATH: CMake gives the programs of its build tree an rpath to the
    // imported library's directory.
    assert_needs_soname(&build.join("consumer/consumer"));
    run_consumer(&build.join("consumer/consumer"), &scratch, &[]);
    assert!(dynamic(&build.join("consumer/consumer_static"), "NEEDED").iter().all(|n| !n.contains("shmbus")));
    run_consumer(&build.join("consumer/consumer_static"), &scratch, &[]);
    run_examples(&build.join("c"), &build.join("cpp"), &scratch, &[]);
}
