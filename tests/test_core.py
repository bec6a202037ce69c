"""The generic core in a non-RDS agent, and every middleware of the package sync and async."""

import asyncio
import inspect
import json
import pkgutil
import re
from pathlib import Path
from typing import Annotated, NotRequired

import pytest
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

import agentstate
from agentstate.core import (
    SecretRedactionMiddleware,
    SecretStore,
    TurnCacheBase,
    TurnCacheMiddleware,
    append_unique,
    merge_fields,
    merge_or_reset,
)
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.tracing import tool_replies

ROOT = Path(__file__).resolve().parents[1]


class NotesState(AgentState):
    notes: Annotated[NotRequired[dict[str, str]], merge_fields]


@tool
def save_note(title: str, text: str, runtime: ToolRuntime) -> Command:
    """Save one note."""
    return Command(
        update={
            "notes": {title: text},
            "messages": [ToolMessage("saved", tool_call_id=runtime.tool_call_id)],
        }
    )


@tool
async def read_notes(runtime: ToolRuntime) -> str:
    """List the note titles (an async tool: readers may be coroutines)."""
    return json.dumps(sorted(runtime.state.get("notes", {})))


def notes_agent(cache: bool = True):
    model = ScriptedChatModel(
        script=[
            reply(
                tool_call("read_notes"),
                *(tool_call("save_note", title=f"t{i}", text="x") for i in range(4)),
            ),
            reply(text="done"),
        ]
    )
    middleware = [TurnCacheMiddleware(writers=["save_note"], readers=["read_notes"], key="notes")]
    return create_agent(
        model,
        tools=[save_note, read_notes],
        state_schema=NotesState,
        middleware=middleware if cache else [],
    )


def test_the_turn_cache_is_generic_a_notes_agent_reader_placed_first_sees_every_note():
    state = asyncio.run(notes_agent().ainvoke({"messages": [("user", "notes")]}))
    assert json.loads(tool_replies(state, "read_notes")[0].content) == ["t0", "t1", "t2", "t3"]
    without = asyncio.run(notes_agent(cache=False).ainvoke({"messages": [("user", "notes")]}))
    assert json.loads(tool_replies(without, "read_notes")[0].content) == []


def test_bad_turn_cache_configuration_is_refused():
    with pytest.raises(ValueError, match="both writer and reader: x"):
        TurnCacheMiddleware(writers=["x"], readers=["x"], key="k")
    with pytest.raises(ValueError, match="writers must name at least one tool"):
        TurnCacheMiddleware(writers=[], readers=["r"], key="k")


@pytest.mark.parametrize(
    ("settings", "error", "says"),
    [
        # a string would become its letters: the cache would never meet its writer
        ({"writers": "save_note"}, TypeError, "writers must be tool names, not the string"),
        ({"readers": "read_notes"}, TypeError, "readers must be tool names, not the string"),
        ({"key": ""}, TypeError, "key must be a state key's name"),
        ({"reducer": "merge"}, TypeError, "reducer must be a function"),
        ({"timeout": "10"}, ValueError, "timeout must be positive seconds, got '10'"),
    ],
)
def test_the_package_cache_refuses_what_the_teaching_cache_refuses(settings, error, says):
    """TurnCacheMiddleware and notebook 03's TurnCacheBase share one check of their settings."""
    given = {"writers": ["save_note"], "readers": ["read_notes"], "key": "notes", **settings}
    for cache in (TurnCacheMiddleware, TurnCacheBase):
        with pytest.raises(error, match=f"^{cache.__name__}: {says}"):
            cache(**given)


def test_a_non_dict_write_to_a_merging_reducer_names_its_type():
    for reducer in (merge_fields, merge_or_reset):
        with pytest.raises(TypeError, match=r"must be a dict of fields, got a str \('x'\)"):
            reducer({"a": 1}, "x")
        with pytest.raises(TypeError, match=r"got a list"):
            reducer(["bad"], {"b": 2})


def test_reducers_are_pure():
    left, right = {"a": 1}, {"b": 2}
    assert merge_fields(left, right) == {"a": 1, "b": 2} and left == {"a": 1}
    assert merge_fields(None, None) == {}
    items = ["pre"]
    assert append_unique(items, ["pre", "new"]) == ["pre", "new"] and items == ["pre"]
    assert merge_or_reset({"a": 1}, {"b": 2}) == {"a": 1, "b": 2}
    assert merge_or_reset({"a": 1}, None) == {}


def test_secret_args_of_any_tool_are_redacted_sync_and_async():
    @tool
    def connect(host: str, password: str) -> str:
        """Connect to a database."""
        return f"connected to {host} with {password}"

    def agent(store):
        model = ScriptedChatModel(
            script=[reply(tool_call("connect", host="db", password="hunter2")), reply(text="ok")]
        )
        redaction = SecretRedactionMiddleware(store, secret_args={"connect": ["password"]})
        return create_agent(model, tools=[connect], middleware=[redaction])

    for run in ("invoke", "ainvoke"):
        store = SecretStore()
        inp = {"messages": [("user", "connect")]}
        graph = agent(store)
        state = graph.invoke(inp) if run == "invoke" else asyncio.run(graph.ainvoke(inp))
        assert "hunter2" not in repr(state["messages"]), run
        (ref,) = [
            c["args"]["password"] for m in state["messages"] for c in getattr(m, "tool_calls", [])
        ]
        assert ref.startswith("$secret:password-") and store.resolve(ref) == "hunter2"


def package_middleware() -> list[type]:
    for info in pkgutil.walk_packages(agentstate.__path__, "agentstate."):
        __import__(info.name)
    seen, stack = set(), [AgentMiddleware]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if sub.__module__.startswith("agentstate.") and "test" not in sub.__module__:
                seen.add(sub)
    return sorted(seen, key=lambda c: c.__qualname__)


PAIRS = [
    ("wrap_tool_call", "awrap_tool_call"),
    ("wrap_model_call", "awrap_model_call"),
    ("before_agent", "abefore_agent"),
    ("after_agent", "aafter_agent"),
    ("before_model", "abefore_model"),
    ("after_model", "aafter_model"),
]


@pytest.mark.extras("lessons")  # imports every module of the package
def test_every_middleware_of_the_package_implements_both_hooks():
    classes = package_middleware()
    assert len(classes) >= 8, [c.__name__ for c in classes]
    missing = [
        f"{cls.__module__}.{cls.__name__}.{pair}"
        for cls in classes
        for hook, ahook in PAIRS
        for pair, has in ((ahook, hook), (hook, ahook))
        if getattr(cls, has) is not getattr(AgentMiddleware, has)
        and getattr(cls, pair) is getattr(AgentMiddleware, pair)
    ]
    assert missing == []
    for cls in classes:
        for _, ahook in PAIRS:
            if getattr(cls, ahook) is not getattr(AgentMiddleware, ahook):
                assert inspect.iscoroutinefunction(getattr(cls, ahook)), (cls, ahook)


def test_the_core_does_not_import_the_rds_domain():
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "src/agentstate/core").glob("*.py")
        if re.search(r"agentstate\.(rds|fixtures)", p.read_text())
    ]
    assert offenders == []


def test_the_readme_example_runs():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Use it in your own agent", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["state"]["notes"] == {"milk": "...", "eggs": "...", "tea": "..."}
