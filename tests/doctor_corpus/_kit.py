"""What every corpus graph declares: its shape, the public project it follows, its verdict,
and a scripted run that proves the verdict (never the doctor's own output)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.errors import InvalidUpdateError

from agentstate.models import ScriptedChatModel

USER = {"messages": [{"role": "user", "content": "go"}]}


@dataclass(frozen=True)
class Proof:
    """What a scripted run showed: the hazards it reproduced and how."""

    hazards: frozenset[str]
    how: str


@dataclass(frozen=True)
class Case:
    """One graph of the corpus."""

    shape: str
    follows: str
    """The public project whose shape it follows (no code copied)."""
    expected: frozenset[str]
    """The hazard codes a run reproduces (empty: a run shows none can happen)."""
    build: Callable[[], Any]
    prove: Callable[[], Proof]
    watch: Callable[[], Any] | None = None
    """A run under ``Watch`` returning its report, where static analysis cannot tell."""

    @property
    def origin(self) -> str:
        """``langchain-ai`` (LangChain's own repositories, docs and course: a ``follows`` that
        names ``langchain-ai/`` or starts with LangGraph or LangChain) or ``third-party``."""
        own = "langchain-ai/" in self.follows or self.follows.startswith(("LangGraph", "LangChain"))
        return "langchain-ai" if own else "third-party"


def case(
    shape: str,
    follows: str,
    expected: set[str] | frozenset[str],
    build: Callable[[], Any],
    prove: Callable[[], Proof],
    watch: Callable[[], Any] | None = None,
) -> Case:
    return Case(shape, follows, frozenset(expected), build, prove, watch)


def scripted(*replies: AIMessage | Callable[[list[Any]], AIMessage]) -> ScriptedChatModel:
    """A scripted model playing ``replies`` in order."""
    return ScriptedChatModel(script=list(replies))


def raises_invalid_update(run: Callable[[], object], *keys: str) -> bool:
    """True when ``run`` raises LangGraph's InvalidUpdateError for one of ``keys``."""
    try:
        run()
    except InvalidUpdateError as err:
        return any(f"'{key}'" in str(err) for key in keys)
    return False


def shown(code: str, happened: bool, how: str) -> Proof:
    """A proof of ``code`` if ``happened``, else of none (``how`` says what the run showed)."""
    return Proof(frozenset({code}) if happened else frozenset(), how)


def none(how: str) -> Proof:
    """A run that shows the hazard cannot happen."""
    return Proof(frozenset(), how)
