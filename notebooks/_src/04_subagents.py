# %% [markdown]
# # 04 · Subagents: what crosses the `task` boundary, and why
#
# The RDS agent grows a helper: a `requirements-collector` subagent gathers
# the fields, the main agent reads them back. The collector reports
# "Stored 5 field(s).", and the main agent finds none.
# The RDS agent's changelog of November 19, 2025 (one of the write-ups of
# notebook 01) blamed the boundary, "DeepAgents subagents run in isolated
# execution contexts", and added a per-turn cache that the tools of both
# agents share. This notebook builds the two agents, finds the real cause
# in the collector's state schema, fixes it with one schema for both, and
# compares that fix with the cache across turns and a restart.

# %% [markdown]
# ## Recap
# Stage 03: within one batch of parallel tool calls, readers see the state
# from before the batch. Stage 02: a `requirements` key with a field-merge
# reducer keeps every parallel write.
#
# ## Goals
# - Reproduce: the subagent stores five fields, the parent sees none.
# - Look inside: what goes down to the subagent, what `task` brings back up.
# - Fix it: one state schema for both agents, then compare with the package.
# - Prove it: who sees the fields in this turn, the next, after a restart.
# - Turn a knob: declare the key on the parent, the subagent, or both.

# %% [markdown]
# ## 1. Reproduce: the parent sees nothing
# A [subagent](../docs/glossary.md#subagent) is an agent that the parent
# starts through deepagents' [`task` tool](../docs/glossary.md#task-tool)
# to do one job. First the pieces of stage 02: the `requirements` key with
# its reducer, a tool that writes it and a tool that reads it.

# %%
import json
from typing import Annotated, NotRequired

from deepagents import DeepAgentState, create_deep_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command


def merge_fields(current, new):
    return {**(current or {}), **(new or {})}


class RequirementsState(DeepAgentState):
    requirements: Annotated[NotRequired[dict], merge_fields]


# %%
@tool
def store_requirement(field_name: str, value: str | int, runtime: ToolRuntime) -> Command:
    """Store one requirement field."""
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    return Command(update={"requirements": {field_name: value}, "messages": [done]})


@tool
def get_collected_requirements(runtime: ToolRuntime) -> str:
    """List every requirement field collected so far, as JSON."""
    return json.dumps(runtime.state.get("requirements", {}))


# %% [markdown]
# The two agents. The collector is a
# [declarative subagent](../docs/glossary.md#declarative-subagent): a dict
# from which deepagents builds its graph. Its model is a
# [policy model](../docs/glossary.md#policy-model), scripted offline: it
# stores each field of the task description in parallel, then reports how
# many stores succeeded. The parent's model is a plain script: a `task`
# call, then a read, then "Done.".

# %%
from agentstate.fixtures import POSTGRES_FIELDS, collector_model
from agentstate.models import ScriptedChatModel, reply, tool_call

FIELDS = json.dumps(POSTGRES_FIELDS)
DELEGATE = reply(tool_call("task", subagent_type="requirements-collector", description=FIELDS))
READ, DONE = reply(tool_call("get_collected_requirements")), reply(text="Done.")


# %%
def my_agent(script, tools=(store_requirement, get_collected_requirements), sub=(), **options):
    store, read = tools
    collector = {
        "name": "requirements-collector",
        "description": "Collects RDS requirements.",
        "system_prompt": "Store each field you are given.",
        "tools": [store],
        "model": collector_model(),
        **dict(sub),  # a spec key to change: "model", "middleware"
    }
    parent = ScriptedChatModel(script=list(script))
    return create_deep_agent(parent, tools=[read], subagents=[collector], **options)


# %% [markdown]
# In the broken build only the parent declares `requirements`: a middleware
# may declare state keys in its `state_schema`, and LangChain's
# `create_agent` (which `create_deep_agent` calls) merges them into that
# agent's schema. `CommandRecorder` records the keys of the `Command` that
# each `task` call returned.

# %%
from langchain.agents.middleware import AgentMiddleware

