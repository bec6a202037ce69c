"""Simulated tool latency, so races show up the way they do with real tools.

Real tools spend milliseconds on I/O; scripted lessons do not. Adding the same
seeded random delay before every tool call lets a lesson compare a broken and
a fixed design under identical timing. Used by notebook 03.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware


class ToolLatencyMiddleware(AgentMiddleware):
    """Sleep a random ``0..max_delay`` seconds before each tool call (seeded, thread-safe)."""

    def __init__(self, max_delay: float = 0.005, seed: int | None = None) -> None:
        super().__init__()
        self.max_delay = max_delay
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def _delay(self) -> float:
        with self._lock:
            return self._random.uniform(0, self.max_delay)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        time.sleep(self._delay())
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        await asyncio.sleep(self._delay())
        return await handler(request)


class SlowToolMiddleware(AgentMiddleware):
    """Make the named tools take ``seconds`` longer (to show a reader's timeout)."""

    def __init__(self, tool_name: str, seconds: float) -> None:
        super().__init__()
        self.tool_name = tool_name
        self.seconds = seconds

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        if request.tool_call["name"] == self.tool_name:
            time.sleep(self.seconds)
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        if request.tool_call["name"] == self.tool_name:
            await asyncio.sleep(self.seconds)
        return await handler(request)
