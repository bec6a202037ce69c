"""Checkpointers for experts threads: in memory, or a real SQLite file.

Threads grow across runs (and, with SQLite, across processes: the CLI's
``--checkpoint-db``). :func:`file_contains` reads the database files as raw
bytes, which is how a test proves the manual never reaches a checkpoint.
The helpers live in :mod:`agentstate.persistence`; taught in notebook 05.
"""

from agentstate.persistence import file_contains, memory_checkpointer, sqlite_checkpointer

__all__ = ["file_contains", "memory_checkpointer", "sqlite_checkpointer"]
