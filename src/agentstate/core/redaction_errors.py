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
The walk reaches every form an error takes (issue 40): exception groups
(nested), ``__notes__``, C-level fields (``OSError.filename``, ``__slots__``:
:func:`c_attributes`), ``bytes``, named tuples, and the attributes of objects
below an exception, cleaned on copies, at most :data:`MAX_DEPTH` levels and
:data:`MAX_NODES` values. :func:`backstop` then reads the result as a caller
would (:func:`printed`: the traceback text and every ``repr`` below it); a
value still there, in a shape nobody listed, gets the exception replaced by
a stand-in of the same type. Control flow (``GraphBubbleUp``: interrupts, ``Command`` hops) is never
touched. Used by :class:`agentstate.core.SecretRedactionMiddleware`
(``core.redaction``); taught in notebook 02.
"""

from __future__ import annotations

import copy as pycopy
import dataclasses
import traceback
from collections.abc import Callable
from types import (
    BuiltinFunctionType,
    CodeType,
    FrameType,
    FunctionType,
    GetSetDescriptorType,
    MemberDescriptorType,
    MethodType,
    ModuleType,
    TracebackType,
)
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.errors import GraphBubbleUp
from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

Clean = Callable[[Any], Any]


class RedactedError(Exception):
    """Stands for an exception that could not be copied with its secrets replaced."""


def redact_exception(
    exc: BaseException,
    clean: Clean,
    message: Callable[[AIMessage], AIMessage],
    text: Callable[[str], str] | None = None,
) -> BaseException:
    """``exc`` with every value ``clean`` replaces replaced, or ``exc`` itself if none is.

    ``clean`` rewrites any value (a string, a dict, a number) with the plain
    values replaced by their references; ``message`` rewrites a reply the
    exception keeps (``ai_message``). The copy has the same type, so ``except``
    clauses still match. ``text`` (the backstop): replaces known values in
    plain text; when the text a traceback would print of the copy still
    changes under it (a shape the walk does not know), a stand-in is returned
    (:func:`backstop`).
    """
    out = _Redactor(clean, message).exception(exc)
    return out if text is None else backstop(out, text)


def printed(exc: BaseException) -> str:
    """What a caller can read of ``exc``: its traceback text (with the chain) and the ``repr``
    of it and of every argument, attribute and C-level field of each exception in its chain
    and groups (at most :data:`MAX_NODES` exceptions)."""
    try:
        parts = ["".join(traceback.format_exception(exc))]
    except Exception:  # noqa: BLE001 - a type whose text fails: the reprs below are shown
        parts = []
    todo: list[BaseException] = [exc]
    seen: set[int] = set()
    while todo and len(seen) < MAX_NODES:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        fields = [*item.args, *vars(item).values(), *c_attributes(item).values()]
        for value in (item, *fields):
            try:
                parts.append(repr(value))
            except Exception:  # noqa: BLE001 - a value whose repr fails shows nothing
                continue
        inner = [item.__cause__, item.__context__, *getattr(item, "exceptions", ()), *fields]
        todo += _exceptions_in(inner)
    return "\n".join(parts)


def _exceptions_in(values: list[Any]) -> list[BaseException]:
    """The exceptions among ``values`` and inside their dicts, lists and tuples (bounded)."""
    found: list[BaseException] = []
    todo = [(v, 0) for v in values]
    while todo and len(todo) < MAX_NODES:
        value, depth = todo.pop()
        if isinstance(value, BaseException):
            found.append(value)
        elif depth < MAX_DEPTH and isinstance(value, dict):
            todo += [(v, depth + 1) for v in value.values()]
        elif depth < MAX_DEPTH and isinstance(value, list | tuple | set | frozenset):
            todo += [(v, depth + 1) for v in value]
    return found


def backstop(exc: BaseException, text: Callable[[str], str], depth: int = 0) -> BaseException:
    """``exc``, or a stand-in when its printed text still holds a value ``text`` replaces.

    The stand-in is a subclass of ``exc``'s type and of :class:`RedactedError`
    (so ``except OSError`` still matches) with the same name, whose message is
    ``str(exc)`` cleaned by ``text``; its chain is the chain's stand-ins. It keeps
    nothing else of ``exc``: the attributes that held the value are gone.
    """
    if isinstance(exc, GraphBubbleUp):
        return exc
    shown = printed(exc)
    if text(shown) == shown:
        return exc
    try:
        line = text(str(exc))
    except Exception:  # noqa: BLE001
        line = ""
    new = _stand_in(exc, line)
    if depth < MAX_DEPTH:
        if exc.__cause__ is not None:
            new.__cause__ = backstop(exc.__cause__, text, depth + 1)
        if exc.__context__ is not None and not exc.__suppress_context__:
            new.__context__ = backstop(exc.__context__, text, depth + 1)
    new.__suppress_context__ = exc.__suppress_context__
    new.add_note(f"(agentstate: a secret was replaced in this {type(exc).__name__})")
    return new.with_traceback(exc.__traceback__)


def _stand_in(exc: BaseException, line: str) -> BaseException:
    cls = type(exc)
    try:
        stand_in = type(
            cls.__name__,
            (RedactedError, cls),
            {
                "__module__": cls.__module__,
                "__qualname__": cls.__qualname__,
                "__init__": lambda self, *args, **kwargs: None,
                "__str__": lambda self: str(self.args[0]) if self.args else "",
                "__repr__": lambda self: f"{type(self).__name__}({str(self)!r})",
                "__reduce__": lambda self: (RedactedError, (str(self),)),
            },
        )
        new: object = cls.__new__(stand_in, line)
        if not isinstance(new, BaseException) or type(new) is not stand_in:
            raise TypeError(cls.__name__)
        new.args = (line,)
        return new
    except Exception:  # noqa: BLE001 - a type that cannot be subclassed or made with one argument
        return RedactedError(f"{cls.__name__}: {line}")


# Attributes every exception has, walked on their own (the chain) or never (the traceback).
_BASE_ATTRS = frozenset(
    {
        "args",
        "__traceback__",
        "__cause__",
        "__context__",
        "__suppress_context__",
        "__dict__",
        "__weakref__",
        "__notes__",
        "exceptions",
        "message",
    }
)
_SKIP = (
    type,
    ModuleType,
    FunctionType,
    MethodType,
    BuiltinFunctionType,
    FrameType,
    TracebackType,
    CodeType,
)
MAX_DEPTH = 8  # objects, containers and chained exceptions walked below an exception
MAX_NODES = 5_000  # values walked for one exception: a larger graph is left to the backstop


def c_attributes(exc: BaseException) -> dict[str, Any]:
    """An exception's attributes kept outside ``args`` and ``vars()``, readable ones only.

    ``OSError.filename``/``filename2``/``strerror``, ``SyntaxError.text``,
    ``UnicodeError.object``, ``StopIteration.value``, a class's ``__slots__``:
    C-level fields (getset and member descriptors) of every class but
    ``BaseException``, whose own fields are the chain and ``args``.
    """
    out: dict[str, Any] = {}
    for cls in type(exc).__mro__:
        if cls in (BaseException, object):
            continue
        for name, slot in vars(cls).items():
            if name in out or name in _BASE_ATTRS:
                continue
            if isinstance(slot, GetSetDescriptorType | MemberDescriptorType):
                try:
                    out[name] = getattr(exc, name)
                except AttributeError:  # an unset field (OSError.characters_written)
                    continue
    return out


class _Redactor:
    def __init__(self, clean: Clean, message: Callable[[AIMessage], AIMessage]) -> None:
        self.clean = clean
        self.message = message
        self.done: dict[int, BaseException] = {}  # id -> its copy: chains can loop
        self.nodes = 0  # values walked so far (bounded by MAX_NODES)
        self.depth = 0
        self.swaps: list[tuple[str, str]] = []  # the exception being copied: old text -> new

    def exception(self, exc: BaseException) -> BaseException:
        if not isinstance(exc, Exception) or isinstance(exc, GraphBubbleUp):
            return exc
        if id(exc) in self.done:
            return self.done[id(exc)]
        if self.depth > MAX_DEPTH:  # a chain this long: the backstop reads its text
            return exc
        self.done[id(exc)] = exc  # a loop back to exc while copying it keeps the original
        self.depth += 1
        try:
            copy = self._copy(exc)
        finally:
            self.depth -= 1
        self.done[id(exc)] = copy
        return copy

    def _copy(self, exc: Exception) -> BaseException:
        if isinstance(exc, ValidationError):
            return self.validation_error(exc)
        cause = self.optional(exc.__cause__)
        context = self.optional(exc.__context__)
        fields = c_attributes(exc)
        # The text of an exception often quotes another's (``f"... {source}"``): swap it first.
        inner = [
            exc.__cause__,
            exc.__context__,
            *getattr(exc, "exceptions", ()),  # an ExceptionGroup's members
            *vars(exc).values(),
            *fields.values(),
            *exc.args,
        ]
        swaps = [
            (str(old), str(new))
            for old in inner
            if isinstance(old, BaseException) and (new := self.exception(old)) is not old
        ]
        saved, self.swaps = self.swaps, [(old, new) for old, new in swaps if old]
        try:
            return self._rebuild(exc, cause, context, fields)
        finally:
            self.swaps = saved

    def _rebuild(
        self,
        exc: Exception,
        cause: BaseException | None,
        context: BaseException | None,
        fields: dict[str, Any],
    ) -> BaseException:
        args = tuple(self.value(a) for a in exc.args)
        attrs = {k: self.value(v) for k, v in vars(exc).items()}
        new_fields = {k: self.value(v) for k, v in fields.items()}
        if (
            cause is exc.__cause__
            and context is exc.__context__
            and _same(args, exc.args)
            and all(_same(attrs[k], v) for k, v in vars(exc).items())
            and all(_same(new_fields[k], v) for k, v in fields.items())
        ):
            return exc
        try:
            copy = type(exc).__new__(type(exc), *args)
            copy.args = args
            copy.__dict__.update(attrs)
            for name, field in new_fields.items():  # OSError's filename is not in its args
                if getattr(copy, name, None) is not field:
                    setattr(copy, name, field)
            str(copy)  # a type whose text needs what __init__ would have set fails here
        except Exception:  # noqa: BLE001 - any type that cannot be copied gets a stand-in
            copy = RedactedError(f"{type(exc).__name__}: {self.value(str(exc))}")
        copy.__cause__ = cause
        copy.__context__ = context
        copy.__suppress_context__ = exc.__suppress_context__
        return copy.with_traceback(exc.__traceback__)

    def value(self, item: Any) -> Any:
        """``item`` cleaned: text, bytes, containers, messages, exceptions and objects in them."""
        self.nodes += 1
        if isinstance(item, str):
            for old, new in self.swaps:
                item = item.replace(old, new)
            return self.clean(item)
        if isinstance(item, BaseException):
            return self.exception(item)
        if isinstance(item, AIMessage):
            return self.message(item)
        if item is None or isinstance(item, bool | int | float | bytes | bytearray | BaseModel):
            return self.clean(item)
        if self.depth > MAX_DEPTH or self.nodes > MAX_NODES or isinstance(item, _SKIP):
            return item
        self.depth += 1
        try:
            return self.container(item)
        finally:
            self.depth -= 1

    def container(self, item: Any) -> Any:
        if type(item) is dict:
            out = {k: self.value(v) for k, v in item.items()}
            return item if all(_same(out[k], v) for k, v in item.items()) else out
        if isinstance(item, list | tuple | set | frozenset):
            items = [self.value(v) for v in item]
            if all(_same(new, old) for new, old in zip(items, item, strict=True)):
                return item
            if isinstance(item, tuple) and hasattr(item, "_fields"):  # a named tuple
                return getattr(type(item), "_make")(items)  # noqa: B009 - mypy knows no _make
            try:
                return type(item)(items)
            except Exception:  # noqa: BLE001 - a sequence type built otherwise: a plain one
                return items
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            return self.clean(item)
        return self.obj(item)

    def obj(self, item: Any) -> Any:
        """Any other object: its attributes cleaned on a copy (never the shared original)."""
        attrs: dict[str, Any] = {}
        try:
            attrs.update(vars(item))
        except TypeError:  # no __dict__
            pass
        for cls in type(item).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if isinstance(name, str) and name not in attrs and hasattr(item, name):
                    attrs[name] = getattr(item, name)
        if not attrs:
            return item
        clean = {k: self.value(v) for k, v in attrs.items()}
        changed = {k: v for k, v in clean.items() if not _same(v, attrs[k])}
        if not changed:
            return item
        try:
            copy = pycopy.copy(item)
            if copy is item:
                raise TypeError("a shared object")  # an enum member, a singleton
            for name, new in changed.items():
                if name in getattr(copy, "__dict__", {}):
                    copy.__dict__[name] = new
                else:
                    object.__setattr__(copy, name, new)
            return copy
        except Exception:  # noqa: BLE001 - an object that cannot be copied: its text, cleaned
            return self.clean(f"<{type(item).__name__}: {self.clean(repr(item))}>")

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
