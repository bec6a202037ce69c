# %% [markdown]
# # 02 · The state reducer: requirements that merge field by field
#
# Stage 01 ended on a measured loss: five parallel `store_requirement` calls,
# one field left in `/requirements.json`. The obvious next move is to keep
# requirements in agent state instead of a file. Done naively it fails loudly;
# done with a reducer it keeps every field, even 500 at once. The file does
# not go away: users like to open `/requirements.json`, so a middleware
# writes it for them after each turn. Along the way the master password stops
# being plain text anywhere the agent keeps things. By the end you can write
# each of these pieces into your own agent, and you will have seen each one
# fail when it is taken out.

# %% [markdown]
# ## Recap
# In stage 01 each parallel call read the file from before the super-step and
# wrote a whole new file; the `files` reducer kept the write of the last call
# in the AIMessage. One file per field kept every field, and so did one call
# per model step, at the price of a model round trip per field.
#
# ## Goals
# - See a plain `requirements: dict` key fail with `InvalidUpdateError`, and
#   silently replace itself across steps.
# - Import the fix, then watch the state after each super-step.
# - Learn how the fix is written, piece by piece: the `Annotated` key, a
#   field-merge reducer that must be pure, the file rendered from state after
#   the turn, and the secret redaction; break each piece and see the failure.
# - Write the same fix into a non-RDS agent in two lines.
# - Prove it: bad input, persistence across turns (memory and SQLite), 500
#   parallel calls, and no plain password anywhere the agent keeps things.

# %%
# NBVAL_IGNORE_OUTPUT
from importlib.metadata import version

versions = {p: version(p) for p in ("langgraph", "langchain", "deepagents")}
# The lines this lesson was verified against; a moved pin must be re-checked.
assert versions["langgraph"].startswith("1.2.") and versions["deepagents"].startswith("0.7.")
versions

# %% [markdown]
# ## Reproduce: a plain dict key
# `PlainRequirementsState` declares `requirements: dict` with no reducer, and
# the tools write `{field: value}` to it. Five writes in one super-step:

# %%
from langgraph.errors import InvalidUpdateError

from agentstate.fixtures import POSTGRES_FIELDS, one_batch_model, user_turn
from agentstate.rds import build_plain_dict_agent
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
# step's writes (`apply_writes` is in the traceback), so it never reaches the
# model as a ToolMessage: the whole invoke fails.

# %%
import traceback

frames = [f.name for f in traceback.extract_tb(error.__traceback__)]
assert "Can receive only one value per step" in str(error) and "apply_writes" in frames
assert len(timeline.events) == 5 and {e.step for e in timeline.events} == {3}
{"tools that ran": len(timeline.events), "super-step": 3, "raised in": "apply_writes"}

# %% [markdown]
# Across two steps there is no error at all, which is worse: the second write
# replaces the whole dict.

# %%
from agentstate.fixtures import one_call_per_step_model

two_steps = build_plain_dict_agent(
    one_call_per_step_model({"engine": "postgres", "username": "dbadmin"})
).invoke(user_turn())
assert two_steps["requirements"] == {"username": "dbadmin"}
two_steps["requirements"]

# %% [markdown]
# ## The fix: a reducer on the key, the file rendered after the turn
# `build_reducer_agent` is the stage 02 agent: `requirements` merges field by
# field, the tools store into that key (`StateStorage`), a middleware renders
# `/requirements.json` from state at the end of the turn, and another keeps
# passwords out. How each piece is written comes after a look inside.

# %%
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.fixtures import file_fields
from agentstate.rds import build_reducer_agent

agent = build_reducer_agent(one_batch_model(POSTGRES_FIELDS), checkpointer=InMemorySaver())
config = {"configurable": {"thread_id": "stage-02"}}
state = agent.invoke(user_turn(), config)
assert state["requirements"] == POSTGRES_FIELDS
assert file_fields(state) == POSTGRES_FIELDS
state["requirements"]

# %% [markdown]
# ## Look inside: the state after each super-step
# How to read the table: **step** is the super-step that just ended (-1 is the
# empty state before the input, 0 is the input being written); **next** is
# what runs in the following super-step (`tools x5` = five tasks of the tools
# node, one per tool call; `(end)` = nothing left to run); **changed** lists
# the state keys that differ from the row above, i.e. what the nodes in the
# previous row's `next` wrote. The last two columns count the fields in state
# and in the file.

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

