#!/usr/bin/env python3
"""Python-to-Python ping-pong: shmbus against iceoryx2's Python package, multiprocessing.Pipe
and pyzmq (PAIR over ipc://). Prints a Markdown table, the ratios the targets name, and one
JSON line. Run it inside the virtualenv `make bench-bindings` makes (it has every peer).

How: two processes pinned to different CPUs (os.sched_setaffinity; the first two CPUs this
process may use), unrecorded warm-up round trips, then N round trips; one-way latency =
round-trip time / 2 (time.monotonic_ns, CLOCK_MONOTONIC), p50/p90/p99 over the N. Both sides
busy-poll their receive (the non-blocking receive of each peer in a loop), as
`shmbus-bench pingpong --mode spin` does.

Rows, for each peer:
  8 B copy:        8 bytes sent by copy, received by copy into a Python `bytes`.
  6,220,800 B:     a 1920x1080x3 frame. The shared-memory peers (shmbus, iceoryx2) loan a
                   slot, write only its first 8 bytes (the round trip's tag) and send; the
                   receiver takes the sample in place (pinned), wraps it with numpy.frombuffer
                   without copying and reads the tag from that array. Pipe and pyzmq cannot
                   lend memory: they send the whole frame (the tag in its first 8 bytes) and
                   the receiver wraps the received buffer with numpy.frombuffer.

Copy rows (peers named *-copy, and shmbus-recv-into): the whole message is sent by copy and
received by copy, as a Python user writes it first (`pub.send(frame)`, `sub.recv()`): topic,
queue, stream and journal through shmbus, iceoryx2's copy send (a loaned slice filled with
memmove) with one copy out of the received sample (`ctypes.string_at`), and shmbus's topic
received into a reused bytearray (`recv_into`). With --floor, the same run also measures,
right after each shmbus copy row, shmbus-bench's Rust copy ping-pong of its kind at its size
(with the same warm-up), and in this process one `bytes()` copy of a bytearray of each size
and one `recv_into` of a waiting message, and prints the ratios the targets name.

Usage: scripts/bench-python.py [--iters N] [--frame-iters N] [--peers shmbus,pipe,...]
                               [--floor PATH-TO-shmbus-bench]
"""
import argparse
import ctypes
import importlib
import json
import math
import multiprocessing
import os
import shutil
import sys
import tempfile
import time

FRAME = 6_220_800  # 1920 x 1080 x 3 bytes
TAG = 8  # the bytes each round trip writes: a little-endian counter
PEERS = ("shmbus", "iceoryx2", "pipe", "zmq")
# The copy rows: not run unless named in --peers.
COPY_PEERS = ("shmbus-copy", "shmbus-queue-copy", "shmbus-stream-copy", "shmbus-journal-copy",
              "shmbus-recv-into", "iceoryx2-copy", "shmbus-service", "shmbus-service-copy")
LABELS = {
    "shmbus": "shmbus (topic)",
    "iceoryx2": "iceoryx2 (publish-subscribe)",
    "pipe": "multiprocessing.Pipe",
    "zmq": "pyzmq PAIR ipc://",
    "shmbus-copy": "shmbus topic, copy in and out",
    "shmbus-queue-copy": "shmbus queue, copy in and out",
    "shmbus-stream-copy": "shmbus stream, copy in and out",
    "shmbus-journal-copy": "shmbus journal, copy in and out",
    "shmbus-recv-into": "shmbus topic, copy in, recv_into out",
    "iceoryx2-copy": "iceoryx2, copy in, one copy out",
    "shmbus-service": "shmbus service call (frames in place)",
    "shmbus-service-copy": "shmbus service call, copy in and out",
}
# The service rows: a round trip is one call, this process the client, the echo the server.
SERVICE_PEERS = ("shmbus-service", "shmbus-service-copy")
# The Rust transport each shmbus copy row is held against (shmbus-bench pingpong --payload copy).
RUST_KIND = {"shmbus-copy": "topic", "shmbus-queue-copy": "queue", "shmbus-stream-copy": "stream",
             "shmbus-journal-copy": "journal", "shmbus-recv-into": "topic"}
# The PyPI package each peer needs, as `make bench-bindings` installs it.
PACKAGES = {"shmbus": "shmbus", "iceoryx2": "iceoryx2", "pipe": None, "zmq": "pyzmq", "numpy": "numpy"}
MODULES = {"shmbus": "shmbus", "iceoryx2": "iceoryx2", "zmq": "zmq"}
for _p in COPY_PEERS:
    PACKAGES[_p] = PACKAGES[_p.split("-")[0]]
    MODULES[_p] = MODULES[_p.split("-")[0]]
