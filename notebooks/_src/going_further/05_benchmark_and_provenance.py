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
from agentstate.experts import ExpertsConfig, build_experts_graph, load_manual, user_turn
from agentstate.lessons.display import Table

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
from agentstate.lessons.fixtures import plain_dict_fan_out

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
from agentstate.lessons.fixtures import super_steps

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

# %% [markdown]
# ## Where the primed manual lives, and what invalidates it
# The warm prefix lives in the engine's memory: restart the engine (a
# deploy, a crash, a second replica) and the first expert pays the whole
# cold prefill again. So the engine saves it. `agentstate experts prime`
# (or the benchmark) hands it the experts' prefix; the engine cuts its
# KV cache back to the tokens every expert shares and writes them with
# llama.cpp's state API (`llama_state_seq_save_file`) into a folder:
# `$AGENTSTATE_ENGINE_STATES`, else `~/.cache/agentstate/states`. Beside
# each state file, a manifest says what it is valid for. A new engine
# restores the newest valid state before its first request, or starts cold
# and says why in one log line. Here, in a temporary folder: the first
# engine answers one expert cold and a second warm, then saves the prefix;
# a new engine process restores it and answers the first expert again.

# %% tags=["nbval-ignore-output"]
from agentstate.engine import EngineServer, engine_installed, locate_model
from agentstate.engine.prefix_client import engine_state, prime
from agentstate.experts import build_messages
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
        assert engine_state(second.base_url)["restored"] is True
        assert second.prefix_hits() == [saved["tokens"]]  # the whole prefix, first request
        assert restored.text == cold.text  # greedy: the same reply as the engine that read it
        runs.append(("restarted engine, 1st expert", said(second), restored))
    assert saved["source"] == "cache" and saved["saved"]["written"] is True
    assert restored.ttft_ms < cold.ttft_ms
Table(
    {"engine": name, "its log at start": line or "", "TTFT s": round(reply.ttft_ms / 1000, 2)}
    for name, line, reply in runs
)

# %% [markdown]
# The saved state holds only the KV cells of the shared prefix and its
# token ids (no logits): about 23 KB per token for SmolLM2. Its manifest:

# %% tags=["nbval-ignore-output"]
from agentstate.engine.state_files import saved_states

kept = {}
if engine_installed():
    (state,) = saved_states(folder)
    kept = {
        "files": sorted(p.name.split(".", 1)[1] for p in folder.iterdir()),
        "state file MB": round(state.size / 1e6, 1),
        "tokens": state.manifest["n_tokens"],
        "prefix sha256": state.manifest["prefix_sha256"][:12],
        **{k: v for k, v in state.manifest["valid_for"].items() if not k.startswith("lora")},
    }
    assert kept["files"] == ["json", "state"] and kept["prefix sha256"] == prefix1.sha256[:12]
kept

# %% [markdown]
# What the state is valid for is what shaped the KV cells: the model file
# (its sha256), the llama-cpp-python and llama.cpp builds, the KV types,
# flash attention, rope and LoRA settings; and a context large enough for
# its tokens. llama.cpp checks some of this itself and refuses the file.
# Not all: it loads a state made by another model file of the same shape
# without a word, and the replies change. Below, llama.cpp alone is asked to
# load the file into three contexts, then an engine is started on the same
# folder with each setting.

# %% tags=["nbval-ignore-output"]
import contextlib
import ctypes
import io

