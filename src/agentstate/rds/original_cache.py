"""Broken baselines of stage 03, kept so tests prove they still fail.

- :class:`OriginalCacheMiddleware`: the original write-up's idea, a
  ``before_agent`` hook that puts a dict into ``runtime.config["configurable"]``.
  The middleware runtime (``langgraph.runtime.Runtime``) has no ``config``, so
  the first invoke raises ``AttributeError``.
- :class:`NaiveSharedCacheStorage`: a dict that really is shared (the caller
  puts it in the invoke config), written and read with no coordination. The
  tools of a batch run in parallel threads, so a reader sees anywhere from 0
  to all of its batch's writes (add ``ToolLatencyMiddleware`` to see the spread
  that real tool latency gives).
Taught in notebook 03.
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware

NAIVE_KEY = "requirements_cache"


class OriginalCacheMiddleware(AgentMiddleware):
    """``before_agent``: ``runtime.config["configurable"][...] = {}`` (fails today)."""

    def before_agent(self, state: dict[str, Any], runtime: Any) -> dict[str, Any] | None:
        runtime.config["configurable"][NAIVE_KEY] = {}
        return None


class NaiveSharedCacheStorage:
    """Dual write and merged read through an unguarded shared dict; readers do not wait."""

    def _cache(self, runtime: Any) -> dict[str, Any]:
        configurable = (getattr(runtime, "config", None) or {}).get("configurable") or {}
        if NAIVE_KEY not in configurable:
            raise KeyError(f"put a dict under config['configurable'][{NAIVE_KEY!r}] to invoke")
        return configurable[NAIVE_KEY]

    def read(self, state: dict[str, Any], runtime: Any) -> dict[str, Any]:
        return {**(state.get("requirements") or {}), **self._cache(runtime)}

    def write(self, state: dict[str, Any], runtime: Any, field: str, value: Any) -> dict[str, Any]:
        self._cache(runtime)[field] = value
        return {"requirements": {field: value}}
