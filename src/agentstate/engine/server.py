"""Start and stop llama.cpp's OpenAI-compatible server on loopback.

One process, one slot: the server keeps the longest matching prefix of the
last prompt in its KV cache, which is exactly what lesson 05's invariant manual
prefix exploits. The flags are the ones measured on a 2-core machine
(``--n_threads 2 --n_threads_batch 2``) plus ``--interrupt_requests false``:
with the default, a new request interrupts a running stream and concurrent
expert calls come back empty. The server binds 127.0.0.1 only, on a free port.
``AGENTSTATE_ENGINE_THREADS`` changes the default thread count: llama.cpp's
threads spin-wait for each other, so on cores shared with other busy
processes (``make test`` sets 1) fewer threads finish sooner and burn half
the CPU. Used by notebook 05, ``agentstate engine``, the engine tests and the
benchmark (which always runs the measured 2).

The process is :mod:`agentstate.engine.app`: llama-cpp-python's server plus
a primed prefix saved to and restored from ``state_dir`` (default
:func:`~agentstate.engine.state_files.states_dir`) across restarts.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from agentstate.engine.model import engine_installed, install_hint
from agentstate.engine.prefix_client import LOG_PREFIX
from agentstate.engine.quantize import default_model
from agentstate.engine.state_files import budget_bytes, states_dir
from agentstate.servers.loopback import (
    HOST,
    LoopbackProcess,
    LoopbackServerError,
    pid_alive,
    wait_gone,
)

_PREFIX_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit")
SERVER_MODULES = ("agentstate.engine", "llama_cpp.server")  # ours (app.py), and the one it wraps
THREADS_ENV = "AGENTSTATE_ENGINE_THREADS"
MEASURED_THREADS = 2  # the flags measured on an idle 2-core machine
STOP_TIMEOUT = 60.0  # a clean stop may write the primed prefix's state (137 MB at 16 chapters)


def default_threads() -> int:
    """``$AGENTSTATE_ENGINE_THREADS`` if set (a positive integer), else the measured 2."""
    configured = os.environ.get(THREADS_ENV, "").strip()
    if not configured:
        return MEASURED_THREADS
    if not configured.isdigit() or int(configured) < 1:
        raise LoopbackServerError(f"{THREADS_ENV} must be a positive integer, got {configured!r}")
    return int(configured)


def answers(base_url: str, timeout: float = 1.0) -> bool:
    """True when ``GET {base_url}/models`` returns 200."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


class EngineServer(LoopbackProcess):
    """``python -m llama_cpp.server`` for SmolLM2 (default: the verified Q4_0); stops on exit."""

    name = "llama.cpp server"
    hint = install_hint()
    slug = "engine"
    log_mode = "wb"

    def __init__(
        self,
        *,
        port: int | None = None,
        threads: int | None = None,
        n_ctx: int = 8192,
        alias: str = "local",
        model_path: Path | None = None,
        log_path: Path | None = None,
        verbose: bool = False,
        state_dir: Path | None = None,
        restore: str = "auto",
        extra_args: Sequence[str] = (),
    ):
        self.model_path = Path(model_path) if model_path else default_model()
        self.state_dir = Path(state_dir) if state_dir else states_dir()
        self.restore = restore
        self.extra_args = list(extra_args)  # more llama_cpp.server flags, e.g. ["--type_k", "0"]
        try:
            self.budget_mb = budget_bytes() // 1_000_000
        except ValueError as err:
            raise LoopbackServerError(str(err)) from None
        super().__init__(port=port, log_path=log_path)
        # A failed start says how to install the engine only when it is missing; otherwise
        # the cause the server logged is the whole story (a bad --threads, a busy port, ...).
        self.hint = "" if engine_installed() else install_hint()
        self.threads = threads if threads is not None else default_threads()
        self.n_ctx = n_ctx
        self.alias = alias
        self.verbose = verbose

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (``.../v1``)."""
        return f"http://{HOST}:{self.port}/v1"

    def command(self) -> list[str]:
        """The server's argv: the measured flags, loopback only."""
        return [
            sys.executable, "-m", SERVER_MODULES[0],
            "--model", str(self.model_path), "--model_alias", self.alias,
            "--host", HOST, "--port", str(self.port), "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.threads), "--n_threads_batch", str(self.threads),
            "--interrupt_requests", "false", "--verbose", str(self.verbose).lower(),
            "--state_dir", str(self.state_dir), "--restore", self.restore,
            "--state_budget_mb", str(self.budget_mb), *self.extra_args,
        ]  # fmt: skip

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM (the engine saves its primed prefix if that state is missing), then wait."""
        return super().stop(timeout)

    def ready(self) -> bool:
        """The OpenAI ``/models`` route answers."""
        return answers(self.base_url)

    def prefix_hits(self) -> list[int]:
        """Prompt tokens reused from the KV cache, one entry per request that reused any.

        Needs ``verbose=True``: llama-cpp-python then logs "Llama.generate: N
        prefix-match hit" for each request that reuses N cached tokens (and no
        line when it reuses none). A count, not a timing: tests use it to prove
        the cache works whatever the machine's load.
        """
        return [int(m) for m in _PREFIX_HIT.findall(self.log_path.read_text(errors="replace"))]

    def state_lines(self) -> list[str]:
        """The engine's own log lines about saved states (restored, cold, saved, primed)."""
        lines = self.log_path.read_text(errors="replace").splitlines()
        return [line[len(LOG_PREFIX) :] for line in lines if line.startswith(LOG_PREFIX)]


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


