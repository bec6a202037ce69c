# %% [markdown]
# # 01 · The loss: five parallel writes to one file keep one field
#
# Our agent writes Project Planton `AwsRdsInstance` manifests. A user asks for
# "a Postgres 15.5 manifest with sensible defaults"; the agent collects the
# requirements with a `store_requirement` tool and keeps them in a file,
# `/requirements.json`, in deepagents' virtual filesystem: read the file, add
# one field, write the file back. That works while the model stores one field
# per reply. Then a model stores five fields in one reply, every tool answers
# "Stored", and four fields are gone. This notebook reproduces the loss with
# the real libraries, shows where it comes from, and writes a layout that
# keeps every field with files alone.

# %% [markdown]
# ## Recap
# This is the first stage. Two words carry the series: LangGraph runs a graph
# in **super-steps** (every node scheduled for a step runs, then all their
# writes are applied together), and each state key has a **reducer** that
# decides how several writes to it combine.
#
# ## Goals
# - Reproduce the loss: five parallel `store_requirement` calls keep one field.
# - See which field survives (the last call of the reply, not the last to
#   finish) and why, in the state after each super-step.
# - See deepagents' own guard on its `write_file`, and why our tool slips past it.
# - Write the safe layout, one file per field, whole; prove it keeps five.

# %% [markdown]
# ## 1. Reproduce: five fields in one reply
# The tool, written whole. It reads the file from the state the tool was
# given, adds its field and returns the whole file as an update. The
# `work_seconds` pause stands in for real work between the read and the write.

# %%
import json
import time
from typing import Any

from deepagents.backends.utils import create_file_data, file_data_to_string
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

PATH = "/requirements.json"
work_seconds: dict[str, float] = {}  # field -> seconds between the read and the write


