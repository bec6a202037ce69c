# %% [markdown]
# # 02 · The reducer: requirements that merge field by field
#
# The agent's developers answered lesson 01's loss by moving the
# requirements from the file into a state key with a reducer. Their
# design says that with it "All 5 field updates are preserved and merged
# correctly" ([where this comes from](../README.md#where-this-comes-from)).
# This lesson tests that claim.

# %% [markdown]
# Which releases this happens in:
# [plain-key-parallel-write](../docs/hazards-by-version.md#plain-key-parallel-write),
# [replace-reducer](../docs/hazards-by-version.md#replace-reducer),
# [undeclared-key](../docs/hazards-by-version.md#undeclared-key).

# %% [markdown]
# ## Recap
# In [lesson 01](01_file_based_storage.ipynb) the five calls of one reply
# ran in one [super-step](../docs/glossary.md#super-step). Each read the
# state from before the step; the `files` reducer kept the last call's write.

# %% [markdown]
# ## Goals
# - See a plain `requirements: dict` key fail when five tools write it in one
#   step, and an undeclared key lose the writes silently.
# - Write the fix, a reducer that merges, and see why it must be pure.

# %% [markdown]
# ## 1. Reproduce: a plain dict key
# The **state schema** is the class declaring the agent's state keys; here
# `requirements` is a plain dict. The tool writes one field to it with a
# `Command` (a state update), reading nothing:

# %%
from typing import Annotated, Any, NotRequired

from langchain.agents import AgentState, create_agent
from langchain.messages import ToolMessage
from langchain.tools import ToolRuntime, tool
from langgraph.types import Command


