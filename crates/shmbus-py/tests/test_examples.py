"""Every example runs, as a user would run it, and says what it should."""

import pathlib
import subprocess
import sys

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def run(name, *args):
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_camera_frame(tmp_path):
    out = run("camera_frame.py", tmp_path)
    assert "frame 1: (1080, 1920, 3), 1 white row(s), copied: False" in out


def test_queue_worker(tmp_path):
    out = run("queue_worker.py", tmp_path)
    assert f"3 workers squared 30 numbers; sum of squares {sum(n * n for n in range(30))}" in out


def test_journal_replay(tmp_path):
    out = run("journal_replay.py", tmp_path / "journal")
    assert "replayed 5 event(s) from the start" in out
    assert "{'event': 'order', 'id': 3}" in out
    assert "auditor resumes at {'event': 'order', 'id': 2}" in out


def test_async_monitor(tmp_path):
    out = run("async_monitor.py", tmp_path)
    assert "readings: 20 in order: True" in out
    assert "jobs: job 0, job 1, job 2, job 3, job 4" in out
    assert "alarm after 50 ms: none yet; then ready [0]: overheat" in out
