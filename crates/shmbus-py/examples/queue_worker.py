"""A queue worker: a process that takes jobs off a queue until told to stop.

Run with no arguments, it starts three worker processes, sends them 30 numbers to square
through the `jobs` queue, collects the answers from the `results` queue and stops them.

    python queue_worker.py [ROOT]           # the whole example
    python queue_worker.py --worker ROOT    # one worker (what the example starts)
"""

import subprocess
import sys

import shmbus

WORKERS = 3
JOBS = 30


def queues(root: str | None) -> tuple[shmbus.Queue, shmbus.Queue]:
    domain = shmbus.Domain("queue-example", root=root)
    jobs = shmbus.Queue.create_or_open(domain, "jobs", capacity=64, max_message_len=32)
    results = shmbus.Queue.create_or_open(domain, "results", capacity=64, max_message_len=32)
    return jobs, results


def worker(root: str | None) -> None:
    jobs, results = queues(root)
    with jobs.consumer() as inbox, results.producer() as outbox:
        for job in inbox:  # blocks for each next job; Ctrl-C stops it
            if job == b"stop":
                break
            n = int(job)
            outbox.send(b"%d %d" % (n, n * n))


def main(root: str | None) -> None:
    jobs, results = queues(root)
    procs = [
        subprocess.Popen([sys.executable, __file__, "--worker", root or ""]) for _ in range(WORKERS)
    ]
    with jobs.producer() as outbox, results.consumer() as inbox:
        for n in range(JOBS):
            outbox.send(b"%d" % n)
        squares: dict[int, int] = {}
        for _ in range(JOBS):
            n, square = map(int, inbox.recv(timeout=60).split())
            squares[n] = square
        for _ in procs:
            outbox.send(b"stop")
    for p in procs:
        p.wait(60)
    assert squares == {n: n * n for n in range(JOBS)}
    print(f"{WORKERS} workers squared {len(squares)} numbers; sum of squares {sum(squares.values())}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(sys.argv[2] or None)
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else None)
