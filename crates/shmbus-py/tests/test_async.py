"""Async receive: every receiving endpoint's `recv_async()` and `async for` in order, from
another process and from this one; cancelled awaits losing nothing; `wait_async` over
several channels; many awaits in one loop; the same results and exceptions as the blocking
receives; idle awaits using no CPU; a SIGKILLed stream writer ending a waiting receive;
each loop's wake-up descriptor given back; a loop that cannot watch one; and a child forked after awaits (multiprocessing's fork start method) awaiting its own."""

import asyncio
import gc
import multiprocessing
import os
import pathlib
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import shmbus

N = 2000
TESTS = pathlib.Path(__file__).resolve().parent
KINDS = ["topic", "reliable", "queue", "stream", "pool", "journal"]


def num(data):
    return int.from_bytes(data, "little")


def run(coro, timeout=120):
    """Runs `coro` in a new event loop, failing (rather than hanging) after `timeout`."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def sender_main(kind, root, domain_name, n, journal_dir):
    """Sends `n` numbered messages on the channel of `kind`, pausing now and then so that
    the receiver finds it empty and waits. Run in a child process or in a thread."""
    d = shmbus.Domain(domain_name, root=root)
    if kind in ("topic", "reliable"):
        ep = shmbus.Topic.open(d, "t" if kind == "topic" else "r").publisher()
        send = lambda m: ep.send(m, timeout=60)  # noqa: E731
    elif kind == "queue":
        ep = shmbus.Queue.open(d, "q").producer()
        send = lambda m: ep.send(m, timeout=60)  # noqa: E731
    elif kind == "stream":
        ep = shmbus.Stream.open(d, "s").writer()
        send = lambda m: ep.send(m, timeout=60)  # noqa: E731
    elif kind == "pool":
        ep = shmbus.Pool.open(d, "p").dispatcher()

        def send(m):
            while True:
                try:
                    return ep.try_send(m)
                except shmbus.Full:  # the worker is busy with the previous job
                    time.sleep(0.0001)

    else:
        ep = shmbus.Journal.open(journal_dir).appender()
        send = ep.send
    with ep:  # a stream's writer closing ends the reader's iteration
        for i in range(int(n)):
            send(i.to_bytes(8, "little"))
            if i % 100 == 99:
                time.sleep(0.002)


CHILD = f"import sys; sys.path.insert(0, {str(TESTS)!r}); import test_async; test_async.sender_main(*sys.argv[1:])"


def receiver(kind, domain, tmp_path):
    """The receiving endpoint of `kind` (made before any sender starts), and how to get the
    payload out of what it receives."""
    if kind == "topic":
        return shmbus.Topic.create_or_open(domain, "t", max_message_len=8, history=4096).subscriber(), lambda m: m.data
    if kind == "reliable":
        topic = shmbus.Topic.create_or_open(domain, "r", max_message_len=8, history=16, policy="block", reliable_timeout=60)
        return topic.reliable_subscriber(), lambda m: m.data
    if kind == "queue":
        return shmbus.Queue.create_or_open(domain, "q", capacity=64, max_message_len=8).consumer(), bytes
    if kind == "stream":
        return shmbus.Stream.create_or_open(domain, "s", capacity=4096).reader(), bytes
    if kind == "pool":
        worker = shmbus.Pool.create_or_open(domain, "p", max_workers=1, max_job_len=8).worker()
        return worker, lambda j: j.data
    return shmbus.Journal.create_or_open(tmp_path / "j").tailer(), lambda e: e.data


def senders_of(domain, tmp_path):
    """A send function per kind, for the channels `receiver` made. The pool's raises `Full`
    while the worker is busy (until its next receive finds nothing)."""
    return {
        "topic": shmbus.Topic.open(domain, "t").publisher().send,
        "reliable": shmbus.Topic.open(domain, "r").publisher().send,
        "queue": shmbus.Queue.open(domain, "q").producer().send,
        "stream": shmbus.Stream.open(domain, "s").writer().send,
        "pool": shmbus.Pool.open(domain, "p").dispatcher().try_send,
        "journal": shmbus.Journal.open(tmp_path / "j").appender().send,
    }


def start_sender(how, kind, domain, tmp_path, n=N):
    """Starts `sender_main` in a child process or a thread; returns a function that waits
    for it and checks it succeeded."""
    args = [kind, str(domain.root), domain.name, str(n), str(tmp_path / "j")]
    if how == "process":
        child = subprocess.Popen([sys.executable, "-c", CHILD, *args], stderr=subprocess.PIPE, text=True)

        def join():
            _, err = child.communicate(timeout=120)
            assert child.returncode == 0, err

        return join
    failure = []

    def target():
        try:
            sender_main(*args)
        except BaseException as e:  # reported by join()
            failure.append(e)

    t = threading.Thread(target=target)
    t.start()

    def join():
        t.join(120)
        assert not t.is_alive() and failure == []

    return join


@pytest.mark.parametrize("how", ["process", "thread"])
@pytest.mark.parametrize("kind", KINDS)
def test_every_receiver_awaits_every_message_in_order(kind, how, domain, tmp_path):
    ep, data = receiver(kind, domain, tmp_path)
    join = start_sender(how, kind, domain, tmp_path)
    if kind == "stream":
        # Without a writer a reader's receive raises Disconnected (its iteration ends); the
        # writer cannot finish before the reader reads (the ring holds a fraction of it all).
        assert ep.wait_for_writer(timeout=30)

    async def main():
        if kind == "stream":
            # Iteration ends where the sync one does: the writer gone, the ring read.
            return [num(data(r)) async for r in ep]
        return [num(data(await ep.recv_async())) for _ in range(N)]

    assert run(main()) == list(range(N))
    join()


def test_async_for_on_every_receiver_with_a_sender_in_the_same_loop(domain, tmp_path):
    """`async for` yields what `for` yields; the sender is a task of the receiving loop."""
    endpoints = {kind: receiver(kind, domain, tmp_path) for kind in KINDS}
    senders = senders_of(domain, tmp_path)
    count = 50

    async def consume(kind):
        ep, data = endpoints[kind]
        got = []
        async for item in ep:
            got.append(num(data(item)))
            if len(got) == count:
                return got

    async def produce():
        for i in range(count):
            await asyncio.sleep(0.001)  # the receivers wait for each message
            for send in senders.values():
                while True:
                    try:
                        send(i.to_bytes(8, "little"))
                        break
                    except shmbus.Full:  # the pool's worker has yet to take the last job
                        await asyncio.sleep(0.0005)

    async def main():
        consumers = [asyncio.ensure_future(consume(kind)) for kind in KINDS]
        await produce()
        return await asyncio.gather(*consumers)

    assert run(main()) == [list(range(count))] * len(KINDS)


def test_cancelled_receives_lose_nothing(domain, tmp_path):
    """1000 cycles of: a receive cancelled by `wait_for`'s timeout, a send, a receive that
    gets that very message; on every receiver."""
    endpoints = {kind: receiver(kind, domain, tmp_path) for kind in KINDS}
    senders = senders_of(domain, tmp_path)

    async def main(kind, cycles):
        ep, data = endpoints[kind]
        for i in range(cycles):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(ep.recv_async(), 0.001)
            senders[kind](i.to_bytes(8, "little"))
            assert num(data(await ep.recv_async())) == i

    for kind in KINDS:
        run(main(kind, 1000))


def test_receives_cancelled_while_messages_race_in_lose_nothing(domain):
    """A thread sends while receives are cancelled at random moments (`wait_for` timeouts,
    `task.cancel()`): every message arrives once, in order."""
    queue = shmbus.Queue.create_or_open(domain, "q", capacity=16, max_message_len=8)
    cons, prod = queue.consumer(), queue.producer()
    rng = random.Random(7)

    def send():
        for i in range(N):
            prod.send(i.to_bytes(8, "little"), timeout=60)
            if rng.random() < 0.1:
                time.sleep(rng.choice([0, 0.0001, 0.0005]))

    async def main():
        got, cancels = [], 0
        while len(got) < N:
            if rng.random() < 0.5:
                try:
                    got.append(num(await asyncio.wait_for(cons.recv_async(), rng.choice([0, 0.00005, 0.0002, 0.001]))))
                except TimeoutError:
                    cancels += 1
            else:
                task = asyncio.ensure_future(cons.recv_async())
                await asyncio.sleep(rng.choice([0, 0.0001]))
                task.cancel()
                try:
                    got.append(num(await task))
                except asyncio.CancelledError:
                    cancels += 1
        return got, cancels

    t = threading.Thread(target=send)
    t.start()
    got, cancels = run(main())
    t.join(60)
    assert got == list(range(N))
    assert cancels > 0
    with pytest.raises(shmbus.Empty):
        cons.try_recv()


def test_the_losers_of_asyncio_wait_lose_nothing(domain):
    """`asyncio.wait(..., FIRST_COMPLETED)` over receives on three queues, the losers
    cancelled each round: every message is received once, in order per queue."""
    names = ["a", "b", "c"]
    consumers = [shmbus.Queue.create_or_open(domain, n, capacity=1024, max_message_len=8).consumer() for n in names]
    producers = [shmbus.Queue.open(domain, n).producer() for n in names]
    per = 300

    def send():
        for i in range(per):
            for k in range(3):
                producers[(i + k) % 3].send(i.to_bytes(8, "little"), timeout=60)
            if i % 20 == 0:
                time.sleep(0.0005)

    async def main():
        nxt = [0, 0, 0]
        while min(nxt) < per:
            tasks = {asyncio.ensure_future(c.recv_async()): k for k, c in enumerate(consumers) if nxt[k] < per}
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            for t in pending:  # a loser that completed anyway before its cancel counts too
                if not t.cancelled():
                    done.add(t)
            for t in done:
                k = tasks[t]
                assert num(t.result()) == nxt[k], f"queue {names[k]}"
                nxt[k] += 1
        return nxt

    t = threading.Thread(target=send)
    t.start()
    assert run(main()) == [per] * 3
    t.join(60)
    assert all(not c.has_message() for c in consumers)


def test_wait_async_selects_over_several_channels(domain, tmp_path):
    """`wait_async` returns the ready indices as `WaitSet.wait` does; receiving with
    `try_recv` after it gets every message, in order per channel."""
    names = ["a", "b", "c"]
    consumers = [shmbus.Queue.create_or_open(domain, n, capacity=1024, max_message_len=8).consumer() for n in names]
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=8, history=4096)
    sub = topic.subscriber()
    producers = [shmbus.Queue.open(domain, n).producer() for n in names]
    pub = topic.publisher()
    per = 500

    def send():
        for i in range(per):
            m = i.to_bytes(8, "little")
            for k in range(3):
                producers[(i + k) % 3].send(m, timeout=60)
            pub.send(m)
            if i % 50 == 0:
                time.sleep(0.0005)

    chans = [*consumers, sub]

    async def main():
        nxt = [0] * 4
        while min(nxt) < per:
            ready = await shmbus.wait_async(chans, timeout=30)
            assert ready and ready == sorted(set(ready))
            for k in ready:
                while True:
                    try:
                        m = chans[k].try_recv()
                    except shmbus.Empty:
                        break
                    assert num(m if k < 3 else m.data) == nxt[k]
                    nxt[k] += 1
        return nxt

    t = threading.Thread(target=send)
    t.start()
    assert run(main()) == [per] * 4
    t.join(60)
    assert shmbus.WaitSet().poll(chans) == []


def test_wait_async_checks_and_raises_as_wait_does(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=16)
    queue = shmbus.Queue.create_or_open(domain, "q", capacity=4, max_message_len=16)
    sub, cons = topic.subscriber(), queue.consumer()
    with pytest.raises(ValueError, match="at least one"):
        shmbus.wait_async([])
    with pytest.raises(ValueError, match="twice"):
        shmbus.wait_async([sub, sub])
    with pytest.raises(TypeError, match="cannot wait on a Publisher"):
        shmbus.wait_async([topic.publisher()])
    with pytest.raises(ValueError, match="non-negative"):
        shmbus.wait_async([sub], timeout=-1)

    async def main():
        with pytest.raises(shmbus.Timeout) as e:
            await shmbus.wait_async([sub, cons], timeout=0.05)
        with pytest.raises(shmbus.Timeout) as blocking:
            shmbus.WaitSet().wait([sub, cons], timeout=0.01)
        assert str(e.value) == str(blocking.value)
        # Ready now: no waiting at all; a generator of channels is taken too.
        queue.producer().send(b"x")
        assert await shmbus.wait_async(c for c in [sub, cons]) == [1]
        assert await shmbus.wait_async([sub, cons], timeout=0) == [1]
        cons.close()
        with pytest.raises(shmbus.Closed):
            await shmbus.wait_async([sub, cons])

    run(main())


def test_200_topics_awaited_at_once(domain):
    """200 receives wait in one loop (more channels than one futex_waitv takes), each woken
    by its own topic's message, twice over."""
    count = 200
    subs = [shmbus.Topic.create_or_open(domain, f"t{k}", max_message_len=8, history=4).subscriber() for k in range(count)]
    pubs = [shmbus.Topic.open(domain, f"t{k}").publisher() for k in range(count)]
    order = list(range(count))
    random.Random(3).shuffle(order)

    def send(rounds):
        for r in range(rounds):
            time.sleep(0.05)  # every receive is waiting
            for k in order:
                pubs[k].send((k * 10 + r).to_bytes(8, "little"))

    async def main():
        results = []
        for r in range(2):
            results.append(await asyncio.gather(*(s.recv_async(timeout=60) for s in subs)))
        return results

    t = threading.Thread(target=send, args=(2,))
    t.start()
    rounds = run(main())
    t.join(60)
    for r, msgs in enumerate(rounds):
        assert [num(m.data) for m in msgs] == [k * 10 + r for k in range(count)]


