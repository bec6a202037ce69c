"""What notebook 03's teaching ``TurnCache`` keeps besides its mechanism.

The page writes only the four steps of the turn cache (wait, merge, record,
drop). Its settings and their checks, the table of batches it shares between
the calls of a reply, the condition its readers wait on and the error of a
reader that waited too long come from :class:`TurnCacheBase`, so the page
shows the mechanism and nothing else. The package's own cache is
:class:`agentstate.core.TurnCacheMiddleware`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import ToolCall

from agentstate.core.reducers import merge_fields


def _tool_names(owner: str, role: str, names: Iterable[str]) -> frozenset[str]:
    if isinstance(names, str):  # frozenset("save") would be the letters s, a, v, e
        raise TypeError(f"{owner}: {role} must be tool names, not the string {names!r}")
    found = frozenset(names)
    if not found or not all(isinstance(n, str) and n for n in found):
        raise ValueError(f"{owner}: {role} must name at least one tool, got {names!r}")
    return found


def checked_settings(
    owner: str,
    writers: Iterable[str],
    readers: Iterable[str],
    key: str,
    reducer: Callable[[Any, Any], Any],
    timeout: float,
) -> tuple[frozenset[str], frozenset[str]]:
    """A turn cache's settings checked, one-line errors naming ``owner``; the tool-name sets.

    Shared by :class:`TurnCacheBase` and :class:`~agentstate.core.TurnCacheMiddleware`,
    so the teaching cache and the package's refuse the same settings.
    """
    writer_names = _tool_names(owner, "writers", writers)
    reader_names = _tool_names(owner, "readers", readers)
    if both := sorted(writer_names & reader_names):
        raise ValueError(f"{owner}: a tool cannot be both writer and reader: {', '.join(both)}")
    if not isinstance(key, str) or not key:
        raise TypeError(f"{owner}: key must be a state key's name, got {key!r}")
    if not callable(reducer):
        raise TypeError(f"{owner}: reducer must be a function, got {reducer!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ValueError(f"{owner}: timeout must be positive seconds, got {timeout!r}")
    return writer_names, reader_names


class TurnCacheBase(AgentMiddleware):
    """The settings, batches, condition and timeout error of notebook 03's teaching turn cache.

    ``batches`` maps a reply's id to {call id -> what that call wrote to ``key``};
    ``changed`` is the ``threading.Condition`` its readers wait on. Bad settings
    raise a one-line error before any agent is built.
    """

    def __init__(
        self,
        writers: Iterable[str],
        readers: Iterable[str],
        key: str,
        reducer: Callable[[Any, Any], Any] = merge_fields,
        timeout: float = 10.0,
    ) -> None:
        super().__init__()
        self.writers, self.readers = checked_settings(
            "TurnCacheBase", writers, readers, key, reducer, timeout
        )
        self.key, self.reducer, self.timeout = key, reducer, timeout
        self.batches: dict[str, dict[str, Any]] = {}
        self.changed = threading.Condition()

    def timed_out(self, call: ToolCall) -> TimeoutError:
        """The error a reader raises when its writers are still busy after ``timeout``."""
        return TimeoutError(f"{call['name']}: writers still busy after {self.timeout} s")
