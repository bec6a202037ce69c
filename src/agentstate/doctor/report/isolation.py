"""What a target may do while it loads, kept away from the doctor's report.

A reader's module runs when the doctor imports it: it may print, start a
process that writes to file descriptor 1 (``subprocess.run(["echo", "hi"])``),
or never return (an endless loop, a blocking call). :func:`stdout_to_stderr`
points descriptor 1 (and ``sys.stdout``) at stderr for the whole run and hands
back a stream on the real stdout, which only the report is written to, so JSON
and SARIF stay valid whatever a target writes. :func:`time_limit` ends a load
that takes too long: ``SIGALRM`` raises :class:`LoadTimeout` in the loading
code (a ``BaseException``, so a target's ``except Exception`` does not swallow
it), and a watchdog thread ends the process with the same one line if the
target still does not return (a loop in C, a swallowed exception). Used by
:mod:`agentstate.doctor.report.cli` (notebooks 01-06's hazards).
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import TextIO

GRACE = 5.0
"""Seconds the watchdog waits after the alarm before it ends the process itself."""

PREFIX = "agentstate doctor: error: "


class LoadTimeout(BaseException):
    """A target's import or factory ran past ``--timeout``; the message is the line to print."""


def _fileno(stream: object) -> int | None:
    try:
        number = stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return None
    return number if isinstance(number, int) else None


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[TextIO]:
    """Descriptor 1 and ``sys.stdout`` sent to stderr inside; yields a stream on the real stdout.

    Where stdout has no descriptor (a test's captured ``sys.stdout``), only
    ``sys.stdout`` is redirected and the stream yielded is the original one.
    """
    real = sys.stdout
    with contextlib.suppress(Exception):
        real.flush()
    out_fd, err_fd = _fileno(real), _fileno(sys.stderr)
    err_fd = 2 if err_fd is None else err_fd
    saved: int | None = None
    if out_fd is not None:
        try:
            saved = os.dup(out_fd)
            os.dup2(err_fd, out_fd)
        except OSError:
            saved = None
    stream: TextIO = real
    if saved is not None:
        encoding = getattr(real, "encoding", None) or "utf-8"
        stream = io.TextIOWrapper(
            io.FileIO(saved, "w", closefd=False), encoding=encoding, errors="replace"
        )
    sys.stdout = sys.stderr
    try:
        yield stream
    finally:
        sys.stdout = real
        if saved is not None:
            with contextlib.suppress(Exception):
                stream.flush()
            with contextlib.suppress(OSError):
                sys.stderr.flush()
            assert out_fd is not None
            os.dup2(saved, out_fd)
            os.close(saved)


def _end_now(message: str) -> None:
    """What the watchdog does: the one line on descriptor 2, then exit status 2."""
    text = (PREFIX + message + "\n").encode("utf-8", "replace")
    with contextlib.suppress(OSError):
        os.write(2, text)
    os._exit(2)


@contextlib.contextmanager
def time_limit(seconds: float | None, message: str) -> Iterator[None]:
    """Raise :class:`LoadTimeout` (``message``) if the block runs longer than ``seconds``.

    The alarm needs the main thread of a POSIX process; elsewhere the watchdog
    alone ends the process at ``seconds``. ``None`` or ``0``: no limit.
    """
    if not seconds:
        yield
        return
    alarm = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    previous: object = None
    if alarm:

        def expire(signum: int, frame: object) -> None:
            raise LoadTimeout(message)

        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    watchdog = threading.Timer(seconds + (GRACE if alarm else 0.0), _end_now, (message,))
    watchdog.daemon = True
    watchdog.start()
    try:
        yield
    finally:
        watchdog.cancel()
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)  # type: ignore[arg-type]
