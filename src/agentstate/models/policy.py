"""An offline chat model whose reply is a function of the messages it is shown.

Serves the lessons of notebooks 02-06 from a LangGraph server.

A served graph (``langgraph dev``, see :mod:`agentstate.served`) must answer
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
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, PrivateAttr

from agentstate.models.scripted import with_ids

Policy = Callable[[list[BaseMessage]], AIMessage]


class PolicyChatModel(BaseChatModel):
    """Replies with ``policy(messages)``; never runs out; ``bind_tools`` returns itself."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    policy: Any
    """A callable ``messages -> AIMessage``."""
    model_name: str = "policy"

    _token: str = PrivateAttr(default_factory=lambda: uuid.uuid4().hex[:8])
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

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> PolicyChatModel:
        """The policy decides which tools to call, so binding them changes nothing."""
        return self

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

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.reply_to(messages))])