def test_results_and_exceptions_are_the_blocking_receives(domain, tmp_path):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=64, history=4)
    pub, s_block, s_async = topic.publisher(), topic.subscriber(), topic.subscriber()
    queue = shmbus.Queue.create_or_open(domain, "q", capacity=4, max_message_len=8)
    cons = queue.consumer()
    stream = shmbus.Stream.create_or_open(domain, "s", capacity=4096)
    writer, reader = stream.writer(), stream.reader()

    async def main():
        # Lagged, with the same count of missed messages; then the same messages.
        for i in range(20):
            pub.send(bytes([i]) * 64)
        with pytest.raises(shmbus.Lagged) as blocking:
            s_block.recv(timeout=1)
        with pytest.raises(shmbus.Lagged) as awaited:
            await s_async.recv_async()
        assert awaited.value.missed == blocking.value.missed > 0
        assert str(awaited.value) == str(blocking.value)
        a, b = s_block.recv(timeout=1), await s_async.recv_async()
        assert type(a) is type(b) is shmbus.Message and (a.seq, a.data) == (b.seq, b.data)

        # A subscriber holding samples still awaits (its receives share the subscriber).
        s_async.seek_latest()
        s_async.try_recv()
        pub.send(b"held" * 16)
        sample = s_async.recv_ref(timeout=1)
        pub.send(b"next")
        assert (await s_async.recv_async(timeout=5)).data == b"next"
        assert sample.pinned and sample.tobytes() == b"held" * 16
        sample.release()

        # Timeout: the class and message of the blocking one; a bad timeout raises at once.
        with pytest.raises(shmbus.Timeout) as blocking:
            cons.recv(timeout=0.01)
        with pytest.raises(shmbus.Timeout) as awaited:
            await cons.recv_async(timeout=0.05)
        assert str(awaited.value) == str(blocking.value)
        assert isinstance(awaited.value, TimeoutError)
        with pytest.raises(ValueError, match="non-negative"):
            cons.recv_async(timeout=-1)
        queue.producer().send(b"now")
        assert await cons.recv_async(timeout=0) == b"now"  # there: no waiting at all

        # Busy: a reader lending a record; Closed.
        writer.send(b"r")
        record = reader.try_recv_ref()
        with pytest.raises(shmbus.Busy):
            reader.recv(timeout=0)
        with pytest.raises(shmbus.Busy):
            await reader.recv_async()
        record.consume()
        cons.close()
        with pytest.raises(shmbus.Closed):
            cons.recv()
        with pytest.raises(shmbus.Closed):
            await cons.recv_async()
        with pytest.raises(shmbus.Closed):
            async for _ in cons:
                pass

        # The pool worker: a `Job` whose `done()` works; `Disconnected` when the dispatcher goes.
        pool = shmbus.Pool.create_or_open(domain, "p", max_workers=1, max_job_len=8)
        disp, worker = pool.dispatcher(), pool.worker()
        task = asyncio.ensure_future(worker.recv_async())
        await asyncio.sleep(0.01)  # the worker is idle (its receive found nothing)
        disp.try_send(b"job", job_id=7)
        job = await task
        assert type(job) is shmbus.Job and (job.id, job.data) == (7, b"job")
        job.done()
        disp.close()
        with pytest.raises(shmbus.Disconnected):
            await worker.recv_async(timeout=10)
        assert worker.dispatcher_finished()

        # The journal tailer: an `Entry`.
        journal = shmbus.Journal.create_or_open(tmp_path / "j")
        tailer = journal.tailer()
        index = journal.appender().send(b"entry")
        entry = await tailer.recv_async(timeout=5)
        assert type(entry) is shmbus.Entry and (entry.index, entry.data) == (index, b"entry")

    run(main())


