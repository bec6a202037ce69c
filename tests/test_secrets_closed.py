"""Issue 40, item 3: secrets closed by construction, one test per case of the attack round.

Each case runs a plain ``create_agent`` with the generic middleware and a
real SQLite checkpointer: a tool resolves the reference the model's password
became and fails (or answers) in a shape of the round. The plain value may
not be in the exception the caller gets (its printed traceback, its chain,
its arguments and attributes, an object's attributes below them), the state,
a streamed chunk or a checkpoint byte. Every test here failed before the fix
(``PYTHONPATH=/work/main/src`` at b0197b5), except the ``__notes__`` and
``__cause__ chain`` shapes, kept beside them as the walk's known ground.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable
from typing import Annotated, Any

import httpx
import pytest
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.types import Command

from agentstate.core import SecretRedactionMiddleware, SecretStore
from agentstate.models import reply, tool_call
from agentstate.persistence import file_contains
from tests.secret_providers import MODES, provider, run
from tests.secret_shapes import leaks

PLAIN = "Vex-5512-Hollow-Quartz"
OTHER = "Mint-7731-Harbor-Lynx"


def connect_agent(model, store: SecretStore, connect) -> Callable[[Any], Any]:
    """``saver -> agent``: ``connect`` behind the middleware that hides its ``password``."""

    def make(saver):
        return create_agent(
            model,
            tools=[connect],
            middleware=[SecretRedactionMiddleware(store, secret_args={"connect": ["password"]})],
            checkpointer=saver,
        )

    return make


def run_failing(tool_obj, mode: str, db, replies=None) -> tuple[dict, list, BaseException | None]:
    """One turn: the model gives ``PLAIN`` to ``connect``; state, chunks and the error raised."""
    store = SecretStore()
    tool_obj.store = store  # the tool resolves the reference with it
    replies = replies or [reply(tool_call("connect", host="db1", password=PLAIN)), reply(text="ok")]
    error: BaseException | None = None
    with provider("scripted", replies) as (model, _):
        make = connect_agent(model, store, tool_obj.tool)

        try:
            state, chunks = run(make, mode, db, ["connect to db1"])
        except Exception as exc:  # noqa: BLE001 - the test reads it
            error, state, chunks = exc, {}, []
    return state, chunks, error


class Failing:
    """A ``connect`` tool that resolves its password and fails with ``make(plain)``."""

    def __init__(self, make: Callable[[str], BaseException], *, handled: bool = False) -> None:
        self.store: SecretStore | None = None
        failing = self

        @tool
        def connect(host: str, password: str) -> str:
            """Connect to a database."""
            assert failing.store is not None
            raise make(failing.store.resolve(password))

        connect.handle_tool_error = handled
        self.tool = connect


def http_error(plain: str) -> httpx.HTTPStatusError:
    request = httpx.Request("GET", f"https://api.example/v1/items?key={plain}")
    response = httpx.Response(403, request=request)
    return httpx.HTTPStatusError("403 Forbidden", request=request, response=response)


def noted(plain: str) -> ValueError:
    error = ValueError("connection refused")
    error.add_note(f"while trying admin:{plain}@db1")
    return error


def chained(plain: str) -> RuntimeError:
    try:
        raise ConnectionError(f"FATAL: password authentication failed for admin:{plain}@db1")
    except ConnectionError as inner:
        outer = RuntimeError("the database is unavailable")
        outer.__cause__ = inner
        return outer


SHAPES: dict[str, Callable[[str], BaseException]] = {
    "ExceptionGroup": lambda p: ExceptionGroup(
        "unhandled errors in a TaskGroup", [ConnectionError(f"admin:{p}@db1")]
    ),
    "nested ExceptionGroup": lambda p: ExceptionGroup(
        "outer", [ValueError("fine"), ExceptionGroup("inner", [KeyError(p)])]
    ),
    "OSError.filename": lambda p: FileNotFoundError(2, "No such file or directory", f"/run/{p}"),
    "OSError.filename2": lambda p: OSError(17, "File exists", "/a", None, f"/b/{p}"),
    "CalledProcessError.stderr bytes": lambda p: subprocess.CalledProcessError(
        2, ["psql", "-h", "db1"], stderr=f"psql: FATAL: password {p} rejected".encode()
    ),
    "bytes argument": lambda p: ConnectionError(f"\x00\x01raw {p}\xff".encode("latin-1")),
    "httpx request.url": http_error,
    "__notes__": noted,
    "__cause__ chain": chained,
}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("mode", ["invoke", "astream"])
def test_an_error_shape_of_the_round_keeps_no_plain_value(shape, mode, tmp_path):
    """Issue 40, Why 3 and 4: each shape carried the plain value to the caller or the disk."""
    db = tmp_path / "shape.sqlite"
    state, chunks, error = run_failing(Failing(SHAPES[shape]), mode, db)
    assert error is not None, "the tool's error reaches the caller"
    assert not leaks(PLAIN, state=state, chunks=chunks, error=error, db=db), shape


def test_an_exception_group_keeps_its_type_and_members(tmp_path):
    """The redacted group is still an ExceptionGroup, so ``except*`` still matches."""
    db = tmp_path / "group.sqlite"
    state, _, error = run_failing(Failing(SHAPES["ExceptionGroup"]), "invoke", db)
    assert isinstance(error, ExceptionGroup)
    (member,) = error.exceptions
    assert isinstance(member, ConnectionError) and "$secret:password-" in str(member)


def test_oserror_keeps_its_fields_with_the_reference(tmp_path):
    _, _, error = run_failing(Failing(SHAPES["OSError.filename"]), "invoke", tmp_path / "o.sqlite")
    assert isinstance(error, FileNotFoundError) and error.errno == 2
    assert error.filename.startswith("/run/$secret:password-")


@pytest.mark.parametrize("mode", ["ainvoke", "astream"])
def test_an_async_tool_failing_in_a_task_group(mode, tmp_path):
    """The issue's High 3: ``asyncio.TaskGroup`` wraps the driver's error in an ExceptionGroup."""
    store = SecretStore()

    @tool
    async def connect(host: str, password: str) -> str:
        """Connect to a database."""
        plain = store.resolve(password)

        async def dial() -> None:
            raise ConnectionError(f"could not connect to postgres://admin:{plain}@{host}/app")

        async with asyncio.TaskGroup() as group:
            group.create_task(dial())
        return "connected"

    db = tmp_path / "group.sqlite"
    replies = [reply(tool_call("connect", host="db1", password=PLAIN)), reply(text="ok")]
    with provider("scripted", replies) as (model, _):
        make = connect_agent(model, store, connect)

        with pytest.raises(ExceptionGroup) as caught:
            run(make, mode, db, ["connect"])
    assert not leaks(PLAIN, state={}, chunks=[], error=caught.value, db=db)


@pytest.mark.parametrize("mode", MODES)
def test_an_error_tool_message_returned_inside_a_command(mode, tmp_path):
    """Why 4: a tool returning ``Command(update={"messages": [ToolMessage(status="error")]})``."""
    store = SecretStore()

    @tool
    def connect(
        host: str, password: str, tool_call_id: Annotated[str, InjectedToolCallId]
    ) -> Command:
        """Connect to a database."""
        text = f"FATAL: password authentication failed (admin:{store.resolve(password)}@{host})"
        message = ToolMessage(text, tool_call_id=tool_call_id, status="error")
        return Command(update={"messages": [message]})

    db = tmp_path / "command.sqlite"
    replies = [reply(tool_call("connect", host="db1", password=PLAIN)), reply(text="ok")]
    with provider("scripted", replies) as (model, _):
        make = connect_agent(model, store, connect)

        state, chunks = run(make, mode, db, ["connect"])
    (answer,) = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert answer.status == "error" and "$secret:password-" in answer.content
    assert not leaks(PLAIN, state=state, chunks=chunks, error=None, db=db)


@tool
def note(text: str) -> str:
    """Keep a free-text note."""
    return "noted"


def note_agent(store: SecretStore, model, saver):
    return create_agent(
        model,
        tools=[note],
        middleware=[SecretRedactionMiddleware(store, text_args={"note": ["text"]})],
        checkpointer=saver,
    )


def run_note(text: str, tmp_path, mode: str = "invoke", *, first=()) -> tuple[dict, list, Any]:
    store, db = SecretStore(), tmp_path / "note.sqlite"
    replies = [*first, reply(tool_call("note", text=text)), reply(text="ok")]
    with provider("scripted", replies) as (model, _):
        state, chunks = run(lambda saver: note_agent(store, model, saver), mode, db, ["go"])
    return state, chunks, db


@pytest.mark.parametrize("mode", ["invoke", "astream"])
def test_a_key_written_twice_in_json_text(mode, tmp_path):
    """Why 4: ``{"password": S, "password": null}`` parsed to ``password: null``, S kept as text."""
    text = json.dumps({"host": "db1"})[:-1] + f', "password": "{PLAIN}", "password": null}}'
    state, chunks, db = run_note(text, tmp_path, mode)
    assert not leaks(PLAIN, state=state, chunks=chunks, error=None, db=db)


def test_two_known_values_overlapping_are_both_hidden_whole():
    """Why 5: the rightmost match alone left 14 of the first value's 20 characters plain."""
    from agentstate.core.redaction_values import KnownValues  # noqa: PLC0415

    store = SecretStore()
    first, second = "AAAAAAAAAAAAAAOVERLAP", "OVERLAPBBBBBBBBBBBBBB"  # 20 and 21 characters
    store.put("a", first, thread="t")
    store.put("b", second, thread="t")
    text = "creds: AAAAAAAAAAAAAAOVERLAPBBBBBBBBBBBBBB end"
    clean = KnownValues(store.index("t")).text(text)
    assert "AAAA" not in clean and "BBBB" not in clean and "OVERLAP" not in clean
    assert clean.startswith("creds: $secret:a-") and clean.endswith(" end")
    refs = clean[len("creds: ") : -len(" end")]
    assert "$secret:b-" in refs  # both references, in the order the values start


