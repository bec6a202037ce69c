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
    one_reply_model,
    reader_batch_model,
    user_turn,
)
from agentstate.models import tool_call
from agentstate.rds import (
    StateStorage,
    assemble_rds_agent,
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
# Give the requirements key to a `create_deep_agent`: subclass
# `deepagents.DeepAgentState` (so `files` and `todos` keep their own
# reducers) instead of `AgentState`. Do the five fields still merge? Draw
# the run: in which super-step do the tools run now, and why?

# %%
from deepagents import create_deep_agent
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.display import Table
from agentstate.fixtures import one_batch_model
from agentstate.rds.tools import make_rds_tools
from agentstate.tracing import ToolTimeline, draw_run, state_by_step


class DeepRequirementsState(DeepAgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], merge_fields]


store_requirement = make_rds_tools(StateStorage())[0]  # writes {field: value} to the key
timeline = ToolTimeline()
deep = create_deep_agent(
    one_batch_model(POSTGRES_FIELDS),
    tools=[store_requirement],
    state_schema=DeepRequirementsState,
    middleware=[timeline],
    checkpointer=InMemorySaver(),
)
config = {"configurable": {"thread_id": "deep"}}
deep_state = deep.invoke(user_turn(), config)
deep_history = Table(
    state_by_step(deep, config, lambda v: {"requirements": len(v.get("requirements", {}))})
)
assert deep_state["requirements"] == POSTGRES_FIELDS
assert deep_history.column("next")[1] == "PatchToolCallsMiddleware.before_agent"
assert "_ParentNotifierMiddleware.after_agent" in deep_history.column("next")
assert {e.step for e in timeline.events} == {3}
deep_history

# %%
draw_run(timeline, deep_state, key="requirements", title="the same reducer in a deep agent")

# %% [markdown]
# Yes: the reducer is on the key, whatever factory builds the graph, so the
# five fields merge. The deep agent adds two hook steps around the model
# loop: deepagents' `PatchToolCallsMiddleware.before_agent` before the first
# model call, and its `_ParentNotifierMiddleware.after_agent` at the end
# (both write nothing here; going-further 01 explains them). The first hook
# runs in super-step 1, so the model replies in step 2 and the tools run in
# step 3, one step later than in `create_agent`'s graph.
