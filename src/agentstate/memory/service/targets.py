"""What ``--db`` names: an SQLite file, or a Postgres database a fleet of replicas shares.

Notebook 06 (the going-further notebook 06b draws the fleet). A
``postgresql://`` (or ``postgres://``) URL, or a libpq ``key=value`` string
(``host=... dbname=...``), selects the Postgres store; anything else is a path
to an SQLite file. A Postgres connection string is parsed only by libpq itself
(psycopg's :func:`~psycopg.conninfo.conninfo_to_dict`, imported when one is
given, so the SQLite path stays light), never split by hand: a password is
found wherever libpq would read it (``user:pw@``, ``?password=``,
``password=``; ``sslpassword`` too), percent-encoding is decoded once, as libpq
decodes it, and a string is rebuilt with :func:`~psycopg.conninfo.make_conninfo`.
Strings are shown only through :func:`redact`, which keeps the user, hosts,
ports and database and nothing else. A password written in ``--db`` is
refused: every local user can read a process's arguments in
``/proc/<pid>/cmdline`` (libpq reads ``PGPASSWORD`` or ``~/.pgpass`` instead;
:func:`split_password` moves one there for a child process).
"""

from __future__ import annotations

import re
from pathlib import Path

SCHEMES = ("postgresql", "postgres")
SECRET_KEYS = ("password", "sslpassword")  # what libpq would read as a secret
# a libpq key=value string starts with one of its keywords (the common ones)
_KEYWORDS = re.compile(
    r"\s*(host|hostaddr|port|dbname|user|password|passfile|service|sslmode|"
    r"connect_timeout|application_name|options|target_session_attrs)\s*=",
    re.IGNORECASE,
)
EXAMPLE = "postgresql://user@127.0.0.1:5432/memory"
UNPARSED = "<a Postgres connection string that cannot be parsed>"


def is_postgres(db: str | Path) -> bool:
    """True if ``db`` is a ``postgresql://`` / ``postgres://`` URL or a libpq key=value string."""
    if not isinstance(db, str):
        return False
    if "://" in db:
        return db.split("://", 1)[0].strip().lower() in SCHEMES
    return _KEYWORDS.match(db) is not None


def conninfo_parts(db: str) -> dict[str, str]:
    """The connection string's keywords as libpq parses them (values decoded once).

    ``ValueError`` (one line, never quoting the string, which may hold a
    password) when libpq cannot parse it, a port is not a number from 1 to
    65535, or a host holds ``@`` (an unencoded ``@`` in the password: libpq
    would take the rest as the host).
    """
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = {k: str(v) for k, v in conninfo_to_dict(db).items() if v is not None}
    except ProgrammingError:
        raise ValueError(
            f"{UNPARSED}: give a URL such as {EXAMPLE} or libpq key=value pairs"
        ) from None
    encode = "; an '@', '/' or '#' in a password must be percent-encoded in a URL (%40, %2F, %23)"
    for port in filter(None, parts.get("port", "").split(",")):
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"a port in the Postgres connection string is not 1-65535{encode}")
    if "@" in parts.get("host", "") + parts.get("dbname", ""):
        raise ValueError(
            f"a host or database name in the Postgres connection string holds '@'{encode}"
        )
    return parts


def redact_parts(parts: dict[str, str]) -> str:
    """``postgresql://user@host:port/dbname`` of parsed parts: nothing else, never a secret."""
    user = parts.get("user", "")
    hosts = parts.get("host") or parts.get("hostaddr") or ""
    ports = parts.get("port", "")
    place = hosts + (f":{ports}" if ports and "," not in hosts else "")
    if "," in hosts:  # several hosts: libpq pairs them with the ports in order
        place = ",".join(
            h + (f":{p}" if p else "")
            for h, p in zip(hosts.split(","), (ports.split(",") + [""] * 99), strict=False)
        )
    return f"postgresql://{user + '@' if user else ''}{place}/{parts.get('dbname', '')}"


def redact(db: str) -> str:
    """What may be shown of ``db`` (a message, a log): user, hosts, ports, database only."""
    if not is_postgres(db):
        return db
    try:
        return redact_parts(conninfo_parts(db))
    except ImportError:
        return "<a Postgres connection string (psycopg, which parses it, is not installed)>"
    except ValueError:
        return UNPARSED


def split_password(db: str) -> tuple[str, str | None]:
    """``db`` without its password (rebuilt by libpq's rules), and the password decoded.

    ``(db, None)`` unchanged when it holds none. ``ValueError`` (one line) for a
    string libpq cannot parse and for an ``sslpassword`` (no environment
    variable carries that one: use a file the key is in).
    """
    from psycopg.conninfo import make_conninfo

    parts = conninfo_parts(db)
    if "sslpassword" in parts:
        raise ValueError(
            f"{redact_parts(parts)}: an sslpassword cannot be handed to a child process "
            "unseen; keep the client key unencrypted in a 0600 file (sslkey=)"
        )
    password = parts.pop("password", None)
    if password is None:
        return db, None
    return make_conninfo(**parts), password


def check_postgres_url(db: str) -> str:
    """Refuse a Postgres connection string with a password in it, or one naming no database.

    Returns ``db`` unchanged; ``ValueError`` carries the one-line reason (it
    never quotes the string: a password anywhere in it is never shown).
    """
    parts = conninfo_parts(db)
    secret = [key for key in SECRET_KEYS if key in parts]
    if secret:
        raise ValueError(
            f"{redact_parts(parts)}: a {secret[0]} in --db is readable by every local user "
            f"(/proc/<pid>/cmdline), written as user:password@, ?{secret[0]}= or "
            f"{secret[0]}=; set PGPASSWORD or use ~/.pgpass (libpq reads both)"
        )
    if not parts.get("dbname", "").strip("/"):
        raise ValueError(f"{redact_parts(parts)}: name the database, e.g. {EXAMPLE}")
    return db
