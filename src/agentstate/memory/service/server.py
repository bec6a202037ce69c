"""The memory MCP server: the Mycelian Memory tools over SQLite or Postgres, as its own process.

Tools (names and parameters of Mycelian Memory's MCP server): ``add_entry``,
``list_entries``, ``get_entry``, ``put_context``, ``get_context``,
``await_consistency``, ``search_memories``; plus two of ours: ``create_memory``,
because a memory must exist before it is written, and ``assign_position``,
which gives a message its position once, atomically, for writers that do not
know it (two capture runs on one thread must never give two messages one key). Bad input raises a
``ToolError`` whose message says what is wrong; the client receives it as an
MCP error result and nothing is written. ``add_entry`` and ``put_context``
take an optional ``idempotency_key`` (ours): a write sent again with a key
its memory already has answers "already enqueued" and is not stored twice,
which makes a retry after a lost reply, or a resent message, safe. Reads return structured content
(``list_entries`` with the ``seq`` cursor of its next page).

Run it with ``agentstate memory serve --db PATH`` (stdio) or ``--transport
http --port N`` (streamable HTTP, bound to 127.0.0.1 only). Over HTTP any
local process can read and write unless a bearer token is set
(``AGENTSTATE_MEMORY_TOKEN`` or ``--token-file``, never a visible argument);
then a request without ``Authorization: Bearer <token>`` gets HTTP 401. One
server per SQLite file: a second one on the same file exits with an error.
``--db postgresql://...`` instead makes this process one replica of a fleet:
any number of them serve one database, each write stored once whichever
replica gets it (:mod:`.store_postgres`); a database that is down or
restarting is retried, then reported in one line, never acknowledged. Taught
in notebook 06 (the fleet: going-further 06b).
"""

from __future__ import annotations

import argparse
import functools
import hmac
import inspect
import json
import logging
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

# jsonschema (imported by mcp) loads rfc3987_syntax, if installed, only for its optional "iri"
# format check, and that module builds a grammar at import: ~3 s of every server start on a
# 2-core machine. The server never checks that format, so it starts without it: a None entry in
# sys.modules makes that import fail (typeshed allows only modules there, hence the ignore).
if __name__ == "__main__":
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

import anyio  # noqa: E402
from mcp.server.fastmcp import FastMCP  # noqa: E402
from mcp.server.fastmcp.exceptions import ToolError  # noqa: E402
from pydantic import WithJsonSchema  # noqa: E402

from agentstate.memory.service.checks import (  # noqa: E402
    LAST_SEQ,
    MAX_POSITION,
    MAX_TAGS_CHARS,
    MemoryInputError,
    check_id,
    check_key,
    check_text,
    parse_time,
)
from agentstate.memory.service.options import (  # noqa: E402
    HOST,
    OneLineParser,
    add_serve_arguments,
    preflight,
)
from agentstate.memory.service.sql_store import StoreUnavailableError  # noqa: E402
from agentstate.memory.service.store import StoreInUseError, new_entry_id  # noqa: E402
from agentstate.memory.service.stores import QueueWriter, Store, open_service  # noqa: E402
from agentstate.memory.service.targets import redact  # noqa: E402

if TYPE_CHECKING:
    from agentstate.memory.service.limits import Limits

CONSISTENCY_TIMEOUT = 30.0
DUPLICATE = "already enqueued"  # a write whose idempotency_key the memory already has
Key = Annotated[
    Any,
    WithJsonSchema(
        {
            "anyOf": [{"type": "string", "maxLength": 200}, {"type": "null"}],
            "default": None,
            "description": "optional; a write sent again with the same key is stored once",
        }
    ),
]


def _int_schema(low: int, high: int, default: int) -> WithJsonSchema:
    """The schema of an integer argument checked by the tool itself, not coerced by pydantic.

    Pydantic's lax mode would turn ``True`` into 1 and ``"10"`` into 10; typed
    ``Any`` with the integer schema, the value arrives as sent and ``_int``
    refuses it with a plain message (the schema clients see is unchanged).
    """
    return WithJsonSchema({"type": "integer", "minimum": low, "maximum": high, "default": default})


