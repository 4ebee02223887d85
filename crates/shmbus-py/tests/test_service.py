"""Services: calls, requests in flight, streamed responses, failures, a server in another
process killed mid-call."""

import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import shmbus


def test_call_and_requests_in_flight(domain):
    svc = shmbus.Service.create_or_open(domain, "svc", max_in_flight=2, max_request_len=32)
    client = svc.client()
    with pytest.raises(shmbus.Disconnected):
        client.try_send_request(b"nobody serves")
    server = svc.server()

    def serve(n):
        for _ in range(n):
            req = server.recv(timeout=10)
            req.respond_last(bytes(reversed(req.data)))

    t = threading.Thread(target=serve, args=(2,))
    t.start()
    assert client.call(b"abc", timeout=10) == b"cba"
    assert client.call(bytearray(b"xy"), timeout=10) == b"yx"
    t.join()
    # Two in flight, matched by id; a third is handed back.
    a = client.try_send_request(b"1")
    b = client.try_send_request(b"2")
    with pytest.raises(shmbus.Full):
        client.try_send_request(b"3")
    assert client.in_flight == 2 and client.is_pending(a)
    with pytest.raises(shmbus.TooLarge):
        svc.client().try_send_request(bytes(33))
    req_b = server.try_recv()
    assert req_b.id in (a, b)
    req_b.respond_last(b"first answered")
    r = client.recv_response(timeout=10)
    assert (r.request_id, r.data, r.last) == (req_b.id, b"first answered", True)
    other = server.recv(timeout=10)
    other.respond(b"part")
    other.end()
    got = list(client)
    assert [(r.request_id, r.data, r.last) for r in got] == [(other.id, b"part", False), (other.id, b"", True)]
    with pytest.raises(shmbus.Empty):
        client.try_recv_response()
    st = shmbus.Service.status(domain, "svc")
    assert st["requests"] == 4 and st["responses"] == 5 and st["in_flight"] == 0


def test_failures_and_timeouts(domain):
    svc = shmbus.Service.create_or_open(domain, "svc")
    server, client = svc.server(), svc.client()
    rid = client.try_send_request(b"fail me")
    req = server.recv(timeout=10)
    req.fail()
    with pytest.raises(shmbus.RequestFailed):
        client.recv_response(timeout=10)
    with pytest.raises(shmbus.Closed):
        req.respond(b"too late")
    # A call that times out gives its request up; the late response is dropped.
    timed_out = []

    def call():
        with pytest.raises(shmbus.Timeout):
            client.call(b"slow", timeout=0.5)
        timed_out.append(True)

    t = threading.Thread(target=call)
    t.start()
    late = server.recv(timeout=10)
    t.join()
    assert timed_out
    with pytest.raises(shmbus.Disconnected):
        late.respond_last(b"nobody reads this")
    assert client.in_flight == 0
    assert shmbus.Service.status(domain, "svc")["timeouts"] == 1
    assert rid >= 1


