"""The series' hazards as small named reproductions, one function each.

Each function builds the smallest agent that shows one hazard of notebooks
01-06 with the real libraries and the scripted model, runs it, and says what
happened: ``reproduced`` (the hazard is there), ``refused`` (the library now
stops it with an error the model or the caller sees), ``fixed`` (the library
no longer loses or doubles anything) or ``unavailable`` (the API the
reproduction needs does not exist in these versions). It never asks the
doctor: the verdict comes from the run.

``agentstate hazards`` (or ``python -m agentstate.hazards``) prints the table
for the versions installed, so a reader on other releases than the tutorial's
pins can tell whether a lesson's failure still happens to them;
``scripts/hazards_by_version.py`` runs them across version sets and
``docs/hazards-by-version.md`` is rendered from its data. Taught by notebooks
01-06 (each lesson's opening links to its row).
"""

from agentstate.hazards.registry import (
    HAZARDS,
    Hazard,
    Outcome,
    Result,
    hazard,
    installed_versions,
    run_all,
)

__all__ = [
    "HAZARDS",
    "Hazard",
    "Outcome",
    "Result",
    "hazard",
    "installed_versions",
    "run_all",
]
