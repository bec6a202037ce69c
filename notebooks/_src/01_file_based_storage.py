# %% [markdown]
# # 01 · The loss: five parallel writes to one file keep one field
#
# Our agent writes Project Planton `AwsRdsInstance` manifests (an AWS RDS
# database in YAML). Its first version kept the user's requirements in
# `/requirements.json`: a `store_requirement` tool read the file, added one
# field and wrote it back. Its developers' write-up says what happened when
# the model stored five fields in one reply: "Only the last field survived".
# We reproduce that loss, draw where it comes from, pin down which field is
# "the last", and write a layout that keeps every field.

# %% [markdown]
# ### The write-ups this series tests
# - **01-02**, the RDS agent's storage design (November 2025,
#   [source](https://github.com/plantoncloud-inc/graph-fleet/blob/84e27f821ba41a88ed3908eed0f86bea8185cea0/src/agents/rds_manifest_generator/docs/requirements_storage/README.md)):
#   the file version lost fields, "Only the last field survived"; with a
#   reducer "All 5 field updates are preserved and merged correctly".
# - **03**, its changelog of November 11, 2025
#   ([source](https://github.com/plantoncloud-inc/graph-fleet/blob/90e10f27a73d8417645d56f7988379f35a38a466/changelog/2025-11/2025-11-11-134814-rds-agent-same-turn-requirements-visibility.md)):
#   "Commands are batched and applied only after ALL tools complete"; tools
#   are "Single-threaded within agent turn".
# - **04**, its changelog of November 19, 2025
#   ([source](https://github.com/plantoncloud-inc/graph-fleet/blob/ec8a1c8ae5b5eff416897cd9964c095f31a42123/_changelog/2025-11/2025-11-19-232419-rds-agent-requirements-cache-fix.md)):
#   "DeepAgents subagents run in isolated execution contexts".
# - **05**, cache-lm's notes (January 2026,
#   [source](https://github.com/itsntshaw/cache-lm/blob/286194947359e5ec7d8707591be55a7a71fa9139/src/cache_lm/README.md)):
#   "the large manual must be a token-identical prefix across all expert calls".
# - **06**, a memory-capture post-mortem shared with the project (not
#   public): "Prompt-only constraints are insufficient".
#
# The first three are engineering notes in Project Planton's public
# graph-fleet repository, the fourth a technical assignment's. We keep their
# stories and tool names, and believe a diagnosis once a cell reproduces it.

# %% [markdown]
# ## Recap
# The first stage; its words, also in the [glossary](../docs/glossary.md):
#
# - **LangGraph** runs an agent as a graph of nodes over a shared **state**
#   (a dict of keys); LangChain's `create_agent` builds a `model` node and a
#   `tools` node in a loop; **deepagents**' `create_deep_agent` adds a
#   virtual filesystem (the `files` key) and subagents.
# - A **tool call** asks for a tool run in the model's reply (an
#   `AIMessage`), which may hold several. A tool reads the state from its
#   **`ToolRuntime`** argument and returns a **`Command`** to change it.
# - **Middleware** hooks into an agent's loop, e.g. around each tool call.
# - In a **super-step** the nodes scheduled together run on the state as it
#   was when the step began; their writes apply together at its end. A
#   **reducer** decides how several writes to one key combine.
#
# ## Goals
# - Reproduce the loss: five parallel `store_requirement` calls keep one field.
# - See it drawn: one super-step, five threads, which write survived.
# - See deepagents' own guard on `write_file`, and why our tool slips past it.
# - Write the safe layout, one file per field; prove it keeps all five.

# %% [markdown]
# ## 1. Reproduce: five fields in one reply
# The tool, whole: read the file from the state, add a field, return the
# whole file in a `Command`. `work_seconds` stands in for real work between
# the read and the write.

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
# The model is **scripted** (the series' offline default: the same replies
# every run). Its first reply holds five `store_requirement` calls:

# %%
from agentstate.fixtures import POSTGRES_FIELDS
from agentstate.models import ScriptedChatModel, reply, tool_call

TURN = {"messages": [{"role": "user", "content": "A Postgres 15.5 manifest, sensible defaults"}]}


def stores(fields: dict) -> list:
    """One store_requirement call per field, in the order given."""
    return [tool_call("store_requirement", field_name=f, value=v) for f, v in fields.items()]


def one_reply(*calls) -> ScriptedChatModel:
    """A model whose first reply makes these calls at once, then answers."""
    return ScriptedChatModel(script=[reply(*calls), reply(text="Stored.")])


POSTGRES_FIELDS

# %% [markdown]
# A plain `create_deep_agent` with that tool. The pauses make the **last**
# call finish **first** (0.5 s for call 1 down to 0.1 s for call 5).
# `ToolTimeline`, a middleware, records each call's super-step, thread and
# times.

# %%
from deepagents import create_deep_agent

from agentstate.tracing import ToolTimeline

