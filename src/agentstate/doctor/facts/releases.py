"""Which hazards depend on the reader's installed release, and where each one ends.

The series' reproductions (:mod:`agentstate.hazards`) ran against many releases
(``scripts/hazards_by_version.py`` -> ``data/results/hazards_by_version.json``
-> ``docs/hazards-by-version.md``). Where a release stopped a hazard, a
:class:`Boundary` here records the last release that reproduced it and the first
that refused or fixed it, so a check reports the hazard only where it can
happen and names the release that ends it. ``tests/test_doctor_releases.py``
checks every boundary against that data file.

The reader's release is read from the installed distribution's metadata
(:func:`installed_version`), never by importing the library. Taught in
notebook 01 (deepagents' own file tools).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import metadata
from typing import Literal

PAGE = "docs/hazards-by-version.md"
"""The matrix's page; a boundary links its row (``PAGE#<hazard>``)."""


@dataclass(frozen=True)
class Boundary:
    """One hazard that a release of one library ended, as the matrix recorded it."""

    hazard: str
    """The matrix's row (:data:`agentstate.hazards.HAZARDS`' name)."""
    code: str
    """The doctor code whose finding depends on the release."""
    distribution: str
    """The library whose release decides it (a distribution name, as pip spells it)."""
    last_reproduced: str
    """The newest release the matrix saw reproduce the hazard."""
    first_changed: str
    """The oldest release the matrix saw refuse or fix it."""
    outcome: Literal["refused", "fixed"]
    """What :attr:`first_changed` and later releases do."""
    tools: tuple[str, ...]
    """The library's own tools the hazard is about (its guard names them)."""

    @property
    def page(self) -> str:
        """The hazard's row on the matrix's page."""
        return f"{PAGE}#{self.hazard}"

    def applies(self, version: str) -> bool:
        """True when ``version`` of :attr:`distribution` still has the hazard."""
        return release(version) < release(self.first_changed)


BUILTIN_PARALLEL_EDIT = Boundary(
    hazard="builtin-parallel-edit",
    code="file-read-modify-write",
    distribution="deepagents",
    last_reproduced="0.7.15",
    first_changed="0.7.16",
    outcome="refused",
    tools=("edit_file", "write_file", "delete"),
)
"""deepagents' own ``write_file``, ``edit_file`` and ``delete`` (``_FILE_MUTATION_TOOLS``
of ``deepagents/middleware/filesystem.py``): before 0.7.16 parallel mutations of one
path in one reply each read the file from before the reply and one survives (the matrix:
five ``edit_file`` calls, all "success", one edit in the file); from 0.7.16 on the
second and later mutations of a path in one reply are refused with an error."""

LIST_RETURNED_UNCHANGED = Boundary(
    hazard="list-returned-unchanged",
    code="list-doubled-by-subagent",
    distribution="deepagents",
    last_reproduced="0.7.23",
    first_changed="0.7.24",
    outcome="fixed",
    tools=("task",),
)
"""deepagents' ``task`` tool: before 0.7.24 it hands back every key a subagent declares, so an
``operator.add`` list the subagent never wrote comes back whole and the parent appends it
again; from 0.7.24 on it drops a key the subagent returns unchanged (``_is_unchanged`` in
``deepagents/middleware/subagents.py``), so only a subagent that writes the list doubles it."""

BOUNDARIES: dict[str, Boundary] = {
    b.hazard: b for b in (BUILTIN_PARALLEL_EDIT, LIST_RETURNED_UNCHANGED)
}
"""Every hazard the matrix saw a release end, by its row name."""

_RELEASE = re.compile(r"\s*v?(\d+(?:\.\d+)*)(.*)$", re.IGNORECASE)
_BEFORE = re.compile(r"[-_.]?(a|alpha|b|beta|c|rc|pre|preview|dev)\d*", re.IGNORECASE)


def release(version: str) -> tuple[tuple[int, ...], int]:
    """A version as something to compare: its release numbers, then 0 for a pre-release
    or development release (it comes before its release), 1 otherwise.

    ``0.7.16rc1 < 0.7.16 == 0.7.16.0 < 0.7.16.post1``'s order, as far as a boundary needs it
    (a post-release counts as its release). Raises ``ValueError`` for a version with no
    release number.
    """
    found = _RELEASE.match(version)
    if found is None:
        raise ValueError(f"not a version: {version!r}")
    numbers = [int(n) for n in found.group(1).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    rest = found.group(2)
    return tuple(numbers), 0 if _BEFORE.match(rest) else 1


@functools.cache
def installed_version(distribution: str) -> str | None:
    """The installed release of ``distribution`` (None when it is not installed).

    Read once per process (0.7 ms a lookup, once per subagent otherwise): the library a
    graph runs is the one imported at start, whatever pip installs later.
    """
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
