# %% [markdown]
# # 02 · The state reducer: requirements that merge field by field
#
# Stage 01 ended on a measured loss: five parallel `store_requirement` calls,
# one field left in `/requirements.json`. The obvious next move is to keep
# requirements in agent state instead of a file. Done naively it fails loudly;
# done with a reducer it keeps every field, even 500 at once. The file does
# not go away: users like to open `/requirements.json`, so a middleware
# writes it for them after each turn. Along the way the master password stops
# being plain text anywhere the agent keeps things.

# %% [markdown]
# ## Recap
# In stage 01 each parallel call read the file from before the super-step and
# wrote a whole new file; the `files` reducer kept the write of the last call
# in the AIMessage. One call per model step avoided the loss but cost a model
# round trip per field.
#
# ## Goals
# - See a plain `requirements: dict` key fail with `InvalidUpdateError`, and
#   silently replace itself across steps.
# - Import the fix: a `requirements` key with a pure field-merge reducer, and
#   a middleware that syncs `/requirements.json` after the turn.
# - Watch the state after each super-step.
# - Persist requirements across turns (in memory and in SQLite).
# - Prove no loss at scale: 500 parallel calls, 500 fields.
# - Keep the password out of state, files, manifests and checkpoints.

# %%
# NBVAL_IGNORE_OUTPUT
from importlib.metadata import version

versions = {p: version(p) for p in ("langgraph", "langchain", "deepagents")}
assert all(versions.values())
versions

# %% [markdown]
# ## Reproduce: a plain dict key
# `PlainRequirementsState` declares `requirements: dict` with no reducer, and
# the tools write `{field: value}` to it. Five writes in one super-step:

# %%
from langgraph.errors import InvalidUpdateError

from agentstate.rds import build_plain_dict_agent
from agentstate.rds.scenarios import POSTGRES_FIELDS, one_batch_model, user_turn
from agentstate.tracing import ToolTimeline

timeline = ToolTimeline()
agent = build_plain_dict_agent(one_batch_model(POSTGRES_FIELDS), middleware=[timeline])
try:
    agent.invoke(user_turn())
    raise AssertionError("expected InvalidUpdateError")
except InvalidUpdateError as err:
    error = err
type(error).__name__, str(error).splitlines()[0]

# %% [markdown]
# The error is raised after all five tools ran, when LangGraph applies the
# step's writes, so it never reaches the model as a ToolMessage: the whole
# invoke fails.

# %%
assert "Can receive only one value per step" in str(error)
assert len(timeline.events) == 5 and {e.step for e in timeline.events} == {3}
{"tools that ran": len(timeline.events), "super-step": timeline.events[0].step}

# %% [markdown]
# Across two steps there is no error at all, which is worse: the second write
# replaces the whole dict.

# %%
from agentstate.rds.scenarios import one_call_per_step_model

two_steps = build_plain_dict_agent(
    one_call_per_step_model({"engine": "postgres", "username": "dbadmin"})
).invoke(user_turn())
assert two_steps["requirements"] == {"username": "dbadmin"}
two_steps["requirements"]

# %% [markdown]
# ## The fix: a reducer on the key
# `RdsAgentState` annotates `requirements` with `merge_requirements`, a pure
# function that merges two dicts field by field:

# %%
import inspect

from agentstate.rds import RdsAgentState, merge_requirements

print(inspect.getsource(merge_requirements))
RdsAgentState.__annotations__["requirements"].__forward_arg__

# %% [markdown]
# The stage 02 agent stores into that key (`StateStorage`), and a
# `RequirementsSyncMiddleware` writes `/requirements.json` in its
# `after_agent` hook, once per turn.

# %%
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.rds import build_reducer_agent
from agentstate.rds.scenarios import file_fields

agent = build_reducer_agent(one_batch_model(POSTGRES_FIELDS), checkpointer=InMemorySaver())
config = {"configurable": {"thread_id": "stage-02"}}
state = agent.invoke(user_turn(), config)
assert state["requirements"] == POSTGRES_FIELDS
assert file_fields(state) == POSTGRES_FIELDS
state["requirements"]

# %% [markdown]
# ## Look inside: the state after each super-step
# The five fields land together when the tools' super-step is applied; the
# file is written later, by the `after_agent` step that ends the turn.

# %%
from agentstate.display import Table
from agentstate.tracing import state_by_step

