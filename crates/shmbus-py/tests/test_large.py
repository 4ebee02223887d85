"""Large messages: `recv_into` a caller's buffer on every receiver, owned receives that copy
once (and stay valid after the channel moves on), and DLPack export of lent items
(`numpy.from_dlpack`), which keeps the item pinned as a buffer view does."""

import asyncio
import gc
import importlib
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import shmbus

KINDS = ["topic", "queue", "stream", "pool", "journal"]
MAX = 1 << 17  # 128 KiB: above the size from which owned receives copy once


def payload(n, k=0):
    return ((np.arange(n, dtype=np.uint32) * 7 + k) % 251).astype(np.uint8).tobytes()


class Pair:
    """A sender and a receiver of one kind, on fresh channels."""

    def __init__(self, kind, domain, tmp_path, max_len=MAX):
        self.kind = kind
        if kind == "topic":
            t = shmbus.Topic.create_or_open(domain, "t", max_message_len=max_len, history=4)
            self.rx, self.tx = t.subscriber(), t.publisher()
            self.send = self.tx.send
        elif kind == "queue":
            q = shmbus.Queue.create_or_open(domain, "q", max_message_len=max_len, capacity=4)
            self.rx, self.tx = q.consumer(), q.producer()
            self.send = self.tx.send
        elif kind == "stream":
            s = shmbus.Stream.create_or_open(domain, "s", capacity=1 << (4 * max_len).bit_length())
            self.tx, self.rx = s.writer(), s.reader()
            self.send = self.tx.send
        elif kind == "pool":
            p = shmbus.Pool.create_or_open(domain, "p", max_job_len=max_len, max_workers=1)
            self.dispatcher, self.rx = p.dispatcher(), p.worker()
            self.send = self._dispatch
        else:
            j = shmbus.Journal.create_or_open(tmp_path / "j", max_entry_len=max_len)
            self.tx, self.rx = j.appender(), j.tailer()
            self.send = self.tx.send

    def close_sender(self):
        """Lets another process take the sending role (a stream has one writer, a pool one
        dispatcher)."""
        (self.dispatcher if self.kind == "pool" else self.tx).close()

    def _dispatch(self, data):
        # The worker takes a job only while idle: a receive that finds nothing makes it so.
        try:
            got = self.rx.try_recv()
            raise AssertionError(f"unexpected job {got!r}")
        except shmbus.Empty:
            pass
        self.dispatcher.try_send(data)


def length(result):
    """`recv_into` returns the length, or a tuple starting with it."""
    return result if isinstance(result, int) else result[0]


def owned(rx, kind, timeout=5):
    got = rx.recv(timeout=timeout)
    return got if kind in ("queue", "stream") else got.data


@pytest.mark.parametrize("kind", KINDS)
def test_recv_into_exact_larger_and_numpy(kind, domain, tmp_path):
    pair = Pair(kind, domain, tmp_path)
    n = 70_000
    pair.send(payload(n, 1))
    exact = bytearray(n)
    assert length(pair.rx.recv_into(exact, timeout=5)) == n
    assert exact == payload(n, 1)

    pair.send(payload(n, 2))
    arr = np.zeros(MAX, dtype=np.uint8)
    assert length(pair.rx.recv_into(arr, timeout=5)) == n
    assert arr[:n].tobytes() == payload(n, 2)
    assert not arr[n:].any()

    # A memoryview of part of a larger buffer is a buffer too.
    pair.send(payload(10, 3))
    big = bytearray(100)
    assert length(pair.rx.try_recv_into(memoryview(big)[50:])) == 10
    assert big[50:60] == payload(10, 3)
    with pytest.raises(shmbus.Empty):
        pair.rx.try_recv_into(big)


@pytest.mark.parametrize("kind", KINDS)
def test_recv_into_a_buffer_too_small_loses_nothing(kind, domain, tmp_path):
    pair = Pair(kind, domain, tmp_path)
    n = 70_000
    pair.send(payload(n, 4))
    small = bytearray(n - 1)
    with pytest.raises(shmbus.BufferTooSmall) as e:
        pair.rx.recv_into(small, timeout=5)
    assert e.value.needed == n and isinstance(e.value, ValueError)
    # Asked again with room: the same message.
    buf = bytearray(n)
    assert length(pair.rx.recv_into(buf, timeout=5)) == n
    assert buf == payload(n, 4)

    # Too small again, then an owned receive: still the same message.
    pair.send(payload(n, 5))
    with pytest.raises(shmbus.BufferTooSmall):
        pair.rx.try_recv_into(small)
    assert owned(pair.rx, kind) == payload(n, 5)


