"""Keep secrets out of state, streams, files and checkpoints: references in, plain values out.

State only ever holds a reference such as ``$secret:db-password``. A plain
value the model puts in a tool call is moved into a :class:`SecretStore`
(process memory, never checkpointed) by :class:`SecretRedactionMiddleware`
inside the model call, *before* the reply is written to state, and the call
is rewritten to carry the reference. Whatever deploys the result resolves
the reference.

What it covers: secret fields of a field/value tool (by name, or any field
name that looks secret, such as ``master_password``), secret arguments of any
tool, arguments of the field/value tool itself that look secret (a malformed
``store_requirement(password=...)`` would otherwise be echoed back in the
tool's error), ``field: value`` pairs inside free-text arguments (a ``task``
description handed to a subagent), and values of any type. The model call
runs untraced by ``stream_mode="messages"`` (LangGraph's ``nostream`` tag),
so the stream carries the redacted reply, whole, instead of the raw one.
What it cannot cover: a secret the *user* types stays in the user's message.
Taught in notebook 02.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.constants import TAG_NOSTREAM

SECRET_PREFIX = "$secret:"
SECRET_REF = re.compile(r"\$secret:[A-Za-z0-9][A-Za-z0-9._/-]{0,127}")
REDACTED = "***redacted***"
# Field and argument names that hold a secret whatever the tool calls them.
SECRET_NAME = re.compile(
    r"pass(word|wd|phrase)|secret|token|api[_-]?key|private[_-]?key|credential", re.I
)
# ``"password": "x"``, ``password=x`` or ``password: x`` inside free text (JSON or prose).
_TEXT_PAIR = re.compile(
    r"""(?P<key>["']?(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)["']?\s*[:=]\s*)"""
    r"""(?:"(?P<dq>(?:[^"\\]|\\.)*)"|'(?P<sq>[^']*)'|(?P<bare>[^\s,;}"']+))"""
)


@contextmanager
def _unstreamed() -> Iterator[None]:
    """Run the enclosed model call with the ``nostream`` tag: the messages stream skips it."""
    config = var_child_runnable_config.get() or {}
    token = var_child_runnable_config.set(
        {**config, "tags": [*config.get("tags", []), TAG_NOSTREAM]}
    )
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)


def is_secret_ref(value: Any) -> bool:
    """True for ``$secret:<name>`` strings."""
    return isinstance(value, str) and SECRET_REF.fullmatch(value) is not None


def secret_ref(name: str) -> str:
    """The reference for secret ``name``; a clear error for a name that cannot be one."""
    ref = f"{SECRET_PREFIX}{name}"
    if not is_secret_ref(ref):
        raise ValueError(f"invalid secret name {name!r}: use letters, digits, '.', '_', '/', '-'")
    return ref


