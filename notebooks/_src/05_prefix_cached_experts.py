# %% [markdown]
# # 05 · The invariant prefix: a question's three experts read the manual once, not three times
#
# A bank's operations desk sends each question to three experts. Each
# reads the same 108 KB manual, then the thread's history, then the
# question. An engine with a [prefix cache](../docs/glossary.md#prefix-cache)
# skips the manual for the second and third expert, if every token before
# it is identical.

# %% [markdown]
# ## Recap
# [cache-lm](https://github.com/itsntshaw/cache-lm), a prefix-cache
# project, keeps this rule: "I never put expert persona, timestamps, request IDs,
# or chat history before the manual." Lesson 04 decided which keys cross a
# boundary; this one, where changing state goes in the prompt.
#
# ## Goals
# - Reproduce: a clock line first gives every call a new prefix.
# - Fix the order, prove it on llama.cpp, read what a question saves.
#
# Releases: [prefix-not-invariant](../docs/hazards-by-version.md#prefix-not-invariant).

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
# `history` holds the thread's earlier messages, kept between turns by a
# [checkpointer](../docs/glossary.md#checkpointer). `prompt` builds each
# expert's messages.

# %%
import operator
from typing import Annotated, TypedDict

from langgraph.graph import START, StateGraph
from langgraph.types import Send

from agentstate.experts import EXPERTS, load_manual, plot_prompt_layouts, system_prefix

manual = load_manual()
QUESTION = "The overnight batch outage: what must we report to the regulator?"


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
# A common first prompt puts the current time before
# `system_prefix(manual)` (the desk's instructions and the manual). The
# scripted model answers "a note" and keeps every prompt; `shared_prefix`
# compares them, sorted (the experts run in parallel). `they part at`
# shows the end of the text all share, a `|`, then each prompt's next bytes. The
# clock changes every run, and so does this output:

# %% tags=["nbval-ignore-output"]
from datetime import UTC, datetime

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from agentstate.lessons.display import Table, compare_findings
from agentstate.lessons.fixtures import request_id_after, shared_prefix
from agentstate.models import ScriptedChatModel


def clock_first(manual, persona, question, history=()):
    clock = f"Current time: {datetime.now(UTC).isoformat(timespec='microseconds')}\n"
    first = SystemMessage(clock + system_prefix(manual).text)  # instructions + manual
    return [first, SystemMessage(persona), *history, HumanMessage(question)]


recorder = ScriptedChatModel(script=[AIMessage("a note")] * 3)
build_desk(recorder, clock_first).invoke({"question": QUESTION})
busted = shared_prefix(recorder.seen)
assert busted["bytes shared"] < 100 < manual.size
Table([busted])

# %% [markdown]
# ## 2. Look inside: the clock, and the layout of a prompt
# The three calls read the clock milliseconds apart (drawn with one
# run's digits); the cache compares bytes:
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
# Both orders, part by part, coloured by what the cache does with each
# part on the second and third expert's call:

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
recorder = ScriptedChatModel(script=[AIMessage("a note")] * 3)
build_desk(recorder, expert_prompt).invoke({"question": QUESTION})
fixed = shared_prefix(recorder.seen)
Table([{**fixed, "system message 1 bytes": len(recorder.seen[0][0].content.encode())}])

# %% [markdown]
# The prompts now part only at each expert's title, after all of system
# message 1. The package's `build_messages` sends the same bytes (a test
# checks it); its graph routes a question to 1-3 experts, then a synthesis.

# %% [markdown]
# ## 4. Prove it on a real engine
# The desk on llama.cpp with SmolLM2-135M (`make engine`), once per order,
# one expert at a time, after an unrelated prompt. `prefix_hits()` reads,
# from the engine's log, the prompt tokens each request reused.

# %% [markdown]
# It runs the first chapter only and prints how long it took (it starts
# the server and loads the model first: minutes on a busy machine).

# %% tags=["nbval-ignore-output"]
import time

from agentstate.engine import EngineServer, engine_installed
from agentstate.experts import engine_model

