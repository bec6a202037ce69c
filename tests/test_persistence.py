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


def test_a_checkpoint_path_that_is_a_symlink_or_a_fifo_is_refused_before_it_is_touched(tmp_path):
    """The checkpointers go through agentstate.private_files like the memory service does:
    a symlink's target keeps its mode and a FIFO is refused without blocking."""
    from agentstate.private_files import NotOwnFileError

    target = tmp_path / "someone_elses.txt"
    target.write_text("not a database")
    target.chmod(0o644)
    link = tmp_path / "link.sqlite"
    link.symlink_to(target)
    fifo = tmp_path / "pipe.sqlite"
    os.mkfifo(fifo)
    for path in (link, fifo):
        with pytest.raises(NotOwnFileError, match="not a regular file"):
            with sqlite_checkpointer(path):
                pass
    assert mode(target) == 0o644 and target.read_text() == "not a database"
