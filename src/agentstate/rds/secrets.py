"""Keep the master password out of state, files, manifests and checkpoints.

State only ever holds a reference such as ``$secret:rds-master-password``. A
plain value offered by the model is moved into a :class:`SecretStore` (process
memory, never checkpointed) by :class:`SecretRedactionMiddleware` *before* the
model's reply is written to state, and the tool call is rewritten to carry the
reference. The manifest references the secret; a deploy step resolves it.
Taught in notebook 02.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage

SECRET_PREFIX = "$secret:"
SECRET_REF = re.compile(r"^\$secret:[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
REDACTED = "***redacted***"


def is_secret_ref(value: Any) -> bool:
    """True for ``$secret:<name>`` strings."""
    return isinstance(value, str) and bool(SECRET_REF.match(value))


def secret_ref(name: str) -> str:
    ref = f"{SECRET_PREFIX}{name}"
    if not is_secret_ref(ref):
        raise ValueError(f"invalid secret name {name!r}: use letters, digits, '.', '_', '/', '-'")
    return ref


class SecretStore:
    """A thread-safe map from references to plain values that never prints them."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}
        self._lock = threading.Lock()

    def put(self, name: str, value: str) -> str:
        ref = secret_ref(name)
        with self._lock:
            self._values[ref] = value
        return ref

    def resolve(self, ref: str) -> str:
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
        return f"SecretStore(refs={sorted(self._values)})"


def redact(requirements: dict[str, Any], secret_fields: Iterable[str]) -> dict[str, Any]:
    """A copy where any secret field that is not a reference is masked."""
    secret = set(secret_fields)
    return {
        k: (v if k not in secret or is_secret_ref(v) else REDACTED) for k, v in requirements.items()
    }


class SecretRedactionMiddleware(AgentMiddleware):
    """Rewrite ``store_requirement(<secret field>, <plain>)`` calls before state sees them.

    ``wrap_model_call`` runs inside the model node, so the AIMessage written to
    state (and to the checkpoint) already carries the reference.
    """

    def __init__(
        self,
        store: SecretStore,
        secret_fields: Iterable[str] = ("password",),
        tool_name: str = "store_requirement",
        name_for: Callable[[str], str] = lambda field: f"rds-master-{field}",
    ) -> None:
        super().__init__()
        self.store = store
        self.secret_fields = frozenset(secret_fields)
        self.tool_name = tool_name
        self.name_for = name_for

    def _rewrite(self, message: AIMessage) -> AIMessage:
        changed = False
        calls = []
        for call in message.tool_calls:
            args = call.get("args", {})
            value = args.get("value")
            if (
                call.get("name") == self.tool_name
                and args.get("field_name") in self.secret_fields
                and isinstance(value, str)
                and not is_secret_ref(value)
            ):
                ref = self.store.put(self.name_for(args["field_name"]), value)
                call = {**call, "args": {**args, "value": ref}}
                changed = True
            calls.append(call)
        if not changed:
            return message
        return message.model_copy(update={"tool_calls": calls, "invalid_tool_calls": []})

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        response = handler(request)
        result = [self._rewrite(m) if isinstance(m, AIMessage) else m for m in response.result]
        return ModelResponse(result=result, structured_response=response.structured_response)
