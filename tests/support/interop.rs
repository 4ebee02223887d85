//! The scratch virtualenv of Python clients nobody here wrote (`rosbags`, `protobuf`, `mcap`,
//! `mcap-ros2-support`, …) that `scripts/interop-venv.sh` makes (`make interop-venv`), for the
//! interoperability tests of every crate, which include this file with `#[path]`.
//!
//! Without the virtualenv the tests skip with a reason, unless `SHMBUS_REQUIRE_INTEROP=1`
//! (what `make test` sets), when they fail.

use std::path::PathBuf;

/// The virtualenv's python, or `None` (after saying why) when it is not there.
pub fn python() -> Option<PathBuf> {
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"),
    };
    let py = target.join("interop-venv/bin/python");
    if py.exists() {
        return Some(py);
    }
    let why = format!("{} is missing: run scripts/interop-venv.sh (make interop-venv)", py.display());
    if std::env::var("SHMBUS_REQUIRE_INTEROP").as_deref() == Ok("1") {
        panic!("SHMBUS_REQUIRE_INTEROP=1 but {why}");
    }
    eprintln!("skipped: {why}");
    None
}
