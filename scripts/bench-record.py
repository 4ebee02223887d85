#!/usr/bin/env python3
"""`shmbus record` to MCAP against the demo's load, and against the disk it writes to.

Two measurements in one run, printed as a Markdown table with their ratio:

1. **The demo's load**: the demo profile's seven topics (`image` 6,220,800 B at 30 Hz, `imu`
   64 B at 1 kHz, `med01..med05` 2 KiB at 40..44 Hz) published by `shmbus pub --rate`
   processes while `shmbus record --out FILE.mcap` records all seven for `--seconds`: the
   messages recorded, the gaps `record` reports (messages it missed) and the rate it wrote.
2. **Capacity**: one 6,220,800-byte topic published as fast as `shmbus pub` can while
   `record` records it: the bytes per second `record` wrote into the MCAP file, against the
   sequential write bandwidth of the same file system (this script writing the same number
   of bytes in 8 MiB blocks into the page cache, as `record` writes; and once more with an
   fsync at the end, for reference), measured just after.

Frames are random bytes (incompressible: the worst case for the default zstd chunks; a
real camera's frames compress somewhat). Absolute figures drift on a shared machine; the
ratio is what the targets in BENCHMARKS.md are about.

Usage: scripts/bench-record.py [--shmbus target/release/shmbus] [--seconds 10] [--dir DIR]
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

IMAGE_BYTES = 1920 * 1080 * 3
PROFILE = [("imu", 1000, 64, 60), ("image", 30, IMAGE_BYTES, 4)] + [
    (f"med0{i}", 40 + i - 1, 2048, 16) for i in range(1, 6)
]


def seq_write_bandwidth(path, total, fsync):
    """Bytes per second of writing `total` bytes to `path` in 8 MiB blocks (then fsync, if
    asked: `record` itself leaves its file to the page cache as this does without)."""
    block = os.urandom(8 << 20)
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        written = 0
        while written < total:
            written += f.write(block)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    dt = time.perf_counter() - t0
    os.unlink(path)
    return written / dt


class Run:
    def __init__(self, shmbus, root):
        self.shmbus, self.root, self.procs = shmbus, root, []

    def cmd(self, *args):
        return [self.shmbus, "--root", self.root, *args]

    def publish(self, domain, name, rate, size, history, frame):
        args = ["pub", "--domain", domain, name, "--slot-size", str(size), "--history", str(history), "--file", frame]
        args += ["--rate", str(rate)] if rate else ["--count", str(10**9)]
        self.procs.append(subprocess.Popen(self.cmd(*args), stdout=subprocess.DEVNULL))

    def create(self, domain, name, size, history):
        subprocess.run(self.cmd("create", "--kind", "topic", "--domain", domain, name, "--slot-size", str(size),
                                "--history", str(history)), check=True, stdout=subprocess.DEVNULL)

    def record(self, domain, topics, out, seconds):
        t0 = time.perf_counter()
        r = subprocess.run(self.cmd("record", "--domain", domain, *topics, "--out", out, "--seconds", str(seconds),
                                    "--json", "--quiet"), check=True, capture_output=True, text=True)
        return json.loads(r.stdout), time.perf_counter() - t0

    def stop(self):
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            p.wait()
        self.procs = []


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shmbus", default="target/release/shmbus")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--dir", default=None, help="where the MCAP files go (default: the temporary directory)")
    a = ap.parse_args()

    out_dir = tempfile.mkdtemp(prefix="shmbus-bench-record-", dir=a.dir)
    root = tempfile.mkdtemp(prefix="shmbus-bench-record-", dir="/dev/shm")
    frames = {}
    for _, _, size, _ in PROFILE:
        path = os.path.join(root, f"frame-{size}.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(size))
        frames[size] = path
    run = Run(a.shmbus, root)
    rows = {}
    try:
        print(f"load average before: {os.getloadavg()}; {os.cpu_count()} CPUs; MCAP files in {out_dir}", file=sys.stderr)
        # 1. The demo's load.
        for name, rate, size, history in PROFILE:
            run.create("demo", name, size, history)
        for name, rate, size, history in PROFILE:
            run.publish("demo", name, rate, size, history, frames[size])
        time.sleep(0.5)
        out = os.path.join(out_dir, "demo.mcap")
        summary, dt = run.record("demo", [p[0] for p in PROFILE], out, a.seconds)
        run.stop()
        offered = sum(rate for _, rate, _, _ in PROFILE) * a.seconds
        rows["demo"] = dict(messages=summary["messages"], gaps=summary["gaps"], offered=offered,
                            mb_s=os.path.getsize(out) / dt / 1e6)
        os.unlink(out)

        # 2. Capacity, against the disk's sequential writes of the same size.
        run.create("flood", "image", IMAGE_BYTES, 4)
        run.publish("flood", "image", 0, IMAGE_BYTES, 4, frames[IMAGE_BYTES])
        time.sleep(0.5)
        out = os.path.join(out_dir, "flood.mcap")
        summary, dt = run.record("flood", ["image"], out, a.seconds)
        run.stop()
        size = os.path.getsize(out)
        rows["flood"] = dict(messages=summary["messages"], gaps=summary["gaps"], mb_s=size / dt / 1e6, bytes=size)
        os.unlink(out)
        seq = os.path.join(out_dir, "seq.bin")
        rows["disk_mb_s"] = seq_write_bandwidth(seq, max(size, 256 << 20), False) / 1e6
        rows["disk_fsync_mb_s"] = seq_write_bandwidth(seq, max(size, 256 << 20), True) / 1e6
    finally:
        run.stop()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(out_dir, ignore_errors=True)

    d, f, disk = rows["demo"], rows["flood"], rows["disk_mb_s"]
    print("| run | messages recorded | gaps reported | MCAP written |")
    print("|---|---:|---:|---:|")
    print(f"| demo load ({a.seconds:g} s, {d['offered']:.0f} offered) | {d['messages']} | {d['gaps']} | {d['mb_s']:.1f} MB/s |")
    print(f"| one 6,220,800 B topic, publisher flat out | {f['messages']} | {f['gaps']} | {f['mb_s']:.1f} MB/s |")
    print(f"| sequential write of as many bytes to the same file system (8 MiB blocks) | | | {disk:.1f} MB/s |")
    print(f"| the same, then fsync | | | {rows['disk_fsync_mb_s']:.1f} MB/s |")
    ratio = f["mb_s"] / disk
    print(f"\nrecord / sequential write: {f['mb_s']:.1f} / {disk:.1f} MB/s = {ratio:.2f} × (target ≥ 0.5: "
          f"{'met' if ratio >= 0.5 else 'not met'}); demo load: {d['gaps']} gaps (target 0: "
          f"{'met' if d['gaps'] == 0 else 'not met'})")
    print(json.dumps({"bench": "record-mcap", "seconds": a.seconds, **rows}))


if __name__ == "__main__":
    main()
