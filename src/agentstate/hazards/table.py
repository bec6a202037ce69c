"""docs/hazards-by-version.md, rendered from data/results/hazards_by_version.json.

Kept in the package beside the hazards so the page, the data and the list of
hazards cannot drift: tests/test_hazards.py renders the page from the data
and compares. Taught by notebooks 01-06 (each lesson links to its row).
"""

from __future__ import annotations

from typing import Any

from agentstate.hazards.registry import HAZARDS

WORDS = {"reproduced": "reproduced", "refused": "refused", "fixed": "fixed", "unavailable": "n/a"}
LIBS = ("langgraph", "langchain", "langchain-core", "deepagents")


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render_page(data: dict[str, Any]) -> str:
    """The whole page for the matrix ``data`` (as scripts/hazards_by_version.py writes it)."""
    ran = [s for s in data["sets"] if "results" in s]
    skipped = [s for s in data["sets"] if "skipped" in s]
    p = data["provenance"]
    lines = [
        "# Which releases each hazard lives in",
        "",
        "Each lesson reproduces a hazard with the tutorial's pinned libraries. Here the same",
        "reproductions (`agentstate.hazards`, one function per hazard, a run with the scripted",
        "model, never the doctor's opinion) ran against other releases. To ask your own",
        "environment: `agentstate hazards` (or `python -m agentstate.hazards`; `--json` for",
        "scripts).",
        "",
        "- **reproduced**: the hazard happens (a write lost or doubled, an error raised after the",
        "  tools ran, a reader blind to its batch, a prefix broken).",
        "- **refused**: the library stops it with an error the model can read and act on.",
        "- **fixed**: nothing is lost or doubled any more.",
        "- **n/a**: the reproduction needs an API these releases lack.",
        "",
        f"Run on {p['date']} by `{p['command']}` on {p['cores']} cores ({p['cpu']}),",
        f"Python {ran[0]['versions']['python'] if ran else p['python']}; this page is rendered",
        "from `data/results/hazards_by_version.json`"
        " (`scripts/hazards_by_version.py --write-docs`).",
        "",
        "## The matrix",
        "",
        _row(["lesson", "hazard", *(f"`{s['name']}`" for s in ran)]),
        "|" + "---|" * (2 + len(ran)),
    ]
    for h in HAZARDS:
        cells = [
            WORDS[s["results"][h.name]["outcome"]] if h.name in s["results"] else "-" for s in ran
        ]
        row_id = f'<a id="{h.name}"></a>'
        lines.append(_row([h.lesson, f"{row_id}[{h.name}](#runs-of-{h.name})", *cells]))
    lines += [
        "",
        "## The version sets",
        "",
        _row(["set", "why", *LIBS]),
        "|" + "---|" * (2 + len(LIBS)),
    ]
    for s in ran:
        lines.append(_row([f"`{s['name']}`", s["why"], *(s["versions"].get(k, "-") for k in LIBS)]))
    if skipped:
        lines += ["", "Skipped:", ""]
        lines += [f"- `{s['name']}` ({s['why']}): {s['skipped']}" for s in skipped]
    lines += ["", "## What each run showed", ""]
    for h in HAZARDS:
        lines.append(f"### Runs of {h.name}")
        lines.append("")
        code = f" The doctor's code: `{h.code}`." if h.code else ""
        lines.append(f"Lesson {h.lesson}: {h.summary}.{code}")
        lines.append("")
        seen: dict[str, list[str]] = {}
        for s in ran:
            r = s["results"].get(h.name)
            if r:
                seen.setdefault(f"{WORDS[r['outcome']]}: {r['evidence']}", []).append(s["name"])
        for said, where in seen.items():
            lines.append(f"- {said} ({', '.join(f'`{n}`' for n in where)})")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
