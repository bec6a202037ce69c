"""The agentstate command: one subcommand per system.

Each system registers its own subcommands from its CLI module
(``register(subparsers)``, :data:`SYSTEMS` names it), imported only when the
system is named on the command line: ``agentstate --help`` and ``agentstate
--version`` import none of them, so they answer at once (the experts' model
stack alone takes seconds to import). The listing says which extra a system
needs when that extra is missing, found with ``importlib.util.find_spec``
(nothing imported). The systems it runs are taught in notebooks 05 (experts,
engine) and 06 (memory); ``doctor`` checks an agent for the hazards of
notebooks 01-06, and ``hazards`` runs each hazard's reproduction against the
libraries installed (docs/hazards-by-version.md).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from dataclasses import dataclass

from agentstate import __version__
from agentstate._extras import DIST, MissingExtraError, missing


@dataclass(frozen=True)
class System:
    """A subcommand as ``agentstate --help`` lists it, without importing it."""

    name: str
    module: str
    """Its CLI module, with ``register(subparsers)``."""
    help: str
    """The help line its module registers (tests/test_cli.py checks that the two agree)."""
    extra: str | None = None
    """The extra it needs beyond the core (None: the core has all it needs)."""


SYSTEMS = (
    System("experts", "agentstate.experts.cli", "prefix-cached experts (lesson 05)", "experts"),
    System("engine", "agentstate.engine.cli", "the local llama.cpp server (lesson 05)", "engine"),
    System(
        "memory", "agentstate.memory.service.cli", "the MCP memory server of lesson 06", "memory"
    ),
    System(
        "doctor",
        "agentstate.doctor.report.cli",
        "the series' state hazards in an agent graph (lessons 01-06)",
    ),
    System(
        "hazards",
        "agentstate.hazards.cli",
        "which of the series' hazards live in the libraries installed here (lessons 01-06)",
    ),
)
NAMES = tuple(system.name for system in SYSTEMS)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentstate", description=__doc__.splitlines()[0], epilog=f"{DIST} {__version__}"
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def help_line(system: System) -> str:
    """``system``'s line in ``agentstate --help``, naming its extra when that is missing."""
    if system.extra and missing(system.extra):
        return f"(needs the {system.extra!r} extra) {system.help}"
    return system.help


def listing_parser() -> argparse.ArgumentParser:
    """``agentstate`` with no system named: ``--help`` and ``--version``, nothing imported."""
    parser = _parser()
    sub = parser.add_subparsers(dest="system", required=True, metavar="{" + ",".join(NAMES) + "}")
    for system in SYSTEMS:
        stub = sub.add_parser(system.name, help=help_line(system), add_help=False)
        stub.add_argument("words", nargs=argparse.REMAINDER)
    return parser


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every system's subcommands (or only those of ``only``).

    Only the named system's CLI module is imported when one is named: the
    experts' imports a model stack that takes seconds to load, which
    ``agentstate memory serve`` (or its one-line errors) should not wait for.
    """
    parser = _parser()
    # every system in the usage line, even when only one is registered (a usage error names them)
    sub = parser.add_subparsers(dest="system", required=True, metavar="{" + ",".join(NAMES) + "}")
    for system in SYSTEMS:
        if only is not None and system.name != only:
            continue
        try:
            module = importlib.import_module(system.module)
        except MissingExtraError as exc:
            _needs_extra(sub, system.name, exc)
            continue
        except ModuleNotFoundError as exc:
            if exc.name != f"agentstate.{system.name}" and exc.name != system.module:
                raise
            continue
        module.register(sub)
    return parser


def _needs_extra(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], system: str, exc: MissingExtraError
) -> None:
    """List ``system`` as needing its extra; running it says so in one line."""
    stub = sub.add_parser(system, help=f"(needs the {exc.extra!r} extra)", add_help=False)
    stub.add_argument("words", nargs=argparse.REMAINDER)

    def refuse(args: argparse.Namespace) -> int:
        print(f"agentstate {system}: error: {exc}", file=sys.stderr)
        return 2

    stub.set_defaults(func=refuse)


def _subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of subcommand ``name`` (its usage line names its own options)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            found: argparse.ArgumentParser = action.choices[name]
            return found
    return parser


def _main(words: list[str]) -> int:
    only = words[0] if words and words[0] in NAMES else None
    parser = build_parser(only) if only else listing_parser()
    args, extra = parser.parse_known_args(words)
    if extra:  # the subcommand's usage line and error, as `agentstate doctor --help` shows it
        _subcommand(parser, args.system).error(f"unrecognized arguments: {' '.join(extra)}")
    return int(args.func(args) or 0)


def main(argv: list[str] | None = None) -> int:
    """Run the ``agentstate`` command; the exit code of the subcommand.

    A reader that closes the pipe early (``agentstate hazards --json | head -c1``)
    ends the command quietly, as the Python docs' recipe for ``SIGPIPE`` does:
    stdout pointed at ``/dev/null`` so the interpreter's last flush cannot raise.
    """
    words = sys.argv[1:] if argv is None else argv
    try:
        status = _main(words)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
