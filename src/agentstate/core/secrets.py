"""Keep secrets out of state, files and checkpoints: references in, plain values out.

State only ever holds a reference such as ``$secret:db-password``. A plain
value the model puts in a tool call is moved into a :class:`SecretStore`
(process memory, never checkpointed) by :class:`SecretRedactionMiddleware`
inside the model call, *before* the reply is written to state, and the call
is rewritten to carry the reference. Whatever deploys the result resolves
the reference. Taught in notebook 02.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage

SECRET_PREFIX = "$secret:"
SECRET_REF = re.compile(r"\$secret:[A-Za-z0-9][A-Za-z0-9._/-]{0,127}")
REDACTED = "***redacted***"


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
        name_for: Callable[[str], str] = lambda field: field,
    ) -> None:
        super().__init__()
        self.store = store
        self.tool_name = tool_name
        self.field_arg = field_arg
        self.value_arg = value_arg
        self.secret_fields = frozenset(secret_fields)
        self.secret_args = {tool: frozenset(args) for tool, args in (secret_args or {}).items()}
        self.name_for = name_for
        if tool_name is None and not self.secret_args:
            raise ValueError("give tool_name (a field/value tool) or secret_args, or both")

    def _hide(self, field: str, value: Any) -> Any:
        if value is None or is_secret_ref(value):
            return value
        return self.store.put(self.name_for(field), value)

    def _rewrite_args(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        args = dict(args)
        if name == self.tool_name and args.get(self.field_arg) in self.secret_fields:
            args[self.value_arg] = self._hide(args[self.field_arg], args.get(self.value_arg))
        for arg in self.secret_args.get(name, ()):
            if arg in args:
                args[arg] = self._hide(arg, args[arg])
        return args

    def rewrite(self, message: AIMessage) -> AIMessage:
        """The message with every plain secret in its tool calls replaced by a reference."""
        calls = [
            {**c, "args": self._rewrite_args(c.get("name", ""), c.get("args") or {})}
            for c in message.tool_calls
        ]
        if calls == message.tool_calls:
            return message
        # The provider's raw wire copy of the calls would still hold the plain value.
        extra = {
            k: v
            for k, v in message.additional_kwargs.items()
            if k not in ("tool_calls", "function_call")
        }
        return message.model_copy(
            update={"tool_calls": calls, "invalid_tool_calls": [], "additional_kwargs": extra}
        )

    def _rewrite_response(self, response: ModelResponse) -> ModelResponse:
        result = [self.rewrite(m) if isinstance(m, AIMessage) else m for m in response.result]
        return ModelResponse(result=result, structured_response=response.structured_response)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        return self._rewrite_response(handler(request))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        return self._rewrite_response(await handler(request))
