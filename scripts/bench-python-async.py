#!/usr/bin/env python3
"""Python ping-pong with sleeping receivers: shmbus awaited in asyncio against shmbus's
blocking receive and against a Unix stream socket, awaited and blocking. Prints a Markdown
table and one JSON line. Run it inside the virtualenv `make bench-bindings` makes (it has the
shmbus package).

How: two processes pinned to different CPUs (os.sched_setaffinity; the first two CPUs this
process may use), unrecorded warm-up round trips, then N round trips of an 8-byte tag; one-way
latency = round-trip time / 2 (time.monotonic_ns), p50/p90/p99 over the N. The awaited
receives sleep until their message comes, so each of their one-way trips includes a wake-up:

  shmbus asyncio:   `await sub.recv_async()` in an asyncio loop (the process's waiter thread
                    sleeps on the topic and wakes the loop);
  shmbus blocking:  `sub.recv(timeout=...)`: the default wait policy spins up to 20 µs
                    before it sleeps on the futex, so in a ping-pong it seldom sleeps;
  unix asyncio:     asyncio streams over a Unix stream socket (`readexactly` in the loop);
  unix blocking:    `socket.recv` on a Unix stream socket.

Usage: scripts/bench-python-async.py [--iters N] [--warmup N] [--rows shmbus-asyncio,...]
"""
import argparse
import asyncio
import json
import math
import multiprocessing
import os
import shutil
import socket
import sys
import tempfile
import time

TAG = 8
ROWS = ("shmbus-asyncio", "shmbus-blocking", "unix-asyncio", "unix-blocking")
TIMEOUT_S = 10.0


def pin(cpu):
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def make_topics(root):
    """The two topics, made by the ping side before the echo side starts."""
    import shmbus
    domain = shmbus.Domain("bench", root=root)
    for name in ("ping", "pong"):
        shmbus.Topic.create_or_open(domain, name, max_message_len=TAG, history=2, spare_slots=1).close()


def topics(root, ping):
    import shmbus
    domain = shmbus.Domain("bench", root=root)
    tx, rx = ("ping", "pong") if ping else ("pong", "ping")
    made = [shmbus.Topic.open(domain, n) for n in (tx, rx)]
    pub, sub = made[0].publisher(), made[1].subscriber()
    sub.seek(1)  # both topics are fresh: start at the first message
    return made, pub, sub


def connect(path):
    """A Unix stream socket connected to `path`, once the ping side listens there."""
    end = time.monotonic() + 60
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return s
        except (FileNotFoundError, ConnectionRefusedError):
            s.close()
            if time.monotonic() > end:
                raise
            time.sleep(0.01)


