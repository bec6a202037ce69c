"""Saved prefix states on disk: where they live, their manifests, locks and disk budget.

A saved state is two files in one folder (``AGENTSTATE_ENGINE_STATES``, by
default ``~/.cache/agentstate/states``): ``KEY.state``, written by llama.cpp,
and ``KEY.json``, the manifest of what it is valid for (the model file's
sha256, the llama-cpp-python and llama.cpp versions, the context settings
that shape the KV cache, the prefix's sha256 and token ids) with the state
file's own size and sha256. ``KEY`` hashes the validity and the prefix, so
two engines that differ in anything that matters never share a file.

Files are written whole and renamed into place, under an exclusive
``fcntl`` lock on ``KEY.lock`` taken without waiting: a second engine that
finds the lock held skips its write (the first one writes the same prefix)
instead of interleaving bytes. Readers take the lock shared. After a save,
:func:`enforce_budget` removes stale states (their model file is gone or
changed, or another llama.cpp made them), orphans, and then the least
recently used until the folder fits its budget. Nothing here imports
llama.cpp: ``agentstate engine states`` lists and removes without it; the
engine itself uses :mod:`agentstate.engine.state_cache`. Taught in notebook
05 (its going-further page).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentstate.engine.model import file_sha256

FORMAT = 1
STATES_ENV = "AGENTSTATE_ENGINE_STATES"
BUDGET_ENV = "AGENTSTATE_ENGINE_STATE_BUDGET_MB"
DEFAULT_BUDGET_MB = 1024
ORPHAN_SECONDS = 3600.0  # a temporary file this old belongs to a writer that died


class StateLocked(RuntimeError):
    """Another engine is writing (or removing) this state right now."""


def states_dir() -> Path:
    """Where saved prefix states live (``AGENTSTATE_ENGINE_STATES`` overrides)."""
    configured = os.environ.get(STATES_ENV)
    if configured:
        return Path(configured)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "agentstate" / "states"


def budget_bytes() -> int:
    """The folder's disk budget: ``AGENTSTATE_ENGINE_STATE_BUDGET_MB`` (default 1024 MB)."""
    configured = os.environ.get(BUDGET_ENV, "").strip()
    if not configured:
        return DEFAULT_BUDGET_MB * 1_000_000
    if not configured.isdigit():
        raise ValueError(f"{BUDGET_ENV} must be a whole number of MB, got {configured!r}")
    return int(configured) * 1_000_000