@pytest.mark.parametrize("mode", ["invoke", "astream"])
def test_a_degenerate_reply_2000_brackets_deep_with_a_known_value(mode, tmp_path):
    """Why 6: ``[[[[...`` (2,000) in a reply: RecursionError once the thread knew a value."""
    store, db = SecretStore(), tmp_path / "deep.sqlite"
    replies = [
        reply(tool_call("connect", host="db1", password=PLAIN)),
        reply(text="Connected."),
        reply(text="[" * 2000 + PLAIN),
    ]

    @tool
    def connect(host: str, password: str) -> str:
        """Connect to a database."""
        return "connected"

    with provider("scripted", replies) as (model, _):
        make = connect_agent(model, store, connect)

        state, chunks = run(make, mode, db, ["connect", "again"])
    assert state["messages"][-1].content.startswith("[[[[")
    assert not leaks(PLAIN, state=state, chunks=chunks, error=None, db=db)


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_a_task_description_of_deep_json(depth, tmp_path):
    """Why 6: a task description holding 1,000-deep JSON ended the run in RecursionError."""
    text = "[" * depth + json.dumps({"password": PLAIN}) + "]" * depth
    state, chunks, db = run_note(text, tmp_path)
    (call,) = [m for m in state["messages"] if getattr(m, "tool_calls", None)]
    assert "$secret:password-" in call.tool_calls[0]["args"]["text"]
    assert not leaks(PLAIN, state=state, chunks=chunks, error=None, db=db)


