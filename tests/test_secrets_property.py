"""Issue 40, item 3 (c): a generator of exception and value shapes, over every provider client.

Hypothesis builds an exception from leaves (a driver's text, ``OSError``'s
fields, ``CalledProcessError``'s bytes, an ``httpx`` URL's query, a dict, a
named tuple, an object's attributes or ``__slots__``, and a shape the walk
does not know on purpose: a ``repr`` that decodes a scrambled value) and
combinators (exception groups, ``__cause__``, ``__context__``, notes, an
attribute holding another exception), with a generated secret. The model
(scripted, ``ChatOpenAI`` chat completions and Responses API,
``ChatAnthropic``; the real clients over the loopback replay servers) gives
the secret to ``connect``, which resolves it and raises the exception, or
returns it as an error ``ToolMessage``. The secret may be in none of: the
exception the caller gets, the stream, the state, the checkpoint bytes, the
client's next request. Bounded: a few examples per provider, fixed seed.
"""

from __future__ import annotations

import asyncio
import string
import subprocess
import tempfile
from collections import namedtuple
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import ToolException, tool

from agentstate.core import SecretRedactionMiddleware, SecretStore
from agentstate.models import reply, tool_call
from agentstate.persistence import async_sqlite_checkpointer, sqlite_checkpointer
from tests.secret_providers import MODES, PROVIDERS, STREAM_MODES, provider
from tests.secret_shapes import leaks

Make = Callable[[str], BaseException]
Point = namedtuple("Point", ["host", "dsn"])


class Slotted:
    __slots__ = ("dsn",)

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn


class Scrambled:
    """A shape the walk does not know: the value kept reversed, shown plain in the repr."""

    def __init__(self, value: str) -> None:
        self._kept = value[::-1]

    def __repr__(self) -> str:
        return f"Scrambled({self._kept[::-1]!r})"


class CarrierError(Exception):
    """A custom exception whose attribute holds a value (or another exception)."""

    def __init__(self, message: str, payload: Any) -> None:
        super().__init__(message)
        self.payload = payload


def _url_error(p: str) -> BaseException:
    request = httpx.Request("GET", f"https://api.example/v1?key={p}")
    return httpx.HTTPStatusError("403", request=request, response=httpx.Response(403))


LEAVES: dict[str, Make] = {
    "text": lambda p: ConnectionError(f"FATAL: password authentication failed admin:{p}@db1"),
    "filename": lambda p: FileNotFoundError(2, "No such file or directory", f"/run/{p}.pgpass"),
    "filename2": lambda p: OSError(18, "Invalid cross-device link", "/a", None, f"/b/{p}"),
    "strerror": lambda p: OSError(13, f"denied for {p}"),
    "stderr bytes": lambda p: subprocess.CalledProcessError(
        2, ["psql"], output=b"", stderr=f"psql: FATAL {p}".encode()
    ),
    "latin-1 bytes": lambda p: ValueError(f"\xff{p}\xfe".encode("latin-1")),
    "httpx url": _url_error,
    "dict arg": lambda p: KeyError({"detail": f"dsn=postgres://admin:{p}@db1"}),
    "named tuple": lambda p: RuntimeError(Point("db1", f"admin:{p}@db1")),
    "object attr": lambda p: CarrierError("bad config", SimpleNamespace(dsn=f"x:{p}@y")),
    "slots": lambda p: CarrierError("bad config", Slotted(p)),
    "unknown shape": lambda p: CarrierError("vault", Scrambled(p)),
    "unicode error": lambda p: UnicodeDecodeError("utf-8", f"{p}\xff".encode("latin-1"), 0, 1, "x"),
}


def group(children: list[Make]) -> Make:
    return lambda p: ExceptionGroup("unhandled errors in a TaskGroup", [c(p) for c in children])


def caused(pair: tuple[Make, Make]) -> Make:
    def make(p: str) -> BaseException:
        outer, inner = pair[0](p), pair[1](p)
        outer.__cause__ = inner
        return outer

    return make


def in_context(pair: tuple[Make, Make]) -> Make:
    def make(p: str) -> BaseException:
        outer, inner = pair[0](p), pair[1](p)
        outer.__context__ = inner
        return outer

    return make


def noted(child: Make) -> Make:
    def make(p: str) -> BaseException:
        exc = child(p)
        exc.add_note(f"while dialing admin:{p}@db1")
        return exc

    return make


def carried(child: Make) -> Make:
    return lambda p: CarrierError("a step failed", {"errors": [child(p)]})


SHAPES = st.recursive(
    st.sampled_from(sorted(LEAVES)).map(LEAVES.__getitem__),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(group),
        st.tuples(inner, inner).map(caused),
        st.tuples(inner, inner).map(in_context),
        inner.map(noted),
        inner.map(carried),
    ),
    max_leaves=4,
)
SECRETS = st.text(string.ascii_letters + string.digits, min_size=10, max_size=20).map(
    lambda s: f"Pw-{s}"
)


def run(model, make: Make, plain: str, mode: str, handled: bool, db: Path):
    """One turn on a fresh agent; the state, chunks and the error raised (or None)."""
    store = SecretStore()

    @tool
    def connect(host: str, password: str) -> str:
        """Connect to a database."""
        error = make(store.resolve(password))
        if handled:  # handle_tool_error answers ToolException only: its text is the error's
            raise ToolException(repr(error)) from error
        raise error

    connect.handle_tool_error = handled
    config = {"configurable": {"thread_id": "t"}}
    payload = {"messages": [HumanMessage("connect to db1")]}

    def agent(saver):
        return create_agent(
            model,
            tools=[connect],
            middleware=[SecretRedactionMiddleware(store, secret_args={"connect": ["password"]})],
            checkpointer=saver,
        )

    chunks: list = []
    error: BaseException | None = None
    if mode in ("invoke", "stream"):
        with sqlite_checkpointer(db) as saver:
            graph = agent(saver)
            try:
                if mode == "invoke":
                    graph.invoke(payload, config)
                else:
                    chunks += graph.stream(payload, config, stream_mode=STREAM_MODES)
            except Exception as exc:  # noqa: BLE001 - the test reads it
                error = exc
            return graph.get_state(config).values, chunks, error

    async def arun():
        nonlocal error
        async with async_sqlite_checkpointer(db) as saver:
            graph = agent(saver)
            try:
                if mode == "ainvoke":
                    await graph.ainvoke(payload, config)
                else:
                    async for chunk in graph.astream(payload, config, stream_mode=STREAM_MODES):
                        chunks.append(chunk)
            except Exception as exc:  # noqa: BLE001 - the test reads it
                error = exc
            return (await graph.aget_state(config)).values, chunks, error

    return asyncio.run(arun())


@pytest.mark.parametrize("kind", PROVIDERS)
@settings(
    max_examples=15,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure is reported as found
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    make=SHAPES,
    plain=SECRETS,
    mode=st.sampled_from(MODES),
    handled=st.booleans(),
)
def test_no_generated_shape_carries_the_secret(kind, make, plain, mode, handled):
    replies = [reply(tool_call("connect", host="db1", password=plain)), reply(text="Sorry.")]
    with tempfile.TemporaryDirectory() as folder, provider(kind, replies) as (model, server):
        db = Path(folder) / "shape.sqlite"
        state, chunks, error = run(model, make, plain, mode, handled, db)
        assert (error is None) == handled, error
        found = leaks(plain, state=state, chunks=chunks, error=error, db=db, server=server)
    assert not found, (kind, mode, handled, repr(make(plain))[:300])