@pytest.mark.parametrize("kind", KINDS)
def test_recv_into_metadata_and_refusals(kind, domain, tmp_path):
    pair = Pair(kind, domain, tmp_path)
    sent = pair.send(b"abc")
    got = pair.rx.recv_into(bytearray(8), timeout=5)
    if kind in ("topic", "journal"):
        n, seq_or_index, ts_ns = got
        assert (n, seq_or_index) == (3, sent) and ts_ns > 0
    elif kind == "pool":
        n, job_id = got
        assert n == 3 and isinstance(job_id, int)
    else:
        assert got == 3
    # A read-only buffer cannot be written into.
    pair.send(b"def")
    with pytest.raises((TypeError, BufferError)):
        pair.rx.recv_into(b"12345678", timeout=5)
    assert length(pair.rx.recv_into(bytearray(8), timeout=5)) == 3


CHILD = r"""
import sys, time
import numpy as np
import shmbus
kind, root, name, jdir, count = sys.argv[1:6]
domain = shmbus.Domain(name, root=root)
def payload(n, k):
    return ((np.arange(n, dtype=np.uint32) * 7 + k) % 251).astype(np.uint8).tobytes()
if kind == "topic":
    send = shmbus.Topic.open(domain, "t").publisher().send
elif kind == "queue":
    send = shmbus.Queue.open(domain, "q").producer().send
elif kind == "stream":
    send = shmbus.Stream.open(domain, "s").writer().send
elif kind == "journal":
    send = shmbus.Journal.open(jdir).appender().send
else:
    d = shmbus.Pool.open(domain, "p").dispatcher()
    def send(data):
        deadline = time.monotonic() + 30
        while True:
            try:
                return d.try_send(data)
            except shmbus.Full:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.001)
for k in range(int(count)):
    send(payload(1000 + 9000 * k, k))
    if kind == "topic":
        time.sleep(0.05)  # a history of 4: keep within it
"""


@pytest.mark.parametrize("kind", KINDS)
def test_recv_into_a_numpy_array_across_processes(kind, domain, tmp_path):
    pair = Pair(kind, domain, tmp_path)
    pair.close_sender()
    count = 6
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, kind, str(domain.root), domain.name, str(tmp_path / "j"), str(count)],
        stderr=subprocess.PIPE,
        text=True,
    )
    arr = np.empty(MAX, dtype=np.uint8)
    deadline = time.monotonic() + 60
    for k in range(count):
        while True:
            try:
                n = length(pair.rx.recv_into(arr, timeout=30))
                break
            except shmbus.Disconnected:  # the child has not taken the writer's role yet
                assert time.monotonic() < deadline
                time.sleep(0.005)
        assert n == 1000 + 9000 * k
        assert arr[:n].tobytes() == payload(n, k)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 0, err


@pytest.mark.parametrize("kind", KINDS)
def test_large_owned_receives_are_whole(kind, domain, tmp_path):
    """The one-copy path of `recv`, `try_recv` and `recv_async`, on a 6,220,800-byte frame."""
    frame = 6_220_800
    pair = Pair(kind, domain, tmp_path, max_len=frame)
    for k in range(3):
        pair.send(payload(frame, k))
        if k == 0:
            assert owned(pair.rx, kind) == payload(frame, k)
        elif k == 1:
            got = pair.rx.try_recv()
            assert (got if kind in ("queue", "stream") else got.data) == payload(frame, k)
        else:
            got = asyncio.run(pair.rx.recv_async(timeout=5))
            assert (got if kind in ("queue", "stream") else got.data) == payload(frame, k)


def test_a_received_copy_outlives_its_slot(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=MAX, history=2, spare_slots=1)
    pub, sub = topic.publisher(), topic.subscriber()
    pub.send(payload(MAX, 9))
    msg = sub.recv(timeout=5)
    for k in range(10):  # every slot is written again
        pub.send(payload(MAX, k))
    assert msg.data == payload(MAX, 9)
    assert sub.get(11).data == payload(MAX, 9)  # `get` copies once too
    newest = sub.latest()  # and `latest`
    assert (newest.seq, newest.data) == (11, payload(MAX, 9))
    sub.seek(10)
    held = [sub.recv_ref(timeout=5), sub.recv_ref(timeout=5)]  # every pin held: `latest` still copies
    assert sub.latest().data == payload(MAX, 9)
    for s in held:
        s.release()


def test_owned_receive_with_every_pin_held(domain):
    """With the pin budget taken by samples, an owned receive still copies the message."""
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=MAX, history=8)
    pub, sub = topic.publisher(), topic.subscriber()
    for k in range(3):
        pub.send(payload(5000, k))
    held = [sub.recv_ref(timeout=5), sub.recv_ref(timeout=5)]
    assert sub.recv(timeout=5).data == payload(5000, 2)
    for s in held:
        s.release()


