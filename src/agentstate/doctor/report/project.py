"""``check_project(graph)``: :func:`~.diagnosis.diagnose` as ``agentstate doctor`` judges it.

``diagnose(graph)`` reports every finding the checks make; a project's
``[tool.agentstate.doctor]`` (``select``, ``ignore``, ``per-graph-ignores``) and
its ``# agentstate: ignore[code]`` comments are the command line's to apply.
``check_project`` applies them from Python, exactly as the CLI does: the
nearest ``pyproject.toml`` with the section, from ``start`` (default: the
current directory) upward, and the comments in the project's own modules (those
under that file's folder, or ``start``). The hazards are taught in notebooks
01-06; the settings are on ``docs/doctor/README.md``.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from agentstate.doctor.report import config
from agentstate.doctor.report.findings import Report


def check_project(
    graph: object,
    name: str | None = None,
    *,
    start: str | Path | None = None,
    pyproject: str | Path | None = None,
) -> Report:
    """The findings about ``graph`` that its project's settings select and no comment silences.

    ``pyproject`` names the configuration file (``--config``); otherwise the
    nearest one from ``start`` upward is read. Raises ``ConfigError`` (one line)
    for a configuration that cannot be used, ``NotAGraphError`` for anything but
    a compiled graph.
    """
    from agentstate.doctor.checks.diagnosis import diagnose_facts
    from agentstate.doctor.facts.graph_facts import graph_facts
    from agentstate.doctor.report.cli import Settings, _kept
    from agentstate.doctor.report.loading import Loaded, Target
    from agentstate.doctor.report.output import Diagnosed
    from agentstate.doctor.report.suppression import Ledger, project_files

    here = Path.cwd() if start is None else Path(start).resolve()
    explicit = Path(pyproject) if pyproject is not None else None
    settings = Settings(config.Layer(), isolated=False, explicit=explicit)
    label = name or "graph"
    probe = Target(label, label, here, (here,))
    found = settings.path(probe)
    root = found.resolve().parent if found is not None else here
    target = Target(label, label, root, (root, here))
    rules = settings.rules(target)
    file, line = _defined_at(graph)
    loaded = Loaded(target, graph, file, line)  # type: ignore[arg-type]
    ledger = Ledger()
    ledger.enabled |= rules.enabled
    ledger.add(project_files(dict.fromkeys((root, here))))
    facts = graph_facts(graph, name)  # once: the checks and the suppression comments
    diagnosed = Diagnosed(diagnose_facts(facts), file, line, label)
    return _kept(diagnosed, loaded, facts, rules, ledger).report


def _defined_at(graph: object) -> tuple[str | None, int | None]:
    """Where the caller bound ``graph`` (the frame that called :func:`check_project`), if a
    file: a finding without a place of its own shows, and is silenced, there."""
    frame = inspect.currentframe()
    caller = frame.f_back.f_back if frame and frame.f_back else None
    if caller is None:
        return None, None
    file = caller.f_code.co_filename
    for bound, value in caller.f_locals.items():
        if value is graph:
            from agentstate.doctor.report.loading import definition_line

            return file, definition_line(file, bound)
    return (file, None) if Path(file).is_file() else (None, None)