# %% [markdown]
# The five fields land together when the tools' super-step (3) is applied;
# the file is written later, by the `after_agent` step that ends the turn.

# %%
from agentstate.fixtures import graph_steps

steps = graph_steps(history.rows)
tools_applied = next(r for r in history.rows if r["requirements"] == 5)
file_written = next(r for r in history.rows if r["/requirements.json"] == 5)
assert steps[-1]["requirements"] == 0 and steps[0]["changed"] == ["messages"]  # before / input
assert steps[2]["next"] == "tools x5" and tools_applied["step"] == 3
assert steps[file_written["step"] - 1]["next"] == "RequirementsSyncMiddleware.after_agent"
{"fields merged at step": tools_applied["step"], "file synced at step": file_written["step"]}

# %% [markdown]
# The nodes in `next`, and what each does (exactly the nodes of this graph):

# %%
from agentstate.fixtures import glossary_rows

glossary = Table(glossary_rows(agent))
shown = {n for r in history.rows for n in r["next"].replace(" x5", "").split(", ")} - {"(end)"}
assert shown <= set(glossary.column("node"))
assert steps[1]["changed"] == [] and steps[file_written["step"] + 1]["changed"] == []
glossary

# %% [markdown]
# A widely shared write-up said that **"Commands apply at the end of the
# turn"**, so nothing stored in a turn can be read in that turn. The table
# already shows the fields in state at step 3, three steps before the turn
# ends. A model that reads the requirements in its **next** step, in the same
# invoke, sees every write: Commands apply at the end of the **super-step**.
# (A reader in the *same* batch as the writers is another matter: stage 03.)

# %%
from agentstate.fixtures import fields_seen_by_reader, store_then_read_model

next_step = build_reducer_agent(store_then_read_model(POSTGRES_FIELDS)).invoke(user_turn())
assert fields_seen_by_reader(next_step) == 5
assert max(steps) - tools_applied["step"] == 3  # the table: fields in state 3 steps before the end
{"fields the next model step sees": fields_seen_by_reader(next_step)}

# %% [markdown]
# ## How the fix is written
# ### Piece 1: an `Annotated` key
# The state schema gives `requirements` a reducer with `Annotated`. deepagents'
# `DeepAgentState` is the base, so `messages` and `files` keep the channels
# their libraries give them (both are `DeltaChannel`s with their own
# reducers):

# %%
from agentstate.display import show_source
from agentstate.rds import RdsAgentState

channels = {key: type(agent.channels[key]).__name__ for key in ("messages", "files")}
assert channels == {"messages": "DeltaChannel", "files": "DeltaChannel"}
show_source(RdsAgentState)

# %% [markdown]
# Without the annotation, LangGraph gives the key a `LastValue` channel,
# which accepts one value per super-step; with it, a `BinaryOperatorAggregate`
# that folds every write through the reducer. **Break it:** the same tools and model over
# `PlainRequirementsState` (the only difference) raise after the five tools
# ran; the annotated schema keeps all five.

# %%
from agentstate.rds import PlainRequirementsState, StateStorage, assemble_rds_agent


def outcome(schema: type) -> dict:
    probe = ToolTimeline()
    model = one_batch_model(POSTGRES_FIELDS)
    agent = assemble_rds_agent(model, StateStorage(), state_schema=schema, middleware=[probe])
    channel = type(agent.channels["requirements"]).__name__
    try:
        result = f"{len(agent.invoke(user_turn())['requirements'])} fields"
    except InvalidUpdateError:
        result = "InvalidUpdateError"
    return {"schema": schema.__name__, "channel": channel, "tools that ran": len(probe.events),
            "result": result}


schemas = Table([outcome(PlainRequirementsState), outcome(RdsAgentState)])
assert schemas.column("channel") == ["LastValue", "BinaryOperatorAggregate"]
assert schemas.column("result") == ["InvalidUpdateError", "5 fields"]
assert schemas.column("tools that ran") == [5, 5]
schemas

