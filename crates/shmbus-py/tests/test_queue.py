"""Queue round trips, full/empty, timeouts, several consumers."""

import threading

import numpy as np
import pytest

import shmbus


def test_round_trip_and_status(domain):
    with shmbus.Queue.create_or_open(domain, "q", capacity=4, max_message_len=32) as queue:
        with queue.producer() as prod, queue.consumer() as cons:
            prod.send(b"one")
            prod.try_send(bytearray(b"two"))
            prod.send(np.frombuffer(b"three", np.uint8), timeout=1)
            assert shmbus.Queue.status(domain, "q")["depth"] == 3
            assert cons.has_message()
            assert [cons.recv(timeout=1), cons.try_recv(), cons.recv()] == [b"one", b"two", b"three"]
            with pytest.raises(shmbus.Empty):
                cons.try_recv()
    status = shmbus.Queue.status(domain, "q")
    assert (status["capacity"], status["sent"], status["received"]) == (4, 3, 3)
    assert shmbus.Queue.open(domain, "q").capacity == 4


def test_full_and_timeouts(domain):
    queue = shmbus.Queue.create_or_open(domain, "q", capacity=2, max_message_len=8)
    prod, cons = queue.producer(), queue.consumer()
    prod.try_send(b"a")
    prod.try_send(b"b")
    assert not prod.has_room()
    with pytest.raises(shmbus.Full):
        prod.try_send(b"c")
    with pytest.raises(shmbus.Timeout):
        prod.send(b"c", timeout=0.05)
    with pytest.raises(shmbus.TooLarge):
        prod.try_send(b"123456789")
    assert cons.recv() == b"a"
    prod.send(b"c", timeout=1)
    assert list(cons.recv() for _ in range(2)) == [b"b", b"c"]
    with pytest.raises(shmbus.Timeout, match="timed out"):
        cons.recv(timeout=0.05)


def test_each_message_goes_to_one_consumer(domain):
    queue = shmbus.Queue.create_or_open(domain, "q", capacity=64, max_message_len=8)
    prod = queue.producer()
    consumers = [queue.consumer() for _ in range(3)]
    got = [[] for _ in consumers]
    n = 300

    def work(i):
        for msg in consumers[i]:
            if msg == b"stop":
                return
            got[i].append(int(msg))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for i in range(n):
        prod.send(b"%d" % i, timeout=60)
    for _ in threads:
        prod.send(b"stop", timeout=60)
    for t in threads:
        t.join(60)
    assert sorted(sum(got, [])) == list(range(n))
