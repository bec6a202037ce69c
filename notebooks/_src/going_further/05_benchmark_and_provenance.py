# %% [markdown]
# # 05 · Going further: the experts graph, the recorded benchmark and its provenance
#
# Lesson 05 taught one idea, the invariant prefix. This notebook opens the
# system built around it: the router, the fan-out, threads kept without the
# manual, then the benchmark recorded on llama.cpp, what it shows and what
# it does not. The exhaustive checks of each claim live in
# `tests/test_going_further_05.py`.

# %% [markdown]
# The graph, in `parallel` mode:
#
# ```mermaid
# flowchart LR
#     U["user turn"] --> R["router"]
#     R -->|Send| A["compliance_auditor"]
#     R -->|Send| B["technical_specialist"]
#     R -->|Send| C["support_concierge"]
#     A & B & C -->|"expert_outputs: merge"| S["synthesis"]
#     S --> D["answer"]
# ```
#
# The router picks one to three experts; only those run.

# %%
from agentstate.experts import ExpertsConfig, build_experts_graph, load_manual, user_turn
from agentstate.lessons.display import Table

manual = load_manual()
ALL3 = "Last night's batch outage sent a SEPA file twice, a customer complains: what to report?"
graph = build_experts_graph(ExpertsConfig(manual=manual))
state = graph.invoke(user_turn(ALL3))
Table({"expert": e, "prefix sha256": h[:12]} for e, h in sorted(state["prefix_by_call"].items()))

# %% [markdown]
# In stub mode (offline) each expert answers deterministically. Every call
# recorded the hash of the system message 1 it sent: the same for all three.
#
# ## The router
# `rules` is deterministic: keywords per expert, most hits first, at most
# three, the support concierge by default.

# %%
from agentstate.experts import route_by_rules

questions = [
    "The overnight batch job failed twice",
    "Which sanctions lists do we screen against?",
    ALL3,
    "Good morning!",
]
Table({"question": q[:48], "experts": route_by_rules(q)["experts"]} for q in questions)

# %% [markdown]
# `llm` asks a model (without the manual: routing must not cost a prefill)
# for JSON. Small models reply with fences, aliases or prose; anything
# unusable falls back to the rules, with the reason kept. Three replies:

# %%
from langchain_core.messages import AIMessage

from agentstate.experts import route_by_llm
from agentstate.models import ScriptedChatModel

replies = [
    '```json\n{"experts": ["Compliance Auditor", "support"]}\n```',
    "The compliance team, I think.",
    '{"experts": ["lawyer"]}',
]
routed = [route_by_llm(ALL3, ScriptedChatModel(script=[AIMessage(r)])) for r in replies]
Table(
    {"reply": r.replace("\n", " ")[:44], "mode": o["mode"], "experts": o["experts"]}
    for r, o in zip(replies, routed, strict=True)
)

# %% [markdown]
# ## The fan-out and its reducer
# The experts write `expert_outputs` in one super-step. The key merges
# dicts; as a plain dict key, LangGraph refuses the update:

# %%
from langgraph.errors import InvalidUpdateError

from agentstate.experts import EXPERTS
from agentstate.lessons.fixtures import plain_dict_fan_out

try:
    plain_dict_fan_out(list(EXPERTS)).invoke({"experts": list(EXPERTS)})
    without_reducer = "no error"
except InvalidUpdateError as err:
    without_reducer = f"InvalidUpdateError: {str(err).splitlines()[0][:70]}"
without_reducer

# %% [markdown]
# ## Super-steps of each execution mode
# `sequential` runs one expert per super-step, `parallel` all three in one,
# `primed` first makes a 1-token call with the bare prefix. Steps in the
# `debug` stream count super-steps; `updates` chunks count node runs:

# %%
from agentstate.lessons.fixtures import super_steps

by_mode = []
for execution in ("sequential", "parallel", "primed"):
    run = build_experts_graph(ExpertsConfig(manual=manual, execution=execution))
    by_mode.append(
        {
            "execution": execution,
            "super-steps": len(super_steps(run, user_turn(ALL3))),
            "update chunks": len(list(run.stream(user_turn(ALL3), stream_mode="updates"))),
            "same answer": run.invoke(user_turn(ALL3))["response"] == state["response"],
        }
    )