order = list(POSTGRES_FIELDS)
work_seconds.update({field: 0.1 * (len(order) - i) for i, field in enumerate(order)})
timeline = ToolTimeline()
broken_agent = create_deep_agent(
    one_reply(*stores(POSTGRES_FIELDS)), tools=[store_requirement], middleware=[timeline]
)
state = broken_agent.invoke(TURN)
kept = json.loads(file_data_to_string(state["files"][PATH]))
assert kept == {"username": "dbadmin"}
kept

# %% [markdown]
# Five fields stored, one in the file. Yet every tool reported success:

# %%
from agentstate.display import Table

Table(
    {"call #": i + 1, "tool said": m.content, "status": m.status}
    for i, m in enumerate(m for m in state["messages"] if m.type == "tool")
)

# %% [markdown]
# ## 2. Look inside: the run, drawn
# `draw_run` draws what the timeline recorded: a row per tool call (`#k`:
# its place in the reply), a row for the model; green writes survived in the
# final `files`, red ones were lost. It draws your own agent the same way.

# %%
from agentstate.tracing import draw_run

draw_run(timeline, state, key="files", title="one reply, five store_requirement calls")

# %% [markdown]
# All five calls ran in **one super-step** (the shaded band) on five
# threads, not one at a time as the turn-cache write-up believed. Each read
# the file as it was when the step began (empty) and wrote back a file with
# its own field. At the step's end (dashed line) LangGraph applied the
# writes in the reply's call order, and deepagents' `files` reducer lets a
# later write replace the whole file. So "the last field" is the last **in
# the reply**: call 5, which finished first.

# %%
survivor = next(e for e in timeline.events if e.args["field_name"] in kept)
finished = [e.call_id for e in timeline.finish_order()].index(survivor.call_id) + 1
assert (survivor.position + 1, finished) == (5, 1)
Table(
    [
        {
            "field kept": survivor.args["field_name"],
            "its place in the reply": f"{survivor.position + 1} of 5",
            "finished": f"{finished} of 5",
            "threads used": timeline.thread_count(),
        }
    ]
)

# %% [markdown]
# Shuffle the calls (no pauses) and the last of the reply survives:

# %%
import random


def survivor_of(call_order: list[str]) -> str:
    fields = {f: POSTGRES_FIELDS[f] for f in call_order}
    out = create_deep_agent(one_reply(*stores(fields)), tools=[store_requirement]).invoke(TURN)
    return next(iter(json.loads(file_data_to_string(out["files"][PATH]))))


work_seconds.clear()
shuffled = [random.Random(seed).sample(order, len(order)) for seed in (7, 8, 11)]
shuffles = Table({"call order": o, "survivor": survivor_of(o)} for o in shuffled)
assert shuffles.column("survivor") == [o[-1] for o in shuffled]
shuffles

# %% [markdown]
# ## 3. Look inside: deepagents guards its own file tools
# deepagents 0.7.32's own `write_file`, `edit_file` and `delete` refuse a second
# change to one path in one reply (upstream PR #6446). The five fields, each written
# as a whole file with `write_file`:

# %%
whole_files = [
    tool_call("write_file", file_path=PATH, content=json.dumps({f: v}))
    for f, v in POSTGRES_FIELDS.items()
]
guarded = create_deep_agent(one_reply(*whole_files)).invoke(TURN)
answers = Table(
    {"call #": i + 1, "status": m.status, "tool said": m.content}
    for i, m in enumerate(m for m in guarded["messages"] if m.type == "tool")
)
assert answers.column("status") == ["success"] + ["error"] * 4
answers

# %% [markdown]
# The first write lands; the other four come back as errors the model can
# read and retry. The guard knows deepagents' own tools by **name**: ours,
# like any custom tool that reads a file and writes it back, is unguarded.
#
# ## 4. The fix: one file per field
# Give each field its own path: parallel calls then write *different* paths,
# and the reducer keeps every path. A reader merges the files back. Both
# tools, whole:

# %%
FOLDER = "/requirements/"


