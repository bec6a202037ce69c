"""Secret references and the store that alone can resolve them (taught in notebook 02).

State only ever holds a reference such as
``$secret:rds-master-password-5f0c9e1a2b3d4c5e6f708192``: a readable name,
then a random id made for that one value. Every :meth:`SecretStore.put`
makes a new reference, so two calls, two threads or two users with
different passwords never share one, and a reference resolves only in the
store that made it (another store, or another process, has never seen the
random id). The plain values live in process memory, never in a checkpoint.
Each value remembers the thread it was offered in (``put(..., thread=)``), so
the redaction can replace an echo of any value of that thread, and of no
other thread (:meth:`SecretStore.known`). A run without a thread passes a
:class:`RunBucket` of its own; each thread's values are kept ready for that
search in a :class:`~agentstate.core.redaction_index.ValueIndex`, at most
``MAX_VALUES`` of them (``SecretLimitError`` past it).
:class:`agentstate.core.SecretRedactionMiddleware` (``core.redaction``) is
what moves a model's plain values into a store.
"""

from __future__ import annotations

import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from agentstate.core.redaction_index import ValueIndex

SECRET_PREFIX = "$secret:"
SECRET_REF = re.compile(r"\$secret:[A-Za-z0-9][A-Za-z0-9._/-]{0,127}")
REDACTED = "***redacted***"
ID_CHARS = 24  # hex digits of the random id: 96 bits, unguessable
MAX_NAME = 128 - ID_CHARS - 1  # a reference stays within SECRET_REF's 128 characters


MAX_RUNS = 1024  # buckets of runs without a thread kept at once (the oldest is dropped)


@dataclass(frozen=True)
class RunBucket:
    """The values of one run without a thread (a stateless agent): its own, shared with no run."""

    id: str


# Whose values: a thread id, one run without a thread, or None (direct calls without either).
Bucket: TypeAlias = str | RunBucket | None


def is_secret_ref(value: object) -> bool:
    """True for ``$secret:<name>`` strings (whoever made them)."""
    return isinstance(value, str) and SECRET_REF.fullmatch(value) is not None


def secret_ref(name: str) -> str:
    """``$secret:<name>``; a clear ``ValueError`` for a name that cannot be one."""
    ref = f"{SECRET_PREFIX}{name}"
    if not isinstance(name, str) or not is_secret_ref(ref):
        raise ValueError(
            f"invalid secret name {name!r}: 1-128 letters, digits, '.', '_', '/', '-', "
            "starting with a letter or digit"
        )
    return ref


_REF_ID = re.compile(rf"-[0-9a-f]{{{ID_CHARS}}}$")


def ref_label(ref: str) -> str:
    """The readable label of a reference a store made (``rds-master-password``), id removed.

    ``ValueError`` for a string that is not such a reference.
    """
    if not is_secret_ref(ref) or _REF_ID.search(ref) is None:
        raise ValueError("not a reference made by a SecretStore")
    return _REF_ID.sub("", ref[len(SECRET_PREFIX) :])


class SecretStore:
    """A thread-safe map from references to plain values that never prints them.

    :meth:`put` makes a fresh reference per call; only this store resolves it.
    """

    def __init__(self) -> None:
        self._values: dict[str, str] = {}
        self._threads: dict[Bucket, ValueIndex] = {}  # thread -> its values, for the value pass
        self._runs: OrderedDict[RunBucket, None] = OrderedDict()  # runs, least recent first
        self._lock = threading.Lock()

    def put(self, name: str, value: object, *, thread: Bucket = None) -> str:
        """Keep ``value`` (as text) and return a new reference ``$secret:<name>-<random id>``.

        ``name`` is a readable label (checked like :func:`secret_ref`; cut to
        103 characters); the random id makes the reference this value's own.
        ``thread`` is the conversation the value was offered in (None: no thread).
        """
        secret_ref(name)  # a clear error for a bad label, before anything is kept
        if thread is not None and not isinstance(thread, str | RunBucket):
            raise ValueError(f"thread must be a string or None, got {type(thread).__name__}")
        ref = secret_ref(f"{name[:MAX_NAME].rstrip('-')}-{secrets.token_hex(ID_CHARS // 2)}")
        plain = str(value)
        with self._lock:
            index = self._threads.get(thread)
            if index is None:
                label = "this run" if isinstance(thread, RunBucket) else f"thread {thread!r}"
                index = self._threads[thread] = ValueIndex(label)
            index.add(plain, ref)  # SecretLimitError past MAX_VALUES: nothing is kept
            self._values[ref] = plain
            if isinstance(thread, RunBucket):
                self._runs[thread] = None
                self._runs.move_to_end(thread)
                while len(self._runs) > MAX_RUNS:  # a run that ended long ago: its index goes
                    old, _ = self._runs.popitem(last=False)
                    self._threads.pop(old, None)
        return ref

    def known(self, thread: Bucket) -> dict[str, str]:
        """Every plain value offered in ``thread``, each with its latest reference.

        For the redaction's value pass only: it replaces these values wherever a
        reply of the same thread repeats them. Values of other threads are not
        returned, so one conversation's text is never matched against another's secrets.
        """
        with self._lock:
            index = self._threads.get(thread)
            return {} if index is None else dict(index.refs)

    def index(self, thread: Bucket) -> ValueIndex | None:
        """The value pass's index of ``thread`` (None before its first value); not a copy."""
        with self._lock:
            return self._threads.get(thread)

    def indexes(self) -> list[ValueIndex]:
        """Every thread's index (for a write whose thread is not known: search them all)."""
        with self._lock:
            return list(self._threads.values())

    def resolve(self, ref: str) -> str:
        """The plain value behind ``ref`` (for the step that deploys, never for the model)."""
        with self._lock:
            if ref not in self._values:
                raise KeyError(f"no secret stored for {ref} in this store")
            return self._values[ref]

    def __contains__(self, ref: object) -> bool:
        with self._lock:
            return ref in self._values

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

    def __repr__(self) -> str:
        with self._lock:
            return f"SecretStore(refs={sorted(self._values)})"


def redact(values: Mapping[str, Any], secret_fields: Iterable[str]) -> dict[str, Any]:
    """A copy where any secret field that is not a reference is masked."""
    secret = set(secret_fields)
    return {k: (v if k not in secret or is_secret_ref(v) else REDACTED) for k, v in values.items()}
