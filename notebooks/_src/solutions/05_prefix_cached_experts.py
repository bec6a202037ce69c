# %% [markdown]
# # 05 · The invariant prefix: exercise solutions
#
# Each exercise of notebook 05, answered with code that runs offline and
# asserts its answer. `expert_prompt` is the lesson's teaching version.

# %%
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from agentstate.experts import EXPERTS, load_manual, load_results, system_prefix
from agentstate.lessons.display import Table
from agentstate.lessons.fixtures import prompt_text, shared_by_all

manual = load_manual()
QUESTION = "The overnight batch outage: what must we report to the regulator?"


def expert_prompt(manual, persona, question, history=()):
    first = SystemMessage(system_prefix(manual).text)  # the same for every call: no clock
    return [first, SystemMessage(persona), *history, HumanMessage(question)]


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
    system1, system2, *rest = expert_prompt(manual, EXPERTS[expert].system_text(), QUESTION)
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
turn1 = expert_prompt(manual, persona, QUESTION)
answer = AIMessage("Report it under chapter 7 within 4 hours.")
turn2 = expert_prompt(manual, persona, "And to whom?", [HumanMessage(QUESTION), answer])
common = shared_by_all([prompt_text(turn1), prompt_text(turn2)])
unchanged = turn1[0].content == turn2[0].content
assert unchanged and common > manual.size + len(persona)
{"system message 1 unchanged": unchanged, "bytes shared by the two turns": common}

# %% [markdown]
# ## Exercise 3
# Within one question, the invariant prefix turns every expert call after
# the first from cold into warm. So a question of `k` experts saves
# `(k - 1) * (cold - warm)`. With one expert there is no second call to
# reuse the manual: it saves nothing within the question (the thread's next
# question, which reads the same manual first, is where it pays).

# %%
from agentstate.experts import question_seconds, ttft_points

results = load_results()
largest = ttft_points(results)[-1]
cold, warm = largest["cold s"], largest["warm s"]
saving = Table(
    {
        "prefix tokens": largest["prefix tokens"],
        "experts": k,
        "clock first, s": round(k * cold, 2),
        "invariant, s": round(cold + (k - 1) * warm, 2),
        "saved, s": round((k - 1) * (cold - warm), 2),
    }
    for k in (1, 2, 3)
)
three = question_seconds(results)[-1]
assert saving.column("saved, s")[0] == 0
assert saving.rows[2]["invariant, s"] == three["invariant, s"]  # the lesson's table agrees
saving
