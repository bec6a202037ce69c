"""Where the RDS tools keep requirements: the broken file, and state with a reducer.

The six tools are written once (``rds.tools``) over a storage strategy, so
each stage swaps only the storage:

- :class:`FileStorage` (notebook 01, broken on purpose): read
  ``/requirements.json`` from deepagents' ``files`` state, add one field,
  write the whole file back. Parallel calls each read the same old file and
  the file reducer keeps only one of their writes.
- :class:`StateStorage` (notebook 02, the fix): write ``{field: value}`` to the
  ``requirements`` key, whose reducer merges fields.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, Protocol

from deepagents.backends.utils import create_file_data, file_data_to_string

REQUIREMENTS_PATH = "/requirements.json"
MANIFEST_PATH = "/manifest.yaml"


def read_json_file(files: dict[str, Any] | None, path: str) -> dict[str, Any]:
    """Parse a JSON file from deepagents' files state; a missing file is ``{}``."""
    data = (files or {}).get(path)
    if not data:
        return {}
    text = file_data_to_string(data)
    return json.loads(text) if text.strip() else {}


def json_file(payload: dict[str, Any]) -> dict[str, Any]:
    """FileData for a JSON document, keys sorted so the bytes are deterministic."""
    return create_file_data(json.dumps(payload, indent=2, sort_keys=True))


class RequirementsStorage(Protocol):
    """How a tool reads the collected requirements and turns one field into a state update."""

    def read(self, state: dict[str, Any], runtime: Any) -> dict[str, Any]: ...

    def write(
        self, state: dict[str, Any], runtime: Any, field: str, value: Any
    ) -> dict[str, Any]: ...


class FileStorage:
    """Read-modify-write of ``/requirements.json``: loses data under parallel calls.

    ``delay(field)`` seconds are slept between the read and the write, standing
    in for the work a real tool does there; lessons use it to choose the
    finishing order and show that it does not decide which field survives.
    """

    def __init__(self, delay: Callable[[str], float] | None = None) -> None:
        self.delay = delay

    def read(self, state: dict[str, Any], runtime: Any) -> dict[str, Any]:
        return read_json_file(state.get("files"), REQUIREMENTS_PATH)

    def write(self, state: dict[str, Any], runtime: Any, field: str, value: Any) -> dict[str, Any]:
        current = self.read(state, runtime)
        if self.delay is not None:
            time.sleep(self.delay(field))
        current[field] = value
        return {"files": {REQUIREMENTS_PATH: json_file(current)}}


class StateStorage:
    """One field per update on the ``requirements`` key; the reducer merges them."""

    def read(self, state: dict[str, Any], runtime: Any) -> dict[str, Any]:
        return dict(state.get("requirements") or {})

    def write(self, state: dict[str, Any], runtime: Any, field: str, value: Any) -> dict[str, Any]:
        return {"requirements": {field: value}}
