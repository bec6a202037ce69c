"""The text of the reader's code: a file on disk, or a notebook cell only ``linecache`` holds.

A kernel compiles each cell under a file name of its own (ipykernel's
``/tmp/ipykernel_<pid>/<hash>.py``) that is not written to disk (unless its
debugger is on); ``linecache`` keeps its text. The doctor reads files; :func:`reading_cells`
lets it read such cells too, as files of one namespace, for
:func:`agentstate.doctor.preview_fix` (the diff ``--fix`` would write to an
agent built in notebooks 01-04). Outside it, a cell is not a file, so the
reports and the command line read what they always read.
"""

from __future__ import annotations

import ast
import contextvars
import hashlib
import inspect
import linecache
import os
from collections.abc import Iterator
from contextlib import contextmanager

_CELLS: contextvars.ContextVar[bool] = contextvars.ContextVar("_CELLS", default=False)


@contextmanager
def reading_cells() -> Iterator[None]:
    """Within it, a ``.py`` name that only ``linecache`` holds is read as a file."""
    token = _CELLS.set(True)
    try:
        yield
    finally:
        _CELLS.reset(token)


def is_cell(file: str) -> bool:
    """True for a ``.py`` name whose text an interpreter put in ``linecache`` (a notebook
    cell: no modification time, unlike a module read from disk; a kernel whose debugger is
    on also writes the cell to disk)."""
    entry = linecache.cache.get(file)
    return (
        file.endswith(".py")
        and isinstance(entry, tuple)
        and len(entry) == 4
        and entry[1] is None
        and bool(entry[2])
    )


def cell_text(file: str) -> str | None:
    """A cell's text while :func:`reading_cells` is on, else None."""
    if not (_CELLS.get() and is_cell(file)):
        return None
    entry: tuple[object, ...] = linecache.cache[file]
    return "".join(entry[2])  # type: ignore[arg-type]


def readable(file: str) -> bool:
    """A file on disk, or a cell while :func:`reading_cells` is on."""
    return os.path.isfile(file) or cell_text(file) is not None


def read(file: str) -> str | None:
    """``file``'s text (UTF-8), a cell's while :func:`reading_cells` is on; None if unreadable."""
    try:
        with open(file, encoding="utf-8", newline="") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return cell_text(file)


def stamp(file: str) -> float | str:
    """What changes when ``file`` does: its modification time, a cell's text digest.
    Raises ``OSError`` when it cannot be read."""
    try:
        return os.stat(file).st_mtime
    except OSError:
        text = cell_text(file)
        if text is None:
            raise
        return hashlib.sha256(text.encode()).hexdigest()


def class_place(cls: type) -> tuple[str, int] | None:
    """``(file, line)`` of ``class Name`` where ``inspect`` finds it, else, while
    :func:`reading_cells` is on, in the last cell that defines it at its top level (Python
    before 3.13 cannot place a class of ``__main__`` in a kernel)."""
    try:
        file = inspect.getsourcefile(cls)
        if file:
            return file, inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        pass
    if not _CELLS.get() or "." in cls.__qualname__:
        return None
    own = set(cls.__dict__.get("__annotations__", {}))
    found: list[tuple[bool, str, int]] = []
    for name in list(linecache.cache):
        text = cell_text(name) if isinstance(name, str) else None
        try:
            body = ast.parse(text).body if text else []
        except SyntaxError:
            continue
        for node in body:
            if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
                lines = [s for s in node.body if isinstance(s, ast.AnnAssign)]
                keys = {s.target.id for s in lines if isinstance(s.target, ast.Name)}
                found.append((keys == own, name, node.lineno))
    # a cell run again after an edit leaves its old text behind: the one declaring the
    # class's own keys, the last run of those
    best = [f for f in found if f[0]] or found
    return (best[-1][1], best[-1][2]) if best else None


def reading() -> bool:
    """True within :func:`reading_cells`."""
    return _CELLS.get()


def cells() -> list[str]:
    """Every cell ``linecache`` holds, while :func:`reading_cells` is on (one notebook's cells
    share a namespace: the call that builds an agent may be in any of them)."""
    return [f for f in list(linecache.cache) if isinstance(f, str) and cell_text(f) is not None]
