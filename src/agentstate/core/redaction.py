"""Keep secrets out of state, streams, files and checkpoints: references in, plain values out.

:class:`SecretRedactionMiddleware` moves a plain value the model offers into
a :class:`~agentstate.core.secrets.SecretStore` inside the model call,
*before* the reply is written to state, and rewrites the reply to carry the
value's own reference (a new one per value, see ``core.secrets``). Two passes:

1. **Key rules**, by where a value sits: a watched tool's secret arguments,
   secret-named keys inside values and JSON text, field/value pairs, and the
   free-text forms of ``core.redaction_text``; in every place a provider puts
   tool arguments (``tool_calls``; ``invalid_tool_calls``, read with
   a linear reader of JSON cut off at its end (``core.redaction_json``);
   Anthropic ``tool_use`` blocks and their ``partial_json``; OpenAI
   Responses ``function_call`` blocks, matched by ``call_id``; the raw
   ``additional_kwargs`` copy, dropped) and in a structured response, by
   its schema's name (``ToolStrategy`` and ``ProviderStrategy``).
2. **The value pass** (``core.redaction_values``): every value the store
   holds for this thread, replaced in every string of the reply, so a
   format nobody listed cannot carry a known secret.

Errors are artefacts too (``core.redaction_errors``): what a model call
raises (a structured reply that fails its schema quotes it, and LangGraph
writes the error's ``repr`` into the checkpoint), ``ToolStrategy``'s retry
message under every ``handle_errors``, and a tool's error are rewritten with
the same references. A run without a thread keeps its values apart
(``RunBucket``). A field name that cannot name a secret is shortened, so it
never ends the run: the tool gets the call and can refuse it. The model call runs untraced
by ``stream_mode="messages"`` (LangGraph's ``nostream`` tag), so the stream
carries the redacted reply, whole. What it cannot cover is listed in
``docs/secrets.md``. Taught in notebook 02.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import secrets
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from langchain.agents.factory import STRUCTURED_OUTPUT_ERROR_TEMPLATE
from langchain.agents.middleware import AgentMiddleware, ToolCallRequest
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain.agents.structured_output import (
    OutputToolBinding,
    ProviderStrategy,
    StructuredOutputValidationError,
    ToolStrategy,
)
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.constants import TAG_NOSTREAM
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command
from pydantic import BaseModel

from agentstate.core.redaction_backstop import guard_checkpointer
from agentstate.core.redaction_errors import redact_exception
from agentstate.core.redaction_json import loads, read_partial
from agentstate.core.redaction_text import SECRET_NAME, text_secrets
from agentstate.core.redaction_values import KnownValues
from agentstate.core.secrets import Bucket, RunBucket, SecretStore, is_secret_ref

__all__ = ["SECRET_NAME", "SecretRedactionMiddleware"]

_MAX_REF_NAME = 64
# Message fields that are structure, never content: the value pass leaves them.
_MESSAGE_STRUCTURE = frozenset(
    {"type", "name", "id", "tool_call_id", "usage_metadata", "status", "chunk_position"}
)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


_CHECKPOINTER = "__pregel_checkpointer"  # langgraph._internal._constants.CONFIG_KEY_CHECKPOINTER


def _guard_run(middleware: SecretRedactionMiddleware) -> None:
    """The backstop on the running graph's checkpointer (``core.redaction_backstop``).

    A whole string that names a secret field (a field/value pair's field name)
    is kept, as the value pass keeps it.
    """
    configurable = (var_child_runnable_config.get() or {}).get("configurable") or {}
    saver = configurable.get(_CHECKPOINTER)
    if saver is not None:
        guard_checkpointer(saver, middleware.store, middleware.is_secret)


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


def _ref_name(field: Any) -> str:
    """A secret name from any field name (``labels.db password`` -> ``labels.db-password``).

    Cut to 64 characters, so a 200-character field name cannot end the run.
    """
    name = re.sub(r"[^A-Za-z0-9._/-]+", "-", str(field)).strip("-")[:_MAX_REF_NAME] or "secret"
    return name if name[0].isalnum() else f"s{name}"


def _json_container(text: str, *, partial: bool = False) -> Any:
    """``text`` parsed, if it is a JSON object or array; else None.

    ``partial``: JSON cut off at its end is read too (``core.redaction_json``);
    text that only starts with JSON (``[1] Create the db, password: x``) is not
    JSON, so the free-text rules read all of it.
    """
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    if partial:
        parsed = read_partial(stripped)
    else:
        try:
            parsed = loads(stripped)
        except ValueError:  # not JSON, a key twice, or nested too deep: free text
            return None
    return parsed if isinstance(parsed, dict | list) else None


def read_arguments(text: str) -> dict[str, Any] | None:
    """Tool-call argument text as a dict, also when it is cut off or slightly broken.

    JSON, or JSON cut off inside a value (``finish_reason="length"``), read in
    linear time by ``core.redaction_json``; then the same without trailing
    commas; None when neither reads an object.
    """
    for candidate in (text, _TRAILING_COMMA.sub(r"\1", text)):
        parsed = read_partial(candidate)
        if isinstance(parsed, dict):
            return parsed
    return None


def _thread_id(runtime: Any = None) -> str | None:
    """The thread of the running call (None outside a thread)."""
    info = getattr(runtime, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    if thread is None:
        configurable = (var_child_runnable_config.get() or {}).get("configurable") or {}
        thread = configurable.get("thread_id")
    return None if thread is None else str(thread)


def _bucket(runtime: Any, state: Any) -> Bucket:
    """Whose values the value pass searches: the thread's, or this run's when there is none.

    A run without a thread (a stateless agent) is keyed by the id of the first
    message of its state, which ``add_messages`` makes new for every run: two
    users' runs never share a bucket, and one run's model and tool calls do.
    """
    thread = _thread_id(runtime)
    if thread is not None:
        return thread
    messages = state.get("messages") if isinstance(state, Mapping) else None
    first = messages[0] if isinstance(messages, list) and messages else None
    first_id = getattr(first, "id", None)
    return RunBucket(first_id if isinstance(first_id, str) else secrets.token_hex(12))


def schema_names(response_format: Any) -> frozenset[str]:
    """The names of a request's structured-output schemas (a ToolStrategy's tools, ...)."""
    if response_format is None:
        return frozenset()
    if isinstance(response_format, ToolStrategy):
        return frozenset(spec.name for spec in response_format.schema_specs)
    if isinstance(response_format, ProviderStrategy):
        return frozenset({response_format.schema_spec.name})
    schema = getattr(response_format, "schema", response_format)  # AutoStrategy or a schema
    name = schema.get("title") if isinstance(schema, dict) else getattr(schema, "__name__", None)
    return frozenset({name}) if isinstance(name, str) else frozenset()


class _Rewrite:
    """One reply's rewrite: every plain value hidden once, with the same reference everywhere."""

    def __init__(
        self,
        middleware: SecretRedactionMiddleware,
        tools: Iterable[str] = (),
        thread: Bucket = None,
    ) -> None:
        self.m = middleware
        self.watched = middleware.watched | frozenset(tools)  # plus a structured output's tool
        self.thread = thread
        self.found: dict[str, str] = {}  # plain text -> its reference, for this reply

    # --- values ---

    def hide(self, field: Any, value: Any) -> Any:
        if value is None or is_secret_ref(value):
            return value
        plain = value if isinstance(value, str) else json.dumps(value, default=str)
        if plain in self.found:
            return self.found[plain]
        store = self.m.store
        try:
            ref = store.put(self.m.name_for(_ref_name(field)), plain, thread=self.thread)
        except ValueError:  # a name_for that made a bad name: never end the run over it
            ref = store.put("secret", plain, thread=self.thread)
        self.found[plain] = ref
        if not isinstance(value, str):
            self.found.setdefault(str(value), ref)
        return ref

    def scrub(self, value: Any) -> Any:
        """``value`` with every secret inside it (keys, field/value pairs, text) hidden."""
        if isinstance(value, str):
            parsed = _json_container(value, partial=True)  # JSON text, whole or cut off
            if parsed is None:
                return self.scrub_text(value)
            clean = self.scrub(parsed)
            return value if clean == parsed else json.dumps(clean, ensure_ascii=False)
        if isinstance(value, Mapping):
            field = value.get(self.m.field_arg)
            pair = self.m.is_secret(field)
            return {
                k: (
                    self.hide(field if pair and k == self.m.value_arg else k, v)
                    if self.m.is_secret(k) or (pair and k == self.m.value_arg)
                    else self.scrub(v)
                )
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.scrub(v) for v in value]
        return value

    def scrub_text(self, text: str) -> str:
        """Hide the value of every secret-looking pair, element or URL password in free text."""
        return text_secrets(
            text,
            is_secret=self.m.is_secret,
            is_ref=is_secret_ref,
            hide=self.hide,
            field_arg=self.m.field_arg,
            value_arg=self.m.value_arg,
        )

    def known(self) -> KnownValues:
        """The value pass: every value held for this thread (this reply's are in it already)."""
        store = self.m.store

        def keep(key: str, value: str) -> bool:  # a field/value pair's field name stays
            return key == self.m.field_arg and self.m.is_secret(value)

        return KnownValues(store.index(self.thread), keep, store.__contains__)

    # --- tool calls ---

    def args(self, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
        m = self.m
        if tool not in self.watched:
            return dict(args)
        out = {}
        for arg, value in args.items():
            if arg in m.secret_args.get(tool, ()):
                out[arg] = self.hide(arg, value)
            elif tool == m.tool_name and arg == m.value_arg and m.is_secret(args.get(m.field_arg)):
                out[arg] = self.hide(args[m.field_arg], value)
            elif m.is_secret(arg):  # a malformed call: its error would echo the value
                out[arg] = self.hide(arg, value)
            else:
                out[arg] = self.scrub(value)
        return out

    def arguments(self, name: Any, text: str) -> str:
        """Argument text (whole, cut off or broken) with its secrets hidden, as JSON text.

        Text that cannot be read as an object goes through the free-text rules;
        a call cut off before its name gets the key rules of a watched tool.
        """
        if name and name not in self.watched:  # an unwatched tool: the value pass only
            return text
        parsed = read_arguments(text)
        if parsed is None:
            return self.scrub_text(text)
        clean = self.args(name, parsed) if name else self.scrub(parsed)  # no name: key rules
        return text if clean == parsed else json.dumps(clean)

    def invalid(self, call: Mapping[str, Any]) -> dict[str, Any]:
        clean = dict(call)
        raw = call.get("args")
        if isinstance(raw, str):
            clean["args"] = self.arguments(call.get("name"), raw)
        if isinstance(call.get("error"), str):
            error = call["error"]
            if isinstance(raw, str) and raw and clean["args"] != raw:
                error = error.replace(raw, clean["args"])  # LangChain's error quotes the raw text
            clean["error"] = self.scrub_text(error)
        return clean

    def block(self, block: dict[str, Any], calls: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
        """A content block's tool arguments from the rewritten calls (or rewritten here).

        Anthropic ``tool_use`` (``input``, ``partial_json``) and v1 ``tool_call``
        blocks carry the call's ``id``; an OpenAI Responses ``function_call``
        block has its own ``id`` (``fc_...``) and the call's id in ``call_id``.
        """
        b = dict(block)
        call = None
        for key in ("call_id", "id"):
            if isinstance(b.get(key), str) and b[key] in calls:
                call = calls[b[key]]
                break
        name = b.get("name") or (call or {}).get("name") or ""
        for key in ("input", "args"):
            if isinstance(b.get(key), dict) and b[key]:
                b[key] = call["args"] if call is not None else self.args(name, b[key])
        for key in ("partial_json", "arguments", "args"):
            if isinstance(b.get(key), str) and b[key]:
                if call is not None:
                    b[key] = json.dumps(call["args"])
                else:
                    b[key] = self.arguments(name, b[key])
        return b

    def content(self, content: Any, calls: Mapping[str, dict[str, Any]]) -> Any:
        if not isinstance(content, list):
            return content
        return [self.block(b, calls) if isinstance(b, dict) else b for b in content]

    def message(self, message: AIMessage) -> AIMessage:
        """Key rules over every place the message keeps tool arguments."""
        calls: list[dict[str, Any]] = [
            {**c, "args": self.args(c.get("name", ""), c.get("args") or {})}
            for c in message.tool_calls
        ]
        invalid = [self.invalid(c) for c in message.invalid_tool_calls]
        by_id = {c["id"]: c for c in calls if c.get("id")}
        content = self.content(message.content, by_id)
        if (
            calls == message.tool_calls
            and invalid == message.invalid_tool_calls
            and content == message.content
        ):
            return message
        # The provider's raw wire copy of the calls would still hold the plain value.
        extra = {
            k: v
            for k, v in message.additional_kwargs.items()
            if k not in ("tool_calls", "function_call")
        }
        return message.model_copy(
            update={
                "content": content,
                "tool_calls": calls,
                "invalid_tool_calls": invalid,
                "additional_kwargs": extra,
            }
        )

    # --- structured responses ---

    def structured(self, value: Any, names: frozenset[str]) -> Any:
        """A structured response (dict, pydantic model, dataclass) with secrets hidden.

        A schema named in ``secret_args`` hides those fields; every schema gets
        the key rules.
        """
        name = next(iter(names)) if len(names) == 1 else type(value).__name__

        def rules(data: Mapping[str, Any]) -> Any:
            return self.args(name, data) if name in self.watched else self.scrub(data)

        if isinstance(value, BaseModel):
            data = value.model_dump()
            clean = self.known_value(rules(data))
            changed = {k: v for k, v in clean.items() if v != data.get(k)}
            return value.model_copy(update=changed) if changed else value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            data = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            clean = self.known_value(rules(data))
            changed = {k: v for k, v in clean.items() if v != data[k]}
            return dataclasses.replace(value, **changed) if changed else value
        if isinstance(value, Mapping):
            return self.known_value(rules(value))
        return self.known_value(self.scrub(value))

    def known_value(self, value: Any) -> Any:
        """Values equal to a plain value hidden in this reply become its reference."""
        if isinstance(value, str):
            return self.found.get(value, value)
        if isinstance(value, Mapping):
            return {k: self.known_value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.known_value(v) for v in value]
        return value

    def provider_text(self, message: AIMessage, names: frozenset[str]) -> AIMessage:
        """A ``ProviderStrategy`` reply: its text IS the response's JSON; hide by the schema."""
        name = next(iter(names))

        def clean(text: str) -> str:
            parsed = _json_container(text)
            if not isinstance(parsed, dict):
                return text
            rewritten = self.args(name, parsed)
            return text if rewritten == parsed else json.dumps(rewritten, ensure_ascii=False)

        content = message.content
        if isinstance(content, str):
            new: Any = clean(content)
        else:
            new = [
                {**b, "text": clean(b["text"])}
                if isinstance(b, dict)
                and b.get("type") == "text"
                and isinstance(b.get("text"), str)
                else b
                for b in content
            ]
        return message if new == content else message.model_copy(update={"content": new})

    # --- the value pass ---

    def values(self, message: BaseMessage, known: KnownValues) -> BaseMessage:
        """Every string of the message with the thread's known values replaced."""
        update = {}
        for field in type(message).model_fields:
            if field in _MESSAGE_STRUCTURE:
                continue
            value = getattr(message, field)
            clean = known.walk(value)
            if clean != value:
                update[field] = clean
        return message.model_copy(update=update) if update else message


class SecretRedactionMiddleware(AgentMiddleware):
    """Rewrite plain secrets in the model's replies into references, before state sees them.

    Configure which tools it watches (others get only the value pass):

    - a field/value tool (``store_requirement(field_name="password", value=...)``):
      ``tool_name``, ``field_arg``, ``value_arg`` and the ``secret_fields``;
    - a tool with a secret argument (``connect(password=...)``), or a
      structured output's schema by name (``ToolStrategy`` or
      ``ProviderStrategy``): ``secret_args`` maps names to argument names;
    - a tool with free-text arguments (``task(description=...)``): ``text_args``.

    In a watched tool, any argument or nested key whose name looks secret
    (``secret_name``) is hidden too, and every other value is searched. Each
    plain value gets its own new reference from ``store``; ``name_for(field)``
    is only its readable label. Then every value the store holds for the
    thread is replaced wherever the reply repeats it. ``wrap_model_call`` runs
    inside the model node, so the AIMessage that reaches state (and the
    checkpoint) already carries the reference; an error it raises carries
    references too. List it last among the middleware: one listed after it
    runs inside it and sees the raw reply.
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
        self.watched = frozenset(
            {*self.secret_args, *self.text_args, *([tool_name] if tool_name else [])}
        )
        if not self.watched:
            raise ValueError("give tool_name (a field/value tool), secret_args or text_args")

    def is_secret(self, name: object) -> bool:
        """A configured secret field, or a name that looks like one (``db_password``)."""
        if not isinstance(name, str):
            return False
        if name in self.secret_fields:
            return True
        return self.secret_name is not None and self.secret_name.search(name) is not None

    def rewrite(self, message: AIMessage, *, thread: Bucket = None) -> AIMessage:
        """The message with every plain secret replaced: key rules, then the value pass."""
        rewrite = _Rewrite(self, thread=thread)
        clean = rewrite.message(message)
        out = rewrite.values(clean, rewrite.known())
        assert isinstance(out, AIMessage)
        return out

    def rewrite_response(
        self,
        response: ModelResponse,
        *,
        thread: Bucket = None,
        schemas: Iterable[str] = (),
        rewrite: _Rewrite | None = None,
    ) -> ModelResponse:
        """A model step's whole result: replies, the structured response and its ToolMessage.

        ``schemas`` names the request's structured-output schemas (found from
        the request by :meth:`wrap_model_call`); ``thread`` is the conversation.
        ``rewrite``: the one an error of the same call already used (same references).
        """
        # In a model step's result a ToolMessage answers a structured output's tool call.
        answered = {m.name for m in response.result if isinstance(m, ToolMessage) and m.name}
        names = frozenset(schemas)
        if rewrite is None:
            rewrite = _Rewrite(self, names, thread)
        rewrite.watched |= answered
        result: list[BaseMessage] = [
            rewrite.message(m) if isinstance(m, AIMessage) else m for m in response.result
        ]
        structured = response.structured_response
        if structured is not None:
            shown = frozenset(answered) or names  # the schema that answered, if a tool did
            structured = rewrite.structured(structured, shown)
            if names and not answered:  # ProviderStrategy: the reply's text is the response
                result = [
                    rewrite.provider_text(m, names) if isinstance(m, AIMessage) else m
                    for m in result
                ]
        known = rewrite.known()
        result = [rewrite.values(m, known) for m in result]
        if structured is not None:
            structured = known.walk(structured, payload=True)
        return ModelResponse(result=result, structured_response=structured)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        _guard_run(self)
        call = _ModelCall(self, request)
        try:
            with _unstreamed():
                response = handler(call.request)
        except Exception as exc:  # noqa: BLE001 - every error is redacted, then raised again
            error = call.error(exc)
            if error is exc:
                raise
        else:
            return call.response(response)
        raise error

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        _guard_run(self)
        call = _ModelCall(self, request)
        try:
            with _unstreamed():
                response = await handler(call.request)
        except Exception as exc:  # noqa: BLE001 - every error is redacted, then raised again
            error = call.error(exc)
            if error is exc:
                raise
        else:
            return call.response(response)
        raise error

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """A tool's error (raised, or a ToolMessage with ``status="error"``) gets the value pass."""
        _guard_run(self)
        known = self._tool_known(request)
        try:
            result = handler(request)
        except Exception as exc:  # noqa: BLE001 - every error is redacted, then raised again
            error = self._tool_error(exc, known)
            if error is exc:
                raise
        else:
            return self._tool_result(result, known)
        raise error

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        _guard_run(self)
        known = self._tool_known(request)
        try:
            result = await handler(request)
        except Exception as exc:  # noqa: BLE001 - every error is redacted, then raised again
            error = self._tool_error(exc, known)
            if error is exc:
                raise
        else:
            return self._tool_result(result, known)
        raise error

    def _tool_known(self, request: ToolCallRequest) -> _Rewrite:
        return _Rewrite(self, thread=_bucket(request.runtime, request.state))

    def _tool_error(self, exc: Exception, rewrite: _Rewrite) -> BaseException:
        values = rewrite.known()
        if not values:
            return exc

        def message(m: AIMessage) -> AIMessage:
            out = rewrite.values(m, values)
            assert isinstance(out, AIMessage)
            return out

        return redact_exception(
            exc, lambda v: values.walk(v, payload=True), message, text=values.replace
        )

    def _tool_result(
        self, result: ToolMessage | Command[Any], rewrite: _Rewrite
    ) -> ToolMessage | Command[Any]:
        values = rewrite.known()
        if not values:
            return result
        if isinstance(result, Command):  # an error ToolMessage can come inside a Command
            update = _errors_in(result.update, lambda m: rewrite.values(m, values))
            return result if update is result.update else dataclasses.replace(result, update=update)
        if result.status != "error":
            return result
        out = rewrite.values(result, values)
        assert isinstance(out, ToolMessage)
        return out


def _errors_in(update: Any, clean: Callable[[BaseMessage], BaseMessage]) -> Any:
    """A ``Command``'s ``update`` with each error ``ToolMessage`` in it cleaned (else itself).

    ``update`` is a dict of channel values, a list of ``(channel, value)``
    pairs, or a message list; the messages sit in a channel's value or a list.
    """

    def item(value: Any) -> Any:
        if isinstance(value, ToolMessage) and value.status == "error":
            return clean(value)
        if isinstance(value, list):
            items = [item(v) for v in value]
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
            inner = item(value[1])
            return value if inner is value[1] else (value[0], inner)
        return value

    if isinstance(update, dict):
        out = {k: item(v) for k, v in update.items()}
        return update if all(out[k] is v for k, v in update.items()) else out
    return item(update)


class _ModelCall:
    """One model call: its bucket, its rewrite, and its errors redacted with the same references.

    A ``ToolStrategy``'s ``handle_errors`` is wrapped so that the error it
    reads (and the retry message it makes) is the redacted one; the policy
    itself (``True``, ``False``, a message, exception types, a callable) is
    applied as LangChain applies it. Pydantic validates the plain values, so a
    reply valid as written stays valid; only the error's text changes.
    """

    def __init__(self, middleware: SecretRedactionMiddleware, request: ModelRequest) -> None:
        self.m = middleware
        fmt = request.response_format
        self.format = fmt
        self.names = schema_names(fmt)
        self.rewrite = _Rewrite(middleware, self.names, _bucket(request.runtime, request.state))
        self.raised: set[int] = set()  # ids of the redacted errors the wrapped policy raised
        self.request = request
        if isinstance(fmt, ToolStrategy):
            strategy = copy.copy(fmt)
            strategy.handle_errors = self.policy(fmt.handle_errors)
            self.request = request.override(response_format=strategy)

    def response(self, response: ModelResponse) -> ModelResponse:
        if self.format is not None and not isinstance(self.format, ToolStrategy | ProviderStrategy):
            response = self.auto_retry(response)
        return self.m.rewrite_response(response, schemas=self.names, rewrite=self.rewrite)

    def error(self, exc: Exception) -> BaseException:
        if isinstance(exc, GraphBubbleUp):  # an interrupt or a hop: control flow, not an error
            return exc
        if id(exc) in self.raised:  # raised by the wrapped policy, inside LangChain's handler
            exc.__context__ = None  # the original it was raised while handling
            return exc
        return self.redact(exc)

    def redact(self, exc: Exception) -> BaseException:
        """``exc`` with the reply it keeps rewritten and every value of it replaced."""
        output = getattr(exc, "ai_message", None)
        if isinstance(output, AIMessage):
            self.clean_message(output)  # the key rules find this reply's secrets first
        known = self.rewrite.known()
        if not known:
            return exc
        return redact_exception(
            exc,
            lambda v: known.walk(v, payload=True),
            lambda m: self.clean_message(m),
            text=known.replace,
        )

    def clean_message(self, message: AIMessage) -> AIMessage:
        clean = self.rewrite.message(message)
        if isinstance(self.format, ProviderStrategy):
            clean = self.rewrite.provider_text(clean, self.names)
        out = self.rewrite.values(clean, self.rewrite.known())
        assert isinstance(out, AIMessage)
        return out

    def policy(self, handle: Any) -> Callable[[Exception], str]:
        """``handle_errors`` applied to the redacted error; raises it when it says not to retry."""

        def handle_errors(exc: Exception) -> str:
            clean = self.redact(exc)
            retry, text = _apply_policy(handle, clean)
            if not retry:
                self.raised.add(id(clean))
                raise clean
            return text

        return handle_errors

    def auto_retry(self, response: ModelResponse) -> ModelResponse:
        """A raw schema (``AutoStrategy``) resolved to ``ToolStrategy``: its default retry text.

        LangChain chose the strategy and made the retry message from the plain
        error; it is made again here from the redacted one.
        """
        if response.structured_response is not None:
            return response
        output = next((m for m in response.result if isinstance(m, AIMessage)), None)
        if output is None:
            return response
        calls = {c["id"]: c for c in output.tool_calls if c.get("id") and c["name"] in self.names}
        if not calls:
            return response
        schema: Any = getattr(self.format, "schema", self.format)
        specs = {spec.name: spec for spec in ToolStrategy(schema).schema_specs}
        result: list[BaseMessage] = []
        for message in response.result:
            call = calls.get(message.tool_call_id) if isinstance(message, ToolMessage) else None
            if call is not None and call["name"] in specs:
                try:
                    OutputToolBinding.from_schema_spec(specs[call["name"]]).parse(call["args"])
                except Exception as exc:  # noqa: BLE001 - the error LangChain quoted
                    clean = self.redact(StructuredOutputValidationError(call["name"], exc, output))
                    text = STRUCTURED_OUTPUT_ERROR_TEMPLATE.format(error=str(clean))
                    message = message.model_copy(update={"content": text})
            result.append(message)
        return ModelResponse(result=result, structured_response=response.structured_response)


def _apply_policy(handle: Any, exc: BaseException) -> tuple[bool, str]:
    """``(retry, message)`` for ``exc`` under ``ToolStrategy.handle_errors``, as LangChain's."""
    template = STRUCTURED_OUTPUT_ERROR_TEMPLATE.format(error=str(exc))
    if handle is False:
        return False, ""
    if handle is True:
        return True, template
    if isinstance(handle, str):
        return True, handle
    if isinstance(handle, type):
        return (True, template) if isinstance(exc, handle) else (False, "")
    if isinstance(handle, tuple):
        return (True, template) if isinstance(exc, handle) else (False, "")
    return True, str(handle(exc))
