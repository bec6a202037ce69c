"""Saved prefix states on disk: where they live, their manifests, locks and disk budget.

A saved state is two files in one folder (``AGENTSTATE_ENGINE_STATES``, by
default ``~/.cache/agentstate/states``): ``KEY.state``, written by llama.cpp,
and ``KEY.json``, the manifest of what it is valid for (the model file's
sha256, the llama-cpp-python and llama.cpp versions, the context settings
that shape the KV cache, the prefix's sha256 and token ids) with the state
file's own size and sha256. ``KEY`` is 16 hex digits hashing the validity and
the prefix, so two engines that differ in anything that matters never share
a file.

The folder may hold other files (a user may point the variable at a folder
of their own), so the engine touches only what it wrote (issues 33 and 40):
names of its own patterns (``KEY.state``, ``KEY.json``, ``KEY.lock`` and the
temporaries ``.KEY.state.agentstate-PID.tmp``), seen with ``lstat`` as
regular files (a FIFO, a folder or a symlink is never opened, deleted or
followed), owned by this user, and proved its own by what they hold: a state
that a manifest names, a lock file that is empty (the engine never writes
into one; a non-empty ``KEY.lock`` is never locked or deleted), a temporary
whose writer's pid is gone and whose bytes read as the engine's (a state
starting with llama.cpp's header, a manifest of its key). A name alone
proves nothing. Manifests are read
whole and checked field by field; a malformed one is skipped with a
one-line reason (:func:`scan`), never a traceback.

Files are created 0600 whatever the umask (they hold the prompt's tokens)
and written whole: under an exclusive ``fcntl`` lock on ``KEY.lock`` taken
without waiting (a second engine that finds it held skips its write: the
first one writes the same prefix), the state goes to a temporary file, the
manifest is written, then the state is renamed into place, so a crash leaves
a manifest whose state is missing (stale, removed by the next eviction) or a
temporary (removed once its key's lock is free and its writer's pid is gone,
if it holds what the engine writes), never a state nobody accounts for.
Readers take the lock shared. Whoever holds a lock last deletes ``KEY.lock``
(if it is still the empty file it locked) on its way out, so lock files do
not pile up; a waiter that then holds a deleted lock file sees it and locks
the new one.

After a save, :func:`enforce_budget` removes stale states (their model file
is gone or changed, or another llama.cpp made them), orphans, and then the
least recently used until the folder fits its budget; a file another engine
renames or removes meanwhile is skipped, not an error. Nothing here imports
llama.cpp: ``agentstate engine states`` lists and removes without it; the
engine itself uses :mod:`agentstate.engine.state_cache`. Taught in notebook
05 (its going-further page).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentstate.engine.model import file_sha256
from agentstate.private_files import NotOwnFileError, kind_of, read_head, read_small_file

FORMAT = 1
STATES_ENV = "AGENTSTATE_ENGINE_STATES"
BUDGET_ENV = "AGENTSTATE_ENGINE_STATE_BUDGET_MB"
DEFAULT_BUDGET_MB = 1024
PRIVATE_MODE = 0o600
WRITE_WAIT = 2.0  # seconds a writer waits for a key's lock an eviction holds for a moment
MANIFEST_LIMIT = 64 * 1024 * 1024  # a manifest holds token ids: 8k tokens take ~60 KB

KEY = re.compile(r"[0-9a-f]{16}")
OWN_NAME = re.compile(r"(?P<key>[0-9a-f]{16})\.(?P<kind>state|json|lock)")
# ``.KEY.state.agentstate-PID.tmp``; ``.KEY.state.PID.tmp`` was the name before issue 33
TEMP_NAME = re.compile(
    r"\.(?P<key>[0-9a-f]{16})\.(?P<kind>state|json)\.(?:agentstate-)?(?P<pid>\d+)\.tmp"
)
STATE_MAGIC = b"qsgg"  # llama_state_seq_save_file's first 4 bytes (LLAMA_STATE_SEQ_MAGIC, LE)


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
    """The file name stem: one per (engine validity, prefix), 16 hex digits."""
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


# --- files: only regular ones, seen with lstat ---


def regular(path: Path) -> os.stat_result | None:
    """``lstat`` of ``path`` if it is a regular file (not a link to one); else None."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return None
    return found if stat.S_ISREG(found.st_mode) else None