def test_16000_digits_are_read_in_linear_time(tmp_path):
    """Why 6: ``'[' + 16,000 digits + '.x'`` took 6.4-12 s (quadratic); 2,000 took 0.1-0.2 s.

    Linear means 8 times the digits cost about 8 times as much: the ratio is
    checked (best of 5), with room for a noisy machine, never an absolute time.
    """
    import time  # noqa: PLC0415

    from agentstate.core.redaction_json import read_partial  # noqa: PLC0415

    def cost(n: int) -> float:
        """Best of 5 times 20 reads (each read is tens of microseconds once linear)."""
        text = "[" + "1" * n + ".x"
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(20):
                assert read_partial(text) is None
            best = min(best, time.perf_counter() - start)
            if best > 20:  # quadratic (4-12 s a read): no need to measure more
                break
        return best

    ratio = cost(16_000) / cost(2_000)
    assert ratio < 32, f"16,000 digits cost {ratio:.1f} times 2,000: not linear (quadratic: 64)"
    state, _, _ = run_note("[" + "1" * 16_000 + ".x", tmp_path)  # through the middleware
    assert state["messages"][-1].content == "ok"


# --- the backstop: a shape the walk does not know ---


class Scrambled:
    """A new shape on purpose: keeps the value reversed, shows it plain in its repr."""

    def __init__(self, value: str) -> None:
        self._kept = value[::-1]

    def __repr__(self) -> str:
        return f"Scrambled(token={self._kept[::-1]!r})"


