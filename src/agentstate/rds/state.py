"""State schemas for the RDS agent: the broken plain key and the reducer fix.

- :class:`PlainRequirementsState`: ``requirements`` is a plain dict, so two
  writes in one super-step raise ``InvalidUpdateError`` and writes in later
  steps replace the whole dict (notebook 02 shows both).
- :class:`RdsAgentState`: ``requirements`` merges field by field through the
  generic :func:`agentstate.core.merge_fields` reducer.
Both extend deepagents' ``DeepAgentState`` so ``files`` keeps its own reducer.
Taught in notebooks 02 and 04.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from deepagents import DeepAgentState

from agentstate.core.reducers import merge_fields


class PlainRequirementsState(DeepAgentState):
    """The naive schema: one value per step, last write replaces the dict."""

    requirements: NotRequired[dict[str, Any]]


class RdsAgentState(DeepAgentState):
    """The fixed schema: parallel writes to ``requirements`` merge field by field."""

    requirements: Annotated[NotRequired[dict[str, Any]], merge_fields]
