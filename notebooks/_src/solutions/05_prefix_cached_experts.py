# %% [markdown]
# # 05 · Prefix-cached experts: exercise solutions
#
# Each exercise of notebook 05, answered with code that runs offline (stub
# mode, scripted models and the recorded benchmark figures) and asserts its
# answer.

# %%
from langchain_core.messages import AIMessage

from agentstate.display import Table
from agentstate.experts import (
    EXPERTS,
    ExpertsConfig,
    build_experts_graph,
    build_messages,
    load_manual,
    load_results,
    memory_checkpointer,
    route_by_llm,
    system_prefix,
    user_turn,
)
from agentstate.fixtures import prompt_text, shared_by_all
from agentstate.models import ScriptedChatModel

manual = load_manual()
QUERY = "The overnight batch outage: what must we report to the regulator?"

# %% [markdown]
# ## Exercise 1
# Put the persona before the manual. How many bytes do the three experts'
# prompts share, and which recorded case would such a system behave like?

# %%
def persona_first(expert):
    system1, system2, *rest = build_messages(system_prefix(manual), expert, QUERY)
    return prompt_text([system2, system1, *rest])


swapped = shared_by_all([persona_first(e) for e in EXPERTS])
invariant = [build_messages(system_prefix(manual), e, QUERY) for e in EXPERTS]
fixed = shared_by_all([prompt_text(m) for m in invariant])
assert swapped < 100 < manual.size < fixed
{"persona first: bytes shared": swapped, "persona second: bytes shared": fixed,
 "behaves like": "cache_busted: every expert call prefills the manual"}  # fmt: skip

# %% [markdown]
# The shared run ends inside the personas' first line, long before the
# manual, so each expert call is cold: the `cache_busted` case of the
# benchmark, where every TTFT is the cold one.
#
# ## Exercise 2
# A router model that names four experts, an empty list, or fails to reply.

# %%
THREE = '"technical", "compliance", "support"'
replies = {"four names, one an alias": f'{{"experts": [{THREE}, "tech"]}}',
           "four names, one unknown": f'{{"experts": [{THREE}, "lawyer"]}}',
           "empty list": '{"experts": []}'}  # fmt: skip
rows = [{"reply": k, **{f: route_by_llm(QUERY, ScriptedChatModel(script=[AIMessage(r)]))[f]
         for f in ("mode", "experts", "reason")}} for k, r in replies.items()]  # fmt: skip
failed = route_by_llm(QUERY, ScriptedChatModel(script=[]))
rows.append({"reply": "no reply (call fails)", "mode": failed["mode"],
             "experts": failed["experts"], "reason": failed["reason"][:60]})  # fmt: skip
table = Table(rows)
assert table.column("mode") == ["llm", "llm->rules", "llm->rules", "llm->rules"]
assert table.column("experts")[0] == ["technical_specialist", "compliance_auditor",
                                      "support_concierge"]  # fmt: skip
assert table.column("reason")[1:3] == ["unknown expert 'lawyer'", "the reply names no expert"]
assert failed["reason"].startswith("router call failed")
table

# %% [markdown]
# "tech" is an alias of `technical_specialist`, so the first reply names
# three distinct experts and is used: with three experts, a fourth name is
# either a repeat or unknown. An unknown name, an empty list and a failed
# call all fall back to the rules (here: the technical specialist and the
# compliance auditor), each with its reason.
#
# ## Exercise 3
# Cold and warm milliseconds per extra prefix token, between the smallest and
# the largest recorded prefix.

# %%
sizes = load_results()["sizes"]
small, large = sizes[0], sizes[-1]
extra = large["prefix_tokens"] - small["prefix_tokens"]
per_token = {k: round((large[f"{k}_ms"] - small[f"{k}_ms"]) / extra, 2) for k in ("cold", "warm")}
steeper = round(per_token["cold"] / per_token["warm"])
assert extra == 2152 - 609 and per_token["cold"] > 10 * per_token["warm"] > 0
{**{f"{k} ms per token": v for k, v in per_token.items()}, "cold is steeper by": f"{steeper}x"}

# %% [markdown]
# Cold pays for every prefix token again; warm pays only for the persona and
# the query (and a little for attending over a longer cached prefix), so its
# slope is a small fraction of cold's.
#
# ## Exercise 4
# Two turns of one thread in stub mode, with a checkpointer.

# %%
desk = build_experts_graph(ExpertsConfig(manual=manual), checkpointer=memory_checkpointer())
thread = {"configurable": {"thread_id": "desk-7"}}
first = desk.invoke(user_turn(QUERY), thread)
second = desk.invoke(user_turn("Which sanctions lists do we screen?"), thread)
history = second["messages"][:-2]
turn1 = build_messages(system_prefix(manual), "compliance_auditor", QUERY)
turn2 = build_messages(system_prefix(manual), "compliance_auditor",
                       second["messages"][-2].content, history)  # fmt: skip
shared = shared_by_all([prompt_text(turn1), prompt_text(turn2)])
assert first["prefix_sha256"] == second["prefix_sha256"] == system_prefix(manual).sha256
assert [m.type for m in turn2[2:]] == ["human", "ai", "human"]
assert shared > system_prefix(manual).size
{"same prefix hash": True, "messages after the persona": [m.type for m in turn2[2:]],
 "bytes shared by the two turns": shared}  # fmt: skip

# %% [markdown]
# The history changes nothing before it: system message 1 has the same hash
# on both turns, and the history goes after the persona, so the second turn
# still reuses the manual and the persona from the cache.
