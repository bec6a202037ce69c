"""Checkpointers on real databases: private SQLite files on one machine, Postgres for many.

A checkpoint holds whatever state held (tool arguments, user text), so the
SQLite files the package creates are made ``0600`` before SQLite opens them;
SQLite gives its ``-wal`` and ``-shm`` files the same mode. Every lesson that
persists a thread uses these helpers: notebooks 02-06 and the CLIs.

When several processes or machines serve the same threads, they share a
Postgres database instead (:func:`postgres_checkpointer`,
:func:`async_postgres_checkpointer`); README "From one machine to many" and
``tests/test_postgres.py`` show the graphs of lessons 02-05 on a real server.

Every checkpointer takes ``encrypt=True``: checkpoints and pending writes are
then encrypted with LangGraph's own ``EncryptedSerializer`` and the key in
``LANGGRAPH_AES_KEY`` (``agentstate.persistence.encryption``; what it does
not cover is in ``docs/secrets.md``).
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from agentstate._extras import needs
from agentstate.persistence.encryption import checkpoint_serializer
from agentstate.private_files import private_db_file

with needs("persistence", "agentstate.persistence"):
    import aiosqlite
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.rows import DictRow, dict_row
    from psycopg_pool import AsyncConnectionPool, ConnectionPool


def memory_checkpointer() -> InMemorySaver:
    """An in-process checkpointer: threads last as long as the Python process."""
    return InMemorySaver()


@contextmanager
def sqlite_checkpointer(path: str | Path, *, encrypt: bool = False) -> Iterator[SqliteSaver]:
    """A SqliteSaver on a private file at ``path`` (created if missing); closed on exit.

    ``check_same_thread=False`` because parallel tools and experts run in
    worker threads; SqliteSaver serialises access with its own lock.
    ``encrypt=True``: checkpoints are AES-encrypted with ``LANGGRAPH_AES_KEY``
    (checked before the file is touched).
    """
    serde = checkpoint_serializer(encrypt)
    conn = sqlite3.connect(str(private_db_file(path)), check_same_thread=False)
    try:
        saver = SqliteSaver(conn, serde=serde)
        saver.setup()
        yield saver
    finally:
        conn.close()


@asynccontextmanager
async def async_sqlite_checkpointer(
    path: str | Path, *, encrypt: bool = False
) -> AsyncIterator[AsyncSqliteSaver]:
    """The async twin of :func:`sqlite_checkpointer` (for ``ainvoke`` / ``astream``)."""
    serde = checkpoint_serializer(encrypt)
    async with aiosqlite.connect(str(private_db_file(path))) as conn:
        saver = AsyncSqliteSaver(conn, serde=serde)
        await saver.setup()
        yield saver


def file_contains(path: str | Path, needle: bytes) -> bool:
    """True if ``needle`` occurs in the database file or its WAL/journal, read as bytes."""
    path = Path(path)
    files = [path, *(path.with_name(path.name + s) for s in ("-wal", "-journal"))]
    return any(f.exists() and needle in f.read_bytes() for f in files)


# --- Postgres: one database for every process that serves the same threads ---

# What PostgresSaver.from_conn_string sets on its connection; a pool needs the same.
_PG_CONNECTION = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
# Any fixed number: the advisory lock that serialises setup() across processes.
SETUP_LOCK = 0x6167_7374_6174_65  # "agstate"
START_HINT = "start one (a throwaway server: `python -m agentstate.servers.postgres`)"


class PostgresUnavailableError(ConnectionError):
    """No Postgres server accepted a connection at the URL (the password is never shown)."""


def postgres_target(url: str) -> str:
    """``user@host:port/dbname`` of a Postgres URL, for messages: never the password.

    Raises ``ValueError`` (without echoing the URL, which may hold a password)
    when ``url`` is empty or not a connection string psycopg can parse.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError("empty Postgres URL: expected postgresql://user:password@host:port/dbname")
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError as error:
        # libpq quotes the piece it could not read, which may be a piece of the password
        reason = re.sub(r'"[^"]*"', '"..."', str(error).replace(url, "<url>")).strip()
        raise ValueError(
            f"not a Postgres URL ({reason}): expected postgresql://user:password@host:port/dbname"
        ) from None
    if "@" in str(parts.get("host") or "") + str(parts.get("dbname") or ""):
        raise ValueError(  # an unencoded '@' or '/' in the password: libpq split it elsewhere
            "a host or database name in the Postgres URL holds '@'; an '@', '/' or '#' in a "
            "password must be percent-encoded (%40, %2F, %23)"
        )
    host = parts.get("host") or "localhost"
    return f"{parts.get('user', '')}@{host}:{parts.get('port') or 5432}/{parts.get('dbname', '')}"


def _unavailable(url: str, error: Exception) -> PostgresUnavailableError:
    reason = " ".join(str(error).split()).replace(url, "<url>")
    password = str(conninfo_to_dict(url).get("password") or "")
    if password:  # libpq never quotes it; this keeps it so for any driver message
        reason = reason.replace(password, "***")
    refused = "authentication failed" in reason or "does not exist" in reason
    hint = "check the user, password and database in the URL" if refused else START_HINT
    return PostgresUnavailableError(
        f"no Postgres server accepted a connection at {postgres_target(url)} ({reason}); {hint}"
    )


