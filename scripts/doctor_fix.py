"""``agentstate doctor --fix`` on the corpus, each fix proven by the run that proved the hazard.

For every corpus graph (``tests/doctor_corpus``) whose hazard is of a code with
an automatic fix: copy the corpus into a fresh folder, diagnose the graph there
and write its fixes (``--unsafe-fixes`` included) into the copy, then, in a new
process that imports the fixed code, run the same scripted proof that showed
the hazard and diagnose again. A fix counts as proven when the run no longer
shows the hazard, shows every other hazard it showed before and no new one, and the
doctor no longer reports the code (nor any code it did not report before). Per
code and per corpus half (langchain-ai / third-party): hazards found, fixes
offered, fixes applied, fixes proven.

    python scripts/doctor_fix.py            # print the table
    python scripts/doctor_fix.py --write    # and record data/results/doctor_fix.json,
                                            # rendered into docs/doctor/fixes.md
    python scripts/doctor_fix.py --render   # only re-render the page from the data
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "data" / "results" / "doctor_fix.json"
PAGE = ROOT / "docs" / "doctor" / "fixes.md"
sys.path.insert(0, str(ROOT / "src"))
from agentstate.doctor.fix.plan import FIXABLE  # noqa: E402 - the codes with an automatic edit

# Run in the copy: diagnose one case, write its fixes, print what happened as JSON.
_FIX = """
import json, sys
from pathlib import Path
from agentstate.doctor import diagnose
from agentstate.doctor.facts.graph_facts import graph_facts
from agentstate.doctor.fix.command import run_fixes
from agentstate.doctor.fix.plan import Fix, NoFix, plan
from tests.doctor_corpus import CASES
case = next(c for c in CASES if c.shape == sys.argv[1])
graph = case.build()
report = diagnose(graph)
plans = plan(graph_facts(graph), report.findings, (Path.cwd(),))
run = run_fixes(plans, (Path.cwd(),), "fix", unsafe=True)
print(json.dumps({
    "found": sorted({f.code for f in report.findings if f.severity != "info"}),
    "offered": sorted({p.code for p in plans if isinstance(p, Fix)}),
    "kinds": sorted({f"{p.code}:{p.applicability}" for p in plans if isinstance(p, Fix)}),
    "applied": sorted({f.code for e in run.edits for f in e.fixes}),
    "refused": [r.reason for r in run.refused],
    "no_fix": [f"{p.code} {p.subject}: {p.reason}" for p in plans if isinstance(p, NoFix)],
    "diff": run.diff,
}))
"""

# Run in a new process on the fixed copy: the case's own proof, and the doctor again.
_PROVE = """
import json, sys
from agentstate.doctor import diagnose
from tests.doctor_corpus import CASES
case = next(c for c in CASES if c.shape == sys.argv[1])
proof = case.prove()
print(json.dumps({
    "hazards": sorted(proof.hazards),
    "how": proof.how,
    "doctor": sorted({f.code for f in diagnose(case.build()).findings if f.severity != "info"}),
}))
"""


def _run(code: str, shape: str, cwd: Path) -> dict[str, Any]:
    env_path = f"{cwd}:{ROOT / 'src'}"
    done = subprocess.run(
        [sys.executable, "-c", code, shape],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**_env(), "PYTHONPATH": env_path},
    )
    if done.returncode != 0:
        raise RuntimeError(f"{shape}: {done.stderr.strip().splitlines()[-1:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _copy(into: Path) -> None:
    (into / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "__init__.py", into / "tests" / "__init__.py")
    shutil.copytree(
        ROOT / "tests" / "doctor_corpus",
        into / "tests" / "doctor_corpus",
        ignore=shutil.ignore_patterns("__pycache__"),
    )


def fixable_cases() -> list[Any]:
    """The corpus graphs whose proven hazards include a code with an automatic fix."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.doctor_corpus import CASES

    return [c for c in CASES if c.expected & set(FIXABLE)]


def prove_case(case: Any) -> dict[str, Any]:
    """Fix one corpus graph in a copy and prove the fix by its run; the record of it."""
    with tempfile.TemporaryDirectory(prefix="doctor-fix-") as folder:
        here = Path(folder)
        _copy(here)
        before = _run(_PROVE, case.shape, here)
        fixed = _run(_FIX, case.shape, here)
        after = _run(_PROVE, case.shape, here)
    gone = {
        code: code in before["hazards"]
        and code not in after["hazards"]
        and code not in after["doctor"]
        for code in fixed["applied"]
    }
    # nothing else changed: every other hazard still shown, no new one by the run or the doctor
    kept = set(before["hazards"]) - set(fixed["applied"]) == set(after["hazards"])
    kept = kept and set(after["doctor"]) <= set(fixed["found"])
    return {
        "shape": case.shape,
        "origin": case.origin,
        "expected": sorted(case.expected & set(FIXABLE)),
        "found": [c for c in fixed["found"] if c in FIXABLE],
        "offered": fixed["offered"],
        "kinds": fixed["kinds"],
        "applied": fixed["applied"],
        "proven": sorted(code for code, ok in gone.items() if ok and kept),
        "refused": fixed["refused"],
        "no_fix": fixed["no_fix"],
        "run_before": before["how"],
        "run_after": after["how"],
        "diff": fixed["diff"],
    }


