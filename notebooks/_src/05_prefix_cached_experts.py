# %% [markdown]
# # 05 · The invariant prefix: one changed byte before the manual makes every call cold
#
# A bank's operations desk routes each question to up to three experts (a
# technical specialist, a compliance auditor, a support concierge), and every
# expert answers from the same 108 KB operations manual. An engine with a
# prefix cache skips reading the manual again, but only for the leading
# tokens that are identical to an earlier prompt. The original write-up made
# it a hard rule: no persona, timestamp, request id or history before the
# manual. This notebook shows why with bytes, proves it on a real engine
# (llama.cpp), and writes the prompt order that keeps every expert call after
# the first warm.

# %% [markdown]
# ## Recap
# Stage 04 decided which state keys cross a subagent boundary. Here nothing
# is lost from state: the question is which bytes the model reads first, and
# whether they are the same for every call.
#
# ## Goals
# - Reproduce: a clock line before the manual gives every expert call a new prefix.
# - Look inside: how many leading bytes the experts' prompts share.
# - Write the prompt order whole (instructions + manual, then persona, then the
#   query), check it against the package's, and prove it on llama.cpp.
# - Turn a knob: move the variable line and watch the shared prefix.

# %% [markdown]
# ## 1. Reproduce: a clock line before the manual
# A common first prompt starts with the current time. Build system message 1
# that way for the three experts of one question, reading the real clock
# each time:

# %% tags=["nbval-ignore-output"]
from agentstate.display import Table
from agentstate.experts import EXPERTS, load_manual, system_prefix
from agentstate.experts.prompts import utc_clock
from agentstate.fixtures import shared_by_all

manual = load_manual()
busted = [system_prefix(manual, "timestamp_first", clock=utc_clock) for _ in EXPERTS]
shared = shared_by_all([p.text.encode() for p in busted])
first_lines = [p.text.splitlines()[0] for p in busted]
assert shared < len(first_lines[0]) < manual.size  # they part ways before the manual
Table(
    {"expert": e, "first line": line, "bytes shared by all 3": shared}
    for e, line in zip(EXPERTS, first_lines, strict=True)
)

# %% [markdown]
# The clock's readings differ in their last digits, so the three prompts part
# ways a few dozen bytes in, before the manual even starts. A prefix cache can
# reuse only the shared leading tokens: every call prefills the whole manual
# again. (The readings change every run, so this cell's output does too.)
#
# ## 2. Look inside: what an engine could reuse
# An expert call is system message 1, system message 2 (the persona), then
# the question. For each placement of the variable part, the leading bytes
# all three experts' full prompts share, and whether that covers the manual:

# %%
from agentstate.experts import build_messages
from agentstate.fixtures import prompt_text

QUESTION = "The overnight batch outage: what must we report to the regulator?"


def shared_prompt(label: str, policy: str) -> dict:
    prompts = [build_messages(system_prefix(manual, policy), e, QUESTION) for e in EXPERTS]
    common = shared_by_all([prompt_text(p) for p in prompts])  # moves with the clock's digits
    shown = common if common > 100 else "under 100"
    return {
        "system message 1": label,
        "bytes shared": shown,
        "covers the manual": common > manual.size,
    }


placements = Table(
    [shared_prompt("clock first", "timestamp_first"), shared_prompt("manual first", "invariant")]
)
assert placements.column("covers the manual") == [False, True]
placements

# %% [markdown]
# With nothing variable first, the three prompts share every byte of the
# manual and part ways only after it, where the persona comes. That is the
# whole fix: an invariant prefix.
#
# ## 3. The fix: the prompt order, written whole
# System message 1 is fixed instructions plus the manual's bytes, and nothing
# else: no clock, no id, no name. The persona comes second, the thread's
# history and the question last. Each expert differs from the others only
# after the manual.

# %%
from langchain_core.messages import HumanMessage, SystemMessage

from agentstate.experts.prompts import GLOBAL_INSTRUCTIONS, MANUAL_END


