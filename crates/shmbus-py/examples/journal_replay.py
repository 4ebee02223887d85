"""A journal replay: record events, then replay them from the start, from an index and with
a durable named reader that resumes where it acknowledged.

    python journal_replay.py DIR    # DIR: the journal's directory (created if missing)
"""

import json
import sys

import shmbus


def main(directory: str) -> None:
    journal = shmbus.Journal.create_or_open(directory)
    with journal.appender() as app:
        indexes = [app.send(json.dumps({"event": "order", "id": i}).encode()) for i in range(5)]
    first = indexes[0]

    # Replay everything from the start, until there is nothing more (`Empty`).
    tailer = journal.tailer()
    everything = []
    while True:
        try:
            everything.append(json.loads(tailer.try_recv().data))
        except shmbus.Empty:
            break
    print(f"replayed {len(everything)} event(s) from the start")

    # Replay from a given index.
    print("from index", first + 3, "->", json.loads(journal.tailer_at(first + 3).recv().data))

    # A named reader persists its position: acknowledge two entries, and a new reader of the
    # same name (after a restart, in another process) resumes after them.
    with journal.reader("auditor") as reader:
        reader.recv()
        reader.recv()
        reader.ack()
    with journal.reader("auditor") as reader:
        print("auditor resumes at", json.loads(reader.recv().data))
    journal.close()


if __name__ == "__main__":
    main(sys.argv[1])
