#!/usr/bin/env python3
"""Runs the shmbus-bench ping-pong matrix once and prints a Markdown table with ratios to the
floors measured in the same run. Usage: scripts/bench-table.py [--iters N] [--bench PATH]
[--only TRANSPORT[,TRANSPORT…]] [--mode spin|block]"""
import argparse, json, os, subprocess, sys

ap = argparse.ArgumentParser()
ap.add_argument("--iters", type=int, default=200000)
ap.add_argument("--bench", default="target/release/shmbus-bench")
ap.add_argument("--only", help="comma-separated transports: only their rows")
ap.add_argument("--mode", choices=["spin", "block"], help="only rows of this mode")
args = ap.parse_args()

ROWS = [
    ("floor", "spin", 8, "copy"),
    ("futex-floor", "block", 8, "copy"),
    ("topic", "spin", 8, "copy"),
    ("topic", "spin", 8, "touch"),
    ("topic", "spin", 256, "copy"),
    ("topic", "spin", 6220800, "touch"),
    ("topic", "block", 8, "copy"),
    ("topic-lossless", "spin", 8, "copy"),
    ("topic-lossless", "block", 8, "copy"),
    ("stream", "spin", 32, "copy"),
    ("stream", "spin", 256, "copy"),
    ("stream", "block", 64, "copy"),
    ("queue", "spin", 32, "copy"),
    ("queue", "spin", 256, "copy"),
    ("queue", "block", 64, "copy"),
    ("journal", "spin", 40, "copy"),
    ("pipe", "block", 8, "copy"),
    ("uds", "block", 8, "copy"),
    ("tcp", "block", 8, "copy"),
]

def run(t, mode, size, payload):
    iters = args.iters if size < 1 << 20 else max(args.iters // 20, 2000)
    cmd = [args.bench, "pingpong", "--transport", t, "--mode", mode, "--size", str(size),
           "--payload", payload, "--iters", str(iters), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return cmd, None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed"
    return cmd, json.loads(p.stdout), None

# This machine's vCPUs may sit on nearby or distant cores, and that can change between
# process pairs: each row is measured right after its own floor (spin rows) or futex floor
# (block rows), and its ratio is to that neighbour.
print(f"load average before: {os.getloadavg()}")
print()
print("| transport | mode | size (B) | payload | p50 ns | p99 ns | p99.9 ns | floor p50 ns (same moment) | ratio |")
print("|---|---|---:|---|---:|---:|---:|---:|---:|")
first_cmd = None
only = set(args.only.split(",")) if args.only else None
for (t, mode, size, payload) in ROWS:
    if (only and t not in only) or (args.mode and mode != args.mode):
        continue
    base = "floor" if mode == "spin" else "futex-floor"
    _, b, _ = run(base, mode, 8, "copy")
    cmd, r, err = run(t, mode, size, payload)
    first_cmd = first_cmd or cmd
    if r is None or b is None:
        print(f"| {t} | {mode} | {size} | {payload} | skipped: {err} | | | | |")
        continue
    p50, f50 = r["p50_ns"], b["p50_ns"]
    print(f"| {t} | {r['mode']} | {size} | {r['payload']} | {p50} | {r['p99_ns']} | {r['p999_ns']} | {base} {f50} | {p50/f50:.2f} |")
results = [(None, first_cmd, None, None)]
print()
print("Commands: `" + " ".join(results[0][1]).replace(args.bench, "shmbus-bench") + "` and likewise per row.")