def table(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per code and corpus half: hazards, found, offered, applied, proven."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        for code in r["expected"]:
            row = rows.setdefault(
                (code, r["origin"]),
                {
                    "code": code,
                    "origin": r["origin"],
                    "hazards": 0,
                    "found": 0,
                    "offered": 0,
                    "applied": 0,
                    "proven": 0,
                },
            )
            row["hazards"] += 1
            for what in ("found", "offered", "applied", "proven"):
                row[what] += code in r[what]
    return [rows[k] for k in sorted(rows)]


def markdown(rows: list[dict[str, Any]]) -> str:
    head = "| code | corpus half | hazards | found | fixes offered | applied | proven by the run |"
    lines = [head, "|:--|:--|--:|--:|--:|--:|--:|"]
    for r in rows:
        lines.append(
            f"| `{r['code']}` | {r['origin']} | {r['hazards']} | {r['found']} | {r['offered']} "
            f"| {r['applied']} | {r['proven']} |"
        )
    return "\n".join(lines)


def per_graph(records: Iterable[dict[str, Any]]) -> str:
    """One row per corpus graph: what the fix did, or why there was none."""
    lines = ["| corpus graph | half | outcome |", "|:--|:--|:--|"]
    for r in records:
        if r["proven"]:
            pairs = [k.split(":") for k in r["kinds"]]
            kinds = ", ".join(
                kind if len(pairs) == 1 else f"`{code}` {kind}" for code, kind in pairs
            )
            outcome = f"fixed ({kinds}) and proven by its run"
        elif r["applied"]:
            outcome = "fixed, NOT proven by its run"
        elif r["no_fix"]:
            reasons = dict.fromkeys(w.split(": ", 1)[1] for w in r["no_fix"])  # one per key
            outcome = "no edit: " + "; ".join(reasons)
        elif not r["found"]:
            outcome = "not found by the static doctor (Watch finds it at run time)"
        else:
            outcome = "; ".join(r["refused"]) or "no edit"
        lines.append(f"| {r['shape']} | {r['origin']} | {outcome.replace('|', '/')} |")
    return "\n".join(lines)


def render_page(data: dict[str, Any]) -> str:
    """The generated block of docs/doctor/fixes.md."""
    tabled = {r["code"] for r in data["table"]}
    absent = [c for c in data.get("codes", []) if c not in tabled]
    note = (
        f"No corpus graph has {', '.join(f'`{c}`' for c in absent)}: its fix is proven by the "
        "scripted runs of `tests/test_doctor_fix_agents.py`.\n\n"
        if absent
        else ""
    )
    return (
        "<!-- generated:doctor_fix -->\n"
        f"{markdown(data['table'])}\n\n"
        f"{note}"
        f"{per_graph(data['records'])}\n\n"
        f"Recorded by `python scripts/doctor_fix.py --write` ({len(data['records'])} corpus "
        "graphs whose hazard has an automatic fix).\n"
        "<!-- /generated:doctor_fix -->"
    )


def replace_block(page: str, block: str) -> str:
    start, end = (
        page.index("<!-- generated:doctor_fix -->"),
        page.index("<!-- /generated:doctor_fix -->"),
    )
    return page[:start] + block + page[end + len("<!-- /generated:doctor_fix -->") :]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="record and render the results")
    parser.add_argument(
        "--render", action="store_true", help="only re-render the page from the recorded data"
    )
    args = parser.parse_args(argv)
    if args.render:
        data = json.loads(RESULTS.read_text(encoding="utf-8"))
        PAGE.write_text(replace_block(PAGE.read_text(encoding="utf-8"), render_page(data)))
        return 0
    records = []
    for case in fixable_cases():
        record = prove_case(case)
        records.append(record)
        print(f"{case.shape}: applied {record['applied']}, proven {record['proven']}", flush=True)
        for why in record["refused"] + record["no_fix"]:
            print(f"    {why}", flush=True)
    data = {"codes": list(FIXABLE), "records": records, "table": table(records)}
    print(markdown(data["table"]))
    if args.write:
        RESULTS.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        PAGE.write_text(replace_block(PAGE.read_text(encoding="utf-8"), render_page(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
