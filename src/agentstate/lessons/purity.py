"""What a tool of the writers' own super-step sees under a reducer: notebook 02's purity cell.

LangGraph calls a key's reducer twice per write: once on a throwaway copy of
the channels while the step still runs (to choose the next node), and once
when the step's writes are applied. The copy shares the current value with
the live state, so a reducer that changes ``current`` in place shows the
step's writes to a tool of the same step, which should still see the state
from before the step. :func:`reader_saw` runs that case on ``create_agent``
(the agent notebook 02 builds): one reply with five ``store_requirement``
calls and one ``count_requirements`` call. The reader is held until the five
throwaway calls happened (:class:`~agentstate.lessons.fixtures.HoldReaderMiddleware`),
so its count does not depend on thread timing: 0 fields with a pure reducer,
5 with one that merges in place. :func:`reducer_calls` counts the two kinds of
call on the same agent without the reader, so the page prints the early calls
it explains. Going further 02 shows the same leak on the package's deep agent.
"""

from collections.abc import Callable, Mapping
from typing import Annotated, Any, NotRequired

from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.tools import tool

from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    HoldReaderMiddleware,
    ReducerProbe,
    one_batch_model,
    reader_batch_model,
    store_requirement,
    user_turn,
)
from agentstate.tracing import tool_replies

Reducer = Callable[[Any, Any], Any]
READER = "count_requirements"


@tool
def count_requirements(runtime: ToolRuntime) -> str:
    """Count the collected requirements."""
    return f"{len(runtime.state.get('requirements') or {})} fields"


def _probed(reducer: Reducer) -> ReducerProbe:
    if not callable(reducer):
        raise TypeError(f"reducer must be a function of (current, write), not {reducer!r}")
    return ReducerProbe(reducer)


def _probed_state(probe: ReducerProbe) -> type:
    class ProbedState(AgentState):
        requirements: Annotated[NotRequired[dict[str, Any]], probe]

    return ProbedState


def reader_agent(reducer: Reducer, fields: Mapping[str, Any] = POSTGRES_FIELDS) -> Any:
    """``create_agent`` with ``reducer`` on ``requirements``; one reply stores ``fields`` and
    counts them in the same super-step, the count held until every store's throwaway call."""
    probe = _probed(reducer)
    hold = HoldReaderMiddleware(probe, throwaway_calls=len(fields), reader=READER)
    return create_agent(
        reader_batch_model(fields, trials=1, reader=READER),
        tools=[store_requirement, count_requirements],
        state_schema=_probed_state(probe),
        middleware=[hold],
    )


def _turn() -> dict[str, Any]:
    # An empty dict to start from, so a reducer written for ``current: dict`` gets one.
    return {**user_turn(), "requirements": {}}


def _fields_counted(state: Mapping[str, Any]) -> int:
    (counted,) = tool_replies(state, READER)
    return int(counted.text.split()[0])


def reader_saw(reducer: Reducer, fields: Mapping[str, Any] = POSTGRES_FIELDS) -> int:
    """How many fields a reader in the writers' super-step saw with ``reducer`` (pure: 0)."""
    return _fields_counted(reader_agent(reducer, fields).invoke(_turn()))


async def areader_saw(reducer: Reducer, fields: Mapping[str, Any] = POSTGRES_FIELDS) -> int:
    """The async twin of :func:`reader_saw` (``ainvoke``)."""
    return _fields_counted(await reader_agent(reducer, fields).ainvoke(_turn()))


WHILE_THE_STEP_RUNS = "while the step runs (on a copy)"
WHEN_THE_STEP_ENDS = "when the step ends (the real state)"


def _calls_agent(reducer: Reducer, fields: Mapping[str, Any]) -> tuple[Any, ReducerProbe]:
    probe = _probed(reducer)
    agent = create_agent(
        one_batch_model(fields), tools=[store_requirement], state_schema=_probed_state(probe)
    )
    return agent, probe


def _calls(probe: ReducerProbe) -> dict[str, int]:
    sites = probe.sites()
    return {
        WHILE_THE_STEP_RUNS: sites.get(ReducerProbe.THROWAWAY, 0),
        WHEN_THE_STEP_ENDS: sites.get(ReducerProbe.APPLY, 0),
    }


def reducer_calls(reducer: Reducer, fields: Mapping[str, Any] = POSTGRES_FIELDS) -> dict[str, int]:
    """How often LangGraph called ``reducer`` while one reply's parallel stores of ``fields``
    ran (one call per finished write, on a throwaway copy) and when their step ended."""
    agent, probe = _calls_agent(reducer, fields)
    agent.invoke(user_turn())  # no value to start from: each call is one of the stores
    return _calls(probe)


async def areducer_calls(
    reducer: Reducer, fields: Mapping[str, Any] = POSTGRES_FIELDS
) -> dict[str, int]:
    """The async twin of :func:`reducer_calls` (``ainvoke``)."""
    agent, probe = _calls_agent(reducer, fields)
    await agent.ainvoke(user_turn())
    return _calls(probe)
