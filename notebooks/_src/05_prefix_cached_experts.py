# %% [markdown]
# # 05 · Prefix-cached experts: one manual, many calls, one prefill
#
# A bank's operations desk asks questions that need three kinds of expert: a
# technical specialist, a compliance auditor and a support concierge. Each one
# must answer from the same operations manual, about 25k tokens. Sent naively,
# every expert call makes the engine read the whole manual again. Engines with
# a prefix cache can skip that work, but only for the leading tokens that are
# byte-for-byte identical to a previous prompt. One innocent line (the current
# time, a request id, the persona) before the manual and the cache never hits.
# This stage builds the system so the manual is an invariant prefix, and
# measures what that buys on a real engine (llama.cpp on this machine's CPU).

# %% [markdown]
# ## Recap
# Stage 04 showed that a subagent's writes reach the parent only for keys both
# declare: one state schema shared by parent and subagents fixed it. Here the
# question is different: not which keys survive, but which bytes the model sees
# first, and what must stay out of state altogether (the manual).
#
# ## Goals
# - Reproduce the cache bust: a timestamp before the manual gives every expert
#   call a new prefix.
# - Look inside: how many bytes two prompts share, which is what a prefix cache
#   can reuse.
# - Import the fix: system 1 = instructions + manual (invariant), system 2 =
#   persona, then history and the query; a router picks 1-3 experts.
# - Keep threads across runs in SQLite while the manual never enters state.
# - Prove it with figures measured on llama.cpp, and check where they came from.

# %%
# NBVAL_IGNORE_OUTPUT
from importlib.metadata import version

from agentstate.engine import engine_installed, engine_version

versions = {p: version(p) for p in ("langgraph", "langchain-openai", "langgraph-checkpoint-sqlite")}
versions["llama-cpp-python"] = engine_version() or "not installed (make engine)"
assert all(versions.values())
versions

# %% [markdown]
# ## The manual
# `data/manual/operations_manual.md` is loaded verbatim: the bytes of the file,
# their strict UTF-8 decoding, and the sha256 of the bytes as its name.

# %%
from agentstate.experts import load_manual

manual = load_manual()
stats = manual.stats()
assert stats["bytes"] == len(manual.data) > 90_000 and stats["chapters"] == 28
{**stats, "sha256": stats["sha256"][:16]}

# %% [markdown]
# ## Reproduce: a timestamp before the manual
# A common first version puts "Current time: ..." at the top of the system
# prompt. Build system message 1 that way for three expert calls:

# %%
from agentstate.experts import common_prefix_length, system_prefix

busted = [system_prefix(manual, "timestamp_first") for _ in range(3)]
shared = min(common_prefix_length(busted[0].text, p.text) for p in busted[1:])
assert len({p.sha256 for p in busted}) == 3 and shared < 40
{"distinct prefixes": len({p.sha256 for p in busted}), "bytes shared < 40": shared < 40,
 "manual bytes": manual.size}  # fmt: skip

# %% [markdown]
# The three calls agree on fewer than 40 bytes: the clock's digits differ
# before the manual even starts. A prefix cache reuses only the shared leading
# tokens, so each call prefills about 25k tokens again.
#
# ## Look inside: what the engine could reuse
# The full prompt of an expert call is system 1, system 2 (persona), history
# and the query. Compare the prompts of the three experts under each policy:
# how many leading bytes do all three share, and does that cover the manual?

# %%
from agentstate.display import Table
from agentstate.experts import EXPERTS, build_messages


def prompt_bytes(policy, expert):
    messages = build_messages(system_prefix(manual, policy), expert, "Who approves a waiver?")
    return "\n".join(f"{m.type}: {m.content}" for m in messages).encode("utf-8")


rows = []
for policy in ("timestamp_first", "invariant"):
    prompts = [prompt_bytes(policy, e) for e in EXPERTS]
    common = min(common_prefix_length(prompts[0], p) for p in prompts[1:])
    rows.append({"policy": policy, "bytes shared by all 3": common if common > 100 else "< 100",
                 "covers the manual": common > manual.size})  # fmt: skip
