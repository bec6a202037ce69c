# %% [markdown]
# # 04 · Subagents: what crosses the `task` boundary, and why
#
# The RDS agent grows a helper: a `requirements-collector` subagent that
# gathers the fields, while the main agent validates and writes the manifest.
# The collector reports "Stored 5 field(s).", and the main agent's
# `validate_manifest` answers that every required field is missing. A widely
# shared write-up put this down to "isolated execution contexts" and reached
# for a per-turn cache. This notebook finds the real cause in the state
# schema, fixes it with one schema shared by both agents, shows how that fix
# is written (and what breaks without each piece), and compares it with the
# cache on the same runs: this turn, the next turn, and after a restart.

# %% [markdown]
# ## Recap
# Stage 03: within one batch, readers see the state from before the batch;
# the next model step sees every write. A turn cache middleware records the
# batch's writes, makes readers wait for their batch's writers and merges the
# writes into the state they read, so one reply can store, validate and
# generate.
#
# ## Goals
# - Reproduce: the subagent stores five fields, the parent sees none.
# - Find the cause: what the `task` tool returns to the parent.
# - Fix it with one state schema for parent and subagent, and see how it is
#   written: the shared schema, `share_state`, the `undeclared_keys` check,
#   the reducer; compare with the cache fix across turns and a restart.
# - Run two subagents in parallel, with and without the reducer.
# - Meet the `operator.add` list hazard, and a safe pattern.
# - Check the report of the user's message shown twice.

# %%
# NBVAL_IGNORE_OUTPUT
from importlib.metadata import version

versions = {p: version(p) for p in ("langgraph", "langchain", "deepagents")}
assert versions["langgraph"].startswith("1.2.") and versions["deepagents"].startswith("0.7.")
versions

# %% [markdown]
# ## Reproduce: the parent sees nothing
# The main agent (scripted) delegates with a `task` call whose description
# lists the fields as JSON; the collector (a small offline policy model)
# stores them in parallel and reports. Then the main agent validates.
# In this first build only the main agent declares `requirements`, through a
# middleware's `state_schema`; the collector has deepagents' default schema.

# %%
import json

from agentstate.fixtures import POSTGRES_FIELDS, collector_model, parent_model, user_turn
from agentstate.fixtures import reader_replies as replies
from agentstate.rds import build_split_schema_agent
from agentstate.tracing import CommandRecorder

recorder = CommandRecorder(["task"])
split = build_split_schema_agent(parent_model(POSTGRES_FIELDS), collector_model(),
                                 middleware=[recorder])
split_state = split.invoke(user_turn())
verdict = replies(split_state)["validate_manifest"]
{"collector said": replies(split_state)["task"],
 "parent's validate_manifest": verdict.splitlines()[:4]}

# %%
missing = [f for f in POSTGRES_FIELDS if f"{f}: missing required field" in verdict]
assert replies(split_state)["task"] == "Stored 5 field(s)."  # its five stores succeeded
assert missing == list(POSTGRES_FIELDS)
assert split_state.get("requirements", {}) == {}
{"collector stored": len(POSTGRES_FIELDS), "parent reports missing": len(missing)}

# %% [markdown]
# ## Look inside: what the `task` call returned
# `CommandRecorder` wraps the parent's `task` tool and records the keys of the
# `Command` it returned. deepagents returns the keys of the subagent's final
# state that changed (a few, like `messages`, excepted), plus one ToolMessage
# with the subagent's last answer. The `Command` carries only `messages`:

# %%
assert recorder.updates == [{"tool": "task", "update keys": ["messages"]}]
recorder.updates

# %% [markdown]
# Why? deepagents builds a declarative subagent with its public
# `create_sub_agent`. Build the collector the same way and ask the compiled
# graph which of the keys we care about it does not declare
# (`undeclared_keys`, shown below): `requirements`. A `Command` that writes a
# key the graph does not declare is dropped without an error, so the
# collector's five stores "succeeded" into nothing.

# %%
from deepagents.middleware.subagents import create_sub_agent

from agentstate.core import undeclared_keys
from agentstate.rds import StateStorage, collector_spec

collector_graph = create_sub_agent(collector_spec(collector_model(), StateStorage()))
assert undeclared_keys(collector_graph, ["requirements"]) == ["requirements"]
{"keys the collector's graph does not declare": undeclared_keys(collector_graph, ["requirements"])}

# %% [markdown]
# The write-up's explanation, **"isolated execution contexts"**, is not the
# cause: the subagent's tools can share objects with the parent's tools (the
# cache comparison below shows the parent reading, in the same turn, what the
# subagent's tools put in a shared cache). The cause is the schema.
#
# ## The fix: one schema for both
# `create_deep_agent(state_schema=RdsAgentState)` forwards the schema to
# declarative subagents, so parent and collector both declare `requirements`
# with the field-merge reducer:

