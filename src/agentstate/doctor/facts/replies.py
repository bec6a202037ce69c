"""Model nodes whose replies carry at most one tool call (notebooks 02 and 03).

Several tool calls of one reply run in one super-step: that is what makes two
``Command`` writes of a plain key collide (``unreduced-parallel-write``) and a
reader blind to its writers (``same-batch-read``). A model bound to make one
call per reply closes both: ``ChatOpenAI(..., model_kwargs={"parallel_tool_calls":
False})``, ``bind_tools(tools, parallel_tool_calls=False)`` (a ``RunnableBinding``'s
kwargs, or the node's own ``bind_tools`` call), Anthropic's ``tool_choice={...,
"disable_parallel_tool_use": True}``, a ``parallel_tool_calls=False`` field of the
model object, or a model node that asserts (or raises) when a reply has more than
one call, as LangGraph's quickstart chatbot does. :func:`one_call_setting` names
the setting, so a finding can say what it relies on.
"""

from __future__ import annotations

import ast
import types
from collections.abc import Iterable

from langchain_core.runnables import RunnableBinding, RunnableSequence

from agentstate.doctor.facts.code_source import function_ast, is_library
from agentstate.doctor.facts.locate import function_of
from agentstate.doctor.facts.react import LIBRARY_MODEL_NODES, is_model, reachable


def _false(value: object) -> bool:
    return value is False


def _tool_choice_one(choice: object) -> bool:
    return isinstance(choice, dict) and choice.get("disable_parallel_tool_use") is True


def _setting_of(model: object, depth: int = 0) -> str | None:
    """What makes ``model`` answer with one tool call at most (None: nothing known)."""
    if depth > 4:
        return None
    if isinstance(model, RunnableBinding):
        kwargs = model.kwargs or {}
        if _false(kwargs.get("parallel_tool_calls")):
            return "`parallel_tool_calls=False` bound to the model (`bind_tools`)"
        if _tool_choice_one(kwargs.get("tool_choice")):
            return "`disable_parallel_tool_use` in the model's bound `tool_choice`"
        return _setting_of(model.bound, depth + 1)
    if isinstance(model, RunnableSequence):
        settings = [_setting_of(step, depth + 1) for step in model.steps if is_model(step)]
        return settings[0] if settings and all(settings) else None
    if _false(getattr(model, "parallel_tool_calls", None)):
        return "`parallel_tool_calls=False` on the model"
    extra = getattr(model, "model_kwargs", None)
    if isinstance(extra, dict):
        if _false(extra.get("parallel_tool_calls")):
            return "`model_kwargs={'parallel_tool_calls': False}` on the model"
        if _tool_choice_one(extra.get("tool_choice")):
            return "`disable_parallel_tool_use` in the model's `model_kwargs`"
    return None


def _models(fn: object) -> list[object]:
    """The chat models a node function reaches (inside ``create_agent``'s model node too)."""
    if getattr(fn, "__qualname__", "") in LIBRARY_MODEL_NODES and isinstance(
        fn, types.FunctionType
    ):
        cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False))
        cell = cells.get("model")
        try:
            value = cell.cell_contents if cell is not None else None
        except ValueError:
            value = None
        return [value] if value is not None else []
    return [obj for obj in reachable(fn) if is_model(obj)]


def _innermost(models: list[object]) -> list[object]:
    """The models left once each binding's own model is dropped (a binding is what runs)."""
    inner = {id(m.bound) for m in models if isinstance(m, RunnableBinding)}
    return [m for m in models if id(m) not in inner]


def _len_of_tool_calls(node: ast.expr) -> bool:
    """``len(<x>.tool_calls)``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "len"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Attribute)
        and node.args[0].attr == "tool_calls"
    )


def _at_most_one(test: ast.expr) -> bool:
    """``len(x.tool_calls) <= 1`` / ``< 2`` (what an ``assert`` requires)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if not (_len_of_tool_calls(left) and isinstance(right, ast.Constant)):
        return False
    return (isinstance(op, ast.LtE) and right.value == 1) or (
        isinstance(op, ast.Lt) and right.value == 2
    )


def _more_than_one(test: ast.expr) -> bool:
    """``len(x.tool_calls) > 1`` / ``>= 2`` (what an ``if ...: raise`` refuses)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if not (_len_of_tool_calls(left) and isinstance(right, ast.Constant)):
        return False
    return (isinstance(op, ast.Gt) and right.value == 1) or (
        isinstance(op, ast.GtE) and right.value == 2
    )


def _guarded(body: Iterable[ast.stmt]) -> bool:
    """An ``assert`` or an ``if ...: raise`` on the reply's number of tool calls."""
    for node in body:
        for inner in ast.walk(node):
            if isinstance(inner, ast.Assert) and _at_most_one(inner.test):
                return True
            if (
                isinstance(inner, ast.If)
                and _more_than_one(inner.test)
                and any(isinstance(s, ast.Raise) for s in inner.body)
            ):
                return True
    return False


def _binds_one_call(tree: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Every ``bind_tools(...)`` call of the node passes ``parallel_tool_calls=False``."""
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "bind_tools"
    ]
    return bool(calls) and all(
        any(
            kw.arg == "parallel_tool_calls"
            and isinstance(kw.value, ast.Constant)
            and kw.value.value is False
            for kw in call.keywords
        )
        for call in calls
    )


def one_call_setting(runnable: object) -> str | None:
    """What makes a model node's replies carry one tool call at most, or None."""
    fn = getattr(runnable, "func", None) or getattr(runnable, "afunc", None)
    if fn is None:
        return None
    plain = function_of(fn)
    if plain is not None and not is_library(plain):
        tree = function_ast(plain)
        if tree is not None:
            if _guarded(tree.body):
                return (
                    f"node `{plain.__name__}` refuses a reply with more than one tool call "
                    "(`assert len(...tool_calls) <= 1`)"
                )
            if _binds_one_call(tree):
                return f"node `{plain.__name__}` binds its tools with `parallel_tool_calls=False`"
    models = _innermost(_models(fn))
    if not models:
        return None
    settings = [_setting_of(m) for m in models]
    if all(settings):
        return settings[0]
    return None
