"""Database files the package creates are private to their owner (issue: secrets)."""

import asyncio
import os
import stat

import pytest

from agentstate.persistence import async_sqlite_checkpointer, private_db_file, sqlite_checkpointer


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_sqlite_checkpointer_creates_a_private_file_and_its_wal(tmp_path):
    db = tmp_path / "threads.sqlite"
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    with sqlite_checkpointer(db) as saver:
        saver.conn.execute("PRAGMA journal_mode=WAL")
        saver.put(
            config,
            {
                "v": 1,
                "id": "1",
                "ts": "",
                "channel_values": {},
                "channel_versions": {},
                "versions_seen": {},
            },
            {},
            {},
        )
        files = [p for p in tmp_path.iterdir()]
        assert files and all(mode(p) == 0o600 for p in files), {p.name: oct(mode(p)) for p in files}


def test_an_existing_world_readable_file_is_tightened(tmp_path):
    db = tmp_path / "old.sqlite"
    db.touch(mode=0o644)
    os.chmod(db, 0o644)
    private_db_file(db)
    assert mode(db) == 0o600


def test_async_checkpointer_is_private_too(tmp_path):
    db = tmp_path / "a.sqlite"

    async def open_it():
        async with async_sqlite_checkpointer(db):
            pass

    asyncio.run(open_it())
    assert mode(db) == 0o600


def test_bad_paths_say_what_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match="folder for the database does not exist"):
        private_db_file(tmp_path / "missing" / "x.sqlite")
    with pytest.raises(IsADirectoryError, match="got a folder"):
        private_db_file(tmp_path)