def test_closing_an_endpoint_ends_the_awaits_on_it_with_closed(domain, tmp_path):
    """Closing notifies no channel; the awaits on the endpoint are woken by the close and
    raise `Closed`, as a blocking receive in another thread does."""
    endpoints = {kind: receiver(kind, domain, tmp_path)[0] for kind in KINDS}
    peers = senders_of(domain, tmp_path)  # live: a stream reader without a writer is Disconnected

    async def main():
        tasks = {kind: asyncio.ensure_future(ep.recv_async()) for kind, ep in endpoints.items()}
        wait = asyncio.ensure_future(shmbus.wait_async([endpoints["topic"], endpoints["journal"]]))
        await asyncio.sleep(0.05)
        assert not any(t.done() for t in [*tasks.values(), wait])
        for ep in endpoints.values():
            ep.close()
        for kind, t in tasks.items():
            with pytest.raises(shmbus.Closed):
                await asyncio.wait_for(t, 30)
        with pytest.raises(shmbus.Closed):
            await asyncio.wait_for(wait, 30)

    run(main())
    del peers


def test_a_sigkilled_stream_writer_ends_a_waiting_receive(domain):
    stream = shmbus.Stream.create_or_open(domain, "s", capacity=4096)
    reader = stream.reader()
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys, time, shmbus
            d = shmbus.Domain(sys.argv[1], root=sys.argv[2])
            writer = shmbus.Stream.open(d, "s").writer()
            writer.send(b"last words")
            time.sleep(600)  # holding the writer until SIGKILLed
        """), domain.name, str(domain.root)],
    )
    try:
        assert reader.wait_for_writer(timeout=30)

        async def main():
            assert await reader.recv_async(timeout=30) == b"last words"
            task = asyncio.ensure_future(reader.recv_async())
            await asyncio.sleep(0.1)
            assert not task.done()  # waiting; the writer notifies nobody when killed
            child.send_signal(signal.SIGKILL)
            child.wait(30)
            with pytest.raises(shmbus.Disconnected) as awaited:
                await asyncio.wait_for(task, 30)
            return awaited.value

        awaited = run(main())
    finally:
        child.kill()
        child.wait(30)
    with pytest.raises(shmbus.Disconnected) as blocking:
        reader.recv(timeout=5)
    assert type(awaited) is type(blocking.value) and str(awaited) == str(blocking.value)


IDLE = textwrap.dedent("""
    import asyncio, resource, sys, time, shmbus
    root, name, jdir, mode = sys.argv[1:5]
    d = shmbus.Domain(name, root=root)
    if mode == "every-kind":
        topic = shmbus.Topic.create_or_open(d, "t", max_message_len=8)
        reliable = shmbus.Topic.create_or_open(d, "r", max_message_len=8, policy="block")
        queue = shmbus.Queue.create_or_open(d, "q", capacity=8, max_message_len=8)
        stream = shmbus.Stream.create_or_open(d, "s", capacity=4096)
        pool = shmbus.Pool.create_or_open(d, "p", max_workers=1, max_job_len=8)
        journal = shmbus.Journal.create_or_open(jdir)
        writer, disp = stream.writer(), pool.dispatcher()  # live peers
        receivers = [topic.subscriber(), reliable.reliable_subscriber(), queue.consumer(), stream.reader(),
                     pool.worker(), journal.tailer()]
    else:
        receivers = [shmbus.Topic.create_or_open(d, f"t{k}", max_message_len=8).subscriber() for k in range(100)]

    def usage():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return time.process_time(), r.ru_nvcsw

    async def main():
        tasks = [asyncio.ensure_future(r.recv_async()) for r in receivers]
        tasks.append(asyncio.ensure_future(shmbus.wait_async(receivers[:3])))
        await asyncio.sleep(0.2)  # every await registered, the waiter thread asleep
        cpu, switches = usage()
        await asyncio.sleep(1.0)
        cpu2, switches2 = usage()
        assert not any(t.done() for t in tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        print(cpu2 - cpu, switches2 - switches)

    asyncio.run(main())
""")


@pytest.mark.parametrize("mode", ["every-kind", "100-topics"])
def test_idle_awaits_use_no_cpu(mode, domain, tmp_path):
    """Receives and a wait await for a second on channels nobody sends on, in a process of
    their own: its CPU time (every thread's, the waiter thread's too) barely moves. One
    receive of every kind (the stream reader's wakes every 50 ms to look for a dead writer,
    the pool worker's and queue consumer's every 100 ms, as their blocking receives do),
    or 100 topic subscribers' (which nothing wakes)."""
    out = subprocess.run(
        [sys.executable, "-c", IDLE, str(domain.root), domain.name, str(tmp_path / "j"), mode],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    cpu, switches = out.stdout.split()
    assert float(cpu) < 0.05, f"{cpu} s of CPU over 1 s of idle awaiting ({switches} context switches)"


def test_a_wake_after_its_loop_closed_is_harmless(domain):
    """A receive left waiting in a loop that is then closed: the message that wakes it goes
    to the next receive, and the wake-up reports no error."""
    queue = shmbus.Queue.create_or_open(domain, "q", capacity=4, max_message_len=8)
    cons, prod = queue.consumer(), queue.producer()
    unraisable = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        loop = asyncio.new_event_loop()
        task = loop.create_task(cons.recv_async())
        loop.run_until_complete(asyncio.sleep(0.05))
        assert not task.done()
        loop.close()  # the receive is still registered, its loop gone
        prod.send(b"late")
        time.sleep(0.2)  # woken meanwhile, through an eventfd its closed loop no longer reads
        assert run(cons.recv_async(timeout=5)) == b"late"
        del task, loop
    finally:
        sys.unraisablehook = hook
    assert unraisable == []


def test_each_loop_wakes_through_an_eventfd_it_gives_back(domain):
    """A wake-up reaches its loop through an eventfd of that loop's (so no Python runs on the
    waiter thread), closed once the loop is gone: fifty loops one after another, each
    awaiting a message sent while it waits, leave no descriptor behind."""
    queue = shmbus.Queue.create_or_open(domain, "q", capacity=4, max_message_len=8)
    cons, prod = queue.consumer(), queue.producer()

    async def one(i):
        later = asyncio.get_running_loop().call_later(0.01, prod.send, i.to_bytes(8, "little"))
        try:
            return num(await cons.recv_async(timeout=30))
        finally:
            later.cancel()

    def fds():
        gc.collect()
        return len(os.listdir("/proc/self/fd"))

    assert run(one(0)) == 0  # the waiter thread and its descriptors exist from here on
    before = fds()
    assert [run(one(i)) for i in range(1, 51)] == list(range(1, 51))
    assert fds() <= before + 1


class NoReaderLoop(asyncio.SelectorEventLoop):
    """A loop that cannot watch a descriptor, as some third-party loops cannot."""

    def add_reader(self, fd, callback, *args):
        raise NotImplementedError


def test_a_loop_that_cannot_watch_a_descriptor_is_woken_by_a_relay_thread(domain):
    """Awaits in a loop without `add_reader` are woken by a relay thread, which ends once
    the loop is closed."""
    queue = shmbus.Queue.create_or_open(domain, "q", capacity=4, max_message_len=8)
    cons, prod = queue.consumer(), queue.producer()

    def relays():
        return [t for t in threading.enumerate() if t.name == "shmbus-loop-relay"]

    async def main():
        got = []
        for i in range(20):
            later = asyncio.get_running_loop().call_later(0.005, prod.send, i.to_bytes(8, "little"))
            got.append(num(await cons.recv_async(timeout=30)))
            later.cancel()
        return got

    loop = NoReaderLoop()
    try:
        assert loop.run_until_complete(asyncio.wait_for(main(), 120)) == list(range(20))
        assert len(relays()) == 1
    finally:
        loop.close()
    deadline = time.monotonic() + 10
    while relays():
        assert time.monotonic() < deadline, "the relay thread outlived its loop"
        time.sleep(0.05)


def test_loops_in_several_threads_await_at_once(domain):
    queues = [shmbus.Queue.create_or_open(domain, f"q{k}", capacity=64, max_message_len=8) for k in range(4)]
    consumers = [q.consumer() for q in queues]
    producers = [q.producer() for q in queues]
    results = {}

    def receive(k):
        async def main():
            return [num(await consumers[k].recv_async()) for _ in range(200)]

        results[k] = run(main())

    threads = [threading.Thread(target=receive, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for i in range(200):
        for p in producers:
            p.send(i.to_bytes(8, "little"), timeout=60)
        if i % 20 == 0:
            time.sleep(0.001)
    for t in threads:
        t.join(120)
    assert results == {k: list(range(200)) for k in range(4)}


def test_no_thread_per_await(domain):
    """However many receives wait, the process has one more thread (the waiter thread),
    not one per await."""
    subs = [shmbus.Topic.create_or_open(domain, f"t{k}", max_message_len=8).subscriber() for k in range(20)]

    async def main():
        tasks = [asyncio.ensure_future(s.recv_async()) for s in subs]
        await asyncio.sleep(0.1)
        threads = len(os.listdir("/proc/self/task"))
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return threads

    before = len(os.listdir("/proc/self/task"))
    during = run(main())
    assert during <= before + 1


def test_a_child_forked_after_awaits_awaits_its_own(domain):
    """multiprocessing's default start method on Linux forks: a child forked after this
    process awaited a receive (so its waiter thread runs) awaits receives of its own (it
    starts a waiter thread of its own)."""
    topic = shmbus.Topic.create_or_open(domain, "f", max_message_len=16)
    sub, pub = topic.subscriber(), topic.publisher()

    async def first():
        later = asyncio.get_running_loop().call_later(0.05, pub.send, b"before fork")
        try:
            return (await sub.recv_async(timeout=30)).data
        finally:
            later.cancel()

    assert run(first()) == b"before fork"

    def child():
        s = topic.subscriber()
        got = asyncio.run(asyncio.wait_for(s.recv_async(), 10))
        os._exit(0 if got.data == b"after fork" else 1)

    p = multiprocessing.get_context("fork").Process(target=child)
    p.start()
    while p.exitcode is None:  # the child receives whichever of these follows its subscribe
        pub.send(b"after fork")
        p.join(0.05)
    assert p.exitcode == 0