started, live = time.monotonic(), "engine not installed: run `make engine` to see this live"
if engine_installed():
    with EngineServer(verbose=True) as server:
        model, live = engine_model(server, max_tokens=8), []
        for name, prompt in ORDERS.items():
            model.invoke(f"Say one word. {datetime.now()}")  # the cache now holds this instead
            seen, desk = len(server.prefix_hits()), build_desk(model, prompt, manual.leading(1))
            desk.invoke({"question": QUESTION}, {"max_concurrency": 1})  # one call at a time
            live.append({"prompt": name, "tokens reused": max(server.prefix_hits()[seen:])})
    live = Table(live)
    assert live.column("tokens reused")[0] < 50 < 600 < live.column("tokens reused")[1]
print(f"took {time.monotonic() - started:.0f} s")
live

# %% [markdown]
# With the clock first, a call reused only the tokens before the clock's
# digits; with the manual first, every token up to the experts' titles:
# the manual's first chapter and the desk's instructions.
#
# ## What it saves, per question
# A [cold call](../docs/glossary.md#cold-and-warm-calls)
# [prefills](../docs/glossary.md#prefill) (reads) the whole prefix, a warm
# one only the persona and the question. With the clock first a question
# costs three cold calls; with the invariant prefix, one cold, two warm.

# %% [markdown]
# In [time to first token](../docs/glossary.md#time-to-first-token), as
# `scripts/bench_experts.py` recorded it on this engine (3 rounds, medians,
# the manual's first 1 to 16 of 28 chapters: up to 29 of its 108 KB):

# %%
from agentstate.experts import plot_ttft, question_seconds

Table(question_seconds())  # the recorded run: data/results/experts_benchmark.json

# %%
plot_ttft()

# %% [markdown]
# Per question (the table, left) the first expert still pays the cold
# call. Per call (right) the warm line rises slowly, to about a second at
# the largest prefix; it starts below the floor (the same call without the
# manual: run-to-run noise).

# %% [markdown]
# ## 5. What the doctor says
# `agentstate.doctor.Watch`, a callback handler passed to a run, reports
# model calls whose prompts part before a large shared part. Both desks
# (the `StateGraph` above):

# %%
from agentstate.doctor import Watch

reports = {}
for name, prompt in ORDERS.items():
    desk = build_desk(ScriptedChatModel(script=[AIMessage("a note")] * 3), prompt)
    desk.invoke({"question": QUESTION}, {"callbacks": [watch := Watch(desk)]})
    reports[name] = watch.report()
compare_findings(reports, whole="the desk")

# %% [markdown]
# ## Try it: a variable line anywhere in the manual
# `request_id_after(chapter)` puts a per-call request id after the
# manual's first `chapter` chapters (0: before it) and shows what the
# three prompts share.

# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

slider = widgets.IntSlider(value=0, max=len(manual.chapter_titles()), description="chapter")
knob_widget = widgets.interact(request_id_after, chapter=slider)

# %% [markdown]
# Each chapter the line moves down is shared by every call; the cache
# stops at the first byte that differs.

# %% [markdown]
# ## Summary
# - A prefix cache reuses only identical leading tokens: a clock line
#   before the manual makes every call read it again.
# - The fix is an order: instructions + manual, the persona, then the
#   thread's history and the question.
# - Recorded on llama.cpp, a question of three experts is 2.3 to 2.9 times
#   faster with it; a warm call 6 to 41 times faster than a cold one.
# - Going further: [the router, the graph, the benchmark and its
#   provenance](going_further/05_benchmark_and_provenance.ipynb).

# %% [markdown]
# ## Exercises
# 1. Put the persona before the manual (swap the first two messages of
#    `expert_prompt`). How many bytes do the three experts' prompts share?
# 2. Continue a thread: pass the first turn's question and answer as
#    `history`. Does system message 1 change, and do two turns of one
#    expert still share the manual?
# 3. The router often sends a question to one or two experts. From the
#    recorded points (`from agentstate.experts import ttft_points`), how
#    many seconds does the invariant prefix save on a question of 1, 2
#    and 3 experts at the largest prefix? Why is one of them zero?