def now() -> str:
    """A UTC timestamp for manifests (seconds)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def state_key(valid_for: dict[str, Any], prefix_sha256: str) -> str:
    """The file name stem: one per (engine validity, prefix)."""
    blob = json.dumps({"valid_for": valid_for, "prefix": prefix_sha256}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def tokens_sha256(tokens: list[int]) -> str:
    """sha256 of token ids (as comma-separated decimals: independent of the machine)."""
    return hashlib.sha256(",".join(map(str, tokens)).encode()).hexdigest()


@dataclass(frozen=True)
class SavedState:
    """One manifest and where its files are."""

    folder: Path
    manifest: dict[str, Any]

    @property
    def key(self) -> str:
        return str(self.manifest["key"])

    @property
    def state_path(self) -> Path:
        return self.folder / f"{self.key}.state"

    @property
    def manifest_path(self) -> Path:
        return self.folder / f"{self.key}.json"

    @property
    def size(self) -> int:
        return int(self.manifest["state_bytes"])

    @property
    def last_used(self) -> str:
        return str(self.manifest.get("used_at") or self.manifest["saved_at"])


def lock_path(folder: Path, key: str) -> Path:
    """``KEY.lock``: the file writers lock (it stays; it is empty)."""
    return folder / f"{key}.lock"


@contextmanager
def locked(folder: Path, key: str, *, exclusive: bool) -> Iterator[None]:
    """``fcntl.flock`` on ``KEY.lock``: exclusive without waiting (else StateLocked), or shared."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(lock_path(folder, key), "a+b") as handle:
        mode = fcntl.LOCK_EX | fcntl.LOCK_NB if exclusive else fcntl.LOCK_SH
        try:
            fcntl.flock(handle.fileno(), mode)
        except BlockingIOError:
            raise StateLocked(f"another engine holds the lock {lock_path(folder, key)}") from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def temporary(path: Path) -> Path:
    """A sibling temporary name for ``path`` (same folder: the rename is atomic)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_json(path: Path, document: dict[str, Any]) -> None:
    """Write a JSON file whole (temporary file, fsync, rename)."""
    tmp = temporary(path)
    with open(tmp, "w") as handle:
        handle.write(json.dumps(document, indent=1) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


def read_manifest(path: Path) -> dict[str, Any] | None:
    """A manifest, or None when it is unreadable or not ours (it is then an orphan)."""
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    needed = ("key", "format", "state_bytes", "state_sha256", "valid_for", "tokens", "saved_at")
    if not isinstance(manifest, dict) or any(k not in manifest for k in needed):
        return None
    return manifest


def saved_states(folder: Path | None = None) -> list[SavedState]:
    """Every readable manifest in the folder, most recently used first."""
    folder = folder or states_dir()
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        manifest = read_manifest(path)
        if manifest is not None and path.stem == manifest["key"]:
            found.append(SavedState(folder, manifest))
    return sorted(found, key=lambda s: s.last_used, reverse=True)


def file_problem(state: SavedState) -> str | None:
    """Why the state file cannot be trusted (missing, truncated, corrupt), or None."""
    path = state.state_path
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return f"the state file {path} is missing"
    if size != state.size:
        return f"the state file {path} is truncated or damaged ({size} bytes, not {state.size})"
    if file_sha256(path) != state.manifest["state_sha256"]:
        return f"the state file {path} is corrupt (its sha256 differs from the manifest's)"
    return None


def stale_reason(state: SavedState, versions: dict[str, str] | None = None) -> str | None:
    """Why no engine here can use this state any more, or None.

    Stale: its state file is gone, its model file is gone or changed, or (when
    ``versions`` is given) another llama-cpp-python or llama.cpp made it. A
    state that merely belongs to another model or other settings is not stale:
    another engine of this machine may use it.
    """
    if not state.state_path.is_file():
        return "its state file is missing"
    valid = state.manifest["valid_for"]
    model = Path(str(state.manifest.get("model_path", "")))
    if not model.is_file():
        return f"its model file {model} is gone"
    if file_sha256(model) != valid.get("model_sha256"):
        return f"its model file {model} has changed"
    for name, version in (versions or {}).items():
        if valid.get(name) != version:
            return f"made by {name} {valid.get(name)}, installed {version}"
    return None


def remove_state(state: SavedState) -> bool:
    """Delete a state's files under its lock; False if an engine is writing it now."""
    try:
        with locked(state.folder, state.key, exclusive=True):
            state.manifest_path.unlink(missing_ok=True)
            state.state_path.unlink(missing_ok=True)
    except StateLocked:
        return False
    return True  # KEY.lock stays: unlinking a lock file others may have open breaks the lock


def _key_of(path: Path) -> str:
    """``KEY`` of ``KEY.state``, ``KEY.json`` and their temporaries ``.KEY.state.PID.tmp``."""
    return path.name.lstrip(".").split(".", 1)[0]


def remove_orphans(folder: Path, older_than: float = ORPHAN_SECONDS) -> list[str]:
    """Delete files no manifest accounts for, each under its key's lock (a writer holds it).

    A state file without a manifest, a manifest that does not parse, and
    temporary files older than ``older_than`` seconds (their writer died).
    """
    if not folder.is_dir():
        return []
    keys = {s.key for s in saved_states(folder)}
    cutoff = time.time() - older_than
    removed = []
    for path in sorted(folder.iterdir()):
        if path.name.endswith(".tmp"):
            orphan = path.stat().st_mtime < cutoff
        else:
            orphan = path.suffix in (".state", ".json") and path.stem not in keys
        if not orphan:
            continue
        try:
            with locked(folder, _key_of(path), exclusive=True):
                path.unlink(missing_ok=True)
        except StateLocked:
            continue
        removed.append(f"orphan {path.name}")
    return removed


def enforce_budget(
    folder: Path,
    budget: int,
    *,
    keep: str | None = None,
    versions: dict[str, str] | None = None,
) -> list[str]:
    """Remove stale states and orphans, then the least recently used over ``budget`` bytes.

    ``keep`` (a key) is never removed: the state just saved. Returns one short
    line per removal, for the engine's log.
    """
    removed = remove_orphans(folder)
    states = saved_states(folder)
    for state in list(states):
        reason = None if state.key == keep else stale_reason(state, versions)
        if reason and remove_state(state):
            removed.append(f"{state.key} ({reason})")
            states.remove(state)
    total = sum(s.size for s in states)
    for state in reversed(states):  # least recently used first
        if total <= budget:
            break
        if state.key != keep and remove_state(state):
            total -= state.size
            removed.append(f"{state.key} (over the {budget / 1e6:g} MB budget)")
    return removed
