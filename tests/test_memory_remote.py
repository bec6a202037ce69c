"""Issue 40 item 1: the memory client probes the URL it was given, not 127.0.0.1:port.

Replicas on "other machines" are other loopback addresses (127.0.0.2,
127.0.0.3), each behind its own proxy that rewrites ``Host``
(:mod:`tests.host_proxy`), as ``docs/memory-server.md`` describes a fleet on
several machines. The client must find a healthy replica there (``tools()``
included), fail over when one is killed in the middle of a write (every write
stored exactly once, read from the database itself), and treat an https URL
without a port as port 443, never ``int()`` of nothing. Also: the
``MemoryAccessDenied`` message tells a wrong token from none (issue 43 item 7).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from agentstate.memory.client import (
    MemoryAccessDenied,
    MemoryClient,
    MemoryServerUnavailable,
)
from agentstate.memory.fleet import Fleet, write_in_flight
from agentstate.memory.service.process import ServerProcess
from agentstate.memory.service.stores import read_memory_rows
from agentstate.servers.loopback import url_endpoint, url_open
from tests import memory_backends
from tests.host_proxy import HostProxy

pytestmark = pytest.mark.anyio
postgres = memory_backends.postgres
V = "remote"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def entry(memory_id: str, n: int) -> dict:
    return {
        "vault_id": V,
        "memory_id": memory_id,
        "raw_entry": f"message {n}",
        "summary": "s",
        "tags": {"role": "user", "msg_idx": n},
        "idempotency_key": f"{memory_id}:msg:{n}",
    }


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("https://memory.example/mcp", ("memory.example", 443)),
        ("http://memory.example/mcp", ("memory.example", 80)),
        ("HTTPS://Memory.Example:8443/mcp", ("memory.example", 8443)),
        ("http://127.0.0.2:8771/mcp", ("127.0.0.2", 8771)),
        ("http://[::1]:8771/mcp", ("::1", 8771)),
    ],
)
def test_the_endpoint_is_the_urls_own_host_and_port_or_the_schemes_default(url, endpoint):
    assert url_endpoint(url) == endpoint


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://memory.example/mcp", "not an http:// or https:// URL"),
        ("http:///mcp", "names no host"),
        ("http://memory.example:99999/mcp", "port is not a number from 1 to 65535"),
        ("http://memory.example:port/mcp", "port is not a number from 1 to 65535"),
        ("http://me:s3cret@memory.example/mcp", "must not carry user:password@"),
    ],
)
def test_a_url_no_call_could_reach_is_refused_when_the_client_is_made(url, message):
    with pytest.raises(ValueError, match=message):
        MemoryClient(url)
    with pytest.raises(ValueError) as refused:
        MemoryClient(url.replace("://", "://me:s3cret@"))
    assert "s3cret" not in str(refused.value)


async def test_an_https_url_without_a_port_is_probed_on_443_and_reported_clearly():
    """Nothing listens on 127.0.0.9:443: the call and ``tools()`` say no server answers at
    that URL (before: ``ValueError: invalid literal for int()``)."""
    url = "https://127.0.0.9/mcp"
    assert not url_open(url)
    async with MemoryClient(url, retry_for=0) as client:
        with pytest.raises(MemoryServerUnavailable, match="no memory server answers at https://"):
            await client.tools()
        with pytest.raises(MemoryServerUnavailable, match="127.0.0.9:443"):
            await client.call("create_memory", vault_id=V, memory_id="m")


async def test_tools_and_calls_reach_a_healthy_replica_on_another_host(tmp_path, monkeypatch):
    """A server behind a proxy on 127.0.0.2 (nothing on 127.0.0.1 at the proxy's port):
    ``tools()`` lists the tools and a tool call goes through the proxy."""
    monkeypatch.delenv("AGENTSTATE_MEMORY_TOKEN", raising=False)
    with ServerProcess(tmp_path / "m.sqlite") as server, HostProxy("127.0.0.2", server.port) as px:
        async with MemoryClient(px.url, retry_for=5) as client:
            tools = {tool.name: tool for tool in await client.tools()}
            assert {"add_entry", "list_entries", "create_memory"} <= set(tools)
            await tools["create_memory"].ainvoke({"vault_id": V, "memory_id": "m"})
            assert await client.call("add_entry", **entry("m", 1)) == "enqueued"
            assert await client.call("await_consistency", memory_id="m") == "consistent"
            page = await client.call("list_entries", vault_id=V, memory_id="m")
        assert [e["raw_entry"] for e in page["entries"]] == ["message 1"]
        assert px.requests > 0


@pytest.mark.extras("memory", "persistence")
async def test_a_fleet_on_two_hosts_fails_over_when_a_replica_dies_mid_write(
    postgres, tmp_path, monkeypatch
):
    """Replicas A and B over one Postgres, behind proxies on 127.0.0.2 and 127.0.0.3. Writers
    send 40 keyed entries through the client; A is SIGKILLed while its writer holds a
    claimed write uncommitted, and its machine (the proxy) goes away. Every call is answered
    through B, and the database holds each entry exactly once."""
    monkeypatch.delenv("AGENTSTATE_MEMORY_TOKEN", raising=False)
    url = memory_backends.fresh_database(postgres)
    with Fleet(url, tmp_path, 2, write_delay=0.2) as fleet:
        a, b = fleet.replicas
        with HostProxy("127.0.0.2", a.port) as pa, HostProxy("127.0.0.3", b.port) as pb:
            async with MemoryClient([pa.url, pb.url], retry_for=30, timeout=10) as client:
                assert {t.name for t in await client.tools()} >= {"add_entry"}
                assert await client.call("create_memory", vault_id=V, memory_id="m") == "created"

                async def kill_mid_write():
                    deadline = time.monotonic() + 60
                    while not await asyncio.to_thread(write_in_flight, url, a.pid):
                        assert time.monotonic() < deadline, "replica A never held a write"
                        await asyncio.sleep(0.01)
                    a.kill()
                    pa.close()

                killer = asyncio.create_task(kill_mid_write())
                answers = []
                for n in range(1, 41):
                    answers.append(await client.call("add_entry", **entry("m", n)))
                await killer
                assert set(answers) <= {"enqueued", "already enqueued"}
                assert client.stats["failovers"] == 1 and client.url == pb.url
                assert await client.call("await_consistency", memory_id="m") == "consistent"
    rows = read_memory_rows(url, "m")
    stored = sorted(e["raw_entry"] for e in rows["entries"])
    assert stored == sorted(f"message {n}" for n in range(1, 41))  # each once, none lost
    assert rows["pending"] == 0


async def test_access_denied_tells_a_wrong_token_from_none(tmp_path, monkeypatch):
    """Issue 43 item 7: the 401 message says which it was."""
    monkeypatch.setenv("AGENTSTATE_MEMORY_TOKEN", "the-right-token")
    with ServerProcess(tmp_path / "m.sqlite") as server:
        monkeypatch.delenv("AGENTSTATE_MEMORY_TOKEN")
        async with MemoryClient(server.url, retry_for=0) as client:
            with pytest.raises(MemoryAccessDenied, match="this client sent none"):
                await client.call("create_memory", vault_id=V, memory_id="m")
            with pytest.raises(MemoryAccessDenied, match="this client sent none"):
                await client.tools()
        async with MemoryClient(server.url, retry_for=0, token="a-wrong-token") as client:
            with pytest.raises(MemoryAccessDenied, match=r"refused the bearer token .*wrong token"):
                await client.call("create_memory", vault_id=V, memory_id="m")
            with pytest.raises(MemoryAccessDenied, match="wrong token") as denied:
                await client.tools()
        assert "a-wrong-token" not in str(denied.value)
