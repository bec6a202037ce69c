"""Files the package touches only when they are its own (notebooks 02-06).

Stores, checkpoints, logs and token files are named by the user: the memory
server's ``--db`` and its side files, ``<db>.log``, ``--token-file``, the
capture worker's checkpoints and the SQLite checkpointers of
:mod:`agentstate.persistence`. A path that names something else must be
refused before anything is done to it: opening a FIFO blocks, reading
``/dev/zero`` never ends, and creating a file "0600" by ``open`` + ``chmod``
on ``/dev/null`` (run as root) or on a symlink changes the mode of whatever it
points at.

So every such path goes through :func:`own_file` (or :func:`private_db_file`
for a database, which first checks its folder) or :func:`read_small_file`:

1. ``lstat`` first: a symlink, a folder, a FIFO, a socket or a device is
   refused with a one-line :class:`NotOwnFileError` naming what it is, before
   any ``open`` or ``chmod``. (A device such as ``/dev/null`` is never opened.)
2. Then ``os.open`` with ``O_NOFOLLOW`` (a symlink put in place after the
   ``lstat`` makes the open fail instead of being followed), ``O_NONBLOCK``
   (a FIFO put in place after it does not block the open) and ``O_NOCTTY``.
3. ``fstat`` on the descriptor: it must be the regular file ``lstat`` saw
   (same device and inode), else refused; only then ``fchmod(fd, 0600)``:
   the mode is set on the open file, never by path, so it cannot land on
   another file.

What this does not cover: whoever can rename entries in the file's folder
can still swap the file between two system calls of SQLite itself, which
opens the store (and its ``-wal``/``-shm`` files) by name. A folder writable
by another user is out of scope; these checks stop a wrong path, and the
races on the last path component at the package's own open.

Kept at the top of the package, apart from :mod:`agentstate.persistence`, so
that the memory server and its command line start without importing the
checkpointer libraries: a bad ``--db`` is refused before anything heavy loads.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_MODE = 0o600
MAX_TOKEN_BYTES = 4096  # a bearer token is a line; more is not a token file

_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)
_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class NotOwnFileError(OSError):
    """The path exists and is not a regular file (or is a symlink); nothing was opened."""


def kind_of(mode: int) -> str:
    """What an ``st_mode`` is, in words ("a symbolic link", "a FIFO (named pipe)", ...)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_own_file(path: str | Path, what: str = "file") -> os.stat_result | None:
    """``lstat`` of ``path`` if it is a regular file, None if it does not exist; else refused.

    Opens nothing: a symlink (even to a regular file), a folder, a FIFO, a
    socket or a device raises :class:`NotOwnFileError` naming it.
    """
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(found.st_mode) or not stat.S_ISREG(found.st_mode):
        hint = " (give the file itself, not a link to it)" if stat.S_ISLNK(found.st_mode) else ""
        raise NotOwnFileError(
            f"{what} {path} is {kind_of(found.st_mode)}, not a regular file; refused "
            f"without opening it{hint}"
        )
    return found


def _open_checked(path: Path, flags: int, what: str, seen: os.stat_result | None) -> int:
    """Open with ``O_NOFOLLOW | O_NONBLOCK``; the descriptor must be the regular file seen."""
    try:
        fd = os.open(path, flags | _FLAGS, PRIVATE_MODE)
    except OSError as exc:  # ELOOP: a symlink appeared after the lstat; ENXIO: a FIFO
        raise NotOwnFileError(f"{what} {path}: cannot open it as a file ({exc.strerror})") from None
    opened = os.fstat(fd)
    same = seen is None or (opened.st_dev, opened.st_ino) == (seen.st_dev, seen.st_ino)
    if not stat.S_ISREG(opened.st_mode) or not same:
        os.close(fd)
        raise NotOwnFileError(f"{what} {path} changed while it was opened; refused")
    return fd


def own_file(path: str | Path, what: str = "file") -> Path:
    """Create ``path`` 0600, or tighten an existing regular file to 0600; return it.

    Refused (:class:`NotOwnFileError`, nothing opened or changed) when the path
    is a symlink or anything but a regular file; see the module docstring for
    the order of checks and the race each one closes.
    """
    path = Path(path)
    seen = check_own_file(path, what)
    flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if seen is None else 0)
    try:
        fd = _open_checked(path, flags, what, seen)
    except NotOwnFileError:
        if seen is not None:
            raise
        # O_EXCL lost a race with another creator: check what is there now, once
        seen = check_own_file(path, what)
        fd = _open_checked(path, os.O_RDWR, what, seen)
    try:
        os.fchmod(fd, PRIVATE_MODE)
    finally:
        os.close(fd)
    return path


def read_head(path: str | Path, size: int, what: str = "file") -> bytes:
    """The first ``size`` bytes of an existing regular file (checked as :func:`own_file`)."""
    path = Path(path)
    seen = check_own_file(path, what)
    if seen is None:
        raise FileNotFoundError(f"{what} {path} does not exist")
    fd = _open_checked(path, os.O_RDONLY, what, seen)
    try:
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)


def read_small_file(path: str | Path, limit: int = MAX_TOKEN_BYTES, what: str = "file") -> bytes:
    """The whole content of a regular file of at most ``limit`` bytes, else refused.

    A FIFO or a device (``/dev/zero``) is refused by ``lstat`` before any open;
    a larger file after reading ``limit + 1`` bytes at most, never the rest.
    """
    data = read_head(path, limit + 1, what)
    if len(data) > limit:
        raise NotOwnFileError(f"{what} {path} is larger than {limit} bytes; refused")
    return data


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


def private_db_file(path: str | Path, what: str = "database") -> Path:
    """Create ``path`` 0600 (or tighten an existing regular file) and return it.

    Checked first by :func:`check_db_path`, then by :func:`own_file`: a symlink,
    a FIFO or a device is refused before anything is opened or changed.
    """
    return own_file(check_db_path(path), what)