class VaultError(Exception):
    """An exception class with a custom attribute the walker does not know."""

    def __init__(self, vault: Scrambled) -> None:
        super().__init__(vault)
        self.vault = vault


@pytest.mark.parametrize("mode", MODES)
def test_the_backstop_catches_a_shape_nobody_listed(mode, tmp_path):
    """The walk finds nothing to replace in ``VaultError(Scrambled(...))``; the backstop does.

    The error the caller gets is a stand-in of the same type (``except
    VaultError`` still matches) whose text carries the reference, and the
    checkpoint (LangGraph writes the error's ``repr``) holds ``*`` where the
    value was.
    """
    db = tmp_path / "vault.sqlite"
    state, chunks, error = run_failing(Failing(lambda p: VaultError(Scrambled(p))), mode, db)
    assert isinstance(error, VaultError), type(error)
    assert "Scrambled(token='$secret:password-" in str(error)
    assert not leaks(PLAIN, state=state, chunks=chunks, error=error, db=db)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_the_checkpoint_backstop_masks_a_value_in_a_tool_result(mode, tmp_path):
    """A tool that returns a known value in a result (not an error): only the backstop sees it.

    The value pass leaves successful tool results alone; the checkpoint bytes
    are still searched, and the value is overwritten with ``*`` (the state in
    memory for this run keeps what the tool said; what is stored does not).
    """
    store, db = SecretStore(), tmp_path / "result.sqlite"

    @tool
    def connect(host: str, password: str) -> str:
        """Connect to a database."""
        return f"connected with {store.resolve(password)}"

    replies = [reply(tool_call("connect", host="db1", password=PLAIN)), reply(text="ok")]
    with provider("scripted", replies) as (model, _):
        make = connect_agent(model, store, connect)

        state, _ = run(make, mode, db, ["connect"])
    (result,) = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert result.content == "connected with " + "*" * len(PLAIN)  # read back from the checkpoint
    assert not file_contains(db, PLAIN.encode())


@pytest.mark.parametrize("api", ["sync", "async"])
def test_the_backstop_scans_an_encrypted_checkpointer_before_encryption(api, tmp_path, monkeypatch):
    """With ``encrypt=True`` the bytes on disk are ciphertext: the plaintext is searched first."""
    import secrets as random  # noqa: PLC0415

    from agentstate.persistence import async_sqlite_checkpointer, sqlite_checkpointer  # noqa: PLC0415

    monkeypatch.setenv("LANGGRAPH_AES_KEY", random.token_hex(16))
    store, db = SecretStore(), tmp_path / "encrypted.sqlite"
    config = {"configurable": {"thread_id": "e"}}

    @tool
    def connect(host: str, password: str) -> str:
        """Connect to a database."""
        return f"connected with {store.resolve(password)}"

    replies = [reply(tool_call("connect", host="db1", password=PLAIN)), reply(text="ok")]
    payload = {"messages": [("user", "connect")]}
    with provider("scripted", replies) as (model, _):
        make = connect_agent(model, store, connect)

        if api == "sync":
            with sqlite_checkpointer(db, encrypt=True) as saver:
                make(saver).invoke(payload, config)
        else:

            async def arun() -> None:
                async with async_sqlite_checkpointer(db, encrypt=True) as saver:
                    await make(saver).ainvoke(payload, config)

            asyncio.run(arun())
    with sqlite_checkpointer(db, encrypt=True) as saver:  # a fresh checkpointer reads it back
        state = saver.get_tuple(config).checkpoint["channel_values"]
    (result,) = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert result.content == "connected with " + "*" * len(PLAIN)


