"""The canonical tool calls of memory capture, built in one place (notebook 06).

Both the offline policy (what a well-behaved model would emit) and the
tool-only graph's guard (what the code lets through) build calls here, so a
rule such as "tags are exactly {role, msg_idx}" is written once.
"""

from __future__ import annotations

import hashlib
from typing import Any

from langchain_core.messages import BaseMessage, ChatMessage

FLUSH_EVERY = 6
BOOTSTRAP_LIMIT = 10


def call(name: str, **args: Any) -> dict[str, Any]:
    """A tool call in LangChain's dict form (the id is filled in when it is planned)."""
    return {"name": name, "args": args, "id": None, "type": "tool_call"}


def summary_of(role: str, msg_idx: int, content: str) -> str:
    """The default one-line summary: role, index and the first line, cut at 60 characters."""
    first = content.strip().splitlines()[0] if content.strip() else "(empty message)"
    return f"{role} #{msg_idx}: {first[:60]}"


def write_key(thread: str, what: str) -> str:
    """The ``idempotency_key`` of one write of a thread, e.g. ``<thread>:msg:7``.

    The server stores a write once per key, so a write sent again (a retry, a
    resent message after a failed run) lands once. A long thread id is hashed
    to keep the key within the server's 200 characters.
    """
    key = f"{thread}:{what}"
    return key if len(key) <= 200 else f"sha256:{hashlib.sha256(key.encode()).hexdigest()}"


def add_entry(
    vault_id: str,
    memory_id: str,
    role: str,
    msg_idx: int,
    content: str,
    summary: str | None = None,
    key: str | None = None,
) -> dict[str, Any]:
    """The one ``add_entry`` of a message: content verbatim, tags exactly {role, msg_idx}.

    ``key``: the write's ``idempotency_key`` (the guard's: thread and msg_idx).
    """
    args: dict[str, Any] = {
        "vault_id": vault_id,
        "memory_id": memory_id,
        "raw_entry": content,
        "summary": summary if summary is not None else summary_of(role, msg_idx, content),
        "tags": {"role": role, "msg_idx": msg_idx},
    }
    if key is not None:
        args["idempotency_key"] = key
    return call("add_entry", **args)


def bootstrap(vault_id: str, memory_id: str) -> list[dict[str, Any]]:
    """SESSION_START: ``get_context``, then ``list_entries(limit=10)``."""
    return [
        call("get_context", vault_id=vault_id, memory_id=memory_id),
        call("list_entries", vault_id=vault_id, memory_id=memory_id, limit=BOOTSTRAP_LIMIT),
    ]


def flush(
    vault_id: str, memory_id: str, content: str, key: str | None = None
) -> list[dict[str, Any]]:
    """A flush: ``await_consistency``, then ``put_context`` with ``content`` (and ``key``)."""
    args: dict[str, Any] = {"vault_id": vault_id, "memory_id": memory_id, "content": content}
    if key is not None:
        args["idempotency_key"] = key
    return [call("await_consistency", memory_id=memory_id), call("put_context", **args)]


def digest(messages: list[BaseMessage], memory_id: str) -> str:
    """A short, deterministic context document: how much was captured, the last user ask."""
    chat = [m for m in messages if isinstance(m, ChatMessage)]
    users = [str(m.content) for m in chat if m.role == "user" and str(m.content).strip()]
    last = users[-1].strip().splitlines()[0][:80] if users else "(none)"
    count = max((m.additional_kwargs.get("msg_idx") or 0 for m in chat), default=0)
    return f"Memory {memory_id}: {count} messages captured. Last user request: {last}"


def periodic_flush_due(msg_idx: int) -> bool:
    """True after every ``FLUSH_EVERY``-th message."""
    return msg_idx % FLUSH_EVERY == 0