assert [r["covers the manual"] for r in rows] == [False, True]
Table(rows)

# %% [markdown]
# With the invariant policy the prompts share everything up to the persona,
# which comes right after the manual. The same holds for a persona or a
# request id placed first: whatever varies must come after the manual.
#
# ### On the real engine
# The next cell runs when the engine is installed (`make engine`): it starts
# llama.cpp's server on 127.0.0.1, asks two experts the same question with a
# timestamp first and then with the invariant prefix (a 1-chapter manual, so
# it stays quick), and stops the server. Timings vary, so its output is not
# compared; its assertions still run. Without the engine it says so, and the
# recorded figures further down are what you read.

# %%
# NBVAL_IGNORE_OUTPUT
from agentstate.engine import EngineServer
from agentstate.experts import ExpertsConfig, build_experts_graph, user_turn
from agentstate.experts.benchmark import evict
from agentstate.experts.llm import chat_model
from agentstate.models import ModelSettings

TWO = "The overnight batch outage: what must we report to the regulator?"
live = None
if engine_installed():
    with EngineServer() as server:
        model = chat_model(ModelSettings(base_url=server.base_url), max_tokens=8)
        live = {}
        for policy in ("timestamp_first", "invariant"):
            evict(model)
            config = ExpertsConfig(manual=manual.leading(1), mode="llm", expert_model=model,
                                   prefix_policy=policy, synthesis="combine")  # fmt: skip
            live[policy] = build_experts_graph(config).invoke(user_turn(TWO))["ttft_ms"]
    first, second = list(live["invariant"])
    assert live["timestamp_first"][second] > 3 * live["invariant"][second]
    assert live["invariant"][first] > 3 * live["invariant"][second]
live or "engine not installed: run `make engine` to see this live"

# %% [markdown]
# ## The fix: an invariant prefix, a router, experts and a synthesis
# `ExpertsConfig` holds the manual (in the graph's closure, never in state),
# the mode (`stub` offline, `llm` on an endpoint), the router (`rules` or
# `llm`) and the execution (`sequential`, `parallel`, `primed`). The default
# graph, drawn locally as Mermaid:

# %%
from agentstate.display import graph_mermaid

graph = build_experts_graph(ExpertsConfig(manual=manual))
diagram = graph_mermaid(graph)
assert "router" in diagram.source and "synthesize" in diagram.source
diagram

# %% [markdown]
# A question that needs all three experts. In stub mode each expert answers
# deterministically (it cites the manual chapter it would use), and every call
# records the hash of the system message 1 it sent:

# %%
ALL3 = "Last night's batch outage sent a SEPA file twice, a customer complains: what to report?"
state = graph.invoke(user_turn(ALL3))
assert set(state["prefix_by_call"].values()) == {state["prefix_sha256"]}
assert state["prefix_sha256"] == system_prefix(manual).sha256
Table({"expert": e, "prefix sha256": h[:12], "answer": state["expert_outputs"][e]}
      for e, h in state["prefix_by_call"].items())  # fmt: skip

# %% [markdown]
# What the state keeps: the query and the final answer as messages, hashes,
# the route, the tasks and outputs. Not the manual, and no system message.

# %%
assert [m.type for m in state["messages"]] == ["human", "ai"]
assert manual.text[:500] not in repr(state)
{key: type(value).__name__ for key, value in state.items()}

# %% [markdown]
# ## The router
# `rules` is deterministic: keywords per expert, most hits first, at most
# three, and the support concierge by default.

# %%
from agentstate.experts import route_by_rules

questions = ["The overnight batch job failed twice",
             "Which sanctions lists do we screen against?",
             "How do I explain the fee refund to the customer?", ALL3, "Good morning!"]  # fmt: skip
routes = Table({"question": q[:48], "experts": route_by_rules(q)["experts"],
                "reason": route_by_rules(q)["reason"] or ""} for q in questions)  # fmt: skip
