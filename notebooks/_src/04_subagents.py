# %% [markdown]
# # 04 · Subagents: what crosses the `task` boundary, and why
#
# The RDS agent grows a helper: a `requirements-collector` subagent that
# gathers the fields, while the main agent validates and writes the manifest.
# The collector reports "Stored 5 field(s).", and the main agent's
# `validate_manifest` answers that every required field is missing. The
# original write-up put this down to subagents running in "isolated
# execution contexts" and added a per-turn cache that both agents' tools
# share. This notebook finds the real cause in the subagent's state schema,
# fixes it with one schema for both agents, and compares that fix with the
# cache on this turn, the next turn and after a restart.

# %% [markdown]
# ## Recap
# Stage 03: within one batch, readers see the state from before the batch;
# a turn cache makes them wait for their batch's writers and merges the
# writes. Stage 02: a `requirements` key with a field-merge reducer keeps
# every parallel write.
#
# ## Goals
# - Reproduce: the subagent stores five fields, the parent sees none.
# - Look inside: what the subagent receives, and what `task` returns.
# - Fix it in a plain `create_deep_agent`: one state schema for both agents.
# - Compare with the package's builder, and with the write-up's cache fix.
# - Turn a knob: parallel subagents, with and without the reducer.

# %% [markdown]
# ## 1. Reproduce: the parent sees nothing
# The main agent (scripted) delegates with a `task` call whose description
# lists the fields as JSON; the collector (an offline policy model) stores
# them in parallel and reports. Then the main agent validates. In this build
# only the main agent declares `requirements`, through a middleware's
# `state_schema`; the collector has deepagents' default schema.

# %%
from agentstate.display import Table
from agentstate.fixtures import POSTGRES_FIELDS, collector_model, parent_model, user_turn
from agentstate.fixtures import reader_replies as replies
from agentstate.rds import build_split_schema_agent

split_state = build_split_schema_agent(parent_model(POSTGRES_FIELDS), collector_model()).invoke(
    user_turn()
)
verdict = replies(split_state)["validate_manifest"]
missing = [f for f in POSTGRES_FIELDS if f"{f}: missing required field" in verdict]
assert replies(split_state)["task"] == "Stored 5 field(s)."  # its five stores succeeded
assert missing == list(POSTGRES_FIELDS) and split_state.get("requirements", {}) == {}
Table([{"collector said": replies(split_state)["task"], "parent reports missing": missing}])

# %% [markdown]
# ## 2. Look inside: down and up the `task` boundary
# The whole failure fits in a small agent written here: a `requirements` key
# with the field-merge reducer, a writer tool for the collector, a reader
# tool for the parent.

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
# The parent delegates, then reads. A middleware may declare state keys
# through its `state_schema` attribute, and LangChain's `create_agent`
# (which `create_deep_agent` calls) merges them into the agent's schema:
# that is how the broken build declares `requirements` on the parent only.
# `CommandRecorder` records the keys of the `Command` that `task` returned.

# %%
from langchain.agents.middleware import AgentMiddleware

from agentstate.fixtures import delegate, fields_seen_by_reader
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.tracing import CommandRecorder


class DeclareOnParent(AgentMiddleware):
    state_schema = RequirementsState


def my_agent(collector=None, recorder=None, **options):
    read = reply(tool_call("get_collected_requirements"))
    parent = ScriptedChatModel(script=[delegate(POSTGRES_FIELDS), read, reply(text="Done.")])
    spec = {
        "name": "requirements-collector",
        "description": "Collects RDS requirements.",
        "system_prompt": "Store each field you are given.",
        "tools": [store_requirement],
        "model": collector or collector_model(),
    }
    extra = [recorder] if recorder else []
    middleware = [*options.pop("middleware", []), *extra]
    return create_deep_agent(
        parent,
        tools=[get_collected_requirements],
        subagents=[spec],
        middleware=middleware,
        **options,
    )


# %%
collector, recorder = collector_model(), CommandRecorder(["task"])
broken = my_agent(collector, recorder, middleware=[DeclareOnParent()])
state = broken.invoke(user_turn())
assert fields_seen_by_reader(state) == 0
assert recorder.updates == [{"tool": "task", "update keys": ["messages"]}]
Table(
    [
        {
            "parent's reader saw": fields_seen_by_reader(state),
            "task returned keys": recorder.updates[0]["update keys"],
        }
    ]
)