from agentstate.display import Table
from agentstate.tracing import CommandRecorder


class DeclareOnParent(AgentMiddleware):
    state_schema = RequirementsState


collector, recorder = collector_model(), CommandRecorder(["task"])
broken = my_agent(
    [DELEGATE, READ, DONE], sub={"model": collector}, middleware=[DeclareOnParent(), recorder]
)
state = broken.invoke({"messages": [("user", "Give me a Postgres 15.5 manifest")]})
said = {m.name: m.content for m in state["messages"] if isinstance(m, ToolMessage)}
assert said["task"] == "Stored 5 field(s)." and said["get_collected_requirements"] == "{}"
Table([{"collector said": said["task"], "parent's reader got": said["get_collected_requirements"]}])

# %% [markdown]
# ## 2. Look inside: down and up the `task` boundary
#
# ```mermaid
# flowchart TB
#     T["parent: model calls task"]
#     M["collector: model"]
#     S["collector: store_requirement x5"]
#     R["parent: get_collected_requirements reads {}"]
#     X["dropped"]
#     T -->|"down: parent state, messages = the task description"| M
#     M --> S
#     S -->|"up: changed keys it declares (none) + one ToolMessage"| R
#     S -.->|"requirements: not in the collector's schema"| X
#     classDef parent fill:#eaf2f8,stroke:#2471a3
#     classDef collector fill:#fef9e7,stroke:#b7950b
#     class T,R parent
#     class M,S collector
# ```
#
# **Down.** In deepagents' default
# [isolated mode](../docs/glossary.md#isolated-mode) the subagent starts
# from the parent's state with its messages replaced by one human message,
# the task description, so it does not receive the user's message. (With
# [`"mode": "fork"`](../docs/glossary.md#fork-mode) it receives the
# parent's conversation: see the going-further notebook.)

# %%
from langchain_core.messages import HumanMessage

humans = [m.content for m in collector.seen[0] if isinstance(m, HumanMessage)]
assert humans == [FIELDS]
Table([{"human messages the collector received": humans}])

# %% [markdown]
# **Up.** `task` returns the keys of the subagent's final state that
# changed (a few, `messages` among them, excepted), plus one ToolMessage
# with its last answer. A `Command` that writes a key the graph does not
# declare is dropped without an error: the collector's stores "succeeded"
# into nothing, and `task` had only `messages` to return. A compiled graph
# lists the keys it declares in `.channels`:

# %%
from deepagents.middleware.subagents import create_sub_agent

spec = {"name": "c", "description": "-", "tools": [store_requirement], "model": collector_model()}
Table(
    [
        {
            "task returned keys": recorder.updates[0]["update keys"],
            "parent declares requirements": "requirements" in broken.channels,
            "collector declares requirements": "requirements" in create_sub_agent(spec).channels,
        }
    ]
)

# %% [markdown]
# So the cause is the collector's schema. The tools of both agents even
# share Python objects (the write-up's cache below works within a turn), so
# "isolated execution contexts" is not it.
#
# ## 3. The fix: one schema for both
# `create_deep_agent(state_schema=...)` declares the key on the parent and
# forwards the schema to every declarative subagent, so both declare
# `requirements` with its reducer:

# %%
recorder = CommandRecorder(["task"])
fixed = my_agent([DELEGATE, READ, DONE], state_schema=RequirementsState, middleware=[recorder])
state = fixed.invoke({"messages": [("user", "Give me a Postgres 15.5 manifest")]})
read = json.loads([m for m in state["messages"] if m.name == "get_collected_requirements"][0].text)
assert read == state["requirements"] == POSTGRES_FIELDS
Table(
    [
        {
            "task returned keys": recorder.updates[0]["update keys"],
            "the parent's reader got": list(read),
        }
    ]
)

# %% [markdown]
# ## 4. The package's version
# `agentstate.rds.build_shared_schema_agent` is this fix on the full RDS
# agent of stages 01-03 (validation, secret redaction, the synced
# `/requirements.json`). On the same delegation it gives the parent the
# same fields:

