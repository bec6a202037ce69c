"""The checkpoint backstop: every write scanned as the bytes the checkpointer stores.

:class:`agentstate.core.SecretRedactionMiddleware` hides secrets by walking
the shapes it knows (``core.redaction``, ``core.redaction_errors``); a shape
nobody listed (an exception whose ``repr`` decodes a value it keeps
scrambled, a new provider field) would pass the walk. So the checkpointer's
serializer is wrapped: every checkpoint and pending write is serialized as
before, then searched for every value the
:class:`~agentstate.core.secrets.SecretStore` holds for the write's thread
(in every encoding of ``encodings``), and a value found is overwritten byte
for byte with ``*`` before the checkpointer stores the bytes (:func:`mask`:
every length a format records still holds, so the checkpoint still loads); a
warning on the ``agentstate.secrets`` logger says a shape was missed. The
store's own references are never touched, nor a whole string the middleware
keeps as a field name (``field_name="password"`` when a secret is
``password``), nor a short value found only inside LangGraph's own
bookkeeping (a checkpoint or message id, a channel version, a timestamp:
random digits that contain ``1234`` by chance and must load as written).
The thread comes from the ``config`` of ``put``/``put_writes``
(and their async twins), which are wrapped on the instance to pass it on; a
write without one is searched for every thread's values. An encrypted
checkpointer (``EncryptedSerializer``) is scanned before encryption.

The middleware installs it on the run's checkpointer at its first model or
tool call (before any write that can hold a value it took);
:func:`guard_checkpointer` installs it by hand. Taught in notebook 02;
``docs/secrets.md`` "The backstop".
"""

from __future__ import annotations

import contextvars
import functools
import logging
import re
from collections.abc import Callable
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from agentstate.core.redaction_index import ValueIndex
from agentstate.core.redaction_values import MADE_REF
from agentstate.core.secrets import SecretStore

__all__ = ["ScanningSerializer", "guard_checkpointer", "mask"]

log = logging.getLogger("agentstate.secrets")
log.addHandler(logging.NullHandler())  # a library: shown only where the app configures logging
_MADE_REF = re.compile(MADE_REF)
# LangGraph's bookkeeping strings: uuid ids (checkpoints, messages, runs), channel
# versions (``f"{n:032}.{random.random():016}"``) and ISO timestamps. A value found
# strictly inside one is chance, not a leak; one that is the whole token is masked.
_BOOKKEEPING = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|\d{32}\.[0-9.e+-]+"
    r"|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[+-]\d{2}:\d{2}|Z)?"
)
_UNKNOWN = object()
# The thread of the checkpoint write in progress (set by the wrapped put/put_writes).
_THREAD: contextvars.ContextVar[object] = contextvars.ContextVar("agentstate_thread")
_GUARDED = "_agentstate_guarded_stores"  # the stores a checkpointer's writes are scanned for
Exempt = Callable[[str], bool]


def _whole_string(data: bytes, start: int, end: int) -> bool:
    """True when ``data[start:end]`` is a whole string: msgpack's header, or JSON's quotes."""
    n = end - start
    if data[start - 1 : start] == b'"' and data[end : end + 1] == b'"':
        return True
    if n < 32 and start >= 1:
        return data[start - 1] == 0xA0 | n
    if n < 256 and start >= 2:
        return data[start - 2] == 0xD9 and data[start - 1] == n
    return start >= 3 and data[start - 3] == 0xDA and int.from_bytes(data[start - 2 : start]) == n


def _inside_bookkeeping(text: str, start: int, end: int) -> bool:
    """True when ``text[start:end]`` is a proper part of a bookkeeping token around it."""
    lo = max(0, start - 64)
    for token in _BOOKKEEPING.finditer(text, lo, min(len(text), end + 64)):
        a, b = token.span()
        if a <= start and end <= b and (a, b) != (start, end):
            return True
    return False


