"""Hazards at deepagents' ``task`` boundary (notebook 04).

What a subagent writes reaches the parent only through the keys its own
schema declares; what it hands back is applied to the parent with the
parent's reducer, so a list the subagent received whole and returns whole is
added twice.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, NotRequired, cast

from deepagents import create_deep_agent
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agentstate.hazards.registry import Result, reproduced_unless
from agentstate.hazards.writes import FIELDS, USER, field_writer, one_reply
from agentstate.models.scripted import tool_call


def _merge(a: dict[str, str] | None, b: dict[str, str]) -> dict[str, str]:
    return {**(a or {}), **b}


class RequirementsState(AgentState):
    requirements: Annotated[NotRequired[dict[str, str]], _merge]


class SourcesState(AgentState):
    sources: Annotated[NotRequired[list[str]], operator.add]


def declaring(schema: type) -> AgentMiddleware:
    """A middleware whose only job is to add ``schema``'s keys to the agent it is given to.

    Every deepagents release takes middleware; not every release takes ``state_schema=``.
    """
    return cast(
        AgentMiddleware[Any, Any, Any],
        type("Declare", (AgentMiddleware,), {"state_schema": schema})(),
    )


def delegate(subagent: Any, description: str) -> Any:
    """A parent that declares the key and sends one task to ``subagent``."""
    spec = {"name": "collector", "description": "collects fields", "runnable": subagent}
    call = tool_call("task", description=description, subagent_type="collector")
    return spec, one_reply(call)


def subagent_drops_key() -> Result:
    """The parent declares ``requirements``; the subagent (a plain ``create_agent``) does not."""
    calls = [tool_call("store_field", name=k, value=v) for k, v in FIELDS.items()]
    collector = create_agent(one_reply(*calls), [field_writer("requirements")])
    spec, model = delegate(collector, "collect the five fields")
    parent = create_deep_agent(model, subagents=[spec], middleware=[declaring(RequirementsState)])
    state = parent.invoke(USER)
    seen = state.get("requirements", {})
    outcome = reproduced_unless(len(seen) == len(FIELDS))
    return Result(
        "subagent-drops-key",
        outcome,
        f"the subagent's tools wrote {len(FIELDS)} fields; the parent sees {len(seen)}",
    )


@tool
def add_source(url: str, runtime: ToolRuntime) -> Command[Any]:
    """Add one source to the list."""
    done = ToolMessage(f"added {url}", tool_call_id=runtime.tool_call_id)
    return Command(update={"sources": [url], "messages": [done]})


def list_doubled_by_subagent() -> Result:
    """Parent and subagent share an ``operator.add`` list; the parent holds ``["pre"]``."""
    researcher = create_agent(
        one_reply(tool_call("add_source", url="new")), [add_source], state_schema=SourcesState
    )
    spec, model = delegate(researcher, "find one more source")
    parent = create_deep_agent(model, subagents=[spec], middleware=[declaring(SourcesState)])
    inputs: Any = {**USER, "sources": ["pre"]}
    sources = parent.invoke(inputs).get("sources", [])
    outcome = reproduced_unless(sources == ["pre", "new"])
    return Result("list-doubled-by-subagent", outcome, f"the parent ends with {sources}")


@tool
def count_sources(topic: str) -> str:
    """Say how many sources a topic needs (reads and writes no state)."""
    return f"{topic}: three sources"


def list_returned_unchanged() -> Result:
    """The subagent declares the ``operator.add`` list and never writes it; the parent holds
    ``["pre"]``. Releases that hand back every declared key double it; from deepagents 0.7.24
    ``task`` drops a key the subagent returns unchanged (``_is_unchanged``)."""
    reader = create_agent(
        one_reply(tool_call("count_sources", topic="tides")),
        [count_sources],
        state_schema=SourcesState,
    )
    spec, model = delegate(reader, "say how many sources")
    parent = create_deep_agent(model, subagents=[spec], middleware=[declaring(SourcesState)])
    inputs: Any = {**USER, "sources": ["pre"]}
    sources = parent.invoke(inputs).get("sources", [])
    outcome = reproduced_unless(sources == ["pre"])
    return Result(
        "list-returned-unchanged",
        outcome,
        f"a subagent that never writes the list: the parent ends with {sources}",
    )
