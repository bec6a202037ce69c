# %% [markdown]
# # 05 · Going further: the experts graph, the recorded benchmark and its provenance
#
# Notebook 05 taught one idea, the invariant prefix. This notebook opens the
# rest of the experts system built around it: the router and its fallback,
# the `Send` fan-out whose writes meet in a reducer, the super-steps of each
# execution mode, threads kept in SQLite without the manual; then the
# benchmark recorded on llama.cpp: where its figures come from, what they
# show and what they do not.

# %%
from agentstate.display import Table
from agentstate.experts import ExpertsConfig, build_experts_graph, load_manual, user_turn

manual = load_manual()
ALL3 = "Last night's batch outage sent a SEPA file twice, a customer complains: what to report?"
graph = build_experts_graph(ExpertsConfig(manual=manual))
state = graph.invoke(user_turn(ALL3))
assert set(state["prefix_by_call"].values()) == {state["prefix_sha256"]}
Table({"expert": e, "prefix sha256": h[:12]} for e, h in state["prefix_by_call"].items())

# %% [markdown]
# In stub mode (offline) each expert answers deterministically; every call
# recorded the hash of the system message 1 it sent, the same for all three.
#
# ## The router and its fallback
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
routes = Table(
    {
        "question": q[:48],
        "experts": route_by_rules(q)["experts"],
        "reason": route_by_rules(q)["reason"] or "",
    }
    for q in questions
)
assert (
    routes.column("experts")[-1] == ["support_concierge"] and len(routes.column("experts")[2]) == 3
)
routes

# %% [markdown]
# `llm` asks a model (without the manual: routing must not cost a prefill) to
# reply with JSON. Small models reply with fences, aliases or prose; anything
# unusable falls back to the rules, with the reason recorded. Three scripted
# replies:

# %%
from langchain_core.messages import AIMessage

from agentstate.experts import route_by_llm
from agentstate.models import ScriptedChatModel

replies = [
    '```json\n{"experts": ["Compliance Auditor", "support"]}\n```',
    "The compliance team, I think.",
    '{"experts": ["lawyer"]}',
]
outcomes = Table(
    {
        "reply": r.replace("\n", " ")[:44],
        **{
            k: v
            for k, v in route_by_llm(ALL3, ScriptedChatModel(script=[AIMessage(r)])).items()
            if k in ("mode", "experts", "reason")
        },
    }
    for r in replies
)
assert outcomes.column("mode") == ["llm", "llm->rules", "llm->rules"]
outcomes

# %% [markdown]
# ## The fan-out and its reducer
# In `parallel` mode the router's edge returns one `Send` per expert, and the
# experts write `expert_outputs` in the same super-step. That key merges
# dicts key by key; as a plain dict key, LangGraph refuses the update:

# %%
from langgraph.errors import InvalidUpdateError

from agentstate.experts import EXPERTS, merge_or_reset
from agentstate.fixtures import plain_dict_fan_out

assert merge_or_reset({"a": "1"}, {"b": "2"}) == {"a": "1", "b": "2"}
try:
    plain_dict_fan_out(list(EXPERTS)).invoke({"experts": list(EXPERTS)})
    without_reducer = "no error"
except InvalidUpdateError as err:
    without_reducer = f"InvalidUpdateError: {str(err).splitlines()[0][:70]}"
assert without_reducer.startswith("InvalidUpdateError")
without_reducer

# %% [markdown]
# ## Super-steps of each execution mode
# `sequential` runs one expert per super-step; `parallel` sends all three in
# one; `primed` first makes a 1-token call with the bare prefix, then fans
# out. Counting distinct steps in the `debug` stream counts super-steps;
# counting `stream_mode="updates"` chunks counts node runs, which is not the
# same thing.

# %%
from agentstate.fixtures import super_steps

by_mode = {}
for execution in ("sequential", "parallel", "primed"):
    run = build_experts_graph(ExpertsConfig(manual=manual, execution=execution))
    by_mode[execution] = {
        "super-steps": len(super_steps(run, user_turn(ALL3))),
        "update chunks": len(list(run.stream(user_turn(ALL3), stream_mode="updates"))),
        "same answer": run.invoke(user_turn(ALL3))["response"] == state["response"],
    }
assert [m["super-steps"] for m in by_mode.values()] == [6, 4, 5]
assert all(m["same answer"] for m in by_mode.values())
Table({"execution": k, **v} for k, v in by_mode.items())

# %% [markdown]
# ## Threads that persist, without the manual
# A SQLite checkpointer keeps a thread in a file; the state holds the
# manual's hash, never its text. Two turns, then the raw bytes of the file:

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
found = {
    "thread turns": sum(m.type == "human" for m in turn2["messages"]),
    "manual hash in file": file_contains(db, manual.sha256.encode()),
    "manual text in file": file_contains(db, manual.data[5000:5200]),
}
assert found == {"thread turns": 2, "manual hash in file": True, "manual text in file": False}
found

# %% [markdown]
# ## The recorded benchmark: where the figures come from
# `scripts/bench_experts.py` ran the same 3-expert question on llama.cpp's
# server (SmolLM2-135M, 2 threads), 3 rounds per case, each from an evicted
# cache, and committed `data/results/experts_benchmark.json`. Its
# provenance, checked against this repository's manual and prompts:

# %%
from agentstate.experts import load_results, provenance_checks

results = load_results()
checks = provenance_checks(results)
assert all(checks.values()), checks
prov = results["provenance"]
Table(
    [{"check": k, "holds": v} for k, v in checks.items()]
    + [
        {"check": f"{k}: {prov[k]}", "holds": ""}
        for k in ("date", "engine_version", "model_file", "cores", "server_flags")
    ]
)

