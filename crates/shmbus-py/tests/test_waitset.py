"""One WaitSet over endpoints of every kind."""

import threading

import pytest

import shmbus


def test_wait_on_every_kind(domain, tmp_path):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=16)
    queue = shmbus.Queue.create_or_open(domain, "q", capacity=4, max_message_len=16)
    stream = shmbus.Stream.create_or_open(domain, "s", capacity=4096)
    pool = shmbus.Pool.create_or_open(domain, "p", max_workers=1, max_job_len=16)
    journal = shmbus.Journal.create_or_open(tmp_path / "j")
    sub, cons, reader, tailer = topic.subscriber(), queue.consumer(), stream.reader(), journal.tailer_at_end()
    disp, worker = pool.dispatcher(), pool.worker()
    chans = [sub, cons, reader, tailer, worker]
    ws = shmbus.WaitSet()
    assert ws.poll(chans) == []
    with pytest.raises(shmbus.Timeout):
        ws.wait(chans, timeout=0.05)

    queue.producer().send(b"q")
    assert ws.wait(chans, timeout=5) == [1]
    assert cons.try_recv() == b"q"

    topic.publisher().send(b"t")
    journal.appender().send(b"j")
    assert ws.wait(chans, timeout=5) == [0, 3]
    assert sub.try_recv().data == b"t" and tailer.try_recv().data == b"j"

    stream.writer().send(b"s")
    assert ws.wait(chans) == [2]
    reader.try_recv()

    with pytest.raises(shmbus.Empty):
        worker.try_recv()  # idle now: the dispatcher has a worker to give work to
    assert ws.wait([disp], timeout=5) == [0]
    disp.try_send(b"job")
    assert ws.wait(chans, timeout=5) == [4]
    assert worker.try_recv().data == b"job"


def test_wait_wakes_from_another_thread(domain):
    queue = shmbus.Queue.create_or_open(domain, "q", capacity=4, max_message_len=16)
    cons, prod = queue.consumer(), queue.producer()
    t = threading.Thread(target=lambda: prod.send(b"x"))
    ready = []
    waiter = threading.Thread(target=lambda: ready.append(shmbus.WaitSet().wait([cons], timeout=60)))
    waiter.start()
    t.start()
    waiter.join(60)
    t.join(60)
    assert ready == [[0]]


def test_bad_lists(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=16)
    sub = topic.subscriber()
    ws = shmbus.WaitSet()
    with pytest.raises(ValueError, match="at least one"):
        ws.wait([])
    with pytest.raises(ValueError, match="twice"):
        ws.wait([sub, sub], timeout=0)
    with pytest.raises(TypeError, match="cannot wait on a Publisher"):
        ws.wait([topic.publisher()])
    sub.close()
    with pytest.raises(shmbus.Closed):
        ws.wait([sub])


def test_an_endpoint_lending_an_item_is_busy(domain):
    stream = shmbus.Stream.create_or_open(domain, "s", capacity=4096)
    writer, reader = stream.writer(), stream.reader()
    writer.send(b"r")
    record = reader.try_recv_ref()
    with pytest.raises(shmbus.Busy):
        shmbus.WaitSet().wait([reader], timeout=0)
    record.consume()
    with pytest.raises(shmbus.Timeout):
        shmbus.WaitSet().wait([reader], timeout=0)
