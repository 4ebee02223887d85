"""Topic round trips, copies and zero-copy samples and loans."""

import sys
import threading
import time

import numpy as np
import pytest

import shmbus

FRAME = (1080, 1920, 3)
FRAME_LEN = 1080 * 1920 * 3  # 6,220,800 bytes


def test_round_trip_copy(domain):
    with shmbus.Topic.create_or_open(domain, "t", max_message_len=64) as topic:
        with topic.publisher() as pub, topic.subscriber() as sub:
            seq = pub.send(b"hello")
            msg = sub.recv(timeout=5)
            assert (msg.seq, msg.data, bytes(msg), len(msg)) == (seq, b"hello", b"hello", 5)
            assert msg.ts_ns > 0
            with pytest.raises(shmbus.Empty, match="no new message"):
                sub.try_recv()


def test_send_accepts_any_buffer(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=64)
    pub, sub = topic.publisher(), topic.subscriber()
    arr = np.arange(8, dtype=np.uint16)
    for payload in (b"ab", bytearray(b"cd"), memoryview(b"xefx")[1:3], arr):
        pub.send(payload)
        assert sub.try_recv().data == bytes(memoryview(payload).cast("B"))
    with pytest.raises((BufferError, ValueError), match="contiguous"):
        pub.send(np.arange(8, dtype=np.uint8)[::2])  # not contiguous: no hidden copy
    with pytest.raises(TypeError):
        pub.send("text is not bytes")


def test_open_status_and_config(domain):
    shmbus.Topic.create_or_open(domain, "t", max_message_len=100, history=4)
    topic = shmbus.Topic.open(domain, "t")
    assert (topic.name, topic.max_message_len, topic.history) == ("t", 100, 4)
    pub = topic.publisher()
    pub.send(b"x")
    status = shmbus.Topic.status(domain, "t")
    assert status["max_message_len"] == 100 and status["history"] == 4
    assert status["last_seq"] == 1 and status["publishers"] == 1
    # An unset keyword accepts the existing value; a different one is refused.
    assert shmbus.Topic.create_or_open(domain, "t").max_message_len == 100
    with pytest.raises(shmbus.LayoutMismatch, match="exists with"):
        shmbus.Topic.create_or_open(domain, "t", max_message_len=200)


def test_errors_carry_the_library_message(domain):
    with pytest.raises(shmbus.NotFound, match="no such channel") as e:
        shmbus.Topic.open(domain, "missing")
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, shmbus.Error)
    with pytest.raises(shmbus.InvalidName):
        shmbus.Topic.create_or_open(domain, "bad/name")
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=8)
    with pytest.raises(shmbus.TooLarge, match="exceeds the topic's slot size of 8 bytes"):
        topic.publisher().send(b"123456789")
    sub = topic.subscriber()
    with pytest.raises(shmbus.Timeout, match="timed out") as e:
        sub.recv(timeout=0.05)
    assert isinstance(e.value, TimeoutError)
    with pytest.raises(ValueError):
        sub.recv(timeout=-1)


def test_lagged_reports_missed(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=8, history=2, spare_slots=1)
    pub, sub = topic.publisher(), topic.subscriber()
    for i in range(10):
        pub.send(bytes([i]))
    with pytest.raises(shmbus.Lagged) as e:
        sub.try_recv()
    assert e.value.missed > 0 and "lagged" in str(e.value)
    assert sub.try_recv().data  # the oldest still kept


def test_numpy_frame_zero_copy(domain):
    topic = shmbus.Topic.create_or_open(domain, "cam", max_message_len=FRAME_LEN, history=2)
    pub, sub = topic.publisher(), topic.subscriber()
    loan = pub.loan()
    assert len(loan) == FRAME_LEN
    frame = np.frombuffer(loan, np.uint8).reshape(FRAME)
    assert frame.flags.writeable
    frame[:] = 0
    frame[540, 960] = (1, 2, 3)
    with pytest.raises(BufferError, match="view"):
        loan.send()  # a live view could write into a published slot
    del frame
    seq = loan.send()

    sample = sub.recv_ref(timeout=5)
    assert (sample.seq, len(sample)) == (seq, FRAME_LEN)
    image = np.frombuffer(sample, np.uint8).reshape(FRAME)
    # No copy: the array's memory is the sample's buffer, which is read-only shared memory.
    assert not image.flags.writeable and not image.flags.owndata
    view = memoryview(sample)
    assert view.readonly
    assert np.shares_memory(image, np.frombuffer(view, np.uint8))
    addr = image.__array_interface__["data"][0]
    assert np.frombuffer(sample, np.uint8).__array_interface__["data"][0] == addr
    assert tuple(image[540, 960]) == (1, 2, 3) and image.sum() == 6
    with pytest.raises(ValueError, match="read-only"):
        image[0, 0, 0] = 9
    with pytest.raises(BufferError):
        sample.release()  # views alive
    del image, view
    sample.release()
    assert not sample.pinned


