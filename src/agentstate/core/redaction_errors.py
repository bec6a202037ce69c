"""Errors are artefacts too: an exception, its chain and its attributes with secrets replaced.

An exception raised inside a model or tool call reaches the caller, and
LangGraph writes its ``repr`` into the checkpoint as the task's error. A
structured reply that fails its schema raises
``StructuredOutputValidationError``, which quotes pydantic's text of the
input (``input_value='sk-live-Q7x9...0KgAbCd'``, cut in the middle, so no
value pass can find what is left) and keeps the reply itself in
``ai_message``. :func:`redact_exception` rebuilds such an exception from its
parts: pydantic errors from their structured form (the whole input, cleaned,
so the cut is made from the reference, never from a secret), the chain
(``__cause__``, ``__context__``) first, then every argument and attribute,
each string with its chained exceptions' old text swapped for the new.
Control flow (``GraphBubbleUp``: interrupts, ``Command`` hops) is never
touched. Used by :class:`agentstate.core.SecretRedactionMiddleware`
(``core.redaction``); taught in notebook 02.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.errors import GraphBubbleUp
from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

Clean = Callable[[Any], Any]


class RedactedError(Exception):
    """Stands for an exception that could not be copied with its secrets replaced."""


def redact_exception(
    exc: BaseException, clean: Clean, message: Callable[[AIMessage], AIMessage]
) -> BaseException:
    """``exc`` with every value ``clean`` replaces replaced, or ``exc`` itself if none is.

    ``clean`` rewrites any value (a string, a dict, a number) with the plain
    values replaced by their references; ``message`` rewrites a reply the
    exception keeps (``ai_message``). The copy has the same type, so ``except``
    clauses still match.
    """
    return _Redactor(clean, message).exception(exc)


class _Redactor:
    def __init__(self, clean: Clean, message: Callable[[AIMessage], AIMessage]) -> None:
        self.clean = clean
        self.message = message
        self.done: dict[int, BaseException] = {}  # id -> its copy: chains can loop

    def exception(self, exc: BaseException) -> BaseException:
        if not isinstance(exc, Exception) or isinstance(exc, GraphBubbleUp):
            return exc
        if id(exc) in self.done:
            return self.done[id(exc)]
        self.done[id(exc)] = exc  # a loop back to exc while copying it keeps the original
        copy = self._copy(exc)
        self.done[id(exc)] = copy
        return copy

    def _copy(self, exc: Exception) -> BaseException:
        if isinstance(exc, ValidationError):
            return self.validation_error(exc)
        cause = self.optional(exc.__cause__)
        context = self.optional(exc.__context__)
        # The text of an exception often quotes another's (``f"... {source}"``): swap it first.
        inner = [exc.__cause__, exc.__context__, *vars(exc).values(), *exc.args]
        swaps = [
            (str(old), str(new))
            for old in inner
            if isinstance(old, BaseException) and (new := self.exception(old)) is not old
        ]
        swaps = [(old, new) for old, new in swaps if old]

        def value(item: Any) -> Any:
            if isinstance(item, str):
                for old, new in swaps:
                    item = item.replace(old, new)
                return self.clean(item)
            if isinstance(item, BaseException):
                return self.exception(item)
            if isinstance(item, AIMessage):
                return self.message(item)
            return self.clean(item)

        args = tuple(value(a) for a in exc.args)
        attrs = {k: value(v) for k, v in vars(exc).items()}
        if (
            cause is exc.__cause__
            and context is exc.__context__
            and _same(args, exc.args)
            and all(_same(attrs[k], v) for k, v in vars(exc).items())
        ):
            return exc
        try:
            copy = type(exc).__new__(type(exc), *args)
            copy.args = args
            copy.__dict__.update(attrs)
            str(copy)  # a type whose text needs what __init__ would have set fails here
        except Exception:  # noqa: BLE001 - any type that cannot be copied gets a stand-in
            copy = RedactedError(f"{type(exc).__name__}: {value(str(exc))}")
        copy.__cause__ = cause
        copy.__context__ = context
        copy.__suppress_context__ = exc.__suppress_context__
        return copy.with_traceback(exc.__traceback__)

    def optional(self, exc: BaseException | None) -> BaseException | None:
        return None if exc is None else self.exception(exc)

    def validation_error(self, exc: ValidationError) -> BaseException:
        """A pydantic error rebuilt from its parts, each input cleaned whole (never cut)."""
        details: list[InitErrorDetails] = []
        changed = False
        for error in exc.errors():
            ctx = error.get("ctx") or {}
            clean_input = self.clean(error["input"])
            clean_ctx = {
                k: (type(v)(self.clean(str(v))) if isinstance(v, Exception) else self.clean(v))
                for k, v in ctx.items()
            }
            changed = changed or not _same(clean_input, error["input"])
            changed = changed or any(str(clean_ctx[k]) != str(v) for k, v in ctx.items())
            detail: InitErrorDetails = {
                "type": error["type"],
                "loc": error["loc"],
                "input": clean_input,
            }
            if clean_ctx:
                detail["ctx"] = clean_ctx
            details.append(detail)
        if not changed:
            return exc
        try:
            return ValidationError.from_exception_data(exc.title, details)
        except (KeyError, TypeError, ValueError):  # a custom error type: its message, cleaned
            custom: list[InitErrorDetails] = []
            for detail, error in zip(details, exc.errors(), strict=True):
                text = str(self.clean(error["msg"])).replace("{", "(").replace("}", ")")
                custom.append({**detail, "type": PydanticCustomError(error["type"], text)})
                custom[-1].pop("ctx", None)
            return ValidationError.from_exception_data(exc.title, custom)


def _same(new: Any, old: Any) -> bool:
    """Nothing replaced: the same object, or an equal value of the same type."""
    if new is old:
        return True
    try:
        return type(new) is type(old) and bool(new == old)
    except Exception:  # noqa: BLE001 - a value whose == fails counts as changed
        return False
