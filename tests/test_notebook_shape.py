"""Every lesson has the series' shape, and every module says which notebook teaches it.

The shape (CONTRIBUTING.md, ``notebooks/_src/_template.py``) is marked by
``## `` headings in the notebook sources, matched by how they start:

    # NN · Title        first cell: the title, then the story (a paragraph)
    ## Recap            exactly this, once; lesson 01, with nothing to recap, has
                        "## Before you start" (what a reader needs) in its place
    ## Goals            exactly this, once, with a bullet list
    ## Reproduce...     one or more, e.g. "## Reproduce: five fields in one reply"
    ## Look inside...   one or more, after the first Reproduce (before or after the fix)
    ## The fix...       or "## How the fix is written...": after the first Reproduce
    ## Prove...         one or more, after the first fix
    ## Summary          exactly this, once, with a bullet list
    ## Exercises        exactly this, once, last, with a numbered list

A heading may carry a section number ("## 3. The fix: ..."). Other ``## ``
headings (a knob, a side note) may sit anywhere between Goals and
Summary, and a code cell imports ipywidgets (the knob). Module docstrings name
their notebook as "notebook 03" or "notebooks 01-04" (shared modules list
theirs too, or say "every notebook"), and every number named is a notebook
that exists.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "notebooks" / "_src").glob("[0-9][0-9]_*.py"))
TEMPLATE = ROOT / "notebooks" / "_src" / "_template.py"
PACKAGE = ROOT / "src" / "agentstate"
NUMBERS = {p.name[:2] for p in SOURCES}

ORDER = ("recap", "goals", "reproduce", "look inside", "fix", "prove", "summary", "exercises")
STARTS = {
    "recap": ("Recap", "Before you start"),
    "goals": ("Goals",),
    "reproduce": ("Reproduce",),
    "look inside": ("Look inside",),
    "fix": ("The fix", "How the fix is written"),
    "prove": ("Prove",),
    "summary": ("Summary",),
    "exercises": ("Exercises",),
}
# Each section's first heading comes after the first heading of the section named here.
AFTER = {
    "goals": "recap",
    "reproduce": "goals",
    "look inside": "reproduce",
    "fix": "reproduce",
    "prove": "fix",
    "summary": "prove",
    "exercises": "summary",
}
EXACT = {"recap", "goals", "summary", "exercises"}  # the heading is just the word, once
FIRST_LESSON_OPENING = "Before you start"  # lesson 01's recap: there is nothing to recap yet


def exact_heading(name: str, number: str) -> str:
    """The one heading an EXACT section may have in notebook ``number``."""
    return FIRST_LESSON_OPENING if (name, number) == ("recap", "01") else STARTS[name][0]


# Sections a lesson still lacks, by notebook number. An entry must match exactly, so
# whoever adds the section also removes it here.
KNOWN_GAPS: dict[str, set[str]] = {}
NAMED = re.compile(r"\bnotebooks?\s+(\d\d(?:\s*(?:-|–|,|and|to)\s*\d\d)*)", re.I)
EVERY = re.compile(r"\b(every notebook|all notebooks)\b", re.I)


def kind(heading: str) -> str | None:
    for name, starts in STARTS.items():
        if any(heading == s or heading.startswith((f"{s}:", f"{s} ")) for s in starts):
            return name
    return None


def heading_text(line: str) -> str:
    """A level-2 heading's text without its section number: "## 3. The fix: x" -> "The fix: x"."""
    return re.sub(r"^\d+\.\s+", "", line[3:].strip())


def headings(cells) -> list[tuple[int, str, str | None]]:
    """(cell index, heading text, section kind or None) for every level-2 heading."""
    found = []
    for i, cell in enumerate(cells):
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("## "):
                    text = heading_text(line)
                    found.append((i, text, kind(text)))
    return found


def section_text(cells, heading: str) -> str:
    """The markdown from a heading to the next level-2 heading."""
    lines, inside = [], False
    for cell in cells:
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            if line.startswith("## "):
                inside = heading_text(line) == heading
            elif inside:
                lines.append(line)
    return "\n".join(lines)