# %%
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.fixtures import file_fields
from agentstate.rds import build_shared_schema_agent

recorder = CommandRecorder(["task"])
shared = build_shared_schema_agent(parent_model(POSTGRES_FIELDS), collector_model(),
                                   middleware=[recorder], checkpointer=InMemorySaver())
state = shared.invoke(user_turn(), {"configurable": {"thread_id": "stage-04"}})
assert recorder.updates == [{"tool": "task", "update keys": ["messages", "requirements"]}]
assert state["requirements"] == POSTGRES_FIELDS and file_fields(state) == POSTGRES_FIELDS
{"task update keys": recorder.updates[0]["update keys"], "parent sees": len(state["requirements"])}

# %% [markdown]
# ## How the fix is written
# Five pieces, each with the failure that returns without it.
#
# **Piece 1: one schema, passed once.** The fixed builder passes
# `state_schema=RdsAgentState` (its default) to the one assembler of RDS
# agents, and gives the collector as a declarative spec:

# %%
from agentstate.display import show_source

show_source(build_shared_schema_agent, start="    secrets = secrets")

# %% [markdown]
# The assembler hands it to `create_deep_agent`; that one argument is the fix:

# %%
from agentstate.rds import assemble_rds_agent

show_source(assemble_rds_agent, start="    return create_deep_agent")

# %% [markdown]
# deepagents forwards that schema to every declarative subagent it builds
# (its own code, from the installed package):

# %%
forwarding = {"start": "    if state_schema is not None", "stop": "    return create_agent"}
show_source(create_sub_agent, **forwarding)

# %% [markdown]
# So the collector built with the parent's schema declares `requirements`;
# without it (the broken build above) it does not:

# %%
from agentstate.rds import RdsAgentState

with_schema = create_sub_agent(
    collector_spec(collector_model(), StateStorage()), state_schema=RdsAgentState
)
assert undeclared_keys(with_schema, ["requirements"]) == []
assert undeclared_keys(collector_graph, ["requirements"]) == ["requirements"]
{"undeclared with the schema": undeclared_keys(with_schema, ["requirements"]),
 "without": undeclared_keys(collector_graph, ["requirements"])}

# %% [markdown]
# **Piece 2: `share_state` for subagents that do not inherit the schema.**
# A middleware may declare state keys through its `state_schema` attribute,
# and LangGraph merges them into the agent's schema. `SharedStateMiddleware`
# is just that; `share_state` adds one to each subagent spec:

# %%
from agentstate.core import SharedStateMiddleware, share_state

show_source(SharedStateMiddleware)

# %%
show_source(share_state)

# %% [markdown]
# The broken build of this notebook declares `requirements` on the parent
# only, through `SharedStateMiddleware`. Give the same collector spec to
# `share_state` and the parent sees all five fields, without touching
# `create_deep_agent`'s `state_schema`; without it, none (the reproduction):

# %%
from agentstate.rds import RequirementsSyncMiddleware

shared_specs = share_state([collector_spec(collector_model(), StateStorage())], RdsAgentState)
via_middleware = assemble_rds_agent(
    parent_model(POSTGRES_FIELDS),
    StateStorage(),
    middleware=[SharedStateMiddleware(RdsAgentState), RequirementsSyncMiddleware()],
    subagents=shared_specs,
).invoke(user_turn())
assert undeclared_keys(create_sub_agent(shared_specs[0]), ["requirements"]) == []
assert via_middleware["requirements"] == POSTGRES_FIELDS
{"with share_state, the parent sees": len(via_middleware["requirements"]),
 "without (the reproduction)": len(split_state.get("requirements", {}))}

# %% [markdown]
# **Piece 3: the check.** The drop is silent, so make it loud where you build
# your subagents: `undeclared_keys` lists the keys a compiled graph lacks, and
# an assertion on it fails at build time instead of in production. It is
# what the cells above used:

# %%
show_source(undeclared_keys)

# %% [markdown]
# **Piece 4: the reducer on the shared key.** Sharing the key is not enough
# when subagents run in parallel: their results are writes to the parent's
# key in one super-step. The shared schema gives `requirements` the field
# merge of stage 02:

# %%
show_source(RdsAgentState)

# %% [markdown]
# The proof: the main agent delegates two field sets in one reply: two `task`
# calls, one super-step, two writes to `requirements` in the parent. Each set
# holds one field, so inside each collector there is only one write per step;
# the only parallel writes are the two `task` results. Without the reducer:

# %%
from langgraph.errors import InvalidUpdateError

from agentstate.rds import PlainRequirementsState

NETWORK = {"engine": "postgres"}
SIZING = {"instance_class": "db.t3.micro"}