@tool
def store_requirement(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one requirement in /requirements.json."""
    files = runtime.state.get("files") or {}
    current = json.loads(file_data_to_string(files[PATH])) if PATH in files else {}
    time.sleep(work_seconds.get(field_name, 0))
    current[field_name] = value
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    return Command(
        update={"files": {PATH: create_file_data(json.dumps(current))}, "messages": [done]}
    )


# %% [markdown]
# A plain `create_deep_agent` with that tool. The scripted model (the
# series' offline default) answers with ONE message holding five
# `store_requirement` calls. The pauses make the **last** call of the message
# finish **first** (0.5 s for call 1 down to 0.1 s for call 5).

# %%
from deepagents import create_deep_agent

from agentstate.fixtures import POSTGRES_FIELDS, one_batch_model, user_turn
from agentstate.tracing import ToolTimeline

order = list(POSTGRES_FIELDS)
work_seconds.update({field: 0.1 * (len(order) - i) for i, field in enumerate(order)})
timeline = ToolTimeline()  # a middleware that records each tool call's step and thread
broken_agent = create_deep_agent(
    one_batch_model(POSTGRES_FIELDS), tools=[store_requirement], middleware=[timeline]
)
state = broken_agent.invoke(user_turn())
kept = json.loads(file_data_to_string(state["files"][PATH]))
kept

# %% [markdown]
# Five fields stored, one in the file, and every tool reported success:

# %%
from agentstate.display import Table
from agentstate.tracing import tool_replies

replies = Table(
    {"call #": i + 1, "tool said": m.content} for i, m in enumerate(tool_replies(state))
)
assert kept == {"username": "dbadmin"}
assert [said.startswith("Stored") for said in replies.column("tool said")] == [True] * 5
replies

# %% [markdown]
# ## 2. Look inside: one super-step, five threads
# The original write-up about this agent said the file "would overwrite
# (last-write-wins)" and "only the last field survived"; a later one (its
# turn cache, notebook 03) called tools "single-threaded within agent turn".
# The timeline (times vary from run to run, the claims below do not):

# %% tags=["nbval-ignore-output"]
from agentstate.fixtures import timeline_rows

rows = Table(timeline_rows(timeline.events))
assert set(rows.column("step")) == {3} and len(set(rows.column("thread"))) == 5
assert rows.column("finished") == [5, 4, 3, 2, 1]
rows

# %% [markdown]
# All five calls ran in one super-step on five threads, not one. And "last"
# needs pinning down: the survivor, call 5, finished **first**. What decides
# is the call's position in the message, not when it finished.

# %%
survivor = timeline.events[-1]
finish_rank = [e.call_id for e in timeline.finish_order()].index(survivor.call_id) + 1
assert list(kept) == [survivor.args["field_name"]]
Table([{"survivor": list(kept)[0], "call #": survivor.position + 1, "finished": finish_rank}])

# %% [markdown]
# <a id="super-step-table"></a>
# ## 3. Look inside: the state after each super-step
# With a checkpointer LangGraph keeps the state after every super-step; the
# series reads it as the table below, and later notebooks link back here.
# How to read it: **step** is the super-step that just ended (-1 is the empty
# state before the input, 0 writes the input); **next** is what runs in the
# following super-step (`tools x5` = five tasks of the tools node, one per
# tool call; `(end)` = nothing left); **changed** lists the keys that differ
# from the row above, i.e. what the previous row's `next` wrote. The last
# column lists the fields in the file.

# %%
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.tracing import state_by_step

work_seconds.clear()
agent = create_deep_agent(
    one_batch_model(POSTGRES_FIELDS), tools=[store_requirement], checkpointer=InMemorySaver()
)
config = {"configurable": {"thread_id": "stage-01"}}
agent.invoke(user_turn(), config)


def fields_in_file(values: dict) -> list[str]:
    files = values.get("files") or {}
    return sorted(json.loads(file_data_to_string(files[PATH]))) if PATH in files else []


history = Table(state_by_step(agent, config, lambda v: {"file": fields_in_file(v)}))
history

# %% [markdown]
# The file is empty until the tools' step ends, and from then on holds one
# field. What each node in `next` is (exactly the nodes of this graph):

# %%
from agentstate.fixtures import glossary_rows, graph_steps

steps = graph_steps(history.rows)
assert steps[2]["next"] == "tools x5" and steps[3]["changed"] == ["files", "messages"]
assert steps[2]["file"] == [] and steps[3]["file"] == ["username"]
Table(glossary_rows(agent))

# %% [markdown]
# Each call read the same empty file (the state from *before* the step) and
# returned a whole file holding only its own field. When the step ends,
# LangGraph hands the five writes to the `files` reducer **in task order**,
# which is the order of the calls in the message, and deepagents' reducer
# lets a later write to a path replace the whole value. The real reducer,
# called with the five writes in call order:

# %%
from deepagents.middleware.filesystem import _file_data_delta_reducer

writes = [{PATH: create_file_data(json.dumps({f: v}))} for f, v in POSTGRES_FIELDS.items()]
merged = _file_data_delta_reducer({}, writes)
assert fields_in_file({"files": merged}) == ["username"]
fields_in_file({"files": merged})

# %% [markdown]
# Shuffle the calls and a different field survives, always the last one:

# %%
import random


def survivor_of(call_order: list[str]) -> str:
    model = one_batch_model({f: POSTGRES_FIELDS[f] for f in call_order})
    out = create_deep_agent(model, tools=[store_requirement]).invoke(user_turn())
    return fields_in_file(out)[0]


shuffles = Table(
    {"call order": o, "survivor": survivor_of(o)}
    for o in (random.Random(seed).sample(order, len(order)) for seed in (7, 8, 11))
)
assert [s[-1] for s in shuffles.column("call order")] == shuffles.column("survivor")
shuffles

# %% [markdown]
# ## 4. Look inside: deepagents guards its own file tools
# deepagents 0.7.32 refuses a second mutation of one path in one reply, in
# its built-in `write_file` and `edit_file` (upstream PR #6446). The same five
# fields, each written as a whole file with `write_file`:

# %%
from agentstate.fixtures import one_reply_model
from agentstate.models import tool_call

whole_files = [
    tool_call("write_file", file_path=PATH, content=json.dumps({f: v}))
    for f, v in POSTGRES_FIELDS.items()
]
guarded = create_deep_agent(one_reply_model(*whole_files)).invoke(user_turn())
answers = Table(
    {"call #": i + 1, "status": m.status, "tool said": m.content}
    for i, m in enumerate(tool_replies(guarded))
)
assert answers.column("status") == ["success"] + ["error"] * 4
assert fields_in_file(guarded) == ["engine"]
answers

# %% [markdown]
# The first write lands and the other four come back as errors the model can
# read and retry. The guard matches deepagents' own file tools by **name**
# and their `file_path` argument. Our `store_requirement` is not one of them,
# so it runs unguarded, as in section 1; so does any custom tool that reads a
# file from state or a backend and writes it back.

# %% [markdown]
# ## 5. The fix: one file per field
# With files alone, the smallest layout that cannot lose a field gives each
# field its own path: parallel calls then write *different* keys of `files`,
# and the reducer above keeps every key. A reader merges the files back.
# Both tools, whole:

# %%
FOLDER = "/requirements/"


@tool("store_requirement")
def store_in_own_file(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one requirement in its own file, /requirements/<field>.json."""
    path = f"{FOLDER}{field_name}.json"
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    return Command(
        update={
            "files": {path: create_file_data(json.dumps({field_name: value}))},
            "messages": [done],
        }
    )


@tool
def get_collected_requirements(runtime: ToolRuntime) -> str:
    """Every requirement stored so far, as JSON."""
    files = runtime.state.get("files") or {}
    merged = {}
    for path in sorted(p for p in files if p.startswith(FOLDER)):
        merged.update(json.loads(file_data_to_string(files[path])))
    return json.dumps(merged, sort_keys=True)


# %% [markdown]
# The same five calls in one reply; in its **next** step the model reads the
# requirements back:

# %%
from agentstate.fixtures import store_then_read_model

fixed_agent = create_deep_agent(
    store_then_read_model(POSTGRES_FIELDS), tools=[store_in_own_file, get_collected_requirements]
)
fixed_state = fixed_agent.invoke(user_turn())
read_back = json.loads(tool_replies(fixed_state, "get_collected_requirements")[-1].content)
assert read_back == POSTGRES_FIELDS
sorted(p for p in fixed_state["files"] if p.startswith(FOLDER))

# %% [markdown]
# The package's version, `PerFieldFileStorage` under the six RDS tools, is the
# same layout; what it adds is a check of every value against the
# `AwsRdsInstance` spec before anything is written. Both keep the same files:

# %%
from agentstate.fixtures import PerFieldFileStorage
from agentstate.rds import assemble_rds_agent

package_state = assemble_rds_agent(
    store_then_read_model(POSTGRES_FIELDS), PerFieldFileStorage()
).invoke(user_turn())


def files_of(out: dict) -> dict:
    return {p: json.loads(file_data_to_string(d)) for p, d in out["files"].items()}


assert files_of(package_state) == files_of(fixed_state)
assert PerFieldFileStorage().read(package_state, None) == read_back
Table([{"files, both agents": len(files_of(package_state)), "fields read back": len(read_back)}])

# %% [markdown]
# ## 6. Prove: every layout, side by side
# The same five fields through three layouts: the shared file, one file per
# field, and the shared file with the model storing one field per reply (the
# other way out: each call then reads the file the previous step wrote).

# %%
from agentstate.fixtures import one_call_per_step_model


def fields_kept(tools: list, model) -> dict:
    out = create_deep_agent(model, tools=tools).invoke(user_turn())
    found = {}
    for path in (p for p in out["files"] if p == PATH or p.startswith(FOLDER)):
        found.update(json.loads(file_data_to_string(out["files"][path])))
    return {"fields kept": len(found), "model calls": model.position}


cases = {
    "one file, one reply": (store_requirement, one_batch_model),
    "one file per field, one reply": (store_in_own_file, one_batch_model),
    "one file, one call per reply": (store_requirement, one_call_per_step_model),
}
layouts = Table(
    {"layout": name, **fields_kept([tool_used], make_model(POSTGRES_FIELDS))}
    for name, (tool_used, make_model) in cases.items()
)
assert layouts.column("fields kept") == [1, 5, 5]
assert layouts.column("model calls") == [2, 2, 6]
layouts

# %% [markdown]
# One call per reply keeps five at the price of a model round trip per field,
# and only while the model never batches. The doctor, which reads an agent's
# tools and state schema without running it, names the broken agent's hazard
# and passes the fixed one:

# %%
from agentstate.doctor import diagnose

broken, fixed = diagnose(broken_agent), diagnose(fixed_agent)
assert broken.codes() == ["file-read-modify-write"] and fixed.errors == []
broken

# %% [markdown]
# ## A knob: how many parallel calls?
# Run the cells above first. Choose the number of `store_requirement` calls
# in one reply and the layout; the table shows how many fields survive.

# %%
from agentstate.fixtures import label_fields

LAYOUTS = {"one file": store_requirement, "one file per field": store_in_own_file}


def survivors(parallel_calls: int, layout: str) -> Table:
    model = one_batch_model(label_fields(parallel_calls))
    kept = fields_kept([LAYOUTS[layout]], model)["fields kept"]
    return Table([{"layout": layout, "parallel calls": parallel_calls, "fields kept": kept}])


# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

WIDE = {"description_width": "initial"}
knob_widget = widgets.interact(
    survivors,
    parallel_calls=widgets.IntSlider(
        value=5, min=1, max=20, description="parallel calls", style=WIDE
    ),
    layout=widgets.Dropdown(options=list(LAYOUTS), description="layout", style=WIDE),
)

# %% [markdown]
# The same claim for fixed settings: the shared file keeps one field whatever
# the number of calls, one file per field keeps them all.

# %%
knob = Table(survivors(n, layout).rows[0] for layout in LAYOUTS for n in (1, 5, 20))
assert knob.column("fields kept") == [1, 1, 1, 1, 5, 20]
knob

# %% [markdown]
# ## Summary
# - Five parallel read-modify-write calls on `/requirements.json` kept **one**
#   field, and every tool said "Stored".
# - The five calls ran in **one** super-step on five threads; each read the
#   file from before the step and wrote a whole file with its own field.
# - Writes apply in the order of the calls in the message, so the **last
#   call of the message** survives, here the one that finished first.
# - deepagents' `write_file`/`edit_file` refuse a second mutation of one path
#   in one reply; a custom tool that reads a file and writes it back is not
#   covered and still loses.
# - One file per field keeps all five in one reply; so does one call per
#   reply, at a model call per field. [Notebook 02](02_state_reducer.ipynb)
#   keeps requirements in a state key whose reducer merges fields.
#
# ## Exercises
# 1. Set every `work_seconds` to 0 and run the reproduction several times.
#    Does the survivor change? Why not?
# 2. With `store_in_own_file`, store the same field twice in one reply with
#    different values. Which value is kept, and is that deterministic?
# 3. Run the broken agent with `config={"max_concurrency": 1}`. The calls now
#    run one after another: does that save the fields? Explain with the
#    super-step rule.