def what_is(path: Path) -> str:
    """What ``lstat`` sees: "missing", "a regular file", "a FIFO (named pipe)", "a folder"..."""
    try:
        return kind_of(os.lstat(path).st_mode) if not regular(path) else "a regular file"
    except FileNotFoundError:
        return "missing"


def _unlink_regular(path: Path) -> bool:
    """Delete ``path`` if ``lstat`` sees a regular file; False if it is gone or is not one."""
    if regular(path) is None:
        return False
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def ensure_folder(folder: Path) -> None:
    """Create the states folder 0700 if it is missing (an existing one is left as it is)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with suppress(FileExistsError):
        folder.mkdir(mode=0o700)


def create_private(path: Path) -> int:
    """Create ``path`` new, 0600 whatever the umask; the open write descriptor."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, PRIVATE_MODE)
    os.fchmod(fd, PRIVATE_MODE)  # the umask may have taken bits off; it cannot add any
    return fd


# --- locks ---


def lock_path(folder: Path, key: str) -> Path:
    """``KEY.lock``: the file lockers lock; it exists only while someone holds it."""
    return folder / f"{key}.lock"


def _check_key(key: str) -> None:
    if not KEY.fullmatch(key):
        raise ValueError(f"not a state key (16 hex digits): {key!r}")


def own_lock(found: os.stat_result) -> bool:
    """True for a lock file the engine made: a regular file of this user, empty.

    The engine never writes into a lock file, so one that holds bytes is
    someone else's: it is neither locked nor deleted.
    """
    return stat.S_ISREG(found.st_mode) and found.st_size == 0 and found.st_uid == os.getuid()


def _open_lock(path: Path) -> tuple[int, os.stat_result]:
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, PRIVATE_MODE)
    except OSError as err:  # ELOOP: a symlink; EISDIR: a folder
        raise StateLocked(f"{path} is {what_is(path)}, not a lock file the engine made") from err
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode):
        os.close(fd)
        raise StateLocked(f"{path} is {kind_of(found.st_mode)}, not a lock file the engine made")
    if not own_lock(found):
        os.close(fd)
        whose = "another user's" if found.st_uid != os.getuid() else "not empty"
        raise StateLocked(f"{path} is {whose}: not a lock file the engine made; left alone")
    return fd, found


@contextmanager
def locked(folder: Path, key: str, *, exclusive: bool, wait: float = 0.0) -> Iterator[None]:
    """``fcntl.flock`` on ``KEY.lock``: exclusive (else StateLocked), or shared.

    An exclusive lock is tried for up to ``wait`` seconds: an eviction holds
    a key's lock for a moment, a writer for the whole write (a second writer
    of the same prefix then skips its own). A shared lock waits. The last
    holder deletes the lock file while it holds it exclusively; a locker that
    was waiting on that file then finds it is no longer the one at
    ``KEY.lock`` (another inode, or none) and locks again.
    """
    _check_key(key)
    ensure_folder(folder)
    path = lock_path(folder, key)
    mode = fcntl.LOCK_EX | fcntl.LOCK_NB if exclusive else fcntl.LOCK_SH
    deadline = time.monotonic() + wait
    while True:
        fd, opened = _open_lock(path)
        try:
            fcntl.flock(fd, mode)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() < deadline:
                time.sleep(0.01)
                continue
            raise StateLocked(f"another engine holds the lock {path}") from None
        current = regular(path)
        if current is not None and (current.st_dev, current.st_ino) == (
            opened.st_dev,
            opened.st_ino,
        ):
            break
        os.close(fd)  # the holder before us deleted it: lock the one there now
    try:
        yield
    finally:
        try:
            if not exclusive:  # only an exclusive holder may delete it (no reader left)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held, current = os.fstat(fd), regular(path)
            seen = (current.st_dev, current.st_ino) if current is not None else None
            if seen == (held.st_dev, held.st_ino) and own_lock(held):
                path.unlink(missing_ok=True)  # still the empty file it locked, nothing else
        except BlockingIOError:
            pass  # another reader holds it: the last one out deletes it
        finally:
            os.close(fd)