def test_writes_through_a_loan_view_are_received_in_place(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=4096, history=1)
    pub, sub = topic.publisher(), topic.subscriber()
    with pub.loan() as loan:
        with memoryview(loan) as m:
            m[:5] = b"world"
        loan.send(5)
    sample = sub.try_recv_ref()
    assert bytes(sample) == b"world" and sample.tobytes() == b"world"


def test_pinned_sample_is_not_overwritten(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=64, history=1, spare_slots=1)
    pub, sub = topic.publisher(), topic.subscriber()
    pub.send(b"first")
    sample = sub.try_recv_ref()
    arr = np.frombuffer(sample, np.uint8)
    del sample  # the numpy view alone keeps the slot pinned
    sent = 0
    try:
        for i in range(100):
            pub.send(b"later %d" % i)
            sent += 1
    except shmbus.AllPinned as e:
        assert "pinned" in str(e) and isinstance(e, shmbus.Full)
    assert bytes(arr) == b"first", f"after {sent} sends"
    del arr
    for i in range(20):
        pub.send(b"again %d" % i)  # unpinned: publishing goes on


def test_release_with_context_manager_and_pin_budget(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=64, history=8)
    pub, sub = topic.publisher(), topic.subscriber()
    for i in range(4):
        pub.send(bytes([i]))
    a, b = sub.try_recv_ref(), sub.try_recv_ref()  # the default budget is 2
    with pytest.raises(shmbus.PinLimit):
        sub.try_recv_ref()
    assert sub.try_recv().data == b"\x02"  # copies still work with samples alive
    with a:
        assert bytes(a) == b"\x00"
    assert not a.pinned
    with pytest.raises(BufferError):
        memoryview(a)
    assert bytes(sub.try_recv_ref()) == b"\x03"
    b.release()
    b.release()  # idempotent


def test_publisher_busy_while_loan_lives_and_close(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=16)
    pub = topic.publisher()
    loan = pub.loan()
    with pytest.raises(shmbus.Busy, match="still held"):
        pub.send(b"x")
    loan.release()  # unsent: nothing published
    assert topic.last_seq == 0
    pub.send(b"x")
    pub.close()
    with pytest.raises(shmbus.Closed):
        pub.send(b"y")


def test_closing_a_subscriber_with_samples_alive_is_deferred(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=16)
    pub, sub = topic.publisher(), topic.subscriber()
    pub.send(b"kept")
    sample = sub.try_recv_ref()
    sub.close()
    with pytest.raises(shmbus.Closed):
        sub.try_recv()
    assert bytes(sample) == b"kept"  # still mapped and pinned
    assert shmbus.Topic.status(domain, "t")["subscribers"] == 1
    sample.release()
    assert shmbus.Topic.status(domain, "t")["subscribers"] == 0


def test_iteration_blocks_for_each_message(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=16)
    pub, sub = topic.publisher(), topic.subscriber()

    def produce():
        for i in range(5):
            pub.send(bytes([i]))

    threading.Thread(target=produce).start()
    got = []
    for msg in sub:
        got.append(msg.data[0])
        if len(got) == 5:
            break
    assert got == [0, 1, 2, 3, 4]


def test_random_access(domain):
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=16, history=4)
    pub, sub = topic.publisher(), topic.subscriber()
    for i in range(3):
        pub.send(bytes([i]))
    assert sub.get(2).data == b"\x01" and sub.latest().seq == 3
    assert sub.lag == 3 and sub.next_seq == 1
    sub.seek_latest()
    assert sub.try_recv().seq == 3
    with pytest.raises(shmbus.Empty):
        sub.try_recv()
    sub.seek(2)
    assert sub.try_recv().seq == 2


