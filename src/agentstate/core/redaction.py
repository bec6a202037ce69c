"""Keep secrets out of state, streams, files and checkpoints: references in, plain values out.

:class:`SecretRedactionMiddleware` moves a plain value the model offers into
a :class:`~agentstate.core.secrets.SecretStore` inside the model call,
*before* the reply is written to state, and rewrites the reply to carry the
value's own reference (a new one per value, see ``core.secrets``). It
rewrites every place a provider puts tool arguments: ``tool_calls``,
``invalid_tool_calls`` (their raw text and LangChain's ``error``, which quotes
it), Anthropic ``tool_use`` blocks in ``AIMessage.content`` (``input`` and the
streamed ``partial_json``), and OpenAI's raw ``additional_kwargs`` copy. It
looks inside values (JSON text, dicts, lists), into free text (``name: value``,
``name = value``, ``name is value``, quoted or multi-word, and JSON
``field_name``/``value`` pairs), into a structured response and its
``ToolMessage``, and replaces an echo of a hidden value (4 characters or more)
in the reply's text. A field name that cannot name a secret is shortened, so
it never ends the run: the tool gets the call and can refuse it. The model
call runs untraced by ``stream_mode="messages"`` (LangGraph's ``nostream``
tag), so the stream carries the redacted reply, whole. What it cannot cover
is listed in ``docs/secrets.md``. Taught in notebook 02.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.constants import TAG_NOSTREAM
from pydantic import BaseModel

from agentstate.core.secrets import SecretStore, is_secret_ref

# Field and argument names that hold a secret whatever the tool calls them.
SECRET_NAME = re.compile(
    r"pass(word|wd|phrase)|secret|token|api[_-]?key|private[_-]?key|credential", re.I
)
_BARE_WORD = r"""[^\s,;}\]"'\\)][^\s,;}\])]*"""
# ``"password": "x"``, ``password=x``, ``password: two words`` or ``password is x`` in free
# text; keys may be quoted or escaped-quoted (JSON inside a JSON string). A bare value runs
# over several words up to a line end, ``,``, ``;`` or the next ``name:`` pair.
_TEXT_PAIR = re.compile(
    r"""(?<![\w$.-])(?P<key>(?P<kq>\\?["'])?(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?:\\?["'])?"""
    r"""(?:\s*[:=]\s*|[ \t]+is[ \t]+))"""
    r"""(?:\\"(?P<edq>.*?)\\"|"(?P<dq>(?:[^"\\]|\\.)*)"|'(?P<sq>[^'\n]*)'"""
    rf"""|(?P<bare>{_BARE_WORD}(?:[ \t]+(?![A-Za-z_][\w.-]*\s*[:=]){_BARE_WORD})*))"""
)
MIN_ECHO = 4  # shorter hidden values are not searched for in the reply's text
_MAX_REF_NAME = 64


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


