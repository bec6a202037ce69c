"""``agentstate doctor TARGET``: the series' hazards in an agent, from the command line.

``TARGET`` is what ``langgraph.json`` lists, loaded as ``langgraph dev`` loads
it (:mod:`.loading`): ``module:attr`` or ``path/to/file.py:attr`` (a compiled
graph, or a factory that builds one), or a ``langgraph.json`` itself (every
graph it lists, its ``env`` set first). Configured as a linter is: codes
chosen by ``[tool.agentstate.doctor]`` and ``--select``/``--ignore``
(:mod:`.config`), findings silenced by ``# agentstate: ignore[code]``
(:mod:`.suppression`). ``--format`` prints a table (``text``), ``json``,
``github`` annotations or ``sarif`` (:mod:`.output`, :mod:`.sarif`);
``--explain CODE`` prints a code's page (:mod:`.explain`). Exit status 1 when a
finding is an error (``--fail-on warning``: or a warning), 0 when none is
(always, with ``--exit-zero``), 2 with one line on stderr per target that
cannot be loaded (the others are reported all the same) or for a usage error.
While targets load, what they write to stdout (file descriptor 1) goes to
stderr, and each load is given ``--timeout`` seconds (:mod:`.isolation`).
Nothing heavy is imported until a target is, so ``agentstate doctor --help``
is quick. The hazards are taught in notebooks 01-06.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agentstate.doctor.report import config, isolation, loading
from agentstate.doctor.report.config import ConfigError, Layer, Rules
from agentstate.doctor.report.loading import Loaded, Target, TargetError, describe, load

if TYPE_CHECKING:
    from agentstate.doctor.facts.graph_facts import Graph, GraphFacts
    from agentstate.doctor.fix.command import FixRun
    from agentstate.doctor.fix.plan import Fix, NoFix
    from agentstate.doctor.report.findings import Finding
    from agentstate.doctor.report.output import Diagnosed
    from agentstate.doctor.report.suppression import Ledger

FORMATS = ("concise", "full", "json", "github", "sarif")
ALIASES = {"text": "full"}
"""Older names of a format, still accepted (``--format text`` is ``full``)."""
DEFAULT_TIMEOUT = 120.0
"""Seconds a target may take to import and build before it is reported as hanging."""


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


@dataclass
class Outcome:
    """What a run found: each graph (or why it failed), its rules, the unused suppressions."""

    diagnosed: list[Diagnosed] = field(default_factory=list)
    rules: list[Rules | None] = field(default_factory=list)
    """The rules each graph was checked with (None for one that failed before they were read)."""
    unused: list[Finding] = field(default_factory=list)
    plans: list[Fix | NoFix] = field(default_factory=list)
    """What ``--fix`` would write for each finding that has a fix (or why none)."""
    roots: list[Path] = field(default_factory=list)
    """The projects' folders: no fix is written outside them."""

    def status(self, exit_zero: bool) -> int:
        """2 if a graph failed; else 1 if a finding fails the run (never with ``exit_zero``)."""
        if any(d.error is not None for d in self.diagnosed):
            return 2
        if exit_zero:
            return 0
        for d, rules in zip(self.diagnosed, self.rules, strict=True):
            if rules is not None and any(rules.fails(f.severity) for f in d.report.findings):
                return 1
        known = [r for r in self.rules if r is not None]
        if self.unused and any(r.fails(self.unused[0].severity) for r in known):
            return 1
        return 0


def _failed(name: str, label: str, message: str, notes: tuple[str, ...] = ()) -> Diagnosed:
    from agentstate.doctor.report.findings import Report
    from agentstate.doctor.report.output import Diagnosed

    return Diagnosed(Report(name, notes=notes), label=label, error=message)