def test_a_server_killed_mid_call_is_reported(domain):
    svc = shmbus.Service.create_or_open(domain, "svc")
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys, shmbus
            d = shmbus.Domain(sys.argv[1], root=sys.argv[2])
            server = shmbus.Service.open(d, "svc").server()
            print("ready", flush=True)
            req = server.recv(timeout=30)
            print("taken", flush=True)
            sys.stdin.read()  # hold the request until killed
        """), domain.name, domain.root],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "ready\n"
        client = svc.client()
        rid = client.try_send_request(b"never answered")
        assert child.stdout.readline() == "taken\n"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        with pytest.raises(shmbus.Disconnected):
            client.recv_response(timeout=10)
        assert not client.is_pending(rid) and client.in_flight == 0
    finally:
        child.kill()
        child.wait()


def test_asyncio_and_the_waitset(domain):
    import asyncio

    svc = shmbus.Service.create_or_open(domain, "svc", max_in_flight=2)
    server, client = svc.server(), svc.client()
    ws = shmbus.WaitSet()
    assert ws.poll([server, client]) == []
    rid = client.try_send_request(b"ready?")
    assert ws.wait([server, client], timeout=10) == [0]

    async def serve(n):
        for _ in range(n):
            req = await server.recv_async(timeout=10)
            req.respond_last(bytes(reversed(req.data)))

    async def main():
        task = asyncio.ensure_future(serve(3))
        r = await client.recv_response_async(timeout=10)
        assert (r.request_id, r.data, r.last) == (rid, b"?ydaer", True)
        assert await client.call_async(b"abc", timeout=10) == b"cba"
        assert await client.call_async(bytearray(b"xy"), timeout=10) == b"yx"
        await task
        # A call whose await times out gives its request up (no server takes it here).
        with pytest.raises(shmbus.Timeout):
            await client.call_async(b"nobody", timeout=0.05)
        assert client.in_flight == 0
        client.try_send_request(b"pending")
        with pytest.raises(shmbus.Busy):
            await client.call_async(b"second")

    asyncio.run(main())


def test_request_and_response_schemas_are_stored_as_a_pair(domain):
    req = shmbus.Schema("cdr", "example/Add_Request", "ros2msg", b"int64 a\nint64 b\n")
    resp = shmbus.Schema("cdr", "example/Add_Response", "ros2msg", b"int64 sum\n")
    with pytest.raises(shmbus.InvalidConfig):
        shmbus.Service.create_or_open(domain, "add", request_schema=req)
    svc = shmbus.Service.create_or_open(domain, "add", request_schema=req, response_schema=resp)
    assert (svc.request_schema, svc.response_schema) == (req, resp)
    opened = shmbus.Service.open(domain, "add")
    assert (opened.request_schema, opened.response_schema) == (req, resp)
    with pytest.raises(shmbus.SchemaMismatch):
        shmbus.Service.create_or_open(domain, "add", request_schema=resp, response_schema=req)
    plain = shmbus.Service.create_or_open(domain, "plain")
    assert (plain.request_schema, plain.response_schema) == (None, None)


FRAME = 6_220_800


def test_a_frame_goes_both_ways_in_place(domain):
    np = pytest.importorskip("numpy")
    svc = shmbus.Service.create_or_open(
        domain, "frames", max_in_flight=1, max_request_len=FRAME, max_response_len=FRAME)
    server, client = svc.server(), svc.client()

    # The request, written in place through numpy; the client is lent until it is sent.
    loan = client.loan_request()
    assert len(loan) == FRAME
    view = np.frombuffer(loan, np.uint8)
    room = view.ctypes.data
    assert room % 64 == 0
    view[:] = 7
    with pytest.raises(shmbus.Busy):
        client.try_send_request(b"meanwhile")
    with pytest.raises(BufferError):
        loan.send()
    del view
    rid = loan.send()
    assert client.in_flight == 1

    # The server reads it where the client wrote it.
    req = server.recv(timeout=10)
    assert (req.id, len(req), req.finished) == (rid, FRAME, False)
    seen = np.frombuffer(req, np.uint8)
    assert seen.ctypes.data == room and (seen == 7).all()
    # Finishing the request while its bytes are viewed is refused, and changes nothing.
    with pytest.raises(BufferError):
        req.respond_last(b"no")
    with pytest.raises(BufferError):
        req.end()
    assert not req.finished

    # The response, in a loan; while it is out the request takes no other answer.
    out = req.loan(timeout=10)
    with pytest.raises(shmbus.Busy):
        req.respond(b"meanwhile")
    with pytest.raises(ValueError):
        out.send(FRAME + 1)
    cell = np.frombuffer(out, np.uint8)
    cell[:] = seen + 1
    del cell
    with pytest.raises(BufferError):
        out.send_last()  # the request's bytes are still viewed
    del seen
    with pytest.raises(shmbus.Busy):
        req.fail()
    out.send_last()
    assert req.finished
    with pytest.raises(shmbus.Closed):
        req.respond(b"after the end")

    # The client reads the response in its cell, through DLPack.
    resp = client.recv_response_ref(timeout=10)
    assert (resp.request_id, resp.last, len(resp)) == (rid, True, FRAME)
    got = np.from_dlpack(resp)
    assert not got.flags.writeable and (got == 8).all()
    with pytest.raises(shmbus.Busy):
        client.try_send_request(b"meanwhile")
    with pytest.raises(BufferError):
        resp.release()
    del resp  # the array alone keeps the response pinned
    with pytest.raises(shmbus.Busy):
        client.try_send_request(b"meanwhile")
    assert (got == 8).all()
    del got
    assert client.in_flight == 0
    client.try_send_request(b"free again")


def test_loans_released_unsent_send_nothing_and_a_stream_flows_by_reference(domain):
    svc = shmbus.Service.create_or_open(domain, "svc", max_in_flight=2, response_depth=2)
    server, client = svc.server(), svc.client()
    with client.loan_request() as loan:
        memoryview(loan)[:4] = b"gone"
    assert client.in_flight == 0
    with pytest.raises(shmbus.Empty):
        server.try_recv()

    rid = client.try_send_request(b"count to five")
    req = server.recv(timeout=10)
    assert req.data == b"count to five"  # copied at its first read: readable after the end
    with req.loan() as unsent:
        memoryview(unsent)[:5] = b"never"

    def stream():
        for i in range(5):
            with req.loan(timeout=10) as cell:
                memoryview(cell)[:1] = bytes([i])
                cell.send(1) if i < 4 else cell.send_last(1)

    t = threading.Thread(target=stream)
    t.start()
    got = []
    while True:
        with client.recv_response_ref(timeout=10) as r:
            assert r.request_id == rid
            got.append((bytes(r), r.last))
            if r.last:
                break
    t.join()
    assert got == [(bytes([i]), i == 4) for i in range(5)]
    assert req.finished and req.data == b"count to five"
    with pytest.raises(shmbus.Empty):
        client.try_recv_response_ref()

    # A request released (or left at the end of a `with`) unanswered is ended; the bytes of
    # one never read are gone with it.
    rid = client.try_send_request(b"unanswered")
    with server.recv(timeout=10) as req:
        assert bytes(memoryview(req)) == b"unanswered"
    with pytest.raises(shmbus.Closed):
        req.data
    r = client.recv_response_ref_for(rid, timeout=10)
    assert (r.request_id, len(r), r.last) == (rid, 0, True)
    r.release()

    # Released while a response loan is out: refused, as `end()` is (the request would
    # otherwise end whenever the loan went); once the loan is sent, releasing does nothing.
    rid = client.try_send_request(b"loaned")
    req = server.recv(timeout=10)
    loan = req.loan(timeout=10)
    with pytest.raises(shmbus.Busy, match="ResponseLoan"):
        req.release()
    assert not req.finished
    memoryview(loan)[:2] = b"ok"
    loan.send_last(2)
    assert req.finished
    req.release()
    r = client.recv_response_ref_for(rid, timeout=10)
    assert (r.request_id, bytes(r), r.last) == (rid, b"ok", True)


def test_a_frame_served_by_another_process_in_place(domain):
    np = pytest.importorskip("numpy")
    svc = shmbus.Service.create_or_open(domain, "frames", max_request_len=FRAME, max_response_len=FRAME)
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys, numpy as np, shmbus
            d = shmbus.Domain(sys.argv[1], root=sys.argv[2])
            server = shmbus.Service.open(d, "frames").server()
            print("ready", flush=True)
            for _ in range(3):
                req = server.recv(timeout=30)
                frame = np.frombuffer(req, np.uint8)
                out = req.loan(timeout=30)
                np.frombuffer(out, np.uint8)[:] = 255 - frame
                del frame
                out.send_last()
        """), domain.name, domain.root],
        stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "ready\n"
        client = svc.client()
        for k in range(3):
            loan = client.loan_request()
            np.frombuffer(loan, np.uint8)[:] = np.arange(FRAME, dtype=np.uint64).astype(np.uint8) + k
            rid = loan.send()
            with client.recv_response_ref(timeout=30) as r:
                assert r.request_id == rid and r.last
                want = 255 - (np.arange(FRAME, dtype=np.uint64).astype(np.uint8) + k)
                assert (np.frombuffer(r, np.uint8) == want).all()
        assert child.wait(timeout=30) == 0
    finally:
        child.kill()
        child.wait()


