"""One thread's known values, kept ready for the value pass: every encoding in one matcher.

A :class:`~agentstate.core.secrets.SecretStore` keeps one :class:`ValueIndex`
per thread (or per run without a thread). Adding a value costs its own
encodings' length (``core.redaction_matcher``), not a rebuild of every value
the thread holds. A thread holds at most :data:`MAX_VALUES` values: past it
:class:`SecretLimitError` ends the model call (fail closed: a value the pass
could no longer find must not be taken silently). Taught in notebook 02.
"""

from __future__ import annotations

import base64
import html
import json
import threading
from urllib.parse import quote, quote_plus

from agentstate.core.redaction_matcher import Matcher

MIN_ECHO = 4  # shorter hidden values are not searched for in text
MAX_VALUES = 50_000  # values one thread (or one run without a thread) may hold


class SecretLimitError(RuntimeError):
    """A thread already holds :data:`MAX_VALUES` secret values."""


def encodings(plain: str) -> frozenset[str]:
    """``plain`` as models and tools commonly rewrite it: the ways the value pass finds it."""
    escaped = json.dumps(plain)[1:-1]
    b64 = base64.b64encode(plain.encode()).decode()
    forms = {
        plain,
        escaped,  # inside a JSON string (ASCII escapes)
        json.dumps(plain, ensure_ascii=False)[1:-1],
        json.dumps(escaped)[1:-1],  # inside JSON inside a JSON string
        quote(plain, safe=""),  # URL-encoded
        quote(plain),
        quote_plus(plain),
        html.escape(plain),  # HTML/XML text and attributes
        html.escape(plain, quote=False),
        b64,  # base64 (a Kubernetes Secret's data, a Basic header of the value alone)
        b64.rstrip("="),
    }
    return frozenset(f for f in forms if len(f) >= MIN_ECHO)


class ValueIndex:
    """Plain values with their latest references, and a matcher over all their encodings."""

    def __init__(self, label: str = "this thread") -> None:
        self.label = label
        self.refs: dict[str, str] = {}  # plain value -> its latest reference
        self._owner: dict[str, str] = {}  # an encoded form -> the plain value it encodes
        self.matcher = Matcher()
        # The same forms as UTF-8 bytes, one char per byte (``bytes.decode("latin-1")``):
        # what the checkpoint backstop (``core.redaction_backstop``) searches a write for.
        self.byte_matcher = Matcher()
        self._lock = threading.Lock()

    def add(self, plain: str, ref: str) -> None:
        """Remember ``plain`` under ``ref`` (its latest reference); cost in ``plain``'s length."""
        with self._lock:
            if plain not in self.refs and len(self.refs) >= MAX_VALUES:
                raise SecretLimitError(
                    f"{self.label} already holds {MAX_VALUES} secret values, the most one "
                    "thread may hold; start a new thread"
                )
            self.refs[plain] = ref
            if len(plain) < MIN_ECHO:
                return
            forms = [f for f in encodings(plain) if f not in self._owner]
            for form in forms:
                self._owner[form] = plain
        self.matcher.add(forms)
        self.byte_matcher.add(form.encode().decode("latin-1") for form in forms)

    def ref_of(self, form: str) -> str | None:
        """The reference for an encoded ``form`` of a known value (None if unknown)."""
        plain = self._owner.get(form)
        return None if plain is None else self.refs.get(plain)

    def __len__(self) -> int:
        return len(self.refs)
