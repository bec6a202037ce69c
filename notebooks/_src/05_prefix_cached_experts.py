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
# cache-lm's rule: "I never put expert persona, timestamps, request IDs,
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

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from agentstate.experts import EXPERTS, load_manual

manual = load_manual()
QUESTION = "The overnight batch outage: what must we report to the regulator?"


class DeskState(TypedDict, total=False):
    question: str
    history: list  # the thread's earlier messages: state that grows every turn
    notes: Annotated[dict, operator.or_]  # each expert adds its own key


def build_desk(model, prompt, manual_text=manual.text):
    def fan_out(state):
        task = {"question": state["question"], "history": state.get("history", [])}
        return [Send("expert", {**task, "expert": e}) for e in EXPERTS]

    def expert(task):
        persona = EXPERTS[task["expert"]].system_text()
        reply = model.invoke(prompt(manual_text, persona, task["question"], task["history"]))
        return {"notes": {task["expert"]: reply.text}}

    graph = StateGraph(DeskState)
    graph.add_node("expert", expert)
    graph.add_conditional_edges(START, fan_out, ["expert"])
    graph.add_edge("expert", END)
    return graph.compile()


# %% [markdown]
# A common first prompt starts with the current time. The scripted model
# answers "a note" and keeps every prompt. `shared_prefix` compares them
# (sorted: the experts run in parallel). The clock changes every run, and
# so does this output:

# %% tags=["nbval-ignore-output"]
from datetime import UTC, datetime

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from agentstate.experts.prompts import GLOBAL_INSTRUCTIONS, MANUAL_END
from agentstate.lessons.display import Table
from agentstate.lessons.fixtures import shared_prefix
from agentstate.models import ScriptedChatModel


def clock_first(manual_text, persona, question, history=()):
    clock = f"Current time: {datetime.now(UTC).isoformat(timespec='microseconds')}\n"
    first = SystemMessage(clock + GLOBAL_INSTRUCTIONS + manual_text + MANUAL_END)
    return [first, SystemMessage(persona), *history, HumanMessage(question)]


recorder = ScriptedChatModel(script=[AIMessage("a note")] * 3)
build_desk(recorder, clock_first).invoke({"question": QUESTION})
busted = shared_prefix(recorder.seen)
assert busted["bytes shared"] < 100 < manual.size
Table([busted])

# %% [markdown]
# ## 2. Look inside: the clock, and the layout of a prompt
# The three calls read the clock microseconds apart:
#
# ```mermaid
# sequenceDiagram
#     participant E as expert calls
#     participant K as prefix cache
#     E->>K: call 1: time ...000101, manual
#     Note over K: reads the manual
#     E->>K: call 2: time ...000187, manual
#     Note over K: parts at the digits: reads it again
#     E->>K: call 3: time ...000240, manual
#     Note over K: a third full read
# ```

# %% [markdown]
# The two orders, part by part, coloured by what a prefix cache does with
# each part on the second and third expert's call:

# %%
from agentstate.experts import plot_prompt_layouts

plot_prompt_layouts(len((GLOBAL_INSTRUCTIONS + manual.text + MANUAL_END).encode()))

# %% [markdown]
# ## 3. The fix: the prompt order, written whole
# System message 1 holds the fixed instructions and the manual, nothing
# else: no clock, id or name. The persona, history and question follow, so
# a thread's growing history never moves the manual.


# %%
def expert_prompt(manual_text, persona, question, history=()):
    return [
        SystemMessage(GLOBAL_INSTRUCTIONS + manual_text + MANUAL_END),  # the same for every call
        SystemMessage(persona),  # differs per expert, after the manual
        *history,  # differs per thread and turn
        HumanMessage(question),  # differs per turn
    ]


recorder = ScriptedChatModel(script=[AIMessage("a note")] * 3)
build_desk(recorder, expert_prompt).invoke({"question": QUESTION})
fixed = shared_prefix(recorder.seen)
Table([{**fixed, "system message 1 bytes": len(recorder.seen[0][0].content.encode())}])

# %% [markdown]
# Now the three prompts share all 109,128 bytes of system message 1, and
# part at each expert's title.

# %% [markdown]
# The package's `build_messages(system_prefix(manual), expert, question)`
# builds the same messages (its graph adds a router and a synthesis):

# %%
from agentstate.experts import build_messages, system_prefix

sent = sorted([m.content for m in call] for call in recorder.seen)
package = [build_messages(system_prefix(manual), expert, QUESTION) for expert in EXPERTS]
same = sent == sorted([m.content for m in call] for call in package)
Table([{"expert calls": len(sent), "same messages as the package": same}])

