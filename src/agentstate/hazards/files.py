"""Hazards of deepagents' ``files`` under parallel writes (notebook 01).

deepagents keeps files in state under ``files``; its reducer lets a later
write of a path replace the whole file. A custom tool that reads a file and
writes it back loses the other calls' changes; deepagents' own file tools
refuse a second change of one path in one reply from the release that added
that guard.
"""

from __future__ import annotations

import json
from typing import Any

from deepagents import create_deep_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agentstate.hazards.registry import Result, reproduced_unless
from agentstate.hazards.writes import FIELDS, USER, one_reply
from agentstate.models.scripted import ScriptedChatModel, reply, tool_call

PATH = "/requirements.json"


def file_text(files: dict[str, Any], path: str) -> str:
    """A file's text from deepagents' ``files``, whichever form this release stores."""
    data = files.get(path)
    if data is None:
        return ""
    content = data["content"] if isinstance(data, dict) else data
    return "\n".join(content) if isinstance(content, list) else str(content)


def file_data(text: str) -> Any:
    """deepagents' file value for ``text`` (its own helper where this release has one)."""
    try:
        from deepagents.backends.utils import create_file_data
    except ImportError:  # the oldest releases
        from datetime import UTC, datetime

        now = datetime.now(UTC).isoformat()
        return {"content": text.split("\n"), "created_at": now, "modified_at": now}
    return create_file_data(text)


@tool
def store_requirement(field_name: str, value: str, runtime: ToolRuntime) -> Command[Any]:
    """Read /requirements.json, add one field, write the file back."""
    text = file_text(runtime.state.get("files", {}), PATH)
    fields = json.loads(text) if text else {}
    fields[field_name] = value
    done = ToolMessage(f"stored {field_name}", tool_call_id=runtime.tool_call_id)
    return Command(update={"files": {PATH: file_data(json.dumps(fields))}, "messages": [done]})


def custom_tool_rewrites_the_file() -> Result:
    """Five read-modify-write calls of one reply keep one field."""
    calls = [tool_call("store_requirement", field_name=k, value=v) for k, v in FIELDS.items()]
    state = create_deep_agent(one_reply(*calls), tools=[store_requirement]).invoke(USER)
    kept = json.loads(file_text(state["files"], PATH) or "{}")
    outcome = reproduced_unless(len(kept) == len(FIELDS))
    return Result(
        "file-read-modify-write", outcome, f"kept {len(kept)} of {len(FIELDS)} ({', '.join(kept)})"
    )


def builtin_edits_of_one_file() -> Result:
    """deepagents' own ``edit_file``, five times on one file in one reply, one line each.

    One after another, all five edits land; in one reply each call reads the
    file from before the step and writes it back whole.
    """
    blank = "\n".join(f"{k}: TODO" for k in FIELDS)
    edits = [
        tool_call("edit_file", file_path=PATH, old_string=f"{k}: TODO", new_string=f"{k}: {v}")
        for k, v in FIELDS.items()
    ]
    model = ScriptedChatModel(
        script=[
            reply(tool_call("write_file", file_path=PATH, content=blank)),
            reply(*edits),
            reply(text="done"),
        ]
    )
    state = create_deep_agent(model).invoke(USER)
    answers = [m for m in state["messages"] if m.type == "tool"][1:]
    errors = [m for m in answers if m.status == "error" or str(m.content).startswith("Error")]
    text = file_text(state.get("files", {}), PATH)
    landed = sum(f"{k}: {v}" in text for k, v in FIELDS.items())
    if errors:
        said = str(errors[0].content).splitlines()[0][:90]
        return Result(
            "builtin-parallel-edit",
            "refused",
            f"{len(answers) - len(errors)} of {len(answers)} edits applied, "
            f"{len(errors)} refused: {said}",
        )
    return Result(
        "builtin-parallel-edit",
        reproduced_unless(landed == len(FIELDS)),
        f"all {len(answers)} edits said success; {landed} of {len(FIELDS)} are in the file",
    )