# --- writing ---


def temporary(path: Path) -> Path:
    """A sibling temporary name for ``path`` (same folder: the rename is atomic)."""
    return path.with_name(f".{path.name}.agentstate-{os.getpid()}.tmp")


def pid_gone(pid: int) -> bool:
    """True if no process ``pid`` runs (an exited one not yet reaped counts as gone).

    This process's own pid is never gone. Nothing is reaped here (no ``waitpid``).
    """
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # another user's process runs under that pid
    except (OverflowError, ValueError):
        return True  # no pid is that large
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] in ("Z", "X")


def temporary_is_own(path: Path, key: str, kind: str) -> bool:
    """True if the temporary ``path`` holds what the engine writes there, read (never trusted
    by name): a state starting with llama.cpp's header, or a manifest of ``key``."""
    seen = regular(path)
    if seen is None or seen.st_uid != os.getuid():
        return False
    if kind == "state":
        return _state_head(path) == STATE_MAGIC
    try:
        manifest = json.loads(read_small_file(path, MANIFEST_LIMIT, what="manifest"))
    except (OSError, ValueError, RecursionError):
        return False
    return manifest_problem(manifest, key) is None


def _clear_temporary(tmp: Path) -> None:
    """Make room for this process's temporary: a leftover of an earlier process of the same
    pid is deleted if it reads as the engine's; anything else there is left alone (OSError)."""
    if what_is(tmp) == "missing":
        return
    named = TEMP_NAME.fullmatch(tmp.name)
    if named is None or not temporary_is_own(tmp, named["key"], named["kind"]):
        raise OSError(errno.EEXIST, "not a temporary the engine wrote; left alone", str(tmp))
    _unlink_regular(tmp)


def _fresh_temporary(path: Path) -> Path:
    """``temporary(path)``, created empty and 0600 (a leftover of a dead writer replaced)."""
    tmp = temporary(path)
    _clear_temporary(tmp)  # this process's pid, under the key's lock: a dead writer's
    os.close(create_private(tmp))
    return tmp


