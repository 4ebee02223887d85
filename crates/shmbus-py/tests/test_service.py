"""Services: calls, requests in flight, streamed responses, failures, a server in another
process killed mid-call."""

import signal
import subprocess
import sys
import textwrap
import threading

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
