"""The memory MCP server: the anchor's tools over SQLite, as its own process.

Tools: ``create_memory`` (ours: memories must exist before use),
``add_entry``, ``list_entries``, ``get_entry``, ``put_context``,
``get_context``, ``await_consistency``, ``search_memories``. Bad input raises
a ``ToolError`` whose message says what is wrong; MCP returns it to the
client as an error result and nothing is written. Run it with
``agentstate memory serve --db PATH`` (stdio) or ``--transport http``.
Taught in notebook 06.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path
from typing import Any

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError

from agentstate.memory.store import (
    MemoryError_,
    MemoryStore,
    check_id,
    new_entry_id,
    parse_time,
)
from agentstate.memory.writer import WriteQueue

CONSISTENCY_TIMEOUT = 30.0


def _tags(tags: Any) -> dict[str, Any]:
    if tags is None:
        return {}
    if isinstance(tags, str):
        try:
            tags = json.loads(tags)
        except json.JSONDecodeError:
            raise MemoryError_("tags must be a JSON object, e.g. {\"role\": \"user\"}") from None
    if not isinstance(tags, dict):
        raise MemoryError_("tags must be an object of key/value pairs")
    return tags


def build_server(db_path: str | Path, host: str = "127.0.0.1", port: int = 8765) -> FastMCP:
    """A FastMCP app over the SQLite file at ``db_path`` (created if missing)."""
    store = MemoryStore(db_path)
    writes = WriteQueue()
    mcp = FastMCP("agentstate-memory", host=host, port=port, log_level="WARNING")

    def guarded(fn):
        """Register ``fn`` as a tool whose input errors become MCP errors with their message."""

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except (MemoryError_, TimeoutError) as exc:
                raise ToolError(str(exc)) from None

        return mcp.tool()(wrapper)

    @guarded
    def create_memory(vault_id: str, memory_id: str, title: str = "") -> str:
        """Create a memory in a vault (no-op if it exists). Returns "created" or "exists"."""
        return "created" if store.create_memory(vault_id, memory_id, title) else "exists"

    @guarded
    def add_entry(
        vault_id: str, memory_id: str, raw_entry: str, summary: str, tags: dict | None = None
    ) -> str:
        """Queue one entry (raw text kept verbatim) for a memory. Returns "enqueued"."""
        store.require_memory(vault_id, memory_id)
        if not isinstance(raw_entry, str) or not isinstance(summary, str):
            raise MemoryError_("raw_entry and summary must be strings")
        entry_tags = _tags(tags)
        entry_id = new_entry_id()
        writes.submit(
            memory_id,
            lambda: store.insert_entry(entry_id, vault_id, memory_id, raw_entry, summary,
                                       entry_tags),
        )
        return "enqueued"

    @guarded
    def list_entries(
        vault_id: str, memory_id: str, limit: int = 25,
        before: str | None = None, after: str | None = None,
    ) -> str:
        """List entries oldest first as JSON; limit 1..50; at most one of before/after (RFC3339)."""
        store.require_memory(vault_id, memory_id)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 50:
            raise MemoryError_(f"limit must be between 1 and 50, got {limit!r}")
        if before is not None and after is not None:
            raise MemoryError_("give before or after, not both")
        entries = store.list_entries(
            vault_id, memory_id, limit,
            before=parse_time(before, "before") if before is not None else None,
            after=parse_time(after, "after") if after is not None else None,
        )
        return json.dumps({"entries": entries}, ensure_ascii=False)

    @guarded
    def get_entry(vault_id: str, memory_id: str, entry_id: str) -> str:
        """One entry as JSON."""
        store.require_memory(vault_id, memory_id)
        check_id(entry_id, "entry_id")
        return json.dumps(store.get_entry(vault_id, memory_id, entry_id), ensure_ascii=False)

    @guarded
    def put_context(vault_id: str, memory_id: str, content: str) -> str:
        """Queue a new context snapshot (plain text; every write kept). Returns "enqueued"."""
        store.require_memory(vault_id, memory_id)
        if not isinstance(content, str):
            raise MemoryError_("content must be a string")
        writes.submit(memory_id, lambda: store.insert_context(vault_id, memory_id, content))
        return "enqueued"

    @guarded
    def get_context(vault_id: str, memory_id: str) -> str:
        """The latest context snapshot, or "context not found"."""
        store.require_memory(vault_id, memory_id)
        latest = store.contexts(vault_id, memory_id, 1)
        return latest[0]["content"] if latest else "context not found"

    @guarded
    def await_consistency(memory_id: str) -> str:
        """Block until every queued write of the memory is committed. Returns "consistent"."""
        check_id(memory_id, "memory_id")
        store.vault_of(memory_id)
        failed = writes.wait(memory_id, CONSISTENCY_TIMEOUT)
        if failed:
            raise MemoryError_(f"{len(failed)} queued write(s) failed: {failed[0]}")
        return "consistent"

    @guarded
    def search_memories(memory_id: str, query: str, top_ke: int = 5, top_kc: int = 1) -> str:
        """Full-text search of entries (top_ke 0..25) plus the latest contexts (top_kc 1..10)."""
        check_id(memory_id, "memory_id")
        if not isinstance(top_ke, int) or not 0 <= top_ke <= 25:
            raise MemoryError_(f"top_ke must be between 0 and 25, got {top_ke!r}")
        if not isinstance(top_kc, int) or not 1 <= top_kc <= 10:
            raise MemoryError_(f"top_kc must be between 1 and 10, got {top_kc!r}")
        vault_id = store.vault_of(memory_id)
        return json.dumps(
            {
                "entries": store.search(memory_id, query, top_ke),
                "contexts": store.contexts(vault_id, memory_id, top_kc),
            },
            ensure_ascii=False,
        )

    mcp._agentstate_store = store  # for in-process inspection in tests
    mcp._agentstate_writes = writes
    return mcp


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="agentstate memory MCP server")
    parser.add_argument("--db", required=True, help="SQLite file (created if missing)")
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--port", type=int, default=8765, help="HTTP port (127.0.0.1 only)")
    args = parser.parse_args(argv)
    server = build_server(args.db, port=args.port)
    server.run("streamable-http" if args.transport == "http" else "stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