# %%
merged = build_shared_schema_agent(parent_model(NETWORK, SIZING), collector_model(2)).invoke(
    user_turn()
)["requirements"]
try:
    build_shared_schema_agent(parent_model(NETWORK, SIZING), collector_model(2),
                              state_schema=PlainRequirementsState).invoke(user_turn())
    raise AssertionError("expected InvalidUpdateError")
except InvalidUpdateError as err:
    no_reducer = str(err).splitlines()[0]
assert merged == {**NETWORK, **SIZING}
assert "Can receive only one value per step" in no_reducer
{"with the reducer": sorted(merged), "without": no_reducer}

# %% [markdown]
# **Piece 5: a list reducer that a returning subagent cannot double.**
# A subagent receives the parent's state and returns the keys it changed,
# **whole**. For a list with `operator.add`, the parent then adds the whole
# returned list to its own: its existing items come back twice.

# %%
from agentstate.fixtures import AddNotesState, UniqueNotesState, build_notes_agent

start = {"messages": [("user", "Note that the database is for orders.")], "notes": ["pre"]}
notes = {
    "operator.add": build_notes_agent(AddNotesState).invoke(start)["notes"],
    "append_unique": build_notes_agent(UniqueNotesState).invoke(start)["notes"],
}
assert notes == {"operator.add": ["pre", "pre", "new"], "append_unique": ["pre", "new"]}
notes

# %% [markdown]
# The safe pattern is a reducer that is idempotent for what comes back:
# `append_unique` adds only unseen items, and the dict merge of `requirements`
# is idempotent by construction. If items may legitimately repeat, give them
# ids and merge by id (exercise 3). Applying a returned value a second time
# changes nothing with either reducer:

# %%
from agentstate.core import append_unique, merge_fields

returned = {"notes": ["pre", "new"], "requirements": POSTGRES_FIELDS}
assert append_unique(append_unique(["pre"], ["new"]), returned["notes"]) == ["pre", "new"]
assert merge_fields(POSTGRES_FIELDS, returned["requirements"]) == POSTGRES_FIELDS
show_source(append_unique)

# %% [markdown]
# ## Prove it: who sees what, schema fix versus cache fix
# The write-up's fix kept the split schema and shared a per-turn cache (a
# dict per thread, opened before the turn and dropped after it) between the
# parent's and the subagent's tools. Run all three builds on the same
# script: turn 1 delegates and reads back, turn 2 reads again, then a brand-new
# agent over the same SQLite file (a restart) reads again. As in the write-up,
# the cache fix mirrors state merged with the cache to `/requirements.json`;
# the last column counts the fields in that file after the restart. Each
# other column counts the fields the parent's `get_collected_requirements`
# listed at that moment.

# %%
import tempfile
from pathlib import Path

from agentstate.display import Table
from agentstate.fixtures import who_sees_what
from agentstate.rds import build_cache_fix_agent

# %%
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

# %%
assert who.column("same turn") == [0, 5, 5]
assert who.column("next turn") == [0, 0, 5]
assert who.column("after restart") == [0, 0, 5]
assert who.column("file after restart") == [0, 5, 5]
cache_fix = who.rows[1]
{"cache fix: the agent reads": cache_fix["after restart"],
 "cache fix: the user's file shows": cache_fix["file after restart"]}

# %% [markdown]
# The cache is shared with the subagent's tools (the parent's reader saw the
# five fields in the same turn: so much for isolated contexts), but the
# fields never enter state, so the agent has lost them at the next turn and
# after a restart, while the file the user looks at (written from the cache
# in turn 1, kept in the `files` state) still lists all five: the user and
# the agent disagree. The schema fix puts the fields in state, where the
# reducer and the checkpointer keep them,
# and the file agrees.

# %% [markdown]
# ## "The user's message is shown twice"
# A report about the write-up's agent says the user's message appeared twice during
# delegation. In state it does not: the parent holds it once, and the
# subagent never receives it. What the subagent does receive is one
# **human** message, the task description the parent wrote:

# %%
from langchain_core.messages import HumanMessage

collector = collector_model()
state = build_shared_schema_agent(parent_model(POSTGRES_FIELDS), collector).invoke(
    user_turn("Give me a Postgres 15.5 manifest")
)
parent_humans = [m.content for m in state["messages"] if isinstance(m, HumanMessage)]
subagent_humans = [m.content for m in collector.seen[0] if isinstance(m, HumanMessage)]
assert parent_humans == ["Give me a Postgres 15.5 manifest"]
assert len(subagent_humans) == 1 and json.loads(subagent_humans[0]) == POSTGRES_FIELDS
{"human messages in the parent": parent_humans, "human messages the subagent saw": subagent_humans}

