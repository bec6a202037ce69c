"""One way to run a real server process on 127.0.0.1: free port, readiness, clean stop.

Lesson 05's llama.cpp engine (:class:`agentstate.engine.EngineServer`) and
lesson 06's memory server (:class:`agentstate.memory.service.process.ServerProcess`)
are both child processes listening on loopback that notebooks, tests and
benchmarks start and stop. They share this helper so that they pick ports,
report a failed start and leave nothing behind in the same way, and so that
every failure is a :class:`LoopbackServerError` whose message says how to
start, or install, the missing piece. A client that may reach a server on
another host (the memory fleet behind proxies) asks :func:`url_open` about the
host and port its URL names (the scheme's default port when it names none),
never about 127.0.0.1. Taught in notebooks 05 and 06.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Self
from urllib.parse import urlsplit

HOST = "127.0.0.1"
# A log line that names a failure: "ValueError: ...", "ERROR: ...", "error: ...", "[Errno 98]".
_ERROR_LINE = re.compile(r"(error|exception|errno|fatal|failed)\b", re.IGNORECASE)


class LoopbackServerError(RuntimeError):
    """A loopback server is missing, did not start, or its port is taken; says what to do."""


class _PortTaken(Exception):
    """Our child exited while another process answered on its port."""


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def port_open(port: int, timeout: float = 0.2) -> bool:
    """True when something accepts TCP connections on 127.0.0.1:``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        return sock.connect_ex((HOST, port)) == 0


DEFAULT_PORTS = {"http": 80, "https": 443}


def url_endpoint(url: str) -> tuple[str, int]:
    """The (host, port) a client connects to for an ``http://`` or ``https://`` URL.

    The URL's own host, and its port or the scheme's default (http 80, https
    443): ``https://memory.example/mcp`` is ``("memory.example", 443)``.
    ``ValueError`` (one line) for another scheme, no host or a port that is not
    a number from 1 to 65535.
    """
    parts = urlsplit(url)
    shown = repr(parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl())  # no user:pw
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ValueError(f"{shown} is not an http:// or https:// URL")
    if not parts.hostname:
        raise ValueError(f"{shown} names no host")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{shown}: the port is not a number from 1 to 65535") from None
    return parts.hostname, port or DEFAULT_PORTS[scheme]


