# %% [markdown]
# # 02 · The state reducer: exercise solutions
#
# Each exercise of notebook 02, answered with code that runs offline and
# asserts its answer.

# %%
import copy
from typing import Annotated, Any, NotRequired

from deepagents import DeepAgentState

from agentstate.core import merge_fields
from agentstate.fixtures import (
    POSTGRES_FIELDS,
    HoldReaderMiddleware,
    ReducerProbe,
    fields_seen_by_reader,
    file_fields,
    one_reply_model,
    reader_batch_model,
    user_turn,
)
from agentstate.models import tool_call
from agentstate.rds import (
    REQUIREMENTS_PATH,
    RdsAgentState,
    StateStorage,
    assemble_rds_agent,
    build_reducer_agent,
    rds_redaction,
)

# %% [markdown]
# ## Exercise 1
# Write a reducer that deletes a field when the update's value is `None`, and
# show that it is still pure.

# %%
def merge_or_delete(left: dict | None, right: dict | None) -> dict:
    """Field merge; a ``None`` value removes the field. Returns a new dict."""
    out = dict(left or {})
    for field, value in (right or {}).items():
        if value is None:
            out.pop(field, None)
        else:
            out[field] = value
    return out


left, right = {"engine": "postgres", "port": 5432}, {"port": None, "username": "dbadmin"}
before = copy.deepcopy((left, right))
first, second = merge_or_delete(left, right), merge_or_delete(left, right)
assert first == second == {"engine": "postgres", "username": "dbadmin"}
assert (left, right) == before and first is not left  # inputs untouched, a new value
first

# %% [markdown]
# Pure in a real run too: held until LangGraph's five throwaway calls are
# done, a reader in the writers' batch still sees the state from before the
# batch (0 fields), and the turn ends with all five fields.

# %%
probe = ReducerProbe(merge_or_delete)


class DeletableState(DeepAgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], probe]


agent = assemble_rds_agent(
    reader_batch_model(POSTGRES_FIELDS, trials=1),
    StateStorage(),
    state_schema=DeletableState,
    middleware=[HoldReaderMiddleware(probe, throwaway_calls=5)],
)
state = agent.invoke(user_turn())
assert fields_seen_by_reader(state) == 0 and state["requirements"] == POSTGRES_FIELDS
{"reader in the batch sees": fields_seen_by_reader(state), "fields after the turn": 5}

# %% [markdown]
# It returns a new dict and never touches its inputs, so calling it again on
# the same inputs (as LangGraph does on throwaway copies) gives the same
# answer and changes nothing else.

# %% [markdown]
# ## Exercise 2
# Store the same field twice in one batch with different values. Which value
# wins, and why is that deterministic?

# %%
def winner(*values: str) -> dict:
    probe = ReducerProbe(merge_fields)

    class ProbedState(DeepAgentState):
        requirements: Annotated[NotRequired[dict[str, Any]], probe]

    calls = [tool_call("store_requirement", field_name="engine", value=v) for v in values]
    state = assemble_rds_agent(
        one_reply_model(*calls), StateStorage(), state_schema=ProbedState
    ).invoke(user_turn())
    applied = [c["write"]["engine"] for c in probe.calls if c["site"] == ReducerProbe.APPLY]
    kept = state["requirements"]["engine"]
    return {"calls": list(values), "applied in order": applied, "kept": kept}


winners = [winner("postgres", "mysql"), winner("mysql", "postgres")]
assert [w["kept"] for w in winners] == ["mysql", "postgres"]
assert all(w["applied in order"] == w["calls"] for w in winners)
winners

# %% [markdown]
# The later call in the AIMessage wins. At the end of the super-step
# LangGraph applies the batch's writes in task order, which is the order of
# the calls (not the order they finished), and `merge_fields` lets the later
# write's fields win. Swapping the calls swaps the winner, every time.

# %% [markdown]
# ## Exercise 3
# Remove `RequirementsSyncMiddleware` and ask a `get_collected_requirements`
# reader in the same batch as the writers what it sees.

# %%
def same_batch(sync: bool) -> dict:
    model = reader_batch_model(POSTGRES_FIELDS, trials=1)
    if sync:
        agent = build_reducer_agent(model)
    else:
        agent = assemble_rds_agent(
            model, StateStorage(), middleware=[rds_redaction()], state_schema=RdsAgentState
        )
    state = agent.invoke(user_turn())
    file = len(file_fields(state)) if REQUIREMENTS_PATH in state["files"] else "missing"
    return {
        "sync": sync,
        "reader in the batch sees": fields_seen_by_reader(state),
        "in state after the turn": len(state["requirements"]),
        "in the file": file,
    }


seen = [same_batch(sync=False), same_batch(sync=True)]
assert [s["reader in the batch sees"] for s in seen] == [0, 0]
assert [s["in the file"] for s in seen] == ["missing", 5]
seen

# %% [markdown]
# The reader sees 0 fields with or without the sync: it runs in the same
# super-step as the writers, so it reads the state from before the batch,
# and the sync only runs when the turn ends. Removing the sync just leaves
# the file missing. Making a same-batch reader see its batch is stage 03.