# %% [markdown]
# ### Piece 2: a reducer that merges
# The reducer, `agentstate.core.merge_fields`, gets the current value and one
# write and returns a **new** dict with the write's fields on top:

# %%
from agentstate.core import merge_fields

show_source(merge_fields)

# %% [markdown]
# An `Annotated` key alone is not enough; the reducer must merge. **Break
# it:** a reducer that returns only the newest write (`replace_whole`) no
# longer raises, and keeps the last call's field only, as the file did in
# stage 01.

# %%
from typing import Annotated, Any, NotRequired

from deepagents import DeepAgentState

from agentstate.fixtures import replace_whole


class ReplaceState(DeepAgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], replace_whole]


replaced = assemble_rds_agent(
    one_batch_model(POSTGRES_FIELDS), StateStorage(), state_schema=ReplaceState
).invoke(user_turn())
assert replaced["requirements"] == {"username": "dbadmin"}
replaced["requirements"]

# %% [markdown]
# ### Piece 3: the reducer must be pure
# LangGraph may call a reducer more than once per write. `ReducerProbe` wraps
# `merge_fields`, counts its calls and records where each came from:

# %%
from agentstate.fixtures import ReducerProbe

probe = ReducerProbe(merge_fields)


class ProbedState(DeepAgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], probe]


probed = assemble_rds_agent(
    one_batch_model(POSTGRES_FIELDS), StateStorage(), state_schema=ProbedState
).invoke(user_turn())
assert probed["requirements"] == POSTGRES_FIELDS
assert probe.sites() == {ReducerProbe.THROWAWAY: 5, ReducerProbe.APPLY: 5}
applied = [c for c in probe.calls if c["site"] == ReducerProbe.APPLY]
throwaway = [c for c in probe.calls if c["site"] == ReducerProbe.THROWAWAY]
assert [list(c["write"]) for c in applied] == [[f] for f in POSTGRES_FIELDS]  # call order
assert {c["thread"] for c in applied} == {"MainThread"}
assert "MainThread" not in {c["thread"] for c in throwaway}  # on the tools' threads
{"writes": 5, "reducer calls": len(probe.calls), **probe.sites()}

# %% [markdown]
# Exactly 10 calls for 5 writes, every run: each tool task, once it has
# finished, decides where the graph goes next; that edge reads the state
# "fresh", with the task's own write applied on a **throwaway copy** of the
# channels (5 calls, on the tools' threads, while other tools may still run).
# Then the super-step ends and the five writes are applied to the real state
# in call order (5 calls). The copies share the current value with the live
# state, so a reducer that changes `left` changes the live state too:

# %%
from agentstate.fixtures import merge_in_place

show_source(merge_in_place)

# %% [markdown]
# **Break it:** a reader in the writers' batch must see the state from
# before the batch, whatever the timing (that is the rule stage 03 builds
# on). Hold the reader until the five throwaway calls have happened
# (`HoldReaderMiddleware` waits for the probe, so the order is fixed rather
# than left to thread timing). With `merge_fields` it sees 0 fields; with
# the in-place merge it sees the five writes leak in before the step ends.
# (Without the hold, how many leak in would be left to thread timing.)

# %%
from agentstate.fixtures import HoldReaderMiddleware, reader_batch_model


def reader_sees(reducer) -> int:
    probe = ReducerProbe(reducer)

    class HeldState(DeepAgentState):
        requirements: Annotated[NotRequired[dict[str, Any]], probe]

    model = reader_batch_model(POSTGRES_FIELDS, trials=1)
    hold = HoldReaderMiddleware(probe, throwaway_calls=len(POSTGRES_FIELDS))
    agent = assemble_rds_agent(model, StateStorage(), state_schema=HeldState, middleware=[hold])
    return fields_seen_by_reader(agent.invoke(user_turn()))


purity = {"merge_fields": reader_sees(merge_fields), "merge_in_place": reader_sees(merge_in_place)}
assert purity == {"merge_fields": 0, "merge_in_place": 5}
purity

