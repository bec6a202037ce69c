"""The doctor: the series' hazards found in the reader's own agent (notebooks 01-06).

- :func:`diagnose`: static checks of a compiled graph (no model call, no tool
  run), one code per hazard of the series; :func:`check_project`: the same,
  with the project's ``[tool.agentstate.doctor]`` and ``# agentstate: ignore``
  comments applied, as the command line applies them;
- :func:`preview_fix`: the diff ``--fix`` would write to an agent in memory (its code in
  files or notebook cells), written nowhere;
- :class:`Watch`: a callback handler passed at run time that reports what a
  run showed (parallel writers, dropped writes, blind readers, prompts whose
  prefix changes);
- ``agentstate doctor module:attr`` on the command line (:mod:`.cli`).

Each code has a page under ``docs/doctor/``. Names are imported on first use,
so ``agentstate doctor --help`` stays quick.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentstate.doctor.checks.diagnosis import diagnose
    from agentstate.doctor.facts.graph_facts import NotAGraphError
    from agentstate.doctor.fix.preview import FixPreview, NoSourceError, preview_fix
    from agentstate.doctor.report.findings import CODES, Finding, Report
    from agentstate.doctor.report.project import check_project
    from agentstate.doctor.watch import Watch

_HOMES = {
    "CODES": "agentstate.doctor.report.findings",
    "Finding": "agentstate.doctor.report.findings",
    "NotAGraphError": "agentstate.doctor.facts.graph_facts",
    "Watch": "agentstate.doctor.watch",
    "Report": "agentstate.doctor.report.findings",
    "diagnose": "agentstate.doctor.checks.diagnosis",
    "check_project": "agentstate.doctor.report.project",
    "FixPreview": "agentstate.doctor.fix.preview",
    "NoSourceError": "agentstate.doctor.fix.preview",
    "preview_fix": "agentstate.doctor.fix.preview",
}

__all__ = [
    "CODES",
    "Finding",
    "FixPreview",
    "NoSourceError",
    "NotAGraphError",
    "Report",
    "Watch",
    "check_project",
    "diagnose",
    "preview_fix",
]


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module 'agentstate.doctor' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value
