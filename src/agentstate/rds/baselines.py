"""The commonly proposed caches, kept beside the fixes so tests prove what they do.

- :class:`OriginalCacheMiddleware` (notebook 03, broken): a ``before_agent``
  hook that puts a dict into ``runtime.config["configurable"]``. The
  middleware runtime (``langgraph.runtime.Runtime``) has no ``config``, so
  the first invoke raises ``AttributeError``.
- :class:`CacheFixMiddleware` (notebook 04, the commonly proposed fix made to run):
  opens the thread's turn cache before the turn and drops it after, so the
  parent's readers see the fields its subagent wrote during this turn only:
  they never reach state, so the next turn and a restart see nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langgraph.config import get_config

from agentstate.rds.storage import NAIVE_KEY, TurnCaches


class OriginalCacheMiddleware(AgentMiddleware):
    """``before_agent``: ``runtime.config["configurable"][...] = {}`` (fails today)."""

    def before_agent(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any] | None:
        runtime.config["configurable"][NAIVE_KEY] = {}
        return None

    async def abefore_agent(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)


class CacheFixMiddleware(AgentMiddleware):
    """Opens the thread's cache in ``before_agent`` and drops it in ``after_agent``.

    Attach it to the parent only (a subagent's ``before_agent`` would wipe the
    parent's cache), and before any middleware whose ``after_agent`` still
    reads the cache: ``after_agent`` hooks run in reverse order.
    """

    def __init__(self, caches: TurnCaches) -> None:
        super().__init__()
        self.caches = caches

    def before_agent(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any] | None:
        self.caches.open(TurnCaches.thread_of(get_config()))
        return None

    async def abefore_agent(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)

    def after_agent(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any] | None:
        self.caches.close(TurnCaches.thread_of(get_config()))
        return None

    async def aafter_agent(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any] | None:
        return self.after_agent(state, runtime)
