"""Issue 33 items 6, 8 and 15: the memory service's limits hold on hostile input.

Item 6: side files (``-wal``, ``-shm``) of an existing store, left 0644 by a crash
or a copy, are tightened to 0600 with the store. Item 8: ``msg_idx`` is bounded,
so one event with a huge ``msg_idx`` can no longer use up every position of its
memory. Item 15: a bearer token must be what an HTTP header carries (visible
ASCII), refused at server start in one line and by the client before it sends.
"""

import os
import sqlite3
import stat

import pytest

from agentstate.memory.service.store import MemoryStore

pytestmark = pytest.mark.anyio

V, M = "v", "m"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# --- item 6: existing side files are tightened with the store -----------------------------


def test_existing_0644_wal_and_shm_are_tightened_to_0600_when_the_store_opens(tmp_path):
    db = tmp_path / "m.sqlite"
    store = MemoryStore(db)
    store.create_memory(V, M)
    store.close()
    # a crash (or a copy) leaves the store's side files behind with a reader-friendly mode
    crashed = sqlite3.connect(db)
    crashed.execute("PRAGMA journal_mode=WAL")
    crashed.execute("INSERT INTO ops (memory_id, tool, detail, at) VALUES ('m', 't', '{}', 'x')")
    crashed.commit()  # still open: its -wal and -shm stay on disk, as after a crash
    for side in ("-wal", "-shm"):
        os.chmod(f"{db}{side}", 0o644)
    store = MemoryStore(db)  # opened while the other connection still holds the WAL
    try:
        for side in ("-wal", "-shm"):
            assert mode(f"{db}{side}") == 0o600, side
        store.create_memory(V, "m2")
        assert mode(f"{db}-wal") == 0o600
    finally:
        store.close()
        crashed.close()