checked = []
if engine_installed():
    import llama_cpp

    from agentstate.engine import default_model
    from agentstate.engine.model import quiet_fd2
    from agentstate.engine.server import default_threads

    threads = default_threads()

    def context(model, **settings):
        with quiet_fd2(), contextlib.redirect_stderr(io.StringIO()):
            return llama_cpp.Llama(
                str(model), n_ctx=2048, n_threads=threads, verbose=False, **settings
            )

    def reply(llama):
        messages = [
            {"role": m.type.replace("human", "user"), "content": m.content}
            for m in build_messages(prefix1, "compliance_auditor", QUESTION)
        ]
        out = llama.create_chat_completion(messages, max_tokens=16, temperature=0.0)
        return out["choices"][0]["message"]["content"]

    def load_alone(llama):
        """llama.cpp's own verdict on the file: the bytes it read (0: refused)."""
        tokens = (llama_cpp.llama_token * 4096)()
        count = ctypes.c_size_t(0)
        read = llama_cpp.llama_state_seq_load_file(
            llama.ctx, str(state.state_path).encode(), 0, tokens, 4096, ctypes.byref(count)
        )
        llama.input_ids[: count.value] = list(tokens[: count.value])
        llama.n_tokens = count.value if read else 0
        return read

    cases = {
        "the same model and settings": (default_model(), {}, []),
        "KV cache in f32": (
            default_model(),
            {"type_k": 0, "type_v": 0},
            ["--type_k", "0", "--type_v", "0"],
        ),
        "the shipped Q4_1 model": (locate_model(), {}, []),
    }
    for name, (model, settings, flags) in cases.items():
        alone = context(model, **settings)
        read = load_alone(alone)
        answer = reply(alone) if read else ""
        fresh = context(model, **settings)
        own = reply(fresh)  # what this model and settings say, cold
        fresh.close()
        with EngineServer(state_dir=folder, model_path=model, extra_args=flags) as engine:
            verdict = said(engine)
        alone.close()
        checked.append(
            {
                "context": name,
                "llama.cpp alone loads it": bool(read),
                "then its reply is the model's own": answer == own if read else "",
                "the engine at start": "restored"
                if verdict.startswith("restored")
                else "cold: " + verdict.split(" was made with ")[-1].split(" (sha256")[0],
            }
        )
    verdicts = [c["the engine at start"] for c in checked]
    assert [c["llama.cpp alone loads it"] for c in checked] == [True, False, True]
    assert checked[0]["then its reply is the model's own"] is True
    assert checked[2]["then its reply is the model's own"] is False  # accepted, and wrong
    assert verdicts[0] == "restored" and verdicts[2] == "cold: another model file"
    assert verdicts[1] == "cold: other settings (type_k 1 != 0, type_v 1 != 0)"
Table(checked)

# %% [markdown]
# The engine also turns away a state whose context is too small (llama.cpp
# pads its cache to 256 cells and would load 300 tokens into `n_ctx` 200),
# a truncated or corrupt file (the manifest keeps its size and sha256), and
# a manifest whose prefix bytes are not the ones asked for; each falls back
# to a cold prefill: slower, never wrong (`tests/test_engine_state_cache.py`
# tries each). Two engines never write one state at once: the writer holds
# an `fcntl` lock, and a second writer skips. A disk budget
# (`AGENTSTATE_ENGINE_STATE_BUDGET_MB`, 1,024 MB) removes stale states
# first (their model file changed, another llama.cpp made them), then the
# least recently used. The operator's commands:
#
# ```bash
# agentstate engine start                 # restores the newest valid state (--restore none: cold)
# agentstate experts prime --sections 4   # prime the first 4 chapters and save their state
# agentstate engine status                # restored at start? which prefix is primed?
# agentstate engine states                # saved states: size, what each is valid for
# agentstate engine remove --stale        # or KEY..., or --all
# ```
#
# ## The recorded restart case
# `scripts/bench_experts.py` measures it at every size of the sweep, with
# fresh engines in each round: cold (first expert, nothing cached), warm
# (next experts, prefix in memory), restored (first expert of a new engine
# process that restored the saved state). The share of the warm saving kept
# is (cold - restored) / (cold - warm); the target is 90%. Recomputed from
# the raw rounds and checked against this repository's manual:

# %%
from agentstate.experts.restart_benchmark import load_restart_results, restart_checks, restart_rows

recorded = load_restart_results()
assert all(restart_checks(recorded).values())
target = recorded["restart"]["target_share"]
assert all(p["share_kept"] >= target for p in recorded["restart"]["points"])
Table(restart_rows(recorded))
