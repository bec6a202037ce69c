"""``langgraph.json``'s ``"env"``: the variables ``langgraph dev`` sets before it imports graphs.

``"env"`` is a mapping of names to strings, or the path of a ``.env`` file
(relative to the ``langgraph.json``). ``langgraph dev`` (langgraph-cli 0.4.40)
passes it to langgraph-api's ``run_server``, which reads a file with
python-dotenv (``DotEnv(dotenv_path=env).dict()``: ``${VAR}`` interpolated, a
missing file read as empty) and sets every variable with ``patch_environment``
before the graphs are imported: there a value from ``env`` replaces one
already set in the shell (langgraph-api 0.16.7, ``langgraph_api/cli.py``,
``run_server``). The doctor reads the file with the same python-dotenv (a
dependency of the package, so a pre-commit hook's bare environment reads it
too) and sets every variable the shell has NOT set, so a project whose key
lives in ``.env`` loads here as it does there, while a value the caller set on
purpose (a CI job's dummy key, say) wins, as with python-dotenv's
``load_dotenv``. The variables are set only while the target loads
(:func:`applied`), so two projects in one run each see their own.
Used by :mod:`agentstate.doctor.report.loading` (the hazards of notebooks 01-06).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from agentstate.doctor.report.files import TargetError, read_small_text, short

Variables = tuple[tuple[str, str], ...]


def _checked(pairs: list[tuple[str, str]], named: str) -> Variables:
    """``pairs`` when every name and value can be set; one line naming the first that cannot.

    An empty name, a name with ``=`` and a NUL anywhere are refused by the
    operating system (``os.environ`` raises); refused here, before anything is set.
    """
    for name, value in pairs:
        if not name or "=" in name or "\x00" in name:
            raise TargetError(
                f"{named}: {short(name, 40)!r} is not a variable name "
                "(empty, or holding '=' or a NUL)"
            )
        if "\x00" in value:
            raise TargetError(f"{named}: the value of {short(name, 40)} holds a NUL byte")
    return tuple(pairs)


class _Unparsed(logging.Handler):
    """Collects python-dotenv's warnings (a line it could not parse) as notes."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def read_dotenv(text: str, named: str) -> tuple[Variables, tuple[str, ...]]:
    """The variables of a ``.env`` text as python-dotenv reads it, and a note per skipped line."""
    from dotenv import dotenv_values  # here: `agentstate doctor --help` stays quick

    logger = logging.getLogger("dotenv.main")
    handler = _Unparsed()
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        values = dotenv_values(stream=io.StringIO(text))
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
    notes = tuple(
        f"{named}: {line.removeprefix('python-dotenv ')} (skipped, as langgraph dev does)"
        for line in handler.lines
    )
    pairs = [(k, v) for k, v in values.items() if v is not None]
    return _checked(pairs, named), notes


def env_of(value: object, root: Path, shown: str) -> tuple[Variables, tuple[str, ...]]:
    """The variables ``"env"`` sets, and notes on what could not be read.

    A mapping is taken as it is (each value a string); a path is read as a
    ``.env`` file, relative to ``root``, with python-dotenv (a dependency of the
    package, as of ``langgraph dev``). A missing file sets nothing (as
    ``langgraph dev``) and says so in a note. A name or value the operating
    system refuses is a :class:`TargetError` (one line, this project only).
    """
    if value is None:
        return (), ()
    if isinstance(value, dict):
        bad = [k for k, v in value.items() if not isinstance(v, str)]
        if bad:
            raise TargetError(f"{shown}: 'env' maps {short(bad[0], 40)!r} to a non-string value")
        return _checked([(str(k), v) for k, v in value.items()], f"{shown}: 'env'"), ()
    if not isinstance(value, str):
        raise TargetError(f"{shown}: 'env' is neither a path to a .env file nor a mapping")
    path = root / value
    named = f"{shown}: env {value!r}"
    if not os.path.lexists(path):
        return (), (f"{named} does not exist: no variables set from it (as langgraph dev)",)
    return read_dotenv(read_small_text(path, named), named)


@contextlib.contextmanager
def applied(variables: Variables) -> Iterator[None]:
    """Inside: those of ``variables`` this process does not have yet are set (the shell's
    values win); after: they are removed again, so the next project sees only its own."""
    added: list[str] = []
    try:
        for name, value in variables:
            if name not in os.environ:
                os.environ[name] = value
                added.append(name)
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)