def expert_prompt(manual_text: str, persona: str, question: str, history=()) -> list:
    """Invariant first, then what varies: persona, history, question."""
    return [
        SystemMessage(GLOBAL_INSTRUCTIONS + manual_text + MANUAL_END),  # the same for every call
        SystemMessage(persona),  # differs per expert, after the manual
        *history,  # differs per thread and turn
        HumanMessage(question),  # differs per turn
    ]


# %% [markdown]
# The package's `build_messages(system_prefix(manual), expert, query)` is the
# same order; the graph adds a router, a `Send` fan-out of the experts and a
# synthesis, and records each call's prefix hash. Both give the same bytes
# for every expert:

# %%
rows = []
for e in EXPERTS:
    taught = prompt_text(expert_prompt(manual.text, EXPERTS[e].system_text(), QUESTION))
    package = prompt_text(build_messages(system_prefix(manual), e, QUESTION))
    rows.append(
        {"expert": e, "prompt bytes": len(taught), "same bytes as the package": taught == package}
    )
same = Table(rows)
assert all(same.column("same bytes as the package"))
same

# %% [markdown]
# ## 4. Prove it on a real engine
# The next cell needs the engine (`make engine`: llama.cpp's server and
# SmolLM2-135M). It starts the server on 127.0.0.1 with its log on, clears
# the cache, and sends two experts the same question twice: with a clock line
# first, then with `expert_prompt`. The engine logs how many prompt tokens
# each request reused from its cache: a count, not a timing, so the model
# could have done otherwise and the cell asserts on what it did. The manual is
# cut to its first chapter to keep the cell quick; the recorded benchmark used
# the same cut, and its prefix token count is read from
# `data/results/experts_benchmark.json`. Without the engine the cell says so.

# %% tags=["nbval-ignore-output"]
from agentstate.engine import EngineServer, engine_installed
from agentstate.experts import chat_model, evict, load_results
from agentstate.models import ModelSettings

chapter1, recorded = manual.leading(1), load_results()["sizes"][0]
assert recorded["prefix_sha256"] == system_prefix(chapter1).sha256  # the bytes measured
live = "engine not installed: run `make engine` to see this live"
if engine_installed():
    with EngineServer(verbose=True) as server:
        model, live = chat_model(ModelSettings(base_url=server.base_url), max_tokens=8), []
        for clock_first in (True, False):
            evict(model)
            seen = len(server.prefix_hits())
            for expert in ("technical_specialist", "compliance_auditor"):
                first, *rest = expert_prompt(chapter1.text, EXPERTS[expert].system_text(), QUESTION)
                clock = f"Current time: {utc_clock()}\n" if clock_first else ""
                model.invoke([SystemMessage(clock + first.content), *rest])
            reused = max(server.prefix_hits()[seen:], default=0)
            live.append({"clock first": clock_first, "most tokens reused": reused})
    live = Table(live)
    assert live.column("most tokens reused")[0] < 50 < recorded["prefix_tokens"]
    assert live.column("most tokens reused")[1] > recorded["prefix_tokens"]
live

# %% [markdown]
# With the clock first, the second expert reused at most the few tokens
# before the clock's digits; with the invariant prefix it reused more tokens
# than the whole first-chapter prefix holds (the recorded count), so only its
# persona and the question were read anew.
#
# What that is worth in time, recorded by `scripts/bench_experts.py` on this
# repository's engine (3 rounds, medians of each expert's time to first token;
# `cold` with a clock line first, `warm` the second and third experts with the
# invariant prefix). The run is named by its date and model:

# %%
results = load_results()
run = f"{results['provenance']['date']}, {results['provenance']['model_file']}"
recorded_ttft = Table(
    {
        "run": run,
        "prefix tokens": s["prefix_tokens"],
        "cold s": round(s["cold_ms"] / 1000, 2),
        "warm s": round(s["warm_ms"] / 1000, 2),
        "cold / warm": round(s["cold_ms"] / s["warm_ms"], 1),
    }
    for s in results["sizes"]
)
assert all(r["warm s"] < r["cold s"] for r in recorded_ttft.rows)
recorded_ttft

