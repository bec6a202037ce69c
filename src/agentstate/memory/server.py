"""The memory MCP server: the anchor's tools over SQLite, run as its own process.

Tools (names and parameters of the Mycelian Memory anchor): ``add_entry``,
``list_entries``, ``get_entry``, ``put_context``, ``get_context``,
``await_consistency``, ``search_memories``; plus ``create_memory``, ours,
because a memory must exist before it is written. Bad input raises a
``ToolError`` whose message says what is wrong; the client receives it as an
MCP error result and nothing is written. Run it with
``agentstate memory serve --db PATH`` (stdio) or ``--transport http --port N``
(streamable HTTP, bound to 127.0.0.1 only). Taught in notebook 06.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import Any

# jsonschema (imported by mcp) loads rfc3987_syntax, if installed, only for its optional "iri"
# format check, and that module builds a grammar at import: ~3 s of every server start on a
# 2-core machine. The server never checks that format, so it starts without it.
if __name__ == "__main__":
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

import anyio  # noqa: E402
from mcp.server.fastmcp import FastMCP  # noqa: E402
from mcp.server.fastmcp.exceptions import ToolError  # noqa: E402

from agentstate.memory.store import (  # noqa: E402
    MemoryError_,
    MemoryStore,
    check_id,
    new_entry_id,
    parse_time,
)
from agentstate.memory.writer import Writer  # noqa: E402

CONSISTENCY_TIMEOUT = 30.0
HOST = "127.0.0.1"


def _tags(tags: Any) -> dict[str, Any]:
    if tags is None:
        return {}
    if isinstance(tags, str):
        try:
            tags = json.loads(tags)
        except json.JSONDecodeError:
            raise MemoryError_('tags must be a JSON object, e.g. {"role": "user"}') from None
    if not isinstance(tags, dict):
        raise MemoryError_("tags must be an object of key/value pairs")
    return tags


def _int(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MemoryError_(f"{name} must be an integer between {low} and {high}, got {value!r}")
    return value


def build_server(db_path: str | Path, port: int = 8765, write_delay: float = 0.0) -> FastMCP:
    """A FastMCP app over the SQLite file at ``db_path`` (created if missing)."""
    store = MemoryStore(db_path)
    writer = Writer(store, delay=write_delay)
    mcp = FastMCP(
        "agentstate-memory",
        host=HOST,
        port=port,
        log_level="WARNING",
        stateless_http=True,
        json_response=True,
    )

    def tool(fn):
        """Register ``fn`` as a tool whose input errors become MCP errors with their message."""

        @functools.wraps(fn)
        async def wrapper(*args, **kwargs):
            try:
                return await fn(*args, **kwargs)
            except (MemoryError_, TimeoutError) as exc:
                raise ToolError(str(exc)) from None

        return mcp.tool()(wrapper)

    @tool
    async def create_memory(vault_id: str, memory_id: str, title: str = "") -> str:
        """Create a memory in a vault (memory ids are unique). Returns "created" or "exists"."""
        return "created" if store.create_memory(vault_id, memory_id, title) else "exists"

    @tool
    async def add_entry(
        vault_id: str,
        memory_id: str,
        raw_entry: str,
        summary: str,
        tags: dict[str, Any] | None = None,
    ) -> str:
        """Queue one entry; raw_entry is kept byte for byte. Returns "enqueued"."""
        store.require_memory(vault_id, memory_id)
        entry_tags = _tags(tags)
        entry_id = new_entry_id()
        payload = {
            "entry_id": entry_id,
            "vault_id": vault_id,
            "raw_entry": raw_entry,
            "summary": summary,
            "tags": entry_tags,
        }
        with writer.submitting(memory_id):
            store.enqueue(memory_id, "entry", payload, {"entry_id": entry_id, "tags": entry_tags})
        return "enqueued"

    @tool
    async def list_entries(
        vault_id: str,
        memory_id: str,
        limit: int = 25,
        before: str | None = None,
        after: str | None = None,
    ) -> str:
        """Entries oldest first as JSON; limit 1..50; at most one of before/after (RFC3339)."""
        store.require_memory(vault_id, memory_id)
        _int(limit, "limit", 1, 50)
        if before is not None and after is not None:
            raise MemoryError_("give before or after, not both")
        cursors = {
            "before": parse_time(before, "before") if before is not None else None,
            "after": parse_time(after, "after") if after is not None else None,
        }
        entries = store.list_entries(memory_id, limit, **cursors)
        store.log_op(memory_id, "list_entries", {"limit": limit, **cursors})
        return json.dumps({"entries": entries}, ensure_ascii=False)

    @tool
    async def get_entry(vault_id: str, memory_id: str, entry_id: str) -> str:
        """One entry as JSON."""
        store.require_memory(vault_id, memory_id)
        check_id(entry_id, "entry_id")
        entry = store.get_entry(memory_id, entry_id)
        store.log_op(memory_id, "get_entry", {"entry_id": entry_id})
        return json.dumps(entry, ensure_ascii=False)

    @tool
    async def put_context(vault_id: str, memory_id: str, content: str) -> str:
        """Queue a new context snapshot (plain text; every write kept). Returns "enqueued"."""
        store.require_memory(vault_id, memory_id)
        with writer.submitting(memory_id):
            store.enqueue(
                memory_id,
                "context",
                {"vault_id": vault_id, "content": content},
                {"chars": len(content)},
            )
        return "enqueued"

    @tool
    async def get_context(vault_id: str, memory_id: str) -> str:
        """The latest context snapshot, or "context not found"."""
        store.require_memory(vault_id, memory_id)
        latest = store.contexts(memory_id, 1)
        store.log_op(memory_id, "get_context")
        return latest[0]["content"] if latest else "context not found"

    @tool
    async def await_consistency(memory_id: str) -> str:
        """Wait until every queued write of the memory is applied. Returns "consistent"."""
        store.vault_of(memory_id)
        await anyio.to_thread.run_sync(writer.wait, memory_id, CONSISTENCY_TIMEOUT)
        store.log_op(memory_id, "await_consistency")
        return "consistent"

    @tool
    async def search_memories(memory_id: str, query: str, top_ke: int = 5, top_kc: int = 1) -> str:
        """Full-text search of entries (top_ke 0..25) plus the latest contexts (top_kc 1..10)."""
        store.vault_of(memory_id)
        _int(top_ke, "top_ke", 0, 25)
        _int(top_kc, "top_kc", 1, 10)
        found = {
            "entries": store.search(memory_id, query, top_ke),
            "contexts": store.contexts(memory_id, top_kc),
        }
        store.log_op(memory_id, "search_memories", {"top_ke": top_ke, "top_kc": top_kc})
        return json.dumps(found, ensure_ascii=False)

    mcp.agentstate_store = store  # type: ignore[attr-defined]  # in-process inspection
    mcp.agentstate_writer = writer  # type: ignore[attr-defined]
    return mcp


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="agentstate memory MCP server (notebook 06)")
    parser.add_argument("--db", required=True, help="SQLite file (created if missing)")
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--port", type=int, default=8765, help="HTTP port (127.0.0.1 only)")
    parser.add_argument(
        "--write-delay",
        type=float,
        default=0.0,
        help="seconds the writer waits before each queued write (demos, tests)",
    )
    args = parser.parse_args(argv)
    db = Path(args.db)
    if not db.parent.exists():
        parser.error(f"--db {db}: directory {db.parent} does not exist")
    server = build_server(db, port=args.port, write_delay=args.write_delay)
    try:
        server.run("streamable-http" if args.transport == "http" else "stdio")
    except KeyboardInterrupt:
        pass
    finally:
        server.agentstate_writer.close()  # type: ignore[attr-defined]
    return 0


if __name__ == "__main__":
    sys.exit(main())
