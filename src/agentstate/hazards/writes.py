"""Hazards of writes inside one super-step (notebooks 02 and 03), with ``create_agent`` only.

Five calls of one reply run as five tasks of one super-step; their writes are
applied together when the step ends. What a key keeps depends on its reducer,
and a reader of the same step sees the state from before the step.
"""

from __future__ import annotations

import threading
from typing import Annotated, Any, NotRequired, cast

from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.errors import InvalidUpdateError
from langgraph.types import Command

from agentstate.hazards.registry import Result, reproduced_unless
from agentstate.models.scripted import ScriptedChatModel, reply, tool_call

FIELDS = {"engine": "postgres", "username": "dbadmin", "port": "5432", "size": "20", "az": "a"}
"""The five fields of one reply (the RDS requirements of notebooks 01-04)."""
USER: Any = {"messages": [{"role": "user", "content": "five fields"}]}


def one_reply(*calls: dict[str, Any]) -> ScriptedChatModel:
    """A model whose first reply makes ``calls`` in parallel, then says it is done."""
    return ScriptedChatModel(script=[reply(*calls), reply(text="done")])


def field_writer(key: str) -> Any:
    """A tool that writes one field into ``key`` with a Command (as notebook 02's does)."""

    @tool
    def store_field(name: str, value: str, runtime: ToolRuntime) -> Command[Any]:
        """Store one field."""
        return Command(
            update={
                key: {name: value},
                "messages": [ToolMessage(f"stored {name}", tool_call_id=runtime.tool_call_id)],
            }
        )

    return store_field


def five_stores() -> list[dict[str, Any]]:
    """One ``store_field`` call per field of :data:`FIELDS`, in order."""
    return [tool_call("store_field", name=k, value=v) for k, v in FIELDS.items()]


class PlainState(AgentState):
    notes: NotRequired[dict[str, str]]


def plain_key_parallel_write() -> Result:
    """Five parallel writes to a key with no reducer: the whole run raises (notebook 02)."""
    agent = create_agent(
        one_reply(*five_stores()), [field_writer("notes")], state_schema=PlainState
    )
    try:
        state = agent.invoke(USER)
    except InvalidUpdateError as exc:
        return Result("plain-key-parallel-write", "reproduced", f"InvalidUpdateError: {_head(exc)}")
    kept = len(state.get("notes", {}))
    outcome = reproduced_unless(kept == len(FIELDS))
    return Result("plain-key-parallel-write", outcome, f"no error; kept {kept} of {len(FIELDS)}")


def _replace(old: dict[str, str] | None, new: dict[str, str]) -> dict[str, str]:
    return new


class ReplaceState(AgentState):
    notes: Annotated[NotRequired[dict[str, str]], _replace]


def replace_reducer_keeps_one() -> Result:
    """A reducer that returns the new value: the last call of the reply wins (notebook 02)."""
    agent = create_agent(
        one_reply(*five_stores()), [field_writer("notes")], state_schema=ReplaceState
    )
    kept = agent.invoke(USER).get("notes", {})
    last = list(FIELDS)[-1]
    outcome = reproduced_unless(len(kept) == len(FIELDS))
    survivor = ", ".join(kept) or "none"
    return Result(
        "replace-reducer",
        outcome,
        f"kept {len(kept)} of {len(FIELDS)} ({survivor}; the reply's last call: {last})",
    )


def undeclared_key_dropped() -> Result:
    """A Command to a key the state does not declare: dropped, no error (notebook 02)."""
    agent = create_agent(
        one_reply(tool_call("store_field", name="engine", value="postgres")),
        [field_writer("notes")],
    )
    try:
        state = agent.invoke(USER)
    except Exception as exc:  # a library that refuses the write
        return Result("undeclared-key", "refused", f"{type(exc).__name__}: {_head(exc)}")
    if "notes" in state:
        return Result("undeclared-key", "fixed", f"the write arrived: {state['notes']}")
    keys = ", ".join(sorted(state))
    return Result("undeclared-key", "reproduced", f"no error; state keys: {keys}")


class MergeState(AgentState):
    notes: Annotated[NotRequired[dict[str, str]], lambda a, b: {**(a or {}), **b}]


def same_batch_reader_is_blind() -> Result:
    """A reader in the writers' reply waits for them to finish, then reads state (notebook 03)."""
    done = threading.Semaphore(0)
    writer = field_writer("notes")

    @tool
    def store_field(name: str, value: str, runtime: ToolRuntime) -> Command[Any]:
        """Store one field."""
        try:
            return cast(Command[Any], writer.func(name, value, runtime))
        finally:
            done.release()

    @tool
    def read_notes(runtime: ToolRuntime) -> str:
        """Read every stored field, after the writers of this reply have returned."""
        finished = sum(done.acquire(timeout=5) for _ in FIELDS)
        seen = runtime.state.get("notes", {})
        return f"{finished} writers finished; saw {len(seen)}"

    calls = [*five_stores(), tool_call("read_notes")]
    agent = create_agent(one_reply(*calls), [store_field, read_notes], state_schema=MergeState)
    state = agent.invoke(USER)
    said = [m.content for m in state["messages"] if m.type == "tool" and m.name == "read_notes"]
    saw = int(str(said[0]).rsplit("saw ", 1)[1])
    outcome = reproduced_unless(saw == len(FIELDS))
    return Result(
        "same-batch-read",
        outcome,
        f"reader: {said[0]} of {len(FIELDS)}; state after: {len(state.get('notes', {}))}",
    )


def _head(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:120]