history = Table(
    state_by_step(
        agent,
        config,
        lambda v: {
            "requirements": len(v.get("requirements", {})),
            "/requirements.json": len(file_fields(v)),
        },
    )
)
history

# %%
rows = history.rows
tools_applied = next(r for r in rows if r["requirements"] == 5)
file_written = next(r for r in rows if r["/requirements.json"] == 5)
assert tools_applied["step"] < file_written["step"]
assert "after_agent" in rows[rows.index(file_written) - 1]["next"]
{"fields merged at step": tools_applied["step"], "file synced at step": file_written["step"]}

# %% [markdown]
# ## Why the reducer must be pure
# LangGraph may call a reducer more than once per write: the edge after the
# tools node reads state through throwaway copies first. Count the calls with
# a wrapper around `merge_requirements`:

# %%
from typing import Annotated, Any, NotRequired

from deepagents import DeepAgentState, create_deep_agent

from agentstate.rds import StateStorage, make_rds_tools

reducer_calls = []


def counting_merge(left, right):
    reducer_calls.append(right)
    return merge_requirements(left, right)


class CountingState(DeepAgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], counting_merge]


counted = create_deep_agent(
    one_batch_model(POSTGRES_FIELDS), make_rds_tools(StateStorage()), state_schema=CountingState
).invoke(user_turn())
assert counted["requirements"] == POSTGRES_FIELDS and len(reducer_calls) > 5
{"writes": 5, "reducer calls": len(reducer_calls)}

# %% [markdown]
# A reducer that appended to a list or counted something would double it. A
# pure merge gives the same answer however often it runs.
#
# ## Bad input changes nothing
# The tools validate every value against the AwsRdsInstance rules before
# writing. A wrong value comes back to the model as an error; the good calls
# of the same batch still land.

# %%
from langchain_core.messages import ToolMessage

mixed = {"engine": "postgres", "instance_class": "t3.micro", "port": 70000, "colour": "blue"}
state = build_reducer_agent(one_batch_model(mixed)).invoke(user_turn())
tool_replies = [m for m in state["messages"] if isinstance(m, ToolMessage)]
answers = Table(
    {"call": f, "status": m.status, "reply": m.content}
    for f, m in zip(mixed, tool_replies, strict=True)
)
assert answers.column("status") == ["success", "error", "error", "error"]
assert state["requirements"] == {"engine": "postgres"}
answers

# %% [markdown]
# ## Persistence across turns
# With a checkpointer, requirements live on the thread: the second turn adds
# to the first. First in memory:

# %%
from agentstate.models import ScriptedChatModel, reply
from agentstate.rds.scenarios import store_calls


def two_turn_model():
    return ScriptedChatModel(
        script=[
            reply(*store_calls({"engine": "postgres", "engine_version": "15.5"})),
            reply(text="Noted."),
            reply(*store_calls({"instance_class": "db.t3.micro"})),
            reply(text="Noted."),
        ]
    )


agent = build_reducer_agent(two_turn_model(), checkpointer=InMemorySaver())
config = {"configurable": {"thread_id": "customer-42"}}
agent.invoke(user_turn("Postgres 15.5 please"), config)
turn2 = agent.invoke(user_turn("Make it a db.t3.micro"), config)
assert sorted(turn2["requirements"]) == ["engine", "engine_version", "instance_class"]
sorted(turn2["requirements"])

# %% [markdown]
# Then in SQLite: one agent writes, and a brand-new agent (as after a process
# restart) opens the same database file and finds the thread.

# %%
import tempfile
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver

db_path = Path(tempfile.mkdtemp()) / "checkpoints.sqlite"
with SqliteSaver.from_conn_string(str(db_path)) as saver:
    build_reducer_agent(two_turn_model(), checkpointer=saver).invoke(
        user_turn("Postgres 15.5 please"), config
    )
with SqliteSaver.from_conn_string(str(db_path)) as saver:
    restarted = build_reducer_agent(ScriptedChatModel(script=[]), checkpointer=saver)
    reloaded = restarted.get_state(config).values["requirements"]
assert reloaded == {"engine": "postgres", "engine_version": "15.5"}
reloaded

# %% [markdown]
# ## Prove: no loss at scale
# 500 `store_requirement` calls in one AIMessage (500 distinct metadata
# labels, `labels.k000` ... `labels.k499`), one super-step:

# %%
from agentstate.rds.scenarios import label_fields

big = build_reducer_agent(one_batch_model(label_fields(500))).invoke(user_turn())
scale = {"calls": 500, "in state": len(big["requirements"]), "in file": len(file_fields(big))}
assert scale == {"calls": 500, "in state": 500, "in file": 500}
scale

# %% [markdown]
# ## A knob: parallel calls with the reducer
# Same slider as in stage 01, now over the fixed agent.

# %%
def kept_with_reducer(n_calls: int) -> dict:
    out = build_reducer_agent(one_batch_model(label_fields(n_calls))).invoke(user_turn())
    return {"parallel calls": n_calls, "fields kept": len(out["requirements"])}


# %%
# NBVAL_IGNORE_OUTPUT
import ipywidgets as widgets

widgets.interact(kept_with_reducer, n_calls=widgets.IntSlider(value=5, min=1, max=50));

# %%
knob = Table(kept_with_reducer(n) for n in (1, 2, 5, 20, 50))
assert knob.column("fields kept") == knob.column("parallel calls")
knob

# %% [markdown]
# ## The password is never plain text
# `SecretRedactionMiddleware` wraps the model call: before the model's reply is
# written to state, a plain password in `store_requirement` is moved into a
# `SecretStore` (process memory, never checkpointed) and replaced by a
# reference. The manifest carries the reference; a deploy step resolves it.
# The plain value below is random and never displayed.

# %%
import secrets as py_secrets

from agentstate.models import tool_call
from agentstate.rds import MANIFEST_PATH, SecretStore
from agentstate.rds.scenarios import VALID_REQUIREMENTS

plain = py_secrets.token_urlsafe(18)
store = SecretStore()
model = ScriptedChatModel(
    script=[
        reply(*store_calls({**VALID_REQUIREMENTS, "password": plain})),
        reply(tool_call("validate_manifest"), tool_call("generate_rds_manifest")),
        reply(text="Your manifest is in /manifest.yaml."),
    ]
)
with SqliteSaver.from_conn_string(str(db_path)) as saver:
    final = build_reducer_agent(model, secrets=store, checkpointer=saver).invoke(
        user_turn(), {"configurable": {"thread_id": "with-password"}}
    )
final["requirements"]["password"]

# %% [markdown]
# The generated manifest, deterministic and camelCase, with the reference:

# %%
from deepagents.backends.utils import file_data_to_string

manifest = file_data_to_string(final["files"][MANIFEST_PATH])
print(manifest)

# %% [markdown]
# Where could the plain value still be? Search everything the agent kept:
# state, both files, every message, and the raw bytes of the SQLite file.

# %%
places = {
    "state": repr(final),
    "/requirements.json": file_data_to_string(final["files"]["/requirements.json"]),
    "/manifest.yaml": manifest,
}
sqlite_bytes = b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))
assert b"$secret:rds-master-password" in sqlite_bytes  # the search does find what is there
found = {name: plain in text for name, text in places.items()}
found["sqlite files"] = plain.encode() in sqlite_bytes
assert not any(found.values())
assert store.resolve("$secret:rds-master-password") == plain
found

# %% [markdown]
# ## Summary
# - A plain dict key takes one write per super-step: five parallel writes
#   raise `InvalidUpdateError` (after the tools ran), and writes in later
#   steps silently replace the dict.
# - `requirements: Annotated[dict, merge_requirements]` merges field by field:
#   5 of 5, and 500 of 500 fields in one step. The reducer may run several
#   times per write, so it must be pure.
# - State is the source of truth; `/requirements.json` is written for the
#   user by `after_agent`, once per turn.
# - A checkpointer keeps requirements per `thread_id`, in memory or in SQLite
#   across a restart.
# - The password lives in a `SecretStore`; state, files, the manifest and the
#   checkpoint hold only `$secret:rds-master-password`.
#
# ## Exercises
# 1. Write a reducer that deletes a field when the update's value is `None`,
#    and a test that shows it is still pure.
# 2. Store the same field twice in one batch with different values. Which
#    value wins, and why is that deterministic?
# 3. Remove `RequirementsSyncMiddleware` and ask a `get_collected_requirements`
#    reader in the same batch as the writers what it sees. (Stage 03 is about
#    exactly that.)