# spelled as aliases (not returned by a function) so a type checker reads them as types
Limit = Annotated[Any, _int_schema(1, 50, 25)]
After = Annotated[Any, _int_schema(0, MAX_POSITION, 0)]
Cursor = Annotated[
    Any,
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}, {"type": "null"}],
            "default": None,
            "description": "exclusive: an entry's seq (as in a page's next), or an RFC3339 time",
        }
    ),
]
TopKe = Annotated[Any, _int_schema(0, 25, 5)]
TopKc = Annotated[Any, _int_schema(1, 10, 1)]


def _int(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MemoryInputError(f"{name} must be an integer between {low} and {high}, got {value!r}")
    return value


def _cursor(value: Any, name: str) -> int | str | None:
    """A ``list_entries`` cursor: None, an entry's ``seq`` (an int >= 0) or an RFC3339 time."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= LAST_SEQ:
        return value
    if isinstance(value, str):
        return parse_time(value, name)
    raise MemoryInputError(
        f"{name} must be the seq of an entry (an integer >= 0, as in a page's next) or an "
        f"RFC3339 timestamp, got {value!r}"
    )


def _tags(tags: Any) -> dict[str, Any]:
    if tags is None:
        return {}
    if isinstance(tags, str):
        try:
            tags = json.loads(tags)
        except json.JSONDecodeError:
            raise MemoryInputError('tags must be a JSON object, e.g. {"role": "user"}') from None
    if not isinstance(tags, dict):
        raise MemoryInputError("tags must be an object of key/value pairs")
    text = json.dumps(tags, ensure_ascii=False)
    if len(text) > MAX_TAGS_CHARS or "\\u0000" in text:
        raise MemoryInputError(f"tags must be at most {MAX_TAGS_CHARS} characters, without NUL")
    return tags


class MemoryServer(FastMCP[Any]):
    """The FastMCP app with its store and writer, for closing them and in-process inspection."""

    agentstate_store: Store
    agentstate_writer: QueueWriter


def build_server(
    db_path: str | Path, port: int = 8765, write_delay: float = 0.0, db_retry_for: float = 10.0
) -> MemoryServer:
    """A FastMCP app over the SQLite file at ``db_path`` (created 0600 if missing), or over
    the Postgres database a ``postgresql://`` URL names (one replica of a fleet).

    Raises ``MemoryInputError`` for a path that cannot be a store,
    ``StoreInUseError`` if another process serves the SQLite file and
    ``StoreUnavailableError`` if the Postgres database cannot be reached.
    """
    store, writer = open_service(db_path, write_delay, retry_for=db_retry_for)
    mcp = MemoryServer(
        "agentstate-memory",
        host=HOST,
        port=port,
        log_level="WARNING",
        # a kept session: a stateless server sets up a transport and a session per request
        stateless_http=False,
        json_response=True,
    )

    def tool(fn):
        """Register ``fn`` as a tool whose input errors become MCP errors with their message.

        A tool that answers one word ("enqueued", "consistent", a context's text)
        is registered without an output schema: the MCP client checks every
        structured result against its schema with jsonschema, which costs more
        CPU than the rest of the call. The reads that return records
        (``list_entries``, ``get_entry``, ``search_memories``) stay structured.
        """

        @functools.wraps(fn)
        async def wrapper(*args, **kwargs):
            try:
                if inspect.iscoroutinefunction(fn):
                    return await fn(*args, **kwargs)
                if store.blocking:  # a database across the network: off the event loop
                    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
                return fn(*args, **kwargs)
            except (MemoryInputError, TimeoutError, StoreUnavailableError) as exc:
                raise ToolError(str(exc)) from None

        returns_text = fn.__annotations__.get("return") in ("str", str)
        return mcp.tool(structured_output=not returns_text)(wrapper)

    @tool
    def create_memory(vault_id: str, memory_id: str, title: str = "") -> str:
        """Create a memory in a vault (memory ids are unique). Returns "created" or "exists"."""
        if title:
            check_text(title, "title")
        return "created" if store.create_memory(vault_id, memory_id, title) else "exists"

    @tool
    def add_entry(
        vault_id: str,
        memory_id: str,
        raw_entry: str,
        summary: str,
        tags: dict[str, Any] | None = None,
        idempotency_key: Key = None,
    ) -> str:
        """Queue one entry; raw_entry is kept byte for byte. Returns "enqueued".

        With an ``idempotency_key`` this memory already has, nothing is stored and
        the answer is "already enqueued" (a retried or resent write lands once).
        """
        store.require_memory(vault_id, memory_id)
        check_text(raw_entry, "raw_entry", blank_ok=True)
        check_text(summary, "summary")
        key = check_key(idempotency_key)
        entry_tags = _tags(tags)
        entry_id = new_entry_id()
        payload = {
            "entry_id": entry_id,
            "vault_id": vault_id,
            "raw_entry": raw_entry,
            "summary": summary,
            "tags": entry_tags,
        }
        detail = {"entry_id": entry_id, "tags": entry_tags}
        return _queue(memory_id, "entry", payload, detail, key)

    def _queue(memory_id: str, kind: str, payload: dict, detail: dict, key: str | None) -> str:
        with writer.submitting(memory_id):
            seq = store.enqueue(memory_id, kind, payload, detail, key)
        if seq is None:
            writer.withdraw(memory_id)
            return DUPLICATE
        return "enqueued"

    @tool
    def list_entries(
        vault_id: str,
        memory_id: str,
        limit: Limit = 25,
        before: Cursor = None,
        after: Cursor = None,
    ) -> dict[str, Any]:
        """A page of entries, oldest first, and ``next``: the cursor of the next page or null.

        limit 1..50; at most one of before/after, each exclusive: the ``seq`` of
        an entry (the order entries are stored and listed in) or an RFC3339
        time. Without ``after`` the page holds the newest entries and ``next`` =
        {"before": seq} pages back; with ``after``, ``next`` = {"after": seq}
        pages forward. Paging by seq skips and repeats nothing, whatever the clock did.
        """
        store.require_memory(vault_id, memory_id)
        _int(limit, "limit", 1, 50)
        if before is not None and after is not None:
            raise MemoryInputError("give before or after, not both")
        cursors = {"before": _cursor(before, "before"), "after": _cursor(after, "after")}
        entries, more = store.list_entries(memory_id, limit, **cursors)
        store.log_op(memory_id, "list_entries", {"limit": limit, **cursors})
        return {"entries": entries, "next": more}

    @tool
    def assign_position(vault_id: str, memory_id: str, message_key: str, after: After = 0) -> str:
        """The position (msg_idx) of one message in this memory, assigned once, atomically.

        The same ``message_key`` (the message's own id, up to 200 characters)
        always gets the same position; a new one gets the next free position,
        greater than ``after`` and than every msg_idx this memory holds, so two
        writers never give two messages one position. Returns the position.
        """
        store.require_memory(vault_id, memory_id)
        key = check_key(message_key, "message_key")
        if key is None:
            raise MemoryInputError("message_key is required")
        _int(after, "after", 0, MAX_POSITION)
        return str(store.assign_position(memory_id, key, after))

    @tool
    def get_entry(vault_id: str, memory_id: str, entry_id: str) -> dict[str, Any]:
        """One entry: entry_id, raw_entry, summary, tags, created_at."""
        store.require_memory(vault_id, memory_id)
        check_id(entry_id, "entry_id")
        entry = store.get_entry(memory_id, entry_id)
        store.log_op(memory_id, "get_entry", {"entry_id": entry_id})
        return entry

    @tool
    def put_context(
        vault_id: str, memory_id: str, content: str, idempotency_key: Key = None
    ) -> str:
        """Queue a new context snapshot (plain text; every write kept). Returns "enqueued".

        ``idempotency_key`` as for ``add_entry``: a key already used answers "already enqueued".
        """
        store.require_memory(vault_id, memory_id)
        check_text(content, "content")
        key = check_key(idempotency_key)
        payload = {"vault_id": vault_id, "content": content}
        return _queue(memory_id, "context", payload, {"chars": len(content)}, key)

    @tool
    def get_context(vault_id: str, memory_id: str) -> str:
        """The latest context snapshot, or "context not found"."""
        store.require_memory(vault_id, memory_id)
        latest = store.contexts(memory_id, 1)
        store.log_op(memory_id, "get_context")
        return latest[0]["content"] if latest else "context not found"

    @tool
    async def await_consistency(memory_id: str) -> str:
        """Wait until every queued write of the memory is applied. Returns "consistent"."""

        def settle() -> None:  # in a worker thread: it waits, and may ask the database
            store.vault_of(memory_id)
            writer.wait(memory_id, CONSISTENCY_TIMEOUT)
            store.log_op(memory_id, "await_consistency")

        await anyio.to_thread.run_sync(settle)
        return "consistent"

    @tool
    def search_memories(
        memory_id: str, query: str, top_ke: TopKe = 5, top_kc: TopKc = 1
    ) -> dict[str, Any]:
        """Full-text search of entries (top_ke 0..25) plus the latest contexts (top_kc 1..10)."""
        store.vault_of(memory_id)
        check_text(query, "query", blank_ok=True)
        _int(top_ke, "top_ke", 0, 25)
        _int(top_kc, "top_kc", 1, 10)
        found = {
            "entries": store.search(memory_id, query, top_ke),
            "contexts": store.contexts(memory_id, top_kc),
        }
        store.log_op(memory_id, "search_memories", {"top_ke": top_ke, "top_kc": top_kc})
        return found

    mcp.agentstate_store = store
    mcp.agentstate_writer = writer
    return mcp


class _PeerGone(logging.Filter):
    """Drop the MCP server's tracebacks for a client that went away (a clean disconnect).

    When a client ends its session, the SDK's stream writers find their stream
    closed and log ``ClosedResourceError`` with a full traceback: noise in the
    server's log for the most ordinary event. Any other error is still logged.
    """

    GONE = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)

    def filter(self, record: logging.LogRecord) -> bool:
        """False (dropped) for a record whose exception says the peer went away."""
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, self.GONE)


def quiet_disconnects() -> None:
    """Install :class:`_PeerGone` on the MCP streamable HTTP loggers (once)."""
    for name in ("mcp.server.streamable_http", "mcp.server.streamable_http_manager"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _PeerGone) for f in logger.filters):
            logger.addFilter(_PeerGone())


class BearerToken:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``.

    Compared in constant time; a refused request gets 401 and never reaches MCP.
    """

    def __init__(self, app, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = b'{"error": "missing or wrong bearer token"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def serve_http(server: FastMCP, token: str | None, limits: Limits | None = None) -> None:
    """Run the streamable HTTP app on 127.0.0.1: the size and connection limits first
    (:mod:`.limits`, before anything is authenticated), then the token check when one is set."""
    import uvicorn

    from agentstate.memory.service.limits import BodyLimit, Limits

    limits = limits or Limits()
    quiet_disconnects()
    app = server.streamable_http_app()
    config = uvicorn.Config(
        BodyLimit(BearerToken(app, token) if token else app, limits.max_request_bytes),
        host=HOST,
        port=server.settings.port,
        log_level="warning",
        lifespan="on",
        **limits.uvicorn_options(),
    )
    anyio.run(uvicorn.Server(config).serve)


def run(args: argparse.Namespace, error) -> int:
    """Serve until interrupted; ``error(message)`` ends bad arguments in one line (exit 2).

    Both entry points call ``preflight`` first (the command line before this
    module is even imported); the store's own checks here stay the authority.
    """
    token = args.token  # resolved by preflight: environment or --token-file, never argv
    try:
        server = build_server(
            args.db, port=args.port, write_delay=args.write_delay, db_retry_for=args.db_retry_for
        )
    except (
        MemoryInputError,
        StoreInUseError,
        StoreUnavailableError,
        sqlite3.Error,
        OSError,
    ) as exc:
        error(f"--db {redact(str(args.db))}: {exc}")
    try:
        if args.transport == "http":
            url = f"http://{HOST}:{args.port}/mcp"
            auth = "bearer token required" if token else "no token: any local process can use it"
            print(f"memory server on {url} ({auth})", flush=True)
            from agentstate.memory.service.limits import Limits

            limits = Limits(
                max_header_bytes=args.max_header_bytes,
                max_request_bytes=args.max_request_bytes,
                max_connections=args.max_connections,
                idle_timeout=args.idle_timeout,
            )
            serve_http(server, token, limits)
        else:
            server.run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        server.agentstate_writer.close()
        server.agentstate_store.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m agentstate.memory.service.server``: options as ``agentstate memory serve``."""
    cli = add_serve_arguments(
        OneLineParser(
            prog="agentstate memory serve", description="the memory MCP server of notebook 06"
        )
    )
    args = cli.parse_args(argv)
    preflight(args, cli.error)
    return run(args, cli.error)


if __name__ == "__main__":
    sys.exit(main())
