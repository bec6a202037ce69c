"""A throwaway PostgreSQL server: real ``initdb`` and ``postgres`` on a free loopback port.

For the Postgres threads of notebooks 02-05 (and their tests).

The Postgres checkpointer is tested against a real server, never a mock, and
a reader can try it without setting one up. :class:`PostgresServer` creates a
data directory in a temporary folder, starts ``postgres`` listening on
127.0.0.1 only (no Unix socket), with a random password, and stops it on exit
leaving no process behind. ``stop()`` then ``start()`` restarts it on the same
data directory and port, which is how ``tests/test_postgres.py`` proves that
threads survive a server restart. Postgres refuses to run as root, so as root
the server runs as the ``postgres`` system user (or ``nobody``), which owns the
folder. The programs come from Debian's ``postgresql`` package (``make
postgres`` installs it). README "From one machine to many" uses it.

``python -m agentstate.servers.postgres`` starts one until Ctrl-C and writes
its URL to a file only its owner can read.
"""

from __future__ import annotations

import argparse
import atexit
import os
import pwd
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from agentstate._extras import needs
from agentstate.servers.loopback import free_port, serve_until_interrupted

with needs("persistence", "agentstate.servers.postgres"):
    import psycopg
    from psycopg import sql

ENV_BIN = "AGENTSTATE_PG_BIN"
INSTALL_HINT = (
    "run `make postgres` (Debian: apt-get install -y postgresql) "
    f"or set {ENV_BIN} to the folder holding initdb and postgres"
)
DB_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class PostgresNotInstalledError(RuntimeError):
    """``initdb`` and ``postgres`` were not found."""


class PostgresStartError(RuntimeError):
    """The server did not start; the message carries the end of its log."""


def postgres_bindir() -> Path:
    """The folder holding ``initdb`` and ``postgres``: $AGENTSTATE_PG_BIN, PATH, or Debian's.

    Debian installs them in ``/usr/lib/postgresql/<major>/bin``, off PATH; the
    newest major wins.
    """
    candidates: list[Path] = []
    if os.environ.get(ENV_BIN):
        candidates.append(Path(os.environ[ENV_BIN]))
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    debian = Path("/usr/lib/postgresql")
    if debian.is_dir():
        majors = [p for p in debian.iterdir() if p.name.isdigit()]
        candidates += [p / "bin" for p in sorted(majors, key=lambda p: -int(p.name))]
    for folder in candidates:
        if all(os.access(folder / exe, os.X_OK) for exe in ("initdb", "postgres")):
            return folder
    raise PostgresNotInstalledError(f"PostgreSQL server programs not found: {INSTALL_HINT}")


def _server_user() -> pwd.struct_passwd | None:
    """Who runs the server: ourselves, unless we are root (which Postgres refuses)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise PostgresStartError("running as root and neither a 'postgres' nor a 'nobody' user exists")


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state first), or None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return None if fields[0] in ("Z", "X") else fields


def process_tree(pid: int) -> set[tuple[int, str]]:
    """``pid`` and its live children, as (pid, start time) so a reused pid is not mistaken."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields and (int(entry.name) == pid or int(fields[1]) == pid):
                found.add((int(entry.name), fields[19]))  # field 22 of stat: start time
    return found


def still_alive(processes: set[tuple[int, str]]) -> list[int]:
    """The pids of ``processes`` that still run (same pid, same start time)."""
    return sorted(pid for pid, start in processes if (fields := _stat(pid)) and fields[19] == start)


def _base_for(runas: pwd.struct_passwd | None) -> str | None:
    """Where the server's folder goes: the usual temporary folder, unless the server runs as
    another user (root starts it as ``postgres``) who cannot pass through it (a private
    ``TMPDIR`` such as pytest's, mode 0700): then ``/tmp``, which every user can enter."""
    if runas is None:
        return None
    here = Path(tempfile.gettempdir()).resolve()
    for folder in (here, *here.parents):
        info = folder.stat()
        if info.st_uid != runas.pw_uid and not info.st_mode & stat.S_IXOTH:
            return "/tmp"
    return None