# %% [markdown]
# **Down.** In deepagents' default mode (`isolated`) the subagent starts
# from the parent's state with its messages replaced by one human message:
# the task description. It does not receive the user's message. (A spec
# with `mode="fork"`, experimental in deepagents 0.7.32, hands it the
# parent's conversation instead, user's message included: see the
# going-further notebook.)

# %%
from langchain_core.messages import HumanMessage

humans = [m.content for m in collector.seen[0] if isinstance(m, HumanMessage)]
assert len(humans) == 1 and json.loads(humans[0]) == POSTGRES_FIELDS
Table([{"human messages the collector received": humans}])

# %% [markdown]
# **Up.** `task` returns the keys of the subagent's final state that changed
# (a few, like `messages`, excepted), plus one ToolMessage with its last
# answer. A `Command` that writes a key the graph does not declare is
# dropped without an error, so the collector's stores "succeeded" into
# nothing, and `task` had only `messages` to return. `undeclared_keys` asks
# a compiled graph which keys it lacks:

# %%
from deepagents.middleware.subagents import create_sub_agent

from agentstate.core import undeclared_keys

spec = {
    "name": "requirements-collector",
    "description": "Collects.",
    "tools": [store_requirement],
    "model": collector_model(),
}
collector_graph = create_sub_agent(spec)
assert undeclared_keys(collector_graph, ["requirements"]) == ["requirements"]
Table(
    [
        {
            "keys the collector's graph does not declare": undeclared_keys(
                collector_graph, ["requirements"]
            )
        }
    ]
)

# %% [markdown]
# So the cause is the schema. The tools of both agents do share Python
# objects (the cache comparison below shows it), so "isolated execution
# contexts" is not it.
#
# ## 3. The fix: one schema for both
# `create_deep_agent(state_schema=...)` declares the key on the parent and
# forwards the schema to every declarative subagent, so both declare
# `requirements` with its reducer:

# %%
collector, recorder = collector_model(), CommandRecorder(["task"])
fixed = my_agent(collector, recorder, state_schema=RequirementsState)
state = fixed.invoke(user_turn())
assert recorder.updates == [{"tool": "task", "update keys": ["messages", "requirements"]}]
assert state["requirements"] == POSTGRES_FIELDS and fields_seen_by_reader(state) == 5
assert (
    undeclared_keys(create_sub_agent(spec, state_schema=RequirementsState), ["requirements"]) == []
)
Table(
    [
        {
            "parent's reader saw": fields_seen_by_reader(state),
            "task returned keys": recorder.updates[0]["update keys"],
        }
    ]
)

# %% [markdown]
# ## 4. The package's version
# `agentstate.rds.build_shared_schema_agent` is this fix on the full RDS
# agent (validation, secret redaction, the synced `/requirements.json`);
# `agentstate.core` adds `share_state` for subagents that do not inherit the
# parent's schema and `undeclared_keys` to assert at build time. On the same
# delegation both give the parent the same fields, and the validator no
# longer reports them missing:

# %%
from agentstate.fixtures import file_fields
from agentstate.rds import build_shared_schema_agent

package = build_shared_schema_agent(parent_model(POSTGRES_FIELDS), collector_model()).invoke(
    user_turn()
)
assert package["requirements"] == state["requirements"] == POSTGRES_FIELDS
verdict = replies(package)["validate_manifest"]
assert not [f for f in POSTGRES_FIELDS if f"{f}: missing required field" in verdict]
Table(
    [
        {
            "plain fix": len(state["requirements"]),
            "package": len(package["requirements"]),
            "/requirements.json": len(file_fields(package)),
        }
    ]
)

# %% [markdown]
# ## 5. Prove it: who sees what, schema fix versus cache fix
# The original write-up's fix kept the split schema and shared a per-turn
# cache (a dict per thread, opened before the turn and dropped after it)
# between the parent's and the subagent's tools, and mirrored state merged
# with the cache to `/requirements.json`. Run the three builds on one
# script: turn 1 delegates and reads back, turn 2 reads again, then a new
# agent over the same SQLite file (a restart) reads again. Each column
# counts the fields the parent's reader listed; the last counts the fields
# in `/requirements.json` after the restart.

# %%
import tempfile
from pathlib import Path

from agentstate.fixtures import who_sees_what
from agentstate.rds import build_cache_fix_agent

workdir = Path(tempfile.mkdtemp())
builds = {
    "split schema (broken)": build_split_schema_agent,
    "cache fix (the write-up)": build_cache_fix_agent,
    "shared schema (fix)": build_shared_schema_agent,
}
who = Table(
    {"build": name, **who_sees_what(build, POSTGRES_FIELDS, str(workdir / f"{i}.sqlite"))}
    for i, (name, build) in enumerate(builds.items())
)
who

