"""Journal append and replay: tailers from start, index, end and time; named readers."""

import os
import time

import numpy as np
import pytest

import shmbus


@pytest.fixture
def jdir(tmp_path):
    return tmp_path / "journal"


def test_append_and_replay(jdir):
    with shmbus.Journal.create_or_open(jdir, max_entry_len=1024) as journal:
        app = journal.appender()
        indexes = [app.send(b"entry %d" % i) for i in range(10)]
        assert indexes == list(range(indexes[0], indexes[0] + 10))
        entries = [journal.tailer().recv(timeout=1)]
        tailer = journal.tailer()
        got = [tailer.try_recv() for _ in range(10)]
        assert [e.data for e in got] == [b"entry %d" % i for i in range(10)]
        assert [e.index for e in got] == indexes and entries[0].index == indexes[0]
        assert all(e.ts_ns > 0 for e in got) and bytes(got[3]) == b"entry 3"
        with pytest.raises(shmbus.Empty):
            tailer.try_recv()
        with pytest.raises(shmbus.Timeout):
            tailer.recv(timeout=0.05)
        assert journal.tailer_at(indexes[7]).recv().data == b"entry 7"
        at_end = journal.tailer_at_end()
        app.send(b"later")
        assert at_end.recv(timeout=1).data == b"later"
    status = shmbus.Journal.status(jdir)
    assert status["next_index"] == indexes[0] + 11 and status["cycles"] >= 1


def test_replay_survives_reopening(jdir):
    app = shmbus.Journal.create_or_open(jdir).appender()
    for i in range(5):
        app.send(bytes([i]))
    app.close()
    journal = shmbus.Journal.open(jdir)
    assert [e.data[0] for _, e in zip(range(5), journal.tailer())] == [0, 1, 2, 3, 4]


def test_tailer_at_time(jdir):
    journal = shmbus.Journal.create_or_open(jdir)
    app = journal.appender()
    app.send(b"old")
    time.sleep(0.01)
    cut = time.time_ns()
    time.sleep(0.01)
    app.send(b"new")
    assert journal.tailer_at_time(cut).recv(timeout=1).data == b"new"


def test_named_reader_resumes_after_ack(jdir):
    journal = shmbus.Journal.create_or_open(jdir)
    app = journal.appender()
    for i in range(6):
        app.send(bytes([i]))
    with journal.reader("billing") as reader:
        assert [reader.recv().data[0] for _ in range(3)] == [0, 1, 2]
        reader.ack()
        with pytest.raises(shmbus.Busy):
            journal.reader("billing")  # exclusive while held
    status = shmbus.Journal.status(jdir)
    assert [r["name"] for r in status["readers"]] == ["billing"]
    with journal.reader("billing") as reader:
        assert reader.recv().data == b"\x03"  # resumes after the acknowledged entries
    assert journal.remove_reader("billing") is True
    with pytest.raises(shmbus.InvalidName):
        journal.reader("no/slash")


def test_loan_writes_in_place(jdir):
    journal = shmbus.Journal.create_or_open(jdir)
    app = journal.appender()
    loan = app.loan(16)
    arr = np.frombuffer(loan, np.uint8)
    arr[:] = np.arange(16)
    with pytest.raises(BufferError):
        loan.send()
    del arr
    index = loan.send()
    assert index == loan.index
    with app.loan(4):
        pass  # abandoned: readers skip it
    app.send(b"after")
    tailer = journal.tailer()
    assert tailer.recv().data == bytes(range(16))
    assert tailer.recv(timeout=1).data == b"after"


def test_config_values_are_checked(jdir):
    with pytest.raises(ValueError, match="roll"):
        shmbus.Journal.create_or_open(jdir, roll="weekly")
    journal = shmbus.Journal.create_or_open(jdir, roll="hourly", durability="none", max_cycles=10, max_age=3600)
    with pytest.raises(shmbus.TooLarge):
        journal.appender().send(bytes(journal.appender().max_entry_len + 1))
    with pytest.raises(shmbus.NotFound):
        shmbus.Journal.open(jdir.parent / "nothing here")


def test_entry_ref_zero_copy(jdir):
    journal = shmbus.Journal.create_or_open(jdir)
    journal.appender().send(b"in place")
    tailer = journal.tailer()
    entry = tailer.recv_ref(timeout=1)
    arr = np.frombuffer(entry, np.uint8)
    assert bytes(arr) == b"in place" and not arr.flags.writeable and entry.ts_ns > 0
    with pytest.raises(shmbus.Busy):
        tailer.try_recv()  # the entry borrows the tailer
    with pytest.raises(BufferError):
        entry.release()
    del arr
    entry.release()
    with pytest.raises(shmbus.Empty):
        tailer.try_recv_ref()


def _pretouch_threads():
    """The CPU lists of this process's journal pretoucher threads (their names are cut to
    the kernel's 15 characters)."""
    found = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/self/task/{tid}/status") as f:
                cpus = next(l.split(":")[1].strip() for l in f if l.startswith("Cpus_allowed_list"))
        except (FileNotFoundError, ProcessLookupError):
            continue
        if name.startswith("shmbus-journal"):
            found.append(cpus)
    return found


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_pretoucher_runs_where_it_is_told(jdir):
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {allowed[0]})
    try:
        for k, (on, cpus) in enumerate([(True, [allowed[1]]), (True, None), (False, None)]):
            with shmbus.Journal.create_or_open(
                jdir / str(k), roll="never", cycle_bytes=32 << 20, chunk_bytes=1 << 20, max_entry_len=64 << 10
            ) as journal:
                app = journal.appender()
                app.set_pretouch(on)
                if cpus is not None:
                    app.set_pretouch_cpus(cpus)
                for _ in range(64):  # 4 MiB: past the first chunks, where the pretoucher starts
                    app.send(bytes(64 << 10))
                # The thread names and pins itself once it runs: look until it has.
                want = [] if not on else [str(allowed[1] if cpus is not None else allowed[0])]
                deadline = time.monotonic() + (0.2 if not on else 10)
                threads = _pretouch_threads()
                while threads != want and time.monotonic() < deadline:
                    time.sleep(0.01)
                    threads = _pretouch_threads()
                # Off: none; told: on those CPUs; else inherited from the pinned appender.
                assert threads == want, (k, threads)
                app.close()
            # The pretoucher ends with its appender.
            deadline = time.monotonic() + 10
            while _pretouch_threads() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert _pretouch_threads() == []
    finally:
        os.sched_setaffinity(0, set(allowed))
