"""The slow-writer knob (``$AGENTSTATE_MEMORY_WRITE_DELAY``, ``flake_hunt.py --slow-writer``).

``add_entry`` answers once the write is queued; the server's writer thread
applies the queue a moment later. A test that reads the store's tables without
``await_consistency`` passed or failed by which came first (CI's run of
9c83753 read ``[]`` once). With the knob set, every memory server a run starts
is slow, so such a read fails every time.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentstate.memory.client import MemoryClient
from agentstate.memory.service.options import WRITE_DELAY_ENV, resolve_write_delay
from agentstate.memory.service.process import ServerProcess
from agentstate.memory.service.stores import read_memory_rows


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _refused(message: str):
    raise SystemExit(message)


@pytest.mark.parametrize(
    ("given", "environ", "delay"),
    [
        (None, {}, 0.0),
        (None, {WRITE_DELAY_ENV: " 0.25 "}, 0.25),
        (1.5, {WRITE_DELAY_ENV: "5"}, 1.5),
    ],
)
def test_the_delay_is_the_option_else_the_environment_else_none(given, environ, delay):
    assert resolve_write_delay(given, _refused, environ) == delay


@pytest.mark.parametrize(
    ("value", "said"),
    [("abc", "'abc' is not a number"), ("-1", "-1 is not between 0 and 3600"),
     ("nan", "nan is not between 0 and 3600"), ("3601", "3601 is not between 0 and 3600")],
)  # fmt: skip
def test_a_bad_delay_in_the_environment_is_refused_in_one_line_and_creates_nothing(
    tmp_path, monkeypatch, value, said
):
    monkeypatch.delenv("AGENTSTATE_MEMORY_TOKEN", raising=False)
    monkeypatch.setenv(WRITE_DELAY_ENV, value)
    db = tmp_path / "m.sqlite"
    done = subprocess.run(
        [sys.executable, "-m", "agentstate.cli", "memory", "serve", "--db", str(db),
         "--transport", "http", "--port", "18767"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"agentstate memory serve: error: ${WRITE_DELAY_ENV}: {said}"
    ]
    assert not db.exists()


@pytest.mark.anyio
async def test_a_server_started_with_the_knob_holds_an_acknowledged_write_in_its_queue(
    tmp_path, monkeypatch
):
    """A minute's delay: the acknowledged write is queued and not in the entries table (the
    read a test must not make without ``await_consistency``). Killed and started without the
    knob on the same file, the server applies the queue: the delay loses nothing."""
    monkeypatch.delenv("AGENTSTATE_MEMORY_TOKEN", raising=False)
    monkeypatch.setenv(WRITE_DELAY_ENV, "60")
    server = ServerProcess(tmp_path / "m.sqlite").start()
    try:
        async with MemoryClient(server.url) as client:
            await client.call("create_memory", vault_id="v", memory_id="m")
            answer = await client.call(
                "add_entry", vault_id="v", memory_id="m", raw_entry="queued", summary="s"
            )
        held = read_memory_rows(server.db, "m")
        assert (answer, held["entries"], held["pending"]) == ("enqueued", [], 1)
        server.kill()
        monkeypatch.delenv(WRITE_DELAY_ENV)
        server.start()
        async with MemoryClient(server.url) as client:
            assert await client.call("await_consistency", memory_id="m") == "consistent"
        assert [e["raw_entry"] for e in read_memory_rows(server.db, "m")["entries"]] == ["queued"]
    finally:
        server.stop()
