"""The memory server's options, checked once for both entry points (notebook 06).

``agentstate memory serve`` (:mod:`.cli`) and ``python -m
agentstate.memory.service.server`` define and check their options here, so both
refuse a bad ``--db`` or ``--port`` the same way: one line and exit status 2,
never a traceback. This module stays light (no MCP import) so ``agentstate
--help`` is quick, and :func:`preflight` refuses a busy port, a bad ``--db`` or
an unusable token before the MCP server is imported (well under a second
instead of a full server start). The token comes from
``AGENTSTATE_MEMORY_TOKEN`` or ``--token-file``, never from an argument: every
local user can read a process's arguments in ``/proc/<pid>/cmdline``. The
client uses :func:`start_hint` to say how to start a server when none answers.
The limits on what a stranger may send before the token is checked
(``--max-header-bytes``, ``--max-request-bytes``, ``--max-connections``,
``--idle-timeout``) are defined here and applied by :mod:`.limits`. Both the
CLI and the server import this module and neither imports the other at module
level, so there is no import cycle.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import NoReturn

from agentstate._extras import require
from agentstate.memory.service.targets import check_postgres_url, is_postgres, redact
from agentstate.private_files import NotOwnFileError, read_small_file
from agentstate.servers.loopback import HOST, port_argument, url_endpoint

TOKEN_ENV = "AGENTSTATE_MEMORY_TOKEN"
WRITE_DELAY_ENV = "AGENTSTATE_MEMORY_WRITE_DELAY"  # a slow writer for tests (resolve_write_delay)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit status 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        """Print ``<prog>: error: <message>`` and exit 2."""
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def add_serve_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The server's options: --db, --transport, --port, --token-file (and a hidden --write-delay).

    ``--token`` is still parsed, only to refuse it with the reason (see :func:`resolve_token`).
    """
    parser.add_argument(
        "--db",
        required=True,
        help="SQLite file (created 0600 if missing), or postgresql://USER@HOST:PORT/DB (or libpq "
        "key=value pairs) for one replica of a fleet sharing that database (password from "
        "PGPASSWORD or ~/.pgpass; one written in --db is refused)",
    )
    parser.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (the client starts the server) or streamable HTTP",
    )
    parser.add_argument(
        "--port",
        type=port_argument,
        default=8765,
        help="HTTP port, bound to 127.0.0.1 only (default 8765)",
    )
    parser.add_argument(
        "--token-file",
        default=None,
        metavar="PATH",
        help=f"HTTP only: require 'Authorization: Bearer TOKEN', the token read from PATH "
        f"(default: ${TOKEN_ENV}); without a token any local process can read and write "
        "the memories",
    )
    parser.add_argument("--token", default=None, help=argparse.SUPPRESS)  # refused: see above
    # limits on what any local process may send before its token is checked (.limits)
    parser.add_argument(
        "--max-header-bytes",
        type=_bounded(int, 1024, 1 << 20),
        default=16 * 1024,
        metavar="N",
        help="HTTP only: a request head larger than N bytes gets 400 and is closed (16384)",
    )
    parser.add_argument(
        "--max-request-bytes",
        type=_bounded(int, 1024, 1 << 30),
        default=4 * 1024 * 1024,
        metavar="N",
        help="HTTP only: a request body larger than N bytes gets 413 (4194304)",
    )
    parser.add_argument(
        "--max-connections",
        type=_bounded(int, 2, 10_000),
        default=256,
        metavar="N",
        help="HTTP only: past N open connections the oldest idle one is closed (256)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=_bounded(float, 0.1, 3600),
        default=10.0,
        metavar="SECONDS",
        help="HTTP only: a connection that sends no complete request head within SECONDS "
        "of opening (or of its last reply) is closed (10)",
    )
    parser.add_argument(
        "--write-delay",
        type=_bounded(float, 0, 3600),
        default=None,  # then $AGENTSTATE_MEMORY_WRITE_DELAY, else 0 (resolve_write_delay)
        help=argparse.SUPPRESS,  # seconds the writer waits before each queued write (tests)
    )
    parser.add_argument(
        "--db-retry-for",
        type=float,
        default=10.0,
        help=argparse.SUPPRESS,  # Postgres: seconds a call waits for the database (tests)
    )
    return parser


def _bounded(kind: type, low: float, high: float):
    """An argparse type: a ``kind`` (int or float) from ``low`` to ``high``, else one line."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not low <= value <= high:  # also refuses nan
            raise argparse.ArgumentTypeError(f"{text} is not between {low:g} and {high:g}")
        return value

    return parse


def port_of(url: str) -> int:
    """The port of a server URL: its own, or the scheme's default (``https://host/mcp``: 443)."""
    return url_endpoint(url)[1]


