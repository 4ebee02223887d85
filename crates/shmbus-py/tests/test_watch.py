"""Domain.watch(): channels created and removed, participants joined and left, across
processes (one killed by SIGKILL), blocking and async."""

import asyncio
import os
import signal
import subprocess
import sys
import textwrap

import pytest

import shmbus


def until(w, pred, timeout=10.0):
    """Events of ``w`` until one satisfies ``pred`` (returned last), within ``timeout``."""
    seen = []
    while True:
        ev = w.next(timeout=timeout)
        assert ev is not None, f"no matching event within {timeout} s; saw {seen}"
        seen.append(ev)
        if pred(ev):
            return seen


def test_channels_and_endpoints_come_and_go(domain):
    shmbus.Topic.create_or_open(domain, "before")
    w = domain.watch()
    assert w.try_next() is None, "what existed before the watch is not reported"
    topic = shmbus.Topic.create_or_open(domain, "imu", max_message_len=64)
    ev = w.next(timeout=10)
    assert (ev.event, ev.channel, ev.kind, ev.role, ev.pid) == ("created", "imu", "topic", None, None)
    assert ev.domain == domain.name
    pub = topic.publisher()
    ev = w.next(timeout=10)
    assert (ev.event, ev.channel, ev.role, ev.pid) == ("joined", "imu", "publisher", os.getpid())
    assert "publisher" in repr(ev)
    pub.close()
    assert w.next(timeout=10).event == "left"
    topic.close()
    os.unlink(os.path.join(domain.dir, "imu"))
    ev = w.next(timeout=10)
    assert (ev.event, ev.channel, ev.kind) == ("removed", "imu", "topic")
    assert w.next(timeout=0.05) is None


def test_a_killed_process_is_seen_to_leave(domain):
    shmbus.Queue.create_or_open(domain, "q")
    w = domain.watch(participant_interval=0.02)
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import sys, time, shmbus
                c = shmbus.Queue.open(shmbus.Domain(sys.argv[1], root=sys.argv[2]), "q").consumer()
                print("ready", flush=True)
                time.sleep(600)
                """
            ),
            domain.name,
            str(domain.root),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        joined = until(w, lambda e: e.event == "joined")[-1]
        assert (joined.channel, joined.role, joined.pid) == ("q", "consumer", child.pid)
        child.send_signal(signal.SIGKILL)
        child.wait()
        left = until(w, lambda e: e.event == "left")[-1]
        assert (left.channel, left.role, left.pid) == ("q", "consumer", child.pid)
    finally:
        child.kill()
        child.wait()


def test_iterating_blocks_for_the_next_event(domain):
    w = domain.watch(channels_only=True)
    shmbus.Stream.create_or_open(domain, "s", capacity=4096)
    ev = next(iter(w))
    assert (ev.event, ev.channel, ev.kind) == ("created", "s", "stream")


def test_async_for_and_next_async(domain):
    async def main():
        w = domain.watch()
        assert await w.next_async(timeout=0.05) is None
        later = asyncio.get_running_loop().call_later(0.05, shmbus.Queue.create_or_open, domain, "late")
        try:
            async for ev in w:
                assert (ev.event, ev.channel, ev.kind) == ("created", "late", "queue")
                break
        finally:
            later.cancel()
        consumer = shmbus.Queue.open(domain, "late").consumer()
        ev = await w.next_async(timeout=10)
        assert (ev.event, ev.role) == ("joined", "consumer")
        consumer.close()
        # A cancelled await takes nothing: the leave is still there for the next one.
        task = asyncio.ensure_future(w.next_async())
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        ev = await w.next_async(timeout=10)
        assert (ev.event, ev.role) == ("left", "consumer")
        # One await at a time per watch: a second one is refused, not left hanging.
        first = asyncio.ensure_future(w.next_async())
        await asyncio.sleep(0)
        with pytest.raises(shmbus.Busy):
            await w.next_async(timeout=1)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert await w.next_async(timeout=0.05) is None

    asyncio.run(main())