def _diagnose(loaded: Loaded) -> tuple[Diagnosed, GraphFacts]:
    """The graph's report, and the facts it was made from (read once: the suppression
    comments and the fixes use them too)."""
    from agentstate.doctor.checks.diagnosis import diagnose_facts
    from agentstate.doctor.facts.graph_facts import graph_facts
    from agentstate.doctor.report.output import Diagnosed

    try:
        facts = graph_facts(loaded.graph, loaded.target.name)
        report = diagnose_facts(facts)
    except Exception as exc:
        raise TargetError(
            f"{loaded.target.label}: the doctor failed on it (a bug, please report it): "
            f"{describe(exc)}"
        ) from None
    return Diagnosed(report, loaded.file, loaded.line, loaded.target.label), facts


class Settings:
    """The rules of each target: its project's ``[tool.agentstate.doctor]`` under the CLI's."""

    def __init__(self, cli: Layer, isolated: bool, explicit: Path | None) -> None:
        self.cli = cli
        self.isolated = isolated
        self.explicit = explicit
        self.cache: dict[Path | None, Rules] = {}

    def path(self, target: Target) -> Path | None:
        """The configuration file of ``target``: ``--config``, else the nearest one upward."""
        if self.isolated:
            return None
        if self.explicit is not None:
            return self.explicit
        return config.find(target.home)

    def rules(self, target: Target) -> Rules:
        """The rules for ``target``: the nearest configuration from its directory upward."""
        path = self.path(target)
        if path not in self.cache:
            layers = [config.read(path)] if path is not None else []
            self.cache[path] = config.resolve([*layers, self.cli])
        return self.cache[path]


def _kept(
    d: Diagnosed, loaded: Loaded, facts: GraphFacts, rules: Rules, ledger: Ledger
) -> Diagnosed:
    """``d`` with only the findings its rules select and no suppression silences."""
    from agentstate.doctor.report.findings import Report
    from agentstate.doctor.report.output import Diagnosed, graph_place
    from agentstate.doctor.report.suppression import is_project_file

    target = loaded.target
    roots = (target.base, *target.paths)
    channels = frozenset(getattr(loaded.graph, "channels", None) or {})
    kept = []
    silenced = 0
    for f in d.report.findings:
        if not rules.reports(f.code, d.report.graph):
            continue
        points: list[tuple[str | None, int | None]] = [(f.file, f.line)]
        if not (f.file and is_project_file(f.file, roots)):
            points.append((d.file, d.line))  # where a finding without a place of its own shows
            points.append(graph_place(f, d))  # its subagent's declaration, as the report shows
        if ledger.silences(f, points, channels, roots) is None:
            kept.append(f)
        else:
            silenced += 1
    ledger.checked(*_made_of(facts, d))
    report = Report(d.report.graph, kept, (*d.report.notes, *target.notes))
    return Diagnosed(report, d.file, d.line, d.label, suppressed=silenced)


def _with_fixes(
    d: Diagnosed, loaded: Loaded, facts: GraphFacts
) -> tuple[Diagnosed, list[Fix | NoFix]]:
    """``d`` with each finding marked with the fix ``--fix`` has for it, and the fixes."""
    import dataclasses

    from agentstate.doctor.fix.command import annotate
    from agentstate.doctor.fix.plan import plan
    from agentstate.doctor.report.findings import Report

    roots = (loaded.target.base, *loaded.target.paths)
    plans = plan(facts, d.report.findings, roots)
    report = Report(d.report.graph, annotate(d.report.findings, plans), d.report.notes)
    return dataclasses.replace(d, report=report), plans


def _made_of(
    facts: GraphFacts, d: Diagnosed
) -> tuple[list[tuple[str | None, int | None]], list[frozenset[str]]]:
    """The places (nodes', tools', the graph's own line) and the keys of a checked graph."""
    places: list[tuple[str | None, int | None]] = [(d.file, d.line)]
    schemas: list[frozenset[str]] = []
    for scope in facts.scopes():
        schemas.append(frozenset(scope.channels))
        places += [(n.file, n.line) for n in scope.nodes.values()]
        places += [(t.file, t.line) for t in scope.tools.values()]
    return places, schemas


