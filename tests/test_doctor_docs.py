"""Each page of ``docs/doctor/`` runs: its failing code shows the code, its fixed code does not."""

from __future__ import annotations

import linecache
import re
from pathlib import Path
from typing import Any

import pytest

from agentstate.doctor import CODES
from agentstate.doctor.report.findings import NOTEBOOKS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "doctor"


def block(page: str, heading: str) -> str:
    section = page.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def execute(code: str, name: str) -> dict[str, Any]:
    """Execute a docs block as a reader would paste it (source visible, as in Jupyter)."""
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    namespace: dict[str, Any] = {"__name__": name}
    exec(compile(code, name, "exec", dont_inherit=True), namespace)
    return namespace


def run(code: str, name: str) -> Any:
    """The ``report`` a docs block leaves."""
    return execute(code, name)["report"]


# what a page's code imports beyond the core -> the extra that installs it (`make ends`)
PAGE_EXTRAS = {"deepagents": "deepagents", "agentstate.experts": "experts"}


def page_extras(code: str) -> list[str]:
    page = (DOCS / f"{code}.md").read_text()
    return [extra for lib, extra in PAGE_EXTRAS.items() if f"from {lib} import" in page]


@pytest.mark.parametrize(
    "code", [pytest.param(c, marks=pytest.mark.extras(*page_extras(c))) for c in CODES]
)
def test_the_page_of_each_code_fails_then_passes(code):
    page = (DOCS / f"{code}.md").read_text()
    assert page.startswith(f"# `{code}` ({CODES[code].severity}, notebook {CODES[code].notebook}")
    failing = run(block(page, "The failing code"), f"<docs/doctor/{code}.md: failing>")
    fixed = run(block(page, "The fix"), f"<docs/doctor/{code}.md: fix>")
    if CODES[code].severity == "info":  # codes() holds errors and warnings
        assert code in {f.code for f in failing}
        assert code not in {f.code for f in fixed} and fixed.errors == []
    else:
        assert code in failing.codes()
        assert code not in fixed.codes() and fixed.errors == []
    lesson = page.split("\n## The lesson\n", 1)[1]
    assert f"../../notebooks/{NOTEBOOKS[CODES[code].notebook]}.ipynb" in lesson
    assert (ROOT / "notebooks" / f"{NOTEBOOKS[CODES[code].notebook]}.ipynb").is_file()


def test_the_index_lists_every_code_with_its_page():
    index = (DOCS / "README.md").read_text()
    for code, known in CODES.items():
        assert f"| [`{code}`]({code}.md) | {known.severity} | {known.notebook} |" in index


def test_the_readme_sends_readers_to_the_doctor():
    readme = (ROOT / "README.md").read_text()
    own, check, more = (readme.index(h) for h in (
        "## Use it in your own agent", "## Check your own agent", "## More"
    ))  # fmt: skip
    assert own < check < more
    section = readme[check:more]
    assert "agentstate doctor" in section and "](docs/doctor/README.md)" in section
    assert "(docs/doctor/README.md)" in readme[more:]


@pytest.mark.extras("experts")
def test_the_prefix_page_quotes_what_watch_and_the_benchmark_say():
    """Its comment quotes Watch's evidence and its lesson the recorded cold/warm ratios."""
    from agentstate.experts.results import load_results

    page = (DOCS / "prefix-not-invariant.md").read_text()
    report = run(block(page, "The failing code"), "<docs/doctor/prefix-not-invariant.md>")
    shared = re.search(r"the next [\d,]+ characters are the same", report.findings[0].evidence[0])
    assert shared and shared[0] in page
    sizes = load_results()["sizes"]
    ratios = [s["warm_cold_ratio"] for s in sizes]
    tokens = [s["prefix_tokens"] for s in sizes]
    quoted = f"{min(ratios)}-{max(ratios)}x"
    assert quoted in page and f"{min(tokens):,}-{max(tokens):,}-token" in page