def write_json(path: Path, document: dict[str, Any]) -> None:
    """Write a JSON file whole, 0600 (temporary file, fsync, rename); hold the key's lock."""
    tmp = temporary(path)
    _clear_temporary(tmp)
    fd = create_private(tmp)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(json.dumps(document, indent=1) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def write_state(
    folder: Path,
    key: str,
    fill: Callable[[Path], int],
    describe: Callable[[Path], dict[str, Any]],
) -> SavedState:
    """Write ``KEY.state`` and ``KEY.json`` whole, under the key's exclusive lock.

    ``fill(tmp)`` writes the state into the temporary file (created 0600, so
    whatever opens it by name keeps that mode) and returns the bytes it
    wrote (0: it failed); ``describe(tmp)`` returns the manifest. Raises
    :class:`StateLocked` if another engine holds the lock, ``OSError`` if the
    write failed (nothing is left behind then).
    """
    path = folder / f"{key}.state"
    with locked(folder, key, exclusive=True, wait=WRITE_WAIT):
        tmp = _fresh_temporary(path)
        try:
            written = fill(tmp)
            seen = regular(tmp)
            if not written or seen is None or seen.st_size != written:
                raise OSError(errno.EIO, "the state could not be written", str(tmp))
            manifest = describe(tmp)
            _unlink_regular(path)  # a damaged state of this key: gone before its new manifest
            write_json(folder / f"{key}.json", manifest)
            tmp.replace(path)
        finally:
            tmp.unlink(missing_ok=True)
    return SavedState(folder, manifest)


def touch(state: SavedState) -> None:
    """Record a use (the budget removes the least recently used first); skipped when busy."""
    try:
        with locked(state.folder, state.key, exclusive=True, wait=WRITE_WAIT):
            if read_manifest(state.manifest_path)[0] is not None:
                write_json(state.manifest_path, {**state.manifest, "used_at": now()})
    except (StateLocked, OSError):
        pass


# --- reading ---

_FIELDS: dict[str, type | tuple[type, ...]] = {
    "format": int,
    "key": str,
    "prefix_sha256": str,
    "n_tokens": int,
    "tokens": list,
    "tokens_sha256": str,
    "state_bytes": int,
    "state_sha256": str,
    "valid_for": dict,
    "saved_at": str,
}
_OPTIONAL: dict[str, type | tuple[type, ...]] = {
    "label": str,
    "used_at": str,
    "n_ctx": int,
    "model_path": str,
    "model_file": str,
}


def manifest_problem(manifest: Any, stem: str) -> str | None:
    """Why ``manifest`` (parsed JSON from ``STEM.json``) is not a manifest the engine wrote."""
    if not isinstance(manifest, dict):
        return f"not a JSON object but {type(manifest).__name__}"
    for name, kind in _FIELDS.items():
        if name not in manifest:
            return f"no {name}"
        value = manifest[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            return f"{name} is {type(value).__name__}, not {getattr(kind, '__name__', kind)}"
    for name, kind in _OPTIONAL.items():
        value = manifest.get(name)
        if value is not None and not isinstance(value, kind):
            return f"{name} is {type(value).__name__}"
    if manifest["key"] != stem:
        return f"its key {manifest['key']!r} is not its file name's"
    tokens = manifest["tokens"]
    if not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
        return "tokens holds something other than token ids"
    if manifest["n_tokens"] != len(tokens):
        return f"n_tokens {manifest['n_tokens']} but {len(tokens)} token ids"
    if manifest["state_bytes"] < 0:
        return "state_bytes is negative"
    return None


def read_manifest(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """A manifest and None, or None and why it is not one (one line).

    The file is opened only if ``lstat`` sees a regular file, with
    ``O_NOFOLLOW | O_NONBLOCK`` (:func:`agentstate.private_files.read_small_file`):
    a FIFO or a folder named ``KEY.json`` is refused without waiting.
    """
    kind = what_is(path)
    if kind == "missing":
        return None, None  # removed meanwhile
    if kind != "a regular file":
        return None, f"{path.name}: {kind}, not a regular file; not opened"
    try:
        raw = read_small_file(path, MANIFEST_LIMIT, what="manifest")
    except FileNotFoundError:
        return None, None
    except NotOwnFileError:
        return None, f"{path.name}: changed while it was opened, or too large; not read"
    except OSError as err:
        return None, f"{path.name}: unreadable ({err.strerror or err})"
    try:
        manifest = json.loads(raw)
    except (ValueError, RecursionError) as err:
        return None, f"{path.name}: not JSON ({str(err).splitlines()[0]})"
    problem = manifest_problem(manifest, path.name.removesuffix(".json"))
    if problem:
        return None, f"{path.name}: not a manifest the engine wrote ({problem})"
    return manifest, None


@dataclass
class Scan:
    """What :func:`scan` found: the states, and one line per file of its names it skipped."""

    states: list[SavedState] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _names(folder: Path) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []


def scan(folder: Path | None = None) -> Scan:
    """Every manifest ``KEY.json`` in the folder, most recently used first; why others are not.

    Files whose names are not the engine's (``package.json``) are not read.
    """
    folder = folder or states_dir()
    found = Scan()
    for name in _names(folder):
        own = OWN_NAME.fullmatch(name)
        if not own or own["kind"] != "json":
            continue
        manifest, problem = read_manifest(folder / name)
        if manifest is not None:
            found.states.append(SavedState(folder, manifest))
        elif problem:
            found.skipped.append(problem)
    found.states.sort(key=lambda s: s.last_used, reverse=True)
    return found


def saved_states(folder: Path | None = None) -> list[SavedState]:
    """Every valid manifest in the folder, most recently used first."""
    return scan(folder).states


def file_problem(state: SavedState, *, check_sha: bool = True) -> str | None:
    """Why the state file cannot be trusted (missing, not a file, truncated, corrupt), or None.

    ``check_sha`` hashes the whole file again (never from a cache: a file
    changed in place keeps its size and can get its mtime back).
    """
    path = state.state_path
    seen = regular(path)
    if seen is None:
        kind = what_is(path)
        if kind == "missing":
            return f"the state file {path} is missing"
        return f"the state file {path} is {kind}, not a regular file"
    if seen.st_size != state.size:
        return (f"the state file {path} is truncated or damaged ({seen.st_size} bytes, "
                f"not {state.size})")  # fmt: skip
    if check_sha:
        try:
            digest = file_sha256(path, cached=False)
        except OSError as err:
            return f"the state file {path} cannot be read ({err.strerror or err})"
        if digest != state.manifest["state_sha256"]:
            return f"the state file {path} is corrupt (its sha256 differs from the manifest's)"
    return None


def stale_reason(state: SavedState, versions: dict[str, str] | None = None) -> str | None:
    """Why no engine here can use this state any more, or None.

    Stale: its state file is gone, its model file is gone or changed, or (when
    ``versions`` is given) another llama-cpp-python or llama.cpp made it. A
    state that merely belongs to another model or other settings is not stale:
    another engine of this machine may use it.
    """
    if regular(state.state_path) is None:
        return "its state file is missing"
    valid = state.manifest["valid_for"]
    model = Path(str(state.manifest.get("model_path", "")))
    try:
        digest = file_sha256(model)
    except FileNotFoundError:
        return f"its model file {model} is gone"
    except OSError:
        return f"its model file {model} is not a readable file"
    if digest != valid.get("model_sha256"):
        return f"its model file {model} has changed"
    for name, version in (versions or {}).items():
        if valid.get(name) != version:
            return f"made by {name} {valid.get(name)}, installed {version}"
    return None


# --- removing ---


def remove_state(state: SavedState) -> bool:
    """Delete a state's files under its lock; False if an engine holds the lock now.

    Only regular files, and only while ``KEY.json`` is still a manifest of
    this key: the state first, then its manifest (a crash between leaves a
    manifest whose state is missing, which the next eviction removes).
    """
    try:
        with locked(state.folder, state.key, exclusive=True):
            manifest, _ = read_manifest(state.manifest_path)
            if manifest is None:
                return True  # gone already (or replaced by something not ours: left alone)
            _unlink_regular(state.state_path)
            _unlink_regular(state.manifest_path)
    except StateLocked:
        return False
    return True


def _state_head(path: Path) -> bytes:
    try:
        return read_head(path, len(STATE_MAGIC), what="state")
    except OSError:
        return b""


def remove_orphans(folder: Path) -> list[str]:
    """Delete what a dead writer left, each under its key's lock; nothing else.

    Orphans: a temporary of the engine's naming whose key's lock is free (its
    writer holds that lock as long as it writes), whose writer's pid is gone
    and whose bytes read as the engine's (:func:`temporary_is_own`); a
    ``KEY.state`` that no manifest names and that starts with llama.cpp's
    state header (an older engine's crash); and an empty ``KEY.lock`` nobody
    holds. Regular files of this user only.
    """
    keys = {s.key for s in saved_states(folder)}
    removed = []
    for name in _names(folder):
        own, temp = OWN_NAME.fullmatch(name), TEMP_NAME.fullmatch(name)
        path = folder / name
        if temp:
            if not pid_gone(int(temp["pid"])):
                continue  # its writer may still run (or the pid is another process's now)
            key, why = temp["key"], "orphan"
        elif own and own["kind"] == "lock":
            key, why = own["key"], ""
        elif own and own["kind"] == "state" and own["key"] not in keys:
            key, why = own["key"], "orphan"
        else:
            continue
        found = regular(path)
        if found is None or found.st_uid != os.getuid():
            continue
        try:
            with locked(folder, key, exclusive=True):  # deletes an empty lock file nobody holds
                if not why:
                    continue
                if own and (folder / f"{key}.json").exists():
                    continue  # a manifest came meanwhile: not an orphan
                if own and _state_head(path) != STATE_MAGIC:
                    continue  # named like ours, but not a state llama.cpp wrote
                if temp and not temporary_is_own(path, key, temp["kind"]):
                    continue  # named like ours, but not what the engine writes there
                if _unlink_regular(path):
                    removed.append(f"{why} {name}")
        except StateLocked:
            continue
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
    line per removal, for the engine's log. Only the engine's own files are
    touched (see the module docstring); one another engine removes or renames
    meanwhile is skipped.
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
