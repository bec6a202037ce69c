"""agentstate.lessons.reducer_knob: notebook 02's knob, what one reply leaves under a state class.

``tests/test_lesson_02.py`` checks it against the page's own agent and prints
the page's table; here its inputs: a key with no reducer at one call, the
default ``AgentState`` (no ``requirements`` key), and values it refuses before
anything runs, through ``invoke`` and ``ainvoke``.
"""

import asyncio

import pytest
from langchain.agents import AgentState

from agentstate.lessons.fixtures import RequirementsState
from agentstate.lessons.reducer_knob import arequirements_kept, requirements_kept


def kept(mode: str, *args):
    if mode == "sync":
        return requirements_kept(*args)
    return asyncio.run(arequirements_kept(*args))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_merging_key_keeps_every_call_and_an_undeclared_key_none(mode):
    assert kept(mode, RequirementsState) == 5
    assert kept(mode, RequirementsState, 30) == 30
    assert kept(mode, AgentState, 3) == 0  # the writes dropped, no error


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((RequirementsState, 0), ValueError, r"^parallel_calls must be at least 1, not 0$"),
        ((RequirementsState, "5"), TypeError, r"^parallel_calls must be a whole number, not '5'$"),
        ((RequirementsState, True), TypeError, r"^parallel_calls must be a whole number"),
        ((RequirementsState(),), TypeError, r"^state_class must be a state class"),
    ],
    ids=["zero", "text", "bool", "instance"],
)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_bad_input_is_refused_with_one_line(mode, args, error, message):
    with pytest.raises(error, match=message):
        kept(mode, *args)