def test_waits_for_room_hold_no_lock_another_thread_needs(domain):
    """A response waiting for room holds neither the GIL nor the request: another thread
    views it, asks whether it is finished, and reads the responses meanwhile."""
    svc = shmbus.Service.create_or_open(domain, "svc", response_depth=1)
    server, client = svc.server(), svc.client()
    rid = client.try_send_request(b"stream")
    req = server.recv(timeout=10)
    req.respond(b"first")  # the one-cell ring is full now
    outcome = []

    def last():
        try:
            req.respond_last(b"second", timeout=0.3)  # no room: Full after 0.3 s
        except shmbus.Full:
            outcome.append("full")

    t = threading.Thread(target=last)
    t.start()
    time.sleep(0.1)  # the end is under way (waiting for room) by now
    refused = 0
    while t.is_alive():
        assert not req.finished
        try:
            memoryview(req).release()
        except BufferError as e:
            assert "being finished" in str(e)  # no view may start while the end is under way
            refused += 1
            continue
        break  # the end gave up (Full): views may start again
    t.join()
    assert outcome == ["full"] and not req.finished
    # A stream waiting for room is read by this thread while the server's thread waits.
    t = threading.Thread(target=lambda: (req.respond(b"second"), req.respond_last(b"third")))
    t.start()
    got = [client.recv_response(timeout=10) for _ in range(3)]
    t.join()
    assert [(r.request_id, r.data, r.last) for r in got] == [
        (rid, b"first", False), (rid, b"second", False), (rid, b"third", True)]
    assert req.finished and refused > 0


