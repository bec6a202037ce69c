"""The same-turn fix: a turn cache that is really shared, and readers that wait.

Inside one super-step the tools of a batch run in parallel threads and all
read the state from before the step, so a reader next to the writers sees
none of their writes (notebook 03). The fix has three parts:

- :class:`TurnCache`: one thread-safe object per invoke, put by the caller in
  ``config["configurable"]`` (the one place FACTS.md shows to be shared by
  identity with every tool, middleware hook and subagent tool). It records
  each written field and each finished writer call.
- :class:`CachedStateStorage`: dual write (cache and ``requirements`` state)
  and merged read (state, then the cache on top).
- :class:`BatchBarrierMiddleware`: before a reader runs, it finds the
  ``store_requirement`` calls of the reader's own AIMessage and waits until
  each has finished (successfully or not), with a timeout that returns a clear
  error instead of hanging.

:class:`TurnCachedAgent` creates a fresh cache per invoke and drops it when
the turn ends, so callers write no boilerplate. Taught in notebooks 03-04.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.config import get_config

from agentstate.rds.agents import assemble_fixed_agent

CACHE_KEY = "agentstate_turn_cache"
WRITER_TOOLS = frozenset({"store_requirement"})
READER_TOOLS = frozenset(
    {"get_collected_requirements", "validate_manifest", "generate_rds_manifest"}
)


class TurnCache:
    """Fields written during one turn, and which writer calls have finished."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._finished: set[str] = set()
        self._cond = threading.Condition()

    def put(self, field: str, value: Any) -> None:
        with self._cond:
            self._values[field] = value

    def finish(self, call_id: str) -> None:
        """Mark a writer call as done (stored or rejected) and wake waiting readers."""
        with self._cond:
            self._finished.add(call_id)
            self._cond.notify_all()

    def snapshot(self) -> dict[str, Any]:
        with self._cond:
            return dict(self._values)

    def wait_for(self, call_ids: Iterable[str], timeout: float) -> set[str]:
        """Block until every call in ``call_ids`` finished; return those still missing."""
        wanted = set(call_ids)
        with self._cond:
            self._cond.wait_for(lambda: wanted <= self._finished, timeout=timeout)
            return wanted - self._finished

    def __len__(self) -> int:
        with self._cond:
            return len(self._values)


def cache_from(config: dict[str, Any] | None) -> TurnCache | None:
    """The turn cache the caller put in ``config["configurable"]``, if any."""
    return ((config or {}).get("configurable") or {}).get(CACHE_KEY)


def cache_for(runtime: Any) -> TurnCache | None:
    """The turn cache seen from a tool runtime (``runtime.config``) or a middleware hook.

    A hook's runtime has no ``config``; there the running config comes from
    ``langgraph.config.get_config()``, whose ``configurable`` holds the
    caller's objects by identity.
    """
    config = getattr(runtime, "config", None)
    if config is None:
        try:
            config = get_config()
        except RuntimeError:  # not inside a running graph
            return None
    return cache_from(config)


class CachedStateStorage:
    """Dual write to the turn cache and to state; merged read. Without a cache: state only."""

    def read(self, state: dict[str, Any], runtime: Any) -> dict[str, Any]:
        merged = dict(state.get("requirements") or {})
        cache = cache_for(runtime)
        if cache is not None:
            merged.update(cache.snapshot())
        return merged

    def write(self, state: dict[str, Any], runtime: Any, field: str, value: Any) -> dict[str, Any]:
        cache = cache_for(runtime)
        if cache is not None:
            cache.put(field, value)
        return {"requirements": {field: value}}


def batch_writers(state: dict[str, Any], call_id: str) -> list[str]:
    """Ids of the writer calls in the AIMessage that holds ``call_id``."""
    for message in reversed(state.get("messages", [])):
        if isinstance(message, AIMessage) and any(c["id"] == call_id for c in message.tool_calls):
            return [c["id"] for c in message.tool_calls if c["name"] in WRITER_TOOLS]
    return []


class BatchBarrierMiddleware(AgentMiddleware):
    """Writers announce when they finish; readers wait for the writers of their batch."""

    def __init__(self, timeout: float = 10.0) -> None:
        super().__init__()
        self.timeout = timeout

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        call = request.tool_call
        cache = cache_for(request.runtime)
        if cache is None:
            return handler(request)
        if call["name"] in WRITER_TOOLS:
            try:
                return handler(request)
            finally:
                cache.finish(call["id"])
        if call["name"] in READER_TOOLS:
            missing = cache.wait_for(batch_writers(request.state, call["id"]), self.timeout)
            if missing:
                return ToolMessage(
                    content=(
                        f"Error: {call['name']} timed out after {self.timeout:g}s waiting for "
                        f"{len(missing)} store_requirement call(s) of the same reply; "
                        "nothing was read. Call it again in your next reply."
                    ),
                    tool_call_id=call["id"],
                    name=call["name"],
                    status="error",
                )
        return handler(request)


class TurnCachedAgent:
    """A compiled agent whose every invoke gets a fresh :class:`TurnCache`, dropped afterwards.

    The caller's config is copied, never mutated; ``graph`` is the compiled
    agent for anything else (state history, drawing). Invoking ``graph``
    directly runs without a cache: reads fall back to state, readers do not wait.
    """

    def __init__(self, graph: Any) -> None:
        self.graph = graph

    def _config(self, config: dict[str, Any] | None) -> dict[str, Any]:
        config = dict(config or {})
        config["configurable"] = {**(config.get("configurable") or {}), CACHE_KEY: TurnCache()}
        return config

    def invoke(self, input: Any, config: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        return self.graph.invoke(input, self._config(config), **kwargs)

    async def ainvoke(self, input: Any, config: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        return await self.graph.ainvoke(input, self._config(config), **kwargs)

    def stream(self, input: Any, config: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        """Like ``graph.stream``; the cache lives as long as the stream does."""
        yield from self.graph.stream(input, self._config(config), **kwargs)

    async def astream(self, input: Any, config: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        async for chunk in self.graph.astream(input, self._config(config), **kwargs):
            yield chunk

    def get_state(self, config: dict[str, Any]) -> Any:
        return self.graph.get_state(config)

    def get_state_history(self, config: dict[str, Any]) -> Any:
        return self.graph.get_state_history(config)


def build_turn_cache_agent(
    model: BaseChatModel,
    *,
    timeout: float = 10.0,
    secrets: Any = None,
    middleware: Sequence[AgentMiddleware] = (),
    checkpointer: Any = None,
) -> TurnCachedAgent:
    """Stage 03: the stage 02 agent plus the turn cache, dual write and waiting readers."""
    return TurnCachedAgent(
        assemble_fixed_agent(
            model,
            CachedStateStorage(),
            secrets=secrets,
            middleware=[BatchBarrierMiddleware(timeout), *middleware],
            checkpointer=checkpointer,
        )
    )
