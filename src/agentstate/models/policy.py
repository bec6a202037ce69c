"""An offline chat model whose reply is a function of the messages it is shown.

Serves the lessons of notebooks 02-06 from a LangGraph server.

A served graph (``langgraph dev``, see :mod:`agentstate.lessons.served`) must answer
any number of runs on any number of threads, so a script that runs out is the
wrong model there. :class:`PolicyChatModel` calls ``policy(messages)`` for every
reply and keeps nothing between calls (no history, so a long-running server
does not grow), and it stamps each reply and tool call with an id made of a
random per-instance token and a counter: a new model (a restarted server) on
a reused thread appends its replies instead of overwriting earlier ones.

Used by the served graphs and by the OpenAI-compatible replay server
(:mod:`agentstate.models.openai_replay`); the lessons themselves use
:class:`~agentstate.models.scripted.ScriptedChatModel`.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import PrivateAttr

from agentstate.models.scripted import OfflineChatModel, with_ids

Policy = Callable[[list[BaseMessage]], AIMessage]


class PolicyChatModel(OfflineChatModel):
    """Replies with ``policy(messages)``; never runs out; ``bind_tools`` returns itself."""

    policy: Any
    """A callable ``messages -> AIMessage``."""
    model_name: str = "policy"

    _counter: Any = PrivateAttr(default_factory=itertools.count)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def model_post_init(self, context: Any) -> None:
        if not callable(self.policy):
            raise TypeError(
                f"PolicyChatModel {self.model_name!r}: policy must be a callable "
                f"messages -> AIMessage, got {type(self.policy).__name__}"
            )

    @property
    def _llm_type(self) -> str:
        return "agentstate-policy"

    def reply_to(self, messages: Sequence[BaseMessage]) -> AIMessage:
        """The policy's reply to ``messages``, with fresh ids on the reply and its calls."""
        message = self.policy(list(messages))
        if not isinstance(message, AIMessage):
            raise TypeError(
                f"PolicyChatModel {self.model_name!r}: the policy returned "
                f"{type(message).__name__}, expected AIMessage"
            )
        with self._lock:
            n = next(self._counter) + 1
        return with_ids(message, f"{self.model_name}-{self._token}-{n}")
