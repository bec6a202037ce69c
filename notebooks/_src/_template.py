# %% [markdown]
# # NN · Title: the failure, and the fix that holds
#
# The story in one paragraph: who the agent is, what it does for a user, and
# the moment it goes wrong (a lost write, a stale read, a cold cache). Say
# what this notebook does: reproduce the failure with the real libraries,
# show where it comes from, write the fix, and prove it.
#
# (Copy this file to `notebooks/_src/NN_snake_name.py`; the build script skips
# files that start with `_`. CONTRIBUTING.md has the whole checklist.)

# %% [markdown]
# ## Recap
# What the previous stage established, in two or three sentences, and the
# question it left open.
#
# ## Goals
# - Reproduce the failure: one sentence, with the number the reader will see.
# - Look inside: which state, thread or message shows the cause.
# - Write the fix whole, run it, then import the package's version and see both agree.
# - Turn a knob and see the claim hold for every setting.

# %% [markdown]
# ## Reproduce: the failure in one run
# One idea per cell: build the broken agent from the package, run it on the
# scripted model, end the cell on a domain value (a count, field names).

# %%
reproduced = {"expected": 5, "kept": 1}  # replace with a run of the broken builder
assert reproduced["kept"] < reproduced["expected"]
reproduced

# %% [markdown]
# ## Look inside: where it comes from
# The state after each super-step, the thread timeline, or the message that
# crossed a boundary, as a small table (`agentstate.lessons.display.Table`).

# %%
from agentstate.lessons.display import Table

Table([{"step": 1, "what happened": "replace with the real trace"}])

# %% [markdown]
# ## The fix: one sentence that names the mechanism
# The fix WHOLE and editable: a plain `create_agent` agent, or a complete
# teaching version of the middleware (about 60 lines), written here in the
# reader's own terms, then run on the lesson's scenario.


# %%
def teaching_fix(parallel_calls: int) -> dict:
    return {"expected": parallel_calls, "kept": parallel_calls}  # replace with the real fix


teaching = teaching_fix(5)
teaching

# %% [markdown]
# The package's version (`agentstate.core`) adds what a lesson leaves out (async,
# timeouts, cleanup): one sentence, then a cell showing both agree.

# %%
package = {"expected": 5, "kept": 5}  # replace with a run of the package's fixed builder
assert package == teaching
package

# %% [markdown]
# ## Prove: the claim, asserted
# Every claim in the markdown is asserted by a cell; the output is the value
# the assertion checked.

# %%
fixed = {"expected": 5, "kept": 5}  # replace with a run of the fixed builder
assert fixed["kept"] == fixed["expected"]
fixed

# %% [markdown]
# ## A knob: one setting to turn
# Run the cells above first. Turn the number of parallel calls and watch how
# many fields are kept; the cell after the knob checks three settings.


# %%
def outcome(n_calls: int) -> dict:
    return {"parallel calls": n_calls, "kept": n_calls}  # replace with a real run


# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

knob_widget = widgets.interact(outcome, n_calls=widgets.IntSlider(value=5, min=1, max=20))

# %%
knob = Table(outcome(n) for n in (1, 5, 20))
assert knob.column("kept") == [1, 5, 20]
knob

# %% [markdown]
# ## Summary
# - The failure, with its number.
# - Its cause, in the terms the reader saw inside.
# - The fix, and what proved it.
#
# ## Exercises
# 1. A question the reader answers by changing one thing and re-running.
# 2. A question that transfers the fix to the reader's own agent.
