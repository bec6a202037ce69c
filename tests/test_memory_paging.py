"""Issue 25 item 4: ``list_entries`` pages by the order it sorts by (``seq``), cursors included.

The pages were ordered by ``seq`` while the cursors compared ``created_at``:
after the clock stepped back an hour, paging reached 10 of 20 entries; with
three entries on one timestamp, 17 or 18 of 20. The stores here are written
with a clock that does exactly that (the store's ``now`` replaced while the
entries are queued, the only place a stamp comes from), then paged through a
REAL server process over MCP, backwards from the newest page and forwards
from a time before them all, following each page's ``next``; on SQLite and on
a real Postgres (issue 35: one store interface, the same tests on both).
"""

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from agentstate.memory.client import MemoryClient, MemoryToolError
from agentstate.memory.service import store as store_module
from agentstate.memory.service import store_postgres as postgres_module
from agentstate.memory.service.store import MemoryStore
from agentstate.memory.service.stores import open_store
from tests import memory_backends
from tests.memory_backends import memory_server

pytestmark = pytest.mark.anyio
V, M = "vault", "paged"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
BEFORE_ALL = "2020-01-01T00:00:00Z"
postgres = memory_backends.postgres  # every paging test but the last runs on SQLite and Postgres
memory_db = memory_backends.memory_db


@pytest.fixture
def anyio_backend():
    return "asyncio"


def stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def clock_stepped_back() -> list[str]:
    """Ten entries a second apart, then the clock steps back an hour, ten more."""
    return [stamp(T0 + timedelta(seconds=i)) for i in range(10)] + [
        stamp(T0 - timedelta(hours=1) + timedelta(seconds=i)) for i in range(10)
    ]


def equal_stamps() -> list[str]:
    """Twenty entries, three at a time on one timestamp (a coarse clock, a fast writer)."""
    return [stamp(T0 + timedelta(seconds=i // 3)) for i in range(20)]


CLOCKS = {"clock stepped back an hour": clock_stepped_back, "three on one timestamp": equal_stamps}


def fill(db, stamps: list[str], monkeypatch) -> list[str]:
    """A store whose entries e0..eN were queued at ``stamps``; returns their texts in order."""
    clock = itertools.chain(stamps, itertools.repeat(stamp(T0)))
    store = open_store(db)
    store.create_memory(V, M)
    texts = [f"e{i}" for i in range(len(stamps))]
    with monkeypatch.context() as patch:
        for module in (store_module, postgres_module):
            patch.setattr(module, "now", lambda: next(clock))
        for text in texts:
            payload = {"entry_id": f"id-{text}", "vault_id": V, "raw_entry": text,
                       "summary": text, "tags": {}}  # fmt: skip
            store.enqueue(M, "entry", payload, {})
    store.drain()
    store.close()
    return texts


async def page_through(client, limit: int, **start) -> list[str]:
    """Every entry reached by following ``next`` from ``start``, in stored order."""
    pages = []
    cursor: dict | None = start
    while cursor is not None and len(pages) < 100:
        page = await client.call("list_entries", vault_id=V, memory_id=M, limit=limit, **cursor)
        pages.append([e["raw_entry"] for e in page["entries"]])
        cursor = page["next"]
    if "after" in start:
        return [text for page in pages for text in page]
    return [text for page in reversed(pages) for text in page]


@pytest.mark.parametrize("clock", CLOCKS)
@pytest.mark.parametrize("limit", [3, 4, 7])
async def test_paging_reaches_every_entry_once_whatever_the_clock_did(
    memory_db, tmp_path, monkeypatch, clock, limit
):
    texts = fill(memory_db, CLOCKS[clock](), monkeypatch)
    with memory_server(memory_db, tmp_path) as server:
        async with MemoryClient(server.url) as client:
            assert await page_through(client, limit) == texts  # backwards from the newest
            assert await page_through(client, limit, after=BEFORE_ALL) == texts  # forwards
            assert await page_through(client, limit, after=0) == texts  # from the start, by seq


async def test_cursors_are_seqs_and_every_entry_carries_its_seq(memory_db, tmp_path, monkeypatch):
    fill(memory_db, equal_stamps(), monkeypatch)
    with memory_server(memory_db, tmp_path) as server:
        async with MemoryClient(server.url) as client:
            page = await client.call("list_entries", vault_id=V, memory_id=M, limit=5)
            seqs = [e["seq"] for e in page["entries"]]
            assert seqs == sorted(seqs) and page["next"] == {"before": seqs[0]}
            forward = await client.call("list_entries", vault_id=V, memory_id=M, limit=5,
                                        after=seqs[0])  # fmt: skip
            assert [e["seq"] for e in forward["entries"]] == seqs[1:]  # the newest page: no next
            assert forward["next"] is None
            one = await client.call("get_entry", vault_id=V, memory_id=M,
                                    entry_id=page["entries"][0]["entry_id"])  # fmt: skip
            assert one["seq"] == seqs[0]
            for bad in (True, -1, 1.5, "17", [3]):
                with pytest.raises(MemoryToolError, match="after must be|RFC3339"):
                    await client.call("list_entries", vault_id=V, memory_id=M, after=bad)


def test_a_timestamp_is_a_point_in_the_stored_order(memory_db, monkeypatch):
    """``after=T``: from the first entry stamped later than T on, in stored order;
    ``before=T``: the entries stored before the first one stamped T or later. With a
    steady clock that is the time filter it always was; after a step back it is still one
    unbroken stretch of the stored order, so its pages continue by seq without a gap."""
    fill(memory_db, clock_stepped_back(), monkeypatch)
    store = open_store(memory_db)
    try:
        t5 = stamp(T0 + timedelta(seconds=5))
        after, _ = store.list_entries(M, 50, after=t5)
        assert [e["raw_entry"] for e in after] == [f"e{i}" for i in range(6, 20)]
        before, _ = store.list_entries(M, 50, before=t5)
        assert [e["raw_entry"] for e in before] == [f"e{i}" for i in range(5)]
        none_after, more = store.list_entries(M, 50, after=stamp(T0 + timedelta(days=1)))
        assert none_after == [] and more is None
        everything, _ = store.list_entries(M, 50, before=stamp(T0 + timedelta(days=1)))
        assert len(everything) == 20
    finally:
        store.close()


def test_a_store_made_before_positions_opens_and_numbers_after_its_messages(tmp_path):
    """A store written before ``assign_position`` existed gets the column, filled from
    the msg_idx its queued entries carry, so a position assigned now comes after them."""
    import sqlite3

    db = tmp_path / "old.sqlite"
    store = MemoryStore(db)
    store.create_memory(V, M)
    for idx in (1, 2, 7):
        store.enqueue(M, "entry", {"entry_id": f"x{idx}", "vault_id": V, "raw_entry": "t",
                                   "summary": "s", "tags": {"msg_idx": idx}}, {})  # fmt: skip
    store.close()
    with sqlite3.connect(db) as conn:  # as an older version of the server left it
        conn.execute("ALTER TABLE memories DROP COLUMN last_position")
    conn.close()
    store = MemoryStore(db)
    try:
        assert store.assign_position(M, "a new message") == 8
        assert store.assign_position(M, "a new message") == 8
        assert store.assign_position(M, "another one", after=20) == 21
    finally:
        store.close()