@tool
def store_requirement(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one collected requirement."""
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    return Command(update={"requirements": {field_name: value}, "messages": [done]})


class PlainState(AgentState):
    requirements: NotRequired[dict[str, Any]]


# %% [markdown]
# The scripted model (it replays fixed replies, offline) stores every field
# in one reply, as in lesson 01:

# %%
from agentstate.lessons.fixtures import POSTGRES_FIELDS, label_fields, one_batch_model

TURN = {"messages": [{"role": "user", "content": "A Postgres 15.5 manifest, sensible defaults"}]}


def agent_with(schema: type, fields: dict = POSTGRES_FIELDS, **options):
    model = one_batch_model(fields)  # first reply: one store_requirement call per field
    return create_agent(model, tools=[store_requirement], state_schema=schema, **options)


# %% [markdown]
# The plain key fails the invoke **after** the five tools ran, when
# LangGraph applies the step's writes; the model, called once before them,
# never sees the error. An undeclared key (the default `AgentState`) drops
# them silently:

# %%
from langgraph.errors import InvalidUpdateError

from agentstate.tracing import ToolTimeline, draw_superstep

timeline = ToolTimeline()  # records each tool call of a run
try:
    agent_with(PlainState, middleware=[timeline]).invoke(TURN)
except InvalidUpdateError as error:
    print(str(error).splitlines()[0])
print("tools that ran:", len(timeline.events), "- model calls:", len(timeline.model_calls))
undeclared = agent_with(AgentState).invoke(TURN)
print("undeclared key, the state keys after the turn:", sorted(undeclared))
print("its tools replied:", [m.text for m in undeclared["messages"] if m.type == "tool"])

# %% [markdown]
# ## 2. Look inside: one value per step
# The graph `create_agent` builds, with words on its edges. The tools run
# in super-step 2:
#
# ```mermaid
# flowchart LR
#     start([user message]) --> model
#     model -- "a reply with 5 tool calls" --> tools["tools<br/>5 tasks, one super-step"]
#     tools -- "their writes, applied when the step ends" --> model
#     model -- "a reply without tool calls" --> done([answer])
# ```

# %% [markdown]
# LangGraph keeps each state key in a **channel**; the key's type decides
# what five writes in one step do:
#
# ```mermaid
# flowchart LR
#     w["5 writes<br/>in one step"]
#     plain["requirements: dict<br/>one value a step"]
#     red["Annotated[dict, reducer]"]
#     fold["reducer(current, write)<br/>per write, in call order"]
#     w --> plain --> err["InvalidUpdateError"]
#     w --> red --> fold --> kept["one folded value"]
# ```

# %% [markdown]
# ## 3. The fix: a reducer that merges
# The reducer gets the key's current value and one write, and returns a
# **new** dict with the write's fields on top; the tool does not change.
# Below, one reply with it and with `replace_whole`, which returns the write:


# %%
def merge_fields(current: dict | None, write: dict | None) -> dict:
    return {**(current or {}), **(write or {})}  # a new dict: the write's fields on top


class RequirementsState(AgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], merge_fields]


def replace_whole(current: dict | None, write: dict | None) -> dict | None:
    return write


class ReplaceState(AgentState):
    requirements: Annotated[NotRequired[dict[str, Any]], replace_whole]


runs = {"replace_whole": ToolTimeline(), "merge_fields": ToolTimeline()}
agent_with(ReplaceState, middleware=[runs["replace_whole"]]).invoke(TURN)
agent_with(RequirementsState, middleware=[runs["merge_fields"]]).invoke(TURN)
draw_superstep(runs, key="requirements", reducer={name: name for name in runs})

# %% [markdown]
# An `Annotated` key alone is not enough: `replace_whole` repeats lesson
# 01's loss, without an error.

# %% [markdown]
# Why a **new** dict? As each tool finishes, LangGraph also calls the
# reducer on a copy of the state, so the edge after `tools` can pick the next
# node from the state with that write. The copy shares `current` with the
# state the other tools read. `reader_saw(reducer)` runs this agent with that
# reducer and a reader tool in the same reply, the reader waiting for those
# five copy calls; it returns how many fields the reader saw:

# %%
from agentstate.lessons.purity import reader_saw, reducer_calls


def merge_in_place(current: dict, write: dict) -> dict:  # IMPURE: changes current
    current.update(write)
    return current


# counted on agent_with(RequirementsState), without the reader
print("LangGraph's calls to merge_fields:", reducer_calls(merge_fields))
{r.__name__: reader_saw(r) for r in (merge_fields, merge_in_place)}

# %% [markdown]
# The in-place merge leaked all five writes to a reader that should have
# seen none. A reducer must be **pure**: return a new value, never change
# `current` or `write`.

# %% [markdown]
# ## 4. Prove: no loss at scale, and the package agrees
# The package's `build_reducer_agent` (the full agent of
# [going further 02](going_further/02_file_sync_and_secrets.ipynb)) uses the
# same reducer. 500 calls in one reply, through both:

# %%
from agentstate.rds import build_reducer_agent

labels = label_fields(500)  # a dict of 500 fields: {"labels.k000": "0", ...}
teaching = agent_with(RequirementsState, labels).invoke(TURN)["requirements"]
package = build_reducer_agent(one_batch_model(labels)).invoke(TURN)["requirements"]
print("fields kept:", len(package), "- both hold what was written:", teaching == package == labels)

# %% [markdown]
# The [doctor](../docs/glossary.md#doctor) reads a compiled agent's state
# schema and its tools' code, without running it, and names the hazards
# these lessons teach. Below: what `agentstate doctor --fix` would write
# (`operator.or_`, on dicts a new dict with the write's fields on top, like
# `merge_fields`), that fix run, and the findings. Its code
# `unreduced-parallel-write` is the opening's `plain-key-parallel-write`.

# %%
from agentstate.doctor import diagnose, preview_fix

fix = preview_fix(agent_with(PlainState))  # safe: writers only add fields, read none
print(fix.diff)
fixed = fix.load("PlainState", globals())  # runs the fixed cell in a copy of our names
print("--fix keeps all 5:", agent_with(fixed).invoke(TURN)["requirements"] == POSTGRES_FIELDS)
for schema in (PlainState, RequirementsState):
    print(schema.__name__, "- the doctor finds:", diagnose(agent_with(schema)).codes())

# %% [markdown]
# ## A knob: parallel calls and the state class
# Fields kept at 1, 2 and 50 parallel calls, then a knob to try others
# (run the cells above first):

# %%
from agentstate.lessons.reducer_knob import requirements_kept  # fields kept after one reply

SCHEMAS = {"plain": PlainState, "replace_whole": ReplaceState, "merge_fields": RequirementsState}
{name: {n: requirements_kept(s, n) for n in (1, 2, 50)} for name, s in SCHEMAS.items()}

# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

knob_widget = widgets.interact(requirements_kept, state_class=SCHEMAS, parallel_calls=(1, 50))

# %% [markdown]
# ## Summary
# - The claim holds only with a reducer that merges and is pure:
#   `merge_fields` kept 5 of 5 (and 500), `replace_whole` lost 4 of 5, a
#   plain key raised `InvalidUpdateError` after the tools ran.
# - LangGraph also calls the reducer as each tool finishes: an in-place
#   merge showed a reader 5 fields it should not see.
# - [Going further 02](going_further/02_file_sync_and_secrets.ipynb): file
#   sync and secrets.

# %% [markdown]
# ## Exercises
# 1. Make `merge_fields` delete a field written as `None`, without changing
#    its inputs.
# 2. Store `engine` twice in one reply, with different values. Which does
#    `merge_fields` keep? Draw the step.
# 3. Build the fixed agent with `create_deep_agent` (subclass
#    `deepagents.DeepAgentState`). Do the fields still merge, and in which
#    super-step?
# 4. With `PlainState`, store `engine` in one reply and `username` in the
#    next. What does `requirements` hold?