# %%
from agentstate.rds import build_shared_schema_agent

package = build_shared_schema_agent(
    ScriptedChatModel(script=[DELEGATE, READ, DONE]), collector_model()
)
package_state = package.invoke({"messages": [("user", "Give me a Postgres 15.5 manifest")]})
same = package_state["requirements"] == state["requirements"]
assert same
Table(
    [{"fields the parent holds": len(package_state["requirements"]), "same as the plain fix": same}]
)

# %% [markdown]
# ## 5. Prove it: who sees what, schema fix versus cache fix
# The write-up's fix kept the split schema, added a cache of this turn's
# fields that the tools of both agents share, dropped after each turn, and
# mirrored state plus cache to `/requirements.json`. Here it is, small: the
# two tools over the cache, and a middleware that writes the file.

# %%
from deepagents.backends.utils import create_file_data

turn_cache = {}  # this turn's fields: one dict for every tool in the process


@tool("store_requirement")
def store_in_cache(field_name: str, value: str | int, runtime: ToolRuntime) -> Command:
    """Store one requirement field."""
    turn_cache[field_name] = value
    return store_requirement.func(field_name, value, runtime)


@tool("get_collected_requirements")
def read_with_cache(runtime: ToolRuntime) -> str:
    """List every requirement field collected so far, as JSON."""
    return json.dumps({**runtime.state.get("requirements", {}), **turn_cache})


class MirrorFile(AgentMiddleware):
    def after_agent(self, state, runtime):  # after each turn: the file, then the cache is dropped
        fields = {**state.get("requirements", {}), **turn_cache}
        turn_cache.clear()
        if fields:
            return {"files": {"/requirements.json": create_file_data(json.dumps(fields))}}


# %% [markdown]
# Three builds on one script: turn 1 delegates and reads, turn 2 reads
# again, then a new agent over the same SQLite file (a restart) reads once
# more. Each column counts the fields the parent's reader listed; the last
# one, the fields in `/requirements.json` after the restart.

# %%
from langgraph.checkpoint.sqlite import SqliteSaver


def fields_read(state):
    reads = [m for m in state["messages"] if m.name == "get_collected_requirements"]
    return len(json.loads(reads[-1].text))


def who_sees_what(options, db):
    config, turn = {"configurable": {"thread_id": "t"}}, lambda text: {"messages": [("user", text)]}
    with SqliteSaver.from_conn_string(db) as saver:
        agent = my_agent([DELEGATE, READ, DONE, READ, DONE], checkpointer=saver, **options)
        row = {"same turn": fields_read(agent.invoke(turn("collect"), config))}
        row["next turn"] = fields_read(agent.invoke(turn("again"), config))
    with SqliteSaver.from_conn_string(db) as saver:
        agent = my_agent([READ, DONE], checkpointer=saver, **options)  # a new agent
        state = agent.invoke(turn("and now"), config)
    file = state["files"].get("/requirements.json")
    in_file = len(json.loads(file["content"])) if file else 0
    return {**row, "after restart": fields_read(state), "file after restart": in_file}


# %%
import tempfile

builds = {
    "split schema (broken)": {"middleware": [DeclareOnParent(), MirrorFile()]},
    "cache fix (the write-up)": {
        "middleware": [DeclareOnParent(), MirrorFile()],
        "tools": (store_in_cache, read_with_cache),
    },
    "one schema (the fix)": {"middleware": [MirrorFile()], "state_schema": RequirementsState},
}
folder = tempfile.mkdtemp()
who = Table(
    {"build": b, **who_sees_what(o, f"{folder}/{i}.db")} for i, (b, o) in enumerate(builds.items())
)
assert who.column("after restart") == [0, 0, 5] and who.column("file after restart") == [0, 5, 5]
who

