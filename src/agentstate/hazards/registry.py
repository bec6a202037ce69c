"""What a hazard is, what a run of it returns, and the list of them all (notebooks 01-06).

A reproduction needs only the libraries it names in ``needs``; the modules
that import deepagents are imported when their hazard runs, so the core's
hazards run where deepagents is missing (they are reported ``unavailable``
with the reason).
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Literal

Outcome = Literal["reproduced", "refused", "fixed", "unavailable"]
"""reproduced: the hazard happens; refused: the library stops it with an error the model
or caller sees; fixed: nothing is lost or doubled any more; unavailable: the API the
reproduction needs is missing in these versions (the evidence says which)."""

LIBRARIES = ("langgraph", "langchain", "langchain-core", "deepagents", "pydantic")
"""The distributions whose versions decide the outcomes (recorded with every run)."""


@dataclass(frozen=True)
class Result:
    """What one run of a reproduction showed."""

    hazard: str
    outcome: Outcome
    evidence: str
    """One line a reader can check: the counts or the error the run produced."""

    def as_dict(self) -> dict[str, str]:
        """The result as JSON-ready fields."""
        return asdict(self)


@dataclass(frozen=True)
class Hazard:
    """One hazard of the series: where it is taught and how it is reproduced."""

    name: str
    lesson: str
    """The notebook that teaches it, e.g. ``"02"``."""
    summary: str
    """What happens, in one line."""
    code: str | None
    """The ``agentstate doctor`` code that finds it in a reader's graph, if any."""
    needs: tuple[str, ...]
    """The distributions the reproduction imports beyond the core."""
    target: str = field(repr=False)
    """``module:function`` of the reproduction (imported when it runs)."""

    def run(self) -> Result:
        """Run the reproduction; a missing library or API is ``unavailable``, never a crash."""
        for dist in self.needs:
            try:
                metadata.version(dist)
            except metadata.PackageNotFoundError:
                return Result(self.name, "unavailable", f"{dist} is not installed")
        module, func = self.target.split(":")
        try:
            reproduce: Callable[[], Result] = getattr(importlib.import_module(module), func)
            return reproduce()
        except (ImportError, AttributeError, TypeError) as exc:
            where = traceback.extract_tb(exc.__traceback__)[-1]
            return Result(
                self.name,
                "unavailable",
                f"{type(exc).__name__}: {exc} ({where.filename.rsplit('/', 1)[-1]}:{where.lineno})",
            )


_M = "agentstate.hazards"
HAZARDS: tuple[Hazard, ...] = (
    Hazard(
        "file-read-modify-write",
        "01",
        "five tools that read /requirements.json, add a field and write it back keep one field",
        "file-read-modify-write",
        ("deepagents",),
        f"{_M}.files:custom_tool_rewrites_the_file",
    ),
    Hazard(
        "builtin-parallel-edit",
        "01",
        "five edit_file calls of deepagents' own, one line each, on one file in one reply",
        "file-read-modify-write",  # below the release that refuses (doctor.facts.releases)
        ("deepagents",),
        f"{_M}.files:builtin_edits_of_one_file",
    ),
    Hazard(
        "plain-key-parallel-write",
        "02",
        "five tool calls of one reply write a key with no reducer",
        "unreduced-parallel-write",
        (),
        f"{_M}.writes:plain_key_parallel_write",
    ),
    Hazard(
        "replace-reducer",
        "02",
        "a reducer that replaces the value keeps one write of five",
        None,
        (),
        f"{_M}.writes:replace_reducer_keeps_one",
    ),
    Hazard(
        "undeclared-key",
        "02",
        "a tool's Command writes a key the state does not declare",
        "undeclared-key",
        (),
        f"{_M}.writes:undeclared_key_dropped",
    ),
    Hazard(
        "same-batch-read",
        "03",
        "a reader in its writers' own reply, waiting for them, sees the state from before",
        "same-batch-read",
        (),
        f"{_M}.writes:same_batch_reader_is_blind",
    ),
    Hazard(
        "subagent-drops-key",
        "04",
        "a subagent writes a key its own schema lacks; the parent sees nothing",
        "subagent-drops-key",
        ("deepagents",),
        f"{_M}.subagents:subagent_drops_key",
    ),
    Hazard(
        "list-doubled-by-subagent",
        "04",
        "a subagent hands back the whole operator.add list; the parent's items double",
        "list-doubled-by-subagent",
        ("deepagents",),
        f"{_M}.subagents:list_doubled_by_subagent",
    ),
    Hazard(
        "list-returned-unchanged",
        "04",
        "a subagent hands back the operator.add list it never wrote; the parent's items double",
        "list-doubled-by-subagent",  # below the release that drops it (doctor.facts.releases)
        ("deepagents",),
        f"{_M}.subagents:list_returned_unchanged",
    ),
    Hazard(
        "prefix-not-invariant",
        "05",
        "a clock line before the manual: two calls' prompts part before the manual starts",
        "prefix-not-invariant",
        (),
        f"{_M}.prompts:clock_before_the_manual",
    ),
    Hazard(
        "memory-in-react-loop",
        "06",
        "a ReAct loop with a memory tool stores agent text and a message twice (a replay)",
        "memory-in-react-loop",
        (),
        f"{_M}.memory:react_loop_memory",
    ),
)
"""Every hazard of the series, in lesson order."""


def reproduced_unless(held: bool) -> Outcome:
    """``fixed`` when what the hazard loses or doubles ``held``, else ``reproduced``."""
    return "fixed" if held else "reproduced"


def hazard(name: str) -> Hazard:
    """The hazard called ``name`` (KeyError with the known names otherwise)."""
    for h in HAZARDS:
        if h.name == name:
            return h
    raise KeyError(f"no hazard {name!r}; known: {', '.join(h.name for h in HAZARDS)}")


def run_all(names: Iterable[str] | None = None) -> list[Result]:
    """Run every hazard (or those named), in lesson order."""
    chosen = HAZARDS if names is None else tuple(hazard(n) for n in names)
    return [h.run() for h in chosen]


def installed_versions() -> dict[str, str]:
    """The versions of :data:`LIBRARIES` installed here (``"-"`` for a missing one)."""
    found: dict[str, str] = {}
    for dist in LIBRARIES:
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = "-"
    return found


def results_json(results: Iterable[Result]) -> list[dict[str, str]]:
    """``results`` as JSON-ready dicts, in order."""
    return [r.as_dict() for r in results]
