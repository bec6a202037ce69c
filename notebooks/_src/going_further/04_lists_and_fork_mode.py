# %% [markdown]
# # 04 · Going further: the cache fix, lists, fork mode, a message shown twice
#
# Notebook 04 made a subagent's writes reach the parent with one state schema
# for both, compared that fix with the write-up's cache using the package's
# builders, and showed a list key with `operator.add` coming back doubled,
# because `task` returns a changed key whole. Four things at the same
# boundary did not fit there: the cache fix written out, reducers that a
# returning subagent cannot double, deepagents' `mode="fork"` that hands the
# subagent the parent's conversation, and the original write-up's report
# that the user's message appeared twice. Each claim is asserted in the cell
# that shows it.

# %% [markdown]
# ## The write-up's cache, written out
# The write-up kept the split schema: only the parent declares
# `requirements`. It added a dict of the turn's fields that both agents'
# tools share (one Python process), emptied after each turn, and copied
# state plus that dict to `/requirements.json`. Here it is on the small
# agents of notebook 04, in the shape `who_sees_what` builds an agent with
# (the parent's model, the collector's model, a checkpointer):

# %%
import json
import operator
from typing import Annotated, NotRequired

from deepagents import create_deep_agent
from deepagents.backends.utils import create_file_data
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command


class RequirementsState(AgentState):
    requirements: Annotated[NotRequired[dict], operator.or_]


turn_cache = {}  # this turn's fields: one dict for every tool in the process


@tool
def store_requirement(field_name: str, value: str | int, runtime: ToolRuntime) -> Command:
    """Store one requirement field."""
    turn_cache[field_name] = value
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    return Command(update={"requirements": {field_name: value}, "messages": [done]})


@tool
def get_collected_requirements(runtime: ToolRuntime) -> str:
    """List every requirement field collected so far, as JSON."""
    return json.dumps({**runtime.state.get("requirements", {}), **turn_cache})


class MirrorFile(AgentMiddleware):
    def after_agent(self, state, runtime):  # after each turn: the file, then the cache is dropped
        fields = {**state.get("requirements", {}), **turn_cache}
        turn_cache.clear()
        if fields:
            return {"files": {"/requirements.json": create_file_data(json.dumps(fields))}}


def cache_fix(model, collector_model, checkpointer=None, middleware=()):
    """The split schema (the collector on AgentState) plus the shared turn cache."""
    collector = create_agent(collector_model, [store_requirement])
    subagent = {"name": "requirements-collector", "description": "Collects RDS requirements."}
    return create_deep_agent(
        model,
        [get_collected_requirements],
        subagents=[{**subagent, "runnable": collector}],
        state_schema=RequirementsState,
        middleware=[MirrorFile(), *middleware],
        checkpointer=checkpointer,
    )


# %% [markdown]
# Both through notebook 04's `who_sees_what`: the fields read in the same
# turn, the next turn and after a restart, and those in the file then. The
# cache written out here and the package's `build_cache_fix_agent` give one
# row:

# %%
import tempfile

from agentstate.lessons.display import Table
from agentstate.lessons.fixtures import POSTGRES_FIELDS, who_sees_what
from agentstate.rds import build_cache_fix_agent

folder = tempfile.mkdtemp()
seen = {
    "written out here": who_sees_what(cache_fix, POSTGRES_FIELDS, f"{folder}/here.db"),
    "build_cache_fix_agent": who_sees_what(
        build_cache_fix_agent, POSTGRES_FIELDS, f"{folder}/p.db"
    ),
}
assert seen["written out here"] == seen["build_cache_fix_agent"]
assert seen["written out here"]["same turn"] == 5 > seen["written out here"]["next turn"]
Table({"cache fix": name, **row} for name, row in seen.items())

# %% [markdown]
# The parent reads the fields in the same turn from the cache, but they
# never enter state, so the next turn and a restart lose them while the
# file keeps them. The parent's `task` step, drawn as state flow (lesson
# 01's picture), beside notebook 04's fix, shows why:

# %%
from agentstate.lessons.fixtures import collector_model, delegate, user_turn
from agentstate.models import ScriptedChatModel, reply
from agentstate.rds import build_shared_schema_agent
from agentstate.tracing import ToolTimeline, draw_superstep

task_steps = {}
for name, builder in [("cache fix", cache_fix), ("one schema", build_shared_schema_agent)]:
    task_steps[name] = ToolTimeline()
    parent = ScriptedChatModel(script=[delegate(POSTGRES_FIELDS), reply(text="ok")])
    agent = builder(parent, collector_model(), middleware=[task_steps[name]])
    agent.invoke(user_turn("collect"), {"configurable": {"thread_id": name}})
draw_superstep(
    task_steps,
    key="requirements",
    reducer={"cache fix": "operator.or_", "one schema": "merge_fields"},
)

# %% [markdown]
# With the split schema `task` writes nothing to `requirements`: the fields
# stay in the cache, outside state. One schema brings all five up.

# %% [markdown]
# ## Reducers a returning subagent cannot double
# A subagent returns the parent's items together with its own. The safe
# pattern is a reducer that is idempotent for what comes back (applied once
# or twice, it gives the same value): `append_unique` adds only unseen
# items, and the field merge of `requirements` keeps one value per field,
# where `operator.add` repeats the list:

