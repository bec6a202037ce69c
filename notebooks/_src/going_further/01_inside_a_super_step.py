# %% [markdown]
# # 01 · Going further: inside a super-step
#
# Notebook 01 drew the lost writes: five calls in one super-step, each
# reading the file from before the step, their writes folded in call order
# when it ended. This notebook opens the same run further. It shows the
# state after every super-step as a checkpointer keeps it, what each node
# deepagents adds does, deepagents' guard on its own file tools, and the
# calls in time. Each claim is asserted in the cell that shows it.

# %% [markdown]
# ## The state after each super-step
# The agent is the package's copy of the lesson's broken tool
# (`build_file_storage_agent`: `store_requirement` reads `/requirements.json`
# and writes it back whole; `tests/test_lesson_01.py` checks that both lose
# the same field), with a checkpointer. A **checkpointer** saves the state
# after every super-step under a `thread_id`; `state_by_step` reads those
# snapshots back, oldest first.

# %%
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.lessons.display import Table
from agentstate.lessons.fixtures import POSTGRES_FIELDS, file_fields, one_batch_model, user_turn
from agentstate.rds import build_file_storage_agent
from agentstate.tracing import state_by_step

agent = build_file_storage_agent(one_batch_model(POSTGRES_FIELDS), checkpointer=InMemorySaver())
config = {"configurable": {"thread_id": "inside-01"}}
agent.invoke(user_turn(), config)
history = Table(state_by_step(agent, config, lambda v: {"file": sorted(file_fields(v))}))
history

# %% [markdown]
# How to read it: **step** is the super-step that just ended (-1 is the
# empty state before the input, 0 writes the input); **next** is what runs in
# the following super-step (`tools x5` = five tasks of the `tools` node, one
# per tool call; `(end)` = nothing left); **changed** lists the keys that
# differ from the row above, i.e. what the row above's `next` wrote; **file**
# lists the fields in `/requirements.json`. The file is empty until the
# tools' step ends, and from then on holds one field:

# %%
steps = {row["step"]: row for row in history.rows}
tools_step = next(s for s, row in steps.items() if row["next"] == "tools x5")
assert steps[tools_step]["file"] == [] and steps[tools_step + 1]["file"] == ["username"]
assert "files" in steps[tools_step + 1]["changed"]
Table([steps[tools_step], steps[tools_step + 1]])

# %% [markdown]
# ## What each node is
# The `next` column names nodes that deepagents and LangChain put in the
# graph around the model and the tools. Each middleware hook that runs once
# per invoke is a node of its own, named `<Middleware>.<hook>`:

# %%
from agentstate.lessons.fixtures import glossary_rows

nodes = Table(glossary_rows(agent))
assert {"model", "tools", "PatchToolCallsMiddleware.before_agent"} <= set(nodes.column("node"))
nodes

# %% [markdown]
# Neither deepagents hook writes anything in this run: the patch step finds
# no unanswered tool call, and the notifier only speaks under `ainvoke` to a
# parent that started this agent as an asynchronous subagent. That is why
# their rows in the history change no key.

# %%
hooks = Table(
    {"hook": prev["next"], "keys it wrote": row["changed"] or "(none)"}
    for prev, row in zip(history.rows, history.rows[1:], strict=False)
    if prev["next"].endswith(("before_agent", "after_agent"))
)
assert len(hooks) == 2 and hooks.column("keys it wrote") == ["(none)", "(none)"]
hooks

# %% [markdown]
# ## deepagents guards its own file tools
# Since deepagents 0.7.16, its own `write_file`, `edit_file` and `delete`
# tools refuse a second change to one path in one reply. Before it, they
# lost writes like the lesson's tool: five `edit_file` calls on one file in
# one reply all say they succeeded under 0.7.15, and one edit is in the file
# ([which releases](../../docs/hazards-by-version.md#builtin-parallel-edit)).
# The tutorial pins a newer deepagents. The five fields, each written as a
# whole file with `write_file`:

# %%
import json

from agentstate.lessons.fixtures import one_reply_model
from agentstate.models import tool_call

PATH = "/requirements.json"
whole_files = [
    tool_call("write_file", file_path=PATH, content=json.dumps({f: v}))
    for f, v in POSTGRES_FIELDS.items()
]
guarded = build_file_storage_agent(one_reply_model(*whole_files)).invoke(user_turn())
answers = Table(
    {"call #": i + 1, "status": m.status, "tool said": m.content}
    for i, m in enumerate(m for m in guarded["messages"] if m.type == "tool")
)
assert answers.column("status") == ["success"] + ["error"] * 4
answers

# %% [markdown]
# The first write lands. The other four come back as errors the model can
# read and retry. The guard knows deepagents' tools by name, so a custom
# tool that reads a file and writes it back, like the lesson's, is not
# guarded.
#
# ## The calls in time
# Lesson 01 drew the super-step as state flow. `draw_run` draws the same
# kind of run in time: a row per call on its thread, the super-step as a
# shaded band, the writes applied at its end (dashed line). Here a
# `FinishOrder` (lesson 01) holds the calls until all five run, then lets the
# last call of the reply finish first; its write still comes last:

# %%
from agentstate.lessons.simulation import FinishOrder
from agentstate.tracing import ToolTimeline, draw_run

timeline = ToolTimeline()
timed = build_file_storage_agent(
    one_batch_model(POSTGRES_FIELDS),
    between=FinishOrder(timeline, order=list(POSTGRES_FIELDS)[::-1]),  # last call first
    middleware=[timeline],
)
timed_state = timed.invoke(user_turn())
assert timeline.finish_order()[0].args["field_name"] == "username"
draw_run(timeline, timed_state, key="files", title="five calls, the last to start finishes first")

# %% [markdown]
# ## One worker: one after another, still one super-step
# `max_concurrency=1` in the config makes LangGraph run the step's tasks one
# at a time. The calls no longer overlap, yet they are still tasks of one
# super-step: each reads the state from before it, and one field survives.

# %%
timeline = ToolTimeline()
serial = build_file_storage_agent(one_batch_model(POSTGRES_FIELDS), middleware=[timeline])
serial_state = serial.invoke(user_turn(), {"max_concurrency": 1})
by_start = sorted(timeline.events, key=lambda e: e.start)
assert all(b.start >= a.end for a, b in zip(by_start, by_start[1:], strict=False))
assert file_fields(serial_state) == {"username": "dbadmin"}
draw_run(timeline, serial_state, key="files", title="max_concurrency=1: one at a time")

# %% [markdown]
# ## Summary
# - A checkpointer keeps the state after every super-step; the five writes
#   land together when the tools' step ends, and the file then holds one
#   field.
# - deepagents adds hook nodes around the model and the tools; in this run
#   they write nothing.
# - deepagents' own file tools refuse a second change to one path in one
#   reply (since 0.7.16); a custom tool that rewrites the file is not guarded.
# - In time, the last call of the reply may finish first; its write still
#   comes last, because the writes are folded in call order.
# - Running the calls one at a time does not help: they are still one
#   super-step, each reading the state from before it.