Table(by_mode)

# %% [markdown]
# ## Threads that persist, without the manual
# A SQLite checkpointer keeps a thread in a file; the state holds the
# manual's hash, never its text. Two turns, then the file's raw bytes:

# %%
import tempfile
from pathlib import Path

from agentstate.experts import file_contains, sqlite_checkpointer

db = Path(tempfile.mkdtemp()) / "threads.sqlite"
with sqlite_checkpointer(db) as saver:
    desk = build_experts_graph(ExpertsConfig(manual=manual), checkpointer=saver)
    thread = {"configurable": {"thread_id": "desk-42"}}
    desk.invoke(user_turn(ALL3), thread)
    turn2 = desk.invoke(user_turn("Which sanctions lists do we screen?"), thread)
{
    "thread turns": sum(m.type == "human" for m in turn2["messages"]),
    "manual hash in file": file_contains(db, manual.sha256.encode()),
    "manual text in file": file_contains(db, manual.data[5000:5200]),
}

# %% [markdown]
# ## The recorded benchmark: where the figures come from
# `scripts/bench_experts.py` ran the 3-expert question on llama.cpp
# (SmolLM2-135M, 2 threads), 3 rounds per case, each from an evicted
# cache. Its provenance, checked against this repository:

# %%
from agentstate.experts import load_results, provenance_checks

results = load_results()
prov = results["provenance"]
Table(
    [{"check": k, "holds": v} for k, v in provenance_checks(results).items()]
    + [
        {"check": f"{k}: {prov[k]}", "holds": ""}
        for k in ("date", "engine_version", "model_file", "cores", "server_flags")
    ]
)

# %% [markdown]
# ## What the run shows: cold against warm
# - `cold`: an expert's median time to first token, clock line first;
# - `warm`: the second and third expert with the invariant prefix;
# - `floor`: the same calls without the manual.
#
# The share of the ideal saving is (cold - warm) / (cold - floor):

# %%
from agentstate.experts import summary_rows

Table(summary_rows(results))

# %% [markdown]
# The sweep, at 1 to 16 chapters: cold grows with the prefix, because the
# engine reads every token again; warm grows far less.

# %%
import matplotlib.pyplot as plt

points = results["sweep"]["points"]
tokens = [p["prefix_tokens"] for p in points]
lines = {k: [p[f"{k}_ms"] / 1000 for p in points] for k in ("cold", "warm", "floor")}
fig, ax = plt.subplots(figsize=(9, 3.6), dpi=100)
for name, style in (("cold", "o-"), ("warm", "s-"), ("floor", "^--")):
    ax.plot(tokens, lines[name], style, label="cold (clock first)" if name == "cold" else name)
ax.set_xlabel("prefix tokens (1, 2, 4, 8, 16 chapters)")
ax.set_ylabel("median TTFT per expert, s")
ax.set_title(f"llama.cpp, {prov['model_file']}, run of {prov['date']}", fontsize=11)
ax.legend()
fig.tight_layout()
plt.close(fig)
fig

# %% [markdown]
# **An extrapolation, not a measurement:** a straight line through the five
# cold points, carried to the whole manual (which this engine cannot even
# hold). The cost per token rises with the prefix, so the line is low.

# %%
from statistics import linear_regression

fit = linear_regression(tokens, lines["cold"])
{
    "ms per prefix token": [
        round(c * 1000 / t, 1) for c, t in zip(lines["cold"], tokens, strict=True)
    ],
    "EXTRAPOLATED cold TTFT, whole manual, s": round(
        fit.intercept + fit.slope * prov["manual_tokens"]
    ),
}

# %% [markdown]
# ## What the run does not show: parallel and primed
# This engine serves one request at a time, so concurrent calls queue.
# Per size, `parallel` against `sequential` (the whole turn), and the
# slowest `primed` expert against a cold call:

# %%
from statistics import median

rows = []
for size in results["sizes"]:
    raw = size["raw"]
    par = [r["total_ms"] for r in raw["parallel"]]
    seq = [r["total_ms"] for r in raw["sequential"]]
    primed = [max(v for k, v in r["ttft_ms"].items() if k != "prime") for r in raw["primed"]]
    rows.append(
        {
            "prefix tokens": size["prefix_tokens"],
            "parallel vs sequential": f"{(median(par) / median(seq) - 1) * 100:+.1f}%",
            "rounds parallel faster": f"{sum(map(float.__lt__, par, seq))} of {len(par)}",
            "slowest primed, s": round(median(primed) / 1000, 2),
            "cold, s": round(size["cold_ms"] / 1000, 2),
        }
    )