# %%
from agentstate.core import append_unique, merge_fields
from agentstate.lessons.fixtures import AddNotesState, UniqueNotesState, build_notes_agent

notes_steps = {"operator.add": ToolTimeline(), "append_unique": ToolTimeline()}
for schema, timeline in zip([AddNotesState, UniqueNotesState], notes_steps.values(), strict=True):
    build_notes_agent(schema, [timeline]).invoke({**user_turn("note"), "notes": ["pre"]})
draw_superstep(notes_steps, key="notes", reducer={name: name for name in notes_steps})

# %% [markdown]
# `task` wrote `[pre, new]`, the parent's item with the subagent's:
# `operator.add` keeps `pre` twice, `append_unique` once. The field merge
# is idempotent too, applied once or twice:

# %%
parent_had, returned = {"engine": "postgres"}, {"engine": "postgres", "port": 5432}
once = merge_fields(parent_had, returned)
assert merge_fields(once, returned) == once == returned
assert append_unique(["pre"], ["pre", "new"]) == ["pre", "new"]
Table(
    [
        {"reducer": "merge_fields, applied twice", "result": sorted(merge_fields(once, returned))},
        {"reducer": "append_unique", "result": append_unique(["pre"], ["pre", "new"])},
        {"reducer": "operator.add", "result": operator.add(["pre"], ["pre", "new"])},
    ]
)

# %% [markdown]
# ## Fork mode: the subagent receives the parent's conversation
# In deepagents' default mode (`isolated`) a subagent's `messages` are one human
# message, the task description. deepagents 0.7.32 also has `mode="fork"`
# (marked beta: it warns when used) in which the subagent continues the
# parent's conversation:
#
# ```mermaid
# flowchart LR
#     P["parent: user's message, ..., task call"] -->|isolated| I["subagent: the task only"]
#     P -->|fork| F["subagent: user's message, ..., then the task"]
# ```
#
# A collector that only answers shows what it received in each mode:

# %%
import warnings

from langchain_core.messages import HumanMessage

from agentstate.lessons.fixtures import parent_model, user_turn
from agentstate.models import ScriptedChatModel, reply
from agentstate.rds import (
    COLLECTOR,
    RdsAgentState,
    StateStorage,
    assemble_rds_agent,
    collector_spec,
)


def humans_received(mode):
    collector = ScriptedChatModel(script=[reply(text="Nothing stored.")], model_name=COLLECTOR)
    spec = {**collector_spec(collector, StateStorage()), "mode": mode}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the beta warning of fork mode
        agent = assemble_rds_agent(
            parent_model(POSTGRES_FIELDS),
            StateStorage(),
            state_schema=RdsAgentState,
            subagents=[spec],
        )
        agent.invoke(user_turn("Give me a Postgres 15.5 manifest"))
    return [m.content for m in collector.seen[0] if isinstance(m, HumanMessage)]


# %%
received = {mode: humans_received(mode) for mode in ("isolated", "fork")}
assert len(received["isolated"]) == 1 and received["isolated"][0].startswith('{"engine"')
assert received["fork"][0] == "Give me a Postgres 15.5 manifest" and len(received["fork"]) == 2
Table(
    {"mode": mode, "human messages": len(h), "first one": h[0][:45]} for mode, h in received.items()
)

# %% [markdown]
# So "the subagent never receives the user's message" holds for the default
# mode only. In fork mode the task comes last, wrapped in a note that the
# messages above are a prior conversation.
#
# ## "The user's message is shown twice"
# The original write-up reported the user's message appearing twice during
# delegation. In state it does not: the parent holds it once. A chat view
# does not read state, though: it renders a stream. Streamed with
# `subgraphs=True` (how a UI shows a subagent at work), the values stream
# carries the subagent's state too, under a `tools:<id>` namespace, and with
# it a second human message per delegation (`(parent)` is the main graph,
# `tools` the subagent running inside the parent's `tools` node):

# %%
agent = build_shared_schema_agent(parent_model(POSTGRES_FIELDS), collector_model())
streamed = {}
for namespace, values in agent.stream(
    user_turn("Give me a Postgres 15.5 manifest"), stream_mode="values", subgraphs=True
):
    for m in values.get("messages", []):
        if isinstance(m, HumanMessage):
            where = namespace[0].split(":")[0] if namespace else "(parent)"
            streamed[m.id] = {"namespace": where, "human message": m.content[:40]}
assert [r["namespace"] for r in streamed.values()] == ["(parent)", "tools"]
Table(streamed.values())

# %% [markdown]
# A view that renders every human message of the stream shows two per
# delegation, and when the model copies the user's words into the task
# description (the scripted parent writes JSON instead) the second reads
# like the user's message again. Nothing is duplicated in state; the fix
# belongs in the view (render human messages of the root namespace only).
# The write-up's UI cannot run here, so this is the closest evidence, not
# proof that it was the cause.
#
# ## Summary
# - The write-up's cache shows the fields in the same turn only: they never
#   enter state, so the next turn and a restart lose them.
# - A list key with `operator.add` comes back doubled when a subagent
#   returns it (notebook 04); an idempotent reducer (`append_unique`, the
#   field merge) keeps one copy.
# - The default subagent mode gives it one message, the task description;
#   `mode="fork"` hands over the parent's conversation, user's message first.
# - A stream with `subgraphs=True` carries the subagent's human message too:
#   a view that renders it shows two human messages per delegation.
