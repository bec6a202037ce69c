"""What ``--db`` names: an SQLite file, or a Postgres database a fleet of replicas shares.

Notebook 06 (the going-further notebook 06b draws the fleet). Light on purpose
(no psycopg, no MCP import): the command line checks ``--db`` with it before
the server is imported. A ``postgresql://`` (or ``postgres://``) URL selects
the Postgres store; anything else is a path to an SQLite file. URLs are shown
only through :func:`redact`, which drops the password, and a password written
in ``--db`` itself is refused: every local user can read a process's
arguments in ``/proc/<pid>/cmdline`` (libpq reads ``PGPASSWORD`` or
``~/.pgpass`` instead; :func:`split_password` moves one there for a child process).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

SCHEMES = ("postgresql", "postgres")


def is_postgres(db: str | Path) -> bool:
    """True if ``db`` is a ``postgresql://`` or ``postgres://`` URL."""
    return isinstance(db, str) and db.split("://", 1)[0].lower() in SCHEMES and "://" in db


def _netloc(user: str | None, password: str | None, host: str | None, port: int | None) -> str:
    auth = "" if user is None else user + (f":{password}" if password is not None else "") + "@"
    place = host or ""
    if ":" in place:  # an IPv6 literal keeps its brackets
        place = f"[{place}]"
    return auth + place + (f":{port}" if port else "")


def split_password(url: str) -> tuple[str, str | None]:
    """``url`` without its password, and the password (None if it had none).

    ``ValueError`` (one line) for a URL that cannot be parsed, e.g. a port that is not a number.
    """
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{redact(url)}: {exc}") from None
    if parts.password is None:
        return url, None
    netloc = _netloc(parts.username, None, parts.hostname, port)
    return urlunsplit(parts._replace(netloc=netloc)), parts.password


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***`` (safe to print or log)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user, _, place = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user.split(':', 1)[0]}:***@{place}"))


def check_postgres_url(url: str) -> str:
    """Refuse a Postgres URL with a password in it, or one that names no database.

    Returns the URL unchanged; ``ValueError`` carries the one-line reason (the
    password never appears in it).
    """
    parts = urlsplit(url)
    if parts.password is not None:
        raise ValueError(
            f"{redact(url)}: a password in --db is readable by every local user "
            "(/proc/<pid>/cmdline); set PGPASSWORD or use ~/.pgpass (libpq reads both)"
        )
    if not parts.path.strip("/"):
        raise ValueError(f"{url}: name the database, e.g. postgresql://user@127.0.0.1:5432/memory")
    split_password(url)  # a port that is not a number
    return url