Table(rows)

# %% [markdown]
# `parallel` and `sequential` differ by a few percent; three rounds cannot
# separate them. `primed` pays the cold prefill once, then its experts
# queue. Only the invariant prefix itself is a large, clear effect.

# %% [markdown]
# ## A restart keeps the primed manual
# The warm prefix lives in the engine's memory: a restart (a deploy, a
# crash, a second replica) would make the first expert pay the cold
# prefill again. So the engine saves it, with llama.cpp's state API, into
# `$AGENTSTATE_ENGINE_STATES` (else `~/.cache/agentstate/states`).

# %% [markdown]
# ```mermaid
# flowchart LR
#     E1["engine 1: cold, then warm"] -->|"prime: save the prefix"| F[("state + manifest")]
#     F -->|"valid for this model and settings?"| E2["engine 2, at start"]
#     E2 -- yes --> W["restored: the first expert is warm"]
#     E2 -- no --> C["cold, and one log line says why"]
# ```
#
# Here, in a temporary folder: the first engine answers one expert cold
# and one warm, then saves; a new engine restores it.

# %% tags=["nbval-ignore-output"]
from agentstate.engine import EngineServer, engine_installed
from agentstate.engine.prefix_client import prime
from agentstate.experts import build_messages, system_prefix
from agentstate.experts.calls import timed_stream
from agentstate.experts.llm import chat_model
from agentstate.models import ModelSettings

chapter1 = manual.leading(1)
prefix1 = system_prefix(chapter1)
QUESTION = "Which sanctions lists do we screen against?"
folder = Path(tempfile.mkdtemp()) / "states"


def ask(engine, expert):
    """One expert call on ``engine``: its reply (greedy) and time to first token."""
    model = chat_model(ModelSettings(base_url=engine.base_url), max_tokens=16, timeout=900)
    return timed_stream(model, build_messages(prefix1, expert, QUESTION))


def said(engine):
    """The engine's own log line about its saved state, without the temporary folder."""
    return engine.state_lines()[0].replace(f"{folder}/", "").replace(str(folder), "the folder")


runs = []
if engine_installed():
    with EngineServer(state_dir=folder, verbose=True) as first:
        cold = ask(first, "compliance_auditor")
        warm = ask(first, "technical_specialist")
        saved = prime(first.base_url, prefix1.text, chapter1.name)
        runs += [
            ("first engine, 1st expert", said(first), cold),
            ("first engine, 2nd expert", "", warm),
        ]
    with EngineServer(state_dir=folder, verbose=True) as second:
        restored = ask(second, "compliance_auditor")
        reused = second.prefix_hits()  # the whole prefix, on its first request
        runs.append(("restarted engine, 1st expert", said(second), restored))
    assert restored.text == cold.text and reused == [saved["tokens"]]
Table(
    {"engine": name, "its log at start": line or "", "TTFT s": round(reply.ttft_ms / 1000, 2)}
    for name, line, reply in runs
)

# %% [markdown]
# The manifest says what the state is valid for: the model file (its
# sha256), the llama.cpp build, the KV types, flash attention, rope and
# LoRA settings, a large enough context. llama.cpp alone loads a state
# made by another model file of the same shape, and the replies change;
# the engine refuses it. `tests/test_engine_state_cache.py` tries each case.
#
# ```bash
# agentstate engine start                 # restores the newest valid state (--restore none: cold)
# agentstate experts prime --sections 4   # prime the first 4 chapters and save their state
# agentstate engine states                # saved states: size, what each is valid for
# ```

# %% [markdown]
# ## The recorded restart case
# `scripts/bench_experts.py` measures it at every size, with fresh engines
# each round: cold, warm, and restored (the first expert of a new engine).
# The share of the warm saving kept is (cold - restored) / (cold - warm);
# the target is 90%:

# %%
from agentstate.experts.restart_benchmark import load_restart_results, restart_rows

Table(restart_rows(load_restart_results()))
