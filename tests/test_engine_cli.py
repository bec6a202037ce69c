"""`agentstate engine start|stop|status` when things are not as expected (issue 11).

Real processes and real loopback sockets: a port already taken by another
HTTP server, a recorded pid that is not (or no longer) our llama.cpp server,
a server that ignores SIGTERM, a damaged state file. No assertion waits on a
timer or depends on how loaded the machine is.
"""

import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentstate.cli import main
from agentstate.engine import engine_installed, free_port
from agentstate.engine import model as engine_model
from agentstate.engine.server import EngineServer, stop_detached
from agentstate.servers.loopback import LoopbackProcess, LoopbackServerError, pid_alive, wait_gone


def run(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr().out


@pytest.fixture
def state(tmp_path, monkeypatch):
    path = tmp_path / "engine.json"
    monkeypatch.setenv("AGENTSTATE_ENGINE_STATE", str(path))
    return path


def fake_server(port, body="import time; time.sleep(120)"):
    """A process whose command line looks like our server's; prints 'ready' once set up."""
    code = f"import sys, signal, time\n{body}"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "llama_cpp.server", "--port", str(port)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    return proc


IGNORE_TERM = (
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(120)"
)


class Models(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"object": "list", "data": [{"id": "someone-else"}]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.engine
@pytest.mark.skipif(not engine_installed(), reason="engine not installed: run `make engine`")
def test_start_on_a_taken_port_is_an_error_not_a_dead_pid(capsys, state):
    other = ThreadingHTTPServer(("127.0.0.1", free_port()), Models)  # answers /v1/models too
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        port = other.server_address[1]
        code, out = run(capsys, "engine", "start", "--port", str(port))
    finally:
        other.shutdown()
        other.server_close()
    assert code == 2 and f"port {port} on 127.0.0.1 is already in use" in out
    assert "started" not in out and not state.exists()


def test_stop_leaves_a_process_that_is_not_our_server_alone(capsys, state):
    port = free_port()
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    impostor = fake_server(port + 1)  # "llama_cpp.server", but on another port
    try:
        for pid in (bystander.pid, impostor.pid):
            record = {"pid": pid, "port": port, "base_url": f"http://127.0.0.1:{port}/v1"}
            state.write_text(json.dumps(record))
            code, out = run(capsys, "engine", "stop")
            assert code == 0 and "nothing stopped" in out and "stopped pid" not in out
            assert pid_alive(pid) and not state.exists()
    finally:
        for proc in (bystander, impostor):
            proc.kill()
            proc.wait()


def test_stop_kills_a_server_that_ignores_sigterm_and_reaps_it(state):
    port = free_port()
    server = fake_server(port, IGNORE_TERM)
    assert server.stdout.readline().strip() == "ready"  # the handler is installed
    state.write_text(json.dumps({"pid": server.pid, "port": port,
                                 "base_url": f"http://127.0.0.1:{port}/v1"}))  # fmt: skip
    record = stop_detached(timeout=0.5)
    assert record["stopped"] is True
    with pytest.raises(ProcessLookupError):  # killed and reaped, not a zombie
        os.kill(server.pid, 0)


def test_a_child_whose_main_thread_exited_is_alive_until_reaped():
    """A server's main thread can exit (a zombie leader in /proc) while its threads shut down."""
    code = ("import ctypes, threading, time\n"
            "threading.Thread(target=time.sleep, args=(2,)).start()\n"
            "print('ready', flush=True)\nctypes.CDLL(None).pthread_exit(None)\n")  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    assert wait_gone(proc.pid, timeout=60)
    with pytest.raises(ProcessLookupError):  # reaped only once every thread is gone
        os.kill(proc.pid, 0)


@pytest.mark.parametrize(
    "content",
    ['{"port": 1234}', '{"pid": "12", "port": 1, "base_url": "x"}', "not json", "[]"],
)
def test_a_damaged_state_file_is_a_clear_error(capsys, state, content):
    state.write_text(content)
    for action in ("stop", "status", "start"):
        code, out = run(capsys, "engine", action)
        assert code == 2 and "state file" in out and "damaged" in out, (action, out)
        assert out.count("\n") == 1 and state.read_text() == content  # nothing changed


@pytest.mark.parametrize("port", ["0", "99999", "http"])
def test_a_bad_port_is_refused_in_one_line(capsys, port):
    with pytest.raises(SystemExit) as exit_:
        main(["engine", "start", "--port", port])
    assert exit_.value.code == 2 and "--port" in capsys.readouterr().err


@pytest.mark.parametrize("threads", ["0", "-2", "two"])
@pytest.mark.parametrize("command", ["start", "serve"])
def test_a_bad_thread_count_is_refused_in_one_line(capsys, state, command, threads):
    with pytest.raises(SystemExit) as exit_:
        main(["engine", command, "--threads", threads])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "not a positive thread count" in err
    assert not state.exists()  # nothing was started or recorded


def test_hints_name_make_in_the_checkout_and_pip_outside(capsys, state, monkeypatch, tmp_path):
    """Issue 43 item 4: `make engine` only where there is a Makefile to run it; pip elsewhere."""
    monkeypatch.setattr(engine_model, "_server_available", lambda: False)
    for argv in (["engine", "start"], ["engine", "status"]):
        _, out = run(capsys, *argv)  # this test runs from the clone
        assert "`make engine`" in out and "pip install" not in out, out
    monkeypatch.setattr(engine_model, "CHECKOUT", tmp_path / "site-packages")  # as from a wheel
    for argv in (["engine", "start"], ["engine", "status"]):
        _, out = run(capsys, *argv)
        assert "make" not in out, out
        assert "pip install 'agentstate-langgraph[engine]'" in out, out


@pytest.mark.engine
@pytest.mark.skipif(not engine_installed(), reason="engine not installed: run `make engine`")
def test_a_server_that_fails_at_start_says_why_in_one_line(capsys, state):
    """Issue 16: ``engine start`` said to install the engine; the cause was only in engine.log.

    A socket bound to the port but not listening passes the CLI's port check (a
    connect is refused), and the server's own bind then fails.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        code, out = run(capsys, "engine", "start", "--port", str(port))
    assert code == 2 and out.startswith("error: ") and out.count("\n") == 1, out
    assert "address already in use" in out.lower(), out  # the cause, from the server's log
    assert str(state.with_suffix(".log")) in out and "make engine" not in out
    assert not state.exists()  # nothing recorded


@pytest.mark.engine
@pytest.mark.skipif(not engine_installed(), reason="engine not installed: run `make engine`")
def test_a_model_file_the_server_cannot_load_is_named_with_the_cause(tmp_path):
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"this is not a GGUF file\n")
    log = tmp_path / "engine.log"
    server = EngineServer(model_path=bogus, log_path=log, threads=1)
    with pytest.raises(LoopbackServerError) as raised:
        server.start(timeout=120)
    message = str(raised.value)
    assert "\n" not in message and "exited with code" in message and str(log) in message
    assert "make engine" not in message and str(bogus) in message, message
    assert not server.running


class DiesAtStart(LoopbackProcess):
    """A server that logs like uvicorn does when its bind fails, then exits 1."""

    name = "test server"
    hint = "see its docs"

    def command(self):
        lines = [
            "INFO:     Started server process",
            "ERROR:    [Errno 98] address already in use",
            "INFO:     Waiting for application shutdown.",
            "INFO:     Application shutdown.",
        ]
        return [sys.executable, "-c", f"print({chr(10).join(lines)!r}); raise SystemExit(1)"]


def test_a_failed_start_names_the_logged_cause_not_the_last_line(tmp_path):
    """The last line naming an error, not the shutdown notes after it; one line in all."""
    server = DiesAtStart(log_path=tmp_path / "server.log")
    with pytest.raises(LoopbackServerError) as raised:
        server.start(timeout=60)
    assert str(raised.value) == (
        f"test server exited with code 1 on port {server.port}: ERROR:    [Errno 98] address "
        f"already in use (full log: {tmp_path / 'server.log'}); see its docs"
    )
