"""Pool dispatch, hand-back when busy, workers in threads and in a killed process."""

import signal
import subprocess
import sys
import textwrap
import threading

import pytest

import shmbus


def test_dispatch_and_hand_back(domain):
    pool = shmbus.Pool.create_or_open(domain, "p", max_workers=2, max_job_len=64)
    with pool.dispatcher() as disp:
        with pytest.raises(shmbus.Disconnected):
            disp.try_send(b"nobody")  # no worker attached
        worker = pool.worker()
        with pytest.raises(shmbus.Empty):
            worker.try_recv()  # now idle: the dispatcher may hand it a job
        d = disp.try_send(b"job one")
        assert d.worker == worker.index and d.job_id >= 1
        with pytest.raises(shmbus.Full):
            disp.try_send(b"job two")  # its only worker is busy: the job comes back
        job = worker.recv(timeout=1)
        assert (job.id, job.data, len(job)) == (d.job_id, b"job one", 7)
        job.done()
        assert disp.try_send(b"job two", job_id=42).job_id == 42
        assert worker.recv(timeout=1).data == b"job two"
        with pytest.raises(shmbus.TooLarge):
            disp.try_send(bytes(65))
        with pytest.raises(shmbus.Busy):
            pool.dispatcher()
    status = shmbus.Pool.status(domain, "p")
    assert status["max_workers"] == 2 and status["workers"] == 1 and status["dispatched"] >= 2


def test_worker_tells_a_finished_dispatcher_from_a_dead_one(domain):
    pool = shmbus.Pool.create_or_open(domain, "p", max_workers=2, max_job_len=16)
    disp = pool.dispatcher()
    worker = pool.worker()
    assert not worker.dispatcher_finished()  # no dispatcher gone yet
    with pytest.raises(shmbus.Empty):
        worker.try_recv()
    disp.close()  # finishes normally
    with pytest.raises(shmbus.Disconnected):
        worker.recv(timeout=5)
    assert worker.dispatcher_finished()
    worker.close()

    # One SIGKILLed while holding the pool died: not finished.
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys, shmbus
            d = shmbus.Domain(sys.argv[1], root=sys.argv[2])
            disp = shmbus.Pool.open(d, "p").dispatcher()
            print("ready", flush=True)
            sys.stdin.read()  # hold the pool until killed
        """), domain.name, domain.root],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        worker = pool.worker()
        child.send_signal(signal.SIGKILL)
        child.wait()
        with pytest.raises(shmbus.Disconnected):
            worker.recv(timeout=30)
        assert not worker.dispatcher_finished()
        worker.close()
    finally:
        child.kill()
        child.wait()


def test_worker_threads(domain):
    pool = shmbus.Pool.create_or_open(domain, "p", max_workers=2, max_job_len=16)
    disp = pool.dispatcher()
    done = []

    def work():
        with pool.worker() as w:
            for job in w:
                if job.data == b"stop":
                    return
                done.append(int(job.data))
                job.done()

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    sent, stops = 0, 0
    while stops < 2:
        assert any(t.is_alive() for t in threads), "the workers ended early"
        try:
            if sent < 50:
                disp.try_send(b"%d" % sent)
                sent += 1
            else:
                disp.try_send(b"stop")
                stops += 1
        except (shmbus.Full, shmbus.Disconnected):
            pass  # every worker busy, or not attached yet: try again
    for t in threads:
        t.join(60)
    assert sorted(done) == list(range(50))


def test_reap_reports_a_job_lost_with_a_killed_worker(domain):
    pool = shmbus.Pool.create_or_open(domain, "p", max_workers=1, max_job_len=16)
    disp = pool.dispatcher()
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys, shmbus
            d = shmbus.Domain(sys.argv[1], root=sys.argv[2])
            w = shmbus.Pool.open(d, "p").worker()
            job = w.recv()
            print(job.id, flush=True)
            sys.stdin.read()  # hold the job until killed
        """), domain.name, domain.root],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    while True:
        assert proc.poll() is None, "the worker process ended early"
        try:
            d = disp.try_send(b"doomed")
            break
        except (shmbus.Full, shmbus.Disconnected):
            pass  # the worker is not attached and idle yet
    assert int(proc.stdout.readline()) == d.job_id
    proc.send_signal(signal.SIGKILL)
    proc.wait(60)
    lost = disp.reap()
    assert [(l.job_id, l.pid) for l in lost] == [(d.job_id, proc.pid)]


def test_job_ref_zero_copy(domain):
    pool = shmbus.Pool.create_or_open(domain, "p", max_workers=1, max_job_len=64)
    disp, worker = pool.dispatcher(), pool.worker()
    with pytest.raises(shmbus.Empty):
        worker.try_recv_ref()
    d = disp.try_send(b"in place")
    job = worker.recv_ref(timeout=1)
    view = memoryview(job)
    assert (job.id, bytes(view), view.readonly, len(job)) == (d.job_id, b"in place", True, 8)
    with pytest.raises(shmbus.Busy):
        worker.done()  # the job borrows the worker
    with pytest.raises(BufferError):
        job.done()
    view.release()
    job.done()
    assert disp.try_send(b"next").job_id == d.job_id + 1  # the worker is idle again
    with worker.recv_ref(timeout=1) as job:
        assert job.tobytes() == b"next"