@pytest.mark.parametrize("max_response_len", [64, FRAME])
def test_copying_receives_small_and_large(domain, max_response_len):
    """Copying receives take small responses through a copy and large ones from their cell,
    copied once: the same answers either way, and the cells go back."""
    svc = shmbus.Service.create_or_open(domain, "svc", max_in_flight=2, response_depth=1,
                                        max_response_len=max_response_len)
    server, client = svc.server(), svc.client()
    size = min(max_response_len, 1 << 20)

    def serve():
        for i in range(4):
            req = server.recv(timeout=10)
            body = bytes([req.data[0]]) * size
            if i in (0, 3):
                req.respond_last(body)  # one response
                continue
            req.respond(body)
            req.respond_last(body[:1])

    t = threading.Thread(target=serve)
    t.start()
    assert client.call(b"\x07", timeout=10) == b"\x07" * size
    rid = client.try_send_request(b"\x08")
    first = client.recv_response(timeout=10)
    assert (first.request_id, first.data, first.last) == (rid, b"\x08" * size, False)
    assert [(r.data, r.last) for r in client] == [(b"\x08", True)]
    rid = client.try_send_request(b"\x09")
    while True:
        try:
            r = client.try_recv_response()
            break
        except shmbus.Empty:
            pass
    assert (r.request_id, len(r), r.last) == (rid, size, False)
    assert client.recv_response(timeout=10).data == b"\x09"
    # Awaited: a response already there, and one that comes while the await waits.
    import asyncio
    rid = client.try_send_request(b"\x0a")
    t.join()
    r = asyncio.run(client.recv_response_async(timeout=10))
    assert (r.request_id, r.data, r.last) == (rid, b"\x0a" * size, True)
    assert client.in_flight == 0