# %% [markdown]
# The engine's context holds 8,192 tokens and the whole manual is larger, so
# the run sent its first 1, 2 and 4 chapters; the going-further notebook has
# the sweep to 16 chapters, the other execution modes and where each figure
# came from.
#
# ## 5. What the doctor says
# `agentstate.doctor.Watch` is a callback handler: pass it to one run and it
# reports model calls whose prompts diverge before a large shared part. Here
# the package's graph runs both orders with a scripted expert model (the
# report quotes the clock's readings, so its text changes every run):

# %% tags=["nbval-ignore-output"]
from langchain_core.messages import AIMessage

from agentstate.doctor import Watch
from agentstate.experts import ExpertsConfig, build_experts_graph, user_turn
from agentstate.models import ScriptedChatModel


def watched(prefix_policy: str):
    experts = ScriptedChatModel(script=[AIMessage("a note")] * 4)
    config = ExpertsConfig(
        manual=manual, mode="llm", expert_model=experts, prefix_policy=prefix_policy
    )
    graph = build_experts_graph(config)
    watch = Watch(graph)
    graph.invoke(user_turn(QUESTION), {"callbacks": [watch]})
    return watch.report()


broken, fixed = watched("timestamp_first"), watched("invariant")
assert broken.codes() == ["prefix-not-invariant"] and fixed.codes() == []
broken

# %% [markdown]
# ## Try it: where the variable line goes
# Run the cells above first. Put a per-call line (a clock reading, a request
# id) before the manual, after it, or nowhere, and choose how many experts
# answer: the table shows the bytes all their prompts share and whether that
# covers the manual.


# %%
def placement(variable_line="before the manual", experts=3):
    prompts = []
    for n, expert in enumerate(list(EXPERTS)[:experts]):
        line = f"Request id: {n:04d}\n"  # differs per call, like a clock reading
        first, *rest = expert_prompt(manual.text, EXPERTS[expert].system_text(), QUESTION)
        if variable_line == "before the manual":
            first = SystemMessage(line + first.content)
        elif variable_line == "after the manual":
            rest[0] = SystemMessage(line + rest[0].content)
        prompts.append(prompt_text([first, *rest]))
    common = shared_by_all(prompts)
    row = {"variable line": variable_line, "experts": experts, "bytes shared": common}
    return Table([{**row, "covers the manual": common > manual.size}])


# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

wide = {"description_width": "initial"}
where = ["before the manual", "after the manual", "nowhere"]
knob_widget = widgets.interact(
    placement,
    variable_line=widgets.Dropdown(options=where, description="variable line", style=wide),
    experts=widgets.IntSlider(value=3, min=2, max=3, description="experts", style=wide),
)

# %%
checked = Table(
    placement(where, 3).rows[0] for where in ("before the manual", "after the manual", "nowhere")
)
assert checked.column("covers the manual") == [False, True, True]
assert checked.column("bytes shared")[0] < 40
checked

# %% [markdown]
# ## Summary
# - A prefix cache reuses only identical leading tokens. A clock line before
#   the manual makes the experts' prompts part ways in the first few dozen
#   bytes, and every call reads the whole manual again.
# - The fix is an order: instructions + manual (invariant), then the persona,
#   then history and the question. The teaching `expert_prompt` and the
#   package's `build_messages` give the same bytes.
# - On llama.cpp the second expert reuses the whole first-chapter prefix only
#   with the invariant order; the recorded run shows what that saves.
# - Going further: [the router, the fan-out, the recorded benchmark and its
#   provenance](going_further/05_benchmark_and_provenance.ipynb).
#
# ## Exercises
# 1. Put the persona before the manual (swap the first two messages of
#    `expert_prompt`). How many bytes do the three experts' prompts share?
# 2. Continue a thread: pass the first turn's question and answer as
#    `history`. Does system message 1 change, and do two turns of one expert
#    still share the manual?
# 3. From the recorded table, how many seconds does the invariant prefix save
#    on a 3-expert question at each prefix size (cold for all three, against
#    cold for the first and warm for the other two)?
