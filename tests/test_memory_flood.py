"""Issue 40 items 4 and 8: limits on what a stranger may send before the token is checked.

A real ``agentstate memory serve`` process with a bearer token. A connection
without a token that sends a 48 MB header line is cut off after the header
limit (16 KiB by default), and the server's memory does not grow by anything
like 48 MB. 1,100 connections without a token that never send a request,
opened against a server whose file limit is the common default of 1,024
descriptors: the token holder's calls are still answered within a bound (the
cap closes the oldest idle connection to make room). A body over the request
limit gets 413; a connection that sends nothing is closed after the idle
timeout. Loopback only; every socket is closed at the end.
"""

from __future__ import annotations

import asyncio
import resource
import socket
import time
from pathlib import Path

import httpx
import pytest

from agentstate.memory.client import MemoryClient
from agentstate.memory.service.limits import Limits
from agentstate.memory.service.process import ServerProcess

pytestmark = pytest.mark.anyio
TOKEN = "flood-test-token-7d1c"
V = "flood"
CAP = Limits.max_connections  # 256


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def server(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTSTATE_MEMORY_TOKEN", TOKEN)
    with ServerProcess(tmp_path / "m.sqlite") as proc:
        yield proc


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_48_mb_header_line_is_cut_off_without_the_server_growing(server):
    before = rss_kib(server.pid)
    line = b"X-Junk: " + b"a" * (1 << 20)  # sent 1 MiB at a time, up to 48 MiB
    sent = 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        try:
            while sent < 48 << 20:
                sock.sendall(line if sent == 0 else b"a" * (1 << 20))
                sent += 1 << 20
        except (BrokenPipeError, ConnectionResetError):
            pass
        reply = b""
        try:
            reply = sock.recv(4096)
        except (ConnectionResetError, TimeoutError):
            pass
    grew = rss_kib(server.pid) - before
    print(f"cut off after {sent >> 20} MiB sent; the server grew by {grew} KiB")
    assert sent < 48 << 20, "the server read the whole 48 MB header line"
    assert reply == b"" or reply.startswith(b"HTTP/1.1 400"), reply[:200]
    assert grew < 8 * 1024, f"the server grew by {grew} KiB"


def test_a_body_over_the_request_limit_gets_413_before_the_token_is_checked(server):
    reply = httpx.post(
        server.url,
        content=b"x" * (4 * 1024 * 1024 + 1),
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert reply.status_code == 413


@pytest.mark.parametrize("idle_timeout", [None, 2.0])
def test_a_connection_that_sends_nothing_is_closed_after_the_idle_timeout(
    idle_timeout, tmp_path, monkeypatch
):
    monkeypatch.setenv("AGENTSTATE_MEMORY_TOKEN", TOKEN)
    options = ["--idle-timeout", str(idle_timeout)] if idle_timeout else []
    expected = idle_timeout or 10.0  # the default
    with ServerProcess(tmp_path / "m.sqlite", options=options) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            started = time.monotonic()
            assert sock.recv(1) == b""  # closed by the server
            waited = time.monotonic() - started
            with socket.create_connection(("127.0.0.1", server.port), timeout=30) as slow:
                slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
                assert slow.recv(1) == b""
    assert expected - 0.5 < waited < expected + 5, waited


async def test_1100_idle_connections_do_not_keep_the_token_holder_out(tmp_path, monkeypatch):
    """The cap, not the idle timeout, lets the token holder in.

    The idle timeout is 10 minutes, so only the cap (256 connections, the oldest idle one
    closed to make room) can close an idle connection here. The connections are opened 50
    at a time and each batch is waited for until the server has taken it (its descriptors
    plus the connections it closed): past its backlog of 64 the kernel would complete
    handshakes the server never sees. Without the cap the server stops at its file limit
    and the wait fails naming how many it took; no bound on the time otherwise.
    """
    monkeypatch.setenv("AGENTSTATE_MEMORY_TOKEN", TOKEN)
    with ServerProcess(tmp_path / "m.sqlite", options=["--idle-timeout", "600"]) as server:
        hard = resource.prlimit(server.pid, resource.RLIMIT_NOFILE)[1]
        resource.prlimit(server.pid, resource.RLIMIT_NOFILE, (1024, hard))  # a common default
        base = _descriptors(server.pid)
        idle: list[socket.socket] = []
        try:
            while len(idle) < 1100:
                for _ in range(50):
                    sock = socket.socket()
                    sock.setblocking(False)
                    sock.connect_ex(("127.0.0.1", server.port))
                    idle.append(sock)
                deadline = time.monotonic() + 120
                while True:  # until the server took the batch, and the cap made room for it
                    closed = _closed(idle)
                    held = _descriptors(server.pid) - base
                    if closed >= len(idle) - CAP and held + closed >= len(idle):
                        break
                    assert time.monotonic() < deadline, (
                        f"of {len(idle)} connections the server holds {held}, closed {closed}"
                    )
                    await asyncio.sleep(0.05)
            async with MemoryClient(server.url, token=TOKEN, retry_for=120, timeout=120) as client:
                assert await client.call("create_memory", vault_id=V, memory_id="m") == "created"
                assert len(await client.tools()) > 0
        finally:
            for sock in idle:
                sock.close()


def _descriptors(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def _closed(socks: list[socket.socket]) -> int:
    return sum(map(_closed_by_server, socks))


def _closed_by_server(sock: socket.socket) -> bool:
    """True when the server closed this never-used connection (it reads as end of file)."""
    try:
        return sock.recv(1) == b""
    except BlockingIOError:  # still open, nothing to read
        return False
    except ConnectionResetError:
        return True