# %% [markdown]
# ## 4. Prove it on a real engine
# The desk on llama.cpp with SmolLM2-135M (`make engine`), through
# `ChatOpenAI`, once per order, one expert at a time, after an unrelated
# prompt. The engine logs the prompt tokens each request reused.

# %% [markdown]
# With the manual's first chapter only, the cell took 32 s in CI and up to
# 7 minutes on a busy machine (it starts the server and loads the model
# first). It prints its own time.

# %% tags=["nbval-ignore-output"]
import time

from langchain_openai import ChatOpenAI

from agentstate.engine import EngineServer, engine_installed

chapter1, live = manual.leading(1), "engine not installed: run `make engine` to see this live"
started = time.monotonic()
if engine_installed():
    with EngineServer(verbose=True) as server:
        # llama.cpp reads max_tokens from the request body
        model = ChatOpenAI(
            base_url=server.base_url, api_key="local", model="local", extra_body={"max_tokens": 8}
        )
        live = []
        for name, prompt in {"clock first": clock_first, "manual first": expert_prompt}.items():
            model.invoke(f"Say one word. {datetime.now()}")  # the cache now holds this instead
            seen, desk = len(server.prefix_hits()), build_desk(model, prompt, chapter1.text)
            desk.invoke({"question": QUESTION}, {"max_concurrency": 1})  # one call at a time
            reused = max(server.prefix_hits()[seen:], default=0)
            live.append({"prompt": name, "most tokens a call reused": reused})
    live = Table(live)
    reused = live.column("most tokens a call reused")
    assert reused[0] < 50 < 600 < reused[1]
print(f"took {time.monotonic() - started:.0f} s")
live

# %% [markdown]
# With the clock first, a call reused only the tokens before the clock's
# digits; with the manual first, the whole first chapter (about 620).
#
# ## What it saves, per question
# A [cold call](../docs/glossary.md#cold-and-warm-calls)
# [prefills](../docs/glossary.md#prefill) (reads) the whole prefix, a warm
# one only the persona and the question. With the clock first a question
# costs three cold calls; with the invariant prefix, one cold, two warm.

# %% [markdown]
# In [time to first token](../docs/glossary.md#time-to-first-token), as
# `scripts/bench_experts.py` recorded it on this engine (3 rounds, medians,
# the first 1 to 16 chapters of the manual):

# %%
from IPython.display import display

from agentstate.experts import load_results, plot_ttft, question_seconds

results = load_results()
display(Table(question_seconds(results)))
plot_ttft(results)

# %% [markdown]
# Per question (the table, the left panel) the invariant prefix is 2.3 to
# 2.9 times faster: the first expert still pays the cold call. Per call
# (right) a warm call waits 6 to 41 times less than a cold one, near the
# floor: the same call without the manual.

# %% [markdown]
# ## 5. What the doctor says
# `agentstate.doctor.Watch`, a callback handler passed to a run, reports
# model calls whose prompts part before a large shared part. Both desks:

# %%
from agentstate.doctor import Watch
from agentstate.lessons.display import compare_findings


def watched(prompt):
    desk = build_desk(ScriptedChatModel(script=[AIMessage("a note")] * 3), prompt)
    watch = Watch(desk)
    desk.invoke({"question": QUESTION}, {"callbacks": [watch]})
    return watch.report()


reports = {"clock first": watched(clock_first), "manual first": watched(expert_prompt)}
compare_findings(reports)

# %% [markdown]
# ## Try it: a variable line anywhere in the manual
# A per-call line (a request id) goes after the first `chapter` chapters
# of the manual (0: before it): what the three prompts share.

# %%
chapters = manual.chapter_titles()


def request_id_after(chapter=0):
    cut = len(manual.leading(chapter).text) if chapter else 0
    prompts = []
    for n, expert in enumerate(EXPERTS):  # the line differs per call
        text = manual.text[:cut] + f"Request id: {n:04d}\n" + manual.text[cut:]
        prompts.append(expert_prompt(text, EXPERTS[expert].system_text(), QUESTION))
    after = chapters[chapter - 1] if chapter else "(nothing: before the manual)"
    return Table([{"id line after": after, **shared_prefix(prompts)}])


# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

knob_widget = widgets.interact(
    request_id_after,
    chapter=widgets.IntSlider(value=0, min=0, max=len(chapters), description="chapter"),
)

# %% [markdown]
# Each chapter the line moves down adds that chapter to what every call
# shares; nothing after the line is reused: the cache stops at the first
# byte that differs.

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
#    recorded points (`ttft_points(results)`), how many seconds does the
#    invariant prefix save on a question of 1, 2 and 3 experts at the
#    largest prefix? Why is one of them zero?
