"""Each code's page, for ``agentstate doctor --explain CODE`` (as ``ruff rule`` prints a rule's).

The pages are ``docs/doctor/*.md``, the one source: the wheel carries them as
package data (``agentstate/doctor/pages/``, copied at build time by
``pyproject.toml``'s ``force-include``), and a checkout reads them where they
are, so the docs and the installed package cannot say different things
(``tests/test_doctor_explain.py`` builds the wheel and compares). A page's
relative links are printed as paths a terminal opens (:func:`resolved`): the
absolute path of a file that is there, else its path in agentstate's
repository. The hazards are taught in notebooks 01-06.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

LINK = re.compile(r"\[([^\]\n]+)\]\(([^()\s]+)\)")
"""A Markdown link ``[text](target)`` (no parentheses or spaces in the target)."""

REPOSITORY_FOLDER = "docs/doctor"
"""Where the pages live in agentstate's repository (a link's path when the file is not here)."""

PACKAGED = Path(__file__).resolve().parents[1] / "pages"  # the wheel's copy, beside the doctor
CHECKOUT = Path(__file__).resolve().parents[4] / "docs" / "doctor"


def folder() -> Path | None:
    """Where the pages are: the package's own copy (a wheel), else the checkout's docs."""
    for candidate in (PACKAGED, CHECKOUT):
        if (candidate / "README.md").is_file():
            return candidate
    return None


def reference(code: str) -> str:
    """How a reader with only the package reads why ``code`` matters and its fix."""
    return f"agentstate doctor --explain {code}"


def resolved(text: str, page: Path) -> str:
    """``text`` with each relative link of ``page`` made one a terminal resolves.

    ``[a](other.md#x)`` -> ``[a](/abs/.../other.md#x)`` when the file is there,
    else its path in agentstate's repository (``[Notebook 02](notebooks/02_...ipynb)``,
    which a wheel does not carry); a URL is left as it is.
    """

    def one(match: re.Match[str]) -> str:
        label, target = match.groups()
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            return match.group(0)  # a URL (https:, mailto:)
        path, sep, fragment = target.partition("#")
        file = (page.parent / path) if path else page
        if file.exists():
            shown = str(file.resolve())
        else:
            shown = os.path.normpath(f"{REPOSITORY_FOLDER}/{path or page.name}")
        return f"[{label}]({shown}{sep}{fragment})"

    return LINK.sub(one, text)


def page(code: str) -> str | None:
    """The page of ``code`` (Markdown, its links resolved), or None when there is none."""
    where = folder()
    if where is None or "/" in code or "\\" in code or code.startswith("."):
        return None
    path = where / f"{code}.md"
    try:
        return resolved(path.read_text(encoding="utf-8"), path)
    except OSError:
        return None
