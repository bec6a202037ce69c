# %% [markdown]
# # 05 · The invariant prefix: exercise solutions
#
# Each exercise of notebook 05, answered with code that runs offline and
# asserts its answer. `expert_prompt` is the lesson's teaching version.

# %%
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from agentstate.display import Table
from agentstate.experts import EXPERTS, load_manual, load_results
from agentstate.experts.prompts import GLOBAL_INSTRUCTIONS, MANUAL_END
from agentstate.fixtures import prompt_text, shared_by_all

manual = load_manual()
QUESTION = "The overnight batch outage: what must we report to the regulator?"


def expert_prompt(manual_text: str, persona: str, question: str, history=()) -> list:
    return [
        SystemMessage(GLOBAL_INSTRUCTIONS + manual_text + MANUAL_END),
        SystemMessage(persona),
        *history,
        HumanMessage(question),
    ]


len(EXPERTS)

# %% [markdown]
# ## Exercise 1
# With the persona first, the three prompts part ways inside the persona's
# first line ("You are the ..."): they share fewer than 100 bytes, and the
# manual behind it is never reused. Every call is as cold as with a clock
# line first.

# %%
swapped = []
for expert in EXPERTS:
    system1, system2, *rest = expert_prompt(manual.text, EXPERTS[expert].system_text(), QUESTION)
    swapped.append(prompt_text([system2, system1, *rest]))
persona_first = shared_by_all(swapped)
assert persona_first < 100 < manual.size
{"persona first: bytes shared": persona_first, "manual bytes": manual.size}

# %% [markdown]
# ## Exercise 2
# History goes after the persona, so system message 1 does not change; two
# turns of one expert share the manual and the persona, and part ways where
# the history begins.

# %%
persona = EXPERTS["compliance_auditor"].system_text()
turn1 = expert_prompt(manual.text, persona, QUESTION)
answer = AIMessage("Report it under chapter 7 within 4 hours.")
turn2 = expert_prompt(manual.text, persona, "And to whom?", [HumanMessage(QUESTION), answer])
common = shared_by_all([prompt_text(turn1), prompt_text(turn2)])
unchanged = turn1[0].content == turn2[0].content
assert unchanged and common > manual.size + len(persona)
{"system message 1 unchanged": unchanged, "bytes shared by the two turns": common}

# %% [markdown]
# ## Exercise 3
# With a clock line first all three experts pay the cold time to first
# token; with the invariant prefix the first pays cold and the other two
# warm. The saving is therefore twice (cold - warm), at each recorded
# prefix size of the chart.

# %%
from agentstate.experts import ttft_points

saving = Table(
    {
        "prefix tokens": p["prefix tokens"],
        "clock first, s": round(3 * p["cold s"], 2),
        "invariant, s": round(p["cold s"] + 2 * p["warm s"], 2),
        "saved, s": round(2 * (p["cold s"] - p["warm s"]), 2),
    }
    for p in ttft_points(load_results())
)
assert saving.column("saved, s") == sorted(saving.column("saved, s"))  # grows with the prefix
saving