STATE_KEYS = {"pid": int, "port": int, "base_url": str}


def read_state(path: Path | None = None) -> dict | None:
    """The record ``start`` wrote, None if there is none, a clear error if it is damaged."""
    path = path or state_file()
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise LoopbackServerError(f"cannot read the engine state file {path}: {err}") from None
    try:
        record = json.loads(text)
    except ValueError:
        record = None
    bad = (
        list(STATE_KEYS)
        if not isinstance(record, dict)
        else [k for k, kind in STATE_KEYS.items() if not isinstance(record.get(k), kind)]
    )
    if bad:
        raise LoopbackServerError(
            f"the engine state file {path} is damaged (missing or invalid: {', '.join(bad)}); "
            "if a server is still running, stop it by its pid, then delete the file and run "
            "`agentstate engine start`"
        )
    return record


def command_line(pid: int) -> str | None:
    """The process's command line (NUL-separated args joined by spaces), None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        return raw.replace(b"\0", b" ").decode(errors="replace").strip() or None
    except FileNotFoundError:
        return None
    except OSError:
        pass
    try:  # no /proc (macOS): ask ps
        out = subprocess.run(["ps", "-p", str(pid), "-o", "command="], capture_output=True,
                             text=True, timeout=10)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def is_our_server(record: dict) -> bool:
    """The recorded pid still runs llama_cpp.server on the recorded port (not a recycled pid)."""
    cmdline = command_line(record["pid"])
    if cmdline is None or not pid_alive(record["pid"]):
        return False
    ours = any(module in cmdline for module in SERVER_MODULES)
    return ours and f"--port {record['port']}" in cmdline


def start_detached(
    port: int | None = None,
    threads: int | None = None,
    path: Path | None = None,
    restore: str = "auto",
) -> dict:
    """Start a server that outlives this process and record it; reuse a running one."""
    path = path or state_file()
    current = read_state(path)
    if current and is_our_server(current) and answers(current["base_url"]):
        if port is None or port == current["port"]:
            return {**current, "reused": True}
        raise LoopbackServerError(
            f"a server started by agentstate already runs on port {current['port']}; "
            "stop it first with `agentstate engine stop`"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    server = EngineServer(
        port=port, threads=threads, log_path=path.with_suffix(".log"), restore=restore
    )
    server.start(detach=True)
    assert server.pid is not None
    record = {
        "pid": server.pid,
        "port": server.port,
        "base_url": server.base_url,
        "n_ctx": server.n_ctx,
        "model": str(server.model_path),
        "log": str(server.log_path),
        "state_dir": str(server.state_dir),
    }
    path.write_text(json.dumps(record, indent=2))
    return {**record, "reused": False}


def stop_detached(path: Path | None = None, timeout: float = STOP_TIMEOUT) -> dict | None:
    """Stop the recorded server, only if that pid still is it; wait until it is gone.

    Returns the record with ``stopped`` (False: the pid no longer runs our
    server, e.g. after a reboot, so nothing was signalled), or None when
    nothing is recorded. The record is removed either way.
    """
    path = path or state_file()
    record = read_state(path)
    if record is None:
        return None
    pid = record["pid"]
    stopped = is_our_server(record)
    if stopped:
        os.kill(pid, signal.SIGTERM)
        if not wait_gone(pid, timeout):
            os.kill(pid, signal.SIGKILL)
            if not wait_gone(pid, timeout):
                raise LoopbackServerError(f"llama.cpp server pid {pid} survived SIGKILL")
    path.unlink(missing_ok=True)
    return {**record, "stopped": stopped}
