"""One topic, three languages: a C++ publisher (crates/shmbus-ffi/examples/cpp, built here
against include/ and libshmbus.a), a Python subscriber process and the `shmbus sub` CLI all
see the same messages. Needs cargo and a C++ compiler ($CXX, else c++ or g++): a missing tool
fails the test with a message saying which, nothing is skipped."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import shmbus

ROOT = pathlib.Path(__file__).resolve().parents[3]
COUNT = 50

SUBSCRIBER = """
import json, sys, shmbus
root, domain, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with shmbus.Topic.open(shmbus.Domain(domain, root=root), name).subscriber() as sub:
    sub.seek(1)  # from the first message, whenever the publisher starts
    print("ready", flush=True)
    for _ in range(count):
        msg = sub.recv(timeout=60)
        print(json.dumps({"seq": msg.seq, "data": bytes(msg.data).decode()}), flush=True)
"""


def need(tool, hint):
    path = shutil.which(tool)
    assert path, f"{tool} is needed for this test and was not found on PATH ({hint})"
    return path


def cargo_build(package):
    """Builds `package` in the `ci` profile of the workspace's target dir; returns that dir."""
    cargo = need(os.environ.get("CARGO", "cargo"), "install Rust via rustup")
    out = subprocess.run(
        [cargo, "build", "--profile", "ci", "-p", package],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert out.returncode == 0, f"cargo build -p {package} failed:\n{out.stderr}"
    return pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "ci"


def build_publisher(out_dir):
    libdir = cargo_build("shmbus-ffi")
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    assert cxx, "a C++ compiler is needed for this test (set CXX, or `make deps` installs g++)"
    exe = out_dir / "text_publisher"
    cmd = [
        cxx,
        "-std=c++17",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-I",
        str(ROOT / "include"),
        str(ROOT / "crates/shmbus-ffi/examples/cpp/text_publisher.cpp"),
        "-o",
        str(exe),
        str(libdir / "libshmbus.a"),
        *"-lgcc_s -lutil -lrt -lpthread -lm -ldl".split(),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"compiling the C++ publisher failed:\n{out.stderr}"
    return exe


def test_cpp_publisher_python_subscriber_and_cli(tmp_path):
    publisher = build_publisher(tmp_path)
    cli = cargo_build("shmbus-cli") / "shmbus"
    assert cli.is_file(), f"no shmbus CLI at {cli}"

    root = tmp_path / "root"
    root.mkdir()
    domain, name = f"xlang{os.getpid()}", "lines"
    # The topic is made here so that every side agrees on it: a history that holds all the
    # messages, so no subscriber misses one however late it starts.
    shmbus.Topic.create_or_open(shmbus.Domain(domain, root=str(root)), name, max_message_len=64, history=64).close()

    py_sub = subprocess.Popen(
        [sys.executable, "-c", SUBSCRIBER, str(root), domain, name, str(COUNT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    cli_sub = subprocess.Popen(
        [str(cli), "--root", str(root), "sub", "--domain", domain, name]
        + ["--from", "1", "--count", str(COUNT), "--timeout-ms", "60000", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready = py_sub.stdout.readline().strip()
        assert ready == "ready", f"the Python subscriber did not start: {ready!r} {py_sub.stderr.read()}"
        pub = subprocess.run(
            [str(publisher), str(root), domain, name, str(COUNT)], capture_output=True, text=True, timeout=60
        )
        assert pub.returncode == 0, pub.stderr
        assert pub.stdout.strip() == f"published {COUNT} last seq {COUNT}"

        py_out, py_err = py_sub.communicate(timeout=120)
        cli_out, cli_err = cli_sub.communicate(timeout=120)
    finally:
        for p in (py_sub, cli_sub):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert py_sub.returncode == 0, py_err
    assert cli_sub.returncode == 0, cli_err

    expected = [(i + 1, f"message {i}") for i in range(COUNT)]
    from_python = [(m["seq"], m["data"]) for m in map(json.loads, py_out.splitlines())]
    from_cli = [(m["seq"], m["data"]) for m in map(json.loads, cli_out.splitlines())]
    assert from_python == expected
    assert from_cli == expected
