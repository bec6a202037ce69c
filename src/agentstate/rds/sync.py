"""Mirror the ``requirements`` state key to ``/requirements.json`` after each turn.

State is the source of truth; the file is only what a user sees in the file
viewer. ``after_agent`` renders it from state once per turn, with secret
fields masked unless they already are references, and writes it only when
the text differs. The file is never parsed to decide anything, so whatever
the model writes there (``write_file`` is one of deepagents' tools) cannot
break a later turn: the next turn simply renders it again. Taught in notebook 02.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware

from agentstate.core.secrets import redact
from agentstate.rds.spec import load_spec
from agentstate.rds.storage import REQUIREMENTS_PATH, file_text, json_file, json_text

Read = Callable[[Mapping[str, Any], Any], dict[str, Any]]


def state_requirements(state: Mapping[str, Any], runtime: Any) -> dict[str, Any]:
    """The requirements held in state (the default thing to mirror)."""
    return dict(state.get("requirements") or {})


class RequirementsSyncMiddleware(AgentMiddleware):
    """``after_agent``: render the requirements to the user-visible file when they changed."""

    def __init__(self, read: Read = state_requirements) -> None:
        super().__init__()
        # ``read(state, runtime)`` lets the cache-fix baseline mirror state merged with its cache.
        self._read = read
        self._secret_fields = [n for n, f in load_spec().fields.items() if f.secret]

    def after_agent(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any] | None:
        requirements = redact(self._read(state, runtime), self._secret_fields)
        if not requirements:
            return None
        if file_text(state.get("files"), REQUIREMENTS_PATH) == json_text(requirements):
            return None
        return {"files": {REQUIREMENTS_PATH: json_file(requirements)}}

    async def aafter_agent(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any] | None:
        return self.after_agent(state, runtime)