def shape_problems(path: Path) -> list[str]:
    """Every way the source at ``path`` departs from the shape; [] when it has it."""
    cells = jupytext.read(path, fmt="py:percent").cells
    problems = []
    first = cells[0].source.splitlines() if cells and cells[0].cell_type == "markdown" else []
    number = path.name[:2] if path != TEMPLATE else "NN"
    if not first or not re.fullmatch(rf"# {number} · \S.*", first[0]):
        problems.append(f"first cell must start with '# {number} · Title'")
    elif not any(line.strip() for line in first[1:]):
        problems.append("no story paragraph under the title")
    found = headings(cells)
    firsts = {}
    for position, (_, text, name) in enumerate(found):
        if name is None:
            continue
        firsts.setdefault(name, position)
        if name in EXACT and text != exact_heading(name, number):
            problems.append(f"'## {text}': write it as '## {exact_heading(name, number)}'")
    for name in EXACT:
        count = sum(1 for _, _, n in found if n == name)
        if count > 1:
            problems.append(f"{count} '## {exact_heading(name, number)}' headings, one expected")
    missing = sorted(set(ORDER) - set(firsts))
    if missing:
        problems.append(f"missing sections: {', '.join(missing)}")
    for name, before in AFTER.items():
        if name in firsts and before in firsts and firsts[name] < firsts[before]:
            problems.append(f"'{name}' comes before '{before}'")
    if "summary" in firsts:
        late = [t for _, t, n in found[firsts["summary"] :] if n not in ("summary", "exercises")]
        if late:
            problems.append(f"headings after Summary: {late}")
    if found and found[-1][2] != "exercises":
        problems.append("Exercises must be the last section")
    if "goals" in firsts and not re.search(r"^- ", section_text(cells, "Goals"), re.M):
        problems.append("Goals has no bullet list")
    if "summary" in firsts and not re.search(r"^- ", section_text(cells, "Summary"), re.M):
        problems.append("Summary has no bullet list")
    if "exercises" in firsts and not re.search(r"^1\. ", section_text(cells, "Exercises"), re.M):
        problems.append("Exercises has no numbered list")
    if not any(c.cell_type == "code" and "import ipywidgets" in c.source for c in cells):
        problems.append("no knob: no code cell imports ipywidgets")
    return problems


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_notebook_source_has_the_shape(path):
    problems = shape_problems(path)
    gaps = KNOWN_GAPS.get(path.name[:2])
    if gaps:
        known = f"missing sections: {', '.join(sorted(gaps))}"
        assert known in problems, f"{path.name} now has {gaps}: remove it from KNOWN_GAPS"
        problems.remove(known)
    assert problems == [], f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(problems)


def test_template_has_the_shape_and_is_not_built():
    assert shape_problems(TEMPLATE) == []
    assert TEMPLATE not in SOURCES  # the build script globs NN_*.py only


def test_shape_check_catches_a_broken_source(tmp_path):
    """The check is not vacuous: rename, swap and drop parts of the template."""
    text = TEMPLATE.read_text().replace("## Summary", "## Wrap-up").replace("import ipywidgets", "")
    text = (
        text.replace("## Recap", "## TMP")
        .replace("## Goals", "## Recap")
        .replace("## TMP", "## Goals")
    )
    broken = tmp_path / "07_broken.py"
    broken.write_text(text.replace("# NN · ", "# 07 · "))
    problems = shape_problems(broken)
    assert "missing sections: summary" in problems
    assert "'goals' comes before 'recap'" in problems
    assert "no knob: no code cell imports ipywidgets" in problems


def test_only_lesson_01_opens_with_before_you_start(tmp_path):
    """Lesson 01 has nothing to recap: it, and only it, says "Before you start" instead."""
    text = TEMPLATE.read_text()
    later, first = tmp_path / "07_later.py", tmp_path / "01_first.py"
    later.write_text(text.replace("# NN · ", "# 07 · ").replace("## Recap", "## Before you start"))
    first.write_text(text.replace("# NN · ", "# 01 · "))
    assert shape_problems(later) == ["'## Before you start': write it as '## Recap'"]
    assert shape_problems(first) == ["'## Recap': write it as '## Before you start'"]


def named_notebooks(docstring: str) -> set[str]:
    """The notebook numbers a docstring names; "every notebook" names them all."""
    named = {n for group in NAMED.findall(docstring) for n in re.findall(r"\d\d", group)}
    return named | NUMBERS if EVERY.search(docstring) else named


def test_every_module_docstring_names_its_notebook():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        named = named_notebooks(docstring)
        first_line = docstring.splitlines()[0] if docstring else "(no docstring)"
        if not named:
            offenders.append(f"{path.relative_to(ROOT)}: names no notebook: {first_line!r}")
        elif named - NUMBERS:
            unknown = ", ".join(sorted(named - NUMBERS))
            offenders.append(f"{path.relative_to(ROOT)}: names missing notebooks: {unknown}")
    assert offenders == [], (
        f"{len(offenders)} module docstrings must say which notebook teaches them "
        "('notebook 03', 'notebooks 01-04'):\n  " + "\n  ".join(offenders)
    )


def test_docstring_check_reads_ranges_and_lists():
    assert named_notebooks("Used by notebooks 01-04 and notebook 06.") == {"01", "04", "06"}
    assert named_notebooks("Shared by notebooks 01, 03 and 05.") == {"01", "03", "05"}
    assert named_notebooks("Notebook 05 only.") == {"05"}
    assert named_notebooks("Used by every notebook.") == NUMBERS
    assert named_notebooks("Stage 05 only, taught in the fifth notebook.") == set()