def check(specs: Sequence[str], settings: Settings, base: Path | None = None) -> Outcome:
    """Load, diagnose, select and suppress every target; a failure stays its graph's own.

    ``base``: where a ``module:attr`` is imported from (a configuration's folder).
    """
    from agentstate.doctor.report.config import UNUSED_SUPPRESSION
    from agentstate.doctor.report.suppression import Ledger, project_files

    # the doctor's own imports (langgraph, langchain) before any clock starts: --timeout is
    # the target's own time, not ours
    importlib.import_module("agentstate.doctor.checks.diagnosis")
    outcome = Outcome()
    ledger = Ledger()
    for spec in specs:
        try:
            planned = loading.targets(spec, base)
        except TargetError as exc:
            outcome.diagnosed.append(_failed(spec, spec, str(exc)))
            outcome.rules.append(None)
            continue
        for target in planned:
            rules = settings.rules(target)
            ledger.enabled |= rules.enabled
            timeout = rules.timeout or DEFAULT_TIMEOUT
            hang = (
                f"{target.label}: loading took longer than {timeout:g} s (--timeout); "
                "an endless loop or a call that blocks, at import or in its factory?"
            )
            try:
                with isolation.time_limit(timeout, hang):
                    loaded = load(target)
                diagnosed, facts = _diagnose(loaded)
            except (TargetError, isolation.LoadTimeout) as exc:
                failed = _failed(target.name, target.label, str(exc), target.notes)
                outcome.diagnosed.append(failed)
                outcome.rules.append(rules)
                continue
            ledger.add(project_files((target.base, *target.paths)))
            kept = _kept(diagnosed, loaded, facts, rules, ledger)
            kept, plans = _with_fixes(kept, loaded, facts)
            outcome.diagnosed.append(kept)
            outcome.rules.append(rules)
            outcome.plans += plans
            outcome.roots += [r for r in (target.base, *target.paths) if r not in outcome.roots]
    if any(r is not None and UNUSED_SUPPRESSION in r.enabled for r in outcome.rules):
        outcome.unused = ledger.unused()
    return outcome


def render(fmt: str, outcome: Outcome, docs_url: str | None = None, quiet: bool = False) -> str:
    """The reports in ``fmt``: concise, full (``text``), json, github or sarif."""
    import json

    from agentstate.doctor.report import output
    from agentstate.doctor.report.version import version

    if fmt == "json":
        return output.json_text(outcome.diagnosed, outcome.unused, version())
    if fmt == "github":
        return output.github(outcome.diagnosed, outcome.unused, docs_url)
    if fmt == "sarif":
        from agentstate.doctor.report.sarif import sarif_log

        log = sarif_log(outcome.diagnosed, docs=docs_url, unused=outcome.unused)
        return json.dumps(log, indent=2)
    if fmt == "concise":
        return output.concise(outcome.diagnosed, outcome.unused, quiet=quiet)
    return output.text(outcome.diagnosed, outcome.unused, quiet=quiet)


def _write(shown: str, stream: TextIO, output_file: str | None) -> None:
    if output_file is not None:
        path = Path(output_file)
        try:
            path.write_text(shown + "\n" if shown else "", encoding="utf-8")
        except OSError as exc:
            raise TargetError(
                f"cannot write {output_file}: {exc.strerror or describe(exc)}"
            ) from None
        return
    if not shown:
        return
    try:
        stream.write(shown + "\n")
        stream.flush()
    except BrokenPipeError:  # `agentstate doctor ... | head`: the reader has what it wanted
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


def explain(code: str, stream: TextIO, output_file: str | None) -> int:
    """Print ``code``'s page (``agentstate doctor --explain CODE``), as ``ruff rule`` does."""
    from agentstate.doctor.report.explain import page

    known = config.known_codes()
    if code not in known:
        return _fail(f"--explain: unknown code {code!r} (known: {', '.join(known)})")
    text = page(code)
    if text is None:
        return _fail(f"--explain: no page for {code} in this installation (reinstall agentstate)")
    try:
        _write(text.rstrip("\n"), stream, output_file)
    except TargetError as exc:
        return _fail(str(exc))
    return 0