def url_open(url: str, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections at the host and port ``url`` names."""
    host, port = url_endpoint(url)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError:
        return False
    return True


async def url_open_async(url: str, timeout: float = 0.5) -> bool:
    """:func:`url_open` without blocking the event loop (name lookup included)."""
    host, port = url_endpoint(url)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError):
        return False
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return True


def _listening_inode(port: int) -> str | None:
    """The socket inode listening on 127.0.0.1:``port`` (from ``/proc/net/tcp``), if any."""
    local = f"0100007F:{port:04X}"
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if fields[1] == local and fields[3] == "0A":  # 0A: LISTEN
                return fields[9]
    return None


def _stat(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat``'s fields after the command name (state, ppid, ...); None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()


def _family(pid: int) -> set[int]:
    """``pid`` and every process descended from it (from each process's ``/proc/<n>/stat``)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            parents[int(entry.name)] = int(fields[1])
    family, grew = {pid}, True
    while grew:
        born = {child for child, parent in parents.items() if parent in family} - family
        family |= born
        grew = bool(born)
    return family


def _holds(pid: int, held: str) -> bool:
    try:
        return any(os.readlink(fd) == held for fd in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:  # it exited, or its descriptors are not ours to read
        return False


def listens_on(pid: int, port: int) -> bool:
    """True when process ``pid`` (or a process it started) holds the socket listening on
    127.0.0.1:``port``.

    Another process may answer on a port a moment after :func:`free_port` found
    it free (two test workers, two notebooks): readiness must be the child's own
    socket, not whoever answers; a child that is a wrapper (a shell, a launcher)
    counts its descendants' sockets. Read from ``/proc``; where it cannot be read
    (not Linux), True, and readiness falls back to "the port answers".
    """
    try:
        inode = _listening_inode(port)
    except OSError:
        return True
    if inode is None:
        return False
    held = f"socket:[{inode}]"
    return _holds(pid, held) or any(_holds(p, held) for p in _family(pid) - {pid})


def valid_port(port: int) -> int:
    """``port`` if it is an integer TCP port (1-65535), else a clear error."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise LoopbackServerError(f"port must be an integer between 1 and 65535, got {port!r}")
    return port


def port_argument(text: str) -> int:
    """An argparse type: a TCP port 1-65535 (argparse makes the error one line, exit 2)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (1-65535)")
    return port


def check_port(port: int) -> int:
    """``port`` if it is a valid TCP port that is free on 127.0.0.1, else a clear error."""
    if port_open(valid_port(port)):
        raise LoopbackServerError(
            f"port {port} on {HOST} is already in use; choose another port, or omit it "
            "to get a free one"
        )
    return port


def _zombie(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] == "Z"


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs; an exited child of ours is reaped, so its pid is gone after.

    For our own child only ``waitpid`` decides: a multi-threaded server whose
    main thread has exited shows "Z" in ``/proc`` while its other threads are
    still shutting down, and ``waitpid`` reports it only once all are gone.
    For another process's child, "Z" means it has exited (its parent reaps it).
    """
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child (or already reaped)
    else:
        return waited != pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def wait_gone(pid: int, timeout: float) -> bool:
    """Wait until ``pid`` has exited (reaped, if it is our child); False on timeout."""
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _signal(pids: set[int], sig: int) -> None:
    """Send ``sig`` to each of ``pids`` that still exists."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):  # gone, or no longer one of ours
            pass


def serve_until_interrupted(running: Callable[[], bool], poll: float = 0.5) -> bool:
    """Block while ``running()`` is true; True if Ctrl-C or SIGTERM ended the wait.

    The signals only set a flag. A ``KeyboardInterrupt`` raised inside
    ``Popen.poll()`` can leave the ``Popen``'s lock held, and every later
    ``poll()`` and ``wait()`` would see the server as running until their
    timeouts ran out: a Ctrl-C that takes a minute to stop anything.
    """
    stop = threading.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    before = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in signals}
    try:
        while running() and not stop.wait(poll):
            pass
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    return stop.is_set()


class LoopbackProcess:
    """A server child process on 127.0.0.1:``port``; a context manager that stops it.

    Subclasses give :meth:`command`, a ``name`` for messages and a ``hint``
    saying how to install or start the piece (``slug`` names its default log
    file in the temporary directory, ``log_mode`` says whether a restart appends
    to it); :meth:`ready` defaults to "the port accepts connections", and
    ``start`` also requires the child's own socket on the port (another server
    answering there while ours dies is not a start).
    """

    name = "server"
    hint = ""
    slug = "server"
    log_mode = "ab"

    def __init__(self, *, port: int | None = None, log_path: str | Path | None = None):
        self.chosen_port = port is not None  # the caller's port: never swapped for another
        self.port = valid_port(port) if port is not None else free_port()
        default_log = Path(tempfile.gettempdir(), f"agentstate-{self.slug}-{self.port}.log")
        self.log_path = Path(log_path) if log_path else default_log
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> Sequence[str]:
        """The argv of the server process."""
        raise NotImplementedError

    def environment(self) -> Mapping[str, str] | None:
        """The child's environment (None: inherit ours)."""
        return None

    def ready(self) -> bool:
        """True once the server answers (default: its port accepts connections)."""
        return port_open(self.port)

    @property
    def running(self) -> bool:
        """True while the child process we started is alive."""
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        """The child's pid (None before ``start``)."""
        return self.process.pid if self.process is not None else None

    def error(self, what: str) -> LoopbackServerError:
        """One line: what happened, the cause the server logged, where the log is, the hint."""
        hint = f"; {self.hint}" if self.hint else ""
        return LoopbackServerError(
            f"{self.name} {what}: {self.log_cause()} (full log: {self.log_path}){hint}"
        )

    def start(self, timeout: float = 90.0, *, detach: bool = False) -> Self:
        """Launch the process and wait until it is ready; ``detach`` outlives this process.

        Ready means the child answers on its own socket: a port another process
        took after :func:`free_port` chose it is not ours. When the port was
        chosen here (no ``port=`` given) and someone else took it, a new free
        port is tried, up to three times; a port the caller chose is refused.
        """
        for attempt in range(3):
            try:
                return self._start_once(timeout, detach=detach)
            except _PortTaken:
                if self.chosen_port or attempt == 2:
                    raise self.error(f"lost port {self.port} to another process") from None
                self.port = free_port()
        raise AssertionError("unreachable")

    def _start_once(self, timeout: float, *, detach: bool) -> Self:
        if self.running:
            return self
        if not self.chosen_port and port_open(self.port):
            raise _PortTaken
        check_port(self.port)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, self.log_mode) as log:
            self.process = subprocess.Popen(
                list(self.command()), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env=self.environment(), start_new_session=detach,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                code = self.process.returncode
                self.process = None
                if port_open(self.port):  # someone else answers there: the port was taken
                    raise _PortTaken
                raise self.error(f"exited with code {code} on port {self.port}")
            if self.ready() and listens_on(self.process.pid, self.port):
                if self.process.poll() is None:
                    return self
                continue  # it answered, then died: report the exit above
            if time.monotonic() > deadline:
                self.stop()
                raise self.error(f"did not answer on port {self.port} within {timeout:.0f} s")
            time.sleep(0.05)

    def _descendants(self) -> set[int]:
        """What the child started (a wrapper's server): read before the child ends and they
        are handed to init, so that stopping the child leaves none of them listening."""
        if self.process is None or self.process.poll() is not None:
            return set()
        return _family(self.process.pid) - {self.process.pid}

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM the child and what it started, wait, SIGKILL what lingers; always reaped.

        Returns the child's exit code.
        """
        if self.process is None:
            return None
        if self.process.poll() is None:
            descendants = self._descendants()
            deadline = time.monotonic() + timeout
            self.process.terminate()
            _signal(descendants, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            lingering = {p for p in descendants if not wait_gone(p, deadline - time.monotonic())}
            _signal(lingering, signal.SIGKILL)
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL the child and what it started, no shutdown: what a crash looks like (reaped)."""
        if self.process is not None and self.process.poll() is None:
            _signal(self._descendants(), signal.SIGKILL)
            self.process.kill()
            self.process.wait()

    def log_cause(self) -> str:
        """The line of the log that says why the server stopped, as far as a line can.

        The last line naming an error (a Python traceback ends with the
        exception; uvicorn logs ``ERROR: [Errno 98] ...`` and then its shutdown
        notes), else the last line; "it wrote nothing" for an empty log.
        """
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "its log could not be read"
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        errors = [line for line in lines if _ERROR_LINE.search(line)]
        return (errors or lines or ["it wrote nothing"])[-1]

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
