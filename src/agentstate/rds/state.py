"""State schemas for the RDS agent: the broken plain key and the reducer fix.

- :class:`PlainRequirementsState`: ``requirements`` is a plain dict, so two
  writes in one super-step raise ``InvalidUpdateError`` and writes in later
  steps replace the whole dict (notebook 02 shows both).
- :class:`RdsAgentState`: ``requirements`` merges field by field through
  :func:`merge_requirements`, a pure reducer (LangGraph may call it more than
  once per write, on throwaway copies).
Both extend deepagents' ``DeepAgentState`` so ``files`` keeps its own reducer.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from deepagents import DeepAgentState


def merge_requirements(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Field-level merge: keys of ``right`` win, nothing else is lost; inputs are not mutated."""
    return {**(left or {}), **(right or {})}


class PlainRequirementsState(DeepAgentState):
    """The naive schema: one value per step, last write replaces the dict."""

    requirements: NotRequired[dict[str, Any]]


class RdsAgentState(DeepAgentState):
    """The fixed schema: parallel writes to ``requirements`` merge field by field."""

    requirements: Annotated[NotRequired[dict[str, Any]], merge_requirements]
