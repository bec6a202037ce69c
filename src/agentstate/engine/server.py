"""Start and stop llama.cpp's OpenAI-compatible server on loopback.

One process, one slot: the server keeps the longest matching prefix of the
last prompt in its KV cache, which is exactly what stage 05's invariant manual
prefix exploits. The flags are the ones measured on a 2-core machine
(``--n_threads 2 --n_threads_batch 2``) plus ``--interrupt_requests false``:
with the default, a new request interrupts a running stream and concurrent
expert calls come back empty. The server binds 127.0.0.1 only, on a free port.
Used by notebook 05, ``agentstate engine``, the engine tests and the benchmark.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from agentstate.engine.model import require_engine

HOST = "127.0.0.1"


class EngineStartError(RuntimeError):
    """The server process exited or never answered; the message carries its log tail."""


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def answers(base_url: str, timeout: float = 1.0) -> bool:
    """True when ``GET {base_url}/models`` returns 200."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


class EngineServer:
    """``python -m llama_cpp.server`` for the SmolLM2 GGUF; a context manager that stops it."""

    def __init__(
        self,
        *,
        port: int | None = None,
        threads: int = 2,
        n_ctx: int = 8192,
        alias: str = "local",
        model_path: Path | None = None,
        log_path: Path | None = None,
    ):
        self.model_path = Path(model_path) if model_path else require_engine()
        self.port = port or free_port()
        self.threads = threads
        self.n_ctx = n_ctx
        self.alias = alias
        self.log_path = (
            Path(log_path)
            if log_path
            else Path(tempfile.gettempdir(), f"agentstate-engine-{self.port}.log")
        )
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model_path), "--model_alias", self.alias,
            "--host", HOST, "--port", str(self.port), "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads),
            "--interrupt_requests", "false", "--verbose", "false",
        ]  # fmt: skip

    def start(self, timeout: float = 90.0, *, detach: bool = False) -> EngineServer:
        """Launch the server and wait until it answers; ``detach`` outlives this process."""
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=detach,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                raise EngineStartError(
                    f"llama.cpp server exited with code {code}:\n{self.log_tail()}"
                )
            if answers(self.base_url):
                return self
            time.sleep(0.2)
        self.stop()
        raise EngineStartError(
            f"llama.cpp server did not answer within {timeout:.0f} s:\n" + self.log_tail()
        )

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the process we started (then kill it if it lingers)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout)

    def __enter__(self) -> EngineServer:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- a detached server shared across CLI invocations: a small JSON state file ---


def state_file() -> Path:
    """Where ``agentstate engine start`` records the pid and port (override with an env var)."""
    configured = os.environ.get("AGENTSTATE_ENGINE_STATE")
    if configured:
        return Path(configured)
    return (
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        / "agentstate"
        / "engine.json"
    )


def read_state(path: Path | None = None) -> dict | None:
    path = path or state_file()
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _is_our_server(pid: int) -> bool:
    """The pid still runs llama_cpp.server (a recycled pid must not be killed)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    return b"llama_cpp.server" in cmdline


def start_detached(port: int | None = None, threads: int = 2, path: Path | None = None) -> dict:
    """Start a server that outlives this process and record it; reuse a running one."""
    path = path or state_file()
    current = read_state(path)
    if current and _is_our_server(current["pid"]) and answers(current["base_url"]):
        return {**current, "reused": True}
    path.parent.mkdir(parents=True, exist_ok=True)
    server = EngineServer(port=port, threads=threads, log_path=path.with_suffix(".log"))
    server.start(detach=True)
    assert server.process is not None
    record = {
        "pid": server.process.pid,
        "port": server.port,
        "base_url": server.base_url,
        "model": str(server.model_path),
        "log": str(server.log_path),
    }
    path.write_text(json.dumps(record, indent=2))
    return {**record, "reused": False}


def stop_detached(path: Path | None = None, timeout: float = 10.0) -> dict | None:
    """Stop the recorded server (only if that pid is still llama_cpp.server)."""
    path = path or state_file()
    record = read_state(path)
    if record is None:
        return None
    pid = int(record["pid"])
    if _is_our_server(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    path.unlink(missing_ok=True)
    return record


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    state = Path(f"/proc/{pid}/stat")
    if state.exists():
        return state.read_text().split(")")[-1].split()[0] != "Z"
    return True
