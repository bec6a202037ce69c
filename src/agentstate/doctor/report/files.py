"""The files a target names, read safely: ``stat`` first, never open what is not a regular file.

A FIFO or a device named where a ``langgraph.json``, a ``.env``, a
``pyproject.toml`` or a ``.py`` is expected is refused from its ``stat``, so it
is never opened (opening a FIFO for reading would hang); a file larger than
1 MiB or not UTF-8 is refused in one line. Every failure is a
:class:`TargetError` whose message is the one line the CLI prints. Shared by
:mod:`.loading`, :mod:`.environment` and :mod:`.config` (the doctor of
notebooks 01-06).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MAX_BYTES = 1 << 20
"""A configuration file (``langgraph.json``, ``.env``, ``pyproject.toml``) larger than this
(1 MiB) is refused unread."""

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


class TargetError(Exception):
    """A target that cannot be loaded as a graph; its message is the one line to print."""


def describe(exc: BaseException) -> str:
    """``Type: message`` on one line, whatever the message holds."""
    if isinstance(exc, SystemExit):
        return f"SystemExit (it called sys.exit({exc.code!r}))"
    try:
        text = " ".join(str(exc).split())
    except Exception:
        text = "(a message that cannot be read)"
    return f"{type(exc).__name__}: {short(text, 300)}" if text else type(exc).__name__


def short(text: str, most: int = 60) -> str:
    """``text`` cut to ``most`` characters, an ellipsis where it was cut."""
    return text if len(text) <= most else text[: most - 1] + "…"


def mode(path: Path, shown: str) -> int:
    """``path``'s ``st_mode`` (after symbolic links); one line naming the cause otherwise."""
    if "\x00" in str(path):
        raise TargetError(f"{shown}: the path contains a NUL byte")
    try:
        return os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise TargetError(f"{shown}: no such file or directory") from None
        if exc.errno == errno.ENAMETOOLONG:
            raise TargetError(f"{shown}: a file name in it is too long") from None
        raise TargetError(f"{shown}: {exc.strerror or describe(exc)}") from None
    except ValueError as exc:  # a path the file system cannot encode
        raise TargetError(f"{shown}: {describe(exc)}") from None


def regular_file(path: Path, shown: str) -> Path:
    """``path`` when its ``stat`` says it is a regular file (after symbolic links)."""
    found = mode(path, shown)
    if not stat.S_ISREG(found):
        kind = _KINDS.get(stat.S_IFMT(found), "not a file")
        raise TargetError(f"{shown} is {kind}, not a regular file")
    return path


def read_small(path: Path, shown: str) -> bytes:
    """The bytes of a regular file of at most :data:`MAX_BYTES`."""
    regular_file(path, shown)
    try:
        with path.open("rb") as file:
            data = file.read(MAX_BYTES + 1)
    except OSError as exc:
        raise TargetError(f"cannot read {shown}: {exc.strerror or describe(exc)}") from None
    if len(data) > MAX_BYTES:
        raise TargetError(f"{shown} is larger than {MAX_BYTES >> 20} MiB")
    return data


def read_small_text(path: Path, shown: str) -> str:
    """The UTF-8 text of a regular file of at most :data:`MAX_BYTES` (a BOM dropped)."""
    data = read_small(path, shown)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TargetError(
            f"{shown} is not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
