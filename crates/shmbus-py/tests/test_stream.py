"""Stream round trips, zero-copy records and loans, disconnection."""

import numpy as np
import pytest

import shmbus


def test_round_trip_and_iteration_ends_when_writer_goes(domain):
    stream = shmbus.Stream.create_or_open(domain, "s", capacity=4096)
    writer, reader = stream.writer(), stream.reader()
    assert writer.reader_alive() and reader.writer_alive()
    writer.send(b"a")
    writer.try_send(b"bc")
    writer.send(np.arange(3, dtype=np.uint8), timeout=1)
    assert reader.pending > 0
    status = shmbus.Stream.status(domain, "s")
    assert status["capacity"] == 4096 and status["writer_alive"] and status["reader_alive"]
    writer.close()
    assert list(reader) == [b"a", b"bc", b"\x00\x01\x02"]
    with pytest.raises(shmbus.Disconnected):
        reader.try_recv()


def test_exclusive_roles(domain):
    stream = shmbus.Stream.create_or_open(domain, "s", capacity=4096)
    with stream.writer():
        with pytest.raises(shmbus.Busy, match="exclusive"):
            stream.writer()
    stream.writer().close()  # the role is free again


def test_record_zero_copy_consume_or_read_again(domain):
    stream = shmbus.Stream.create_or_open(domain, "s", capacity=4096)
    writer, reader = stream.writer(), stream.reader()
    writer.send(b"first")
    writer.send(b"second")
    rec = reader.recv_ref(timeout=1)
    view = memoryview(rec)
    assert view.readonly and bytes(view) == b"first"
    with pytest.raises(shmbus.Busy):
        reader.try_recv()  # the record borrows the reader
    with pytest.raises(BufferError):
        rec.consume()
    view.release()
    rec.release()  # not consumed: read again
    with reader.try_recv_ref() as again:
        assert again.tobytes() == b"first"
        again.consume()
    assert reader.try_recv() == b"second"
    with pytest.raises(shmbus.Empty):
        reader.try_recv_ref()


def test_loan_writes_in_place(domain):
    stream = shmbus.Stream.create_or_open(domain, "s", capacity=1 << 16)
    writer, reader = stream.writer(), stream.reader()
    loan = writer.loan(1000)
    arr = np.frombuffer(loan, np.uint8)
    arr[:4] = [1, 2, 3, 4]
    del arr
    loan.send(4)
    assert reader.recv(timeout=1) == b"\x01\x02\x03\x04"
    with writer.loan(10) as unsent:
        memoryview(unsent)[:2] = b"zz"
    with pytest.raises(shmbus.Empty):
        reader.try_recv()
    with pytest.raises(shmbus.TooLarge):
        writer.loan(1 << 20, timeout=0)


def test_full_and_timeout(domain):
    stream = shmbus.Stream.create_or_open(domain, "s", capacity=4096)
    writer, reader = stream.writer(), stream.reader()
    big = bytes(1000)
    with pytest.raises(shmbus.Full):
        while True:
            writer.try_send(big)
    with pytest.raises(shmbus.Timeout):
        writer.send(big, timeout=0.05)
    reader.recv()
    writer.send(big, timeout=1)
    assert reader.wait_for_writer(timeout=0) is True