CHECK_EVERY = 1 << 14  # polls between two checks that the peer is still there
TIMEOUT_S = 10.0  # a round trip that waits longer than this fails the row


class PeerGone(Exception):
    """The other process exited or stopped answering."""


def missing(name, err):
    pkg = PACKAGES[name]
    who = "the benchmark" if name == "numpy" else f"the {name} peer"
    return (f"bench-python: {who} needs the Python package '{pkg}', which this Python "
            f"({sys.executable}) cannot import ({err}). `make bench-bindings` makes a virtualenv "
            f"with every peer; or pip install {pkg} into this one.")


def require(peers):
    """Imports every module the chosen peers need, or exits with one clear line."""
    for name in tuple(p for p in peers if p in MODULES) + ("numpy",):
        try:
            importlib.import_module(MODULES.get(name, name))
        except ImportError as e:
            sys.exit(missing(name, e))


def versions(peers):
    import numpy
    out = {"python": sys.version.split()[0], "numpy": numpy.__version__}
    for p in peers:
        if p == "pipe":
            continue
        try:
            from importlib.metadata import version
            out[p] = version(PACKAGES[p])
        except Exception:  # noqa: BLE001 (a version is informative only)
            out[p] = "unknown"
    return out


# --- waiting -------------------------------------------------------------------------------

class Watch:
    """Between polls, now and then: is the peer alive, and has the wait lasted too long?"""

    def __init__(self, alive):
        self.alive = alive
        self.polls = 0
        self.since = 0

    def reset(self):
        self.polls = 0

    def poll(self):
        self.polls += 1
        if self.polls % CHECK_EVERY:
            return
        now = time.monotonic()
        if self.polls == CHECK_EVERY:
            self.since = now
        if not self.alive():
            raise PeerGone("the other process is gone")
        if now - self.since > TIMEOUT_S:
            raise PeerGone(f"no answer for {TIMEOUT_S:.0f} s")


# --- the peers: each opens its side and offers send(tag) and recv() -> tag ------------------
# `handoff` is what the ping side made for the echo side (names, paths, a connection).

class ShmbusPeer:
    def __init__(self, ping, size, handoff, watch):
        import shmbus
        self.shmbus, self.size, self.watch = shmbus, size, watch
        self.frame = size >= FRAME
        domain = shmbus.Domain("bench", root=handoff["root"])
        tx, rx = ("ping", "pong") if ping else ("pong", "ping")
        # History 2 plus 1 spare slot, as shmbus-bench's topic transport.
        cfg = dict(max_message_len=size, history=2, spare_slots=1)
        self.topics = [shmbus.Topic.create_or_open(domain, n, **cfg) for n in (tx, rx)]
        self.pub = self.topics[0].publisher()
        self.sub = self.topics[1].subscriber()
        self.sub.seek(1)  # both topics are fresh: start at the first message
        self.msg = bytearray(size)

    def send(self, tag):
        if self.frame:
            loan = self.pub.loan()
            view = memoryview(loan)
            view[:TAG] = tag
            view.release()
            loan.send(self.size)
        else:
            self.msg[:TAG] = tag
            self.pub.send(self.msg)

    def recv(self):
        sub, empty, watch = self.sub, self.shmbus.Empty, self.watch
        if self.frame:
            import numpy
            while True:
                try:
                    sample = sub.try_recv_ref()
                    break
                except empty:
                    watch.poll()
            frame = numpy.frombuffer(sample, numpy.uint8)  # a view of the pinned slot
            if frame.shape[0] != self.size:
                raise ValueError(f"shmbus: sample of {frame.shape[0]} bytes, expected {self.size}")
            tag = frame[:TAG].tobytes()
            del frame
            sample.release()
            return tag
        while True:
            try:
                data = sub.try_recv().data
                break
            except empty:
                watch.poll()
        if len(data) != self.size:
            raise ValueError(f"shmbus: message of {len(data)} bytes, expected {self.size}")
        return data[:TAG]

    def close(self):
        self.pub.close()
        self.sub.close()
        for t in self.topics:
            t.close()


