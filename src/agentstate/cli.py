"""The ``agentstate`` command: one subcommand per system.

Each system registers its own subcommands from ``agentstate.<system>.cli``
(``register(subparsers)``), so this file never grows with them. The systems it
runs are taught in notebooks 05 (experts, engine) and 06 (memory); ``doctor``
checks an agent for the hazards of notebooks 01-06.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from agentstate._extras import MissingExtraError

SYSTEMS = ("experts", "engine", "memory", "doctor")
# a system whose CLI is not ``agentstate.<system>.cli``: the memory command belongs to its service
CLI_MODULES = {"memory": "agentstate.memory.service.cli"}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every system's subcommands (or only those of ``only``).

    Only the named system's CLI module is imported when one is named: the
    experts' imports a model stack that takes seconds to load, which
    ``agentstate memory serve`` (or its one-line errors) should not wait for.
    """
    parser = argparse.ArgumentParser(prog="agentstate", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="system", required=True)
    for system in SYSTEMS if only is None else (only,):
        try:
            name = CLI_MODULES.get(system, f"agentstate.{system}.cli")
            module = importlib.import_module(name)
        except MissingExtraError as exc:
            _needs_extra(sub, system, exc)
            continue
        except ModuleNotFoundError as exc:
            if exc.name != f"agentstate.{system}" and exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def _needs_extra(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], system: str, exc: MissingExtraError
) -> None:
    """List ``system`` in ``--help`` as needing its extra; running it says so in one line."""
    stub = sub.add_parser(system, help=f"(needs the {exc.extra!r} extra)", add_help=False)
    stub.add_argument("words", nargs=argparse.REMAINDER)

    def refuse(args: argparse.Namespace) -> int:
        print(f"agentstate {system}: error: {exc}", file=sys.stderr)
        return 2

    stub.set_defaults(func=refuse)


def main(argv: list[str] | None = None) -> int:
    """Run the ``agentstate`` command; the exit code of the subcommand."""
    words = sys.argv[1:] if argv is None else argv
    only = words[0] if words and words[0] in SYSTEMS else None
    args = build_parser(only).parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