# %% [markdown]
# The cache is shared with the subagent's tools (the parent saw the five
# fields in the same turn: so much for isolated contexts), but the fields
# never enter state, so the agent has lost them at the next turn and after a
# restart, while the file the user looks at still lists all five. The schema
# fix puts the fields in state, where the reducer and the checkpointer keep
# them, and the file agrees:

# %%
assert who.column("same turn") == [0, 5, 5]
assert who.column("next turn") == [0, 0, 5]
assert who.column("after restart") == [0, 0, 5]
assert who.column("file after restart") == [0, 5, 5]
Table(
    [
        {
            "cache fix after restart: the agent reads": who.rows[1]["after restart"],
            "the user's file shows": who.rows[1]["file after restart"],
        }
    ]
)

# %% [markdown]
# What the doctor (`agentstate.doctor.diagnose`) says about the broken and
# the fixed agents of section 2 and 3:

# %%
from agentstate.doctor import diagnose

broken_report, fixed_report = diagnose(broken), diagnose(fixed)
assert broken_report.codes() == ["subagent-drops-key"]
assert fixed_report.errors == [] and fixed_report.codes() == []
broken_report

# %% [markdown]
# ## A knob: parallel subagents, reducer or not
# Sharing the key is not enough when subagents run in parallel: their
# results are writes to the parent's key in one super-step, as in stage 02.
# One field per task, so only the `task` results run in parallel.
# `PlainRequirementsState` shares the key without a reducer.
#
# Run the cells above first.

# %%
from langgraph.errors import InvalidUpdateError

from agentstate.fixtures import label_fields
from agentstate.rds import PlainRequirementsState


def parallel_tasks(tasks: int = 2, reducer: bool = True) -> Table:
    sets = [{name: value} for name, value in label_fields(tasks).items()]
    schema = {} if reducer else {"state_schema": PlainRequirementsState}
    row = {"tasks": tasks, "reducer": reducer, "fields kept": 0, "error": ""}
    try:
        agent = build_shared_schema_agent(parent_model(*sets), collector_model(tasks), **schema)
        row["fields kept"] = len(agent.invoke(user_turn())["requirements"])
    except InvalidUpdateError:
        row["error"] = "InvalidUpdateError"
    return Table([row])


# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

knob_widget = widgets.interact(
    parallel_tasks,
    tasks=widgets.IntSlider(value=2, min=1, max=4, description="tasks"),
    reducer=widgets.Checkbox(value=True, description="reducer"),
)

# %%
knob = Table(parallel_tasks(n, r).rows[0] for n in (1, 2, 4) for r in (False, True))
assert knob.column("fields kept") == [1, 1, 0, 2, 0, 4]
assert knob.column("error") == ["", "", "InvalidUpdateError", "", "InvalidUpdateError", ""]
knob

# %% [markdown]
# With one task there is one write per step, so even the plain key works:
# the failure shows only when writes run in parallel.
#
# ## Summary
# - With only the parent declaring `requirements`, the collector's writes
#   are dropped silently inside the subagent; `task` returns only
#   `messages`, and the parent sees no field. The cause is the subagent's
#   schema, not "isolated execution contexts".
# - In deepagents' default mode the subagent receives the task description
#   as its only human message; `mode="fork"` hands it the parent's
#   conversation.
# - One schema for both (`create_deep_agent(state_schema=...)`, forwarded
#   to declarative subagents) returns `requirements` with the message; the
#   fields persist across turns and a restart. The write-up's cache fix
#   shows them in the same turn only.
# - Parallel subagents need the reducer: without it, `InvalidUpdateError`.
# - Going further: [lists doubled by `operator.add`, fork mode, and the
#   user's message shown twice](going_further/04_lists_and_fork_mode.ipynb).
#
# ## Exercises
# 1. Give the collector its own schema that declares `requirements` *without*
#    the reducer, and the parent the one with it. Which parallel runs fail?
# 2. Give the collector a tool that writes `todos` (the key of the todo list),
#    and declare `todos` on it with `share_state`. Do its todos reach the
#    parent's state? Compare with `requirements`.
# 3. Write a reducer for a list of dicts with an `id` field that merges by id
#    (a later item with the same id replaces the earlier one), and show that
#    a returning subagent does not double the parent's items (the going-further
#    notebook shows `operator.add` doubling them).