# --- DLPack ---------------------------------------------------------------------------


def pinned_slots(domain):
    return shmbus.Topic.status(domain, "t")["pinned_slots"]


def import_keeps_the_sample_pinned(domain, importer, check=None):
    """`importer(sample)` (an array library's `from_dlpack`) views a received sample in
    place: the sample is pinned while the array lives, even after the `Sample` object is
    gone, and the publisher writes around it. `check(array, sample)` looks at it first."""
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=MAX, history=2, spare_slots=1)
    pub, sub = topic.publisher(), topic.subscriber()
    pub.send(payload(MAX, 1))
    sample = sub.recv_ref(timeout=5)
    arr = importer(sample)
    assert np.asarray(arr).dtype == np.uint8 and np.asarray(arr).shape == (MAX,)
    assert np.asarray(arr).tobytes() == payload(MAX, 1)
    if check is not None:
        check(arr, sample)
    with pytest.raises(BufferError, match="view"):
        sample.release()
    del sample
    gc.collect()
    # The array alone keeps the slot pinned: the publisher writes around it.
    assert pinned_slots(domain) == 1
    for k in range(10):
        pub.send(payload(MAX, 100 + k))
    assert np.asarray(arr).tobytes() == payload(MAX, 1)
    assert pinned_slots(domain) == 1
    del arr
    eventually(lambda: pinned_slots(domain) == 0, "the slot was never unpinned")


def eventually(done, what, seconds=10):
    """Waits for `done()` (an importer may let go of a tensor a moment after its array is
    deleted), collecting garbage between looks."""
    end = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < end, what
        gc.collect()
        time.sleep(0.01)


def give_back(item, how="release"):
    """`item.release()` (or `consume()`), once the importer has let go of its tensors."""
    def gone():
        try:
            getattr(item, how)()
            return True
        except BufferError:
            return False

    eventually(gone, f"the {type(item).__name__} stayed viewed")


def test_dlpack_keeps_the_sample_pinned_until_the_array_is_gone(domain):
    def check(arr, sample):
        assert sample.__dlpack_device__() == (1, 0)
        assert not arr.flags.writeable

    import_keeps_the_sample_pinned(domain, np.from_dlpack, check)


def test_dlpack_of_a_loan_is_writable(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=64)
    pub, sub = topic.publisher(), topic.subscriber()
    loan = pub.loan()
    arr = np.from_dlpack(loan)
    assert arr.flags.writeable and arr.shape == (64,)
    arr[:] = 7
    with pytest.raises(BufferError):
        loan.send()
    del arr
    loan.send()
    assert sub.recv(timeout=5).data == bytes([7]) * 64


def test_dlpack_refusals(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=MAX)
    pub, sub = topic.publisher(), topic.subscriber()
    pub.send(payload(MAX))
    sample = sub.recv_ref(timeout=5)
    with pytest.raises(BufferError):
        sample.__dlpack__(max_version=(1, 0), copy=True)
    with pytest.raises(BufferError):
        sample.__dlpack__(copy=True)  # the legacy ABI, after its alias was made
    with pytest.raises(BufferError):
        sample.__dlpack__(max_version=(1, 0), dl_device=(2, 0))  # CUDA
    # Nothing refused left a view behind.
    sample.release()
    with pytest.raises(BufferError, match="released"):
        sample.__dlpack__(max_version=(1, 0))
    assert pinned_slots(domain) == 0


def test_dlpack_of_records_jobs_and_entries(domain, tmp_path):
    n = 70_000
    for kind in ("stream", "pool", "journal"):
        pair = Pair(kind, domain, tmp_path)
        pair.send(payload(n, 3))
        item = pair.rx.recv_ref(timeout=5)
        arr = np.from_dlpack(item)
        assert arr.tobytes() == payload(n, 3) and not arr.flags.writeable
        with pytest.raises(BufferError):
            item.release()
        del arr
        gc.collect()
        item.release()


class Legacy:
    """An importer's side of an item when it speaks DLPack's legacy ABI only (as JAX does):
    `__dlpack__` without `max_version`."""

    def __init__(self, item):
        self.item = item

    def __dlpack_device__(self):
        return self.item.__dlpack_device__()

    def __dlpack__(self, **_):
        return self.item.__dlpack__()


def test_dlpack_legacy_export_keeps_the_sample_pinned(domain):
    def check(arr, sample):
        # A second mapping of the slot's pages, not the slot's own address.
        in_place = np.frombuffer(sample, np.uint8)
        assert arr.ctypes.data != in_place.ctypes.data
        assert arr.ctypes.data % 4096 == in_place.ctypes.data % 4096

    import_keeps_the_sample_pinned(domain, lambda sample: np.from_dlpack(Legacy(sample)), check)


