"""Start and stop the memory server as a real process on 127.0.0.1 (notebook 06, tests).

The notebook and the tests talk to the same server a user would run with
``agentstate memory serve --db PATH --transport http``. ``ServerProcess``
picks a free loopback port, waits until the port answers, and on ``stop()``
(or at interpreter exit) terminates the process, so nothing is left behind.
``kill()`` is a real SIGKILL, for the restart lessons. The server's own log
goes to ``<db>.log`` (0600, like the store), never to the notebook. Ports, readiness, stopping and
errors (:class:`~agentstate.servers.loopback.LoopbackServerError`) come from
:mod:`agentstate.servers.loopback`, shared with lesson 05's engine. ``db`` may be a
``postgresql://`` URL: then the process is one replica of a fleet (start
several on one URL), its log goes where ``log_path`` says, and a password in
the URL reaches the child as ``PGPASSWORD``, never as an argument.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from agentstate.memory.service.targets import is_postgres, split_password
from agentstate.private_files import own_file
from agentstate.servers.loopback import (
    LoopbackProcess,
    LoopbackServerError,
    free_port,
    port_open,
    url_open,
)

__all__ = ["LoopbackServerError", "ServerProcess", "free_port", "port_open", "url_open"]


class ServerProcess(LoopbackProcess):
    """One ``python -m agentstate.memory.service.server --transport http`` child process."""

    name = "memory server"
    hint = "start one yourself with `agentstate memory serve --db PATH --transport http`"
    slug = "memory"

    def __init__(
        self,
        db: str | Path,
        port: int | None = None,
        write_delay: float = 0.0,
        *,
        log_path: str | Path | None = None,
        db_retry_for: float | None = None,
        options: Sequence[str] = (),
    ):
        self.db: str | Path
        self._password: str | None = None
        if is_postgres(db):  # one replica of a fleet; the password goes by environment
            self.db = str(db)  # what readers (the auditor) use: the full URL, never shown
            self._password = split_password(self.db)[1]
            if log_path is None:
                raise ValueError("a memory server on Postgres needs log_path= (no file to sit by)")
        else:
            self.db = Path(db)
        super().__init__(port=port, log_path=log_path or f"{self.db}.log")
        self.write_delay = write_delay
        self.db_retry_for = db_retry_for
        self.options = list(options)  # more `agentstate memory serve` options (--idle-timeout 2)
        atexit.register(self.stop)

    @property
    def url(self) -> str:
        """The MCP endpoint (streamable HTTP)."""
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        """The child while it runs, else None (older name kept for the memory tests)."""
        return self.process if self.running else None

    def command(self) -> list[str]:
        """The server's argv."""
        db = split_password(str(self.db))[0] if is_postgres(self.db) else str(self.db)
        args = [sys.executable, "-m", "agentstate.memory.service.server", "--db", db,
                "--transport", "http", "--port", str(self.port)]  # fmt: skip
        if self.write_delay:
            args += ["--write-delay", str(self.write_delay)]
        if self.db_retry_for is not None:
            args += ["--db-retry-for", str(self.db_retry_for)]
        return args + self.options

    def environment(self) -> dict[str, str]:
        """Unbuffered output, so the log shows what happened before a crash."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if self._password is not None:  # never on the command line (/proc/<pid>/cmdline)
            env["PGPASSWORD"] = self._password
        return env

    def start(self, timeout: float = 20.0, *, detach: bool = False) -> ServerProcess:
        """Launch the server and wait until its port answers (20 s by default).

        The log is the store's neighbour and holds what the server printed: it is
        created 0600 like the store, and refused (``LoopbackServerError``, nothing
        started) if it is a symlink or anything but a regular file
        (:mod:`agentstate.private_files`).
        """
        if not self.running:
            try:
                own_file(self.log_path, "the memory server's log")
            except OSError as exc:
                raise LoopbackServerError(f"{self.name} not started: {exc}") from None
        super().start(timeout, detach=detach)
        return self

    def __enter__(self) -> ServerProcess:
        return self.start()
