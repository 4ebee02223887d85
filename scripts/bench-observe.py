#!/usr/bin/env python3
"""What watching costs: a topic ping-pong's p50, alone and while `shmbus top` or
`shmbus export` observes it.

Each round runs `shmbus-bench pingpong --transport topic --mode spin` three times: alone,
with `shmbus top --once --json` taking snapshots of its domain back to back (one every
--interval seconds), and with `shmbus export` serving its domain while curl scrapes
`/metrics` every --interval seconds. The rounds alternate the three, so drift on a shared
machine falls on all of them alike; the table gives the median p50 of each and its ratio to
the run alone, and the message rate `top` saw (to show the channel was observed at speed).

    python3 scripts/bench-observe.py --bench target/release/shmbus-bench \
        --shmbus target/release/shmbus --rounds 5
"""

import argparse
import glob
import json
import os
import signal
import statistics
import subprocess
import sys
import time


def start_bench(args):
    cmd = [args.bench, "pingpong", "--transport", "topic", "--mode", "spin", "--size", str(args.size),
           "--payload", "copy", "--iters", str(args.iters), "--json"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)


def bench_root(proc, deadline=10.0):
    """The scratch root the ping side made (named after its pid)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        roots = glob.glob(f"/dev/shm/shmbus-bench-topic-{proc.pid}-*")
        if roots and glob.glob(os.path.join(roots[0], "shmbus.bench", "*")):
            return roots[0]
        if proc.poll() is not None:
            break
        time.sleep(0.005)
    return None


def finish(proc):
    out, _ = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f"bench failed ({proc.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def p50_ns(result):
    for key in ("p50_ns", "p50"):
        if key in result:
            return float(result[key])
    return float(result["percentiles_ns"]["50"])


def run_alone(args):
    return finish(start_bench(args)), None


def run_with_top(args):
    proc = start_bench(args)
    root = bench_root(proc)
    rates = []
    while root and proc.poll() is None:
        out = subprocess.run([args.shmbus, "top", "--root", root, "--once", "--json", "--interval",
                              str(args.interval)], capture_output=True, text=True)
        if out.returncode == 0:
            for ch in json.loads(out.stdout).get("channels", []):
                if ch.get("rate_msgs_per_s"):
                    rates.append(ch["rate_msgs_per_s"])
    return finish(proc), (max(rates) if rates else None)


def run_with_export(args):
    proc = start_bench(args)
    root = bench_root(proc)
    exporter = None
    if root:
        exporter = subprocess.Popen([args.shmbus, "export", "--root", root, "--listen", "127.0.0.1:0"],
                                    stderr=subprocess.PIPE, text=True)
        line = exporter.stderr.readline()
        url = line.strip().rsplit(" ", 1)[-1]
        while proc.poll() is None:
            subprocess.run(["curl", "-sf", "-o", "/dev/null", url])
            time.sleep(args.interval)
    result = finish(proc)
    if exporter:
        exporter.send_signal(signal.SIGTERM)
        exporter.wait()
    return result, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default="target/release/shmbus-bench")
    ap.add_argument("--shmbus", default="target/release/shmbus")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=3_000_000)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--interval", type=float, default=0.2)
    args = ap.parse_args()

    runs = {"alone": run_alone, "top": run_with_top, "export": run_with_export}
    p50s = {k: [] for k in runs}
    seen_rates = []
    for r in range(args.rounds):
        for name, fn in runs.items():
            result, rate = fn(args)
            p50s[name].append(p50_ns(result))
            if rate:
                seen_rates.append(rate)
            print(f"round {r + 1} {name:6} p50 {p50s[name][-1]:7.1f} ns", file=sys.stderr)
    base = statistics.median(p50s["alone"])
    print(f"| observer | p50 one-way (median of {args.rounds}) | vs alone |")
    print("|---|---|---|")
    for name in runs:
        m = statistics.median(p50s[name])
        print(f"| {name} | {m:.1f} ns | {m / base:.3f} |")
    if seen_rates:
        print(f"\nrate `top` saw on the observed channel: up to {max(seen_rates) / 1e6:.2f} M msg/s")


if __name__ == "__main__":
    main()
