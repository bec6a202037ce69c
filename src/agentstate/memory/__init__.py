"""Stage 06: a real MCP memory server over SQLite (notebook 06, in progress).

``store`` keeps memories, entries (with SQLite FTS5 search) and context
snapshots; ``writer`` drains queued writes in one thread so ``add_entry`` and
``put_context`` return "enqueued" and ``await_consistency`` waits for them;
``server`` exposes the anchor's tools over MCP (stdio or streamable HTTP).
"""

from agentstate.memory.store import MemoryError_, MemoryStore
from agentstate.memory.writer import WriteQueue

__all__ = ["MemoryError_", "MemoryStore", "WriteQueue"]