# %% [markdown]
# ### Piece 4: the file is rendered from state after the turn
# State is the truth; `/requirements.json` is only what a user opens. The
# `after_agent` hook of `RequirementsSyncMiddleware` runs once per turn,
# renders the requirements (secret fields masked unless they already are
# references) and writes the file when its text differs. It reads the file
# only to skip a write that would change nothing, so whatever is in the
# file cannot change what it renders:

# %%
from agentstate.rds import RequirementsSyncMiddleware

show_source(RequirementsSyncMiddleware.after_agent)

# %% [markdown]
# Called directly: on the state after a turn it writes nothing (the file
# already matches); on the same state without the file it renders it; a
# plain secret field is masked in the file.

# %%
sync = RequirementsSyncMiddleware()
without_file = {**next_step, "files": {}}
rendered = sync.after_agent(without_file, None)
masked = sync.after_agent({"requirements": {"password": "not-a-reference"}}, None)
assert sync.after_agent(next_step, None) is None
assert file_fields(rendered) == POSTGRES_FIELDS
assert file_fields(masked) == {"password": "***redacted***"}
{"file already matches": "no write", "file missing": "rendered", "plain secret": "masked"}

# %% [markdown]
# **Break it:** leave the middleware out. In one case the model only stores
# the five fields; in the other it also writes `{}` to `/requirements.json`
# with deepagents' `write_file` in the same reply. Without the sync the file
# is missing or wrong while state holds five fields; with it the file is
# rendered from state either way.

# %%
from agentstate.fixtures import one_reply_model, store_calls
from agentstate.models import tool_call
from agentstate.rds import REQUIREMENTS_PATH, rds_redaction

overwrite = tool_call("write_file", file_path=REQUIREMENTS_PATH, content="{}")


def file_after_turn(sync: bool, model_writes_file: bool) -> dict:
    calls = [*store_calls(POSTGRES_FIELDS), *([overwrite] if model_writes_file else [])]
    middleware = [rds_redaction(), *([RequirementsSyncMiddleware()] if sync else [])]
    out = assemble_rds_agent(
        one_reply_model(*calls), StateStorage(), middleware=middleware, state_schema=RdsAgentState
    ).invoke(user_turn())
    file = len(file_fields(out)) if REQUIREMENTS_PATH in out["files"] else "missing"
    return {
        "sync": sync,
        "model writes {}": model_writes_file,
        "in state": len(out["requirements"]),
        "in the file": file,
    }


sync_cases = Table(file_after_turn(s, w) for s in (True, False) for w in (False, True))
assert sync_cases.column("in state") == [5, 5, 5, 5]
assert sync_cases.column("in the file") == [5, 5, "missing", 0]
sync_cases

# %% [markdown]
# ### Piece 5: secrets become references before state sees them
# `SecretRedactionMiddleware` wraps the model call. The model's reply passes
# through `wrap_model_call` *inside* the model node, before it is written to
# state, so that is the one place where a plain password in a tool call can be
# swapped for a reference (the plain value goes to a `SecretStore` in process
# memory). The call itself runs with LangGraph's `nostream` tag
# (`_unstreamed`), so `stream_mode="messages"` never streams the raw reply;
# both are proved at the end of this notebook:

# %%
from agentstate.core import SecretRedactionMiddleware

show_source(SecretRedactionMiddleware.wrap_model_call)

# %% [markdown]
# `rewrite` replaces each secret argument of each tool call by the store's
# reference:

# %%
show_source(SecretRedactionMiddleware.rewrite)

# %% [markdown]
# The RDS agent configures it for `store_requirement` and the spec's secret
# fields:

# %%
show_source(rds_redaction)

# %% [markdown]
# **Break it:** the same model, which sends a plain password, with the file
# sync but without the redaction, into a SQLite checkpointer. The tool
# refuses the plain value, but the AIMessage that carried it is already in
# state, so the password is in the checkpoint file's bytes. (The plain value
# is random and never displayed.)

# %%
import secrets as py_secrets
import tempfile
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver

from agentstate.fixtures import VALID_REQUIREMENTS, sqlite_bytes
from agentstate.tracing import tool_replies

