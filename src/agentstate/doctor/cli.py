"""``agentstate doctor TARGET``: the series' hazards in an agent, from the command line.

``TARGET`` is what ``langgraph.json`` lists: ``module:attr`` or
``path/to/file.py:attr`` (a compiled graph, or a function without arguments
that returns one), or a ``langgraph.json`` itself (every graph it lists).
``--json`` prints the reports as JSON, ``--format github`` as annotations a
CI shows on the pull request. Exit status 1 when a finding is an error, 0
otherwise, 2 with one line for a bad path, an import error or something that
is not a graph. This module imports nothing heavy until a target is loaded, so
``agentstate doctor --help`` and its one-line errors are quick. The hazards
are taught in notebooks 01-06.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentstate.doctor.findings import Report


class TargetError(Exception):
    """A target that cannot be loaded as a graph; its message is the one line to print."""


def _split(spec: str) -> tuple[str, str]:
    where, sep, attr = spec.rpartition(":")
    if not sep or not where or not attr or not attr.isidentifier():
        raise TargetError(f"{spec!r} is not module:attr or path/to/file.py:attr")
    return where, attr


def _load_module(where: str, base: Path) -> object:
    if where.endswith(".py") or "/" in where or "\\" in where:
        path = (base / where).resolve()
        if not path.is_file():
            raise TargetError(f"no such file: {path}")
        name = "_agentstate_doctor_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise TargetError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[name]
            raise TargetError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
        return module
    try:
        return importlib.import_module(where)
    except Exception as exc:
        raise TargetError(f"importing {where} failed: {type(exc).__name__}: {exc}") from exc


def load_target(spec: str, base: Path | None = None) -> object:
    """The compiled graph ``spec`` names (calling a zero-argument function if it is one).

    The spec, the file and the module are checked before LangGraph is imported,
    so a typo ends in one line at once.
    """
    where, attr = _split(spec)
    module = _load_module(where, base or Path.cwd())
    if not hasattr(module, attr):
        raise TargetError(f"{where} has no attribute {attr!r}")
    value = getattr(module, attr)

    from agentstate.doctor.graph_facts import NotAGraphError, as_compiled

    try:
        return as_compiled(value)
    except NotAGraphError:
        pass
    if callable(value):
        try:
            value = value()
        except TypeError as exc:
            raise TargetError(f"{spec}: calling it without arguments failed: {exc}") from exc
        except Exception as exc:
            raise TargetError(
                f"{spec}: building the graph failed: {type(exc).__name__}: {exc}"
            ) from exc
    try:
        return as_compiled(value)
    except NotAGraphError as exc:
        raise TargetError(f"{spec}: {exc}") from None


def targets(spec: str) -> list[tuple[str, str, Path]]:
    """(name, target, base directory) for a target, or for every graph of a langgraph.json."""
    if not spec.endswith(".json"):
        return [(spec, spec, Path.cwd())]
    path = Path(spec)
    try:
        config = json.loads(path.read_text())
    except OSError as exc:
        raise TargetError(f"cannot read {spec}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise TargetError(f"{spec} is not JSON: {exc}") from None
    graphs = config.get("graphs") if isinstance(config, dict) else None
    if not isinstance(graphs, dict) or not graphs:
        raise TargetError(f"{spec} lists no graphs (a 'graphs' object)")
    base = path.resolve().parent
    return [(name, str(target), base) for name, target in graphs.items()]


def _source_file(target: str, base: Path) -> str | None:
    where = target.rpartition(":")[0]
    if where.endswith(".py"):
        path = (base / where).resolve()
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            return str(path)
    return None


def github_lines(report: Report, file: str | None) -> list[str]:
    """GitHub Actions workflow commands, one annotation per error or warning."""
    lines = []
    for f in report.findings:
        if f.severity == "info":
            level = "notice"
        else:
            level = f.severity
        where = f"file={file}," if file else ""
        message = f"{report.graph}: {f.subject}: {f.message} (notebook {f.notebook})"
        message = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        lines.append(f"::{level} {where}title=doctor {f.code}::{message}")
    return lines


def run(args: argparse.Namespace) -> int:
    """Diagnose every target; print the reports; 1 if any error, 2 for a bad target."""
    fmt = "json" if args.json else args.format
    try:
        planned = [t for spec in args.target for t in targets(spec)]
        graphs = [(name, load_target(target, base), target, base) for name, target, base in planned]
    except TargetError as exc:
        print(f"agentstate doctor: error: {exc}", file=sys.stderr)
        return 2
    from agentstate.doctor.diagnosis import diagnose

    reports = [(diagnose(graph, name), target, base) for name, graph, target, base in graphs]
    if fmt == "json":
        data = [r.to_dict() for r, _, _ in reports]
        print(json.dumps(data[0] if len(data) == 1 else data, indent=2))
    elif fmt == "github":
        for report, target, base in reports:
            for line in github_lines(report, _source_file(target, base)):
                print(line)
    else:
        print("\n\n".join(r.text(notes=False) for r, _, _ in reports))
    # what could not be checked here: once, beside the output, never inside it
    for note in dict.fromkeys(n for r, _, _ in reports for n in r.notes):
        print(f"agentstate doctor: note: {note}", file=sys.stderr)
    return 1 if any(r.errors for r, _, _ in reports) else 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``doctor`` to the ``agentstate`` command."""
    parser = subparsers.add_parser(
        "doctor",
        help="the series' state hazards in an agent graph (stages 01-06)",
        description="Find the series' state hazards in compiled agent graphs, without running "
        "them. Exit status 1 when a finding is an error, 0 otherwise, 2 for a bad target.",
        epilog="One page per finding code: docs/doctor/README.md",
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
        choices=["text", "json", "github"],
        default="text",
        help="text (default), json, or github (annotations for a CI run)",
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