assert routes.column("experts")[-1] == ["support_concierge"]
routes

# %% [markdown]
# `llm` asks a model, without the manual (routing must not cost a full
# prefill), to reply with JSON. Small models reply with fences, aliases or
# prose; anything unusable falls back to the rules with the reason recorded.
# Here the model is scripted, so the replies are exactly the ones we test:

# %%
from langchain_core.messages import AIMessage

from agentstate.experts import route_by_llm
from agentstate.models import ScriptedChatModel

replies = ['```json\n{"experts": ["Compliance Auditor", "support"]}\n```',
           "The compliance team, I think.", '{"experts": ["lawyer"]}']  # fmt: skip
outcomes = Table({"reply": r.replace("\n", " ")[:44], **{k: v for k, v in route_by_llm(
    ALL3, ScriptedChatModel(script=[AIMessage(r)])).items() if k in ("mode", "experts", "reason")}}
    for r in replies)  # fmt: skip
assert outcomes.column("mode") == ["llm", "llm->rules", "llm->rules"]
outcomes

# %% [markdown]
# ## Execution modes
# `sequential` runs one expert per super-step (the first fills the cache, the
# next reuse it). `parallel` sends all experts in one super-step with `Send`;
# their writes meet in reducer keys (`merge_or_reset`), so none is lost.
# `primed` first makes a 1-token call with the bare prefix, then fans out.

# %%
by_mode = {}
for execution in ("sequential", "parallel", "primed"):
    run = build_experts_graph(ExpertsConfig(manual=manual, execution=execution))
    steps = list(run.stream(user_turn(ALL3), stream_mode="updates"))
    result = run.invoke(user_turn(ALL3))
    by_mode[execution] = {"super-steps": len(steps), "calls": list(result["prefix_by_call"]),
                          "same answer": result["response"] == state["response"]}  # fmt: skip
assert all(m["same answer"] for m in by_mode.values())
Table({"execution": k, **v} for k, v in by_mode.items())

# %% [markdown]
# ## Threads that persist, without the manual
# A SQLite checkpointer keeps the thread across runs (and processes: the CLI's
# `--checkpoint-db`). Two turns on one thread, then read the database file
# as raw bytes:

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
found = {"thread turns": sum(m.type == "human" for m in turn2["messages"]),
         "manual hash in file": file_contains(db, manual.sha256.encode()),
         "manual text in file": file_contains(db, manual.data[5000:5200])}  # fmt: skip
assert found == {"thread turns": 2, "manual hash in file": True, "manual text in file": False}
found

# %% [markdown]
# ## Prove it: figures measured on llama.cpp
# `scripts/bench_experts.py` runs the same 3-expert query on the real engine
# (llama.cpp's server, SmolLM2-135M-Instruct, 2 CPU threads) at three manual
# sizes, several rounds, each case from an evicted cache, and commits the
# medians to `data/results/experts_benchmark.json`. First, where do these
# figures come from, and do they match this repository's manual and prompts?

# %%
from agentstate.experts.results import load_results, provenance_checks

results = load_results()
checks = provenance_checks(results)
assert all(checks.values()), checks
checks

# %%
prov = results["provenance"]
{k: prov[k] for k in ("engine", "engine_version", "model_file", "cores", "date")} | {
    "model sha256": prov["model_sha256"][:16], "rounds": results["rounds"]}  # fmt: skip

# %% [markdown]
# The headline per manual size: `cold` is an expert's time to first token with
# a timestamp first (every call cold), `warm` that of the second and third
# sequential experts with the invariant prefix, `floor` the same calls with no
# manual at all. The share of the ideal saving is (cold - warm) / (cold - floor).

# %%
from agentstate.experts.results import case_rows, summary_rows

summary = Table(summary_rows(results))
for size in results["sizes"]:
    assert size["warm_ms"] * 3 < size["cold_ms"] and size["saving_share"] > 0.8
summary

