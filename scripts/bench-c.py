#!/usr/bin/env python3
"""The C (and C++) bindings' topic ping-pong against Rust's, in one run: Markdown table,
ratios to the Rust figure of the same round, one JSON line.

Each round runs, back to back: shmbus-bench's spin floor, then
`shmbus-bench pingpong --transport topic --mode spin --size S --payload copy --iters N --json`
(Rust), then the C program (crates/shmbus-ffi/bench/pingpong.c) with the same size, payload
and iterations, then the C++ one if given. All use the same protocol (two topics, two
processes pinned to the first two CPUs, RTT/2) and the same receive style: both sides
busy-poll the non-blocking receive. The rounds' median ratio is what the target is read from.

Usage: scripts/bench-c.py --bench PATH --c PATH [--cpp PATH] [--iters N] [--rounds R]
                          [--size S] [--payload copy|touch]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

TARGET = 1.1  # C and C++ 8 B p50 <= 1.1 x the Rust figure of the same run


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        err = p.stderr.strip().splitlines()
        raise RuntimeError(f"`{' '.join(cmd)}` failed: {err[-1] if err else p.returncode}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", required=True, help="shmbus-bench (release build)")
    ap.add_argument("--c", required=True, help="the C ping-pong program")
    ap.add_argument("--cpp", default=None, help="the C++ ping-pong program (same options and JSON)")
    ap.add_argument("--iters", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=8)
    ap.add_argument("--payload", choices=("copy", "touch"), default="copy")
    args = ap.parse_args()
    for what, path in (("shmbus-bench", args.bench), ("C program", args.c), ("C++ program", args.cpp)):
        if path is not None and not os.access(path, os.X_OK):
            sys.exit(f"bench-c: the {what} {path} is missing (make bench-bindings builds it)")
    common = ["--size", str(args.size), "--payload", args.payload, "--iters", str(args.iters), "--json"]
    progs = [("rust", [args.bench, "pingpong", "--transport", "topic", "--mode", "spin"] + common),
             ("c", [args.c] + common)]
    if args.cpp:
        progs.append(("cpp", [args.cpp] + common))
    floor_cmd = [args.bench, "pingpong", "--transport", "floor", "--iters", "20000", "--json"]

    print(f"load average before: {tuple(round(x, 2) for x in os.getloadavg())}; topic, spin (busy-poll), "
          f"{args.size} B {args.payload}, {args.iters} round trips a row")
    print()
    names = [n for n, _ in progs]
    print("| round | floor p50 ns | " + " | ".join(f"{n} p50 ns | {n} p99 ns" for n in names) + " | "
          + " | ".join(f"{n} / rust" for n in names[1:]) + " |")
    print("|---:|---:|" + "---:|---:|" * len(names) + "---:|" * (len(names) - 1))
    rounds = []
    for r in range(1, args.rounds + 1):
        try:
            floor = run(floor_cmd)["p50_ns"]
            res = {n: run(cmd) for n, cmd in progs}
        except RuntimeError as e:
            sys.exit(f"bench-c: round {r}: {e}")
        rust = res["rust"]["p50_ns"]
        ratios = {n: round(res[n]["p50_ns"] / rust, 3) for n in names[1:]}
        rounds.append({"round": r, "floor_ns": floor,
                       "p50_ns": {n: res[n]["p50_ns"] for n in names},
                       "p99_ns": {n: res[n]["p99_ns"] for n in names},
                       "ratio_to_rust": ratios})
        print(f"| {r} | {floor} | " + " | ".join(f"{res[n]['p50_ns']} | {res[n]['p99_ns']}" for n in names)
              + " | " + " | ".join(f"{ratios[n]:.2f}" for n in names[1:]) + " |")
    print()
    medians = {n: statistics.median(x["ratio_to_rust"][n] for x in rounds) for n in names[1:]}
    for n, m in medians.items():
        label = {"c": "C", "cpp": "C++"}[n]
        met = "met" if m <= TARGET else "not met"
        print(f"* {label} {args.size} B / Rust {args.size} B, median of {len(rounds)} rounds: {m:.2f} × "
              f"(target ≤ {TARGET}: {met})")
    if not args.cpp:
        print("* C++: not run (no C++ ping-pong program given)")
    print()
    print(json.dumps({"bench": "c-pingpong", "transport": "topic", "mode": "spin", "size": args.size,
                      "payload": args.payload, "iters": args.iters, "rounds": rounds,
                      "median_ratio_to_rust": medians}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