def _layer(args: argparse.Namespace) -> Layer:
    """The command line's settings, checked: a wrong code or timeout is a one-line error."""
    select = None
    if args.select is not None:
        select = config.parse_codes(",".join(args.select), "--select")
    ignore = config.parse_codes(",".join(args.ignore or ()), "--ignore")
    if args.timeout is not None and not config.is_seconds(args.timeout):
        raise ConfigError(f"--timeout {args.timeout:g}: give a finite number of seconds above 0")
    return Layer(
        select=select,
        ignore=ignore,
        fail_on=args.fail_on,
        timeout=args.timeout,
        fix=False if args.no_fix else (True if args.fix or args.fix_only else None),
        unsafe_fixes=True if args.unsafe_fixes else None,
    )


def apply_fixes(args: argparse.Namespace, outcome: Outcome) -> FixRun | None:
    """``--diff``, ``--fix`` (or ``fix = true``): the fixes prepared, and written for ``--fix``;
    a finding whose fix was written leaves the report, as ruff's do. None when not asked."""
    import dataclasses

    from agentstate.doctor.fix.command import run_fixes
    from agentstate.doctor.report.findings import Report

    known = [r for r in outcome.rules if r is not None]
    wanted = args.fix or args.fix_only or (not args.no_fix and any(r.fix for r in known))
    if not (args.diff or wanted):
        return None
    unsafe = args.unsafe_fixes or any(r.unsafe_fixes for r in known)
    ran = run_fixes(outcome.plans, tuple(outcome.roots), "diff" if args.diff else "fix", unsafe)
    if ran.written:
        gone = ran.fixed()
        outcome.diagnosed = [
            dataclasses.replace(
                d,
                report=Report(
                    d.report.graph,
                    [f for f in d.report.findings if (f.code, f.subject) not in gone],
                    d.report.notes,
                ),
            )
            for d in outcome.diagnosed
        ]
    return ran


def run(args: argparse.Namespace) -> int:
    """Diagnose every target and print the reports; the exit status says how it went.

    What a target prints while it is imported or built (``print``, or a child
    process writing to descriptor 1) goes to stderr, so the report on stdout
    stays valid JSON or SARIF.
    """
    if args.json and args.format not in (None, "json"):
        return _fail(f"--json and --output-format {args.format} disagree: give one of them")
    fmt = "json" if args.json else ALIASES.get(args.format, args.format or "full")
    if args.explain is not None:
        if args.target:
            return _fail("--explain CODE takes no target")
        return explain(args.explain, sys.stdout, args.output_file)
    try:
        settings = Settings(_layer(args), args.isolated, args.config)
    except ConfigError as exc:
        return _fail(str(exc))
    if args.config is not None:
        try:
            loading.regular_file(args.config, str(args.config))
        except TargetError as exc:
            return _fail(f"--config: {exc}")
    try:
        specs, base, source = planned_specs(args)
    except TargetError as exc:
        return _fail(str(exc))
    if args.show_settings:
        try:
            _write(show_settings(specs, base, source, settings), sys.stdout, args.output_file)
        except TargetError as exc:
            return _fail(str(exc))
        return 0
    if source is not None and not args.quiet:
        print(f"agentstate doctor: no target given: checking {relative(source)}", file=sys.stderr)
    try:
        with isolation.stdout_to_stderr() as stdout:
            outcome = check(specs, settings, base)
            fixes = apply_fixes(args, outcome)
            if fixes is not None and (args.diff or args.fix_only):
                shown = fixes.diff if args.diff else ""
            else:
                shown = render(fmt, outcome, args.docs_url, args.quiet)
            _write(shown.rstrip("\n"), stdout, args.output_file)
    except TargetError as exc:  # a configuration that cannot be used, an output not written
        return _fail(str(exc))
    except Exception as exc:
        return _fail(f"the doctor failed (a bug, please report it): {describe(exc)}")
    if not args.quiet:  # what could not be read or checked: once, before the errors it explains
        notes = (n for d in outcome.diagnosed for n in d.report.notes)
        for note in dict.fromkeys(notes):
            print(f"agentstate doctor: note: {printable(note)}", file=sys.stderr)
    for d in outcome.diagnosed:
        if d.error is not None:
            print(f"agentstate doctor: error: {printable(d.error)}", file=sys.stderr)
    if fixes is not None and not args.quiet:
        for line in fixes.lines():
            print(f"agentstate doctor: {printable(line)}", file=sys.stderr)
    if fixes is not None and args.diff:  # ruff's --diff: 1 when there is something to write
        return 2 if outcome.status(True) == 2 else int(bool(fixes.diff))
    if fixes is not None and args.fix_only:
        return outcome.status(True)
    return outcome.status(args.exit_zero)