def side(row, ping, scratch, count, record):
    """One side's round trips: the ping side sends first and returns its samples; the echo
    side answers `count` messages."""
    samples = []
    clock = time.monotonic_ns

    def trip(i, send, got, t0):
        """After receiving `got` in round trip `i`: the echo answers, the ping checks it and
        keeps the time."""
        if not ping:
            send(got)
            return
        if got != i.to_bytes(TAG, "little"):
            raise RuntimeError(f"{row}: round trip {i} came back with the wrong bytes")
        if i >= count - record:
            samples.append((clock() - t0) // 2)

    def blocking(send, recv):
        for i in range(count):
            t0 = clock()
            if ping:
                send(i.to_bytes(TAG, "little"))
            trip(i, send, recv(), t0)

    async def awaited(send, recv):
        for i in range(count):
            t0 = clock()
            if ping:
                send(i.to_bytes(TAG, "little"))
            trip(i, send, await recv(), t0)

    if row.startswith("shmbus"):
        made, pub, sub = topics(scratch, ping)
        if row == "shmbus-blocking":
            blocking(pub.send, lambda: bytes(sub.recv(timeout=TIMEOUT_S).data))
        else:
            async def recv():
                return bytes((await sub.recv_async(timeout=TIMEOUT_S)).data)

            asyncio.run(awaited(pub.send, recv))
        pub.close()
        sub.close()
        for t in made:
            t.close()
        return samples
    path = os.path.join(scratch, "sock")
    if row == "unix-blocking":
        if ping:
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            srv.bind(path)
            srv.listen(1)
            srv.settimeout(60)
            conn, _ = srv.accept()
            srv.close()
        else:
            conn = connect(path)
        conn.settimeout(TIMEOUT_S)

        def recv_tag():
            buf = b""
            while len(buf) < TAG:
                part = conn.recv(TAG - len(buf))
                if not part:
                    raise RuntimeError(f"{row}: the other side closed")
                buf += part
            return buf

        blocking(conn.sendall, recv_tag)
        conn.close()
        return samples

    async def run():
        if ping:
            accepted = asyncio.get_running_loop().create_future()
            server = await asyncio.start_unix_server(lambda r, w: accepted.set_result((r, w)), path)
            reader, writer = await asyncio.wait_for(accepted, 60)
            server.close()
        else:
            reader, writer = await asyncio.open_unix_connection(sock=connect(path))
        await awaited(writer.write, lambda: asyncio.wait_for(reader.readexactly(TAG), TIMEOUT_S))
        writer.close()

    asyncio.run(run())
    return samples


def echo_main(row, scratch, count, cpu, ctl):
    pin(cpu)
    try:
        ctl.send("ready")
        side(row, False, scratch, count, 0)
    except Exception as e:  # noqa: BLE001 (reported to the ping side)
        ctl.send(f"echo: {e!r}")
        sys.exit(2)
    ctl.poll(TIMEOUT_S)


def percentile(sorted_ns, q):
    """Nearest-rank percentile of a sorted list."""
    i = max(0, min(len(sorted_ns) - 1, math.ceil(q * len(sorted_ns)) - 1))
    return sorted_ns[i]


def run_row(row, iters, warmup, cpus):
    scratch = tempfile.mkdtemp(prefix="shmbus-bench-pyasync-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    ctx = multiprocessing.get_context("spawn")
    ping_cpu, echo_cpu = cpus if cpus else (None, None)
    pin(ping_cpu)
    ctl, ctl_child = ctx.Pipe()
    count = warmup + iters
    try:
        if row.startswith("shmbus"):
            make_topics(scratch)
        child = ctx.Process(target=echo_main, args=(row, scratch, count, echo_cpu, ctl_child), daemon=True)
        child.start()
        ctl_child.close()
        if not ctl.poll(60) or ctl.recv() != "ready":
            raise RuntimeError(f"{row}: the echo process did not start")
        samples = side(row, True, scratch, count, iters)
        ctl.send("done")
        child.join(TIMEOUT_S)
        if child.exitcode != 0:
            raise RuntimeError(f"{row}: the echo process exited with {child.exitcode}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    samples.sort()
    return {
        "row": row,
        "iters": iters,
        "warmup": warmup,
        "p50_ns": percentile(samples, 0.50),
        "p90_ns": percentile(samples, 0.90),
        "p99_ns": percentile(samples, 0.99),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=5_000, help="recorded round trips per row")
    ap.add_argument("--warmup", type=int, default=500, help="unrecorded round trips first")
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of {','.join(ROWS)}")
    a = ap.parse_args()
    allowed = sorted(os.sched_getaffinity(0))
    cpus = (allowed[0], allowed[1]) if len(allowed) >= 2 else None
    rows = a.rows.split(",")
    for row in rows:
        if row not in ROWS:
            ap.error(f"unknown row {row!r}")
    results = [run_row(row, a.iters, a.warmup, cpus) for row in rows]
    print("| row | p50 µs | p90 µs | p99 µs |")
    print("|---|---:|---:|---:|")
    for r in results:
        print(f"| {r['row']} | {r['p50_ns'] / 1e3:.1f} | {r['p90_ns'] / 1e3:.1f} | {r['p99_ns'] / 1e3:.1f} |")
    print(json.dumps({"cpus": cpus, "rows": results}))


if __name__ == "__main__":
    main()
