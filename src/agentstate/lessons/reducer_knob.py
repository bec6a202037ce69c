"""Notebook 02's knob: what one reply of parallel stores leaves under a state class.

The page defines three state classes (a plain ``requirements`` key, one whose
reducer replaces, one whose reducer merges) and turns a knob over them and the
number of parallel calls; :func:`requirements_kept` runs that agent (the
package's copy of the page's ``store_requirement`` under ``create_agent``)
and returns how many fields ``requirements`` holds, or the name of the error a
plain key raises. ``tests/test_lesson_02.py`` checks it keeps what the page's
own agent keeps.
"""

from typing import Any

from langchain.agents import create_agent
from langgraph.errors import InvalidUpdateError

from agentstate.lessons.fixtures import label_fields, one_batch_model, store_requirement, user_turn


def _agent(state_class: type, parallel_calls: int) -> Any:
    if not isinstance(state_class, type):
        raise TypeError(f"state_class must be a state class (a TypedDict), not {state_class!r}")
    if isinstance(parallel_calls, bool) or not isinstance(parallel_calls, int):
        raise TypeError(f"parallel_calls must be a whole number, not {parallel_calls!r}")
    if parallel_calls < 1:
        raise ValueError(f"parallel_calls must be at least 1, not {parallel_calls}")
    model = one_batch_model(label_fields(parallel_calls))
    return create_agent(model, tools=[store_requirement], state_schema=state_class)


def requirements_kept(state_class: type, parallel_calls: int = 5) -> int | str:
    """How many fields ``requirements`` holds after one reply of ``parallel_calls`` parallel
    stores under ``state_class``, or ``"InvalidUpdateError"`` when the step's writes fail."""
    agent = _agent(state_class, parallel_calls)
    try:
        return len(agent.invoke(user_turn()).get("requirements") or {})
    except InvalidUpdateError:
        return "InvalidUpdateError"


async def arequirements_kept(state_class: type, parallel_calls: int = 5) -> int | str:
    """The async twin of :func:`requirements_kept` (``ainvoke``)."""
    agent = _agent(state_class, parallel_calls)
    try:
        return len((await agent.ainvoke(user_turn())).get("requirements") or {})
    except InvalidUpdateError:
        return "InvalidUpdateError"