def relative(path: Path) -> str:
    """``path`` as the current directory reaches it: ``langgraph.json``, ``../pyproject.toml``."""
    return os.path.relpath(path, Path.cwd())


def planned_specs(args: argparse.Namespace) -> tuple[list[str], Path | None, Path | None]:
    """The targets to check, the folder a ``module:attr`` is imported from, and the file that
    named them (None when the command line did): without a target, the nearest
    ``[tool.agentstate.doctor] graphs`` (``--config``'s first) or ``langgraph.json``."""
    if args.target:
        return list(args.target), None, None
    if args.config is not None and not args.isolated:
        layer = config.read(args.config)
        if layer.graphs is not None:
            folder = args.config.resolve().parent
            return [config.rooted(g, folder) for g in layer.graphs], folder, args.config
    source, specs = config.nearest_targets(Path.cwd(), use_config=not args.isolated)
    shown = [os.path.relpath(s, Path.cwd()) if s.endswith(".json") else s for s in specs]
    return shown, source.parent, source


def show_settings(
    specs: Sequence[str], base: Path | None, source: Path | None, settings: Settings
) -> str:
    """``--show-settings``: the targets and the rules each is checked with, and their files."""
    lines = [f"# targets, from {relative(source) if source else 'the command line'}"]
    by_file: dict[Path | None, list[str]] = {}
    rules: dict[Path | None, Rules] = {}
    for spec in specs:
        try:
            planned = loading.targets(spec, base)
        except TargetError as exc:
            lines.append(f"{spec}  # cannot be read: {printable(str(exc))}")
            continue
        for target in planned:
            lines.append(target.label)
            found = settings.path(target)
            by_file.setdefault(found, []).append(target.label)
            rules[found] = settings.rules(target)
    if not by_file:  # no target could be read: the settings of the current directory
        found = None if settings.isolated else settings.explicit or config.find(Path.cwd())
        by_file[found] = []
        rules[found] = config.resolve([*([config.read(found)] if found else []), settings.cli])
    for found, labels in by_file.items():
        origin = f"{relative(found)} {config.SECTION}" if found else "no configuration file"
        lines += ["", f"# settings, from {origin} and the command line"]
        if labels:
            lines.append(f"# for: {', '.join(labels)}")
        r = rules[found]
        lines.append(f"select = {sorted(r.enabled)!r}".replace("'", '"'))
        ignores = {pattern: list(codes) for pattern, codes in r.per_graph_ignores}
        lines.append(f"per-graph-ignores = {json.dumps(ignores)}")
        lines.append(f'fail-on = "{r.fail_on}"')
        timeout = r.timeout or DEFAULT_TIMEOUT
        lines.append(f"timeout = {timeout:g}{'' if r.timeout else '  # the default'}")
    return "\n".join(lines)


def _fail(message: str) -> int:
    print(f"agentstate doctor: error: {printable(message)}", file=sys.stderr)
    return 2