def test_sigkilled_subscriber_holding_pins_has_them_reclaimed(domain):
    """A subscriber process SIGKILLed while numpy views pin two slots: while it is alive the
    publisher runs out of slots; once it is dead, its pins are reclaimed and publishing goes
    on, without the dead process's help."""
    import signal
    import subprocess
    import sys
    import textwrap

    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=64, history=1, spare_slots=1)
    pub = topic.publisher()
    pub.send(b"first")
    pub.send(b"second")
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import sys, time, numpy, shmbus
                d = shmbus.Domain(sys.argv[1], root=sys.argv[2])
                sub = shmbus.Topic.open(d, "t").subscriber()
                sub.seek(1)
                views = [numpy.frombuffer(sub.recv_ref(timeout=5), numpy.uint8) for _ in range(2)]
                print("pinned", bytes(views[0]), bytes(views[1]), flush=True)
                time.sleep(600)
                """
            ),
            domain.name,
            domain.root,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "pinned b'first' b'second'"
        assert shmbus.Topic.status(domain, "t")["pinned_slots"] == 2
        with pytest.raises(shmbus.AllPinned):
            for i in range(10):
                pub.send(b"while pinned %d" % i)
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=60) == -signal.SIGKILL
    finally:
        child.kill()
    for i in range(20):
        pub.send(b"after %d" % i)  # the dead subscriber's pins were reclaimed
    assert shmbus.Topic.status(domain, "t")["pinned_slots"] == 0


def test_small_samples_are_copies_without_pins(domain):
    # Slots of at most 40 bytes: samples are copies, so any number may be held and the
    # publisher overwrites every slot meanwhile; views of them stay intact.
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=8, history=1, spare_slots=1)
    pub, sub = topic.publisher(), topic.subscriber()
    samples, views = [], []
    for i in range(4):
        pub.send(b"small %d" % i)
        samples.append(sub.try_recv_ref())
        views.append(np.frombuffer(samples[-1], np.uint8))
    for i in range(100):
        pub.send(b"later %d" % (i % 10))
    assert [bytes(s) for s in samples] == [b"small %d" % i for i in range(4)]
    assert [bytes(v) for v in views] == [b"small %d" % i for i in range(4)]
    assert shmbus.Topic.status(domain, "t")["pinned_slots"] == 0


def test_small_loan_is_written_through_its_buffer(domain):
    # Slots of at most 40 bytes: the loan is a buffer of its own, copied into the slot at send.
    topic = shmbus.Topic.create_or_open(domain, "t", max_message_len=16)
    pub, sub = topic.publisher(), topic.subscriber()
    loan = pub.loan()
    m = memoryview(loan)
    assert len(m) == 16 and bytes(m) == bytes(16)
    m[:5] = b"small"
    del m
    assert loan.send(5) == 1
    assert sub.try_recv().data == b"small"


def _thread_faults():
    import resource

    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt


def test_prefault_takes_the_first_pass_page_faults_up_front(domain):
    slot, history = 64 << 10, 16
    pages = slot * history // 4096
    for name in ("cold", "warm"):
        shmbus.Topic.create_or_open(domain, name, max_message_len=slot, history=history).close()
    payload = bytes([0x5A]) * slot

    def first_pass(topic):
        with topic.publisher() as pub:
            before = _thread_faults()
            for _ in range(history):
                pub.send(payload)
            return _thread_faults() - before

    with shmbus.Topic.open(domain, "cold") as cold:
        cold_faults = first_pass(cold)
    with shmbus.Topic.open(domain, "warm") as warm:
        warm.prefault()
        warm_faults = first_pass(warm)
        with warm.subscriber() as sub:
            sub.seek_oldest()
            assert sub.try_recv().data == payload
    assert cold_faults >= pages // 2, (cold_faults, pages)
    assert warm_faults < pages // 8, (warm_faults, pages)


def test_prefault_lets_other_threads_run(domain):
    # A thread counting between short sleeps; with a switch interval of minutes, this one
    # holds the GIL throughout, except where it lets go: the counter can move only then.
    topic = shmbus.Topic.create_or_open(domain, "big", max_message_len=4 << 20, history=16)
    count, stop = [0], threading.Event()

    def counter():
        while not stop.wait(0.0001):
            count[0] += 1

    interval = sys.getswitchinterval()
    sys.setswitchinterval(600)
    thread = threading.Thread(target=counter)
    try:
        thread.start()
        while count[0] == 0:
            time.sleep(0.001)
        before = count[0]
        topic.prefault()
        during = count[0] - before
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)
    assert during > 0, "prefault held the GIL"


def test_every_channel_handle_prefaults(domain):
    handles = [
        shmbus.Queue.create_or_open(domain, "q", capacity=4, max_message_len=64),
        shmbus.Stream.create_or_open(domain, "s", capacity=1 << 16),
        shmbus.Pool.create_or_open(domain, "p", max_workers=2, max_job_len=64),
    ]
    for h in handles:
        h.prefault()
        h.close()
        with pytest.raises(shmbus.Closed):
            h.prefault()


def test_error_classes_follow_the_error_kind(domain, tmp_path):
    """The class comes from the library's error kind: the same for every call that fails
    the same way, whichever Rust error carried it."""
    shmbus.Queue.create_or_open(domain, "q")
    with pytest.raises(shmbus.Incompatible, match="is a queue"):
        shmbus.Topic.open(domain, "q")
    (tmp_path / f"shmbus.{domain.name}" / "junk").write_bytes(b"\0" * 4096)
    with pytest.raises(shmbus.Incompatible, match="not a shmbus segment"):
        shmbus.Topic.open(domain, "junk")
    topic = shmbus.Topic.create_or_open(domain, "h", max_message_len=8, history=2)
    pub, sub = topic.publisher(), topic.subscriber()
    for i in range(8):
        pub.send(b"%d" % i)
    with pytest.raises(shmbus.Lagged) as lagged:
        sub.try_recv()
    assert lagged.value.missed > 0
    # Random access past the history is not a lag of this subscriber.
    with pytest.raises(shmbus.Error, match="no longer in the history") as gone:
        sub.get(1)
    assert not isinstance(gone.value, shmbus.Lagged)