def mask(
    data: bytes,
    store: SecretStore,
    indexes: list[ValueIndex],
    exempt: Exempt = lambda text: False,
) -> tuple[bytes, int]:
    """``data`` with every value of ``indexes`` overwritten by ``*``; how many were.

    Byte for byte, so every length a format records (msgpack, pickle, JSON)
    still holds. Kept: a reference ``store`` made, a whole string for which
    ``exempt`` is true (a field name the middleware keeps), and a match
    strictly inside a bookkeeping token (:data:`_BOOKKEEPING`): masking a
    checkpoint id's digits made the checkpoint unloadable.
    """
    text = data.decode("latin-1")
    matches = [m for index in indexes for _, _, ms in index.byte_matcher.regions(text) for m in ms]
    if not matches:
        return data, 0
    kept = [m.span() for m in _MADE_REF.finditer(text) if m[0] in store]
    out = bytearray(data)
    found = 0
    for start, end in matches:
        if any(a <= start and end <= b for a, b in kept):
            continue
        if _inside_bookkeeping(text, start, end):
            continue
        if _whole_string(data, start, end) and exempt(data[start:end].decode("utf-8", "replace")):
            continue
        out[start:end] = b"*" * (end - start)
        found += 1
    return (bytes(out), found) if found else (data, 0)


class ScanningSerializer(SerializerProtocol):
    """``inner``'s bytes with every value ``store`` holds overwritten by ``*``; reads unchanged."""

    def __init__(
        self, inner: SerializerProtocol, store: SecretStore, exempt: Exempt = lambda text: False
    ) -> None:
        self.inner = inner
        self.store = store
        self.exempt = exempt

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """The inner serializer's bytes, with every known value of the thread masked."""
        kind, data = self.inner.dumps_typed(obj)
        thread = _THREAD.get(_UNKNOWN)
        if thread is _UNKNOWN:
            indexes = self.store.indexes()
        else:
            index = self.store.index(str(thread))
            indexes = [] if index is None else [index]
        clean, found = mask(data, self.store, indexes, self.exempt)
        if found:
            log.warning(
                "agentstate: %d secret value(s) masked in a checkpoint write (a shape the "
                "redaction did not walk)",
                found,
            )
        return kind, clean

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """What the inner serializer reads (a masked value reads as its stars)."""
        return self.inner.loads_typed(data)


def _thread_of(config: Any) -> object:
    configurable = config.get("configurable") if isinstance(config, dict) else None
    thread = (configurable or {}).get("thread_id")
    return _UNKNOWN if thread is None else thread


def _with_thread(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def put(config: Any, *args: Any, **kwargs: Any) -> Any:
        token = _THREAD.set(_thread_of(config))
        try:
            return method(config, *args, **kwargs)
        finally:
            _THREAD.reset(token)

    return put


def _with_thread_async(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def aput(config: Any, *args: Any, **kwargs: Any) -> Any:
        token = _THREAD.set(_thread_of(config))
        try:
            return await method(config, *args, **kwargs)
        finally:
            _THREAD.reset(token)

    return aput


def guard_checkpointer(
    checkpointer: Any, store: SecretStore, exempt: Exempt = lambda text: False
) -> Any:
    """Make ``checkpointer`` scan every write for ``store``'s values; returns it (idempotent).

    Its ``serde`` is wrapped in place (inside an ``EncryptedSerializer``,
    whose bytes are ciphertext), and its ``put``/``put_writes``/``aput``/
    ``aput_writes`` are wrapped on the instance to say which thread a write
    is for. An object without a ``serde`` (None, ``True`` for a subgraph that
    inherits its parent's) is returned as it is. ``exempt(text)``: a whole
    string left as it is (the middleware passes its field-name rule).
    """
    serde = getattr(checkpointer, "serde", None)
    if serde is None:
        return checkpointer
    guarded: set[int] = checkpointer.__dict__.setdefault(_GUARDED, set())
    if id(store) in guarded:
        return checkpointer
    if not guarded:
        for name in ("put", "put_writes"):
            setattr(checkpointer, name, _with_thread(getattr(checkpointer, name)))
        for name in ("aput", "aput_writes"):
            setattr(checkpointer, name, _with_thread_async(getattr(checkpointer, name)))
    guarded.add(id(store))
    if isinstance(serde, EncryptedSerializer):
        serde.serde = ScanningSerializer(serde.serde, store, exempt)
    else:
        checkpointer.serde = ScanningSerializer(serde, store, exempt)
    return checkpointer
