"""The wheel as a user installs it: `pip install` into a fresh virtualenv whose PATH has no
cargo or rustc, then `import shmbus`, the README's snippet and every example run there, from
a directory outside the source tree. `auditwheel show` says the wheel is manylinux, and mypy
--strict type-checks code against the installed package's stubs. The source distribution
builds into a wheel too.

    SHMBUS_WHEEL=target/wheels/shmbus-<version>-<tags>.whl python -m pytest install-test

`make python` runs it on the wheel it built. Needs PyPI (numpy, auditwheel, mypy) for the
fresh virtualenv; the pip-built wheels need cargo and maturin where it is run from (they build
in the shared target directory, and maturin leaves a copy in its wheels/ folder too).
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

PKG_DIR = pathlib.Path(__file__).resolve().parent.parent
WORKSPACE = PKG_DIR.parent.parent
EXAMPLES = PKG_DIR / "examples"
# What the fresh virtualenv gets besides the wheel (pinned like the Makefile's).
PINS = ["numpy==2.4.6", "auditwheel==6.8.2", "mypy==2.4.1"]


def wheel_path():
    wheel = os.environ.get("SHMBUS_WHEEL")
    if not wheel:
        pytest.fail("SHMBUS_WHEEL is not set: the path of the wheel to test (make python sets it)")
    path = pathlib.Path(wheel).resolve()
    assert path.is_file(), f"no wheel at {path}"
    return path


def run(cmd, env, cwd, timeout=600):
    out = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{cmd} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}"
    return out.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh virtualenv with the wheel installed, and the environment to run it in: the
    virtualenv's bin first, then the directories of PATH that hold neither cargo nor rustc."""
    wheel = wheel_path()
    home = tmp_path_factory.mktemp("installed")
    venv = home / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    path = [str(venv / "bin")] + [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not any(os.path.exists(os.path.join(d, tool)) for tool in ("cargo", "rustc"))
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CARGO", "RUSTUP", "VIRTUAL_ENV", "PYTHON"))}
    env.update(PATH=os.pathsep.join(path), PYTHONUNBUFFERED="1", SHMBUS_ROOT=str(home / "shm"))
    (home / "shm").mkdir()
    assert shutil.which("cargo", path=env["PATH"]) is None and shutil.which("rustc", path=env["PATH"]) is None
    python = str(venv / "bin" / "python")
    run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel), *PINS], env, home)
    return {"python": python, "bin": venv / "bin", "env": env, "cwd": home, "wheel": wheel}


def test_import_comes_from_the_installed_wheel(venv):
    out = run([venv["python"], "-c", "import shmbus; print(shmbus.__file__)"], venv["env"], venv["cwd"])
    installed = pathlib.Path(out.strip())
    assert installed.is_relative_to(venv["bin"].parent), f"shmbus was imported from {installed}"
    assert (installed.parent / "py.typed").is_file() and (installed.parent / "_shmbus.pyi").is_file()
    native = list(installed.parent.glob("_shmbus*.so"))
    assert [n.name for n in native] == ["_shmbus.abi3.so"], native


