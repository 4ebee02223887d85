"""The asyncio ping-pong benchmark (scripts/bench-python-async.py) works end to end: a few
hundred round trips of each row, the Markdown table and one JSON line. No figure is
asserted."""

import json
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "scripts" / "bench-python-async.py"
ROWS = ["shmbus-asyncio", "shmbus-blocking", "unix-asyncio", "unix-blocking"]


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_every_row_runs_and_reports():
    out = run("--iters", "200", "--warmup", "20")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    result = json.loads(lines[-1])
    assert [r["row"] for r in result["rows"]] == ROWS
    for r in result["rows"]:
        assert 0 < r["p50_ns"] <= r["p90_ns"] <= r["p99_ns"], r
        assert (r["iters"], r["warmup"]) == (200, 20)
    table = [line for line in lines if line.startswith("| ")]
    assert table[0] == "| row | p50 µs | p90 µs | p99 µs |"
    assert [line.split(" | ")[0][2:] for line in table[1:]] == ROWS


def test_an_unknown_row_is_one_clear_error():
    out = run("--rows", "shmbus-asyncio,carrier-pigeon", "--iters", "10")
    assert out.returncode == 2
    assert "unknown row 'carrier-pigeon'" in out.stderr
