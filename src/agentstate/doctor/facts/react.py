"""ReAct loops recognised by their shape, however the model is held (notebooks 02, 03 and 06).

A ReAct loop is a node that calls a chat model with tools and a node that runs
the tool calls of its reply, in a cycle. The model is found behind the node
function wherever a tutorial keeps it: a closure, a module global
(``llm_with_tools = model.bind_tools(tools)``), a bound method's object, a
``RunnableBinding``, ``init_chat_model``; or a node that binds tools itself
(a model built from the runtime context); or one whose outgoing edge is
``tools_condition`` or reads ``tool_calls``. The tool runner is a ``ToolNode``
or a node of the user's that reads the reply's ``tool_calls``. In such a loop
the model decides what runs: several tool calls of one reply share a step.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Iterator
from typing import Any

from langchain_core.language_models import BaseLanguageModel
from langchain_core.runnables import RunnableBinding, RunnableSequence
from langgraph.prebuilt import ToolNode

from agentstate.doctor.facts.code_source import closed_over, is_library
from agentstate.doctor.facts.locate import function_of
from agentstate.doctor.facts.names import code_names, code_strings

LIBRARY_MODEL_NODES = ("create_agent.<locals>.model_node", "create_react_agent.<locals>.call_model")
MODEL_CALLS = frozenset({"bind_tools", "init_chat_model", "load_chat_model"})
MAX_OBJECTS = 400


def is_model(obj: object) -> bool:
    """True for a chat model, one with bound tools, ``init_chat_model()``, ``prompt | model``."""
    if isinstance(obj, BaseLanguageModel):
        return True
    if isinstance(obj, RunnableBinding):
        return is_model(obj.bound)
    if isinstance(obj, RunnableSequence):
        return any(is_model(step) for step in obj.steps)
    return type(obj).__name__ == "_ConfigurableModel"


def reachable(root: object) -> Iterator[object]:
    """What a node function can reach: closures, the globals it names, bound objects' fields."""
    seen: set[int] = set()
    frontier: list[tuple[object, int]] = [(root, 0)]
    while frontier and len(seen) < MAX_OBJECTS:
        obj, depth = frontier.pop()
        if id(obj) in seen or depth > 3:
            continue
        seen.add(id(obj))
        yield obj
        for child in _children(obj):
            frontier.append((child, depth + 1))


def _children(obj: object) -> Iterator[object]:
    """What ``obj`` closes over, and for the reader's own code the globals a function names,
    a container's first items and an object's fields (a library's code is not followed)."""
    if isinstance(obj, types.FunctionType) and is_library(obj):
        return
    yield from closed_over(obj)
    if isinstance(obj, types.FunctionType):
        names = code_names(obj)
        for name in names & obj.__globals__.keys():
            value = obj.__globals__[name]
            if not isinstance(value, types.ModuleType | type):
                yield value
    elif isinstance(obj, list | tuple):
        yield from obj[:20]
    elif isinstance(obj, dict):
        yield from list(obj.values())[:20]
    elif (
        not isinstance(obj, type | types.MethodType | functools.partial)
        and not is_library(type(obj))
        and hasattr(obj, "__dict__")
    ):
        yield from list(vars(obj).values())[:20]


def _function(runnable: object) -> object:
    return getattr(runnable, "func", None) or getattr(runnable, "afunc", None)


def holds_model(runnable: object) -> bool:
    """True when a node's function reaches a chat model, or binds tools to one itself."""
    fn = _function(runnable)
    if fn is None:
        return False
    if getattr(fn, "__qualname__", "") in LIBRARY_MODEL_NODES:
        return True
    plain = function_of(fn)
    if plain is not None and not is_library(plain) and code_names(plain) & MODEL_CALLS:
        return True
    return any(is_model(obj) for obj in reachable(fn))


def reads_tool_calls(fn: object) -> bool:
    """True when a user function reads a reply's ``tool_calls``."""
    plain = function_of(fn)
    if plain is None or is_library(plain):
        return False
    return "tool_calls" in code_names(plain) or "tool_calls" in code_strings(plain)


def runs_tools(runnable: object) -> bool:
    """A ``ToolNode``, or a node of the user's that reads the model's ``tool_calls``."""
    if isinstance(runnable, ToolNode):
        return True
    fn = _function(runnable)
    return fn is not None and reads_tool_calls(fn) and not holds_model(runnable)


def routes_tool_calls(builder: Any, node: str) -> bool:
    """True when an edge out of ``node`` is ``tools_condition`` or reads ``tool_calls``."""
    for spec in builder.branches.get(node, {}).values():
        fn = function_of(spec.path)
        if fn is None:
            continue
        if fn.__name__ == "tools_condition" or reads_tool_calls(fn):
            return True
    return False


def loops(builder: Any, successors: dict[str, set[str]]) -> list[tuple[str, str]]:
    """``(model node, tool runner)`` pairs in a cycle: the runner follows the model and leads
    back to it (directly or through one node)."""
    runners = {n for n, spec in builder.nodes.items() if runs_tools(spec.runnable)}
    found: list[tuple[str, str]] = []
    for model, spec in builder.nodes.items():
        after = successors.get(model, set()) & runners
        if not after or model in runners:
            continue
        if not (holds_model(spec.runnable) or routes_tool_calls(builder, model)):
            continue
        for runner in sorted(after):
            back = successors.get(runner, set())
            if model in back or any(model in successors.get(m, set()) for m in back):
                found.append((model, runner))
    return found