# %% [markdown]
# The cache is shared with the subagent's tools, so the parent reads the
# five fields in the same turn. But they never enter state: at the next
# turn and after a restart the agent has lost them, while the file the user
# looks at still lists all five. The schema fix puts the fields in state,
# where the reducer and the checkpointer keep them, and the file agrees.
#
# ## 6. What the doctor says
# `agentstate.doctor.diagnose` reads a compiled graph without running it.
# One row per hazard it found in either build of sections 1 and 3 (a
# finding inside a subagent names it):

# %%
from agentstate.display import compare_findings
from agentstate.doctor import diagnose

reports = {"broken build": diagnose(broken), "fixed build": diagnose(fixed)}
assert (
    reports["broken build"].codes() == ["subagent-drops-key"]
    and reports["fixed build"].errors == []
)
compare_findings(reports, subagents=["requirements-collector"])

# %% [markdown]
# A *note* is what the doctor cannot decide from the graph alone: a reader
# in the same reply as the `task` call that writes `requirements` would see
# the state from before it ([notebook 03](03_same_turn_visibility.ipynb)).
#
# ## A knob: who declares `requirements`
# Run the cells above first. Declare the key on the parent only (the
# broken build), on the collector only (its own `middleware`), on both with
# one schema, or on both without the reducer: each gives a different
# answer.

# %%
from langgraph.errors import InvalidUpdateError


class PlainState(DeepAgentState):
    requirements: NotRequired[dict]  # no reducer


def declared_by(who="the parent only"):
    recorder = CommandRecorder(["task"])
    options = {
        "the parent only": {"middleware": [DeclareOnParent(), recorder]},
        "the collector only": {
            "middleware": [recorder],
            "sub": {"middleware": [DeclareOnParent()]},
        },
        "both, one schema": {"middleware": [recorder], "state_schema": RequirementsState},
        "both, no reducer": {"middleware": [recorder], "state_schema": PlainState},
    }[who]
    row = {"declared by": who, "task returned keys": "", "the parent's reader got": "", "error": ""}
    try:
        state = my_agent([DELEGATE, READ, DONE], **options).invoke({"messages": [("user", "go")]})
        row["task returned keys"] = recorder.updates[0]["update keys"]
        row["the parent's reader got"] = f"{fields_read(state)} fields"
    except InvalidUpdateError:
        row["error"] = "InvalidUpdateError (the collector's 5 parallel writes)"
    return Table([row])


# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

choices = ["the parent only", "the collector only", "both, one schema", "both, no reducer"]
knob_widget = widgets.interact(
    declared_by, who=widgets.Dropdown(options=choices, description="declared by")
)

# %% [markdown]
# On the collector only, `requirements` now crosses up, and the parent
# drops it: a key must be declared on both sides of the boundary. Without
# the reducer the collector's own five parallel stores fail, as in stage
# 02. `tests/test_lesson_04.py` checks all four positions.
#
# ## Summary
# - With only the parent declaring `requirements`, the collector's writes
#   are dropped inside the subagent and the parent sees no field: the cause
#   is the subagent's schema.
# - In the default mode the subagent receives the task description as its
#   only human message; fork mode hands it the parent's conversation.
# - One schema for both (`create_deep_agent(state_schema=...)`, forwarded to
#   declarative subagents) returns `requirements`; the fields persist across
#   turns and a restart. The write-up's cache shows them in the same turn
#   only, while its file keeps showing them.
# - Going further: [lists doubled by `operator.add`, fork mode, and the
#   user's message shown twice](going_further/04_lists_and_fork_mode.ipynb).
#
# ## Exercises
# 1. Give the collector its own compiled graph (a `CompiledSubAgent`) that
#    declares `requirements` *without* the reducer, and the parent the
#    schema with it. Which runs fail: two tasks of one field, or one task of
#    two fields?
# 2. Give the collector a tool that writes `todos` (the todo list's key) and
#    declare `todos` on it. Do its todos reach the parent? Compare with
#    `requirements`.
# 3. Write a reducer for a list of dicts with an `id` field that merges by
#    id, and show that a returning subagent does not double the parent's
#    items (the going-further notebook shows `operator.add` doubling them).
