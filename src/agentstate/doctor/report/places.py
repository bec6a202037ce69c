"""Where a finding is, as each output shows it: a path relative to the project, and a line.

A :class:`~agentstate.doctor.report.findings.Finding` keeps the absolute path of the
tool or node it is about; the text table, GitHub's annotations and SARIF show
it relative to the directory the doctor runs in (GitHub's workspace in a CI
job), so the same project gives the same output on every machine and an
annotation lands on its line. The hazards are taught in notebooks 01-06.
"""

from __future__ import annotations

import os
from pathlib import Path


def root() -> Path:
    """The directory paths are shown relative to: ``$GITHUB_WORKSPACE`` in a CI job, else cwd."""
    workspace = os.environ.get("GITHUB_WORKSPACE")
    return Path(workspace) if workspace else Path.cwd()


def under(file: str, base: Path | None = None) -> str | None:
    """``file`` relative to ``base`` (POSIX separators) when it lies under it, else None."""
    base = root() if base is None else base
    try:
        return Path(file).relative_to(base).as_posix()
    except ValueError:
        pass
    try:  # the same place through a symbolic link (a /tmp that is /private/tmp)
        return Path(file).resolve().relative_to(base.resolve()).as_posix()
    except (ValueError, OSError):
        return None


def shown(file: str, base: Path | None = None) -> str:
    """``file`` relative to ``base`` when under it, else as it is (absolute)."""
    return under(file, base) or file


def where(file: str | None, line: int | None, base: Path | None = None) -> str:
    """``path:line`` (or ``path``), ``""`` when the place is unknown."""
    if not file:
        return ""
    return f"{shown(file, base)}:{line}" if line else shown(file, base)
