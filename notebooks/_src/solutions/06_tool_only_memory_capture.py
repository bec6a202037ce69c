# %% [markdown]
# # 06 · Tool-only memory capture: exercise solutions
#
# Each exercise of notebook 06, answered with code that runs offline and
# asserts its answer. The teaching guard is written again here with two
# switches, so each exercise changes one thing. One memory server runs on a
# fresh SQLite file; `ServerProcess` stops it when the kernel exits.

# %%
import operator
import tempfile
from pathlib import Path
from typing import Annotated, TypedDict

from langchain_core.messages import BaseMessage, ChatMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from agentstate.lessons.display import Table
from agentstate.memory import (
    MemoryClient,
    RandomProposals,
    ServerProcess,
    expected_entries,
    observe,
    random_events,
    system_prompt,
)
from agentstate.models import PolicyChatModel

server = ServerProcess(
    Path(tempfile.mkdtemp(prefix="stage06-solutions-")) / "memory.sqlite"
).start()
client = MemoryClient(server.url)
tools = await client.tools()
len(tools)


# %%
class GuardState(TypedDict, total=False):
    turn: BaseMessage
    plan: list[dict]
    stored: Annotated[list[int], operator.add]


def build_guard(model, tools, trust_text=False, check_stored=True, bootstrap=False):
    """The lesson's guard; trust_text: take the model's raw_entry; bootstrap: exercise 3."""
    model, by_name = model.bind_tools(tools), {t.name: t for t in tools}

    async def decide(state: GuardState, config) -> dict:
        turn, ids = state["turn"], config["configurable"]
        rules = system_prompt(ids["vault_id"], ids["memory_id"])
        reply = await model.ainvoke([SystemMessage(rules), turn])
        where = {"vault_id": ids["vault_id"], "memory_id": ids["memory_id"]}
        if bootstrap and isinstance(turn, SystemMessage) and turn.content == "SESSION_START":
            return {"plan": [("get_context", where), ("list_entries", {**where, "limit": 10})]}
        if not (isinstance(turn, ChatMessage) and turn.role in ("user", "assistant")):
            return {"plan": []}
        idx = turn.additional_kwargs["msg_idx"]
        if check_stored and idx in state.get("stored", []):
            return {"plan": []}
        offered = [c["args"] for c in reply.tool_calls if c["name"] == "add_entry"]
        usable = [a.get("summary") for a in offered if isinstance(a.get("summary"), str)]
        usable = [s for s in usable if s.strip() and s.isprintable() and len(s) <= 200]
        summary = next(iter(usable), f"{turn.role} #{idx}")
        text = turn.content
        if trust_text:
            text = next(
                (a["raw_entry"] for a in offered if isinstance(a.get("raw_entry"), str)), text
            )
        args = {
            **where,
            "raw_entry": text,
            "summary": summary,
            "tags": {"role": turn.role, "msg_idx": idx},
        }
        return {"plan": [("add_entry", args)]}

    async def write(state: GuardState) -> dict:
        for name, args in state["plan"]:
            reply = await by_name[name].ainvoke(
                {"name": name, "args": args, "id": "w", "type": "tool_call"}
            )
            if reply.status == "error":
                raise ValueError(f"{name} refused: {reply.text}")
        return {"stored": [a["tags"]["msg_idx"] for n, a in state["plan"] if n == "add_entry"]}

    builder = StateGraph(GuardState)
    builder.add_node("decide", decide)
    builder.add_node("write", write)
    builder.add_edge(START, "decide")
    builder.add_edge("decide", "write")
    builder.add_edge("write", END)
    return builder.compile(checkpointer=InMemorySaver())


async def random_runs(label, seeds=range(12), **switches):
    proposer, rows = RandomProposals(seed=6), []
    for seed in seeds:
        chat, sent = random_events(seed, n_messages=8)
        got = await observe(
            build_guard(PolicyChatModel(policy=proposer), tools, **switches),
            client,
            server.db,
            sent,
            f"{label}.{seed}",
        )
        rows.append(
            {
                "seed": seed,
                "resends": len(sent) - len(chat.events),
                "exact": got == expected_entries(chat, "chat"),
            }
        )
    return rows


# %% [markdown]
# ## Exercise 1
# Taking the model's `raw_entry` breaks the store as soon as a reply holds an
# `add_entry` whose text is not the message's: the "other text" proposal.
# ("wrong msg_idx" and "wrong role" carry the message's own text, and the
# guard still takes role and index from the message.) Some runs fail; the
# unchanged guard passes them all.

# %%
trusting = Table(await random_runs("trust", trust_text=True))
assert not all(trusting.column("exact")) and all(Table(await random_runs("check")).column("exact"))
trusting

# %% [markdown]
# ## Exercise 2
# Without the `stored` check, every run whose observer resent a message
# stores that message twice. The replayed report never resends a message, so
# it passes either way: only the random run with resends shows the check is
# needed.

# %%
from agentstate.memory import load, replay_model

unchecked = Table(await random_runs("unchecked", check_stored=False))
assert [r["exact"] for r in unchecked.rows] == [r["resends"] == 0 for r in unchecked.rows]
travel = load("solo_travel")
report = await observe(
    build_guard(replay_model(), tools, check_stored=False),
    client,
    server.db,
    travel.events,
    "unchecked.trip",
)
assert report == expected_entries(travel, "trip")
unchecked

# %% [markdown]
# ## Exercise 3
# With the bootstrap added, the auditor finds no bootstrap violation (it
# still reports the flushes, which the teaching guard leaves out).

# %%
from agentstate.memory import audit, counts

await observe(
    build_guard(replay_model(), tools, bootstrap=True),
    client,
    server.db,
    travel.events,
    "boot.trip",
)
found = counts(audit(server.db, travel, {"trip": "boot.trip"}))
assert not {"missing_bootstrap", "repeated_bootstrap", "bootstrap_incomplete"} & set(found)
assert set(found) == {"missing_flush"}
found
