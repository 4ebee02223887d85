"""The Python ping-pong benchmark (scripts/bench-python.py) works end to end: a few hundred
round trips of shmbus and multiprocessing.Pipe (the peers this virtualenv has), and the
output the lead reads (a table, the ratios, one JSON line). No figure is asserted."""

import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "scripts" / "bench-python.py"
FRAME = 6_220_800


def run(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_shmbus_and_pipe_rows():
    out = run("--peers", "shmbus,pipe", "--iters", "200", "--frame-iters", "20", "--warmup", "20")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    result = json.loads(lines[-1])
    assert result["failed"] == []
    assert result["mode"] == "spin"
    rows = {(r["peer"], r["size"]): r for r in result["rows"]}
    assert sorted(rows) == [("pipe", 8), ("pipe", FRAME), ("shmbus", 8), ("shmbus", FRAME)]
    assert rows[("shmbus", FRAME)]["payload"] == "zero-copy"
    assert rows[("pipe", FRAME)]["payload"] == "copy"
    for r in rows.values():
        assert 0 < r["min_ns"] <= r["p50_ns"] <= r["p90_ns"] <= r["p99_ns"] <= r["max_ns"]
        assert r["iters"] == (200 if r["size"] == 8 else 20)
    assert set(result["ratios"]) == {"shmbus_frame_over_shmbus_8", "shmbus_8_over_pipe_8"}
    # The Markdown table: a header, its rule and one line per row, each naming what moves.
    table = [line for line in lines if line.startswith("| ")]
    assert table[0].startswith("| peer | size (B) | payload | what moves | p50 ns")
    assert len(table) == 1 + len(rows)
    assert any("shmbus (topic) | 6220800 | zero-copy | loan, write the first 8 B" in line for line in table)
    assert any(line.startswith("* shmbus 6,220,800 B zero-copy / shmbus 8 B:") for line in lines)


def test_copy_rows():
    """The copy rows: every shmbus kind sent and received by copy, and `recv_into`."""
    peers = ["shmbus-copy", "shmbus-queue-copy", "shmbus-stream-copy", "shmbus-journal-copy", "shmbus-recv-into"]
    out = run("--peers", ",".join(peers), "--iters", "200", "--frame-iters", "10", "--warmup", "10")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["failed"] == []
    rows = {(r["peer"], r["size"]): r for r in result["rows"]}
    assert sorted(rows) == sorted((p, s) for p in peers for s in (8, FRAME))
    assert all(r["payload"] == "copy" for r in rows.values())
    table = [line for line in out.stdout.splitlines() if line.startswith("| ")]
    assert any("shmbus queue, copy in and out | 6220800 | copy | the whole message sent by copy" in t for t in table)


@pytest.mark.skipif(importlib.util.find_spec("zmq") is not None, reason="pyzmq is installed here")
def test_a_missing_peer_is_one_clear_error():
    out = run("--peers", "zmq", "--iters", "10")
    assert out.returncode != 0
    assert "needs the Python package 'pyzmq'" in out.stderr
    assert "make bench-bindings" in out.stderr
