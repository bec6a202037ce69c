# %% [markdown]
# # 01 · File-based storage: exercise solutions
#
# Each exercise of notebook 01, answered with the lesson's own code: the toy
# graph's state, `store_requirement` (without its print) and
# `store_in_own_file`, written again here, and the package's helpers and
# scripted models the lesson imports. Everything runs offline and asserts its
# answer.

# %%
import operator
from typing import Annotated, Any, TypedDict

from deepagents import create_deep_agent
from langchain.tools import ToolRuntime, tool

from agentstate.lessons.filestate import fields_in, write_file
from agentstate.lessons.fixtures import POSTGRES_FIELDS, one_call_per_step_model, one_reply_model
from agentstate.lessons.toy import two_writers
from agentstate.models import tool_call

PATH = "/requirements.json"
TURN = {"messages": [{"role": "user", "content": "A Postgres 15.5 manifest, sensible defaults"}]}


@tool
def store_requirement(field_name: str, value: Any, runtime: ToolRuntime):
    """Store one requirement in /requirements.json."""
    current = fields_in(runtime.state.get("files"), PATH)  # read
    current[field_name] = value  # modify
    return write_file(runtime, PATH, current, f"Stored {field_name}.")  # write it back whole


@tool("store_requirement")
def store_in_own_file(field_name: str, value: Any, runtime: ToolRuntime):
    """Store one requirement in its own file, /requirements/<field>.json."""
    path = f"/requirements/{field_name}.json"  # one path per field
    return write_file(runtime, path, {field_name: value}, f"Stored {field_name}.")


# %% [markdown]
# ## Exercise 1
# The toy's `files` reducer, changed to merge a write's fields into the file
# at that path instead of replacing the file:


# %%
def merge_into_path(current: dict, write: dict) -> dict:
    merged = dict(current)
    for path, fields in write.items():
        merged[path] = {**current.get(path, {}), **fields}
    return merged


class MergingToyState(TypedDict):
    files: Annotated[dict[str, dict], merge_into_path]
    log: Annotated[list[str], operator.add]


result = two_writers(MergingToyState).invoke({"files": {}, "log": []})
assert result["files"][PATH] == {"engine": "postgres", "username": "dbadmin"}
print("\n".join(result["log"]))
print("the file after the step:", result["files"][PATH])

# %% [markdown]
# The file holds both fields. Each writer still read an empty file and wrote
# a file with one field, but the reducer now merges the two writes field by
# field. That is lesson 02's fix, applied to the file: the loss was in the
# reducer, not in the parallel reads.

# %% [markdown]
# ## Exercise 2
# One reply stores `engine` twice with `store_in_own_file`, five runs in each
# order:


# %%
def engine_kept(*values: str) -> str:
    calls = [tool_call("store_requirement", field_name="engine", value=v) for v in values]
    out = create_deep_agent(one_reply_model(*calls), tools=[store_in_own_file]).invoke(TURN)
    return fields_in(out["files"], "/requirements/engine.json")["engine"]


kept = {
    "postgres, then mysql": [engine_kept("postgres", "mysql") for _ in range(5)],
    "mysql, then postgres": [engine_kept("mysql", "postgres") for _ in range(5)],
}
assert kept == {"postgres, then mysql": ["mysql"] * 5, "mysql, then postgres": ["postgres"] * 5}
kept

# %% [markdown]
# The later call in the reply wins, on every run. Both calls write the same
# path, so the layout is back to one file for that field, and the `files`
# reducer folds the two writes in call order, each replacing the file.

# %% [markdown]
# ## Exercise 3
# The shared-file agent, one call per reply, with a `ToolTimeline`. Each
# tool step holds one call; the second tool step is the one after the first:

# %%
from agentstate.tracing import ToolTimeline, draw_superstep

timeline = ToolTimeline()
model = one_call_per_step_model(POSTGRES_FIELDS)
agent = create_deep_agent(model, tools=[store_requirement], middleware=[timeline])
state = agent.invoke(TURN)
tool_steps = sorted({event.step for event in timeline.events})
second = tool_steps[1]
(call,) = [event for event in timeline.events if event.step == second]
assert fields_in(call.read["files"]) == {"engine": "postgres"}
assert fields_in(state["files"]) == POSTGRES_FIELDS
draw_superstep(
    timeline,
    key="files",
    step=second,
    show=lambda files: str(fields_in(files)),
    reducer="the files reducer",
    title="one call per reply: the second tool step",
)

# %% [markdown]
# The second call read `{'engine': 'postgres'}`: the file the first tool
# step wrote. With one call per reply, every call runs in its own
# super-step, after the previous write was applied, so each reads the file
# with every earlier field and all five survive.