def test_mask_keeps_references_field_names_and_a_loadable_checkpoint():
    """Byte for byte: msgpack still loads; the store's references and a field name stay."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer  # noqa: PLC0415

    from agentstate.core.redaction_backstop import _THREAD, ScanningSerializer  # noqa: PLC0415

    store = SecretStore()
    ref = store.put("password", "password", thread="t")  # a secret equal to a field name
    other = store.put("api-key", PLAIN, thread="t")
    store.put("x", OTHER, thread="u")  # another thread's value: not searched in t's writes
    serde = ScanningSerializer(JsonPlusSerializer(), store, exempt=lambda s: s == "password")
    value = {
        "args": {"field_name": "password", "value": ref},
        "text": f"key {PLAIN} and {OTHER}, bytes follow",
        "raw": b"\xff" + PLAIN.encode(),  # not UTF-8: masked all the same
        "ref": other,
    }
    token = _THREAD.set("t")
    try:
        kind, data = serde.dumps_typed(value)
    finally:
        _THREAD.reset(token)
    back = serde.loads_typed((kind, data))
    assert back["args"] == {"field_name": "password", "value": ref} and back["ref"] == other
    assert back["text"] == f"key {'*' * len(PLAIN)} and {OTHER}, bytes follow"
    assert back["raw"] == b"\xff" + b"*" * len(PLAIN)


def test_a_short_value_inside_langgraph_bookkeeping_is_left_loadable(tmp_path):
    """A pin ``1234`` found by chance in a checkpoint id, a channel version or a timestamp.

    CI once masked ``...-9123413d341e`` to ``...-9****13d341e`` in a checkpoint id
    and the next step failed (``binascii.Error``). The value is still masked
    where it is a value: in a message, and when it is a whole uuid.
    """
    from langchain_core.messages import HumanMessage  # noqa: PLC0415
    from langgraph.checkpoint.base import empty_checkpoint  # noqa: PLC0415

    from agentstate.core.redaction_backstop import guard_checkpointer  # noqa: PLC0415
    from agentstate.persistence import sqlite_checkpointer  # noqa: PLC0415

    uuid_secret = "0b9c1234-5d6e-4f70-8a9b-0c1d2e3f4a5b"
    store = SecretStore()
    store.put("pin", "1234", thread="t")
    store.put("token", uuid_secret, thread="t")
    checkpoint = empty_checkpoint()
    checkpoint["id"] = "1f1eb327-85a9-6d18-8002-9123413d341e"
    checkpoint["ts"] = "2026-11-28T12:34:02.512346+00:00"
    version = f"{3:032}.{0.8812345678901234:016}"
    checkpoint["channel_versions"] = {"messages": version}
    checkpoint["versions_seen"] = {"model": {"messages": version}}
    checkpoint["channel_values"] = {
        "messages": [HumanMessage("pin 1234, token " + uuid_secret, id=uuid_secret)]
    }
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    db = tmp_path / "bookkeeping.sqlite"
    with sqlite_checkpointer(db) as saver:
        guard_checkpointer(saver, store)
        saver.put(config, checkpoint, {"source": "loop", "step": 1}, {"messages": version})
    with sqlite_checkpointer(db) as saver:  # a fresh, unguarded checkpointer reads it back
        back = saver.get_tuple(config).checkpoint
    assert back["id"] == checkpoint["id"] and back["ts"] == checkpoint["ts"]
    assert back["channel_versions"] == {"messages": version}
    assert back["versions_seen"] == {"model": {"messages": version}}
    (message,) = back["channel_values"]["messages"]
    assert message.content == "pin ****, token " + "*" * len(uuid_secret)
    assert message.id == "*" * len(uuid_secret)  # the whole uuid was the secret
