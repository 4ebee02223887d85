"""The coroutines behind ``recv_async()``, ``async for`` and ``wait_async`` (docs/python.md,
"Async").

Each one polls (one poll of the Rust receive or wait, without the GIL: the item, or None
after registering its ``_Wake`` with the process's waiter thread), and when that finds
nothing awaits an asyncio future, then polls again. The wake-up reaches the loop without
Python: the waiter thread adds the await's token to the loop's ``_LoopWaker`` and writes its
eventfd, which the loop watches (``add_reader``); the loop's reader drains the tokens and
resolves their futures. A message is taken only by the poll that returns it, and nothing is
awaited between that poll and the return, so a cancelled await has taken nothing. The
registration lives in a ``_Registration``, cancelled when the coroutine ends, however it
ends (an ``async for`` keeps one for all its items, and cancels it when an item's await is
cancelled or fails).
"""

import asyncio
import itertools
import os
import select
import threading
import weakref

from . import _shmbus


class _Wakes:
    """One event loop's wake-ups: its ``_LoopWaker`` (watched by the loop) and the future
    each waiting await's token resolves. Holds no reference to the loop, so that the loop,
    its key in ``_LOOPS``, can be collected (which closes the eventfd).

    A loop that cannot watch a descriptor (``add_reader`` raises ``NotImplementedError``)
    gets a relay thread instead: it sleeps in ``poll`` on the eventfd and hands each wake-up
    to the loop with ``call_soon_threadsafe`` (taking the GIL, as a wake-up of that loop
    must); it ends once the loop is closed or gone."""

    __slots__ = ("waker", "futures", "tokens", "drained")

    def __init__(self, loop):
        self.waker = _shmbus._LoopWaker()
        self.futures = {}
        self.tokens = itertools.count()
        self.drained = None
        try:
            loop.add_reader(self.waker.fileno(), self._drain)
        except NotImplementedError:
            self.drained = threading.Event()
            relay = threading.Thread(target=self._relay, args=(weakref.ref(loop),), daemon=True)
            relay.name = "shmbus-loop-relay"
            relay.start()

    def _drain(self):
        if self.drained is not None:
            self.drained.set()
        for token in self.waker.drain():
            fut = self.futures.pop(token, None)
            if fut is not None and not fut.done():  # a cancelled await leaves a done one
                fut.set_result(None)

    def _relay(self, loop_ref):
        poller = select.poll()
        poller.register(self.waker.fileno(), select.POLLIN)
        while True:
            loop = loop_ref()
            if loop is None or loop.is_closed():
                return
            del loop  # not held while asleep: the loop may be collected meanwhile
            if not poller.poll(1000):
                continue  # now and then, to see whether the loop is still there
            loop = loop_ref()
            if loop is None:
                return
            self.drained.clear()
            try:
                loop.call_soon_threadsafe(self._drain)
            except RuntimeError:
                return  # closed
            del loop
            # Until the loop drained the eventfd (else `poll` would say the same again); a
            # loop that is not running is asked again each second.
            self.drained.wait(1.0)


_LOOPS = weakref.WeakKeyDictionary()
# A forked child has its parent's loops' entries (and eventfds) but not their wake-ups: it
# makes its own.
os.register_at_fork(after_in_child=_LOOPS.clear)


def _wakes(loop):
    wakes = _LOOPS.get(loop)
    if wakes is None:
        wakes = _LOOPS[loop] = _Wakes(loop)
    return wakes


async def _until(poll):
    """``poll(wake)`` until it returns something other than None."""
    loop = asyncio.get_running_loop()
    wakes = _wakes(loop)
    token = next(wakes.tokens)
    wake = wakes.waker.waker(token)
    try:
        while True:
            # Before the poll: a wake-up may come before the poll returns.
            fut = wakes.futures[token] = loop.create_future()
            result = poll(wake)
            if result is not None:
                return result
            await fut
    finally:
        wakes.futures.pop(token, None)


async def _with_timeout(poll, timeout, timeout_msg):
    reg = _shmbus._Registration()
    try:
        if timeout is None:
            return await _until(lambda wake: poll(reg, wake))
        try:
            async with asyncio.timeout(timeout):
                return await _until(lambda wake: poll(reg, wake))
        except TimeoutError:
            raise _shmbus.Timeout(timeout_msg) from None
    finally:
        reg.cancel()


async def recv(ep, timeout, timeout_msg):
    """``ep.recv_async(timeout)``: the next item, as ``ep.recv(timeout)`` returns it."""
    return await _with_timeout(ep._poll_recv, timeout, timeout_msg)


async def call(client, request_id, timeout, timeout_msg):
    """``client.call_async(data, timeout)`` once the request is sent: its response's bytes.
    The request is given up if the await ends any other way (timeout, cancellation), and
    after its first response if that was not the last."""
    try:
        r = await recv(client, timeout, timeout_msg)
    except BaseException:
        client.cancel(request_id)
        raise
    if not r.last:
        client.cancel(request_id)
    return r.data


async def wait(channels, timeout, timeout_msg):
    """``wait_async(channels, timeout)``: the indices of the ready channels."""
    return await _with_timeout(lambda reg, wake: _shmbus._poll_wait(channels, reg, wake), timeout, timeout_msg)


class Receiving:
    """An endpoint's items, awaited one by one (``async for item in endpoint``); it ends
    where iterating the endpoint ends: on the exception class ``ends``, if not None."""

    __slots__ = ("_ep", "_ends", "_reg")

    def __init__(self, ep, ends):
        self._ep, self._ends = ep, ends
        # One registration for every item, as the Rust `stream()` keeps one.
        self._reg = _shmbus._Registration()

    def __aiter__(self):
        return self

    async def __anext__(self):
        try:
            return await _until(lambda wake: self._ep._poll_recv(self._reg, wake))
        except BaseException as e:
            # Cancelled or failed: leave nothing registered until the next item is awaited.
            self._reg.cancel()
            if self._ends is not None and isinstance(e, self._ends):
                raise StopAsyncIteration from None
            raise


async def _watch_event(w):
    """The next event of ``DomainWatch`` ``w``: ``try_next()`` (one look at the domain)
    until it gives one, awaiting between looks the watch's inotify descriptor (readable
    when a name in the domain changed) or, for participants, the time they are due. An event
    is taken only by the look that returns it: a cancelled await has taken nothing."""
    loop = asyncio.get_running_loop()
    fd = w.fileno()
    # The loop keeps one reader per descriptor: one await at a time per watch.
    w._claim()
    try:
        while True:
            event = w.try_next()
            if event is not None:
                return event
            ready = loop.create_future()
            loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
            try:
                due = w._due()
                if due is None:
                    await ready
                else:
                    # A due time of zero still yields to the loop once.
                    await asyncio.wait({ready}, timeout=due)
            finally:
                loop.remove_reader(fd)
                ready.cancel()
    finally:
        w._release()


async def watch_next(w, timeout):
    """``watch.next_async(timeout)``: the next event, or None when ``timeout`` passes."""
    if timeout is None:
        return await _watch_event(w)
    try:
        async with asyncio.timeout(timeout):
            return await _watch_event(w)
    except TimeoutError:
        return None


class WatchEvents:
    """A ``DomainWatch``'s events, awaited one by one (``async for ev in watch``); it never
    ends by itself."""

    __slots__ = ("_w",)

    def __init__(self, w):
        self._w = w

    def __aiter__(self):
        return self

    async def __anext__(self):
        return await _watch_event(self._w)