# %% [markdown]
# A chat view does not read state, though: it renders a stream. Streamed with
# `subgraphs=True` (how a UI shows a subagent at work), the values stream
# carries the subagent's state too, under a `tools:<id>` namespace, and with
# it a second human message per delegation. In the table, `namespace` is
# `(parent)` for the main agent's graph and `tools` for the subagent's graph,
# which runs inside the parent's `tools` node (the `:<id>` part is dropped);
# `human message` is the first 40 characters of each distinct human message:

# %%
streamed = {}
for namespace, values in build_shared_schema_agent(
    parent_model(POSTGRES_FIELDS), collector_model()
).stream(user_turn("Give me a Postgres 15.5 manifest"), stream_mode="values", subgraphs=True):
    for m in values.get("messages", []):
        if isinstance(m, HumanMessage):
            streamed[m.id] = {"namespace": namespace[0].split(":")[0] if namespace else "(parent)",
                              "human message": m.content[:40]}
assert [r["namespace"] for r in streamed.values()] == ["(parent)", "tools"]
Table(streamed.values())

# %% [markdown]
# So the report does reproduce in this form: a view that renders every human
# message of the stream shows two per delegation, and when the model copies
# the user's words into the task description (our scripted parent writes
# JSON instead), the second one reads like the user's message again. Nothing
# is duplicated in state; the fix belongs in the view (render human messages
# of the root namespace only). We cannot run the UI of that report here, so
# this is the closest evidence, not proof that it was the cause.
#
# ## A knob: parallel subagents, reducer or not
# One field per task, as above, so only the `task` results run in parallel.

# %%
from agentstate.fixtures import label_fields


def parallel_tasks(tasks: int, reducer: bool) -> dict:
    sets = [{name: value} for name, value in label_fields(tasks).items()]
    schema = {} if reducer else {"state_schema": PlainRequirementsState}
    try:
        out = build_shared_schema_agent(parent_model(*sets), collector_model(tasks), **schema)
        kept = len(out.invoke(user_turn())["requirements"])
        return {"tasks": tasks, "reducer": reducer, "fields kept": kept, "error": ""}
    except InvalidUpdateError:
        return {"tasks": tasks, "reducer": reducer, "fields kept": 0,
                "error": "InvalidUpdateError"}


# %%
# NBVAL_IGNORE_OUTPUT
import ipywidgets as widgets

widgets.interact(parallel_tasks, tasks=widgets.IntSlider(value=2, min=1, max=4), reducer=True);

# %%
knob = Table(parallel_tasks(n, r) for n in (1, 2, 4) for r in (False, True))
assert knob.column("fields kept") == [1, 1, 0, 2, 0, 4]
assert knob.column("error") == ["", "", "InvalidUpdateError", "", "InvalidUpdateError", ""]
knob

# %% [markdown]
# With one task there is one write per step, so even the plain key works:
# the failure only shows when writes run in parallel. Give one collector two
# fields and the plain key already fails inside the subagent, as in stage 02:

# %%
try:
    build_shared_schema_agent(parent_model({"engine": "postgres", "username": "dbadmin"}),
                              collector_model(), state_schema=PlainRequirementsState
                              ).invoke(user_turn())
    raise AssertionError("expected InvalidUpdateError")
except InvalidUpdateError as err:
    inside = str(err).splitlines()[0]
assert inside.startswith("At key 'requirements': Can receive only one value per step")
inside

# %% [markdown]
# ## Summary
# - With only the parent declaring `requirements`, the collector's writes are
#   dropped silently inside the subagent; `task` returns only `messages`, and
#   the parent's validation reports every field missing. The cause is the
#   subagent's schema, not "isolated execution contexts".
# - One schema for both (`create_deep_agent(state_schema=RdsAgentState)`,
#   forwarded to declarative subagents, or `share_state` for specs that do
#   not inherit it) returns `requirements` with the message; the fields
#   persist across turns and a SQLite restart. `undeclared_keys` turns the
#   silent drop into a check you can assert.
# - The write-up's cache fix shows the fields in the same turn only: 5, then
#   0, 0.
# - Parallel subagents need the reducer: without it, `InvalidUpdateError`.
# - `operator.add` lists come back duplicated; use an idempotent reducer.
# - The user's message is stored once; the subagent sees one human message,
#   the task description, and a subgraph stream shows it as a second human
#   message.
# - The cache fix leaves `/requirements.json` listing fields the agent can no
#   longer read after the turn.
#
# ## Exercises
# 1. Give the collector its own schema that declares `requirements` *without*
#    the reducer, and the parent the one with it. Which parallel runs fail?
# 2. Give the collector a tool that writes `todos` (the key of the todo list),
#    and declare `todos` on it with `share_state`. Do its todos reach the
#    parent's state? Compare with `requirements`.
# 3. Write a reducer for a list of dicts with an `id` field that merges by id
#    (a later item with the same id replaces the earlier one), and show that
#    a returning subagent does not double the parent's items.