plain = py_secrets.token_urlsafe(18)
with_plain = one_batch_model({**VALID_REQUIREMENTS, "password": plain})
leak_db = Path(tempfile.mkdtemp()) / "no-redaction.sqlite"
with SqliteSaver.from_conn_string(str(leak_db)) as saver:
    leaked = assemble_rds_agent(
        with_plain,
        StateStorage(),
        middleware=[RequirementsSyncMiddleware()],
        state_schema=RdsAgentState,
        checkpointer=saver,
    ).invoke(user_turn(), {"configurable": {"thread_id": "no-redaction"}})
refused = [m for m in tool_replies(leaked) if m.status == "error"]
assert len(refused) == 1 and refused[0].content.startswith("Error: password")
assert "password" not in leaked["requirements"]
assert plain.encode() in sqlite_bytes(leak_db)
{"plain password in the checkpoint without the redaction": plain.encode() in sqlite_bytes(leak_db)}

# %% [markdown]
# ## The same fix in your own agent
# Nothing above is specific to RDS. In any LangChain v1 agent, the fix for
# parallel writers is two lines: a state class whose key is
# `Annotated[..., merge_fields]`. A small notes agent, built with
# `create_agent`, saves three notes in one reply:

# %%
from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command


@tool
def save_note(title: str, text: str, runtime: ToolRuntime) -> Command:
    """Save one note."""
    reply_message = ToolMessage(f"Saved {title}.", tool_call_id=runtime.tool_call_id)
    return Command(update={"notes": {title: text}, "messages": [reply_message]})


three_notes = [tool_call("save_note", title=t, text="...") for t in ("milk", "eggs", "tea")]

# %%
class NotesState(AgentState):
    notes: Annotated[NotRequired[dict[str, str]], merge_fields]


notes = create_agent(one_reply_model(*three_notes), tools=[save_note], state_schema=NotesState)
saved = notes.invoke(user_turn("milk, eggs, tea"))["notes"]
assert saved == {"milk": "...", "eggs": "...", "tea": "..."}
saved

# %% [markdown]
# **Break it:** the same agent with `notes: NotRequired[dict[str, str]]`:

# %%
class PlainNotesState(AgentState):
    notes: NotRequired[dict[str, str]]


plain_notes = create_agent(
    one_reply_model(*three_notes), tools=[save_note], state_schema=PlainNotesState
)
try:
    plain_notes.invoke(user_turn("milk, eggs, tea"))
    raise AssertionError("expected InvalidUpdateError")
except InvalidUpdateError as err:
    notes_error = type(err).__name__
notes_error

# %% [markdown]
# ## Prove it: bad input changes nothing
# The tools validate every value against the AwsRdsInstance rules before
# writing. A wrong value comes back to the model as an error; the good calls
# of the same batch still land.

# %%
mixed = {"engine": "postgres", "instance_class": "t3.micro", "port": 70000, "colour": "blue"}
state = build_reducer_agent(one_batch_model(mixed)).invoke(user_turn())
answers = Table(
    {"call": f, "status": m.status, "reply": m.content}
    for f, m in zip(mixed, tool_replies(state), strict=True)
)
assert answers.column("status") == ["success", "error", "error", "error"]
assert state["requirements"] == {"engine": "postgres"}
answers

# %% [markdown]
# ## Prove it: persistence across turns
# With a checkpointer, requirements live on the thread: the second turn adds
# to the first. First in memory:

# %%
from agentstate.models import ScriptedChatModel, reply


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
# ## Prove it: no loss at scale
# 500 `store_requirement` calls in one AIMessage (500 distinct metadata
# labels, `labels.k000` ... `labels.k499`), one super-step:

# %%
from agentstate.fixtures import label_fields

big = build_reducer_agent(one_batch_model(label_fields(500))).invoke(user_turn())
scale = {"calls": 500, "in state": len(big["requirements"]), "in file": len(file_fields(big))}
assert scale == {"calls": 500, "in state": 500, "in file": 500}
scale

# %% [markdown]
# ## A knob: parallel calls with the reducer
# Same slider as in stage 01, now over the fixed agent. (Widget output is not
# compared; the cell after it checks the same claim for fixed values.)

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
# ## Prove it: the password is never plain text
# Now with the whole stage 02 agent: a plain password in `store_requirement`
# is moved into a `SecretStore` and replaced by a reference before the reply
# reaches state. The manifest carries the reference; a deploy step resolves it
# from the store. The plain value is random and never displayed.

