"""Private database files: created ``0600`` before SQLite opens them (notebooks 02-06).

Kept apart from :mod:`agentstate.persistence` so that the memory server and
its command line, which need only this, start without importing the
checkpointer libraries (psycopg, LangGraph's savers): a bad ``--db`` is
refused before anything heavy is loaded.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_MODE = 0o600


def check_db_path(path: str | Path) -> Path:
    """Refuse a path that cannot be a database file, creating nothing.

    Raises ``FileNotFoundError`` naming the folder when it does not exist and
    ``IsADirectoryError`` when ``path`` is a folder, instead of SQLite's
    "unable to open database file".
    """
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"folder for the database does not exist: {path.parent}")
    if path.is_dir():
        raise IsADirectoryError(f"expected a database file, got a folder: {path}")
    return path


def private_db_file(path: str | Path) -> Path:
    """Create ``path`` with mode 0600 (or tighten an existing file) and return it.

    Checked first by :func:`check_db_path`, so a bad path raises its error.
    """
    path = check_db_path(path)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, PRIVATE_MODE)
    os.close(fd)
    os.chmod(path, PRIVATE_MODE)
    return path
