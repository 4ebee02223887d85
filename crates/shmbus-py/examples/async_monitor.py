"""Async receive: one asyncio loop awaits a topic and two queues at once, fed by a sensor
process. No thread waits per channel: the process's one waiter thread wakes the awaits.

Run with no arguments, it starts the sensor, which publishes 20 readings on the `readings`
topic and puts 5 jobs on the `jobs` queue; the loop reads the readings with `async for`
and the jobs with `recv_async()`, lets a receive on the `alarms` queue time out, then asks
the sensor (on the `control` queue) for an alarm and selects over the alarm and job
queues with `wait_async`.

    python async_monitor.py [ROOT]           # the whole example
    python async_monitor.py --sensor ROOT    # the sensor (what the example starts)
"""

import asyncio
import sys
import time

import shmbus

READINGS = 20
JOBS = 5


def channels(root: str | None) -> tuple[shmbus.Topic, shmbus.Queue, shmbus.Queue, shmbus.Queue]:
    domain = shmbus.Domain("async-example", root=root)
    readings = shmbus.Topic.create_or_open(domain, "readings", max_message_len=16, history=64)
    jobs = shmbus.Queue.create_or_open(domain, "jobs", capacity=16, max_message_len=16)
    alarms = shmbus.Queue.create_or_open(domain, "alarms", capacity=4, max_message_len=16)
    control = shmbus.Queue.create_or_open(domain, "control", capacity=4, max_message_len=16)
    return readings, jobs, alarms, control


def sensor(root: str | None) -> None:
    readings, jobs, alarms, control = channels(root)
    with readings.publisher() as pub, jobs.producer() as out, alarms.producer() as alarm, control.consumer() as ctl:
        for i in range(READINGS):
            pub.send(b"%d" % i)
            time.sleep(0.005)  # the monitor waits for each
        for j in range(JOBS):
            out.send(b"job %d" % j)
        if ctl.recv(timeout=60) == b"alarm please":  # a blocking receive, in this process
            alarm.send(b"overheat")


async def monitor(root: str | None) -> None:
    readings, jobs, alarms, control = channels(root)
    with readings.subscriber() as sub, jobs.consumer() as inbox, alarms.consumer() as alarm:
        proc = await asyncio.create_subprocess_exec(sys.executable, __file__, "--sensor", root or "")

        async def read_readings() -> list[int]:
            values: list[int] = []
            async for msg in sub:  # awaits each message
                values.append(int(msg.data))
                if len(values) == READINGS:
                    break
            return values

        async def take_jobs() -> list[str]:
            return [(await inbox.recv_async(timeout=60)).decode() for _ in range(JOBS)]

        values, done = await asyncio.gather(read_readings(), take_jobs())

        # No alarm yet: `wait_for` cancels the receive after 50 ms (a cancelled receive
        # takes nothing)...
        try:
            early = (await asyncio.wait_for(alarm.recv_async(), 0.05)).decode()
        except TimeoutError:
            early = "none yet"
        # ...then the select over both queues finds the alarm (index 0) once it is sent.
        with control.producer() as ctl:
            ctl.send(b"alarm please")
        ready = await shmbus.wait_async([alarm, inbox], timeout=60)
        late = alarm.try_recv().decode()
        await proc.wait()
    print(f"readings: {len(values)} in order: {values == list(range(READINGS))}")
    print(f"jobs: {', '.join(done)}")
    print(f"alarm after 50 ms: {early}; then ready {ready}: {late}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--sensor":
        sensor(sys.argv[2] or None)
    else:
        asyncio.run(monitor(sys.argv[1] if len(sys.argv) > 1 else None))