def _check_pool(max_connections: int, timeout: float) -> None:
    if not isinstance(max_connections, int) or max_connections < 1:
        raise ValueError(f"max_connections must be a whole number >= 1, got {max_connections!r}")
    if not timeout > 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")


def _took_lock(row: tuple[Any, ...] | None) -> bool:
    """``pg_try_advisory_lock``'s answer (a SELECT of one value returns exactly one row)."""
    return bool(row and row[0])


# Polled, not waited for: a session blocked in pg_advisory_lock() is an open
# transaction, and the holder's setup runs CREATE INDEX CONCURRENTLY, which
# waits for every open transaction: each would wait for the other forever.
_TRY_LOCK = "SELECT pg_try_advisory_lock(%s)"
SETUP_WAIT_FACTOR = 6  # setup waits up to 6 x timeout for another process's setup


def _setup_stuck(url: str, timeout: float) -> PostgresUnavailableError:
    return PostgresUnavailableError(
        f"another process has held the checkpoint-setup lock at {postgres_target(url)} "
        f"for more than {timeout * SETUP_WAIT_FACTOR:.0f} s; is a setup stuck there?"
    )


@contextmanager
def _setup_lock(url: str, timeout: float) -> Iterator[None]:
    """Hold a Postgres advisory lock while the tables are created or migrated.

    ``PostgresSaver.setup()`` reads the migration version, then inserts: two
    processes starting together on a fresh database both insert, and one dies
    with ``UniqueViolation`` (tests/test_postgres.py starts four at once).
    Connecting for the lock is also the first contact, so a missing server
    fails here, clearly, instead of in a pool's retry loop.
    """
    postgres_target(url)
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=max(1, round(timeout)))
    except psycopg.OperationalError as error:
        raise _unavailable(url, error) from None
    with conn:
        deadline = time.monotonic() + timeout * SETUP_WAIT_FACTOR
        while not _took_lock(conn.execute(_TRY_LOCK, (SETUP_LOCK,)).fetchone()):
            if time.monotonic() > deadline:
                raise _setup_stuck(url, timeout)
            time.sleep(0.05)
        yield  # released when the connection closes


@asynccontextmanager
async def _async_setup_lock(url: str, timeout: float) -> AsyncIterator[None]:
    """The async twin of :func:`_setup_lock`."""
    postgres_target(url)
    try:
        conn = await psycopg.AsyncConnection.connect(
            url, autocommit=True, connect_timeout=max(1, round(timeout))
        )
    except psycopg.OperationalError as error:
        raise _unavailable(url, error) from None
    async with conn:
        deadline = time.monotonic() + timeout * SETUP_WAIT_FACTOR
        while not _took_lock(await (await conn.execute(_TRY_LOCK, (SETUP_LOCK,))).fetchone()):
            if time.monotonic() > deadline:
                raise _setup_stuck(url, timeout)
            await asyncio.sleep(0.05)
        yield


@contextmanager
def postgres_checkpointer(
    url: str, *, max_connections: int = 4, timeout: float = 10.0, encrypt: bool = False
) -> Iterator[PostgresSaver]:
    """A ``PostgresSaver`` on a pool of connections to ``url``, tables created; closed on exit.

    A pool rather than one connection because the saver outlives a server
    restart this way: a connection the server dropped is checked and replaced
    before use, so a long-running agent server keeps its threads. Creating
    the tables is serialised across processes (an advisory lock), so replicas
    may start together on a fresh database. Raises
    :class:`PostgresUnavailableError` when nothing answers at ``url`` and
    ``ValueError`` for a malformed URL; neither message contains the password.
    ``encrypt=True``: checkpoints are AES-encrypted with ``LANGGRAPH_AES_KEY``,
    except the values LangGraph keeps inline (``docs/secrets.md``).
    """
    _check_pool(max_connections, timeout)
    serde = checkpoint_serializer(encrypt)
    with _setup_lock(url, timeout):
        pool = ConnectionPool(
            url,
            connection_class=psycopg.Connection[DictRow],
            min_size=1,
            max_size=max_connections,
            kwargs=_PG_CONNECTION,
            check=ConnectionPool.check_connection,
            timeout=timeout,
            open=False,
        )
        try:
            pool.open(wait=True, timeout=timeout)
            saver = PostgresSaver(pool, serde=serde)
            saver.setup()
        except BaseException:
            pool.close()
            raise
    try:
        yield saver
    finally:
        pool.close()


@asynccontextmanager
async def async_postgres_checkpointer(
    url: str, *, max_connections: int = 4, timeout: float = 10.0, encrypt: bool = False
) -> AsyncIterator[AsyncPostgresSaver]:
    """The async twin of :func:`postgres_checkpointer` (for ``ainvoke`` / ``astream``)."""
    _check_pool(max_connections, timeout)
    serde = checkpoint_serializer(encrypt)
    async with _async_setup_lock(url, timeout):
        pool = AsyncConnectionPool(
            url,
            connection_class=psycopg.AsyncConnection[DictRow],
            min_size=1,
            max_size=max_connections,
            kwargs=_PG_CONNECTION,
            check=AsyncConnectionPool.check_connection,
            timeout=timeout,
            open=False,
        )
        try:
            await pool.open(wait=True, timeout=timeout)
            saver = AsyncPostgresSaver(pool, serde=serde)
            await saver.setup()
        except BaseException:
            await pool.close()
            raise
    try:
        yield saver
    finally:
        await pool.close()