def _json_container(text: str) -> Any:
    """``text`` parsed, if it is a JSON object or array; else None."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        parsed = json.loads(stripped)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict | list) else None


class _Rewrite:
    """One reply's rewrite: every plain value hidden once, with the same reference everywhere."""

    def __init__(self, middleware: SecretRedactionMiddleware, tools: Iterable[str] = ()) -> None:
        self.m = middleware
        self.watched = middleware.watched | frozenset(tools)  # plus a structured output's tool
        self.found: dict[str, str] = {}  # plain text -> its reference, for this reply

    # --- values ---

    def hide(self, field: Any, value: Any) -> Any:
        if value is None or is_secret_ref(value):
            return value
        plain = value if isinstance(value, str) else json.dumps(value, default=str)
        if plain in self.found:
            return self.found[plain]
        try:
            ref = self.m.store.put(self.m.name_for(_ref_name(field)), plain)
        except ValueError:  # a name_for that made a bad name: never end the run over it
            ref = self.m.store.put("secret", plain)
        self.found[plain] = ref
        if not isinstance(value, str):
            self.found.setdefault(str(value), ref)
        return ref

    def scrub(self, value: Any) -> Any:
        """``value`` with every secret inside it (keys, field/value pairs, text) hidden."""
        if isinstance(value, str):
            parsed = _json_container(value)
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
        """Hide the value of every secret-looking pair in free text (and field/value pairs)."""
        matches = list(_TEXT_PAIR.finditer(text))
        if not matches:
            return text
        secret_field = next(
            (
                v
                for m in matches
                if m["name"] == self.m.field_arg and self.m.is_secret(v := _pair_value(m))
            ),
            None,
        )

        def swap(match: re.Match[str]) -> str:
            name = match["name"]
            if self.m.is_secret(name):
                field = name
            elif secret_field is not None and name == self.m.value_arg:
                field = secret_field
            else:
                return _requote(match, self.scrub_text(_pair_value(match)))  # pairs inside
            value = _pair_value(match)
            if is_secret_ref(value):
                return match[0]
            ref = self.hide(field, value)
            return _requote(match, ref, bare_quote='"' if match["kq"] else "")

        return _TEXT_PAIR.sub(swap, text)

    def echo(self, text: str) -> str:
        """``text`` with every value hidden in this reply replaced by its reference."""
        for plain in sorted(self.found, key=len, reverse=True):
            if len(plain) >= MIN_ECHO and plain in text:
                text = text.replace(plain, self.found[plain])
        return text

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

    def invalid(self, call: Mapping[str, Any]) -> dict[str, Any]:
        clean = dict(call)
        if call.get("name") in self.watched or call.get("name") is None:
            if isinstance(call.get("args"), str):
                clean["args"] = self.scrub(call["args"])
            if isinstance(call.get("error"), str):
                clean["error"] = self.echo(self.scrub_text(call["error"]))
        return clean

    def content(self, content: Any, calls: Mapping[str, dict[str, Any]]) -> Any:
        """Anthropic content blocks: ``tool_use`` inputs from the rewritten calls, text echoes."""
        if isinstance(content, str):
            return self.echo(content)
        if not isinstance(content, list):
            return content
        blocks = []
        for block in content:
            if not isinstance(block, dict):
                blocks.append(block)
                continue
            b = dict(block)
            block_id = b.get("id")
            call = calls.get(block_id) if isinstance(block_id, str) else None
            name = b.get("name", "")
            for key in ("input", "args"):
                if isinstance(b.get(key), dict) and b[key]:
                    b[key] = call["args"] if call is not None else self.args(name, b[key])
            if isinstance(b.get("partial_json"), str) and b["partial_json"]:
                if call is not None:
                    b["partial_json"] = json.dumps(call["args"])
                elif name in self.watched:
                    b["partial_json"] = self.scrub(b["partial_json"])
            for key in ("text", "partial_json"):
                if isinstance(b.get(key), str):
                    b[key] = self.echo(b[key])
            blocks.append(b)
        return blocks

    def echo_content(self, content: Any) -> Any:
        """Only the text of ``content`` (a string or blocks), echoes replaced."""
        if isinstance(content, str):
            return self.echo(content)
        if not isinstance(content, list):
            return content
        return [
            {**b, "text": self.echo(b["text"])}
            if isinstance(b, dict) and isinstance(b.get("text"), str)
            else b
            for b in content
        ]

    def message(self, message: AIMessage) -> AIMessage:
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

    def structured(self, value: Any) -> Any:
        """A structured response (dict, pydantic model, dataclass) with secrets hidden."""
        if isinstance(value, BaseModel):
            data = value.model_dump()
            clean = self.known(self.scrub(data))
            changed = {k: v for k, v in clean.items() if v != data.get(k)}
            return value.model_copy(update=changed) if changed else value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            data = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            clean = self.known(self.scrub(data))
            changed = {k: v for k, v in clean.items() if v != data[k]}
            return dataclasses.replace(value, **changed) if changed else value
        return self.known(self.scrub(value))

    def known(self, value: Any) -> Any:
        """Values equal to a plain value hidden in this reply become its reference."""
        if isinstance(value, str):
            return self.found.get(value, value)
        if isinstance(value, Mapping):
            return {k: self.known(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.known(v) for v in value]
        return value


def _requote(match: re.Match[str], value: str, bare_quote: str = "") -> str:
    """The pair again with ``value``, quoted the way the original value was."""
    if value == _pair_value(match) and not bare_quote:
        return match[0]
    if match["edq"] is not None:
        return f'{match["key"]}\\"{value}\\"'
    if match["dq"] is not None:
        return f'{match["key"]}"{value}"'
    if match["sq"] is not None:
        return f"{match['key']}'{value}'"
    return f"{match['key']}{bare_quote}{value}{bare_quote}"


def _pair_value(match: re.Match[str]) -> str:
    return next(match[g] for g in ("edq", "dq", "sq", "bare") if match[g] is not None)


class SecretRedactionMiddleware(AgentMiddleware):
    """Rewrite plain secrets in the model's replies into references, before state sees them.

    Configure which tools it watches (others are left alone):

    - a field/value tool (``store_requirement(field_name="password", value=...)``):
      ``tool_name``, ``field_arg``, ``value_arg`` and the ``secret_fields``;
    - a tool with a secret argument (``connect(password=...)``, or a
      ``ToolStrategy`` schema's name): ``secret_args`` maps tool names to argument names;
    - a tool with free-text arguments (``task(description=...)``): ``text_args``.

    In a watched tool, any argument or nested key whose name looks secret
    (``secret_name``) is hidden too, and every other value is searched. Each
    plain value gets its own new reference from ``store``; ``name_for(field)``
    is only its readable label. ``wrap_model_call`` runs inside the model
    node, so the AIMessage that reaches state (and the checkpoint) already
    carries the reference.
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

    def rewrite(self, message: AIMessage) -> AIMessage:
        """The message with every plain secret in its tool calls and content replaced."""
        return _Rewrite(self).message(message)

    def rewrite_response(self, response: ModelResponse) -> ModelResponse:
        """A model step's whole result: replies, the structured response and its ToolMessage."""
        # In a model step's result a ToolMessage answers a structured output's tool call.
        answered = {m.name for m in response.result if isinstance(m, ToolMessage) and m.name}
        rewrite = _Rewrite(self, answered)
        result: list[BaseMessage] = [
            rewrite.message(m) if isinstance(m, AIMessage) else m for m in response.result
        ]
        structured, before = response.structured_response, len(rewrite.found)
        if structured is not None:
            structured = rewrite.structured(structured)
        result = [
            m.model_copy(update={"content": rewrite.echo(m.content)})
            if isinstance(m, ToolMessage) and isinstance(m.content, str)
            else m
            for m in result
        ]
        # A value first seen in the structured response may be echoed in the reply's text.
        if len(rewrite.found) > before:
            result = [
                m.model_copy(update={"content": rewrite.echo_content(m.content)})
                if isinstance(m, AIMessage)
                else m
                for m in result
            ]
        return ModelResponse(result=result, structured_response=structured)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        with _unstreamed():
            response = handler(request)
        return self.rewrite_response(response)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        with _unstreamed():
            response = await handler(request)
        return self.rewrite_response(response)
