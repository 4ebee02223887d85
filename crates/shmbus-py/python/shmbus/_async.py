"""The coroutines behind ``recv_async()``, ``async for`` and ``wait_async`` (docs/python.md,
"Async").

Each one polls (one poll of the Rust receive or wait, without the GIL: the item, or None
after registering ``wake`` with the process's waiter thread), and when that finds nothing
awaits an asyncio future that ``wake`` resolves, then polls again. A message is taken only
by the poll that returns it, and nothing is awaited between that poll and the return, so a
cancelled await has taken nothing. The registration lives in a ``_Registration``, cancelled
when the coroutine ends, however it ends (an ``async for`` keeps one for all its items, and
cancels it when an item's await is cancelled or fails).
"""

import asyncio

from . import _shmbus


def _resolve(fut):
    if not fut.done():  # cancelled meanwhile, or woken twice
        fut.set_result(None)


def _waker(loop, fut):
    """What the waiter thread calls (holding the GIL) when a poll may now succeed."""

    def wake():
        try:
            loop.call_soon_threadsafe(_resolve, fut)
        except RuntimeError:
            pass  # the loop is closed: nothing awaits `fut` any more

    return wake


async def _until(poll):
    """``poll(wake)`` until it returns something other than None."""
    loop = asyncio.get_running_loop()
    while True:
        fut = loop.create_future()
        result = poll(_waker(loop, fut))
        if result is not None:
            return result
        await fut


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
