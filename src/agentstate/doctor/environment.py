"""``langgraph.json``'s ``"env"``: the variables ``langgraph dev`` sets before it imports graphs.

``"env"`` is a mapping of names to strings, or the path of a ``.env`` file
(relative to the ``langgraph.json``). ``langgraph dev`` (langgraph-cli 0.4.40)
passes it to langgraph-api's ``run_server``, which reads a file with
python-dotenv (``DotEnv(dotenv_path=env).dict()``: ``${VAR}`` interpolated, a
missing file read as empty) and sets every variable with ``patch_environment``
before the graphs are imported: there a value from ``env`` replaces one
already set in the shell (langgraph-api 0.16.7, ``langgraph_api/cli.py``,
``run_server``). The doctor sets every variable the shell has NOT set, so a
project whose key lives in ``.env`` loads here as it does there, while a
value the caller set on purpose (a CI job's dummy key, say) wins, as with
python-dotenv's ``load_dotenv`` and ruff-style tools.
Used by :mod:`agentstate.doctor.loading` (the hazards of notebooks 01-06).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from agentstate.doctor.files import TargetError, read_small_text, short

Variables = tuple[tuple[str, str], ...]


def env_of(value: object, root: Path, shown: str) -> tuple[Variables, tuple[str, ...]]:
    """The variables ``"env"`` sets, and notes on what could not be read.

    A mapping is taken as it is (each value a string); a path is read as a
    ``.env`` file, relative to ``root``. A missing file sets nothing (as
    ``langgraph dev``) and says so in a note.
    """
    if value is None:
        return (), ()
    if isinstance(value, dict):
        bad = [k for k, v in value.items() if not isinstance(v, str)]
        if bad:
            raise TargetError(f"{shown}: 'env' maps {short(bad[0], 40)!r} to a non-string value")
        return tuple((str(k), v) for k, v in value.items()), ()
    if not isinstance(value, str):
        raise TargetError(f"{shown}: 'env' is neither a path to a .env file nor a mapping")
    path = root / value
    named = f"{shown}: env {short(value)!r}"
    if not os.path.lexists(path):
        return (), (f"{named} does not exist: no variables set from it (as langgraph dev)",)
    text = read_small_text(path, named)
    try:
        from dotenv import dotenv_values
    except ImportError:
        note = (
            f"{named} is not read: python-dotenv is not installed (langgraph-cli brings it; "
            "langgraph dev without it sets nothing either)"
        )
        return (), (note,)
    values = dotenv_values(stream=io.StringIO(text))
    return tuple((k, v) for k, v in values.items() if v is not None), ()


def apply(variables: Variables) -> None:
    """Set those of ``variables`` this process does not have yet (the shell's values win)."""
    for name, value in variables:
        os.environ.setdefault(name, value)
