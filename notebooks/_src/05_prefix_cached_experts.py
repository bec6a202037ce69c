# %% [markdown]
# # 05 · The invariant prefix: a question's three experts read the manual once, not three times
#
# A bank's desk sends each question to three experts. Each reads the same
# 108 KB manual, then the thread's history and the question. A
# [prefix cache](../docs/glossary.md#prefix-cache) lets the second and
# third skip the manual, if every token before it is identical.

# %% [markdown]
# ## Recap
# The rule of [cache-lm](https://github.com/itsntshaw/cache-lm), a
# prefix-cache project: "I never put expert persona, timestamps, request IDs,
# or chat history before the manual." Lesson 04 decided which keys cross a
# boundary; this one, where changing state goes in the prompt.
#
# ## Goals
# - Reproduce: a clock line first gives every call a new prefix.
# - Fix the order, prove it on llama.cpp, read what a question saves.
#
# Releases affected (library versions that show it):
# [prefix-not-invariant](../docs/hazards-by-version.md#prefix-not-invariant).

# %% [markdown]
# ## 1. Reproduce: a clock line before the manual
# The desk is a `StateGraph`. A [`Send` fan-out](../docs/glossary.md#send-fan-out)
# runs the `expert` node once per expert, in one super-step:
#
# ```mermaid
# flowchart LR
#     Q["question + history"] -->|Send| A["expert: compliance"]
#     Q -->|Send| B["expert: support"]
#     Q -->|Send| C["expert: technical"]
#     A & B & C -->|"notes: dict merge"| N["notes"]
# ```
#
# `prompt` lays out each expert's messages.

# %%
import operator
from typing import Annotated, TypedDict

from langgraph.graph import START, StateGraph
from langgraph.types import Send

from agentstate.experts import EXPERTS, load_manual, plot_prompt_layouts, system_prefix

# the lesson's helpers: they run the desk and print what its prompts share, what the
# engine reused, what the doctor says; each is explained where the lesson first uses it
from agentstate.lessons.desk import doctor_reports, request_id_after, shares, tokens_reused

manual = load_manual()


class DeskState(TypedDict, total=False):
    question: str
    history: list  # the thread's earlier messages: state that grows every turn
    notes: Annotated[dict, operator.or_]  # each expert adds its own key


def build_desk(model, prompt, manual=manual):
    def expert(task):  # the node: one model call for one expert
        persona = EXPERTS[task["expert"]].system_text()
        reply = model.invoke(prompt(manual, persona, task["question"], task.get("history", [])))
        return {"notes": {task["expert"]: reply.text}}

    def sends(state):  # the fan-out: one Send per expert, all in one super-step
        return [Send("expert", {**state, "expert": e}) for e in EXPERTS]

    return StateGraph(DeskState).add_node(expert).add_conditional_edges(START, sends).compile()


# %% [markdown]
# A common first prompt puts the time before `system_prefix(manual)`
# (instructions and manual). `shares` runs the desk with a scripted model
# and says where the three prompts part: message, line, shared text, `|`,
# each one's next bytes (bytes counted from each message's `system: `).
# The clock changes every run, so does this output:

# %% tags=["nbval-ignore-output"]
from datetime import UTC, datetime

from langchain_core.messages import HumanMessage, SystemMessage


def clock_first(manual, persona, question, history=()):
    first = SystemMessage(f"Current time: {datetime.now(UTC)}\n" + system_prefix(manual).text)
    return [first, SystemMessage(persona), *history, HumanMessage(question)]


busted = shares(build_desk, clock_first)
assert busted.column("bytes shared")[0] < 100 < manual.size
busted

# %% [markdown]
# ## 2. Look inside: the clock, and the layout of a prompt
# The calls read the clock milliseconds apart (one run's digits drawn);
# the cache compares bytes:
#
# ```mermaid
# sequenceDiagram
#     participant E as expert calls
#     participant K as prefix cache
#     E->>K: call 1: time ...30.611995, manual
#     Note over K: reads the manual
#     E->>K: call 2: time ...30.614483, manual
#     Note over K: parts at the digits: reads it again
#     E->>K: call 3: time ...30.616061, manual
#     Note over K: a third full read
# ```

# %% [markdown]
# Both orders, coloured by what the cache does with each part on the
# second and third calls:

# %%
plot_prompt_layouts(system_prefix(manual).size)

# %% [markdown]
# ## 3. The fix: the prompt order, written whole
# System message 1 holds only `system_prefix(manual)`; what changes per
# expert, thread or turn follows it.


# %%
def expert_prompt(manual, persona, question, history=()):
    first = SystemMessage(system_prefix(manual).text)  # the same for every call: no clock
    return [first, SystemMessage(persona), *history, HumanMessage(question)]


ORDERS = {"clock first": clock_first, "manual first": expert_prompt}
shares(build_desk, expert_prompt)

# %% [markdown]
# The 29 bytes shared beyond the figure's 109,128: `system: ` twice, a
# newline and `You are the `. The package's `build_messages` returns these
# same messages (tests/test_lesson_05.py checks it).

# %% [markdown]
# ## 4. Prove it on a real engine
# The desk on llama.cpp with SmolLM2-135M and the manual's
# first chapter. Per order, `tokens_reused` fills the cache with another
# prompt, runs the experts one at a time, and reads in the engine's log
# the most tokens a call reused.

# %% tags=["nbval-ignore-output"]
from agentstate.engine import EngineServer, engine_installed

live = "engine not installed: run `make engine` to see this live"
if engine_installed():
    with EngineServer(verbose=True) as server:  # starts llama.cpp: minutes on a busy machine
        live = tokens_reused(server, build_desk, ORDERS, manual.leading(1))
    # instructions + chapter 1 are 609 tokens: clock first reuses a few, manual first all
    assert live.column("tokens reused")[0] < 50 < 600 < live.column("tokens reused")[1]
live

# %% [markdown]
# Clock first, calls reused only the chat template's opening and the
# clock up to its first changed digit; manual first, all up to the
# experts' titles.
#
# ## What it saves, per question
# A [cold call](../docs/glossary.md#cold-and-warm-calls) (its prefix not
# cached) [prefills](../docs/glossary.md#prefill) (reads, before its
# first token) the whole prefix, a warm one only persona and question.

# %% [markdown]
# In [time to first token](../docs/glossary.md#time-to-first-token) summed
# over a question's three calls (clock first: three cold; invariant: one
# cold, two warm), as `scripts/bench_experts.py` recorded it on this engine
# (medians of 3 rounds):

# %%
from agentstate.experts import plot_ttft, question_seconds
from agentstate.lessons.display import Table

Table(question_seconds())  # the recorded run: data/results/experts_benchmark.json

# %%
plot_ttft()

# %% [markdown]
# Right panel, per call: each label is cold ÷ warm at that prefix size;
# by noise, warm starts below the floor (the call without the manual).

# %% [markdown]
# ## 5. What the doctor says
# The [doctor](../docs/glossary.md#doctor) reads a compiled agent's state
# schema and its tools' code, without running it, and names the hazards
# these lessons teach. It cannot see prompt order, so its `Watch`, a
# callback handler passed to a run, watches a run: `doctor_reports` runs
# each desk with it.

# %%
doctor_reports(build_desk, ORDERS)

# %% [markdown]
# ## Try it: a variable line in the manual
# `request_id_after(chapter)` puts a per-call request id after the
# manual's first `chapter` chapters (0: before the manual) and shows what
# the three prompts share.

# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets  # Jupyter's sliders

knob_widget = widgets.interact(request_id_after, chapter=(0, len(manual.chapter_titles())))

# %% [markdown]
# ## Summary
# - A prefix cache reuses only identical leading tokens: a clock line
#   before the manual makes every call reread it.
# - The fix is an order: instructions + manual, persona, then history
#   and question.
# - On llama.cpp, a three-expert question is 2.3 to 2.9 times faster with
#   it; a warm call 6 to 41 times faster than a cold one.
# - Going further: [the benchmark and its
#   provenance](going_further/05_benchmark_and_provenance.ipynb).

# %% [markdown]
# ## Exercises
# 1. Swap `expert_prompt`'s first two messages (persona before manual):
#    how many bytes do the three prompts share?
# 2. Pass a first turn's question and answer as `history`: does system
#    message 1 change? Do two turns of one expert still share the manual?
# 3. A question may need only one or two experts. At the largest prefix in
#    `agentstate.experts.ttft_points()`, what does the fix save for 1, 2
#    and 3 experts? Why is one zero?
