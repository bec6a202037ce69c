"""``[tool.agentstate.doctor]``: which codes the doctor reports, configured as a linter is.

The section is looked for in the ``pyproject.toml`` of the target's directory,
then of each parent, as ruff finds its own (a ``pyproject.toml`` without the
section is passed over). Its keys, and the command line's, are resolved in
layers as ruff resolves ``select``/``ignore``: every code, then the file's
``select`` (replacing the set) and ``ignore``, then ``--select`` (replacing
again) and ``--ignore``; ``per-graph-ignores`` then drops codes for the graphs
whose name matches a pattern. Codes are checked against the one registry
(:data:`agentstate.doctor.report.findings.CODES`, plus the CLI's own
``unused-suppression``), so a code added there is accepted here unchanged.
Used by :mod:`agentstate.doctor.report.cli` (the hazards of notebooks 01-06).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentstate.doctor.report import places
from agentstate.doctor.report.files import TargetError, read_small_text, short
from agentstate.doctor.report.findings import CODES, Severity

SECTION = "[tool.agentstate.doctor]"
UNUSED_SUPPRESSION = "unused-suppression"
"""The CLI's own code: a suppression comment that matches no finding (ruff's RUF100)."""

ALL = "ALL"
FAIL_ON: tuple[Severity, ...] = ("error", "warning")
KEYS = (
    "graphs",
    "select",
    "ignore",
    "per-graph-ignores",
    "fail-on",
    "timeout",
    "fix",
    "unsafe-fixes",
)
GRAPHS_FILE = "langgraph.json"


class ConfigError(TargetError):
    """A configuration the doctor cannot use; its message is the one line to print."""


def known_codes() -> list[str]:
    """Every code a configuration may name: the registry's, then the CLI's own."""
    return [*CODES, UNUSED_SUPPRESSION]


def check_codes(codes: Iterable[object], where: str) -> tuple[str, ...]:
    """``codes`` as a tuple of known codes (or ``ALL``); one line naming the first unknown one."""
    known = known_codes()
    out = []
    for code in codes:
        if not isinstance(code, str):
            raise ConfigError(f"{where}: {code!r} is not a code (a string)")
        if code != ALL and code not in known:
            raise ConfigError(
                f"{where}: unknown code {short(code, 40)!r} (known: {', '.join(known)})"
            )
        out.append(code)
    return tuple(out)


@dataclass(frozen=True)
class Layer:
    """One source of settings: a ``pyproject.toml`` section or the command line."""

    select: tuple[str, ...] | None = None
    """The codes to report (``None``: leave the set as it is)."""
    ignore: tuple[str, ...] = ()
    per_graph_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    fail_on: Severity | None = None
    timeout: float | None = None
    path: Path | None = None
    """The file it was read from (``None`` for the command line)."""
    graphs: tuple[str, ...] | None = None
    """What ``agentstate doctor`` with no target checks, relative to the file's folder."""
    fix: bool | None = None
    """``fix = true``: write the safe fixes, as ``--fix`` does (``None``: not said)."""
    unsafe_fixes: bool | None = None
    """``unsafe-fixes = true``: the unsafe ones too, as ``--unsafe-fixes`` does."""


@dataclass(frozen=True)
class Rules:
    """The settings a graph is checked with, all layers resolved."""

    enabled: frozenset[str]
    per_graph_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    fail_on: Severity = "error"
    timeout: float | None = None
    sources: tuple[Path, ...] = field(default=())
    fix: bool = False
    unsafe_fixes: bool = False

    def reports(self, code: str, graph: str) -> bool:
        """True when findings of ``code`` about ``graph`` are reported."""
        if code not in self.enabled:
            return False
        return not any(
            code in codes or ALL in codes
            for pattern, codes in self.per_graph_ignores
            if fnmatch.fnmatchcase(graph, pattern)
        )

    def fails(self, severity: str) -> bool:
        """True when a finding of ``severity`` makes the run exit 1."""
        return severity == "error" or (self.fail_on == "warning" and severity == "warning")


def resolve(layers: Sequence[Layer]) -> Rules:
    """The rules the layers give, later layers over earlier ones (ruff's order)."""
    enabled = set(known_codes())
    per_graph: list[tuple[str, tuple[str, ...]]] = []
    fail_on: Severity = "error"
    timeout = None
    fix = unsafe = False
    for layer in layers:
        if layer.select is not None:
            enabled = set(known_codes()) if ALL in layer.select else set(layer.select)
        enabled -= set(known_codes()) if ALL in layer.ignore else set(layer.ignore)
        per_graph.extend(layer.per_graph_ignores)
        fail_on = layer.fail_on or fail_on
        timeout = layer.timeout if layer.timeout is not None else timeout
        fix = layer.fix if layer.fix is not None else fix
        unsafe = layer.unsafe_fixes if layer.unsafe_fixes is not None else unsafe
    sources = tuple(layer.path for layer in layers if layer.path is not None)
    return Rules(frozenset(enabled), tuple(per_graph), fail_on, timeout, sources, fix, unsafe)


def shown(path: Path) -> str:
    """``path`` as an error names it: relative to the current directory when under it."""
    return places.shown(str(path.resolve()), Path.cwd().resolve())


