"""``--fix``, ``--unsafe-fixes``, ``--diff`` and ``--fix-only``: the fixes of one doctor run.

Every finding says whether an edit exists and of which kind (``Finding.fix``);
``--fix`` writes the safe ones, ``--unsafe-fixes`` the unsafe ones too (without
it they are counted and named, never written), ``--diff`` prints what would be
written and writes nothing. As ruff does, the report then lists what is left:
a finding whose fix was written is gone from it. The fixes are those notebooks
02, 03 and 04 write by hand (their doctor cells show the diff: :mod:`.preview`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agentstate.doctor.fix.apply import FileEdit, Refused, prepare, unified_diff, write
from agentstate.doctor.fix.plan import Fix, NoFix
from agentstate.doctor.report.findings import Finding

Mode = Literal["fix", "diff"]


def annotate(findings: Iterable[Finding], plans: Iterable[Fix | NoFix]) -> list[Finding]:
    """``findings`` with ``fix`` set from the plans (matched by code and subject)."""
    kinds = {(p.code, p.subject): p.applicability for p in plans if isinstance(p, Fix)}
    return [dataclasses.replace(f, fix=kinds.get((f.code, f.subject))) for f in findings]


@dataclass
class FixRun:
    """What ``--fix`` or ``--diff`` did: the edits, the files left, the unsafe fixes held back."""

    edits: list[FileEdit] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    withheld: list[Fix] = field(default_factory=list)
    diff: str = ""
    written: bool = False

    def fixed(self) -> set[tuple[str, str]]:
        """``(code, subject)`` of every finding an edit removes."""
        return {(f.code, f.subject) for e in self.edits for f in e.fixes}

    def lines(self) -> list[str]:
        """What happened, for stderr: one line per file edited or left, and the unsafe count."""
        verb = "fixed" if self.written else "would fix"
        out = [  # one title per edit: the findings of several subagents may share one
            f"{verb} {len(e.fixes)} finding(s) in {e.file}: "
            + "; ".join(dict.fromkeys(f.title for f in e.fixes))
            for e in self.edits
        ]
        out += [f"not fixed: {r.file}: {r.reason}" for r in self.refused]
        if self.withheld:
            out.append(
                f"{len(self.withheld)} unsafe fix(es) not applied (--unsafe-fixes applies them): "
                + "; ".join(dict.fromkeys(f.title for f in self.withheld))
            )
        return out


def run_fixes(
    plans: Sequence[Fix | NoFix], roots: tuple[Path, ...], mode: Mode, unsafe: bool
) -> FixRun:
    """Prepare every applicable fix; write them (``fix``) or only diff them (``diff``)."""
    fixes = [p for p in plans if isinstance(p, Fix)]
    chosen = [f for f in fixes if f.applicability == "safe" or unsafe]
    run = FixRun(withheld=[f for f in fixes if f not in chosen])
    run.edits, run.refused = prepare(chosen, roots)
    base = roots[0] if roots else None
    run.diff = unified_diff(run.edits, base)
    if mode == "fix":
        late = write(run.edits)
        late_files = {r.file for r in late}
        run.edits = [e for e in run.edits if e.file not in late_files]
        run.refused += late
        run.written = True
    return run
