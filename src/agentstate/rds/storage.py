"""Every way the RDS tools keep requirements, broken and fixed, in one place.

The six tools are written once (``rds.tools``) over a storage, so each lesson
swaps only the storage:

- :class:`FileStorage` (notebook 01, broken on purpose): read
  ``/requirements.json`` from deepagents' ``files`` state, add one field,
  write the whole file back. Parallel calls each read the same old file and
  the file reducer keeps only one of their writes.
- :class:`StateStorage` (notebook 02, the fix): write ``{field: value}`` to the
  ``requirements`` key, whose reducer merges fields. Lesson 03's turn cache
  needs nothing more: its middleware merges the batch's writes into the state
  a reader sees.
- :class:`NaiveSharedCacheStorage` (notebook 03, broken): a dict the caller
  shares through the invoke config, written and read with no coordination.
- :class:`CacheFixStorage` (notebook 04, the commonly proposed cache fix): dual
  write to a per-turn cache that the subagent's tools share, merged read.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from deepagents.backends.protocol import FileData
from deepagents.backends.utils import create_file_data, file_data_to_string
from langgraph.config import get_config

REQUIREMENTS_PATH = "/requirements.json"
MANIFEST_PATH = "/manifest.yaml"
NAIVE_KEY = "requirements_cache"


def file_text(files: dict[str, Any] | None, path: str) -> str | None:
    """The text of ``path`` in deepagents' files state, or ``None`` when absent."""
    data = (files or {}).get(path)
    return file_data_to_string(data) if data else None


def read_json_file(files: dict[str, Any] | None, path: str) -> dict[str, Any]:
    """Parse a JSON object from deepagents' files state; missing or unreadable is ``{}``.

    The model can write any text to a file (``write_file``), so a file is
    never trusted to be a JSON object.
    """
    text = file_text(files, path)
    try:
        value = json.loads(text) if text and text.strip() else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def json_text(payload: dict[str, Any]) -> str:
    """A JSON document with sorted keys, so the bytes are deterministic."""
    return json.dumps(payload, indent=2, sort_keys=True)


def json_file(payload: dict[str, Any]) -> FileData:
    """FileData for :func:`json_text` of ``payload``."""
    return create_file_data(json_text(payload))


class RequirementsStorage(Protocol):
    """How a tool reads the collected requirements and turns one field into a state update."""

    def read(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any]:
        """Every requirement the tool can see now."""
        ...

    def write(
        self, state: Mapping[str, Any], runtime: Any, field: str, value: Any
    ) -> dict[str, Any]:
        """The state update that stores ``field = value`` (validated by the tool already)."""
        ...


class FileStorage:
    """Read-modify-write of ``/requirements.json``: loses data under parallel calls.

    ``between(field)`` is called between the read and the write, standing in
    for the work a real tool does there; lessons pass a
    :class:`~agentstate.lessons.simulation.FinishOrder` to choose the
    finishing order and show that it does not decide which field survives.
    """

    def __init__(self, between: Callable[[str], object] | None = None) -> None:
        self.between = between

    def read(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any]:
        """Parse ``/requirements.json`` as the tool sees it (the state from before the step)."""
        return read_json_file(state.get("files"), REQUIREMENTS_PATH)

    def write(
        self, state: Mapping[str, Any], runtime: Any, field: str, value: Any
    ) -> dict[str, Any]:
        """Read the file, add one field, write the whole file back: the lossy step."""
        current = self.read(state, runtime)
        if self.between is not None:
            self.between(field)
        current[field] = value
        return {"files": {REQUIREMENTS_PATH: json_file(current)}}


class StateStorage:
    """One field per update on the ``requirements`` key; the reducer merges them."""

    def read(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any]:
        """The ``requirements`` key as the tool sees it."""
        return dict(state.get("requirements") or {})

    def write(
        self, state: Mapping[str, Any], runtime: Any, field: str, value: Any
    ) -> dict[str, Any]:
        """One field as an update; the key's reducer merges parallel updates."""
        return {"requirements": {field: value}}


class NaiveSharedCacheStorage:
    """Dual write and merged read through an unguarded shared dict; readers do not wait."""

    def _cache(self, runtime: Any) -> dict[str, Any]:
        configurable = (getattr(runtime, "config", None) or {}).get("configurable") or {}
        if NAIVE_KEY not in configurable:
            raise KeyError(f"put a dict under config['configurable'][{NAIVE_KEY!r}] to invoke")
        return configurable[NAIVE_KEY]

    def read(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any]:
        """State merged with whatever the shared dict holds at this instant."""
        return {**(state.get("requirements") or {}), **self._cache(runtime)}

    def write(
        self, state: Mapping[str, Any], runtime: Any, field: str, value: Any
    ) -> dict[str, Any]:
        """Write to the shared dict (unsynchronised) and to state."""
        self._cache(runtime)[field] = value
        return {"requirements": {field: value}}


class TurnCaches:
    """Per-thread dicts that live for one turn: the commonly proposed cache, made to work.

    The parent's ``before_agent`` opens the thread's cache and its
    ``after_agent`` drops it; the subagent's tools run on the same thread, so
    they write into the same dict. Keyed by ``thread_id``, so a thread is
    required.
    """

    def __init__(self) -> None:
        self._caches: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def thread_of(config: Mapping[str, Any] | None) -> str:
        """The thread id of a running config, or a clear error saying how to give one."""
        thread = ((config or {}).get("configurable") or {}).get("thread_id")
        if thread is None:
            raise ValueError(
                "the cache-fix agent keys its turn cache by thread: invoke it with "
                "config={'configurable': {'thread_id': ...}}"
            )
        return str(thread)

    def open(self, thread: str) -> None:
        """Start an empty cache for ``thread`` (the parent's turn begins)."""
        with self._lock:
            self._caches[thread] = {}

    def close(self, thread: str) -> None:
        """Drop ``thread``'s cache (the parent's turn ended)."""
        with self._lock:
            self._caches.pop(thread, None)

    def put(self, thread: str, field: str, value: Any) -> None:
        """Record one field written during ``thread``'s turn."""
        with self._lock:
            self._caches.setdefault(thread, {})[field] = value

    def snapshot(self, thread: str) -> dict[str, Any]:
        """A copy of what ``thread``'s turn has written so far."""
        with self._lock:
            return dict(self._caches.get(thread, {}))

    def __len__(self) -> int:
        with self._lock:
            return len(self._caches)


class CacheFixStorage:
    """Dual write to the thread's turn cache and to state; merged read (state, then cache)."""

    def __init__(self, caches: TurnCaches) -> None:
        self.caches = caches

    def _thread(self, runtime: Any) -> str:
        config = getattr(runtime, "config", None)
        return TurnCaches.thread_of(config if config is not None else get_config())

    def read(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any]:
        """State merged with the thread's turn cache."""
        return {**(state.get("requirements") or {}), **self.caches.snapshot(self._thread(runtime))}

    def write(
        self, state: Mapping[str, Any], runtime: Any, field: str, value: Any
    ) -> dict[str, Any]:
        """Write to the thread's turn cache and to state."""
        self.caches.put(self._thread(runtime), field, value)
        return {"requirements": {field: value}}
