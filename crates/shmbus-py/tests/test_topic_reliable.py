"""Lossless topics: delivery policies, reliable subscribers, TopicFull and Evicted."""

import threading

import pytest

import shmbus

COUNT = 2000


def test_block_topic_delivers_everything_in_order_through_a_small_history(domain):
    topic = shmbus.Topic.create_or_open(
        domain, "t", max_message_len=16, history=4, policy="block", reliable_timeout=60
    )
    assert topic.policy == "block"
    pub, sub = topic.publisher(), topic.reliable_subscriber()
    status = shmbus.Topic.status(domain, "t")
    assert (status["policy"], status["reliable_subscribers"], status["reliable_timeout"]) == ("block", 1, 60.0)
    errors = []

    def publish():
        try:
            for i in range(COUNT):
                assert pub.send(i.to_bytes(4, "little")) == i + 1
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    writer = threading.Thread(target=publish)
    writer.start()
    got = [int.from_bytes(sub.recv(timeout=30).data, "little") for _ in range(COUNT)]
    writer.join(timeout=30)
    assert not writer.is_alive() and errors == []
    assert got == list(range(COUNT))

    # The subscriber stands still: try_send raises TopicFull, a timed send times out.
    sent = 0
    with pytest.raises(shmbus.TopicFull, match="has not read message"):
        while True:
            pub.try_send(b"x")
            sent += 1
    assert sent >= 4
    with pytest.raises(shmbus.Timeout):
        pub.send(b"x", timeout=0.02)
    sub.try_recv()
    pub.try_send(b"x")


def test_blocked_send_releases_the_gil(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=8, history=2, policy="block", reliable_timeout=60)
    pub, sub = topic.publisher(), topic.reliable_subscriber()
    while True:
        try:
            pub.try_send(b"x")
        except shmbus.TopicFull:
            break
    done = threading.Event()

    def send_one():
        pub.send(b"last", timeout=30)
        done.set()

    writer = threading.Thread(target=send_one)
    writer.start()
    # This thread runs Python while the other waits in send: it needs the GIL released.
    assert not done.wait(0.2)
    got = []
    while not got or got[-1] != b"last":
        got.append(sub.recv(timeout=30).data)
    writer.join(timeout=30)
    assert done.is_set() and got[:-1] == [b"x"] * (len(got) - 1) and len(got) >= 2


def test_fail_topic_raises_topic_full(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=8, history=4, policy="fail")
    pub, sub = topic.publisher(), topic.reliable_subscriber()
    sent = 0
    with pytest.raises(shmbus.TopicFull) as err:
        for _ in range(100):
            pub.send(b"m")
            sent += 1
    assert isinstance(err.value, shmbus.Full) and isinstance(err.value, shmbus.Error)
    assert "reliable subscriber has not read message 1" in str(err.value)
    assert [sub.try_recv().seq for _ in range(sent)] == list(range(1, sent + 1))
    pub.send(b"m")  # room again


def test_stuck_reliable_subscriber_is_evicted(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=8, history=4, policy="block", reliable_timeout=0.05)
    pub, sub = topic.publisher(), topic.reliable_subscriber()
    errors = []

    def publish():
        try:
            for _ in range(64):
                pub.send(b"m", timeout=30)
        except BaseException as e:
            errors.append(e)

    writer = threading.Thread(target=publish)
    writer.start()
    writer.join(timeout=30)
    assert not writer.is_alive() and errors == []
    with pytest.raises(shmbus.Evicted, match="evicted"):
        sub.try_recv()
    assert shmbus.Topic.status(domain, "t")["reliable_subscribers"] == 0
    try:
        sub.try_recv()  # lossy from now on: a message, or Lagged, but not Evicted again
    except shmbus.Lagged:
        pass


def test_policy_errors(domain):
    with pytest.raises(ValueError, match="unknown delivery policy"):
        shmbus.Topic.create_or_open(domain, "t", policy="drop")
    topic = shmbus.Topic.create_or_open(domain, "t")
    assert topic.policy == "overwrite"
    with pytest.raises(shmbus.InvalidConfig, match="overwrite"):
        topic.reliable_subscriber()
    assert shmbus.Topic.status(domain, "t")["policy"] == "overwrite"


def test_loan_on_a_full_block_topic_waits_without_the_gil(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=8, history=2, policy="block", reliable_timeout=60)
    pub, sub = topic.publisher(), topic.reliable_subscriber()
    while True:
        try:
            pub.try_send(b"x")
        except shmbus.TopicFull:
            break
    sent = []

    def loan_one():
        with pub.loan() as loan:
            memoryview(loan)[:4] = b"loan"
            sent.append(loan.send(4))

    writer = threading.Thread(target=loan_one)
    writer.start()
    got = []
    while not got or got[-1] != b"loan":
        got.append(sub.recv(timeout=30).data)  # needs the GIL, which the waiting loan released
    writer.join(timeout=30)
    assert not writer.is_alive() and len(sent) == 1
    assert got[:-1] == [b"x"] * (len(got) - 1) and len(got) >= 2
    assert sub.lag == 0
