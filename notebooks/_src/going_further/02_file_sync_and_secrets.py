# %% [markdown]
# # 02 · Going further: reducer purity, bad input, file sync and secrets
#
# Notebook 02 fixed the loss with a field-merge reducer on the `requirements`
# key. The package's lesson 02 agent, `build_reducer_agent`, wraps that fix in
# what a real agent needs: tools that refuse bad values, `/requirements.json`
# rendered from state after each turn for the user to open, and the master
# password kept out of everything the agent stores or streams. This notebook
# shows each piece, and what breaks when it is taken out; first, what an
# impure reducer does. Each claim is asserted in the cell that shows it.

# %% [markdown]
# ## 1. An impure reducer leaks writes into the batch
# LangGraph calls a reducer on throwaway copies of the channels while the
# step's tools still run (notebook 02 counted 10 calls for 5 writes). Those
# copies share the current value with the live state, so a reducer that
# updates `left` in place changes the live state too:

# %%
from agentstate.lessons.display import Table, show_source
from agentstate.lessons.fixtures import merge_in_place

show_source(merge_in_place)

# %% [markdown]
# A reader in the writers' batch must see the state from before the batch
# (notebook 03 builds on that). `HoldReaderMiddleware` holds the reader until
# the five throwaway calls have happened, so the order is fixed rather than
# left to thread timing. With the pure `merge_fields` it sees 0 fields; with
# the in-place merge it sees the five writes before the step ends.

# %%
from typing import Annotated, Any, NotRequired

from deepagents import DeepAgentState

from agentstate.core import merge_fields
from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    HoldReaderMiddleware,
    ReducerProbe,
    fields_seen_by_reader,
    reader_batch_model,
    user_turn,
)
from agentstate.rds import StateStorage, assemble_rds_agent


def reader_sees(reducer) -> int:
    probe = ReducerProbe(reducer)

    class HeldState(DeepAgentState):
        requirements: Annotated[NotRequired[dict[str, Any]], probe]

    hold = HoldReaderMiddleware(probe, throwaway_calls=len(POSTGRES_FIELDS))
    model = reader_batch_model(POSTGRES_FIELDS, trials=1)
    agent = assemble_rds_agent(model, StateStorage(), state_schema=HeldState, middleware=[hold])
    return fields_seen_by_reader(agent.invoke(user_turn()))


purity = {"merge_fields": reader_sees(merge_fields), "merge_in_place": reader_sees(merge_in_place)}
assert purity == {"merge_fields": 0, "merge_in_place": 5}
Table({"reducer": name, "fields the same-batch reader saw": n} for name, n in purity.items())

# %% [markdown]
# ## 2. Bad input changes nothing
# The package's tools check every value against the `AwsRdsInstance` rules
# before writing. A wrong value comes back to the model as an error; the good
# calls of the same reply still land.

# %%
from agentstate.lessons.fixtures import one_batch_model
from agentstate.rds import build_reducer_agent
from agentstate.tracing import tool_replies

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
# ## 3. The file is rendered from state after the turn
# State is the truth; `/requirements.json` is only what a user opens. The
# `after_agent` hook of `RequirementsSyncMiddleware` runs once per turn,
# renders the requirements (a secret field masked unless it is already a
# reference) and writes the file when its text differs. It reads the file
# only to skip a write that would change nothing, so whatever the model
# writes there cannot change what it renders:

# %%
from agentstate.rds import RequirementsSyncMiddleware

show_source(RequirementsSyncMiddleware.after_agent)

# %% [markdown]
# Leave it out, and the file is missing, or wrong when the model writes `{}`
# to it with deepagents' `write_file` in the same reply; with it the file is
# rendered from state either way.

# %%
from agentstate.lessons.fixtures import file_fields, one_reply_model, store_calls
from agentstate.models import tool_call
from agentstate.rds import REQUIREMENTS_PATH, RdsAgentState, rds_redaction

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
# ## 4. A password the model sends in plain text
# `SecretRedactionMiddleware` wraps the model call. The model's reply passes
# through `wrap_model_call` *inside* the model node, before it is written to
# state: the one place where a plain password in a tool call can be swapped
# for a reference of its own (the plain value goes to a `SecretStore` in
# process memory). The RDS agent configures it for `store_requirement` and
# the spec's secret fields:

# %%
show_source(rds_redaction)