class ShmbusCopyPeer:
    """The whole message copied in and out, as a Python user writes it first: `send(buf)`
    and `recv()` (or `recv_into(buf)`), over the kind shmbus-bench's Rust row of the same
    name uses, configured as that row configures it."""

    def __init__(self, peer, ping, size, handoff, watch):
        import shmbus
        self.shmbus, self.size, self.watch = shmbus, size, watch
        self.kind, self.into = RUST_KIND[peer], peer == "shmbus-recv-into"
        domain = shmbus.Domain("bench", root=handoff["root"])
        tx, rx = ("ping", "pong") if ping else ("pong", "ping")
        if self.kind == "topic":
            cfg = dict(max_message_len=size, history=2, spare_slots=1)
            self.chans = [shmbus.Topic.create_or_open(domain, n, **cfg) for n in (tx, rx)]
            self.tx, self.rx = self.chans[0].publisher(), self.chans[1].subscriber()
            self.rx.seek(1)
        elif self.kind == "queue":
            cfg = dict(max_message_len=size, capacity=16)
            self.chans = [shmbus.Queue.create_or_open(domain, n, **cfg) for n in (tx, rx)]
            self.tx, self.rx = self.chans[0].producer(), self.chans[1].consumer()
        elif self.kind == "stream":
            # As shmbus-bench's `capacity_for`: room for four records, a power of two, >= 64 KiB.
            cap = max(1 << 16, 1 << (4 * (((8 + size) + 7) // 8 * 8) - 1).bit_length())
            self.chans = [shmbus.Stream.create_or_open(domain, n, capacity=cap) for n in (tx, rx)]
            self.tx, self.rx = self.chans[0].writer(), self.chans[1].reader()
        else:
            # As shmbus-bench's journal rows: no roll, durability none, in the temporary dir.
            cfg = dict(roll="never", durability="none", max_entry_len=size)
            dirs = [os.path.join(handoff["journal_dir"], n) for n in (tx, rx)]
            self.chans = [shmbus.Journal.create_or_open(d, **cfg) for d in dirs]
            self.tx, self.rx = self.chans[0].appender(), self.chans[1].tailer()
            # As shmbus-bench's journal rows: the pretoucher may use any CPU the pair was
            # given, not only the one this side is pinned to (where it would compete with the
            # side's own busy-polling receive).
            self.tx.set_pretouch_cpus(handoff["pretouch_cpus"])
        self.msg = bytearray(size)
        self.buf = bytearray(size)

    def send(self, tag):
        self.msg[:TAG] = tag
        self.tx.send(self.msg)

    def recv(self):
        rx, empty, watch = self.rx, self.shmbus.Empty, self.watch
        while True:
            try:
                if self.into:
                    n = rx.try_recv_into(self.buf)[0]
                    data = self.buf
                else:
                    got = rx.try_recv()
                    data = got if self.kind in ("queue", "stream") else got.data
                    n = len(data)
                break
            except empty:
                watch.poll()
        if n != self.size:
            raise ValueError(f"shmbus {self.kind}: message of {n} bytes, expected {self.size}")
        return bytes(data[:TAG])

    def close(self):
        for ep in (self.tx, self.rx, *self.chans):
            ep.close()


class ShmbusServicePeer:
    """A call per round trip: the ping side is a service's client, the echo side its server.
    `shmbus-service` writes a frame's request and response in loans and reads both in place
    (the 8 B row copies, as `call` does); `shmbus-service-copy` copies both ways at every
    size (`try_send_request(buf)`, `req.data`, `respond_last(buf)`, `recv_response()`)."""

    def __init__(self, peer, ping, size, handoff, watch):
        import shmbus
        self.shmbus, self.size, self.watch, self.ping = shmbus, size, watch, ping
        self.inplace = peer == "shmbus-service" and size >= FRAME
        domain = shmbus.Domain("bench", root=handoff["root"])
        self.svc = shmbus.Service.create_or_open(domain, "svc", max_in_flight=1, max_request_len=size,
                                                 max_response_len=size)
        self.end = self.svc.client() if ping else self.svc.server()
        self.msg = bytearray(size)
        self.req = None

    def send(self, tag):
        if self.inplace:
            loan = self.end.loan_request() if self.ping else self.req.loan()
            view = memoryview(loan)
            view[:TAG] = tag
            view.release()
            if self.ping:
                loan.send(self.size)
            else:
                loan.send_last(self.size)
        else:
            self.msg[:TAG] = tag
            if self.ping:
                self.end.try_send_request(self.msg)
            else:
                self.req.respond_last(self.msg)
        self.req = None

    def recv(self):
        end, empty, watch = self.end, self.shmbus.Empty, self.watch
        while True:
            try:
                if self.ping:
                    got = end.try_recv_response_ref() if self.inplace else end.try_recv_response()
                else:
                    got = self.req = end.try_recv()
                break
            except empty:
                watch.poll()
        if self.inplace:
            view = memoryview(got)
            n, tag = len(view), bytes(view[:TAG])
            view.release()
            if self.ping:
                got.release()
        else:
            data = got.data
            n, tag = len(data), data[:TAG]
        if n != self.size:
            raise ValueError(f"shmbus service: a message of {n} bytes, expected {self.size}")
        return tag

    def close(self):
        self.end.close()
        self.svc.close()


class Iceoryx2Peer:
    """Two services of byte slices, a publisher on one and a subscriber on the other, as
    shmbus-bench's Rust iceoryx2 peer: no history, a subscriber buffer of 2,
    initial_max_slice_len = the message size (which is what lets a 6 MB slice be loaned)."""

    def __init__(self, ping, size, handoff, watch, copy=False):
        import iceoryx2 as iox2
        self.iox2, self.size, self.watch = iox2, size, watch
        self.frame = size >= FRAME and not copy  # the copy row copies every size
        iox2.set_log_level(iox2.LogLevel.Error)
        self.node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)
        tx, rx = ("ping", "pong") if ping else ("pong", "ping")

        def service(suffix):
            name = iox2.ServiceName.new(f"{handoff['prefix']}/{suffix}")
            return (self.node.service_builder(name)
                    .publish_subscribe(iox2.Slice[ctypes.c_uint8])
                    .history_size(0)
                    .subscriber_max_buffer_size(2)
                    .max_publishers(1)
                    .max_subscribers(1)
                    .open_or_create())

        self.services = [service(tx), service(rx)]
        self.pub = self.services[0].publisher_builder().initial_max_slice_len(size).create()
        self.sub = self.services[1].subscriber_builder().create()
        self.msg = bytearray(size)
        self.msg_c = (ctypes.c_char * size).from_buffer(self.msg)

    def send(self, tag):
        sample = self.pub.loan_slice_uninit(self.size)
        if self.frame:
            ctypes.memmove(sample.payload_ptr, tag, TAG)  # the tag only, in place
        else:
            self.msg[:TAG] = tag
            ctypes.memmove(sample.payload_ptr, self.msg_c, self.size)
        sample.assume_init().send()

    def recv(self):
        sub, watch = self.sub, self.watch
        while True:
            sample = sub.receive()
            if sample is not None:
                break
            watch.poll()
        n = sample.payload().len()
        if n != self.size:
            raise ValueError(f"iceoryx2: sample of {n} bytes, expected {self.size}")
        if self.frame:
            import numpy
            buf = (ctypes.c_uint8 * n).from_address(sample.payload_ptr)
            frame = numpy.frombuffer(buf, numpy.uint8)  # a view of the sample, no copy
            tag = frame[:TAG].tobytes()
            del frame, buf
        else:
            tag = ctypes.string_at(sample.payload_ptr, n)[:TAG]  # the copy out
        sample.delete()
        return tag

    def close(self):
        self.pub.delete()
        self.sub.delete()


class PipePeer:
    """multiprocessing.Pipe (a socketpair): send_bytes / poll() in a loop / recv_bytes."""

    def __init__(self, ping, size, handoff, watch):
        self.conn = handoff["conns"][0 if ping else 1]
        self.size, self.watch = size, watch
        self.frame = size >= FRAME
        self.msg = bytearray(size)

    def send(self, tag):
        self.msg[:TAG] = tag
        self.conn.send_bytes(self.msg)

    def recv(self):
        conn, watch = self.conn, self.watch
        while not conn.poll():
            watch.poll()
        data = conn.recv_bytes()
        if len(data) != self.size:
            raise ValueError(f"pipe: message of {len(data)} bytes, expected {self.size}")
        if self.frame:
            import numpy
            return numpy.frombuffer(data, numpy.uint8)[:TAG].tobytes()
        return data[:TAG]

    def close(self):
        self.conn.close()


class ZmqPeer:
    """pyzmq PAIR sockets over ipc://; recv(NOBLOCK) in a loop. The frame is sent and
    received with copy=False (pyzmq's zero-copy path inside each process)."""

    def __init__(self, ping, size, handoff, watch):
        import zmq
        self.zmq, self.size, self.watch = zmq, size, watch
        self.frame = size >= FRAME
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.PAIR)
        self.sock.setsockopt(zmq.LINGER, 0)
        if ping:
            self.sock.bind(handoff["endpoint"])
        else:
            self.sock.connect(handoff["endpoint"])
        self.msg = bytearray(size)

    def send(self, tag):
        self.msg[:TAG] = tag
        self.sock.send(self.msg, copy=not self.frame)

    def recv(self):
        sock, again, flags, watch = self.sock, self.zmq.Again, self.zmq.NOBLOCK, self.watch
        while True:
            try:
                msg = sock.recv(flags, copy=not self.frame)
                break
            except again:
                watch.poll()
        if self.frame:
            import numpy
            frame = numpy.frombuffer(msg.buffer, numpy.uint8)
            if frame.shape[0] != self.size:
                raise ValueError(f"zmq: message of {frame.shape[0]} bytes, expected {self.size}")
            return frame[:TAG].tobytes()
        if len(msg) != self.size:
            raise ValueError(f"zmq: message of {len(msg)} bytes, expected {self.size}")
        return msg[:TAG]

    def close(self):
        self.sock.close(0)
        self.ctx.term()


CLASSES = {"shmbus": ShmbusPeer, "iceoryx2": Iceoryx2Peer, "pipe": PipePeer, "zmq": ZmqPeer}


def open_peer(peer, ping, size, handoff, watch):
    if peer in RUST_KIND:
        return ShmbusCopyPeer(peer, ping, size, handoff, watch)
    if peer in SERVICE_PEERS:
        return ShmbusServicePeer(peer, ping, size, handoff, watch)
    if peer == "iceoryx2-copy":
        return Iceoryx2Peer(ping, size, handoff, watch, copy=True)
    return CLASSES[peer](ping, size, handoff, watch)


def make_handoff(peer, scratch, n):
    if peer == "shmbus" or peer in RUST_KIND or peer in SERVICE_PEERS:
        root = os.path.join(scratch, f"shmbus-{n}")
        os.mkdir(root)
        return {
            "root": root,
            "journal_dir": tempfile.mkdtemp(prefix="shmbus-bench-py-journal-"),
            # The CPUs the pair may use, before either side pins itself to one.
            "pretouch_cpus": sorted(os.sched_getaffinity(0)),
        }
    if peer.startswith("iceoryx2"):
        return {"prefix": f"shmbus-pybench-{os.getpid()}-{n}"}
    if peer == "pipe":
        return {"conns": multiprocessing.Pipe(duplex=True)}
    return {"endpoint": f"ipc://{scratch}/zmq-{n}.sock"}


# --- the two sides --------------------------------------------------------------------------

def pin(cpu):
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def echo_main(peer, size, count, cpu, handoff, ctl):
    """The echo process: answers `count` messages with the tag it received, then waits for
    the ping side's "done" before it closes (so no transport drops its last reply)."""
    pin(cpu)
    ppid = os.getppid()
    watch = Watch(lambda: os.getppid() == ppid)
    try:
        end = open_peer(peer, False, size, handoff, watch)
    except Exception as e:  # noqa: BLE001 (reported to the ping side)
        ctl.send(f"echo: cannot open {peer}: {e!r}")
        sys.exit(2)
    ctl.send("ready")
    try:
        for _ in range(count):
            watch.reset()
            end.send(end.recv())
    except PeerGone:
        sys.exit(3)
    ctl.poll(TIMEOUT_S)
    end.close()


def percentile(sorted_ns, q):
    """Nearest-rank percentile of a sorted list."""
    i = max(0, min(len(sorted_ns) - 1, math.ceil(q * len(sorted_ns)) - 1))
    return sorted_ns[i]


def run_row(peer, size, iters, warmup, cpus, scratch, n):
    """One ping-pong; returns the row's dict or raises RuntimeError with one line."""
    ctx = multiprocessing.get_context("spawn")
    handoff = make_handoff(peer, scratch, n)
    ping_cpu, echo_cpu = cpus if cpus else (None, None)
    pin(ping_cpu)
    ctl, ctl_child = ctx.Pipe()
    child = ctx.Process(target=echo_main, args=(peer, size, warmup + iters, echo_cpu, handoff, ctl_child),
                        daemon=True)
    watch = Watch(child.is_alive)
    end = None
    try:
        # The ping side opens first (it binds, and creates the channels), then the echo.
        end = open_peer(peer, True, size, handoff, watch)
        child.start()
        ctl_child.close()
        if not ctl.poll(60):
            raise RuntimeError(f"{peer}: the echo process did not start within 60 s")
        msg = ctl.recv()
        if msg != "ready":
            raise RuntimeError(msg)
        samples = [0] * iters
        clock = time.monotonic_ns
        for i in range(warmup + iters):
            tag = i.to_bytes(TAG, "little")
            watch.reset()
            t0 = clock()
            end.send(tag)
            back = end.recv()
            t1 = clock()
            if back != tag:
                raise RuntimeError(f"{peer}: round trip {i} came back with the wrong bytes")
            if i >= warmup:
                samples[i - warmup] = (t1 - t0) // 2
        ctl.send("done")
        child.join(TIMEOUT_S)
        if child.exitcode != 0:
            raise RuntimeError(f"{peer}: the echo process exited with {child.exitcode}")
    except RuntimeError:
        raise
    except Exception as e:  # noqa: BLE001 (any peer's error fails this row, not the run)
        raise RuntimeError(f"{peer}: {e}") from e
    finally:
        if child.is_alive():
            child.kill()
            child.join()
        if end is not None:
            end.close()
        ctl.close()
        if peer == "pipe":
            for c in handoff["conns"]:
                c.close()
        if "journal_dir" in handoff:
            shutil.rmtree(handoff["journal_dir"], ignore_errors=True)
    samples.sort()
    return {
        "peer": peer,
        "size": size,
        "payload": "zero-copy" if size >= FRAME and peer in ("shmbus", "iceoryx2", "shmbus-service") else "copy",
        "iters": iters,
        "warmup": warmup,
        "p50_ns": percentile(samples, 0.50),
        "p90_ns": percentile(samples, 0.90),
        "p99_ns": percentile(samples, 0.99),
        "min_ns": samples[0],
        "max_ns": samples[-1],
    }


def floor_ns(bench):
    """shmbus-bench's raw shared-memory ping-pong floor right now (Rust, spin)."""
    import subprocess
    p = subprocess.run([bench, "pingpong", "--transport", "floor", "--iters", "20000", "--json"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None
    return json.loads(p.stdout)["p50_ns"]


def rust_copy_ns(bench, kind, size, iters, warmup):
    """shmbus-bench's Rust copy ping-pong (spin) of `kind` at `size` right now: one-way p50,
    after the same warm-up as the Python rows (a journal's footprint grows with it)."""
    import subprocess
    p = subprocess.run([bench, "pingpong", "--transport", kind, "--size", str(size), "--payload", "copy",
                        "--mode", "spin", "--iters", str(iters), "--warmup", str(warmup), "--json"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(f"bench-python: shmbus-bench pingpong {kind} {size} B failed: {p.stderr.strip()}", file=sys.stderr)
        return None
    return json.loads(p.stdout)["p50_ns"]


def in_process_ns(size, iters):
    """In this process, p50 of one `bytes()` copy of a bytearray of `size` bytes, and of one
    `recv_into` of a waiting `size`-byte message into a reused bytearray (topic)."""
    import shmbus
    clock = time.monotonic_ns
    src = bytearray(os.urandom(size))
    copies, into = [], []
    root = tempfile.mkdtemp(prefix="shmbus-bench-py-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        topic = shmbus.Topic.create_or_open(shmbus.Domain("bench", root=root), "t", max_message_len=size,
                                            history=2, spare_slots=1)
        topic.prefault()
        pub, sub, buf = topic.publisher(), topic.subscriber(), bytearray(size)
        # A build before `recv_into` (for a before/after table) measures the copy alone.
        recv_into = getattr(sub, "try_recv_into", None)
        for _ in range(iters):  # alternating, so that both see the same moments of the machine
            t0 = clock()
            b = bytes(src)
            copies.append(clock() - t0)
            del b
            if recv_into is not None:
                pub.send(src)
                t0 = clock()
                recv_into(buf)
                into.append(clock() - t0)
        pub.close(), sub.close(), topic.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    copies.sort(), into.sort()
    return percentile(copies, 0.5), (percentile(into, 0.5) if into else None)


def what_moves(row):
    if row["peer"] in SERVICE_PEERS:
        if row["payload"] == "zero-copy":
            return "a call: request and response written in loans (first 8 B), read in place"
        return "a call: request and response copied in and out"
    if row["peer"] == "shmbus-recv-into":
        return "the whole message sent by copy, received into a reused bytearray"
    if row["peer"] in RUST_KIND or row["peer"] == "iceoryx2-copy":
        return "the whole message sent by copy, received by copy into `bytes`"
    if row["size"] < FRAME:
        return "8 B sent by copy, received by copy"
    if row["payload"] == "zero-copy":
        return "loan, write the first 8 B; receive pinned, numpy.frombuffer view"
    return "the whole frame copied through the kernel; numpy.frombuffer of the received buffer"


def warmup_for(args, iters):
    """Unrecorded round trips before `iters` recorded ones (the Rust yardsticks get the same)."""
    return args.warmup if args.warmup is not None else max(100, min(iters // 10, 10_000))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=100_000, help="recorded round trips of the 8 B rows")
    ap.add_argument("--frame-iters", type=int, default=2_000, help="recorded round trips of the frame rows")
    ap.add_argument("--warmup", type=int, default=None,
                    help="unrecorded round trips first (default: iters/10, within 100..10000)")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help=f"comma-separated, of {','.join(PEERS + COPY_PEERS)}")
    ap.add_argument("--sizes", default=f"8,{FRAME}", help="comma-separated message sizes")
    ap.add_argument("--floor", metavar="SHMBUS_BENCH", default=None,
                    help="measure shmbus-bench's spin floor before each row (a path to shmbus-bench)")
    args = ap.parse_args()
    peers = [p for p in args.peers.split(",") if p]
    unknown = [p for p in peers if p not in PEERS + COPY_PEERS]
    if unknown or not peers:
        sys.exit(f"bench-python: unknown peer(s) {unknown}; choose from {', '.join(PEERS + COPY_PEERS)}")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if any(s < TAG for s in sizes) or args.iters < 1 or args.frame_iters < 1:
        sys.exit(f"bench-python: sizes must be at least {TAG} bytes and iteration counts at least 1")
    require(peers)

    allowed = sorted(os.sched_getaffinity(0))
    cpus = (allowed[0], allowed[1]) if len(allowed) >= 2 else None
    if cpus is None:
        print("bench-python: note: only one CPU available; the two processes are not pinned", file=sys.stderr)
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    scratch = tempfile.mkdtemp(prefix="shmbus-bench-py-", dir=base)
    rows, failed, n = [], [], 0
    rust, local = {}, {}  # the yardsticks of the copy rows, measured in this run
    print(f"load average before: {tuple(round(x, 2) for x in os.getloadavg())}; CPUs {cpus}; "
          "receive: busy-poll on both sides")
    print()
    try:
        for peer in peers:
            for size in sizes:
                iters = args.iters if size < FRAME else args.frame_iters
                warmup = warmup_for(args, iters)
                n += 1
                os.sched_setaffinity(0, set(allowed))  # the floor's pair is picked as the row's
                floor = floor_ns(args.floor) if args.floor else None
                try:
                    row = run_row(peer, size, iters, warmup, cpus, scratch, n)
                except RuntimeError as e:
                    failed.append({"peer": peer, "size": size, "error": str(e)})
                    print(f"bench-python: {peer} {size} B failed: {e}", file=sys.stderr)
                    continue
                finally:
                    os.sched_setaffinity(0, set(allowed))
                row["floor_ns"] = floor
                rows.append(row)
                if peer in RUST_KIND and args.floor:
                    # The Rust yardstick of a copy row right after it, so that both meet the
                    # same placement of this machine's vCPUs (which changes within minutes).
                    rust[(peer, size)] = rust_copy_ns(args.floor, RUST_KIND[peer], size, iters, warmup)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    # The in-process yardsticks of the copy rows.
    copy_peers = [p for p in peers if p in RUST_KIND]
    if copy_peers and args.floor:
        for size in sizes:
            iters = args.iters if size < FRAME else args.frame_iters
            local[size] = in_process_ns(size, min(iters, 2000))

    floor_col = args.floor is not None
    head = "| peer | size (B) | payload | what moves | p50 ns | p90 ns | p99 ns | iters |"
    print(head + (" Rust spin floor ns (same moment) |" if floor_col else ""))
    print("|---|---:|---|---|---:|---:|---:|---:|" + ("---:|" if floor_col else ""))
    for r in rows:
        line = (f"| {LABELS[r['peer']]} | {r['size']} | {r['payload']} | {what_moves(r)} | {r['p50_ns']} "
                f"| {r['p90_ns']} | {r['p99_ns']} | {r['iters']} |")
        print(line + (f" {r['floor_ns']} |" if floor_col else ""))
    for f in failed:
        print(f"| {LABELS[f['peer']]} | {f['size']} | failed: {f['error']} | | | | | |" + (" |" if floor_col else ""))

    p50 = {(r["peer"], r["size"]): r["p50_ns"] for r in rows}
    ratios = {}

    def ratio(key, a, b, what, target=None):
        if a in p50 and b in p50 and p50[b] > 0:
            ratios[key] = round(p50[a] / p50[b], 3)
            met = "" if target is None else (" (target ≤ %g: %s)" % (target, "met" if ratios[key] <= target else "not met"))
            print(f"* {what}: {p50[a]} / {p50[b]} ns = {ratios[key]:.2f} ×{met}")

    print()
    print("Ratios (p50, this run):")
    ratio("shmbus_8_over_iceoryx2_8", ("shmbus", 8), ("iceoryx2", 8), "shmbus 8 B / iceoryx2 8 B", 0.5)
    ratio("shmbus_frame_over_shmbus_8", ("shmbus", FRAME), ("shmbus", 8),
          "shmbus 6,220,800 B zero-copy / shmbus 8 B", 2)
    ratio("shmbus_8_over_pipe_8", ("shmbus", 8), ("pipe", 8), "shmbus 8 B / multiprocessing.Pipe 8 B")
    ratio("shmbus_8_over_zmq_8", ("shmbus", 8), ("zmq", 8), "shmbus 8 B / pyzmq 8 B")
    ratio("iceoryx2_frame_over_iceoryx2_8", ("iceoryx2", FRAME), ("iceoryx2", 8),
          "iceoryx2 6,220,800 B zero-copy / iceoryx2 8 B")
    ratio("service_frame_over_service_8", ("shmbus-service", FRAME), ("shmbus-service", 8),
          "shmbus service call 6,220,800 B in place / 8 B")
    ratio("service_copy_frame_over_service_frame", ("shmbus-service-copy", FRAME), ("shmbus-service", FRAME),
          "shmbus service call 6,220,800 B copied / in place")
    ratio("service_8_over_topic_8", ("shmbus-service", 8), ("shmbus", 8),
          "shmbus service call 8 B / shmbus topic 8 B (one call against two topic hops)")
    for size in sizes:
        if size not in local:
            continue
        copy_ns, into_ns = local[size]
        print(f"* {size} B in this process: one bytes() copy {copy_ns} ns; one recv_into (topic) {into_ns} ns")
        if into_ns is not None:
            key = f"recv_into_{size}_over_bytes_copy"
            ratios[key] = round(into_ns / copy_ns, 3)
            met = "met" if ratios[key] <= 1.2 else "not met"
            print(f"* recv_into {size} B / one bytes() copy: {into_ns} / {copy_ns} ns = {ratios[key]:.2f} × "
                  f"(target ≤ 1.2: {met})")
        for peer in copy_peers:
            if (peer, size) not in p50:
                continue
            r = rust.get((peer, size))
            if r:
                key = f"{peer}_{size}_over_rust_{RUST_KIND[peer]}"
                ratios[key] = round(p50[(peer, size)] / r, 3)
                met = "met" if ratios[key] <= 1.3 else "not met"
                print(f"* {LABELS[peer]} {size} B / Rust {RUST_KIND[peer]} copy ping-pong: {p50[(peer, size)]} / {r} "
                      f"ns = {ratios[key]:.2f} × (target ≤ 1.3: {met})")
            key = f"{peer}_{size}_over_two_bytes_copies"
            ratios[key] = round(p50[(peer, size)] / (2 * copy_ns), 3)
            met = "met" if ratios[key] <= 2.5 else "not met"
            print(f"* {LABELS[peer]} {size} B / two bytes() copies: {p50[(peer, size)]} / {2 * copy_ns} ns "
                  f"= {ratios[key]:.2f} × (target ≤ 2.5: {met})")
    ratio("shmbus_copy_frame_over_iceoryx2_copy_frame", ("shmbus-copy", FRAME), ("iceoryx2-copy", FRAME),
          "shmbus 6,220,800 B copy / iceoryx2 6,220,800 B copy", 0.5)
    ratio("shmbus_recv_into_frame_over_iceoryx2_copy_frame", ("shmbus-recv-into", FRAME), ("iceoryx2-copy", FRAME),
          "shmbus 6,220,800 B copy in, recv_into out / iceoryx2 6,220,800 B copy", 0.5)
    print()
    print(json.dumps({
        "rust_copy_p50_ns": {f"{p}/{s}": v for (p, s), v in rust.items()},
        "in_process_p50_ns": {str(s): {"bytes_copy": c, "recv_into": i} for s, (c, i) in local.items()},
        "bench": "python-pingpong",
        "mode": "spin",
        "cpus": list(cpus) if cpus else None,
        "versions": versions(peers),
        "rows": rows,
        "failed": failed,
        "ratios": ratios,
    }))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