class _Version(argparse.Action):
    """``--version``: the installed version, read only when asked (``--help`` stays quick)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the doctor's version and exit")

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from agentstate.doctor.report.version import version

        print(f"agentstate doctor {version()}")
        parser.exit()


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``doctor`` to the ``agentstate`` command."""
    parser = subparsers.add_parser(
        "doctor",
        help="the series' state hazards in an agent graph (lessons 01-06)",
        description="Find the series' state hazards in compiled agent graphs, without running "
        "them. Exit status 1 when a finding is an error, 0 when none is, 2 (one line on stderr "
        "per target) when a target cannot be loaded or the command is wrong.",
        epilog="Why a code matters and its fix: agentstate doctor --explain CODE. Configured "
        "like a linter: [tool.agentstate.doctor] in pyproject.toml (select, ignore, "
        "per-graph-ignores, fail-on, timeout), and # agentstate: ignore[CODE] on the line a "
        "finding names or on the state key's declaration.",
    )
    parser.add_argument(
        "target",
        nargs="*",
        help="module:attr, path/to/file.py:attr (a graph or a function returning one), "
        "or langgraph.json; none: the nearest [tool.agentstate.doctor] graphs or langgraph.json, "
        "from the current folder up to the repository's root",
    )
    parser.add_argument("--json", action="store_true", help="the same as --output-format json")
    parser.add_argument(
        "--output-format",
        "--format",
        dest="format",
        choices=(*FORMATS, *ALIASES),
        default=None,
        metavar="{" + ",".join(FORMATS) + "}",
        help="full (default: each finding's place, code and message, wrapped to 100 columns), "
        "concise (one line per finding), json, github (annotations for a CI run) or sarif "
        "(SARIF 2.1.0 for code scanning); --format is the same flag, text the same as full",
    )
    parser.add_argument(
        "--select",
        action="append",
        metavar="CODES",
        help="report only these codes (comma-separated; ALL for every code): replaces the "
        "configuration's select and ignore",
    )
    parser.add_argument(
        "--ignore",
        action="append",
        metavar="CODES",
        help="do not report these codes (comma-separated), on top of the configuration's",
    )
    parser.add_argument(
        "--fail-on",
        choices=config.FAIL_ON,
        default=None,
        help="the lowest severity that exits 1: error (default) or warning",
    )
    parser.add_argument(
        "-e",
        "--exit-zero",
        action="store_true",
        help="exit 0 even when a finding is an error (a target that cannot load still exits 2)",
    )
    parser.add_argument(
        "-o",
        "--output-file",
        metavar="FILE",
        default=None,
        help="write the report to FILE instead of stdout",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print findings and nothing else: no 'no findings' tables, no notes",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        default=None,
        help=f"seconds a target may take to import and build (default {DEFAULT_TIMEOUT:g}); "
        "past it, one line and exit 2 for that target",
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="PYPROJECT",
        default=None,
        help="read [tool.agentstate.doctor] from this file instead of the nearest pyproject.toml",
    )
    parser.add_argument(
        "--isolated",
        action="store_true",
        help="ignore every configuration file (the command line only)",
    )
    parser.add_argument(
        "--show-settings",
        action="store_true",
        help="print the targets and the settings each is checked with, and the files they "
        "come from, then exit",
    )
    parser.add_argument(
        "--explain",
        metavar="CODE",
        default=None,
        help="print CODE's page (why it matters, the fix) and exit",
    )
    parser.add_argument(
        "--docs-url",
        metavar="URL",
        default=None,
        help="the base URL of the doctor's code pages, for SARIF's helpUri "
        "(default: this checkout's pages)",
    )
    parser.add_argument(
        "--fix",
        action="store_true",
        help="write the safe fixes into your files (libcst: comments and formatting kept); "
        "the report then lists what is left. Also fix = true in [tool.agentstate.doctor]",
    )
    parser.add_argument(
        "--unsafe-fixes",
        action="store_true",
        help="with --fix or --diff, the unsafe fixes too (they also change what other writes "
        "of the key do); without it they are named, never written",
    )
    parser.add_argument(
        "--diff",
        action="store_true",
        help="print the fixes as a unified diff and write nothing; exit 1 when there is one",
    )
    parser.add_argument(
        "--fix-only",
        action="store_true",
        help="write the fixes and report nothing else; exit 0 unless a target cannot load",
    )
    parser.add_argument(
        "--no-fix", action="store_true", help="write no fix, whatever the configuration says"
    )
    parser.add_argument("--version", action=_Version)
    parser.set_defaults(func=run)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agentstate.doctor.report.cli``: the same command on its own."""
    parser = argparse.ArgumentParser(prog="agentstate")
    register(parser.add_subparsers(dest="system", required=True))
    args = parser.parse_args(["doctor", *(sys.argv[1:] if argv is None else argv)])
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
