"""Start and stop the memory server as a real process on 127.0.0.1 (notebook 06, tests).

The notebook and the tests talk to the same server a user would run with
``agentstate memory serve --db PATH --transport http``. ``ServerProcess``
picks a free loopback port, waits until the port answers, and on ``stop()``
(or at interpreter exit) terminates the process, so nothing is left behind.
``kill()`` is a real SIGKILL, for the restart lessons. The server's own log
goes to ``<db>.log``, never to the notebook.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class ServerProcess:
    """One ``python -m agentstate.memory.server --transport http`` child process."""

    def __init__(self, db: str | Path, port: int | None = None, write_delay: float = 0.0):
        self.db = Path(db)
        self.port = port or free_port()
        self.write_delay = write_delay
        self.proc: subprocess.Popen | None = None
        atexit.register(self.stop)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 20.0) -> ServerProcess:
        if self.running:
            return self
        if port_open(self.port):
            raise RuntimeError(f"port {self.port} on 127.0.0.1 is already in use")
        args = [
            sys.executable,
            "-m",
            "agentstate.memory.server",
            "--db",
            str(self.db),
            "--transport",
            "http",
            "--port",
            str(self.port),
        ]
        if self.write_delay:
            args += ["--write-delay", str(self.write_delay)]
        log = open(f"{self.db}.log", "ab")  # noqa: SIM115 - the child owns it
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env
        )
        log.close()
        deadline = time.monotonic() + timeout
        while not port_open(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = Path(f"{self.db}.log").read_text(errors="replace")[-800:]
                self.stop()
                raise RuntimeError(f"memory server did not start on port {self.port}:\n{tail}")
            time.sleep(0.05)
        return self

    def stop(self, timeout: float = 10.0) -> int | None:
        """Terminate gracefully (the writer finishes its queue); kill if it hangs."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code, self.proc = self.proc.returncode, None
        return code

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush; what a crash looks like."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