# %% [markdown]
# **Without it**, the same model, with the file sync, into a SQLite
# checkpointer: the tool refuses the plain value, but the message that
# carried it is already in state, so the password is in the checkpoint
# file's bytes. (The plain value is random and never displayed.)

# %%
import secrets as py_secrets
import tempfile
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver

from agentstate.lessons.fixtures import VALID_REQUIREMENTS, sqlite_bytes

plain = py_secrets.token_urlsafe(18)
workdir = Path(tempfile.mkdtemp())
with SqliteSaver.from_conn_string(str(workdir / "no-redaction.sqlite")) as saver:
    leaked = assemble_rds_agent(
        one_batch_model({**VALID_REQUIREMENTS, "password": plain}),
        StateStorage(),
        middleware=[RequirementsSyncMiddleware()],
        state_schema=RdsAgentState,
        checkpointer=saver,
    ).invoke(user_turn(), {"configurable": {"thread_id": "no-redaction"}})
refused = [m for m in tool_replies(leaked) if m.status == "error"]
in_bytes = plain.encode() in sqlite_bytes(workdir / "no-redaction.sqlite")
assert len(refused) == 1 and "password" not in leaked["requirements"] and in_bytes
Table([{"tool refused it": True, "plain password in the checkpoint file": in_bytes}])

# %% [markdown]
# **With it**, the whole lesson 02 agent: the password is replaced by a
# reference before the reply reaches state, the manifest carries the
# reference, and a deploy step resolves it from the store. A reference is a
# readable label plus a random id made for this one value, so only its label
# is shown.

# %%
from agentstate.core import SecretStore, ref_label
from agentstate.models import ScriptedChatModel, reply


def password_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        script=[
            reply(*store_calls({**VALID_REQUIREMENTS, "password": plain})),
            reply(tool_call("validate_manifest"), tool_call("generate_rds_manifest")),
            reply(text="Your manifest is in /manifest.yaml."),
        ]
    )


db_path = workdir / "checkpoints.sqlite"
store = SecretStore()
with SqliteSaver.from_conn_string(str(db_path)) as saver:
    final = build_reducer_agent(password_model(), secrets=store, checkpointer=saver).invoke(
        user_turn(), {"configurable": {"thread_id": "with-password"}}
    )
ref = final["requirements"]["password"]
assert store.resolve(ref) == plain
ref_label(ref)

# %% [markdown]
# The manifest (camelCase spec keys, the reference where the password goes;
# the reference's random id is shortened here for display):

# %%
from deepagents.backends.utils import file_data_to_string

from agentstate.rds import MANIFEST_PATH, render_manifest

manifest = file_data_to_string(final["files"][MANIFEST_PATH])
assert f"password: {ref}" in manifest and manifest == render_manifest(final["requirements"])
print(manifest.replace(ref, f"$secret:{ref_label(ref)}-<id>"))

# %% [markdown]
# Where could the plain value still be? Search everything the agent kept:
# state, both files, and the raw bytes of the SQLite file (the search does
# find the reference there, so it reads what is stored).

# %%
places = {
    "state": repr(final),
    "/requirements.json": file_data_to_string(final["files"][REQUIREMENTS_PATH]),
    "/manifest.yaml": manifest,
}
checkpoint = sqlite_bytes(db_path)
found = {name: plain in text for name, text in places.items()}
found["sqlite files"] = plain.encode() in checkpoint
assert ref.encode() in checkpoint and not any(found.values())
Table({"where": name, "plain password found": hit} for name, hit in found.items())

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
Table([{"chunks streamed": len(chunks), "chunks with the plain password": with_plain}])

# %% [markdown]
# ## 5. Requirements survive a restart
# One agent writes a turn into a SQLite file; a brand-new agent (as after a
# process restart) opens the same file and finds the thread's requirements.

# %%
config = {"configurable": {"thread_id": "customer-42"}}
first_turn = ScriptedChatModel(
    script=[reply(*store_calls({"engine": "postgres", "engine_version": "15.5"})), reply(text="ok")]
)
with SqliteSaver.from_conn_string(str(db_path)) as saver:
    build_reducer_agent(first_turn, checkpointer=saver).invoke(user_turn(), config)
with SqliteSaver.from_conn_string(str(db_path)) as saver:
    restarted = build_reducer_agent(ScriptedChatModel(script=[]), checkpointer=saver)
    reloaded = restarted.get_state(config).values["requirements"]
assert reloaded == {"engine": "postgres", "engine_version": "15.5"}
reloaded