def test_readme_snippet(venv):
    readme = (PKG_DIR / "README.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    out = run([venv["python"], "-c", snippet], venv["env"], venv["cwd"])
    assert out.strip() == "b'hello'"


@pytest.mark.parametrize(
    "example, args, says",
    [
        ("camera_frame.py", ["{tmp}"], "frame 1: (1080, 1920, 3), 1 white row(s), copied: False"),
        ("queue_worker.py", ["{tmp}"], f"3 workers squared 30 numbers; sum of squares {sum(n * n for n in range(30))}"),
        ("journal_replay.py", ["{tmp}/journal"], "replayed 5 event(s) from the start"),
        ("async_monitor.py", ["{tmp}"], "readings: 20 in order: True"),
        ("image_service.py", ["{tmp}"], "shade 200 -> 55, copied: False"),
    ],
)
def test_example(venv, tmp_path, example, args, says):
    argv = [a.format(tmp=tmp_path) for a in args]
    out = run([venv["python"], str(EXAMPLES / example), *argv], venv["env"], venv["cwd"], timeout=120)
    assert says in out


def test_auditwheel_says_manylinux(venv):
    out = run([str(venv["bin"] / "auditwheel"), "show", str(venv["wheel"])], venv["env"], venv["cwd"])
    flat = " ".join(out.split())
    tag = re.search(r'is consistent with the following platform tag: "(manylinux_\d+_\d+_\w+)"', flat)
    assert tag, out
    # The wheel's own tag is the one auditwheel found (or an alias of it), and it is abi3.
    name = venv["wheel"].name
    assert tag.group(1) in name and "-cp311-abi3-" in name, (name, out)


TYPED_USE = '''
import shmbus

def roundtrip(root: str) -> bytes:
    domain = shmbus.Domain("typed", root=root)
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=64, history=4)
    with topic.publisher() as pub, topic.subscriber() as sub:
        seq: int = pub.send(b"x")
        message: shmbus.Message = sub.recv(timeout=1.0)
        assert message.seq == seq
        data: bytes = message.data
        return data

def queued(root: str) -> bytes:
    queue = shmbus.Queue.create_or_open(shmbus.Domain("typed", root=root), "q")
    with queue.producer() as p, queue.consumer() as c:
        p.send(b"job")
        return c.recv(timeout=1.0)
'''


def test_mypy_strict_uses_the_installed_stubs(venv, tmp_path):
    code = tmp_path / "typed_use.py"
    code.write_text(TYPED_USE)
    run([str(venv["bin"] / "mypy"), "--strict", "--no-incremental", str(code)], venv["env"], venv["cwd"])
    # The stubs are what mypy reads: a wrong use is caught.
    bad = tmp_path / "wrong_use.py"
    bad.write_text("import shmbus\n\nn: int = shmbus.Domain('typed').no_such_method()\n")
    out = subprocess.run(
        [str(venv["bin"] / "mypy"), "--strict", "--no-incremental", str(bad)],
        env=venv["env"],
        cwd=venv["cwd"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1 and '"Domain" has no attribute "no_such_method"' in out.stdout, out.stdout


def test_mypy_strict_on_the_examples(venv):
    run(
        [str(venv["bin"] / "mypy"), "--strict", "--no-incremental", *map(str, sorted(EXAMPLES.glob("*.py")))],
        venv["env"],
        venv["cwd"],
    )


def test_pip_wheel_of_the_source_tree(venv, tmp_path):
    """`pip wheel ./crates/shmbus-py` makes one abi3 wheel. maturin's PEP 517 build tags it
    `linux_x86_64` (it leaves auditing to the user); auditwheel finds it manylinux all the same,
    and `MATURIN_PEP517_ARGS=--compatibility pypi` would tag it so."""
    env = dict(os.environ)
    env["MATURIN_PEP517_ARGS"] = "--profile ci"
    env.setdefault("CARGO_TARGET_DIR", str(WORKSPACE / "target"))
    run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(PKG_DIR)],
        env,
        tmp_path,
        timeout=1800,
    )
    wheels = [w.name for w in tmp_path.glob("*.whl")]
    assert len(wheels) == 1 and re.fullmatch(r"shmbus-[\d.]+-cp311-abi3-linux_x86_64\.whl", wheels[0]), wheels
    out = run([str(venv["bin"] / "auditwheel"), "show", str(tmp_path / wheels[0])], venv["env"], venv["cwd"])
    assert re.search(r'consistent with the following platform tag: "manylinux_\d+_\d+_x86_64"', " ".join(out.split())), out


def test_sdist_builds_a_wheel(tmp_path):
    """`maturin sdist`, then pip builds a wheel from it (the way `pip install shmbus-<v>.tar.gz`
    does), in the `ci` profile and the shared target directory so that little is rebuilt."""
    maturin = shutil.which("maturin")
    if maturin is None or shutil.which("cargo") is None:
        pytest.fail("the sdist test needs maturin and cargo on PATH (make python installs maturin)")
    out = run(
        [maturin, "sdist", "-m", str(PKG_DIR / "Cargo.toml"), "--out", str(tmp_path / "sdist")],
        dict(os.environ),
        WORKSPACE,
    )
    (sdist,) = (tmp_path / "sdist").glob("shmbus-*.tar.gz")
    env = dict(os.environ)
    env["MATURIN_PEP517_ARGS"] = "--profile ci"
    env.setdefault("CARGO_TARGET_DIR", str(WORKSPACE / "target"))
    run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "w"), str(sdist)],
        env,
        tmp_path,
        timeout=1800,
    )
    (built,) = (tmp_path / "w").glob("shmbus-*-cp311-abi3-*.whl")
    assert package_files(built) == package_files(wheel_path()), out


def package_files(wheel):
    """The files of a wheel outside its .dist-info."""
    return sorted(n for n in zipfile.ZipFile(wheel).namelist() if ".dist-info/" not in n)
