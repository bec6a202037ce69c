"""A deterministic chat model that plays a script of replies.

Every lesson must reproduce offline and under nbval, so the default model is
not a language model at all: it returns the AIMessages (with parallel tool
calls) that a lesson scripts, in order. A script step may also be a function
of the incoming messages, for policies that react to what they are shown.
Running out of script raises :class:`ScriptExhaustedError` naming the model,
instead of silently starting over like ``FakeMessagesListChatModel``.

Used by every notebook; introduced in 01.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, PrivateAttr


class ScriptExhaustedError(RuntimeError):
    """The scripted model was asked for more replies than its script holds."""


def tool_call(name: str, /, **args: Any) -> dict[str, Any]:
    """One tool call in one line: ``tool_call("store_requirement", field_name="engine", ...)``.

    The id is filled in by the model when it emits the reply (:func:`with_ids`):
    ``<model>-<instance>-<reply>-<n>``, unique across model instances.
    """
    return {"name": name, "args": args, "id": None, "type": "tool_call"}


def with_ids(message: AIMessage, stem: str) -> AIMessage:
    """A copy of ``message`` whose missing ids are filled in from ``stem``.

    The reply gets ``<stem>-reply`` and its n-th tool call ``<stem>-<n>``;
    ids the message already has are kept. Offline models stamp every reply
    this way so ids never collide across replies or model instances.
    """
    calls = [
        {**c, "id": c.get("id") or f"{stem}-{i + 1}"} for i, c in enumerate(message.tool_calls)
    ]
    return AIMessage(
        content=message.content,
        tool_calls=calls,
        id=message.id or f"{stem}-reply",
        name=message.name,
    )


def reply(*calls: dict[str, Any], text: str = "") -> AIMessage:
    """An assistant reply with optional text and any number of parallel tool calls."""
    return AIMessage(content=text, tool_calls=[dict(c) for c in calls])


class OfflineChatModel(BaseChatModel):
    """What every offline model shares: its own logic picks the tool calls, so
    ``bind_tools`` returns the model, and each call is answered by
    :meth:`reply_to`.

    Reply and tool-call ids carry a random per-instance token, so a second
    model on a reused thread appends its replies instead of replacing the
    first model's (``add_messages`` replaces by id).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model_name: str = "offline"
    _token: str = PrivateAttr(default_factory=lambda: uuid.uuid4().hex[:8])

    @property
    def _llm_type(self) -> str:
        return "agentstate-offline"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> OfflineChatModel:
        """The model's own logic decides the calls, so binding tools changes nothing."""
        return self

    def reply_to(self, messages: Sequence[BaseMessage]) -> AIMessage:
        """The reply to ``messages`` (ids stamped with :func:`with_ids`)."""
        raise NotImplementedError

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.reply_to(messages))])


class ScriptedChatModel(OfflineChatModel):
    """Replays ``script`` one step per model call; ``bind_tools`` returns the model itself."""

    script: list[Any]
    """AIMessages, or callables ``messages -> AIMessage`` evaluated at call time."""
    model_name: str = "scripted"

    _position: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "agentstate-scripted"

    @property
    def position(self) -> int:
        """How many replies have been played so far."""
        return self._position

    @property
    def remaining(self) -> int:
        """How many scripted replies are left."""
        return len(self.script) - self._position

    @property
    def seen(self) -> list[list[BaseMessage]]:
        """The message lists the model was called with, in order."""
        return list(self._calls)

    def reply_to(self, messages: Sequence[BaseMessage]) -> AIMessage:
        """The next step of the script (called with ``messages`` if it is a function)."""
        with self._lock:
            index = self._position
            if index >= len(self.script):
                raise ScriptExhaustedError(
                    f"ScriptedChatModel {self.model_name!r} ran out of script: it holds "
                    f"{len(self.script)} replies and was asked for reply {index + 1}"
                )
            self._position += 1
            self._calls.append(list(messages))
        step = self.script[index]
        message = step(list(messages)) if callable(step) else step
        if not isinstance(message, AIMessage):
            raise TypeError(
                f"ScriptedChatModel {self.model_name!r}: script step {index + 1} produced "
                f"{type(message).__name__}, expected AIMessage"
            )
        return with_ids(message, f"{self.model_name}-{self._token}-{index + 1}")
