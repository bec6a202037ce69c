"""Lesson 01's file plumbing: read a JSON file from deepagents' ``files``, and write one back.

deepagents keeps each file of its ``files`` state as a ``FileData`` record
(its text and timestamps). :func:`fields_in` reads the JSON object a file
holds; :func:`write_file` is what a file tool returns: a ``Command`` that
writes one file whole and replies to the model. Notebook 01
(``notebooks/_src/01_file_based_storage.py``) builds its broken tool and its
fix on these, so its page shows only the read, the change and the write.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from agentstate._extras import needs
from agentstate.rds.storage import REQUIREMENTS_PATH, read_json_file

with needs("lessons", "agentstate.lessons.filestate"):
    from deepagents.backends.utils import create_file_data


def fields_in(files: Mapping[str, Any] | None, path: str = REQUIREMENTS_PATH) -> dict[str, Any]:
    """The JSON object the file at ``path`` holds in deepagents' ``files`` (``{}`` if none)."""
    data = (files or {}).get(path)
    return read_json_file({path: data}, path) if data else {}


def write_file(runtime: ToolRuntime, path: str, fields: dict[str, Any], reply: str) -> Command:
    """A tool's result: the file at ``path`` written whole as the JSON of ``fields``, and
    ``reply`` to the model as the call's ``ToolMessage``."""
    done = ToolMessage(reply, tool_call_id=runtime.tool_call_id)
    data = create_file_data(json.dumps(fields))
    return Command(update={"files": {path: data}, "messages": [done]})
