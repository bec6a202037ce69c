"""The graph state of the experts system: small, and never the manual.

``messages`` holds only the user's queries and the assistant's final answers
(the system messages are rebuilt for every call). The manual appears only as
hashes. Per-run keys written by parallel experts use :func:`merge_or_reset`:
a pure dict merge, so fan-out writes in one super-step never conflict, and
``None`` (written by the ``start`` node) resets them for the next turn of the
thread. Taught in notebook 05.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AnyMessage, BaseMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from agentstate.core.reducers import merge_or_reset


class ExpertTask(TypedDict):
    expert: str
    query: str


class ExpertCall(TypedDict):
    """What the router's ``Send`` gives one expert: its task and the thread's recent turns."""

    expert: str
    query: str
    history: list[BaseMessage]


class ExpertsState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    manual_sha256: str
    prefix_sha256: str | None
    route: dict[str, Any]
    pending_tasks: list[ExpertTask]
    expert_outputs: Annotated[dict[str, str], merge_or_reset]
    prefix_by_call: Annotated[dict[str, str], merge_or_reset]
    ttft_ms: Annotated[dict[str, float], merge_or_reset]
    latency_ms: Annotated[dict[str, float], merge_or_reset]
    response: str


class ExpertsThread(ExpertsState, total=False):
    """The thread's state: the input fields plus what only the graph writes.

    ``accepted`` counts the thread's messages that passed ``start``'s check; the
    ones after it came with this run's input, and a refused input's messages are
    removed again, so the next query never inherits them.
    """

    accepted: int


PER_RUN_KEYS = ("expert_outputs", "prefix_by_call", "ttft_ms", "latency_ms")