class PostgresServer:
    """A real PostgreSQL server for tests and demos; use as a context manager.

    ``url`` is a ``postgresql://`` URL for the default database;
    :meth:`create_database` makes a fresh one and returns its URL.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        fsync: bool = False,
        start_timeout: float = 60.0,
        password: str | None = None,
    ) -> None:
        self.bindir = postgres_bindir()
        self.port = port or free_port()
        self._may_move = port is None  # a port we picked may be taken before we bind it
        self.fsync = fsync  # off by default: a throwaway server need not survive a power cut
        self.start_timeout = start_timeout
        self.user = "agentstate"
        self.password = password or secrets.token_urlsafe(18)  # any text but a line break
        if "\n" in self.password or "\r" in self.password:
            raise ValueError("the password must be one line (it goes to initdb's --pwfile)")
        self._runas = _server_user()
        self.root = Path(tempfile.mkdtemp(prefix="agentstate-pg-", dir=_base_for(self._runas)))
        if self._runas is not None:
            os.chown(self.root, self._runas.pw_uid, self._runas.pw_gid)
        self.data_dir = self.root / "data"
        self.log_path = self.root / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._known: set[tuple[int, str]] = set()

    # --- URLs ---

    def url_for(self, dbname: str) -> str:
        """The URL of database ``dbname`` on this server."""
        password = quote(self.password, safe="")  # decoded once by libpq, whatever it holds
        return f"postgresql://{self.user}:{password}@127.0.0.1:{self.port}/{dbname}"

    @property
    def url(self) -> str:
        """The URL of the default database (``postgres``)."""
        return self.url_for("postgres")

    def create_database(self, name: str) -> str:
        """Create an empty database ``name`` and return its URL."""
        if not DB_NAME.match(name):
            raise ValueError(f"invalid database name {name!r}: use a-z, 0-9 and _")
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url_for(name)

    # --- lifecycle ---

    def _run_kwargs(self) -> dict[str, Any]:
        # A small environment, so no API key of ours reaches the server's processes.
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
        if self._runas is None:
            return {"env": env}
        ids = {"user": self._runas.pw_uid, "group": self._runas.pw_gid, "extra_groups": []}
        return {"env": env, **ids}

    def _initdb(self) -> None:
        pwfile = self.root / "pwfile"
        fd = os.open(pwfile, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(self.password + "\n")
        if self._runas is not None:
            os.chown(pwfile, self._runas.pw_uid, self._runas.pw_gid)
        command = [
            str(self.bindir / "initdb"),
            f"--pgdata={self.data_dir}",
            f"--username={self.user}",
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
            "--encoding=UTF8",
            "--locale=C",
            *([] if self.fsync else ["--no-sync"]),
        ]
        try:
            done = subprocess.run(
                command,
                cwd=self.root,
                capture_output=True,
                text=True,
                timeout=self.start_timeout,
                **self._run_kwargs(),
            )
        finally:
            pwfile.unlink(missing_ok=True)
        if done.returncode != 0:
            raise PostgresStartError(f"initdb failed: {done.stderr.strip()[-800:]}")

    def _settings(self) -> dict[str, str]:
        """Loopback TCP only (no Unix socket), small memory, fsync as asked."""
        return {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": "",
            "fsync": "on" if self.fsync else "off",
            "shared_buffers": "32MB",
            "max_connections": "40",
        }

    def _command(self) -> list[str]:
        command = [str(self.bindir / "postgres"), "-D", str(self.data_dir), "-p", str(self.port)]
        for key, value in self._settings().items():
            command += ["-c", f"{key}={value}"]
        return command

    def start(self) -> PostgresServer:
        """Start the server (running ``initdb`` first if the data directory is new).

        If the free port picked at creation was taken in the meantime (another
        program bound it first), the first start moves to another free port.
        """
        if self.running:
            return self
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        for attempt in range(3):
            self._launch()
            try:
                self._wait_ready()
                break
            except PostgresStartError:
                if not (self._may_move and attempt < 2 and "could not bind" in self.log_tail()):
                    raise
                self.port = free_port()
        self._may_move = False  # from now on clients hold URLs with this port
        return self

    def _launch(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self._command(),
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # Ctrl-C in a terminal reaches us, not the server
                **self._run_kwargs(),
            )
        atexit.unregister(self.close)
        atexit.register(self.close)  # an interpreter that exits without close() cleans up too

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise PostgresStartError(f"postgres exited at start: {self.log_tail()}")
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise PostgresStartError(
                        f"postgres not ready after {self.start_timeout:.0f} s: {self.log_tail()}"
                    ) from None
                time.sleep(0.1)

    def log_tail(self, chars: int = 800) -> str:
        """The end of the server's log."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:].strip()
        except OSError:
            return "(no log)"

    @property
    def running(self) -> bool:
        """True while the postmaster process is alive."""
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown (SIGINT: roll back open transactions, write a checkpoint), then wait.

        Escalates to an immediate shutdown and then SIGKILL if it hangs.
        """
        if self.process is None:
            return
        # Backends call setsid and would outlive a killed postmaster as orphans:
        # note them all now, so leftover_processes() can tell if any survived.
        self._known |= process_tree(self.process.pid)
        for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGKILL):
            if self.process.poll() is not None:
                break
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                continue
        self.process = None
        deadline = time.monotonic() + timeout
        while self.leftover_processes() and time.monotonic() < deadline:
            time.sleep(0.05)

    def restart(self) -> None:
        """Stop, then start again on the same data directory and port."""
        self.stop()
        self.start()

    def leftover_processes(self) -> list[int]:
        """Processes of this server still alive (empty once :meth:`stop` returned)."""
        if self.process is not None:
            self._known |= process_tree(self.process.pid)
        return still_alive(self._known)

    def close(self) -> None:
        """Stop the server and delete its data directory."""
        atexit.unregister(self.close)
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    """Start a throwaway server until Ctrl-C; its URL (with the password) goes to a 0600 file."""
    parser = argparse.ArgumentParser(
        prog="python -m agentstate.servers.postgres", description=main.__doc__
    )
    parser.add_argument("--port", type=int, default=None, help="TCP port (default: a free one)")
    args = parser.parse_args(argv)
    if args.port is not None and not 1 <= args.port <= 65535:
        print(f"error: --port must be 1..65535, got {args.port}", file=sys.stderr)
        return 2
    try:
        with PostgresServer(port=args.port) as server:
            url_file = server.root / "url"
            url_file.touch(mode=0o600)
            url_file.write_text(server.url + "\n")
            print(f"postgres on 127.0.0.1:{server.port}; URL in {url_file}; Ctrl-C stops it")
            if serve_until_interrupted(lambda: server.running):
                return 0
            print(f"error: postgres stopped: {server.log_tail(200)}", file=sys.stderr)
            return 1
    except (PostgresNotInstalledError, PostgresStartError, OSError) as error:
        print(f"error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C while it was still starting: stopped and removed
        return 0


if __name__ == "__main__":
    sys.exit(main())
