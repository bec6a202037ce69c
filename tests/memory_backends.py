"""The two stores the memory tests run on: SQLite (embedded) and a real throwaway Postgres.

A test module runs a test on both by taking ``memory_db`` (a fresh SQLite path
or a fresh Postgres database URL) and starting its servers with
:func:`memory_server`. Bind the fixtures in the module (``postgres =
memory_backends.postgres``, ``memory_db = memory_backends.memory_db``): one
Postgres server per module (Debian's ``postgres``, started by
:mod:`agentstate.servers.postgres`, as ``tests/test_postgres.py`` does), only
when a Postgres case runs; every test gets its own database.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from agentstate.memory.service.process import ServerProcess
from agentstate.memory.service.targets import is_postgres
from agentstate.servers.postgres import PostgresServer

BACKENDS = ["sqlite", "postgres"]
_names = itertools.count(1)


@pytest.fixture(scope="module")
def postgres():
    """One real Postgres server for the module; none of its processes outlive it."""
    server = PostgresServer()
    with server:
        yield server
    assert server.leftover_processes() == [], "postgres processes outlived the server"


def fresh_database(server: PostgresServer) -> str:
    """The URL of a new, empty database on ``server``."""
    return server.create_database(f"memory_{next(_names)}")


@pytest.fixture(params=BACKENDS)
def memory_db(request, tmp_path) -> str | Path:
    """Where a test's memory server keeps its store: an SQLite file, or a Postgres URL."""
    if request.param == "sqlite":
        return tmp_path / "memory.sqlite"
    return fresh_database(request.getfixturevalue("postgres"))


def memory_server(db: str | Path, folder: Path, **options) -> ServerProcess:
    """A memory server process over ``db`` (its log in ``folder`` when ``db`` is a URL)."""
    if is_postgres(db):
        options.setdefault("log_path", folder / f"memory-{next(_names)}.log")
    return ServerProcess(db, **options)
