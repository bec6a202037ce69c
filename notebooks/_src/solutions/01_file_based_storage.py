# %% [markdown]
# # 01 · File-based storage: exercise solutions
#
# Each exercise of notebook 01, answered with code that runs offline and
# asserts its answer.

# %%
from agentstate.fixtures import (
    POSTGRES_FIELDS,
    PerFieldFileStorage,
    file_fields,
    finish_last_first,
    one_batch_model,
    one_reply_model,
    user_turn,
)
from agentstate.models import tool_call
from agentstate.rds import assemble_rds_agent, build_file_storage_agent

order = list(POSTGRES_FIELDS)

# %% [markdown]
# ## Exercise 1
# With every `work_seconds` at 0 the calls finish in whatever order their
# threads happen to run. Does the survivor change from run to run? The
# package's `FileStorage` is the lesson's tool (`tests/test_lesson_01.py`
# checks that both lose the same field); `finish_last_first(order, unit=0)`
# sets every pause to 0.

# %%
survivors = []
for _ in range(5):
    agent = build_file_storage_agent(
        one_batch_model(POSTGRES_FIELDS), delay=finish_last_first(order, unit=0)
    )
    survivors.append(list(file_fields(agent.invoke(user_turn()))))
assert survivors == [["username"]] * 5
survivors

# %% [markdown]
# No: it is always `username`, the last call in the AIMessage. LangGraph
# applies the batch's writes in task order (the order of the calls), never in
# completion order, so the timing of the threads cannot change the survivor.

# %% [markdown]
# ## Exercise 2
# With one file per field (the lesson's `store_in_own_file`, here its package
# twin `PerFieldFileStorage`), one reply stores the same field twice with
# different values. Which value is kept, and is that deterministic?


# %%
def engine_kept(*values: str) -> str:
    calls = [tool_call("store_requirement", field_name="engine", value=v) for v in values]
    agent = assemble_rds_agent(one_reply_model(*calls), PerFieldFileStorage())
    state = agent.invoke(user_turn())
    assert [p for p in state["files"] if p.startswith("/requirements/")] == [
        "/requirements/engine.json"
    ]
    return PerFieldFileStorage().read(state, None)["engine"]


kept = {
    "postgres, then mysql": engine_kept("postgres", "mysql"),
    "mysql, then postgres": engine_kept("mysql", "postgres"),
}
assert kept == {"postgres, then mysql": "mysql", "mysql, then postgres": "postgres"}
kept

# %% [markdown]
# The later call in the AIMessage wins: both calls write the same path, and
# the `files` reducer applies the writes in call order, each replacing the
# path's value. Swapping the calls swaps the winner, every time.

# %% [markdown]
# ## Exercise 3
# Run the five-field batch with `config={"max_concurrency": 1}`, so the calls
# run one after another. Are the fields saved? Draw the run.

# %%
from itertools import pairwise

from agentstate.tracing import ToolTimeline, draw_run

timeline = ToolTimeline()
agent = build_file_storage_agent(one_batch_model(POSTGRES_FIELDS), middleware=[timeline])
serial_state = agent.invoke(user_turn(), {"max_concurrency": 1})
by_start = sorted(timeline.events, key=lambda e: e.start)
overlaps = sum(b.start < a.end for a, b in pairwise(by_start))
assert file_fields(serial_state) == {"username": "dbadmin"} and overlaps == 0
assert {e.step for e in timeline.events} == {3}
draw_run(timeline, serial_state, key="files", title="max_concurrency=1")

# %% [markdown]
# No: one field survives. The calls no longer overlap (one bar after the
# other), but they are still in one super-step, so each reads the state from
# before the step (an empty file) and the writes are applied together when
# the step ends.
