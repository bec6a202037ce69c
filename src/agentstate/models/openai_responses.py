"""The OpenAI Responses API wire format, for the loopback OpenAI server (``POST /v1/responses``).

``ChatOpenAI(use_responses_api=True)`` talks to ``/v1/responses`` instead of
``/v1/chat/completions``, and keeps each tool call twice in the
``AIMessage``: in ``tool_calls`` and as a ``function_call`` content block
whose ``id`` (``fc_...``) is not the call's id (``call_id``). Notebook 02's
secret redaction has to be proven against that shape with the real client, so
:class:`agentstate.models.openai_replay.ReplayServer` speaks this format too:
the request's ``input`` items become LangChain messages, and a reply becomes a
``response`` object (a ``message`` item, one ``function_call`` item per call)
or, when the request says ``"stream": true``, the event sequence real servers
send (``response.created``, text deltas, each call's arguments in two
``response.function_call_arguments.delta`` halves, ``response.completed``).
A reply whose ``response_metadata`` says ``finish_reason="length"`` ends
``incomplete`` (``max_output_tokens``), as a cut-off reply does. Used by
``tests/test_secrets_responses.py`` and ``tests/test_openai_wire.py``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from agentstate.models.replay_http import WireFormatError

RESPONSES_PATH = "/v1/responses"
TEXT_CHUNK = 8  # characters per streamed text delta


def _text(content: Any) -> str:
    """An input item's ``content`` as text (a string, or ``input_text``/``output_text`` parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


def _call(item: dict[str, Any], i: int) -> dict[str, Any]:
    call_id, name = item.get("call_id"), item.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str) or not name:
        raise WireFormatError(f"input {i}: a function_call needs a string 'call_id' and 'name'")
    try:
        args = json.loads(item.get("arguments") or "{}")
    except json.JSONDecodeError:
        raise WireFormatError(
            f"input {i}: function_call {call_id!r} has arguments that are not JSON"
        ) from None
    if not isinstance(args, dict):
        raise WireFormatError(f"input {i}: function_call {call_id!r} arguments are not an object")
    return {"name": name, "args": args, "id": call_id}


def to_messages(body: dict[str, Any]) -> list[BaseMessage]:
    """``instructions`` + ``input`` items -> LangChain messages, tool names restored by call id."""
    wire = body.get("input")
    if isinstance(wire, str):
        wire = [{"role": "user", "content": wire}]
    if not isinstance(wire, list) or not wire:
        raise WireFormatError("'input' must be a string or a non-empty list")
    out: list[BaseMessage] = []
    if isinstance(body.get("instructions"), str):
        out.append(SystemMessage(body["instructions"]))
    names: dict[str, str] = {}
    for i, item in enumerate(wire):
        if not isinstance(item, dict):
            raise WireFormatError(f"input {i}: an item must be an object")
        kind, role = item.get("type", "message"), item.get("role")
        if kind == "function_call":
            call = _call(item, i)
            names[call["id"]] = call["name"]
            last = out[-1] if out else None
            if isinstance(last, AIMessage):  # the calls of one reply follow its text
                out[-1] = last.model_copy(update={"tool_calls": [*last.tool_calls, call]})
            else:
                out.append(AIMessage(content="", tool_calls=[call]))
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if call_id not in names:
                raise WireFormatError(f"input {i}: output for unknown call {call_id!r}")
            output = item.get("output")
            text = output if isinstance(output, str) else json.dumps(output)
            out.append(ToolMessage(text, tool_call_id=call_id, name=names[call_id]))
        elif kind == "reasoning":
            continue
        elif kind == "message" and role in ("system", "developer"):
            out.append(SystemMessage(_text(item.get("content"))))
        elif kind == "message" and role == "user":
            out.append(HumanMessage(_text(item.get("content"))))
        elif kind == "message" and role == "assistant":
            out.append(AIMessage(content=_text(item.get("content"))))
        else:
            raise WireFormatError(f"input {i}: unknown item type {kind!r} (role {role!r})")
    return out


def _reply_text(message: AIMessage) -> str:
    return message.content if isinstance(message.content, str) else message.text


def output_items(message: AIMessage) -> list[dict[str, Any]]:
    """A reply as Responses ``output`` items: its text, then one ``function_call`` per call.

    ``invalid_tool_calls`` go out with their raw argument text, as a model that
    wrote broken JSON sends them.
    """
    items: list[dict[str, Any]] = []
    text = _reply_text(message)
    if text:
        items.append(
            {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex[:24]}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    calls = [(c["id"], c["name"], json.dumps(c["args"])) for c in message.tool_calls]
    calls += [
        (c.get("id"), c.get("name") or "", c.get("args") or "") for c in message.invalid_tool_calls
    ]
    for call_id, name, arguments in calls:
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{uuid.uuid4().hex[:24]}",  # the item's id: never the call's
                "call_id": call_id or f"call_{uuid.uuid4().hex[:12]}",
                "name": name,
                "arguments": arguments,
                "status": "completed",
            }
        )
    return items


def _cut_off(message: AIMessage) -> bool:
    return message.response_metadata.get("finish_reason") == "length"


def response(
    message: AIMessage,
    request: dict[str, Any],
    *,
    output: list[dict[str, Any]] | None = None,
    response_id: str | None = None,
) -> dict[str, Any]:
    """A ``response`` object for one reply (with ``output`` given: that list instead)."""
    cut = _cut_off(message)
    body: dict[str, Any] = {
        "id": response_id or f"resp_{uuid.uuid4().hex}",
        "object": "response",
        "created_at": int(time.time()),
        "model": str(request.get("model") or "replay"),
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "output": output_items(message) if output is None else output,
        "parallel_tool_calls": bool(request.get("parallel_tool_calls", True)),
        "tool_choice": request.get("tool_choice") or "auto",
        "tools": request.get("tools") or [],
        "usage": {
            "input_tokens": 0,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 0,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 0,
        },
    }
    if isinstance(request.get("text"), dict):  # a structured output's format, echoed back
        body["text"] = request["text"]
    return body


def response_events(message: AIMessage, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The same reply as the stream of events a Responses server sends."""
    final = response(message, request)
    seq = iter(range(1_000_000))

    def event(kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "sequence_number": next(seq), **fields}

    yield event("response.created", response={**final, "status": "in_progress", "output": []})
    for index, item in enumerate(final["output"]):
        where = {"output_index": index}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield event("response.output_item.added", item={**item, "content": []}, **where)
            part = {"item_id": item["id"], "content_index": 0, **where}
            empty = {"type": "output_text", "text": "", "annotations": []}
            yield event("response.content_part.added", part=empty, **part)
            for start in range(0, len(text), TEXT_CHUNK):
                delta = text[start : start + TEXT_CHUNK]
                yield event("response.output_text.delta", delta=delta, logprobs=[], **part)
            yield event("response.output_text.done", text=text, logprobs=[], **part)
            yield event("response.content_part.done", part=item["content"][0], **part)
        else:
            arguments = item["arguments"]
            half = len(arguments) // 2
            yield event("response.output_item.added", item={**item, "arguments": ""}, **where)
            for delta in (arguments[:half], arguments[half:]):
                yield event(
                    "response.function_call_arguments.delta",
                    delta=delta,
                    item_id=item["id"],
                    **where,
                )
            yield event(
                "response.function_call_arguments.done",
                arguments=arguments,
                item_id=item["id"],
                **where,
            )
        yield event("response.output_item.done", item=item, **where)
    done = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    yield event(done, response=final)