@tool("store_requirement")
def store_in_own_file(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one requirement in its own file, /requirements/<field>.json."""
    path = f"{FOLDER}{field_name}.json"
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    data = create_file_data(json.dumps({field_name: value}))
    return Command(update={"files": {path: data}, "messages": [done]})


@tool
def get_collected_requirements(runtime: ToolRuntime) -> str:
    """Every requirement stored so far, as JSON."""
    files = runtime.state.get("files") or {}
    merged = {}
    for path in sorted(p for p in files if p.startswith(FOLDER)):
        merged.update(json.loads(file_data_to_string(files[path])))
    return json.dumps(merged, sort_keys=True)


# %% [markdown]
# Five calls in one reply; the model's **next** reply reads them back:


# %%
def store_then_read() -> ScriptedChatModel:
    return ScriptedChatModel(
        script=[
            reply(*stores(POSTGRES_FIELDS)),
            reply(tool_call("get_collected_requirements")),
            reply(text="All five stored."),
        ]
    )


fixed_timeline = ToolTimeline()
fixed_agent = create_deep_agent(
    store_then_read(),
    tools=[store_in_own_file, get_collected_requirements],
    middleware=[fixed_timeline],
)
fixed_state = fixed_agent.invoke(TURN)
read_back = json.loads(fixed_state["messages"][-2].content)
assert read_back == POSTGRES_FIELDS
read_back

# %% [markdown]
# Five writes kept; the reader sees all five, as it runs in a later
# super-step than the writers.

# %%
draw_run(
    fixed_timeline,
    fixed_state,
    key="files",
    saw=lambda e: f"saw {len(json.loads(e.reply))} fields",
    title="one file per field",
)

# %% [markdown]
# The package's `PerFieldFileStorage` is this layout under the RDS agent's
# six tools, adding a check of every value against the `AwsRdsInstance`
# spec. Both keep the same files:

# %%
from agentstate.fixtures import PerFieldFileStorage
from agentstate.rds import assemble_rds_agent

package_state = assemble_rds_agent(store_then_read(), PerFieldFileStorage()).invoke(TURN)


def files_of(out: dict) -> dict:
    return {p: json.loads(file_data_to_string(d)) for p, d in out["files"].items()}


assert files_of(package_state) == files_of(fixed_state)
Table({"file": p, "holds": d} for p, d in sorted(files_of(package_state).items()))

# %% [markdown]
# ## 5. Prove: every layout, side by side
# Three layouts: the shared file, one file per field, and the shared file
# with one field per reply (each call then reads the previous step's file).


# %%
def fields_kept(tool_used, fields: dict, one_call_per_reply: bool = False) -> dict:
    calls = stores(fields)
    replies = [reply(c) for c in calls] if one_call_per_reply else [reply(*calls)]
    model = ScriptedChatModel(script=[*replies, reply(text="Stored.")])
    out = create_deep_agent(model, tools=[tool_used]).invoke(TURN)
    found = {}
    for path in (p for p in out["files"] if p == PATH or p.startswith(FOLDER)):
        found.update(json.loads(file_data_to_string(out["files"][path])))
    return {"fields kept": len(found), "model calls": model.position}


cases = {
    "one file, one reply": (store_requirement, False),
    "one file per field, one reply": (store_in_own_file, False),
    "one file, one call per reply": (store_requirement, True),
}
layouts = Table(
    {"layout": name, **fields_kept(tool_used, POSTGRES_FIELDS, one_call)}
    for name, (tool_used, one_call) in cases.items()
)
assert layouts.column("fields kept") == [1, 5, 5]
layouts

# %% [markdown]
# One call per reply keeps five at a model call per field (6 calls, not 2).
#
# The **doctor** (`agentstate.doctor.diagnose`) reads an agent's tools and
# state schema, without running it, and names this series' hazards. Every
# deep agent has a `general-purpose` **subagent** with the same tools, so the
# doctor finds the hazard there too:

# %%
from agentstate.display import compare_findings
from agentstate.doctor import diagnose

broken, fixed = diagnose(broken_agent), diagnose(fixed_agent)
assert broken.codes() == ["file-read-modify-write"] and fixed.codes() == []
compare_findings({"broken agent": broken, "fixed agent": fixed})

# %% [markdown]
# ## A knob: how many parallel calls?
# Run the cells above first. Whatever the number of parallel calls, the
# shared file keeps one field and one file per field keeps them all.

# %%
LAYOUTS = {"one file": store_requirement, "one file per field": store_in_own_file}


def survivors(parallel_calls: int, layout: str) -> Table:
    fields = {f"labels.k{i:02d}": str(i) for i in range(parallel_calls)}
    kept = fields_kept(LAYOUTS[layout], fields)["fields kept"]
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
# ## Summary
# - Five parallel read-modify-write calls on `/requirements.json` kept **one**
#   field, while every tool said "Stored".
# - They ran in **one** super-step on five threads, each on the file from
#   before the step; the writes applied in call order, so the **last call of
#   the reply** survives, here the first to finish.
# - deepagents guards its own `write_file`/`edit_file`/`delete`, not custom tools.
# - One file per field keeps all five; so does one call per reply, at a
#   model call per field. [Notebook 02](02_state_reducer.ipynb) merges fields
#   in a state key with a reducer.
# - Going further: [inside a super-step](going_further/01_inside_a_super_step.ipynb),
#   the state after every step and each node deepagents adds.
#
# ## Exercises
# 1. Set every `work_seconds` to 0 and run the reproduction several times.
#    Does the survivor change? Why not?
# 2. With `store_in_own_file`, store the same field twice in one reply with
#    different values. Which value is kept, and is that deterministic?
# 3. Run the broken agent with `config={"max_concurrency": 1}`. The calls now
#    run one after another: does that save the fields? Draw the run and
#    explain with the super-step rule.
