"""The faster Q4_0 model: made here from the shipped GGUF, cached, checksummed, verified.

Marked ``engine``: llama.cpp's quantize function runs for real (a few seconds)
into a temporary cache folder (``AGENTSTATE_ENGINE_MODELS``).
"""

import json

import pytest

from agentstate.cli import main
from agentstate.engine import (
    FAST_MODEL_FILE,
    EngineNotInstalledError,
    EngineServer,
    build_fast_model,
    engine_installed,
    locate_model,
    model_sha256,
    verify_fast_model,
)
from agentstate.engine.quantize import manifest_path

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(not engine_installed(), reason="engine not installed: run `make engine`"),
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENTSTATE_ENGINE_MODELS", str(folder))
        manifest = build_fast_model()
        yield folder, manifest


def test_build_writes_a_q4_0_file_and_a_manifest_tied_to_the_source(cache):
    folder, manifest = cache
    target = folder / FAST_MODEL_FILE
    assert target.is_file() and manifest["type"] == "Q4_0"
    assert manifest["sha256"] == model_sha256(target) and manifest["bytes"] == target.stat().st_size
    assert manifest["source_sha256"] == model_sha256(locate_model())
    assert manifest["sha256"] != manifest["source_sha256"]
    with open(target, "rb") as handle:
        assert handle.read(4) == b"GGUF"
    assert json.loads(manifest_path().read_text()) == manifest
    assert verify_fast_model() == target
    assert EngineServer().model_path == target  # the engine's default


def test_a_verified_file_is_not_rebuilt(cache):
    folder, manifest = cache
    stamp = (folder / FAST_MODEL_FILE).stat().st_mtime_ns
    assert build_fast_model() == manifest
    assert (folder / FAST_MODEL_FILE).stat().st_mtime_ns == stamp


def test_a_corrupted_or_stale_file_is_refused_with_how_to_rebuild(cache, capsys):
    folder, manifest = cache
    target = folder / FAST_MODEL_FILE
    original = target.read_bytes()
    try:
        target.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        with pytest.raises(EngineNotInstalledError, match="does not match the sha256.*quantize"):
            verify_fast_model()
        with pytest.raises(EngineNotInstalledError, match="agentstate engine quantize"):
            EngineServer()
        assert main(["engine", "status", "--json"]) == 0
        assert "not ready" in json.loads(capsys.readouterr().out)["model"]
    finally:
        target.write_bytes(original)
    manifest_path().write_text(json.dumps({**manifest, "source_sha256": "0" * 64}))
    with pytest.raises(EngineNotInstalledError, match="another version of the shipped model"):
        verify_fast_model()
    assert main(["engine", "quantize"]) == 0  # rebuilds, and the result verifies again
    assert "Q4_0 model ready" in capsys.readouterr().out
    assert verify_fast_model() == target
    assert json.loads(manifest_path().read_text())["sha256"] == manifest["sha256"]  # same bytes


def test_a_missing_file_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTSTATE_ENGINE_MODELS", str(tmp_path / "empty"))
    with pytest.raises(EngineNotInstalledError, match="missing.*agentstate engine quantize"):
        verify_fast_model()
