"""Each code's page, for ``agentstate doctor --explain CODE`` (as ``ruff rule`` prints a rule's).

The pages are ``docs/doctor/*.md``, the one source: the wheel carries them as
package data (``agentstate/doctor/pages/``, copied at build time by
``pyproject.toml``'s ``force-include``), and a checkout reads them where they
are, so the docs and the installed package cannot say different things
(``tests/test_doctor_explain.py`` builds the wheel and compares). The hazards
are taught in notebooks 01-06.
"""

from __future__ import annotations

from pathlib import Path

PACKAGED = Path(__file__).resolve().parent / "pages"
CHECKOUT = Path(__file__).resolve().parents[3] / "docs" / "doctor"


def folder() -> Path | None:
    """Where the pages are: the package's own copy (a wheel), else the checkout's docs."""
    for candidate in (PACKAGED, CHECKOUT):
        if (candidate / "README.md").is_file():
            return candidate
    return None


def reference(code: str) -> str:
    """How a reader with only the package reads why ``code`` matters and its fix."""
    return f"agentstate doctor --explain {code}"


def page(code: str) -> str | None:
    """The page of ``code`` (Markdown), or None when this installation has none."""
    where = folder()
    if where is None or "/" in code or "\\" in code or code.startswith("."):
        return None
    path = where / f"{code}.md"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None
