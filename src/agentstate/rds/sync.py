"""Mirror the ``requirements`` state key to ``/requirements.json`` after each turn.

State is the source of truth; the file is only what a user sees in the file
viewer. ``after_agent`` writes it once per turn (only when it changed), with
secret fields masked unless they already are references. Taught in notebook 02.
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware

from agentstate.rds.secrets import redact
from agentstate.rds.spec import load_spec
from agentstate.rds.storage import REQUIREMENTS_PATH, json_file, read_json_file


class RequirementsSyncMiddleware(AgentMiddleware):
    """``after_agent``: write the merged requirements to the user-visible file."""

    def __init__(self, read=None) -> None:
        super().__init__()
        # ``read(state, runtime)`` lets stage 03 mirror state merged with its turn cache.
        self._read = read or (lambda state, runtime: dict(state.get("requirements") or {}))
        self._secret_fields = [n for n, f in load_spec().fields.items() if f.secret]

    def after_agent(self, state: dict[str, Any], runtime: Any) -> dict[str, Any] | None:
        requirements = redact(self._read(state, runtime), self._secret_fields)
        if not requirements:
            return None
        if read_json_file(state.get("files"), REQUIREMENTS_PATH) == requirements:
            return None
        return {"files": {REQUIREMENTS_PATH: json_file(requirements)}}
