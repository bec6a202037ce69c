"""``agentstate memory serve --db PATH``: start the memory MCP server (notebook 06)."""

from __future__ import annotations

import argparse


def _serve(args: argparse.Namespace) -> int:
    import sys

    sys.modules.setdefault("rfc3987_syntax", None)  # see agentstate.memory.server: ~3 s saved
    from agentstate.memory.server import main

    return main(
        [
            "--db",
            args.db,
            "--transport",
            args.transport,
            "--port",
            str(args.port),
            "--write-delay",
            str(args.write_delay),
        ]
    )


def register(subparsers) -> None:
    memory = subparsers.add_parser("memory", help="the MCP memory server of stage 06")
    sub = memory.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the server (stdio by default)")
    serve.add_argument("--db", required=True, help="SQLite file (created if missing)")
    serve.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (the client starts the server) or streamable HTTP",
    )
    serve.add_argument(
        "--port", type=int, default=8765, help="HTTP port, bound to 127.0.0.1 only (default 8765)"
    )
    serve.add_argument("--write-delay", type=float, default=0.0, help=argparse.SUPPRESS)
    serve.set_defaults(func=_serve)