# %% [markdown]
# The engine's context holds 8,192 tokens (`--n_ctx 8192`) and the whole
# manual does not fit, so the run sent its first 1, 2 and 4 chapters. With
# the engine installed, its own tokenizer recounts the prefixes:

# %% tags=["nbval-ignore-output"]
from agentstate.engine import count_tokens, engine_installed
from agentstate.experts import system_prefix

recount = {}
if engine_installed():
    for size in results["sizes"]:
        recount[size["sections"]] = count_tokens(
            system_prefix(manual.leading(size["sections"])).text
        )
    assert recount == {s["sections"]: s["prefix_tokens"] for s in results["sizes"]}
Table(
    {
        "chapters": s["sections"],
        "prefix tokens recorded": s["prefix_tokens"],
        "recounted": recount.get(s["sections"], "engine not installed"),
    }
    for s in results["sizes"]
)

# %% [markdown]
# ## What the run shows: cold against warm
# `cold`: an expert's median time to first token with a clock line first;
# `warm`: the second and third sequential experts with the invariant prefix;
# `floor`: the same calls without the manual. The share of the ideal saving
# is (cold - warm) / (cold - floor). The committed medians are recomputed
# from the raw rounds first.

# %%
from statistics import median

from agentstate.experts import summary_rows

for size in results["sizes"]:
    cold = [t for r in size["raw"]["cache_busted"] for t in r["ttft_ms"].values()]
    assert median(cold) == size["cold_ms"]
Table(summary_rows(results))

# %% [markdown]
# The sweep measured the same at 1, 2, 4, 8 and 16 chapters (609 to 5,949
# tokens). Cold grows with the prefix because the engine reads every token
# again; warm grows far less (only the persona and the question are new).

# %%
from agentstate.experts import sweep_rows

points = results["sweep"]["points"]
tokens = [p["prefix_tokens"] for p in points]
lines = {k: [p[f"{k}_ms"] / 1000 for p in points] for k in ("cold", "warm", "floor")}
assert all(a < b for a, b in zip(lines["cold"], lines["cold"][1:], strict=False))
Table(sweep_rows(results))

# %%
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(7, 3.5))
for name, style in (("cold", "o-"), ("warm", "s-"), ("floor", "^--")):
    ax.plot(tokens, lines[name], style, label="cold (clock first)" if name == "cold" else name)
ax.set_xlabel("prefix tokens (1, 2, 4, 8, 16 chapters)")
ax.set_ylabel("median TTFT per expert, s")
ax.set_title(f"llama.cpp, {prov['model_file']}, run of {prov['date']}")
ax.legend()
plt.close(fig)
fig

# %% [markdown]
# **An extrapolation, not a measurement:** a least-squares line through the
# five cold points, carried to the whole manual's token count (which this
# engine cannot even hold), gives the order of magnitude of a cold call of
# the full manual on this CPU. The cost per prefix token already rises with
# the prefix, so the line is, if anything, low.

# %%
from statistics import linear_regression

fit = linear_regression(tokens, lines["cold"])
per_token = [round(c * 1000 / t, 1) for c, t in zip(lines["cold"], tokens, strict=True)]
assert per_token == sorted(per_token)  # rising: the straight line underestimates
{
    "ms per prefix token, 609 to 5,949 tokens": per_token,
    "EXTRAPOLATED cold TTFT, whole manual, s": round(
        fit.intercept + fit.slope * prov["manual_tokens"]
    ),
}

# %% [markdown]
# ## What the run does not show: parallel and primed
# This engine serves one request at a time, so concurrent expert calls
# queue. Per round, the wall time of the whole turn, `parallel` against
# `sequential`, and the slowest `primed` expert against the size's cold
# median:

# %%
rows = []
for size in results["sizes"]:
    raw = size["raw"]
    par = [r["total_ms"] for r in raw["parallel"]]
    seq = [r["total_ms"] for r in raw["sequential"]]
    primed = [max(v for k, v in r["ttft_ms"].items() if k != "prime") for r in raw["primed"]]
    rows.append(
        {
            "prefix tokens": size["prefix_tokens"],
            "parallel vs sequential, medians": f"{(median(par) / median(seq) - 1) * 100:+.1f}%",
            "rounds with parallel faster": f"{sum(map(float.__lt__, par, seq))} of {len(par)}",
            "slowest primed expert, s": round(median(primed) / 1000, 2),
            "cold, s": round(size["cold_ms"] / 1000, 2),
            "rounds with a primed expert slower than cold": sum(
                p > size["cold_ms"] for p in primed
            ),
        }
    )
queued = Table(rows)
assert all(r["rounds with parallel faster"] != "0 of 3" for r in rows)
slower = queued.column("rounds with a primed expert slower than cold")
assert slower[0] > 0 and slower[1:] == [0] * (len(slower) - 1)
queued

# %% [markdown]
# The medians of `parallel` and `sequential` differ by a few percent, and at
# every size one round in three had `parallel` faster: on this engine
# parallel calls neither help nor clearly hurt; three rounds cannot separate
# them. `primed` pays the cold prefill once, then its experts queue behind
# each other: at the smallest prefix the slowest primed expert's median is
# about a cold call and one round was slower than cold; at the larger
# prefixes every primed expert started sooner than a cold call. Only the
# invariant prefix itself (warm against cold, above) is a large, clear
# effect at every size.
