"""``agentstate memory serve --db PATH``: start the memory MCP server (notebook 06).

The options are defined here once and used by ``python -m
agentstate.memory.server`` too, so both check them the same way: a bad
``--db`` or ``--port`` ends in one line and exit status 2, never a traceback.
This module stays light (no MCP import) so ``agentstate --help`` is quick,
and :func:`preflight` refuses a busy port or a bad ``--db`` before the MCP
server is imported (well under a second instead of a full server start).
"""

from __future__ import annotations

import argparse
import socket
import sys

TOKEN_ENV = "AGENTSTATE_MEMORY_TOKEN"
HOST = "127.0.0.1"


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit status 2 (no usage dump)."""

    def error(self, message: str):  # type: ignore[override]
        """Print ``<prog>: error: <message>`` and exit 2."""
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def port_number(text: str) -> int:
    """An argparse type: a TCP port 1-65535, or a one-line error."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (1-65535)")
    return port


def add_serve_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The server's options: --db, --transport, --port, --token (and a hidden --write-delay)."""
    parser.add_argument("--db", required=True, help="SQLite file (created 0600 if missing)")
    parser.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (the client starts the server) or streamable HTTP",
    )
    parser.add_argument(
        "--port",
        type=port_number,
        default=8765,
        help="HTTP port, bound to 127.0.0.1 only (default 8765)",
    )
    parser.add_argument(
        "--token",
        default=None,
        help=f"HTTP only: require 'Authorization: Bearer TOKEN' (default: ${TOKEN_ENV}); "
        "without a token any local process can read and write the memories",
    )
    parser.add_argument(
        "--write-delay",
        type=float,
        default=0.0,
        help=argparse.SUPPRESS,  # seconds the writer waits before each queued write (tests)
    )
    return parser


def port_of(url: str) -> int:
    """The port of a server URL such as ``http://127.0.0.1:8765/mcp``."""
    return int(url.rsplit(":", 1)[-1].split("/", 1)[0])


def start_hint(url: str) -> str:
    """What to run when nothing answers at ``url``."""
    port = port_of(url)
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


def preflight(args: argparse.Namespace, error) -> None:
    """Refuse a busy ``--port`` or an unusable ``--db`` via ``error`` (one line, exit 2).

    Creates nothing: the store's own checks, run again when it opens, are the
    authority; this only makes the common mistakes fail before the heavy import.
    """
    from agentstate.memory.store import MemoryInputError, check_store_path

    if args.transport == "http" and not port_free(args.port):
        error(f"--port {args.port}: {HOST}:{args.port} is already in use")
    try:
        check_store_path(args.db)
    except MemoryInputError as exc:
        error(f"--db {args.db}: {exc}")


def _serve(args: argparse.Namespace) -> int:
    preflight(args, args.error)
    sys.modules.setdefault("rfc3987_syntax", None)  # see agentstate.memory.server: ~3 s saved
    from agentstate.memory.server import run

    return run(args, args.error)


def register(subparsers) -> None:
    """Add ``memory serve`` to the ``agentstate`` command."""
    memory = subparsers.add_parser("memory", help="the MCP memory server of stage 06")
    sub = memory.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    serve = sub.add_parser("serve", help="run the server (stdio by default)")
    add_serve_arguments(serve)
    serve.set_defaults(func=_serve, error=serve.error)