class SecretStore:
    """A thread-safe map from references to plain values that never prints them."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}
        self._lock = threading.Lock()

    def put(self, name: str, value: Any) -> str:
        """Keep ``value`` (as text) under ``name`` and return its reference."""
        ref = secret_ref(name)
        with self._lock:
            self._values[ref] = str(value)
        return ref

    def resolve(self, ref: str) -> str:
        """The plain value behind ``ref`` (for the step that deploys, never for the model)."""
        with self._lock:
            if ref not in self._values:
                raise KeyError(f"no secret stored for {ref}")
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


class SecretRedactionMiddleware(AgentMiddleware):
    """Rewrite plain secrets in the model's tool calls into references, before state sees them.

    Two shapes of tool are covered, both configurable:

    - a field/value tool (``store_requirement(field_name="password", value=...)``):
      ``tool_name``, ``field_arg``, ``value_arg`` and the ``secret_fields``;
    - a tool with a secret argument (``connect(password=...)``): ``secret_args``
      maps tool names to argument names.

    ``name_for(field)`` names the stored secret. ``wrap_model_call`` runs
    inside the model node, so the AIMessage that reaches state (and the
    checkpoint) already carries the reference.
    """

    def __init__(
        self,
        store: SecretStore,
        *,
        tool_name: str | None = None,
        field_arg: str = "field_name",
        value_arg: str = "value",
        secret_fields: Iterable[str] = ("password",),
        secret_args: Mapping[str, Iterable[str]] | None = None,
        text_args: Mapping[str, Iterable[str]] | None = None,
        secret_name: re.Pattern[str] | None = SECRET_NAME,
        name_for: Callable[[str], str] = lambda field: field,
    ) -> None:
        super().__init__()
        self.store = store
        self.tool_name = tool_name
        self.field_arg = field_arg
        self.value_arg = value_arg
        self.secret_fields = frozenset(secret_fields)
        self.secret_args = {tool: frozenset(args) for tool, args in (secret_args or {}).items()}
        self.text_args = {tool: frozenset(args) for tool, args in (text_args or {}).items()}
        self.secret_name = secret_name
        self.name_for = name_for
        if tool_name is None and not self.secret_args and not self.text_args:
            raise ValueError("give tool_name (a field/value tool), secret_args or text_args")

    def is_secret(self, name: Any) -> bool:
        """A configured secret field, or a name that looks like one (``db_password``)."""
        if not isinstance(name, str):
            return False
        if name in self.secret_fields:
            return True
        return self.secret_name is not None and self.secret_name.search(name) is not None

    def _hide(self, field: str, value: Any) -> Any:
        if value is None or is_secret_ref(value):
            return value
        return self.store.put(self.name_for(_ref_name(field)), value)

    def _scrub_text(self, text: Any) -> Any:
        """Replace the value of every secret-looking ``name: value`` pair in free text."""
        if not isinstance(text, str):
            return text

        def swap(match: re.Match[str]) -> str:
            if not self.is_secret(match["name"]):
                return match[0]
            value = next(v for v in (match["dq"], match["sq"], match["bare"]) if v is not None)
            if is_secret_ref(value):
                return match[0]
            ref = self._hide(match["name"], value)
            quote = '"' if match["dq"] is not None else "'" if match["sq"] is not None else ""
            return f"{match['key']}{quote}{ref}{quote}"

        return _TEXT_PAIR.sub(swap, text)

    def _rewrite_args(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        args = dict(args)
        if name == self.tool_name:
            if self.is_secret(args.get(self.field_arg)):
                args[self.value_arg] = self._hide(args[self.field_arg], args.get(self.value_arg))
            for arg in [a for a in args if a not in (self.field_arg, self.value_arg)]:
                if self.is_secret(arg):  # a malformed call: its error would echo the value
                    args[arg] = self._hide(arg, args[arg])
        for arg in self.secret_args.get(name, ()):
            if arg in args:
                args[arg] = self._hide(arg, args[arg])
        for arg in self.text_args.get(name, ()):
            if arg in args:
                args[arg] = self._scrub_text(args[arg])
        return args

    def rewrite(self, message: AIMessage) -> AIMessage:
        """The message with every plain secret in its tool calls replaced by a reference."""
        calls = [
            {**c, "args": self._rewrite_args(c.get("name", ""), c.get("args") or {})}
            for c in message.tool_calls
        ]
        # A call whose JSON did not parse keeps its raw text: scrub it like free text.
        invalid = [
            {**c, "args": self._scrub_text(c.get("args"))} for c in message.invalid_tool_calls
        ]
        if calls == message.tool_calls and invalid == message.invalid_tool_calls:
            return message
        # The provider's raw wire copy of the calls would still hold the plain value.
        extra = {
            k: v
            for k, v in message.additional_kwargs.items()
            if k not in ("tool_calls", "function_call")
        }
        return message.model_copy(
            update={"tool_calls": calls, "invalid_tool_calls": invalid, "additional_kwargs": extra}
        )

    def _rewrite_response(self, response: ModelResponse) -> ModelResponse:
        result = [self.rewrite(m) if isinstance(m, AIMessage) else m for m in response.result]
        return ModelResponse(result=result, structured_response=response.structured_response)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        with _unstreamed():
            response = handler(request)
        return self._rewrite_response(response)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        with _unstreamed():
            response = await handler(request)
        return self._rewrite_response(response)


def _ref_name(field: str) -> str:
    """A secret name made from any field name (``labels.db password`` -> ``labels.db-password``)."""
    name = re.sub(r"[^A-Za-z0-9._/-]+", "-", field).strip("-") or "secret"
    return name if name[0].isalnum() else f"s{name}"
