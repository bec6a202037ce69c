"""``agentstate memory serve --db PATH``: start the memory MCP server (notebook 06).

The options and their checks are in :mod:`.options` (shared with ``python -m
agentstate.memory.service.server``); this module only adds the ``memory serve``
subcommand to the ``agentstate`` command and, when it runs, imports the server
after the checks pass, so a mistake is reported before the slow MCP import.
"""

from __future__ import annotations

import argparse
import sys

from agentstate.memory.service.options import OneLineParser, add_serve_arguments, preflight


def _serve(args: argparse.Namespace) -> int:
    preflight(args, args.error)
    # see memory/service/server.py: ~3 s saved; a None entry makes that import fail, on purpose
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    from agentstate.memory.service.server import run

    return run(args, args.error)


def register(subparsers) -> None:
    """Add ``memory serve`` to the ``agentstate`` command."""
    memory = subparsers.add_parser("memory", help="the MCP memory server of lesson 06")
    sub = memory.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    serve = sub.add_parser("serve", help="run the server (stdio by default)")
    add_serve_arguments(serve)
    serve.set_defaults(func=_serve, error=serve.error)
