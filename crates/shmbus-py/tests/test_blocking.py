"""Blocking calls release the GIL, are interruptible by Ctrl-C, and work across processes."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import shmbus

JOIN = 60  # seconds: a generous bound, only so that a broken build fails instead of hanging


def child(code, *args):
    """Starts `code` in a new Python process with args; stdout is piped."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_recv_releases_the_gil(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=16)
    pub, sub = topic.publisher(), topic.subscriber()
    got = []
    entered = threading.Event()

    def receive():
        entered.set()
        try:
            got.append(sub.recv(timeout=JOIN).data)
        except shmbus.Timeout as e:
            got.append(e)

    t = threading.Thread(target=receive)
    t.start()
    entered.wait()
    # This thread runs Python while the other is blocked in recv: if recv held the GIL, the
    # send would only happen after it timed out, and the receiver would have got Timeout.
    pub.send(b"ping")
    t.join(JOIN)
    assert got == [b"ping"]


def test_ctrl_c_interrupts_a_blocking_recv(domain):
    shmbus.Topic.create_or_open(domain, "t", max_message_len=16)
    proc = child(
        """
        import signal, sys, shmbus
        # Ctrl-C raises KeyboardInterrupt even when the tests run with SIGINT ignored (a
        # shell's background jobs inherit that, and Python then leaves it ignored).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        d = shmbus.Domain(sys.argv[1], root=sys.argv[2])
        sub = shmbus.Topic.open(d, "t").subscriber()
        try:
            print("ready", flush=True)
            sub.recv()
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        """,
        domain.name,
        domain.root,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        # Give it time to enter recv (which would never return: nothing is published), so
        # that the signal lands while it waits; a recv that never checked for signals would
        # hang.
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=JOIN)
    finally:
        proc.kill()  # a failed test leaves no process behind
    assert out.strip() == "interrupted", err
    assert proc.returncode == 0


def test_cross_process_publisher_and_subscriber(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=32, history=256)
    sub = topic.subscriber()
    proc = child(
        """
        import sys, shmbus
        d = shmbus.Domain(sys.argv[1], root=sys.argv[2])
        with shmbus.Topic.open(d, "t").publisher() as pub:
            for i in range(200):
                pub.send(b"msg %d pid %d" % (i, __import__("os").getpid()))
        print("done", flush=True)
        """,
        domain.name,
        domain.root,
    )
    got = [sub.recv(timeout=JOIN).data for _ in range(200)]
    out, err = proc.communicate(timeout=JOIN)
    assert out.strip() == "done", err
    pid = proc.pid
    assert got == [b"msg %d pid %d" % (i, pid) for i in range(200)]
    assert pid != os.getpid()
