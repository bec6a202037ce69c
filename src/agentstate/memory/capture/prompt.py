"""The capture prompt shared by both agents of notebook 06 (the ReAct baseline and the fix).

The rules are Mycelian Memory's capture rules: tools only, one ``add_entry`` per message with
tags ``{role, msg_idx}`` and the content verbatim, the bootstrap and flush
sequences, system messages never persisted. The baseline gets only this text
(prompt-only enforcement); the tool-only graph appends a line naming the
current message, and enforces the same rules in code.
"""

from __future__ import annotations

import re

from langchain_core.messages import BaseMessage, ChatMessage, SystemMessage

RULES = """You are the memory capture agent. You observe a conversation between a user and an
assistant and persist it with the memory tools. You never write chat text yourself: you
only call tools.
- Every user or assistant message: exactly one add_entry, raw_entry = the message content
  verbatim, tags = {{"role": <its role>, "msg_idx": <its index>}}, a one-line summary.
- SESSION_START: get_context once, then list_entries with limit 10.
- FLUSH_CONTEXT or SESSION_END: await_consistency, then put_context with a short context
  document for this memory.
- After a message whose msg_idx is a multiple of 6, flush the same way.
- System messages are control signals: never persist them.
vault_id: {vault_id}
memory_id: {memory_id}"""

_ID = re.compile(r"^(vault_id|memory_id): (\S+)$", re.M)


def system_prompt(vault_id: str, memory_id: str) -> str:
    """The capture rules with this memory's ids filled in."""
    return RULES.format(vault_id=vault_id, memory_id=memory_id)


def turn_line(message: BaseMessage) -> str:
    """What the tool-only graph tells the model about the message it must capture."""
    if isinstance(message, ChatMessage):
        idx = message.additional_kwargs.get("msg_idx")
        return f"Current message: role={message.role} msg_idx={idx} (capture it now)."
    return f"Current control message: {message.content}."


def ids_from(messages: list[BaseMessage]) -> tuple[str, str]:
    """(vault_id, memory_id) from the capture prompt among ``messages``."""
    for message in messages:
        if isinstance(message, SystemMessage) and isinstance(message.content, str):
            found = dict(_ID.findall(message.content))
            if len(found) == 2:
                return found["vault_id"], found["memory_id"]
    raise ValueError("no capture prompt (vault_id/memory_id lines) among the model's messages")