WRITE_THROUGH_LEGACY = r"""
import ctypes, sys
import numpy as np
import shmbus

class Legacy:
    def __init__(self, item): self.item = item
    def __dlpack_device__(self): return self.item.__dlpack_device__()
    def __dlpack__(self, **_): return self.item.__dlpack__()

sub = shmbus.Topic.open(shmbus.Domain(sys.argv[1], root=sys.argv[2]), "t").subscriber()
sub.seek(1)
sample = sub.recv_ref(timeout=5)
arr = np.from_dlpack(Legacy(sample))
print("exported", arr[0], flush=True)
ctypes.memset(arr.ctypes.data, 0xEE, 64)  # faults: the alias is read-only
print("wrote", flush=True)
"""


def test_a_store_through_a_legacy_export_faults_and_changes_nothing(domain, tmp_path):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=MAX, history=2, spare_slots=1)
    pub, sub = topic.publisher(), topic.subscriber()
    pub.send(payload(MAX, 4))
    def no_core_dump():
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    child = subprocess.run([sys.executable, "-c", WRITE_THROUGH_LEGACY, domain.name, str(tmp_path)],
                           capture_output=True, text=True, timeout=60, preexec_fn=no_core_dump)
    assert child.stdout.startswith("exported"), child.stderr
    assert "wrote" not in child.stdout
    assert child.returncode == -11, (child.returncode, child.stderr)  # SIGSEGV
    assert sub.recv(timeout=5).data == payload(MAX, 4)


def other_items(domain, tmp_path, k):
    """A stream record running over the end of its ring (it lies in the ring's two mappings),
    a pool job and a journal entry, each read in place and holding `payload(n, k)`; each
    yielded, then given back."""
    s = shmbus.Stream.create_or_open(domain, "s", capacity=1 << 18)
    w, r = s.writer(), s.reader()
    w.send(payload(200_000, 1))
    r.recv(timeout=5)
    w.send(payload(100_000, k))  # bytes 200,016 .. 300,016 of a 262,144-byte ring
    rec = r.recv_ref(timeout=5)
    yield rec, payload(100_000, k)
    give_back(rec, "consume")
    for kind in ("pool", "journal"):
        pair = Pair(kind, domain, tmp_path)
        pair.send(payload(70_000, k))
        item = pair.rx.recv_ref(timeout=5)
        yield item, payload(70_000, k)
        give_back(item)


def test_dlpack_legacy_export_of_records_over_the_ring_end_jobs_and_entries(domain, tmp_path):
    for item, want in other_items(domain, tmp_path, 2):
        arr = np.from_dlpack(Legacy(item))
        assert arr.tobytes() == want
        in_place = np.frombuffer(item, np.uint8)
        assert arr.ctypes.data != in_place.ctypes.data  # the alias, not the item
        del in_place
        with pytest.raises(BufferError):
            item.release()
        del arr


def test_dlpack_legacy_export_of_a_small_sample_is_a_copy(domain):
    # A topic's message of a few dozen bytes is copied into the subscriber's memory when
    # received: nothing to map again, and nobody else reads it.
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=32)
    pub, sub = topic.publisher(), topic.subscriber()
    pub.send(b"small message")
    sample = sub.recv_ref(timeout=5)
    arr = np.from_dlpack(Legacy(sample))
    assert arr.tobytes() == b"small message"
    in_place = np.frombuffer(sample, np.uint8)
    assert arr.ctypes.data != in_place.ctypes.data  # a copy, not the item
    del in_place
    with pytest.raises(BufferError):
        sample.release()  # a view until the importer lets go, as any export
    del arr
    give_back(sample)


def require(module):
    """`module`, imported; skipped when missing unless SHMBUS_REQUIRE_INTEROP is set (as
    `make test` does, which installs it)."""
    if os.environ.get("SHMBUS_REQUIRE_INTEROP"):
        return importlib.import_module(module)
    return pytest.importorskip(module)


def test_dlpack_into_jax(domain, tmp_path):
    jnp = require("jax.numpy")
    # Viewed in place, not copied: the sample stays pinned while the JAX array lives.
    import_keeps_the_sample_pinned(domain, jnp.from_dlpack)
    for item, want in other_items(domain, tmp_path, 7):
        assert np.asarray(jnp.from_dlpack(item)).tobytes() == want


def test_dlpack_into_torch(domain):
    torch = pytest.importorskip("torch")
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=MAX)
    pub, sub = topic.publisher(), topic.subscriber()
    pub.send(payload(MAX, 5))
    sample = sub.recv_ref(timeout=5)
    t = torch.from_dlpack(sample)
    assert t.dtype == torch.uint8 and t.numel() == MAX
    assert bytes(t.numpy()) == payload(MAX, 5)