def is_seconds(value: object) -> bool:
    """True for a finite number above 0 (``inf``, ``nan``, ``0`` and ``True`` are not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value > 0


def _section(path: Path) -> dict[str, object] | None:
    """The ``[tool.agentstate.doctor]`` table of a ``pyproject.toml``, None if it has none."""
    import tomllib  # here: `agentstate doctor --help` never parses TOML

    shown_as = shown(path)
    text = read_small_text(path, shown_as)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{shown_as} is not TOML: {exc}") from None
    table: object = data
    for key in ("tool", "agentstate", "doctor"):
        if not isinstance(table, dict) or key not in table:
            return None
        table = table[key]
    if not isinstance(table, dict):
        raise ConfigError(f"{shown_as}: {SECTION} is not a table")
    return table


def find(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` with a ``[tool.agentstate.doctor]`` section, upward."""
    start = start.resolve()
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and _section(candidate) is not None:
            return candidate
    return None


def _list(table: dict[str, object], key: str, where: str) -> tuple[str, ...] | None:
    if key not in table:
        return None
    value = table[key]
    if not isinstance(value, list):
        raise ConfigError(f"{where}: '{key}' is not a list of codes")
    return check_codes(value, f"{where} '{key}'")


def read(path: Path) -> Layer:
    """The settings of ``path``'s ``[tool.agentstate.doctor]`` (empty when it has none)."""
    table = _section(path)
    if table is None:
        return Layer(path=path)
    where = f"{shown(path)} {SECTION}"
    unknown = [k for k in table if k not in KEYS]
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {short(unknown[0], 40)!r} (known: {', '.join(KEYS)})"
        )
    per_graph = table.get("per-graph-ignores", {})
    if not isinstance(per_graph, dict):
        raise ConfigError(f"{where}: 'per-graph-ignores' is not a table of graph -> codes")
    ignores = []
    for pattern, codes in per_graph.items():
        if not isinstance(codes, list):
            raise ConfigError(f"{where}: per-graph-ignores {pattern!r} is not a list of codes")
        ignores.append((pattern, check_codes(codes, f"{where} per-graph-ignores {pattern!r}")))
    fail_on = table.get("fail-on")
    if fail_on is not None and fail_on not in FAIL_ON:
        raise ConfigError(f"{where}: 'fail-on' is {fail_on!r}, not one of {', '.join(FAIL_ON)}")
    timeout = table.get("timeout")
    if timeout is not None and not (isinstance(timeout, int | float) and is_seconds(timeout)):
        raise ConfigError(
            f"{where}: 'timeout' is {timeout!r}, not a finite number of seconds above 0"
        )
    for flag in ("fix", "unsafe-fixes"):
        if flag in table and not isinstance(table[flag], bool):
            raise ConfigError(f"{where}: {flag!r} is {table[flag]!r}, not true or false")
    graphs = table.get("graphs")
    if graphs is not None and (
        not isinstance(graphs, list) or not graphs or not all(isinstance(g, str) for g in graphs)
    ):
        raise ConfigError(
            f"{where}: 'graphs' is not a list of targets (module:attr, path/to/file.py:attr "
            "or langgraph.json)"
        )
    return Layer(
        graphs=tuple(graphs) if graphs is not None else None,
        select=_list(table, "select", where),
        ignore=_list(table, "ignore", where) or (),
        per_graph_ignores=tuple(ignores),
        fail_on=fail_on,
        timeout=float(timeout) if timeout is not None else None,
        path=path,
        fix=_flag(table, "fix"),
        unsafe_fixes=_flag(table, "unsafe-fixes"),
    )


def _flag(table: dict[str, object], key: str) -> bool | None:
    """A ``true``/``false`` key (``read`` has checked it is one), ``None`` when absent."""
    value = table.get(key)
    return value if isinstance(value, bool) else None


def parse_codes(text: str, option: str) -> tuple[str, ...]:
    """``--select a,b`` as checked codes."""
    return check_codes([c.strip() for c in text.split(",") if c.strip()], option)


def nearest_targets(start: Path, use_config: bool = True) -> tuple[Path, tuple[str, ...]]:
    """What ``agentstate doctor`` checks when given no target, and the file that said so.

    From ``start`` up to the repository's root (the first folder with ``.git``):
    in each folder, a ``pyproject.toml`` whose ``[tool.agentstate.doctor]`` has
    ``graphs`` (each relative to that folder; not with ``use_config=False``, as
    ``--isolated``), else a ``langgraph.json`` (all its graphs). One line naming
    where it looked when neither is found.
    """
    start = start.resolve()
    for folder in (start, *start.parents):
        pyproject = folder / "pyproject.toml"
        if use_config and pyproject.is_file():
            layer = read(pyproject)
            if layer.graphs is not None:
                return pyproject, tuple(rooted(g, folder) for g in layer.graphs)
        graphs = folder / GRAPHS_FILE
        if graphs.is_file():
            return graphs, (str(graphs),)
        if (folder / ".git").exists():
            break
    raise ConfigError(
        f"no target given, and no {GRAPHS_FILE} or {SECTION} 'graphs' in {shown(start)} or a "
        "folder above it up to the repository's root: give module:attr, path/to/file.py:attr "
        f"or {GRAPHS_FILE}"
    )


def rooted(target: str, folder: Path) -> str:
    """``target`` of a configuration in ``folder``, made to name the same thing from anywhere:
    a path (``x.json``, ``src/app.py:graph``) joined to ``folder``; a ``module:attr`` as it is."""
    where, sep, attr = target.rpartition(":")
    if target.endswith(".json"):
        return str(folder / target)
    if sep and (where.endswith(".py") or "/" in where or "\\" in where):
        return f"{folder / where}:{attr}"
    return target