# %%
from agentstate.core import SecretStore
from agentstate.rds import MANIFEST_PATH


def password_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        script=[
            reply(*store_calls({**VALID_REQUIREMENTS, "password": plain})),
            reply(tool_call("validate_manifest"), tool_call("generate_rds_manifest")),
            reply(text="Your manifest is in /manifest.yaml."),
        ]
    )


store = SecretStore()
with SqliteSaver.from_conn_string(str(db_path)) as saver:
    final = build_reducer_agent(password_model(), secrets=store, checkpointer=saver).invoke(
        user_turn(), {"configurable": {"thread_id": "with-password"}}
    )
assert final["requirements"]["password"] == "$secret:rds-master-password"
final["requirements"]["password"]

# %% [markdown]
# The generated manifest: camelCase spec keys, the reference instead of the
# password, and the same bytes as rendering the requirements again:

# %%
from deepagents.backends.utils import file_data_to_string

from agentstate.rds import render_manifest

manifest = file_data_to_string(final["files"][MANIFEST_PATH])
assert "engineVersion: '15.5'" in manifest and "password: $secret:rds-master-password" in manifest
assert manifest == render_manifest(final["requirements"])
print(manifest)

# %% [markdown]
# Where could the plain value still be? Search everything the agent kept:
# state, both files, every message, and the raw bytes of the SQLite file.

# %%
places = {
    "state": repr(final),
    "/requirements.json": file_data_to_string(final["files"][REQUIREMENTS_PATH]),
    "/manifest.yaml": manifest,
}
checkpoint = sqlite_bytes(db_path)
assert b"$secret:rds-master-password" in checkpoint  # the search does find what is there
found = {name: plain in text for name, text in places.items()}
found["sqlite files"] = plain.encode() in checkpoint
assert not any(found.values())
assert store.resolve("$secret:rds-master-password") == plain
found

# %% [markdown]
# And what a UI streams: the same turn with `stream_mode="messages"`, every
# chunk searched for the plain value.

# %%
streamed = build_reducer_agent(password_model(), secrets=SecretStore()).stream(
    user_turn(), stream_mode="messages"
)
chunks = [repr(message) for message, _ in streamed]
with_plain = sum(plain in chunk for chunk in chunks)
assert chunks and with_plain == 0
{"chunks streamed": len(chunks), "chunks with the plain password": with_plain}

# %% [markdown]
# ## Summary
# - A plain dict key takes one write per super-step: five parallel writes
#   raise `InvalidUpdateError` (after the tools ran, in `apply_writes`), and
#   writes in later steps silently replace the dict.
# - The fix, piece by piece: `requirements: Annotated[dict, merge_fields]`
#   (without the annotation: `InvalidUpdateError`; with a reducer that does
#   not merge: one field); the reducer is pure because LangGraph called it 10
#   times for 5 writes, 5 of them on throwaway copies (an in-place merge let
#   a same-batch reader see 5 writes it must not see); `/requirements.json` is
#   rendered from state by `after_agent` (without it: missing or stale); the
#   password becomes a reference in `wrap_model_call` (without it: plain text
#   in the SQLite checkpoint).
# - "Commands apply at the end of the turn" is wrong: they apply at the end
#   of the super-step, and the next model step sees all five fields.
# - In your own agent the fix is a two-line state class with
#   `Annotated[..., merge_fields]`.
# - Proved: 5 of 5, and 500 of 500 fields in one step; bad input changes
#   nothing; requirements persist per `thread_id`, in memory and in SQLite
#   across a restart; state, files, the manifest and the checkpoint hold only
#   `$secret:rds-master-password`.
#
# ## Exercises
# 1. Write a reducer that deletes a field when the update's value is `None`,
#    and a test that shows it is still pure.
# 2. Store the same field twice in one batch with different values. Which
#    value wins, and why is that deterministic?
# 3. Remove `RequirementsSyncMiddleware` and ask a `get_collected_requirements`
#    reader in the same batch as the writers what it sees. (Stage 03 is about
#    exactly that.)
