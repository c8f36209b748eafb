"""The test server's latency model (time that grows with tokens, a limited number of slots), and several
server processes sharing one port."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest

from tests.fakeserver import FakeOpenAIServer


def _post(base_url: str, content: str, reply: str | None = None) -> float:
    body = {"model": "fake-model", "messages": [{"role": "user", "content": content}]}
    req = urllib.request.Request(base_url + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=30) as resp:
        json.loads(resp.read())
    return time.monotonic() - t0


def test_latency_grows_with_prompt_and_answer_tokens():
    # 400 characters = 100 prompt tokens at 4 characters a token; the answer is 12 tokens long.
    with FakeOpenAIServer(responder=lambda body: "x" * 48, per_prompt_token=0.002,
                          per_completion_token=0.01) as server:
        short = _post(server.base_url, "a" * 4)
        long = _post(server.base_url, "a" * 400)
        stats = server.stats()
    assert stats["prompt_tokens"] == 101 and stats["completion_tokens"] == 24
    # What each request was made to take: 1 prompt token + 12 answer tokens, then 100 + 12.
    assert server.decode_seconds == [pytest.approx(0.002 + 0.12), pytest.approx(0.2 + 0.12)]
    # ... and at least that long it took (a loaded machine only adds; so no comparison of the two).
    assert short >= 0.122 and long >= 0.32


def test_requests_beyond_the_slots_wait_in_line():
    with FakeOpenAIServer(latency=0.2, slots=1) as server:
        threads = [threading.Thread(target=_post, args=(server.base_url, "hi")) for _ in range(3)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        stats = server.stats()
    # Served one at a time: three requests cannot finish sooner than three latencies (a lower bound:
    # a loaded machine only adds to it).
    assert elapsed >= 0.6
    assert stats["requests"] == 3


def test_servers_started_with_reuse_port_share_one_port_and_together_answer_every_request():
    with FakeOpenAIServer(reuse_port=True, deterministic=True) as first:
        port = first._server.server_address[1]
        with FakeOpenAIServer(reuse_port=True, deterministic=True, port=port) as second:
            body = json.dumps({"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}).encode()
            for _ in range(20):  # a connection each: the kernel picks the process
                request = urllib.request.Request(f"{first.base_url}/chat/completions", data=body,
                                                 headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=60) as answer:
                    assert answer.status == 200
            assert first.completions + second.completions == 20
    with FakeOpenAIServer() as alone, pytest.raises(OSError):
        FakeOpenAIServer(port=alone._server.server_address[1])  # without it, a second bind is refused


def test_a_request_whose_body_never_arrives_is_not_a_request():
    """A client that goes away after the headers (a kill, a cancelled task) sent no request a real server
    would answer: the test server neither counts, records nor answers it."""
    import socket
    from urllib.parse import urlparse

    with FakeOpenAIServer() as server:
        url = urlparse(server.base_url)
        with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
            sock.sendall(f"POST {url.path}/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         "Content-Length: 500\r\n\r\n".encode())
            sock.shutdown(socket.SHUT_WR)  # the body never comes
            assert sock.recv(100) == b""  # closed without an answer
        _post(server.base_url, "a whole request")
        assert len(server.requests) == 1 and server.requests[0]["messages"][0]["content"] == "a whole request"
        assert server.stats()["requests"] == 1


def test_the_server_counts_the_connections_it_is_reading_until_their_clients_close_them():
    """``connections`` comes back to 0 only once a client has closed and all it sent was read: what a test
    waits for before it says that a dead client asked nothing more."""
    import socket
    from urllib.parse import urlparse

    with FakeOpenAIServer() as server:
        url = urlparse(server.base_url)
        body = json.dumps({"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]})
        request = (f"POST {url.path}/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n{body}").encode()
        with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
            sock.sendall(request)
            answer = sock.makefile("rb")
            assert answer.readline().startswith(b"HTTP/1.1 200")
            server.wait_until(lambda: server.connections == 1, timeout=30)  # kept alive for the next request
            sock.sendall(request)
            sock.shutdown(socket.SHUT_WR)  # a second request, and the client is done sending
            server.wait_until(lambda: server.connections == 0, timeout=30)
            assert server.completions == 2