# %% [markdown]
# Every case, medians in routing order (TTFT 1 is the first expert called).
# Notice `parallel`: the engine has one slot, so concurrent calls queue behind
# the cold one and the later experts wait longer than in sequence. `primed`
# pays the cold prefill once, in its 1-token call, and then every expert starts
# warm (still queued).

# %%
cases = Table(case_rows(results))
largest = results["sizes"][-1]["cases"]
assert largest["sequential"]["total_ms"] < largest["cache_busted"]["total_ms"]
cases

# %%
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(8, 3.5))
names = results["cases"]
width = 0.8 / len(results["sizes"])
for i, size in enumerate(results["sizes"]):
    totals = [size["cases"][c]["total_ms"] / 1000 for c in names]
    ax.bar([x + i * width for x in range(len(names))], totals, width,
           label=f"{size['prefix_tokens']}-token prefix")  # fmt: skip
ax.set_xticks([x + width for x in range(len(names))], names)
ax.set_ylabel("median total, s")
ax.set_title("3 experts on llama.cpp (SmolLM2-135M, 2 threads)")
ax.legend()
plt.close(fig)
fig

# %% [markdown]
# ## Try it: how many experts, how large a manual
# From the recorded medians: with a busted cache every expert pays the cold
# prefill; with the invariant prefix only the first does. Turn the knobs.

# %%
import ipywidgets as widgets


def predicted(experts, size_index):
    s = results["sizes"][size_index]
    busted, fixed = experts * s["cold_ms"], s["cold_ms"] + (experts - 1) * s["warm_ms"]
    return {"prefix tokens": s["prefix_tokens"], "busted TTFT sum s": round(busted / 1000, 1),
            "invariant TTFT sum s": round(fixed / 1000, 1),
            "saved s": round((busted - fixed) / 1000, 1)}  # fmt: skip


# %%
# NBVAL_IGNORE_OUTPUT
sizes = [(f"{s['prefix_tokens']} tokens", i) for i, s in enumerate(results["sizes"])]
experts_knob = widgets.IntSlider(value=3, min=1, max=3)
size_knob = widgets.Dropdown(options=sizes, value=len(sizes) - 1)
knob = widgets.interactive(predicted, experts=experts_knob, size_index=size_knob)
assert predicted(1, 0)["saved s"] == 0
knob

# %%
largest_size = len(results["sizes"]) - 1
three = predicted(3, largest_size)
s = results["sizes"][largest_size]
assert three["saved s"] == round(2 * (s["cold_ms"] - s["warm_ms"]) / 1000, 1) > 0
assert predicted(3, 0)["saved s"] < three["saved s"]  # a larger manual saves more
three

# %% [markdown]
# ## Summary
# - A prefix cache reuses only identical leading tokens: anything variable
#   before the manual (time, ids, persona) makes every expert call cold.
# - Fixed order: system 1 = instructions + manual (invariant, hashed), system
#   2 = persona, then history and the query. Tests prove the bytes sent over
#   HTTP are identical across experts.
# - The router (`rules`, or `llm` without the manual and with a fallback) picks
#   1-3 experts; `sequential`, `parallel` (Send + reducers) and `primed` run them.
# - Threads persist in SQLite; only the manual's hash is stored.
# - On llama.cpp with one slot, warm experts start many times faster than cold
#   ones, close to the no-manual floor; parallel calls queue, so on one slot
#   they do not beat sequential.
#
# ## Exercises
# 1. Put the persona before the manual (swap the two system messages in
#    `build_messages`). Which test fails first, and what does the benchmark say?
# 2. Use `router="llm"` with the real engine. The router call carries no manual:
#    what happens to the first expert's TTFT on a one-slot server, and why does
#    `primed` recover it?
# 3. Run `python scripts/bench_experts.py --sections 8 --rounds 1`. How does
#    the cold time grow with the prefix, and the warm time?
# 4. Start the engine with `agentstate engine start` and continue a thread with
#    `agentstate experts run --mode llm --checkpoint-db t.sqlite --thread-id a`.
#    Does the history (after the persona) change the prefix hash?
