"""``agentstate doctor TARGET``: the series' hazards in an agent, from the command line.

``TARGET`` is what ``langgraph.json`` lists, loaded as ``langgraph dev`` loads
it (:mod:`.loading`): ``module:attr`` or ``path/to/file.py:attr`` (a compiled
graph, or a factory that builds one), or a ``langgraph.json`` itself (every
graph it lists). ``--format`` prints a table (``text``), ``json``, ``github``
annotations or ``sarif`` for code scanning (:mod:`.output`, :mod:`.sarif`),
each finding at the file and line of its tool or node. Exit status 1 when a
finding is an error and for nothing else, 0 when none is, 2 with one line on
stderr when a target cannot be loaded (or the doctor fails on it). Nothing
heavy is imported until a target is, so ``agentstate doctor --help`` and most
one-line errors are quick. The hazards are taught in notebooks 01-06.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agentstate.doctor import loading
from agentstate.doctor.loading import Loaded, Target, TargetError, describe, load

if TYPE_CHECKING:
    from agentstate.doctor.graph_facts import Graph
    from agentstate.doctor.output import Diagnosed

FORMATS = ("text", "json", "github", "sarif")


def targets(spec: str) -> list[tuple[str, str, Path]]:
    """(name, target, base directory) for a target, or for every graph of a langgraph.json."""
    return [(t.name, t.spec, t.base) for t in loading.targets(spec)]


def load_target(spec: str, base: Path | None = None) -> Graph:
    """The compiled graph ``spec`` names, its paths relative to ``base`` (default: cwd)."""
    base = Path.cwd() if base is None else base
    return load(Target(spec, spec, base, (base,))).graph


def printable(text: str) -> str:
    """``text`` with control characters (a NUL, a newline) escaped: an error stays one line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _diagnose(loaded: Loaded) -> Diagnosed:
    from agentstate.doctor.diagnosis import diagnose
    from agentstate.doctor.output import Diagnosed

    try:
        report = diagnose(loaded.graph, loaded.target.name)
    except Exception as exc:
        raise TargetError(
            f"{loaded.target.label}: the doctor failed on it (a bug, please report it): "
            f"{describe(exc)}"
        ) from None
    return Diagnosed(report, loaded.file, loaded.line)


def render(fmt: str, diagnosed: Sequence[Diagnosed], docs_url: str | None = None) -> str:
    """The reports in ``fmt``: text, json, github or sarif."""
    from agentstate.doctor import output

    if fmt == "json":
        return output.json_text(diagnosed)
    if fmt == "github":
        return output.github(diagnosed)
    if fmt == "sarif":
        from agentstate.doctor.sarif import sarif_log

        return json.dumps(sarif_log(diagnosed, docs=docs_url), indent=2)
    return output.text(diagnosed)


def run(args: argparse.Namespace) -> int:
    """Diagnose every target and print the reports: 1 if any error, 2 for anything that failed.

    What a target prints while it is imported or built goes to stderr, so the
    report on stdout stays valid JSON or SARIF. Status 1 means an error finding
    and nothing else: whatever else goes wrong is one line and status 2.
    """
    fmt = "json" if args.json else args.format
    try:
        with contextlib.redirect_stdout(sys.stderr):
            planned = [t for spec in args.target for t in loading.targets(spec)]
            diagnosed = [_diagnose(load(t)) for t in planned]
        shown = render(fmt, diagnosed, args.docs_url)
    except TargetError as exc:
        return _fail(str(exc))
    except Exception as exc:
        return _fail(f"the doctor failed (a bug, please report it): {describe(exc)}")
    try:
        if shown:
            print(shown, flush=True)
    except BrokenPipeError:  # `agentstate doctor ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    # what could not be checked here: once, beside the output, never inside it
    for note in dict.fromkeys(n for d in diagnosed for n in d.report.notes):
        print(f"agentstate doctor: note: {printable(note)}", file=sys.stderr)
    return 1 if any(d.report.errors for d in diagnosed) else 0


def _fail(message: str) -> int:
    print(f"agentstate doctor: error: {printable(message)}", file=sys.stderr)
    return 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``doctor`` to the ``agentstate`` command."""
    parser = subparsers.add_parser(
        "doctor",
        help="the series' state hazards in an agent graph (stages 01-06)",
        description="Find the series' state hazards in compiled agent graphs, without running "
        "them. Exit status 1 when a finding is an error, 0 when none is, 2 (one line on stderr) "
        "when a target cannot be loaded.",
        epilog="One page per finding code, with the failing and the fixed agent: "
        "agentstate doctor --explain CODE",
    )
    parser.add_argument(
        "target",
        nargs="+",
        help="module:attr, path/to/file.py:attr (a graph or a function returning one), "
        "or langgraph.json",
    )
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text (default), json, github (annotations for a CI run) or sarif "
        "(SARIF 2.1.0 for code scanning)",
    )
    parser.add_argument(
        "--docs-url",
        metavar="URL",
        default=None,
        help="the base URL of the doctor's code pages, for SARIF's helpUri "
        "(default: this checkout's pages)",
    )
    parser.set_defaults(func=run)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agentstate.doctor.cli``: the same command on its own."""
    parser = argparse.ArgumentParser(prog="agentstate")
    register(parser.add_subparsers(dest="system", required=True))
    args = parser.parse_args(["doctor", *(sys.argv[1:] if argv is None else argv)])
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