def start_hint(url: str) -> str:
    """What to run when nothing answers at ``url`` (the command only for a loopback URL)."""
    try:
        host, port = url_endpoint(url)
    except ValueError as exc:
        return f"no memory server answers at {url} ({exc})"
    if host not in (HOST, "localhost"):
        return f"no memory server answers at {url}; check that the server at {host}:{port} runs"
    return (
        f"no memory server answers at {url}; start one with "
        f"`agentstate memory serve --db memory.sqlite --transport http --port {port}`"
    )


def port_free(port: int) -> bool:
    """True if ``127.0.0.1:port`` can be bound now."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def resolve_write_delay(given: float | None, error, environ=None) -> float:
    """``--write-delay``, else ``$AGENTSTATE_MEMORY_WRITE_DELAY``, else 0 seconds.

    A test knob: with a slow writer, a test that reads the store's tables without
    ``await_consistency`` fails every time instead of by chance
    (``scripts/flake_hunt.py --slow-writer``). A bad value is refused via ``error``.
    """
    env = os.environ if environ is None else environ
    if given is not None:
        return given
    raw = env.get(WRITE_DELAY_ENV, "").strip()
    if not raw:
        return 0.0
    try:
        value: float = _bounded(float, 0, 3600)(raw)
    except argparse.ArgumentTypeError as exc:
        error(f"${WRITE_DELAY_ENV}: {exc}")
        raise  # error exits; kept for a caller whose error returns
    return value


def resolve_token(args: argparse.Namespace, error, environ=None) -> str | None:
    """The bearer token from ``--token-file`` or ``$AGENTSTATE_MEMORY_TOKEN``, or None.

    Refused via ``error`` (one line, exit 2): ``--token`` (an argument is
    readable by every local user in ``/proc/<pid>/cmdline``), a token file that
    cannot be read or is not a regular file of at most 4096 bytes (a FIFO, a
    device such as ``/dev/zero`` or a symlink is refused before it is opened:
    see :mod:`agentstate.private_files`), and an empty token (it would start a server open to every
    local process while its operator believes it is protected). The token is
    never printed.
    """
    env = os.environ if environ is None else environ
    if args.token is not None:
        error(
            "--token is refused: a command-line argument is readable by every local user "
            f"(/proc/<pid>/cmdline); set {TOKEN_ENV} or pass --token-file PATH"
        )
    if args.token_file is not None:
        try:
            token = read_small_file(args.token_file, what="the token file").decode().strip()
        except NotOwnFileError as exc:  # a FIFO, a device, a symlink, too large: never read
            error(f"--token-file: {exc}")
        except (OSError, UnicodeDecodeError) as exc:
            error(f"--token-file {args.token_file}: cannot read it ({type(exc).__name__})")
        if not token:
            error(f"--token-file {args.token_file}: the file is empty; put the token in it")
        source = f"--token-file {args.token_file}"
    elif TOKEN_ENV in env:
        token, source = env[TOKEN_ENV].strip(), f"${TOKEN_ENV}"
        if not token:
            error(f"{source} is set but empty; set a token, or unset it to serve without one")
    else:
        return None
    problem = token_problem(token)
    if problem:
        error(f"{source}: {problem}")
    return token


def token_problem(token: str) -> str | None:
    """Why ``token`` cannot be a bearer token, or None: it must be visible ASCII, one word.

    An HTTP header carries ASCII (RFC 9110 field values; RFC 6750's ``b64token``
    is stricter still): a token with ``é`` or a space would start a server its
    client cannot reach (httpx cannot encode the header, and the client would
    report no server at all). The message never quotes the token.
    """
    if any(not "!" <= c <= "~" for c in token):
        return (
            "the token must be one word of visible ASCII characters (what an HTTP header "
            "carries: letters, digits and punctuation, no spaces, no accented letters)"
        )
    return None


def preflight(args: argparse.Namespace, error) -> None:
    """Refuse a busy ``--port``, an unusable ``--db`` or token via ``error`` (one line, exit 2).

    Creates nothing: the store's own checks, run again when it opens, are the
    authority; this only makes the common mistakes fail before the heavy import.
    Sets ``args.token`` to the resolved token (:func:`resolve_token`).
    """
    from agentstate.memory.service.store import MemoryInputError, check_store_path

    args.token = resolve_token(args, error)
    args.write_delay = resolve_write_delay(args.write_delay, error)
    if args.transport == "http" and not port_free(args.port):
        error(f"--port {args.port}: {HOST}:{args.port} is already in use")
    if is_postgres(args.db):
        try:
            require("memory", "the memory server on Postgres")  # psycopg parses the string
            check_postgres_url(args.db)
        except ValueError as exc:  # a password anywhere in it, no database named, unparsable
            error(f"--db {exc}")
        except ImportError as exc:  # psycopg missing: which extra installs it
            error(f"--db {redact(args.db)}: {exc}")
        return
    try:
        check_store_path(args.db)
    except MemoryInputError as exc:
        error(f"--db {args.db}: {exc}")
